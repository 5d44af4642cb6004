"""GA208 contended-global-atomics: a launch's global atomics pile on one address, which the L2
updates one at a time; a reduction within each CTA first leaves one update per CTA."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gpuadvise.rules import (
    MODEL,
    REGION_BYTES,
    Estimate,
    Evidence,
    Finding,
    HotAddress,
    LaunchTimes,
    ModelUnavailable,
    PrivatePlan,
    Rule,
    RuleContext,
    SerialAtomics,
    Variant,
    combined_lines,
    estimate_text,
    finding_text,
    hot_addresses,
    is_grid_stride,
    launch_times,
    memory_rates,
    privatise_plan,
    privatise_variant,
    serial_atomics,
    tiles_advice,
    traffic_without,
    update_ns,
    view_traffic,
    warp_aggregable,
    warp_aggregation_variant,
    with_serial_s,
)

_MIN_LANES = 1.5
"""Lanes of a warp-level request on the hot address from which a warp aggregation is offered
(fewer: one lane a request, the warp's lanes have nothing to combine)."""


class ContendedGlobalAtomics(Rule):
    """Global-memory atomics whose updates pile on one address, applied one after another.

    What it detects
    ---------------
    Source lines whose global atomics (``atomicAdd``, ``atomicMax``, ... on global memory)
    update one address so often over the launch (the CPU emulator's trace of the sampled CTAs,
    the hottest address's updates scaled to the launch when most sampled CTAs update it) that
    the L2, applying them one at a time, needs at least ``min_share`` of the launch's modelled
    time for them: a grid-wide sum into one float (``atomicAdd(out, x[i])`` by every thread), one
    atomic per CTA over a million CTAs, a histogram of a few bins in global memory. An integer
    add that ptxas combines across the warp (``REDUX`` at the line: a warp-uniform address)
    counts one update per warp-level request (``REDUX`` or an elected lane, ``UFLO``, at the
    line). Or whose requests pile on the lines of one 512-byte region (a histogram of a few
    hundred bins packed in consecutive words: HeCBench's bincount, 768 bins in 3 KB), or
    whose requests each put many lanes on one word of that region (a thread per row adding
    to column sums: llm.c's layernorm_backward_kernel1, 32 lanes a word, the word changing
    along the loop; ``kernels/global_atomics`` ``col_sums``).

    Why it is slow
    --------------
    Atomics on one address serialise in its L2 slice: an H200 applies 0.57 G float adds a
    second to one word (1.76 ns each) and 1.37 G integer adds (0.73 ns), against 354 G a
    second to distinct words (``benchmarks/global_atomics_probe``). Sixteen million updates of
    one float take 29.5 ms, however many SMs send them, where streaming their 64 MB of inputs
    takes about 15 us. ptxas does not combine float atomics across a warp. The L2 also takes
    the requests reaching the lines of one 512-byte region in turn, about 1 ns each (a warp's
    request counted once per line it reaches): 2^24 adds to 768 int bins packed in 3 KB took
    1.83 ms on an H200, 0.32 ms with the bins one per line
    (``docs/data/global_atomics_lines_h200_2026-11-29.txt``).

    Example
    -------
    The OLCF training's ``atomic_red``: ``atomicAdd(sum, A[idx])`` by each of 8 M threads;
    HeCBench's f16sp: thread 0 of each of 1,048,576 CTAs adds its partial to ``result[0]``;
    ``kernels/global_atomics`` spells it three ways.

    Fix
    ---
    Reduce within each CTA first (``__shfl_down_sync`` within the warps, then the warps'
    results through shared memory, or ``cub::BlockReduce``) and let one thread per CTA do the
    atomic; when the launch has more CTAs than run at once, loop over the data (a grid-stride
    loop) in one wave of CTAs, so that one update per resident CTA remains. A histogram of few
    bins: a copy of the bins per CTA in shared memory, added to the global bins once per CTA.

    How the estimate is made
    ------------------------
    A point: the launch model's time for the kernel as it is (every term but the atomics'
    order), against the L2's serial time (the largest of: the hottest address's updates at the
    rate above; the requests of the hottest 512-byte region; that region's steps, each request
    counted as its most lanes on one word: CoffeeBeforeArch's seven bins, 3.02 ms modelled for
    3.04 measured; the hottest 1 KB unit's requests, 0.07 ns a line and 0.28 ns a sector each
    updates whole, 0.33 in part, :mod:`gpuadvise.model.atomic_units`: 2^24 updates of 256-1,024
    random bins measured within 11%), the larger of the launch's and the L2's, on the
    launch floor, and the same after the variant's change: with warp aggregation, one update
    per warp-level request on the address (the region's and unit's requests as they are; the
    shuffles left out; a CTA reduction in one wave: ``cta_reduction_point``); with a copy of
    the bins per CTA, each CTA's flush of the unit's non-zero bins (each bin non-zero with the
    chance its share of the CTA's updates reaches it), the line's atomics out of the L2's
    traffic; otherwise one update per CTA of at most one wave, the rest of the launch
    unchanged but for the CTA turnaround of each round of resident CTAs. Counts are scaled
    from the traced CTAs to the launch when CTAs all over the sample make them (at least half
    of them, or two or more spanning half of the traced CTAs: a histogram's bin), else counted
    as traced. A helper function's atomic is counted at its call in the kernel. Where analyze
    builds the automatic variant, the point is the launch model on the kernel's and on the
    variant's own emulated traces, each side at least its own atomics' serial time
    (:mod:`gpuadvise.analyze.variant_trace`): a one-wave launch changes every thread's
    instructions and the CTAs, which the kernel's trace cannot follow (HeCBench
    bincount_shared: 2.11x on the kernel's trace, measured 12.3x).

    Fix safety
    ----------
    Automatic and verified where the lanes of a warp-level request share the address (at
    least 1.5 on average, and ptxas does not combine them already: no ``REDUX``/``UFLO`` at
    the line) and the fix kit finds the atomic (GA207's warp aggregation,
    :func:`gpuadvise.source.fixkit_atomics.warp_aggregate`; the outputs are checked against
    the kernel's, a float sum within rounding); a CTA reduction, which goes further, is
    described. Where one lane per CTA does the atomic in a grid-stride kernel (a loop and a
    read of ``gridDim``) of a 1D grid larger than one wave: the same kernel launched with one
    wave of CTAs (a launch change, automatic: the outputs are checked over both launches; the
    host's launch must change to match). Where the atomics are integer adds into one buffer
    only they use (the trace's accesses of it) whose whole allocation fits 48 KB of dynamic
    shared memory, the CTAs per SM kept: a copy of the bins per CTA, each non-zero bin flushed
    with one global atomic (:mod:`gpuadvise.rules.global_privatise`; the launch adds the bins'
    bytes, one wave where the loop is grid-stride; integer outputs checked equal). Otherwise
    display-only: a CTA reduction and a grid-stride loop change the kernel's structure (where
    each CTA makes one atomic already: the work of several CTAs to each, its atomic once).
    """

    id = "GA208"
    name = "contended-global-atomics"
    title = "Contended global atomics: one address updated by the whole launch, in turn"
    severity = "warning"
    models = ("trace",)
    # the variant (warp aggregation, a one-wave launch) changes the instructions and the CTAs:
    # its point is the launch model on its own trace, each side at least its atomics' serial
    # time (bincount_shared's one wave: 2.11x on the kernel's trace, measured 12.3x)
    point_from_variant_trace = True
    options = {"min_share": 0.2}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        hot = hot_addresses(ctx.trace)
        if not hot:
            return
        launch = self._launch(ctx)
        if launch is None:
            return
        before = launch.time_s
        min_share = float(ctx.option("min_share"))
        combined = self._combined_lines(ctx)
        scale = ctx.trace.scale
        wave = self._wave(ctx)
        for (file, line), h in sorted(hot.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or 0)):
            c = self._serial(ctx, h, line in combined and ctx.same_file(file))
            # reported on the address's, region's and steps' terms (the unit's, a finer count
            # of the same requests, sizes the estimate: alone it flagged kernels/pairs' one
            # atomic a warp on words of their own, 1.8 us hidden under 4.8)
            found = c.time_s(c.updates, c.line_requests, c.steps)
            if found < min_share * before or c.cta_serial_s >= found:
                continue
            what = finding_text(c, h, scale)
            yield self.finding(
                ctx,
                f"contended global atomic: {what}: {c.serial_s * 1e6:.1f} us against "
                f"{before * 1e6:.1f} us for the rest of the launch. "
                + (
                    "Each CTA makes one atomic already: fewer CTAs, each doing the work of "
                    "several and its atomic once"
                    if h.once_per_cta
                    else "Reduce within each CTA first (__shfl_down_sync, then the warps' "
                    "results through shared memory; a histogram: a copy of the bins per CTA in "
                    "shared memory) and let one thread per CTA do the atomic"
                )
                + (
                    f"; with more CTAs than run at once, loop over the data in one wave of "
                    f"{wave} CTAs"
                    if wave and h.launch_ctas(scale) > wave
                    else ""
                ),
                line=line,
                file=str(ctx.source_file) if ctx.same_file(file) else file,
                evidence=[
                    Evidence("updates_of_one_address", round(c.updates, 1), unit="updates"),
                    Evidence("lanes_per_request", round(c.lanes, 2)),
                    Evidence("requests_of_one_region", round(c.line_requests, 1), unit="requests"),
                    Evidence("serial_us", round(c.serial_s * 1e6, 2), unit="us"),
                    Evidence("rest_of_launch_us", round(before * 1e6, 2), unit="us"),
                    Evidence("serial_share", round(c.serial_s / before, 3), min_share, ">="),
                    Evidence("distinct_addresses", h.addresses),
                ],
                details=h,
            )

    @staticmethod
    def _wave(ctx: RuleContext) -> int:
        waves = ctx.waves_or_none
        return waves.ctas_per_wave if waves is not None else 0

    def _one_wave_fits(self, ctx: RuleContext) -> bool:
        """A 1D grid larger than one wave over a grid-stride loop (one wave would do)."""
        g, wave = ctx.launch.grid, self._wave(ctx)
        return g.y == g.z == 1 and 0 < wave < g.x and is_grid_stride(ctx.kernel_source)

    def _serial(
        self, ctx: RuleContext, h: HotAddress, combined: bool, kept: bool = False, private=False
    ) -> SerialAtomics:
        """The L2's serial terms (:func:`serial_atomics`) with one update per CTA of one wave
        after (``kept``: of the whole grid; ``private``: each CTA flushes its bins)."""
        wave = 0 if kept else self._wave(ctx)
        return serial_atomics(h, ctx.trace.scale, combined, wave, private)

    @staticmethod
    def _launch(
        ctx: RuleContext, one_wave: bool = False, without: HotAddress | None = None
    ) -> LaunchTimes | None:
        """The launch model's terms of the kernel; ``one_wave``: run in one wave (a grid-stride
        loop), without the CTA turnaround of each round; ``without``: the traffic of that
        line's global atomics gone (to a copy of the bins in shared memory)."""
        rates = memory_rates(ctx.device)
        if rates is None:
            return None
        traffic = (
            view_traffic(ctx.device, ctx.trace_view)
            if without is None
            else traffic_without(ctx.device, ctx.trace_view, without.insts)
        )
        try:
            t = launch_times(traffic, ctx.device, rates, turnaround=not one_wave)
        except ModelUnavailable:
            return None
        return t

    @staticmethod
    def _combined_lines(ctx: RuleContext) -> set[int]:
        """Lines (at the call site) where ptxas combines a warp's atomic first: the warp's
        values summed (``REDUX``) or counted (``POPC`` of the vote), one elected lane
        (``UFLO``) doing the update."""
        try:
            sass = ctx.sass_instructions
        except ModelUnavailable:
            return set()
        return combined_lines(sass, ctx.same_file)

    def _fix(self, ctx: RuleContext, finding: Finding, h: HotAddress, combined: bool) -> str:
        """The variant this finding gets: ``warp`` (the lanes of a request on the address
        combined first, the atomic's line rewritten by the fix kit), ``wave`` (one atomic per
        CTA already, in a grid-stride kernel of more CTAs than one wave: the launch alone),
        ``private`` (a copy of the bins per CTA) or ``display`` (described)."""
        if (
            not combined
            and h.lanes_per_request >= _MIN_LANES
            and warp_aggregable(ctx, finding) is None
        ):
            return "warp"
        # one atomic per CTA: on the address, and one request per line of the region (a CTA's
        # flush of its bins; a CTA that reaches the region's lines many times, once per
        # element, keeps that count in a smaller grid)
        lines = min(REGION_BYTES // 128, max(1, -(-h.region_addresses // 32)))
        one_per_cta = (
            h.lanes_per_request < _MIN_LANES
            and h.hot_updates <= 1.5 * h.hot_ctas
            and h.region_requests <= 1.5 * lines * max(h.region_ctas, 1)
        )
        if one_per_cta and self._one_wave_fits(ctx):
            return "wave"
        plan = privatise_plan(ctx, finding.line, finding.file, h)
        return "private" if isinstance(plan, PrivatePlan) else "display"

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        h = finding.details_as(HotAddress)
        rest_t = self._launch(ctx)
        if rest_t is None:
            return Estimate(None, "none", "no launch model for this trace")
        rest = rest_t.time_s
        combined = finding.line in self._combined_lines(ctx)
        fix = self._fix(ctx, finding, h, combined)
        # a copy of the bins per CTA keeps the grid where no grid-stride loop allows one wave
        private = fix == "private"
        kept = private and not self._one_wave_fits(ctx)
        c = self._serial(ctx, h, combined, kept, private)
        updates, lanes, serial = c.updates, c.lanes, c.serial_s
        # one update per CTA of one wave (a CTA reduction, or the launch alone where the
        # kernel loops and makes one atomic per CTA already): in one wave (fewer CTAs than the
        # launch's), the CTAs' turnaround goes too
        one_wave = c.cta_updates < h.launch_ctas(ctx.trace.scale)
        # a copy of the bins per CTA: the line's global atomics leave the L2's traffic
        wave_t = (
            self._launch(ctx, one_wave, h if private else None) if one_wave or private else rest_t
        )
        cta_t = rest_t if wave_t is None else wave_t
        cta_s = with_serial_s(cta_t, c.cta_serial_s)
        before_s = with_serial_s(rest_t, serial)
        if fix == "warp":
            # the variant: one update per warp-level request on the address, the launch as is
            # (the requests reaching the hot line stay as many)
            after_updates, after_lines = updates / max(lanes, 1.0), c.line_requests
            after_steps, after_t, after_unit = c.line_requests, rest_t, c.unit_s
            after_what = (
                f"one update per warp-level request (the warp's {lanes:.1f} lanes on the address "
                f"combined first: {after_updates:.0f}; a CTA reduction in one wave would make "
                f"it {before_s / cta_s:.1f}x)"
            )
        else:
            after_updates, after_lines = c.cta_updates, c.cta_line_requests
            after_steps, after_t, after_unit = after_lines, cta_t, c.cta_unit_s
            after_what = (
                f"a copy of the bins per CTA in shared memory (the line's global atomics out "
                f"of the L2's traffic; each CTA's flush on the unit: {c.cta_unit_s * 1e6:.1f} us)"
                if private
                else f"one update per CTA of one wave ({after_updates:.0f}"
                + (f"; {after_lines:.0f} requests on the region" if c.by_line else "")
                + ")"
            )
        after_serial = c.time_s(after_updates, after_lines, after_steps, after_unit)
        after_rest, after_s = after_t.time_s, with_serial_s(after_t, after_serial)
        inputs = {
            "updates_before": updates,
            "updates_after": after_updates,
            "line_requests_before": c.line_requests,
            "line_requests_after": after_lines,
            "serial_before_us": serial * 1e6,
            "serial_after_us": after_serial * 1e6,
            "rest_of_launch_us": rest * 1e6,
            "rest_after_us": after_rest * 1e6,
            "update_ns": update_ns(h.opcode),
            "request_ns": h.request_ns(),
            "steps_before": c.steps,
            "steps_after": after_steps,
            "fix": fix,
            "cta_reduction_point": round(before_s / cta_s, 3),
            "model": MODEL,
        }
        serial_what = estimate_text(c, h)
        return Estimate(
            round(max(before_s / after_s, 1.0), 3),
            "point",
            f"the launch as it is {before_s * 1e6:.1f} us (the launch model's "
            f"{rest * 1e6:.1f} us with {serial_what}, measured on an H200, as its L2 term), "
            f"after {after_what}: {after_s * 1e6:.1f} us",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        advice = (
            "reduce within each CTA first (for (int o = 16; o > 0; o /= 2) v += "
            "__shfl_down_sync(0xffffffff, v, o); the warps' results through shared memory) and "
            "let one thread per CTA do the atomic; with more CTAs than one wave, a grid-stride "
            "loop over the data in one wave of CTAs; for a few histogram bins, a copy of the "
            "bins per CTA in shared memory"
        )
        h = finding.details_as(HotAddress)
        combined = finding.line in self._combined_lines(ctx)
        fix = self._fix(ctx, finding, h, combined)
        if fix == "warp":
            v = warp_aggregation_variant(ctx, finding, advice)
            return replace(
                v,
                description=v.description + "; a reduction within each CTA (one atomic per CTA) "
                "goes further",
            )
        plan = privatise_plan(ctx, finding.line, finding.file, h)
        if fix == "private" and isinstance(plan, PrivatePlan):
            return privatise_variant(ctx, plan)
        if fix == "wave":
            wave = self._wave(ctx)
            return Variant(
                "automatic-and-verified",
                f"the same kernel launched with {wave} CTAs (one wave) instead of "
                f"{ctx.launch.grid.x}: its grid-stride loop gives each thread more elements, and "
                f"each CTA's atomic on the address is made {wave} times instead of "
                f"{ctx.launch.grid.x} "
                "(a float sum's rounding changes with the order of its additions; the outputs "
                "are checked against the kernel's)",
                launch={"grid": [wave, 1, 1]},
                label="one wave",
            )
        many = h.region_requests > 1.5 * max(h.region_ctas, 1) or h.hot_updates > 1.5 * h.hot_ctas
        if h.once_per_cta and not combined:
            return Variant("display-only", tiles_advice(self._wave(ctx)))
        why = (
            "the lanes of a warp-level request update the address one at a time already, and "
            + (
                "each CTA reaches the address or its line many times (a smaller grid leaves "
                f"as many requests; no automatic copy of the bins per CTA: {plan})"
                if many
                else "the kernel has no grid-stride loop a smaller grid could use"
            )
            if h.lanes_per_request < _MIN_LANES or combined
            else warp_aggregable(ctx, finding)
        )
        return Variant("display-only", f"{advice} (not automatic: {why})")
