"""Re-join today's estimates with stored GPU measurements, on the CPU (issue 16).

The measurements of ``benchmarks/accuracy.py`` (its ``--json`` output, e.g.
docs/data/accuracy_h200_2026-11-25_part*.json) do not change when the model does; the estimates
do. This script re-computes every estimate with ``gpuadvise analyze --no-measure --json --gpu
H200`` (the device the measurements were taken on) for each kernel that has a measured finding,
joins the findings with the stored rows (same suite, kernel, rule and line; repeated keys in
order), and prints, for the stored measurement against the new estimate, whether each bound held
and each point's error, with the summary of ``accuracy.py`` (held count, median and mean point
error, median bound/measured). The measurements are re-joined, not re-run: say so wherever the
numbers are quoted.

    python benchmarks/accuracy_offline.py [--data 'docs/data/accuracy_h200_*_part*.json']
        [--gpu H200] [--only KERNEL] [--jobs 2] [--md OUT] [--json OUT]
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import (  # noqa: E402
    ROOT,
    Case,
    corpus_cases,
    finding_row,
    kernel_cases,
    public_cases,
    run_case,
    summary_lines,
)

DEFAULT_DATA = "docs/data/accuracy_h200_2026-11-25_part*.json"


def load_measured(pattern: str) -> list[dict[str, Any]]:
    """The stored rows with a measurement, from every file matching ``pattern``."""
    files = sorted(glob.glob(str(ROOT / pattern)) or glob.glob(pattern))
    if not files:
        raise FileNotFoundError(pattern)
    rows = []
    for f in files:
        for r in json.loads(Path(f).read_text())["rows"]:
            if r.get("measured"):
                rows.append({**r, "suite": r.get("suite", "kernels")})
    return rows


def join(stored: list[dict[str, Any]], fresh: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each stored measurement with the fresh estimate of the same (suite, kernel, rule, line),
    the n-th stored with the n-th fresh when a key repeats; a stored row without a fresh
    finding keeps no estimate (``estimate`` None, ``missing`` True)."""
    pool: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in fresh:
        pool[(r["suite"], r["kernel"], r["rule"], r["line"])].append(r)
    out = []
    for s in stored:
        got = pool.get((s["suite"], s["kernel"], s["rule"], s["line"]))
        keep = {k: s.get(k) for k in ("measured", "measured_kind", "label", "ci", "verified")}
        if got:
            out.append({**got.pop(0), **keep})
        else:
            out.append({**s, **keep, "estimate": None, "point": None, "proxy_point": None,
                        "proxy_bound": None, "missing": True})  # fmt: skip
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA, help=f"stored measurements ({DEFAULT_DATA})")
    ap.add_argument("--gpu", default="H200", help="device model of the estimates (H200)")
    ap.add_argument("--only", help="only kernels whose name contains this")
    ap.add_argument("--jobs", type=int, default=1, help="analyze runs at a time (1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per kernel (600)")
    ap.add_argument("--md", type=Path, help="write the table here")
    ap.add_argument("--json", type=Path, help="write the joined rows here")
    a = ap.parse_args()
    try:
        stored = load_measured(a.data)
    except FileNotFoundError:
        print(f"error: no measurements match {a.data}; give --data with accuracy.py's --json "
              "output", file=sys.stderr)  # fmt: skip
        return 2
    wanted = {(r["suite"], r["kernel"]) for r in stored}
    cases = kernel_cases()
    if any(s == "public" for s, _ in wanted):
        cases += public_cases()[0]
    if any(s == "corpus" for s, _ in wanted):
        cases += corpus_cases()[0]
    todo = [c for c in cases if (c.suite, c.name) in wanted and (not a.only or a.only in c.name)]
    stored = [
        r for r in stored if any((c.suite, c.name) == (r["suite"], r["kernel"]) for c in todo)
    ]

    def one(case: Case) -> tuple[Case, dict[str, Any], float]:
        t0 = time.perf_counter()
        doc = run_case(case, measure=False, gpu=a.gpu, timeout_s=a.timeout)
        return case, doc, time.perf_counter() - t0

    fresh = []
    with ThreadPoolExecutor(max(a.jobs, 1)) as ex:
        for case, doc, wall in ex.map(one, todo):
            if "error" in doc:
                print(f"{case.name}: {doc['error']}", flush=True)
                continue
            print(f"{case.name}: {len(doc['findings'])} findings [{wall:.1f} s]", flush=True)
            fresh += [finding_row(case, f, wall) for f in doc["findings"]]
    rows = join(stored, fresh)
    for r in rows:
        if r.get("missing"):
            print(f"{r['kernel']} {r['rule']} line {r['line']}: no such finding now")
    lines = summary_lines(rows)
    print("\n".join(lines))
    if a.md:
        a.md.write_text(
            f"Stored measurements {a.data} re-joined with estimates for {a.gpu} (no GPU run)\n"
            + "\n".join(lines)
            + "\n"
        )
    if a.json:
        a.json.write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
