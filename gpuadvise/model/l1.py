"""The L1's capacity: which re-reads of a CTA's sectors the L1 still holds, and which go back to
the L2.

The trace models count a CTA's loads of a sector after its first as L1 hits (the L2 serves each
sector a CTA loads once). That holds while the lines the SM loads between two reads of a sector
fit its L1. PolyBench's correlation with its sum in a register re-reads each column of ``data``
once per output column: 2048 rows of 128-byte lines a warp, times the SM's eight warps, between
two reads of a line, some 6 MB through a 256 KB L1. On the model as hits its loads waited the
L1's latency where the GPU waited the L2's: 12.0x predicted for 5.39x measured on an
H200 (docs/accuracy.md, 2026-11-30).

:func:`capacity_misses` decides it per re-read from its reuse window: the lines loaded between
it and the previous read of its sector by the SM's resident warps, ``W``, against the L1's lines
``C``. An LRU cache would miss every re-read with ``W > C``; the trace's window is one order of
the warps, which on the GPU run ahead of and behind each other, so a share ``1 - C / W`` of such
re-reads misses (GA301's row walks took their refetch so: kmeans feature_transpose, measured;
correlation's ``W / C`` of 28 misses 96%). Cyclic sweeps in lockstep turn sharper (probe
s9-est: 208 KB an SM all hits, 224 KB all L2), which the share counts 4% misses at 224 KB: it
understates misses just past the capacity. What the model counts:

- **the window**: the 128-byte lines of the CTA's load requests between the two reads (each
  request's distinct lines, in the trace's execution order, which interleaves the CTA's warps as
  the emulator steps them), times the weight each request stands for (a sampled loop's
  iterations), over the weight of the window's least weighted request (the multiplier the two
  reads share: two reads in consecutive iterations of a sampled outer loop are one iteration of
  it apart, not its whole weight); at most the CTA's distinct lines (no window holds more);
- **the SM**: the window times the SM's resident warps over the CTA's traced warps (the other
  CTAs on the SM load as much in the same time; warps of the CTA the trace left out too);
- **the L1**: ``capacity_bytes / 128`` lines (the unified L1/shared array less
  :data:`L1_UNUSED_BYTES`, measured, and the shared memory the resident CTAs take, where the
  caller knows it).

A sum of lines over-counts a window that loads the same line again (a stencil's neighbours):
the cap at the CTA's distinct lines keeps a small footprint's re-reads in the L1 whatever the
window. Stores' lines are left out of the window, and so are evict-first loads (``.cs``: the
lines the L1 gives up first).

**A CTA's reload of what it stored** (:func:`written_before_read`): the L1 is write-through, but
a store leaves the sectors it writes in the L1: on an H200 (s10-launch's probe, 2026-11-30,
/work/gpu_logs/s10probes/s10-launch/probe.txt) a warp's dependent chain of loads of the 64 lines
it had just stored, each in full, took 45.5 cycles a load, the L1 hit's 45.5, where the L2's is
297. So a CTA's first load of a sector that its own stores wrote in full before (every byte of
its 32) is no L1 miss: the callers leave it out of the L2's loads and of DRAM's fills, and the
capacity model takes the store as the sector's previous access (the window from the store to
the load; the store itself still adds no lines to any window). A sector stored in part is
left a miss, though the L1 keeps a partial sector's stored bytes (benchmarks/store_reload_probe,
an H200: half a sector's words stored and reloaded, 48.0 cycles; its unwritten words, 291.4):
a load of stored bytes only is a hit there, not modelled yet.

**A miss in flight** (:func:`misses_in_flight`): the trace gives a sector a CTA loads to the one
access that brings it (the CTA's first), and counts every later load of it by the CTA an L1 hit.
Warps of one CTA that do the same work (duplicate copies: PolyBench atax's 32x8 block over a kernel
of ``threadIdx.x`` alone; a vector every thread of the CTA reads) load the same sectors at the same
step of their own work, a few cycles apart: the later ones find the line's miss still in flight
and wait for its fill (the L1 merges them into the pending miss: one L2 request, as many waits),
about as long as the miss itself, not the L1 hit's 45 cycles (an H200, benchmarks/inflight_probe,
2026-11-30: 1 to 16 warps of a CTA chasing the same L2-warm lines at once, 287.8 to 290.8 cycles a
load for every warp, one warp alone 287.8; the same lines after the first warp's fill, 45.7).
So the warps' waits count as misses for the chains
(:meth:`gpuadvise.model.execution.LoadMix.per_wait`), not for the L2's sectors. Which loads are
"the same time" is read off the trace by position, not by cycles: an access of another
warp of the CTA at the same step of its warp's accesses (its record's index among its warp's
records, by the same instruction) as the access that brings the sector. Warps that drift apart
further (another step, after a barrier, divergent work) are left hits, though on the GPU a warp
that starts behind catches up at the L1 hit's pace and then waits on the leader's misses too (the
probe: warps 1,000 cycles behind, 257 cycles a load): the model counts fewer misses than that.

Pure: numpy, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuadvise.arrays import (
    distinct,
    distinct_first,
    inverse_by_runs,
    sort_in_place,
    stable_argsort,
)

__all__ = [
    "L1_LINE_BYTES",
    "L1_UNUSED_BYTES",
    "UNIFIED_EXTRA_BYTES",
    "L1Reuse",
    "capacity_miss_shares",
    "capacity_misses",
    "misses_in_flight",
    "misses_in_flight_by_record",
    "range_min",
    "written_before_read",
]

L1_LINE_BYTES = 128
"""The L1's allocation unit: a 128-byte line of four 32-byte sectors."""

