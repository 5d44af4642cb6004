"""GA107 serial-work: one thread (or one warp) of each CTA works while the others wait."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.rules import (
    WARP,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    ModelUnavailable,
    Rule,
    RuleContext,
    launch_change_estimate,
    launch_times,
    memory_rates,
    view_traffic,
)


@dataclass(frozen=True)
class Serial(FindingDetails):
    """The serial region (:class:`gpuadvise.trace.simt.SerialRegion`) as the estimate needs it:
    what one warp that runs it adds to the CTA's critical path (``chain``,
    ``chain_unordered`` by latency class, ``issued`` instructions), the CTA's warp
    instructions in it by pipe, its active lanes per warp instruction, and ``gain``: how many
    times more threads could share it (the CTA's, or the device's for a launch of one warp)."""

    chain: tuple[tuple[str, float], ...]
    chain_unordered: tuple[tuple[str, float], ...]
    issued: float
    pipes: tuple[tuple[str, float], ...]
    lanes: float
    gain: float
    whole_launch: bool
    share: float


def _gain(ctx: RuleContext, region: Any) -> float:
    """How many times more threads could run the region's work: the CTA's threads over those
    that run it; for a launch of one warp or less, the device's resident threads."""
    threads = max(float(region.threads), 1.0)
    if region.whole_launch:
        sms = ctx.device.sm_count or 1
        return sms * ctx.device.threads_per_sm / threads
    return region.cta_threads / threads


def _shrunk(work: Any, d: Serial, factor: float) -> Any:
    """``work`` with the region's part of the critical path and of the issue divided by
    ``factor`` (infinite: removed); its instructions packed into full warps (``lanes / 32``
    of them kept, or ``1 / factor`` for a launch of one warp spread over the device)."""
    cut = 1.0 if math.isinf(factor) else 1.0 - 1.0 / factor

    def less(have: Mapping[str, float], part: tuple[tuple[str, float], ...]) -> dict[str, float]:
        out = dict(have)
        for k, v in part:
            if k in out:
                out[k] = max(out[k] - v * cut, 0.0)
        return out

    kept = 1.0 - cut if d.whole_launch else min(1.0, d.lanes / WARP)
    pipes = dict(work.pipes)
    for k, v in d.pipes:
        if k in pipes:
            pipes[k] = max(pipes[k] - v * (1.0 - kept), 0.0)
    return replace(
        work,
        pipes=pipes,
        chain=less(work.chain, d.chain),
        chain_unordered=None
        if work.chain_unordered is None
        else less(work.chain_unordered, d.chain_unordered),
        critical_instructions=max(work.critical_instructions - d.issued * cut, 0.0),
    )


def _after(ctx: RuleContext, before: Any, d: Serial, factor: float) -> Any:
    """The launch's traffic with the region shrunk by ``factor`` (:func:`_shrunk`); for a
    launch of one warp, its loads in flight from as many warps as the device holds (the work
    spread over a full grid: Little's law's latency term no longer one warp's)."""
    after = replace(before, work=_shrunk(before.work, d, factor))
    if d.whole_launch:
        full = float((ctx.device.sm_count or 1) * ctx.device.max_warps_per_sm)
        after = replace(after, resident_warps=max(before.resident_warps, full))
    return after


def _partition(regions: Sequence[Any]) -> set[int]:
    """The regions (ids) that split the CTA's threads between them: narrow regions of more
    than one thread each that together run at least half of the CTA's threads (a ``switch`` on
    the thread index: contraction's 18 case bodies of 18 threads each). Those threads run at
    the same time on their warps; none waits for the others: divergence or imbalance, not
    serial work. A one-thread section beside them is still serial."""
    several = [r for r in regions if not r.whole_launch and r.threads > 1.5]
    if len(several) < 2 or sum(r.threads for r in several) < 0.5 * several[0].cta_threads:
        return set()
    return {id(r) for r in several}


