"""Advice that chains: start from the interleaved reduction, apply the top finding's variant,
re-analyze, repeat (issue 15, item 9).

Starts from kernels/reduction/reduce.cu ``reduce1`` on 2^26 int32 (``--log2n``), runs ``analyze``
in-process (:func:`gpuadvise.analyze.run.run_analysis`, every rule the registry holds, whatever
they are), takes the top-ranked finding whose variant can be built (a source diff and/or a launch
change, not a proxy), applies it, and analyzes the result again, until no finding is left that is
faster: measured and verified on a GPU (``--measure``, the default when PyCUDA and a GPU are
there: the analysis measures the variants it can build; others the chain times itself against
the step's kernel with the measurement stage's verified A/B) or, with ``--no-measure``, ranked
by the rules' estimates alone (estimated speedup > ``--min-speedup``, or no estimate, in the
registry's rank order; the output says so) and verified on the CPU emulator: the step's kernel
and the candidate each run over their whole launch at 2^``--verify-log2n`` elements and their
outputs compared (a per-block reduction's partials, whose count follows the grid, as their
total: ``Variant.totals``); a candidate that differs is skipped. Without measurements, the
candidates whose outputs equal the kernel's come before those checked as totals (a changed
output contract: the host must add the new grid's partials), each group in rank order.

A variant that changes the grid of a per-block reduction (GA206) leaves one partial per CTA of
the new grid in ``out``: the table marks it, and the host must add ``gridDim.x`` partials.

At each step: the kernel, the finding applied, its time (ms), speedup over the previous step and
over the start, bandwidth (input bytes / time) against the device's copy bandwidth (the runner's
device-to-device copy, ``bench``'s ceiling) and CUB (``cupy.sum`` on the same array, when cupy
imports; else the column is left out and the output says so).

Usage: python benchmarks/advice_chain.py [--log2n 26] [--steps 6] [--no-measure] [--md OUT.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
START = ROOT / "kernels" / "reduction" / "reduce.cu"
START_GRID = "ceil_div(n, 256)"  # the start's grid: one element per thread

CASE = """source = "{source}"
kernel = "{kernel}"
grid = "{grid}"
block = "{block}"
seed = 1

[args]
n = {n}

