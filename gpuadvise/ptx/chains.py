"""What one execution of each basic block costs a warp: its instructions by pipe and its longest
chain of dependent instructions, from the PTX's def-use chains (a static analysis).

The emulator adds a block's costs to each warp that executes it (:mod:`gpuadvise.ptx.emulator`),
so that after a launch every warp has its dynamic instructions by pipe and the sum of the longest
chains of the blocks it ran: the dependent latency a warp cannot hide by itself, which the
execution model (:mod:`gpuadvise.model.execution`) turns into time at the device's latencies.

The longest chain of a block: in program order, an instruction's result is ready at the latest
ready time of the registers it reads (its guard predicate too) plus its own latency
(:func:`gpuadvise.ptx.pipes.latency_work`); registers the block does not write are ready when it
starts. The chain is the instruction whose result is ready last, with the links that lead to it,
counted by latency class (a shared load, three FFMAs, ...). Which chain is longest is decided at
:data:`REFERENCE_CYCLES` (Hopper-like latencies); the counts by class let the model weigh them
with the device's own.

Memory order: a load that may read what an earlier store of the block wrote (both global or
generic, the load not ``.nc``, and not two fixed offsets of one base register that do not
overlap) cannot start before that store: ptxas keeps them in program order, and a warp issues
in order, so the store's operands must be ready first. This is what makes a loop that stores
every iteration through a pointer that may alias its inputs (``out[r] += v[k * n + r]``
without ``__restrict__``) wait for each iteration's loads in turn, where the same loop without
the store overlaps them.

If-conversion: ptxas predicates a small block that a forward branch skips (no memory access,
barrier or call, at most :data:`PREDICABLE_INSTRUCTIONS` instructions) instead of branching, so a
head block, such a side block and their join (reached from those two only), and so on from the
join, are one straight line: their chain is taken over the run and counted at its head (an
unrolled loop with ``if (i == idx) res = a; else res = b;`` in each iteration keeps its loads in
flight together, as its SASS does, not one per block).

What this approximates, and which way: a chain that crosses a block boundary is cut there (the
last link of the first block counts in full, so a load at a block's end is waited for within
it), and a warp's in-order issue is not modelled beyond the chain and memory order (the model
takes the larger of a warp's chain and its instruction count). Loop iterations are blocks
executed again: a loop-carried dependence costs its chain once per iteration, independent
iterations that the compiler unrolled into one block overlap within it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from gpuadvise.ptx.cfg import Program
from gpuadvise.ptx.dataflow import defs_uses
from gpuadvise.ptx.parser import TYPE_SIZES, Addr, Instr, Reg
from gpuadvise.ptx.pipes import LATENCY_CLASSES, PIPES, latency_work, pipe_work

__all__ = [
    "REFERENCE_CYCLES",
    "REFERENCE_VECTOR",
    "BlockCosts",
    "ChainLog",
    "WarpChains",
    "block_costs",
    "block_instructions",
    "critical_paths",
    "shared_wavefronts",
]

REFERENCE_CYCLES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 4.0,
    "fp64": 8.0,
    "int": 4.0,
    "mufu": 16.0,
    "xu": 12.0,
    "shuffle": 24.0,
    "shared": 30.0,
    "global": 500.0,
    "store": 1.0,
    "tensor": 32.0,
    "barrier": 24.0,
}
"""Latencies in cycles that pick a block's longest chain (Hopper-like; the model weighs the
chain's links with the device's own latencies, :class:`gpuadvise.devices.PipeRates`)."""

REFERENCE_VECTOR = np.array([REFERENCE_CYCLES[c] for c in LATENCY_CLASSES])
"""The same in :data:`~gpuadvise.ptx.pipes.LATENCY_CLASSES` order."""


@dataclass(frozen=True)
class BlockCosts:
    """Per basic block (one row each, plus a zero row for the virtual exit): ``pipes``, the
    warp instructions of one execution by pipe (:data:`~gpuadvise.ptx.pipes.PIPES` order);
    ``chain``, the links of its longest dependent chain by latency class
    (:data:`~gpuadvise.ptx.pipes.LATENCY_CLASSES` order); ``shared``, its shared-memory warp
    accesses and the wavefronts they take without bank conflicts (two columns);
    ``unordered``, the longest chain were no store to order the loads after it (what
    ``__restrict__`` pointers or a value kept in a register instead of stored would leave);
    ``counts_from``: where ``pipes`` come from, ``"ptx"`` (:func:`~gpuadvise.ptx.pipes.pipe_work`
    on each PTX instruction) or ``"sass"`` (the kernel's SASS mapped onto the blocks,
    :mod:`gpuadvise.trace.sass_counts`)."""

    pipes: np.ndarray
    chain: np.ndarray
    shared: np.ndarray
    unordered: np.ndarray | None = None
    counts_from: str = "ptx"  # "sass": ``pipes`` are the SASS's (gpuadvise.trace.sass_counts)
    #: the SASS's local-memory warp instructions, L1 wavefronts and the stores' wavefronts, then
    #: the same of those beyond the PTX's, ptxas's spills (six columns,
    #: :func:`~gpuadvise.trace.sass_counts.sass_block_counts`)
    spills: np.ndarray | None = None
    #: only for a PTX with local accesses (a local array; None otherwise): each block's longest
    #: chain were its ``ld.local``/``st.local`` register moves (the array kept in registers),
    #: then one column more, the ``ld.local`` links of ``chain`` (counted in its ``global``
    #: class too): what GA401's local-array estimate takes off the chains
    registers: np.ndarray | None = None

    @property
    def chain_ref_cycles(self) -> np.ndarray:
        """Each block's chain at :data:`REFERENCE_CYCLES`."""
        return self.chain @ REFERENCE_VECTOR

    @property
    def per_warp(self) -> np.ndarray:
        """What a warp adds up as it runs a block: its chain's links by latency class, the
        unordered chain's (as many columns again), then the instructions it issues (one more
        column)."""
        free = self.chain if self.unordered is None else self.unordered
        issued = self.pipes.sum(axis=1, keepdims=True)
        if self.registers is not None:  # then the chain in registers and its local links
            return np.hstack([self.chain, free, self.registers, issued])
        return np.hstack([self.chain, free, issued])


