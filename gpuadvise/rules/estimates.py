"""Estimates shared by several rules, on the one launch model of
:mod:`gpuadvise.model.roofline` and :mod:`gpuadvise.model.execution`: the traffic and work of the
traced launch (:func:`view_traffic`), the traffic once some accesses move only the bytes they use,
and the estimate between the two (:func:`l1_roofline_estimate`, an upper bound with the point
value in its inputs); a change of the instructions issued (:func:`issue_change_estimate`); and
the check every other estimate goes through (:func:`through_model`): a rule's speedup of the
kernel's work, made a speedup of the launch it is part of, whose floor stays.

An estimate made on the launch model carries ``inputs["model"] == "execution"`` (:data:`MODEL`),
its point (``point_speedup``), the same change at peak rates and full overlap on both sides
(``peak_speedup``: with the point, a like-for-like comparison; the bound compares the launch at
sustained rates with the changed one at peak) and the terms that bound the launch before and after
(``bound_by_before``, ``bound_by_after``)."""

from __future__ import annotations

import hashlib
import math
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuadvise.arrays import (
    distinct,
    distinct_first,
    distinct_inverse,
    distinct_rows,
    first_by_runs,
    inverse_by_runs,
    member,
    run_heads,
)
from gpuadvise.devices import DeviceSpec, memory_rates
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.l1 import (
    L1_LINE_BYTES,
    L1_UNUSED_BYTES,
    UNIFIED_EXTRA_BYTES,
    capacity_miss_shares,
    misses_in_flight_by_record,
    written_before_read,
)
from gpuadvise.model.roofline import (
    ALL_TERMS,
    BOUND_MARGIN,
    LaunchTimes,
    Traffic,
    ceiling_s,
    launch_estimate,
    launch_times,
    record_l1_cycles,
    work_ratio,
)
from gpuadvise.rules.findings import Estimate
from gpuadvise.trace.access import WARP, Kind
from gpuadvise.trace.view import SECTOR, TraceView

__all__ = [
    "LOADS_IN_FLIGHT",
    "CTAS_DIVIDED_BY",
    "MODEL",
    "buffer_records",
    "fp64_to_fp32_estimate",
    "issue_change_estimate",
    "kernel_launch_times",
    "l1_refetch",
    "l1_roofline_estimate",
    "launch_change_estimate",
    "repeated_requests",
    "resident_warps",
    "shared_wavefront_estimate",
    "model_check",
    "through_model",
    "launch_traffic_alone",
    "view_traffic",
]

MODEL = "execution"
# an estimate's input naming why the launch model's floor does not cap it (model_check). No rule sets
# it now: GA103's merges did (2026-11-30: 4,224 CTAs of 16 threads ran 5.98 us on an H200 where the
# model said 3.77), until the CTA launches were measured into the model (its ramp; s10-launch)
FLOOR_NOT_APPLIED = "launch_floor_not_applied"
"""``inputs["model"]`` of an estimate made on the launch model (the check leaves it as it is)."""
# an estimate's input: the change launches 1/k of the CTAs (GA103's merged blocks, k), so the CTA
# launches (the model's cta term and ramp) shorten with the rest of the work (through_model); any
# other change leaves them as they are
CTAS_DIVIDED_BY = "ctas_divided_by"

LOADS_IN_FLIGHT = 4
"""Load requests a warp keeps in flight (independent loads the compiler issues back to back);
with a float4 load per lane, one warp per SM reads 171 GB/s on an H200 (132 x 512 B / 395 ns)."""


def _loads_per_wait(work: KernelWork | None, per_warp: float) -> float:
    """Load requests a warp keeps in flight: :data:`LOADS_IN_FLIGHT`, or more where its
    critical chain waits for global loads fewer times than that per load (its loads over the
    global links of its chain, :mod:`gpuadvise.ptx.chains`: 40 guarded loads that ptxas
    predicates and issues back to back are one wait, so 40 loads in flight, where a loop that
    uses each load before the next waits once a load)."""
    links = 0.0 if work is None else float(work.chain.get("global", 0.0))
    if links <= 0.0:
        return LOADS_IN_FLIGHT
    return max(float(LOADS_IN_FLIGHT), per_warp / links)


@dataclass(frozen=True)
class _RecordCosts:
    kind: np.ndarray  # per record: Kind
    sectors: np.ndarray  # sectors each record touches
    nbytes: np.ndarray  # distinct bytes it moves
    lines: np.ndarray  # 128-byte lines it touches


_COSTS: weakref.WeakKeyDictionary[TraceView, _RecordCosts] = weakref.WeakKeyDictionary()


def _costs(view: TraceView) -> _RecordCosts:
    got = _COSTS.get(view)
    if got is None:
        rs = view.sector_counts  # the view's (issue 31: made once per trace)
        got = _RecordCosts(
            view.records["kind"].astype(np.int64),
            rs.sectors.astype(np.int64),
            rs.bytes.astype(np.int64),
            rs.lines.astype(np.int64),
        )
        _COSTS[view] = got
    return got


@dataclass(frozen=True)
class _SectorSet:
    """The distinct keys of some lanes of a view: ``lanes`` (lane indices, ascending) and each
    one's key number (``group``, 0 .. ``count`` - 1), found once per view (one sort) and reused
    by every :func:`view_traffic` of the run's rules."""

    lanes: np.ndarray
    group: np.ndarray
    count: float
    key_weight: np.ndarray | None = None  # per key: the records its first lane stands for
    # per key, its lanes' count (made on the first :meth:`alone`)
    _per_key: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)

    def picked(self, sel_lanes: np.ndarray) -> np.ndarray | None:
        """Per lane of the set, whether ``sel_lanes`` (as :meth:`alone`'s) holds it, where they
        are many (:meth:`alone` reads it; another set of the same ``lanes`` array may too); None
        where they are few (:meth:`alone` searches for them) or none."""
        if not len(self.lanes) or not len(sel_lanes) or len(sel_lanes) * 8 <= len(self.lanes):
            return None
        # (in the set's own index type: its lanes hold every selected lane's index)
        sel = np.asarray(sel_lanes).astype(self.lanes.dtype, copy=False)
        mask = np.zeros(max(int(self.lanes[-1]), int(sel[-1])) + 1, bool)
        mask[sel] = True
        return mask[self.lanes]

    def alone(self, sel_lanes: np.ndarray, picked: np.ndarray | None = None) -> float:
        """Keys that only the lanes ``sel_lanes`` (lane indices of the view, ascending and
        distinct) touch (``setdiff1d(keys[sel], keys[~sel])``), each counted as often as its
        records stand for (:meth:`TraceView.weighted`). Few selected lanes: the keys whose
        every lane is selected, from those lanes alone (a binary search each) and the keys'
        lane counts; many: the keys no lane left out touches (every key has a lane), by a mask
        over the lanes (``picked``: :meth:`picked` of these ``sel_lanes``, where the caller
        has it: the L2 and DRAM load sets share their lanes)."""
        n = len(self.key_weight) if self.key_weight is not None else int(self.count)
        if not len(self.lanes) or not len(sel_lanes):
            return 0.0
        if len(sel_lanes) * 8 > len(self.lanes):  # many: a mask over the lanes
            s = self.picked(sel_lanes) if picked is None else picked
            assert s is not None
            hit = np.ones(n, bool)
            hit[self.group[~s]] = False
        else:  # few: a binary search each
            # (in the set's own index type: its lanes hold every selected lane's index)
            sel = np.asarray(sel_lanes).astype(self.lanes.dtype, copy=False)
            if not self._per_key:
                self._per_key.append(np.bincount(self.group, minlength=n))
            pos = np.searchsorted(self.lanes, sel)
            pos = pos[self.lanes[np.minimum(pos, len(self.lanes) - 1)] == sel]
            selected = np.bincount(self.group[pos], minlength=n)
            # every lane of the key selected: as many selected as the key has (no pass over
            # the lanes not selected)
            hit = selected > 0
            hit &= selected == self._per_key[0]
        if self.key_weight is not None:
            return float(self.key_weight[hit].sum())
        return float(np.count_nonzero(hit))


_SETS: weakref.WeakKeyDictionary[TraceView, dict[str, _SectorSet]] = weakref.WeakKeyDictionary()

_SET_SPANS: weakref.WeakKeyDictionary[TraceView, dict[str, list[int]]] = weakref.WeakKeyDictionary()
"""The spans of the view's sector sets' key columns (:func:`_packed_at_spans`), a few numbers
per set kept while the view lives: :func:`launch_traffic_alone` drops the sets themselves
before the rules' fork, and the process that makes them again finds the same spans here
instead of a pass over the lanes' columns for them (issue 31: GA301's rebuild after the
fork)."""


