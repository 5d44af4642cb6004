"""GA405 compute-bound: the launch's time is its arithmetic (issue or an arithmetic pipe), not its
memory traffic."""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    IdleCost,
    Rule,
    RuleContext,
    Traffic,
    Variant,
    idle_cost,
    launch_change_estimate,
    launch_times,
    lines_text,
    memory_rates,
    read_once,
    same_source_file,
    view_traffic,
)

# the pipes of arithmetic (what issue-bound work is made of when it is not loads, stores,
# branches and barriers), and the ones a rewrite of the arithmetic can take away (MUFU stays:
# the fast intrinsics keep their one MUFU operation, __expf an EX2, __powf an LG2 and an EX2)
# uniform: the uniform datapath's integer work (UIADD3, ULOP3, USHF: loop counters and bounds
# the warp shares), which the SASS counts have (gpuadvise.trace.sass_counts) and the PTX had as int
ARITHMETIC = ("fp32", "fp16", "fp64", "int", "imad", "mufu", "xu", "shuffle", "tensor", "uniform")
REWRITTEN = ("fp32", "fp16", "fp64", "int", "imad", "xu", "branch")
_NAMES = {
    "fp32": "FP32", "fp16": "FP16", "fp64": "FP64", "int": "ALU", "imad": "IMAD",
    "mufu": "MUFU", "xu": "XU (conversions)", "shuffle": "shuffle", "tensor": "tensor",
    "lsu": "load/store", "branch": "branch", "barrier": "barrier", "uniform": "uniform datapath",
}  # fmt: skip
_MEMORY_CHAIN = ("global", "shared", "store")
# per trace view (weakly: dropped with it), the traffic GA405 reads, by device and options
_TRAFFIC: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ComputeBound(FindingDetails):
    """What bounds the launch (``issue`` or ``pipe``) and the pipe (``issue`` when all
    instructions), the kernel-body lines carrying most of that work with their shares of it,
    and each line's issued instructions by pipe (fractions of the line's)."""

    bound: str
    pipe: str
    lines: tuple[int, ...]
    shares: tuple[float, ...]
    mixes: tuple[dict[str, float], ...]


def _weight(pipes: Mapping[str, float], pipe: str) -> float:
    """A line's work of ``pipe`` (``issue``: its arithmetic and branch instructions)."""
    if pipe == "issue":
        return sum(v for k, v in pipes.items() if k in ARITHMETIC or k == "branch")
    return float(pipes.get(pipe, 0.0))