class WarpChains:
    """Each warp's sum of the :attr:`BlockCosts.per_warp` rows of the blocks it ran, added as the
    emulator runs them (:meth:`gpuadvise.ptx.emulator.Batch.run`): ``per_warp``, the rows;
    ``warps``, the batch's warps. The rows of blocks every warp runs in lockstep are summed apart
    (:meth:`lockstep`) and added to every warp when the lockstep ends (:meth:`unlock`)."""

    def __init__(self, per_warp: np.ndarray, warps: int) -> None:
        self.rows = per_warp
        self.warp = np.zeros((warps, per_warp.shape[1]))
        self.lock = np.zeros(per_warp.shape[1])

    def all(self, p: int) -> None:
        """Every warp ran block ``p``."""
        self.warp += self.rows[p]

    def some(self, ws: np.ndarray, p: int) -> None:
        """Warps ``ws`` (distinct) ran block ``p``."""
        if ws.size == 1:  # (one warp, a divergent kernel's usual step: its row in place, the
            # same additions; a fancy-indexed update costs ~4x as much)
            self.warp[ws[0]] += self.rows[p]
            return
        self.warp[ws] += self.rows[p]

    def weighted(self, ws: np.ndarray | None, w: np.ndarray, p: int) -> None:
        """Warps ``ws`` (None: every warp) ran block ``p`` standing for ``w`` runs each (a
        sampled loop's iterations, :attr:`gpuadvise.ptx.sampling.LoopSampler.wmul`)."""
        if ws is None:
            self.warp += w[:, None] * self.rows[p]
        else:
            self.warp[ws] += w[:, None] * self.rows[p]

    def lockstep(self, p: int) -> None:
        """Every warp ran block ``p`` in lockstep: added to them all at :meth:`unlock`."""
        self.lock += self.rows[p]

    def unlock(self) -> None:
        """The lockstep ended: its sum added to every warp."""
        self.warp += self.lock
        self.lock[:] = 0.0

    def total(self) -> np.ndarray:
        """Each warp's sum (one row a warp), the lockstep's not yet added included."""
        return self.warp + self.lock


