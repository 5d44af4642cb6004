"""What GA301 (uncoalesced-access) computes with: a line's address streams per buffer, their
requests and sectors, a thread's own step through a buffer, the walk's pattern in words, and one
finding per root cause (the lines that walk one buffer in one pattern).

A *stream* is one buffer's instructions at one line that walk it the same way: grouped by the
byte stride between a request's consecutive lanes (:func:`gpuadvise.trace.view.stride_mode`),
except the instructions whose addresses come from loaded data (a gather), which are one stream
whatever their strides (those are the data's, not the kernel's).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.arrays import (
    distinct_rows,
    most_common,
    run_heads,
    sort_in_place,
    stable_argsort,
    stable_argsort_equal,
)
from gpuadvise.rules.findings import Estimate, Finding, Variant
from gpuadvise.rules.proxy import merge_stores, soa_description, soa_proxy
from gpuadvise.trace.access import Kind
from gpuadvise.trace.view import stride_mode

__all__ = [
    "MIN_CONSTANT_ADDRESSES",
    "ConstantGather",
    "constant_gathers",
    "constant_message",
    "gather_estimate",
    "GATHER_TABLE_BYTES",
    "ROW_FOOTPRINT_EXCESS_PCT",
    "SECTOR_BYTES",
    "VECTOR_BYTES",
    "SectorCounts",
    "address_streams",
    "display_fix",
    "group_walks",
    "lanes_row_walk",
    "line_streams",
    "other_kind_insts",
    "row_refetch",
    "row_walk",
    "soa_variant",
    "staged_rows",
    "thread_step",
    "walk_advice",
]

SECTOR_BYTES = 32
VECTOR_BYTES = 16
"""The widest vector access a lane makes: lanes further apart than this cannot share a request's
sectors however wide their loads (GA303's fix leaves the excess). A thread walking a row of at
most two vectors (8 floats) is GA303's (two float4 loads a lane, every sector of the warp's
requests used), not a thread-per-row walk: a warp per 32-byte row would idle most lanes."""
ROW_FOOTPRINT_EXCESS_PCT = 25.0
"""A thread-per-row walk kept whatever its requests' excess: the warp's own accesses over the
line's iterations leave at most this share of the sectors they touch unused (each thread reads
its whole row)."""
GATHER_TABLE_BYTES = 48 * 1024
"""A gather into a buffer of at most this many bytes is a lookup table (GA305 stages it whole in
shared memory: its ``max_table_bytes``); a bigger one is GA301's scattered gather."""


@dataclass(frozen=True)
class SectorCounts:
    """Requests, sectors and ideal sectors of one buffer's accesses at a line (the traced CTAs)."""

    requests: float
    sectors: float
    ideal: float

    @classmethod
    def of(cls, view: Any, recs: Any, scale: float, whole_line: bool, cl: Any) -> SectorCounts:
        """The buffer's records ``recs`` in the trace view, scaled to the traced CTAs by
        ``scale``; the coalescing model's line itself when the buffer is the line's only one."""
        if whole_line:
            return cls(float(cl.requests), float(cl.sectors), float(cl.ideal))
        return cls(
            view.weighted(recs) * scale,
            view.weighted(recs, view.rec_sectors) * scale,
            view.weighted(recs, view.rec_ideal) * scale,
        )

    @property
    def excess(self) -> float:
        return self.sectors - self.ideal

    @property
    def excess_pct(self) -> float:
        return 100.0 * self.excess / self.sectors if self.sectors else 0.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal_per_request(self) -> float:
        return self.ideal / self.requests if self.requests else 0.0


