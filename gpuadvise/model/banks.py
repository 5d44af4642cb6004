"""Shared-memory bank model: wavefronts per warp-level shared access, measured on an H100.

A wavefront is one pass of the shared-memory pipeline (Nsight Compute's
``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st,atom}``). 32 banks of 4 bytes,
``bank = (byte_address // 4) % 32``. The rule below reproduced all 311 single-warp measurements
taken with Nsight Compute on an H100 (2026-11-22; loads and stores of 1, 2, 4, 8 and 16 bytes per
lane and 32-bit atomic adds: the documented strides, broadcasts, lane pairings, partial warps,
sub-word accesses, and 186 random patterns with random masks), both the wavefronts and the
bank-conflict counter (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_*``, which equalled
wavefronts minus :func:`ideal`); ``tests/test_banks.py`` replays them:

1. Groups. The active lanes are split by width: one group of 32 lanes for 1-, 2- and 4-byte
   accesses, two half-warps (lanes 0-15, 16-31) for 8 bytes, four quarter-warps for 16 bytes.
   Each lane touches the 4-byte words ``addr // 4 .. (addr + width - 1) // 4`` (one for sub-word
   accesses: an 8- or 16-bit access costs the word it lies in).
2. Loads and stores: per group, wavefronts = max over banks of the number of *distinct* words of
   that bank the group touches (lanes reading one word share it, multicast; for stores to one word
   one write wins, and byte stores to one word are one word too). Groups with no active lane cost
   nothing. The access costs the sum over its groups.
3. Merging, loads only. An 8- or 16-byte *load* whose lanes pair up -- every pair of lanes
   (n, n^1) that are both active read the same address, or every pair (n, n^2) that are both active
   does -- has its groups merged two by two: the whole warp is one group for 8 bytes, two half-warps
   for 16 bytes. (The return path carries 128 bytes a cycle; paired lanes need half the registers,
   so two groups fit one pass: NVIDIA's Nsight team describes exactly these two pairings for
   uniform loads.) So a 64-bit broadcast takes 1 wavefront and a uniform 128-bit load 2; a pairing
   by n^4 or any other lane relation (the lane%16 and lane%8 patterns) does not merge, and a pair
   whose partner lane is inactive does not prevent merging (measured). Stores never merge: a
   uniform 64-bit store takes 2 wavefronts, a uniform 128-bit store 4 (measured).
4. Atomics and reductions (``ATOMS``): no multicast; every active lane's word is its own update, so
   per group wavefronts = max over banks of the number of active lane-words in that bank (32 lanes
   adding to one word: 32 wavefronts; two words of different banks, 16 lanes each: 16). Measured
   for 32-bit ``atom.shared.add`` (``ATOMS.ADD``). An ``atomicAdd(p, 1)`` whose result is unused
   becomes ``ATOMS.POPC.INC``, which updates each distinct word once for all its lanes:
   :func:`gpuadvise.model.reconcile.reconcile` keeps one lane per word in those records, so the
   same-address increment of a whole warp costs 1 wavefront (``benchmarks/atomics_probe``,
   measured on an H100). ptxas emits 64-bit shared atomic adds as a compare-and-swap
   loop (``LDS.64`` + ``ATOMS.CAST.SPIN.64``, repeated while lanes collide), which this model does
   not follow: it treats them as native 8-byte atomics (half-warps), which undercounts (measured:
   2 to 3 times as many atomic wavefronts, plus the loop's loads).

The ideal of an access is what the same data would cost with no two distinct words in one bank:
per group ``ceil(distinct words / 32)`` (active lane-words for atomics), summed over the same
(merged) groups; so 1 for any 32-bit load or store, 1 for a 64-bit broadcast, 2 for a full-warp
64-bit stride-1 load. This is exactly Nsight Compute's ideal (its conflict counter equalled
wavefronts minus this ideal in all measurements), and wavefronts >= ideal >= 1 for every access with
an active lane. Nsight's counter also counts some arbitration conflicts unrelated to addresses
(about 1 % of the wavefronts of conflict-free kernels, HARDWARE.md §2): compare wavefronts.

The model reads PTX-level accesses; reconcile them with the SASS first (:mod:`gpuadvise.model.reconcile`):
ptxas merges scalar loads into ``LDS.64``/``LDS.128``.

Vectorized over records in chunks of a few thousand (no Python loop over records): repeated words
are found without sorting wherever a warp's lanes are in address order (strides, broadcasts, lane
pairings), and one bincount per chunk counts the words per bank; see
``benchmarks/bank_model_speed.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gpuadvise.model.lines import (
    ATOMIC_KINDS,
    Counts,
    Line,
    LineResult,
    Totals,
    chunks,
    lines_of,
    per_instruction,
)
from gpuadvise.trace.access import WARP, AccessTrace, Kind, Space

__all__ = [
    "BANKS",
    "BankCounts",
    "BankLine",
    "BankResult",
    "BankTotals",
    "active_lanes",
    "analyze_banks",
    "atomic_contention",
    "ideal",
    "one_address",
    "record_wavefronts",
    "wavefronts",
]

BANKS = 32
CHUNK_RECORDS = 4096  # records per vectorized chunk: keeps the working arrays in cache
_SUPERCHUNK = 4 * CHUNK_RECORDS  # records sorted into categories together

_LOW32_LIMIT = 0xFFFFFF00  # addresses from here on are rebased per record


def active_lanes(mask: np.ndarray) -> np.ndarray:
    """(n, 32) bool, lane i of row r active when bit i of ``mask[r]`` is set."""
    m = np.ascontiguousarray(mask, dtype="<u4").reshape(-1)
    bits = np.unpackbits(m.view(np.uint8), bitorder="little")  # flat: no loop over rows
    return bits.view(bool).reshape(-1, WARP)


def _low32(addr: np.ndarray, act: np.ndarray | None) -> np.ndarray:
    """Per-lane addresses as uint32, rebased per record (by a multiple of 128) when they do not fit.

    Rebasing by a multiple of 128 bytes keeps banks (and 32-/128-byte sectors and lines) unchanged.
    """
    a = np.asarray(addr)
    hi = a.max(initial=0) if a.size else 0
    if hi < _LOW32_LIMIT:
        return a.astype(np.uint32)
    if act is None:
        act = np.ones(a.shape, dtype=bool)
    masked = np.where(act, a, np.uint64(np.iinfo(np.uint64).max))
    base = masked.min(axis=1, keepdims=True)
    base = np.where(act.any(axis=1, keepdims=True), base, 0) & np.uint64(~127 & (2**64 - 1))
    rel = np.where(act, a - base, 0)
    if rel.max(initial=0) >= _LOW32_LIMIT:
        raise ValueError("the active lanes of one warp access span more than 4 GB")
    return rel.astype(np.uint32)


# --------------------------------------------------------------------------------------------
# The counting core
#
# Every lane of a group accesses one *unit*: its 4-byte word for accesses of up to 4 bytes, the
# aligned 8- or 16-byte block otherwise (misaligned wide accesses are split into words, one row
# of words per group). An aligned block of k words covers banks k*c .. k*c+k-1 of its bank class
# c = unit % (32 / k), so the distinct words of each of those banks are the distinct units of
# class c: the model counts units per class instead of words per bank. A lane's *bin* is
# group * classes + class, below 32. Repeated units are found as equal neighbours: as they are in
# rows whose lanes are in address order already (strides, broadcasts, lane pairings), after
# sorting each group's units in the others. Repeats and inactive lanes go to bin 32, the dump,
# and one bincount counts the bins of all the rows of a chunk. All in uint32, without copies of
# the 64-bit addresses beyond the first.

_DUMP = 32  # the bin of inactive lanes and of repeated units
_NBINS = _DUMP + 1
_BLOCK = 32  # rows per block of the count array, whose counts are bin-major within a block
_DUMP_SHIFT = 10  # _DUMP * _BLOCK == 1 << _DUMP_SHIFT
_ONES8 = np.uint64(0x0101010101010101)


def _rows_all(b: np.ndarray) -> np.ndarray:
    """(n,) bool: all of each row of a C-contiguous (n, 8*j) bool array (no per-row reduce)."""
    words = np.ascontiguousarray(b).view(np.uint64)
    out = words[:, 0] == _ONES8
    for j in range(1, words.shape[1]):
        out &= words[:, j] == _ONES8
    return out


def _rows_any(b: np.ndarray) -> np.ndarray:
    """(n,) bool: any of each row of a C-contiguous (n, 8*j) bool array."""
    words = np.ascontiguousarray(b).view(np.uint64)
    out = words[:, 0] != 0
    for j in range(1, words.shape[1]):
        out |= words[:, j] != 0
    return out


_CACHE: dict[tuple[int, ...], np.ndarray] = {}


def _cached(key: tuple[int, ...], rows: int, make: Callable[[int], np.ndarray]) -> np.ndarray:
    """The first ``rows`` rows of a constant array ``make(at least rows)``, made once."""
    arr = _CACHE.get(key)
    if arr is None or len(arr) < rows:
        if len(_CACHE) >= 32:
            _CACHE.clear()
        arr = make(max(rows, CHUNK_RECORDS))
        arr.flags.writeable = False
        _CACHE[key] = arr
    return arr[:rows]


def _row_places(rows: int, width: int) -> np.ndarray:
    """(rows * width,) uint32: the place of bin 0 of each lane's row in the count array.

    The count array holds blocks of _BLOCK rows, bin-major within a block (bin b of row r is at
    ``_row_places[r] + b * _BLOCK``): bincount's increments stay close together, and the counts
    come out bin-major after one cheap transposition.
    """

    def make(r: int) -> np.ndarray:
        row = np.arange(r, dtype=np.uint32)
        place = (row // _BLOCK) * np.uint32(_NBINS * _BLOCK) + row % _BLOCK
        return np.repeat(place[:, None], width, axis=1)

    return _cached((0, width), rows, make).reshape(-1)


def _group_bins(rows: int, width: int, lanes: int, classes: int) -> np.ndarray:
    """(rows, width) uint32: each lane's first bin (group * classes) times _BLOCK."""

    def make(r: int) -> np.ndarray:
        first = np.arange(width, dtype=np.uint32) // np.uint32(lanes) * np.uint32(classes)
        return np.broadcast_to(first * np.uint32(_BLOCK), (r, width)).copy()

    return _cached((1, width, lanes, classes), rows, make)


