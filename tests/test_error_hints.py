"""Every error a user can cause says how to fix it: ``error: <what is wrong>; <how to fix it>``.

Scans the package for :class:`~gpuadvise.errors.GpuAdviseError` (and subclass) constructions
without a hint. The PTX emulator's errors are left out: they never end a run, the analysis
reports them as a note ("the emulator could not trace this kernel: ...") beside its results.
A few of the replays that lacked the fix are run as well."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuadvise.errors import GpuAdviseError

PACKAGE = Path(__file__).resolve().parents[1] / "gpuadvise"
NOTES_ONLY = {"ptx"}  # folders whose errors become notes of an analysis, never `error:` lines
NOT_OURS = {"ValueError", "TypeError", "KeyError", "OSError", "RuntimeError", "AssertionError",
            "AttributeError", "NotImplementedError", "IndexError", "FileNotFoundError",
            "PermissionError", "UnicodeDecodeError", "ImportError", "ModuleNotFoundError",
            "LookupError", "RecursionError", "MemoryError", "OccupancyInputError",
            "EmulationError", "UnsupportedInstructionError",
            # a ValueError the report loaders raise and load_report turns into a ConfigError
            # with its fix ("render it with a newer gpuadvise"): never shown as it is
            "NewerReportError",
            # a ValueError of the cubin line-table reader that toolchain/sass.py always catches:
            # it then runs nvdisasm -gi as before, so it is never shown
            "LineTableError"}  # fmt: skip


def _hintless() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if NOTES_ONLY & set(path.relative_to(PACKAGE).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if not name.endswith("Error") or name in NOT_OURS:
                continue
            hint = node.args[1] if len(node.args) > 1 else None
            hint = next((k.value for k in node.keywords if k.arg == "hint"), hint)
            if hint is None or (isinstance(hint, ast.Constant) and hint.value is None):
                out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {name}")
    return out


def test_every_error_has_a_fix() -> None:
    assert _hintless() == []


@pytest.mark.parametrize(
    "case,needle",
    [
        ('source = "k.cu"\nnvcc_flags = "-O3"', "nvcc_flags must be a list of strings"),
        ('source = ""', "must be a non-empty string"),
        ('source = "k.cu"\nthresholds = { registers = -1 }', "must be finite and >= 0"),
    ],
)
def test_gate_configuration_errors_say_the_fix(tmp_path: Path, case: str, needle: str) -> None:
    from gpuadvise.gate.config import load_gate_config

    (tmp_path / "gpuadvise.toml").write_text(f"[[gate.cases]]\n{case}\n")
    with pytest.raises(GpuAdviseError) as e:
        load_gate_config(tmp_path / "gpuadvise.toml")
    what, sep, fix = e.value.one_line().partition("; ")
    assert needle in what and sep and fix, e.value.one_line()


def test_a_baseline_that_is_a_folder_says_the_fix(tmp_path: Path) -> None:
    from gpuadvise.gate.baseline import load_baseline

    with pytest.raises(GpuAdviseError) as e:
        load_baseline(tmp_path)
    what, sep, fix = e.value.one_line().partition("; ")
    assert "is a folder" in what and sep and fix, e.value.one_line()
