"""GA303's second finding: coalesced narrow loads that keep too few bytes in flight.

A warp's load of 1-, 2-, 4- or 8-byte elements at consecutive addresses across its lanes is
coalesced, but it moves 32 to 256 bytes per request. When each thread uses the element before
it issues its next load (a loop that compares, branches or accumulates on every element, or one
element per thread over a grid of many waves), a warp waits one memory round trip per request:
the launch is bound by its warps' dependent chains (the execution model's dependency term) or by
Little's law (bytes in flight against bandwidth x latency), not by DRAM. Each thread taking
``k`` consecutive elements with one 16-byte access (``uchar4``/``uint4`` of bytes, ``half2`` x 4,
``float4``) moves ``k`` times the bytes per request and per round trip: the loop along the lanes
runs ``k`` times fewer iterations, or the grid has ``k`` times fewer threads.

:func:`narrow_loads` finds the loads in the trace view; :func:`widened_traffic` makes the
launch's :class:`~gpuadvise.model.roofline.Traffic` after the change, for the launch model.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuadvise.arrays import lexsort_pair
from gpuadvise.devices import DeviceSpec, memory_rates
from gpuadvise.model.roofline import BOUND_MARGIN, Traffic, ceiling_s, launch_times
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.estimates import launch_change_estimate, view_traffic
from gpuadvise.rules.findings import Estimate
from gpuadvise.rules.global_atomics import hot_addresses, update_ns
from gpuadvise.rules.loop_overhead import LoopOverhead, loop_overhead
from gpuadvise.trace.access import WARP, Kind
from gpuadvise.trace.view import TraceView
from gpuadvise.words import counted

__all__ = [
    "VECTOR_BYTES",
    "NarrowLoad",
    "Widening",
    "narrow_context",
    "narrow_estimate",
    "narrow_loads",
    "narrow_why",
    "one_per_wait_stream",
    "select_narrow",
    "widened_traffic",
    "widening",
]

VECTOR_BYTES = 16
"""The widest access a thread makes (``LDG.E.128``): what ``k`` elements become."""
MIN_LANES = WARP // 2
"""Active lanes a narrow load's requests have on average (at least): a stream the warps read,
not the few lanes of a tile's halo or a tail."""
MIN_UNIT_STRIDE = 0.9
"""The share of an instruction's warp-level requests (of two or more active lanes) whose lanes
read consecutive elements (lane ``l`` at ``base + l * width``) for it to be a narrow stream."""
_SECTORS_PER_CLOCK = 4  # the L1 data path per SM: 128 bytes a clock


@dataclass(frozen=True)
class NarrowLoad:
    """One global load instruction whose warps read consecutive narrow elements.

    ``records``: its requests in the view; ``requests``: their count, weighted (sampled CTAs);
    ``per_thread``: the executions of one thread (mean); ``along_lanes``: a thread's next
    execution is a block or a grid of elements further on (a block- or grid-stride loop over the
    lanes' dimension: more elements per thread shorten the loop); else each thread reads one
    element, or walks another dimension (more elements per thread shrink the grid)."""

    inst: int
    file: str | None
    line: int | None
    width: int
    buffer: str | None
    records: np.ndarray
    requests: float
    per_thread: float
    along_lanes: bool


@dataclass(frozen=True)
class Widening:
    """The change: ``k`` elements per thread; ``loop``: how much shorter a thread's loop gets
    (``min(k, iterations)``), ``grid``: how much smaller the grid (``k / loop``);
    ``chain_kept``: the share of the critical path's global-load links that stay; ``share``: the
    widened loads' share of those links (their requests per warp over the links)."""

    k: int
    loop: float
    grid: float
    chain_kept: float
    requests_saved: float  # sampled CTAs, weighted
    l1_cycles_saved: float  # sampled CTAs, weighted
    share: float = 1.0
    overhead_saved: Mapping[str, float] = field(default_factory=dict)  # launch, by pipe

    @property
    def overhead_instructions_saved(self) -> float:
        """Warp instructions of index, address and loop work saved over the launch."""
        return float(sum(self.overhead_saved.values()))


