"""GA308 global-accumulation: a thread loads and stores the same global address again and again
(``tmp[i] += A[i * n + j] * x[j]`` in a j-loop): keep the value in a register, store it once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.rules import (
    MIN_ACCUMULATION_REPEATS,
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    Kind,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    accumulations,
    fixkit,
    launch_change_estimate,
    lines_text,
    record_l1_cycles,
    repeated_loads,
    view_traffic,
)


@dataclass(frozen=True)
class Accumulation(FindingDetails):
    """A store line whose threads store one address of ``buffer`` ``repeats`` times on average,
    loading it in between (over the sampled CTAs): the store and load records that one store
    per address would leave out (``saved_*``), and the instructions of the line."""

    buffer: str
    repeats: float
    addresses: int
    saved_store_records: tuple[int, ...]
    saved_load_records: tuple[int, ...]
    store_insts: tuple[int, ...]


class GlobalAccumulation(Rule):
    """A thread accumulating into global memory inside a loop.

    What it detects
    ---------------
    Source lines whose global stores reach the same address from the same thread at least
    ``min_repeats`` times on average (the CPU emulator's trace, over the sampled CTAs), loading
    it back between them or not (ptxas may keep the value in a register and still store it
    every iteration, when another pointer of the kernel may alias it): a read-modify-write in a
    loop,
    ``tmp[i] += A[i * NY + j] * x[j]`` over ``j``, ``out[row] = out[row] + v`` in a while loop,
    a histogram bin a thread owns. Atomics are not this rule's (GA207 looks at contended ones).

    Why it is slow
    --------------
    Every iteration loads the value back from global memory (an L1 hit at best, an L2 round trip
    where the store evicted it: stores write through to the L2) and stores it again: two memory
    instructions and a dependent load latency per iteration on the loop's critical path, where a
    register costs one add. The compiler may not keep it in a register itself: another pointer
    of the kernel could alias the address (PolyBench's kernels, 8 of 17 of one suite, issue 28).

    Example
    -------
    ``kernels/accumulate/accumulate.cu``: ``atax_rows`` (PolyBench-ACC's atax kernel 1),
    ``row_sums`` (a while loop, ``out[r] = out[r] + ...``), ``tile_acc<4>`` (a template, four
    outputs per thread); ``row_sums_register`` is the fixed kernel and stays silent.

    Fix
    ---
    Accumulate in a register and store once after the loop: ``float acc = tmp[i]; for (...)
    acc += A[i * NY + j] * x[j]; tmp[i] = acc;``. Where one thread walks a whole row, giving
    the row to a warp (lanes over ``j``, a ``__shfl_down_sync`` reduction) is the larger step
    (GA301's thread-per-row advice).

    How the estimate is made
    ------------------------
    A point on the launch model: the repeated stores and the loads between them leave the
    L1/shared data path, the L2 (stores write through) and the LSU pipe, one store per address
    and thread stays; the loop's dependent chain loses the hold each iteration's store had on
    the loads after it (the chain without memory order, :mod:`gpuadvise.ptx.chains`: without
    ``__restrict__``, ptxas keeps a load after a store it may alias, and the next iteration's
    loads wait for this one's sum). What ptxas then schedules differently is not counted. The
    point comes from the variant's own trace (``point_from_variant_trace``); a thread per row
    (atax) loads 32 rows a warp, 32 L1 cycles each (a cycle per 128-byte line), which the
    register does not change: its point 2.57x (8 cycles a load) is 1.24x at 32 (1.13x measured).
    Loads that re-read lines the SM's L1 gave up in between are the L2's, on both sides
    (:mod:`gpuadvise.model.l1`): PolyBench correlation's register sum re-reads each column of
    ``data`` some 6 MB of an SM's loads later, 12.0x as L1 hits, 6.14x as L2 loads (5.39x
    measured on an H200).
    Measured on an H200 (2026-11-29, ``gpuadvise bench``, cold L2): kernels/accumulate's
    ``row_sums`` (262,144 rows of 256 doubles) against ``row_sums_register`` 2.11x (point on the
    H200 model 1.45x; 1.11x before memory order was modelled); PolyBench's ``atax`` rows at
    8192 x 8192 1.07x.

    Fix safety
    ----------
    Automatic and verified where the fix kit can make the change
    (:func:`gpuadvise.source.fixkit.accumulate_in_register`): ``auto acc = buf[i];`` before the
    innermost loop that keeps the address, every ``buf[i]`` of the loop read and written as
    ``acc``, ``buf[i] = acc;`` after it; the measurement stage (or ``--fix`` on the emulator)
    checks the outputs. The additions run in the same order, so the sums are bit-identical.
    Keeping the value in a register assumes no other thread and no other pointer of the kernel
    reads or writes the address during the loop (the trace shows no other thread touching it in
    this launch, not in every launch). Where the kit cannot make that change (a field of a
    struct, ``dest[i].s0 += ...``; an update spread over statements), ``__restrict__`` on the
    kernel's pointer parameters instead, which lets nvcc keep the value in a register itself
    (HeCBench's interleave: 64 stores and 68 loads in the loop become 4 and 8), verified the same
    way; it promises that no two buffers overlap in any launch, which the description asks the
    user to check. Display-only, with the reason, where the kernel's pointers are
    ``__restrict__`` already (the update is guarded inside the loop, the index changes in it,
    the loop reaches the buffer another way or can return).
    """

    id = "GA308"
    name = "global-accumulation"
    title = "Accumulation in global memory inside a loop"
    severity = "warning"
    models = ("trace",)
    # with the stores gone the compiler may fold or vectorise the loop (HeCBench interleave:
    # measured 353x and 1830x against this rule's own 4.3x and 1.6x; docs/accuracy.md)
    point_from_variant_trace = True
    options = {"min_repeats": MIN_ACCUMULATION_REPEATS}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        view = ctx.trace_view
        min_repeats = float(ctx.option("min_repeats"))
        load_lines = view.lines(ctx.same_file, [Kind.LOAD])
        ld_insts = (
            np.unique(np.concatenate([view.insts_at(f, ln, Kind.LOAD) for f, ln, _ in load_lines]))
            if load_lines
            else np.zeros(0, np.int64)
        )
        # one finding per buffer (one register per accumulated value fixes every line that
        # stores it: an unrolled 16-line body is one problem), at its line of most stores
        found = accumulations(view, ctx.same_file, min_repeats)
        for b, lines in found.items():
            top = max(lines, key=lambda x: (x.repeats * len(x.keys), -x.line))
            line, repeats = top.line, top.repeats
            uniq = np.unique(np.concatenate([x.keys for x in lines]))
            saved_st = tuple(sorted({r for x in lines for r in x.saved_store_records}))
            # loads of the stored addresses: all go (the register holds the value) but the
            # first of each (the initial value, read once). ptxas may keep the value in a
            # register already and still store it every iteration (another pointer of the
            # kernel may alias it): then there are no reloads, only the stores
            saved_ld: tuple[int, ...] = ()
            reloads = 0
            if len(ld_insts) and b in view.buffers_at(ld_insts):
                ld, _ = view.access(ld_insts, b)
                saved_ld, reloads = repeated_loads(ld, uniq)
            back = (
                " and loads it back in between"
                if reloads
                else " (the compiler keeps the value in a register but stores it every "
                "iteration: another pointer of the kernel may alias it)"
            )
            others = sorted(x.line for x in lines if x.line != line)
            also = f" (with {lines_text(others)})" if others else ""
            yield self.finding(
                ctx,
                f"`{b}` accumulated in global memory{also}: each thread stores the same address "
                f"{repeats:.1f} times on average{back} ({len(uniq)} addresses in the sampled "
                "CTAs), a store per iteration where one after the loop would do. Keep the "
                "sum in a register and store it once after the loop",
                line=line,
                evidence=[
                    Evidence("stores_per_address", round(repeats, 3), min_repeats, ">="),
                    Evidence("addresses", len(uniq)),
                    Evidence("reloads", reloads, unit="lane loads"),
                    Evidence("removable_store_requests", len(saved_st), unit="requests"),
                    Evidence("removable_load_requests", len(saved_ld), unit="requests"),
                    *([Evidence("lines", len(lines))] if others else []),
                ],
                details=Accumulation(
                    b,
                    round(repeats, 3),
                    len(uniq),
                    saved_st,
                    saved_ld,
                    tuple(sorted({int(i) for x in lines for i in x.store_insts})),
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Accumulation)
        view = ctx.trace_view
        recs = np.array(d.saved_store_records + d.saved_load_records, np.int64)
        st = np.array(d.saved_store_records, np.int64)
        scale = view.scale
        requests = view.weighted(recs) * scale
        store_sectors = view.weighted(st, view.rec_sectors) * scale if len(st) else 0.0
        l1 = view.weighted(recs, record_l1_cycles(view.rec_sectors, view.sector_counts.lines))
        l1 *= scale
        inputs = {"requests_removed": requests, "store_sectors_removed": store_sectors}
        try:
            base = view_traffic(ctx.device, view)
        except ModelUnavailable:
            return Estimate(None, "none", "no launch model for this trace", inputs)
        after = replace(
            base,
            l1_cycles=max(base.l1_cycles - l1, 0.0),
            instructions=max(base.instructions - requests, 0.0),
            l2_store_sectors=max(base.l2_store_sectors - store_sectors, 0.0),
        )
        if after.work is not None and base.work is not None and base.work.ctas:
            w = base.work
            lsu = max(w.pipes.get("lsu", 0.0) - requests / w.ctas, 0.0)
            # no store left in the loop: its loads no longer wait for each iteration's store
            chain = w.chain if w.chain_unordered is None else w.chain_unordered
            after = replace(after, work=replace(w, pipes={**w.pipes, "lsu": lsu}, chain=chain))
        est = launch_change_estimate(
            ctx.device,
            base,
            after,
            f"the {len(recs)} sampled requests of the reloads and repeated stores of "
            f"`{d.buffer}` removed (one store per address and thread kept)",
            inputs,
        )
        if est is None:
            return Estimate(None, "none", "no clock or memory rates for the launch model", inputs)
        point = est.inputs.get("point_speedup")
        return Estimate(
            round(max(float(point), 1.0), 3) if isinstance(point, int | float) else None,
            "point",
            est.method + ". A point, not a bound: the load latency the register takes off each "
            "iteration's chain is not counted (measured 1.07-1.34x on an H200 for such loops)",
            {**est.inputs, "model": MODEL},
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(Accumulation)
        advice = (
            f"accumulate in a register: read `{d.buffer}[...]` once before the loop into a local "
            "variable, add to it in the loop, and store it once after the loop (declare the "
            "kernel's pointers __restrict__ if they never overlap, so that the compiler can do "
            "the same)"
        )
        ks = ctx.kernel_source
        if finding.line is None or not ctx.same_file(finding.file):
            return Variant("display-only", advice)
        span = (ks.tree.line_start(finding.line), ks.tree.line_start(finding.line + 1))
        rw = ks.rewrite()
        why = fixkit.accumulate_in_register(
            ks.tree, rw, _update_at(ks, d.buffer, span), d.buffer, ks.span
        )
        if why is not None:
            # the statement is not one the kit rewrites (a field of a struct, several lines):
            # __restrict__ on the pointers lets the compiler keep the sum in a register itself
            rw = ks.rewrite()
            if ks.kernel is None or fixkit.insert_restrict(ks.tree, rw, ks.kernel) == 0:
                return Variant("display-only", f"{advice} (not rewritten: {why})")
            return Variant(
                "automatic-and-verified",
                "`__restrict__` on the kernel's pointer parameters, so that the compiler keeps "
                f"`{d.buffer}[...]` in a register across the loop and stores it once (the "
                f"register rewrite did not apply: {why}); the outputs are checked against the "
                "kernel's for this launch, where no two buffers overlap, and `__restrict__` "
                "promises it for every launch (check the callers before keeping it)",
                diff=rw.diff(ctx.source_file),
            )
        return Variant(
            "automatic-and-verified",
            f"`{d.buffer}[...]` held in a register across the loop: loaded once before it, "
            "stored once after it; the outputs are checked against the kernel's (this assumes no "
            f"other pointer of the kernel reaches `{d.buffer}` during the loop, which the check "
            "covers for this launch only)",
            diff=rw.diff(ctx.source_file),
        )


def _update_at(ks: KernelSource, buffer: str, span: tuple[int, int]) -> int:
    """The offset of the first ``buffer[...]`` on the line spanning ``span`` (its start when
    there is none: the fix kit then says why)."""
    subs = ks.subscripts(buffer, within=span)
    return subs[0].span[0] if subs else span[0]
