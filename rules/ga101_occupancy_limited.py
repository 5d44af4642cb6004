"""GA101 occupancy-limited: few warps per SM, and the resource change that lifts the limit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuadvise.rules import (
    CTAS_DIVIDED_BY,
    LIMITER_LABELS,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Rule,
    RuleContext,
    Variant,
    amortised_ratio,
    block_launch,
    counted,
    launch_bounds,
    launch_times,
    live_floor,
    memory_rates,
    occupancy_ratio,
    register_variant,
    repeated_requests,
    rewrite_warps,
    spills_at,
    view_traffic,
)


@dataclass(frozen=True)
class NextStep(FindingDetails):
    """The step the estimate and the variant use (one of the context's ``next_steps``)."""

    resource: str
    value: int
    active_warps_per_sm: int
    occupancy: float
    text: str
    max_threads: int | None = None  # the kernel's __launch_bounds__ (PTX .maxntid), if any
    min_blocks: int | None = None  # its second argument (PTX .minnctapersm), if any
    spill_bytes_after: int | None = None  # spill stores + loads at the register cap, if compiled
    refused: bool = False  # the step spills (or no launch computes the same): not proposed
    floor: int | None = None  # live-register floor: the peak + ptxas's reserved registers
    below_floor: bool = False  # the register step is below the floor (not built unless asked)
    rewrite_warps: int | None = None  # warps per SM GA403's rewrite reaches (None: none)
    block_axis: str = "x"  # the block dimension a block-size step resizes (block_launch)


MAX_CAPS_BUILT = 2  # register caps compiled to check for spills (the mildest first)


class OccupancyLimited(Rule):
    """Occupancy below a threshold, with the resource that limits it and the change that lifts it.

    What it detects
    ---------------
    A launch whose theoretical occupancy (resident warps per SM over the SM's maximum, exactly as
    NVIDIA's occupancy calculator computes it) is below ``max_occupancy``, when a change of one
    resource reaches a higher occupancy: fewer registers per thread (``__launch_bounds__`` or
    ``-maxrregcount``), less shared memory per block, a larger shared-memory carveout, or another
    block size. The grid must be larger than one wave; with fewer CTAs than the GPU holds at once,
    more room per SM has nothing to run (see GA102). Reported at the kernel's declaration.

    Why it is slow
    --------------
    An SM hides the latency of memory and of dependent instructions by switching between resident
    warps. With few warps resident, all of them may be waiting at once, and the SM idles. Occupancy
    alone rarely predicts speed on modern GPUs, though: a kernel with enough independent work per
    thread (instruction-level parallelism, several loads in flight) runs at full speed at 25 %
    occupancy, and forcing registers down can cause spills that cost more than the extra warps
    gain. Low occupancy matters most for memory-bound kernels with little work per thread.

    Example
    -------
    A tile of 48 KB of shared memory per 128-thread block: an H100 SM (228 KB) holds 4 blocks,
    16 of its 64 warps (25 %); ``kernels/occupancy/occupancy.cu``, ``tile_big``.

    Fix
    ---
    Apply the suggested change: cap registers with ``__launch_bounds__(threads, minBlocks)`` (or
    ``-maxrregcount``), shrink the shared-memory tile (or split it between stages), prefer the
    largest carveout, or change the block size (and the grid so that it covers the same work).
    Another block size is proposed only when the emulator finds the kernel computes the same
    with it: its x resized first, then, for a 2-D block whose columns a tile fixes, its y
    (cuda-samples FDTD3d's 32x16 made 32x12). Then measure: more occupancy is not always faster.

    How the estimate is made
    ------------------------
    An upper bound, labelled as such, from Little's law: a latency-bound kernel's throughput grows
    at most in proportion to its resident warps, and stops growing once latency is hidden, which is
    modelled as ``saturation_occupancy``: ``speedup <= min(new, sat) / min(old, sat)``. A
    compute-bound kernel, or one with enough instruction-level parallelism, gains less or nothing.
    It bounds the occupancy effect only: a block-size change also changes the work every CTA repeats
    (staging a table in shared memory, a per-block reduction), which this does not model. On
    ``lut_big`` (48 KB table staged per block) the 512-thread variant measured 4.79x on an H100
    against this bound of 2.00x, because it stages the table 4 times less often (docs/accuracy.md).
    A block-size step's variant is a launch change: its point comes from the variant's own trace
    (``point_from_variant_trace``, issue 29), the CTAs' repeated staging included; a register cap's
    variant is a compile flag, which the emulator's trace does not see, and keeps the bound alone.

    Fix safety
    ----------
    A register cap is automatic-and-verified: the variant is the same source compiled with
    ``-maxrregcount``; its outputs are compared with the baseline's before a speedup is reported.
    Shared-memory, carveout and block-size changes are display-only: they change the kernel's
    code or its launch, which only its author can do safely.
    """

    id = "GA101"
    name = "occupancy-limited"
    title = "Occupancy limited by registers, shared memory or block size"
    severity = "warning"
    point_from_variant_trace = True
    models = ("occupancy", "waves")
    options = {"max_occupancy": 0.5, "saturation_occupancy": 0.5, "build_caps_below_floor": False}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        occ = ctx.occupancy
        if occ.active_blocks_per_sm == 0:
            return  # cannot launch at all: the launch checks say so
        threshold = float(ctx.option("max_occupancy"))
        if occ.occupancy >= threshold:
            return
        steps = [s for s in ctx.next_steps if s.active_warps_per_sm > occ.active_warps_per_sm]
        if not steps:
            return
        waves = ctx.waves_or_none
        if waves is not None and waves.total_ctas <= waves.ctas_per_wave:
            return  # one partial wave: more room per SM has nothing to run
        # the step the estimate and the variant use: the highest occupancy, a register cap
        # first among equals (it is the one gpuadvise can build and measure by itself)
        max_threads, min_blocks = launch_bounds(ctx.ptx, ctx.kernel.mangled)
        spills: int | None = None
        spilled: tuple[Any, int] | None = None  # the mildest register cap that spills
        below: Any = None  # the mildest register cap under the live-register floor
        regs = sorted(
            (s for s in steps if s.resource == "registers"), key=lambda s: -s.value
        )  # the mildest cap first
        floor = live_floor(ctx)
        rewrite = rewrite_warps(ctx) if regs else None
        if regs:
            # each register cap is built here: one that spills more than the kernel does now
            # needs more registers than it leaves (register-blocked code: accumulators, tiles
            # kept in registers) and is not proposed; a tighter cap would spill more still. A
            # cap under the live-register floor (the peak + ptxas's reserved) is not even
            # built, unless asked: this schedule needs more, so ptxas would spill or reorder
            res = ctx.kernel.resources
            now = res.spill_store_bytes + res.spill_load_bytes
            kept = []
            build_below = bool(ctx.option("build_caps_below_floor"))
            for cap in regs[:MAX_CAPS_BUILT]:
                if floor is not None and cap.value < floor[0] and not build_below:
                    below = cap
                    break
                blocks = max(cap.active_warps_per_sm // max(ctx.occupancy.warps_per_block, 1), 1)
                at = spills_at(ctx, cap.value, max_threads, blocks)
                if at is not None and at > now:
                    spilled = (cap, at)
                    break
                kept.append(cap)
                spills = at
            steps = [s for s in steps if s.resource != "registers" or s in kept]
        sized = [s for s in steps if s.resource == "block_size"]
        block_axis = "x"
        if sized:
            # another block size is advice only when the kernel computes the same with it (on
            # the emulator): not for a kernel hard-wired to its tile, nor a 2-D block made 1-D
            # the block's x resized first, then (a 2-D block) its y: a tile hard-wired to 32
            # columns (FDTD3d's 32x16) takes 32x8
            top = max(sized, key=lambda s: s.active_warps_per_sm)
            shapes = {axis: block_launch(ctx, top.value, axis) for axis in ("x", "y")}
            for axis in ("x", "y"):
                launch = shapes[axis]
                # the y check's runs of the launch as it is made with the x check's
                later = shapes["y"] if axis == "x" else None
                then = [] if later is None else [later]
                check = None if launch is None else ctx.services.compare_launch(*launch, then=then)
                if check is not None and check.same:
                    block_axis = axis
                    break
            else:
                block_axis = ""
            if not block_axis:
                steps = [s for s in steps if s.resource != "block_size"]
            else:
                steps = [s for s in steps if s.resource != "block_size" or s is top]
        spill_note = ""
        if spilled is not None:
            spill_note = (
                f"; a cap of {spilled[0].value} registers per thread spills ({spilled[1]} bytes "
                "of spill stores and loads per thread, built here): the kernel's live values "
                "need more"
            )
        if below is not None and floor is not None:
            spill_note = (
                f"; a cap of {below.value} registers per thread is under the live-register floor "
                f"of {floor[0]} ({floor[1]}): ptxas would have to spill or reschedule, so it is "
                "not proposed (the option build_caps_below_floor builds it and reports its "
                "spills)"
            )
        cap_step = (spilled[0] if spilled is not None else below) or next(
            (s for s in steps if s.resource == "registers"), None
        )
        if cap_step is not None and rewrite is not None and rewrite >= cap_step.active_warps_per_sm:
            spill_note += (
                f"; GA403's rewrite (keeping values out of the register peak) reaches "
                f"{rewrite} warps per SM without a cap: prefer it"
            )
        else:
            rewrite = None
        refused_cap = spilled[0] if spilled is not None else below
        if not steps:
            if refused_cap is None:
                return
            # nothing to change at the launch: say why occupancy stays where it is, as a note
            yield self._finding(
                ctx, [refused_cap], refused_cap, max_threads, min_blocks,
                spilled[1] if spilled is not None else None, spill_note, waves, threshold,
                refused=True, floor=floor, below=below is not None, rewrite=rewrite,
            )  # fmt: skip
            return
        best = max(steps, key=lambda s: (s.active_warps_per_sm, s.resource == "registers"))
        yield self._finding(
            ctx, steps, best, max_threads, min_blocks,
            spills if best.resource == "registers" else None, spill_note, waves, threshold,
            floor=floor, rewrite=rewrite if best.resource == "registers" else None,
            block_axis=block_axis,
        )  # fmt: skip

    def _finding(
        self,
        ctx: RuleContext,
        steps: list[Any],
        best: Any,
        max_threads: int | None,
        min_blocks: int | None,
        spills: int | None,
        spill_note: str,
        waves: Any,
        threshold: float,
        refused: bool = False,
        floor: tuple[int, str] | None = None,
        below: bool = False,
        rewrite: int | None = None,
        block_axis: str = "x",
    ) -> Finding:
        occ = ctx.occupancy
        limiters = ", ".join(LIMITER_LABELS.get(x, x) for x in occ.limiters)
        if refused:
            ways = "nothing at the launch raises it" + spill_note
        else:
            ways = "to raise it: " + "; or ".join(f"{s.text} ({s.occupancy:.0%})" for s in steps)
            ways += spill_note
        message = (
            f"occupancy {occ.occupancy:.0%} ({occ.active_warps_per_sm} of "
            f"{occ.max_warps_per_sm} warps per SM, {counted(occ.active_blocks_per_sm, 'block')}), "
            f"limited by {limiters}; {ways}"
        )
        evidence = [
            Evidence("occupancy", round(occ.occupancy, 4), threshold, "<"),
            Evidence("active_warps_per_sm", occ.active_warps_per_sm, unit="warps"),
            Evidence("limiter", ",".join(occ.limiters)),
            Evidence(f"next_step_{best.resource}", best.value),
            Evidence("next_step_occupancy", round(best.occupancy, 4)),
        ]
        if waves is not None:
            evidence.append(Evidence("waves", round(waves.waves, 3)))
        return self.finding(
            ctx,
            message,
            line=ctx.kernel_line,
            evidence=evidence,
            details=NextStep(
                best.resource,
                best.value,
                best.active_warps_per_sm,
                best.occupancy,
                best.text,
                max_threads,
                min_blocks,
                spills,
                refused,
                None if floor is None else floor[0],
                below,
                rewrite,
                block_axis,
            ),
            severity="note" if refused else None,
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        old = ctx.occupancy.occupancy
        step = finding.details_as(NextStep)
        if step.refused:
            return Estimate(
                None,
                "none",
                "not estimated: the only step up is a register cap "
                + (
                    f"under the live-register floor of {step.floor}"
                    if step.below_floor
                    else "that spills (the live values need the registers)"
                )
                + ", so nothing is proposed",
            )
        new = step.occupancy
        sat = float(ctx.option("saturation_occupancy"))
        inputs: dict[str, Any] = {
            "occupancy_before": old,
            "occupancy_after": new,
            "saturation_occupancy": sat,
        }
        # the launch roofline of the traced launch: latency-bound (too few bytes in flight)?
        latency_bound, amort, repeated = False, 1.0, (0.0, 0.0)
        rates = memory_rates(ctx.device)
        if ctx.has_model("trace") and rates is not None:
            view = ctx.trace_view
            times = launch_times(view_traffic(ctx.device, view), ctx.device, rates)
            # latency-bound: too few bytes in flight (Little's law), or rounds of CTAs each
            # waiting on its dependent chain: more resident warps shorten both
            latency_bound = times is not None and times.bound_by in ("latency", "dependency")
            inputs["bound_by_before"] = None if times is None else times.bound_by
            if step.resource == "block_size":
                # the same threads in CTAs of another size: the work each CTA repeats is
                # done once per CTA of the new grid
                threads = ctx.occupancy_input.threads_per_block
                ctas = float(view.total_ctas)
                repeated = repeated_requests(view)
                amort = amortised_ratio(*repeated, ctas, ctas * threads / step.value)
                if step.value > threads:  # fewer, larger CTAs: fewer CTA launches too
                    inputs[CTAS_DIVIDED_BY] = step.value / threads
        occ = occupancy_ratio(old, new, sat, latency_bound)
        inputs.update(
            occupancy_ratio=occ,
            amortised_ratio=amort,
            repeated_requests_per_cta=repeated[0],
            partitioned_requests_per_cta=repeated[1],
        )
        warps = (
            f"Little's law: a latency-bound launch's bandwidth grows at most in proportion to "
            f"its resident warps, {new:.2f} / {old:.2f} = {occ:.2f}x"
            if latency_bound
            else f"resident warps up to {sat:.0%} occupancy (the launch roofline does not find "
            f"this launch latency-bound): min({new:.2f}, {sat:.2f}) / min({old:.2f}, {sat:.2f}) "
            f"= {occ:.2f}x"
        )
        cta = (
            f"; times the work CTAs repeat done by {ctx.occupancy_input.threads_per_block} / "
            f"{step.value} as many CTAs ({repeated[0]:.0f} of {sum(repeated):.0f} global "
            f"requests per CTA touch only bytes every sampled CTA touches): {amort:.2f}x"
            if step.resource == "block_size"
            else ""
        )
        return Estimate(
            round(max(occ * amort, 1.0), 3),
            "upper-bound",
            warps + cta + ". Left out: instruction-level parallelism (a launch with independent "
            "loads per thread gains less), the tail of the new grid, and per-CTA work that is "
            "not memory requests (barriers, shared-memory stores)",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        step = finding.details_as(NextStep)
        if step.resource == "registers":
            return register_variant(ctx, step)
        if step.resource == "block_size":
            shape = block_launch(ctx, step.value, step.block_axis)
            if shape is None:
                return Variant("display-only", step.text)
            grid, block = shape
            return Variant(
                "display-only",
                f"launch blocks of {'x'.join(map(str, block))} threads and a grid of "
                f"{'x'.join(map(str, grid))} (the same threads; the emulator ran both launches "
                "and found the same outputs)",
                launch={"grid": list(grid), "block": list(block)},
            )
        return Variant("display-only", step.text)
