"""GA108 idle-ctas: most CTAs of the launch do nothing, a grid sized past the data."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.rules import (
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Rule,
    RuleContext,
    Variant,
    ceiling_s,
    idle_cost,
    launch_times,
    memory_rates,
    view_traffic,
)


@dataclass(frozen=True)
class Idle(FindingDetails):
    """The CTAs that work (the trace's estimate, rounded up), the launch's, and the traced CTAs
    and how many of them worked."""

    working: int
    total: int
    traced: int
    traced_working: int


class IdleCtas(Rule):
    """Most CTAs of the launch make no memory access at all: the grid is sized past the data.

    What it detects
    ---------------
    A traced launch whose CTAs mostly do nothing: the pipeline traces the first wave and, when
    some of its CTAs make no memory access, CTAs spread over the rest of the grid, and estimates
    how many of the launch's CTAs work (``launch_working_ctas``, bounded by the buffers'
    sizes). Reported at the kernel's declaration when at most ``max_working_share`` of the
    CTAs work (a grid sized from a whole matrix where one launch covers one row band:
    HeCBench's ``pathfinder`` launches rows x cols / 250 = 400,000 CTAs, of which the 417 that
    cover the 100,000 columns work; a kernel guarded by ``if (i >= n) return;`` under a grid
    of ``n`` x something). Not when no traced CTA makes an access while each warp runs more
    than ``max_idle_instructions`` instructions: CTAs that compute in registers and store only
    on a rare match (HeCBench's ``md5hash_kernel``) are busy, not idle.

    Why it is slow
    --------------
    An idle CTA is not free: the block scheduler launches it, its warps run up to their guard
    (or, as in ``pathfinder``, through loops and barriers whose work is masked off) and retire,
    and only then does its slot take the next CTA. Hundreds of thousands of idle CTAs take
    longer than the few that work.

    Example
    -------
    ``kernels/idle_ctas/idle.cu``: ``band_guard`` (a grid of 64 x the CTAs the band needs, each
    CTA past the band returning at its guard), ``band_macro`` (the guard in a macro) and
    ``band_template`` (in a template helper); ``band_sized`` launches the CTAs the band needs
    and ``band_stride`` shares a grid-stride loop: both stay silent.

    Fix
    ---
    Launch the CTAs the data needs: size the grid from the work of one launch (``ceil(cols /
    cols_per_cta)``), not from the whole problem.

    How the estimate is made
    ------------------------
    On the launch model (memory, issue and pipes, the critical path, CTA launches, the launch
    floor): the launch as it is against the working CTAs alone. Each CTA with its own work
    where the emulator counted each traced CTA's issued instructions
    (:func:`gpuadvise.rules.idle_cost`: the traced mean split into a working and an idle CTA's
    work, the launch's mix of them before); else every CTA with the traced CTAs' mean work, the
    idle ones' instructions included (a working CTA does more than the mean: the point is the
    higher for it, the bound holds). The upper bound at peak rates and full overlap, the before
    side with the model's margin.

    Fix safety
    ----------
    Display-only: the grid is the host's, and which CTAs work is the kernel's indexing; the
    advice names the CTA count the trace found working.
    """

    id = "GA108"
    name = "idle-ctas"
    title = "Most CTAs do nothing: the grid is sized past the data"
    severity = "warning"
    models = ("trace",)
    options = {"max_working_share": 0.5, "max_idle_instructions": 256}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        trace = ctx.trace
        working = trace.launch_working_ctas
        total = int(trace.total_ctas)
        traced, traced_working = len(trace.ctas), int(trace.traced_working_ctas)
        if working is None and trace.complete:  # every CTA traced: those that made an access
            traced_working = len(np.unique(trace.records["cta"]))
            working = float(traced_working)
        if working is None or total <= 0 or trace.work is None:
            return
        share = float(ctx.option("max_working_share"))
        if working > share * total:
            return
        per_warp = trace.work.instructions / max(trace.work.warps_per_cta, 1)
        if traced_working == 0 and per_warp > float(ctx.option("max_idle_instructions")):
            # no traced CTA touched memory, yet each warp ran that many instructions: CTAs that
            # compute in registers (a brute-force search writing only on a match), not idle
            return
        need = max(1, math.ceil(working))
        yield self.finding(
            ctx,
            f"about {need} of the launch's {total} CTAs make a memory access "
            f"({traced_working} of the {traced} traced, and the CTAs traced over the rest of "
            f"the grid): the others only launch, run to their guard and retire; launch the "
            f"{need} CTAs the data needs (size the grid from one launch's work)",
            line=ctx.kernel_line,
            evidence=[
                Evidence("working_share", round(working / total, 6), share, "<="),
                Evidence("working_ctas", need, unit="CTAs"),
                Evidence("total_ctas", total, unit="CTAs"),
                Evidence("traced_working_ctas", traced_working, unit="CTAs"),
            ],
            details=Idle(need, total, traced, traced_working),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Idle)
        rates = memory_rates(ctx.device)
        t = view_traffic(ctx.device, ctx.trace_view)
        if rates is None or t.work is None:
            return Estimate(None, "none", "not estimated: no instruction counts or rates")
        work = t.work
        split = idle_cost(ctx.trace, ctx.device, t)
        if split is not None:
            # the emulator's per-CTA counts: each side with its own work, the launch's mix of
            # them before, the working CTAs alone after
            t, mean = split.launch, split.alone
            how = (
                f"each CTA with its own work (the emulator's per-CTA counts: a working CTA's "
                f"busiest warp issues {split.working_issue:.0f} instructions, an idle one's "
                f"{split.idle_issue:.0f})"
            )
        else:
            warps = float(d.working * max(work.warps_per_cta, 1))
            # the shared accesses are the work's per-CTA mean times its CTAs (the idle ones'
            # too): the working CTAs' alone after the change
            cut = d.working / max(d.total, 1)
            mean = replace(t, work=replace(work, ctas=d.working),
                           resident_warps=min(t.resident_warps, warps),
                           shared_wavefronts=t.shared_wavefronts * cut,
                           shared_requests=t.shared_requests * cut)  # fmt: skip
            how = (
                "each with the traced CTAs' mean work (the idle ones' instructions in it: a "
                "working CTA does more, so the point is the higher for it)"
            )
        before = launch_times(t, ctx.device, rates)
        before_peak = launch_times(t, ctx.device, rates, peak_dram=True)
        after = launch_times(mean, ctx.device, rates)
        floor = launch_times(mean, ctx.device, rates, peak_dram=True)
        if before is None or before_peak is None or after is None or floor is None:
            return Estimate(None, "none", "not estimated: the device model lacks its clock")
        point = before.time_s / after.time_s
        peak = before_peak.time_s / floor.time_s
        bound = max(ceiling_s(before_peak) / floor.time_s, point, 1.0)
        return Estimate(
            round(bound, 3),
            "upper-bound",
            f"the launch model: as it is, {d.total} CTAs, {before.describe()}, bound by "
            f"{before.bound_by}; the {d.working} working CTAs alone, {how}: "
            f"{after.describe()}, bound by {after.bound_by}: "
            f"point {point:.2f}x; at peak rates and full overlap (the before side with the "
            f"model's margin): upper bound {bound:.2f}x",
            {"model": MODEL, "point_speedup": round(point, 3), "peak_speedup": round(peak, 3),
             "bound_by_before": before.bound_by, "bound_by_after": after.bound_by,
             "before_s": before.time_s, "after_s": after.time_s, "floor_s": floor.time_s,
             "working_ctas": d.working, "total_ctas": d.total},
        )  # fmt: skip

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(Idle)
        return Variant(
            "display-only",
            f"launch about {d.working} CTAs (the ones whose CTA index reaches the data) instead "
            f"of {d.total}: size the grid from the work of one launch",
        )
