"""Whether a loop's results steer the code: may the emulator sample it without moving what it traces?

A sampled loop (:mod:`gpuadvise.ptx.sampling`) runs its first iterations, skips to its last and
weighs those it ran for the ones skipped. The registers that move by a fixed step (its counter,
its indices, its addresses) are moved on by the skip; every other value it carries from one
iteration to the next (a sum, a running maximum, a hash) keeps the value it had, and the memory
the skipped iterations would have written is not written. Where those wrong values only reach
the loop's stores, the trace is the full run's, weighted. Where they reach a branch (HeCBench
perplexity's ``sigmas_kernel``: the sums of its two 200-iteration loops decide its bisection and
the epoch loop's ``break``), the lanes take other paths than the kernel's: a sampled run there
traced 47.5 M lane instructions against the full run's 29.4 M.

:func:`steering_loops` finds, from the PTX alone, the loops whose sampling may move the trace
that way. A value is *wrong* when it may differ after a skip:

- a register the loop writes and reads at the start of an iteration (carried from the one
  before: upward-exposed at its header, a guarded write counting as a read of the old value)
  that is not an *induction*: an integer register every write of which in the loop is an
  unguarded ``add``/``sub`` of itself and a literal or a register the loop does not write (the
  skip moves those on exactly);
- a value loaded (``ld``, ``atom``, a texture or surface read) from a state space that the loop
  writes, or that a store anywhere fills with a wrong value or at a wrong address (the generic
  space aliases global, shared and local);
- whatever any instruction computes from a wrong value or under a wrong guard (flow-insensitive,
  over the whole kernel, as :mod:`gpuadvise.ptx.dataflow`: a register nvcc reuses for unrelated
  values can only make the answer more cautious).

The loop *steers* when a wrong value reaches a branch condition anywhere in the kernel (a
conditional branch's or a guarded ``ret``/``exit``'s predicate, an indexed branch's register),
the guard of a memory instruction or a barrier, or the address of a memory instruction: then the
lanes' paths or the addresses they touch would move with the skip.

Pure: it reads the :class:`~gpuadvise.ptx.cfg.Program` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuadvise.ptx.cfg import Program
from gpuadvise.ptx.dataflow import MEMORY_BASES, defs_uses
from gpuadvise.ptx.loops import INT_TYPES, Loop, dominators
from gpuadvise.ptx.parser import Addr, Imm, Instr, Reg

__all__ = ["steering_loops", "steers"]

# instructions that write memory (their state space in their opcode's modifiers)
_WRITES = frozenset({"st", "atom", "red", "sust", "cp"})
# instructions whose result is read from memory
_READS = frozenset({"ld", "ldu", "atom", "tex", "suld", "tld4"})
# state spaces nothing in a kernel writes (kernel arguments, constant banks)
_READ_ONLY = frozenset({"param", "const"})
_SPACES = ("global", "shared", "local")


def _spaces(ins: Instr) -> frozenset[str]:
    """The state spaces an instruction's memory access may touch (generic: all three)."""
    mods = set(ins.mods)
    if mods & _READ_ONLY:
        return frozenset()
    if ins.base == "cp":  # cp.async.*.shared.global: writes shared
        return frozenset({"shared"})
    if ins.base in ("tex", "tld4", "suld", "sust"):
        return frozenset({"global"})
    named = frozenset(s for s in _SPACES if s in mods)
    return named or frozenset(_SPACES)


def _address(ins: Instr) -> str | None:
    for op in ins.operands:
        if isinstance(op, Addr) and isinstance(op.base, Reg):
            return op.base.name
    return None


class _Reach:
    """The blocks reachable from a block (itself included), found once each."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.found: dict[int, frozenset[int]] = {}

    def __call__(self, b: int) -> frozenset[int]:
        out = self.found.get(b)
        if out is None:
            seen, todo = {b}, [b]
            while todo:
                for s in self.program.blocks[todo.pop()].succs:
                    if s not in seen:
                        seen.add(s)
                        todo.append(s)
            out = self.found[b] = frozenset(seen)
        return out


def _carried(program: Program, loop: Loop, kernel: _Kernel | None = None) -> set[str]:
    """Registers the loop writes whose value at its header may come from the iteration before
    (upward-exposed at the header along paths that stay in one iteration). ``kernel``: the
    program's instruction tables, when the caller has them."""
    k = _Kernel(program) if kernel is None else kernel
    exposed: dict[int, set[str]] = {}
    killed: dict[int, set[str]] = {}
    written: set[str] = set()
    for b in loop.blocks:
        blk = program.blocks[b]
        used: set[str] = set()
        kill: set[str] = set()
        for i in range(blk.start, blk.end):
            dest, srcs = k.dests[i], k.srcs[i]
            used.update(r for r in srcs if r not in kill)
            if k.guarded[i]:  # a guarded write keeps the old value where it is off
                used.update(r for r in dest if r not in kill)
            else:
                kill.update(dest)
            written.update(dest)
        exposed[b], killed[b] = used, kill
    live = {b: set(exposed[b]) for b in loop.blocks}
    changed = True
    while changed:
        changed = False
        for b in loop.blocks:
            out: set[str] = set()
            for s in program.blocks[b].succs:
                if s in loop.blocks and s != loop.header:
                    out |= live[s]
            new = exposed[b] | (out - killed[b])
            if new != live[b]:
                live[b] = new
                changed = True
    return live[loop.header] & written


