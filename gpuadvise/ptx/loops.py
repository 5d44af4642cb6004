"""The loops of a kernel's CFG, and which of them the emulator may sample: :func:`find_loops`.

A loop is a natural loop: a back edge ``latch -> header`` whose header dominates the latch, and
every block that reaches the latch without passing the header. Loops with one header and
several latches (a ``continue``) are one loop. For each, from the PTX alone:

- where it is (its header's source line), whether it holds a barrier, its exits (none: it is
  endless);
- its *exit test*, when the loop is left only at its latch (``@%p bra HEADER``, or ``@!%p``, or
  ``@%p bra EXIT``), by a predicate the latch computes with one ``setp.CMP.TYPE %p, a, b``: the
  comparison, the type and the operands (registers or literals), and which outcome continues;
- whether the bound or the counter is *data* (read from memory, :mod:`gpuadvise.ptx.dataflow`):
  a loop bound read from a buffer that is poisoned or random never ends, or ends late;
- ``sampleable``: the emulator may run the first iterations of a long loop and skip to its last
  (:mod:`gpuadvise.ptx.emulator`, "Long loops") only when it has one latch, no other exit (no
  ``break``, no ``return``), no barrier, and an integer exit test; ``why_not`` says what else.

Pure: it reads the :class:`~gpuadvise.ptx.cfg.Program` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuadvise.ptx.cfg import Program, immediate_post_dominators
from gpuadvise.ptx.parser import Imm, Operand, PredOut, Reg

__all__ = [
    "INT_TYPES",
    "Loop",
    "continues",
    "cyclic_blocks",
    "dominators",
    "find_loops",
    "first_exit",
    "innermost",
]

INT_TYPES = frozenset({"s16", "s32", "s64", "u16", "u32", "u64", "b16", "b32", "b64"})
_CMPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"})


@dataclass(frozen=True)
class Loop:
    """A natural loop (see the module docstring). ``blocks``: its blocks; ``latch``: the block
    with the back edge (the last one when there are several); ``setp``: the instruction index of
    its exit test (None: no usable test); ``cmp``/``type``/``a``/``b``: the test's comparison,
    PTX type and operands; ``continues_when``: the test's value that stays in the loop;
    ``data_bound``: an operand of the test is read from memory; ``endless``: no edge leaves it
    (no exit test, no ``break``, no guarded ``return``): a warp that enters it never ends."""

    header: int
    latch: int
    blocks: frozenset[int]
    has_barrier: bool
    single_exit: bool
    setp: int | None = None
    cmp: str = ""
    type: str = ""
    a: Operand | None = None
    b: Operand | None = None
    continues_when: bool = True
    data_bound: bool = False
    why_not: str | None = None  # why the emulator may not sample it (None: it may)
    endless: bool = False
    # its only exit is an integer test at its latch (it may hold a barrier): the iterations a
    # lane has left can be counted ahead once its operands move by fixed steps
    countable: bool = False
    # instructions every iteration executes at least, as the emulator counts a warp's (the
    # blocks that dominate the latch, barriers not counted)
    floor: int = 0

    @property
    def sampleable(self) -> bool:
        return self.why_not is None

    def bound_text(self) -> str:
        """What the test compares with, in words: ``the constant 2048`` or ``a register``."""
        for op in (self.b, self.a):
            if isinstance(op, Imm):
                return f"the compile-time constant {op.value}"
        return "a value read from memory" if self.data_bound else "a value computed at run time"


def dominators(program: Program) -> list[int]:
    """The immediate dominator of each block (the entry's is the virtual root ``len(blocks)``),
    as the post-dominators of the reversed graph."""
    n = len(program.blocks)
    preds: list[list[int]] = [[] for _ in range(n)]
    for b in program.blocks:
        for s in b.succs:
            preds[s].append(b.index)
    # reversed: a block's "successors" are its predecessors; the entry has none (it "exits")
    return immediate_post_dominators([tuple(p) for p in preds])


def _dominates(idom: Sequence[int], a: int, b: int) -> bool:
    root = len(idom)
    seen = 0
    while b != a and b != root and seen <= len(idom):
        b = idom[b]
        seen += 1
    return b == a


def find_loops(program: Program) -> tuple[Loop, ...]:
    """Every natural loop of ``program``, innermost first (fewest blocks)."""
    from gpuadvise.ptx.dataflow import data_registers

    blocks = program.blocks
    idom = dominators(program)
    preds: list[list[int]] = [[] for _ in range(len(blocks))]
    for b in blocks:
        for s in b.succs:
            preds[s].append(b.index)
    latches: dict[int, list[int]] = {}
    for b in blocks:
        for h in b.succs:
            if h <= b.index and _dominates(idom, h, b.index):
                latches.setdefault(h, []).append(b.index)
    data = data_registers(program.instrs)
    loops = []
    for header, ls in latches.items():
        body = {header}
        todo = [x for x in ls if x != header]
        body.update(todo)
        while todo:
            x = todo.pop()
            for p in preds[x]:
                if p not in body:
                    body.add(p)
                    todo.append(p)
        latch = max(ls)
        exits = {s for x in body for s in blocks[x].succs if s not in body}
        exiting = [x for x in body if any(s not in body for s in blocks[x].succs)]
        barrier = any(blocks[x].term[0] == "barrier" for x in body)
        single = len(ls) == 1 and exiting == [latch] and len(exits) == 1
        floor, x = 0, latch
        while True:
            blk = blocks[x]
            if blk.term[0] != "barrier":
                floor += len(blk.body) + (0 if blk.term[0] == "fall" else 1)
            if x == header or idom[x] not in body:
                break
            x = idom[x]
        loop = Loop(header, latch, frozenset(body), barrier, single, endless=not exits, floor=floor)
        loops.append(_with_test(loop, program, data))
    return tuple(sorted(loops, key=lambda lp: (len(lp.blocks), lp.header)))


def cyclic_blocks(program: Program, loops: Sequence[Loop] | None = None) -> dict[int, int]:
    """The blocks in some loop (:func:`find_loops`, or ``loops`` already found), each with its
    outermost loop's header: the loops of one nest share a number."""
    found = find_loops(program) if loops is None else loops
    out: dict[int, int] = {}
    for loop in sorted(found, key=lambda lp: -len(lp.blocks)):  # outermost first
        for b in loop.blocks:
            out.setdefault(b, loop.header)
    return out


def _with_test(loop: Loop, program: Program, data: frozenset[str]) -> Loop:
    """``loop`` with its exit test read from the latch, and why it cannot be sampled."""
    from dataclasses import replace

    blk = program.blocks[loop.latch]
    term = blk.term
    if term[0] != "cbra":
        return replace(loop, why_not="its back edge is not a conditional branch")
    _, guard, neg, taken, fall = term
    setp = None
    for i in reversed(blk.body):
        ins = program.instrs[i]
        dest = ins.operands[0] if ins.operands else None
        names = (
            {dest.name}
            if isinstance(dest, Reg)
            else {dest.value.name, dest.pred.name}
            if isinstance(dest, PredOut)
            else set()
        )
        if str(guard) in names:
            setp = i if ins.base == "setp" else None
            break
    if setp is None:
        return replace(loop, why_not="its exit test is not one comparison in the latch")
    ins = program.instrs[setp]
    mods = ins.mods
    cmp = next((m for m in mods if m in _CMPS), "")
    ptype = mods[-1] if mods else ""
    a, b = (ins.operands[1], ins.operands[2]) if len(ins.operands) >= 3 else (None, None)
    stays = int(taken) == loop.header or int(taken) in loop.blocks
    loop = replace(
        loop,
        setp=setp,
        cmp=cmp,
        type=ptype,
        a=a,
        b=b,
        # @%p bra HEADER stays when %p is true; @!%p bra HEADER when false; @%p bra EXIT the
        # other way round
        continues_when=(not neg) if stays else bool(neg),
        data_bound=any(isinstance(x, Reg) and x.name in data for x in (a, b)),
    )
    test_why = None
    if len(ins.operands) != 3 or not cmp or ptype not in INT_TYPES:
        test_why = f"its exit test is not an integer comparison ({ins.opcode})"
    elif not all(isinstance(x, Reg | Imm) for x in (a, b)):
        test_why = "its exit test compares something other than registers and literals"
    elif int(fall) in loop.blocks and int(taken) in loop.blocks:
        test_why = "its exit test does not leave the loop"
    why = None
    if not loop.single_exit:
        why = "it has more than one exit (a break or a return) or more than one back edge"
    elif loop.has_barrier:
        why = "it holds a barrier"
    else:
        why = test_why
    return replace(loop, why_not=why, countable=loop.single_exit and test_why is None)


def innermost(loops: Sequence[Loop], block: int) -> Loop | None:
    """The innermost loop holding ``block`` (None: not in a loop)."""
    return next((lp for lp in loops if block in lp.blocks), None)


def first_exit(d: object, dd: object, cmp: str, continues_when: bool) -> object:
    """Per lane, the smallest ``j >= 1`` at which a loop whose test compares ``x_j`` with 0,
    ``x_j = d + j * dd`` (``d``, ``dd``: int64 arrays; unsigned comparisons on values that were
    made unsigned), leaves it: the test's value differs from ``continues_when``; -1 where it
    never does (the counter does not move towards the bound)."""
    import numpy as np

    d = np.asarray(d, dtype=np.int64)
    dd = np.asarray(dd, dtype=np.int64)
    # leaving: x_j OP 0 for the OP that is the test's negation when it continues on true
    op = {"lt": "lt", "lo": "lt", "le": "le", "ls": "le", "gt": "gt", "hi": "gt", "ge": "ge",
          "hs": "ge", "eq": "eq", "ne": "ne"}[cmp]  # fmt: skip
    if continues_when:
        op = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}[op]
    # everything as "first j >= 1 with s_j >= 0", s_j = e + j * de
    never = np.full(d.shape, -1, np.int64)
    if op in ("ge", "gt", "le", "lt"):
        e, de = (d, dd) if op in ("ge", "gt") else (-d, -dd)
        if op in ("gt", "lt"):
            e = e - 1
        out = never.copy()
        now = e + de >= 0
        out[now] = 1
        up = ~now & (de > 0)
        # e + j de >= 0  <=>  j >= -e / de
        out[up] = np.maximum(1, -(e[up] // de[up]))
        return out
    if op == "eq":
        out = never.copy()
        zero = dd == 0
        out[zero & (d == 0)] = 1
        moving = ~zero & (d % np.where(zero, 1, dd) == 0)
        j = np.where(moving, -d // np.where(zero, 1, dd), -1)
        out[moving & (j >= 1)] = j[moving & (j >= 1)]
        return out
    # ne: leaves at the first j where x_j != 0
    out = np.where(d + dd != 0, 1, np.where(dd != 0, 2, -1)).astype(np.int64)
    return out


def continues(d: object, cmp: str, continues_when: bool) -> object:
    """Per lane, whether a loop whose test compares ``d`` (int64: ``a - b``) with 0 stays in the
    loop at this test."""
    import numpy as np

    d = np.asarray(d, dtype=np.int64)
    value = {
        "lt": d < 0, "lo": d < 0, "le": d <= 0, "ls": d <= 0, "gt": d > 0, "hi": d > 0,
        "ge": d >= 0, "hs": d >= 0, "eq": d == 0, "ne": d != 0,
    }[cmp]  # fmt: skip
    return value == continues_when


def wrap64(x: int) -> int:
    """A Python integer as the int64 numpy arithmetic makes of it (two's complement wrap)."""
    return ((x + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def first_exit_one(d: int, dd: int, cmp: str, continues_when: bool) -> int:
    """:func:`first_exit` of one lane, in Python integers (``d``, ``dd``: int64 values): the
    same steps, each wrapped to int64 as numpy's arithmetic is (the scalar form of a one-warp
    latch look, where a dozen numpy calls on one value cost more than the look)."""
    op = {"lt": "lt", "lo": "lt", "le": "le", "ls": "le", "gt": "gt", "hi": "gt", "ge": "ge",
          "hs": "ge", "eq": "eq", "ne": "ne"}[cmp]  # fmt: skip
    if continues_when:
        op = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}[op]
    if op in ("ge", "gt", "le", "lt"):
        e, de = (d, dd) if op in ("ge", "gt") else (wrap64(-d), wrap64(-dd))
        if op in ("gt", "lt"):
            e = wrap64(e - 1)
        if wrap64(e + de) >= 0:
            return 1
        if de > 0:
            return max(1, wrap64(-wrap64(e // de)))
        return -1
    if op == "eq":
        if dd == 0:
            return 1 if d == 0 else -1
        if d % dd == 0:
            j = wrap64(wrap64(-d) // dd)
            return j if j >= 1 else -1
        return -1
    # ne
    return 1 if wrap64(d + dd) != 0 else (2 if dd != 0 else -1)