_FOUND: weakref.WeakKeyDictionary[TraceView, tuple[weakref.ref[Any], list[NarrowLoad]]] = (
    weakref.WeakKeyDictionary()
)


def narrow_loads(view: TraceView, trace: object) -> list[NarrowLoad]:
    """Every global load of 1 to 8 bytes a lane whose requests read consecutive elements across
    the lanes (at least :data:`MIN_UNIT_STRIDE` of those with two or more active lanes, and
    :data:`MIN_LANES` active lanes a request on average), most requests first. Found once per
    view and trace (GA303's detect and each of its findings' estimates ask: a pass over the
    lanes of every load instruction each time, issue 31); a new list each call."""
    got = _FOUND.get(view)
    if got is None or got[0]() is not trace:
        # (the trace held weakly: the view lives while its trace does, trace_view's cache)
        got = (weakref.ref(trace), _narrow_loads(view, trace))
        _FOUND[view] = got
    return list(got[1])


def _narrow_loads(view: TraceView, trace: object) -> list[NarrowLoad]:
    lanes = view.lanes
    if not len(lanes):
        return []
    out: list[NarrowLoad] = []
    lane_no = lanes.tid % WARP
    threads = int(math.prod(view.block))
    for inst in view.lane_insts().tolist():
        if view.inst_kind[inst] != int(Kind.LOAD):
            continue
        at = view.lanes_of(np.array([inst], np.int64))  # its lanes, in lane order
        sel = at[view.lane_buffer[at] >= 0]
        if not len(sel):
            continue
        w = int(lanes.width[sel[0]])
        if w >= VECTOR_BYTES or not (lanes.width[sel] == w).all():
            continue
        rec = lanes.rec[sel]  # non-decreasing: the lanes are in record order
        key = lanes.off[sel] - lane_no[sel] * w
        starts = np.flatnonzero(np.r_[True, rec[1:] != rec[:-1]])
        n_lanes = np.diff(np.r_[starts, len(rec)])
        lo = np.minimum.reduceat(key, starts)
        hi = np.maximum.reduceat(key, starts)
        buf = view.lane_buffer[sel]
        one_buf = np.minimum.reduceat(buf, starts) == np.maximum.reduceat(buf, starts)
        multi = n_lanes >= 2
        if multi.sum() < max(1, len(starts) // 2):
            continue
        unit = (lo == hi) & one_buf & multi
        if unit.sum() < MIN_UNIT_STRIDE * multi.sum() or n_lanes.mean() < MIN_LANES:
            continue
        records = rec[starts]
        weights = view.rec_weight[records]
        thread = lanes.cta[sel].astype(np.int64) * threads + lanes.tid[sel]
        # each thread's lanes together, in execution order (one sort: the distinct threads
        # and the steps of :func:`_along_lanes` read it)
        by_thread = lexsort_pair(rec, thread)
        t = thread[by_thread]
        n_threads = int(np.count_nonzero(t[1:] != t[:-1])) + 1
        per_thread = float((weights * n_lanes).sum()) / n_threads
        b = int(np.bincount(buf).argmax())
        file, line = trace.call_site_of(inst)  # type: ignore[attr-defined]
        out.append(
            NarrowLoad(
                inst,
                file,
                line,
                w,
                view.buffer_names[b],
                records,
                float(weights.sum()),
                per_thread,
                _along_lanes(view, t, lanes.off[sel][by_thread], threads, w),
            )
        )
    out.sort(key=lambda n: -n.requests)
    return out


def select_narrow(
    loads: list[NarrowLoad], max_narrow_bytes: int, max_stream_bytes: int
) -> tuple[list[NarrowLoad], bool]:
    """The loads GA303 considers, and whether they are wider than ``max_narrow_bytes`` (then
    reported only as a stream walked one element per wait, :func:`one_per_wait_stream`): the
    narrow ones when there are any, else those of at most ``max_stream_bytes``."""
    narrow = [n for n in loads if n.width <= max_narrow_bytes]
    if narrow:
        return narrow, False
    return [n for n in loads if n.width <= max_stream_bytes], True


def one_per_wait_stream(inputs: Mapping[str, object], waiting: bool) -> bool:
    """Whether 4- or 8-byte loads (``inputs``: :func:`narrow_estimate`'s) are a stream the warps
    wait on one element at a time, as 1- and 2-byte ones are by their width: each thread walks
    the lanes' dimension in a loop of at least ``k`` iterations (the fix makes the loop ``k``
    times shorter and leaves the grid), the SASS issues one of the loads per wait (ptxas neither
    unrolled nor batched them: a batch ratio of 1), the warps wait on them before the change
    (``waiting``: dependency or Little's law) and the widened launch is bound by the DRAM (a
    launch still waiting after it is short of warps: GA106's). hecbench's ``accuracy_kernel``,
    a CTA per row walking 10,000 floats one LDG per iteration, measured 1.98x with float4 loads
    on an H200; the same shape 1.89x and a one-wave ``acc += x[i]`` 1.60x (.gpu/s8-vec probe,
    2026-11-29, 256 MB). Left alone for now, as the launch model does not tell them from the
    kernels where wider loads measured 1.00x (gemv_quantized_int8's 8-byte loads): a grid of one
    element per thread and loops ptxas unrolled, though the same probe measured float4 loads
    1.65x on a map of one float per thread and 1.59x on the sum unrolled 4x (the gain is in
    fewer, wider requests as much as in the bytes in flight)."""

    def num(key: str, default: float) -> float:
        v = inputs.get(key, default)
        return float(v) if isinstance(v, (int, float)) else default

    return (
        waiting
        and num("grid_factor", 0.0) <= 1.0
        and num("loop_factor", 0.0) >= num("k", 2.0)
        and num("sass_batch_ratio", 1.0) <= 1.0
        and inputs.get("bound_by_after") == "dram"
    )


def _along_lanes(view: TraceView, t: np.ndarray, off: np.ndarray, threads: int, w: int) -> bool:
    """Whether a thread's executions step a block or a grid of elements (the median step);
    ``t`` and ``off``: the lanes' threads and offsets by thread, each thread's in execution
    order."""
    same = t[1:] == t[:-1]
    if not same.any():
        return False
    step = int(np.median(np.abs(np.diff(off)[same])))
    return step in (threads * w, view.total_ctas * threads * w)


def widening(
    view: TraceView, loads: list[NarrowLoad], overhead: LoopOverhead | None = None
) -> Widening:
    """``k = 16 / widest element`` elements per thread for every load of ``loads`` (the threads
    take ``k`` consecutive elements of each of them), the loop or the grid shortened as the
    first (most requests) walks. With ``overhead`` (:func:`narrow_context`), the
    index, address and loop work of the loop body is done once per chunk of ``k`` (one body
    execution per request of the first load), the prologue's once per thread of the smaller
    grid."""
    k = max(VECTOR_BYTES // max(n.width for n in loads), 1)
    main = loads[0]
    loop = float(min(k, max(main.per_thread, 1.0))) if main.along_lanes else 1.0
    grid = k / loop
    recs = np.concatenate([n.records for n in loads])
    rw = view.rec_weight[recs]
    sect = view.rec_sectors[recs].astype(float)
    before = np.maximum(1.0, sect / _SECTORS_PER_CLOCK)
    after = np.maximum(1.0, k * sect / _SECTORS_PER_CLOCK) / k
    l1_saved = float(((before - after) * rw).sum())
    saved = float(rw.sum()) * (1.0 - 1.0 / k)
    # the widened loads' share of the critical path's global links: their requests per warp
    # over the links (a warp waits once per request of a load used before the next is issued;
    # loads issued together share a link), at most all of them
    links = float(view.work.chain.get("global", 0.0)) if view.work is not None else 0.0
    per_warp = float(rw.sum()) / max(view.warps(), 1)
    f = min(per_warp / links, 1.0) if links > 0 else 0.0
    over: dict[str, float] = {}
    w = view.work
    if overhead is not None and w is not None:
        execs = float(view.rec_weight[main.records].sum()) * view.scale
        warps = float(w.ctas * max(w.warps_per_cta, 1))
        # the loop's work is done once per chunk when the loop walks the lanes' dimension, or
        # runs alike for every element (no loop, or one exit not on the data): a loop that
        # leaves on the data (a ``break`` at a mismatch) runs for each element as before
        shared = main.along_lanes or overhead.uniform
        for p, n in (overhead.body if shared else {}).items():
            over[p] = over.get(p, 0.0) + n * execs * (1.0 - 1.0 / k)
        for p, n in overhead.prologue.items():
            over[p] = over.get(p, 0.0) + n * warps * (1.0 - 1.0 / grid)
        # at most that share of each pipe's work (the PTX's blocks counted statically: both
        # sides of a branch)
        over = {p: min(v, w.pipes.get(p, 0.0) * w.ctas * (1.0 - 1.0 / k)) for p, v in over.items()}
    return Widening(k, loop, grid, 1.0 - f + f / loop, saved, l1_saved, f, over)


def narrow_why(wd: Widening, flight: float | None, index: float | None) -> str:
    """Why the launch waits and what ``wd`` does about it, for GA303's message: on its loads
    (``flight``: the bytes a warp keeps in flight), on its index work (``index``: the share of
    its instructions), else on its CTA launches (the fix's grid ``wd.grid`` times smaller)."""
    k16 = f"{wd.k} consecutive elements per thread in one {VECTOR_BYTES}-byte access"
    if flight is not None:
        return (
            f"(its warps keep about {flight:.0f} bytes each in flight, waiting on each load before "
            f"the next): {k16} move {wd.k}x the bytes per round trip"
        )
    if index is not None:
        return (
            f"({index:.0%} of its instructions index, address and loop work done per element): "
            f"{k16} do it once per chunk"
        )
    return f"(its CTAs' launches, each CTA doing little): {k16} launch a {wd.grid:g}x smaller grid"


def widened_traffic(before: Traffic, view: TraceView, wd: Widening) -> Traffic:
    """The launch after the change: fewer requests (each ``k`` times the sectors) on the L1 and
    the issue, the loop's global links on the critical path ``loop`` times fewer, ``grid`` times
    fewer CTAs (each doing that much more of the element-wise work, its chain as it is), the
    bytes a warp keeps in flight ``k`` times as many per widened request; L2 and DRAM as they
    are."""
    s = view.scale
    saved = wd.requests_saved * s
    n_load = before.load_requests
    after = replace(
        before,
        l1_cycles=max(before.l1_cycles - wd.l1_cycles_saved * s, 0.0),
        instructions=max(before.instructions - saved, 0.0),
        load_requests=max(n_load - saved, 1.0),
        # the same load sectors over fewer requests: each request that many more in flight
        bytes_in_flight_per_warp=before.bytes_in_flight_per_warp
        * n_load
        / max(n_load - saved, 1.0),
    )
    w = before.work
    if w is None:
        return after
    total = w.instructions * w.ctas
    kept = max(0.0, 1.0 - saved / total) if total > 0 else 1.0
    # the index, address and loop work done once per chunk instead of once per element
    over = wd.overhead_saved
    pipes = {p: max(v - over.get(p, 0.0) / max(w.ctas, 1), 0.0) for p, v in w.pipes.items()}
    left = sum(pipes.values()) / w.instructions if w.instructions > 0 else 1.0
    after = replace(
        after, instructions=max(after.instructions - wd.overhead_instructions_saved, 0.0)
    )
    chain = dict(w.chain)
    if "global" in chain:
        chain["global"] = chain["global"] * wd.chain_kept
    ctas = max(1, math.ceil(w.ctas / wd.grid))
    work = replace(
        w,
        pipes={p: v * kept * wd.grid for p, v in pipes.items()},
        chain=chain,
        critical_instructions=w.critical_instructions * kept * left * wd.grid / wd.loop,
        ctas=ctas,
    )
    resident = before.resident_warps
    per_cta = max(w.warps_per_cta, 1)
    if ctas * per_cta < resident:
        resident = float(ctas * per_cta)
    return replace(after, work=work, resident_warps=resident)


def waited_bytes_per_warp(t: Traffic) -> float:
    """The load bytes a warp has in flight between two waits: its bytes from the L2 side over
    the global-load links of its critical path (one per loop iteration that uses its load before
    the next); the traffic's own figure when the chain has no global link."""
    w = t.work
    links = 0.0 if w is None else float(w.chain.get("global", 0.0))
    warps = 0.0 if w is None else float(w.ctas * max(w.warps_per_cta, 1))
    if links <= 0 or warps <= 0:
        return t.bytes_in_flight_per_warp
    return t.l2_load_sectors * 32.0 / warps / links


def narrow_context(ctx: RuleContext, loads: list[NarrowLoad]) -> tuple[LoopOverhead | None, float]:
    """What :func:`narrow_estimate` takes from the kernel beyond the trace view: the index,
    address and loop work of the loop holding ``loads`` (:func:`loop_overhead`; None: unknown),
    and the seconds the L2 takes for the launch's updates of its hottest global atomic address
    one after another (GA208's model, addresses that CTAs all over the grid update; 0: none)."""
    try:
        lines = [n.line for n in loads if n.line]
        over = loop_overhead(
            ctx.ptx, ctx.kernel.mangled, ctx.trace, [n.inst for n in loads],
            ctx.sass_instructions, lines,
        )  # fmt: skip
    except ModelUnavailable:
        over = None
    scale = ctx.trace.scale
    serial = max(
        (
            h.launch_updates(scale) * update_ns(h.opcode) * 1e-9
            for h in hot_addresses(ctx.trace).values()
            if h.grid_wide
        ),
        default=0.0,
    )
    return over, serial


def narrow_estimate(
    device: DeviceSpec,
    view: TraceView,
    loads: list[NarrowLoad],
    overhead: LoopOverhead | None = None,
    serial_s: float = 0.0,
) -> tuple[Estimate, Widening] | None:
    """The launch model's upper bound for ``loads`` widened (:func:`widening`,
    :func:`widened_traffic`), with the point and peak values and the terms that bound the launch
    before and after in its inputs; None without the device's rates or the kernel's work (the
    dependent chains are the point: without them the change is not modelled). ``overhead``:
    the loop's index, address and loop work (:func:`narrow_context`); ``serial_s``: the
    launch's updates of its hottest global atomic address in turn (:func:`_bounded`)."""
    if not loads or view.work is None:
        return None
    wd = widening(view, loads, overhead)
    if wd.k < 2:
        return None
    before = _batched(view_traffic(device, view), wd, overhead)
    after = widened_traffic(before, view, wd)
    how = (f"a {wd.loop:g}x shorter loop" if wd.grid <= 1 else f"a {wd.grid:g}x smaller grid") + (
        f" and a {wd.loop:g}x shorter loop" if wd.grid > 1 and wd.loop > 1 else ""
    )
    what = (
        f"{wd.k} elements per thread in one {VECTOR_BYTES}-byte access ({how}; "
        f"{counted(len(loads), 'load instruction')} widened, {wd.chain_kept:.0%} of the critical "
        "path's global links kept"
        + (
            f", {wd.overhead_instructions_saved:.3g} warp instructions of index, address and "
            "loop work saved: done once per chunk"
            if wd.overhead_instructions_saved
            else ""
        )
        + ")"
    )
    inputs: dict[str, object] = {
        "k": wd.k,
        "loop_factor": wd.loop,
        "grid_factor": wd.grid,
        "chain_global_kept": round(wd.chain_kept, 4),
        "load_share": round(wd.share, 4),
        "requests_saved": wd.requests_saved * view.scale,
        "l1_cycles_saved": wd.l1_cycles_saved * view.scale,
        "bytes_in_flight_per_warp_before": before.bytes_in_flight_per_warp,
        "bytes_in_flight_per_warp_after": after.bytes_in_flight_per_warp,
        "waited_bytes_per_warp": waited_bytes_per_warp(before),
        "overhead_instructions_saved": wd.overhead_instructions_saved,
        "sass_batch_ratio": overhead.batch_ratio if overhead is not None else 1.0,
    }
    est = launch_change_estimate(device, before, after, what, inputs)
    if est is None:
        return None
    return _bounded(est, device, before, after, serial_s), wd


def _batched(before: Traffic, wd: Widening, overhead: LoopOverhead | None) -> Traffic:
    """``before`` with the widened loads' links of the critical path as the SASS waits on them:
    ``batch_ratio`` times fewer where ptxas issues that many more of them before a use than the
    PTX's order (the emulator's chains) does."""
    w = before.work
    r = overhead.batch_ratio if overhead is not None else 1.0
    if w is None or r <= 1.0 or "global" not in w.chain:
        return before
    keep = 1.0 - wd.share + wd.share / r

    def cut(chain: Mapping[str, float] | None) -> dict[str, float] | None:
        if chain is None:
            return None
        return {c: v * keep if c == "global" else v for c, v in chain.items()}

    return replace(
        before, work=replace(w, chain=cut(w.chain) or {}, chain_unordered=cut(w.chain_unordered))
    )


def _bounded(
    est: Estimate, device: DeviceSpec, before: Traffic, after: Traffic, serial_s: float
) -> Estimate:
    """``est`` with its bound at least the before launch as the point sees it (sustained rates,
    its CTAs' turnaround, the sides added) with the model's margin, over the after launch at
    peak: a bound takes the longest the before can be and the shortest the after. The peak
    before (no turnaround, full overlap) is shorter than a grid of many small CTAs runs: f16max's
    ``hmax`` (a million CTAs of two elements a thread) measured 1.94x against a 1.53x bound made
    on it, and the same grid with most threads idle still took 85% of the original's time.

    ``serial_s``: the time the L2 takes for the updates of the launch's hottest global atomic
    address one after another (GA208's model), which widening the loads leaves as it is: both
    launches take at least that long (the point and peak values), and the bound's before
    launch is the model's plus that time (they may not overlap). A histogram of 7 bins
    (coffeebeforearch's ``histogram``, 16 M updates) measured 1.00x with 16 bytes a thread
    against a 3.96x point that did not count its atomics."""
    rates = memory_rates(device)
    if rates is None or est.speedup is None:
        return est
    b = launch_times(before, device, rates)
    a = launch_times(after, device, rates, peak_dram=True)
    if a is None or b is None or a.time_s <= 0:
        return est
    bound = (ceiling_s(b) + serial_s) / max(a.time_s, serial_s)
    inputs = dict(est.inputs)
    method = est.method
    if serial_s > 0:
        a_point = launch_times(after, device, rates)
        b_peak = launch_times(before, device, rates, peak_dram=True)
        if a_point is not None and b_peak is not None:
            inputs["point_speedup"] = round(
                max(b.time_s, serial_s) / max(a_point.time_s, serial_s), 3
            )
            inputs["peak_speedup"] = round(
                max(b_peak.time_s, serial_s) / max(a.time_s, serial_s), 3
            )
        inputs["serial_atomics_us"] = round(serial_s * 1e6, 3)
        method += (
            f" The launch's hottest global atomic address takes {serial_s * 1e6:.1f} us of "
            "updates one after another, which the change leaves as they are: both launches take "
            f"at least that long (point {inputs['point_speedup']:.2f}x)."
        )
    elif bound <= est.speedup:
        return est
    bound = round(max(bound, float(inputs.get("point_speedup", 1.0)), 1.0), 3)
    method += (
        f" The bound is the before launch at sustained rates with its CTA turnaround and "
        f"{BOUND_MARGIN:.0%} on its work over the after launch at peak: {bound:.2f}x."
    )
    return replace(est, speedup=bound, method=method, inputs=inputs)
