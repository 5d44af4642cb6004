"""Each PTX block's warp instructions by pipe as the SASS runs them (issue 29).

The execution model's issue and pipe terms divide a launch's dynamic instruction counts by pipe
(:class:`~gpuadvise.model.execution.KernelWork`); the emulator counts PTX blocks, and the PTX is
not what runs: ptxas expands 64-bit address math into IMAD.WIDE and IADD3.X pairs, moves values
(``mov`` is free in PTX, MOV and IMAD.MOV issue in SASS), reads the launch's constants through
the uniform datapath (ULDC, S2UR), turns ``div``/``sqrt`` into their Newton sequences, predicates
small branches and unrolls loops again. :func:`sass_block_pipes` maps the kernel's own SASS onto
the PTX blocks through the line table, so that the emulator's dynamic block counts times these
rows are the SASS's dynamic counts by pipe.

How, per source location (the innermost file and line, and the kernel body's line it is inlined
at, on both sides):

- the SASS instructions of the location by pipe (:func:`sass_pipe`; ``@!PT`` padding, NOPs, the
  code of subroutines ptxas made that a ``CALL`` reaches (the double division's slow path,
  counted apart where the traced values take it: :mod:`gpuadvise.ptx.slow_paths`) and the code
  after the kernel's last ``EXIT`` that nothing branches to are left out). The code a ``CALL``
  of a function the PTX has reaches (libdevice's ``__internal_trig_reduction_slowpathd``, a
  double ``pow``'s ``__internal_accurate_pow``) is that function's one location on both sides
  (the PTX has it inlined at each call, :attr:`~gpuadvise.ptx.cfg.Program.inlined`): its one
  SASS copy goes to the blocks of the PTX's n inlined copies as n copies' worth
  (:func:`_copies`: 1/n), so each execution of an inlined copy issues the whole function, and a
  path the traced values never take (a double ``sin`` of ``|x| >= 2^31``) costs nothing;
- the copies of that code ptxas made: a loop it unrolled u times, and its remainder, hold the
  location's code u + 1 times, each copy run for its share of the iterations, so one execution of
  the PTX runs one copy. The copies are the SASS's *anchors* (memory instructions, FP32, FP64,
  MUFU and shuffle instructions: those ptxas neither adds nor removes (local accesses are not:
  ptxas adds spills), but for the expansions
  :func:`gpuadvise.ptx.pipes.pipe_work` models) over the PTX's, rounded, at least 1. A PTX
  ``ld.const`` of a fixed address is an anchor that ptxas may fold into the instruction using the
  value (a ``c[0x3][..]`` operand) or into the uniform datapath (``ULDC``): on the SASS side the
  ``__constant__`` bytes the location reads at fixed addresses, over the PTX's load size, count
  as its loads (a loop ptxas unrolled fully over ``c_lut[k]`` has 128 of them, not 0); an
  ``LDC``/``ULDC`` of bank 0 (a parameter, the PTX's free ``ld.param``) is no anchor. A location
  without anchors takes the most copies of an anchored location that shares a PTX block with it
  (a loop's increment and compare are unrolled with its body), and, where its PTX is in a loop
  and its SASS in none (a loop ptxas unrolled fully), the most copies of the anchored locations
  of the same PTX loop also unrolled (window7_loops' bounds test, line 30: 7);
- where ptxas kept part of a location's code in a loop and part outside (a loop's invariant
  code hoisted out of it, a ``for`` line's start and its step), and the PTX has the location's
  work in loops and outside too, the two parts are matched apart: the SASS's instructions between
  a backward branch's target and the branch go to the location's PTX blocks on a cycle of the
  control-flow graph, the others to its blocks on none;
- one execution of a PTX block then issues, for each location, its share of the location's SASS
  by pipe over its copies: for each group of pipes (the memory instructions, each float pipe,
  MUFU, XU, shuffles, branches, the integer pipes together), the block's share of the
  location's PTX work of that group (``pipe_work``'s instructions), or of all its work where the
  PTX has none of that group (a ``for`` line's loads go to the block that loads, its compare and
  branch where they are).

Locations one side has and the other has not meet in one location, :data:`REST`: the SASS's
instructions without a line or on a line the PTX lacks (ptxas moved code there) stand for the
PTX's work without a line (compiler-made, ``.loc`` line 0) or on a line the SASS lacks (ptxas
folded it into another line's instructions, e.g. a row pointer into each load's address), spread
over the blocks of the latter as above. So the SASS's instructions are each counted once, and
PTX work that ptxas folded away is not counted on top of them.

The local-memory accesses (``LDL``/``STL``) are also counted apart (:func:`sass_block_counts`):
each block's share of its locations' local accesses, their L1 wavefronts (by width) and the
stores' wavefronts, and the part beyond the PTX's own ``ld.local``/``st.local`` of the block:
ptxas's register spills, which the PTX the emulator runs does not have.

The tensor and barrier pipes stay the PTX's (an ``mma``'s units are m16n8k16 equivalents, a
barrier's passes the barrier term's). When less than
:data:`MIN_MATCHED` of the SASS's instructions find their location in the PTX (no line info, a
cubin from other source) the map is None and the PTX's counts are used (the estimate's method says
which).

Pure: it reads the PTX program and the SASS instructions it is given (no I/O).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpuadvise.ptx.cfg import Program
from gpuadvise.ptx.chains import block_instructions
from gpuadvise.ptx.loops import Loop, cyclic_blocks
from gpuadvise.ptx.parser import Instr, Loc
from gpuadvise.ptx.pipes import PIPES, pipe_work
from gpuadvise.toolchain.sass import SassInstruction

__all__ = [
    "MIN_MATCHED",
    "SASS_PIPES",
    "location_copies",
    "sass_block_counts",
    "sass_block_pipes",
    "sass_pipe",
]

MIN_MATCHED = 0.7
"""The least share of the SASS's counted instructions whose location the PTX has, for the map."""