class NoChains:
    """:class:`WarpChains`' calls taken and dropped: a run for its outputs and its accesses
    alone (:func:`gpuadvise.trace.emulate.emulate` with ``models=False``) needs no block costs,
    so none are made (the kernel's :attr:`BlockCosts.per_warp`, read from its SASS) nor summed."""

    def all(self, p: int) -> None:
        pass

    def some(self, ws: np.ndarray, p: int) -> None:
        pass

    def weighted(self, ws: np.ndarray | None, w: np.ndarray, p: int) -> None:
        pass

    def lockstep(self, p: int) -> None:
        pass

    def unlock(self) -> None:
        pass


CHAIN_LOG_BYTES = 64 << 20
"""The most bytes of warp indices and weights a :class:`ChainLog` keeps before it waits for its
rows."""


class ChainLog:
    """:class:`WarpChains`' calls recorded while the rows are not known yet (the kernel's SASS,
    which gives the blocks' schedules and instruction counts, is still being read:
    :mod:`gpuadvise.trace.emulate`): :meth:`total` asks ``rows`` for them (it waits for the
    SASS) and replays the calls in their order on a :class:`WarpChains`, so every warp's sum is
    made of the same additions in the same order, bit for bit. ``ws`` arrays are kept as given
    (the emulator makes a new one each step), weights copied (the sampler's change). Past
    ``max_bytes`` of them it asks for the rows then, and goes on adding as the calls come."""

    def __init__(
        self, rows: Callable[[], np.ndarray], warps: int, max_bytes: int = CHAIN_LOG_BYTES
    ) -> None:
        self._rows = rows
        self._warps = warps
        self._max_bytes = max_bytes
        self._bytes = 0
        self._calls: list[tuple[int, int, np.ndarray | None, np.ndarray | None]] = []
        self._sums: WarpChains | None = None

    def _keep(self, kind: int, p: int, ws: np.ndarray | None, w: np.ndarray | None) -> None:
        self._calls.append((kind, p, ws, w))
        self._bytes += 64 + (0 if ws is None else ws.nbytes) + (0 if w is None else w.nbytes)
        if self._bytes > self._max_bytes:
            self.sums()

    def sums(self) -> WarpChains:
        """The calls so far replayed on a :class:`WarpChains` of the rows (asked for now), which
        takes the calls from here on."""
        if self._sums is None:
            sums = WarpChains(self._rows(), self._warps)
            for kind, p, ws, w in self._calls:
                if kind == 0:
                    sums.all(p)
                elif kind == 1:
                    assert ws is not None
                    sums.some(ws, p)
                elif kind == 2:
                    assert w is not None
                    sums.weighted(ws, w, p)
                elif kind == 3:
                    sums.lockstep(p)
                else:
                    sums.unlock()
            self._sums = sums
            self._calls = []
        return self._sums

    def all(self, p: int) -> None:
        if self._sums is not None:
            return self._sums.all(p)
        self._keep(0, p, None, None)

    def some(self, ws: np.ndarray, p: int) -> None:
        if self._sums is not None:
            return self._sums.some(ws, p)
        self._keep(1, p, ws, None)

    def weighted(self, ws: np.ndarray | None, w: np.ndarray, p: int) -> None:
        if self._sums is not None:
            return self._sums.weighted(ws, w, p)
        self._keep(2, p, ws, w.copy())

    def lockstep(self, p: int) -> None:
        if self._sums is not None:
            return self._sums.lockstep(p)
        self._keep(3, p, None, None)

    def unlock(self) -> None:
        if self._sums is not None:
            return self._sums.unlock()
        self._keep(4, 0, None, None)

    def total(self) -> np.ndarray:
        return self.sums().total()


