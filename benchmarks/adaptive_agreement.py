"""Do the adaptive A/B measurements (issue 17: races that stop once the interval decides) agree
with the fixed-sample ones they replace?

Compares the measured speedups of a new `benchmarks/accuracy.py --json NEW` run with those of the
recorded runs (default: docs/data/accuracy_h200_2026-11-25_part*.json, timed to a 0.5% median
or 5 s per variant), finding by finding (kernel, rule, line) and trial by trial (label). Two
measurements agree when their ratio is within ``--tol`` (default 3%) or their 95% intervals
overlap; a finding whose best variant changed is listed. Prints one line per finding with the
new samples and stop reason, then the counts; exit status 1 when any disagree.

Usage (GPU machine):
    python3 benchmarks/accuracy.py --no-ncu --json /tmp/adaptive.json
    python3 benchmarks/adaptive_agreement.py /tmp/adaptive.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OLD = sorted((ROOT / "docs" / "data").glob("accuracy_h200_2026-11-25_part*.json"))


def trials(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int, str], dict[str, Any]]:
    """Every measured trial by (kernel, rule, line, label)."""
    out: dict[tuple[str, str, int, str], dict[str, Any]] = {}
    for r in rows:
        for t in r.get("trials") or []:
            m = t.get("measured_speedup")
            if m and m.get("speedup"):
                out[(r["kernel"], r["rule"], int(r["line"] or 0), str(t.get("label")))] = m
    return out


def best(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], str | None]:
    return {
        (r["kernel"], r["rule"], int(r["line"] or 0)): r.get("label")
        for r in rows
        if r.get("measured")
    }


def agree(old: dict[str, Any], new: dict[str, Any], tol: float) -> bool:
    ratio = new["speedup"] / old["speedup"]
    if abs(ratio - 1.0) <= tol:
        return True
    lo = max(old.get("ci_low") or old["speedup"], new.get("ci_low") or new["speedup"])
    hi = min(old.get("ci_high") or old["speedup"], new.get("ci_high") or new["speedup"])
    return lo <= hi


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("new", type=Path, help="benchmarks/accuracy.py --json output of the new run")
    ap.add_argument("--old", type=Path, nargs="*", default=OLD, help="the recorded runs")
    ap.add_argument("--tol", type=float, default=0.03, help="relative tolerance (0.03: 3%%)")
    a = ap.parse_args()
    old_rows = [r for p in a.old for r in json.loads(p.read_text())["rows"]]
    new_rows = json.loads(a.new.read_text())["rows"]
    old_t, new_t = trials(old_rows), trials(new_rows)
    old_b, new_b = best(old_rows), best(new_rows)
    n_same = n_diff = n_missing = 0
    samples_old = samples_new = 0
    for key in sorted(old_t):
        o = old_t[key]
        n = new_t.get(key)
        name = " ".join(str(k) for k in key)
        if n is None:
            n_missing += 1
            print(f"{name}: not measured in the new run")
            continue
        ok = agree(o, n, a.tol)
        n_same += ok
        n_diff += not ok
        samples_old += int(o.get("samples") or 0)
        samples_new += int(n.get("samples") or 0)
        print(
            f"{name}: old {o['speedup']:.3f}x ({o.get('samples')} samples), new "
            f"{n['speedup']:.3f}x [{n.get('ci_low', 0):.3f}, {n.get('ci_high', 0):.3f}] "
            f"({n.get('samples')} samples, {n.get('stop_reason')})" + ("" if ok else "  DISAGREES")
        )
    changed = [k for k in old_b if k in new_b and old_b[k] != new_b[k]]
    for k in changed:
        print(f"{' '.join(map(str, k))}: best variant {old_b[k]} -> {new_b[k]}")
    print(
        f"{n_same} agree, {n_diff} disagree, {n_missing} not measured now, {len(changed)} "
        f"findings with another best variant; samples {samples_old} -> {samples_new}"
    )
    return 1 if n_diff else 0


if __name__ == "__main__":
    sys.exit(main())
