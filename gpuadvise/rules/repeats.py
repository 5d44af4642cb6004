"""What GA308 (global accumulation) and GA309 (redundant global loads) share: one thread's repeated
accesses of one global address in the trace view (:class:`~gpuadvise.trace.view.TraceView`).

- :func:`thread_keys`, :func:`later_repeats`, :func:`whole_records`: a thread's address as one
  key, every access of it but the first, and the warp-level requests all of whose lanes go;
- :func:`accumulations`: the store lines whose threads store one address again and again
  (GA308's finding; GA309 leaves the loads of those addresses to it);
- :func:`same_thread_reloads`: every global load of an address its thread loaded or stored
  before with no other thread's store to it in between (GA309's), with what came in between:
  the thread's own stores (which a compiler must assume may alias the address) and the bytes
  the CTA touched (whether the L1 still holds the line).

Pure numpy over the view: one stable sort of its lanes by address, one by (address, thread) and
one by thread.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.arrays import (
    count_distinct_sorting,
    distinct,
    distinct_first,
    distinct_inverse,
    distinct_rows,
    member,
    run_heads,
    sort_in_place,
    stable_argsort,
    stable_argsort_equal_major,
)
from gpuadvise.devices import DeviceSpec
from gpuadvise.model.l1 import UNIFIED_EXTRA_BYTES
from gpuadvise.model.occupancy import OccupancyResult
from gpuadvise.trace.access import Kind
from gpuadvise.trace.view import SECTOR, Lanes, TraceView

__all__ = [
    "MIN_ACCUMULATION_REPEATS",
    "addresses_and_threads",
    "Accumulated",
    "UNIFIED_EXTRA_BYTES",
    "accumulation_reloads",
    "l1_bytes_left",
    "reload_costs",
    "removable_records",
    "ThreadReloads",
    "accumulations",
    "forwarded_in_order",
    "distinct_thread_keys",
    "later_repeats",
    "repeated_loads",
    "same_thread_reloads",
    "thread_keys",
    "whole_records",
    "varying_repeats",
]

MIN_ACCUMULATION_REPEATS = 4.0
"""Stores of one address by one thread (on average over a line's addresses) from which GA308
reports an accumulation in global memory (its ``min_repeats`` option's default)."""


def thread_keys(lanes: Lanes) -> np.ndarray:
    """One int64 per lane for (CTA, thread, byte offset): a thread's address in one buffer."""
    cta = lanes.cta.astype(np.int64)
    tid = lanes.tid.astype(np.int64)
    return (cta << 42) ^ (tid << 32) ^ lanes.off.astype(np.int64)


def distinct_thread_keys(lanes: Lanes, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``distinct_first(keys)`` of ``keys = thread_keys(lanes)``: the distinct keys, sorted, and
    each one's first lane. Where the keys' range and their positions do not pack into one
    int64 (:func:`gpuadvise.arrays.distinct_first`'s fast path; the CTA alone takes the bits
    from 42 up), and the key's fields keep to their bits (a thread below 2**10, an offset below
    2**32: the keys' order is then (CTA, thread, offset)'s), by two stable sorts, by offset and
    then by thread, which pack (numpy's argsort of the keys, the fallback, is several times
    slower: issue 31); the same values and first lanes either way."""
    n = len(keys)
    if n >= 2:
        lo, hi = int(keys.min()), int(keys.max())
        packs = (hi - lo).bit_length() + max(int(n - 1).bit_length(), 1) <= 63
        cta, tid, off = lanes.cta, lanes.tid, lanes.off
        if (
            not packs
            and int(cta.min()) >= 0
            and int(cta.max()) < 1 << 21
            and int(tid.min()) >= 0
            and int(tid.max()) < 1 << 10
            and int(off.min()) >= 0
            and int(off.max()) < 1 << 32
        ):
            order = stable_argsort(off)
            thread = cta[order].astype(np.int64)
            thread <<= 10
            thread |= tid[order]
            order = order[stable_argsort(thread, overwrite=True)]
            del thread
            s = keys[order]
            head = np.empty(n, bool)
            head[0] = True
            np.not_equal(s[1:], s[:-1], out=head[1:])
            return s[head], order[head].astype(np.intp)
    return distinct_first(keys)


def addresses_and_threads(view: TraceView, lane: np.ndarray) -> tuple[int, int]:
    """The distinct thread addresses (:func:`thread_keys`) and the distinct threads of the
    view's lanes ``lane``: the threads marked in a flag for each thread of the sampled CTAs,
    not sorted (issue 31)."""
    lanes = view.lanes
    addresses = count_distinct_sorting(thread_keys(lanes.take(lane)))
    threads = int(np.prod(view.block))
    thread = lanes.cta[lane].astype(np.int64)
    thread *= threads
    thread += lanes.tid[lane]
    seen = np.zeros((int(lanes.cta.max()) + 1) * threads, bool)
    seen[thread] = True
    return addresses, int(np.count_nonzero(seen))


def later_repeats(keys: np.ndarray) -> np.ndarray:
    """Per lane (in execution order), whether an earlier lane had the same key: every access
    of an address by a thread but its first."""
    _, first = distinct_first(keys)
    later = np.ones(len(keys), bool)
    later[first] = False
    return later


def repeated_loads(ld: Lanes, keys: np.ndarray) -> tuple[tuple[int, ...], int]:
    """Of the load lanes ``ld``, those of the thread addresses ``keys`` (sorted and distinct
    :func:`thread_keys`: an accumulation's): the records all of whose such lanes load an address
    their thread loaded before (:func:`whole_records` of :func:`later_repeats`), and how many
    such lanes do. The lanes' keys made once and looked up by a binary search each
    (``np.isin`` of int64 keys this wide sorts both), their first ones found by
    :func:`distinct_thread_keys` (issue 31)."""
    every = thread_keys(ld)
    at = np.flatnonzero(member(every, keys))
    k = every[at]
    del every
    sel = ld.take(at)
    uniq, first = distinct_thread_keys(sel, k)
    later = np.ones(len(k), bool)
    later[first] = False
    return whole_records(sel.rec, later), max(len(k) - len(uniq), 0)


def whole_records(recs: np.ndarray, removable: np.ndarray) -> tuple[int, ...]:
    """The records every one of whose lanes is removable (a warp's request goes only when
    all its lanes do)."""
    if not len(recs):
        return ()
    if len(recs) > 1 and bool((recs[1:] >= recs[:-1]).all()):
        # the lanes in execution order (a view's): each record's lanes one run, no sort
        start = np.flatnonzero(run_heads(recs))
        kept = np.logical_or.reduceat(~np.asarray(removable, bool), start)
        return tuple(recs[start][~kept].tolist())
    rs, inv = distinct_inverse(recs)
    keep = np.bincount(inv, weights=(~removable).astype(np.float64), minlength=len(rs))
    return tuple(rs[keep == 0].tolist())  # (Python ints: no int() a record, issue 31)


@dataclass(frozen=True)
class Accumulated:
    """A store line of one buffer whose threads store each address ``repeats`` times on
    average: its distinct thread addresses (:func:`thread_keys`, sorted), the store records one
    store per address would leave out, and its store instructions."""

    line: int
    repeats: float
    keys: np.ndarray
    saved_store_records: tuple[int, ...]
    store_insts: np.ndarray


_ACCUMULATED: weakref.WeakKeyDictionary[TraceView, dict[Any, dict[str, list[Accumulated]]]] = (
    weakref.WeakKeyDictionary()
)


def accumulations(
    view: TraceView,
    same_file: Callable[[str | None], bool],
    min_repeats: float = MIN_ACCUMULATION_REPEATS,
) -> dict[str, list[Accumulated]]:
    """The store lines (of the source file ``same_file`` accepts) whose threads store one
    address of a buffer at least ``min_repeats`` times on average, by buffer: an accumulation
    in global memory (GA308). Made once per view, store lines and ``min_repeats`` (GA308's
    detect and GA309's :func:`accumulation_reloads` ask for the same); the callers read it
    and do not change it."""
    store_lines = view.lines(same_file, [Kind.STORE])
    cached = _ACCUMULATED.setdefault(view, {})
    ask = (tuple(store_lines), float(min_repeats))
    got = cached.get(ask)
    if got is not None:
        return got
    found: dict[str, list[Accumulated]] = {}
    for file, line, _ in store_lines:
        st_insts = view.insts_at(file, line, Kind.STORE)
        for b in view.buffers_at(st_insts):
            st, _ = view.access(st_insts, b)
            if not len(st):
                continue
            keys = thread_keys(st)
            # one sort: the distinct keys and each one's first lane (every other lane of a key
            # repeats it); the mean count of a key is the lanes over the keys
            uniq, first = distinct_thread_keys(st, keys)
            repeats = len(keys) / len(uniq)
            if repeats < min_repeats:
                continue
            later = np.ones(len(keys), bool)
            later[first] = False
            saved = whole_records(st.rec, later)
            found.setdefault(b, []).append(Accumulated(line, repeats, uniq, saved, st_insts))
    cached[ask] = found
    return found


@dataclass(frozen=True)
class ThreadReloads:
    """The global loads of a view that load an address their thread accessed before, with no
    store of another (traced) thread to it in between, lane by lane (view lane indices, in
    execution order): ``lane`` the reload, ``prev`` the thread's previous access of the address
    (a load or a store: ``after_store``), ``last_store`` the thread's last global store before
    the reload when it comes after ``prev`` (-1 when none: nothing the compiler must assume
    aliases the value), ``gap`` the thread's global accesses between the two (few: a register
    would hold the value that long; many: a pass over a row, which registers hold only when
    its length is known), and ``window_sectors`` the sectors the reload's CTA accessed between
    the two (the records' sectors, each record's shared among its lanes, at most the CTA's
    distinct sectors): what went through its L1 in between."""

    lane: np.ndarray
    prev: np.ndarray
    after_store: np.ndarray
    last_store: np.ndarray
    gap: np.ndarray
    window_sectors: np.ndarray

    def __len__(self) -> int:
        return len(self.lane)


def _empty() -> ThreadReloads:
    z = np.zeros(0, np.int64)
    return ThreadReloads(z, z, np.zeros(0, bool), z, z, np.zeros(0))


def _lanes_by_cta(
    rec: np.ndarray, per_rec: np.ndarray, rec_cta: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """``stable_argsort`` of the lanes' CTAs and each lane's position in that order, from the
    records: a record's lanes are contiguous (``rec`` non-decreasing, as a view's lanes are) and
    share its CTA, so the lanes by CTA are the records by CTA (one stable sort of the records,
    not of the lanes), each record's lanes in their order; the positions without a scatter.
    None where ``rec`` decreases somewhere."""
    n = len(rec)
    if n < 2 or not bool((rec[1:] >= rec[:-1]).all()):
        return None
    per_rec = np.asarray(per_rec, np.int64)
    start = np.cumsum(per_rec) - per_rec  # each record's first lane
    order = stable_argsort(np.asarray(rec_cta))  # the records by CTA, in execution order
    new_start = np.empty(len(per_rec), np.int64)
    lens = per_rec[order]
    new_start[order] = np.cumsum(lens) - lens  # its first lane's position in the CTA order
    # positions below n, and their differences above -n: int32 where n fits (issue 31's peak)
    ix = np.int32 if n < 2**31 - 1 else np.int64
    lane = np.arange(n, dtype=ix)
    by_cta = np.repeat((start[order] - new_start[order]).astype(ix), lens)
    by_cta += lane  # (in place: no third lane-sized array at once, issue 31)
    cpos = np.repeat((new_start - start).astype(ix), per_rec)
    cpos += lane
    return by_cta, cpos


def _no_write_between(
    addr: np.ndarray,
    writes: np.ndarray,
    cur: np.ndarray,
    prev: np.ndarray,
    shared: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of accesses (positions in execution order, ``prev`` before ``cur``, of one
    address of ``addr``, ``prev`` the thread's last access of it before ``cur``) with no write
    (``writes``: a mask of the accesses) to their address between them. Only a pair whose
    address lies within the written addresses' range can have one (a kernel's reloads of a
    buffer it never writes have none: no search, issue 31), and, with ``shared`` (per pair:
    whether another thread accesses its address), only a pair whose address another thread
    accesses (a thread per address, as most kernels have: no search); those are searched
    among the writes (:func:`_clear_between`)."""
    if shared is not None and not shared.any():
        return cur, prev
    w = np.flatnonzero(writes)
    if not len(w) or not len(cur):
        return cur, prev
    written = addr[w]
    ac = addr[cur]
    in_range = (ac >= written.min()) & (ac <= written.max())
    if shared is not None:
        in_range &= shared
    cand = np.flatnonzero(in_range)
    del ac, written, in_range
    if not len(cand):
        return cur, prev
    if len(cand) == len(cur):
        keep = np.flatnonzero(_clear_between(addr, writes, w, cur, prev))
    else:
        ok = np.ones(len(cur), bool)
        ok[cand] = _clear_between(addr, writes, w, cur[cand], prev[cand])
        keep = np.flatnonzero(ok)
    return cur[keep], prev[keep]


def _shared_addresses(same: np.ndarray, same_addr: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per pair of neighbours ``at`` (positions in an order by (address, thread), each pair one
    thread's two accesses of one address), whether another thread accesses its address too:
    its address's run in that order holds a change of thread. ``same``: per position after
    the first, whether its (address, thread) is its predecessor's; ``same_addr``: its address.
    All False where each address is one thread's (most kernels': no run to number)."""
    other = same_addr & ~same
    if not other.any():
        return np.zeros(len(at), bool)
    # position i + 1's run of one address (int32 where the positions fit)
    run = np.cumsum(~same_addr, dtype=np.int32 if len(same) < 2**31 - 1 else np.int64)
    many = np.zeros(int(run[-1]) + 1, bool)
    many[run[other]] = True
    return np.asarray(many[run[at]])


def _clear_between(
    addr: np.ndarray, writes: np.ndarray, w: np.ndarray, cur: np.ndarray, prev: np.ndarray
) -> np.ndarray:
    """Per pair of :func:`_no_write_between` (``w``: the writes' positions), whether no write to
    its address comes between its two accesses: the writes alone sorted by (address, position),
    two binary searches a pair."""
    m = np.int64(len(addr))
    if (int(addr.max()) + 1) * int(m) >= 2**62:  # too wide for one key: every access by address
        by_addr = stable_argsort(addr)
        pos = np.empty(len(addr), np.int64)
        pos[by_addr] = np.arange(len(addr))
        writes_before = np.cumsum(writes[by_addr])  # inclusive, in by_addr order
        return np.asarray(writes_before[pos[cur] - 1] == writes_before[pos[prev]])
    wkey = np.sort(addr[w] * m + w)
    a = addr[cur] * m
    return np.asarray(np.searchsorted(wkey, a + prev, "right") == np.searchsorted(wkey, a + cur))


def _ascending(values: np.ndarray, n: int) -> np.ndarray:
    """``np.argsort(values)`` of distinct non-negative integers below ``n``: by a scatter (the
    values marked in a mask of ``n`` bytes, their positions scattered into an array left
    unfilled elsewhere: no pass of ``n`` int64 to fill and to compare, issue 31)."""
    mark = np.zeros(n, bool)
    mark[values] = True
    at = np.empty(n, np.intp)
    at[values] = np.arange(len(values))
    return at[np.flatnonzero(mark)]


def _cta_distinct_sectors(
    cta: np.ndarray, buf: np.ndarray, off: np.ndarray, ctas: int
) -> np.ndarray:
    """Per CTA (``0 .. ctas - 1``, float64), the distinct (buffer, 32-byte sector) its lanes
    (CTA ``cta``, buffer ``buf`` >= 0, byte offset ``off``) touch. Where the CTAs' buffers'
    sectors span no more bytes than there are lanes twice (the sampled CTAs of a kernel of
    small buffers: HeCBench present's 30 CTAs of 8 buffers, 6.6 M), each one is marked in a
    byte per (CTA, buffer, sector), no sort (issue 31: the sort of present's 6.7 M random keys
    was an eighth of GA309); else the keys sorted."""
    n = len(cta)
    if not n:
        return np.zeros(ctas, np.float64)
    nb = int(buf.max()) + 1
    width = int(off.max()) // SECTOR + 1
    if nb <= 128 and int(off.min()) >= 0 and ctas * nb * width <= 2 * n:
        at = cta.astype(np.int64)
        at *= nb
        at += buf
        at *= width
        at += off // SECTOR
        mark = np.zeros(ctas * nb * width, bool)
        mark[at] = True
        del at
        return np.count_nonzero(mark.reshape(ctas, nb * width), axis=1).astype(np.float64)
    # the keys (CTA << 47) | (buffer << 40) | sector, built and sorted in place (((CTA << 7) |
    # buffer) << 40: the same bits, one lane-sized temporary fewer, issue 31)
    key = cta.astype(np.int64)
    key <<= 7
    key |= buf
    key <<= 40
    key |= off // SECTOR
    # a lane of its predecessor's sector (a coalesced request's lanes: 8 of 4 bytes a sector)
    # adds no key: those left out before the sort, the same distinct keys from fewer
    head = np.empty(len(key), bool)
    head[:1] = True
    np.not_equal(key[1:], key[:-1], out=head[1:])
    key = key[head]
    sort_in_place(key)  # (in execution order, the CTA its major digit: long runs already)
    head = np.empty(len(key), bool)
    head[:1] = True
    np.not_equal(key[1:], key[:-1], out=head[1:])
    key = key[head]
    del head
    key >>= 47
    return np.bincount(key, minlength=ctas).astype(np.float64)


def _alignment_bits(off: np.ndarray) -> int:
    """The trailing zero bits every one of the non-negative offsets ``off`` has (0 without
    offsets, or where every one is 0): ``off >> bits`` keeps their order and tells the same
    ones apart."""
    if not len(off):
        return 0
    every = int(np.bitwise_or.reduce(off))
    if every <= 0:
        return 0
    return (every & -every).bit_length() - 1


def same_thread_reloads(view: TraceView) -> ThreadReloads:
    """The :class:`ThreadReloads` of ``view``: a load lane whose thread's previous access of the same
    (buffer, byte offset) is a load or a store (not an atomic: its value is not the one in
    memory), with no store, atomic or reduction to that address by any other thread of the
    sampled CTAs between the two (in the view's execution order; the thread's own are not
    between, its previous access being the last one)."""
    lanes, lb = view.lanes, view.lane_buffer
    n = len(lanes)
    if not n:
        return _empty()
    kind = view.records["kind"][lanes.rec]  # uint8: one byte a lane (the view has millions)
    load = kind == int(Kind.LOAD)
    plain_store = kind == int(Kind.STORE)
    del kind
    writes = ~load  # stores, atomics, reductions
    inside = lb >= 0
    m = int(np.count_nonzero(inside))
    # every lane in a buffer (the usual case): the lanes themselves, not a gather of each column;
    # their positions not made (a lane-sized int64 array, 0.05 CPU-s on 8 M lanes: issue 31)
    every = m == n
    idx = np.zeros(0, np.intp) if every else np.flatnonzero(inside)
    del inside
    if not m or not (load if every else load[idx]).any():
        return _empty()

    def sel(a: np.ndarray) -> np.ndarray:
        return a if every else a[idx]

    def at_lane(i: np.ndarray) -> np.ndarray:  # positions among idx -> view lanes
        return i if every else idx[i]

    threads = int(np.prod(view.block))
    # (each made in its own int64 array, in place: no lane-sized temporaries beside it)
    thread = sel(lanes.cta).astype(np.int64)
    thread *= np.int64(threads)
    thread += sel(lanes.tid)
    # (buffer, byte offset), dense: the order of (buffer << 40) | offset, in fewer bits (the
    # stable sorts below pack it with the lane's position: gpuadvise.arrays.stable_argsort);
    # the offsets' common alignment dropped (a float's 2 bits: one order, one equality, and the
    # pairs' keys then pack with 8 M positions, a sort of int64 keys instead of numpy's stable
    # argsort: HeCBench softmax's 0.38 CPU-s against 0.15, issue 31)
    off = sel(lanes.off)
    align = _alignment_bits(off)
    addr = sel(lb).astype(np.int64)
    addr *= np.int64((int(off.max()) >> align) + 1)
    addr += off >> align if align else off
    del off
    w_idx = sel(writes)
    # positions and counts below m: int32 where m fits (issue 31's peak is here)
    ix = np.int32 if m <= np.iinfo(np.int32).max else np.int64
    # by (address, thread), in execution order: each access's thread's previous one
    tbits = max(int(thread.max()).bit_length(), 1)
    if int(addr.max()).bit_length() + tbits <= 63:
        # (whether each access's pair is its predecessor's, from the sorted keys: no gather of
        # the addresses and threads by the order; sorted in pair's own memory)
        pair = addr << tbits
        pair |= thread
        by_pair, same, same_addr = stable_argsort_equal_major(pair, tbits, overwrite=True)
        del pair
    else:  # offsets too large for one key
        by_pair = np.lexsort((thread, addr))
        a_s = addr[by_pair]
        same_addr = a_s[1:] == a_s[:-1]
        del a_s
        t_s = thread[by_pair]
        same = same_addr & (t_s[1:] == t_s[:-1])
        del t_s
    at = np.flatnonzero(same)  # (indices: one boolean selection, not two)
    cur, prev = by_pair[at + 1], by_pair[at]  # indices into idx
    del by_pair
    lc, lp = at_lane(cur), at_lane(prev)
    ok = load[lc] & (load[lp] | plain_store[lp])
    del lc, lp  # a lane's 8-byte rows (lc, lp: made again below, issue 31)
    keep = np.flatnonzero(ok)
    cur, prev = cur[keep], prev[keep]
    # (the addresses' runs numbered after the order is freed: in its place, issue 31)
    shared = _shared_addresses(same, same_addr, at[keep])
    del same, same_addr, at, keep
    # another thread's write in between: any write to the address between them (the thread's
    # own would be a later previous access), of an address another thread accesses
    cur, prev = _no_write_between(addr, w_idx, cur, prev, shared)
    del shared
    del addr
    if not len(cur):
        return _empty()
    # the thread's own stores between the two, and its last one
    by_thread = stable_argsort(thread)
    del thread
    tpos = np.empty(m, ix)
    tpos[by_thread] = np.arange(m, dtype=ix)
    w_t = w_idx[by_thread]
    del w_idx
    last_w = np.where(w_t, np.arange(m, dtype=ix), ix(-1))
    del w_t
    np.maximum.accumulate(last_w, out=last_w)
    at = last_w[tpos[cur] - 1]
    del last_w
    stored = at > tpos[prev]
    # (lane indices and gaps, below the view's lanes: int32 where they fit, issue 31)
    out = np.int32 if n < 2**31 - 1 else np.int64
    last_store = np.where(stored, at_lane(by_thread[np.maximum(at, 0)]), -1).astype(out)
    gap = tpos[cur] - tpos[prev]  # (below m: no wider type needed)
    gap -= 1
    del by_thread, tpos
    # what the CTA accessed in between: each record's sectors shared among its lanes, summed
    # in execution order per CTA, at most the CTA's distinct sectors; evict-first accesses
    # (`__ldcs`, `__stcs`) left out, as the caches give their lines up first. Each record's
    # share made per record (its lanes' instruction is its own) and gathered straight in CTA
    # order: no lane-sized float64 of the shares in execution order beside it (issue 31)
    per_rec = np.bincount(lanes.rec, minlength=len(view.records))
    share = view.rec_sectors * view.rec_weight / np.maximum(per_rec, 1)
    share[view.inst_streaming[view.records["inst"]]] = 0.0
    got = _lanes_by_cta(lanes.rec, per_rec, view.records["cta"])
    if got is None:
        by_cta = stable_argsort(lanes.cta)
        cpos = np.empty(n, np.int64)
        cpos[by_cta] = np.arange(n)
    else:
        by_cta, cpos = got
    del got  # (the tuple would hold both lane-sized arrays past their dels below)
    rec_by_cta = lanes.rec[by_cta]
    del by_cta
    csum = share[rec_by_cta]
    del share, rec_by_cta
    np.cumsum(csum, out=csum)
    lc, lp = at_lane(cur), at_lane(prev)
    window = csum[cpos[lc] - 1] - csum[cpos[lp]]
    del per_rec, cpos, csum
    ctas = int(lanes.cta.max()) + 1
    cta_sectors = _cta_distinct_sectors(sel(lanes.cta), sel(lb), sel(lanes.off), ctas)
    window = np.minimum(np.maximum(window, 0.0), cta_sectors[lanes.cta[lc]])
    # the reloads in execution order: each lane reloads at most once, so by a scatter, no sort
    order = _ascending(lc, n)
    # lane indices and gaps (below the view's lanes) in int32 where they fit: held through the
    # rule (millions of reloads: softmax_cuda's 4.2 million, 50 MB less, issue 31); their
    # readers index with them, compare them with 0 and take their median
    return ThreadReloads(
        lc.astype(out)[order],
        lp.astype(out)[order],
        plain_store[lp][order],
        last_store.astype(out)[order],
        gap.astype(out)[order],
        window[order],
    )


def accumulation_reloads(
    view: TraceView, same_file: Callable[[str | None], bool], rl: ThreadReloads
) -> np.ndarray:
    """Per reload of ``rl``, whether it belongs to an accumulation in global memory
    (:func:`accumulations`, GA308's): a load of an accumulated address, or one whose thread's
    last store in between is to such an address (the store that forces the reload goes with
    the accumulation's fix)."""
    lanes, lb = view.lanes, view.lane_buffer
    out = np.zeros(len(rl), bool)
    stored = np.flatnonzero(rl.last_store >= 0)
    for b, found in accumulations(view, same_file).items():
        bi = view.buffer_names.index(b)
        keys = distinct(np.concatenate([a.keys for a in found]))
        m = np.flatnonzero(lb[rl.lane] == bi)
        out[m[member(thread_keys(lanes.take(rl.lane[m])), keys)]] = True
        s = stored[lb[rl.last_store[stored]] == bi]
        out[s[member(thread_keys(lanes.take(rl.last_store[s])), keys)]] = True
    return out


def removable_records(view: TraceView, reload_lanes: np.ndarray) -> np.ndarray:
    """Per record of ``view``: a load request every one of whose active lanes is in
    ``reload_lanes`` (view lane indices): the request goes when they all do."""
    lanes = view.lanes
    n_rec = len(view.records)
    total = np.bincount(lanes.rec, minlength=n_rec)
    # each record's lanes in ``reload_lanes``, counted in integers over those lanes alone (a
    # float64 weight a lane, counted over every lane: HeCBench softmax's 8 M lanes and 4 M
    # reloads 0.064 CPU-s against 0.037, issue 31); lanes named twice counted once, as a mark
    # would (GA309's reloads come ascending, each once: no mark made)
    r = np.asarray(reload_lanes)
    if len(r) >= 2 and not bool((r[1:] > r[:-1]).all()):
        mark = np.zeros(len(lanes), bool)
        mark[r] = True
        r = np.flatnonzero(mark)
        del mark
    hit = np.bincount(lanes.rec[r], minlength=n_rec)
    return (view.records["kind"] == int(Kind.LOAD)) & (total > 0) & (hit == total)


def l1_bytes_left(device: DeviceSpec, occ: OccupancyResult) -> int:
    """The L1 an SM keeps for global data at this launch: the unified array less the shared
    memory its resident CTAs allocate (the driver sizes the carveout to the launch's need)."""
    resident = max(occ.active_blocks_per_sm, 1)
    carveout = min(occ.allocated_smem_per_block * resident, device.smem_per_sm)
    return max(device.smem_per_sm + UNIFIED_EXTRA_BYTES - carveout, 0)


def reload_costs(
    view: TraceView,
    device: DeviceSpec,
    occ: OccupancyResult,
    rl: ThreadReloads,
    keep: np.ndarray,
    removable: np.ndarray,
) -> tuple[float, float, float, float, float, float, int]:
    """What the ``removable`` requests (a mask over the records) of reloads ``rl[keep]`` cost
    over the launch: (the launch's global load requests, the removable ones, their L1 cycles,
    their L2 sectors, their DRAM bytes, the largest share of a warp's load requests they are,
    the L1 bytes an SM keeps). L2 sectors where the bytes the CTA touched between the two
    accesses, times the CTAs resident on an SM, exceed its L1 (:func:`l1_bytes_left`); DRAM
    bytes where, times the SMs, they exceed the L2 too; L1 hits otherwise."""
    lanes = view.lanes
    resident = max(occ.active_blocks_per_sm, 1)
    l1_bytes = l1_bytes_left(device, occ)
    window = np.zeros(len(view.records))  # per record: its reloads' largest window
    np.maximum.at(window, lanes.rec[rl.lane[keep]], rl.window_sectors[keep] * SECTOR)
    gone = np.flatnonzero(removable)
    per_sm = window[gone] * resident
    miss_l1 = per_sm > l1_bytes
    l2 = device.l2_bytes or 0
    miss_l2 = miss_l1 & (l2 > 0) & (per_sm * (device.sm_count or 1) > l2)
    sect = view.rec_sectors.astype(np.float64)
    s = view.scale
    l1 = view.weighted(gone, np.maximum(sect / 4.0, 1.0)) * s
    l2_sectors = view.weighted(gone[miss_l1], sect) * s if miss_l1.any() else 0.0
    dram = view.weighted(gone[miss_l2], sect) * SECTOR * s if miss_l2.any() else 0.0
    # each warp's share of its load requests that go
    r = view.records
    load = r["kind"] == int(Kind.LOAD)
    _, inv = distinct_inverse((r["cta"].astype(np.int64) << 16) | r["warp"].astype(np.int64))
    w = view.rec_weight
    all_w = np.bincount(inv, weights=w * load)
    gone_w = np.bincount(inv, weights=w * removable, minlength=len(all_w))
    share = float(np.max(gone_w / np.maximum(all_w, 1e-9))) if len(all_w) else 0.0
    return (
        round(view.weighted(np.flatnonzero(load)) * s, 3),
        round(view.weighted(gone) * s, 3),
        round(l1, 3),
        round(l2_sectors, 3),
        round(dram, 3),
        round(min(share, 1.0), 4),
        int(l1_bytes),
    )


def varying_repeats(view: TraceView, rl: ThreadReloads) -> np.ndarray:
    """Per reload, whether it repeats the same instruction's load of a thread that loads its
    addresses unevenly with that instruction: an index that varies from one iteration to the
    next and meets itself only sometimes (a clamp at the image's edge: `min(max(y + dy, 0), h -
    1)` reads row 0 for every negative dy near the top, the other rows once). A value a
    register could hold is loaded evenly: one address per thread and instruction (a
    loop-invariant load), or every address of an inner loop once per pass of the outer one (a
    point's features re-read for each cluster). Where the view cut a warp's executions to its
    first ones (:attr:`TraceView.rec_cut`) its last pass may be partial: counts one apart are
    even there (HeCBench contraction's sampled view, cut inside a weighted pass)."""
    lanes, lb = view.lanes, view.lane_buffer
    out = np.zeros(len(rl), bool)
    # only a reload by the instruction of its previous access can be one (most kernels' reloads
    # are another line's: none to count), and only those instructions' lanes are counted: each
    # such reload's (thread, instruction) key has all its lanes among them (issue 31: fewer rows)
    same = np.flatnonzero(lanes.inst[rl.lane] == lanes.inst[rl.prev]) if len(rl) else rl.lane
    if not len(same):
        return out
    ninst = int(lanes.inst.max()) + 1
    asked = np.zeros(ninst, bool)
    asked[lanes.inst[rl.lane[same]]] = True
    inside = np.flatnonzero((lb >= 0) & asked[lanes.inst])
    if not len(inside):
        return out
    threads = int(np.prod(view.block))

    def thread_inst(ix: np.ndarray) -> np.ndarray:  # in place: no lane-sized temporaries
        t = lanes.cta[ix].astype(np.int64)
        t *= threads
        t += lanes.tid[ix]
        t *= ninst
        t += lanes.inst[ix]
        return t

    addr = lb[inside].astype(np.int64)
    addr <<= 40
    addr |= lanes.off[inside]
    rows = [thread_inst(inside), addr]
    del inside, addr  # (not held through the sort: distinct_rows releases the rows, issue 31)
    pairs, times = distinct_rows(rows, return_counts=True, release=True)
    # the pairs in order, row 0 first: each key's first pair is where its run starts
    # (np.unique's return_index of a sorted row, without its sort: issue 31's peak)
    head = np.empty(pairs.shape[1], bool)
    head[:1] = True
    np.not_equal(pairs[0, 1:], pairs[0, :-1], out=head[1:])
    first = np.flatnonzero(head)
    keys = pairs[0, first]
    del head, pairs
    lo = np.minimum.reduceat(times, first)
    hi = np.maximum.reduceat(times, first)
    cur = rl.lane[same]
    at = np.minimum(np.searchsorted(keys, thread_inst(cur)), len(keys) - 1)
    uneven = (hi > lo)[at]
    # where the view cut the instruction's executions to a warp's first ones (the key's lanes
    # are one warp's: cut or not together), its last pass over the addresses may be partial:
    # one load fewer of its later addresses is the cut's, not the index's
    cut = view.rec_cut[lanes.rec[cur]]
    if cut.any():
        uneven &= ~(cut & ((hi - lo)[at] <= 1))
    out[same] = uneven
    return out


def forwarded_in_order(
    view: TraceView,
    same_file: Callable[[str | None], bool],
    buffer: str,
    store_line: int,
    load_line: int,
) -> bool:
    """Whether every traced thread's loads of ``buffer`` on ``load_line`` read back, one for
    one and in order, the addresses its stores on ``store_line`` wrote, each once: the k-th
    load the k-th store's address (a loop fused with the one before it then reads, in each
    iteration, the value that iteration stored: :func:`gpuadvise.source.fixkit_fuse.plan_fuse`).
    No other thread's store between them is :func:`same_thread_reloads`' to show."""
    if buffer not in view.buffer_names:
        return False
    files = {f for f, ln, _ in view.lines(same_file, [Kind.LOAD, Kind.STORE]) if ln == load_line}
    if len(files) != 1:
        return False
    file = next(iter(files))
    st, _ = view.access(view.insts_at(file, store_line, Kind.STORE), buffer)
    ld, _ = view.access(view.insts_at(file, load_line, Kind.LOAD), buffer)
    if not len(st) or len(st) != len(ld):
        return False
    threads = int(np.prod(view.block))

    def ordered(x: Lanes) -> tuple[np.ndarray, np.ndarray]:
        t = x.cta.astype(np.int64) * threads + x.tid.astype(np.int64)
        o = np.argsort(t, kind="stable")  # by thread, each thread's in execution order
        return t[o], x.off.astype(np.int64)[o]

    ts, os_ = ordered(st)
    tl, ol = ordered(ld)
    if not (np.array_equal(ts, tl) and np.array_equal(os_, ol)):
        return False
    return len(distinct((ts << 40) | os_)) == len(ts)  # each address stored once a thread