def _mix(pipes: Mapping[str, float]) -> str:
    total = sum(pipes.values()) or 1.0
    top = sorted(pipes.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{_NAMES.get(k, k)} {v / total:.0%}" for k, v in top if v / total >= 0.01)


def _memory_free(t: Traffic) -> Traffic:
    """``t`` with no memory time: no L1, L2 or DRAM work, nothing waited for in flight, and no
    memory links on the critical path (the most any change of the memory side can give)."""
    w = t.work
    work = None
    if w is not None:
        chain = {k: v for k, v in w.chain.items() if k not in _MEMORY_CHAIN}
        work = replace(w, chain=chain, chain_unordered=None)
    return t.without_memory(work=work)


class ComputeBoundKernel(Rule):
    """A launch bound by its arithmetic: memory-layout advice will not make it faster.

    What it detects
    ---------------
    From the execution model of the traced launch (the emulator's instruction counts by SASS
    pipe, :mod:`gpuadvise.model.execution`): a launch whose time is set by instruction issue or
    by an arithmetic pipe (FP32, ALU, FP64, MUFU ...), whose compute time is at least
    ``min_compute_over_memory`` times its memory time (the L1/shared data path, the L2 and
    DRAM) and at least ``min_compute_share`` of its modelled work, and whose issued
    instructions are at least ``min_arithmetic_share`` arithmetic (not loads, stores and
    branches), on a grid that reaches at least ``min_sm_share`` of the SMs (a launch of four
    CTAs, or of one thread, is limited by its parallelism, not by the GPU's arithmetic: GA102,
    GA106 and GA107 say so). Where some CTAs touch the data and fewer than
    ``min_working_share`` of the launch's do (the others make no memory access at all: GA108,
    a grid sized past the data), by what the idle CTAs cost, not by their count: the launch
    model times the idle CTAs alone (their issued instructions, from the emulator's per-CTA
    counts, and their launches) and the working ones alone (:func:`gpuadvise.rules.idle_cost`);
    when the idle CTAs take ``max_idle_share`` or more of that time, their index tests, loops
    and barriers are instructions launched for nothing, whose fix is fewer CTAs (GA108), not a
    rewrite of the arithmetic, and nothing is reported; else the launch is judged on its own
    mix of working and idle CTAs (HeCBench lombscargle: 391 of its 100,096 CTAs work, each
    through 1,000 ``sincosf`` steps, and the 99,705 others cost a few percent of its time). A
    search whose CTAs all compute in registers and write only on a match is reported.

    Reported at the line of the kernel's body that carries most of that pipe's issued work
    (code inlined from a device function or the CUDA math library counts at the kernel's line
    that calls it), with the other lines that together carry half of it. The long instruction
    sequences that nvcc makes of ``powf``, ``expf``, ``sinf``, ``sqrtf`` and float division
    without ``-use_fast_math`` (range reduction, special cases, Newton steps) are issued work
    like any other: a line of them stands out by its instruction count.

    Why it is slow
    --------------
    An SM issues one warp instruction a clock per scheduler, and a pipe completes its own share
    at its rate (FP32 one warp instruction a clock per scheduler, FP64 one every two clocks on
    an H100 and one every 32 on a consumer GPU, MUFU one every eight). A kernel that needs more
    instruction slots than its bytes need memory time waits on neither DRAM nor caches: it is
    at the compute roof, and coalescing, tiling or caching its data changes nothing. A precise
    ``powf`` is some 40 instructions where ``__powf`` is three; a division by a loop-invariant
    value is a ten-instruction sequence each iteration where a multiplication by its hoisted
    reciprocal is one.

    Example
    -------
    ``kernels/compute_bound/compute.cu``: ``weights`` (``1.f / powf(d, alpha)`` over all pairs,
    the AIDW interpolation), ``phases`` (a device function of ``sinf``/``cosf`` in a loop) and
    ``gauss`` (a macro of ``expf`` and two divisions by loop-invariant variances); ``copy``
    (a streaming copy) and ``stencil`` (a five-point stencil) are memory-bound and stay
    silent.

    Fix
    ---
    Work on the arithmetic, not the memory: the fast intrinsics ``__expf``, ``__powf``
    (``exp2f(y * __log2f(x))``), ``__sinf``/``__cosf``/``__sincosf``, ``__fdividef`` and
    ``rsqrtf`` where their precision is enough (or ``-use_fast_math`` for the whole file);
    strength reduction (``powf(x, 2)`` as ``x * x``, a division by an invariant as a
    multiplication by its reciprocal); hoisting loop-invariant math out of the loop, or a table
    of values that depend on the loop's indices only; FP64 to FP32 where the data allow.
    Memory-layout advice (coalescing, shared-memory tiling, vector loads) will not help a
    launch at its compute roof.

    How the estimate is made
    ------------------------
    An upper bound on the launch model: the launch as it is against the same launch with the
    flagged lines' arithmetic reduced to their MUFU operations (their FP32, FP64, ALU, IMAD,
    conversion and branch instructions gone, from the issue and the pipes, and the critical
    path's links of those pipes in the same proportion), at peak rates and full overlap. No
    rewrite of these lines that keeps their transcendental evaluations (fast intrinsics,
    ``-use_fast_math``, strength reduction, FP64 to FP32) does better; a fix that removes MUFU
    work too (a table, hoisting a ``sinf`` out of the loop) is not bounded by it. The evidence
    also gives the most any change of the memory side could give (no L1, L2 or DRAM time and no
    memory links on the critical path, like for like). Without the emulator's counts (the GPU
    tracer), no finding.

    Fix safety
    ----------
    Display-only: fast intrinsics change results in the last bits (``__expf``: 2 + 1.16 |x|
    ulp; ``__powf``: larger near 0 and for large exponents; ``__sinf`` loses accuracy outside
    [-pi, pi]), which only the author can accept; hoisting and strength reduction are the
    author's rewrite.
    """

    id = "GA405"
    name = "compute-bound"
    title = "Compute-bound: the arithmetic, not the memory, sets the launch's time"
    severity = "warning"
    models = ("trace",)
    options = {
        "min_compute_over_memory": 2.0,
        "min_compute_share": 0.6,
        "min_arithmetic_share": 0.6,
        "line_share": 0.5,
        "max_lines": 3,
        "min_sm_share": 0.5,
        "min_working_share": 0.5,
        "max_idle_share": 0.5,
    }

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        d = ctx.device
        rates = memory_rates(d)
        emu = ctx.emulation
        simt = emu.simt if emu is not None else None
        if rates is None or simt is None or not simt.line_pipes or not ctx.has_model("trace"):
            return
        gx, gy, gz = ctx.launch.grid.as_tuple()
        if d.sm_count and gx * gy * gz < float(ctx.option("min_sm_share")) * d.sm_count:
            return  # a few CTAs: the launch's parallelism is the limit (GA102, GA106, GA107)
        t, idle = self._traffic(ctx)
        if t is None:
            return
        w = t.work
        before = launch_times(t, d, rates)
        if w is None or before is None or before.compute is None:
            return
        bound = before.bound_by
        if bound not in ("issue", "pipe"):
            return
        compute, memory, work = before.compute_s, before.memory_s, before.work_s
        if compute < float(ctx.option("min_compute_over_memory")) * memory:
            return
        if compute < float(ctx.option("min_compute_share")) * work:
            return
        arithmetic = sum(v for k, v in w.pipes.items() if k in ARITHMETIC)
        if arithmetic < float(ctx.option("min_arithmetic_share")) * max(w.instructions, 1e-9):
            return
        pipe = before.compute.pipe if bound == "pipe" else "issue"
        if pipe not in ARITHMETIC and pipe != "issue":
            return
        src = ctx.source_file
        own = [lp for lp in simt.line_pipes if lp.line > 0 and same_source_file(lp.file, src)]
        total = sum(_weight(lp.pipes, pipe) for lp in simt.line_pipes)
        ranked = sorted(own, key=lambda lp: -_weight(lp.pipes, pipe))
        if total <= 0 or not ranked:
            return
        picked: list[tuple[Any, float]] = []
        covered = 0.0
        for lp in ranked[: int(ctx.option("max_lines"))]:
            share = _weight(lp.pipes, pipe) / total
            if share <= 0:
                break
            picked.append((lp, share))
            covered += share
            if covered >= float(ctx.option("line_share")):
                break
        lines = tuple(lp.line for lp, _ in picked)
        shares = tuple(round(s, 4) for _, s in picked)
        mixes = tuple(
            {k: round(v / max(lp.instructions, 1e-9), 4) for k, v in lp.pipes.items()}
            for lp, _ in picked
        )
        what = "instruction issue" if pipe == "issue" else f"the {_NAMES.get(pipe, pipe)} pipe"
        memory_gain = self._memory_bound(ctx, t)
        fast = any("fast_math" in f or "fast-math" in f for f in ctx.compile_flags)
        if len(picked) == 1:
            per_line = (
                f"line {lines[0]} carries {covered:.0%} of that work ({_mix(picked[0][0].pipes)})"
            )
        else:
            per_line = f"{lines_text(lines)} carry {covered:.0%} of that work: " + "; ".join(
                f"line {lp.line} {s:.0%} ({_mix(lp.pipes)})" for lp, s in picked
            )
        intrinsics = (
            "" if fast else "fast intrinsics (`__expf`, `__powf`, `__sinf`, `__fdividef`, "
            "`rsqrtf`) or -use_fast_math where precision allows, "
        )  # fmt: skip
        idle_text = ""
        idle_evidence = []
        if idle is not None:
            idle_text = (
                f"; about {idle.working:.0f} of the launch's {ctx.trace.total_ctas} CTAs work, "
                f"the others (idle: GA108) take {idle.idle_share:.0%} of its time"
            )
            idle_evidence = [
                Evidence(
                    "idle_cta_share",
                    round(idle.idle_share, 3),
                    float(ctx.option("max_idle_share")),
                    "<",
                )
            ]
        yield self.finding(
            ctx,
            f"compute-bound: {what} sets the launch's time ({compute * 1e6:.0f} us of "
            f"arithmetic against {memory * 1e6:.0f} us of memory time on the model){idle_text}; "
            f"{per_line}. Memory-layout changes give at most "
            f"{memory_gain:.2f}x here; work on the arithmetic: {intrinsics}strength reduction, "
            "loop-invariant math hoisted out of the loop, FP64 to FP32 where the data allow",
            line=lines[0],
            evidence=[
                Evidence("bound_by", bound),
                Evidence("pipe", pipe),
                Evidence("compute_us", round(compute * 1e6, 2), unit="us"),
                Evidence("memory_us", round(memory * 1e6, 2), unit="us"),
                Evidence(
                    "compute_over_memory",
                    round(compute / max(memory, 1e-12), 2),
                    float(ctx.option("min_compute_over_memory")),
                    ">=",
                ),
                Evidence("arithmetic_share", round(arithmetic / max(w.instructions, 1e-9), 3)),
                Evidence("lines_share", round(covered, 3)),
                Evidence("memory_fix_bound", round(memory_gain, 3), unit="x"),
                *idle_evidence,
            ],
            details=ComputeBound(bound, pipe, lines, shares, mixes),
        )

    def _traffic(self, ctx: RuleContext) -> tuple[Traffic | None, IdleCost | None]:
        """:meth:`_traffic_of` once per trace view, device and options: ``detect`` and
        ``estimate`` both read it (the buffers' footprints are sorts over their lanes)."""
        key = (ctx.device, ctx.option("min_working_share"), ctx.option("max_idle_share"))
        per_view = _TRAFFIC.setdefault(ctx.trace_view, {})
        try:
            got: tuple[Traffic | None, IdleCost | None] = per_view[key]
        except KeyError:
            got = per_view[key] = self._traffic_of(ctx)
        except TypeError:  # a device of unhashable fields: made each time
            got = self._traffic_of(ctx)
        return got

    def _traffic_of(self, ctx: RuleContext) -> tuple[Traffic | None, IdleCost | None]:
        """The launch's traffic (buffers read once where they fit in the L2), and what its
        idle CTAs cost when most CTAs make no memory access (None, None: the idle CTAs' own
        time is ``max_idle_share`` or more of the launch's, GA108's finding, not this one's)."""
        tr = ctx.trace
        # loads at their footprint where it fits in the L2 (read once: the sample's distinct
        # sectors scaled to the launch count a table every CTA reads once per traced CTA)
        t = view_traffic(ctx.device, ctx.trace_view)
        t = read_once(ctx.trace_view, ctx.same_file, ctx.device, t)
        working = tr.launch_working_ctas
        least = float(ctx.option("min_working_share")) * tr.total_ctas
        if working is None or tr.traced_working_ctas <= 0 or working >= least:
            return t, None
        # some CTAs work and most make no access at all (GA108: a grid sized past the data). Their
        # index tests, loops, barriers and launches are work not to launch: GA108's finding when
        # they are a large share of the launch's time; this one's when the working CTAs' arithmetic
        # dominates (HeCBench lombscargle: 391 of 100,096 CTAs run 1,000 sincosf steps each), on
        # the launch's own mix of working and idle CTAs, not the traced sample's. Without per-CTA
        # counts, GA108's. A search writing only on a match stays reported (no traced CTA works)
        idle = idle_cost(tr, ctx.device, t)
        if idle is None or idle.idle_share >= float(ctx.option("max_idle_share")):
            return None, None
        return idle.launch, idle

    def _memory_bound(self, ctx: RuleContext, t: Traffic) -> float:
        """The most a change of the memory side gives, like for like: the larger of the
        launch against its memory-free self at sustained rates and at peak."""
        d = ctx.device
        rates = memory_rates(d)
        if rates is None:
            return 1.0
        free = _memory_free(t)
        out = 1.0
        for peak in (False, True):
            b = launch_times(t, d, rates, peak_dram=peak)
            a = launch_times(free, d, rates, peak_dram=peak)
            if a is not None and b is not None and a.time_s > 0:
                out = max(out, b.time_s / a.time_s)
        return out

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        det = finding.details_as(ComputeBound)
        emu = ctx.emulation
        simt = emu.simt if emu is not None else None
        inputs: dict[str, Any] = {"bound": det.bound, "pipe": det.pipe, "lines": list(det.lines)}
        t, _ = self._traffic(ctx)
        w = None if t is None else t.work
        if simt is None or t is None or w is None:
            return Estimate(None, "none", "not estimated: no instruction counts", inputs)
        totals: dict[str, float] = {}
        gone: dict[str, float] = {}
        flagged = set(det.lines)
        for lp in simt.line_pipes:
            mine = lp.line in flagged and same_source_file(lp.file, ctx.source_file)
            for k, v in lp.pipes.items():
                totals[k] = totals.get(k, 0.0) + v
                if mine and k in REWRITTEN:
                    gone[k] = gone.get(k, 0.0) + v
        kept = {k: 1.0 - gone.get(k, 0.0) / v for k, v in totals.items() if v > 0}
        pipes = {k: v * kept.get(k, 1.0) for k, v in w.pipes.items()}
        chain = {k: v * kept.get(k, 1.0) for k, v in w.chain.items()}
        removed = sum(gone.values()) / max(sum(totals.values()), 1e-9)
        after = replace(
            t,
            work=replace(
                w,
                pipes=pipes,
                chain=chain,
                chain_unordered=None,
                critical_instructions=w.critical_instructions * (1.0 - removed),
            ),
        )
        inputs["removed_instruction_share"] = round(removed, 4)
        est = launch_change_estimate(
            ctx.device,
            t,
            after,
            f"the arithmetic of {lines_text(det.lines)} reduced to its MUFU operations "
            f"({removed:.0%} of the issued instructions gone: what fast intrinsics, strength "
            "reduction or FP64 to FP32 could at most remove; their MUFU work stays)",
            inputs,
        )
        if est is not None:
            return est
        return Estimate(None, "none", "not estimated: the device model lacks its rates", inputs)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        det = finding.details_as(ComputeBound)
        return Variant(
            "display-only",
            f"rewrite the arithmetic of {lines_text(det.lines)}: fast intrinsics where "
            "precision allows, strength reduction, loop-invariant math hoisted; not the memory "
            "layout",
        )