_PTX_KEPT = ("tensor", "barrier")  # pipes taken from the PTX, not the SASS
_ANCHORS = ("fp32", "fp64", "mufu", "shuffle", "lsu")
# a location's SASS of a group of pipes goes to its PTX blocks by their share of the group's PTX
# work (the integer pipes together: ptxas moves work between the ALU, IMAD and uniform datapath),
# by their share of all its work where the PTX has none of the group
_GROUPS = (("lsu",), ("fp32",), ("fp16",), ("fp64",), ("mufu",), ("xu",), ("shuffle",),
           ("branch",), ("int", "imad", "uniform"))  # fmt: skip

SASS_PIPES: dict[str, str] = {}
"""SASS base opcode -> pipe (:data:`~gpuadvise.ptx.pipes.PIPES`; ``uniform``: the uniform
datapath's, which take an issue slot and no vector pipe); others are ``int`` (the ALU)."""
for _pipe, _ops in (
    ("fp32", "FADD FMUL FFMA FADD32I FMUL32I FFMA32I FSWZADD FRND"),
    ("fp16", "HADD2 HMUL2 HFMA2 HADD2_32I HMUL2_32I HFMA2_32I HSETP2 HMNMX2 HSET2"),
    ("fp64", "DADD DMUL DFMA DSETP DMNMX DSET"),
    ("imad", "IMAD IMAD32I IMUL IMUL32I IMADSP IDP IDP4A"),
    ("mufu", "MUFU"),
    ("xu", "F2I I2F F2F I2I FCHK POPC FLO BREV F2IP I2FP"),
    (
        "lsu",
        "LDG STG LD ST LDS STS LDL STL LDC ATOM ATOMG ATOMS RED REDG LDSM STSM MEMBAR "
        "CCTL ERRBAR LDGSTS LDGDEPBAR MATCH QSPC UBLKCP UTMALDG UTMASTG",
    ),
    ("shuffle", "SHFL"),
    (
        "branch",
        "BRA BRX JMP JMX CALL RET EXIT BSSY BSYNC WARPSYNC BMOV BREAK KILL YIELD NANOSLEEP BPT RTT",
    ),
    ("tensor", "HMMA IMMA DMMA BMMA HGMMA IGMMA QGMMA"),
    ("barrier", "BAR SYNCS ARRIVES WARPGROUP"),
):
    for _op in _ops.split():
        SASS_PIPES[_op] = _pipe

_NOT_ISSUED = frozenset({"NOP"})


