"""GA102 tail-effect: a grid smaller than the GPU, or a partial last wave that leaves SMs idle."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from gpuadvise.rules import (
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    active_lanes,
    counted,
    is_grid_stride,
    launch_times,
    memory_rates,
    small_grid_estimate,
    uniform_lanes,
    view_traffic,
)

# PTX instructions per lane of a memory access above which the tail is left to the wave count
# (the launch model does not see arithmetic): a streaming kernel runs about 5-15, a stencil 10-20
ALU_PER_MEMORY_ACCESS = 24


def _sm_count(ctx: RuleContext) -> int:
    """The device's SM count (the waves model, read before it, needs it too)."""
    sms = ctx.device.sm_count
    if not sms:
        raise ModelUnavailable(f"{ctx.device.name} has no SM count")
    return int(sms)


def _tail_fed(whole: Any, fill: float) -> bool:
    """Whether a launch bound by memory bandwidth (DRAM or L2) keeps it busy through its last
    wave: by Little's law the tail's warps, ``fill`` of the wave's, keep ``fill`` of the bytes in
    flight, enough while the latency term over ``fill`` stays within the memory term. Such a
    tail moves its bytes at the same bandwidth as the full waves: the SMs it leaves empty would
    have waited on the same memory (the rounds of CTAs the execution model counts on a chain
    are not on the launch's critical path there)."""
    if whole.bound_by not in ("dram", "l2") or fill <= 0:
        return False
    return bool(whole.latency_s / fill <= whole.memory_s)


def _grid_stride(ctx: RuleContext) -> bool:
    """Whether the kernel loops and reads ``gridDim`` (a grid-stride loop): False without its
    source."""
    try:
        return is_grid_stride(ctx.kernel_source)
    except ModelUnavailable:
        return False


@dataclass(frozen=True)
class Shortfall(FindingDetails):
    """Which of the two launch shapes fired: ``small-grid`` or ``tail``."""

    kind: str


