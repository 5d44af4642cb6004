"""Runner acceptance numbers on a GPU (issue: launch specs and the PyCUDA runner).

1. A copy kernel's time from `gpuadvise bench --hot` against CuPy events on the same cubin.
2. A/A: the same kernel benched 20 times: spread of the medians; A/B of a kernel against itself.
Writes JSON (--json OUT) and prints a table. Needs PyCUDA, CuPy and a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPY = str(ROOT / "tests/cuda/runner/copy.cu")
N = 1 << 26
ARGS = ["--grid", "ceil_div(n,256)", "--block", "256", "--arg", f"n={N}"]


def bench(*args: str) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "gpuadvise", "bench", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    if r.returncode not in (0, 1):
        raise SystemExit(r.stderr)
    return json.loads(r.stdout)


def cupy_batched_ms(cubin: str, n: int, batch: int = 100, reps: int = 20) -> float:
    """Plain CUDA events around `batch` back-to-back launches: no launch gap inside."""
    import cupy as cp

    k = cp.RawModule(path=cubin).get_function("copy")
    a = cp.random.random(n, dtype=cp.float32)
    b = cp.empty_like(a)
    grid, block = ((n + 255) // 256,), (256,)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    per = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            k(grid, block, (a, b, cp.int32(n)))
        end.record()
        end.synchronize()
        per.append(cp.cuda.get_elapsed_time(start, end) / batch)
    return statistics.median(per)


def cupy_median_ms(cubin: str, n: int, reps: int = 200) -> float:
    import cupy as cp

    mod = cp.RawModule(path=cubin)
    k = mod.get_function("copy")
    a = cp.random.random(n, dtype=cp.float32)
    b = cp.empty_like(a)
    grid, block = ((n + 255) // 256,), (256,)
    for _ in range(10):
        k(grid, block, (a, b, cp.int32(n)))
    times = []
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps):
        start.record()
        k(grid, block, (a, b, cp.int32(n)))
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--aa-runs", type=int, default=20)
    a = ap.parse_args()
    out: dict = {}

    hot = bench(f"{COPY}:copy", *ARGS, "--hot")
    g_ms = hot["kernels"][0]["timing"]["median_ms"]
    from gpuadvise.toolchain import CompileOptions, compile_source

    cc = hot["device"]["cc"].replace(".", "")
    cubin = str(compile_source(Path(COPY), CompileOptions(arch=f"sm_{cc}")).cubin_path)
    c_ms = cupy_median_ms(cubin, N)
    cb_ms = cupy_batched_ms(cubin, N)
    out["copy"] = {
        "gpuadvise_hot_ms": g_ms,
        "cupy_events_ms": c_ms,
        "cupy_batched_ms": cb_ms,
        "diff_pct": (g_ms - c_ms) / c_ms * 100,
        "diff_batched_pct": (g_ms - cb_ms) / cb_ms * 100,
        "device": hot["device"],
        "gbps": hot["kernels"][0]["achieved_gbps"],
        "ceiling_gbps": hot["ceiling_gbps"],
    }
    print(
        f"copy 2^26 floats, hot: gpuadvise {g_ms:.4f} ms; CuPy events around each launch "
        f"{c_ms:.4f} ms ({out['copy']['diff_pct']:+.2f}%); CuPy events around 100 back-to-back "
        f"launches {cb_ms:.4f} ms/launch ({out['copy']['diff_batched_pct']:+.2f}%)"
    )

    medians = []
    for _ in range(a.aa_runs):
        d = bench(f"{COPY}:copy", *ARGS, "--max-time", "3")
        medians.append(d["kernels"][0]["timing"]["median_ms"])
    spread = (max(medians) - min(medians)) / statistics.median(medians) * 100
    out["aa"] = {"medians_ms": medians, "spread_pct": spread}
    print(
        f"A/A cold, {a.aa_runs} runs: medians {min(medians):.4f}..{max(medians):.4f} ms, "
        f"spread {spread:.2f}% of the median"
    )

    ab = bench(f"{COPY}:copy", f"{COPY}:copy", *ARGS, "--max-time", "3")
    out["ab_self"] = ab["speedup"]
    s = ab["speedup"]
    print(
        f"A/B copy vs itself: {s['speedup']:.4f} (95% CI {s['low']:.4f}..{s['high']:.4f}), "
        f"contains 1: {s['low'] <= 1 <= s['high']}"
    )
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
