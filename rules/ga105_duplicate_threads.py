"""GA105 duplicate-threads: a block dimension the kernel never reads, so its threads are copies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    ModelUnavailable,
    Rule,
    RuleContext,
    Space,
    Traffic,
    Variant,
    active_lanes,
    ceiling_s,
    copies_of,
    launch_change_estimate,
    launch_times,
    memory_rates,
    uniform_lanes,
    view_traffic,
)


@dataclass(frozen=True)
class Copies(FindingDetails):
    """The unread block dimensions, the copies of each thread's work, and the lines whose global
    stores several copies make to the same address (read-modify-write: a race)."""

    axes: tuple[str, ...]
    copies: int
    race_lines: tuple[int, ...]
    rmw: bool
    lanes_alike: bool = False


def _racing_stores(ctx: RuleContext) -> tuple[list[int], bool]:
    """Lines whose global stores reach one address from several threads of a CTA in the trace
    (most of their addresses taken by more than one thread), and whether such a line also loads
    (a read-modify-write: ``x[i] += ...``), which makes the copies race."""
    import numpy as np

    trace = ctx.trace
    r = trace.records
    g = r["space"] == int(Space.GLOBAL)  # masks: no copy of every global record (wide rows)
    stores, g_load = r[g & (r["kind"] == int(Kind.STORE))], g & (r["kind"] == int(Kind.LOAD))
    lines: set[int] = set()
    rmw = False
    for inst in np.unique(stores["inst"]).tolist():
        mine = stores[stores["inst"] == inst][:4096]
        lanes = active_lanes(mine["mask"])
        addr = mine["addr"][lanes].astype(np.uint64)
        cta = np.broadcast_to(mine["cta"][:, None], lanes.shape)[lanes].astype(np.uint64)
        key = (cta << np.uint64(44)) ^ addr
        if not len(key) or len(np.unique(key)) * 2 > len(key):
            continue  # mostly one thread per address: no copies writing together
        file, line = trace.line_of(int(inst))
        if line is None or not ctx.same_file(file):
            continue
        lines.add(int(line))
        # a read-modify-write: the line loads the very addresses it stores
        here = [i.inst for i in trace.instructions if trace.line_of(i.inst) == (file, line)]
        loaded = r[np.flatnonzero(g_load & np.isin(r["inst"], here))[:4096]]
        if len(loaded):
            ll = active_lanes(loaded["mask"])
            lkey = (
                np.broadcast_to(loaded["cta"][:, None], ll.shape)[ll].astype(np.uint64)
                << np.uint64(44)
            ) ^ loaded["addr"][ll].astype(np.uint64)
            rmw = rmw or bool(np.isin(key, lkey).any())
    return sorted(lines), rmw


def _index_line(ctx: RuleContext) -> int | None:
    """The kernel's line where its threads first read ``threadIdx.x`` (the SASS's first
    ``S2R ... SR_TID.X``, at its call site): where a thread picks its work from the dimension
    it reads, leaving out the one it does not (PolyBench's ``i = blockIdx.x * blockDim.x +
    threadIdx.x``); None without SASS line info."""
    try:
        instrs = ctx.sass_instructions
    except ModelUnavailable:
        return None
    for i in sorted(instrs, key=lambda i: i.offset):
        file, line = i.call_site
        if "SR_TID.X" in i.operands and line is not None and ctx.same_file(file):
            return int(line)
    return None


def _lockstep(ctx: RuleContext, before: Traffic, after: Traffic, est: Estimate) -> Estimate:
    """``est`` with the copies' L1 queue on the before side's chain, where the chain decides
    the launch: the copies of a warp run the same chain in lockstep, so each step's loads wait
    in the L1 behind every copy's requests of that step, and the L1's time adds to the
    critical path instead of overlapping it (polybench's atax_kernel1, 8 copies: 1.15x
    predicted without it, 1.59x measured on an H200). The one warp left after the fix queues
    behind no copy: its side as before."""
    rates = memory_rates(ctx.device)
    if rates is None:
        return est
    b = launch_times(before, ctx.device, rates)
    bp = launch_times(before, ctx.device, rates, peak_dram=True)
    a = launch_times(after, ctx.device, rates)
    ap = launch_times(after, ctx.device, rates, peak_dram=True)
    if b is None or bp is None or a is None or ap is None or b.bound_by != "dependency":
        return est
    queued = replace(b, dependency_s=b.dependency_s + b.l1_s)
    queued_peak = replace(bp, dependency_s=bp.dependency_s + bp.l1_s)
    point = queued.time_s / a.time_s
    peak = queued_peak.time_s / ap.time_s
    bound = max(ceiling_s(queued_peak) / ap.time_s, point, est.speedup or 1.0)
    inputs = dict(est.inputs)
    inputs.update(point_speedup=round(point, 3), peak_speedup=round(peak, 3),
                  point_without_queue=est.inputs.get("point_speedup"), l1_queue_us=b.l1_s * 1e6,
                  before_s=queued.time_s, after_s=a.time_s)  # fmt: skip
    return replace(
        est,
        speedup=round(max(bound, 1.0), 3),
        method=est.method + f". The copies run their chain in lockstep: each step's loads "
        f"wait in the L1 behind every copy's requests, so the L1's {b.l1_s * 1e6:.2f} us add "
        f"to the before side's dependent chain: point {point:.2f}x, upper bound {bound:.2f}x",
        inputs=inputs,
    )


class DuplicateThreads(Rule):
    """A block dimension the kernel never reads: its threads do the same work, and race.

    What it detects
    ---------------
    A block with more than one thread in y (or z) whose kernel never reads ``threadIdx.y``
    (``threadIdx.z``): the module's PTX has no ``%tid.y`` (``%tid.z``), and no lane or warp id
    that could tell the threads apart. Threads that differ only in that dimension run the same
    instructions on the same data: a 32x8 block of a kernel written for ``threadIdx.x`` does each
    element's work 8 times. Where they store, the emulator's trace shows several threads of a CTA
    writing one address; where the store follows a load of the same address
    (``x2[i] += ...``), the copies race: the result depends on their order (reported as an
    error: a wrong result before a slow one). A race is reported at its first racing store;
    copies that store the same values at the line where the threads first read ``threadIdx.x``
    (the SASS's ``S2R SR_TID.X``: where each thread takes its work index from the dimension it
    reads and leaves the other out, PolyBench's ``i = blockIdx.x * blockDim.x + threadIdx.x``),
    else at the first store several copies make, else at the kernel.

    The same duplication across the lanes: a kernel that reads ``threadIdx.x`` only to guard
    its work (``if (tid < N)``) and then lets every thread do the whole of it, so that the
    active lanes of (nearly) every global load and store name one address (at least
    ``min_alike_share`` of the requests of two or more lanes; stores must be among them):
    each warp does one thread's work as many times as it has lanes, every thread storing the
    same values to the same places. Reported at the first such store.

    Why it is slow
    --------------
    Every copy issues the same loads, arithmetic and stores: the issue slots, the L1 requests
    and the shared-memory work grow with the copies while the result does not (the copies' loads
    share sectors, so DRAM traffic grows less). The race makes the result wrong as well as slow.

    Example
    -------
    PolyBench-ACC's ``atax_kernel1``: a 32x8 block where only ``threadIdx.x`` picks the row, 8
    threads accumulating ``tmp[i] += A[i*NY + j] * x[j]`` together.

    Fix
    ---
    Launch a block of the dimension the kernel reads (``dim3(32, 1)``) with as many CTAs as
    before, or make the kernel use ``threadIdx.y`` (the y threads were probably meant to split
    the work: each takes a share of the loop, then the shares are combined). Lanes alike: give
    each thread its share of the loop (``for (i = threadIdx.x; i < n; i += blockDim.x)``),
    combine the shares (a shuffle or block reduction for a maximum or a sum) and let one
    thread store each result (Infatoshi's course ``softmax_cuda``: a CTA per row).

    How the estimate is made
    ------------------------
    An upper bound on the launch roofline: the work the copies repeat (issue, L1 requests,
    shared-memory wavefronts) divided by the copies, the DRAM bytes unchanged. Where the
    critical path of dependent instructions decides the launch, the copies run it in lockstep:
    each step's loads wait in the L1 behind every copy's requests of that step, so the before
    side's chain is taken with the L1's time added to it. (atax_kernel1's 8 copies, 1.59x
    measured on an H200, were bounded at 1.15x when a load of 32 rows cost the L1 8 cycles;
    at a cycle per line, 32, the L1 decides its before side itself.) Lanes alike: the
    copies are the lanes, and each thread's share of the loop also divides its dependent chain
    (the combining steps, a few shuffles, left out: the side that keeps the bound).

    Fix safety
    ----------
    A launch with one thread per distinct piece of work: display-only where the copies race
    (its outputs differ from the racing kernel's, which are order-dependent, so no output check
    can confirm it); automatic and verified where they store the same values and none loads what
    it stores (PolyBench's atax_kernel1 keeps ``tmp[i]`` in a register: the outputs are the
    same whatever the copies' order, and the measurement compares them).
    Lanes alike, where no store races (no copy stores an address it loaded) and the traced
    warps of a CTA access the same addresses: automatic and verified, a block of one thread in
    x, on a grid of one CTA in x where the traced CTAs of a row are copies too (softmax_cuda's
    four CTAs a row), else on the grid as it is; the measurement compares the outputs before
    it reports a speedup. It removes the copies, not the serial loop (the rewrite above).
    """

    id = "GA105"
    name = "duplicate-threads"
    title = "Block dimension never read: threads duplicate each other's work (and race)"
    severity = "warning"
    models = ("trace",)
    options = {"min_alike_share": 0.95}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        axes = ctx.unread_block_dims
        if not axes:
            yield from self._lanes_alike(ctx)
            return
        block = ctx.launch.block.as_tuple()
        copies = 1
        for axis in axes:
            copies *= block["xyz".index(axis)]
        race_lines, rmw = _racing_stores(ctx)
        dims = " and ".join(f"threadIdx.{a}" for a in axes)
        text = (
            f"block {ctx.launch.block} but the kernel never reads {dims}: each piece of work is "
            f"done by {copies} threads that compute the same thing"
        )
        if race_lines:
            where = ", ".join(map(str, race_lines))
            text += f"; they store to the same addresses (line {where})" + (
                ", each reading the value it then overwrites: a data race whose result "
                "depends on the order of the copies"
                if rmw
                else ""
            )
        keep = tuple(
            b if a == "x" or a not in axes else 1 for a, b in zip("xyz", block, strict=True)
        )
        text += (
            f". Launch blocks of {'x'.join(map(str, keep))} (or make the kernel split its work "
            f"over {dims})"
        )
        # a race is reported at its store (the wrong result is there); copies that store the
        # same values, where the thread's work index is taken from the dimensions it reads
        line = race_lines[0] if rmw else _index_line(ctx)
        yield self.finding(
            ctx,
            text,
            line=line or (race_lines[0] if race_lines else ctx.kernel_line),
            evidence=[
                Evidence("unread_block_dims", ",".join(axes)),
                Evidence("copies_per_piece_of_work", copies, 2, ">=", "threads"),
                Evidence("racing_store_lines", len(race_lines)),
                Evidence("read_modify_write", rmw),
            ],
            details=Copies(tuple(axes), copies, tuple(race_lines), rmw),
            severity="error" if rmw else None,  # a data race is wrong before it is slow
        )

    def _lanes_alike(self, ctx: RuleContext) -> Iterator[Finding]:
        """Every lane of a warp loads and stores the addresses the others do."""
        u = uniform_lanes(ctx.trace)
        share = float(ctx.option("min_alike_share"))
        if u is None or not u.duplicated(share) or u.first_store_inst < 0:
            return
        file, line = ctx.trace.line_of(u.first_store_inst)
        if line is None or not ctx.same_file(file):
            return
        copies = max(2, round(u.lanes))
        yield self.finding(
            ctx,
            f"every lane of a warp loads and stores the addresses the others do "
            f"({u.store_share:.0%} of the stores and {u.load_share:.0%} of the loads of two or "
            f"more lanes name one address for all of them, {u.lanes:.1f} lanes on average): the "
            "kernel reads threadIdx.x only to guard its work, so each thread does the whole of "
            f"it and a warp does one thread's work {copies} times, storing the same values to "
            "the same places. Give each thread its share of the loop (i = threadIdx.x; i < n; "
            "i += blockDim.x), combine the shares (a shuffle or block reduction) and let one "
            "thread store each result",
            line=line,
            evidence=[
                Evidence("store_share_alike", round(u.store_share, 3), share, ">="),
                Evidence("load_share_alike", round(u.load_share, 3), share, ">="),
                Evidence("copies_per_piece_of_work", copies, 2, ">=", "threads"),
                Evidence("store_requests", u.store_requests),
            ],
            details=Copies((), copies, (line,), False, lanes_alike=True),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Copies)
        if not ctx.has_model("trace"):
            return Estimate(None, "none", "not estimated: no trace of the kernel")
        before = view_traffic(ctx.device, ctx.trace_view)
        # the copies' warps go, with their loads and waits on each other's misses in flight
        nw = before.work.warps_per_cta if before.work is not None else 1
        k = nw / max(1, nw // d.copies)  # a CTA's warps before over after (model/l1.py)
        pending = before.l1_pending_load_requests - (k - 1) * before.l2_missing_load_requests
        after = replace(
            before, load_requests=before.load_requests / k,
            l1_pending_load_requests=max(pending, 0.0), l1_cycles=before.l1_cycles / d.copies,
            shared_wavefronts=before.shared_wavefronts / d.copies,
            instructions=before.instructions / d.copies,
            l2_store_sectors=before.l2_store_sectors / (d.copies if d.race_lines else 1),
            # the execution model's work: a CTA's warps and their instructions, copies fewer;
            # each remaining thread's dependent chain the same
            work=None if before.work is None else replace(
                before.work, pipes={k: v / d.copies for k, v in before.work.pipes.items()},
                warps_per_cta=max(1, before.work.warps_per_cta // d.copies),
                shared_requests=before.work.shared_requests / d.copies,
                shared_wavefronts=before.work.shared_wavefronts / d.copies),
        )  # fmt: skip
        inputs: dict[str, object] = {"copies": d.copies}
        if d.lanes_alike and after.work is not None:
            # the further fix, a rewrite: the lanes share the loop (each thread's chain a
            # copies-th, the warps all kept); named with its bound, while the estimate is the
            # automatic variant's, one thread per piece of work (softmax_cuda: the shared loop
            # 18.4x, the one-thread launch measured 1.08x on an H200)
            w = after.work
            shared = replace(after, work=replace(
                w.per_cta_scaled(1.0 / d.copies), warps_per_cta=before.work.warps_per_cta
                if before.work is not None else w.warps_per_cta))  # fmt: skip
            full = launch_change_estimate(
                ctx.device, before, shared, "the lanes sharing the loop", {}
            )
            if full is not None and full.speedup is not None:
                inputs["share_the_loop_bound"] = full.speedup
        est = launch_change_estimate(
            ctx.device, before, after, f"one thread per piece of work ({d.copies} copies fewer)",
            inputs,
        )  # fmt: skip
        if est is None:
            return Estimate(None, "none", "not estimated: the device model lacks its rates")
        if d.lanes_alike:
            bound = inputs.get("share_the_loop_bound")
            more = (
                f"; the further fix, the lanes sharing the loop (a rewrite): up to {bound:.2f}x"
                if bound
                else ""
            )
            return replace(est, method=est.method + more)
        return _lockstep(ctx, before, after, est)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(Copies)
        if d.lanes_alike:
            return _one_thread_launch(ctx, d)
        block = ctx.launch.block.as_tuple()
        keep = [b if a not in d.axes else 1 for a, b in zip("xyz", block, strict=True)]
        what = f"launch blocks of {'x'.join(map(str, keep))} with the same grid (one thread per "
        launch = {"block": keep, "grid": list(ctx.launch.grid.as_tuple())}
        if d.rmw:
            return Variant(
                "display-only",
                what + "piece of work); the racing kernel's outputs depend on the order of its "
                "copies, so no output check can confirm the change",
                launch=launch,
            )
        return Variant(
            "automatic-and-verified",
            what + "piece of work): the copies store the same values (none loads what it "
            "stores), so the outputs do not depend on their order and are compared with the "
            "kernel's before a speedup is reported",
            launch=launch,
        )


_SHARE = (
    "give each thread its share of the loop (for (int i = threadIdx.x; i < n; i += "
    "blockDim.x)), combine the shares with a warp shuffle or a block reduction, and let one "
    "thread store each result (for a softmax: a CTA per row, the maximum and the sum reduced "
    "across its threads)"
)


def _one_thread_launch(ctx: RuleContext, d: Copies) -> Variant:
    """Lanes alike: a block of one thread in x where ``blockDim.x`` copies were, when the trace
    shows the warps of a CTA copies too; on one CTA in x first when the traced CTAs of a row
    are copies as well (softmax_cuda's columns), else on the grid as it is. A candidate the
    emulator, running both launches whole, saw compute other outputs is dropped. Display-only
    (the rewrite) when the copies race (a store of an address the line loaded)."""
    grid, block = ctx.launch.grid.as_tuple(), ctx.launch.block.as_tuple()
    warps_alike, ctas_alike = copies_of(ctx.trace, grid)
    if block[0] == 1 or not warps_alike or _racing_stores(ctx)[1]:
        return Variant("display-only", _SHARE)
    one = (1, block[1], block[2])
    cands = []
    for g in [(1, grid[1], grid[2])] if ctas_alike and grid[0] > 1 else [grid]:
        check = ctx.services.compare_launch(g, one)
        if not check.same and not check.why.startswith("not checked"):
            continue  # the emulator saw it compute something else
        how = f"; the emulator ran both ({check.how}): same outputs" if check.same else ""
        shape = "x".join(map(str, one))
        cands.append(
            Variant(
                "automatic-and-verified",
                f"launch blocks of {shape} on a {'x'.join(map(str, g))} grid: one thread per "
                f"piece of work where {d.copies} copies did it (the result of each still "
                f"computed by one thread, one after the other: the further fix is to {_SHARE}); "
                f"the outputs are compared with the kernel's before a speedup is reported{how}",
                launch={"block": list(one), "grid": list(g)},
            )
        )
    return cands[0] if cands else Variant("display-only", _SHARE)
