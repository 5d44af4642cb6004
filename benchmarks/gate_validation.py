"""Timed-gate acceptance on a GPU (issue: pre-merge performance gating).

- 20 A/A runs (the same copy kernel as baseline and candidate, timed A/B interleaved): no regression.
- A planted 10% slowdown (the candidate copies 10% more elements; same buffers): caught 20/20.
- A 2% change: "same" or "ambiguous" at the default 5% threshold, 20 runs.
Each run goes through the real provider (gpuadvise.gate.metrics) and gpuadvise.gate.compare.compare_timed.
Usage: python benchmarks/gate_validation.py [--runs 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from gpuadvise.gate.compare import compare_timed
from gpuadvise.gate.config import GateCase, GateConfig
from gpuadvise.gate.metrics import LiveProvider

ROOT = Path(__file__).resolve().parents[1]
COPY = ROOT / "tests/cuda/runner/copy.cu"
N = 1 << 24


def case(n: int) -> GateCase:
    m = int(N * 1.1) + 1
    return GateCase(
        name="copy",
        source=COPY,
        kernel="copy",
        grid="ceil_div(n, 256)",
        block="256",
        args=(f"n={n}",),
        buffers=(f"in=float[{m}]", f"out=float[{m}]:zeros"),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    cfg = GateConfig(path=ROOT / "gpuadvise.toml", root=ROOT, cases=(), baseline=ROOT / "x.json")
    provider = LiveProvider(cfg)
    out: dict[str, dict] = {}
    for label, n in (("A/A", N), ("planted +10%", int(N * 1.10)), ("+2%", int(N * 1.02))):
        verdicts: collections.Counter[str] = collections.Counter()
        changes = []
        for _ in range(a.runs):
            t = provider.timings(case(n), case(N), min_samples=10)
            assert t.baseline_ms is not None
            c = compare_timed("copy", t.baseline_ms, t.candidate_ms)
            verdicts[str(c.verdict)] += 1
            changes.append(c.change_rel if c.change_rel is not None else float("nan"))
        out[label] = {"verdicts": dict(verdicts), "changes": changes}
        lo, hi = min(changes) * 100, max(changes) * 100
        print(f"{label:13s} {a.runs} runs: {dict(verdicts)}; change {lo:+.2f}%..{hi:+.2f}%")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