def sass_pipe(base_opcode: str) -> str:
    """The pipe a SASS instruction issues to (``REDUX`` counts twice on ``shuffle``, as
    :func:`~gpuadvise.ptx.pipes.pipe_work` has it; uniform-datapath instructions, ``U...``,
    on ``uniform``)."""
    pipe = SASS_PIPES.get(base_opcode)
    if pipe is not None:
        return pipe
    if base_opcode == "REDUX":
        return "shuffle"
    if base_opcode.startswith("U") or base_opcode in ("S2UR", "R2UR", "VOTEU"):
        return "uniform"
    return "int"


Src = tuple[str, int, int]  # innermost file's base name, its line, the kernel body's line
Key = tuple[str, int, int, int]  # a Src and where it runs: 1 in a loop, 0 not, -1 either


def _ptx_key(program: Program, ins: Instr) -> Src | None:
    inner = ins.inner_loc or ins.loc
    if inner is None or ins.loc is None or inner.line <= 0:
        return None
    outer: Loc = ins.call_sites[-1] if ins.call_sites else ins.loc
    path = program.module.files.get(inner.file, "")
    return os.path.basename(path), inner.line, outer.line


def _sass_key(s: SassInstruction) -> Src | None:
    if s.line is None or s.file is None:
        return None
    return os.path.basename(s.file), s.line, s.call_site[1] or s.line


_CALLEE_RE = re.compile(r"`\(([^)]*)\)")


def _callee_name(s: SassInstruction, functions: frozenset[str]) -> str | None:
    """The PTX function ``s`` (a ``CALL``) calls, None for a subroutine ptxas made."""
    m = _CALLEE_RE.search(s.operands)
    if m is None:
        return None
    name = m.group(1).rsplit("$", 1)[-1]
    return name if name in functions else None


def _counted(
    sass: Sequence[SassInstruction], functions: frozenset[str] = frozenset()
) -> list[tuple[SassInstruction, str | None]]:
    """The instructions that run, each with the PTX function whose ``CALL`` reaches it (None:
    the kernel's own code, reached from its first instruction by falling through and branching;
    not a subroutine ptxas made that only a ``CALL`` reaches, nor the trap loop after the last
    ``EXIT``), less ``@!PT`` padding and NOPs. With an indirect branch whose targets are not
    known, every instruction is taken as the kernel's own."""
    if not sass:
        return []
    at = {s.offset: i for i, s in enumerate(sass)}
    region: dict[int, str | None] = {}
    if any(s.base_opcode in ("BRX", "JMX") and s.target is None for s in sass):
        region = dict.fromkeys(range(len(sass)))
    else:
        starts: list[tuple[int, str | None]] = [(0, None)]
        while starts:
            first, name = starts.pop(0)
            todo = [first]
            while todo:
                i = todo.pop()
                if i in region or i >= len(sass):
                    continue
                region[i] = name
                s = sass[i]
                always = s.predicate is None or s.predicate == "@PT"
                if s.base_opcode == "CALL" and s.target is not None:
                    callee = _callee_name(s, functions)
                    j = at.get(s.target)
                    if callee is not None and j is not None:
                        starts.append((j, callee))
                elif s.base_opcode in ("BRA", "BRX", "JMP") and s.target is not None:
                    j = at.get(s.target)
                    if j is not None:
                        todo.append(j)
                if not (always and s.base_opcode in ("BRA", "BRX", "JMP", "EXIT", "RET", "KILL")):
                    todo.append(i + 1)
    return [
        (s, region[i])
        for i, s in enumerate(sass)
        if i in region and not s.never_executes and s.base_opcode not in _NOT_ISSUED
    ]


Row = dict[Key, np.ndarray]


_CONST_RE = re.compile(r"c\[(0x[0-9a-fA-F]+)\]\[([^\]]*)\]")
_USER_BANK = 3  # the bank of the module's __constant__ variables (bank 0: parameters, launch)
_CONST_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def _const_reads(s: SassInstruction) -> list[tuple[int, int]]:
    """The (byte offset, width) of each ``__constant__`` word ``s`` reads at a fixed address
    (bank 3, as an operand or with ``LDC``/``ULDC``): the PTX's ``ld.const`` of a known address,
    which ptxas folds into the instruction that uses the value or into the uniform datapath."""
    reads: list[tuple[int, int]] = []
    width = 4
    if s.base_opcode in ("LDC", "ULDC"):
        for mod in s.opcode.split(".")[1:]:
            width = _CONST_WIDTH.get(mod, width)
    elif s.base_opcode.startswith("D") or ".64" in s.opcode:
        width = 8
    for m in _CONST_RE.finditer(s.operands):
        if int(m.group(1), 16) == _USER_BANK and m.group(2).startswith("0x"):
            reads.append((int(m.group(2), 16), width))
    return reads


