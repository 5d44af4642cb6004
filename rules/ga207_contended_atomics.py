"""GA207 contended-atomics: the lanes of a warp update a few shared-memory addresses with atomics,
one after the other; a warp reduction first leaves one atomic per address."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gpuadvise.rules import (
    ATOMICS,
    Contention,
    Estimate,
    Evidence,
    Finding,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    cas_lines,
    contended_lines,
    launch_change_estimate,
    serial_updates,
    view_traffic,
    warp_aggregation_variant,
    with_aggregation,
    with_serial_updates,
    work_ratio,
)


class ContendedAtomics(Rule):
    """Shared-memory atomics whose lanes update a few addresses, one lane after another.

    What it detects
    ---------------
    Source lines whose shared-memory atomics (``atomicAdd``, ``atomicMax``, ... on a
    ``__shared__`` variable) reach each address from at least ``min_lanes`` active lanes of a
    warp-level request on average (the CPU emulator's trace: active lanes over distinct
    addresses, per request), where the wavefronts they take beyond one atomic per address are
    at least ``min_excess_share`` of the kernel's shared-memory wavefronts: a CTA-wide sum
    into one ``__shared__ float``, a histogram of a few bins, a counter every thread bumps.

    Why it is slow
    --------------
    An atomic updates each active lane's address in turn: 32 lanes adding to one word take 32
    passes of the shared-memory pipeline (measured on an H100 for ``ATOMS.ADD``, 1 for 32
    distinct words; ``benchmarks/atomics_probe``), and a float add, which sm_90 has no native
    shared atomic for, is a compare-and-swap loop that retries while lanes collide. Every warp
    of the CTA then queues on the same word. GA201 leaves these lines to this rule: the
    wavefronts are updates of one word, not distinct words of one bank, and no padding helps.
    An ``atomicAdd(p, 1)`` whose result is unused is compiled to ``ATOMS.POPC.INC``, one update
    per address for the whole warp, and is not contended (the bank model counts it so).

    Example
    -------
    HeCBench's expdist ``distance``: ``atomicAdd(&sum, s_cross_term)`` by all 256 threads of a
    CTA on one ``__shared__ float``; ``tests/rules/test_rule_ga207.py`` spells it three ways.

    Fix
    ---
    Reduce within the warp first and let one lane update the address: ``for (int o = 16; o >
    0; o /= 2) v += __shfl_down_sync(0xffffffff, v, o); if ((threadIdx.x & 31) == 0)
    atomicAdd(&sum, v);`` (``__reduce_add_sync`` for 32-bit integers; ``__reduce_max_sync``
    and ``__reduce_min_sync`` likewise). For a few addresses (a histogram's bins), a per-warp
    copy of the bins, or match the lanes of one bin (``__match_any_sync``) and reduce those.

    How the estimate is made
    ------------------------
    Where ptxas has a native shared atomic for the operation (integer adds, min, max, bitwise):
    an upper bound on the launch model, the line's shared wavefronts going from what the bank
    model counts for them (one per lane of an address, per bank) to one per distinct address
    per request (the warp reduction's single atomic), and the fix kit's aggregation run at each
    warp-level request of the line, on the pipes and on the warps' chains
    (:func:`gpuadvise.rules.atomics.with_aggregation`: the match of the lanes of each address,
    then a shuffle butterfly where the whole warp names one address, else every lane's turn of
    its address's loop under a partial mask, the groups one after another). Where that makes
    the launch slower, there is no speedup: the finding is a note and the variant waits for a
    GPU (measured on an H200, 2026-11-30: an 8-bin histogram's aggregation 0.54x; the model
    0.54x, its costs measured on the same GPU: ``gpuadvise.rules.atomics``). ptxas aggregates
    an atomic on a warp-uniform address itself (``REDUX`` and one lane's ``ATOMS``:
    ``atomicMax`` on a ``__shared__ int``); the bank model counts those one update per
    request, and this rule stays silent there.

    Where it made a compare-and-swap loop (``ATOMS.CAST.SPIN`` in the SASS at the line, or in
    a function inlined at it: a float add on sm_90): a point on the launch model, whose CTAs'
    critical path holds the updates of one address one round trip after another (the shared
    load, the operation, the CAS, the test, at the device's latencies): every lane's (the
    lanes over the distinct addresses of a request, per CTA) before, one per warp after. The
    bank model's wavefronts are not counted again, and the retries of warps that lose the race
    are not counted at all. Measured on an
    H200 (2026-11-29, ``gpuadvise bench``, cold L2): ``cta_sum`` against ``cta_sum_warp`` at
    105,600 CTAs of 256 threads 10.76x, where the point on the H200 model is 12.3x (before
    the serial chain it was "at most 2.18x", a bound the measurement broke).

    Fix safety
    ----------
    Automatic and verified where the fix kit finds the atomic
    (:func:`gpuadvise.source.fixkit_atomics.warp_aggregate`: ``atomicAdd``, ``atomicMin``,
    ``atomicMax``, ``atomicOr``, ``atomicAnd``, ``atomicXor`` and their ``_block``/``_system``
    forms, called on the line, in a function-like macro it uses or in a helper function of the
    file it calls): the call is renamed to a helper defined before the function, in which the
    lanes active at the atomic (``__activemask()``) that update one address
    (``__match_any_sync``) combine their values by shuffles (a ``__shfl_xor_sync`` butterfly
    when the whole warp updates one address) and the lowest of them does the atomic; where the
    result is used, each lane gets the value a serial order of the lanes (lowest first) would
    have given it. The outputs are checked against the kernel's (``--fix`` on the emulator, or
    the measurement stage); a float sum's rounding changes with the order of its additions
    (within the spec's tolerance). A macro's or helper's atomic is aggregated for every use,
    which stays an atomic of the same operation. Display-only where the line runs no such call
    (``atomicInc``, ``atomicCAS``, an atomic in another file).
    """

    id = "GA207"
    name = "contended-atomics"
    title = "Contended shared-memory atomics: a warp's lanes update one address in turn"
    severity = "warning"
    models = ("trace", "banks")
    options = {"min_lanes": 4.0, "min_excess_share": 0.05}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        banks = ctx.banks
        total = banks.traced.all.wavefronts
        if total <= 0:
            return
        min_lanes = float(ctx.option("min_lanes"))
        min_share = float(ctx.option("min_excess_share"))
        traced = round(ctx.launch.grid.count / banks.scale) if banks.scale else 0
        # the wavefronts the bank model counts for each line's atomics, on the records as the
        # SASS executes them: an unused-result increment (ATOMS.POPC.INC) updates each address
        # once for the whole warp, so its line has no excess here
        atomic_wf: dict[tuple[str | None, int | None], int] = {}
        for bl in banks.lines:
            if int(bl.kind) in ATOMICS:
                atomic_wf[(bl.file, bl.line)] = atomic_wf.get((bl.file, bl.line), 0) + bl.wavefronts
        found = contended_lines(ctx.trace, min_lanes)
        # the lines (at the user's call site: atomicAdd is inlined from a toolkit header) whose
        # atomics ptxas made a compare-and-swap loop
        cas = {line for f, line in cas_lines(ctx.sass_lines) if ctx.same_file(f)}
        cas |= self._cas_call_lines(ctx)
        for (file, line), c in sorted(
            found.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or 0)
        ):
            c = replace(
                c,
                wavefronts=atomic_wf.get((file, line), c.wavefronts),
                compare_and_swap=line in cas and ctx.same_file(file),
            )
            excess = c.wavefronts - c.after_wavefronts
            share = excess / total
            if share < min_share:
                continue
            per = c.lanes / c.addresses
            slower = not c.compare_and_swap and self._predicted_slower(ctx, c)
            yield self.finding(
                ctx,
                f"contended shared-memory atomic: {per:.1f} lanes of a warp update each address "
                f"on average ({c.lanes} lane updates of {c.addresses} addresses in {c.requests} "
                f"warp-level requests over {traced} traced CTAs), one after the other: "
                f"{c.wavefronts} wavefronts where one atomic per address would take "
                f"{c.after_wavefronts}, {share:.0%} of all shared-memory wavefronts"
                + (
                    "; ptxas made it a compare-and-swap loop (ATOMS.CAS), so the CTA's updates "
                    "of an address wait for each other"
                    if c.compare_and_swap
                    else ""
                )
                + ". Reduce "
                "within the warp first (__shfl_down_sync, or __reduce_add_sync for integers) and "
                "let one lane per address do the atomic"
                + (
                    " (on the launch model the aggregation's match and shuffles cost more than "
                    "the native atomic's updates: not recommended unless a GPU measures it faster)"
                    if slower
                    else ""
                ),
                line=line,
                severity="note" if slower else None,
                # shared memory's own atomics: the match and the shuffles can cost more than
                # they save (measured on an H200: 0.54x on bins8); the GPU decides
                recommend_only_if_faster=not c.compare_and_swap,
                file=str(ctx.source_file) if ctx.same_file(file) else file,
                evidence=[
                    Evidence("lanes_per_address", round(per, 3), min_lanes, ">="),
                    Evidence("excess_wavefront_share", round(share, 4), min_share, ">="),
                    Evidence("requests", c.requests),
                    Evidence("wavefronts", c.wavefronts, unit="wavefronts"),
                    Evidence("wavefronts_one_per_address", c.after_wavefronts, unit="wavefronts"),
                ],
                details=c,
            )

    @staticmethod
    def _cas_call_lines(ctx: RuleContext) -> set[int]:
        """The kernel file's lines of every frame (innermost and the calls it was inlined into)
        of the SASS compare-and-swap loops: ``atomicAdd`` is inlined from a toolkit header
        into a device function (HeCBench expdist's ``distance_tiled``) inlined into the
        kernel, so the SASS's innermost line is the header's."""
        try:
            instrs = ctx.sass_instructions
        except ModelUnavailable:
            return set()
        return {
            ln
            for i in instrs
            if i.opcode.startswith("ATOMS.CAS")
            for f, ln in ((i.file, i.line), *i.inlined_at)
            if ln is not None and ctx.same_file(f)
        }

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        c = finding.details_as(Contention)
        if c.compare_and_swap:
            got = self._cas_estimate(ctx, c)
            if got is not None:
                return got
        return self._native_estimate(ctx, c)

    def _predicted_slower(self, ctx: RuleContext, c: Contention) -> bool:
        e = self._native_estimate(ctx, c)
        point = e.inputs.get("point_speedup")
        return e.speedup is None and isinstance(point, int | float) and point < 1.0

    def _native_estimate(self, ctx: RuleContext, c: Contention) -> Estimate:
        """A native shared atomic (ATOMS.ADD, .MAX, ...): the line's wavefronts one per address
        after, and the aggregation's own instructions added (:func:`with_aggregation`)."""
        banks = ctx.banks
        scale = banks.scale
        w_launch = banks.launch.all.wavefronts
        excess = (c.wavefronts - c.after_wavefronts) * scale
        inputs: dict[str, object] = {
            "wavefronts": w_launch,
            "excess_wavefronts": excess,
            "scale": scale,
        }
        shared_only = Estimate(
            round(work_ratio(w_launch, excess), 3),
            "upper-bound",
            f"shared-memory-bound kernel: {w_launch:.0f} / ({w_launch:.0f} - {excess:.0f}) "
            "wavefronts (no launch model here: DRAM, issue and latency ignored; the "
            "aggregation's match and shuffles left out)",
            inputs,
        )
        try:
            base = view_traffic(ctx.device, ctx.trace_view)
        except ModelUnavailable:
            return shared_only
        if base.work is None:
            return shared_only
        traced = round(ctx.launch.grid.count / scale) if scale else 0
        est = launch_change_estimate(
            ctx.device,
            replace(base, shared_wavefronts=w_launch),
            replace(
                base,
                shared_wavefronts=max(w_launch - excess, 0.0),
                work=with_aggregation(base.work, c, traced),
            ),
            f"this line's {excess:.0f} contended wavefronts made one atomic per address, the "
            f"aggregation's match and shuffles run at each of its {c.requests} warp-level "
            "requests (sampled CTAs)",
            inputs,
        )
        if est is None:
            return shared_only
        point = est.inputs.get("point_speedup")
        if isinstance(point, int | float) and point < 1.0:
            return Estimate(
                None,
                "none",
                f"predicted slower, {point:.2f}x: {est.method}. Not recommended unless a GPU "
                "measures it faster",
                est.inputs,
            )
        return est

    def _cas_estimate(self, ctx: RuleContext, c: Contention) -> Estimate | None:
        """A compare-and-swap loop: the CTA's updates of an address one round trip after
        another on its critical path, before (every lane's) and after (one per warp)."""
        banks = ctx.banks
        traced = round(ctx.launch.grid.count / banks.scale) if banks.scale else 0
        before_n, after_n = serial_updates(c, traced)
        try:
            base = view_traffic(ctx.device, ctx.trace_view)
        except ModelUnavailable:
            return None
        w = base.work
        if w is None or before_n <= after_n:
            return None
        scale = banks.scale
        excess = (c.wavefronts - c.after_wavefronts) * scale
        inputs = {
            "serial_updates_per_cta": round(before_n, 1),
            "serial_updates_after": round(after_n, 1),
            "excess_wavefronts": excess,
        }
        # the shared wavefronts without the conflicts of the line's lanes: the loop's round
        # trips, one after another, are its cost (counting both would count the lanes twice)
        before = replace(base, work=with_serial_updates(w, before_n))
        after = replace(base, work=with_serial_updates(w, after_n))
        est = launch_change_estimate(
            ctx.device,
            before,
            after,
            f"a CTA's {before_n:.0f} compare-and-swap updates of an address in turn made "
            f"{after_n:.0f} (one per warp)",
            inputs,
        )
        if est is None:
            return None
        point = est.inputs.get("point_speedup")
        if not isinstance(point, int | float):
            return None
        return Estimate(
            round(max(float(point), 1.0), 3),
            "point",
            est.method + ". A point, not a bound: each update's round trip (the shared load, "
            "the operation, the compare-and-swap, the test) at the device's latencies; "
            "retries of warps that lose the race are not counted",
            est.inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        advice = (
            "reduce the value within the warp (for (int o = 16; o > 0; o /= 2) v += "
            "__shfl_down_sync(0xffffffff, v, o);) and let lane 0 of each warp do the atomic; "
            "for a few addresses, reduce the lanes of each address (__match_any_sync) or keep a "
            "copy per warp"
        )
        return warp_aggregation_variant(ctx, finding, advice, needs_measurement=True)
