"""`gpuadvise analyze` speed and memory (issue 17 and the compile-and-inspect targets).

Cases (each run in a fresh interpreter, wall time and peak RSS from ``/usr/bin/time -v``-style
``resource.getrusage`` of the child; repeated ``-n`` times, the minimum kept: the CPU machine is
shared, so the minimum is the least disturbed run):

- ``transpose``: the 8192^2 shared-tile transpose (65,536 CTAs of 32x8, two 256 MB float buffers),
  ``--no-measure``, compile cache warm; each run a new ``--seed``, so that the analysis-result
  cache misses (``--no-cache`` would recompile too). Target: <= 2 s, <= 600 MB.
- ``reduce2``: kernels/reduction reduce2 with ``--arg n=67108864``, ``--no-measure``.
- ``cached``: the transpose again, unchanged: the analysis-result cache answers. Target: <= 1 s.
- ``overhead``: reduce3 at its case's size, ``--no-cache``: the overhead beyond nvcc and nvdisasm
  (target 0.3 s).

Usage: python benchmarks/analyze_speed.py [-n 3] [--case transpose --case cached ...]
       [--root DIR]  (the gpuadvise tree to run, e.g. a checkout of an older commit for "before")
Python writes bytecode here (PYTHONDONTWRITEBYTECODE is unset for the children) so that module
compilation is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRANSPOSE = r"""
#define TILE 32
#define ROWS 8
__global__ void transpose(float *out, const float *in, int n)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""


def transpose_args(folder: Path) -> list[str]:
    src = folder / "transpose.cu"
    if not src.exists():
        src.write_text(TRANSPOSE)
    return [
        str(src), "--grid", "256x256", "--block", "32x8", "--arg", "n=8192",
        "--buffer", "out=float[n*n]", "--buffer", "in=float[n*n]", "--gpu", "H100",
    ]  # fmt: skip


def reduce2_args(root: Path) -> list[str]:
    return [
        str(root / "kernels/reduction/reduce.cu"), "-k", "reduce2", "--arg", "n=67108864",
        "--gpu", "H100",
    ]  # fmt: skip


def run(args: list[str], env: dict[str, str], root: Path) -> tuple[float, float, dict, float]:
    """(wall s, peak RSS MB, JSON, CPU s) of one `analyze --json` in a fresh interpreter; the CPU
    time (user + system of the child and the tools it ran) is what a shared machine's load
    disturbs least."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "gpuadvise", "analyze", *args, "--json"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(root)},
        cwd=root,
    )
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"analyze failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    # the largest child so far (KiB): each case runs in a process of its own (measure_case)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    return wall, r1.ru_maxrss / 1024, json.loads(p.stdout), cpu


def measure_case(case: str, n: int, env: dict[str, str], root: Path, work: Path) -> dict:
    """Runs this case ``n`` times in a child process of its own (for a peak RSS of its own)."""
    cmd = [sys.executable, __file__, "--child", case, "-n", str(n), "--root", str(root)]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**env, "BENCH_WORK": str(work)})
    if p.returncode:
        raise SystemExit(p.stderr[-2000:])
    return json.loads(p.stdout)


def child(case: str, n: int, root: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    work = Path(env["BENCH_WORK"])
    env.setdefault("PYTHONPYCACHEPREFIX", str(work / "pyc"))
    walls: list[float] = []
    cpus: list[float] = []
    doc: dict = {}
    if case == "overhead":
        args = [str(root / "kernels/reduction/reduce.cu"), "-k", "reduce3", "--gpu", "H100"]
        run([*args, "--no-cache"], env, root)  # bytecode written
        for _ in range(n):
            wall, _, doc, _ = run([*args, "--no-cache"], env, root)
            t = doc["timings_s"]
            walls.append(wall - t["compile_s"] - t["sass_s"])
        return {"case": case, "wall_s": min(walls), "peak_mb": None, "walls_s": walls}
    args = transpose_args(work) if case in ("transpose", "cached") else reduce2_args(root)
    args += ["--no-measure"]
    run([*args, "--seed", "0"], env, root)  # warm the compile cache and the bytecode
    peak = 0.0
    for i in range(n):
        seed = "0" if case == "cached" else str(1000 + i)  # a new seed: a result-cache miss
        wall, peak, doc, cpu = run([*args, "--seed", seed], env, root)
        walls.append(wall)
        cpus.append(cpu)
    return {
        "case": case,
        "wall_s": min(walls),
        "walls_s": walls,
        "cpu_s": min(cpus),
        "peak_mb": peak,
        "timings_s": doc.get("timings_s"),
        "findings": sorted(f.get("rule", f.get("id", "?")) for f in doc.get("findings", [])),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument(
        "--case", action="append", choices=["transpose", "reduce2", "cached", "overhead"]
    )
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.n, a.root.resolve())))
        return 0
    cases = a.case or ["transpose", "reduce2", "cached", "overhead"]
    print("load average before: " + ", ".join(f"{v:.1f}" for v in os.getloadavg()))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "GPUADVISE_CACHE_DIR": str(work / "cache")}
        ok = True
        for case in cases:
            r = measure_case(case, a.n, env, a.root.resolve(), work)
            peak = "" if r["peak_mb"] is None else f", peak RSS {r['peak_mb']:.0f} MB"
            runs = ", ".join(f"{w:.2f}" for w in r["walls_s"])
            cpu = f", CPU {r['cpu_s']:.2f} s" if r.get("cpu_s") is not None else ""
            print(f"{case}: min {r['wall_s']:.2f} s{cpu}{peak} (runs: {runs})")
            if r.get("timings_s"):
                t = {k: round(v, 2) for k, v in r["timings_s"].items() if isinstance(v, float)}
                print(f"  timings_s {t}")
            target = {"transpose": (2.0, 600), "cached": (1.0, None), "overhead": (0.3, None)}
            if case in target:
                wall_max, mb_max = target[case]
                ok &= r["wall_s"] <= wall_max and (mb_max is None or r["peak_mb"] <= mb_max)
    print("load average after: " + ", ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