def _sass_anchor(s: SassInstruction, pipe: str) -> float:
    """``s``'s anchors (see the module doc) less its ``__constant__`` and parameter loads, which
    :func:`_tables` counts by the words they read."""
    if pipe not in _ANCHORS:
        return 0.0
    addr = _CONST_RE.search(s.operands) if s.base_opcode in ("LDC", "ULDC") else None
    if addr is not None and (int(addr.group(1), 16) == 0 or addr.group(2).startswith("0x")):
        return 0.0  # a parameter (bank 0), or a __constant__ word at a fixed address
    return 2.0 if s.base_opcode == "REDUX" else 1.0


def _ptx_const_bytes(ins: Instr) -> int:
    """The bytes a PTX ``ld.const`` reads (0 for any other instruction)."""
    if ins.base not in ("ld", "ldu") or "const" not in ins.mods:
        return 0
    size = 4
    lanes = 1
    for m in ins.mods:
        if m[:1] in "subf" and m[1:].isdigit():
            size = max(1, int(m[1:]) // 8)
        elif m in ("v2", "v4", "v8"):
            lanes = int(m[1:])
    return size * lanes


@dataclass
class _Anchors:
    """Per location: the SASS's anchors (its ``__constant__`` words read at fixed addresses
    counted as loads of the PTX's size), and the PTX's (:data:`_ANCHORS` of ``pipe_work``)."""

    sass: dict[Key, float] = field(default_factory=lambda: defaultdict(float))
    ptx: dict[Key, float] = field(default_factory=lambda: defaultdict(float))


_LOCAL_SASS = frozenset({"LDL", "STL"})
_WIDTH_BITS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128,
               "u8": 8, "s8": 8, "b8": 8, "u16": 16, "s16": 16, "b16": 16, "f16": 16,
               "u64": 64, "s64": 64, "b64": 64, "f64": 64}  # fmt: skip


def _local_wavefronts(mods: Sequence[str]) -> float:
    """The L1 wavefronts of a warp's local access of these modifiers (``LDL.64``'s or
    ``ld.local.v2.f32``'s): local memory is interleaved per 4-byte word across a warp's lanes,
    so a warp's 32-bit access is one 128-byte line, a 64-bit one two, a 128-bit one four."""
    bits = 32
    lanes = 1
    for m in mods:
        bits = _WIDTH_BITS.get(m, bits)
        if m in ("v2", "v4"):
            lanes = int(m[1:])
    return max(1.0, bits * lanes * 32 / 8 / 128)


def _call_of(program: Program, i: int, called: frozenset[str]) -> tuple[str, int] | None:
    """The innermost call the PTX instruction ``i`` was inlined from whose function the SASS
    calls (``CALL``) rather than inlines: (function, inline site); None: none."""
    inlined = program.inlined
    if not called or len(inlined) != len(program.instrs):
        return None
    for name, site in reversed(inlined[i]):
        if name in called:
            return name, site
    return None


def _called_key(function: str) -> Src:
    """The location of a function the SASS calls: its whole code, on either side (its SASS is
    one copy, whatever line a few of its instructions carry; the PTX has it inlined at each
    call, most often without lines: libdevice)."""
    return (f"{function}()", 0, 0)


REST: Key = ("", 0, 0, -1)
"""The location that stands for the rest: the SASS's instructions whose location the PTX has not
(none, or a line ptxas moved code to) and the PTX's work whose location the SASS has not (a line
ptxas folded into another's instructions, or compiler-made code without a line)."""