class SerialWork(Rule):
    """Work done by one thread or one warp of each CTA while its other threads wait.

    What it detects
    ---------------
    A region of the kernel (blocks joined in the control-flow graph: a loop, or a long run of
    straight-line code) that few threads of each CTA execute, from the CPU emulator's counts:
    its active lanes per executed warp instruction times the CTA's warps that ran it are at
    most a quarter of the CTA's threads (``if (threadIdx.x == 0) for (...)`` after a barrier:
    one thread of 256 sums the partials; ``if (warp == 0)`` with a loop of 64 steps while seven
    warps wait), or the whole launch is one warp or less (``<<<1, 1>>>``: one thread adds an
    array). Reported when, on the launch model (the execution model's critical path, issue and
    memory terms), the region's share of the modelled launch time is large: at least
    ``min_share`` (0.08) of it goes if the region's dependent chain and instructions cost
    nothing, and one warp that runs it issues at least ``min_instructions`` (64) of them per
    CTA. A ``tid == 0`` epilogue of a few instructions (the store of a block's sum) stays
    silent. Reported at the region's heaviest source line (most warp instructions), with the
    others it spans. Narrow regions that split the CTA's threads between them (several, of more
    than one thread each, together at least half of the CTA: a ``switch`` on the thread index)
    run at the same time; no thread waits for them, and none is reported.

    Why it is slow
    --------------
    A CTA finishes when its last warp does: the threads that wait at the barrier (or have
    exited) hold their slots while one lane runs a chain of dependent loads and adds, one
    instruction at a time at full latency, on one scheduler. A loop of ``n`` dependent steps
    by one thread costs ``n`` latencies; over the CTA's ``T`` threads it would cost about
    ``n / T`` plus ``log2 T`` combining steps. A launch of one thread uses one lane of one of
    the GPU's SMs.

    Example
    -------
    ``kernels/serial_work/serial.cu``: ``block_sum_thread0`` (``if (threadIdx.x == 0)`` sums
    the CTA's 256 partials in a loop), ``row_scan_lane0`` (a ``lane == 0`` helper that walks a
    row), ``SERIAL_SUM`` (a macro: one thread of a one-CTA launch adds the array).

    Fix
    ---
    Split the loop over the CTA: each thread a strided share, then a warp reduction with
    ``__shfl_down_sync`` and one across the warps in shared memory (or ``cub::BlockReduce``);
    a running sum becomes a parallel scan (``cub::BlockScan``, a warp scan per 32 elements);
    work of a whole launch of one thread goes to a second kernel with a grid over the data
    (``cub::DeviceReduce``), or many independent problems one per thread or warp.

    How the estimate is made
    ------------------------
    An upper bound on the launch model (Amdahl): the region's part of the critical path (its
    chain of dependent instructions by latency class, as one warp that runs it adds it, and its
    issued instructions) divided by the gain, the CTA's threads over the threads that run it
    (for a launch of one warp, the device's resident threads), and its warp instructions packed
    into full warps; the memory traffic unchanged. The real version pays a reduction tree and a
    barrier or two, so it gains less.

    Fix safety
    ----------
    Display-only: the parallel version changes the order of the additions (floating-point
    results may differ in the last bits) and the kernel's structure.
    """

    id = "GA107"
    name = "serial-work"
    title = "Serial work: one thread or warp of the CTA works while the rest wait"
    severity = "warning"
    models = ("trace",)
    options = {"min_share": 0.08, "min_gain": 4.0, "min_instructions": 64}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        simt = ctx.simt
        if not simt.regions:
            return
        rates = memory_rates(ctx.device)
        view = ctx.trace_view
        before = view_traffic(ctx.device, view)
        work = before.work
        if rates is None or work is None:
            return
        t_before = launch_times(before, ctx.device, rates)
        if t_before is None:
            return
        min_share = float(ctx.option("min_share"))
        shared = _partition(simt.regions)
        for region in simt.regions:
            if id(region) in shared:
                continue
            gain = _gain(ctx, region)
            if gain < float(ctx.option("min_gain")):
                continue
            if region.issued < float(ctx.option("min_instructions")):
                continue
            d = Serial(
                chain=tuple(region.chain.items()),
                chain_unordered=tuple(region.chain_unordered.items()),
                issued=region.issued,
                pipes=tuple(region.pipes.items()),
                lanes=region.lanes,
                gain=gain,
                whole_launch=region.whole_launch,
                share=0.0,
            )
            t_none = launch_times(_after(ctx, before, d, math.inf), ctx.device, rates)
            if t_none is None:
                continue
            # the region's share is at least what shrinking it by the gain saves: the launch
            # model is not monotone in a chain's waits (fewer waits, fewer phases for memory
            # and compute to overlap in: execution.phase_overlap), so the launch without the
            # region can model longer than with a gain-th of it; the point must stay under
            # Amdahl's bound of the share it reports
            t_gain = launch_times(_after(ctx, before, d, gain), ctx.device, rates)
            if t_gain is not None and t_gain.time_s < t_none.time_s:
                t_none = t_gain
            share = 1.0 - t_none.time_s / t_before.time_s
            if share < min_share:
                continue
            mine = [ln for ln in region.lines if ctx.same_file(ln.file) and ln.line > 0]
            if not mine:
                continue
            top = _heaviest(ctx, mine)
            span = sorted({ln.line for ln in mine})
            who = (
                f"the launch's {region.cta_threads} thread{'s' if region.cta_threads > 1 else ''}"
                if region.whole_launch
                else f"{region.threads:.3g} of the CTA's {region.cta_threads} threads"
                + (f" ({region.warps:.2g} warp{'s' if region.warps > 1.5 else ''})")
            )
            what = "a loop" if region.looped else "a run of code"
            yield self.finding(
                ctx,
                f"{what} (lines {_ranges(span)}) runs on {who}, {region.lanes:.3g} active "
                f"lane{'s' if region.lanes >= 1.5 else ''} a warp instruction, and is "
                f"{share:.0%} of the modelled launch time ({region.issued:.0f} instructions "
                "one after another on one warp of each CTA"
                + (")" if region.whole_launch else ", while the other threads wait)")
                + ": "
                + (
                    "give the work to many threads: a grid over the data with a block "
                    "reduction (or a scan) and a second pass, or many independent problems "
                    "at once"
                    if region.whole_launch
                    else "split it over the CTA: a strided share per thread, then a warp "
                    "shuffle reduction and one across the warps (a parallel scan for a "
                    "running sum), or move it to a second kernel"
                ),
                line=top.line,
                evidence=[
                    Evidence("serial_time_share", round(share, 4), min_share, ">=", "fraction"),
                    Evidence("threads_running_it", round(region.threads, 3), unit="threads"),
                    Evidence("cta_threads", region.cta_threads, unit="threads"),
                    Evidence("warps_running_it", round(region.warps, 3), unit="warps"),
                    Evidence("active_lanes", round(region.lanes, 3), unit="lanes"),
                    Evidence("width_gain", round(gain, 2), float(ctx.option("min_gain")), ">="),
                    Evidence(
                        "serial_instructions",
                        round(region.issued, 1),
                        float(ctx.option("min_instructions")),
                        ">=",
                        "instructions a warp",
                    ),
                    Evidence("lines", _ranges(span)),
                    Evidence("whole_launch", region.whole_launch),
                ],
                details=replace(d, share=round(share, 4)),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Serial)
        inputs: dict[str, Any] = {
            "serial_time_share": d.share,
            "width_gain": round(d.gain, 2),
            "serial_instructions": round(d.issued, 1),
        }
        before = view_traffic(ctx.device, ctx.trace_view)
        if before.work is not None:
            after = _after(ctx, before, d, d.gain)
            est = launch_change_estimate(
                ctx.device,
                before,
                after,
                f"the serial region run by {d.gain:.0f} times as many threads (its chain and "
                "instructions divided by that, no reduction tree or barrier added; the memory "
                "traffic the same)",
                inputs,
            )
            if est is not None:
                return est
        ratio = 1.0 / max(1.0 - d.share, 1e-3)
        return Estimate(
            round(max(ratio, 1.0), 3),
            "upper-bound",
            "Amdahl: the launch time without the serial region's share",
            inputs,
        )


def _heaviest(ctx: RuleContext, lines: list[Any]) -> Any:
    """The line of the kernel's own body with the most warp instructions (a helper the kernel
    calls, not inlined, is reported at its call), else the heaviest of all."""
    try:
        ks = ctx.kernel_source
        first, last = ks.decl_line, ks.body_lines[1]
    except ModelUnavailable:
        return lines[0]
    return next((ln for ln in lines if first <= ln.line <= last), lines[0])


def _ranges(lines: list[int]) -> str:
    """``[3, 4, 5, 9]`` as ``3-5, 9``."""
    out: list[str] = []
    start = prev = None
    for ln in lines:
        if prev is not None and ln == prev + 1:
            prev = ln
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = ln
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)
