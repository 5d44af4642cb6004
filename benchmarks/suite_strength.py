"""How much the test suite checks: a count to compare before and after a change that should make
the suite faster without making it weaker (issue 30 section 3).

Counted over every ``tests/**/*.py`` (the helpers too), from the syntax tree, so that moving a
check to another line or another module does not change the numbers:

- ``assert``: ``assert`` statements;
- ``raises``: ``pytest.raises(...)`` (and ``pytest.warns(...)``) calls, as a context manager or not;
- ``np_assert``: ``np.testing.assert_*(...)``/``numpy.testing.assert_*(...)`` calls;
- ``examples``: the ``max_examples=N`` that hypothesis tests ask for (the full count: the one the
  ``ci`` profile runs), summed; ``given``: the number of ``@given`` tests;
- ``collected``: the test ids ``pytest --collect-only -q`` lists (``--no-collect`` skips this, the
  slow part: about 15 s of CPU).

    .venv/bin/python benchmarks/test_strength.py [--json F] [--compare F] [--no-collect]

``--json F`` writes the counts to F; ``--compare F`` prints each count beside the one in F and
exits 1 when any went down.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of an attribute chain (empty when it is not one)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def count_file(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    counts = {"assert": 0, "raises": 0, "np_assert": 0, "examples": 0, "given": 0}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            counts["assert"] += 1
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in ("pytest.raises", "pytest.warns", "raises", "warns"):
                counts["raises"] += 1
            elif re.fullmatch(r"(np|numpy)\.testing\.assert_\w+", name):
                counts["np_assert"] += 1
            elif name.endswith("given"):
                counts["given"] += 1
            for kw in node.keywords:
                if kw.arg == "max_examples":
                    counts["examples"] += _examples(kw.value)
    return counts


def _examples(value: ast.expr) -> int:
    """N of ``max_examples=N`` or of ``max_examples=examples(N)`` (0 when not a literal)."""
    if isinstance(value, ast.Call) and value.args:
        value = value.args[0]
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        return value.value
    return 0


def collected() -> int:
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    m = re.search(r"(\d+) tests? collected", r.stdout)
    if m is None:
        sys.exit(f"error: pytest --collect-only printed no count; its output:\n{r.stdout[-2000:]}")
    return int(m.group(1))


def counts(collect: bool = True) -> dict[str, int]:
    total: dict[str, int] = {}
    files = sorted(TESTS.rglob("*.py"))
    for path in files:
        for k, v in count_file(path).items():
            total[k] = total.get(k, 0) + v
    total["files"] = len(files)
    if collect:
        total["collected"] = collected()
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the counts here")
    ap.add_argument("--compare", type=Path, help="counts written earlier with --json")
    ap.add_argument("--no-collect", action="store_true", help="skip pytest --collect-only")
    a = ap.parse_args(argv)
    before = None
    if a.compare is not None:  # read first: a wrong path fails at once, not after the counting
        try:
            before = json.loads(a.compare.read_text())
        except (OSError, ValueError) as exc:
            print(
                f"error: cannot read --compare {a.compare}: {exc}; give a file written by "
                "--json (e.g. run with --json base.json in the base's checkout)",
                file=sys.stderr,
            )
            return 2
    now = counts(collect=not a.no_collect)
    if a.json:
        a.json.write_text(json.dumps(now, indent=1) + "\n")
    if before is None:
        for k, v in now.items():
            print(f"{k:10} {v}")
        return 0
    worse = False
    for k, v in now.items():
        old = before.get(k)
        flag = ""
        if isinstance(old, int) and v < old:
            flag, worse = "  FEWER", True
        print(f"{k:10} {old!s:>7} -> {v}{flag}")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