@dataclass
class _Tables:
    sass_by: Row
    ptx_rows: dict[tuple[int, Key], np.ndarray]
    ptx_by: Row
    anchors: _Anchors
    ptx_keys: dict[int, Key]  # PTX instruction index -> its location (or REST)
    # the locations whose PTX is in a loop and whose SASS is in none (a loop ptxas unrolled
    # fully), and each cyclic PTX block's outermost loop
    unrolled: set[Key] = field(default_factory=set)
    loop_of: dict[int, int] = field(default_factory=dict)
    # per called function's location (:func:`_called_key`), the PTX's inlined copies of it
    inline_sites: dict[Src, int] = field(default_factory=dict)
    # per location, the SASS's local-memory warp instructions, their L1 wavefronts and the
    # stores' wavefronts; per
    # (block, location), the PTX's (``ld.local``/``st.local``: the emulator traces them)
    local_by: Row = field(default_factory=dict)
    ptx_local: dict[tuple[int, Key], np.ndarray] = field(default_factory=dict)


def _tables(
    program: Program, sass: Sequence[SassInstruction], loops: Sequence[Loop] | None = None
) -> _Tables | None:
    """The SASS's instructions by location and pipe, the PTX's work by (block, location) and by
    location (``pipe_work``), both sides' anchors by location, each on the locations both sides
    have and :data:`REST`; None when too little of the SASS finds its location."""
    pipe_ix = {p: i for i, p in enumerate(PIPES)}
    width = len(PIPES)
    blocks = block_instructions(program)
    functions = frozenset(program.module.functions)
    regions = _counted(sass, functions)
    called = frozenset(r for _s, r in regions if r is not None)
    sites: dict[str, set[int]] = defaultdict(set)
    src_ptx: dict[int, Src | None] = {}
    for indices in blocks:
        for i in indices:
            site = _call_of(program, i, called)
            if site is None:
                src_ptx[i] = _ptx_key(program, program.instrs[i])
            else:
                src_ptx[i] = _called_key(site[0])
                sites[site[0]].add(site[1])
    counted = [
        (s, sass_pipe(s.base_opcode), _sass_key(s) if r is None else _called_key(r))
        for s, r in regions
    ]
    counted = [c for c in counted if c[1] not in _PTX_KEPT]
    ptx_src = {k for k in src_ptx.values() if k is not None}
    located = [k for _s, _p, k in counted if k is not None]
    if not located or sum(1 for k in located if k in ptx_src) < MIN_MATCHED * len(located):
        return None
    # where each side runs a location's code: in a loop or not (ptxas hoists a loop's invariant
    # code out of it; the PTX's ``for`` line has its start outside the loop, its step inside)
    cyclic = cyclic_blocks(program, loops)
    ptx_loop = {i: int(b in cyclic) for b, indices in enumerate(blocks) for i in indices}
    sass_loop = _sass_in_loop(sass)
    both: dict[Src, tuple[set[int], set[int]]] = defaultdict(lambda: (set(), set()))
    for i, k in src_ptx.items():
        if k is not None:
            both[k][1].add(ptx_loop[i])
    for s, _p, k in counted:
        if k is not None:
            both[k][0].add(sass_loop.get(s.offset, 0))
    split = {k for k, (a, b) in both.items() if a == b == {0, 1}}
    unrolled = {(*k, -1) for k, (a, b) in both.items() if a == {0} and 1 in b}

    def key_of(k: Src | None, in_loop: int) -> Key | None:
        return None if k is None else (*k, in_loop if k in split else -1)

    raw_ptx = {i: key_of(k, ptx_loop[i]) for i, k in src_ptx.items()}
    ptx_have = {k for k in raw_ptx.values() if k is not None}
    counted_keys = [(s, p, key_of(k, sass_loop.get(s.offset, 0))) for s, p, k in counted]
    sass_have = {k for _s, _p, k in counted_keys if k is not None}
    sass_by: Row = defaultdict(lambda: np.zeros(width))
    local_by: Row = defaultdict(lambda: np.zeros(3))
    anchors = _Anchors()
    const_words: dict[Key, set[int]] = defaultdict(set)
    for s, pipe, raw in counted_keys:
        key = raw if raw is not None and raw in ptx_have else REST
        sass_by[key][pipe_ix[pipe]] += 2.0 if s.base_opcode == "REDUX" else 1.0
        if s.base_opcode in _LOCAL_SASS:
            wf = _local_wavefronts(s.opcode.split(".")[1:])
            local_by[key] += (1.0, wf, wf if s.base_opcode == "STL" else 0.0)
        else:  # (a spill is no anchor: ptxas adds it)
            anchors.sass[key] += _sass_anchor(s, pipe)
        for offset, size in _const_reads(s):
            const_words[key].update(range(offset, offset + size))
    ptx_keys = {i: k if k is not None and k in sass_have else REST for i, k in raw_ptx.items()}
    ptx_rows: dict[tuple[int, Key], np.ndarray] = defaultdict(lambda: np.zeros(width))
    ptx_local: dict[tuple[int, Key], np.ndarray] = defaultdict(lambda: np.zeros(3))
    const_size: dict[Key, list[int]] = defaultdict(list)
    for b, indices in enumerate(blocks):
        for i in indices:
            ins = program.instrs[i]
            key = ptx_keys[i]
            row = ptx_rows[(b, key)]
            local = ins.base in ("ld", "st") and "local" in ins.mods
            if local:
                wf = _local_wavefronts(ins.mods)
                ptx_local[(b, key)] += (1.0, wf, wf if ins.base == "st" else 0.0)
            for pipe, n in pipe_work(ins):
                row[pipe_ix[pipe]] += n
                if pipe in _ANCHORS and not local:
                    anchors.ptx[key] += n
            if size := _ptx_const_bytes(ins):
                const_size[key].append(size)
    ptx_by: Row = defaultdict(lambda: np.zeros(width))
    for (_b, key), row in ptx_rows.items():
        ptx_by[key] += row
    for key, words in const_words.items():  # __constant__ words read, in the PTX's load size
        sizes = const_size.get(key)
        if sizes:  # (where the PTX loads none, ptxas moved another line's loads here)
            anchors.sass[key] += len(words) / (sum(sizes) / len(sizes))
    inline = {_called_key(f): len(k) for f, k in sites.items()}
    return _Tables(
        sass_by, ptx_rows, ptx_by, anchors, ptx_keys, unrolled & set(sass_by), cyclic, inline,
        local_by, ptx_local,
    )  # fmt: skip