def thread_step(lanes: Any) -> int | None:
    """The most common byte distance between a thread's successive accesses (in execution order)
    of the buffer at the line: its own walk (4 for a thread walking a row of floats); None when
    no thread accesses it twice."""
    if len(lanes) < 2:
        return None
    # by thread, then record: the lanes come in record order (TraceView.lanes_of), so one
    # stable sort of a combined thread key (one integer a (CTA, thread): the same neighbours
    # equal as the two columns; the key this function's own, sorted in its memory, and the
    # neighbours' equality read from the sorted keys: no gather of the CTA, thread and offset
    # columns by the order, issue 31's peak, GA301's detect on AoSKernel's 7 M lanes)
    in_order = bool((np.diff(lanes.rec) >= 0).all())
    key = lanes.cta.astype(np.int64)
    key *= np.int64(int(lanes.tid.max()) + 1)
    key += lanes.tid
    if in_order:
        order, same = stable_argsort_equal(key, overwrite=True)
    else:
        order = np.lexsort((lanes.rec, lanes.tid, lanes.cta))
        sorted_key = key[order]
        same = sorted_key[1:] == sorted_key[:-1]
        del sorted_key
    del key
    # each thread's steps, a slice of positions at a time (no lane-sized gathers of the
    # offsets, nor their difference): the same values in the same order
    off = lanes.off
    d = np.empty(int(np.count_nonzero(same)), off.dtype)
    at = 0
    for lo in range(0, len(same), _STEP_CHUNK):
        hi = min(lo + _STEP_CHUNK, len(same))
        o = off[order[lo : hi + 1]]
        step = o[1:] - o[:-1]
        step = step[same[lo:hi]]
        d[at : at + len(step)] = step
        at += len(step)
    del order, same
    if not len(d):
        return None
    return most_common(d)


_STEP_CHUNK = 1 << 20  # thread_step's positions a slice (8 MB of int64 temporaries)


def row_walk(
    step: int | None, stride: int | None, width: int, footprint_excess: float, buffer: Any
) -> bool:
    """Whether a line's lanes walk a row each: every thread steps through contiguous bytes of its
    own (``step`` = the access ``width``) and consecutive threads are more than two vectors
    apart (``stride``), so every lane of a request has its own sector and no vector load
    shares them. The thread may read all of its row (a reduction over it) or part of it (a hash
    of a key of variable length: jenkins-hash's ``keys + id * 16``), at one line or several; in
    an array of structures (``buffer.is_struct``) only the whole struct (the warp's
    ``footprint_excess`` at most :data:`ROW_FOOTPRINT_EXCESS_PCT`): a few fields read in a row
    are a field walk (a structure of arrays fixes it)."""
    return _rows_apart(stride, footprint_excess, buffer) and step is not None and abs(step) == width


def _rows_apart(stride: int | None, footprint_excess: float, buffer: Any) -> bool:
    """:func:`row_walk`'s conditions but the thread's own step: consecutive threads more than
    two vectors apart, and in an array of structures a warp footprint of (nearly) whole
    structs."""
    if footprint_excess > ROW_FOOTPRINT_EXCESS_PCT and buffer.is_struct:
        return False
    return stride is not None and abs(stride) > 2 * VECTOR_BYTES


def lanes_row_walk(
    lanes: Any, stride: int | None, width: int, footprint_excess: float, buffer: Any
) -> bool:
    """:func:`row_walk` of a line's ``lanes``: their :func:`thread_step` (a sort of every lane,
    millions on an array of structures) found only where the stride and the footprint leave it
    to decide (issue 31: GA301's CPU)."""
    if not _rows_apart(stride, footprint_excess, buffer):
        return False
    return row_walk(thread_step(lanes), stride, width, footprint_excess, buffer)


