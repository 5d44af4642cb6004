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
  code of subroutines reached by ``CALL`` (the double division's slow path, counted apart where the
  traced values take it: :mod:`gpuadvise.ptx.slow_paths`) and the code after the kernel's last
  ``EXIT`` that nothing branches to are left out);
- the copies of that code ptxas made: a loop it unrolled u times, and its remainder, hold the
  location's code u + 1 times, each copy run for its share of the iterations, so one execution of
  the PTX runs one copy. The copies are the SASS's *anchors* (memory instructions, FP32, FP64,
  MUFU and shuffle instructions: those ptxas neither adds nor removes, but for the expansions
  :func:`gpuadvise.ptx.pipes.pipe_work` models) over the PTX's, rounded, at least 1; a location
  without anchors takes the most copies of an anchored location that shares a PTX block with it
  (a loop's increment and compare are unrolled with its body);
- one execution of a PTX block then issues, for each location, its share of the location's SASS
  by pipe over its copies: for each group of pipes (the memory instructions, each float pipe,
  MUFU, XU, shuffles, branches, the integer pipes together), the block's share of the
  location's PTX work of that group (``pipe_work``'s instructions), or of all its work where the
  PTX has none of that group (a ``for`` line's loads go to the block that loads, its compare and
  branch where they are).

The tensor and barrier pipes stay the PTX's (an ``mma``'s units are m16n8k16 equivalents, a
barrier's passes the barrier term's), and so does a location the SASS does not have: a
PTX instruction whose location has no SASS keeps ``pipe_work``'s row. When less than
:data:`MIN_MATCHED` of the SASS's instructions find their location in the PTX (no line info, a
cubin from other source) the map is None and the PTX's counts are used (the estimate's method says
which).

Pure: it reads the PTX program and the SASS instructions it is given (no I/O).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from gpuadvise.ptx.cfg import Program
from gpuadvise.ptx.chains import block_instructions
from gpuadvise.ptx.parser import Instr, Loc
from gpuadvise.ptx.pipes import PIPES, pipe_work
from gpuadvise.toolchain.sass import SassInstruction

__all__ = ["MIN_MATCHED", "SASS_PIPES", "location_copies", "sass_block_pipes", "sass_pipe"]

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


Key = tuple[str, int, int]  # innermost file's base name, its line, the kernel body's line


def _ptx_key(program: Program, ins: Instr) -> Key | None:
    inner = ins.inner_loc or ins.loc
    if inner is None or ins.loc is None or inner.line <= 0:
        return None
    outer: Loc = ins.call_sites[-1] if ins.call_sites else ins.loc
    path = program.module.files.get(inner.file, "")
    return os.path.basename(path), inner.line, outer.line


def _sass_key(s: SassInstruction) -> Key | None:
    if s.line is None or s.file is None:
        return None
    return os.path.basename(s.file), s.line, s.call_site[1] or s.line


def _counted(sass: Sequence[SassInstruction]) -> list[SassInstruction]:
    """The instructions that run as the kernel's own code: those reached from its first
    instruction by falling through and branching (not a subroutine that only a ``CALL`` reaches,
    not the trap loop after the last ``EXIT``), less ``@!PT`` padding and NOPs. With an indirect
    branch whose targets are not known, every instruction is taken as reached."""
    if not sass:
        return []
    at = {s.offset: i for i, s in enumerate(sass)}
    if any(s.base_opcode in ("BRX", "JMX") and s.target is None for s in sass):
        reached = set(range(len(sass)))
    else:
        reached = set()
        todo = [0]
        while todo:
            i = todo.pop()
            if i in reached or i >= len(sass):
                continue
            reached.add(i)
            s = sass[i]
            always = s.predicate is None or s.predicate == "@PT"
            if s.base_opcode in ("BRA", "BRX", "JMP") and s.target is not None:
                j = at.get(s.target)
                if j is not None:
                    todo.append(j)
            if not (always and s.base_opcode in ("BRA", "BRX", "JMP", "EXIT", "RET", "KILL")):
                todo.append(i + 1)
    return [
        s
        for i, s in enumerate(sass)
        if i in reached and not s.never_executes and s.base_opcode not in _NOT_ISSUED
    ]


Row = dict[Key, np.ndarray]


