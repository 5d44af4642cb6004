"""Shared-memory tree reductions, recognised from what the kernel does: :func:`reduction_trees`.

The input is the emulator's access trace (:class:`~gpuadvise.trace.access.AccessTrace`), whose
records carry the number of barriers each warp had passed (``epoch``). For one CTA, each thread's
shared-memory accesses are read in program order; a *combine* is a store to word ``A`` after the
thread loaded a different word ``B = A + d`` (``d > 0``) since its previous store (it may have
loaded ``A`` too, or kept it in a register): ``s[t] += s[t + d]``, ``s[i] = v = v + s[i + d]``,
``vs[t] = vs[t] + vs[t + d]``... however the source spells it, unless the thread also stores
``B`` in the same epoch: that exchanges the two words (a sort's compare-and-swap), the partial
result does not flow into ``A``. The combines of one epoch with the same distance form a
*phase*; consecutive phases whose distance halves (sequential addressing, ``s >>= 1``) or doubles
(interleaved, ``s *= 2``), each folding words the previous phase wrote, form a *tree*. A halving
tree may be several side by side (one per warp or per row: ``segments``), each sequential over
its own ``2 * d0`` words.

A tree may fold downwards too, ``A`` from ``B = A - d`` (``s[t] += s[t - d]`` by the threads
with ``(t+1) % (2d) == 0``, Rodinia's statistics; the result in the highest word): it is read
in mirrored word numbers (``-A``) and kept (``mirrored``) when it is interleaved and no
exchange of two words follows it (Blelloch's up-sweep is such a tree, but its down-sweep's
exchanges make it a scan, ``model.scan``'s; a Hillis-Steele scan's steps fold downwards but
are not interleaved). For these a load wider than the store (``s[2t]`` and ``s[2t+1]`` in one
8-byte load) counts as the words it reads.

Per phase: the threads that combine, how many warps they touch against the fewest that could hold
them, whether their ids are contiguous, the distance, and the pattern: ``sequential`` when every
combined word lies in ``[base, base + n)`` for ``n`` active threads (consecutive threads add
consecutive words from the base: ``s[t] += s[t + d]`` with ``t < d``, and a last warp whose 32
lanes all add), ``interleaved`` when the words are ``base + 2d*k + j`` with ``j <
d`` beyond the first ``d`` (``tid % (2*s) == 0``, ``index = 2*s*tid``, Rodinia's ``ty %
power_two``). Per tree: the threads that filled its words before the first phase and the share of
them still working in it (the idle half: threads that only loaded), the global bytes loaded per
filling thread up to the fill (in tree elements: 1 when each thread loads one element), and the
warp-synchronous tail: the last phases with no barrier between them and the previous one.

Pure: no I/O, no source text. Only the emulator counts barriers; a trace from the GPU tracer
gives no trees (its ``epoch`` is 0 throughout).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from gpuadvise.arrays import distinct, member
from gpuadvise.trace.access import WARP, AccessTrace, Kind, Space

__all__ = ["Phase", "ReductionTree", "reduction_trees", "shared_lane_events", "trees_from_events"]

# a lane event of shared_lane_events: its record's fields the readers use, ``addr`` the lane's
LANE_EVENT = np.dtype(
    [
        ("inst", np.int32),
        ("warp", np.int32),
        ("mask", np.uint32),
        ("width", np.uint8),
        ("kind", np.uint8),
        ("addr", np.uint64),
        ("epoch", np.uint32),
    ]
)
MAX_LANE_EVENTS = 2_000_000  # per CTA: a kernel with more shared accesses is not read


@dataclass(frozen=True)
class Phase:
    """One step of a tree: every active thread combines word ``A`` with word ``A + distance``.

    ``epoch``: barriers passed before it; ``barrier_before``: a barrier separates it from the
    previous phase (for the first, from the fill). ``warps``: warps with an active thread;
    ``min_warps``: ``ceil(active_threads / 32)``. ``lines``: (file, line) of the stores.
    ``call_sites``: (file, line) of the kernel body's lines the stores come from: the call of
    the helper function they are inlined from where they lie in one, else their line.
    """

    epoch: int
    distance: int  # elements
    active_threads: int
    warps: int
    min_warps: int
    contiguous: bool
    thread_stride: int  # spacing of the active thread ids (1: contiguous ids), 0 for one thread
    pattern: str  # "sequential" | "interleaved" | "other"
    barrier_before: bool
    lines: tuple[tuple[str | None, int | None], ...]
    call_sites: tuple[tuple[str | None, int | None], ...] = ()

    @property
    def scattered(self) -> bool:
        """The active threads touch more warps than they need."""
        return self.warps > self.min_warps


@dataclass(frozen=True)
class ReductionTree:
    """A shared-memory tree reduction of one CTA (``cta``), ``element_bytes`` wide words from
    byte offset ``base`` of the shared window."""

    cta: int
    threads: int  # threads of the CTA
    element_bytes: int
    base: int
    phases: tuple[Phase, ...]
    direction: str  # "halving" | "doubling"
    fill_threads: int  # threads that stored into the tree's words before its first phase
    fill_elements_per_thread: float | None  # global bytes loaded per fill thread / element
    idle_first_phase: int  # fill threads with no combine in the first phase
    # (file, line) of the fill's stores that the tree reads (the last into each word)
    fill_lines: tuple[tuple[str | None, int | None], ...] = ()
    # trees side by side in one step (a halving tree per warp or per row): each reduces
    # ``2 * phases[0].distance`` words of its own; 1 for one tree over the block's words
    segments: int = 1
    # the tree folds downwards (``s[t] += s[t - d]``), its result in its highest word (Rodinia's
    # ``(tx+1) % i == 0``): its phases' patterns read it mirrored (an interleaved one only)
    mirrored: bool = False

    @property
    def pattern(self) -> str:
        """``interleaved`` when a phase is, else ``sequential`` when every phase is."""
        pats = {p.pattern for p in self.phases}
        if "interleaved" in pats:
            return "interleaved"
        return "sequential" if pats == {"sequential"} else "other"

    @property
    def first_phase_utilisation(self) -> float | None:
        """Active threads of the first phase per fill thread (0.5: half the block idles)."""
        if not self.fill_threads:
            return None
        return self.phases[0].active_threads / self.fill_threads

    @property
    def warp_synchronous_tail(self) -> tuple[Phase, ...]:
        """The phases after the tree's last barrier when there are two or more of them: steps
        with no barrier between them (the "unrolled last warp"); empty otherwise."""
        k = len(self.phases) - 1
        while k > 0 and not self.phases[k].barrier_before:
            k -= 1
        tail = self.phases[k:]
        return tail if len(tail) >= 2 else ()

    @property
    def per_warp(self) -> bool:
        """Trees side by side, each within one warp's 32 words (a warp reduces its own values
        through shared memory)."""
        return self.segments > 1 and 2 * self.phases[0].distance <= WARP

    def segment_threads(self, phase: Phase) -> int:
        """Most threads one of the side-by-side trees runs in ``phase`` (all of them for one
        tree)."""
        return math.ceil(phase.active_threads / self.segments)

    @property
    def last_distance(self) -> int:
        return self.phases[-1].distance

    @property
    def lines(self) -> tuple[tuple[str | None, int | None], ...]:
        """The source lines of the combines, in order of first use."""
        out: dict[tuple[str | None, int | None], None] = {}
        for p in self.phases:
            for ln in p.lines:
                out[ln] = None
        return tuple(out)

    def warp_iterations(self) -> int:
        """Warps with an active thread, summed over the phases."""
        return sum(p.warps for p in self.phases)


class _Combine(NamedTuple):
    """A combine (a named tuple: the largest trees make 100,000s of them)."""

    thread: int
    epoch: int
    word: int  # A, in elements from byte 0
    distance: int
    inst: int
    order: int  # position of the store among the CTA's lane events
    width: int  # bytes of the words


def trees_from_events(
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
    global_load_bytes: dict[int, int] | None = None,
    call_sites: dict[int, tuple[str | None, int | None]] | None = None,
) -> tuple[ReductionTree, ...]:
    """The trees of one CTA from its shared-memory lane events, in execution order (each
    thread's in program order): thread id, Kind (LOAD/STORE), byte offset, bytes, barrier
    epoch, instruction. ``global_load_bytes``: per epoch, the bytes the CTA loaded from global
    memory in it (for the fill's elements per thread). ``call_sites``: per instruction, the
    kernel body's line it comes from (``lines`` where absent)."""
    ev = (thread, kind, byte_addr, width, epoch, inst)
    sites = {**lines, **(call_sites or {})}
    gbytes = global_load_bytes or {}
    out = []
    combines, fills = _combines_and_fills(*ev)
    for tr in _chains(combines):
        out.append(_tree(tr, fills, cta, threads, lines, gbytes, sites))
    # trees folding downwards (``s[t] += s[t - d]``, the result in the highest word): built in
    # mirrored word numbers; only the interleaved ones that no exchange follows are trees (a
    # Hillis-Steele scan's steps fold downwards too, and Blelloch's up-sweep is such a tree
    # that its down-sweep, exchanges, turns into a scan; a padded one's distances stop
    # doubling half-way, 16 then 33, so any later exchange counts)
    down, mfills, exchanged = _mirrored_combines(*ev)
    for tr in _chains(down):
        last = max(c.epoch for c in tr[-1])
        if any(e > last for e in exchanged):
            continue
        t = _tree(tr, mfills, cta, threads, lines, gbytes, sites, mirrored=True)
        if t.pattern == "interleaved":
            out.append(t)
    return tuple(sorted(out, key=lambda t: t.phases[0].epoch))


def _chains(combines: list[_Combine]) -> list[list[list[_Combine]]]:
    """The combines grouped into phases (one epoch, one distance) and the phases chained into
    trees of two phases or more (each folding words the previous one wrote)."""
    if not combines:
        return []
    # phases: the combines of one epoch with one distance (and one element width)
    groups: dict[tuple[int, int], list[_Combine]] = defaultdict(list)
    for c in combines:
        groups[(c.epoch, c.distance)].append(c)
    steps = sorted(groups.values(), key=lambda cs: (cs[0].epoch, min(c.order for c in cs)))
    trees: list[list[list[_Combine]]] = []
    for cs in steps:
        if trees:
            prev = trees[-1][-1]
            d0, d1 = prev[0].distance, cs[0].distance
            lo = min(c.word for c in prev)
            hi = max(c.word + c.distance for c in prev)
            words = [c.word for c in cs]
            direction = None
            if len(trees[-1]) > 1:
                direction = trees[-1][1][0].distance > trees[-1][0][0].distance
            ok = (d1 * 2 == d0 and direction in (None, False)) or (
                d1 == 2 * d0 and direction in (None, True)
            )
            ok = ok and lo <= min(words) and max(words) <= hi and len(cs) <= len(prev)
            # the partial results flow: this step folds words the previous step wrote
            owned = {c.word for c in prev}
            ok = ok and sum(w in owned for w in words) >= 0.9 * len(words)
            if ok:
                trees[-1].append(cs)
                continue
        trees.append([cs])
    return [tr for tr in trees if len(tr) >= 2]


class ThreadStores(NamedTuple):
    """A CTA's shared lane events sorted by thread (stably: each thread's in program order),
    its stores and, for each load, the thread's next store: ``order`` (the sort), ``t``, ``a``,
    ``w``, ``e`` (thread, byte, width and epoch, sorted), ``st`` (the stores' sorted indices),
    ``ld`` (the loads a store of the same thread follows) and ``seg`` (each of those loads'
    store, an index into ``st``; ascending)."""

    order: np.ndarray
    t: np.ndarray
    a: np.ndarray
    w: np.ndarray
    e: np.ndarray
    st: np.ndarray
    ld: np.ndarray
    seg: np.ndarray


def thread_stores(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
) -> ThreadStores | None:
    """Each thread's stores with the loads it made since its previous store, the common first
    step of the tree (:func:`_combines_and_fills`) and scan (``model.scan``) models; None
    without a store."""
    order = np.argsort(np.asarray(thread, np.int64), kind="stable")
    t = np.asarray(thread, np.int64)[order]
    a = np.asarray(byte_addr, np.int64)[order]
    w = np.asarray(width, np.int64)[order]
    e = np.asarray(epoch, np.int64)[order]
    is_store = np.asarray(kind)[order] != int(Kind.LOAD)
    st = np.flatnonzero(is_store)  # the stores, in sorted order
    if not len(st):
        return None
    # each load belongs to the thread's next store (loads after its last store to none)
    nxt = np.cumsum(is_store) - is_store  # stores before each event
    ld = np.flatnonzero(~is_store & (nxt < len(st)))
    ld = ld[t[st[nxt[ld]]] == t[ld]]
    return ThreadStores(order, t, a, w, e, st, ld, nxt[ld])


def _combines_and_fills(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
) -> tuple[list[_Combine], list[tuple[int, int, int, int, int, int]]]:
    """Each thread's stores with the loads it made since its previous store (its events in
    program order), with numpy over every event at once: the combines and the fills, in the
    threads' order, then program order.

    A store of byte ``A`` (``w`` bytes) with no load before it is a fill (thread, epoch, byte,
    width, its event's index, instruction). It is a combine when its loads of width ``w``,
    ``A`` aside, read one byte ``B > A``, ``A`` and ``B - A`` multiples of ``w``, unless the
    thread also stores ``B`` in the same epoch (it exchanged the two words)."""
    r = _reads(thread, kind, byte_addr, width, epoch, inst)
    if r is None:
        return [], []
    order, ins, st, st_t, st_a, st_w, st_e, fills, b, c = r
    cw, ca = st_w[c], st_a[c]
    safe = np.maximum(cw, 1)
    ok = (b > ca) & ((b - ca) % safe == 0) & (ca % safe == 0) & (cw > 0)
    b, c, cw, ca = b[ok], c[ok], cw[ok], ca[ok]
    # a thread that also stores B in the epoch exchanged the two words: no combine
    ok = ~_stored(st_t, st_e, st_a, c, b)
    b, c, cw, ca = b[ok], c[ok], cw[ok], ca[ok]
    columns = (st_t[c], st_e[c], ca // cw, (b - ca) // cw, ins[st[c]], order[st[c]], cw)
    return list(map(_Combine._make, zip(*(x.tolist() for x in columns), strict=True))), fills


def _mirrored_combines(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
) -> tuple[list[_Combine], list[tuple[int, int, int, int, int, int]], set[int]]:
    """The combines that fold downwards, ``A`` from one word ``B < A`` (``s[t] += s[t - d]``),
    in mirrored word numbers (word ``-A``, distance ``A - B``: a tree folding towards its
    highest word reads as one folding towards its lowest), the fills with their bytes negated
    the same way, and the epochs with an exchange (a thread storing both words it combined,
    either way: a sort's compare-and-swap, a Blelloch down-sweep)."""
    r = _reads(thread, kind, byte_addr, width, epoch, inst, split=True)
    if r is None:
        return [], [], set()
    order, ins, st, st_t, st_a, st_w, st_e, fills, b, c = r
    cw, ca = st_w[c], st_a[c]
    safe = np.maximum(cw, 1)
    ok = (b != ca) & ((b - ca) % safe == 0) & (ca % safe == 0) & (cw > 0)
    b, c, cw, ca = b[ok], c[ok], cw[ok], ca[ok]
    swap = _stored(st_t, st_e, st_a, c, b)
    exchanged = set(st_e[c[swap]].tolist())
    ok = ~swap & (b < ca)
    b, c, cw, ca = b[ok], c[ok], cw[ok], ca[ok]
    columns = (st_t[c], st_e[c], -(ca // cw), (ca - b) // cw, ins[st[c]], order[st[c]], cw)
    combines = list(map(_Combine._make, zip(*(x.tolist() for x in columns), strict=True)))
    mirrored = [(f[0], f[1], -f[2], f[3], f[4], f[5]) for f in fills]
    return combines, mirrored, exchanged


def _reads(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
    *,
    split: bool = False,
) -> tuple[Any, ...] | None:
    """What the combines of either direction start from: the sort (``order``), the
    instructions in it, the stores (indices, thread, byte, width, epoch), the fills, and the
    stores whose loads since the thread's previous store read one other word of the store's
    width: that word's byte ``b`` and the store ``c`` (an index into the stores). ``split``:
    a load wider than the store counts as the words it reads (else only loads of the store's
    width count)."""
    ev = thread_stores(thread, kind, byte_addr, width, epoch)
    if ev is None:
        return None
    order, t, a, w, e, st, ld, seg = ev
    ins = np.asarray(inst, np.int64)[order]
    st_t, st_a, st_w, st_e = t[st], a[st], w[st], e[st]
    fill = np.bincount(seg, minlength=len(st)) == 0
    fi = np.flatnonzero(fill)
    at = (st_t[fi], st_e[fi], st_a[fi], st_w[fi], order[st[fi]], ins[st[fi]])
    fills = list(zip(*(x.tolist() for x in at), strict=True))
    # the other words of the store's width its loads read: one gives a combine
    if split:  # a wider load read as its words (`s[2t]` and `s[2t+1]` loaded as one)
        lw, lsw = w[ld], st_w[seg]
        reps = np.where(lw % np.maximum(lsw, 1) == 0, lw // np.maximum(lsw, 1), 0)
        rep = np.repeat(np.arange(len(ld)), reps)
        k = np.arange(len(rep)) - np.repeat(np.cumsum(reps) - reps, reps)
        words, wseg = a[ld][rep] + k * lsw[rep], seg[rep]
        keep = words != st_a[wseg]
        words, wseg = words[keep], wseg[keep]
    else:
        keep = (w[ld] == st_w[seg]) & (a[ld] != st_a[seg])
        words, wseg = a[ld][keep], seg[keep]
    srt = np.lexsort((words, wseg))
    words, wseg = words[srt], wseg[srt]
    new = np.ones(len(words), dtype=bool)
    new[1:] = (words[1:] != words[:-1]) | (wseg[1:] != wseg[:-1])
    words, wseg = words[new], wseg[new]
    one = np.bincount(wseg, minlength=len(st))[wseg] == 1
    return order, ins, st, st_t, st_a, st_w, st_e, fills, words[one], wseg[one]


def _stored(
    st_t: np.ndarray, st_e: np.ndarray, st_a: np.ndarray, at: np.ndarray, byte: np.ndarray
) -> np.ndarray:
    """Whether the thread of store ``at`` (indices into the stores) stored ``byte`` in the
    store's epoch: one sorted key per (thread, epoch, byte) of the stores, searched."""
    if not len(at):
        return np.zeros(0, dtype=bool)
    cols = [(st_t, st_t[at]), (st_e, st_e[at]), (st_a, byte)]
    lows = [int(min(s.min(), q.min())) for s, q in cols]
    spans = [int(max(s.max(), q.max())) - lo + 1 for (s, q), lo in zip(cols, lows, strict=True)]
    if spans[0] * spans[1] * spans[2] >= 1 << 62:  # keys that do not pack into one int64
        keys = set(zip(st_t.tolist(), st_e.tolist(), st_a.tolist(), strict=True))
        q = zip(st_t[at].tolist(), st_e[at].tolist(), byte.tolist(), strict=True)
        return np.array([k in keys for k in q], dtype=bool)

    def pack(tt: np.ndarray, ee: np.ndarray, bb: np.ndarray) -> np.ndarray:
        return ((tt - lows[0]) * spans[1] + (ee - lows[1])) * spans[2] + (bb - lows[2])

    return member(pack(st_t[at], st_e[at], byte), distinct(pack(st_t, st_e, st_a)))


def _tree(
    steps: list[list[_Combine]],
    fills: list[tuple[int, int, int, int, int, int]],
    cta: int,
    threads: int,
    lines: dict[int, tuple[str | None, int | None]],
    global_load_bytes: dict[int, int],
    sites: dict[int, tuple[str | None, int | None]],
    *,
    mirrored: bool = False,
) -> ReductionTree:
    """``mirrored``: ``steps`` and ``fills`` in mirrored word numbers (a tree folding
    downwards, :func:`_mirrored_combines`)."""
    base = min(c.word for cs in steps for c in cs)
    width = 0
    phases = []
    prev_epoch: int | None = None
    halving = steps[1][0].distance < steps[0][0].distance
    # a halving tree may be several trees side by side (one per warp, per row): segments of
    # twice the first distance, each reduced sequentially from its own start
    segment = 2 * steps[0][0].distance
    for cs in steps:
        d = cs[0].distance
        tids = sorted({c.thread for c in cs})
        n = len(tids)
        warps = len({t // WARP for t in tids})
        rel = sorted(c.word - base for c in cs)
        if rel == list(range(len(rel))):  # consecutive words from the base (a warp's tail too)
            pattern = "sequential"
        elif halving and all(r % segment < d for r in rel):
            pattern = "sequential"
        elif not halving and all(r % (2 * d) < d for r in rel):
            pattern = "interleaved"
        else:
            pattern = "other"
        gaps = {b - a for a, b in zip(tids, tids[1:], strict=False)}
        stride = gaps.pop() if len(gaps) == 1 else (0 if n == 1 else -1)
        epoch = cs[0].epoch
        # the first phase: a barrier after the fill (the fill's epoch is an earlier one)
        barrier = prev_epoch is None or epoch != prev_epoch
        prev_epoch = epoch
        insts = sorted({c.inst for c in cs})
        phases.append(
            Phase(
                epoch=epoch,
                distance=d,
                active_threads=n,
                warps=warps,
                min_warps=math.ceil(n / WARP),
                contiguous=tids[-1] - tids[0] + 1 == n,
                thread_stride=stride,
                pattern=pattern,
                barrier_before=barrier,
                lines=tuple(dict.fromkeys(lines.get(i, (None, None)) for i in insts)),
                call_sites=tuple(dict.fromkeys(sites.get(i, (None, None)) for i in insts)),
            )
        )
    first = steps[0]
    first_order = min(c.order for c in first)
    span_hi = max(c.word + c.distance for c in first)
    # the fill: the last stores without a combine into the tree's words before its first phase
    tree_fills = [f for f in fills if f[4] < first_order and f[1] <= phases[0].epoch]
    width = _width_of(tree_fills)
    in_tree = [f for f in tree_fills if width and base <= f[2] // width <= span_hi]
    fill_epoch = max((f[1] for f in in_tree), default=None)
    fill_threads = {f[0] for f in in_tree if f[1] == fill_epoch}
    if fill_epoch is not None and fill_epoch == phases[0].epoch:  # no barrier after the fill
        phases[0] = dataclasses.replace(phases[0], barrier_before=False)
    if not width:
        width = 4
    active0 = {c.thread for c in first}
    # the stores the tree reads: the last of the fill into each word (`s[t] = 0;` then
    # `if (i < n) s[t] = in[i];` fills with the second)
    last: dict[int, tuple[int, int, int, int, int, int]] = {}
    for f in in_tree:
        if f[1] == fill_epoch and (f[2] not in last or f[4] > last[f[2]][4]):
            last[f[2]] = f
    read = list(last.values())
    per_thread = None
    if fill_threads and fill_epoch is not None:
        loaded = sum(v for e, v in global_load_bytes.items() if e <= fill_epoch)
        per_thread = loaded / (width * len(fill_threads))
    return ReductionTree(
        cta=cta,
        threads=threads,
        element_bytes=width,
        base=(-span_hi if mirrored else base) * width,
        mirrored=mirrored,
        phases=tuple(phases),
        direction="halving" if halving else "doubling",
        segments=len({(c.word - base) // segment for c in first}) if halving else 1,
        fill_threads=len(fill_threads),
        fill_elements_per_thread=per_thread,
        idle_first_phase=len(fill_threads - active0),
        fill_lines=tuple(
            dict.fromkeys(lines.get(f[5], (None, None)) for f in sorted(read, key=lambda f: f[4]))
        ),
    )


def _width_of(fills: list[tuple[int, int, int, int, int, int]]) -> int:
    ws = {f[3] for f in fills}
    return ws.pop() if len(ws) == 1 else 0


def shared_lane_events(
    trace: AccessTrace, cta: int | None = None
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """One traced CTA's shared-memory loads and stores a lane at a time: ``(cta, the CTA's
    records, each lane event's fields of its record (:data:`LANE_EVENT`: ``addr`` its own
    lane's address), its index among the CTA's shared records, its lane)``. None when the trace
    did not come from the emulator (it alone counts barriers: ``epoch``), the CTA makes no
    shared access, or more than :data:`MAX_LANE_EVENTS`."""
    names = trace.records.dtype.names or ()
    if trace.source != "emulator" or not trace.ctas or "epoch" not in names:
        return None
    c = min(trace.ctas) if cta is None else cta
    r = trace.records
    r = r[r["cta"] == c]
    shared = r[
        (r["space"] == int(Space.SHARED))
        & ((r["kind"] == int(Kind.LOAD)) | (r["kind"] == int(Kind.STORE)))
    ]
    if not len(shared):
        return None
    bits = ((shared["mask"][:, None] >> np.arange(WARP, dtype=np.uint32)) & 1).astype(bool)
    rec, lane = np.nonzero(bits)
    if len(rec) > MAX_LANE_EVENTS:
        return None
    # the fields the readers use, a lane's own address among them: 26 bytes an event, not a
    # whole record's 287 (two million events: 52 MB, not 574; issue 31's peak)
    sel = np.empty(len(rec), LANE_EVENT)
    for name in LANE_EVENT.names or ():
        if name != "addr":
            sel[name] = shared[name][rec]
    sel["addr"] = shared["addr"][rec, lane]
    return int(c), r, sel, rec, lane


def reduction_trees(trace: AccessTrace, cta: int | None = None) -> tuple[ReductionTree, ...]:
    """The shared-memory tree reductions of one traced CTA (``cta``; None: the first traced
    one). Empty when the trace did not come from the emulator (it alone counts barriers), or
    the CTA makes more than :data:`MAX_LANE_EVENTS` shared accesses."""
    events = shared_lane_events(trace, cta)
    if events is None:
        return ()
    c, r, sel, rec, lane = events
    threads = int(np.prod(trace.block))
    thread = sel["warp"].astype(np.int64) * WARP + lane
    byte_addr = sel["addr"].astype(np.int64)
    glob = r[(r["space"] == int(Space.GLOBAL)) & (r["kind"] == int(Kind.LOAD))]
    gbytes: dict[int, int] = defaultdict(int)
    if len(glob):
        lanes = np.bitwise_count(glob["mask"]).astype(np.int64) * glob["width"].astype(np.int64)
        for e, b in zip(glob["epoch"].tolist(), lanes.tolist(), strict=True):
            gbytes[int(e)] += int(b)
    lines = {i.inst: trace.line_of(i.inst) for i in trace.instructions}
    calls = {i.inst: trace.call_site_of(i.inst) for i in trace.instructions}
    return trees_from_events(
        thread,
        sel["kind"].astype(np.int64),
        byte_addr,
        sel["width"].astype(np.int64),
        sel["epoch"].astype(np.int64),
        sel["inst"].astype(np.int64),
        cta=int(c),
        threads=threads,
        lines=lines,
        global_load_bytes=dict(gbytes),
        call_sites=calls,
    )