class TailEffect(Rule):
    """A grid too small for the GPU, or a last wave of CTAs that leaves most SMs idle.

    What it detects
    ---------------
    Two launch shapes, reported at the kernel's declaration:

    - small grid: fewer CTAs than ``min_ctas_per_sm`` x the SM count (default 1: fewer CTAs than
      SMs), so some SMs get no work at all;
    - tail effect: at least one full wave (a wave is the CTAs resident at once: blocks per SM at
      this occupancy x SMs) and a partial last wave that leaves at least ``min_tail_idle`` of the
      run's SM time idle (``tail_idle = empty slots of the last wave / all slots``). Many waves
      dilute the tail, so this fires only for a few waves with a sparse last one.

    A grid of less than one wave but at least one CTA per SM is not reported: every CTA runs at
    once; whether more CTAs would help is GA106's question (few warps per SM waiting on their
    loads, Little's law) or the occupancy's (GA101). Nor is a kernel whose lanes all load and
    store the same addresses (GA105: its threads are copies of one, and more CTAs copy it more),
    nor a launch whose CTAs mostly make no memory access (GA108: a grid sized past the data).

    Why it is slow
    --------------
    CTAs of one launch run in waves. While the last, partial wave runs, the SMs without a CTA of it
    idle (nothing else of this launch is left to run), so a launch of 1.1 waves takes about as long
    as 2 full waves. NVIDIA's DirectCompute guide's heuristics ("more thread groups than
    multiprocessors", "more than 2 per multiprocessor") come from the same reasoning; on a GPU with
    132 SMs and up to 32 resident CTAs each, a grid needs thousands of CTAs for the tail not to
    matter.

    Example
    -------
    ``kernels/tail/tail.cu``: ``scale_tail`` launches 1.25 waves on an H100 (a last wave 25 %
    full, 37.5 % of SM time idle) and ``scale_small_grid`` 66 CTAs for 132 SMs; ``scale_stride``
    does the same work with a grid-stride loop over exactly one wave.

    Fix
    ---
    Make the grid a whole number of waves, or many waves: a grid-stride loop launched with
    ``ctas_per_wave`` (or a multiple) CTAs, more work per CTA, or a block size that divides the
    work into whole waves. For a small grid, split the work into more, smaller CTAs.

    How the estimate is made
    ------------------------
    Tail effect: on the execution model when the kernel was traced (it sees the tail itself: the
    busiest SM's CTAs in rounds of the resident ones): the launch as it is against the same work
    in one whole wave of CTAs each doing its share (the grid-stride loop of the variant), the
    launch floor under both; a memory-bound tail has the DRAM to itself and costs little, and
    nothing (point 1.00x) when the launch is bound by DRAM or L2 bandwidth and the last wave's
    warps alone keep enough bytes in flight to feed it (Little's law: the latency term over the
    wave's fill within the memory term; Rodinia hotspot3D's 1.29 waves, whose time on an H200
    is affine in the CTAs: 10.6 us for 792, 12.4 for 1024, 17.2 for 1584, .gpu/s8-par). Without
    the instruction counts, the memory model's waves; without a trace, ``ceil(waves) / waves``
    (all CTAs equally long) applied to the launch's work. Small grid: on the launch model
    (memory, issue and pipes, the critical path of dependent instructions, the launch floor), not
    ``SMs / CTAs``: the same work in more CTAs, each doing its share, the bytes in flight growing
    with them, DRAM and L2 unchanged. A kernel that reads ``gridDim`` (a grid-stride loop, whose
    loop the CTAs share) gets the whole wave the GPU holds; any other is spread over at least
    ``min_ctas_per_sm`` x SMs CTAs keeping each CTA's critical path (a serial phase, a loop of
    dependent steps, a ``tid == 0`` section gains nothing from more SMs). The upper bound
    splits the work over the whole wave, at peak rates and full overlap. A kernel of
    a few microseconds gets little whatever its grid. Without a trace, no estimate.

    Fix safety
    ----------
    Display-only: changing the grid changes which work each CTA does, so the kernel must be
    written for it (a grid-stride loop). The grid of whole waves is offered as a launch only
    when the CPU emulator runs it and finds the outputs the launch as it is computes (a 1-D
    grid only); otherwise the advice says to write the grid-stride loop first, or, for a
    kernel that has one (it loops and reads ``gridDim``) but whose launches the emulator cannot
    run whole, names the grid of whole waves nearest the launch, a launch change where the
    outputs do not depend on the grid.
    """

    id = "GA102"
    name = "tail-effect"
    title = "Small grid or partial last wave (tail effect)"
    severity = "warning"
    models = ("occupancy", "waves")
    options = {"min_ctas_per_sm": 1.0, "min_tail_idle": 0.1}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        if ctx.has_model("trace"):
            alike = uniform_lanes(ctx.trace)
            if alike is not None and alike.duplicated():
                return  # the threads are copies (GA105): more CTAs would copy them more
            working = ctx.trace.launch_working_ctas
            if working is not None and working <= 0.5 * ctx.trace.total_ctas:
                return  # most CTAs make no access (GA108): their waves are no tail
        w = ctx.waves
        sms = _sm_count(ctx)
        min_per_sm = float(ctx.option("min_ctas_per_sm"))
        if w.total_ctas < min_per_sm * sms:
            idle = max(sms - w.total_ctas, 0)
            yield self.finding(
                ctx,
                f"small grid: {w.total_ctas} CTAs for {sms} SMs"
                + (f" ({idle} SMs have no work)" if idle else "")
                + f"; the GPU holds {w.ctas_per_wave} CTAs at once at this occupancy",
                line=ctx.kernel_line,
                evidence=[
                    Evidence("ctas_per_sm", round(w.total_ctas / sms, 4), min_per_sm, "<"),
                    Evidence("total_ctas", w.total_ctas, unit="CTAs"),
                    Evidence("sm_count", sms, unit="SMs"),
                    Evidence("ctas_per_wave", w.ctas_per_wave, unit="CTAs"),
                ],
                details=Shortfall("small-grid"),
            )
            return
        threshold = float(ctx.option("min_tail_idle"))
        if w.full_waves >= 1 and w.last_wave_ctas > 0 and w.tail_idle >= threshold:
            yield self.finding(
                ctx,
                f"tail effect: {w.waves:.2f} waves of {w.ctas_per_wave} CTAs; the last wave is "
                f"{w.last_wave_fill:.0%} full, leaving {w.tail_idle:.0%} of SM time idle",
                line=ctx.kernel_line,
                evidence=[
                    Evidence("tail_idle", round(w.tail_idle, 4), threshold, ">="),
                    Evidence("waves", round(w.waves, 3)),
                    Evidence("last_wave_fill", round(w.last_wave_fill, 4)),
                    Evidence("ctas_per_wave", w.ctas_per_wave, unit="CTAs"),
                ],
                details=Shortfall("tail"),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        w = ctx.waves
        if finding.details_as(Shortfall).kind == "small-grid":
            return small_grid_estimate(ctx, float(ctx.option("min_ctas_per_sm")))
        speedup = math.ceil(w.waves) / w.waves
        inputs = {"waves": w.waves, "ctas_per_wave": w.ctas_per_wave, "tail_idle": w.tail_idle}
        modelled = self._tail_on_model(ctx, inputs)
        if modelled is not None:
            return modelled
        return Estimate(
            round(speedup, 3),
            "upper-bound",
            f"ceil(waves) / waves = {math.ceil(w.waves)} / {w.waves:.3f}, all CTAs equally long; "
            "a partial wave runs with less contention, so the real gain is smaller (no trace: "
            "the launch model could not say how much)",
            inputs,
        )

    def _tail_on_model(self, ctx: RuleContext, inputs: dict[str, Any]) -> Estimate | None:
        """The tail on the launch model: the full waves' work at full residency, the last
        wave's share of it with only its CTAs resident (the SMs' own work on the SMs it holds,
        DRAM and L2 at full bandwidth unless its fewer warps leave too few bytes in flight),
        against the whole work at full residency (no tail), the launch floor under both. A
        memory-bound launch's tail gets the DRAM to itself and costs little; a compute-bound
        one's idles SMs. None without a trace."""
        w = ctx.waves
        rates = memory_rates(ctx.device)
        if not ctx.has_model("trace") or rates is None or not w.waves:
            return None
        t = view_traffic(ctx.device, ctx.trace_view)
        if t.work is None:
            # without the emulator's instruction counts the launch model counts memory work
            # only: a kernel that does much arithmetic per memory access may be bound by it,
            # and its tail then idles SMs as the waves say
            emu = ctx.emulation
            lanes = int(active_lanes(ctx.trace.records["mask"]).sum())
            if emu is None or not lanes or emu.lane_instructions > ALU_PER_MEMORY_ACCESS * lanes:
                return None
        whole = launch_times(t, ctx.device, rates)
        if whole is None:
            return None
        if t.work is not None:
            return self._tail_on_execution_model(ctx, t, whole, inputs)
        tail_share = (w.waves - w.full_waves) / w.waves  # of the launch's work
        fill = w.last_wave_fill
        busy_sms = min(1.0, w.last_wave_ctas / max(ctx.device.sm_count or 1, 1))

        def part(share: float, resident: float, sms: float) -> float:
            # with the kernel's work the model spreads the part's CTAs over the SMs itself
            # (its busiest SM); without it, the part's per-SM work on the SMs it holds
            per_sm = 1.0 if t.work is not None else sms
            scaled = replace(
                t,
                l1_cycles=t.l1_cycles * share / per_sm,
                shared_wavefronts=t.shared_wavefronts * share / per_sm,
                instructions=t.instructions * share / per_sm,
                l2_load_sectors=t.l2_load_sectors * share,
                l2_store_sectors=t.l2_store_sectors * share,
                l2_partial_store_sectors=t.l2_partial_store_sectors * share,
                l2_scattered_store_sectors=t.l2_scattered_store_sectors * share,
                dram_bytes=t.dram_bytes * share,
                dram_load_bytes=t.dram_load_bytes * share,
                load_requests=t.load_requests * share,
                shared_requests=t.shared_requests * share,
                resident_warps=t.resident_warps * resident,
                work=None
                if t.work is None
                else replace(t.work, ctas=max(1, round(t.work.ctas * share))),
            )
            times = launch_times(scaled, ctx.device, rates)
            return 0.0 if times is None else times.work_s

        before = part(1.0 - tail_share, 1.0, 1.0) + part(tail_share, fill, max(busy_sms, 1e-9))
        after = whole.work_s
        floor = whole.floor_s
        speedup = (floor + before) / (floor + after)
        inputs.update(
            model=MODEL,
            bound_by=whole.bound_by,
            bound_by_before=whole.bound_by,
            bound_by_after=whole.bound_by,
            before_s=floor + before,
            after_s=floor + after,
        )
        return Estimate(
            round(max(speedup, 1.0), 3),
            "upper-bound",
            f"the launch model, waves and all: the {counted(w.full_waves, 'full wave')} at full residency, "
            f"the last wave ({fill:.0%} full) with only its CTAs resident, against the whole "
            f"work at full residency; the launch is bound by {whole.bound_by} "
            f"({whole.describe()}), plus the launch floor: {speedup:.3f}x. A memory-bound tail "
            "has the DRAM to itself and costs little; a compute-bound one idles the SMs it "
            "leaves empty",
            inputs,
        )

    def _tail_on_execution_model(
        self, ctx: RuleContext, t: Any, whole: Any, inputs: dict[str, Any]
    ) -> Estimate | None:
        """The tail on the execution model, which sees it itself: the launch as it is (the
        busiest SM's CTAs in rounds of the resident ones, the last round part-full) against
        the same work in one whole wave of CTAs, each doing its share (the grid-stride loop the
        variant asks for), the launch floor under both; the bound at peak rates and full
        overlap."""
        w = ctx.waves
        rates = memory_rates(ctx.device)
        target = max(int(w.ctas_per_wave), 1)
        work = t.work
        spread = replace(t, work=replace(work.per_cta_scaled(work.ctas / target), ctas=target))
        if rates is None:
            return None
        after = launch_times(spread, ctx.device, rates)
        # the same barrier steps before and after: a grid-stride loop changes the launch's shape,
        # not the work between its barriers (HeCBench scan_bcao, barrier-bound: 1.62x without
        # them where the tail idles 11% of the SMs; measured 1.65 ms against 1.64 modelled)
        peak = partial(launch_times, device=ctx.device, rates=rates, peak_dram=True, barriers=True)
        floor, whole_peak = peak(spread), peak(t)
        if after is None or floor is None or whole_peak is None:
            return None
        point = whole.time_s / after.time_s
        fed = _tail_fed(whole, w.last_wave_fill)
        if fed:
            point = 1.0
        bound = max(whole.time_s / floor.time_s, point, 1.0)
        inputs.update(
            model=MODEL,
            point_speedup=round(point, 3),
            peak_speedup=round(whole_peak.time_s / floor.time_s, 3),
            bound_by=whole.bound_by,
            bound_by_before=whole.bound_by,
            bound_by_after=after.bound_by,
            before_s=whole.time_s,
            after_s=whole.time_s if fed else after.time_s,
        )
        fed_text = (
            f". The launch is bound by {whole.bound_by} and its last wave's warps alone keep "
            f"enough bytes in flight to feed it (latency {whole.latency_s * 1e6:.2f} us over a "
            f"{w.last_wave_fill:.0%} full wave against {whole.memory_s * 1e6:.2f} us of "
            "memory): the tail runs at the same bandwidth, point 1.00x"
            if fed
            else ""
        )
        return Estimate(
            round(bound, 3),
            "upper-bound",
            f"the launch model, waves and all: as it is, {whole.describe()}, bound by "
            f"{whole.bound_by}; the same work in one whole wave of {target} CTAs, each doing "
            f"{work.ctas / target:.2f} times a CTA's share (a grid-stride loop): "
            f"{after.describe()}, bound by {after.bound_by}. Point {point:.3f}x, upper bound "
            f"{bound:.3f}x (after at peak rates and full overlap). A memory-bound tail has the "
            "DRAM to itself and costs little; a tail of CTAs bound by their dependent chains or "
            "their issue idles the SMs it leaves empty" + fed_text,
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        w = ctx.waves
        if finding.details_as(Shortfall).kind == "small-grid":
            # not run on the emulator as a launch: a small grid's kernel that reads gridDim
            # strides over the whole array, so the check would emulate all of it twice (a
            # corpus kernel's 6 GB and minutes); the estimate assumes the whole wave for such
            # a kernel and the advice says so
            return Variant(
                "display-only",
                f"split the work into at least {ctx.device.sm_count} CTAs (smaller blocks or "
                f"less work per CTA); up to {w.ctas_per_wave} run at once (a grid-stride loop "
                f"shares its work among {w.ctas_per_wave} CTAs: launch them)",
            )
        text = (
            f"launch a whole number of waves: a grid-stride loop over {w.ctas_per_wave} CTAs "
            "(or a multiple), or more work per CTA"
        )
        grid = ctx.launch.grid.as_tuple()
        if grid[1] != 1 or grid[2] != 1:
            return Variant("display-only", text + " (a 2-D or 3-D grid: the kernel decides how)")
        # the grid is offered as a launch only when the kernel as it is computes the same
        # with it (a grid-stride loop does; one element per thread does not)
        check = ctx.services.compare_launch((w.ctas_per_wave, 1, 1), ctx.launch.block.as_tuple())
        if not check.same and _grid_stride(ctx):
            whole = max(1, round(w.waves)) * w.ctas_per_wave
            return Variant(
                "display-only",
                f"launch a whole number of waves: the kernel loops over its work with gridDim "
                f"already (a grid-stride loop), so {whole} CTAs ({max(1, round(w.waves))} whole "
                f"waves of {w.ctas_per_wave}) or another multiple of {w.ctas_per_wave} is a "
                "launch change only"
                + (
                    f", where its outputs do not depend on the grid ({check.why})"
                    if check.why.startswith("not checked")
                    else f"; but its outputs depend on the grid ({check.why})"
                ),
            )
        if not check.same:
            return Variant(
                "display-only",
                text + f"; the kernel as it is does not compute the same with {w.ctas_per_wave} "
                f"CTAs ({check.why}): give it a grid-stride loop first",
            )
        return Variant(
            "display-only",
            text + f" (the emulator ran {check.how} and found the same outputs)",
            launch={"grid": [w.ctas_per_wave, 1, 1]},
        )