def critical_paths(
    warp_sums: np.ndarray, ctas: int, warps_per_cta: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per CTA, from each warp's sum (:meth:`WarpChains.total`, the CTAs' warps in order): the
    chain of its warp whose chain is longest at the reference latencies, and the most
    instructions one of its warps issued (the last column)."""
    per_cta = warp_sums.reshape(ctas, warps_per_cta, -1)
    links = per_cta[:, :, :-1]  # the chain, then the unordered chain
    longest = np.argmax(links[:, :, : len(REFERENCE_VECTOR)] @ REFERENCE_VECTOR, axis=1)
    return links[np.arange(ctas), longest], per_cta[:, :, -1].max(axis=1)


def block_instructions(program: Program) -> list[list[int]]:
    """The instruction indices each block executes (its body, then its terminator if it has
    one: a branch, the barrier, the exit)."""
    out: list[list[int]] = []
    for blk in program.blocks:
        ins = list(blk.body)
        if blk.term[0] != "fall" and blk.end > blk.start:
            ins.append(blk.end - 1)
        out.append(ins)
    return out


def _vec(work: tuple[tuple[str, float], ...], index: dict[str, int], width: int) -> np.ndarray:
    v = np.zeros(width)
    for name, n in work:
        v[index[name]] += n
    return v


def shared_wavefronts(ins: Instr) -> float:
    """The wavefronts a shared-memory access of ``ins`` takes without bank conflicts: 128
    bytes each, so one for up to 32-bit lanes, two for 64-bit, four for 128-bit; 0 when it is
    no shared access."""
    if not (ins.base in ("ld", "st", "atom", "red", "ldu", "ldmatrix") and "shared" in ins.mods):
        return 0.0
    width = next((TYPE_SIZES[m] for m in reversed(ins.mods) if m in TYPE_SIZES), 4)
    vec = next((int(m[1:]) for m in ins.mods if m in ("v2", "v4", "v8")), 1)
    return max(1.0, width * vec * 32 / 128)


_ORDERED_LOADS = frozenset({"ld", "ldu", "atom"})
_ORDERED_STORES = frozenset({"st", "red", "atom"})


def _global_access(ins: Instr) -> tuple[Addr, int] | None:
    """The address and width in bytes of a global or generic memory access (None for any
    other instruction: shared, local, constant and parameter spaces do not alias global data
    that ptxas cannot tell apart)."""
    mods = ins.mods
    if any(m in mods for m in ("shared", "local", "const", "param", "tex", "surf")):
        return None
    addr = next((op for op in ins.operands if isinstance(op, Addr)), None)
    if addr is None:
        return None
    width = next((TYPE_SIZES[m] for m in reversed(mods) if m in TYPE_SIZES), 4)
    vec = next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)
    return addr, width * vec


def _may_alias(a: tuple[Addr, int], b: tuple[Addr, int]) -> bool:
    """Whether two accesses may overlap as ptxas sees them: not when both are fixed offsets of
    the same base register whose byte ranges are disjoint."""
    (x, wx), (y, wy) = a, b
    if isinstance(x.base, Reg) and isinstance(y.base, Reg) and x.base.name == y.base.name:
        return x.offset < y.offset + wy and y.offset < x.offset + wx
    return True


def block_costs(
    program: Program,
    schedule: Mapping[int, tuple[frozenset[int], Mapping[str, float]]] | None = None,
    sass_pipes: np.ndarray | None = None,
    sass_local: np.ndarray | None = None,
) -> BlockCosts:
    """The :class:`BlockCosts` of every block of ``program``. ``schedule``: loops whose
    iteration is what ptxas's SASS schedule takes (loop header -> the blocks it covers, one
    iteration's links by latency class; :mod:`gpuadvise.trace.sass_schedule`): the header's
    chain is that, the other blocks' none (the warp issues the iteration in order, each of its
    instructions once, predicated off or not). ``sass_pipes``: the blocks' instructions by pipe
    as the SASS runs them (:mod:`gpuadvise.trace.sass_counts`), taken for ``pipes`` instead of
    the PTX's expansion table when given; ``sass_local``: their spills (local accesses the SASS
    has beyond the PTX's), kept as ``spills``."""
    pipe_ix = {p: i for i, p in enumerate(PIPES)}
    lat_ix = {c: i for i, c in enumerate(LATENCY_CLASSES)}
    nb = len(program.blocks)
    pipes = np.zeros((nb + 1, len(PIPES)))
    chain = np.zeros((nb + 1, len(LATENCY_CLASSES)))
    unordered = np.zeros((nb + 1, len(LATENCY_CLASSES)))
    shared = np.zeros((nb + 1, 2))
    per_block = block_instructions(program)
    local = any(_is_local(ins) for ins in program.instrs)
    registers = np.zeros((nb + 1, len(LATENCY_CLASSES) + 1)) if local else None
    for b, indices in enumerate(per_block):
        for i in indices:
            ins = program.instrs[i]
            pipes[b] += _vec(pipe_work(ins), pipe_ix, len(PIPES))
            wf = shared_wavefronts(ins)
            if wf:
                shared[b] += (1.0, wf)
        chain[b] = _longest_chain(program, indices, lat_ix, ordered=True)
        unordered[b] = _longest_chain(program, indices, lat_ix, ordered=False)
        if registers is not None:
            registers[b] = _in_registers(program, indices, lat_ix)
    for head, run in _predicated_runs(program).items():
        chain[run[1:]] = 0.0
        unordered[run[1:]] = 0.0
        indices = [i for b in run for i in per_block[b]]
        chain[head] = _longest_chain(program, indices, lat_ix, ordered=True)
        unordered[head] = _longest_chain(program, indices, lat_ix, ordered=False)
        if registers is not None:
            registers[run[1:]] = 0.0
            registers[head] = _in_registers(program, indices, lat_ix)
    for head, (blocks, links) in (schedule or {}).items():
        rows = sorted(blocks)
        chain[rows] = 0.0
        unordered[rows] = 0.0
        chain[head] = unordered[head] = _vec(tuple(links.items()), lat_ix, len(LATENCY_CLASSES))
        if registers is not None and any(
            _is_local(program.instrs[i]) for b in rows for i in per_block[b]
        ):
            registers = None  # the SASS's iteration: which of its loads are local is not known
        elif registers is not None:
            registers[rows] = 0.0
            registers[head, :-1] = chain[head]
    if sass_pipes is not None and sass_pipes.shape == pipes.shape:
        spills = sass_local if sass_local is not None and len(sass_local) == nb + 1 else None
        return BlockCosts(sass_pipes, chain, shared, unordered, "sass", spills, registers)
    return BlockCosts(pipes, chain, shared, unordered, registers=registers)


