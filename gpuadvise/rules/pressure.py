"""What shortening the live ranges at a kernel's register peak would free (GA403, and GA101's
preference for it): the pure half, from the live registers (:mod:`gpuadvise.model.registers`)
and the SASS.

Each value live across the peak can be kept out of it in its own way:

- a loaded value that is not read between its load and the peak: **move the load next to its
  first use**. Mechanical when no instruction between the load and that use writes memory
  (a store, an atomic, a reduction) or waits at a barrier: the load then reads the same bytes;
- a loaded value read before the peak and again after it: **load it again** next to that use;
- an address, a loop-invariant constant: **recompute it** next to its use (a few integer
  instructions, or a constant-bank operand);
- a computed value not read between its definition and the peak: **compute it next to its first
  use**;
- two 16-bit values: **pack them in one register** (half2);
- accumulators: **a smaller accumulator tile** (half the tile frees half of them; less reuse
  per thread).

The registers freed are counted on the curve, not at one instruction: each value's registers
are taken off every instruction of the span it would no longer be live over (from its
definition, or its last read before the peak, to its next read), and the new peak is the most
that remains anywhere. ptxas's slack and reservation are assumed to stay, so the allocation
drops by what the peak drops (an estimate: the variant, where there is one, is built and its
own allocation read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuadvise.model.registers import LiveValue, RegisterPressure
    from gpuadvise.rules.context import RuleContext
    from gpuadvise.source.text import KernelSource
    from gpuadvise.toolchain.sass import SassInstruction

__all__ = [
    "COMPUTE_LATE",
    "MOVE_LOAD",
    "PACK_HALVES",
    "RECOMPUTE",
    "RELOAD",
    "SMALLER_TILE",
    "PressurePlan",
    "Shortening",
    "memory_write_between",
    "move_declarations",
    "peak_after",
    "pressure_plan",
    "shortenings",
]

MOVE_LOAD = "move the load next to its first use"
RELOAD = "load it again next to its next use"
RECOMPUTE = "recompute it next to its use"
COMPUTE_LATE = "compute it next to its first use"
PACK_HALVES = "pack two halves in one register (half2)"
SMALLER_TILE = "a smaller accumulator tile"

_SYNC = frozenset({"BAR", "MEMBAR", "ERRBAR", "SYNCS", "ARRIVES", "DEPBAR", "WARPSYNC", "CCTL"})


@dataclass(frozen=True)
class Shortening:
    """One way to keep ``registers`` out of the peak: ``how`` (the module's constants), the
    instructions ``[start, stop)`` they would no longer be live over, ``mechanical``: an
    automatic rewrite can do it safely (a load moved past no memory write), ``why_not``: why
    it is not mechanical."""

    value: LiveValue
    how: str
    start: int
    stop: int
    mechanical: bool
    why_not: str = ""

    @property
    def width(self) -> int:
        return self.value.width


def memory_write_between(
    instrs: Sequence[SassInstruction], start: int, stop: int
) -> SassInstruction | None:
    """The first instruction in ``(start, stop)`` (address order) that writes memory or waits
    at a barrier: a load moved from ``start`` to ``stop`` could read other bytes past it."""
    from gpuadvise.toolchain.sass import classify

    for ins in instrs[start + 1 : stop]:
        if ins.never_executes:
            continue
        if ins.base_opcode in _SYNC:
            return ins
        if any(op.kind in ("store", "atomic", "reduction") for op in classify(ins.opcode)):
            return ins
    return None


def _half(ins: SassInstruction | None) -> bool:
    """A 16-bit value: a 16-bit load, or a one-lane fp16 result."""
    if ins is None:
        return False
    from gpuadvise.toolchain.sass import classify

    ops = classify(ins.opcode)
    if ops:
        return all(op.width_bits == 16 for op in ops if op.kind == "load")
    return False


def shortenings(rp: RegisterPressure, instrs: Sequence[SassInstruction]) -> list[Shortening]:
    """The ways to keep each value live across the peak out of it, longest span first (one
    per value; accumulators as one tile). ``instrs``: the kernel's SASS in address order (the
    instructions ``rp`` counts)."""
    p = rp.peak_index
    inner = next(((a, b) for a, b in rp.loops if a <= p <= b), None)
    out: list[Shortening] = []
    halves: list[LiveValue] = []
    accumulators: list[LiveValue] = []
    for v in rp.values:
        if v.kind in ("stack pointer", "reserved") or v.def_index is None:
            continue
        nxt = v.next_use_index
        if v.kind == "accumulator":
            accumulators.append(v)
            continue
        if nxt is None or nxt <= p:
            continue  # read at the peak: nothing keeps it out
        di = instrs[v.def_index] if v.def_index < len(instrs) else None
        if v.kind == "loaded value" and _half(di):
            halves.append(v)
        if v.kind == "loaded value" and v.idle_at_peak:
            w = memory_write_between(instrs, v.def_index, nxt)
            why = "" if w is None else f"{w.opcode} at offset {w.offset:#x} writes memory between"
            if inner is not None and inner[0] <= v.def_index <= inner[1] and nxt <= inner[1]:
                # ptxas's own schedule inside the loop: the source has nothing to move
                why = why or "ptxas loads it early within the loop around the peak"
            out.append(Shortening(v, MOVE_LOAD, v.def_index, nxt, not why, why))
        elif v.kind == "loaded value":
            start = (v.prev_use_index if v.prev_use_index is not None else v.def_index) + 1
            out.append(Shortening(v, RELOAD, start, nxt, False, "a second load"))
        elif v.kind in ("address", "loop-invariant constant", "induction variable"):
            if v.kind == "induction variable":
                continue  # the loop steps it: it is live wherever the loop runs
            start = (v.prev_use_index if v.prev_use_index is not None else v.def_index) + 1
            out.append(Shortening(v, RECOMPUTE, start, nxt, False, "more instructions"))
        elif v.kind == "computed value" and v.idle_at_peak:
            out.append(Shortening(v, COMPUTE_LATE, v.def_index, nxt, False, "a source change"))
    out.sort(key=lambda s: (-(s.stop - s.start), s.start))
    taken = {s.value.registers for s in out}
    halves = [v for v in halves if v.registers not in taken]
    if len(halves) >= 2:
        # two halves share a register over the span both are live: half of them freed
        for a, b in zip(halves[::2], halves[1::2], strict=False):
            lo = max(a.def_index or 0, b.def_index or 0)
            hi = min(a.next_use_index or 0, b.next_use_index or 0)
            if hi > lo:
                out.append(Shortening(b, PACK_HALVES, lo, hi, False, "a layout change"))
    if len(accumulators) >= 4:
        # half the tile: half the accumulators gone wherever they are live
        for v in accumulators[len(accumulators) // 2 :]:
            out.append(
                Shortening(
                    v,
                    SMALLER_TILE,
                    v.def_index or 0,
                    v.last_use_index or p + 1,
                    False,
                    "fewer results per thread (less reuse)",
                )  # fmt: skip
            )
    return out


def peak_after(rp: RegisterPressure, chosen: Sequence[Shortening]) -> int:
    """The most live registers anywhere once ``chosen`` are applied (each value's registers
    taken off its span)."""
    gpr = list(rp.gpr)
    for s in chosen:
        for i in range(max(s.start, 0), min(s.stop, len(gpr))):
            gpr[i] -= s.width
    return max(gpr) if gpr else 0


@dataclass(frozen=True)
class PressurePlan:
    """What shortening the values at the peak would reach: ``local``, the shortenings that
    change only where values live (every kind but a smaller accumulator tile), of which
    ``mechanical`` an automatic rewrite can do; ``freed``/``freed_mechanical``: the registers
    the peak drops by with them; ``registers_after``/``warps_after`` (and ``_mechanical``): the
    allocation that leaves and the warps per SM it allows (the occupancy model)."""

    pressure: RegisterPressure
    local: tuple[Shortening, ...]
    mechanical: tuple[Shortening, ...]
    tile: tuple[Shortening, ...]
    freed: int
    freed_mechanical: int
    registers_after: int
    warps_after: int
    registers_after_mechanical: int
    warps_after_mechanical: int

    @property
    def peak(self) -> int:
        return self.pressure.peak


def pressure_plan(ctx: RuleContext) -> PressurePlan | None:
    """The :class:`PressurePlan` of the analysed kernel (None without its live registers or
    when nothing at the peak can be shortened)."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.model.occupancy import OccupancyInputError, max_active_blocks

    try:
        rp = ctx.live_registers
        instrs = ctx.sass_instructions
    except GpuAdviseError:
        return None
    by_offset = {i.offset: i for i in instrs}
    if any(o not in by_offset for o in rp.offsets):
        return None  # another disassembly than the life ranges': no join
    ordered = [by_offset[o] for o in rp.offsets]
    options = shortenings(rp, ordered)
    local = tuple(s for s in options if s.how != SMALLER_TILE)
    tile = tuple(s for s in options if s.how == SMALLER_TILE)
    mech = tuple(s for s in local if s.mechanical)
    if not local:
        return None

    def warps(regs: int) -> int:
        try:
            k = replace(ctx.occupancy_input, regs_per_thread=regs)
            return max_active_blocks(ctx.device, k).active_warps_per_sm
        except OccupancyInputError:
            return 0

    freed = rp.peak - peak_after(rp, local)
    freed_m = rp.peak - peak_after(rp, mech)
    regs, regs_m = rp.freed_allocation(freed), rp.freed_allocation(freed_m)
    return PressurePlan(rp, local, mech, tile, freed, freed_m, regs, warps(regs), regs_m,
                        warps(regs_m))  # fmt: skip


