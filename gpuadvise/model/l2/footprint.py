"""Footprints: the distinct (CTA, granule) pairs of a trace, and the units the replay reads.

A :class:`Footprint` holds units of memory touched by sets of CTAs: :class:`Matrix` blocks (units
touched by a fixed pattern of CTAs, what the synthesis of untraced CTAs builds) and
:class:`TouchList` blocks (explicit (unit, CTA) touches, what a traced CTA gives). Counts per touch
are rows :data:`NLOAD`, :data:`NSTORE`, :data:`NDIRTY`, :data:`NLGRAN` (load sectors, store
sectors, dirtied sectors, 1 when the CTA reads the granule). See :mod:`gpuadvise.model.l2`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuadvise.arrays import distinct, member, sort_in_place, stable_argsort
from gpuadvise.model.coalescing import SECTOR_BYTES, active_lanes
from gpuadvise.trace.access import Kind

__all__ = [
    "NDIRTY",
    "NLGRAN",
    "NLOAD",
    "NSTORE",
    "Footprint",
    "Matrix",
    "TouchList",
    "Touches",
    "bytes_per_cta",
    "distinct",
    "extract",
    "footprint_totals",
    "member",
    "SectorTriples",
    "sector_touches",
    "segments",
    "sort_pairs",
    "touch_list",
]

NLOAD, NSTORE, NDIRTY, NLGRAN = range(4)  # rows of the per-touch count arrays


@dataclass(frozen=True)
class Touches:
    """Distinct (CTA, granule) pairs with per-pair counts (rows: NLOAD, NSTORE, NDIRTY,
    NLGRAN: load sectors, store sectors, dirtied sectors, 1 when the CTA reads the granule)."""

    cta: np.ndarray  # int64
    gran: np.ndarray  # int64, address // fetch_bytes
    cnt: np.ndarray  # (4, n) int64


def segments(sorted_keys: np.ndarray) -> np.ndarray:
    """Start indices of the runs of equal values in a sorted array (empty for an empty array)."""
    if len(sorted_keys) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.empty(len(sorted_keys), dtype=bool)
    change[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=change[1:])
    return np.flatnonzero(change)


def sort_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Permutation sorting by (a, b), both non-negative int64; one combined key when it fits."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    amax, bmax = int(a.max()), int(b.max())
    if (amax + 1) * (bmax + 1) < 2**62:
        return stable_argsort(a * (bmax + 1) + b)
    return np.lexsort((b, a))


_LANE_CHUNK_RECORDS = 1 << 15
"""Records whose lanes :func:`sector_touches` expands at a time (a dozen arrays of up to 32
entries per record: ~50 MB)."""
EXTRACT_CHUNK_RECORDS = 1 << 16
"""Records whose touched sectors are taken, and their repeats dropped, at a time: the sectors of
all records at once (a warp reading 32 rows touches 32 sectors a record) took gigabytes."""


def _may_cross(addr: np.ndarray, wm1: np.ndarray) -> bool:
    """Whether some access of ``addr`` (rows of lane addresses) with widths ``wm1 + 1`` (a column,
    uint64) may end in a later sector than it starts: not when every width is a power of two up
    to 32 bytes and every address its multiple (what the GPU allows)."""
    if not bool(wm1.any()):
        return False
    pow2 = not bool((((wm1 + np.uint64(1)) & wm1) != 0).any() or (wm1 > 31).any())
    return not (pow2 and not bool((addr & wm1).any()))


def _fresh_lanes(records: np.ndarray) -> np.ndarray:
    """Per record: its active lanes less those that touch exactly the sectors the same lane
    touched in the record before it of the same CTA, warp and instruction (the lane's first and
    last byte each in the same sector as then).

    A loop that walks a row per thread 4 bytes at a time repeats each lane's sector 8 times
    (llm.c's softmax: rows of 201,028 bytes, so the lanes cross sectors at different iterations
    and no whole record repeats); those lanes add no (CTA, sector, kind) triple, so
    :func:`sector_touches` leaves them out of the per-lane expansion (exact: same instruction,
    same kind, and the first record of each chain keeps every lane)."""
    n = len(records)
    mask = records["mask"].copy()
    if n < 2:
        return mask
    cta = records["cta"].astype(np.int64)
    wi = (records["warp"].astype(np.int64) << 32) | records["inst"].astype(np.int64)
    order = sort_pairs(cta - int(cta.min()), wi - int(wi.min()))
    cs, ws = cta[order], wi[order]
    same = np.zeros(n, dtype=bool)  # same group as the record before it in `order`
    same[1:] = (cs[1:] == cs[:-1]) & (ws[1:] == ws[:-1])
    addr, width, m = records["addr"], records["width"], records["mask"]
    five = np.uint64(5)
    for lo in range(1, n, EXTRACT_CHUNK_RECORDS):
        hi = min(lo + EXTRACT_CHUNK_RECORDS, n)
        s = same[lo:hi]
        if not s.any():
            continue
        # the chunk's records and the one before, in group order: each row against the row
        # before it (one gather of the address rows, not two)
        idx = order[lo - 1 : hi]
        a = addr[idx]
        first = a >> five
        eq = first[1:] == first[:-1]
        w = width[idx].astype(np.uint64)[:, None] - np.uint64(1)
        if _may_cross(a, w):  # then the lanes' last bytes must repeat their sectors too
            last = (a + w) >> five
            eq &= last[1:] == last[:-1]
        act = active_lanes(m[idx])
        eq &= act[1:] & act[:-1]
        eq &= s[:, None]
        gone = np.packbits(eq, axis=1, bitorder="little").view(np.uint32).reshape(-1)
        mask[idx[1:]] &= ~gone
    return mask


def sector_touches(records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CTA, sector, flag) of every sector the records touch (flag: 1 load, 2 store, 5 atomic),
    each triple once per chunk of :data:`EXTRACT_CHUNK_RECORDS` records (the repeats of a loop
    within a CTA dropped as the records stream by, and before that the lanes that repeat their
    sectors of the record before, :func:`_fresh_lanes`). It does not depend on the granule: compute
    it once and pass it to :func:`extract` for each granule."""
    fresh = _fresh_lanes(records)
    ctas, secs, flags = [], [], []
    for lo in range(0, len(records), _LANE_CHUNK_RECORDS):
        part = records[lo : lo + _LANE_CHUNK_RECORDS]  # a view: no copy of the records
        m = fresh[lo : lo + _LANE_CHUNK_RECORDS]
        sel = np.flatnonzero(m)
        if not len(sel):
            continue
        # lane by lane (the triples are made distinct below: no per-record sort of 32 lanes)
        act = active_lanes(m[sel])
        if int(act.sum()) * 2 > act.size:
            # dense (a coalesced warp): less the lanes whose sectors are their left neighbour's
            # (4 entries of 32), from the rows' addresses
            a = part["addr"][sel]
            w = part["width"][sel].astype(np.uint64)[:, None] - np.uint64(1)
            first2 = a >> np.uint64(5)
            same = first2[:, 1:] == first2[:, :-1]
            cross = _may_cross(a, w)
            if cross:
                last2 = (a + w) >> np.uint64(5)
                same &= last2[:, 1:] == last2[:, :-1]
            act[:, 1:] &= ~(act[:, :-1] & same)
            r, c = np.nonzero(act)
            rows = sel[r]
            first = first2[r, c].astype(np.int64)
            last = last2[r, c].astype(np.int64) if cross else first
        else:
            # sparse (the lanes a loop's walk moved to new sectors): those lanes' addresses only
            r, c = np.nonzero(act)
            rows = sel[r]
            addr = part["addr"][rows, c]
            first = (addr >> np.uint64(5)).astype(np.int64)
            last = (
                (addr + part["width"][rows].astype(np.uint64) - np.uint64(1)) >> np.uint64(5)
            ).astype(np.int64)
        more = last - first
        sec_parts, row_parts = [first], [rows]
        for k in range(1, int(more.max(initial=0)) + 1):  # lanes over a sector boundary
            over = more >= k
            sec_parts.append(first[over] + k)
            row_parts.append(rows[over])
        sec = np.concatenate(sec_parts) if len(sec_parts) > 1 else first
        rec = np.concatenate(row_parts) if len(row_parts) > 1 else rows
        kind = part["kind"][rec]
        flag = np.where(kind == int(Kind.LOAD), 1, np.where(kind == int(Kind.STORE), 2, 1 | 4))
        cta = part["cta"][rec].astype(np.int64)
        c0, s0 = int(cta.min()), int(sec.min())
        span = int(sec.max()) - s0 + 1
        if (int(cta.max()) - c0 + 1) * span * 8 < 2**62:
            key = distinct(((cta - c0) * span + (sec - s0)) * 8 + flag)
            pair = key >> 3
            ctas.append(pair // span + c0)
            secs.append(pair % span + s0)
            flags.append(key & 7)
        else:
            trip = np.unique(np.stack([cta, sec, flag.astype(np.int64)]), axis=1)
            ctas.append(trip[0])
            secs.append(trip[1])
            flags.append(trip[2])
    if not ctas:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy(), z.copy()
    return np.concatenate(ctas), np.concatenate(secs), np.concatenate(flags)


SectorTriples = tuple[np.ndarray, np.ndarray, np.ndarray]


def extract(records: np.ndarray, fetch_bytes: int, sectors: SectorTriples | None = None) -> Touches:
    """Distinct (CTA, granule) pairs of ``records``, sorted by CTA then granule (``sectors``:
    their :func:`sector_touches`, when already computed)."""
    cta, sec, flag = sector_touches(records) if sectors is None else sectors
    if len(cta) == 0:
        z = np.zeros(0, dtype=np.int64)
        return Touches(z, z.copy(), np.zeros((4, 0), dtype=np.int64))
    s0 = int(sec.min())
    span = int(sec.max()) - s0 + 1
    c0 = int(cta.min())
    if (int(cta.max()) - c0 + 1) * span * 8 < 2**62:
        # one sort of (cta, sector, kind) packed into an int64
        key = ((cta - c0) * span + (sec - s0)) * 8 + flag
        sort_in_place(key)
        flag = (key & 7).astype(np.uint8)
        pair = key >> 3
        cta, sec = pair // span + c0, pair % span + s0
    else:
        order = np.lexsort((sec, cta))
        cta, sec, flag = cta[order], sec[order], flag[order].astype(np.uint8)
    key_change = np.empty(len(sec), dtype=bool)
    key_change[0] = True
    key_change[1:] = (cta[1:] != cta[:-1]) | (sec[1:] != sec[:-1])
    starts = np.flatnonzero(key_change)
    flags = np.bitwise_or.reduceat(flag, starts)
    cta, sec = cta[starts], sec[starts]
    spg = fetch_bytes // SECTOR_BYTES
    gran = sec // spg
    g_change = np.empty(len(gran), dtype=bool)
    g_change[0] = True
    g_change[1:] = (cta[1:] != cta[:-1]) | (gran[1:] != gran[:-1])
    gs = np.flatnonzero(g_change)
    nload = np.add.reduceat((flags & 1).astype(np.int64), gs)
    nstore = np.add.reduceat(((flags & 2) > 0).astype(np.int64), gs)
    ndirty = np.add.reduceat(((flags & 6) > 0).astype(np.int64), gs)
    cnt = np.stack([nload, nstore, ndirty, (nload > 0).astype(np.int64)])
    return Touches(cta[gs], gran[gs], cnt)


@dataclass
class Matrix:
    """Units touched by a fixed pattern of CTAs: row u lists the CTAs touching unit u (-1: none),
    column k is one relative toucher, whose counts for the whole unit are ``cnt[:, k]``."""

    touchers: np.ndarray  # (n_u, K) int32 CTA ids
    nvalid: np.ndarray  # (n_u,) int64, touchers >= 0 per row
    w_bytes: np.ndarray  # (n_u,) float64 capacity the unit takes
    scale: np.ndarray  # (n_u,) float64 share of the unit inside the buffer (counts scale)
    cnt: np.ndarray  # (4, K) float64
    gbytes: int  # the granule (bytes a miss fills)


@dataclass
class TouchList:
    """Units with explicit touch lists: touch i is (unit[i], cta[i], cnt[:, i]), pairs distinct."""

    unit: np.ndarray  # (n,) int64 in 0 .. len(w_bytes) - 1
    cta: np.ndarray  # (n,) int64
    cnt: np.ndarray  # (4, n) float64
    w_bytes: np.ndarray  # (n_u,) float64
    gbytes: int  # the granule (bytes a miss fills)


@dataclass
class Footprint:
    """The units a replay reads: matrix blocks and touch lists, with the synthesis' notes."""

    mats: list[Matrix] = field(default_factory=list)
    lists: list[TouchList] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def touch_list(t: Touches, fetch_bytes: int) -> TouchList:
    units, inv = np.unique(t.gran, return_inverse=True)
    return TouchList(
        unit=inv.astype(np.int64).reshape(-1),
        cta=t.cta.copy(),
        cnt=t.cnt.astype(np.float64),
        w_bytes=np.full(len(units), float(fetch_bytes)),
        gbytes=fetch_bytes,
    )


def footprint_totals(model: Footprint) -> tuple[float, float, float, float]:
    """(load requests, store requests, dirty sectors (write-backs), footprint bytes)."""
    load = store = dirty = foot = 0.0
    for mat in model.mats:
        valid = mat.touchers >= 0
        K = valid.shape[1]
        if K >= 2 and 4 * int(np.count_nonzero(valid)) <= valid.size:
            # few touches (hecbench scan: 262,144 units of 125 columns, one toucher each): the
            # touches alone, not two (units, K) float64 arrays. bincount adds each column's
            # scales in row order, as the column sums of ``valid * scale`` do (a reduction
            # over the rows of a C-ordered array adds row after row; its zeros add nothing)
            rows, cols = np.nonzero(valid)
            del valid
            per_k = np.bincount(cols, weights=mat.scale[rows], minlength=K)
            # each unit's stored sectors are written back once: its largest toucher's share
            dk = np.zeros(len(mat.touchers))
            np.maximum.at(dk, rows, mat.cnt[NDIRTY][cols])
            del rows, cols
        else:  # (one column: its sum is pairwise, not row after row)
            per_k = (valid * mat.scale[:, None]).sum(axis=0)
            dk = np.where(valid, mat.cnt[NDIRTY][None, :], 0.0).max(axis=1, initial=0.0)
        load += float(per_k @ mat.cnt[NLOAD])
        store += float(per_k @ mat.cnt[NSTORE])
        dirty += float((dk * mat.scale).sum())
        foot += float(mat.w_bytes.sum())
    for lst in model.lists:
        load += float(lst.cnt[NLOAD].sum())
        store += float(lst.cnt[NSTORE].sum())
        if len(lst.unit):
            mx = np.zeros(len(lst.w_bytes))
            np.maximum.at(mx, lst.unit, lst.cnt[NDIRTY])
            dirty += float(mx.sum())
        foot += float(lst.w_bytes.sum())
    return load, store, dirty, foot


def bytes_per_cta(model: Footprint, P: int) -> np.ndarray:
    out = np.zeros(P)
    for mat in model.mats:
        valid = mat.touchers >= 0
        w = np.broadcast_to(mat.w_bytes[:, None], valid.shape)[valid]
        out += np.bincount(mat.touchers[valid], weights=w, minlength=P)[:P]
    for lst in model.lists:
        out += np.bincount(lst.cta, weights=lst.w_bytes[lst.unit], minlength=P)[:P]
    return out
