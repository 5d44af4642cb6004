"""The hardening issue's robustness items, replayed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuadvise.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
KERNEL = """\
__global__ void scale(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""
LAUNCH = ("--grid", "4", "--block", "256", "--arg", "n=1000", "--gpu", "H100", "--no-trace")
LONG_NAME = "k" * 300 + ".cu"  # one component over NAME_MAX (255)
LONG_PATH = "d/" * 2500 + "k.cu"  # 5,004 characters, over PATH_MAX (4096)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``gpuadvise ARGS`` in this process: (exit code, stdout, stderr). An exception other than
    SystemExit (a traceback for the user) fails the test."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scale.cu").write_text(KERNEL)
    os.symlink("loop_b.cu", tmp_path / "loop_a.cu")
    os.symlink("loop_a.cu", tmp_path / "loop_b.cu")
    return tmp_path


# --- folder analysis: exit codes ---------------------------------------------------------------


def test_empty_folder_is_an_error(capsys: pytest.CaptureFixture[str], work: Path) -> None:
    (work / "empty").mkdir()
    code, out, err = cli(capsys, "analyze", "empty", "--no-trace")
    assert code == 2 and "no kernel case found under empty" in one_error(err) and out == ""
    # a CI shard past the end of a list of cases is fine: the other shards cover them
    _case(work / "one")
    code, _, err = cli(capsys, "analyze", "one", "--shard", "2/2", "--no-trace")
    assert code == 0 and "no kernel case" in err and "error" not in err


def test_every_case_failing_says_so_on_stderr(
    capsys: pytest.CaptureFixture[str], work: Path
) -> None:
    (work / "t").mkdir()
    for name in ("a", "b"):
        (work / "t" / f"{name}.toml").write_text(f'source = "absent_{name}.cu"\nkernel = "k"\n')
    code, out, err = cli(capsys, "analyze", "t", "--no-trace", "--jobs", "1")
    line = one_error(err)
    assert code == 2 and "2 of 2 cases could not be analyzed" in line and "absent_a.cu" in line
    assert "t/a.toml" in out and "t/b.toml" in out  # the rows are still printed


def _case(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "scale.cu").write_text(KERNEL)
    (folder / "case.toml").write_text("grid = 4\nblock = 256\n[args]\nn = 1000\n")


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize("fail_on", [None, "error"])
def test_a_case_without_a_source_fails_the_run(
    capsys: pytest.CaptureFixture[str], work: Path, fail_on: str | None
) -> None:
    _case(work / "t" / "good")
    (work / "t" / "bad.toml").write_text('source = "absent.cu"\nkernel = "k"\n')
    extra = ("--fail-on", fail_on) if fail_on else ()
    code, out, err = cli(
        capsys, "analyze", "t", "--no-trace", "--jobs", "1", "--format", "json", *extra
    )
    line = one_error(err)
    assert code == 2 and "1 of 2 cases could not be analyzed" in line and "t/bad.toml" in line
    import json

    doc = json.loads(out)
    assert [c["error"] is None for c in doc["cases"]] == [False, True]
