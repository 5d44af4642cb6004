"""Shared-memory scans (prefix sums), recognised from what the kernel does: :func:`shared_scans`.

The input is the emulator's access trace, whose records carry the barriers each warp had passed
(``epoch``). For one CTA, each thread's shared-memory accesses are read in program order; a
*look-back* is a store to word ``A`` after the thread loaded exactly one other word ``B = A - d``
(``d > 0``) since its previous store (it may have loaded ``A`` too): ``s[t] += s[t - d]``,
``t = s[p] + s[p - d]; ...; s[p] = t``, ``temp[bi] += temp[ai]``, however the source spells
it, unless the thread also stores ``B`` in the same epoch (a sort's compare-and-swap exchanges
the two words). The look-backs of one epoch with one distance form a *step*; consecutive steps
whose distance doubles (``d *= 2``; a padded array's distance may grow by its padding, up to
``d / 16``), each folding words the previous step wrote, form a *scan* of at least three steps
from distance 1 or 2:

- ``hillis-steele`` (Kogge-Stone): every step's threads store the words the first step stored
  (thread ``t`` owns word ``t`` and adds ``s[t - d]``);
- ``work-efficient`` (Blelloch's up-sweep): each step stores a subset of the previous one's words,
  its active threads halving. Its down-sweep (``t = s[ai]; s[ai] = s[bi]; s[bi] += t``: each
  thread exchanges two words ``d`` apart, ``d`` halving) is counted when it follows.

A scan may be several side by side (one per warp: ``segments``, each of ``2 * d_last`` words
or fewer). Per scan: its steps, the barriers from its fill to its last step (``barriers``), the
lines of its stores, how many times the CTA ran it.

Pure: no I/O, no source text. Only the emulator counts barriers; a trace from the GPU tracer
gives no scans (its ``epoch`` is 0 throughout).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from gpuadvise.arrays import distinct
from gpuadvise.model.reduction import shared_lane_events, thread_stores
from gpuadvise.trace.access import WARP, AccessTrace

__all__ = ["ScanStep", "SharedScan", "scans_from_events", "shared_scans"]

MIN_STEPS = 3


@dataclass(frozen=True)
class ScanStep:
    """One step of a scan: each active thread stores word ``A`` plus word ``A - distance``
    (the most common distance of the step). ``epoch``: barriers passed before its stores;
    ``load_epoch``: before its loads (one less when a barrier separates the read from the
    write, as in a Hillis-Steele scan over one array). ``lines``: (file, line) of the stores;
    ``call_sites``: the kernel body's lines they come from (a helper's call)."""

    epoch: int
    load_epoch: int
    distance: int
    active_threads: int
    warps: int
    lines: tuple[tuple[str | None, int | None], ...]
    call_sites: tuple[tuple[str | None, int | None], ...] = ()


@dataclass(frozen=True)
class SharedScan:
    """A shared-memory scan of one CTA (``cta``) of ``threads`` threads, over
    ``element_bytes`` wide words."""

    cta: int
    threads: int
    element_bytes: int
    kind: str  # "hillis-steele" | "work-efficient"
    steps: tuple[ScanStep, ...]
    barriers: int  # barriers from the fill of its first step's words to its last step
    down_steps: int = 0  # a work-efficient scan's down-sweep steps found after it
    down_threads: int = 0  # active threads summed over those steps
    segments: int = 1  # scans side by side (one per warp)
    runs: int = 1  # times the CTA ran this scan (same lines and distances)

    @property
    def warp_steps(self) -> tuple[ScanStep, ...]:
        """The steps whose distance is below a warp (32 elements): what ``__shfl_up_sync``
        does in registers."""
        return tuple(s for s in self.steps if s.distance < WARP)

    @property
    def warp_synchronous(self) -> bool:
        """No barrier between the steps (an unrolled warp scan over volatile memory)."""
        return len({s.epoch for s in self.steps}) == 1 and self.steps[0].epoch == (
            self.steps[0].load_epoch
        )

    @property
    def shared_accesses(self) -> int:
        """Shared-memory lane accesses of one run: two loads and a store a step's active
        thread, two loads and two stores a thread's exchange of the down-sweep."""
        return sum(3 * s.active_threads for s in self.steps) + 4 * self.down_threads

    @property
    def lines(self) -> tuple[tuple[str | None, int | None], ...]:
        out: dict[tuple[str | None, int | None], None] = {}
        for s in self.steps:
            for ln in s.lines:
                out[ln] = None
        return tuple(out)