def _inductions(
    program: Program,
    loop: Loop,
    candidates: set[str],
    every: frozenset[int],
    kernel: _Kernel | None = None,
) -> set[str]:
    """The ``candidates`` the skip moves on exactly: integer registers that move by the same
    step every iteration. Each is written once in the loop, unguarded, in a block every
    iteration runs (``every``), by an ``add``/``sub`` of a literal or of a register the loop
    does not write to itself plus such steps (nvcc's unrolled pointer walks: ``p1 = p + s;
    p2 = p1 + s; ...; p = p3 + s``). ``kernel``: the program's instruction tables, when the
    caller has them."""
    k = _Kernel(program) if kernel is None else kernel
    writes: dict[str, list[tuple[Instr, int]]] = {}
    for b in loop.blocks:
        blk = program.blocks[b]
        for i in range(blk.start, blk.end):
            ins = program.instrs[i]
            for r in k.dests[i]:
                writes.setdefault(r, []).append((ins, b))

    def invariant(x: object) -> bool:
        return isinstance(x, Imm) or (isinstance(x, Reg) and x.name not in writes)

    def stepped(x: str, r: str, depth: int) -> bool:
        """``x`` holds ``r`` (its value at the iteration's start or end) plus invariants."""
        if x == r:
            return True
        ws = writes.get(x, [])
        return depth <= 64 and len(ws) == 1 and written_as_step(*ws[0], r, depth)

    def written_as_step(ins: Instr, b: int, r: str, depth: int) -> bool:
        """``ins`` (in block ``b``) writes ``r`` plus invariants, once every iteration."""
        if ins.guard is not None or b not in every:
            return False
        ops = ins.operands
        if ins.base == "mov" and len(ops) == 2:
            return isinstance(ops[1], Reg) and stepped(ops[1].name, r, depth + 1)
        if ins.base not in ("add", "sub") or len(ops) != 3:
            return False
        a, c = ops[1], ops[2]
        if isinstance(a, Reg) and invariant(c) and stepped(a.name, r, depth + 1):
            return True
        return (
            ins.base == "add"
            and isinstance(c, Reg)
            and invariant(a)
            and stepped(c.name, r, depth + 1)
        )

    out = set()
    for r in candidates:
        rtype = program.regs.get(r)
        ws = writes.get(r, [])
        if (rtype in INT_TYPES or rtype in ("s8", "u8")) and len(ws) == 1:
            ins, b = ws[0]
            # (a write of r itself alone, mov r, r, is not a step: r is not carried then)
            if written_as_step(ins, b, r, 0):
                out.add(r)
    return out


def _every_iteration(loop: Loop, idom: Sequence[int]) -> frozenset[int]:
    """The loop's blocks every iteration runs: those that dominate its latch."""
    out, x = set(), loop.latch
    while x in loop.blocks:
        out.add(x)
        if x == loop.header:
            break
        x = idom[x]
    return frozenset(out)