UNIFIED_EXTRA_BYTES = 28 * 1024
"""The part of an SM's unified L1/shared array that shared memory never takes (Volta to Hopper:
128 - 96, 192 - 164 and 256 - 228 KiB), as GA307 counts it."""

L1_UNUSED_BYTES = 40 * 1024
"""The part of the unified array that global lines do not get even in a launch without shared
memory: on an H200 (probe s9-est, 2026-11-30: one CTA of 8 warps an SM re-reading its own lines)
re-reads after 208 KB an SM still hit (1.35 cycles a warp load), after 224 KB they are the L2's
(2.4 cycles; 12.4 past the L2): 216 KB of the 256 KB. Other GPUs' L1s are taken alike until
measured."""


@dataclass(frozen=True)
class L1Reuse:
    """Per access: ``window_lines``, the SM's lines loaded between it and the previous read of its
    sector (see the module doc; infinite for a CTA's first read), and ``miss``, the share of such
    re-reads that miss the L1 (``1 - C / W`` past the L1's ``C`` lines, else 0; 0 for a first
    read, which the caller counts as the L2's already)."""

    window_lines: np.ndarray
    miss: np.ndarray


def range_min(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``min(values[lo[k] : hi[k] + 1])`` for each k (``lo <= hi``, inclusive), by a sparse
    table: log2 of the longest range levels of ``values``' pairwise minima."""
    values = np.asarray(values)
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    if not len(lo):
        return np.zeros(0, values.dtype)
    span = hi - lo + 1
    top = int(span.max()).bit_length() - 1
    # each range's level, floor(log2(span)), from its float's exponent (exact below 2**53), and
    # the ranges grouped by level with one radix sort: no pass over every range per level
    level = np.frexp(span)[1].astype(np.int8)
    level -= 1
    del span
    order = np.argsort(level, kind="stable")
    bounds = np.searchsorted(level[order], np.arange(top + 2))
    del level
    out = np.empty(len(lo), values.dtype)
    table = values
    for k in range(top + 1):
        if bounds[k + 1] > bounds[k]:
            w = 1 << k
            at = order[bounds[k] : bounds[k + 1]]
            out[at] = np.minimum(table[lo[at]], table[hi[at] - w + 1])
        if k < top:
            w = 1 << k
            table = np.minimum(table[:-w], table[w:])
    return out


def capacity_misses(
    group: np.ndarray,
    rec_lines: np.ndarray,
    rec_weight: np.ndarray,
    acc_rec: np.ndarray,
    acc_key: np.ndarray,
    capacity_lines: float,
    concurrency: np.ndarray,
    group_lines: np.ndarray | None = None,
) -> L1Reuse:
    """Which reads of ``acc_key`` (a sector, per access: ``acc_rec`` its record, one access per
    record and sector) the L1 no longer holds (module doc).

    ``group``: per record, its CTA (dense from 0), the records in execution order;
    ``rec_lines``: per record, the L1 lines it loads (0 for stores and evict-first loads);
    ``rec_weight``: the executions each record stands for; ``capacity_lines``: the L1's lines;
    ``concurrency``: per CTA, the SM's resident warps over its traced warps; ``group_lines``:
    per CTA, the most lines a window holds (its distinct lines; None: no cap). The first read of
    each (CTA, sector) is not a re-read: ``miss`` 0, ``window_lines`` infinite."""
    window, miss = _capacity(
        group, rec_lines, rec_weight, acc_rec, acc_key, capacity_lines, concurrency,
        group_lines, windows=True,
    )  # fmt: skip
    assert window is not None
    return L1Reuse(window, miss)


def capacity_miss_shares(
    group: np.ndarray,
    rec_lines: np.ndarray,
    rec_weight: np.ndarray,
    acc_rec: np.ndarray,
    acc_key: np.ndarray,
    capacity_lines: float,
    concurrency: np.ndarray,
    group_lines: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`capacity_misses`' ``miss`` alone: the same shares, without the access-sized
    windows (float64 an access, 56 MB on AoSKernel's 7 M, made at the function's peak; issue
    31: the L1 refetches read the shares only)."""
    return _capacity(
        group, rec_lines, rec_weight, acc_rec, acc_key, capacity_lines, concurrency,
        group_lines, windows=False,
    )[1]  # fmt: skip


def _capacity(
    group: np.ndarray,
    rec_lines: np.ndarray,
    rec_weight: np.ndarray,
    acc_rec: np.ndarray,
    acc_key: np.ndarray,
    capacity_lines: float,
    concurrency: np.ndarray,
    group_lines: np.ndarray | None,
    windows: bool,
) -> tuple[np.ndarray | None, np.ndarray]:
    """:func:`capacity_misses`' windows (None without ``windows``) and miss shares."""
    group = np.asarray(group, np.int64)
    # (the accesses' records and keys in their own signed integer type where it is 32 bits or
    # more: the same integers, no access-sized int64 copies held through the peak; issue 31)
    acc_rec, acc_key = _signed_wide(acc_rec), _signed_wide(acc_key)
    n_acc = len(acc_rec)

    def reuse(
        cur: np.ndarray | None = None, lines: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, np.ndarray]:
        # the two access-sized results made last, once the temporaries are freed (issue 31)
        window = np.full(n_acc, np.inf) if windows else None
        miss = np.zeros(n_acc)
        if cur is not None and lines is not None:
            if window is not None:
                window[cur] = lines
            # the share in place on the windows (read above): the same operations in the same
            # order as ``clip(1 - C / maximum(lines, 1e-12), 0, 1)``, no re-read-sized
            # temporaries (issue 31: four float64 of 6.4 million on AoSKernel, at its peak)
            np.maximum(lines, 1e-12, out=lines)
            np.divide(capacity_lines, lines, out=lines)
            np.subtract(1.0, lines, out=lines)
            np.clip(lines, 0.0, 1.0, out=lines)
            miss[cur] = lines
        return window, miss

    if not n_acc:
        return reuse()
    # the records by CTA, in execution order: a position each, and the lines loaded up to it
    order = stable_argsort(group)
    # (positions and CTAs in int32 where they fit: the access- and re-read-sized arrays made
    # from them below are half the bytes, the same integers; issue 31's peak on AoSKernel)
    narrow = np.int32 if len(group) < 2**31 else np.int64
    pos = np.empty(len(group), narrow)
    pos[order] = np.arange(len(group), dtype=narrow)
    weight = np.asarray(rec_weight, np.float64)[order]
    csum = np.cumsum(np.asarray(rec_lines, np.float64)[order] * weight)
    # each access's previous read of its sector by the same CTA
    # (each access-sized temporary freed once read, the windows' arithmetic in place: the
    # same values, fewer arrays at once; issue 31's peak memory)
    g = (group.astype(np.int32) if len(group) and int(group.max()) < 2**31 else group)[acc_rec]
    by, same = _by_cta_sector(g, acc_key, acc_rec, pos)
    at = np.flatnonzero(same)  # (indices: one boolean selection, not two)
    del same
    prev = by[at]
    at += 1  # (the next access's index made in place: no second index-sized array, issue 31)
    cur = by[at]
    del by, at
    pc, pp = pos[acc_rec[cur]], pos[acc_rec[prev]]
    del prev
    ok = pc > pp  # one record's lanes reading the sector twice are one access
    if not bool(ok.all()):  # (accesses by record, one a record and sector: all are)
        at = np.flatnonzero(ok)
        cur, pc, pp = cur[at], pc[at], pp[at]
        del at
    del ok
    if not len(cur):
        return reuse()
    # (the difference made in place a slice of re-reads at a time: the same subtraction, no
    # re-read-sized temporaries beside it; issue 31: AoSKernel's build before the fork)
    lines = np.empty(len(pc), np.float64)
    for lo in range(0, len(pc), _CHUNK):
        hi = min(lo + _CHUNK, len(pc))
        seg = lines[lo:hi]
        np.take(csum, pc[lo:hi] - 1, out=seg)
        seg -= csum[pp[lo:hi]]
    np.maximum(lines, 0.0, out=lines)
    if len(weight) and weight.min() == weight.max():  # no sampled loop: the one weight
        lines /= max(float(weight[0]), 1e-12)  # (the value each read's share would be)
    else:
        shared = range_min(weight, pp, pc)  # the multiplier the two reads share
        np.maximum(shared, 1e-12, out=shared)
        lines /= shared
        del shared
    del pc, pp
    # (each re-read's CTA cap and concurrency a slice at a time: the same operations in the
    # same order, no re-read-sized CTA index or gathers beside the lines; issue 31)
    cap = None if group_lines is None else np.asarray(group_lines, np.float64)
    conc = np.asarray(concurrency, np.float64)
    for lo in range(0, len(cur), _CHUNK):
        hi = min(lo + _CHUNK, len(cur))
        gc = g[cur[lo:hi]]
        seg = lines[lo:hi]
        if cap is not None:
            np.minimum(seg, cap[gc], out=seg)
        seg *= conc[gc]
    del g, pos, order, weight, csum, group, acc_rec, acc_key
    return reuse(cur, lines)


def written_before_read(
    key: np.ndarray,
    rec: np.ndarray,
    is_load: np.ndarray,
    offset: np.ndarray,
    width: np.ndarray,
    sector_bytes: int = 32,
    *,
    overwrite: bool = False,
) -> np.ndarray:
    """Per access, whether it is a load of a sector that the same CTA's stores wrote in full
    before its first load of it, or one of those stores (the module doc: the L1 serves such a
    load from what the store left). ``key``: per access (a lane's load or store), its
    (CTA, buffer, sector) as one integer; ``rec``: its record, the CTA's records in execution
    order; ``is_load``; ``offset``: its byte offset in the sector; ``width``: its bytes. A
    sector counts as written in full when the distinct bytes its stores wrote before the CTA's
    first load of it (each access's offset and width in the sector) are ``sector_bytes``.
    ``overwrite``: ``key`` is the caller's temporary, passed alone: its sectors' numbers are
    made in it (:func:`~gpuadvise.arrays.inverse_by_runs`; one access-sized array fewer at the
    peak, issue 31)."""
    key = np.asarray(key, np.int64)
    n = len(key)
    out = np.zeros(n, bool)
    is_load = np.asarray(is_load, bool)
    if not n or is_load.all() or not is_load.any():
        return out
    # (signed records compared in their own width: no access-sized int64 copy, issue 31)
    rec = np.asarray(rec)
    if rec.dtype.kind != "i" or rec.dtype.itemsize < 4:
        rec = rec.astype(np.int64)
    # the keys' numbers from the first access of each run of one key alone (a coalesced
    # request's lanes come by address: 8 lanes of 4 bytes a sector), issue 31
    _, _, group = inverse_by_runs(key, overwrite=overwrite)
    del key  # (the caller's temporary: freed here where the caller passed it alone)
    n_groups = int(group.max()) + 1
    # each sector's first load (its record; the records are in each CTA's execution order),
    # in the records' own integer type: ufunc.at casting each value on the way is 40x slower
    # (0.7 s on 3 million loads); none is a record's index (2**31 - 1 records would be 64 GB)
    none = np.iinfo(rec.dtype).max
    first_load = np.full(n_groups, none, dtype=rec.dtype)
    np.minimum.at(first_load, group[is_load], rec[is_load])
    at_first = first_load[group]
    del first_load
    before = at_first < none  # the sector is loaded
    before &= rec < at_first
    before &= ~is_load
    del at_first, rec
    if not before.any():
        return out
    # the bytes written before it: the distinct (sector, offset, width) stores, each byte once
    b = np.flatnonzero(before)
    off = np.clip(np.asarray(offset, np.int64)[b], 0, sector_bytes)
    wid = np.clip(np.asarray(width, np.int64)[b], 0, sector_bytes)
    span = np.int64(sector_bytes + 1)
    packed = distinct(
        (group[b].astype(np.int64) * span + off) * span + np.minimum(wid, sector_bytes - off)
    )
    del b, off, wid
    g, o, w = packed // (span * span), packed // span % span, packed % span
    del packed
    written = _bytes_written(g, o, w, n_groups, sector_bytes)
    full = written >= sector_bytes
    out[is_load & full[group]] = True
    out[before & full[group]] = True
    return out


def _bytes_written(
    g: np.ndarray, o: np.ndarray, w: np.ndarray, n_groups: int, sector_bytes: int
) -> np.ndarray:
    """Per sector (``0 .. n_groups - 1``): the distinct bytes of the stores ``(g, o, w)`` (the
    sector, the byte offset in it, the bytes: distinct triples, ``g`` ascending, ``o + w <=
    sector_bytes``). Each store's bytes as a bit mask, or'ed per sector, counted: no row a
    byte (issue 31: 5.4 million on llm.c's softmax_forward_kernel4, seven int64 arrays at
    its peak); sectors wider than 63 bytes count their bytes one by one."""
    if sector_bytes >= 64:
        start = np.repeat(np.cumsum(w) - w, w)
        byte_off = np.repeat(o, w) + (np.arange(int(w.sum())) - start)
        del start
        cells = distinct(np.repeat(g, w) * np.int64(sector_bytes) + byte_off)
        return np.bincount(cells // sector_bytes, minlength=n_groups)
    written = np.zeros(n_groups, np.int64)
    if not len(g):
        return written
    one = np.uint64(1)
    bits = np.left_shift(one, w.astype(np.uint64))
    bits -= one
    bits <<= o.astype(np.uint64)
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    written[g[starts]] = np.bitwise_count(np.bitwise_or.reduceat(bits, starts))
    return written


def misses_in_flight(
    group: np.ndarray, step: np.ndarray, inst: np.ndarray, first: np.ndarray | None = None
) -> np.ndarray:
    """Per access of the loads the L2 serves (``group``: its (CTA, sector) key, dense from 0, the
    accesses in the trace's order, so each key's first access is the one that brings it;
    ``step``: its record's index among its warp's records; ``inst``: its instruction), whether
    its warp waits for the L2: the key's first access, and the accesses at that access's step
    by the same instruction (its own record's other lanes; another warp's, which finds the miss
    in flight: the module doc). The other accesses of the key are the L1's hits. ``first``: per
    key, its first access, where the caller has it (else found here: one sort)."""
    n = len(np.asarray(group).reshape(-1))
    return misses_in_flight_by_record(group, np.arange(n), step, inst, first)


def misses_in_flight_by_record(
    group: np.ndarray,
    rec: np.ndarray,
    rec_step: np.ndarray,
    rec_inst: np.ndarray,
    first: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`misses_in_flight` of accesses given by their record (``rec``, per access) and the
    records' steps and instructions (``rec_step``, ``rec_inst``, per record): the step and the
    instruction are the record's, so they are compared as one key per record (fewer passes over
    the accesses than gathering each per access). The accesses are compared :data:`_CHUNK` at
    a time, in the keys' own integer type: two int64 gathers per access at once were GA301's
    peak on matmul_forward_kernel1 (8.3 M accesses: 126 MiB)."""
    g = np.asarray(group).reshape(-1)
    if g.dtype.kind not in "iu":
        g = g.astype(np.int64)
    n = len(g)
    if not n:
        return np.zeros(0, bool)
    if first is None:
        keys, at = distinct_first(g.astype(np.int64, copy=False))
        first = np.zeros(int(keys[-1]) + 1, np.int64)
        first[keys] = at
    rec = np.asarray(rec).reshape(-1)
    rec_step = np.asarray(rec_step, np.int64)
    rec_inst = np.asarray(rec_inst, np.int64)
    # (step, instruction) as one key per record: equal keys, equal pairs (both non-negative)
    span = np.int64(int(rec_inst.max()) + 1 if len(rec_inst) else 1)
    rec_key = rec_step * span + rec_inst
    brought = rec_key[rec[np.asarray(first)]]  # per key, its first access's record's key
    out = np.empty(n, bool)
    for start in range(0, n, _CHUNK):
        end = min(n, start + _CHUNK)
        np.equal(rec_key[rec[start:end]], brought[g[start:end]], out=out[start:end])
    return out


_CHUNK = 1 << 20  # _by_cta_sector's slices: 8 MB of int64 temporaries at a time


def _signed_wide(a: np.ndarray) -> np.ndarray:
    """``a`` as it is where it is a signed integer array of 32 bits or more, else in int64."""
    a = np.asarray(a)
    return a if a.dtype.kind == "i" and a.dtype.itemsize >= 4 else a.astype(np.int64)


def _by_cta_sector(
    g: np.ndarray, key: np.ndarray, acc_rec: np.ndarray, pos: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The accesses ordered by CTA, sector and execution order (``np.lexsort((pos[acc_rec],
    key, g))``), and whether each one after the first reads its predecessor's CTA and sector.
    When the accesses come by record (``acc_rec`` non-decreasing, as the caller's distinct
    (record, sector) pairs do), execution order within a CTA is the accesses' own order (the
    records of one CTA keep theirs in ``pos``), so one sort of (CTA, sector, index) packed in
    an int64 gives the same order as the lexsort, several times faster."""
    n = len(g)
    if n > 1 and bool((acc_rec[1:] >= acc_rec[:-1]).all()):
        k_lo = int(key.min())
        k_span = int(key.max()) - k_lo + 1
        g_span = int(g.max()) + 1
        if int(g.min()) >= 0 and g_span * k_span * n < 2**62:
            packed = g * np.int64(k_span)
            packed += key
            packed -= np.int64(k_lo)  # (int64 arithmetic wraps: the same key as key - k_lo)
            packed *= np.int64(n)
            # the index added and the quotient's remainder taken a slice at a time: no
            # access-sized arange, and the order in int32 where it fits (the same integers;
            # issue 31's peak: AoSKernel's 7.3 M accesses, 56 MB an int64 array)
            for lo in range(0, n, _CHUNK):
                hi = min(lo + _CHUNK, n)
                packed[lo:hi] += np.arange(lo, hi, dtype=np.int64)
            sort_in_place(packed)  # (by CTA, in execution order: often long runs already)
            by = np.empty(n, np.int32 if n < 2**31 else np.int64)
            for lo in range(0, n, _CHUNK):
                hi = min(lo + _CHUNK, n)
                by[lo:hi] = packed[lo:hi] % np.int64(n)
            packed //= np.int64(n)
            return by, packed[1:] == packed[:-1]
    by = np.lexsort((pos[acc_rec], key, g))
    return by, (g[by][1:] == g[by][:-1]) & (key[by][1:] == key[by][:-1])
