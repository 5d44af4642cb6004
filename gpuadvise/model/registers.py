"""Register pressure: live registers per SASS instruction and source line, the peak, and the
values that hold it. Pure: no I/O.

The input is the toolkit's life-range table (:mod:`gpuadvise.toolchain.liveness`: per
instruction, the live registers of each class and which it reads and writes) joined by offset
to the SASS with source lines (:func:`gpuadvise.toolchain.sass.disassemble`). From them:

- the live registers per instruction (general, predicate, uniform; a 64-bit pair is two), as
  nvdisasm counts them, which is Nsight Compute's "Live Registers" column;
- per source line, at the user's call site (inlined code attributed to the line that called
  it, as the other views do), the most and the mean live general registers;
- the peak and the values live across it: for each, where it is defined, where it is last
  used, the distance in instructions and what it is (:data:`KINDS`), found by walking the
  control-flow graph of the SASS from the peak, back to the definitions that reach it and
  forward to the uses it reaches;
- the allocation explained: ptxas allocates up to the highest register number the code uses,
  plus :data:`RESERVED` it keeps for itself (``Used N registers`` counts them); the numbers
  below the highest that are free at the peak are the allocator's slack (numbers never used,
  and numbers free at the peak but taken elsewhere: a value keeps one register over its whole
  range, 64- and 128-bit values need aligned pairs and quads);
- a check of the table: the liveness dataflow over the same control-flow graph from the
  reads and writes alone (predicated writes do not kill, the stack pointer ``R1`` is live at
  exit), compared instruction by instruction with nvdisasm's counts (:attr:`RegisterPressure.
  agreement`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuadvise.toolchain.liveness import LifeRanges
    from gpuadvise.toolchain.sass import SassInstruction

__all__ = [
    "KINDS",
    "RESERVED",
    "LineLive",
    "LiveValue",
    "RegisterPressure",
    "Sass",
    "control_flow",
    "register_pressure",
]

RESERVED = 2
"""Registers ptxas adds to every allocation (sm_70 and later) above the highest one the code
names: ``Used N registers`` is the highest register number + 1 + 2 on every kernel of
``kernels/`` and ten of the corpus (docs/registers.md). They hold the return address of the
subroutines ptxas calls with ``CALL.REL`` (a division's slow path): nvdisasm shows them written
by the ``CALL`` or live through the subroutine, never read or written by other instructions."""

KINDS = (
    "accumulator",
    "induction variable",
    "address",
    "loaded value",
    "loop-invariant constant",
    "computed value",
    "stack pointer",
    "reserved",
)
"""What a live value is, the first that applies:

- ``accumulator``: updated in place (an instruction reads and writes its register), folding
  other values in, around a loop (the update reaches itself) or in a chain of three or more
  updates (an unrolled loop);
- ``induction variable``: updated in place the same way with constants only (a loop counter,
  a pointer stepped each iteration);
- ``address``: every use it reaches is an address operand (``[R2.64]``, ``[R4+0x10]``);
- ``loaded value``: defined by a load from global, shared, local or generic memory;
- ``loop-invariant constant``: an immediate, a constant-bank value (kernel parameters), a
  special register (thread and block indices), or a value defined outside the innermost loop
  around the peak and not written inside it;
- ``computed value``: anything else (an intermediate result);
- ``stack pointer``: ``R1``, set once at entry and live throughout (the ABI's);
- ``reserved``: live but never read or written, or written only by a ``CALL`` (the two
  registers ptxas reserves hold a subroutine's return address)."""

_LOADS = frozenset({"LDG", "LDS", "LDL", "LD", "LDSM", "LDGSTS", "ATOM", "ATOMG", "ATOMS"})
_CONST_DEFS = frozenset({"LDC", "ULDC", "S2R", "S2UR", "CS2R", "CS2R_32", "R2UR"})
_MOVES = frozenset({"MOV", "IMAD", "HFMA2", "UMOV", "MOV32I"})
_ADDRESS = re.compile(r"\[([^\]]*)\]")
_REG = re.compile(r"\b(U?R)(\d+)(\.64|\.128)?\b")
_TARGET = re.compile(r"`\(([^)]+)\)")
_IMM = re.compile(r"^-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:e[-+]?\d+)?|INF|NAN)$")


@dataclass(frozen=True)
class Sass:
    """One instruction as the model reads it (from the SASS with lines, else the table's text)."""

    offset: int
    opcode: str
    predicate: str | None
    operands: str
    file: str | None = None
    line: int | None = None

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def predicated(self) -> bool:
        return self.predicate is not None and self.predicate not in ("@PT",)

    @classmethod
    def from_text(cls, offset: int, text: str) -> Sass:
        m = re.match(r"^(@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_.]*)\s*(.*)$", text.strip())
        if m is None:
            return cls(offset, "NOP", None, "")
        pred = m.group(1).strip() if m.group(1) else None
        return cls(offset, m.group(2), pred, m.group(3).strip())


@dataclass(frozen=True)
class LineLive:
    """Live general registers over the instructions of one source line (at the call site)."""

    file: str | None
    line: int | None
    max: int
    mean: float
    instructions: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "max": self.max,
            "mean": self.mean,
            "instructions": self.instructions,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LineLive:
        return cls(d.get("file"), d.get("line"), int(d["max"]), float(d["mean"]),
                   int(d["instructions"]))  # fmt: skip


@dataclass(frozen=True)
class LiveValue:
    """A value live across the peak, in ``registers`` (two for a 64-bit pair).

    ``def_index``: the instruction (position in the function) of its first definition that
    reaches the peak, None when a path from the entry reaches it undefined; ``last_use_index``:
    its last use the peak reaches; ``distance``: instructions from the definition to the last
    instruction (in address order) where it is still live (the end of a loop that reads it);
    ``next_use_index``: its first use at or after the peak; ``prev_use_index``: its last read
    before the peak (in address order; None: none); ``idle_at_peak``: it is not read
    between its definition and the peak (a value waiting: moving its definition next to its
    first use frees its registers at the peak); ``kind``: one of :data:`KINDS`; ``defs``: how
    many definitions reach the peak; ``uses``: how many uses it reaches."""

    registers: tuple[str, ...]
    kind: str
    def_index: int | None
    def_offset: int | None
    def_file: str | None
    def_line: int | None
    def_opcode: str | None
    last_use_index: int | None
    last_use_offset: int | None
    last_use_file: str | None
    last_use_line: int | None
    next_use_index: int | None
    distance: int
    idle_at_peak: bool
    defs: int = 1
    uses: int = 0
    prev_use_index: int | None = None

    @property
    def width(self) -> int:
        return len(self.registers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "registers": list(self.registers),
            "kind": self.kind,
            "def_index": self.def_index,
            "def_offset": self.def_offset,
            "def_file": self.def_file,
            "def_line": self.def_line,
            "def_opcode": self.def_opcode,
            "last_use_index": self.last_use_index,
            "last_use_offset": self.last_use_offset,
            "last_use_file": self.last_use_file,
            "last_use_line": self.last_use_line,
            "next_use_index": self.next_use_index,
            "distance": self.distance,
            "idle_at_peak": self.idle_at_peak,
            "defs": self.defs,
            "uses": self.uses,
            "prev_use_index": self.prev_use_index,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LiveValue:
        return cls(**{**d, "registers": tuple(d["registers"])})


@dataclass(frozen=True)
class RegisterPressure:
    """Live registers of one kernel along its SASS (see the module's docstring).

    Per instruction (``offsets`` in address order): ``gpr``, ``pred``, ``ugpr``, ``upred`` live
    registers and ``sites``, an index into ``sites_table`` ((file, line) at the call site).
    ``allocated``: ptxas's register count; ``highest``: the highest register number the code
    reads or writes, + 1; ``reserved``: ``allocated - highest`` (ptxas's own, :data:`RESERVED`);
    ``holes``: register numbers below ``highest`` no instruction uses. ``peak``: the most live
    general registers, first reached at instruction ``peak_index`` (``peak_instructions``
    instructions reach it); ``values``: the values live there, longest first. ``agreement``:
    (instructions of the kernel's own code where the dataflow's count equals nvdisasm's, those
    instructions), ``dataflow_peak`` the dataflow's peak over them; ``subroutine_instructions``:
    the instructions of called subroutines (``CALL.REL``: the division slow paths), left out of
    the comparison: inside them nvdisasm also counts registers no instruction there names
    (ptxas's reserved two, and those the ABI keeps for the caller); ``reserved_at_peak``: of
    the peak, the reserved registers live there (a call's return address)."""

    allocated: int
    highest: int
    reserved: int
    holes: tuple[int, ...]
    peak: int
    peak_index: int
    peak_offset: int
    peak_file: str | None
    peak_line: int | None
    peak_instructions: int
    offsets: tuple[int, ...]
    gpr: tuple[int, ...]
    pred: tuple[int, ...]
    ugpr: tuple[int, ...]
    upred: tuple[int, ...]
    sites: tuple[int, ...]
    sites_table: tuple[tuple[str | None, int | None], ...]
    lines: tuple[LineLive, ...]
    values: tuple[LiveValue, ...]
    agreement: tuple[int, int] = (0, 0)
    dataflow_peak: int | None = None
    subroutine_instructions: int = 0
    reserved_at_peak: int = 0
    loops: tuple[tuple[int, int], ...] = field(default=())

    @property
    def floor(self) -> int:
        """Registers per thread this schedule needs at least: the peak + ptxas's reserved (the
        peak counted without the reserved registers it may hold: a subroutine's return)."""
        return self.peak - self.reserved_at_peak + self.reserved

    @property
    def slack(self) -> int:
        """Register numbers below the highest that are free at the peak (never used, or taken
        at other instructions): ``allocated = peak - reserved_at_peak + reserved + slack``."""
        return self.highest - (self.peak - self.reserved_at_peak)

    def site(self, index: int) -> tuple[str | None, int | None]:
        return self.sites_table[self.sites[index]]

    def freed_allocation(self, freed: int) -> int:
        """The registers ptxas would allocate with ``freed`` fewer live at the peak, its slack
        and reservation kept (an estimate: ptxas may place the values differently)."""
        return max(self.allocated - freed, self.reserved + 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "allocated": self.allocated,
            "highest": self.highest,
            "reserved": self.reserved,
            "holes": list(self.holes),
            "slack": self.slack,
            "peak": self.peak,
            "floor": self.floor,
            "peak_index": self.peak_index,
            "peak_offset": self.peak_offset,
            "peak_file": self.peak_file,
            "peak_line": self.peak_line,
            "peak_instructions": self.peak_instructions,
            "offsets": list(self.offsets),
            "gpr": list(self.gpr),
            "pred": list(self.pred),
            "ugpr": list(self.ugpr),
            "upred": list(self.upred),
            "sites": list(self.sites),
            "sites_table": [list(s) for s in self.sites_table],
            "lines": [x.to_dict() for x in self.lines],
            "values": [v.to_dict() for v in self.values],
            "agreement": list(self.agreement),
            "dataflow_peak": self.dataflow_peak,
            "subroutine_instructions": self.subroutine_instructions,
            "reserved_at_peak": self.reserved_at_peak,
            "loops": [list(x) for x in self.loops],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RegisterPressure:
        keep = {k: v for k, v in d.items() if k not in ("floor", "slack")}
        return cls(
            **{
                **keep,
                "holes": tuple(d["holes"]),
                "offsets": tuple(d["offsets"]),
                "gpr": tuple(d["gpr"]),
                "pred": tuple(d["pred"]),
                "ugpr": tuple(d["ugpr"]),
                "upred": tuple(d["upred"]),
                "sites": tuple(d["sites"]),
                "sites_table": tuple((f, n) for f, n in d["sites_table"]),
                "lines": tuple(LineLive.from_dict(x) for x in d["lines"]),
                "values": tuple(LiveValue.from_dict(x) for x in d["values"]),
                "agreement": tuple(d.get("agreement", (0, 0))),
                "loops": tuple(tuple(x) for x in d.get("loops", ())),
            }
        )


# --------------------------------------------------------------------------------------------
# The control-flow graph of the SASS


def control_flow(
    instrs: Sequence[Sass], labels: Mapping[str, int]
) -> tuple[list[list[int]], list[list[int]]]:
    """(successors, predecessors) of each instruction: fall through, branch targets (labels),
    ``EXIT`` and ``RET`` end a path (a return goes back to its caller), ``CALL`` goes on to
    the next instruction (nvdisasm marks at the call what its subroutine reads and writes: the
    call is one instruction of its caller; :func:`subroutines` holds the bodies), an indirect branch
    (``BRX``, ``JMX``) may go to any label, an unconditional branch to itself (the padding
    after the last ``EXIT``) goes nowhere. A predicated branch, exit or return also falls
    through."""
    index = {ins.offset: i for i, ins in enumerate(instrs)}
    n = len(instrs)
    every_label = sorted({index[o] for o in labels.values() if o in index})
    succ: list[list[int]] = [[] for _ in range(n)]
    for i, ins in enumerate(instrs):
        base = ins.base
        nxt = [i + 1] if i + 1 < n else []
        conditional = ins.predicated
        target = _TARGET.search(ins.operands)
        tgt = None if target is None else index.get(labels.get(target.group(1), -1))
        if base in ("BRA", "JMP"):
            if tgt == i and not conditional:
                out: list[int] = []
            else:
                out = ([] if tgt is None else [tgt]) + (nxt if conditional or tgt is None else [])
        elif base in ("BRX", "JMX"):
            out = every_label + (nxt if conditional else [])
        elif base in ("EXIT", "RET"):
            out = nxt if conditional else []
        else:
            out = nxt
        succ[i] = sorted(set(out))
    pred: list[list[int]] = [[] for _ in range(n)]
    for i, out in enumerate(succ):
        for j in out:
            pred[j].append(i)
    return succ, pred


def subroutines(
    instrs: Sequence[Sass], labels: Mapping[str, int], succ: Sequence[Sequence[int]]
) -> set[int]:
    """The instructions of the subroutines ``CALL`` enters (reachable from a call's target),
    which the kernel's own code does not reach otherwise."""
    index = {ins.offset: i for i, ins in enumerate(instrs)}
    targets = set()
    for ins in instrs:
        m = _TARGET.search(ins.operands) if ins.base == "CALL" else None
        if m is not None and labels.get(m.group(1)) in index:
            targets.add(index[labels[m.group(1)]])
    main: set[int] = set()
    todo = [0] if instrs else []
    while todo:  # the kernel's own code, from its entry
        i = todo.pop()
        if i not in main:
            main.add(i)
            todo += succ[i]
    body: set[int] = set()
    todo = list(targets)
    while todo:
        i = todo.pop()
        if i not in body and i not in main:
            body.add(i)
            todo += succ[i]
    return body


def _loops(succ: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Loops as (first, last) instruction of each back edge's span (ptxas lays a loop's body
    out contiguously, its back edge a branch to its head), innermost first."""
    spans = {(j, i) for i, out in enumerate(succ) for j in out if j <= i}
    return sorted(spans, key=lambda s: (s[1] - s[0], s[0]))


# --------------------------------------------------------------------------------------------
# The model


def register_pressure(
    table: LifeRanges,
    instructions: Iterable[SassInstruction],
    allocated: int,
    *,
    max_values: int = 64,
) -> RegisterPressure:
    """The :class:`RegisterPressure` of one kernel from its life-range ``table`` and its SASS
    ``instructions`` with source lines (joined by offset), ``allocated`` being ptxas's register
    count. ``max_values``: the longest values kept of those live at the peak."""
    by_offset = {i.offset: i for i in instructions}
    instrs: list[Sass] = []
    for row in table.rows:
        s = by_offset.get(row.offset)
        if s is None:
            instrs.append(Sass.from_text(row.offset, row.text))
        else:
            file, line = s.call_site
            instrs.append(Sass(row.offset, s.opcode, s.predicate, s.operands, file, line))
    rows = table.rows
    n = len(rows)
    if n == 0:
        return _empty(allocated)
    gpr = tuple(r.counts[0] for r in rows)
    cols = table.columns[0]
    marks = [r.marks[0] for r in rows]
    # the registers the code names (read or written somewhere) and the highest of them
    # (a register only a CALL writes holds the return address: ptxas's reserved pair)
    calls = [i.base in ("CALL", "RET") for i in instrs]
    named = [
        any(m[c] in "^vx" and not call for m, call in zip(marks, calls, strict=True))
        for c in range(len(cols))
    ]
    used_numbers = {cols[c] for c in range(len(cols)) if named[c]}
    highest = max(used_numbers) + 1 if used_numbers else 0
    holes = tuple(sorted(set(range(highest)) - used_numbers))
    # source sites
    sites_table: list[tuple[str | None, int | None]] = []
    site_index: dict[tuple[str | None, int | None], int] = {}
    sites = []
    for ins in instrs:
        key = (ins.file, ins.line)
        if key not in site_index:
            site_index[key] = len(sites_table)
            sites_table.append(key)
        sites.append(site_index[key])
    lines = _per_line(gpr, sites, sites_table)
    peak = max(gpr)
    peak_index = gpr.index(peak)
    succ, pred = control_flow(instrs, table.labels)
    loops = _loops(succ)
    values = _values_at(peak_index, instrs, marks, cols, named, succ, pred, loops)
    values.sort(key=lambda v: (-v.distance, v.def_index if v.def_index is not None else -1))
    body = subroutines(instrs, table.labels, succ)
    ours = _dataflow_counts(instrs, marks, cols, succ, body)
    own = [i for i in range(n) if i not in body]
    agree = sum(1 for i in own if ours[i] == gpr[i])
    pf, pl = instrs[peak_index].file, instrs[peak_index].line
    return RegisterPressure(
        allocated=allocated,
        highest=highest,
        reserved=allocated - highest,
        holes=holes,
        peak=peak,
        peak_index=peak_index,
        peak_offset=instrs[peak_index].offset,
        peak_file=pf,
        peak_line=pl,
        peak_instructions=sum(1 for g in gpr if g == peak),
        offsets=tuple(r.offset for r in rows),
        gpr=gpr,
        pred=tuple(r.counts[1] for r in rows),
        ugpr=tuple(r.counts[2] for r in rows),
        upred=tuple(r.counts[3] for r in rows),
        sites=tuple(sites),
        sites_table=tuple(sites_table),
        lines=lines,
        values=tuple(values[:max_values]),
        agreement=(agree, len(own)),
        dataflow_peak=max((ours[i] for i in own), default=None),
        subroutine_instructions=len(body),
        reserved_at_peak=sum(
            1 for c, ch in enumerate(marks[peak_index]) if ch != " " and not named[c]
        ),
        loops=tuple(loops),
    )


def _empty(allocated: int) -> RegisterPressure:
    return RegisterPressure(allocated, 0, allocated, (), 0, 0, 0, None, None, 0, (), (), (), (),
                            (), (), (), (), ())  # fmt: skip


def _per_line(
    gpr: Sequence[int], sites: Sequence[int], table: Sequence[tuple[str | None, int | None]]
) -> tuple[LineLive, ...]:
    acc: dict[int, list[int]] = {}
    for g, s in zip(gpr, sites, strict=True):
        acc.setdefault(s, []).append(g)
    out = [
        LineLive(table[s][0], table[s][1], max(v), sum(v) / len(v), len(v)) for s, v in acc.items()
    ]
    return tuple(sorted(out, key=lambda x: (x.file or "", x.line or 0)))


def _address_registers(ins: Sass) -> set[int]:
    """General registers read as addresses by ``ins`` (inside ``[...]``; ``.64`` is a pair)."""
    out: set[int] = set()
    for inside in _ADDRESS.findall(ins.operands):
        for m in _REG.finditer(inside):
            if m.group(1) != "R":
                continue
            r = int(m.group(2))
            out.add(r)
            if m.group(3) == ".64":
                out.add(r + 1)
    return out


def _constant_def(ins: Sass) -> bool:
    """An immediate, constant-bank or special-register value."""
    base = ins.base
    if base in _CONST_DEFS:
        return True
    ops = [p.strip() for p in ins.operands.split(",")]
    srcs = ops[1:]
    if base in _MOVES and srcs:
        vals = [p for p in srcs if p not in ("RZ", "-RZ", "URZ")]
        return all(_IMM.match(p) or p.startswith("c[") for p in vals)
    return False


def _values_at(
    p: int,
    instrs: Sequence[Sass],
    marks: Sequence[str],
    cols: Sequence[int],
    named: Sequence[bool],
    succ: Sequence[Sequence[int]],
    pred: Sequence[Sequence[int]],
    loops: Sequence[tuple[int, int]],
) -> list[LiveValue]:
    """The values live at instruction ``p``: one per register, those with the same
    definitions and last use merged (a 64-bit pair)."""
    inner = next(((a, b) for a, b in loops if a <= p <= b), None)
    found: dict[tuple[Any, ...], list[int]] = {}
    info: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c, ch in enumerate(marks[p]):
        if ch == " ":
            continue
        reg = cols[c]
        writes = {i for i in range(len(instrs)) if marks[i][c] in "^x"}
        d = _walk_value(p, c, marks, instrs, succ, pred, writes)
        kind = _kind(reg, c, d, instrs, marks, named, pred, succ, inner, writes)
        if kind in ("accumulator", "induction variable"):
            # the whole chain of updates: from where it starts to its last read
            uses, end = _chain_uses(d["uses"], c, marks, instrs, succ)
            d = {**d, "defs": _chain(d["defs"], c, marks, instrs, pred), "uses": uses,
                 "last": max(uses) if uses else d["last"], "end": max(end, d["end"])}  # fmt: skip
        key = (kind, tuple(sorted(d["defs"])), d["last"], d["end"], d["entry"])
        found.setdefault(key, []).append(reg)
        info[key] = d
    values = []
    for key, regs in found.items():
        d = info[key]
        kind = key[0]
        defs = sorted(d["defs"])
        first_def = None if d["entry"] and not defs else (defs[0] if defs else None)
        last = d["last"]
        di = instrs[first_def] if first_def is not None else None
        li = instrs[last] if last is not None else None
        start = first_def if first_def is not None else 0
        end = d["end"]
        later_uses = [u for u in d["uses"] if first_def is None or u > first_def]
        values.append(
            LiveValue(
                registers=tuple(f"R{r}" for r in sorted(regs)),
                kind=kind,
                def_index=first_def,
                def_offset=None if di is None else di.offset,
                def_file=None if di is None else di.file,
                def_line=None if di is None else di.line,
                def_opcode=None if di is None else di.opcode,
                last_use_index=last,
                last_use_offset=None if li is None else li.offset,
                last_use_file=None if li is None else li.file,
                last_use_line=None if li is None else li.line,
                next_use_index=min(later_uses) if later_uses else None,
                prev_use_index=d.get("prev"),
                distance=max(end - start, 0),
                idle_at_peak=not d["read_before"],
                defs=len(defs),
                uses=len(d["uses"]),
            )
        )
    return values


def _walk_value(
    p: int,
    c: int,
    marks: Sequence[str],
    instrs: Sequence[Sass],
    succ: Sequence[Sequence[int]],
    pred: Sequence[Sequence[int]],
    writes: set[int],
) -> dict[str, Any]:
    """The definitions of column ``c``'s value that reach ``p`` and the uses it reaches."""
    defs: set[int] = set()
    entry = False
    read_before = marks[p][c] in "vx" and p not in writes
    if marks[p][c] in "^x" and (marks[p][c] == "^" or not instrs[p].predicated):
        defs.add(p)  # defined at the peak (an update reads the value before it, not this one)
        back: list[int] = []
    else:
        if p in writes:
            defs.add(p)
        back = list(pred[p])
        if not back:
            entry = True
    seen = set(back)
    prev: int | None = None  # the last read before the peak, in address order
    while back:
        j = back.pop()
        ch = marks[j][c]
        if ch == " ":
            continue  # not live there: a path that does not carry this value
        if j < p and (ch == "v" or (ch == "x" and instrs[j].predicated)):
            prev = j if prev is None else max(prev, j)
        if ch in "^x":
            defs.add(j)
            if not instrs[j].predicated:
                continue  # an unconditional write: what it reads is the value before it
            read_before = read_before or ch == "x"  # a conditional update reads this value
        elif ch == "v":
            read_before = True
        if not pred[j]:
            entry = True
        for k in pred[j]:
            if k not in seen:
                seen.add(k)
                back.append(k)
    # forward: the uses reached before the value is overwritten
    uses, end = _forward(p, c, marks, instrs, succ)
    if marks[p][c] in "vx":
        uses.add(p)
    last = max(uses) if uses else None
    return {"defs": defs, "entry": entry, "uses": uses, "last": last, "end": end,
            "read_before": read_before, "prev": prev}  # fmt: skip


def _forward(
    p: int, c: int, marks: Sequence[str], instrs: Sequence[Sass], succ: Sequence[Sequence[int]]
) -> tuple[set[int], int]:
    """The reads of column ``c``'s value after ``p`` before it is overwritten, and the last
    instruction (in address order) where it is live."""
    uses: set[int] = set()
    end = p
    fwd = list(succ[p])
    seen = set(fwd)
    while fwd:
        j = fwd.pop()
        ch = marks[j][c]
        if ch == " ":
            continue
        end = max(end, j)
        if ch in "vx":
            uses.add(j)
        if ch in "^x" and not instrs[j].predicated:
            continue  # overwritten (an update read it first)
        for k in succ[j]:
            if k not in seen:
                seen.add(k)
                fwd.append(k)
    return uses, end


def _kind(
    reg: int,
    c: int,
    d: Mapping[str, Any],
    instrs: Sequence[Sass],
    marks: Sequence[str],
    named: Sequence[bool],
    pred: Sequence[Sequence[int]],
    succ: Sequence[Sequence[int]],
    inner: tuple[int, int] | None,
    writes: set[int],
) -> str:
    if not named[c]:
        return "reserved"
    defs = sorted(d["defs"])
    if reg == 1 and defs and instrs[defs[0]].base == "LDC" and defs[0] == 0:
        return "stack pointer"
    chain, carried = _updates(defs, c, marks, instrs, pred)
    ahead, _end = _chain_uses(d["uses"], c, marks, instrs, succ)
    later = sorted(u for u in ahead if _update(u, c, marks, instrs))
    # an update that reaches an update at or before it (around a loop) is carried
    for u in later:
        nxt, _ = _forward(u, c, marks, instrs, succ)
        carried = carried or any(k <= u and _update(k, c, marks, instrs) for k in nxt)
    chain = sorted(set(chain) | set(later))
    if chain and (carried or len(chain) >= 3):
        if any(_combines(instrs[u], reg) for u in chain):
            return "accumulator"
        return "induction variable"
    uses = d["uses"]
    if uses and all(reg in _address_registers(instrs[u]) for u in uses):
        return "address"
    if any(instrs[i].base in _LOADS for i in defs):
        return "loaded value"
    if defs and all(_constant_def(instrs[i]) for i in defs):
        return "loop-invariant constant"
    if inner is not None and defs:
        a, b = inner
        if all(not a <= i <= b for i in defs) and not any(a <= w <= b for w in writes):
            return "loop-invariant constant"
    return "computed value"


def _reaching(j: int, c: int, marks: Sequence[str], instrs: Sequence[Sass],
               pred: Sequence[Sequence[int]]) -> set[int]:  # fmt: skip
    """The definitions of column ``c`` that reach instruction ``j``'s read."""
    out: set[int] = set()
    back = list(pred[j])
    seen = set(back)
    while back:
        k = back.pop()
        ch = marks[k][c]
        if ch == " ":
            continue
        if ch in "^x":
            out.add(k)
            if not instrs[k].predicated:
                continue
        for q in pred[k]:
            if q not in seen:
                seen.add(q)
                back.append(q)
    return out


def _chain(
    defs: Iterable[int],
    c: int,
    marks: Sequence[str],
    instrs: Sequence[Sass],
    pred: Sequence[Sequence[int]],
) -> set[int]:
    """An accumulator's definitions back to where it starts: every update's own reaching
    definitions, followed until the ones that do not read the register (its initialization)."""
    todo = list(defs)
    seen = set(todo)
    while todo:
        d = todo.pop()
        if marks[d][c] == "x" and not instrs[d].predicated:
            for k in _reaching(d, c, marks, instrs, pred):
                if k not in seen:
                    seen.add(k)
                    todo.append(k)
    starts = {d for d in seen if not (marks[d][c] == "x" and not instrs[d].predicated)}
    return starts or seen


def _chain_uses(
    uses: Iterable[int],
    c: int,
    marks: Sequence[str],
    instrs: Sequence[Sass],
    succ: Sequence[Sequence[int]],
) -> tuple[set[int], int]:
    """An accumulator's reads to where it ends (what each later update's value reaches), and
    the last instruction where it is live."""
    todo = list(uses)
    seen = set(todo)
    end = max(todo, default=0)
    while todo:
        u = todo.pop()
        if not _update(u, c, marks, instrs):
            continue
        more, last = _forward(u, c, marks, instrs, succ)
        end = max(end, last)
        for j in more - seen:
            seen.add(j)
            todo.append(j)
    return seen, end


def _update(i: int, c: int, marks: Sequence[str], instrs: Sequence[Sass]) -> bool:
    """Instruction ``i`` reads and writes column ``c`` unconditionally (an in-place update)."""
    return marks[i][c] == "x" and not instrs[i].predicated


def _updates(
    defs: Iterable[int],
    c: int,
    marks: Sequence[str],
    instrs: Sequence[Sass],
    pred: Sequence[Sequence[int]],
) -> tuple[list[int], bool]:
    """The in-place updates of a value back through its chain (each update's read reached by
    the previous one), and whether the chain reaches itself around a loop."""
    todo = [d for d in defs if _update(d, c, marks, instrs)]
    seen = set(todo)
    carried = False
    while todo:
        u = todo.pop()
        for k in _reaching(u, c, marks, instrs, pred):
            if k >= u and _update(k, c, marks, instrs):
                carried = True  # reached around a back edge
            if _update(k, c, marks, instrs) and k not in seen:
                seen.add(k)
                todo.append(k)
    return sorted(seen), carried


def _combines(ins: Sass, reg: int) -> bool:
    """An update of ``reg`` that folds another register's value in (``FFMA R4, R8, R9, R4``),
    not only constants (``IADD3 R4, R4, 0x40, RZ``: a counter or a pointer stepped)."""
    ops = [p.strip() for p in ins.operands.split(",")][1:]
    for p in ops:
        for m in _REG.finditer(p):
            if m.group(1) == "R" and int(m.group(2)) != reg:
                return True
    return False


def _dataflow_counts(
    instrs: Sequence[Sass],
    marks: Sequence[str],
    cols: Sequence[int],
    succ: Sequence[Sequence[int]],
    body: set[int] | None = None,
) -> list[int]:
    """Live general registers per instruction from the reads and writes alone: backward
    liveness over the control-flow graph (a predicated write does not kill; ``R1``, the stack
    pointer, is live where a path ends). A call uses what its subroutine reads before writing;
    inside a subroutine, what is live after any of its calls is live up to its return."""
    n = len(instrs)
    use = [0] * n
    kill = [0] * n
    defs = [0] * n
    for i, m in enumerate(marks):
        u = k = 0
        for c, ch in enumerate(m):
            if ch in "vx":
                u |= 1 << c
            if ch in "^x":
                k |= 1 << c
        use[i], defs[i] = u, k
        kill[i] = 0 if instrs[i].predicated else k
    sp = 1 << cols.index(1) if 1 in cols else 0
    live_in = [0] * n
    # what is live where a path ends (EXIT, RET, the padding loop): 0 elsewhere
    boundary = [sp if not succ[i] or instrs[i].base in ("EXIT", "RET") else 0 for i in range(n)]
    _solve(live_in, use, kill, succ, boundary, range(n - 1, -1, -1))
    if body:
        # the caller's values live across a call stay live through the subroutine
        across = 0
        for i, ins in enumerate(instrs):
            if ins.base == "CALL" and i + 1 < n and i not in body:
                across |= live_in[i + 1] & ~kill[i]
        for i in body:
            if instrs[i].base == "RET":
                boundary[i] |= across
        _solve(live_in, use, kill, succ, boundary, sorted(body, reverse=True))
    return [(live_in[i] | defs[i]).bit_count() for i in range(n)]


def _solve(
    live_in: list[int],
    use: Sequence[int],
    kill: Sequence[int],
    succ: Sequence[Sequence[int]],
    boundary: Sequence[int],
    order: Iterable[int],
) -> None:
    """Backward liveness to a fixed point over the instructions in ``order`` (the others'
    ``live_in`` held); ``boundary``: what is live after an instruction that ends a path."""
    nodes = list(order)
    changed = True
    while changed:
        changed = False
        for i in nodes:
            out = boundary[i]
            for j in succ[i]:
                out |= live_in[j]
            new = use[i] | (out & ~kill[i])
            if new != live_in[i]:
                live_in[i] = new
                changed = True