def _line_span(ks: KernelSource, first: int, last: int) -> tuple[int, int]:
    a = ks.tree.line_start(first)
    b = ks.tree.line_start(last + 1)
    return a, b


def move_declarations(
    ks: KernelSource, moves: Sequence[Shortening], lines: Sequence[tuple[int | None, int | None]]
) -> tuple[str, list[int]] | str:
    """The kernel's file with the declaration of each loaded value in ``moves`` moved down to
    just before the statement of its block that first uses it; ``lines``: (definition line,
    first-use line) of each, at the kernel's call site. Returns (the new text, the lines
    moved), or why the source cannot be rewritten so: the declaration must be a statement of
    its own lines in the same block as the use, its names not used and what its initializer
    reads not assigned in between."""
    from gpuadvise.source.tree import statement_at

    rw = ks.rewrite()
    done: dict[int, int] = {}  # the definition line -> where it goes
    text = ks.text
    pairs = sorted(zip(moves, lines, strict=True), key=lambda m: m[1][0] or 0)
    for _s, (def_line, use_line) in pairs:  # in source order: moved together, kept in order
        if def_line is None or use_line is None:
            return "a value has no source line"
        if def_line in done:
            continue
        start = ks.tree.line_start(def_line)
        first = (
            start
            + len(text[start:].split("\n", 1)[0])
            - len(text[start:].split("\n", 1)[0].lstrip())
        )
        stmt = statement_at(ks.tree, first, ks.span)
        if stmt is None or stmt.kind != "declaration" or stmt.node is None:
            return f"line {def_line} is not a declaration the rewrite can move"
        parent = stmt.node.parent
        if parent is None or parent.type != "compound_statement":
            return f"the declaration at line {def_line} is not a statement of a block"
        siblings = ks.top_level(within=ks.tree.span(parent))
        index = next((i for i, t in enumerate(siblings) if t.start == stmt.start), None)
        if index is None:
            return f"the declaration at line {def_line} was not found in its block"
        target = next(
            (
                i
                for i in range(index + 1, len(siblings))
                if ks.line_at(siblings[i].start) <= use_line <= ks.line_at(siblings[i].end)
            ),
            None,
        )
        if target is None:
            return f"the first use (line {use_line}) is not in the block of line {def_line}"
        if target == index + 1:
            return f"line {def_line} is already next to its first use"
        lo, hi = ks.line_at(stmt.start), ks.line_at(stmt.end)
        a, b = _line_span(ks, lo, hi)
        own = text[a:b]
        if own[: stmt.start - a].strip() or text[stmt.end + 1 : b].strip().split("//")[0].strip():
            return f"line {def_line} holds another statement too"
        between = (siblings[index + 1].start, siblings[target].start)
        decls = ks.declarations(within=(stmt.start, stmt.end + 1))
        if not decls:
            return f"line {def_line} declares nothing the rewrite can read"
        for d in decls[0].declarators:
            if ks.uses(d.name, within=between):
                return f"{d.name} is used before line {use_line}"
            if d.init is not None:
                for name, _span in ks.identifiers(d.init):
                    if ks.assignments(name, within=between):
                        return (
                            f"{name}, which line {def_line} reads, changes before line {use_line}"
                        )
        # insert above the target and the #pragma lines that belong to it
        at_line = ks.line_at(siblings[target].start)
        lines_text = text.split("\n")
        while at_line > 1 and lines_text[at_line - 2].strip().startswith("#pragma"):
            at_line -= 1
        rw.delete(a, b)
        rw.insert(ks.tree.line_start(at_line), own if own.endswith("\n") else own + "\n")
        done[def_line] = at_line
    return rw.text(), sorted(done)
