"""GA102's small grid on the launch model: the same work spread over every SM (the rule's
estimate of a grid with fewer CTAs than ``min_ctas_per_sm`` x SMs)."""

from __future__ import annotations

import math
from dataclasses import replace

from gpuadvise.devices import memory_rates
from gpuadvise.model.roofline import launch_times, with_floor
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.estimates import MODEL, view_traffic
from gpuadvise.rules.findings import Estimate


def small_grid_estimate(ctx: RuleContext, min_ctas_per_sm: float) -> Estimate:
    """The same work spread over every SM, on the launch model: each of the new CTAs does
    its share of the instructions, L1 and shared work; the resident warps (bytes in flight)
    grow with the spread; DRAM and L2 stay; the launch floor is under both. The point keeps
    each CTA's critical path, the bound splits it too. Not from the block counts alone: a
    grid of a few microseconds gains little however it is spread."""
    w = ctx.waves
    sms = int(ctx.device.sm_count or 0)
    ctas = max(w.total_ctas, 1)
    rates = memory_rates(ctx.device)
    if not ctx.has_model("trace") or rates is None:
        return Estimate(
            None,
            "none",
            "not estimated: without a trace of the kernel the launch model cannot tell how "
            f"much of its time the {ctas} CTA(s) spend on work more SMs would share",
        )
    t = view_traffic(ctx.device, ctx.trace_view)
    # after: at least the CTAs per SM asked for, the warps in flight growing with them
    # the CTAs the fix launches: a kernel that reads gridDim (a grid-stride loop) shares its
    # loop among any number of them, so the whole wave the GPU holds (scalarProd's 128
    # CTAs of a grid-stride loop are 8 warps per SM where 64 fit: the bytes in flight
    # grow eightfold); any other kernel's work is cut into CTAs by its indexing, so it
    # is spread over the SMs (at least min_ctas_per_sm each), and only the bound splits
    # it over the whole wave
    spread_to = max(sms, math.ceil(min_ctas_per_sm * sms))
    wave = max(int(w.ctas_per_wave), spread_to)
    grid_stride = t.work is not None and t.work.reads_grid_size
    target = wave if grid_stride else spread_to
    cap = float(ctx.device.max_warps_per_sm * sms)
    share = ctas / target
    spread_out = replace(t, resident_warps=min(t.resident_warps * target / ctas, cap))
    splits = []  # the bound's after side: the work split over n CTAs, the n that runs shortest
    if t.work is not None:
        work = t.work
        split_work = replace(work.per_cta_scaled(share), ctas=target)
        kept = replace(work, ctas=target, pipes={k: v * share for k, v in work.pipes.items()},
                       shared_requests=work.shared_requests * share,
                       shared_wavefronts=work.shared_wavefronts * share)  # fmt: skip
        spread_out = replace(spread_out, work=split_work if grid_stride else kept)
        # each CTA launched costs the block scheduler cta_launch_ns on its SM (measured: 79.4 ns
        # on an H200), so the whole wave is not always the shortest split: every doubling from
        # the spread to the wave is tried, the shortest taken
        n = spread_to
        while True:
            n = min(n, wave)
            splits.append(replace(t, resident_warps=min(t.resident_warps * n / ctas, cap),
                                  work=replace(work.per_cta_scaled(ctas / n), ctas=n)))  # fmt: skip
            if n >= wave:
                break
            n *= 2
    else:  # no instruction counts (the GPU tracer): the per-SM work spread by hand
        spread_out = replace(spread_out, l1_cycles=t.l1_cycles * share,
                             shared_wavefronts=t.shared_wavefronts * share,
                             instructions=t.instructions * share)  # fmt: skip
        splits.append(replace(spread_out, resident_warps=min(t.resident_warps * wave / ctas, cap)))
    before = launch_times(t, ctx.device, rates)
    after = launch_times(spread_out, ctx.device, rates)
    floors = []
    for x in splits:
        peak_x = launch_times(x, ctx.device, rates, peak_dram=True)
        if peak_x is not None:
            floors.append((with_floor(peak_x), x.work.ctas if x.work is not None else wave, peak_x))
    before_peak = launch_times(t, ctx.device, rates, peak_dram=True)
    if before is None or after is None or not floors or before_peak is None:
        return Estimate(None, "none", "not estimated: the device model lacks its clock")
    _, split_ctas, floor = min(floors, key=lambda f: (f[0], f[1]))
    bound = with_floor(before) / with_floor(floor)
    point = with_floor(before) / with_floor(after)
    peak = with_floor(before_peak) / with_floor(floor)
    return Estimate(
        round(max(bound, point, 1.0), 3),
        "upper-bound",
        f"the same work in {target} CTAs over all {sms} SMs instead of {ctas}, on the "
        f"launch model: before {before.describe()} (bound by {before.bound_by}); spread, "
        + (
            "each CTA's loop shorter (the kernel reads gridDim: a grid-stride loop): "
            if t.work is not None and t.work.reads_grid_size
            else "each CTA's critical path kept (the kernel does not read gridDim: a serial "
            "phase gains nothing from more SMs): "
        )
        + f"{after.describe()} (bound by {after.bound_by}); over {split_ctas} CTAs (the "
        f"shortest of every doubling from {spread_to} to the whole wave of {wave}: each CTA "
        f"launch costs the block scheduler time on its SM) with the critical path split too (a "
        f"grid-stride loop), at peak rates and full overlap: "
        f"{floor.describe()} (bound by {floor.bound_by}). Each with the launch floor of "
        f"{before.floor_s * 1e6:.1f} us: point {point:.2f}x, upper bound {bound:.2f}x",
        {"model": MODEL, "total_ctas": ctas, "sm_count": sms, "point_speedup": round(point, 3),
         "peak_speedup": round(peak, 3),
         "bound_by_before": before.bound_by, "bound_by_after": after.bound_by,
         "before_s": with_floor(before), "after_s": with_floor(after),
         "floor_s": with_floor(floor)},
    )  # fmt: skip
