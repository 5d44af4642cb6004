"""Seed 003's reduction table on the GPU: the seven reductions and a warp-shuffle version.

Seed 003 (Eric Young, "DirectCompute Optimizations and Best Practices", GTC 2010) times seven
parallel reductions of 2^22 ints on a G80, with thread groups of 128 threads, and reports time,
bandwidth (2^22 x 4 bytes / time), step speedup and cumulative speedup. Its kernels are ported to
CUDA in ``kernels/reduction/reduce.cu`` (``reduce1`` .. ``reduce7``, plus ``reduce_shfl``: int4
loads, warp shuffles, one atomic per block).

What is timed, and how it differs from the seed
-----------------------------------------------
- The seed reduces the whole array, with "recursive dispatches" of the same shader until one
  value is left (its slides: "Solution: decompose into multiple shader dispatches"). So does this
  script: pass 1 reads the 2^22 ints and writes one partial sum per block; each further pass
  reduces the previous one's partials with the same kernel, until one is left. ``reduce7`` runs
  its first pass on a grid just large enough to fill the GPU (SMs x resident blocks per SM from
  gpuadvise's occupancy model) and its second on one block; ``reduce_shfl`` is one pass (an
  atomic per block).
- Each pass is timed on its own with gpuadvise's runner (``gpuadvise.analyze.prepare.prepare`` /
  ``time_prepared``'s machinery: an isolated worker, a spin kernel before each sample so no host
  gap is timed, adaptive sample counts, the A/B interleaving in random order). The first passes of
  all eight kernels are timed together with a cold L2 (flushed before every sample: 16 MB would
  otherwise stay in the 50 MB L2 of an H100 between samples); the later passes with a warm L2,
  as they run right after the pass that wrote their input. "whole" is the sum of a kernel's
  passes: back to back in one stream the launches overlap a little, so it slightly overstates
  the time of a real multi-pass reduction. The G80 was slow enough that the later passes did not
  matter; on a modern GPU they are a few microseconds each against a first pass of about ten.
- Every launch is verified: its output is compared with the sums computed on the host from its
  own input (each launch runs once on fresh data before timing). ``reduce5`` is seed 003's
  warp-synchronous code (a race since Volta, GA203): if its sums come out wrong, the table says
  so and its time is still shown.
- Block size: the seed used 128 threads for every test; ``--block 256`` runs the block size of
  the kernel cases in ``kernels/reduction`` (both by default).

Usage, from the repository root on a GPU machine (PyCUDA, nvcc)::

    python benchmarks/seed003_reductions.py --json $OUT/seed003_reductions.json

prints one table per block size and writes the numbers as JSON. About a minute on an H100.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "kernels" / "reduction" / "reduce.cu"
N = 1 << 22

# Seed 003's table (G80, 2^22 ints, 128-thread groups): time ms, GB/s, step, cumulative speedup
SEED_G80: dict[str, tuple[float, float, float | None, float | None]] = {
    "reduce1": (8.054, 2.083, None, None),
    "reduce2": (3.456, 4.854, 2.33, 2.33),
    "reduce3": (1.722, 9.741, 2.01, 4.68),
    "reduce4": (0.965, 17.377, 1.78, 8.34),
    "reduce5": (0.536, 31.289, 1.8, 15.01),
    "reduce6": (0.381, 43.996, 1.41, 21.16),
    "reduce7": (0.268, 62.671, 1.42, 30.04),
}
TITLES = {
    "reduce1": "#1 interleaved addressing, divergent branching",
    "reduce2": "#2 interleaved addressing, bank conflicts",
    "reduce3": "#3 sequential addressing",
    "reduce4": "#4 first add during global load",
    "reduce5": "#5 unroll last warp (warp-synchronous)",
    "reduce6": "#6 completely unrolled",
    "reduce7": "#7 multiple elements per thread",
    "reduce_shfl": "int4 loads + warp shuffles + atomic",
}
ORDER = tuple(TITLES)


@dataclass(frozen=True)
class Pass:
    """One launch of a kernel: ``n`` elements in, ``grid`` partial sums out."""

    kernel: str
    index: int  # 1 for the pass over the whole array
    n: int
    grid: int
    block: int

    @property
    def label(self) -> str:
        return f"{self.kernel}/p{self.index}"

    @property
    def src(self) -> str:
        return "in" if self.index == 1 else f"{self.kernel}_in{self.index}"

    @property
    def dst(self) -> str:
        return f"{self.kernel}_out{self.index}"


def per_block(kernel: str, block: int) -> int:
    """Elements one block of ``kernel`` reduces (outside the grid-stride kernels)."""
    return block if kernel in ("reduce1", "reduce2", "reduce3") else 2 * block


def plan(kernel: str, n: int, block: int, device_grid: int) -> list[Pass]:
    """The passes that reduce ``n`` ints to one with ``kernel`` (the seed's recursive dispatch)."""
    if kernel == "reduce_shfl":
        return [Pass(kernel, 1, n, min(device_grid, math.ceil(n // 4 / block)), block)]
    if kernel == "reduce7":
        first = Pass(kernel, 1, n, min(device_grid, math.ceil(n / (2 * block))), block)
        return [first, Pass(kernel, 2, first.grid, 1, block)] if first.grid > 1 else [first]
    out, k, m = [], 1, n
    while True:
        grid = math.ceil(m / per_block(kernel, block))
        out.append(Pass(kernel, k, m, grid, block))
        if grid == 1:
            return out
        m, k = grid, k + 1


def expected(p: Pass, data: np.ndarray) -> np.ndarray:
    """The partial sums pass ``p`` writes for input ``data`` (int32 arithmetic, wrapping)."""
    x = data.astype(np.int64)
    if p.kernel == "reduce_shfl":
        return np.array([x[: (p.n // 4) * 4].sum()], np.int64)
    if p.kernel == "reduce7":
        span = 2 * p.block  # one block's elements per grid step
        pad = -len(x) % (span * p.grid)
        tiles = np.concatenate([x, np.zeros(pad, np.int64)]).reshape(-1, p.grid, span)
        out = tiles.sum(axis=(0, 2))
    else:
        e = per_block(p.kernel, p.block)
        pad = -len(x) % e
        out = np.concatenate([x, np.zeros(pad, np.int64)]).reshape(-1, e).sum(axis=1)
    return (out + 2**31) % 2**32 - 2**31


@dataclass
class Compiled:
    kernel: str
    name: str  # as compiled (reduce6<128>)
    prepared: Any  # gpuadvise.analyze.prepare.Prepared
    blocks_per_sm: int

    @property
    def device(self) -> Any:
        return self.prepared.device


def kernel_options(kernel: str, block: int, n: int, grid: int = 1) -> Any:
    """gpuadvise's options for one launch of ``kernel`` over ``n`` ints (the live GPU when there
    is one, else the H100 model)."""
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import live_options

    name = f"{kernel}<{block}>" if kernel in ("reduce6", "reduce7") else kernel
    if kernel == "reduce_shfl":
        args: tuple[str, ...] = (f"n={n}", f"n4={n // 4}")  # n: the case.toml beside it has it
        bufs: tuple[str, ...] = ("in=int4[n/4]", "out=int[1]:zeros")
    else:
        args = (f"n={n}",)
        bufs = ("in=int[n]", f"out=int[{max(grid, math.ceil(n / block))}]:zeros")
    opts = KernelOptions(
        source=str(SOURCE), kernel=name, grid=str(grid), block=str(block), args=args, buffers=bufs
    )
    return live_options(opts)


def compile_kernel(kernel: str, block: int, n: int) -> Compiled:
    """Compile one kernel through gpuadvise (``bench_cmd.prepare``), with its occupancy."""
    from gpuadvise.analyze.options import build
    from gpuadvise.analyze.prepare import prepare
    from gpuadvise.model import occupancy as occ
    from gpuadvise.toolchain import compile_source, select_compiled_kernel

    opts = kernel_options(kernel, block, n)
    p = prepare(opts, kernel)
    _spec, _choice, options = build(opts)
    info = select_compiled_kernel(
        compile_source(SOURCE, options, kernels=[opts.kernel]), opts.kernel
    )
    k = occ.KernelResources(
        threads_per_block=block,
        regs_per_thread=info.resources.registers,
        static_smem_bytes=info.resources.static_smem_bytes,
        barriers=max(info.resources.barriers, 1) if p.device.cc_major >= 9 else 1,
    )
    blocks = occ.max_active_blocks(p.device, k).active_blocks_per_sm
    return Compiled(kernel, opts.kernel, p, blocks)


def check_on_cpu(block: int, n: int) -> int:
    """Every pass of every kernel's plan for ``n`` ints, run on gpuadvise's CPU emulator (all
    CTAs) and compared with :func:`expected`: checks the plan and the sums without a GPU."""
    from gpuadvise.analyze.options import build
    from gpuadvise.analyze.pipeline import resolve_launch
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel
    from gpuadvise.trace.emulate import emulate

    failures = 0
    for k in ORDER:
        c = compile_kernel(k, block, n)
        grid = (c.device.sm_count or 132) * max(c.blocks_per_sm, 1)
        for p in plan(k, n, block, grid):
            spec, choice, options = build(kernel_options(k, block, p.n, p.grid))
            tc = find_toolchain()
            module = compile_source(SOURCE, options, tc, kernels=[spec.kernel])
            info = select_compiled_kernel(module, spec.kernel)
            launch = resolve_launch(spec, info, options, tc)
            e = emulate(module, info, launch, choice.device, sample_ctas="all", trace=False)
            data = np.asarray(e.inputs["in"]).view(np.int32).reshape(-1)
            want = expected(p, data)
            got = np.asarray(e.outputs["out"]).reshape(-1)[: len(want)].astype(np.int64)
            ok = np.array_equal(got, want)
            failures += not ok
            print(f"{p.label:<16} n={p.n:<8} grid={p.grid:<6} block={block}: "
                  f"{'ok' if ok else 'WRONG'} ({len(want)} sums)")  # fmt: skip
    return failures


@dataclass
class Row:
    kernel: str
    passes: list[Pass]
    first_ms: float = math.nan
    rest_ms: float = 0.0
    verified: bool = True
    notes: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def whole_ms(self) -> float:
        return self.first_ms + self.rest_ms


def run_job(passes: list[Pass], compiled: dict[str, Compiled], cold: bool, seed: int,
            max_time_s: float) -> tuple[Any, dict[str, np.ndarray]]:  # fmt: skip
    """Verify and time ``passes`` in one isolated worker (gpuadvise's runner)."""
    from gpuadvise.analyze.prepare import time_prepared
    from gpuadvise.runner import job as J
    from gpuadvise.runner.data import make_host_buffer

    buffers: dict[str, J.BufferInit] = {}
    prepared = []
    for p in passes:
        c = compiled[p.kernel].prepared
        # pass 1 of every kernel reads `in` (reduce_shfl as int4: the same bytes)
        buffers.setdefault(p.src, J.BufferInit(p.src, np.dtype(np.int32), p.n, "random"))
        buffers[p.dst] = J.BufferInit(p.dst, np.dtype(np.int32), p.grid, "zeros", is_output=True)
        launch = replace(
            c.launch,
            label=p.label,
            grid=(p.grid, 1, 1),
            block=(p.block, 1, 1),
            params=(
                J.Param("buffer", "P", 0, p.src),
                J.Param("buffer", "P", 0, p.dst),
                J.Param("scalar", "I", p.n // 4 if p.kernel == "reduce_shfl" else p.n),
            ),
            repeat=1,
        )
        prepared.append(replace(c, launch=launch, spec=replace(c.spec, seed=seed)))
    # time_prepared takes the job's buffers from the first launch: give it all of them
    prepared[0] = replace(prepared[0], buffers=tuple(buffers.values()))
    timing = J.TimingConfig(min_samples=20, min_time_s=min(1.0, max_time_s),
                            max_time_s=max_time_s, target_rel_noise=0.01)  # fmt: skip
    run = time_prepared(prepared, timing, hot=not cold, timeout_s=120)
    inputs = {
        name: make_host_buffer(np.dtype(np.int32), b.count, b.fill, seed, name)
        for name, b in buffers.items()
        if not b.is_output
    }
    return run, inputs


def check(
    run: Any, passes: list[Pass], inputs: dict[str, np.ndarray], rows: dict[str, Row]
) -> None:
    res = run.result
    if not res.ok:
        raise SystemExit(f"the GPU run failed ({res.failed_label}): {res.error}\n{run.log[-2000:]}")
    for p, o in zip(passes, res.outcomes, strict=True):
        want = expected(p, inputs[p.src])
        got = o.outputs[p.dst][: len(want)].astype(np.int64)
        if not np.array_equal(got, want):
            bad = int(np.count_nonzero(got != want))
            rows[p.kernel].verified = False
            rows[p.kernel].notes.append(f"pass {p.index}: {bad} of {len(want)} sums wrong")


def table(rows: list[Row], n: int, block: int, device: str) -> str:
    gb = n * 4 / 1e9
    base_first, base_whole = rows[0].first_ms, rows[0].whole_ms
    out = [
        f"Seed 003's reductions, {n} ints ({n * 4 / 2**20:.0f} MiB), {block} threads per block, "
        f"on {device} (the seed: a G80, 128 threads per group)",
        f"{'kernel':<46} | {'G80 ms':>7} {'GB/s':>7} {'step':>5} {'cum':>6} | "
        f"{'pass1 ms':>8} {'GB/s':>7} {'step':>5} {'cum':>6} | "
        f"{'whole ms':>8} {'GB/s':>7} {'step':>5} {'cum':>6} {'pass':>4} | ok",
    ]
    prev: Row | None = None
    for r in rows:
        seed = SEED_G80.get(r.kernel)
        s = (
            f"{seed[0]:7.3f} {seed[1]:7.3f} {_x(seed[2]):>5} {_x(seed[3]):>6}"
            if seed
            else f"{'-':>7} {'-':>7} {'-':>5} {'-':>6}"
        )
        step1 = prev.first_ms / r.first_ms if prev else None
        stepw = prev.whole_ms / r.whole_ms if prev else None
        out.append(
            f"{TITLES[r.kernel]:<46} | {s} | "
            f"{r.first_ms:8.4f} {gb / (r.first_ms * 1e-3):7.1f} {_x(step1):>5} "
            f"{_x(base_first / r.first_ms):>6} | "
            f"{r.whole_ms:8.4f} {gb / (r.whole_ms * 1e-3):7.1f} {_x(stepw):>5} "
            f"{_x(base_whole / r.whole_ms):>6} {len(r.passes):>4} | "
            + ("yes" if r.verified else "NO: " + "; ".join(r.notes))
        )
        prev = r
    return "\n".join(out)


def _x(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}x"


def run_block(block: int, n: int, max_time_s: float, seed: int) -> dict[str, Any]:
    from gpuadvise.runner.stats import summarize

    t0 = time.perf_counter()
    compiled = {k: compile_kernel(k, block, n) for k in ORDER}
    compile_s = time.perf_counter() - t0
    dev = compiled["reduce1"].device
    rows: dict[str, Row] = {}
    for k in ORDER:
        grid = (dev.sm_count or 132) * max(compiled[k].blocks_per_sm, 1)
        rows[k] = Row(k, plan(k, n, block, grid))
    firsts = [r.passes[0] for r in rows.values()]
    rests = [p for r in rows.values() for p in r.passes[1:]]
    run1, in1 = run_job(firsts, compiled, cold=True, seed=seed, max_time_s=max_time_s)
    check(run1, firsts, in1, rows)
    for p, o in zip(firsts, run1.result.outcomes, strict=True):
        st = summarize(o.samples_ms, o.throttled)
        rows[p.kernel].first_ms = st.median_ms
        rows[p.kernel].stats[p.label] = {**_brief(st), "grid": p.grid, "n": p.n, "l2": "cold"}
    device_name = str(run1.result.device.get("name"))
    clocks = run1.result.clocks
    if rests:
        run2, in2 = run_job(rests, compiled, cold=False, seed=seed, max_time_s=max_time_s)
        check(run2, rests, in2, rows)
        for p, o in zip(rests, run2.result.outcomes, strict=True):
            st = summarize(o.samples_ms, o.throttled)
            rows[p.kernel].rest_ms += st.median_ms
            rows[p.kernel].stats[p.label] = {**_brief(st), "grid": p.grid, "n": p.n, "l2": "warm"}
    ordered = [rows[k] for k in ORDER]
    print(table(ordered, n, block, device_name))
    print(f"(compiled in {compile_s:.1f} s; GPU clocks {clocks})\n", flush=True)
    return {
        "block": block,
        "n": n,
        "device": run1.result.device,
        "clocks": clocks,
        "rows": [
            {
                "kernel": r.kernel,
                "title": TITLES[r.kernel],
                "compiled_as": compiled[r.kernel].name,
                "passes": [vars(p) for p in r.passes],
                "first_pass_ms": r.first_ms,
                "whole_ms": r.whole_ms,
                "first_pass_gbps": n * 4 / (r.first_ms * 1e-3) / 1e9,
                "whole_gbps": n * 4 / (r.whole_ms * 1e-3) / 1e9,
                "verified": r.verified,
                "notes": r.notes,
                "seed_g80": SEED_G80.get(r.kernel),
                "timings": r.stats,
            }
            for r in ordered
        ],
    }


def _brief(st: Any) -> dict[str, Any]:
    return {"median_ms": st.median_ms, "iqr_ms": st.iqr_ms, "samples": st.n,
            "rel_noise": st.rel_noise, "throttled": st.throttled}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--block", type=int, action="append", choices=(128, 256),
                    help="threads per block (repeatable; default: 128 and 256)")  # fmt: skip
    ap.add_argument("--n", type=int, default=N, help="ints to reduce (default 2^22, the seed's)")
    ap.add_argument("--max-time", type=float, default=6.0, help="timing budget per job, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the numbers here")
    ap.add_argument("--check-cpu", type=int, metavar="N",
                    help="no GPU: run every pass for N ints on the CPU emulator and check the "
                    "sums (e.g. 65536)")  # fmt: skip
    a = ap.parse_args()
    if a.max_time <= 0:
        ap.error("--max-time must be positive")
    if a.n <= 0 or a.n % 4:
        ap.error("--n must be a positive multiple of 4 (reduce_shfl reads int4)")
    if a.check_cpu is not None:
        if a.check_cpu <= 0 or a.check_cpu % 4:
            ap.error("--check-cpu must be a positive multiple of 4")
        bad = sum(check_on_cpu(b, a.check_cpu) for b in (a.block or [128, 256]))
        print("all passes give the expected sums" if not bad else f"{bad} pass(es) wrong")
        return 1 if bad else 0
    from gpuadvise.runner.client import require_gpu

    require_gpu()
    t0 = time.perf_counter()
    results = [run_block(b, a.n, a.max_time, a.seed) for b in (a.block or [128, 256])]
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "wall_s": time.perf_counter() - t0,
        "results": results,
    }
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(doc, indent=1, default=str))
    print(f"total {doc['wall_s']:.1f} s" + (f"; wrote {a.json}" if a.json else ""))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