[buffers]
in = "int[n]"
out = {{ type = "int", count = "ceil_div(n, 256)", fill = "zeros" }}
"""


@dataclass
class Step:
    index: int
    kernel: str
    applied: str  # the finding (rule: message) that produced this step's source
    grid: str
    block: str
    time_ms: float | None = None
    estimate: float | None = None  # the applied finding's estimate
    measured: float | None = None  # the applied finding's measured speedup (over the last step)
    verified: bool | None = None


def _options(
    source: Path, kernel: str, n: int, grid: str, block: str, spec: str = "case.toml"
) -> Any:
    from gpuadvise.analyze.options import KernelOptions

    (source.parent / spec).write_text(
        CASE.format(source=source.name, kernel=kernel, grid=grid, block=block, n=n)
    )
    return KernelOptions(
        source=str(source), kernel=kernel, grid=grid, block=block, args=(f"n={n}",),
        spec=str(source.parent / spec),
    )  # fmt: skip


def _time_ms(opts: Any) -> tuple[float | None, float | None]:
    """The kernel's median time (ms) and the device's copy bandwidth (GB/s), through bench."""
    from gpuadvise.analyze.bench import run_bench
    from gpuadvise.runner.job import TimingConfig

    rep = run_bench((str(opts.source),), opts, False, 120.0, None, TimingConfig())
    if rep.error or not rep.stats:
        return None, rep.ceiling_gbps
    return float(rep.stats[0].median_ms), rep.ceiling_gbps


def _measure_pair(opts: Any, v: Any) -> tuple[float | None, bool]:
    """Speedup of the variant ``v`` over the kernel ``opts`` builds, and whether its outputs
    were verified: the measurement stage's A/B (the variant built with its own launch, its
    outputs compared with the kernel's, ``v.totals`` as totals of the partials each grid
    writes)."""
    from gpuadvise.analyze.measure import measure_variant
    from gpuadvise.analyze.prepare import live_options

    t = measure_variant(live_options(opts), v, timeout_s=120.0)
    if t.measurement is None:
        print(f"  (not measured: {t.note})")
        return None, False
    return float(t.measurement.speedup), t.verified is True


def _cub_ms(n: int) -> float | None:
    try:
        import cupy as cp  # type: ignore[import-not-found]
    except ImportError:
        return None
    x = cp.random.randint(0, 16, n, dtype=cp.int32)
    cp.sum(x)
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(20):
        start.record()
        cp.sum(x)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return sorted(times)[len(times) // 2]


def _candidates(run: Any, measure: bool, min_speedup: float) -> list[tuple[Any, Any]]:
    """(finding, variant) worth applying, best first: rank order of the findings."""
    from gpuadvise.analyze.measure import measurable
    from gpuadvise.rules.ranking import rank_findings

    out = []
    for f in rank_findings(run.findings):
        v = f.variant
        if f.is_error or v is None or v.proxy is not None or not measurable(v):
            continue
        if not (v.diff or v.launch):
            continue
        if measure and f.verified is False:  # measured, outputs differ
            continue
        if measure and f.measured_speedup is not None and f.verified:
            if f.measured_speedup.speedup > min_speedup:
                out.append((f, v))
            continue
        est = f.estimated_speedup.speedup if f.estimated_speedup is not None else None
        if measure or est is None or est > min_speedup:  # no estimate: in rank order
            out.append((f, v))
    if not measure:  # outputs kept before a changed output contract (totals), stable
        out.sort(key=lambda fv: bool(fv[1].totals))
    return out


def _emulated_check(opts: Any, new: Any, v: Any, n_verify: int) -> tuple[bool, str]:
    """Both kernels over their whole launch on the CPU emulator at ``n_verify`` elements:
    (outputs equal, what was checked or why not)."""
    from gpuadvise.analyze.fix import emulated_totals_check
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.spec.expr import evaluate

    # a grid named by number (a step that changed it) is that of the chain's size; at the
    # smaller verification size its CTAs past the start's grid would write partials past the
    # output's end (`out` holds ceil_div(n, 256)): no more CTAs than that there. Those without
    # work write a zero partial, which the totals check adds.
    cap = evaluate(START_GRID, {"n": n_verify})

    def at_verify(grid: str) -> str:
        dims = str(grid).replace(",", "x").split("x")
        if all(d.strip().isdigit() for d in dims) and all(int(d) == 1 for d in dims[1:]):
            return str(min(int(dims[0]), cap))
        return grid

    a = _options(Path(opts.source), opts.kernel, n_verify, at_verify(opts.grid), opts.block,
                 "verify.toml")  # fmt: skip
    b = _options(Path(new.source), new.kernel, n_verify, at_verify(new.grid), new.block,
                 "verify.toml")  # fmt: skip
    try:
        why, checked = emulated_totals_check(a, b, v.totals or {})
    except GpuAdviseError as exc:
        return False, f"could not be emulated: {exc.one_line()}"
    return why is None, why or checked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2n", type=int, default=26)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--kernel", default="reduce1")
    ap.add_argument("--min-speedup", type=float, default=1.05)
    ap.add_argument("--no-measure", action="store_true", help="rank by the estimates, no GPU")
    ap.add_argument("--verify-log2n", type=int, default=20,
                    help="--no-measure: the size the CPU emulator verifies each step at")  # fmt: skip
    ap.add_argument("--md", help="write the table here (markdown)")
    ap.add_argument("--keep", help="copy each step's source and launch spec into this folder")
    opts_ = ap.parse_args()
    from gpuadvise.analyze.measure import variant_options
    from gpuadvise.analyze.options import AnalyzeSettings
    from gpuadvise.analyze.run import run_analysis

    measure = not opts_.no_measure
    if measure:
        from gpuadvise.runner.client import pycuda_missing

        why = pycuda_missing()
        if why is not None:
            print(f"error: cannot measure ({why}); run with --no-measure for estimates only")
            return 2
    n = 1 << opts_.log2n
    out_lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        out_lines.append(text)

    with tempfile.TemporaryDirectory(prefix="gpuadvise-chain-") as tmp_:
        tmp = Path(tmp_)
        src = tmp / "step0" / "reduce.cu"
        src.parent.mkdir()
        shutil.copy(START, src)
        opts = _options(src, opts_.kernel, n, START_GRID, "256")
        steps = [Step(0, opts_.kernel, "start", opts.grid, opts.block)]
        tried: set[str] = set()
        copy_gbps = None
        for i in range(1, opts_.steps + 1):
            t0 = time.perf_counter()
            res = run_analysis(opts, AnalyzeSettings(measure=measure))
            cands = _candidates(res.rules, measure, opts_.min_speedup)
            print(f"step {i - 1}: {len(res.rules.findings)} finding(s), {len(cands)} to try "
                  f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
            if measure and steps[-1].time_ms is None:
                steps[-1].time_ms, copy_gbps = _time_ms(opts)
            chosen = None
            for f, v in cands:
                key = f"{f.rule}:{v.diff}:{v.launch}"
                if key in tried:
                    continue
                tried.add(key)
                folder = tmp / f"step{i}"
                folder.mkdir(exist_ok=True)
                new = variant_options(opts, v, folder)
                if Path(new.source or "").parent != folder:  # a launch change: same source
                    shutil.copy(new.source or "", folder / Path(new.source or "").name)
                    new = dataclasses.replace(new, source=str(folder / Path(new.source or "").name))
                new = _options(Path(new.source), opts.kernel, n, new.grid or opts.grid,
                               new.block or opts.block)  # fmt: skip
                if not measure:
                    ok, how = _emulated_check(opts, new, v, 1 << opts_.verify_log2n)
                    print(f"  {f.rule}{' ' + v.label if v.label else ''}: {how}")
                    if not ok:
                        continue
                if measure and not (f.measured_speedup is not None and f.verified):
                    sp, ok = _measure_pair(opts, v)
                    if not ok or sp is None or sp <= opts_.min_speedup:
                        print(f"  {f.rule} not faster/verified (speedup {sp}, outputs ok {ok})")
                        continue
                    measured, verified = sp, ok
                else:
                    measured = f.measured_speedup.speedup if f.measured_speedup else None
                    verified = f.verified
                est = f.estimated_speedup.speedup if f.estimated_speedup else None
                what = f"{f.rule} {f.name} (line {f.line})"
                if v.label:
                    what += f" [{v.label}]"
                if v.totals:
                    what += " (partials checked as totals)"
                chosen = Step(i, opts.kernel, what,
                              str(new.grid), str(new.block), None, est, measured, verified)  # fmt: skip
                opts = new
                break
            if chosen is None:
                break
            steps.append(chosen)
            if measure:
                chosen.time_ms, copy_gbps = _time_ms(opts)
        if opts_.keep:
            shutil.copytree(tmp, opts_.keep, dirs_exist_ok=True)
        cub = _cub_ms(n) if measure else None

    basis = (
        "measured and verified on the GPU"
        if measure
        else f"ESTIMATES ONLY (--no-measure), outputs verified on the CPU emulator at "
        f"2^{opts_.verify_log2n}"
    )
    say(f"Advice chain from {opts_.kernel} on 2^{opts_.log2n} int32 ({datetime.date.today()}; "
        f"`python benchmarks/advice_chain.py {' '.join(sys.argv[1:])}`): steps {basis}")  # fmt: skip
    if measure and cub is None:
        say("CUB column left out: cupy does not import here")
    nbytes = n * 4
    head = "| step | applied | grid x block | estimate | measured | time ms | vs start | GB/s |"
    head += " % of copy |" + (" % of CUB |" if cub else "")
    say("")
    say(head)
    say("|" + "---|" * (head.count("|") - 1))
    t_start = steps[0].time_ms
    for s in steps:
        gbs = nbytes / (s.time_ms * 1e-3) / 1e9 if s.time_ms else None
        cells = [
            str(s.index), s.applied, f"{s.grid} x {s.block}",
            f"{s.estimate:.2f}x" if s.estimate else "-",
            (f"{s.measured:.2f}x" + ("" if s.verified else " (unverified)")) if s.measured else "-",
            f"{s.time_ms:.3f}" if s.time_ms else "-",
            f"{t_start / s.time_ms:.2f}x" if s.time_ms and t_start else "-",
            f"{gbs:.0f}" if gbs else "-",
            f"{gbs / copy_gbps:.0%}" if gbs and copy_gbps else "-",
        ]  # fmt: skip
        if cub:
            cells.append(f"{cub / s.time_ms:.0%}" if s.time_ms else "-")
        say("| " + " | ".join(cells) + " |")
    if cub:
        say(f"\nCUB (cupy.sum): {cub:.3f} ms, {nbytes / (cub * 1e-3) / 1e9:.0f} GB/s")
    if copy_gbps:
        say(f"device copy bandwidth (runner D2D): {copy_gbps:.0f} GB/s")
    if opts_.md:
        Path(opts_.md).write_text("\n".join(out_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
