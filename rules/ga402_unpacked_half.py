"""GA402 unpacked-half-math: scalar fp16 arithmetic where packed half2 would do two per instruction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    ModelUnavailable,
    Rule,
    RuleContext,
    ScalarOp,
    Variant,
    component_shape,
    dram_bytes_per_s,
    fp16_counts,
    half_loops,
    half_updates,
    launch_change_estimate,
    packing_proposal,
    record_weights,
    roofline,
    scalar_ops,
    sm_cycles_per_s,
    view_traffic,
    work_ratio,
)
from gpuadvise.rules import half_variables as half_variables  # the tests read it here

ISSUE_PER_SM_CLOCK = 4
"""Warp instructions an SM issues per clock (4 schedulers, Volta to Hopper)."""

# the names tests/rules/test_rule_ga402.py reads on this module
updates = half_updates
_shape = component_shape


@dataclass(frozen=True)
class HalfLoop(FindingDetails):
    """The lines whose SASS the estimate counts (the loop, or the statement's lines), that
    region's one-lane fp16 instructions, half-word PRMTs and instructions, the kernel's
    instructions, and the packing proposed (its text, and its pairs in ``plan_info``)."""

    region: tuple[int, ...]
    one_lane: int
    prmt: int
    region_instructions: int
    instructions: int
    plan: str
    plan_info: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# The rule


class UnpackedHalfMath(Rule):
    """Scalar fp16 arithmetic where packed half2 instructions would do two operations at once.

    What it detects
    ---------------
    Statements in a loop of the kernel that do scalar fp16 (or bf16) arithmetic: ``__hadd``,
    ``__hmul``, ``__hfma`` and the other scalar intrinsics of ``cuda_fp16.h``, or ``+ - * /`` on
    variables declared ``__half``; typically a half3 split into three scalar accumulators, or a
    weight sum kept apart from a half2 pair whose second lane does nothing. The SASS
    must show the waste at the line: fp16 instructions that compute one lane (``HADD2 R2,
    R2.H0_H0, ...``: every source a broadcast half), or ``PRMT`` instructions moving 16-bit
    halves (the compiler repacking scalars into pairs); when ptxas moved the line's arithmetic
    elsewhere (nvcc 13 attributes what it packs to the load's line), the enclosing loop's SASS
    must show it. Reported at the statement's line.

    Why it is slow
    --------------
    An fp16 unit works on a pair: ``HFMA2`` does two multiply-adds in one instruction, a scalar
    ``__hfma`` one, in the same issue slot. Three scalar components take three instructions where
    a (r, g) and a (b, 1) pair take two, and the 1 in the fourth lane accumulates the weight sum
    for free. When the compiler packs scalars itself (nvcc's SLP vectorizer does), it pays PRMT
    instructions to build the pairs. On AMD GPUs (a shader study of fp16 packing) the packing also
    decides register allocation; on NVIDIA it is mostly issue slots, so it matters when the loop
    is instruction-bound.

    Example
    -------
    ``kernels/fp16_neighbourhood/moments.cu``: ``moments_half3`` (scalar ``__hfma``/``__hmul`` on
    each component and a scalar weight sum: lines 163-166), ``moments_split`` and
    ``moments_uint2`` (the weight sum ``__hadd(wsum, wt)`` beside a (b, 0) pair whose high lane
    is never read); ``moments_half4`` packs (r, g) and (b, 1) and has no scalar fp16 math.

    Fix
    ---
    Pack the data and the accumulators in half2: pair the components that are multiplied by the
    same value (``__hfma2(rg, w2, m_rg)``), put the weight in a spare lane (store (b, 1) and
    read the sum as ``__high2half(m_b1)``), and keep the pairs packed in memory (half4 or uint2
    texels) so that nothing repacks them. The finding names the pairs it found.

    How the estimate is made
    ------------------------
    An upper bound for packing the loop, shared by the loop's findings (they are one fix, not
    additive): pairing the one-lane fp16 instructions saves half of them, packed data saves the
    half-word PRMTs; the instructions a thread executes are the SASS of the kernel with the
    loop's part weighted by its trip count (executions per warp of the loop's memory accesses in
    the trace; 1 when unrolled). On the launch roofline (gpuadvise.model.roofline) those
    instructions are the issue term (4 warp instructions per SM per clock), beside the L1, L2,
    DRAM and latency terms of the traced accesses, which packing leaves alone; the launch takes
    at least its largest term before and after (both with DRAM at peak bandwidth for the bound,
    at sustained rates for the point value in the inputs). Dependencies and the FMA pipe's own
    rate are not modelled. Without the device's rates or a trace, ``max(T_issue, T_DRAM) /
    max(T_issue - saved, T_DRAM)``.

    Fix safety
    ----------
    Display-only, never automatic. Lane-wise, a packed ``__hfma2`` rounds exactly as two scalar
    ``__hfma`` do, so a packing that keeps every operation and its order gives bit-identical
    results (the moments kernels do); but the gain needs the data packed end to end (the
    layout in memory, the accumulators, a 1 in a spare lane, the unpacking after the loop),
    a rewrite gpuadvise cannot prove equivalent in general; a local repacking of the scalars is
    what nvcc already does (PRMT + HFMA2) and gains nothing.
    """

    id = "GA402"
    name = "unpacked-half-math"
    title = "Scalar fp16 arithmetic where packed half2 would do"
    severity = "warning"
    models = ("sass", "source", "trace")
    options = {"loops_only": True}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        ks = ctx.kernel_source
        ops = scalar_ops(ks)
        if not ops:
            return
        lps = half_loops(ks)
        instrs = ctx.sass_instructions
        regs = int(ctx.kernel.resources.registers)  # _sass checked there is a compiled kernel
        by_stmt: dict[int, list[ScalarOp]] = {}
        for o in ops:
            by_stmt.setdefault(o.statement, []).append(o)
        for st, group in sorted(by_stmt.items()):
            line = ks.line_at(st)
            inside = [lp for lp in lps if lp.start < st <= lp.end]
            if not inside and ctx.option("loops_only"):
                continue
            outer = min(inside, key=lambda lp: lp.start) if inside else None
            stmt_lines = sorted({o.line for o in group} | {line})
            at_line = fp16_counts(instrs, ctx.source_file, stmt_lines)
            region = list(range(outer.first_line, outer.last_line + 1)) if outer else stmt_lines
            in_loop = fp16_counts(instrs, ctx.source_file, region)
            op_lines = {ln for o in ops for ln in (o.line, ks.line_at(o.statement))}
            moved = [
                ln
                for ln in region
                if ln not in op_lines and fp16_counts(instrs, ctx.source_file, [ln]).fp16
            ]
            if at_line.fp16:
                wasteful = at_line.one_lane + at_line.prmt > 0
            else:  # ptxas moved this line's arithmetic: judge the loop
                wasteful = in_loop.one_lane + in_loop.prmt > 0
            if not wasteful:
                continue
            names = sorted({o.op for o in group})
            where = (
                f"the SASS at this line has {at_line.text()}"
                if at_line.fp16
                else "the SASS has no fp16 instruction at this line (ptxas merged its "
                "arithmetic with its neighbours'"
                + (f", at line {', '.join(map(str, moved))})" if moved else ")")
            )
            loop_txt = (
                f"; the loop (lines {outer.first_line}-{outer.last_line}) has "
                f"{in_loop.one_lane} one-lane and {in_loop.packed} packed fp16 instructions "
                f"and {in_loop.prmt} half-word PRMTs"
                if outer
                else ""
            )
            plan, info = packing_proposal(ks, outer) if outer else ("", {})
            yield self.finding(
                ctx,
                f"scalar fp16 arithmetic ({', '.join(names)}) where half2 would do two per "
                f"instruction: {where}{loop_txt}; {regs} registers/thread",
                line=line,
                evidence=[
                    Evidence("scalar_fp16_ops", len(group), 1, ">=", "operations"),
                    Evidence("sass_one_lane_fp16", at_line.one_lane, unit="instructions"),
                    Evidence("sass_packed_fp16", at_line.packed, unit="instructions"),
                    Evidence("sass_halfword_prmt", at_line.prmt, unit="instructions"),
                    Evidence("loop_one_lane_fp16", in_loop.one_lane, unit="instructions"),
                    Evidence("loop_packed_fp16", in_loop.packed, unit="instructions"),
                    Evidence("loop_halfword_prmt", in_loop.prmt, unit="instructions"),
                    Evidence("registers", regs, unit="registers/thread"),
                ],
                details=HalfLoop(
                    tuple(int(n) for n in region),
                    int(in_loop.one_lane),
                    int(in_loop.prmt),
                    int(in_loop.instructions),
                    len([i for i in instrs if not i.never_executes]),
                    plan,
                    info,
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        in_loop = finding.details_as(HalfLoop)
        n_kernel = in_loop.instructions
        saved_static = in_loop.one_lane // 2 + in_loop.prmt
        trips, how = _trips(ctx, in_loop.region)
        n_loop = in_loop.region_instructions
        n_dyn = (n_kernel - n_loop) + n_loop * trips
        saved = saved_static * trips
        d = ctx.device
        launch = ctx.launch
        warps = launch.grid.count * -(-launch.block.count // 32)
        inputs: dict[str, Any] = {
            "one_lane_fp16": in_loop.one_lane,
            "halfword_prmt": in_loop.prmt,
            "instructions_per_thread": n_dyn,
            "instructions_saved_per_thread": saved,
            "loop_trips": trips,
        }
        shared = "for packing the whole loop (shared by its findings, not additive)"
        rate = sm_cycles_per_s(d, ISSUE_PER_SM_CLOCK)
        if rate is None:
            sp = work_ratio(n_dyn, saved, floor=1)
            return Estimate(
                round(max(sp, 1.0), 3),
                "upper-bound",
                f"issue-bound kernel, {shared}: {n_dyn} -> {n_dyn - saved} instructions per "
                f"thread ({how}); no clock for {d.name}",
                inputs,
            )
        try:
            base = view_traffic(d, ctx.trace_view)
        except ModelUnavailable:
            base = None
        if base is not None:
            # the launch roofline: every instruction a warp issues (not only the memory ones)
            # in the issue term; L1, L2, DRAM and latency are the launch's and do not change
            est = launch_change_estimate(
                d,
                replace(base, instructions=float(warps * n_dyn)),
                replace(base, instructions=float(warps * (n_dyn - saved))),
                f"{shared}, {in_loop.one_lane} one-lane fp16 instructions paired and "
                f"{in_loop.prmt} PRMTs gone: {n_dyn:.0f} -> {n_dyn - saved:.0f} instructions "
                f"per thread ({how})",
                inputs,
            )
            if est is not None:
                inputs.update(
                    issue_time_us=inputs["before_issue_us"],
                    saved_us=inputs["before_issue_us"] - inputs["after_issue_us"],
                    dram_time_us=inputs["before_dram_us"],
                )
                return est
        bandwidth = dram_bytes_per_s(d)
        dram_bytes = 0.0
        if bandwidth is not None:
            try:
                dram_bytes = _dram_bytes(ctx)
            except ModelUnavailable:
                dram_bytes = 0.0
        r = roofline(warps * n_dyn, warps * saved, rate, dram_bytes, bandwidth)
        t_issue, t_saved, t_dram = r.pipe_s, r.saved_s, r.dram_s
        inputs.update(
            {"issue_time_us": t_issue * 1e6, "saved_us": t_saved * 1e6,
             "dram_time_us": t_dram * 1e6}
        )  # fmt: skip
        return Estimate(
            round(max(r.speedup, 1.0), 3),
            "upper-bound",
            f"{shared}: pairing {in_loop.one_lane} one-lane fp16 instructions saves "
            f"{in_loop.one_lane // 2}, packed data saves {in_loop.prmt} PRMTs: {n_dyn:.0f} -> "
            f"{n_dyn - saved:.0f} instructions per thread ({how}); issue time {t_issue * 1e6:.1f} us "
            f"at {ISSUE_PER_SM_CLOCK} warp instructions per SM clock, DRAM "
            f"{t_dram * 1e6:.1f} us; max before / max after. Dependencies and latency are "
            "ignored",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        plan = finding.details_as(HalfLoop).plan or "keep the data as half2 pairs and use __h*2"
        return Variant(
            "display-only",
            f"{plan}. Display-only: the gain needs the layout changed end to end, which "
            "gpuadvise cannot prove equivalent (lane-wise each __hfma2 rounds as __hfma does, so "
            "a packing that keeps every operation and its order is bit-identical: see "
            "moments_half4 in kernels/fp16_neighbourhood)",
        )


def _trips(ctx: RuleContext, region: Sequence[int]) -> tuple[float, str]:
    """How many times a warp runs the loop's code: executions per warp of its memory
    instructions in the trace (1 when the loop is unrolled), and how that was found."""
    try:
        trace = ctx.trace
    except ModelUnavailable:
        return 1.0, "no trace: the loop's SASS counted once"
    lines = set(region)
    insts = [i.inst for i in trace.instructions if i.line in lines and ctx.same_file(i.file)]
    if not insts:
        return 1.0, "no memory access in the loop: its SASS counted once"
    r = trace.records
    sel = np.isin(r["inst"], np.array(insts))
    if not sel.any():
        return 1.0, "the loop's memory accesses did not run: its SASS counted once"
    warps = len(np.unique((r["cta"][sel].astype(np.int64) << 20) + r["warp"][sel]))
    executed = len(np.unique(r["inst"][sel]))
    # a record of a sampled loop's iterations stands for those the emulator skipped
    weight = record_weights(r[sel])
    runs = float(sel.sum()) if weight is None else float(weight.sum())
    trips = runs / max(warps * executed, 1)
    return round(trips, 3), (
        "the loop is unrolled: its SASS runs once"
        if abs(trips - 1.0) < 1e-9
        else f"the loop's SASS runs {trips:.1f} times per warp (trace)"
    )


def _dram_bytes(ctx: RuleContext) -> float:
    from gpuadvise.rules import touched_lines

    trace = ctx.trace
    g = trace.records[trace.records["space"] == 0]
    if not len(g):
        return 0.0
    _rec, sec = touched_lines(g, 32)
    return float(len(np.unique(sec)) * 32 * trace.scale)