def _copies(tables: _Tables) -> dict[Key, float]:
    """Each location's copies in the SASS (see the module doc)."""
    sass_by, ptx_rows, anchors = tables.sass_by, tables.ptx_rows, tables.anchors
    copies: dict[Key, float] = {}
    for key in sass_by:
        expected = anchors.ptx.get(key, 0.0)
        if expected > 0:
            copies[key] = max(1.0, float(np.floor(anchors.sass.get(key, 0.0) / expected + 0.5)))
    block_copies: dict[int, float] = {}
    for b, loc in ptx_rows:
        if loc in copies:
            block_copies[b] = max(block_copies.get(b, 1.0), copies[loc])
    for b, loc in ptx_rows:
        if loc in sass_by and loc not in copies:
            copies[loc] = block_copies.get(b, 1.0)
    for b, loc in ptx_rows:  # a location over several blocks: the most of theirs
        if loc in sass_by and loc in copies and b in block_copies:
            if not anchors.ptx.get(loc, 0.0):
                copies[loc] = max(copies[loc], block_copies[b])
    # a loop ptxas unrolled fully: its locations without anchors (a condition, the loop's own
    # count) are there as many times as the anchored locations of the same loop also unrolled
    loop_copies: dict[int, float] = {}
    for b, loc in ptx_rows:
        if loc in tables.unrolled and anchors.ptx.get(loc, 0.0) and b in tables.loop_of:
            c = tables.loop_of[b]
            loop_copies[c] = max(loop_copies.get(c, 1.0), copies.get(loc, 1.0))
    for b, loc in ptx_rows:
        if loc in tables.unrolled and not anchors.ptx.get(loc, 0.0) and b in tables.loop_of:
            copies[loc] = max(copies.get(loc, 1.0), loop_copies.get(tables.loop_of[b], 1.0))
    # a function the SASS calls: one copy of its code for the PTX's n inlined ones, so that one
    # execution of an inlined copy's blocks issues the whole function's share of it
    for key in sass_by:
        n = tables.inline_sites.get(key[:3], 0)
        if n > 1:
            expected = anchors.ptx.get(key, 0.0) / n
            got = anchors.sass.get(key, 0.0)
            own = max(1.0, float(np.floor(got / expected + 0.5))) if expected > 0 else 1.0
            copies[key] = own / n
    return copies