def _in_order(u: np.ndarray, lanes: int, strict: bool) -> np.ndarray | None:
    """The rows of units ``u`` whose repeated units are neighbours within each group of
    ``lanes`` lanes as they are (None: every row): non-decreasing units, or with ``strict`` (rows
    with inactive lanes, which may sit between equal units) increasing ones, no repeat at all."""
    rows, width = u.shape
    f = u.reshape(-1)
    ok = np.empty(f.size, dtype=bool)
    (np.greater if strict else np.greater_equal)(f[1:], f[:-1], out=ok[:-1])
    ok[lanes - 1 :: lanes] = True  # the first lane of a group follows no lane of its group
    if ok.all():
        return None
    return _rows_all(ok.reshape(rows, width))


def _sort_groups(
    u: np.ndarray, rows: np.ndarray | None, inactive: np.ndarray | None, lanes: int, top: int
) -> None:
    """Sort the units (below ``2**top``) of each group of ``lanes`` lanes of some ``rows`` (None:
    all) of ``u``, inactive lanes last; ``inactive`` follows them."""
    width = u.shape[1]
    low = np.uint32((1 << top) - 1)
    sub = u if rows is None else u[rows]
    if width > lanes:  # the group above the unit: a unit stays in its group's lanes
        sub |= np.arange(width, dtype=np.uint32) // np.uint32(lanes) << np.uint32(top)
    ina = None
    if inactive is not None:
        ina = inactive if rows is None else inactive[rows]
        last = ina.view(np.uint8).astype(np.uint32)
        last *= low
        sub |= last  # the largest unit: after the units of its group
    sub.sort(axis=1)
    if ina is not None:
        np.equal(sub & low, low, out=ina)
    if width > lanes or ina is not None:
        sub &= low
    if rows is not None:
        u[rows] = sub
        if inactive is not None:
            inactive[rows] = ina


