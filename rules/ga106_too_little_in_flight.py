"""GA106 too-little-in-flight: few warps per SM, each waiting on its own memory round trips."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.rules import (
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    Rule,
    RuleContext,
    Space,
    Traffic,
    Variant,
    launch_times,
    memory_rates,
    uniform_lanes,
    view_traffic,
)

# the terms of a launch whose warps wait: their dependent chains (a load per loop iteration, each
# waited for before the next is issued) or Little's law (too few bytes in flight for the DRAM)
WAITING = ("dependency", "latency")


@dataclass(frozen=True)
class InFlight(FindingDetails):
    """Why the warps are few: ``grid`` (fewer CTAs than the GPU holds at once) or
    ``occupancy`` (a full wave, but few warps fit on an SM); the CTA count of the fix."""

    limiter: str
    target_ctas: int


def _spread(t: Traffic, target: int, warps: float) -> Traffic:
    """The same work in ``target`` CTAs, each doing its share (its loops that much shorter),
    ``warps`` resident on the device."""
    if t.work is None:
        return replace(t, resident_warps=warps)
    w = t.work
    return replace(
        t, resident_warps=warps, work=replace(w.per_cta_scaled(w.ctas / target), ctas=target)
    )


def _unchained(t: Traffic) -> Traffic:
    """``t`` with nothing waited for: no dependent chains beyond a warp's own issue, and
    latency hidden (the bytes in flight unlimited)."""
    work = None if t.work is None else replace(t.work, chain={})
    return replace(t, bytes_in_flight_per_warp=0.0, work=work)


def waited_bytes_per_warp(t: Traffic) -> float:
    """The bytes a warp keeps in flight by what it waits for: its load bytes (from the L2 side)
    over the global loads on its critical path, the loads issued together between two waits
    (one per iteration of a loop that uses each load before it issues the next); the traffic's
    own figure (independent loads back to back) when the chain has no global link."""
    work = t.work
    links = 0.0 if work is None else float(work.chain.get("global", 0.0))
    warps = 0.0 if work is None else float(work.ctas * max(work.warps_per_cta, 1))
    if links <= 0 or warps <= 0 or t.load_requests <= 0:
        return t.bytes_in_flight_per_warp
    return t.l2_load_sectors * 32.0 / warps / links


class TooLittleInFlight(Rule):
    """A launch whose few resident warps each wait on their own memory round trips.

    What it detects
    ---------------
    A traced launch with at least one CTA per SM (fewer: GA102's small grid), fewer CTAs than
    the GPU holds at once (a full wave: the occupancy's, GA101), and fewer than
    ``max_warps_fraction`` of the SM's warps resident on average, bound on the launch model by
    the warps' waiting: the critical path of dependent instructions (a loop that issues one load
    per iteration and waits for it before the next) or Little's law (the bytes the resident
    warps keep in flight against DRAM bandwidth x latency), and not by the launch floor (GA501).
    Reported at the kernel's declaration, with why the warps are few: the grid (fewer CTAs than
    the GPU holds at once: ``cuda-samples``' histogram256, 240 CTAs of 6 warps on 132 SMs,
    about 11 of 64 warps per SM) or the occupancy (a full wave of CTAs, few of them per SM).
    Silent where the lanes of every warp load and store the same addresses (GA105: the threads
    are copies of one thread, and more of them would copy it more).

    Why it is slow
    --------------
    By Little's law a GPU reaches its DRAM bandwidth only with bandwidth x latency bytes in
    flight: about 1.2 MB on an H100 (3 TB/s x ~400 ns), 9 KB per SM. A warp that issues one
    4-byte load per lane and waits for it keeps 128 bytes in flight; 11 warps per SM keep 1.4 KB,
    a sixth of what the SM needs, and the stream runs at a fraction of the bandwidth while the
    SMs idle. GA102 leaves a grid of at least one CTA per SM to occupancy and GA101 looks only
    at the theoretical occupancy: neither sees a grid below one wave of a memory-bound kernel.

    Example
    -------
    ``kernels/inflight/inflight.cu``: ``sum_few`` (a grid-stride sum launched with 264 CTAs of
    128 threads, 8 of 64 warps per SM, one load in flight per warp), ``sum_macro`` and
    ``sum_template`` (the same loop written with a macro and a template); ``sum_wave`` launches
    the whole wave the GPU holds and ``sum_unrolled`` keeps four independent loads in flight per
    thread: both stay silent.

    Fix
    ---
    More warps or more loads per warp. More CTAs when the kernel's indexing allows it: a
    grid-stride loop shares its work among any grid; sweep the CTA count from the SM count up
    to the wave the GPU holds, do not guess it (measured on an H200 for the histogram: 3.8x at
    1320 CTAs, while 132 CTAs, one per SM, is 1.7x slower than the 240 it launches). Or more
    independent loads per thread: unroll the loop so that its loads issue before the first is
    used (``#pragma unroll 4`` over independent iterations, four accumulators), or vector loads
    (``float4``). When the occupancy limits the warps, see GA101.

    How the estimate is made
    ------------------------
    An upper bound on the launch model: the launch as it is (sustained rates) against the same
    work with nothing waited for (no dependent chains beyond each warp's own issue, latency
    hidden), spread over the whole wave of CTAs the GPU holds when the grid is the limit (each
    CTA its share, a grid-stride loop), at peak DRAM bandwidth and full overlap; the launch
    floor under both. No fix that only adds parallelism goes past the launch's throughput terms
    (L1, L2, DRAM, issue, pipes), which it keeps. When the kernel reads ``gridDim`` (a
    grid-stride loop) and the grid is the limit, the point is that launch change: the whole
    wave, each CTA's loop (its chain) shorter, at sustained rates. Work a CTA repeats (a shared
    histogram zeroed and merged per CTA) grows with more CTAs and is not modelled: the point is
    the higher for it, the bound holds.

    Fix safety
    ----------
    Display-only. A grid-stride loop's whole wave is offered as a launch only when the emulator
    runs it and finds the outputs the launch as it is computes (a 1-D grid only); a kernel that
    writes one partial result per CTA (the histogram's per-block histograms) needs its buffers
    and the pass that merges them resized first. Unrolling is the author's change.
    """

    id = "GA106"
    name = "too-little-in-flight"
    title = "Too little in flight: few warps per SM waiting on their loads"
    severity = "warning"
    models = ("occupancy", "waves", "trace")
    options = {"max_warps_fraction": 0.5, "min_ctas_per_sm": 1.0, "min_speedup": 1.2}

    def _shape(self, ctx: RuleContext, t: Traffic) -> tuple[str, int, float]:
        """(limiter, the fix's CTA count, warps resident after it)."""
        w = ctx.waves
        d = ctx.device
        cap = float(d.max_warps_per_sm * (d.sm_count or 1))
        if w.total_ctas < w.ctas_per_wave:
            target = max(int(w.ctas_per_wave), 1)
            warps = min(t.resident_warps * target / max(w.total_ctas, 1), cap)
            return "grid", target, warps
        return "occupancy", int(w.total_ctas), t.resident_warps

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        d = ctx.device
        rates = memory_rates(d)
        sms = d.sm_count
        if not ctx.has_model("trace") or rates is None or not sms or not d.max_warps_per_sm:
            return
        alike = uniform_lanes(ctx.trace)
        if alike is not None and alike.duplicated():
            return  # the threads are copies (GA105): more of them wait for the same loads
        w = ctx.waves
        if w.total_ctas < float(ctx.option("min_ctas_per_sm")) * sms:
            return  # GA102's small grid: SMs without work
        if w.total_ctas >= w.ctas_per_wave:
            return  # a full wave: the occupancy holds the warps (GA101's)
        t = view_traffic(d, ctx.trace_view)
        per_sm = t.resident_warps / sms
        most = float(ctx.option("max_warps_fraction")) * d.max_warps_per_sm
        if per_sm >= most:
            return
        before = launch_times(t, d, rates)
        if before is None or before.bound_by not in WAITING:
            return
        have = t.resident_warps * waited_bytes_per_warp(t) / sms
        need = rates.dram_sustained_gbps * rates.latency_ns / sms  # GB/s x ns = bytes
        if have >= need:
            return  # enough bytes in flight: the chain is not the loads' (GA106 is not its rule)
        recs = ctx.trace.records
        loads = recs["kind"] == int(Kind.LOAD)
        if (loads & (recs["space"] == int(Space.LOCAL))).sum() * 2 >= loads.sum():
            return  # the waited loads are a local array's or spills' (GA401's)
        limiter, target, _ = self._shape(ctx, t)
        est = self._estimate(ctx, t, limiter, target)
        # like for like (as a warning's severity is judged): the larger of the prediction with
        # both sides at sustained rates and with both at peak, not the bound that sets the
        # launch before at sustained rates against the one after at peak (the loaded-latency
        # model lengthens the before side: a thread-per-row walk whose warp-per-row rewrite is
        # GA301's crossed the threshold on that margin alone)
        like = est.speedup
        point, peak = est.inputs.get("point_speedup"), est.inputs.get("peak_speedup")
        if like is not None and isinstance(point, int | float) and isinstance(peak, int | float):
            like = min(like, max(float(point), float(peak)))
        if like is None or like < float(ctx.option("min_speedup")):
            return
        if est.inputs.get("bound_by_floor") in ("launch", "cta"):
            # with nothing waited for, a launch under its floor or its CTA launches: a short
            # kernel (GA501), whose spread over a full wave only launches more CTAs
            return
        why = (
            f"{w.total_ctas} CTAs where the GPU holds {w.ctas_per_wave} at once"
            if limiter == "grid"
            else f"{ctx.occupancy.active_blocks_per_sm} CTA(s) per SM fit at this occupancy"
        )
        chain = before.compute
        waits = (
            f"; a CTA's critical path is {chain.chain_cycles:.0f} cycles, most of it waiting "
            "on loads issued one after another"
            if chain is not None and before.bound_by == "dependency"
            else ""
        )
        yield self.finding(
            ctx,
            f"too little in flight: {per_sm:.1f} of {d.max_warps_per_sm} warps per SM ({why}) "
            f"keep about {have / 1e3:.1f} KB per SM in flight where Little's law wants "
            f"{need / 1e3:.1f} KB ({rates.dram_sustained_gbps:.0f} GB/s x "
            f"{rates.latency_ns:.0f} ns over {sms} SMs){waits}: the launch is bound by "
            f"{before.bound_by}, not by its traffic; more CTAs (sweep the count) or more "
            "independent loads per thread",
            line=ctx.kernel_line,
            evidence=[
                Evidence("warps_per_sm", round(per_sm, 2), round(most, 2), "<", "warps"),
                Evidence("bound_by", before.bound_by),
                Evidence("bytes_in_flight_per_sm", round(have), unit="B"),
                Evidence("littles_law_bytes_per_sm", round(need), unit="B"),
                Evidence("total_ctas", w.total_ctas, unit="CTAs"),
                Evidence("ctas_per_wave", w.ctas_per_wave, unit="CTAs"),
            ],
            details=InFlight(limiter, target),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(InFlight)
        return self._estimate(ctx, view_traffic(ctx.device, ctx.trace_view), d.limiter,
                              d.target_ctas)  # fmt: skip

    def _estimate(self, ctx: RuleContext, t: Traffic, limiter: str, target: int) -> Estimate:
        d = ctx.device
        rates = memory_rates(d)
        if rates is None:
            return Estimate(None, "none", "not estimated: the device model lacks memory rates")
        _, _, warps = self._shape(ctx, t)
        free = _unchained(_spread(t, target, warps))
        before = launch_times(t, d, rates)
        before_peak = launch_times(t, d, rates, peak_dram=True)
        floor = launch_times(free, d, rates, peak_dram=True)
        if before is None or before_peak is None or floor is None:
            return Estimate(None, "none", "not estimated: the device model lacks its clock")
        bound = before.time_s / floor.time_s
        inputs: dict[str, Any] = {
            "model": MODEL,
            "limiter": limiter,
            "target_ctas": target,
            "peak_speedup": round(before_peak.time_s / floor.time_s, 3),
            "bound_by_before": before.bound_by,
            "bound_by_after": floor.bound_by,
            "bound_by_floor": floor.bound_by,
            "before_s": before.time_s,
            "floor_s": floor.time_s,
        }
        point_text = ""
        work = t.work
        if limiter == "grid" and work is not None and work.reads_grid_size:
            after = launch_times(_spread(t, target, warps), d, rates)
            if after is not None:
                point = before.time_s / after.time_s
                inputs.update(point_speedup=round(point, 3), after_s=after.time_s,
                              bound_by_after=after.bound_by)  # fmt: skip
                bound = max(bound, point)
                point_text = (
                    f" The kernel reads gridDim (a grid-stride loop): launched with {target} "
                    f"CTAs, each loop shorter, {after.describe()}, bound by {after.bound_by}: "
                    f"point {point:.2f}x (work a CTA repeats not modelled)."
                )
        spread = (
            f"spread over the whole wave of {target} CTAs, each its share, "
            if limiter == "grid"
            else ""
        )
        return Estimate(
            round(max(bound, 1.0), 3),
            "upper-bound",
            f"the launch model: as it is, {before.describe()}, bound by {before.bound_by}; the "
            f"same work {spread}with nothing waited for (no dependent chains beyond each warp's "
            f"issue, latency hidden), at peak DRAM bandwidth and full overlap: "
            f"{floor.describe()}, bound by {floor.bound_by}: upper bound {bound:.2f}x (no fix "
            "that only adds parallelism goes past the throughput terms it keeps)." + point_text,
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(InFlight)
        sms = ctx.device.sm_count
        unroll = (
            "or keep several independent loads in flight per thread (unroll the loop so that "
            "its loads issue before the first is used; float4 loads)"
        )
        if d.limiter != "grid":
            return Variant(
                "display-only",
                f"the occupancy holds the warps per SM (see GA101): {unroll}",
            )
        text = (
            f"launch more CTAs, sweeping the count from {sms} up to the {d.target_ctas} the GPU "
            f"holds at once (the best is rarely either end), {unroll}"
        )
        work = ctx.trace_view.work
        grid = ctx.launch.grid.as_tuple()
        if work is None or not work.reads_grid_size or grid[1] != 1 or grid[2] != 1:
            return Variant(
                "display-only",
                text + "; the kernel's indexing decides how its work splits into more CTAs",
            )
        check = ctx.services.compare_launch((d.target_ctas, 1, 1), ctx.launch.block.as_tuple())
        if not check.same:
            return Variant(
                "display-only",
                text + f"; the kernel as it is does not compute the same with {d.target_ctas} "
                f"CTAs ({check.why}): resize what it writes per CTA first",
            )
        return Variant(
            "display-only",
            text + f" (the emulator ran {d.target_ctas} CTAs ({check.how}) and found the same "
            "outputs)",
            launch={"grid": [d.target_ctas, 1, 1]},
        )