_MISSING: weakref.WeakKeyDictionary[TraceView, tuple[float, float]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class _L2Keys:
    """What :func:`_sector_sets` found of the L2 set's (CTA, buffer, sector) keys, for
    :func:`l1_refetch`'s (CTA, buffer, line) keys of the same lanes: ``lanes`` (the L2 set's),
    ``keys`` (its distinct keys, ascending: :func:`_packed`'s mixed-radix key, the sector the
    last column, ``sector_span`` its radix) and ``first`` (each key's first lane's place in
    ``lanes``)."""

    lanes: np.ndarray
    keys: np.ndarray
    first: np.ndarray
    sector_span: int

    def line_firsts(self, lanes: np.ndarray) -> np.ndarray | None:
        """:func:`~gpuadvise.arrays.first_by_runs`'s first places of the (CTA, buffer, 128-byte
        line) keys of ``lanes`` (lane indices, ascending), in the keys' order, from the distinct
        sector keys (a line is four sectors: the line keys of the ascending sector keys come
        ascending, each line's first lane the least of its sectors'), no pass over the lanes;
        None when ``lanes`` are not the L2 set's."""
        if len(lanes) != len(self.lanes) or not np.array_equal(lanes, self.lanes):
            return None
        span = np.int64(self.sector_span)
        line = self.keys % span
        line //= np.int64(L1_LINE_BYTES // SECTOR)
        key = self.keys // span
        key *= span // np.int64(L1_LINE_BYTES // SECTOR) + 1
        key += line
        del line
        if not len(key):
            return np.zeros(0, np.intp)
        return np.minimum.reduceat(self.first, np.flatnonzero(run_heads(key)))


_L2_KEYS: weakref.WeakKeyDictionary[TraceView, _L2Keys] = weakref.WeakKeyDictionary()


@dataclass
class _Kept:
    """What the estimates found for the records of one ``keep`` mask (a per-line proxy's: an
    estimate asks for them before and after the change): ``lanes``, those records' lanes
    (ascending), and, once found, their own-stored lanes (over ``lanes``), sector sets and
    refetches per device."""

    digest: bytes
    lanes: np.ndarray
    own: np.ndarray | None = None
    sets: dict[str, _SectorSet] | None = None
    l2_keys: _L2Keys | None = None
    l1: dict[Any, np.ndarray] = field(default_factory=dict)


_KEPT: weakref.WeakKeyDictionary[TraceView, _Kept] = weakref.WeakKeyDictionary()


def _kept(view: TraceView, keep: np.ndarray) -> _Kept:
    """The :class:`_Kept` of ``keep`` (a mask over the view's records): the last mask's kept."""
    digest = hashlib.blake2b(np.packbits(keep).tobytes(), digest_size=16).digest()
    got = _KEPT.get(view)
    if got is None or got.digest != digest:
        got = _Kept(digest, _record_lanes(view, keep))
        _KEPT[view] = got
    return got


@dataclass(frozen=True)
class _RecordSide:
    """Per view, what the estimates read of its records alone: each record's CTA (dense),
    its first lane (``starts``, one more than the records; None when the lanes do not come by
    record) and each CTA's traced warps."""

    group: np.ndarray
    starts: np.ndarray | None
    traced: np.ndarray


_RECORD_SIDE: weakref.WeakKeyDictionary[TraceView, _RecordSide] = weakref.WeakKeyDictionary()


def _record_side(view: TraceView) -> _RecordSide:
    got = _RECORD_SIDE.get(view)
    if got is None:
        recs = view.records
        group = np.searchsorted(view.ctas, recs["cta"]).astype(np.int64)
        rec = view.lanes.rec
        starts = None
        if len(rec) < 2 or bool((rec[1:] >= rec[:-1]).all()):
            starts = np.searchsorted(rec, np.arange(len(recs) + 1))
        wkey = (recs["cta"].astype(np.int64) << 16) | recs["warp"].astype(np.int64)
        traced = np.bincount(group[distinct_first(wkey)[1]], minlength=max(len(view.ctas), 1))
        got = _RecordSide(group, starts, traced)
        _RECORD_SIDE[view] = got
    return got


def _record_lanes(view: TraceView, rec_mask: np.ndarray, narrow: bool = False) -> np.ndarray:
    """The indices (ascending) of the lanes of the records ``rec_mask`` selects: from each
    record's range of lanes where the view's lanes come by record (its lanes are), else by a
    pass over every lane. ``narrow``: int32 where the view's lanes number fewer than 2**31
    (the caller only indexes with them; issue 31: a layout fix's lanes are most of a view's),
    else int64."""
    ix = np.int32 if narrow and len(view.lanes) < 2**31 - 1 else np.int64
    starts = _record_side(view).starts
    if starts is None:
        return np.flatnonzero(rec_mask[view.lanes.rec]).astype(ix, copy=False)
    recs = np.flatnonzero(rec_mask)
    lo = starts[recs]
    counts = starts[recs + 1] - lo
    before = np.cumsum(counts) - counts  # each record's first place in the result
    # (each record's lanes its offset plus their places, the sum made in place)
    out = np.repeat((lo - before).astype(ix), counts)
    out += np.arange(len(out), dtype=ix)
    return out


def _on(a: np.ndarray, sub: np.ndarray | None) -> np.ndarray:
    """``a`` (per lane) at the lanes ``sub``; all of it when ``sub`` is None."""
    return a if sub is None else a[sub]


def _pairs_by_record(rec: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``distinct_rows([rec, key])`` (int64, its two rows) of lanes by record (``rec``
    non-decreasing): the first of each run of equal pairs, sorted only when the runs do not
    come in order already (each record's keys ascending: its lanes in address order)."""
    head = run_heads(rec, key)
    r, k = rec[head], key[head]
    del head
    return _pairs_of_runs(r, k)


def _pairs_of_runs(
    r: np.ndarray, k: np.ndarray, *, wide: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_pairs_by_record` of the first of each run of equal pairs (``r``, ``k``).
    ``wide=False``: the pairs in their own integer types where they come in order already (no
    int64 copies: the L1 refetches' records and keys of every load, 56 MB each on AoSKernel's
    7 M, held through the capacity model's peak; issue 31)."""
    if len(r) > 1:
        up = (r[1:] > r[:-1]) | ((r[1:] == r[:-1]) & (k[1:] > k[:-1]))
        if not bool(up.all()):
            del up
            got = _sorted_in_records(r, k)
            if got is not None:
                return got
            rows = distinct_rows([r, k])
            return rows[0], rows[1]
    if not wide:
        return r, k
    return r.astype(np.int64, copy=False), k.astype(np.int64, copy=False)


_RECORD_ROW_LANES = 64  # _sorted_in_records: the most keys a record's row of the matrix holds
_KEY_CHUNK = 1 << 20  # lanes a step of _used_key (8 MB temporaries)


def _sorted_in_records(r: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``distinct_rows([r, k])``'s two rows for ``r`` non-decreasing (each record's keys one
    segment, at most a warp's lanes): each segment sorted as a row of a matrix (numpy sorts
    rows of 32 some 40 times faster than one sort of every key: issue 31, the L1 refetches'
    (record, sector) pairs of a strided walk), the rows read in order. None where a segment is
    longer than :data:`_RECORD_ROW_LANES`, the matrix would be over four times the keys, or a
    key is the padding value."""
    dtype = np.result_type(r, k)
    if dtype.kind not in "iu" or r.dtype.kind not in "iu" or k.dtype.kind not in "iu":
        return None
    starts = np.flatnonzero(run_heads(r))
    lengths = np.diff(np.r_[starts, len(r)])
    width = int(lengths.max())
    rows = len(starts)
    if width > _RECORD_ROW_LANES or rows * width > 4 * len(r):
        return None
    big = np.iinfo(np.int64).max
    if int(k.max()) >= big or int(k.min()) < np.iinfo(np.int64).min + 1:
        return None
    # each key's place in the matrix, row x width + column (in place: one key-sized index)
    at = np.arange(len(r))
    at -= np.repeat(starts, lengths)
    at += np.repeat(np.arange(rows) * width, lengths)
    mat = np.full((rows, width), big, dtype=np.int64)
    mat.reshape(-1)[at] = k
    del at
    mat.sort(axis=1)
    keep = mat != big
    keep[:, 1:] &= mat[:, 1:] != mat[:, :-1]
    out_k = mat[keep].astype(dtype, copy=False)
    del mat
    out_r = np.repeat(r[starts].astype(dtype), np.count_nonzero(keep, axis=1))
    return out_r, out_k


def _distinct_ascending(a: np.ndarray) -> np.ndarray:
    """:func:`~gpuadvise.arrays.distinct` of ``a``, without a sort where ``a`` is
    non-decreasing (the records of lanes in lane order)."""
    if len(a) > 1 and not bool((a[1:] >= a[:-1]).all()):
        return distinct(a)
    return a[run_heads(a)] if len(a) else np.sort(a)


def _warp_steps(view: TraceView) -> np.ndarray:
    """Per record of the view, its index among its warp's records (the warp's own order)."""
    recs = view.records
    n = len(recs)
    if not n:
        return np.zeros(0, np.int64)
    key = _packed([recs["cta"].astype(np.int64), recs["warp"].astype(np.int64)])
    order = np.argsort(key, kind="stable")
    ks = key[order]
    head = np.ones(n, bool)
    head[1:] = ks[1:] != ks[:-1]
    pos = np.arange(n, dtype=np.int64)
    start = np.maximum.accumulate(np.where(head, pos, 0))
    out = np.empty(n, np.int64)
    out[order] = pos - start
    return out


def _missing_requests(view: TraceView, l2: _SectorSet, first: np.ndarray) -> tuple[float, float]:
    """The load requests (records, weighted as they stand for) that bring at least one sector
    of their CTA into the L1: each key of ``l2`` (a CTA's sector) is brought by the first lane
    that touches it (``first``: per key, its first lane's place in ``l2.lanes``). A request of
    32 lanes in 32 rows that misses counts once, not 32 times (the warp waits for it once). And
    the requests of the CTA's other warps that load such a sector at the same step of their own
    work, and wait for the miss in flight (:func:`gpuadvise.model.l1.misses_in_flight`), each
    once, those that bring none."""
    if len(l2.group) == 0:
        return (0.0, 0.0)
    g = np.asarray(l2.group).reshape(-1)
    rec = view.lanes.rec[l2.lanes]
    recs = distinct(rec[first].astype(np.int64, copy=False))
    bring = float(view.rec_weight[recs].sum())
    inst = view.records["inst"].astype(np.int64)
    waits = misses_in_flight_by_record(g, rec, _warp_steps(view), inst, first)
    pending = np.setdiff1d(_distinct_ascending(rec[waits]), recs, assume_unique=True)
    return (bring, float(view.rec_weight[pending].sum()))


_OWN: weakref.WeakKeyDictionary[TraceView, np.ndarray] = weakref.WeakKeyDictionary()


def own_stored_lanes(view: TraceView, keep: np.ndarray | None = None) -> np.ndarray:
    """Per lane of ``view``: a load of a sector its CTA's stores wrote in full before the CTA
    first loaded it, or one of those stores (:func:`gpuadvise.model.l1.written_before_read`:
    the L1 serves the load from what the store left, measured on an H200). Streaming
    (evict-first) accesses and atomics are left out. ``keep`` (a mask over the records): of
    those records' lanes only. Once per view without ``keep``, once per mask with it (the last
    mask's kept)."""
    if keep is None:
        return _own_stored(view, None)
    out = np.zeros(len(view.lanes), bool)
    kept = _kept(view, keep)
    out[kept.lanes] = _own_stored(view, keep)
    return out


def _own_stored(view: TraceView, keep: np.ndarray | None) -> np.ndarray:
    """:func:`own_stored_lanes` over the lanes of the ``keep`` records alone (``_Kept.lanes``)
    with ``keep``; over every lane without."""
    kept = None if keep is None else _kept(view, keep)
    got = _OWN.get(view) if kept is None else kept.own
    if got is not None:
        return got
    sub = None if kept is None else kept.lanes
    c = _costs(view)
    lanes = view.lanes
    lb = _on(view.lane_buffer, sub)
    rec = _on(lanes.rec, sub)
    rec_ok = ~view.inst_streaming[view.records["inst"].astype(np.int64)]
    rec_ok &= (c.kind == int(Kind.LOAD)) | (c.kind == int(Kind.STORE))
    if keep is not None:
        rec_ok &= keep
    out = np.zeros(len(rec), bool)
    is_load_rec = c.kind == int(Kind.LOAD)
    # only the buffers both stored and loaded can have such loads (most kernels: none)
    lane_ok = (lb >= 0) & rec_ok[rec]
    is_load = is_load_rec[rec]
    nb = len(view.buffer_names)
    both = np.bincount(lb[lane_ok & is_load], minlength=nb) > 0
    both &= np.bincount(lb[lane_ok & ~is_load], minlength=nb) > 0
    del is_load
    idx = np.flatnonzero(lane_ok & both[lb]) if both.any() else np.zeros(0, np.int64)
    if len(idx):
        at = idx if sub is None else sub[idx]
        # (the key made first, a chunk of lanes at a time: no lane-sized gather of the CTA,
        # buffer and sector nor their int64 copies beside it; passed alone, the model makes
        # its runs' numbers in it and frees it once grouped; the offsets made their offsets in
        # the sector in place: fewer lane-sized arrays at its peak, issue 31)
        r = lanes.rec[at]
        out[idx] = written_before_read(
            _packed_at([lanes.cta, view.lane_buffer, lanes.off], at, SECTOR),
            r,
            is_load_rec[r],
            np.remainder(off := lanes.off[at], SECTOR, out=off),
            lanes.width[at],
            SECTOR,
            overwrite=True,
        )
    if kept is None:
        _OWN[view] = out
    else:
        kept.own = out
    return out


def _sector_sets(view: TraceView, keep: np.ndarray | None = None) -> dict[str, _SectorSet]:
    """The L2 load sectors (per CTA) and the DRAM load and store sectors of the view's lanes;
    with ``keep`` (a mask over the records), of those records' lanes only (the last such mask's
    kept: an estimate asks for the proxy's records before and after the change). Without
    ``keep``, the view's missing requests (:func:`_missing_requests`) with them."""
    kept = None if keep is None else _kept(view, keep)
    got = _SETS.get(view) if kept is None else kept.sets
    if got is None:
        sub = None if kept is None else kept.lanes
        c = _costs(view)
        lanes, lb = view.lanes, view.lane_buffer
        rec = _on(lanes.rec, sub)
        inside = _on(lb, sub) >= 0
        if keep is not None:
            inside &= keep[rec]
        is_load = c.kind == int(Kind.LOAD)
        lload = is_load[rec]
        lstore = ~lload
        lstore &= inside
        lload &= inside
        del rec, inside
        # a load of what its CTA stored in full before is the L1's, and no DRAM fill
        lload &= ~_own_stored(view, keep)
        got = {}
        # one array for the L2's set and DRAM's; the sets hold their lane indices and key
        # numbers while the view lives: in int32 where they fit (issue 31)
        fetched_idx = _nonzero_index32(lload, sub, len(lanes))
        del lload
        l2_keys: tuple[np.ndarray, np.ndarray | None, np.ndarray, int] | None = None
        l2_first: np.ndarray | None = None
        line_keys: _L2Keys | None = None
        for name in ("l2", "load", "store"):
            if name != "store":
                idx = fetched_idx
            else:
                idx = _nonzero_index32(lstore, sub, len(lanes))
            first: np.ndarray | None = None
            if name == "load" and l2_keys is not None:
                uniq, first, group = _coarser(*l2_keys)
            else:
                # the key (CTA, buffer, sector) for the L2's, (buffer, sector) for DRAM's,
                # packed densely in that order: distinct_inverse sorts it packed with the
                # positions, the first lane of each run of lanes of one key alone
                # (made a chunk of lanes at a time in the key itself: no lane-sized gather of
                # the CTA, buffer and sector beside it, issue 31's peak; the spans _packed and
                # _span find from those gathers)
                inner: int | None = None
                if len(idx):
                    # (the view's own sets: their spans, when made before, from then)
                    known = _SET_SPANS.setdefault(view, {}) if kept is None else {}
                    k, spans = _packed_at_spans(
                        [lanes.cta, lb, lanes.off] if name == "l2" else [lb, lanes.off],
                        idx,
                        SECTOR,
                        known.get(name),
                    )
                    known[name] = spans
                    if name == "l2" and spans[1] * spans[2] * spans[0] < 2**62:
                        inner = spans[1] * spans[2]
                    sector_span = spans[-1]
                else:
                    cols = [lb[idx], lanes.off[idx] // SECTOR]
                    ctas = lanes.cta[idx] if name == "l2" else None
                    k = _packed([ctas, *cols] if ctas is not None else cols)
                    inner = _span(ctas, cols) if ctas is not None else None
                    sector_span = 1
                    del cols, ctas
                if len(k):
                    # (k is this pass's own: its runs' numbers made in it)
                    uniq, first, group = inverse_by_runs(k, overwrite=True)
                else:
                    uniq, first, group = distinct_inverse(k, return_index=True)
                del k
                if name == "l2":
                    l2_first = first
                    if inner is not None:  # (the key mixed-radix: its sector the last digit)
                        line_keys = _L2Keys(idx, uniq, first, sector_span)
                if not view.iterations_sampled:
                    first = None
                if inner is not None:
                    l2_keys = (uniq, first, group, inner)
            if name == "load":
                l2_keys = None
            if first is not None:
                kw = view.rec_weight[lanes.rec[idx[first]]]
                got[name] = _SectorSet(
                    idx, _index32(group.reshape(-1), len(uniq)), float(kw.sum()), kw
                )
            else:
                got[name] = _SectorSet(
                    idx, _index32(group.reshape(-1), len(uniq)), float(len(uniq))
                )
            del group, idx
        if kept is None:
            assert l2_first is not None
            _MISSING[view] = _missing_requests(view, got["l2"], l2_first)
            _SETS[view] = got
            if line_keys is not None:
                _L2_KEYS[view] = line_keys
        else:
            kept.sets = got
            kept.l2_keys = line_keys
    return got


_L1_MISSES: weakref.WeakKeyDictionary[TraceView, dict[Any, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


def l1_refetch(device: DeviceSpec, view: TraceView, keep: np.ndarray | None = None) -> np.ndarray:
    """Per record of ``view``: the load sectors (weighted) it reads again after the L1 gave
    their lines up (:func:`gpuadvise.model.l1.capacity_misses`), which the L2 serves again;
    ``keep`` (a mask over the records): of those records alone, the others' lines left out of
    the windows. The L1 is the SM's unified array less what global lines never get
    (:data:`~gpuadvise.model.l1.L1_UNUSED_BYTES`; the shared memory the launch allocates is not
    known here: none, which counts fewer misses); the window is the SM's, its
    resident warps over each CTA's traced ones; a CTA's first load of a sector it stored in
    full (:func:`own_stored_lanes`) has its window from that store. Zeros without the device's
    SM count. Once per view and device (with ``keep``: per mask, the last mask's kept)."""
    n = len(view.records)
    if not device.sm_count or not device.smem_per_sm or not n:
        return np.zeros(n)
    kept = None if keep is None else _kept(view, keep)
    per_device = _L1_MISSES.setdefault(view, {}) if kept is None else kept.l1
    cache: dict[Any, np.ndarray] | None = per_device
    try:
        got = per_device.get(device)
    except TypeError:  # a device of unhashable fields
        cache = None
    else:
        if got is not None:
            return got
    sub = None if kept is None else kept.lanes
    c = _costs(view)
    lanes, lb = view.lanes, view.lane_buffer
    recs = view.records
    side = _record_side(view)
    streaming = view.inst_streaming[recs["inst"].astype(np.int64)]
    loads = (c.kind == int(Kind.LOAD)) & ~streaming
    if keep is not None:
        loads &= keep
    out = np.zeros(n)
    lane_load = (_on(lb, sub) >= 0) & loads[_on(lanes.rec, sub)]
    idx = np.flatnonzero(lane_load)
    if not len(idx):
        return out
    if sub is not None:
        idx = sub[idx]
    rec_lines = np.where(loads, c.lines, 0).astype(np.float64)
    n_ctas = max(len(view.ctas), 1)
    # per CTA: its distinct lines, each weighed as its first read (no window holds more); from
    # the L2 set's distinct sectors when its lanes are these (no streaming load, no load of a
    # sector its CTA stored: most kernels), else by a pass over the lanes
    shared = _L2_KEYS.get(view) if kept is None else kept.l2_keys
    first = None if shared is None else shared.line_firsts(idx)
    if first is None:
        # (the CTA and buffer columns gathered in the view's int32, widened as _packed packs
        # them; the key this pass's own, sorted in place: issue 31's peak)
        lkey = _packed([lanes.cta[idx], lb[idx], lanes.off[idx] // L1_LINE_BYTES])
        _, first = first_by_runs(lkey, overwrite=True)
        del lkey  # lane-sized: not held through the windows below (issue 31's peak)
    at = idx[first]
    del first
    group_lines = np.bincount(
        lanes.cta[at], weights=view.rec_weight[lanes.rec[at]], minlength=n_ctas
    )
    del at
    # the stores that left a sector in the L1 for the CTA's first load of it: that load's window
    # starts at them (they add no lines to any window: rec_lines 0)
    idx = np.flatnonzero(lane_load | (_own_stored(view, keep) & ~lane_load))
    if sub is not None:
        idx = sub[idx]
    # the (buffer, sector) key, dense: in the order of (buffer << 40) | sector, and narrow
    # enough for distinct_rows and capacity_misses to sort it packed with the record
    sec = lanes.off[idx] // SECTOR
    span = int(sec.max()) + 1
    # (made in place: no lane-sized temporaries; in the buffers' int32 where every key fits, the
    # same integers: the records' and keys' pairs held through the capacity model's peak at half
    # the bytes, issue 31)
    skey = lb[idx]
    lo = int(skey.min()) * span + int(sec.min())
    hi = int(skey.max()) * span + span - 1
    if skey.dtype != np.int32 or lo < -(2**31) or hi >= 2**31:
        skey = skey.astype(np.int64)
    skey *= skey.dtype.type(span)
    skey += sec
    del sec
    rec = lanes.rec[idx]
    del idx, lane_load  # (not read below: not held through the pairs' sort, issue 31's peak)
    # one access a record and sector (the lanes come by record: no sort where each record's
    # lanes are in address order)
    if side.starts is not None:
        # (the lanes' record and key freed once their runs' first are taken: the pairs' sort
        # of a strided walk makes a matrix of up to four times their keys)
        head = run_heads(rec, skey)
        r, k = rec[head], skey[head]
        del head, rec, skey
        acc_rec, acc_key = _pairs_of_runs(r, k, wide=False)
        del r, k
    else:
        pair = distinct_rows([rec, skey])
        del rec, skey
        acc_rec, acc_key = pair[0], pair[1]
        del pair
    # the SM's resident warps over each CTA's traced warps
    w = -(-math.prod(view.block) // WARP)
    per_sm = min(device.blocks_per_sm, device.max_warps_per_sm // max(w, 1))
    if view.work is not None and view.work.ctas_per_sm > 0:
        per_sm = min(per_sm, view.work.ctas_per_sm)
    per_sm = max(min(per_sm, -(-view.total_ctas // device.sm_count)), 1)
    concurrency = per_sm * w / np.maximum(side.traced, 1)
    capacity = (device.smem_per_sm + UNIFIED_EXTRA_BYTES - L1_UNUSED_BYTES) / L1_LINE_BYTES
    # (the shares alone: no access-sized windows, which are not read here; issue 31's peak)
    miss = capacity_miss_shares(
        side.group, rec_lines, view.rec_weight, acc_rec, acc_key, capacity, concurrency,
        group_lines,
    )  # fmt: skip
    # (the product made in place, in the same order: ``weight * miss * load``)
    weights = view.rec_weight[acc_rec]
    weights *= miss
    del miss
    weights *= loads[acc_rec]
    out = np.bincount(acc_rec, weights=weights, minlength=n).astype(np.float64)
    if cache is not None:
        cache[device] = out
    return out


def _store_split(
    sectors: np.ndarray, nbytes: np.ndarray, lines: np.ndarray, weight: np.ndarray
) -> tuple[float, ...]:
    """(full, partial, scattered) store sectors of some store records (each counted ``weight``
    times): full when the record fills its sectors; scattered when each of its (8 or more)
    sectors lies in a line of its own."""
    full = nbytes >= sectors * SECTOR
    scattered = ~full & (lines >= sectors) & (sectors >= 8)
    partial = ~full & ~scattered
    ws = sectors * weight
    return (
        float(ws[full].sum()),
        float(ws[partial].sum()),
        float(ws[scattered].sum()),
    )


def _index32(a: np.ndarray, bound: int) -> np.ndarray:
    """``a`` (indices or key numbers below ``bound``) in int32 where ``bound`` fits, else as
    it is (issue 31: a view's sector sets hold one or two of these a lane)."""
    return a.astype(np.int32) if bound <= np.iinfo(np.int32).max else a


def _nonzero_index32(mask: np.ndarray, sub: np.ndarray | None, bound: int) -> np.ndarray:
    """:func:`_index32` of the positions where ``mask`` is true (``sub`` of them, where
    given): without ``sub``, found a chunk of :data:`_KEY_CHUNK` at a time into the narrow
    array (issue 31: no int64 array of them beside it at a view's traffic's peak). The same
    indices, ascending."""
    # (the type _index32 gives such indices: the int64 path where it keeps them wide)
    if sub is not None or _index32(np.zeros(0, np.intp), bound).dtype != np.int32:
        at = np.flatnonzero(mask)
        return _index32(at if sub is None else sub[at], bound)
    out = np.empty(int(np.count_nonzero(mask)), np.int32)
    k = 0
    for i in range(0, len(mask), _KEY_CHUNK):
        got = np.flatnonzero(mask[i : i + _KEY_CHUNK])
        got += i
        out[k : k + len(got)] = got
        k += len(got)
    return out


def _at(weight: np.ndarray | None, sel: np.ndarray) -> np.ndarray | None:
    return None if weight is None else weight[sel]


def _span(outer: np.ndarray, cols: list[np.ndarray]) -> int | None:
    """The span of :func:`_packed`'s key of ``cols`` when its key of ``[outer, *cols]`` is
    mixed-radix (no rank of the rows: the spans' product below 2**62): that key is then, modulo
    the span, ``cols``' own; None otherwise (or without rows)."""
    if not len(outer):
        return None
    inner = 1
    for c in cols:
        inner *= int(c.max()) + 1
    return inner if inner * (int(outer.max()) + 1) < 2**62 else None


def _coarser(
    uniq: np.ndarray, first: np.ndarray | None, group: np.ndarray, span: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`~gpuadvise.arrays.distinct_inverse` of the keys ``key % span`` from that of
    ``key`` (``uniq``, ``first`` or None, ``group``): the distinct coarser keys of the (fewer)
    distinct keys, each lane's through its key's, and each coarser key's first lane (the least
    of its keys' first lanes)."""
    values, inner = distinct_inverse(uniq % np.int64(span))
    if first is None:
        return values, None, inner[group]
    least = np.full(len(values), np.iinfo(np.intp).max, dtype=np.intp)
    np.minimum.at(least, inner, first)
    return values, least, inner[group]


def _packed(cols: list[np.ndarray]) -> np.ndarray:
    """Non-negative integer columns as one int64 key in their lexicographic order (mixed radix,
    each column's span its largest value + 1): the order of the shifted keys it replaces,
    ``(a << 50) | (b << 40) | c``, in as few bits as the values need, so that
    :func:`gpuadvise.arrays.distinct_inverse` sorts it packed with the positions."""
    key: np.ndarray | None = None
    total = 1
    for c in cols:
        span = int(c.max()) + 1 if len(c) else 1
        total *= span
        if total >= 2**62:  # too wide: each row's rank in the columns' order
            order = np.lexsort(cols[::-1])
            rows = np.stack([c[order] for c in cols])
            start = np.ones(len(order), bool)
            start[1:] = (rows[:, 1:] != rows[:, :-1]).any(axis=0)
            key = np.empty(len(order), np.int64)
            key[order] = np.cumsum(start) - 1
            return key
        if key is None:  # the first column is the key so far (0 * span + c)
            key = np.array(c, np.int64)
            continue
        key *= np.int64(span)
        key += c
    return np.zeros(len(cols[0]), np.int64) if key is None else key


def _used_key(lb: np.ndarray, off: np.ndarray, at: np.ndarray) -> np.ndarray:
    """:func:`_packed`'s (buffer, offset) key of the lanes ``at`` (``lb``, ``off``: per lane of
    the view), made a chunk of lanes at a time in the key itself (issue 31's peak: the changed
    records' lanes are most of a view's in a layout fix; no lane-sized gather beside the key),
    where the key fits (else :func:`_packed` of the two gathers)."""
    return _packed_at([lb, off], at)


def _packed_at(cols: list[np.ndarray], at: np.ndarray, last_div: int = 1) -> np.ndarray:
    """:func:`_packed` of the columns ``cols`` (per lane of the view, non-negative integers)
    gathered at the lanes ``at``, the last one floor-divided by ``last_div``: made a chunk of
    lanes at a time in the key itself (issue 31's peak: no lane-sized gather of a column, nor
    its int64 copy, beside the key), the same spans and arithmetic as :func:`_packed`, where the
    key fits (else :func:`_packed` of the gathers)."""
    return _packed_at_spans(cols, at, last_div)[0]


def _packed_at_spans(
    cols: list[np.ndarray], at: np.ndarray, last_div: int = 1, spans: list[int] | None = None
) -> tuple[np.ndarray, list[int]]:
    """:func:`_packed_at`'s key and each gathered column's span (its largest value + 1; 0
    without lanes). ``spans``: those spans, found by an earlier call on the same columns and
    lanes (no pass to find them again)."""
    n = len(at)

    def part_of(c: np.ndarray, a: np.ndarray, last: bool) -> np.ndarray:
        return c[a] // last_div if last and last_div != 1 else c[a]

    if spans is not None:
        spans = list(spans)
    else:
        spans = [0] * len(cols)  # each column's largest value + 1, as _packed finds them
        for i in range(0, n, _KEY_CHUNK):
            a = at[i : i + _KEY_CHUNK]
            for j, c in enumerate(cols):
                spans[j] = max(spans[j], int(part_of(c, a, j == len(cols) - 1).max()) + 1)
    total = 1
    for span in spans:
        total *= span
        if total >= 2**62:
            break
    if not n or total >= 2**62:
        return _packed([part_of(c, at, j == len(cols) - 1) for j, c in enumerate(cols)]), spans
    key = np.empty(n, np.int64)
    for i in range(0, n, _KEY_CHUNK):
        a = at[i : i + _KEY_CHUNK]
        part = key[i : i + _KEY_CHUNK]
        for j, c in enumerate(cols):
            got = part_of(c, a, j == len(cols) - 1)
            if j == 0:
                part[...] = got
            else:
                part *= np.int64(spans[j])
                part += got
    return key, spans


def _used_bytes(
    lb: np.ndarray,
    off: np.ndarray,
    width: np.ndarray,
    at: np.ndarray,
    weight: np.ndarray | None,
) -> float:
    """Bytes of the distinct (buffer, offset) accesses of the lanes ``at`` (``lb``, ``off``,
    ``width``: per lane of the view), each its width (times the weight of its first lane, when
    given: per lane of ``at``)."""
    # (the key a temporary of this call alone: sorted in place, no copy; issue 31's peak)
    _, first = first_by_runs(_used_key(lb, off, at), overwrite=True)
    w = width[at[first]]
    if weight is None:
        return float(w.sum())
    return float((w * weight[first]).sum())


def _used_bytes_per_cta(
    cta: np.ndarray,
    lb: np.ndarray,
    off: np.ndarray,
    width: np.ndarray,
    at: np.ndarray,
    weight: np.ndarray | None,
) -> np.ndarray:
    """:func:`_used_bytes` of each CTA's accesses (``cta``: dense indices below 2**13), in one
    pass: the distinct (CTA, buffer, offset), each its width, summed per CTA."""
    return _used_bytes_by_cta(cta, lb, off, width, at, weight, whole=False)[0]


def _used_bytes_by_cta(
    cta: np.ndarray,
    lb: np.ndarray,
    off: np.ndarray,
    width: np.ndarray,
    at: np.ndarray,
    weight: np.ndarray | None,
    whole: bool = True,
) -> tuple[np.ndarray, float]:
    """:func:`_used_bytes_per_cta` and, with ``whole``, :func:`_used_bytes` of the same lanes
    (else 0.0): the distinct (buffer, offset) over all the CTAs are those of the distinct
    (buffer, offset, CTA), each one's first lane the least of its CTAs' first lanes. The key
    is the address major and the CTA minor, so one sort gives both: each address's CTAs are
    one run of the sorted keys, and each CTA's addresses come in (buffer, offset) order, so
    ``np.bincount`` adds each CTA's widths in the order a (CTA, address) key gave them (the
    same sums; issue 31: a second sort of the distinct keys by address was GA301's on
    AoSKernel). The key is made in place (one lane-sized array beside the inner key, not
    five)."""
    if not len(at):
        return np.zeros(0), 0.0
    key = _used_key(lb, off, at)
    c = cta[at]  # (added to the int64 key as it is: no int64 copy)
    cspan = np.int64(int(c.max()) + 1)
    key *= cspan
    key += c
    del c
    uk, first = first_by_runs(key, overwrite=True)  # (its keys sorted in ``key`` itself)
    del key
    w = width[at[first]] if weight is None else width[at[first]] * weight[first]
    per_cta = np.bincount(uk % cspan, weights=w)
    if not whole:
        return per_cta, 0.0
    del w
    uk //= cspan  # the address (the key's own copy: in place)
    least = np.minimum.reduceat(first, np.flatnonzero(run_heads(uk)))
    del first, uk
    if weight is None:
        return per_cta, float(width[at[least]].sum())
    return per_cta, float((width[at[least]] * weight[least]).sum())


def resident_warps(device: DeviceSpec, view: TraceView) -> float:
    """Warps on the device at once: by the kernel's occupancy when the emulator knew it (its
    registers and shared memory), else by the warp and CTA limits (at most this many). The
    :class:`Traffic`'s ``resident_warps`` of every :func:`view_traffic` of ``view``: read here
    where nothing else of the traffic is needed (no pass over the lanes)."""
    threads = math.prod(view.block)
    w = -(-threads // WARP)
    if not (device.sm_count and w):
        return 0.0
    per_sm = min(device.blocks_per_sm, device.max_warps_per_sm // w)
    if view.work is not None and view.work.ctas_per_sm > 0:
        per_sm = min(per_sm, view.work.ctas_per_sm)
    return float(min(view.total_ctas, per_sm * device.sm_count) * w)


_PLAIN: weakref.WeakKeyDictionary[TraceView, dict[DeviceSpec, Traffic]] = (
    weakref.WeakKeyDictionary()
)


def view_traffic(
    device: DeviceSpec,
    view: TraceView,
    changed: np.ndarray | None = None,
    only: np.ndarray | None = None,
) -> Traffic:
    """The launch's :class:`Traffic` from the sampled CTAs, scaled to the launch; with
    ``changed`` (record indices), as if those records moved only the bytes they use: their
    sectors brought to the ideal, whole sectors stored, the distinct bytes they use from DRAM.
    With ``only`` (record indices), the traffic of those records alone (what a per-line proxy
    kernel that reproduces them moves). Without either, made once per view and device (every
    estimate's "before")."""
    if (changed is None or not len(changed)) and only is None:
        try:
            hash(device)
        except TypeError:  # a device of unhashable fields: made each time
            return _view_traffic(device, view, None, None)
        plain = _PLAIN.setdefault(view, {})
        got = plain.get(device)
        if got is None:
            got = plain[device] = _view_traffic(device, view, None, None)
        return got
    return _view_traffic(device, view, changed, only)


def launch_traffic_alone(device: DeviceSpec, view: TraceView) -> Traffic:
    """:func:`view_traffic` of the launch (kept per view and device), without keeping the
    lane-sized pieces it made on the way where it made them: the sector sets and the L2 set's
    keys (~10 bytes a loaded lane; 88 MB on softMax's 6 M lanes), which only a traffic of
    changed or kept records reads again (it makes them again then). For a caller that wants
    the launch's traffic alone ahead of the rules (:func:`gpuadvise.rules.evaluate.
    shared_pieces`, before the rules' fork): the pieces would stay in both processes through
    every rule's peak."""
    had_sets, had_keys = view in _SETS, view in _L2_KEYS
    got = view_traffic(device, view)
    if not had_sets:
        _SETS.pop(view, None)
    if not had_keys:
        _L2_KEYS.pop(view, None)
    return got


def _view_traffic(
    device: DeviceSpec,
    view: TraceView,
    changed: np.ndarray | None,
    only: np.ndarray | None,
) -> Traffic:
    c = _costs(view)
    n = len(view.records)
    sel = np.zeros(n, bool)
    if changed is not None and len(changed):
        sel[np.asarray(changed, np.int64)] = True
    keep = np.ones(n, bool)
    if only is not None:
        keep[:] = False
        keep[np.asarray(only, np.int64)] = True
    sel &= keep
    ideal = view.rec_ideal.astype(np.int64)
    load = (c.kind == int(Kind.LOAD)) & keep
    store = (c.kind != int(Kind.LOAD)) & keep
    # L1 data path: max(requests, sectors / 4, lines) per record (a line's records together in
    # view.l1_total; per record here, so that changed records can be swapped for their ideal:
    # its sectors in as few lines as they fill)
    sect = np.where(sel, ideal, c.sectors)
    lines = np.where(sel, (ideal + 3) // 4, c.lines)
    rw = view.rec_weight
    l1 = float((record_l1_cycles(sect, lines) * rw)[keep].sum())
    # L2 loads: the distinct sectors each CTA's loads touch (L1 serves the rest)
    lanes, lb = view.lanes, view.lane_buffer
    sets = _sector_sets(view, None if only is None else keep)
    l2_load = float(sets["l2"].count)
    missing, in_flight_waits = _MISSING[view] if only is None else (0.0, 0.0)
    # the changed records' lanes in a buffer (indices, ascending): from the changed records'
    # ranges of lanes, not a pass over every lane
    sel_lanes = np.zeros(0, np.int64)
    load_used = load_alone = 0.0
    if sel.any():
        sel_lanes = _record_lanes(view, sel, narrow=True)
        sel_lanes = sel_lanes[(lb[sel_lanes] >= 0) & sel[lanes.rec[sel_lanes]]]
    sel_rec = lanes.rec[sel_lanes]
    sel_w = rw[sel_rec] if view.iterations_sampled else None  # per lane, when not all 1
    if len(sel_lanes):
        # the changed loads' sectors no other load touches give way to the bytes they use
        # (the lanes picked once for the L2 set and the DRAM load set, where they share their
        # lanes array, and freed before the used bytes' lane-sized keys)
        picked = sets["l2"].picked(sel_lanes)
        alone = sets["l2"].alone(sel_lanes, picked)
        m = load[sel_rec]
        if m.any():  # (the DRAM side's below: the same lanes)
            shared = picked if sets["load"].lanes is sets["l2"].lanes else None
            load_alone = sets["load"].alone(sel_lanes, shared)
        del picked
        # (every changed lane a load's, a layout fix of a line's loads: the lanes themselves,
        # not a lane-sized copy of them; issue 31's peak)
        every = bool(m.all())
        at = sel_lanes if every else sel_lanes[m]
        # (and the loads' used bytes over all the CTAs, for the DRAM side below)
        per_cta, load_used = _used_bytes_by_cta(
            lanes.cta, lb, lanes.off, lanes.width, at, sel_w if every else _at(sel_w, m)
        )
        used = float(np.sum(np.ceil(per_cta / SECTOR)))
        l2_load = min(l2_load, l2_load - alone + used)
    # re-reads whose lines the L1 gave up in between (its capacity): the L2 serves them again,
    # but for the changed records' (they move only the bytes they use, each once)
    refetch = l1_refetch(device, view, None if only is None else keep)
    refetched = float(refetch[keep & ~sel].sum())
    l2_load += refetched
    unchanged = store & ~sel
    full, partial, scattered = _store_split(
        c.sectors[unchanged], c.nbytes[unchanged], c.lines[unchanged], rw[unchanged]
    )
    full += float((ideal * rw)[store & sel].sum())
    # DRAM: the distinct sectors loaded (filled) plus the distinct sectors stored (written back)
    dram_sectors = dram_load = 0.0
    for part, dset in ((load, sets["load"]), (store, sets["store"])):
        n_part = dset.count
        m = part[sel_rec]
        if m.any():
            at = sel_lanes[m]
            if part is load:  # (m: the same lanes as the L2 side's)
                used = load_used
            else:
                used = _used_bytes(lb, lanes.off, lanes.width, at, _at(sel_w, m))
            gone = load_alone if part is load else dset.alone(sel_lanes)
            n_part = min(n_part, n_part - gone + math.ceil(used / SECTOR))
        dram_sectors += n_part
        if part is load:
            dram_load = n_part
    n_load = float(rw[load].sum())
    if only is None:
        warps = max(view.warps(), 1)
    else:
        kept = view.records[keep]
        warps = max(len(distinct((kept["cta"].astype(np.int64) << 16) | kept["warp"])), 1)
    # what a warp's load keeps in flight: the sectors of the kernel's own requests, before any
    # change. A layout fix moves fewer sectors per request but keeps as many requests in
    # flight; with the ideal sectors here, a coalescing fix whose DRAM bytes stay (the rows
    # come from L1/L2 either way) looked latency-bound after: an upper bound below 1
    # (llm.c attention_query_key_kernel1, 0.39x)
    per_req = float(np.average(c.sectors[load], weights=rw[load])) if n_load else 0.0
    s = view.scale
    # what the CTAs execute (the execution model's input): the kernel's, not a proxy's (a
    # per-line proxy, ``only``, runs its records and a fold: the memory roofline alone)
    work = view.work if only is None else None
    in_flight = per_req * SECTOR * min(_loads_per_wait(work, n_load / warps), n_load / warps)
    shared_requests = shared_wavefronts = 0.0
    if work is not None:
        shared_requests = work.shared_requests * work.ctas
        shared_wavefronts = work.shared_wavefronts * work.ctas
    return Traffic(
        l1_cycles=l1 * s,
        shared_wavefronts=shared_wavefronts,
        l2_load_sectors=l2_load * s,
        l2_store_sectors=full * s,
        l2_partial_store_sectors=partial * s,
        l2_scattered_store_sectors=scattered * s,
        dram_bytes=dram_sectors * SECTOR * s,
        instructions=float(rw[keep].sum()) * s,
        resident_warps=resident_warps(device, view),
        bytes_in_flight_per_warp=in_flight,
        work=work,
        load_requests=n_load * s,
        dram_load_bytes=dram_load * SECTOR * s,
        shared_requests=shared_requests,
        l2_missing_load_requests=min(missing, l2_load) * s,
        l1_pending_load_requests=in_flight_waits * s,
        l2_refetch_load_sectors=refetched * s,
    )


def repeated_requests(view: TraceView) -> tuple[float, float]:
    """(repeated, partitioned) global requests per sampled CTA: a request is repeated when every
    byte its lanes touch is touched by every sampled CTA (work each CTA does again, such as a
    table staged in shared memory), partitioned otherwise. (0, all) with fewer than two sampled
    CTAs (repetition cannot be told)."""
    lanes, lb = view.lanes, view.lane_buffer
    n_rec = len(view.records)
    ctas = distinct(lanes.cta)
    total = float(view.rec_weight.sum())
    if n_rec == 0 or len(ctas) < 2:
        return 0.0, total / max(len(ctas), 1)
    inside = lb >= 0
    key = (lb.astype(np.int64) << 40) | lanes.off
    pairs = distinct_rows([key[inside], lanes.cta[inside].astype(np.int64)])
    keys, counts = np.unique(pairs[0], return_counts=True)
    everywhere = member(key, keys[counts >= len(ctas)]) & inside
    not_repeated = np.bincount(lanes.rec[~everywhere], minlength=n_rec) > 0
    has_lanes = np.bincount(lanes.rec, minlength=n_rec) > 0
    repeated = float(view.rec_weight[has_lanes & ~not_repeated].sum())
    return repeated / len(ctas), (total - repeated) / len(ctas)


def buffer_records(view: TraceView, buffer: str) -> np.ndarray:
    """The records of every access to ``buffer`` (a layout change moves them all)."""
    b = view.buffer_names.index(buffer)
    return distinct(view.lanes.rec[view.lane_buffer == b])


def l1_roofline_estimate(
    device: DeviceSpec,
    view: TraceView,
    saved_cycles: float,
    what: str,
    records: np.ndarray | None = None,
    in_flight_after: float | None = None,
    proxy_records: np.ndarray | None = None,
    warps_factor: float = 1.0,
    extra_before_cycles: float = 0.0,
    before_l2_extra: float = 0.0,
) -> Estimate:
    """The layout rules' estimate on the launch roofline: the traced launch against the same
    launch with ``records`` (the finding's accesses) moving only the bytes they use, or, without
    ``records``, with ``saved_cycles`` (sampled CTAs) less on the L1 data path. The estimate is
    the upper bound; ``inputs["point_speedup"]`` the point value, with the term that bounds the
    launch before and after. Without the device's clock, bandwidth or rates, the ratio of L1
    cycles. ``in_flight_after``: the bytes each warp keeps in flight after the change, when the
    change also reshapes the launch (GA306's tile: four coalesced rows per warp).

    ``proxy_records``: the records a per-line proxy reproduces (the finding's line). The proxy
    measures the change at that line alone, so its own estimate, the same roofline over those
    records alone before and after, goes in ``inputs["proxy_point_speedup"]`` and
    ``inputs["proxy_bound_speedup"]`` (the like-for-like comparison for a proxy measurement);
    the whole-kernel estimate stays the estimate. ``before_l2_extra``: L2 load sectors (sampled
    CTAs) the ``records`` refetch before the change because the rows the resident warps walk
    do not fit the L1 (:func:`gpuadvise.rules.walks.row_refetch`); the change reads each once.

    ``extra_before_cycles`` (sampled CTAs): L1 data-path cycles the finding's records take
    before the change beyond ``max(1, sectors / 4)`` each (GA305: a request's 128-byte lines,
    one wavefront each), added to the kernel's and the proxy's before sides."""
    total = view.l1_total() + extra_before_cycles
    saved = min(saved_cycles, total * 0.999)
    inputs: dict[str, Any] = {
        "l1_cycles_sampled": total,
        "saved_cycles_sampled": saved,
        "sampled_ctas": len(view.ctas),
        "scale": view.scale,
    }
    rates = memory_rates(device)
    if rates is None or total <= 0:
        ratio = work_ratio(total, saved) if total > 0 else 1.0
        return Estimate(
            round(ratio, 3),
            "upper-bound",
            f"L1 data-path cycles, max(requests, sectors / 4) per line: {total:.0f} before, "
            f"{total - saved:.0f} after {what} (no clock, bandwidth or memory rates for "
            f"{device.name}: L2, DRAM and latency ignored)",
            inputs,
        )
    before = view_traffic(device, view)
    if extra_before_cycles:
        before = replace(before, l1_cycles=before.l1_cycles + extra_before_cycles * view.scale)
    if records is None:
        after = replace(before, l1_cycles=max(before.l1_cycles - saved * view.scale, 0.0))
    else:
        after = view_traffic(device, view, records)
        # what the launch model counts already of the records' refetches (its L1 capacity)
        before_l2_extra -= float(l1_refetch(device, view)[np.asarray(records, np.int64)].sum())
        if before_l2_extra > 0:
            extra = before_l2_extra * view.scale
            before = replace(before, l2_load_sectors=before.l2_load_sectors + extra)
    if in_flight_after is not None:
        after = replace(after, bytes_in_flight_per_warp=in_flight_after)
    if warps_factor != 1.0 and device.sm_count:
        # the fix launches more warps (a warp per row instead of a thread): as many more in
        # flight as the device holds
        cap = float(device.sm_count * device.max_warps_per_sm)
        after = replace(after, resident_warps=min(after.resident_warps * warps_factor, cap))
        inputs["resident_warps_after"] = after.resident_warps
        if after.work is not None:
            # the same instructions over that many more warps (the CTAs as they are, that
            # many more): each warp's share of a row, and its critical path, that much shorter
            w = after.work
            after = replace(
                after,
                work=replace(
                    w.per_cta_scaled(1.0 / warps_factor),
                    ctas=int(math.ceil(w.ctas * warps_factor)),
                ),
            )
    est = launch_estimate(before, after, device, rates)
    if est is None:  # pragma: no cover - memory_rates needs the same fields
        return Estimate(round(work_ratio(total, saved), 3), "upper-bound", what, inputs)
    inputs.update(
        _term_inputs(est),
        dram_bytes_before=before.dram_bytes,
        dram_bytes_after=after.dram_bytes,
    )
    method = est.method(what, rates)
    if proxy_records is not None and len(proxy_records):
        pb = view_traffic(device, view, only=proxy_records)
        if extra_before_cycles:
            pb = replace(pb, l1_cycles=pb.l1_cycles + extra_before_cycles * view.scale)
        if records is None:
            pa = replace(pb, l1_cycles=max(pb.l1_cycles - saved * view.scale, 0.0))
        else:
            changed = np.intersect1d(np.asarray(records, np.int64), proxy_records)
            pa = view_traffic(device, view, changed, only=proxy_records)
        pe = launch_estimate(_with_out_word(pb, view), _with_out_word(pa, view), device, rates)
        if pe is not None:
            inputs.update(
                proxy_point_speedup=round(pe.point, 3),
                proxy_bound_speedup=round(pe.bound, 3),
                proxy_bound_by_before=pe.before.bound_by,
                proxy_bound_by_after=pe.after.bound_by,
            )
            method += (
                f". The per-line proxy (this line's {len(proxy_records)} sampled requests "
                "alone and the proxy's one word per thread to `out`, the same roofline; the "
                f"proxy's fold arithmetic left out): point {pe.point:.2f}x, bound {pe.bound:.2f}x, "
                f"bound by {pe.before.bound_by} before and {pe.after.bound_by} after"
            )
    return Estimate(round(est.bound, 3), "upper-bound", method, inputs)


PROXY_OUT_BYTES = 4
"""Each thread of a layout proxy writes its fold, one 32-bit word, to ``out`` (both kernels)."""


def _with_out_word(t: Traffic, view: TraceView) -> Traffic:
    """``t`` and a proxy's own store: one coalesced word per thread of the launch to ``out``
    (full sectors, written back to DRAM), one store instruction per warp."""
    threads = float(view.total_ctas * math.prod(view.block))
    nbytes = threads * PROXY_OUT_BYTES
    return replace(
        t,
        l1_cycles=t.l1_cycles + threads / WARP,
        l2_store_sectors=t.l2_store_sectors + nbytes / SECTOR,
        dram_bytes=t.dram_bytes + nbytes,
        instructions=t.instructions + threads / WARP,
    )


def _term_inputs(est: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "point_speedup": round(est.point, 3),
        **({"peak_speedup": round(est.peak, 3)} if est.peak is not None else {}),
        "bound_by_before": est.before.bound_by,
        "bound_by_after": est.after.bound_by,
        "floor_us": est.before.floor_s * 1e6,
        **{f"before_{t}_us": est.before.term(t) * 1e6 for t in ALL_TERMS},
        **{f"after_{t}_us": est.after.term(t) * 1e6 for t in ALL_TERMS},
    }


def launch_change_estimate(
    device: DeviceSpec, before: Traffic, after: Traffic, what: str, inputs: dict[str, Any]
) -> Estimate | None:
    """A change that leaves a launch's DRAM traffic alone (shared wavefronts, L1 requests,
    instructions) on the launch roofline: the upper bound with the point value and the term
    that bounds each side in ``inputs`` (updated in place). With the DRAM bytes unchanged, the
    bound compares both sides at peak bandwidth (the change cannot beat a DRAM floor it shares
    with the kernel); a change of the DRAM bytes takes :class:`LaunchEstimate`'s bound. None
    without the device's clock, bandwidth or rates."""
    rates = memory_rates(device)
    if rates is None:
        return None
    after = _instructions_into_work(before, after)
    est = launch_estimate(before, after, device, rates)
    if est is None:
        return None
    bound = est.bound
    if before.dram_bytes == after.dram_bytes:
        b = launch_times(before, device, rates, peak_dram=True)
        a = launch_times(after, device, rates, peak_dram=True)
        bs = launch_times(before, device, rates)
        as_ = launch_times(after, device, rates)
        if a is not None and b is not None:
            bound = max(ceiling_s(b) / a.time_s, est.point)
        if bs is not None and as_ is not None:
            # both sides at sustained rates too, the before side with the model's error: where
            # the point's before side (the p-norm of its latency and throughput sides) is longer
            # than the peak one (their maximum), the margin goes on it as well (PolyBench atax's
            # 8 copies, GA105: the L1's 32-line loads and the chain added in part, 0.70 ms on
            # the model for 0.72 measured; the one warp left, 0.48 for 0.455: 1.59x measured,
            # 1.46x without the margin)
            bound = max(bound, ceiling_s(bs) / as_.time_s)
    inputs.update(_term_inputs(est))
    method = est.method(what, rates)
    if before.dram_bytes == after.dram_bytes:
        method = method.replace(
            f"bound {est.bound:.2f}x (before with {BOUND_MARGIN:.0%} on its work, the model's "
            "error; after at peak DRAM bandwidth, the L2's best partial-store rate,",
            f"bound {max(bound, 1.0):.2f}x (both at peak DRAM bandwidth and the L2's best "
            "partial-store rate, the DRAM bytes unchanged, or both at sustained rates, the "
            f"larger; before with {BOUND_MARGIN:.0%} on its work, the model's error; after with",
        )
    return Estimate(round(max(bound, 1.0), 3), "upper-bound", method, inputs)


def _instructions_into_work(before: Traffic, after: Traffic) -> Traffic:
    """``after`` with the warp instructions a rule saved (or added) by changing ``instructions``
    taken from its work (the execution model's issue and pipes come from the work): when the
    rule left the work as it was, the same number of warp instructions from every pipe in
    proportion."""
    w = after.work
    if w is None or w is not before.work or after.instructions == before.instructions:
        return after
    total = w.instructions * w.ctas
    if total <= 0:
        return after
    kept = max(0.0, 1.0 - (before.instructions - after.instructions) / total)
    return replace(after, work=replace(w, pipes={k: v * kept for k, v in w.pipes.items()}))


def issue_change_estimate(
    device: DeviceSpec, view: TraceView, kept: float, what: str, inputs: dict[str, Any]
) -> Estimate | None:
    """A change that issues ``kept`` (a fraction) of the kernel's instructions, its dependent
    chains and memory traffic unchanged (idle lanes packed into full warps), on the launch
    model: :func:`launch_change_estimate` of the traced launch against the same launch with
    every pipe's count scaled. ``kept`` is a share of the emulator's instructions: the double
    divisions' slow paths (``KernelWork.slow_paths``, counted apart from them) stay as they are.
    None without the kernel's work (the GPU tracer) or the device's rates."""
    before = view_traffic(device, view)
    if before.work is None:
        return None
    w = before.work
    slow = w.slow_paths
    pipes = {k: (v - slow.get(k, 0.0)) * kept + slow.get(k, 0.0) for k, v in w.pipes.items()}
    after = replace(before, work=replace(w, pipes=pipes))
    return launch_change_estimate(device, before, after, what, inputs)


def _float_slow_paths(w: KernelWork) -> KernelWork:
    """``w`` with its double divisions' slow-path trips (``slow_paths``: one MUFU.RCP64H each)
    made the float division's (:data:`~gpuadvise.ptx.slow_paths.FLOAT_SLOW_WORK`)."""
    from gpuadvise.ptx.slow_paths import FLOAT_SLOW_LINKS, FLOAT_SLOW_WORK, SLOW_WORK

    trips = w.slow_paths.get("mufu", 0.0) / dict(SLOW_WORK)["mufu"]
    plain = w.without_slow_paths()
    if trips <= 0:
        return plain
    pipes = dict(plain.pipes)
    for p, k in FLOAT_SLOW_WORK:
        pipes[p] = pipes.get(p, 0.0) + k * trips
    per_warp = trips / max(w.warps_per_cta, 1)
    chain = dict(plain.chain)
    unordered = None if plain.chain_unordered is None else dict(plain.chain_unordered)
    for c, k in FLOAT_SLOW_LINKS:
        chain[c] = chain.get(c, 0.0) + k * per_warp
        if unordered is not None:
            unordered[c] = unordered.get(c, 0.0) + k * per_warp
    return replace(
        plain,
        pipes=pipes,
        chain=chain,
        chain_unordered=unordered,
        critical_instructions=plain.critical_instructions
        + per_warp * sum(k for _, k in FLOAT_SLOW_WORK),
    )


def fp64_to_fp32_estimate(
    device: DeviceSpec,
    view: TraceView,
    conversions_per_fp64: float,
    what: str,
    inputs: dict[str, Any],
    ctas_per_sm: int = 0,
) -> Estimate | None:
    """The kernel's FP64 work done in FP32 (double promotions made float), on the launch model:
    every FP64 pipe instruction of the work moved to the FP32 pipe and every FP64 link of its
    critical path made an FP32 one, and ``conversions_per_fp64`` XU conversions (F2F) fewer per
    FP64 instruction (at most the work's XU count), on the pipes and as links of the critical
    path alike; the double divisions' slow paths (``KernelWork.slow_paths``: ptxas's, where the
    traced operands take them) made the float division's, which FCHK sends the same lanes to.
    ``ctas_per_sm`` (> 0): the float version's resident CTAs per SM (a double takes two
    registers: the float build may fit more CTAs; the bound then compares the launch at
    sustained rates with the float build at peak). None without the kernel's work."""
    before = view_traffic(device, view)
    if before.work is None or before.work.pipes.get("fp64", 0.0) <= 0:
        return None
    # the double divisions' slow paths (a zero numerator) are gone in float, where the same
    # lanes take the float division's (FCHK's) shorter one
    w = _float_slow_paths(before.work)
    pipes = dict(w.pipes)
    fp64 = pipes.pop("fp64", 0.0)
    pipes["fp32"] = pipes.get("fp32", 0.0) + fp64
    if "xu" in pipes:
        pipes["xu"] = max(pipes["xu"] - conversions_per_fp64 * fp64, 0.0)
    chain = dict(w.chain)
    links = chain.pop("fp64", 0.0)
    if links:
        chain["fp32"] = chain.get("fp32", 0.0) + links
        if "xu" in chain:
            chain["xu"] = max(chain["xu"] - conversions_per_fp64 * links, 0.0)
    work = replace(w, pipes=pipes, chain=chain)
    after = replace(before, work=work)
    if ctas_per_sm > w.ctas_per_sm > 0:
        warps = before.resident_warps * ctas_per_sm / w.ctas_per_sm
        cap = float(view.total_ctas * w.warps_per_cta)
        if device.sm_count:
            cap = min(cap, float(device.max_warps_per_sm * device.sm_count))
        after = replace(
            after, work=replace(work, ctas_per_sm=ctas_per_sm), resident_warps=min(warps, cap)
        )
    est = launch_change_estimate(device, before, after, what, inputs)
    if est is None or not ctas_per_sm > w.ctas_per_sm > 0:
        return est
    # more CTAs a round (fewer rounds, each CTA's critical path and turnaround paid fewer
    # times): at peak (no turnaround, full overlap) both sides are their largest throughput
    # term, which may be one the change leaves (Rodinia hotspot: the integer pipe, 1.08x, where
    # an H200 measured 1.18x for 6 -> 8 CTAs per SM, 3 -> 2 rounds); the bound is the launch as
    # it is at sustained rates (with the model's margin) against the float build at peak, where
    # that is not bound by memory (a DRAM-bound launch stays bound alike)
    rates = memory_rates(device)
    if rates is None:
        return est
    b = launch_times(before, device, rates)
    a = launch_times(after, device, rates, peak_dram=True)
    a_mem = launch_times(after, device, rates)
    if a is None or b is None or a_mem is None:
        return est
    if a_mem.floor_s + a_mem.memory_s >= a.time_s or a.time_s <= 0:
        return est  # bound by memory after: both at peak, as launch_change_estimate has it
    latency = ceiling_s(b) / a.time_s
    if latency <= (est.speedup or 0):
        return est
    return replace(
        est,
        speedup=round(latency, 3),
        method=f"{est.method}. The float build fits more CTAs a round (fewer rounds), which "
        f"both sides at peak do not see: the bound is the launch at sustained rates "
        f"(with {BOUND_MARGIN:.0%} on its work) against the float build at peak, not bound "
        f"by memory, {latency:.2f}x",
    )


def kernel_launch_times(device: DeviceSpec, view: TraceView) -> LaunchTimes | None:
    """The launch model's times of the traced launch (sustained rates); None without the
    device's clock, bandwidth or memory rates."""
    rates = memory_rates(device)
    if rates is None:
        return None
    return launch_times(view_traffic(device, view), device, rates)


def through_model(est: Estimate, times: LaunchTimes | None) -> Estimate:
    """A rule's estimate of the kernel's work made an estimate of the launch on the launch
    model (``times``: the traced launch's, :func:`kernel_launch_times`): the rule's speedup
    ``S`` applies to the launch's work, its floor and its CTA launches stay (the ``cta`` term
    and the first round's ramp: the block scheduler's, which no change of a CTA's code
    shortens; :meth:`~gpuadvise.model.roofline.LaunchTimes.shortened`), ``T / T(work / S)``;
    so does its point (``inputs["point_speedup"]``) when it has one. A change that launches
    1/k of the CTAs (``inputs[CTAS_DIVIDED_BY]``) shortens the launches too. An estimate made on
    the launch model already (:data:`MODEL`), one with no number, or no ``times`` (no trace,
    no clock): as it is; one whose ``inputs["outside_model"]`` says the work it saves is not in
    the model (register spills): as it is, its method saying why."""
    if est.speedup is None or est.inputs.get("model") == MODEL or times is None:
        return est
    outside = est.inputs.get("outside_model")
    if outside:
        # the rule's subject is work the launch model does not see (register spills: ptxas's,
        # not in the PTX the emulator runs): its time would be too short to weigh the rule by
        return replace(
            est,
            method=f"{est.method}. Not weighed on the launch model: {outside}",
            inputs={**est.inputs, "bound_by_before": times.bound_by, "launch_us": times.time_s
                    * 1e6, "floor_us": times.floor_s * 1e6},
        )  # fmt: skip
    floor, total = times.floor_s, times.time_s
    keep = not est.inputs.get(CTAS_DIVIDED_BY)

    def on_launch(speedup: float) -> float:
        if speedup <= 0 or times.work_s <= 0:
            return 1.0
        return total / times.shortened(speedup, keep).time_s

    capped = on_launch(est.speedup)
    after = times.shortened(max(est.speedup, 1e-9), keep)
    inputs: dict[str, Any] = {
        **est.inputs,
        "model": MODEL,
        "rule_speedup": est.speedup,
        "launch_us": total * 1e6,
        "floor_us": floor * 1e6,
        "bound_by_before": times.bound_by,
        "bound_by_after": after.bound_by,
    }
    point = est.inputs.get("point_speedup")
    if isinstance(point, int | float) and point > 0:
        inputs["point_speedup"] = round(on_launch(float(point)), 3)
    peak = est.inputs.get("peak_speedup")
    if isinstance(peak, int | float) and peak > 0:
        inputs["peak_speedup"] = round(on_launch(float(peak)), 3)
    elif est.kind == "point":
        inputs["point_speedup"] = round(capped, 3)
    launches = keep and after.time_s > times.shortened(max(est.speedup, 1e-9), False).time_s * 1.001
    kept = (
        f" and its CTA launches ({times.cta_s * 1e6:.2f} us at the block scheduler's rate, "
        f"{times.ramp_s * 1e6:.2f} us of them the first round's, after its first two)"
        if launches
        else ""
    )
    method = (
        f"{est.method}. On the launch model, the traced launch takes {total * 1e6:.2f} us "
        f"({times.describe()}; bound by {times.bound_by}), {floor * 1e6:.2f} us of it the "
        f"launch floor{kept}, which no change of the CTAs' code removes: {est.speedup:.2f}x "
        f"on the kernel's work is {capped:.2f}x on the launch"
    )
    return Estimate(round(capped, 3), est.kind, method, inputs)


_TIMES: weakref.WeakKeyDictionary[TraceView, dict[DeviceSpec, LaunchTimes | None]] = (
    weakref.WeakKeyDictionary()
)


def model_check(ctx: Any, est: Estimate) -> Estimate:
    """:func:`through_model` with the times of the context's traced launch (found once per
    trace view and device); the estimate as it is when the kernel was not traced or the device
    has no clock, bandwidth or memory rates. The run passes every rule's estimate through it
    (:func:`gpuadvise.rules.evaluate.finding_estimate`)."""
    if (
        est.speedup is None
        or est.inputs.get("model") == MODEL
        or est.inputs.get(FLOOR_NOT_APPLIED)
        or not ctx.has_model("trace")
    ):
        return est
    from gpuadvise.rules.context import ModelUnavailable

    try:
        view = ctx.trace_view
    except ModelUnavailable:
        return est
    device = ctx.device
    try:
        cached = _TIMES.setdefault(view, {})
        if device not in cached:
            cached[device] = kernel_launch_times(device, view)
        times = cached[device]
    except TypeError:  # a device of unhashable fields
        times = kernel_launch_times(device, view)
    return through_model(est, times)


def shared_wavefront_estimate(
    device: DeviceSpec, view: TraceView, wavefronts: float, removed: float, what: str,
    inputs: dict[str, Any],
) -> Estimate | None:  # fmt: skip
    """A change that removes ``removed`` of the launch's ``wavefronts`` shared-memory wavefronts
    (GA201's padding, GA207's warp reduction) on the launch model: the shared wavefronts share
    the L1/shared data path with the global accesses' L1 cycles; L2, DRAM, issue and latency are
    the launch's. None without a launch model for the trace or the device's rates."""
    from gpuadvise.rules.context import ModelUnavailable

    try:
        base = view_traffic(device, view)
    except ModelUnavailable:
        return None
    return launch_change_estimate(
        device,
        replace(base, shared_wavefronts=wavefronts),
        replace(base, shared_wavefronts=max(wavefronts - removed, 0.0)),
        what,
        inputs,
    )