def location_copies(program: Program, sass: Sequence[SassInstruction]) -> dict[Src, float]:
    """Each source location's copies in the SASS (file base name, line, kernel body line ->
    copies; see the module doc); empty when the SASS cannot be matched to the PTX."""
    tables = _tables(program, sass)
    if tables is None:
        return {}
    out: dict[Src, float] = {}
    for (file, line, outer, _in_loop), n in _copies(tables).items():
        if file:
            out[file, line, outer] = max(out.get((file, line, outer), 0.0), n)
    return out


def _sass_in_loop(sass: Sequence[SassInstruction]) -> dict[int, int]:
    """Offset -> 1 for the SASS instructions between a backward branch's target and the branch
    (a loop of the SASS), else 0."""
    at = {s.offset: i for i, s in enumerate(sass)}
    marks = [0] * (len(sass) + 1)
    for i, s in enumerate(sass):
        if s.base_opcode in ("BRA", "JMP") and s.target is not None and s.target <= s.offset:
            j = at.get(s.target)
            if j is not None:
                marks[j] += 1
                marks[i + 1] -= 1
    out: dict[int, int] = {}
    depth = 0
    for i, s in enumerate(sass):
        depth += marks[i]
        out[s.offset] = int(depth > 0)
    return out


def sass_block_pipes(program: Program, sass: Sequence[SassInstruction]) -> np.ndarray | None:
    """Per PTX block (and a zero row for the virtual exit), one execution's warp instructions by
    pipe (:data:`~gpuadvise.ptx.pipes.PIPES` order) as the SASS runs them (see the module doc);
    None when the SASS cannot be matched to the PTX."""
    return sass_block_counts(program, sass)[0]


def sass_block_counts(
    program: Program, sass: Sequence[SassInstruction], loops: Sequence[Loop] | None = None
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`sass_block_pipes`, and per PTX block (and the virtual exit) one execution's
    local-memory warp instructions (``LDL``/``STL``), their L1 wavefronts
    (:func:`_local_wavefronts`) and the stores' wavefronts, spread over the blocks like the
    memory instructions of their locations (three columns), then the same of the part beyond
    the PTX's own ``ld.local``/``st.local`` (three more): ptxas's register spills; None, None
    when the SASS cannot be matched to the PTX. ``loops``: the program's
    (:func:`gpuadvise.ptx.loops.find_loops`; found here when not given)."""
    tables = _tables(program, sass, loops)
    if tables is None:
        return None, None
    sass_by, ptx_by = tables.sass_by, tables.ptx_by
    copies = _copies(tables)
    blocks = block_instructions(program)
    ptx_n: dict[Key, int] = defaultdict(int)
    for k in tables.ptx_keys.values():
        ptx_n[k] += 1
    width = len(PIPES)
    kept = [PIPES.index(p) for p in _PTX_KEPT]
    lsu = [PIPES.index("lsu")]
    groups = [[PIPES.index(p) for p in g] for g in _GROUPS]
    out = np.zeros((len(program.blocks) + 1, width))
    local = np.zeros((len(program.blocks) + 1, 3))
    ptx_local = np.zeros((len(program.blocks) + 1, 3))
    for (b, key), row in tables.ptx_rows.items():
        out[b][kept] += row[kept]
        ptx_local[b] += tables.ptx_local.get((b, key), 0.0)
        s_row = sass_by.get(key)
        if s_row is None:  # (REST where every SASS instruction found its location: nothing)
            continue
        whole = ptx_by[key]
        p_total = float(whole.sum() - whole[kept].sum())
        own = float(row.sum() - row[kept].sum())
        if p_total > 0:
            share = own / p_total
        else:  # only moves and parameter loads: by instruction count
            share = sum(1 for i in blocks[b] if tables.ptx_keys[i] == key) / max(ptx_n[key], 1)
        mine = np.zeros(width)
        for g in groups:
            there = float(whole[g].sum())
            mine[g] = s_row[g] * (float(row[g].sum()) / there if there > 0 else share)
        out[b] += mine / copies.get(key, 1.0)
        if key in tables.local_by:
            there = float(whole[lsu].sum())
            part = float(row[lsu].sum()) / there if there > 0 else share
            local[b] += tables.local_by[key] * part / copies.get(key, 1.0)
    return out, np.hstack([local, np.maximum(local - ptx_local, 0.0)])