def steers(
    program: Program,
    loop: Loop,
    idom: Sequence[int] | None = None,
    kernel: _Kernel | None = None,
) -> int | None:
    """The index of the first instruction whose branch condition, guard or address a value
    that sampling ``loop`` may leave wrong reaches (see the module docstring); None: none does,
    the loop may be sampled without moving the kernel's paths or addresses. ``idom``: the
    program's immediate dominators, when the caller has them; ``kernel``: its instruction
    tables (:class:`_Kernel`), when the caller has them (:func:`steering_loops`: made once for
    every loop of the program).

    The wrong values are the least set closed under the rules of the module docstring, found
    by a worklist: an instruction is looked at again only when one of its sources, or the
    memory it reads, has just become wrong, and its effects are made once, the first time it is
    tainted (a sweep over every instruction until none changed cost each loop a few passes over
    the whole kernel: HeCBench contraction's variant, 44 loops of ~4,400 instructions, 1.5
    CPU-s an emulation)."""
    k = _Kernel(program) if kernel is None else kernel
    every = _every_iteration(loop, dominators(program) if idom is None else idom)
    carried = _carried(program, loop, k)
    wrong = carried - _inductions(program, loop, carried, every, k)
    block_of, spaces = k.block_of, k.spaces
    # per state space, the blocks that may run after a wrong value was written there (a load
    # reads it only on a path from the store: the loop's own stores reach its next iterations)
    dirty: dict[str, set[int]] = {s: set() for s in _SPACES}
    todo: list[int] = []
    tainted = [False] * len(k.dests)

    def soil(s: str, b: int) -> None:
        """Blocks after ``b`` dirty in space ``s``: their reads of ``s`` looked at again."""
        new = k.after(b) - dirty[s]
        if new:
            dirty[s] |= new
            for blk in new:
                todo.extend(i for i in k.reads_in.get(blk, ()) if s in spaces[i])

    def wrong_now(regs: tuple[str, ...]) -> None:
        for r in regs:
            if r not in wrong:
                wrong.add(r)
                todo.extend(k.users.get(r, ()))

    for b in loop.blocks:
        blk = program.blocks[b]
        for i in range(blk.start, blk.end):
            if k.writes[i]:
                for s in spaces[i]:
                    soil(s, b)
    todo.extend(range(len(k.dests)))
    while todo:
        i = todo.pop()
        if tainted[i]:
            continue
        b = block_of[i]
        if not any(r in wrong for r in k.srcs[i]) and not (
            k.reads[i] and any(b in dirty[s] for s in spaces[i])
        ):
            continue
        tainted[i] = True
        if k.writes[i]:
            for s in spaces[i]:
                soil(s, b)
        wrong_now(k.dests[i])
    if not wrong:
        return None
    for i, regs in k.sensitive:
        if any(r in wrong for r in regs):
            return i
    return None


class _Kernel:
    """What :func:`steers` reads of every instruction of a program, made once for all its
    loops: each instruction's registers written and read (:func:`~gpuadvise.ptx.dataflow.
    defs_uses`), block, state spaces, whether it writes or reads memory; the instructions
    reading each register; the memory reads of each block; and, in order, the instructions a
    wrong value must not reach with the registers that decide it there (a branch's, a barrier's
    or a memory instruction's guard, an indexed branch's register, a memory instruction's
    address register)."""

    def __init__(self, program: Program) -> None:
        instrs = program.instrs
        n = len(instrs)
        self.after = _Reach(program)
        self.block_of = [0] * n
        for blk in program.blocks:
            for i in range(blk.start, blk.end):
                self.block_of[i] = blk.index
        self.dests: list[tuple[str, ...]] = []
        self.srcs: list[tuple[str, ...]] = []
        self.guarded: list[bool] = []
        self.writes: list[bool] = []
        self.reads: list[bool] = []
        self.spaces: list[frozenset[str]] = []
        self.users: dict[str, list[int]] = {}
        self.reads_in: dict[int, list[int]] = {}
        self.sensitive: list[tuple[int, tuple[str, ...]]] = []
        for i, ins in enumerate(instrs):
            base = ins.base
            dest, srcs = defs_uses(ins)
            self.dests.append(dest)
            self.srcs.append(srcs)
            self.guarded.append(ins.guard is not None)
            writes, reads = base in _WRITES, base in _READS
            self.writes.append(writes)
            self.reads.append(reads)
            self.spaces.append(_spaces(ins) if writes or reads else frozenset())
            for r in set(srcs):
                self.users.setdefault(r, []).append(i)
            if reads:
                self.reads_in.setdefault(self.block_of[i], []).append(i)
            regs: list[str] = []
            if ins.guard is not None and (
                base in ("bra", "brx", "ret", "exit", "bar", "barrier") or base in MEMORY_BASES
            ):
                regs.append(ins.guard)
            if base == "brx" and ins.operands and isinstance(ins.operands[0], Reg):
                regs.append(ins.operands[0].name)
            if base in MEMORY_BASES:
                addr = _address(ins)
                if addr is not None:
                    regs.append(addr)
            if regs:
                self.sensitive.append((i, tuple(regs)))


def steering_loops(program: Program, loops: Sequence[Loop]) -> frozenset[int]:
    """The latches of the sampleable ``loops`` whose results steer the kernel (:func:`steers`)."""
    idom = dominators(program)
    kernel = _Kernel(program)
    return frozenset(
        lp.latch for lp in loops if lp.sampleable and steers(program, lp, idom, kernel) is not None
    )