def staged_rows(device: Any, view: Any, pattern: str) -> bool:
    """Whether a walk is a thread-per-row walk in a launch of more warps than the device holds
    at once: a warp per row would only queue more warps, so it is fixed by staging the rows
    through shared memory instead (the threads keep their rows). (The resident warps alone,
    not the launch's traffic: GA301's detect asks with a line's lanes held, issue 31's peak.)"""
    if pattern != "thread-per-row":
        return False
    from gpuadvise.rules.estimates import resident_warps

    threads = int(np.prod(view.block))
    warps = float(view.total_ctas * -(-threads // 32))
    return warps > resident_warps(device, view)


def row_refetch(ctx: Any, buffer: str, lanes: Any, recs: Any) -> float:
    """The L2 load sectors (sampled CTAs) a strided load's requests ``recs`` fetch again
    because the rows the SM's resident threads walk do not fit its L1: each thread keeps the
    128-byte lines of its row (its lanes' distinct lines) until it has read them; over an SM's
    threads those exceed the L1 the launch leaves (:func:`gpuadvise.rules.l1_bytes_left`) by
    a factor, and that share of the sectors a request touches beyond those it uses is read
    from the L2 again. HeCBench's kmeans feature_transpose: 2048 threads an SM, each row
    136 bytes over two lines, 512 KB of rows for a 256 KB L1 (1.54-1.62x measured for the
    tile transpose on an H200, where a DRAM floor alone says 1.0x). 0 when the rows fit."""
    from gpuadvise.rules.estimates import resident_warps
    from gpuadvise.rules.repeats import l1_bytes_left

    view, device = ctx.trace_view, ctx.device
    if not len(lanes) or not device.sm_count:
        return 0.0
    base = int(view.buffers[buffer].base)
    line = (base + lanes.off.astype(np.int64)) // 128
    # a line is held for the rows that walk it: its own row's thread, or the two rows that meet
    # in it (each holds it for its part of the walk); a line that more of the CTA's threads
    # read (a stencil's window: kernels/cells, each neighbour's cell read by 24 others) is one
    # line of the L1 for all of them, counted as a line two rows meet in
    got = _rows_held(lanes.cta, lanes.tid, line)
    if got is None:  # (keys too wide to pack: by pairs)
        got = _rows_held_by_pairs(lanes.cta, lanes.tid, line)
    del line
    held, threads_read = got
    lines_per_thread = held / max(threads_read, 1)
    threads = resident_warps(device, view) * 32.0 / device.sm_count
    footprint = threads * lines_per_thread * 128.0
    l1 = float(l1_bytes_left(device, ctx.occupancy))
    if footprint <= l1 or l1 <= 0:
        return 0.0
    recs = np.asarray(recs, np.int64)
    waste = view.weighted(recs, view.rec_sectors) - view.weighted(recs, view.rec_ideal)
    return max(waste, 0.0) * (1.0 - l1 / footprint)


def _rows_held(cta: np.ndarray, tid: np.ndarray, line: np.ndarray) -> tuple[float, int] | None:
    """:func:`row_refetch`'s lines held (each (CTA, line)'s distinct reading threads, at most
    2, summed) and distinct threads of the lanes (``cta``, ``tid``, ``line``: per lane), by one
    sort of the (CTA, line, thread) keys packed in an int64 (each (CTA, line)'s threads one run
    of the sorted distinct keys) and the threads marked in a flag each (dense: the sampled CTAs'
    threads), where :func:`_rows_held_by_pairs` sorted the (thread, line) pairs and then those
    pairs by (CTA, line) again (issue 31); the same counts. None where the key does not fit."""
    if not len(line):
        return 0.0, 0
    lo = int(line.min())
    n_c, n_l, n_t = int(cta.max()) + 1, int(line.max()) - lo + 1, int(tid.max()) + 1
    if int(cta.min()) < 0 or int(tid.min()) < 0 or n_c * n_l * n_t >= 2**62:
        return None
    key = cta.astype(np.int64)  # (made in place: one lane-sized int64 beside the line)
    key *= np.int64(n_l)
    key += line
    key -= np.int64(lo)
    key *= np.int64(n_t)
    key += tid
    sort_in_place(key)
    key = key[run_heads(key)]  # the distinct (CTA, line, thread)
    key //= np.int64(n_t)  # their (CTA, line), ascending
    starts = np.flatnonzero(run_heads(key))
    readers = np.diff(np.r_[starts, len(key)])
    held = float(np.minimum(readers, 2).sum())
    del key, starts, readers
    seen = np.zeros(n_c * n_t, bool)
    thread = cta.astype(np.int64) * np.int64(n_t)
    thread += tid
    seen[thread] = True
    return held, int(np.count_nonzero(seen))


def _rows_held_by_pairs(cta: np.ndarray, tid: np.ndarray, line: np.ndarray) -> tuple[float, int]:
    """:func:`_rows_held` by sorts of the (thread, line) pairs and of their (CTA, line)."""
    thread = (cta.astype(np.int64) << 32) | tid.astype(np.int64)
    pairs = distinct_rows([thread, line])
    del thread
    _, readers = distinct_rows([pairs[0] >> 32, pairs[1]], return_counts=True)
    held = float(np.minimum(readers, 2).sum()) if len(readers) else 0.0
    # the threads: the pairs' first row, sorted (the pairs' order), a thread's pairs one run
    threads_read = int(np.count_nonzero(pairs[0][1:] != pairs[0][:-1])) + 1 if len(pairs[0]) else 0
    return held, threads_read


def address_streams(
    view: Any, insts: Any, buffers: list[str], data_addressed: set[int]
) -> Iterator[tuple[str, Any]]:
    """The line's address streams: per buffer, its instructions grouped by the byte stride
    between a request's consecutive lanes (:func:`stride_mode`). One line may walk one buffer
    in two ways (llm.c's attention ``query_t[i] * key_t2[i]``: the query the same address for
    the whole warp, the key one row per thread); judged together, the broadcast hides the
    strided walk. Instructions without a stride (one active lane) join the buffer's largest
    group; those in ``data_addressed`` (addresses from loaded data) into more than a lookup
    table's bytes are one group of their own, whatever stride the data gave each of them (a
    small table's keep the stride groups: GA301 judged them so before GA305 took tables)."""
    for b, group, _ in line_streams(view, insts, buffers, data_addressed):
        yield b, group


def line_streams(
    view: Any, insts: Any, buffers: list[str], data_addressed: set[int]
) -> list[tuple[str, Any, Any]]:
    """:func:`address_streams`' (buffer, instructions) with, where the line reaches one
    buffer in one stream, its lanes (``view.access`` of them: every lane of the line's
    instructions in the buffer, the columns the streams read already gathered) for the caller
    to read instead of taking them again (issue 31: GA301 gathered the records, threads,
    offsets and instructions of a line's lanes twice); else None (a stream's lanes are then
    only its instructions', and no two buffers' lanes are held at once)."""
    if len(buffers) != 1:
        return [(b, group, None) for b, group, _ in _streams(view, insts, buffers, data_addressed)]
    out = list(_streams(view, insts, buffers, data_addressed))
    if len(out) != 1:
        return [(b, group, None) for b, group, _ in out]
    return out


def _streams(
    view: Any, insts: Any, buffers: list[str], data_addressed: set[int]
) -> Iterator[tuple[str, Any, Any]]:
    """:func:`address_streams`' streams, each with the lanes of its buffer's access (all the
    line's instructions', not the stream's alone)."""
    for b in buffers:
        lanes, _ = view.access(insts, b)
        groups: dict[int | None, list[int]] = {}
        gathers: list[int] = []
        big = view.buffers[b].size > GATHER_TABLE_BYTES
        # each instruction's lanes (in their order) from one stable sort, not a pass each
        by_inst = stable_argsort(lanes.inst)
        cut = np.flatnonzero(np.r_[True, np.diff(lanes.inst[by_inst]) != 0, True])
        cut = cut if len(lanes) else cut[:0]
        for lo, hi in zip(cut[:-1], cut[1:], strict=True):
            inst = int(lanes.inst[by_inst[lo]])
            if big and inst in data_addressed:
                gathers.append(inst)
                continue
            groups.setdefault(stride_mode(lanes.take(by_inst[lo:hi])), []).append(inst)
        if gathers:
            yield b, np.array(gathers, np.int64), lanes
        loose = groups.pop(None, [])
        if not groups:
            if loose:
                yield b, np.array(loose, np.int64), lanes
            continue
        biggest = max(groups, key=lambda k: len(groups[k]))
        groups[biggest] += loose
        for key in sorted(groups, key=lambda k: (k is None, k)):
            yield b, np.array(sorted(groups[key]), np.int64), lanes


def walk_advice(
    pattern: str, kind: Kind, stride: int | None, width: int, elem: int, staged: bool = False
) -> str:
    """The sentence that names a walk's pattern and its fix (after the finding's sector counts);
    ``field-walk`` is the caller's (it names the struct's fields). ``staged``: a thread-per-row
    walk in a launch of more than a wave (:func:`staged_rows`) is fixed by staging the
    rows through shared memory, not by a warp per row."""
    load = kind == Kind.LOAD
    if pattern == "thread-per-row" and staged:
        if load:
            fix = (
                "stage each CTA's rows through shared memory: its threads load the rows' "
                "bytes together with coalesced 16-byte loads (lane l loads vectors l, l + 32, "
                "... of the CTA's contiguous rows; pad each row by 4 bytes against bank "
                "conflicts), __syncthreads(), and each thread walks its row in shared memory"
            )
        else:
            fix = (
                "let each thread write its row to shared memory (rows padded by 4 bytes), "
                "__syncthreads(), and store the CTA's rows together with coalesced 16-byte "
                "stores"
            )
        return (
            f"; each thread walks its own row (thread per row: consecutive threads are "
            f"{stride} bytes apart, and each steps {width} bytes through its row), so every "
            f"lane of a request {'reads' if load else 'writes'} its own sector: {fix} (or give "
            "each row a warp where its work splits across lanes)"
        )
    if pattern == "thread-per-row":
        if load:
            fix = (
                "give each row a warp (the lanes read consecutive words of the row; where "
                "the row is reduced to one value, they combine their partial results with "
                "__shfl_down_sync)"
            )
        else:
            fix = "give each row a warp (lane l writes elements l, l + 32, ... of the row)"
        return (
            f"; each thread walks its own row (thread per row: consecutive threads are "
            f"{stride} bytes apart, and each steps {width} bytes through its row), so every "
            f"lane of a request {'reads' if load else 'writes'} its own sector: {fix}"
        )
    if pattern == "gather":
        return (
            f"; a {'gather' if load else 'scatter'} by data: the addresses come from values the "
            "kernel loaded (an index array, a neighbour list, a distance, a hash), so no "
            "remapping of the threads makes them consecutive. Where the data allows: sort or "
            "bucket the indices (renumber the elements in space-filling order) so that "
            "neighbouring threads read neighbouring elements, keep a reused part in shared "
            "memory, or use a smaller element type; otherwise the sectors are the price of the "
            "data structure"
        )
    if pattern == "transposed" and stride:
        return (
            f"; a transposed index (consecutive threads are {stride // elem} elements, "
            f"{stride} bytes, apart: a column walk of a row-major array): put threadIdx.x on the "
            "contiguous index, or stage a tile through shared memory and read it transposed"
        )
    if pattern == "strided":
        return (
            f"; a strided walk ({stride} bytes between consecutive threads): make consecutive "
            "threads access consecutive words"
        )
    return ""


def group_walks(found: list[Finding], details: type[Any]) -> Iterator[Finding]:
    """One finding per root cause: the findings whose ``details`` (a rule's class with
    ``buffer``, ``pattern``, ``insts``, ``fields`` and ``aos``) walk one buffer in one pattern
    (an array of structures read field by field on six lines is one layout to change) become
    the finding of the first of their lines, naming the others, with every line's instructions
    and fields in its details (its estimate and variant cover them all). Several findings at the
    top's own line (one walk split in streams) are that one finding."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in found:
        d = f.details_as(details)
        groups.setdefault((d.buffer, d.pattern), []).append(f)
    for fs in groups.values():
        top = min(fs, key=lambda f: f.line or 0)
        others = sorted({f.line for f in fs if f.line is not None and f.line != top.line})
        if not others:
            yield top
            continue
        d = top.details_as(details)
        insts = tuple(sorted({i for f in fs for i in f.details_as(details).insts}))
        fields = tuple(sorted({x for f in fs for x in f.details_as(details).fields}))
        what = "array of structures" if d.aos else "walk of the buffer"
        s = "s" if len(others) > 1 else ""
        yield replace(
            top,
            message=top.message + f" (with line{s} {', '.join(map(str, others))}: "
            f"the same {what}, one change for all)",
            details=replace(d, insts=insts, fields=fields),
        )


def other_kind_insts(
    view: Any, insts: tuple[int, ...], kind: str, file: str | None, line: int | None
) -> Any:
    """The instructions a finding's proxy reproduces: its own ``insts`` (every line of its
    group, loads and stores) and the other kind's at each of those lines (the load of a
    read-modify-write whose store is the finding, or its store), sorted. ``file``, ``line``:
    the finding's, where the instructions have no line."""
    sites = {view.inst_line[i] for i in insts}
    sites = {(f, ln) for f, ln in sites if ln is not None}
    if not sites:  # no line for the instructions: the finding's
        sites = {(view.inst_line[insts[0]][0] if insts else file, line or 0)}
    other = Kind.STORE if kind == "load" else Kind.LOAD
    more = [view.insts_at(f, ln, other) for f, ln in sites]
    return np.unique(np.concatenate([np.array(insts, np.int64), *more]))