class _Look(NamedTuple):
    """A look-back (a named tuple: the largest scans make 100,000s of them)."""

    thread: int
    epoch: int
    load_epoch: int
    word: int  # A, in elements from byte 0
    distance: int
    src: int  # the higher word read: A in place, another buffer's word double-buffered
    inst: int
    order: int
    width: int


def scans_from_events(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
    *,
    cta: int,
    threads: int,
    lines: dict[int, tuple[str | None, int | None]],
    call_sites: dict[int, tuple[str | None, int | None]] | None = None,
) -> tuple[SharedScan, ...]:
    """The scans of one CTA from its shared-memory lane events (each thread's in program
    order): thread id, Kind (LOAD/STORE), byte offset, bytes, barrier epoch, instruction."""
    looks, exchanges, store_epochs = _look_backs(thread, kind, byte_addr, width, epoch, inst)
    if not looks:
        return ()
    groups: dict[tuple[int, int], list[_Look]] = defaultdict(list)
    for c in looks:
        groups[(c.epoch, c.distance)].append(c)
    steps = sorted(groups.values(), key=lambda cs: (cs[0].epoch, min(c.order for c in cs)))
    # each step continues the latest scan it follows (a step of other look-backs in between,
    # such as a double-buffered scan's copies, does not break it)
    chains: list[list[list[_Look]]] = []
    for cs in steps:
        ch = next((c for c in reversed(chains[-8:]) if _follows(c[-1], cs)), None)
        if ch is not None:
            ch.append(cs)
        else:
            chains.append([cs])
    sites = {**lines, **(call_sites or {})}
    out: list[SharedScan] = []
    for ch in chains:
        if len(ch) < MIN_STEPS or ch[0][0].distance > 2:
            continue
        out.append(_scan(ch, cta, threads, lines, sites, store_epochs, exchanges))
    return _merge_runs(out)


