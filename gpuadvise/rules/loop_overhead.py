"""What ``k`` elements per thread save beyond the load requests: the index, address and loop
work that is done once per chunk of ``k`` elements instead of once per element.

A loop over elements (or a thread per element) spends, besides its loads, stores and the work on
the loaded values, instructions that compute no loaded value: the index (``i += stride``), the
addresses (``a + 2 * i``, one per buffer), the bound test and the branch. With ``k`` consecutive
elements per thread in one vector access, the work on the values is done ``k`` times per chunk
as before, but the index, the addresses and the test once (the issue note of GA303's broken
bounds, issue 29: f16max's ``hmax`` measured 1.94x against a 1.53x bound that counted requests
only).

:func:`loop_overhead` finds them in the PTX, from what the kernel does: the instructions of the
innermost loop holding the widened loads (of the whole kernel when they are in no loop) that
are not memory instructions and write no register holding data (loaded from memory, or computed
from such a register: :func:`gpuadvise.ptx.dataflow.data_registers`), by pipe
(:func:`gpuadvise.ptx.pipes.pipe_work`); and those of the blocks outside that loop (the thread's
prologue: its index from ``%tid``/``%ctaid``), which a smaller grid runs fewer times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuadvise.ptx.cfg import Program
    from gpuadvise.toolchain.sass import SassInstruction
    from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = ["LoopOverhead", "loop_overhead"]


@dataclass(frozen=True)
class LoopOverhead:
    """Per execution of the loop body holding the loads (``body``) and per thread outside it
    (``prologue``; empty when the loads are in no loop: the body is the whole kernel): the warp
    instructions by pipe that compute no loaded value and access no memory. ``uniform``: the
    loop has one exit and a bound not read from memory, so that threads taking k elements can
    run it once for all k (a ``break`` on the data runs it for each)."""

    body: Mapping[str, float]
    prologue: Mapping[str, float]
    in_loop: bool
    batch_ratio: float = 1.0
    uniform: bool = True  # every thread runs the loop alike: one exit, its bound not data

    @property
    def body_instructions(self) -> float:
        return float(sum(self.body.values()))


def loop_overhead(
    ptx: str,
    entry: str,
    trace: AccessTrace,
    insts: Iterable[int],
    sass: Sequence[SassInstruction] = (),
    lines: Iterable[int] = (),
) -> LoopOverhead | None:
    """The :class:`LoopOverhead` of the loop holding the trace's load instructions ``insts``
    (the first one found in the program); None when the PTX cannot be matched with the trace.
    With the kernel's ``sass`` and the loads' (call-site) ``lines``, its ``batch_ratio``
    (:func:`batch_ratio`)."""
    from gpuadvise.ptx.cfg import build_program
    from gpuadvise.ptx.dataflow import MEMORY_BASES, data_registers, defs_uses
    from gpuadvise.ptx.emulator import static_accesses
    from gpuadvise.ptx.loops import find_loops, innermost
    from gpuadvise.ptx.parser import parse_ptx_cached
    from gpuadvise.ptx.pipes import pipe_work

    try:
        program = build_program(parse_ptx_cached(ptx), entry)  # the emulator's parse
    except Exception:
        return None
    at = _program_index(program, trace, static_accesses(program))
    wanted = [at[i] for i in insts if i in at]
    if not wanted:
        return None
    block_of = {i: b.index for b in program.blocks for i in range(b.start, b.end)}
    if wanted[0] not in block_of:
        return None
    loop = innermost(find_loops(program), block_of[wanted[0]])
    inside = set(loop.blocks) if loop is not None else {b.index for b in program.blocks}
    data = data_registers(program.instrs)
    body: dict[str, float] = {}
    prologue: dict[str, float] = {}
    for b in program.blocks:
        acc = body if b.index in inside else prologue
        for i in range(b.start, b.end):
            ins = program.instrs[i]
            if ins.base in MEMORY_BASES:
                continue
            defs, _ = defs_uses(ins)
            if any(d in data for d in defs):
                continue  # work on the loaded values: done per element after the change too
            for pipe, n in pipe_work(ins):
                acc[pipe] = acc.get(pipe, 0.0) + n
    ratio = batch_ratio(program, sass, set(lines)) if sass else 1.0
    uniform = loop is None or (loop.single_exit and not loop.data_bound)
    return LoopOverhead(body, prologue, loop is not None, ratio, uniform)


def batch_ratio(program: Program, sass: Sequence[SassInstruction], lines: set[int]) -> float:
    """How many more of the global loads at ``lines`` the SASS issues before waiting on one
    than the PTX does: the mean loads per wait (a run of global loads ended by the first
    instruction that reads a loaded register) in the SASS over the same in the PTX (the
    emulator's dependent chains follow the PTX's order). ptxas hoists the loads of an
    unrolled loop above their uses: crossEntropy's ``loss_bwd`` has 81 loads of one per
    iteration in the PTX and issues them 18 at a time; 1.0 when either side has no load."""
    import re

    from gpuadvise.ptx.dataflow import defs_uses

    reg = re.compile(r"\bR(\d+)\b")

    def ptx_steps() -> Iterable[tuple[bool, bool, tuple[str, ...], tuple[str, ...]]]:
        for ins in program.instrs:
            loc = ins.call_sites[-1] if ins.call_sites else ins.loc
            load = ins.base in ("ld", "ldu") and "global" in ins.mods
            defs, uses = defs_uses(ins)
            yield load, load and loc is not None and loc.line in lines, defs, uses

    def sass_steps() -> Iterable[tuple[bool, bool, tuple[str, ...], tuple[str, ...]]]:
        for ins in sass:
            load = ins.base_opcode == "LDG"
            regs = tuple(reg.findall(ins.operands))
            stores = ins.base_opcode.startswith(("ST", "RED", "ATOM"))
            defs, uses = ((), regs) if stores or not regs else (regs[:1], regs[1:])
            if load and defs:  # a 64- or 128-bit load writes two or four registers
                n = 4 if ".128" in ins.opcode else 2 if ".64" in ins.opcode else 1
                defs = tuple(str(int(defs[0]) + k) for k in range(n))
            yield load, load and ins.call_site[1] in lines, defs, uses

    def per_wait(steps: Iterable[tuple[bool, bool, tuple[str, ...], tuple[str, ...]]]) -> float:
        pending: set[str] = set()
        loads = waits = 0
        mine = False
        for load, target, defs, uses in steps:
            if pending and any(u in pending for u in uses):
                waits += mine
                pending.clear()
                mine = False
            if load:
                pending.update(defs)
                loads += target
                mine = mine or target
        waits += mine
        return loads / waits if waits else 0.0

    p, s = per_wait(ptx_steps()), per_wait(sass_steps())
    return max(s / p, 1.0) if p > 0 and s > 0 else 1.0


def _program_index(
    program: Program, trace: AccessTrace, static: Sequence[tuple[int, Space, Kind, int]]
) -> dict[int, int]:
    """Trace instruction id -> program instruction index: the trace's accesses of an explicit
    space are the program's (``static_accesses``) in order; {} when they do not line up."""
    order = sorted((i, int(sp)) for i, sp, _k, _w in static)
    instrs = program.instrs
    out: dict[int, int] = {}
    k = 0
    for info in trace.instructions:
        parts = {m.split("::")[0] for m in info.opcode.split(".")}
        if not parts & {"global", "shared", "local", "const"}:
            continue  # a generic access: not among the declared ones
        if k >= len(order):
            return {}
        idx, sp = order[k]
        k += 1
        if instrs[idx].opcode != info.opcode or sp != int(info.space):
            return {}
        out[int(info.inst)] = idx
    return out