def display_fix(
    pattern: str, kind: str, buffer: str, stride: int | None, staged: bool = False
) -> Variant | None:
    """The display-only variant of a walk that no proxy reproduces (a remapping of the
    threads, or ``staged``: a thread-per-row walk's rows staged through shared memory); None
    for a gather (no layout or launch change fixes addresses the data chose)."""
    if pattern in ("gather", "constant-gather"):
        return None
    if pattern == "thread-per-row" and staged:
        return Variant(
            "display-only",
            f"stage each CTA's rows of `{buffer}` through shared memory: "
            + (
                "the CTA's threads load its contiguous rows with coalesced 16-byte loads into "
                "`__shared__` rows padded by 4 bytes, __syncthreads(), and each thread reads its "
                "row there"
                if kind != "store"
                else "each thread writes its row to `__shared__` rows padded by 4 bytes, "
                "__syncthreads(), and the CTA stores its contiguous rows with coalesced "
                "16-byte stores"
            ),
        )
    if pattern == "thread-per-row":
        each = (
            "writes elements l, l + 32, ... of the row (consecutive words in every request)"
            if kind == "store"
            else "reads elements l, l + 32, ... of the row (consecutive words in every "
            "request); where the row is reduced to one value, the lanes combine their partial "
            "results with __shfl_down_sync (offsets 16, 8, 4, 2, 1) and lane 0 writes the row's "
            "result"
        )
        return Variant(
            "display-only",
            f"give each row of `{buffer}` a warp instead of a thread: lane l {each}; launch 32 "
            "times the threads (or loop the warps over the rows)",
        )
    now = f" (a stride of {stride} bytes now)" if stride else ""
    return Variant(
        "display-only",
        f"make consecutive threads access consecutive words of `{buffer}`{now}: swap the roles "
        "of the indices, or stage a tile through shared memory and read it transposed",
    )