def _bin_counts(
    u: np.ndarray,
    inactive: np.ndarray | None,
    lanes: int,
    classes: int,
    top: int,
    dedup: bool,
    in_order: np.ndarray | None,
) -> np.ndarray:
    """(32, rows) uint8 counts: per row of units ``u`` (below ``2**top``; modified) in groups of
    ``lanes`` lanes with ``classes`` bins each, the distinct units (every active lane's unit when
    not ``dedup``) of each bin. ``in_order``: the rows whose repeated units are neighbours already
    (None: every row); the others are sorted."""
    rows, width = u.shape
    f = u.reshape(-1)
    skip = None  # the lanes that go to the dump
    if dedup:
        if in_order is not None:
            bad = np.flatnonzero(~in_order)
            _sort_groups(u, None if 2 * len(bad) > rows else bad, inactive, lanes, top)
        skip = np.empty(f.size, dtype=bool)
        np.equal(f[1:], f[:-1], out=skip[1:])
        skip[::lanes] = False  # the first lane of a group repeats nothing
        if inactive is not None:
            skip |= inactive.reshape(-1)
    elif inactive is not None:
        skip = inactive.reshape(-1)
    u &= np.uint32(classes - 1)
    u *= np.uint32(_BLOCK)
    if width > lanes:
        u |= _group_bins(rows, width, lanes, classes)
    if skip is not None and skip.any():  # arithmetic: a masked ufunc is slow on scattered lanes
        dump = skip.view(np.uint8).astype(np.uint32)
        dump <<= np.uint32(_DUMP_SHIFT)
        np.maximum(f, dump, out=f)
    f += _row_places(rows, width)
    nblocks = -(-rows // _BLOCK)
    counts = np.bincount(f.astype(np.intp), minlength=nblocks * _NBINS * _BLOCK)
    blocks = counts.reshape(nblocks, _NBINS, _BLOCK)[:, :BANKS, :]
    out = blocks.transpose(1, 0, 2).astype(np.uint8, order="C").reshape(BANKS, -1)
    return out[:, :rows]


def _reduce(counts: np.ndarray, classes: int, lanes: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(wavefronts, ideal) per row from its bin counts: groups of ``lanes`` lanes with
    ``classes`` bins each. The ideal is None where a group holds at most 32 words (it is then the
    number of groups with an active lane)."""
    rows = counts.shape[1]
    by_class = counts.reshape(BANKS // classes, classes, rows)
    worst = by_class.max(axis=1)
    cost = worst[0].astype(np.int32) if len(worst) == 1 else worst.sum(axis=0, dtype=np.int32)
    if lanes <= classes:
        return cost, None
    counted = by_class.sum(axis=1, dtype=np.int32)
    counted *= BANKS // classes  # words per unit
    counted += BANKS - 1
    counted //= BANKS
    return cost, counted.sum(axis=0, dtype=np.int32)


def _active_groups(mask: np.ndarray | None, groups: int, m: int) -> np.ndarray:
    """(m,) int32: the number of lane groups with an active lane."""
    if mask is None:
        return np.full(m, groups, dtype=np.int32)
    parts = np.ascontiguousarray(mask, dtype="<u4").view(f"<u{4 // groups}").reshape(m, groups)
    return (parts != 0).sum(axis=1, dtype=np.int32)


def _aligned_cost(
    a: np.ndarray, mask: np.ndarray | None, shift: int, groups: int, atomic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) of m aligned accesses from their (m, 32) uint32 byte addresses
    (modified), units of ``2**shift`` bytes; ``mask`` None: every lane active."""
    a >>= np.uint32(shift)  # units
    lanes = WARP // groups
    classes = BANKS >> (shift - 2)
    in_order = None if atomic else _in_order(a, lanes, mask is not None)
    inactive = None if mask is None else active_lanes(~mask)
    counts = _bin_counts(a, inactive, lanes, classes, 32 - shift, not atomic, in_order)
    cost, need = _reduce(counts, classes, lanes)
    return cost, _active_groups(mask, groups, len(cost)) if need is None else need


def _misaligned_cost(
    a: np.ndarray, mask: np.ndarray | None, shift: int, groups: int, atomic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Misaligned 8-/16-byte accesses (PTX forbids them; kept for robustness): every word of
    every lane, one row of words per group, 32 banks."""
    m = len(a)
    k = 1 << (shift - 2)
    words: np.ndarray = (a >> np.uint32(2))[:, :, None] + np.arange(k, dtype=np.uint32)
    words &= np.uint32(0x3FFFFFFF)  # modulo 4 GB: keeps banks
    rows = words.reshape(m * groups, WARP * k // groups)
    inactive = None
    if mask is not None:
        inactive = np.repeat(active_lanes(~mask), k, axis=1).reshape(rows.shape)
    unordered = np.zeros(len(rows), dtype=bool)
    counts = _bin_counts(rows, inactive, rows.shape[1], BANKS, 30, not atomic, unordered)
    cost, need = _reduce(counts, BANKS, rows.shape[1])
    if need is None:
        need = (cost > 0).astype(np.int32)
    return cost.reshape(m, groups).sum(axis=1), need.reshape(m, groups).sum(axis=1)


def _pairs_equal(a32: np.ndarray, act: np.ndarray | None, x: int) -> np.ndarray:
    """(n,) bool: every lane pair (l, l^x), x in (1, 2), with both lanes active has one address.

    ``act`` None: every lane is active.
    """
    n = len(a32)
    if act is None:
        f = np.ascontiguousarray(a32).reshape(-1)
        if x == 2:
            f = f.view(np.uint64)  # lanes 2i and 2i+1 together
        return _rows_all((f[0::2] == f[1::2]).reshape(n, -1))
    r = a32.reshape(n, 32 // (2 * x), 2, x)
    q = act.reshape(n, 32 // (2 * x), 2, x)
    same = (r[:, :, 0, :] == r[:, :, 1, :]) | ~(q[:, :, 0, :] & q[:, :, 1, :])
    return _rows_all(same.reshape(n, 16))


def _merged(a32: np.ndarray, act: np.ndarray | None) -> np.ndarray:
    """(n,) bool: the lanes of each of n wide loads pair up (rule 3 of the module docstring)."""
    n = len(a32)
    first = a32[:, 0]  # lanes 0 and 1, or 0 and 2, pair up in every candidate: test those only
    cand = first == a32[:, 1]
    by2 = first == a32[:, 2]
    if act is not None:
        cand |= ~(act[:, 0] & act[:, 1])
        by2 |= ~(act[:, 0] & act[:, 2])
    cand |= by2
    rows = np.flatnonzero(cand)
    merged = np.zeros(n, dtype=bool)
    if len(rows):
        every = len(rows) == n
        sub = a32 if every else np.take(a32, rows, axis=0)
        sub_act = None if act is None else (act if every else act[rows])
        pairs = _pairs_equal(sub, sub_act, 1)
        pairs |= _pairs_equal(sub, sub_act, 2)
        merged[rows] = pairs
    return merged


# A record's category: width class * 8 (0: up to 4 bytes, 1: 8 bytes, 2: 16 bytes) + atomic * 4
# + merged * 2 + misaligned.


def _categories(
    width: np.ndarray, kind: np.ndarray, a32: np.ndarray, mask: np.ndarray | None
) -> np.ndarray:
    """(n,) uint8 categories of n records; checks their widths."""
    n = len(width)
    w = np.ascontiguousarray(width)
    if w.min() == 0 or w.max() > 16 or (w & (w - 1)).any():  # not 1, 2, 4, 8 or 16
        bad = int(w[(w == 0) | (w > 16) | ((w & (w - 1)) != 0)][0])
        raise ValueError(f"shared access width {bad} B is not 1, 2, 4, 8 or 16")
    k = np.ascontiguousarray(kind)
    code = w & np.uint8(0x18)  # 8 for 8 bytes, 16 for 16 bytes
    atomic = k == ATOMIC_KINDS[0]
    for other in ATOMIC_KINDS[1:]:
        atomic |= k == other
    code |= atomic.view(np.uint8) << np.uint8(2)
    wide = np.flatnonzero(code >= 8)
    if len(wide) == 0:
        return code
    aw = a32 if len(wide) == n else np.take(a32, wide, axis=0)
    if np.bitwise_or.reduce(aw.reshape(-1)) & 15:  # some address is not 16-byte aligned
        off = aw & np.where(w[wide] == 16, np.uint32(15), np.uint32(7))[:, None]
        off_b = off != 0
        if mask is not None:
            off_b &= active_lanes(mask[wide])
        code[wide[_rows_any(off_b)]] |= 1
    is_load = k[wide] == int(Kind.LOAD)
    if is_load.any():
        loads = wide if is_load.all() else wide[is_load]
        pa = aw if len(loads) == len(wide) else np.take(a32, loads, axis=0)
        pact = None if mask is None else active_lanes(mask[loads])
        code[loads[_merged(pa, pact)]] |= 2
    return code


def _category_cost(
    code: int, a: np.ndarray, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) of records of one category from their addresses (modified)."""
    wclass, atomic, merged, misaligned = code >> 3, bool(code & 4), bool(code & 2), bool(code & 1)
    groups = (1, 2, 4)[wclass] // (2 if merged else 1)
    cost = _misaligned_cost if misaligned else _aligned_cost
    return cost(a, mask, 2 + wclass, groups, atomic)


def _load(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(addresses, masks, categories) of some records: (n, 32) uint32 per-lane byte addresses
    (see _low32), (n,) uint32 and (n,) uint8, contiguous. A chunk at a time: the fields of a chunk
    are read together, and its categories found while its addresses are in cache."""
    n = len(recs)
    a32 = np.empty((n, WARP), dtype=np.uint32)
    mask = np.empty(n, dtype=np.uint32)
    code = np.empty(n, dtype=np.uint8)
    for s in chunks(n, CHUNK_RECORDS):
        part = recs[s]
        addr = np.ascontiguousarray(part["addr"])  # first: one sequential pass over the records
        mask[s] = part["mask"]
        msk = None if (mask[s] == np.uint32(0xFFFFFFFF)).all() else mask[s]
        if addr.max() < _LOW32_LIMIT:
            np.copyto(a32[s], addr, casting="unsafe")
        else:
            a32[s] = _low32(addr, None if msk is None else active_lanes(msk))
        code[s] = _categories(part["width"], part["kind"], a32[s], msk)
    return a32, mask, code


def _superchunk_cost(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) of some records: a category at a time, CHUNK_RECORDS at a time."""
    n = len(recs)
    wf = np.empty(n, dtype=np.int32)
    need = np.empty(n, dtype=np.int32)
    if n == 0:
        return wf, need
    a32, mask, code = _load(recs)
    msk = None if (mask == np.uint32(0xFFFFFFFF)).all() else mask
    sizes = np.bincount(code, minlength=32)
    cats = np.flatnonzero(sizes)
    if len(cats) == 1:
        for s in chunks(n, CHUNK_RECORDS):
            wf[s], need[s] = _category_cost(int(cats[0]), a32[s], None if msk is None else msk[s])
        return wf, need
    # several categories: the records of each together (one gather, one scatter)
    order = np.argsort(code, kind="stable")
    a32 = np.take(a32, order, axis=0)
    msk = None if msk is None else msk[order]
    wf_sorted = np.empty(n, dtype=np.int32)
    need_sorted = np.empty(n, dtype=np.int32)
    start = 0
    for c in cats:
        stop = start + int(sizes[c])
        for s in chunks(stop - start, CHUNK_RECORDS):
            rows = slice(start + s.start, start + s.stop)
            part = None if msk is None else msk[rows]
            wf_sorted[rows], need_sorted[rows] = _category_cost(int(c), a32[rows], part)
        start = stop
    wf[order] = wf_sorted
    need[order] = need_sorted
    return wf, need


def record_wavefronts(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) per record, int32 arrays; every record is taken as a shared access.

    Records with no active lane cost 0 and have ideal 0.
    """
    n = len(records)
    wf = np.empty(n, dtype=np.int32)
    ideal_out = np.empty(n, dtype=np.int32)
    for s in chunks(n, _SUPERCHUNK):
        wf[s], ideal_out[s] = _superchunk_cost(records[s])
    return wf, ideal_out


def _one_record(addresses: Any, width: int, mask: int, kind: Kind) -> np.ndarray:
    from gpuadvise.trace.access import empty_records

    rec = empty_records(1)
    addr = np.zeros(WARP, dtype=np.uint64)
    given = np.asarray(addresses, dtype=np.uint64).reshape(-1)
    addr[: len(given)] = given
    lanes = active_lanes(np.array([mask], dtype=np.uint32))[0]
    addr[~lanes] = 0
    rec["addr"][0] = addr
    rec["mask"], rec["width"], rec["kind"], rec["space"] = mask, width, int(kind), int(Space.SHARED)
    return rec


def wavefronts(
    addresses: Any, width: int = 4, mask: int = 0xFFFFFFFF, kind: Kind = Kind.LOAD
) -> int:
    """Wavefronts of one warp-level shared access (per-lane byte addresses; a convenience)."""
    return int(record_wavefronts(_one_record(addresses, width, mask, kind))[0][0])


def ideal(addresses: Any, width: int = 4, mask: int = 0xFFFFFFFF, kind: Kind = Kind.LOAD) -> int:
    """The ideal wavefronts of one warp-level shared access (see the module docstring)."""
    return int(record_wavefronts(_one_record(addresses, width, mask, kind))[1][0])


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class BankCounts(Counts):
    """Warp-level shared instructions executed, their wavefronts and the ideal wavefronts.

    ``excess``: wavefronts beyond the ideal (Nsight's bank-conflict count, less its arbitration
    noise); ``excess_pct``: in % of all wavefronts.
    """

    COST: ClassVar[str] = "wavefronts"

    instructions: float
    wavefronts: float
    ideal: float

    @property
    def ways(self) -> float:
        """Average conflict degree: wavefronts / ideal (1.0 = conflict-free)."""
        return self.wavefronts / self.ideal if self.ideal else 1.0


@dataclass(frozen=True)
class BankTotals(Totals[BankCounts]):
    """Counts by kind: loads, stores, and atomics (reductions included)."""

    COUNTS: ClassVar[type[Counts]] = BankCounts


@dataclass(frozen=True)
class BankLine(Line):
    """Shared accesses of one kind at one source line, over the traced CTAs.

    ``instructions``: warp-level instructions executed (records); ``worst_ways``: the largest
    wavefronts/ideal of any one of them; ``insts``: the PTX instructions (trace indices) involved.
    """

    COUNTS: ClassVar[type[Counts]] = BankCounts

    instructions: int
    wavefronts: int
    ideal: int
    worst_ways: float
    insts: tuple[int, ...] = ()

    @property
    def ways(self) -> float:
        return self.counts.ways  # type: ignore[attr-defined,no-any-return]


@dataclass(frozen=True)
class BankResult(LineResult[BankLine, BankTotals]):
    """The bank model of one launch (:class:`~gpuadvise.model.lines.LineResult`)."""

    LINE: ClassVar[type[Line]] = BankLine
    TOTALS: ClassVar[type[Totals[Any]]] = BankTotals


def _measure(sub: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    wf, need = record_wavefronts(sub)
    ratio = np.divide(wf, need, out=np.ones(len(wf)), where=need > 0)
    return {"wavefronts": wf, "ideal": need}, ratio


def analyze_banks(trace: AccessTrace, records: np.ndarray | None = None) -> BankResult:
    """The bank model over the shared accesses of ``trace``.

    ``records``: use these instead of ``trace.records`` (the reconciled records of
    :func:`gpuadvise.model.reconcile.reconcile`); they must index ``trace.instructions``.
    """
    # small chunks: a chunk's fields are read while they are cached
    per = per_instruction(
        trace, records, Space.SHARED, ("wavefronts", "ideal"), _measure, np.float64,
        2 * CHUNK_RECORDS,
    )  # fmt: skip
    lines = [
        BankLine(
            file=file,
            line=line,
            kind=kind,
            instructions=int(per.count[idx].sum()),
            wavefronts=int(per.sums["wavefronts"][idx].sum()),
            ideal=int(per.sums["ideal"][idx].sum()),
            worst_ways=float(per.worst[idx].max()),
            insts=tuple(idx),
        )
        for file, line, kind, idx in lines_of(trace, per)
    ]
    return BankResult.of_lines(lines, trace)  # type: ignore[no-any-return]


def one_address(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(active lanes, whether they all name one address) per record: ``atomic_contention``'s
    lanes and its distinct addresses == 1 (for records with an active lane), from each record's
    least and greatest active address instead of a sort of its lanes."""
    n = len(records)
    lanes = np.zeros(n, np.int64)
    one = np.zeros(n, bool)
    top = np.uint64(np.iinfo(np.uint64).max)
    for s in chunks(n, _SUPERCHUNK):
        r = records[s]
        act = active_lanes(r["mask"])
        addr = r["addr"].astype(np.uint64)
        lanes[s] = act.sum(axis=1)
        lo = np.where(act, addr, top).min(axis=1)
        hi = np.where(act, addr, np.uint64(0)).max(axis=1)
        one[s] = (lo == hi) & (lanes[s] > 0)
    return lanes, one


def atomic_contention(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(active lanes, distinct addresses) per record, int64 arrays: how many lanes of each
    warp-level access update how many addresses. An atomic whose lanes share few addresses is
    contended (32 lanes adding to one word: 32 and 1): the updates of one address serialise,
    which is the cost :func:`record_wavefronts` counts for ``ATOMS``, and a warp reduction
    before the atomic (one lane per address) removes it. Records with no active lane: (0, 0)."""
    n = len(records)
    lanes = np.zeros(n, np.int64)
    distinct_addrs = np.zeros(n, np.int64)
    for s in chunks(n, _SUPERCHUNK):
        r = records[s]
        act = active_lanes(r["mask"])
        addr = np.where(act, r["addr"].astype(np.uint64), np.uint64(0))
        lanes[s] = act.sum(axis=1)
        # distinct active addresses per row: sort each row, count changes among active lanes
        key = np.where(act, addr, np.uint64(np.iinfo(np.uint64).max))
        key.sort(axis=1)
        valid = key != np.uint64(np.iinfo(np.uint64).max)
        new = np.ones_like(valid)
        new[:, 1:] = key[:, 1:] != key[:, :-1]
        distinct_addrs[s] = (new & valid).sum(axis=1)
    return lanes, distinct_addrs