def _look_backs(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
) -> tuple[list[_Look], dict[int, Counter[int]], dict[int, list[int]]]:
    """Each thread's stores with the loads it made since its previous store (its events in
    program order), with numpy over every event at once: the look-backs (in the threads' order,
    then program order), the exchanges (epoch -> distance -> threads, the distances in the order
    they first occur) and the epochs of each byte's stores.

    A store of word ``A`` (``w`` bytes) is a look-back when the words its loads read (each
    load's ``w``-byte words, the loads whose width is a multiple of ``w``), ``A`` aside, are one
    word ``B < A`` or two words ``lo < hi`` at least a word apart (double-buffered), all
    aligned; one word ``B > A`` is an exchange's half, when the thread also stores ``B`` in the
    epoch. A look-back whose lower word the thread also stores in the epoch is dropped."""
    ev = thread_stores(thread, kind, byte_addr, width, epoch)
    if ev is None:
        return [], {}, {}
    order, t, a, w, e, st, ld, seg = ev
    sw = w[st]
    # the load epoch of a store: the earliest of its loads' (any width)
    has_loads = np.bincount(seg, minlength=len(st)) > 0
    le = np.zeros(len(st), np.int64)
    if len(ld):  # seg ascends: each store's loads are one run
        runs = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        le[seg[runs]] = np.minimum.reduceat(e[ld], runs)
    # the loads' words of the store's width
    lw, lsw = w[ld], sw[seg]
    reps = np.where(lw % lsw == 0, lw // lsw, 0)
    rep = np.repeat(np.arange(len(ld)), reps)
    k = np.arange(len(rep)) - np.repeat(np.cumsum(reps) - reps, reps)
    words = a[ld][rep] + k * lsw[rep]
    wseg = seg[rep]
    keep = words != a[st][wseg]
    words, wseg = words[keep], wseg[keep]
    srt = np.lexsort((words, wseg))
    words, wseg = words[srt], wseg[srt]
    new = np.ones(len(words), dtype=bool)
    new[1:] = (words[1:] != words[:-1]) | (wseg[1:] != wseg[:-1])
    words, wseg = words[new], wseg[new]
    count = np.bincount(wseg, minlength=len(st))
    bad = np.bincount(wseg, weights=(words % sw[wseg]) != 0, minlength=len(st)) > 0
    first = np.zeros(len(st), np.int64)
    last = np.zeros(len(st), np.int64)
    if len(words):
        starts = np.flatnonzero(np.r_[True, wseg[1:] != wseg[:-1]])
        ends = np.r_[starts[1:], len(wseg)] - 1
        first[wseg[starts]] = words[starts]
        last[wseg[ends]] = words[ends]
    sa = a[st]
    ok = has_loads & (sa % sw == 0) & (count >= 1) & (count <= 2) & ~bad
    double = ok & (count == 2) & (last - first >= sw)
    back = ok & (count == 1) & (first < sa)
    fwd = ok & (count == 1) & (first > sa)
    distance = np.where(double, (last - first) // sw, (sa - first) // np.maximum(sw, 1))
    src = np.where(double, last // sw, sa // np.maximum(sw, 1))
    # a thread that also stores the lower word in the epoch exchanged the words: no look-back
    st_t, st_e = t[st], e[st]
    span_e = int(e.max(initial=0)) + 1
    span_b = int(max(int(a.max(initial=0)), 0)) + 1
    stored = distinct((st_t * span_e + st_e) * span_b + sa)

    def was_stored(sel: np.ndarray, byte: np.ndarray) -> np.ndarray:
        key = (st_t[sel] * span_e + st_e[sel]) * span_b + byte
        inside = (byte >= 0) & (byte < span_b)
        at = np.minimum(np.searchsorted(stored, key), len(stored) - 1)
        return inside & (stored[at] == key)

    lk = np.flatnonzero(double | back)
    lk = lk[~was_stored(lk, (src[lk] - distance[lk]) * sw[lk])]
    ins = np.asarray(inst, np.int64)[order]
    columns = (st_t[lk], st_e[lk], le[lk], sa[lk] // sw[lk], distance[lk], src[lk],
               ins[st[lk]], order[st[lk]], sw[lk])  # fmt: skip
    looks = list(map(_Look._make, zip(*(c.tolist() for c in columns), strict=True)))
    fw = np.flatnonzero(fwd)
    fw = fw[was_stored(fw, first[fw])]
    exchanges: dict[int, Counter[int]] = defaultdict(Counter)
    for ee, dd in zip(st_e[fw].tolist(), ((first[fw] - sa[fw]) // sw[fw]).tolist(), strict=True):
        exchanges[ee][dd] += 1
    by_byte = np.lexsort((st_e, sa))  # each byte's store epochs ascending
    sb, sbe = sa[by_byte], st_e[by_byte]
    cut = np.flatnonzero(np.r_[True, sb[1:] != sb[:-1]])
    store_epochs = {
        int(b): v.tolist() for b, v in zip(sb[cut].tolist(), np.split(sbe, cut[1:]), strict=True)
    }
    return looks, exchanges, store_epochs


def _follows(prev: list[_Look], cs: list[_Look]) -> bool:
    """``cs`` is the next step of the scan whose last step is ``prev``: its distance doubles
    (a padded array's up to ``d / 16`` more), it folds words ``prev`` stored, and no more
    threads work in it."""
    d0, d1 = prev[0].distance, cs[0].distance
    if not (2 * d0 <= d1 <= 2 * d0 + max(1, d0 // 8)):
        return False
    if cs[0].epoch < prev[0].epoch or len(cs) > len(prev):
        return False
    owned = {c.word for c in prev}
    return sum(c.src in owned or c.src - c.distance in owned for c in cs) >= 0.9 * len(cs)


def _scan(
    ch: list[list[_Look]],
    cta: int,
    threads: int,
    lines: dict[int, tuple[str | None, int | None]],
    sites: dict[int, tuple[str | None, int | None]],
    store_epochs: dict[int, list[int]],
    exchanges: dict[int, Counter[int]],
) -> SharedScan:
    steps = []
    for cs in ch:
        tids = sorted({c.thread for c in cs})
        insts = sorted({c.inst for c in cs})
        steps.append(
            ScanStep(
                epoch=cs[0].epoch,
                load_epoch=min(c.load_epoch for c in cs),
                distance=cs[0].distance,
                active_threads=len(tids),
                warps=len({t // WARP for t in tids}),
                lines=tuple(dict.fromkeys(lines.get(i, (None, None)) for i in insts)),
                call_sites=tuple(dict.fromkeys(sites.get(i, (None, None)) for i in insts)),
            )
        )
    first, last = ch[0], ch[-1]
    w = first[0].width
    kind = "work-efficient" if len(last) <= len(first) // 2 else "hillis-steele"
    # the fill: the latest store into a word the first step reads, before the step's loads
    # (each byte's epochs ascend: the latest one at most the load's by bisection)
    latest = [
        es[k - 1]
        for c in first
        if (k := bisect_right(es := store_epochs.get((c.src - c.distance) * w, []), c.load_epoch))
    ]
    fill = max(latest, default=steps[0].load_epoch)
    down, down_threads, end = 0, 0, steps[-1].epoch
    if kind == "work-efficient":  # the down-sweep: exchanges, one epoch each, d halving
        d = steps[-1].distance
        while (e := next((x for x in (end + 1, end + 2) if x in exchanges), None)) is not None:
            dist, n = exchanges[e].most_common(1)[0]
            if not d // 4 <= dist <= d:
                break
            down, down_threads, d, end = down + 1, down_threads + n, dist, e
    # a scan that never reaches a warp's width: each warp scans its own values
    segments = steps[0].warps if steps[-1].distance < WARP else 1
    return SharedScan(
        cta=cta,
        threads=threads,
        element_bytes=w,
        kind=kind,
        steps=tuple(steps),
        barriers=max(end - fill, 0),
        down_steps=down,
        down_threads=down_threads,
        segments=segments,
    )


def _merge_runs(scans: list[SharedScan]) -> tuple[SharedScan, ...]:
    """One scan for each (lines, distances): a scan in a loop runs once an iteration."""
    seen: dict[tuple[object, ...], SharedScan] = {}
    for s in scans:
        key = (s.lines, tuple(p.distance for p in s.steps))
        got = seen.get(key)
        seen[key] = s if got is None else _with_runs(got, got.runs + 1)
    return tuple(seen.values())


def _with_runs(s: SharedScan, runs: int) -> SharedScan:
    return replace(s, runs=runs)


def shared_scans(trace: AccessTrace, cta: int | None = None) -> tuple[SharedScan, ...]:
    """The shared-memory scans of one traced CTA (``cta``; None: the first traced one). Empty
    when the trace did not come from the emulator, or the CTA makes more than
    (:data:`gpuadvise.model.reduction.MAX_LANE_EVENTS`) shared accesses."""
    events = shared_lane_events(trace, cta)
    if events is None:
        return ()
    c, _, sel, rec, lane = events
    lines = {i.inst: trace.line_of(i.inst) for i in trace.instructions}
    calls = {i.inst: trace.call_site_of(i.inst) for i in trace.instructions}
    return scans_from_events(
        sel["warp"].astype(np.int64) * WARP + lane,
        sel["kind"].astype(np.int64),
        sel["addr"].astype(np.int64),
        sel["width"].astype(np.int64),
        sel["epoch"].astype(np.int64),
        sel["inst"].astype(np.int64),
        cta=int(c),
        threads=int(np.prod(trace.block)),
        lines=lines,
        call_sites=calls,
    )