def soa_variant(
    view: Any, bi: Any, buffer: str, insts: Any, layout: Any, where: Any, pitches: Any
) -> Variant:
    """An array of structures' structure-of-arrays variant: its description and, where the
    view's patterns allow, the proxy pair (:func:`gpuadvise.rules.proxy.soa_proxy`) of the loads
    and stores ``insts`` (a load alone, a store alone or a read-modify-write ``p[i].x +=
    p[i].vx * dt``, each instruction taken by its own kind). ``layout``: the struct's, or None;
    ``where``, ``pitches``: the proxy's place and the launch's integer arguments."""
    kinds = view.inst_kind[insts]
    loads, _ = view.access(insts[kinds == int(Kind.LOAD)], buffer)
    stores, _ = view.access(insts[kinds == int(Kind.STORE)], buffer)

    def names_of(ls: Any) -> dict[int, str]:
        pairs = zip((ls.off % bi.elem_bytes).tolist(), ls.width.tolist(), strict=True)
        return {
            o: layout.describe(o, w) if layout is not None else f"bytes {o}..{o + w - 1}"
            for o, w in sorted(set(pairs))
        }

    def pattern_of(ls: Any) -> Any:
        return view.pattern(ls, bi, names_of(ls), pitches, where)

    desc = soa_description(
        buffer,
        bi,
        layout,
        list(names_of(loads).values()),
        list(names_of(stores).values()),
        sorted({view.inst_line[i][1] for i in insts.tolist()} - {None}),
    )
    load_pattern = pattern_of(loads) if len(loads) else None
    if not len(stores):
        if isinstance(load_pattern, str) or load_pattern is None:
            return Variant("display-only", desc + f" (no proxy: {load_pattern or 'no loads'})")
        return Variant("proxy", desc, proxy=soa_proxy(load_pattern), label="SoA")
    merged = merge_stores(load_pattern, pattern_of(stores))
    if isinstance(merged, str):
        return Variant("display-only", desc + f" (no proxy: {merged})")
    pattern, stored = merged
    return Variant("proxy", desc, proxy=soa_proxy(pattern, stored), label="SoA")