def _is_local(ins: Instr) -> bool:
    """A PTX local-memory load or store (``ld.local``/``st.local``, a stack array's)."""
    return ins.base in ("ld", "st") and "local" in ins.mods


def _in_registers(program: Program, indices: list[int], lat_ix: dict[str, int]) -> np.ndarray:
    """A block's longest chain were its local accesses register moves (memory order kept), then
    the ``ld.local`` links of its chain as it is (the last column)."""
    ordered = _longest_chain(program, indices, lat_ix, ordered=True, count_local=True)
    moved = _longest_chain(program, indices, lat_ix, ordered=True, local_free=True)
    return np.append(moved, ordered[-1])


PREDICABLE_INSTRUCTIONS = 8
"""The most instructions of a block that a branch skips and ptxas predicates instead (if-
conversion: ``if (i == idx) res = a; else res = b;`` is a select in SASS)."""

_UNPREDICABLE = _ORDERED_STORES | frozenset(
    {"red", "bar", "barrier", "call", "ret", "exit", "brx", "membar", "fence"}
)
"""What keeps a side block a branch: a store, an atomic, a barrier, a call, a fence. A load
alone does not: ptxas guards it (``@P LDG``), so ``if (l < n) r[k] = a[l * n + i];`` unrolled 40
times issues its 40 loads back to back (HeCBench kmeans' hoisted ``feature_r``, sm_90 SASS:
40 predicated ``LDG.E.CONSTANT`` between one ``ISETP`` each, no branch); loads of other spaces
(shared, local) were not examined and keep the block a branch. Where such a run lies
in a loop whose SASS schedule is known, that schedule is its time
(:mod:`gpuadvise.trace.sass_schedule`): the guards ptxas computes again and waits for are not in
the PTX."""


