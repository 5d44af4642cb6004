"""Which memory instructions take their address from data: a static taint analysis of the PTX.

A gather by data (``x[col[j]]``, ``visited[edges[i]]``, ``probs[targets[i]]``) reads addresses
that come from values the kernel loaded: no remapping of the threads makes them consecutive.
:func:`data_addressed` finds such instructions from what the kernel does, whatever the source
spells: a register is *data* when it is the result of a load from memory (global, shared,
local, generic, a texture, an atomic's old value) or is computed from a data register; the
kernel's parameters (``ld.param``), constant banks (``ld.const``: fixed tables), special
registers (``%tid``, ``%ctaid``) and literals are not data. A memory instruction is
data-addressed when its address register is data.

The analysis is flow-insensitive (a register defined in several places is data when any
definition is), which over-approximates for registers reused across unrelated values; nvcc's
PTX gives nearly every value a register of its own, so in practice it is exact. A loop counter
started from a loaded bound (``for (j = row_ptr[i]; ...)``) is data too: callers that want to
tell a thread's own contiguous walk from a gather look at the trace as well.

Pure: it reads the :class:`~gpuadvise.ptx.cfg.Program`'s instruction list only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuadvise.ptx.parser import Addr, Group, Instr, Neg, Operand, PredOut, Reg, Vec

__all__ = ["MEMORY_BASES", "data_addressed", "data_registers", "defs_uses"]

MEMORY_BASES = frozenset({"ld", "ldu", "st", "atom", "red", "cp", "prefetch", "tex", "suld",
                          "sust", "tld4"})  # fmt: skip
# instructions whose first operand is read, not written
_NO_DEST = frozenset({"st", "red", "bar", "barrier", "bra", "brx", "ret", "exit", "membar",
                      "fence", "prefetch", "prefetchu", "sust", "cp", "trap", "pmevent",
                      "call", "griddepcontrol"})  # fmt: skip
# loads whose result is not data (kernel arguments, constant tables)
_CLEAN_SPACES = frozenset({"param", "const"})


def _regs(op: Operand | None) -> Iterable[str]:
    if isinstance(op, Reg):
        yield op.name
    elif isinstance(op, Addr):
        if isinstance(op.base, Reg):
            yield op.base.name
    elif isinstance(op, Vec | Group):
        for item in op.items:
            yield from _regs(item)
    elif isinstance(op, Neg):
        yield from _regs(op.inner)
    elif isinstance(op, PredOut):
        yield op.value.name
        yield op.pred.name


def _is_data_source(ins: Instr) -> bool:
    """The instruction's result is a value read from memory."""
    base = ins.base
    if base in ("ld", "ldu"):
        return not (set(ins.mods) & _CLEAN_SPACES)
    return base in ("atom", "tex", "suld", "tld4")


def _address(ins: Instr) -> Addr | None:
    for op in ins.operands:
        if isinstance(op, Addr):
            return op
    return None


def defs_uses(ins: Instr) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The registers an instruction writes and those it reads (its guard predicate too)."""
    guard = (ins.guard,) if ins.guard else ()
    if not ins.operands:
        return (), guard
    if ins.base in _NO_DEST:
        return (), guard + tuple(r for op in ins.operands for r in _regs(op))
    dest = tuple(_regs(ins.operands[0]))
    return dest, guard + tuple(r for op in ins.operands[1:] for r in _regs(op))


def data_addressed(instrs: Sequence[Instr]) -> frozenset[int]:
    """Indices (into ``instrs``) of the memory instructions whose address register holds data
    (see the module's docstring)."""
    data = data_registers(instrs)
    out = set()
    for i, ins in enumerate(instrs):
        if ins.base not in MEMORY_BASES:
            continue
        addr = _address(ins)
        if addr is not None and isinstance(addr.base, Reg) and addr.base.name in data:
            out.add(i)
    return frozenset(out)


def data_registers(instrs: Sequence[Instr]) -> frozenset[str]:
    """The registers that hold data: loaded from memory, or computed from such a register (see
    the module's docstring); a loop bound among them is read from a buffer.

    The least set closed under the definitions, found by a worklist: each definition made data
    once, when it loads from memory or the first of its sources becomes data (a sweep over every
    definition until none changes took as many sweeps as the longest chain of definitions in text
    order against it: HeCBench vanGenuchten's 22,000 registers, 0.5 CPU-s a call)."""
    dests: list[tuple[str, ...]] = []
    users: dict[str, list[int]] = {}
    todo: list[int] = []
    for ins in instrs:
        if not ins.operands or ins.base in _NO_DEST:
            continue
        dest = tuple(_regs(ins.operands[0]))
        if not dest:
            continue
        k = len(dests)
        dests.append(dest)
        if _is_data_source(ins):
            todo.append(k)
        for op in ins.operands[1:]:
            for r in _regs(op):
                users.setdefault(r, []).append(k)
    data: set[str] = set()
    done = bytearray(len(dests))
    while todo:
        k = todo.pop()
        if done[k]:
            continue
        done[k] = 1
        for d in dests[k]:
            if d not in data:
                data.add(d)
                todo.extend(users.get(d, ()))
    return frozenset(data)