MIN_CONSTANT_ADDRESSES = 4.0
"""A constant-memory line whose warp requests name at least this many distinct addresses on
average: the constant cache serves one address per cycle, the others wait (replays)."""


@dataclass(frozen=True)
class ConstantGather:
    """One line's ``__constant__`` loads (the trace's instructions ``insts``): their warp
    requests and the distinct addresses those name, summed (each record weighted by the
    executions it stands for)."""

    file: str | None
    line: int
    insts: tuple[int, ...]
    requests: float
    addresses: float

    @property
    def per_request(self) -> float:
        return self.addresses / self.requests if self.requests else 0.0


def constant_gathers(trace: Any) -> list[ConstantGather]:
    """The lines whose ``__constant__`` loads name at least :data:`MIN_CONSTANT_ADDRESSES`
    distinct addresses per warp request: a table in constant memory indexed by data (a lookup
    ``lut[x & 0xff]``), which the constant cache serializes."""
    from gpuadvise.model.banks import active_lanes
    from gpuadvise.trace.access import Space, record_weights

    recs = trace.records
    recs = recs[(recs["space"] == int(Space.CONST)) & (recs["kind"] == int(Kind.LOAD))]
    if not len(recs):
        return []
    act = active_lanes(recs["mask"])
    addr = np.where(
        act, recs["addr"], recs["addr"][np.arange(len(recs)), act.argmax(axis=1)][:, None]
    )
    srt = np.sort(addr, axis=1)
    distinct = 1 + (srt[:, 1:] != srt[:, :-1]).sum(axis=1)
    w = record_weights(recs)
    w = np.ones(len(recs)) if w is None else w
    by_line: dict[tuple[str | None, int], list[int]] = {}
    for inst in np.unique(recs["inst"]).tolist():
        file, line = trace.line_of(int(inst))
        if line is not None:
            by_line.setdefault((file, line), []).append(int(inst))
    out = []
    for (file, line), insts in sorted(by_line.items(), key=lambda kv: kv[0][1]):
        at = np.isin(recs["inst"], insts)
        g = ConstantGather(
            file, line, tuple(insts), float(w[at].sum()), float((w * distinct)[at].sum())
        )
        if g.per_request >= MIN_CONSTANT_ADDRESSES:
            out.append(g)
    return out


def constant_message(g: ConstantGather) -> str:
    """A constant gather's finding message."""
    return (
        f"a table in __constant__ memory indexed by data: its warp requests name "
        f"{g.per_request:.1f} distinct addresses on average, and the constant cache serves one "
        f"address per cycle, so each request is replayed for every other one (the lookups of "
        "a warp run one address at a time). Copy the table to shared memory at the start of "
        "the CTA (32 banks serve a warp's lookups in one or two wavefronts), or compute the "
        "values instead of looking them up"
    )


def gather_estimate(constant: bool = False) -> Estimate:
    """A gather's estimate: none (the data decide how much reordering it helps; the launch
    model has no constant cache to time a ``constant`` table's replays with)."""
    if constant:
        return Estimate(
            None,
            "none",
            "not estimated: the execution model has no constant cache, so the replays the "
            "lookups cost (one per distinct address of a request) are not timed",
        )
    return Estimate(
        None,
        "none",
        "not estimated: the addresses come from the data, and no change of the kernel alone "
        "makes them consecutive (how much sorting or reordering the data helps depends on the "
        "data; a bound from the sectors alone would not hold, as reordering also turns L2 round "
        "trips into L1 hits)",
    )