def _predicable(program: Program, b: int) -> int | None:
    """The block a small side block ``b`` falls or branches into, when ptxas would predicate
    ``b`` (at most :data:`PREDICABLE_INSTRUCTIONS` instructions, no store, atomic, barrier,
    call or load other than a global one); None otherwise."""
    blk = program.blocks[b]
    if blk.term[0] not in ("fall", "bra") or len(blk.body) > PREDICABLE_INSTRUCTIONS:
        return None
    for i in blk.body:
        ins = program.instrs[i]
        if ins.base in _UNPREDICABLE or (
            ins.base in _ORDERED_LOADS and _global_access(ins) is None
        ):
            return None  # shared, local, ... loads: not examined in the SASS, kept a branch
    return int(blk.term[1])


def _predicated_runs(program: Program) -> dict[int, list[int]]:
    """Runs of blocks that ptxas makes one straight line by predicating the small blocks a
    forward branch skips (a head ending in a conditional branch around a predicable side block
    to the join, the join reached from those two only, and so on from the join): head -> the
    run's blocks in order. The chain of such a run is one chain: a load at the end of one of
    its blocks is not waited for there (the PTX's per-iteration branches of an unrolled loop
    with an ``if`` would otherwise put every iteration's load on the path)."""
    blocks = program.blocks
    preds: dict[int, list[int]] = {}
    for blk in blocks:
        for s in blk.succs:
            preds.setdefault(int(s), []).append(blk.index)

    def step(b: int) -> tuple[int, ...] | None:
        """(side, join) or (join,) when ``b`` ends in a convertible branch, else None."""
        term = blocks[b].term
        if term[0] != "cbra":
            return None
        taken, fall = int(term[3]), int(term[4])
        for side, join in ((fall, taken), (taken, fall)):
            if side >= len(blocks) or join >= len(blocks) or side <= b or join <= side:
                continue
            if preds.get(side) == [b] and _predicable(program, side) == join:
                if sorted(preds.get(join, [])) == sorted([b, side]):
                    return side, join
        return None

    runs: dict[int, list[int]] = {}
    absorbed: set[int] = set()
    for blk in blocks:
        b = blk.index
        if b in absorbed:
            continue
        run = [b]
        while (nxt := step(run[-1])) is not None:
            run.extend(nxt)
        if len(run) > 1:
            runs[b] = run
            absorbed.update(run[1:])
    return runs


def _longest_chain(
    program: Program,
    indices: list[int],
    lat_ix: dict[str, int],
    *,
    ordered: bool,
    local_free: bool = False,
    count_local: bool = False,
) -> np.ndarray:
    """The links of a block's longest chain by latency class; ``ordered``: with memory order
    (a load that may read an earlier store's bytes starts no earlier than that store).
    ``local_free``: local loads and stores are register moves (the array in registers);
    ``count_local``: one column more, the chain's ``ld.local`` links (which of the chains is
    longest is decided as without it)."""
    width = len(LATENCY_CLASSES)
    zero = np.zeros(width + 1 if count_local else width)
    ready: dict[str, tuple[float, np.ndarray]] = {}
    stores: list[tuple[tuple[Addr, int], float, np.ndarray]] = []  # a store's start
    best_t, best_v = 0.0, zero
    for i in indices:
        ins = program.instrs[i]
        lat = () if local_free and _is_local(ins) else latency_work(ins)
        dest, srcs = defs_uses(ins)
        t0, v0 = 0.0, zero
        for r in srcs:
            got = ready.get(r)
            if got is not None and got[0] > t0:
                t0, v0 = got
        if ordered and ins.base in _ORDERED_LOADS | _ORDERED_STORES:
            access = _global_access(ins)
            if access is not None and ins.base in _ORDERED_LOADS and "nc" not in ins.mods:
                for where, ts, vs in stores:  # not before a store it may read
                    if ts > t0 and _may_alias(access, where):
                        t0, v0 = ts, vs
            if access is not None and ins.base in _ORDERED_STORES:
                stores.append((access, t0, v0))
        if lat:
            own = _vec(lat, lat_ix, width)
            t1 = t0 + float(own @ REFERENCE_VECTOR)
            if count_local:
                own = np.append(own, 1.0 if ins.base == "ld" and _is_local(ins) else 0.0)
            v1 = v0 + own
        else:  # a move or a folded modifier: passes its source's readiness on
            t1, v1 = t0, v0
        for r in dest:
            ready[r] = (t1, v1)
        if t1 > best_t:
            best_t, best_v = t1, v1
    return best_v
