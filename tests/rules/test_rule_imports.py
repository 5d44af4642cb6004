"""Rule files import only the rule API: ``gpuadvise.rules`` (names of its ``__all__``),
``gpuadvise.errors`` and the fix kit (``gpuadvise.source.fixkit``, ``fixkit_trees``), besides
the standard library and numpy; imports inside functions count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuadvise.rules as rule_api

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = sorted((ROOT / "rules").glob("*.py"))
# the fix kit's operations (issue 28) are imported directly, not through the barrel
ALLOWED_MODULES = (
    "gpuadvise.rules",
    "gpuadvise.errors",
    "gpuadvise.source.fixkit",
    "gpuadvise.source.fixkit_trees",
)


def forbidden_imports(source: str) -> list[str]:
    """Every import of ``source`` that reaches past the rule API, as ``line: statement``."""
    out: list[str] = []
    api = set(rule_api.__all__)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "gpuadvise" or (
                    alias.name.startswith("gpuadvise.") and alias.name not in ALLOWED_MODULES
                ):
                    out.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [a.name for a in node.names]
            if node.level:
                out.append(f"{node.lineno}: a relative import ({'.' * node.level}{module})")
            elif module == "gpuadvise":
                bad = [n for n in names if n not in ("rules", "errors")]
                if bad:
                    out.append(f"{node.lineno}: from gpuadvise import {', '.join(bad)}")
            elif module == "gpuadvise.rules":
                bad = [n for n in names if n not in api]  # a submodule or a private name
                if bad:
                    out.append(f"{node.lineno}: from gpuadvise.rules import {', '.join(bad)}")
            elif module.startswith("gpuadvise.") and module not in ALLOWED_MODULES:
                out.append(f"{node.lineno}: from {module} import {', '.join(names)}")
    return out


def test_there_are_rule_files() -> None:
    assert len(RULE_FILES) >= 15


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rule_file_imports_only_the_rule_api(path: Path) -> None:
    bad = forbidden_imports(path.read_text(encoding="utf-8"))
    assert not bad, f"{path.name} imports past gpuadvise.rules / gpuadvise.errors: {bad}"


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rule_file_is_at_most_400_lines(path: Path) -> None:
    """Issue 28: no rule file over 400 lines (what serves one rule family goes beside the rules
    that use it, in gpuadvise/rules/; the fix kit's operations in gpuadvise/source/)."""
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 400, f"{path.name} has {lines} lines"


def test_the_check_finds_imports_past_the_api() -> None:
    source = (
        "import numpy as np\n"
        "from gpuadvise.rules import Rule, Finding\n"
        "from gpuadvise.errors import GpuAdviseError\n"
        "def f():\n"
        "    from gpuadvise.trace.access import Kind\n"
        "    import gpuadvise.model.banks\n"
        "    from gpuadvise.rules import proxy\n"
        "    from gpuadvise import spec\n"
        "    from . import helper\n"
    )
    assert forbidden_imports(source) == [
        "5: from gpuadvise.trace.access import Kind",
        "6: import gpuadvise.model.banks",
        "7: from gpuadvise.rules import proxy",
        "8: from gpuadvise import spec",
        "9: a relative import (.)",
    ]


def test_everything_the_api_lists_is_there() -> None:
    missing = [n for n in rule_api.__all__ if not hasattr(rule_api, n)]
    assert not missing
