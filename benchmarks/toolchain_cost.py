"""The toolchain's cost per analysed kernel (issues 30 and 31): one cold ``analyze --no-measure``
(a fresh compile cache: nvcc, nvdisasm for the SASS and for the live registers all run) of a
few corpus kernels and one kernels/ case, with this checkout's code and another's, alternating,
so both see the same machine load.

Prints, per kernel and checkout, the medians of: CPU seconds of the analysis process and its
children (user + system, what a shared machine pays), wall seconds, and the analysis's own
``compile_s``, ``sass_s`` and ``registers_s``.

    python benchmarks/toolchain_cost.py --before /path/to/old/checkout [-n 3] [--corpus NAME ...]

The other checkout needs ``benchmarks/corpus/src`` (a link to this one's will do).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import speed_golden  # noqa: E402

CORPUS = (  # small kernels, where the toolchain is most of the time (2026-11-30 corpus run)
    "hecbench/burger/bound_v",
    "rodinia/nn/euclid",
    "cuda-samples/vectorAdd/vectorAdd",
    "hecbench/adam/adam",
    "coffeebeforearch/convolution_1d_tiled/convolution_1d",
)
GOLDEN = [
    "kernels/reduction/reduce.cu", "--no-measure", "--format", "json", "-q", "--gpu", "H100",
    "--tracer", "emu",
]  # fmt: skip
PHASES = ("compile_s", "sass_s", "registers_s")


def one(cmd: list[str], code: Path) -> list[float]:
    """CPU and wall seconds of one cold run of ``cmd`` with the code of ``code``, and its phases."""
    with tempfile.TemporaryDirectory(prefix="gpuadvise-toolcost-") as cache:
        env = dict(os.environ, GPUADVISE_CACHE_DIR=cache, PYTHONPATH=str(code))
        t0, w0 = os.times(), time.perf_counter()
        # run in the checkout: ``python -m`` puts the working folder first on sys.path
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=code, timeout=1800)
        t1, wall = os.times(), time.perf_counter() - w0
    cpu = t1.children_user - t0.children_user + t1.children_system - t0.children_system
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with {code}: {p.stderr.strip()[-400:]}")
    timings = json.loads(p.stdout).get("timings_s", {})
    return [cpu, wall, *(float(timings.get(k, 0.0)) for k in PHASES)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, type=Path, help="the other checkout's root")
    ap.add_argument("-n", type=int, default=2, help="runs of each (default 2)")
    ap.add_argument("--corpus", action="append", help="corpus kernels (default: CORPUS)")
    args = ap.parse_args()
    cmds = {k: speed_golden.corpus_command(k) for k in (args.corpus or CORPUS)}
    cmds["kernels/reduction (golden case)"] = [
        sys.executable,
        "-m",
        "gpuadvise",
        "analyze",
        *GOLDEN,
    ]
    codes = {"before": args.before.resolve(), "after": ROOT}
    runs: dict[tuple[str, str], list[list[float]]] = {}
    for _ in range(args.n):
        for name, cmd in cmds.items():
            for label, code in codes.items():
                runs.setdefault((name, label), []).append(one(cmd, code))
                print(f"  {label} {name}: {runs[name, label][-1][0]:.2f} s CPU", file=sys.stderr)
    print("| kernel | code | CPU s (process + children) | wall s | " + " | ".join(PHASES) + " |")
    print("|---|---|---|---|" + "---|" * len(PHASES))
    for (name, label), rows in runs.items():
        med = [statistics.median(r[i] for r in rows) for i in range(len(rows[0]))]
        print(f"| {name} | {label} | " + " | ".join(f"{m:.2f}" for m in med) + " |")
    print(f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the end, {args.n} runs each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
