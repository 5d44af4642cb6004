"""The layer contracts of docs/architecture.md, checked on the package as it is.

- ``lint-imports`` (import-linter, configured in pyproject.toml) keeps every contract: the stages
  are layered, and domain code never imports the report package;
- no import cycle between modules outside ``gpuadvise/ptx`` (the emulator and its op table are one
  unit there), counting imports inside functions too;
- ``mypy gpuadvise rules`` (configured in pyproject.toml) finds no error.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _graph():  # type: ignore[no-untyped-def]
    grimp = pytest.importorskip("grimp")
    return grimp.build_graph("gpuadvise", cache_dir=None)


def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    p = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "0 broken" in p.stdout or "broken" not in p.stdout.split("Contracts:")[-1]


def test_mypy_finds_no_error() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    p = subprocess.run(
        [sys.executable, "-m", "mypy", "gpuadvise", "rules"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    errors = [ln for ln in p.stdout.splitlines() if ": error:" in ln]
    if p.returncode != 0 or errors:
        pytest.fail(
            f"mypy gpuadvise rules: exit {p.returncode}, {len(errors)} errors:\n"
            + "\n".join(errors or [p.stdout[-4000:] + p.stderr[-2000:]]),
            pytrace=False,
        )


def _cycles(graph) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles_outside_ptx() -> None:
    bad = [c for c in _cycles(_graph()) if not all(m.startswith("gpuadvise.ptx.") for m in c)]
    assert not bad, f"import cycles: {bad}"


def test_cycle_finder_finds_a_cycle() -> None:
    class G:
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m: str) -> set[str]:
            return self.edges[m]

    assert _cycles(G()) == [["a", "b", "c"]]
