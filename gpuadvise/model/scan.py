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

from collections import Counter, defaultdict
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.model.reduction import shared_lane_events
from gpuadvise.trace.access import WARP, AccessTrace, Kind

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


@dataclass(frozen=True)
class _Look:
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
    looks: list[_Look] = []
    exchanges: dict[int, Counter[int]] = defaultdict(Counter)  # epoch -> distance -> threads
    order = np.lexsort((np.arange(len(thread)), thread))
    pending: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # (byte, width, epoch)
    stored: set[tuple[int, int, int]] = set()  # (thread, epoch, byte)
    store_epochs: dict[int, list[int]] = defaultdict(list)  # byte -> epochs of its stores
    forward: list[tuple[int, int, int, int, int]] = []  # (thread, epoch, byte A, byte B > A, width)
    for i in order.tolist():
        t = int(thread[i])
        if kind[i] == Kind.LOAD:
            pending[t].append((int(byte_addr[i]), int(width[i]), int(epoch[i])))
            continue
        a, w, e = int(byte_addr[i]), int(width[i]), int(epoch[i])
        stored.add((t, e, a))
        store_epochs[a].append(e)
        loads = pending.pop(t, [])
        # a vector load (ld.shared.v2) reads its words one by one
        words = sorted({b + k for b, lw, _ in loads if lw % w == 0 for k in range(0, lw, w)} - {a})
        if a % w or not words or len(words) > 2 or any(b % w for b in words):
            continue
        le = min(le for _, _, le in loads)
        if len(words) == 2:  # double-buffered: out[t] = in[t] + in[t - d]
            lo, hi = words
            if a in (lo, hi) or hi - lo < w:
                continue
            looks.append(_Look(t, e, le, a // w, (hi - lo) // w, hi // w, int(inst[i]), i, w))
        elif words[0] < a:
            b = words[0]
            looks.append(_Look(t, e, le, a // w, (a - b) // w, a // w, int(inst[i]), i, w))
        else:
            forward.append((t, e, a, words[0], w))
    # a thread that also stores B in the epoch exchanged the words (a compare-and-swap, or a
    # down-sweep's step): no look-back
    looks = [c for c in looks if (c.thread, c.epoch, (c.src - c.distance) * c.width) not in stored]
    for t, e, a, b, w in forward:
        if (t, e, b) in stored:
            exchanges[e][(b - a) // w] += 1
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
    fill = max(
        (
            e
            for c in first
            for e in store_epochs.get((c.src - c.distance) * w, [])
            if e <= c.load_epoch
        ),
        default=steps[0].load_epoch,
    )
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
        sel["addr"][np.arange(len(rec)), lane].astype(np.int64),
        sel["width"].astype(np.int64),
        sel["epoch"].astype(np.int64),
        sel["inst"].astype(np.int64),
        cta=int(c),
        threads=int(np.prod(trace.block)),
        lines=lines,
        call_sites=calls,
    )
