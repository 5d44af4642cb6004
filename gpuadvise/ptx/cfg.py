"""From a parsed kernel to an executable program: calls inlined, basic blocks, post-dominators.

Calls (``call.uni``) of functions defined in the module are inlined: the callee's registers,
labels, local variables and call-sequence parameters get names unique to the call site, its formal
parameters become the caller's argument symbols, and ``ret`` becomes a branch to the instruction
after the call. Indirect and recursive calls stay as ``call`` instructions that fail when executed;
calls of ``vprintf`` (printf) are kept and ignored, ``__assertfail`` fails with the call's line.

Basic blocks end at branches, ``ret``/``exit`` and ``brx.idx``; barriers (``bar.sync``,
``barrier.sync``, ``bar.red`` ...) are blocks of their own, so that the scheduler can hold warps
there. A guarded ``ret``/``exit`` is a conditional branch to a synthetic exit block.

Reconvergence points are immediate post-dominators (:func:`reconvergence_points`: in the graph
without the paths that only exit the kernel), computed with the Cooper-Harvey-Kennedy algorithm on
the reversed graph rooted at a virtual exit node (``VEXIT``). Blocks that cannot reach an exit
(infinite loops) get a virtual edge to it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gpuadvise.ptx.errors import EmulationError, UnsupportedInstructionError
from gpuadvise.ptx.parser import (
    Addr,
    Function,
    Group,
    Instr,
    Label,
    Module,
    Neg,
    Operand,
    PredOut,
    Reg,
    Sym,
    VarDecl,
    Vec,
)

__all__ = ["Block", "Program", "build_program", "symbols_used"]

MAX_INSTRUCTIONS = 400_000
BARRIER_OPS = ("bar", "barrier")


@dataclass
class Block:
    """Instructions ``start``..``end`` (exclusive) of the program. ``term`` is how it ends:
    ``("fall", T)``, ``("bra", T)``, ``("cbra", guard, negated, taken, not_taken)``, ``("exit",)``,
    ``("barrier", T)`` (the block holds the barrier instruction) or ``("brx", reg, targets)``."""

    index: int
    start: int
    end: int
    term: tuple[Any, ...]
    succs: tuple[int, ...] = ()
    body: tuple[int, ...] = ()  # instruction indices executed before the terminator


@dataclass
class Program:
    """A kernel ready to run: flat instruction list, registers, variables, blocks, ipdoms."""

    module: Module
    entry: Function
    instrs: list[Instr]
    regs: dict[str, str]
    vars: list[VarDecl]
    blocks: list[Block]
    ipdom: list[int]
    exit_block: int
    notes: list[str] = field(default_factory=list)
    #: per instruction, the calls it was inlined from, outermost first: (function, inline site
    #: number) each; () for the entry's own instructions
    inlined: list[tuple[tuple[str, int], ...]] = field(default_factory=list)

    @property
    def vexit(self) -> int:
        return len(self.blocks)

    def where(self, index: int) -> str | None:
        return self.module.where(self.instrs[index].loc)


# ---------------------------------------------------------------------------------------------
# Inlining


def _rename_op(op: Operand | None, m: dict[str, str]) -> Operand | None:
    if op is None:
        return None
    if isinstance(op, Reg):
        return Reg(m.get(op.name, op.name))
    if isinstance(op, Sym):
        return Sym(m.get(op.name, op.name), op.offset)
    if isinstance(op, Addr):
        base = _rename_op(op.base, m) if op.base is not None else None
        assert base is None or isinstance(base, Reg | Sym)
        return Addr(base, op.offset)
    if isinstance(op, Vec):
        return Vec(tuple(_rename_op(x, m) for x in op.items))
    if isinstance(op, Neg):
        inner = _rename_op(op.inner, m)
        assert inner is not None
        return Neg(inner)
    if isinstance(op, PredOut):
        return PredOut(
            Reg(m.get(op.value.name, op.value.name)), Reg(m.get(op.pred.name, op.pred.name))
        )
    if isinstance(op, Group):
        return Group(tuple(x for x in (_rename_op(i, m) for i in op.items) if x is not None))
    return op


def _rename(ins: Instr, m: dict[str, str]) -> Instr:
    return dataclasses.replace(
        ins,
        operands=tuple(x for x in (_rename_op(o, m) for o in ins.operands) if x is not None),
        guard=m.get(ins.guard, ins.guard) if ins.guard else None,
    )


def _call_parts(ins: Instr) -> tuple[list[str], Operand, list[str]]:
    ops = list(ins.operands)
    rets: list[str] = []
    args: list[str] = []
    if ops and isinstance(ops[0], Group):
        rets = [o.name for o in ops[0].items if isinstance(o, Sym | Reg)]
        ops = ops[1:]
    if not ops:
        raise EmulationError(f"PTX line {ins.ptx_line}: call without a target", None)
    target = ops[0]
    if len(ops) > 1 and isinstance(ops[1], Group):
        args = [o.name for o in ops[1].items if isinstance(o, Sym | Reg)]
    return rets, target, args


class _Flattener:
    def __init__(self, module: Module, entry: Function) -> None:
        self.module = module
        self.out: list[Instr | Label] = []
        self.regs: dict[str, str] = dict(entry.regs)
        self.vars: list[VarDecl] = list(entry.vars)
        self.counter = 0
        self.notes: list[str] = []
        self.origin: list[tuple[tuple[str, int], ...]] = []  # per item of out: its calls
        self.inlined: tuple[tuple[str, int], ...] = ()

    def _put(self, item: Instr | Label) -> None:
        self.out.append(item)
        self.origin.append(self.inlined)

    def emit_body(self, body: list[Instr | Label], ret_label: str | None, stack: list[str]) -> None:
        for item in body:
            if isinstance(item, Label):
                self._put(item)
                continue
            if item.base == "call":
                self.inline_call(item, stack)
                continue
            if item.base == "ret" and ret_label is not None:
                self._put(
                    dataclasses.replace(
                        item,
                        opcode="bra.uni" if item.guard is None else "bra",
                        operands=(Sym(ret_label),),
                    )
                )
                continue
            self._put(item)
            if len(self.out) > MAX_INSTRUCTIONS:
                raise EmulationError(
                    f"the kernel has more than {MAX_INSTRUCTIONS} PTX instructions once its "
                    "calls are inlined",
                    "mark fewer device functions __noinline__, or analyze a smaller kernel",
                )

    def inline_call(self, ins: Instr, stack: list[str]) -> None:
        rets, target, args = _call_parts(ins)
        if not isinstance(target, Sym):
            self._put(ins)  # indirect call: fails when executed
            return
        callee = self.module.functions.get(target.name)
        if callee is None or callee.body is None or target.name in stack:
            self._put(ins)  # extern, undefined or recursive: see the op builder
            return
        self.counter += 1
        k = self.counter
        m: dict[str, str] = {}
        for reg, rtype in callee.regs.items():
            new = f"{reg}@{k}"
            m[reg] = new
            self.regs[new] = rtype
        for item in callee.body:
            if isinstance(item, Label):
                m[item.name] = f"{item.name}@{k}"
        for var in callee.vars:
            if var.space in ("local", "param"):
                new = f"{var.name}@{k}"
                m[var.name] = new
                self.vars.append(
                    VarDecl(
                        new,
                        var.space,
                        var.type,
                        var.elem_size,
                        var.count,
                        var.align,
                        var.init,
                        var.extern,
                        var.vector,
                        var.order,
                    )
                )
            elif var.name not in {v.name for v in self.vars}:
                self.vars.append(var)
        for formal, actual in zip(callee.params, args, strict=False):
            m[formal.name] = actual
        for formal, actual in zip(callee.rets, rets, strict=False):
            m[formal.name] = actual
        ret_label = f"$__ret@{k}"
        body = [Label(m[x.name]) if isinstance(x, Label) else _rename(x, m) for x in callee.body]
        outer = self.inlined
        self.inlined = (*outer, (target.name, k))
        self.emit_body(body, ret_label, [*stack, target.name])
        self.inlined = outer
        self._put(Label(ret_label))


# ---------------------------------------------------------------------------------------------
# Blocks


def _is_barrier(ins: Instr) -> bool:
    base = ins.base
    if base not in BARRIER_OPS:
        return False
    mods = ins.mods
    # bar.warp.sync is a warp-level no-op; bar.arrive does not wait
    return "warp" not in mods and "arrive" not in mods


def build_program(module: Module, entry_name: str) -> Program:
    """Inline the calls of ``entry_name``, cut the result into blocks and find reconvergence points."""
    entry = module.functions.get(entry_name)
    if entry is None or entry.body is None:
        raise EmulationError(
            f"the PTX has no kernel entry {entry_name!r}",
            f"entries in the PTX: {', '.join(module.entries()) or 'none'}",
        )
    flat = _Flattener(module, entry)
    flat.emit_body(entry.body, None, [entry_name])

    instrs: list[Instr] = []
    inlined: list[tuple[tuple[str, int], ...]] = []
    labels_at: dict[str, int] = {}
    tables: dict[str, list[str]] = {}
    pending_table: str | None = None
    for item, origin in zip(flat.out, flat.origin, strict=True):
        if isinstance(item, Label):
            labels_at[item.name] = len(instrs)
            pending_table = item.name
            continue
        if item.opcode in (".branchtargets", ".calltargets"):
            if pending_table is not None:
                tables[pending_table] = [o.name for o in item.operands if isinstance(o, Sym)]
            continue
        pending_table = None
        instrs.append(item)
        inlined.append(origin)

    n = len(instrs)
    leaders = {0}
    for name, pos in labels_at.items():
        if name not in tables:
            leaders.add(pos)
    for i, ins in enumerate(instrs):
        base = ins.base
        if base in ("bra", "ret", "exit", "brx", "trap"):
            leaders.add(i + 1)
        elif _is_barrier(ins):
            leaders.add(i)
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < n) if n else [0]
    if not starts:
        starts = [0]
    block_of_start = {s: b for b, s in enumerate(starts)}
    nblocks = len(starts)
    exit_block = nblocks  # synthetic block with no instructions, ends with exit

    def block_at(pos: int) -> int:
        if pos >= n:
            return exit_block
        b = block_of_start.get(pos)
        if b is None:
            raise EmulationError(f"internal error: no block starts at instruction {pos}", None)
        return b

    def target(name: str, ins: Instr) -> int:
        if name not in labels_at:
            raise EmulationError(
                f"PTX line {ins.ptx_line}: branch to unknown label {name}",
                "the PTX is malformed",
            )
        return block_at(labels_at[name])

    blocks: list[Block] = []
    for b, s in enumerate(starts):
        e = starts[b + 1] if b + 1 < len(starts) else n
        last = instrs[e - 1] if e > s else None
        nxt = block_at(e)
        term: tuple[Any, ...]
        body = tuple(range(s, e))
        if last is None:
            term = ("fall", nxt)
        elif last.base == "bra":
            dest = last.operands[0]
            if not isinstance(dest, Sym):
                raise UnsupportedInstructionError(
                    f"indirect branch at PTX line {last.ptx_line}", None, opcode=last.opcode
                )
            t = target(dest.name, last)
            if last.guard is None:
                term = ("bra", t)
            else:
                term = ("cbra", last.guard, last.guard_neg, t, nxt)
            body = tuple(range(s, e - 1))
        elif last.base in ("ret", "exit"):
            term = (
                ("exit",)
                if last.guard is None
                else ("cbra", last.guard, last.guard_neg, exit_block, nxt)
            )
            body = tuple(range(s, e - 1))
        elif last.base == "brx":
            reg = last.operands[0]
            table = last.operands[1] if len(last.operands) > 1 else None
            if not isinstance(reg, Reg) or not isinstance(table, Sym) or table.name not in tables:
                raise UnsupportedInstructionError(
                    f"brx.idx at PTX line {last.ptx_line} without a .branchtargets table",
                    None,
                    opcode=last.opcode,
                )
            targets = tuple(target(x, last) for x in tables[table.name])
            term = ("brx", reg.name, targets)
            body = tuple(range(s, e - 1))
        elif _is_barrier(last) and e - s == 1:
            term = ("barrier", nxt)
            body = ()
        else:
            term = ("fall", nxt)
        blocks.append(Block(b, s, e, term, body=body))
    blocks.append(Block(exit_block, n, n, ("exit",)))

    for blk in blocks:
        term_ = blk.term
        if term_[0] in ("fall", "bra", "barrier"):
            succs: tuple[int, ...] = (int(term_[1]),)
        elif term_[0] == "cbra":
            succs = tuple(dict.fromkeys((int(term_[3]), int(term_[4]))))
        elif term_[0] == "brx":
            succs = tuple(dict.fromkeys(term_[2]))
        else:
            succs = ()
        blk.succs = succs

    ipdom = reconvergence_points(blocks)
    return Program(
        module=module,
        entry=entry,
        instrs=instrs,
        regs=flat.regs,
        vars=flat.vars,
        blocks=blocks,
        ipdom=ipdom,
        exit_block=exit_block,
        notes=flat.notes,
        inlined=inlined,
    )


def reconvergence_points(blocks: list[Block]) -> list[int]:
    """Where each block's diverged lanes meet again: its immediate post-dominator in the CFG
    without the edges into *dying* blocks.

    Lanes that leave the kernel never rejoin anyone, so a path that only exits must not push the
    reconvergence point of a branch out to the kernel's end (which plain post-dominance does: with
    an early ``return`` inside an ``if``, the ``if``'s own join would no longer post-dominate it).
    Dying blocks: the synthetic exit block and blocks that do nothing but ``ret``/``exit``; then,
    repeatedly, *side exits*: blocks left with no successor whose only predecessor is a branch
    (the ``{ ...; return; }`` of an ``if``). This is what ptxas's convergence barriers do: exited
    threads leave them. The kernel's own tail is never dying (its predecessor is no branch, or it
    has several).
    """
    n = len(blocks)
    preds: list[list[int]] = [[] for _ in range(n)]
    for b in blocks:
        for t in b.succs:
            preds[t].append(b.index)
    dying = [b.term[0] == "exit" and not b.body for b in blocks]

    def kept(i: int) -> tuple[int, ...]:
        if blocks[i].term[0] == "exit":
            return ()
        return tuple(t for t in blocks[i].succs if not dying[t])

    changed = True
    while changed:
        changed = False
        for b in blocks:
            i = b.index
            if dying[i] or kept(i) or len(preds[i]) != 1:
                continue
            (p,) = preds[i]
            if p != i and len(blocks[p].succs) >= 2:
                dying[i] = True
                changed = True
    return immediate_post_dominators([kept(i) for i in range(n)])


def immediate_post_dominators(succs: list[tuple[int, ...]]) -> list[int]:
    """ipdom of every node of a graph given by successor lists; ``len(succs)`` is the virtual exit.

    Nodes without successors exit; nodes that cannot reach an exit are given a virtual edge to it.
    """
    n = len(succs)
    vexit = n
    rsuccs: list[list[int]] = [[] for _ in range(n + 1)]  # successors in the reversed graph
    preds_rev: list[list[int]] = [list(s) for s in succs] + [[]]  # predecessors in reversed graph
    for b, ss in enumerate(succs):
        for s in ss:
            rsuccs[s].append(b)
        if not ss:
            rsuccs[vexit].append(b)
            preds_rev[b].append(vexit)

    def reach() -> list[bool]:
        seen = [False] * (n + 1)
        seen[vexit] = True
        todo = [vexit]
        while todo:
            x = todo.pop()
            for y in rsuccs[x]:
                if not seen[y]:
                    seen[y] = True
                    todo.append(y)
        return seen

    seen = reach()
    while not all(seen):
        # connect the last unreached node (loop bodies come late) to the exit, then look again
        b = max(i for i in range(n) if not seen[i])
        rsuccs[vexit].append(b)
        preds_rev[b].append(vexit)
        seen = reach()

    # reverse postorder of the reversed graph from the virtual exit
    order: list[int] = []
    visited = [False] * (n + 1)
    stack: list[tuple[int, int]] = [(vexit, 0)]
    visited[vexit] = True
    while stack:
        node, k = stack[-1]
        if k < len(rsuccs[node]):
            stack[-1] = (node, k + 1)
            nxt = rsuccs[node][k]
            if not visited[nxt]:
                visited[nxt] = True
                stack.append((nxt, 0))
        else:
            stack.pop()
            order.append(node)
    rpo = order[::-1]
    pos = {b: i for i, b in enumerate(rpo)}
    idom: list[int | None] = [None] * (n + 1)
    idom[vexit] = vexit

    def intersect(a: int, b: int) -> int:
        while a != b:
            while pos[a] > pos[b]:
                a = _defined(idom[a])
            while pos[b] > pos[a]:
                b = _defined(idom[b])
        return a

    changed = True
    while changed:
        changed = False
        for b in rpo:
            if b == vexit:
                continue
            new: int | None = None
            for p in preds_rev[b]:
                if idom[p] is not None:
                    new = p if new is None else intersect(p, new)
            if new is not None and idom[b] != new:
                idom[b] = new
                changed = True
    return [vexit if x is None else x for x in idom[:n]]


def _defined(x: int | None) -> int:
    assert x is not None
    return x


def symbols_used(program: Program) -> set[str]:
    """The names of the variables (and other symbols) the program's operands name."""
    names: set[str] = set()

    def visit(op: object) -> None:
        if isinstance(op, Sym):
            names.add(op.name)
        elif isinstance(op, Addr) and op.base is not None:
            visit(op.base)
        elif isinstance(op, Vec):
            for x in op.items:
                visit(x)

    for ins in program.instrs:
        for op in ins.operands:
            visit(op)
    return names
