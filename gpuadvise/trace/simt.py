"""SIMT efficiency from the CPU emulator: active lanes per executed warp instruction.

The emulator (:class:`gpuadvise.ptx.emulator.Batch`) counts, per basic block, the warp executions,
the active lanes summed over them and the warp executions its terminator split. :func:`simt_profile`
turns them into what Nsight Compute calls ``smsp__thread_inst_executed.sum /
(smsp__inst_executed.sum * 32)``, over PTX instructions instead of SASS ones:

- per kernel and per source line (the user's call site of inlined code): warp instructions, thread
  instructions, efficiency = thread / (32 * warp);
- per conditional branch that split warps (``@p bra``, and ``brx.idx``): its source line, how many
  warp executions it split and in how many CTAs (whether only CTAs at the grid's far edge, the bounds
  check of the last block), and the issue slots lost to it: the idle lanes of the instructions it
  controls (the blocks between the branch and its reconvergence point; of nested splitting branches
  the innermost gets them). Lanes that left the kernel early (``if (t >= k) return;``) stay idle
  until the end, outside any branch's region: those slots go to the splitting branches that lead to
  an exit, in proportion to their splits. Lanes idle from the launch on (a block that is not a
  multiple of 32 threads) are counted as lost but given to no branch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuadvise.ptx.chains import block_instructions
from gpuadvise.ptx.dataflow import data_registers
from gpuadvise.ptx.parser import Instr, Reg
from gpuadvise.ptx.pipes import pipe_work

if TYPE_CHECKING:
    from gpuadvise.model.execution import KernelWork
    from gpuadvise.ptx.cfg import Program
    from gpuadvise.ptx.chains import BlockCosts

__all__ = [
    "NARROW_SHARE",
    "SerialRegion",
    "SimtBranch",
    "SimtCounts",
    "SimtLine",
    "SimtLinePipes",
    "SimtProfile",
    "kernel_work",
    "simt_profile",
]

WARP_LANES = 32

NARROW_SHARE = 4
"""A block is narrow when at most ``1 / NARROW_SHARE`` of its CTA's threads run it (a
``tid == 0`` section, a loop of one warp of eight), or when the whole launch is one warp or less
(``<<<1, 1>>>``): :class:`SerialRegion`."""


@dataclass
class SimtCounts:
    """The emulator's raw per-block counts, summed over batches (index: block; the last entry is
    the virtual exit)."""

    warps: np.ndarray
    lanes: np.ndarray
    splits: np.ndarray
    split_ctas: dict[int, set[int]]
    # summed over the CTAs: the chain of each CTA's critical warp by latency class, and the most
    # instructions a warp of each executed (gpuadvise.ptx.chains); and the CTAs counted
    chain: np.ndarray | None = None
    critical_instructions: float = 0.0
    ctas: int = 0
    # per CTA, in the order they ran: the most instructions a warp of it issued (what tells an
    # idle CTA's cost from a working one's: GA405, GA108)
    cta_critical: list[float] = field(default_factory=list)
    # per block, the splits at a front (the taken lanes a prefix or suffix of the active ones)
    front_splits: np.ndarray | None = None
    # per block, the warps that ran it at least once, summed over the CTAs (None: not counted)
    cta_warps: np.ndarray | None = None
    cta_warps_known: bool = True
    # per IEEE double division (instruction index): the warps that executed it and those with a
    # lane on ptxas's slow path (gpuadvise.ptx.slow_paths), as traced (not loop-weighted)
    slow_div: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def empty(cls, blocks: int) -> SimtCounts:
        z = np.zeros(blocks, np.int64)
        return cls(z, z.copy(), z.copy(), {}, front_splits=z.copy())

    def add(
        self,
        warps: Sequence[int],
        lanes: Sequence[int],
        splits: Sequence[int],
        split_ctas: dict[int, set[int]],
        cta_chain: np.ndarray | None = None,
        cta_instructions: np.ndarray | None = None,
        front_splits: Sequence[int] | None = None,
        cta_warps: np.ndarray | None = None,
        slow_div: dict[int, list[int]] | None = None,
    ) -> None:
        self.warps += np.asarray(warps, np.int64)
        for i, (ran, slow) in (slow_div or {}).items():
            acc = self.slow_div.setdefault(i, [0, 0])
            acc[0] += ran
            acc[1] += slow
        if cta_warps is None:
            self.cta_warps_known = False
        elif self.cta_warps_known:
            got_w = np.asarray(cta_warps, np.int64)
            self.cta_warps = got_w if self.cta_warps is None else self.cta_warps + got_w
        if front_splits is not None:
            got = np.asarray(front_splits, np.int64)
            self.front_splits = got if self.front_splits is None else self.front_splits + got
        self.lanes += np.asarray(lanes, np.int64)
        self.splits += np.asarray(splits, np.int64)
        for blk, ctas in split_ctas.items():
            self.split_ctas.setdefault(blk, set()).update(ctas)
        self.add_chains(cta_chain, cta_instructions)

    def add_chains(
        self, cta_chain: np.ndarray | None, cta_instructions: np.ndarray | None = None
    ) -> None:
        """A batch's CTAs' critical chains and instructions (:meth:`add`'s), added apart: the
        emulator adds them once the block costs are known (the SASS may come after the run)."""
        if cta_chain is not None and len(cta_chain):
            got = cta_chain.sum(axis=0)
            self.chain = got if self.chain is None else self.chain + got
            self.ctas += len(cta_chain)
        if cta_instructions is not None:
            self.critical_instructions += float(np.sum(cta_instructions))
            self.cta_critical.extend(float(v) for v in np.ravel(cta_instructions))


@dataclass(frozen=True)
class SimtLine:
    """One source line: warp instructions executed there and the active lanes summed over them."""

    file: str
    line: int
    warp_instructions: int
    thread_instructions: int

    @property
    def efficiency(self) -> float:
        slots = self.warp_instructions * WARP_LANES
        return self.thread_instructions / slots if slots else 1.0

    @property
    def lost_slots(self) -> int:
        return self.warp_instructions * WARP_LANES - self.thread_instructions


@dataclass(frozen=True)
class SimtLinePipes:
    """One line of the kernel's body: the SASS warp instructions issued there, by pipe
    (:func:`gpuadvise.ptx.pipes.pipe_work` of each PTX instruction times its warp executions).
    Code inlined into the kernel counts at the kernel body's line it is inlined through (the
    outermost location of its inlining chain); an instruction without a location of the kernel's
    file (none at all: a function without line information, such as the CUDA math library's
    ``__internal_accurate_pow`` that the PTX calls and the emulator inlines; line 0, compiler
    made; a header's line that nvcc wrote without its ``inlined_at``) counts at the kernel
    file's location last seen before it in program order, its call's, as PTX's ``.loc``
    does."""

    file: str
    line: int
    pipes: dict[str, float]

    @property
    def instructions(self) -> float:
        return float(sum(self.pipes.values()))


@dataclass(frozen=True)
class SimtBranch:
    """A branch that split warps. ``warp_executions``: times a warp executed it; ``splits``: times
    its lanes went both ways; ``split_ctas``: CTAs where it did; ``edge_only``: all of them at the
    grid's far edge (the last x, y or z CTA index of a dimension of several CTAs) with at most one
    split per warp of those CTAs (a bounds check); ``lost_slots``: the lane issue slots idle in
    the code it controls; ``exits``: one of its sides leaves the kernel; ``front_splits``: the
    splits whose two sides are each a contiguous run of the warp's active lanes (the taken
    lanes a prefix or a suffix of them: ``tid < bound``); ``data``: its condition (the ``@p``
    predicate, ``brx.idx``'s index) is computed from values the kernel loaded
    (:func:`gpuadvise.ptx.dataflow.data_registers`), not from the thread and CTA indices and the
    arguments alone; ``loops``: it is a loop's test (its region reaches back to it, or it leaves
    the kernel from inside a loop, a ``break`` to a ``return``: lanes leave the loop at different
    iterations); ``one_sided``: one of its sides is empty (it jumps
    straight to its reconvergence point: an ``if`` without an ``else``)."""

    file: str
    line: int
    ptx_line: int
    warp_executions: int
    splits: int
    split_ctas: int
    edge_only: bool
    lost_slots: int
    exits: bool
    front_splits: int = 0
    data: bool = False
    loops: bool = False
    one_sided: bool = False

    @property
    def split_fraction(self) -> float:
        return self.splits / self.warp_executions if self.warp_executions else 0.0


@dataclass(frozen=True)
class SerialRegion:
    """Blocks connected in the CFG that few threads of each CTA run (:data:`NARROW_SHARE`): a
    ``tid == 0`` section, a loop of one warp while the others wait, or a whole launch of one
    warp or less (``whole_launch``). Per traced CTA (means): ``threads`` that run it (active
    lanes per warp execution x the CTA's warps that ran it, weighed by warp instructions),
    ``warps`` of the CTA that ran it, ``cta_threads``; ``warp_instructions`` and
    ``thread_instructions`` (PTX, per CTA); what one warp that runs it adds to its own critical
    path: ``chain`` (links by latency class; ``chain_unordered`` without memory order) and
    ``issued`` instructions (:mod:`gpuadvise.ptx.chains`; its blocks run in at least half the
    CTAs, weighed by the share that do); ``pipes``: the CTA's warp
    instructions in it by pipe; ``lines``: its source lines, most warp instructions first (sums
    over the traced CTAs); ``looped``: it runs a block more than once per warp (a loop)."""

    lines: tuple[SimtLine, ...]
    threads: float
    warps: float
    cta_threads: int
    whole_launch: bool
    warp_instructions: float
    thread_instructions: float
    chain: dict[str, float]
    chain_unordered: dict[str, float]
    issued: float
    pipes: dict[str, float]
    looped: bool
    blocks: tuple[int, ...] = ()

    @property
    def lanes(self) -> float:
        """Active lanes per warp instruction."""
        w = self.warp_instructions
        return self.thread_instructions / w if w else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": [[ln.file, ln.line, ln.warp_instructions] for ln in self.lines],
            "threads": round(self.threads, 3),
            "warps": round(self.warps, 3),
            "cta_threads": self.cta_threads,
            "whole_launch": self.whole_launch,
            "warp_instructions": self.warp_instructions,
            "thread_instructions": self.thread_instructions,
            "chain": dict(self.chain),
            "issued": self.issued,
            "pipes": dict(self.pipes),
            "looped": self.looped,
        }


@dataclass(frozen=True)
class SimtProfile:
    """SIMT efficiency of one emulated launch (the sampled CTAs); ``regions``: its serial
    regions (:class:`SerialRegion`), most issued instructions first."""

    warp_instructions: int
    thread_instructions: int
    lines: tuple[SimtLine, ...]
    branches: tuple[SimtBranch, ...]
    launch_idle_slots: int = 0  # lanes idle from the launch on (partial warps)
    regions: tuple[SerialRegion, ...] = ()
    line_pipes: tuple[SimtLinePipes, ...] = ()  # issued work by pipe per kernel-body line

    @property
    def efficiency(self) -> float:
        slots = self.warp_instructions * WARP_LANES
        return self.thread_instructions / slots if slots else 1.0

    @property
    def issue_slots(self) -> int:
        return self.warp_instructions * WARP_LANES

    @property
    def lost_slots(self) -> int:
        return self.issue_slots - self.thread_instructions

    def line(self, file: str, line: int) -> SimtLine | None:
        for ln in self.lines:
            if ln.line == line and _same(ln.file, file):
                return ln
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "warp_instructions": self.warp_instructions,
            "thread_instructions": self.thread_instructions,
            "efficiency": round(self.efficiency, 4),
            "lines": [
                {
                    "file": ln.file,
                    "line": ln.line,
                    "warp_instructions": ln.warp_instructions,
                    "thread_instructions": ln.thread_instructions,
                    "efficiency": round(ln.efficiency, 4),
                }
                for ln in self.lines
            ],
            "branches": [
                {
                    "file": b.file,
                    "line": b.line,
                    "ptx_line": b.ptx_line,
                    "warp_executions": b.warp_executions,
                    "splits": b.splits,
                    "split_ctas": b.split_ctas,
                    "edge_only": b.edge_only,
                    "lost_slots": b.lost_slots,
                    "exits": b.exits,
                    "front_splits": b.front_splits,
                    "data": b.data,
                    "loops": b.loops,
                    "one_sided": b.one_sided,
                }
                for b in self.branches
            ],
            "regions": [r.to_dict() for r in self.regions],
        }


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.basename(a) == os.path.basename(b)


def _reachable(program: Program, p: int, stop: int | None = None) -> set[int]:
    """Blocks reachable from block ``p``'s successors without passing through ``stop``."""
    seen: set[int] = set()
    todo = [s for s in program.blocks[p].succs if s != stop]
    nb = len(program.blocks)
    while todo:
        b = todo.pop()
        if b in seen or b == stop or b >= nb:
            continue
        seen.add(b)
        todo.extend(program.blocks[b].succs)
    return seen


def _region(program: Program, p: int) -> set[int]:
    """Blocks reachable from branch block ``p``'s successors before its reconvergence point."""
    return _reachable(program, p, program.ipdom[p])


def _on_cycle(program: Program, p: int) -> bool:
    """Whether block ``p`` lies on a cycle of the control-flow graph (inside a loop)."""
    return p in _reachable(program, p)


def _condition_is_data(ins: Instr, data: frozenset[str]) -> bool:
    """Whether branch ``ins`` decides on loaded data: its guard predicate (``@p bra``) or its
    index (``brx.idx``) is a data register."""
    if ins.guard is not None:
        return ins.guard in data
    if ins.base == "brx" and ins.operands and isinstance(ins.operands[0], Reg):
        return ins.operands[0].name in data
    return False


def _cta_xyz(cta: int, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    gx, gy = grid[0], grid[1]
    return cta % gx, (cta // gx) % gy, cta // (gx * gy)


def simt_profile(
    program: Program,
    counts: SimtCounts,
    *,
    grid: tuple[int, int, int],
    threads_per_cta: int,
    costs: BlockCosts | None = None,
) -> SimtProfile:
    """The :class:`SimtProfile` of ``counts`` over ``program``'s blocks (see the module doc);
    its serial regions with the blocks' ``costs`` (none without them)."""
    files: dict[int, str] = dict(getattr(program.module, "files", {}) or {})
    blocks = program.blocks
    nb = len(blocks)
    warps = counts.warps[:nb]
    lanes = counts.lanes[:nb]
    block_ins = block_instructions(program)
    ninstr = np.array([len(x) for x in block_ins], np.int64)

    # per source line
    per_line: dict[tuple[str, int], list[int]] = {}
    for b, ins_list in enumerate(block_ins):
        if warps[b] == 0:
            continue
        for i in ins_list:
            loc = program.instrs[i].loc
            key = (files.get(loc.file, "?"), loc.line) if loc is not None else ("?", 0)
            acc = per_line.setdefault(key, [0, 0])
            acc[0] += int(warps[b])
            acc[1] += int(lanes[b])
    lines = tuple(
        SimtLine(f, ln, w, t) for (f, ln), (w, t) in sorted(per_line.items(), key=lambda kv: kv[0])
    )
    line_pipes = _line_pipes(program, block_ins, warps, files)
    warp_total = int((warps * ninstr).sum())
    thread_total = int((lanes * ninstr).sum())

    # lanes idle from the launch on: the last warp of a CTA whose size is not a multiple of 32
    wpc = -(-threads_per_cta // WARP_LANES)
    idle_per_warp = (wpc * WARP_LANES - threads_per_cta) / wpc if wpc else 0.0
    lost = (warps * WARP_LANES - lanes) * ninstr
    launch_idle = warps * ninstr * idle_per_warp
    lost_div = np.maximum(lost - launch_idle, 0.0)

    # branches that split warps, their regions, innermost first
    split_blocks = [b for b in range(nb) if counts.splits[b] > 0]
    regions = {p: _region(program, p) for p in split_blocks}
    exit_block = program.exit_block
    owner = np.full(nb, -1, np.int64)
    size = np.full(nb, np.iinfo(np.int64).max, np.int64)
    for p in split_blocks:
        r = regions[p]
        for b in r:
            if len(r) < size[b]:
                size[b] = len(r)
                owner[b] = p
    attributed = dict.fromkeys(split_blocks, 0.0)
    for b in range(nb):
        if owner[b] >= 0:
            attributed[int(owner[b])] += float(lost_div[b])

    def exits(p: int) -> bool:
        r = regions[p]
        return exit_block in r or any(blocks[b].term[0] == "exit" for b in r)

    exiting = [p for p in split_blocks if exits(p)]
    rest = float(lost_div[owner < 0].sum())
    total_exit_splits = sum(int(counts.splits[p]) for p in exiting)
    for p in exiting:
        attributed[p] += rest * int(counts.splits[p]) / total_exit_splits

    far = (grid[0] - 1, grid[1] - 1, grid[2] - 1)
    fronts = counts.front_splits
    data = data_registers(program.instrs) if split_blocks else frozenset()
    branches = []
    for p in split_blocks:
        blk = blocks[p]
        ins = program.instrs[blk.end - 1] if blk.end > blk.start else None
        loc = ins.loc if ins is not None else None
        ctas = counts.split_ctas.get(p, set())
        # a CTA at the grid's far edge: the last index of a dimension of more than one CTA (the
        # only CTA of a one-CTA grid is its last)
        multi = [d for d in range(3) if grid[d] > 1]
        on_edge = all(
            not multi or any(_cta_xyz(cta, grid)[d] == far[d] for d in multi) for cta in ctas
        )
        edge_only = bool(ctas) and on_edge and int(counts.splits[p]) <= len(ctas) * wpc
        branches.append(
            SimtBranch(
                file=files.get(loc.file, "?") if loc is not None else "?",
                line=loc.line if loc is not None else 0,
                ptx_line=ins.ptx_line if ins is not None else 0,
                warp_executions=int(warps[p]),
                splits=int(counts.splits[p]),
                split_ctas=len(ctas),
                edge_only=edge_only,
                lost_slots=round(attributed[p]),
                exits=exits(p),
                front_splits=int(fronts[p]) if fronts is not None else 0,
                data=ins is not None and _condition_is_data(ins, data),
                loops=p in regions[p] or (exits(p) and _on_cycle(program, p)),
                one_sided=program.ipdom[p] in blk.succs,
            )
        )
    branches.sort(key=lambda br: -br.lost_slots)
    return SimtProfile(
        warp_instructions=warp_total,
        thread_instructions=thread_total,
        lines=lines,
        branches=tuple(branches),
        launch_idle_slots=round(float(launch_idle.sum())),
        regions=()
        if costs is None
        else serial_regions(program, counts, costs, block_ins, files, grid, threads_per_cta),
        line_pipes=line_pipes,
    )


def serial_regions(
    program: Program,
    counts: SimtCounts,
    costs: BlockCosts,
    block_ins: list[list[int]],
    files: dict[int, str],
    grid: tuple[int, int, int],
    threads_per_cta: int,
) -> tuple[SerialRegion, ...]:
    """The serial regions (:class:`SerialRegion`) of a launch: its narrow blocks (few threads
    of each CTA run them, :data:`NARROW_SHARE`) joined along the CFG's edges, most issued
    instructions first; none without the CTAs' warp counts."""
    from gpuadvise.ptx.pipes import LATENCY_CLASSES, PIPES

    nb = len(program.blocks)
    ctas = counts.ctas
    if counts.cta_warps is None or not counts.cta_warps_known or ctas <= 0:
        return ()
    warps = counts.warps[:nb].astype(float)
    lanes = counts.lanes[:nb].astype(float)
    seen = counts.cta_warps[:nb].astype(float)
    ran = (warps > 0) & (seen > 0)
    launch_threads = grid[0] * grid[1] * grid[2] * threads_per_cta
    whole = launch_threads <= WARP_LANES
    per_warp = np.where(ran, lanes / np.maximum(warps, 1.0), 0.0)
    threads = per_warp * seen / ctas
    # in most CTAs: a block that a few CTAs run (the grid's edge) is rare, not serial, work
    common = seen >= 0.5 * ctas
    narrow = ran & common & (whole | (threads * NARROW_SHARE <= threads_per_cta))
    # components of the narrow blocks along the CFG's edges
    parent = list(range(nb))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for b in np.flatnonzero(narrow):
        for t in program.blocks[int(b)].succs:
            if t < nb and narrow[t]:
                parent[find(int(b))] = find(int(t))
    groups: dict[int, list[int]] = {}
    for b in np.flatnonzero(narrow):
        groups.setdefault(find(int(b)), []).append(int(b))
    ninstr = np.array([len(x) for x in block_ins], float)
    issued_b = costs.pipes[:nb].sum(axis=1)
    free = costs.chain if costs.unordered is None else costs.unordered
    out = []
    for blks in groups.values():
        ix = np.array(blks)
        # executions by one warp that runs the block, in a CTA that does (weighed, for the
        # chain, by the share of the CTAs that do)
        runs = warps[ix] / seen[ix]
        share = np.minimum(seen[ix] / ctas, 1.0)
        w_instr = warps[ix] * ninstr[ix]
        chain = (runs * share) @ costs.chain[ix]
        unordered = (runs * share) @ free[ix]
        pipes = warps[ix] @ costs.pipes[ix] / ctas
        per_line: dict[tuple[str, int], list[int]] = {}
        for blk in blks:
            for i in block_ins[blk]:
                loc = program.instrs[i].loc
                key = (files.get(loc.file, "?"), loc.line) if loc is not None else ("?", 0)
                acc = per_line.setdefault(key, [0, 0])
                acc[0] += int(warps[blk])
                acc[1] += int(lanes[blk])
        lines = tuple(
            SimtLine(f, ln, w, t)
            for (f, ln), (w, t) in sorted(per_line.items(), key=lambda kv: (-kv[1][0], kv[0]))
        )
        weight = w_instr.sum()
        out.append(
            SerialRegion(
                lines=lines,
                threads=float((threads[ix] * w_instr).sum() / weight) if weight else 0.0,
                warps=float((seen[ix] / ctas * w_instr).sum() / weight) if weight else 0.0,
                cta_threads=int(threads_per_cta),
                whole_launch=bool(whole),
                warp_instructions=float(w_instr.sum() / ctas),
                thread_instructions=float((lanes[ix] * ninstr[ix]).sum() / ctas),
                chain={c: float(v) for c, v in zip(LATENCY_CLASSES, chain, strict=True) if v},
                chain_unordered={
                    c: float(v) for c, v in zip(LATENCY_CLASSES, unordered, strict=True) if v
                },
                issued=float((runs * share) @ issued_b[ix]),
                pipes={p: float(v) for p, v in zip(PIPES, pipes, strict=True) if v},
                looped=bool((runs > 1.0 + 1e-9).any()),
                blocks=tuple(blks),
            )
        )
    out.sort(key=lambda r: -r.issued)
    return tuple(out)


def _line_pipes(
    program: Program, block_ins: list[list[int]], warps: np.ndarray, files: dict[int, str]
) -> tuple[SimtLinePipes, ...]:
    """The :class:`SimtLinePipes` of the executed blocks (see there for the attribution)."""
    # each instruction's kernel-body location, in program order (the last one seen when it has
    # none in the kernel's file: the file of the program's first location)
    where: list[tuple[str, int]] = []
    last = ("?", 0)
    kernel_file: int | None = None
    for ins in program.instrs:
        loc = ins.call_sites[-1] if ins.call_sites else ins.loc
        if loc is not None and loc.line > 0:
            if kernel_file is None:
                kernel_file = loc.file
            if loc.file == kernel_file:
                last = (files.get(loc.file, "?"), loc.line)
        where.append(last)
    out: dict[tuple[str, int], dict[str, float]] = {}
    for b, ins_list in enumerate(block_ins):
        n = float(warps[b])
        if n == 0:
            continue
        for i in ins_list:
            acc = out.setdefault(where[i], {})
            for pipe, k in pipe_work(program.instrs[i]):
                acc[pipe] = acc.get(pipe, 0.0) + k * n
    return tuple(SimtLinePipes(f, ln, p) for (f, ln), p in sorted(out.items()) if p)


def _slow_paths(
    program: Program, counts: SimtCounts, execs: np.ndarray, ctas: float, warps_per_cta: int
) -> tuple[dict[str, float], dict[str, float], float]:
    """Per CTA: the warp instructions by pipe of ptxas's double-division slow paths
    (:mod:`gpuadvise.ptx.slow_paths`), the links they add to a warp's chain, and the
    instructions they add to it: for each division, the share of its traced warp executions with
    a lane on the slow path times its block's (loop-weighted) warp executions; a warp's share of
    them on its chain (the CTA's warps alike)."""
    from gpuadvise.ptx.slow_paths import SLOW_LINKS, SLOW_WORK

    pipes: dict[str, float] = {}
    chain: dict[str, float] = {}
    if not counts.slow_div:
        return pipes, chain, 0.0
    block_of = {i: b for b, blk in enumerate(program.blocks) for i in blk.body}
    trips = 0.0  # slow-path trips per CTA
    for i, (ran, slow) in counts.slow_div.items():
        b = block_of.get(i)
        if b is None or ran <= 0 or slow <= 0:
            continue
        trips += float(execs[b]) * slow / ran / ctas
    if trips <= 0:
        return pipes, chain, 0.0
    for p, k in SLOW_WORK:
        pipes[p] = pipes.get(p, 0.0) + k * trips
    per_warp = trips / max(warps_per_cta, 1)
    for c, k in SLOW_LINKS:
        chain[c] = chain.get(c, 0.0) + k * per_warp
    return pipes, chain, per_warp * sum(k for _, k in SLOW_WORK)


def kernel_work(
    program: Program,
    costs: BlockCosts,
    counts: SimtCounts,
    *,
    total_ctas: int,
    warps_per_cta: int,
    ctas_per_sm: int,
) -> KernelWork | None:
    """The execution model's input from the emulator's counts: each block's warp executions
    times its instructions by pipe and its shared accesses, and the critical warps' chains, per
    traced CTA (:class:`~gpuadvise.model.execution.KernelWork`); None when no CTA ran."""
    from gpuadvise.model.execution import KernelWork
    from gpuadvise.ptx.parser import Reg
    from gpuadvise.ptx.pipes import LATENCY_CLASSES, PIPES

    if counts.ctas <= 0 or counts.chain is None:
        return None
    nb = len(program.blocks)
    execs = counts.warps[:nb].astype(float)
    pipes = execs @ costs.pipes[:nb]
    shared = execs @ costs.shared[:nb]
    spills = execs @ costs.spills[:nb] if costs.spills is not None else np.zeros(6)
    n = float(counts.ctas)
    width = len(LATENCY_CLASSES)
    free = counts.chain[width : 2 * width] if len(counts.chain) >= 2 * width else None
    grid_size = any(
        isinstance(op, Reg) and op.name.startswith("%nctaid")
        for ins in program.instrs
        for op in ins.operands
    )
    chain = {c: float(v) / n for c, v in zip(LATENCY_CLASSES, counts.chain[:width], strict=True)}
    unordered = (
        None
        if free is None
        else {c: float(v) / n for c, v in zip(LATENCY_CLASSES, free, strict=True)}
    )
    # a PTX with local accesses: the chain were they register moves, then its local links
    # (gpuadvise.ptx.chains.BlockCosts.registers)
    moved = counts.chain[2 * width :] if len(counts.chain) == 3 * width + 1 else None
    in_registers = (
        None
        if moved is None
        else {c: float(v) / n for c, v in zip(LATENCY_CLASSES, moved[:width], strict=True)}
    )
    slow_pipes, slow_chain, slow_issued = _slow_paths(program, counts, execs, n, warps_per_cta)
    for c, v in slow_chain.items():
        chain[c] = chain.get(c, 0.0) + v
        if unordered is not None:
            unordered[c] = unordered.get(c, 0.0) + v
        if in_registers is not None:
            in_registers[c] = in_registers.get(c, 0.0) + v
    all_pipes = {p: float(v) / n for p, v in zip(PIPES, pipes, strict=True)}
    for p, v in slow_pipes.items():
        all_pipes[p] = all_pipes.get(p, 0.0) + v
    return KernelWork(
        pipes={p: v for p, v in all_pipes.items() if v},
        chain={c: v for c, v in chain.items() if v},
        chain_unordered=None if unordered is None else {c: v for c, v in unordered.items() if v},
        critical_instructions=counts.critical_instructions / n + slow_issued,
        slow_paths=slow_pipes,
        slow_chain=slow_chain,
        ctas=int(total_ctas),
        warps_per_cta=int(warps_per_cta),
        ctas_per_sm=int(ctas_per_sm),
        ctas_traced=int(counts.ctas),
        cta_critical=tuple(counts.cta_critical) if len(counts.cta_critical) == n else (),
        shared_requests=float(shared[0]) / n,
        shared_wavefronts=float(shared[1]) / n,
        reads_grid_size=grid_size,
        counts_from=costs.counts_from,
        local_requests=float(spills[0]) / n,
        local_wavefronts=float(spills[1]) / n,
        local_store_wavefronts=float(spills[2]) / n,
        spill_requests=float(spills[3]) / n,
        spill_wavefronts=float(spills[4]) / n,
        spill_store_wavefronts=float(spills[5]) / n,
        local_links=0.0 if moved is None else float(moved[width]) / n,
        chain_in_registers=None
        if in_registers is None
        else {c: v for c, v in in_registers.items() if v},
    )
