"""GA309 redundant-global-loads: a thread loads a global address again that it loaded (or stored)
before, nothing changing it in between (``feature[l * n + p]`` once per cluster, ``m[i]`` read back
right after its store): load it once into a register."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.rules import (
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    accumulation_reloads,
    addresses_and_threads,
    coalesced_lanes,
    distinct,
    forwarded_in_order,
    launch_change_estimate,
    reload_costs,
    reload_message,
    reload_variant,
    removable_records,
    same_thread_reloads,
    stable_argsort,
    varying_repeats,
    view_traffic,
    wide_pass,
)

_ORDERED = ("volatile", "relaxed", "acquire", "mmio")  # loads the compiler may never merge


@dataclass(frozen=True)
class ReloadLine(FindingDetails):
    """A line's reloads of one buffer over the sampled CTAs: the reload lanes, the distinct
    thread addresses they reach, the warp-level requests all of whose lanes reload (removable),
    and how the reloads came about (lanes after the thread's own store of the value, with a
    store of the thread's to another address in between, by the same instruction as the
    previous load)."""

    line: int
    buffer: str
    lanes: int
    addresses: int
    threads: int
    requests: float
    after_store: int
    stored_between: int
    same_inst: int
    previous_line: int
    store_line: int
    store_buffer: str
    read_only: bool
    gap: float
    coalesced: bool  # its requests' lanes read distinct, adjacent addresses (no row per lane)


@dataclass(frozen=True)
class Reloads(FindingDetails):
    """The kernel's reloads by line (most removable requests first) and what removing them
    changes on the launch model, over the whole launch: the requests, their L1 cycles, the
    L2 sectors and DRAM bytes they cost where the L1 (L2) no longer held the line, and the
    share of the global load requests they are (each warp's largest)."""

    lines: tuple[ReloadLine, ...]
    load_requests: float
    requests: float
    l1_cycles: float
    l2_sectors: float
    dram_bytes: float
    warp_share: float
    l1_bytes: int


class RedundantGlobalLoads(Rule):
    """A thread loading the same global address again, nothing having changed it.

    What it detects
    ---------------
    Global loads (the CPU emulator's trace, over the sampled CTAs) of an address the same
    thread loaded or stored earlier in the launch, with no store, atomic or reduction of another
    traced thread to that address in between: a point's features loaded again for every
    cluster (``feature[l * npoints + p]`` inside ``for (i = 0; i < nclusters; i++)``), a value
    read back right after the thread stored it (``m[i] = ...; ... m[i] ...``), a row re-read by
    a second and a third pass, a bound reloaded every iteration because a store through another
    pointer might have changed it. Reported when the warp-level requests all of whose lanes
    reload are at least ``min_share`` of the kernel's global load requests: one finding per
    kernel, at the line with the most, the other lines named. Volatile and memory-ordered loads
    (a flag polled for another CTA's store) are not counted, nor the loads of an accumulation
    in global memory (a thread storing the address again and again: GA308's); other threads
    loading the address (a neighbourhood) are GA305's. A later pass over more values a thread
    than registers hold (``MAX_HELD``) is reported only where a CTA's coalesced requests read
    the row (a block per row), not with a row per thread nor one row broadcast to every thread.

    Why it is slow
    --------------
    Every reload is a load instruction through the LSU and a request through the L1 data path,
    and the value is waited for: a latency on the thread's dependent chain. Where the L1 still
    holds the line it costs L1 wavefronts and issue slots; where the bytes the CTAs touched in
    between (per SM: the CTA's times its resident CTAs) outgrow the L1 it is an L2 round trip and
    L2 sectors; past the L2 it comes from DRAM again. The compiler removes a reload only when
    it can prove the value unchanged and has a register for it: a store through another pointer
    in between may alias it (no ``__restrict__``), and a loop with a run-time trip count cannot
    keep an unknown number of values in registers.

    Example
    -------
    ``kernels/redundant/reloads.cu``: ``membership`` (k-means: the point's features reloaded for
    each cluster), ``adam_step`` (llm.c's adamw kernel 1: ``m[i]`` and ``v[i]`` read back after
    their stores) and ``scale_columns`` (the row length ``*rows`` reloaded each iteration, a store
    to ``out`` possibly aliasing it); ``membership_registers``, ``distinct_reads``,
    ``read_once`` and ``exchange`` (a neighbour's value re-read after its store and a barrier)
    stay silent. ``kernels/hoist/hoist.cu``: the register fix on a window matched at every
    offset, a warp per row read by three passes (a template) and a column re-read per weight.

    Fix
    ---
    Load the value once into a register and reuse it: hoist loop-invariant loads out of the
    loop (``float f[NF]`` loaded before the cluster loop, indexed by compile-time constants so
    that the array lives in registers: the loop unrolled, the iterations past NF by the
    original loop), keep what the thread stores in a local variable and use that
    instead of reading it back, or fuse the passes that re-read a row. Where a store through
    another pointer forces the reload, ``const __restrict__`` on the read-only pointers lets the
    compiler keep the value itself: that the buffers never overlap is an assumption about every
    launch, which the trace checks for this one only.

    How the estimate is made
    ------------------------
    A point on the launch model: the requests all of whose lanes reload leave the L1 data path,
    the LSU pipe and the issue, and the critical warp's chain loses as many of its global-load
    links (the warp's share of reloads), and the hold the kernel's stores had on the loads
    after them (the chain without memory order, :mod:`gpuadvise.ptx.chains`: a value kept in a
    register, or ``__restrict__``, lets them overlap). Before the change, a reload whose CTA
    touched more bytes in between than its share of the L1 (or of the L2) also costs its
    sectors at the L2 (and from DRAM): the model's own launch counts every re-read of a CTA as
    an L1 hit. The bytes in between are the sectors of the CTA's requests summed (at most its
    distinct sectors), more than the distinct bytes where the CTA re-reads within the span;
    evict-first accesses (``__ldcs``, ``__stcs``) are not counted, as the caches give up their
    lines first (HeCBench's layernorm kernel 2 streams its output past a row its L2 keeps).

    Not a bound: what ptxas schedules differently once the registers hold the values (a loop
    it can unroll when its bound is no longer reloaded) is not counted. Measured on an H200
    (2026-11-29, cold L2, `.gpu/ga309`'s pairs at kernels/redundant's sizes) against the point
    on the H200 model: ``membership`` 1.27x (point 1.07x), ``adam_step`` 1.08x (1.00x),
    ``scale_columns<1>`` with ``__restrict__`` 1.64x (2.42x). It had been an upper bound, and
    all three measurements broke it. The loop fusion of llm.c's softmax_forward_kernel4 (one
    pass over ``out`` fewer): 1.20x measured, 1.21x on the variant's own trace (2026-11-30).

    Fix safety
    ----------
    Automatic and verified where a store of the thread's in between forces the reload (the
    compiler must assume the pointers alias): ``__restrict__`` on the kernel's pointer
    parameters (the fix kit's ``insert_restrict``), the outputs checked against the kernel's on
    this launch, where no two buffers overlap; ``__restrict__`` promises it for every launch,
    which the description asks the user to check. Automatic and verified where no store forces
    it and the reload is a counted loop run again (inside another loop that leaves its index
    alone, or a later pass with the same header): the fix kit's ``plan_hoist`` loads the loop's
    first values (this launch's count a thread, rounded up to 8, at most 64) into a register
    array before the first run, and each run becomes that many unrolled, guarded iterations
    reading the array, then the original loop for the rest (longer rows than this launch's);
    the outputs checked on this launch, no other pointer of the kernel storing to the hoisted
    buffer assumed. Display-only where the kit refuses, with its reason (a ``break`` out of the
    loop, an index that changes between the runs, a guard on it, a store to the buffer), for a
    CTA's coalesced passes over a row longer than its registers hold (fuse the passes), save
    where a pass reads back what the loop before it stored, iteration by iteration (the
    trace): the fix kit's ``plan_fuse`` appends its body to that loop's, the read made the
    store's own target (the compiler forwards it; ``kernels/fuse``), automatic and verified;
    display-only with its diff where the emulator sampled the launch's long loops (the check
    would run every iteration of them: HeCBench's contraction).
    """

    id = "GA309"
    name = "redundant-global-loads"
    title = "A thread reloads global values it already has"
    severity = "warning"
    models = ("trace",)
    # hoisted values change the registers, the occupancy and what the L1 served: measured
    # 0.72-1.12x where this rule's own point said 1.12-1.89x (docs/accuracy.md)
    point_from_variant_trace = True
    options = {"min_share": 0.1}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        view = ctx.trace_view
        rl = same_thread_reloads(view)
        if not len(rl):
            return
        lanes, lb = view.lanes, view.lane_buffer
        # an accumulation in global memory is GA308's: its loads, and the reloads its stores
        # force (a register for the sum takes the store out of the loop)
        keep = ~accumulation_reloads(view, ctx.same_file, rl)
        insts = lanes.inst[rl.lane]
        trace = ctx.trace
        ordered = np.array(
            [any(o in i.opcode for o in _ORDERED) for i in trace.instructions] or [False]
        )
        keep &= ~ordered[insts]
        keep &= ~varying_repeats(view, rl)
        if not keep.any():
            return
        removable = removable_records(view, rl.lane[keep])
        load_rec = view.records["kind"] == int(Kind.LOAD)
        load_requests = view.weighted(np.flatnonzero(load_rec))
        gone = np.flatnonzero(removable)
        requests = view.weighted(gone)
        if load_requests <= 0 or requests < float(ctx.option("min_share")) * load_requests:
            return
        # per line and buffer: what the reloads are and why the compiler left them
        sel = np.flatnonzero(keep)
        inst_line = np.array(
            [
                ln if ln is not None and ctx.same_file(f) else -1
                for f, ln in (trace.line_of(i) for i in range(len(trace.instructions)))
            ]
            or [-1],
            np.int64,
        )
        sel = sel[inst_line[insts[sel]] >= 0]
        if not len(sel):  # every reload on another file's lines (a header's inlined helper)
            return
        line_or_0 = np.array(  # each instruction's line, 0 for none (the messages' lines)
            [trace.line_of(i)[1] or 0 for i in range(len(trace.instructions))] or [0], np.int64
        )
        nb = max(len(view.buffer_names), 1)
        gkey = inst_line[insts[sel]] * nb + lb[rl.lane[sel]]
        order = stable_argsort(gkey)
        bounds = np.flatnonzero(np.r_[True, np.diff(gkey[order]) != 0, True])
        groups = {
            (int(gkey[order[a]] // nb), int(gkey[order[a]] % nb)): sel[order[a:z]]
            for a, z in zip(bounds[:-1], bounds[1:], strict=True)
        }
        lines: list[ReloadLine] = []
        members: list[np.ndarray] = []  # each line's reloads (indices into rl)
        for (line, b), ja in groups.items():
            lane = rl.lane[ja]
            g_recs = distinct(lanes.rec[lane])
            req = view.weighted(g_recs[removable[g_recs]])
            if req <= 0:
                continue
            prev_inst = lanes.inst[rl.prev[ja]]
            stores = rl.last_store[ja]
            stored = stores >= 0
            prev_line = _mode(line_or_0[prev_inst])
            store_line, store_buf = 0, ""
            if stored.any():
                s = stores[stored]
                store_line = _mode(line_or_0[lanes.inst[s]])
                store_buf = view.buffer_names[_mode(lb[s])]
            read_only = all(".nc" in trace.instructions[i].opcode for i in distinct(insts[ja]))
            members.append(ja)
            lines.append(
                ReloadLine(
                    line,
                    view.buffer_names[b],
                    len(ja),
                    *addresses_and_threads(view, lane),
                    round(req, 3),
                    int(rl.after_store[ja].sum()),
                    int(stored.sum()),
                    int((prev_inst == insts[ja]).sum()),
                    prev_line,
                    store_line,
                    store_buf,
                    read_only,
                    float(np.median(rl.gap[ja])),
                    coalesced_lanes(lanes, lane),
                )
            )
        # a second pass over more values than a thread's registers hold with a row per thread
        # (softmax's max, sum and normalise passes) cannot be "loaded once": that is a warp per
        # row first; a CTA's coalesced passes over a long row are reported (fuse the passes)
        held = [not (wide_pass(x) and not x.coalesced) for x in lines]
        if not all(held):  # their reloads leave the share and the estimate too
            for ja, ok in zip(members, held, strict=True):
                if not ok:
                    keep[ja] = False
            lines = [x for x, ok in zip(lines, held, strict=True) if ok]
            removable = removable_records(view, rl.lane[keep])
            requests = view.weighted(np.flatnonzero(removable))
            if requests < float(ctx.option("min_share")) * load_requests:
                return
        if not lines:
            return
        lines.sort(key=lambda x: (-x.requests, x.line))
        c = reload_costs(view, ctx.device, ctx.occupancy, rl, keep, removable)
        details = Reloads(tuple(lines), *c)
        top = lines[0]
        yield self.finding(
            ctx,
            reload_message(lines, requests / load_requests),
            line=top.line,
            evidence=[
                Evidence("reload_share", round(requests / load_requests, 3), 0.1, ">="),
                Evidence("removable_load_requests", round(requests, 1), unit="requests"),
                Evidence("load_requests", round(load_requests, 1), unit="requests"),
                Evidence("loads_per_address", round(top.lanes / top.addresses + 1, 2)),
                Evidence("addresses", top.addresses),
                Evidence("after_own_store", top.after_store, unit="lane loads"),
                Evidence("store_in_between", top.stored_between, unit="lane loads"),
                Evidence("l2_sectors_of_reloads", round(details.l2_sectors, 1)),
                *([Evidence("lines", len({x.line for x in lines}))] if len(lines) > 1 else []),
            ],
            details=details,
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Reloads)
        inputs = {
            "requests_removed": d.requests,
            "load_requests": d.load_requests,
            "l2_sectors_of_reloads": d.l2_sectors,
            "dram_bytes_of_reloads": d.dram_bytes,
            "critical_warp_share": d.warp_share,
        }
        try:
            base = view_traffic(ctx.device, ctx.trace_view)
        except ModelUnavailable:
            return Estimate(None, "none", "no launch model for this trace", inputs)
        # before: the reloads that the L1 (L2) no longer holds cost their sectors there
        before = replace(
            base,
            l2_load_sectors=base.l2_load_sectors + d.l2_sectors,
            dram_bytes=base.dram_bytes + d.dram_bytes,
            dram_load_bytes=base.dram_load_bytes + d.dram_bytes,
        )
        after = replace(
            base,
            l1_cycles=max(base.l1_cycles - d.l1_cycles, 0.0),
            instructions=max(base.instructions - d.requests, 0.0),
            load_requests=max(base.load_requests - d.requests, 0.0),
        )
        w = base.work
        if w is not None and w.ctas:
            lsu = max(w.pipes.get("lsu", 0.0) - d.requests / w.ctas, 0.0)
            # the reloads gone, and with them the stores' hold on the loads after them
            chain = dict(w.chain if w.chain_unordered is None else w.chain_unordered)
            if "global" in chain:
                chain["global"] = chain["global"] * (1.0 - d.warp_share)
            after = replace(after, work=replace(w, pipes={**w.pipes, "lsu": lsu}, chain=chain))
        where = (
            f" ({d.l2_sectors:.0f} of their L2 sectors where the L1 no longer holds the line"
            + (f", {d.dram_bytes / 1e6:.1f} MB from DRAM past the L2" if d.dram_bytes else "")
            + ")"
            if d.l2_sectors
            else " (L1 hits)"
        )
        est = launch_change_estimate(
            ctx.device,
            before,
            after,
            f"the {d.requests:.0f} load requests that only reload removed{where}",
            inputs,
        )
        if est is None:
            return Estimate(None, "none", "no clock or memory rates for the launch model", inputs)
        point = est.inputs.get("point_speedup")
        if not isinstance(point, int | float):
            return Estimate(None, "none", "the launch model gave no point", inputs)
        return Estimate(
            round(max(float(point), 1.0), 3),
            "point",
            est.method + ". A point, not a bound: what ptxas schedules differently once the "
            "values stay in registers is not counted",
            {**est.inputs, "model": MODEL},
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(Reloads)
        try:
            ks = ctx.kernel_source if ctx.same_file(finding.file) else None
        except ModelUnavailable:
            ks = None
        sampled = ctx.trace.sampled_iterations  # verifying a rewrite runs every iteration
        # reloads of what the loop before stored, iteration by iteration: that loop fused
        forwarded = frozenset(
            x.line
            for x in d.lines
            if x.after_store * 2 >= x.lanes
            and x.previous_line
            and forwarded_in_order(ctx.trace_view, ctx.same_file, x.buffer, x.previous_line, x.line)
        )
        return reload_variant(ks, d.lines, ctx.source_file, sampled, forwarded)


def _mode(values: np.ndarray | list[int]) -> int:
    vals, counts = np.unique(np.asarray(values, np.int64), return_counts=True)
    return int(vals[np.argmax(counts)]) if len(vals) else 0