def _tables(
    program: Program, sass: Sequence[SassInstruction]
) -> tuple[Row, dict[tuple[int, Key | None], np.ndarray], Row] | None:
    """The SASS's instructions by location and pipe, the PTX's work by (block, location) and by
    location (``pipe_work``); None when too little of the SASS finds its location."""
    pipe_ix = {p: i for i, p in enumerate(PIPES)}
    width = len(PIPES)
    sass_by: Row = defaultdict(lambda: np.zeros(width))
    for s in _counted(sass):
        pipe = sass_pipe(s.base_opcode)
        key = _sass_key(s)
        if pipe in _PTX_KEPT or key is None:
            continue
        sass_by[key][pipe_ix[pipe]] += 2.0 if s.base_opcode == "REDUX" else 1.0
    ptx_rows: dict[tuple[int, Key | None], np.ndarray] = defaultdict(lambda: np.zeros(width))
    for b, indices in enumerate(block_instructions(program)):
        for i in indices:
            ins = program.instrs[i]
            row = ptx_rows[(b, _ptx_key(program, ins))]
            for pipe, n in pipe_work(ins):
                row[pipe_ix[pipe]] += n
    ptx_by: Row = defaultdict(lambda: np.zeros(width))
    for (_b, key), row in ptx_rows.items():
        if key is not None:
            ptx_by[key] += row
    total = sum(float(v.sum()) for v in sass_by.values())
    matched = sum(float(v.sum()) for k, v in sass_by.items() if k in ptx_by)
    if total <= 0 or matched < MIN_MATCHED * total:
        return None
    return sass_by, ptx_rows, ptx_by


def _copies(
    sass_by: Row, ptx_rows: dict[tuple[int, Key | None], np.ndarray], ptx_by: Row
) -> dict[Key, float]:
    """Each location's copies in the SASS (see the module doc)."""
    anchors = [PIPES.index(p) for p in _ANCHORS]
    copies: dict[Key, float] = {}
    for key, s_row in sass_by.items():
        p_row = ptx_by.get(key)
        expected = 0.0 if p_row is None else float(p_row[anchors].sum())
        if expected > 0:
            copies[key] = max(1.0, float(np.floor(float(s_row[anchors].sum()) / expected + 0.5)))
    block_copies: dict[int, float] = {}
    for b, loc in ptx_rows:
        if loc is not None and loc in copies:
            block_copies[b] = max(block_copies.get(b, 1.0), copies[loc])
    for b, loc in ptx_rows:
        if loc is not None and loc in sass_by and loc not in copies:
            copies[loc] = block_copies.get(b, 1.0)
    for b, loc in ptx_rows:  # a location over several blocks: the most of theirs
        if loc is not None and loc in sass_by and loc in copies and b in block_copies:
            if not float(ptx_by[loc][anchors].sum()):
                copies[loc] = max(copies[loc], block_copies[b])
    return copies


def location_copies(program: Program, sass: Sequence[SassInstruction]) -> dict[Key, float]:
    """Each source location's copies in the SASS (file base name, line, kernel body line ->
    copies; see the module doc); empty when the SASS cannot be matched to the PTX."""
    tables = _tables(program, sass)
    return {} if tables is None else _copies(*tables)


def sass_block_pipes(program: Program, sass: Sequence[SassInstruction]) -> np.ndarray | None:
    """Per PTX block (and a zero row for the virtual exit), one execution's warp instructions by
    pipe (:data:`~gpuadvise.ptx.pipes.PIPES` order) as the SASS runs them (see the module doc);
    None when the SASS cannot be matched to the PTX."""
    tables = _tables(program, sass)
    if tables is None:
        return None
    sass_by, ptx_rows, ptx_by = tables
    copies = _copies(sass_by, ptx_rows, ptx_by)
    blocks = block_instructions(program)
    ptx_n: dict[Key, int] = defaultdict(int)
    for indices in blocks:
        for i in indices:
            k = _ptx_key(program, program.instrs[i])
            if k is not None:
                ptx_n[k] += 1
    width = len(PIPES)
    kept = [PIPES.index(p) for p in _PTX_KEPT]
    groups = [[PIPES.index(p) for p in g] for g in _GROUPS]
    out = np.zeros((len(program.blocks) + 1, width))
    for (b, key), row in ptx_rows.items():
        s_row = None if key is None else sass_by.get(key)
        if s_row is None:
            out[b] += row
            continue
        assert key is not None
        whole = ptx_by[key]
        p_total = float(whole.sum() - whole[kept].sum())
        own = float(row.sum() - row[kept].sum())
        if p_total > 0:
            share = own / p_total
        else:  # only moves and parameter loads: by instruction count
            share = _instructions(program, blocks[b], key) / max(ptx_n[key], 1)
        mine = np.zeros(width)
        for g in groups:
            there = float(whole[g].sum())
            mine[g] = s_row[g] * (float(row[g].sum()) / there if there > 0 else share)
        out[b] += mine / copies.get(key, 1.0)
        out[b][kept] += row[kept]
    return out


def _instructions(program: Program, indices: list[int], key: Key) -> int:
    return sum(1 for i in indices if _ptx_key(program, program.instrs[i]) == key)
