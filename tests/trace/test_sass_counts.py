"""gpuadvise.trace.sass_counts: each PTX block's instructions by pipe as the SASS runs them, on
hand-written PTX and the SASS ptxas makes of such code (written out by hand, with the answers
read off the listings): a loop ptxas unrolls 4x (and its remainder), a double division's
expansion with its slow-path subroutine, a run of guarded loads ptxas predicates."""

from __future__ import annotations

import numpy as np

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.chains import block_costs
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.ptx.pipes import PIPES
from gpuadvise.toolchain.sass import SassInstruction
from gpuadvise.trace.sass_counts import (
    location_copies,
    sass_block_counts,
    sass_block_pipes,
    sass_pipe,
)

HEAD = """
.version 8.0
.target sm_90
.address_size 64
.file 1 "k.cu"
"""


def _program(body: str, regs: str = "") -> object:
    ptx = (
        HEAD
        + ".visible .entry k(.param .u64 p, .param .u32 n)\n{\n"
        + "  .reg .pred %p<9>;\n  .reg .b32 %r<20>;\n  .reg .f32 %f<20>;\n  .reg .f64 %fd<9>;\n"
        + "  .reg .b64 %rd<20>;\n"
        + regs
        + body
        + "\n}\n"
    )
    return build_program(parse_ptx(ptx), "k")


def _sass(rows: list[tuple]) -> tuple[SassInstruction, ...]:
    """(opcode, line[, predicate[, target]]) rows at offsets 0, 0x10, ..."""
    out = []
    for i, row in enumerate(rows):
        opcode, line = row[0], row[1]
        pred = row[2] if len(row) > 2 else None
        target = row[3] if len(row) > 3 else None
        out.append(
            SassInstruction(
                offset=i * 16,
                opcode=opcode,
                base_opcode=opcode.split(".")[0],
                predicate=pred,
                operands="",
                file=None if line is None else "/src/k.cu",
                line=line,
                target=target,
            )
        )
    return tuple(out)


def _row(rows: np.ndarray, b: int) -> dict[str, float]:
    return {p: round(float(v), 6) for p, v in zip(PIPES, rows[b], strict=True) if v}


def test_sass_pipe_classes() -> None:
    assert sass_pipe("FFMA") == "fp32"
    assert sass_pipe("DFMA") == "fp64"
    assert sass_pipe("IMAD") == "imad"  # IMAD.WIDE, IMAD.MOV: the FMA-heavy pipe
    assert sass_pipe("IADD3") == "int"
    assert sass_pipe("LDG") == "lsu"
    assert sass_pipe("MUFU") == "mufu"
    assert sass_pipe("BSSY") == "branch"
    assert sass_pipe("ULDC") == "uniform"  # a constant load of the uniform datapath
    assert sass_pipe("LDC") == "lsu"  # an issue slot (ncu counts it on the ADU)
    assert sass_pipe("UIADD3") == "uniform"
    assert sass_pipe("S2UR") == "uniform"
    assert sass_pipe("HFMA2") == "fp16"  # HFMA2.MMA is ptxas's move of a constant


# A one-block loop: line 10 loads and accumulates, line 9 counts.
LOOP = """
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
  mov.f32 %f1, 0f00000000;
$L_loop:
  .loc 1 10 0
  mul.wide.s32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f2, [%rd3];
  add.f32 %f1, %f1, %f2;
  .loc 1 9 0
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, %r1;
  @%p1 bra $L_loop;
  .loc 1 12 0
  st.global.f32 [%rd1], %f1;
  ret;
"""


def _loop_block(program: object) -> int:
    return next(
        b
        for b, blk in enumerate(program.blocks)
        if any(
            program.instrs[i].base == "ld" and "global" in program.instrs[i].mods for i in blk.body
        )
    )


def test_loop_unrolled_four_times_counts_one_copy_an_iteration() -> None:
    """ptxas unrolls the loop 4x and keeps a remainder loop of one iteration: line 10's code is
    there five times (5 LDG, 5 FADD), so one PTX iteration runs a fifth of it: 1 LDG, 1 FADD and
    the address math as the SASS does it (one IMAD.WIDE, not the PTX's multiply and 64-bit add:
    two IADD3 on the ALU in the PTX table); line 9's count, compare and branch, which ptxas put
    before the loops and in each of them, are spread over the same copies."""
    program = _program(LOOP)
    rows = [("ULDC.64", 12), ("MOV", 9), ("ISETP.GE.AND", 9), ("BRA", 9, "@P0")]
    body4 = [("IMAD.WIDE", 10), ("LDG.E", 10)] * 4 + [("FADD", 10)] * 4
    rows += body4 + [("IADD3", 9), ("IADD3", 9), ("ISETP.GE.AND", 9), ("BRA", 9, "@P0", 0x40)]
    rows += [("IMAD.WIDE", 10), ("LDG.E", 10), ("FADD", 10)]
    rows += [("IADD3", 9), ("ISETP.GE.AND", 9), ("BRA", 9, "@P0", 0x100)]
    rows += [("STG.E", 12), ("EXIT", None)]
    sass = _sass(rows)
    copies = location_copies(program, sass)
    assert copies[("k.cu", 10, 10)] == 5.0
    # line 9 has no anchors: it is unrolled with the body it shares the loop's block with
    assert copies[("k.cu", 9, 9)] == 5.0
    got = sass_block_pipes(program, sass)
    assert got is not None
    loop = _loop_block(program)
    row = _row(got, loop)
    assert row["lsu"] == 1.0  # 5 LDG over 5 copies
    assert row["fp32"] == 1.0  # the FADD
    assert row["imad"] == 1.0  # IMAD.WIDE: the PTX's mul.wide and add.s64 as one
    # line 9: the SASS's 7 integer instructions and 3 branches (the preheader's check and the
    # two loops' back edges), all in the loop block (the only one with line 9's PTX), over
    # its 5 copies
    assert abs(row["int"] - 7 / 5) < 1e-9
    assert abs(row["branch"] - 3 / 5) < 1e-9
    ptx = _row(block_costs(program).pipes, loop)
    assert ptx["int"] == 4.0 and ptx["branch"] == 1.0  # the PTX's: add.s64 x2, add, setp
    # what the emulator adds up: the loop's 100 executions issue as many LDG as the SASS does
    assert 100 * got[loop][PIPES.index("lsu")] == 100.0


DDIV = """
  ld.param.u64 %rd1, [p];
  .loc 1 5 0
  ld.global.f64 %fd1, [%rd1];
  ld.global.f64 %fd2, [%rd1+8];
  div.rn.f64 %fd3, %fd1, %fd2;
  .loc 1 6 0
  st.global.f64 [%rd1], %fd3;
  ret;
"""


def test_fp64_division_expansion_and_its_slow_path_subroutine() -> None:
    """``div.rn.f64`` is MUFU.RCP64H, the Newton steps (DFMA x7, DMUL), the range check (FFMA,
    FSETP) and a call of the slow path around BSSY/BSYNC; the slow path is a subroutine after
    the EXIT that only the CALL reaches: not counted (the emulator counts it where the traced
    values take it, gpuadvise.ptx.slow_paths)."""
    program = _program(DDIV)
    rows = [("LDG.E.64", 5), ("LDG.E.64", 5), ("MUFU.RCP64H", 5), ("IMAD.MOV.U32", 5)]
    rows += [("DFMA", 5)] * 7 + [("DMUL", 5), ("FFMA", 5), ("FSETP.GEU.AND", 5)]
    rows += [("BSSY", 5), ("BRA", 5, "@P0", 0x110), ("CALL.REL.NOINC", 5, None, 0x150)]
    rows += [("BSYNC", 5), ("STG.E.64", 6), ("EXIT", None), ("BRA", None, None, 0x140)]
    rows += [("DFMA", 5)] * 30 + [("RET.REL.NODEC", 5)]
    sass = _sass(rows)
    assert sass[0x110 // 16].base_opcode == "BSYNC"
    assert sass[0x150 // 16].base_opcode == "DFMA"  # the subroutine's first instruction
    got = sass_block_pipes(program, sass)
    assert got is not None
    entry = _row(got, 0)
    assert entry["fp64"] == 8.0  # the 30 DFMA of the subroutine are not in
    assert entry["mufu"] == 1.0
    assert entry["fp32"] == 1.0
    assert entry["lsu"] == 3.0
    # BSSY, BRA, CALL, BSYNC, and the EXIT: it has no line, so it is the rest (REST), which
    # the PTX has in this block (the ld.param before the first .loc)
    assert entry["branch"] == 5.0
    assert location_copies(program, sass)[("k.cu", 5, 5)] == 1.0


GUARDED = "".join(
    f"""
  .loc 1 7 0
  setp.lt.s32 %p{k}, %r{k}, %r9;
  @!%p{k} bra $L_skip{k};
  ld.global.f32 %f{k}, [%rd{k}];
  add.f32 %f9, %f9, %f{k};
$L_skip{k}:"""
    for k in range(1, 5)
)


def test_guarded_loads_that_ptxas_predicates_have_no_branches() -> None:
    """Four guarded loads, each a branch around a block in the PTX, are four predicated LDG and
    FADD in the SASS, with no branch: the blocks that load issue one LDG and one FADD each, the
    heads their compare and no branch."""
    regs = "".join(f"  mov.u32 %r{k}, %tid.x;\n" for k in range(1, 5))
    body = "  ld.param.u64 %rd1, [p];\n" + regs + GUARDED + "\n  ret;\n"
    program = _program(body)
    rows = [("S2R", 7)] * 4 + [("ISETP.GE.AND", 7)] * 4
    rows += [(op, 7, f"@!P{k}") for k in range(4) for op in ("LDG.E", "FADD")]
    rows += [("EXIT", None)]
    sass = _sass(rows)
    got = sass_block_pipes(program, sass)
    assert got is not None
    ptx = block_costs(program).pipes
    total_ptx_branch = ptx[:, PIPES.index("branch")].sum()
    assert total_ptx_branch >= 4  # the PTX's four branches around the loads (and the ret)
    # the SASS's one: the EXIT, with no line, on the block of the PTX's lineless work (REST)
    assert got[:, PIPES.index("branch")].sum() == 1.0
    loads = [b for b in range(len(program.blocks)) if ptx[b][PIPES.index("lsu")]]
    assert len(loads) == 4
    for b in loads:
        assert _row(got, b) == {"fp32": 1.0, "lsu": 1.0}


def test_no_line_info_falls_back_to_the_ptx() -> None:
    program = _program(LOOP)
    sass = _sass([("LDG.E", None), ("FADD", None), ("EXIT", None)])
    assert sass_block_pipes(program, sass) is None


# A loop over a __constant__ table, two taps an iteration in the PTX (line 9 loads and
# multiplies-adds, line 10 counts); line 8's row pointer is folded by ptxas into line 9's code.
CONST_LOOP = """
  .loc 1 8 0
  mov.u32 %r1, %tid.x;
  mul.lo.s32 %r5, %r1, 3;
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
$L_loop:
  .loc 1 9 0
  cvt.u64.u32 %rd2, %r2;
  mov.u64 %rd3, c_lut;
  add.s64 %rd4, %rd3, %rd2;
  ld.const.u8 %r6, [%rd4];
  mad.lo.s32 %r3, %r6, %r5, %r3;
  ld.const.u8 %r7, [%rd4+1];
  mad.lo.s32 %r3, %r7, %r5, %r3;
  .loc 1 10 0
  add.s32 %r2, %r2, 2;
  setp.lt.u32 %p1, %r2, 16;
  @%p1 bra $L_loop;
  .loc 1 12 0
  ld.param.u64 %rd1, [p];
  st.global.u32 [%rd1], %r3;
  ret;
"""


def _sass_ops(rows: list[tuple[str, int | None, str]]) -> tuple[SassInstruction, ...]:
    """(opcode, line, operands) rows at offsets 0, 0x10, ..."""
    return tuple(
        SassInstruction(
            offset=i * 16,
            opcode=op,
            base_opcode=op.split(".")[0],
            predicate=None,
            operands=operands,
            file=None if line is None else "/src/k.cu",
            line=line,
        )
        for i, (op, line, operands) in enumerate(rows)
    )


def test_a_fully_unrolled_constant_loop_counts_the_constant_words_as_its_loads() -> None:
    """ptxas unrolls the loop fully (8 PTX iterations, 16 taps) and reads c_lut through the
    uniform datapath (ULDC.U8, one byte each, and one ULDC.64 whose 8 bytes four taps share):
    no LDC is left, so the taps' loads are the 16 bytes of bank 3 read at fixed addresses over
    the PTX's 1-byte loads: 8 copies, one of which a PTX iteration runs (its 2 IMAD). The
    bank-0 loads of the parameter (line 12) are no anchor; line 8's multiply, folded into the
    IMADs' operand, and the PTX's line 10, gone with the loop, are not counted on top."""
    program = _program(CONST_LOOP)
    rows: list[tuple[str, int | None, str]] = [("S2R", 8, "R0, SR_TID.X")]
    rows += [("IMAD", 8, "R5, R0, 0x3, RZ")]
    rows += [("ULDC.64", 9, "UR4, c[0x3][0x0]")]
    rows += [("ULDC.U8", 9, f"UR{6 + k}, c[0x3][{hex(8 + k)}]") for k in range(8)]
    rows += [("ULOP3.LUT", 9, "UR8, UR4, 0xff, URZ, 0xc0, !UPT")] * 4
    rows += [("IMAD", 9, "R3, R5, UR4, R3")] * 16
    rows += [("LDC.64", 12, "R4, c[0x0][0x210]"), ("STG.E", 12, "desc[UR4][R4.64], R3")]
    rows += [("EXIT", None, "")]
    sass = _sass_ops(rows)
    copies = location_copies(program, sass)
    assert copies[("k.cu", 9, 9)] == 8.0
    assert copies[("k.cu", 12, 12)] == 1.0  # the LDC of bank 0 is no second store's anchor
    got = sass_block_pipes(program, sass)
    assert got is not None
    loop = next(
        b
        for b, blk in enumerate(program.blocks)
        if any(program.instrs[i].base == "ld" for i in blk.body)
    )
    # the EXIT has no line: the rest (REST), whose PTX is line 10's, in the loop's block
    assert _row(got, loop) == {"imad": 2.0, "uniform": 13 / 8, "branch": 1 / 8}
    # 8 PTX iterations issue what the unrolled SASS issues once, and nothing of line 10's PTX
    assert 8 * got[loop].sum() == 16 + 13 + 1


# line 9 starts the loop outside it (the bound, doubled) and steps it inside
HOISTED = """
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  .loc 1 9 0
  shl.b32 %r5, %r1, 1;
  mov.u32 %r2, 0;
  mov.f32 %f1, 0f00000000;
$L_loop:
  .loc 1 10 0
  mul.wide.s32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f2, [%rd3];
  add.f32 %f1, %f1, %f2;
  .loc 1 9 0
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, %r5;
  @%p1 bra $L_loop;
  .loc 1 12 0
  st.global.f32 [%rd1], %f1;
  ret;
"""


def test_code_ptxas_keeps_outside_a_loop_runs_once() -> None:
    """Line 9's SASS outside the SASS loop (the parameter's LDC, S2R, the shift, two moves)
    goes to the PTX's line-9 block outside the loop, its SASS inside the loop (IADD3, ISETP,
    the back branch) to the loop's block: an iteration issues 3 of line 9's, not 8."""
    program = _program(HOISTED)
    rows = [("LDC", 9), ("S2R", 9), ("SHF.L.U32", 9), ("MOV", 9), ("IMAD.MOV.U32", 9)]
    rows += [("IMAD.WIDE", 10), ("LDG.E", 10), ("FADD", 10)]  # 0x50: the loop's head
    rows += [("IADD3", 9), ("ISETP.GE.AND", 9), ("BRA", 9, "@P0", 0x50)]
    rows += [("STG.E", 12), ("EXIT", None)]
    got = sass_block_pipes(program, _sass(rows))
    assert got is not None
    loop = _loop_block(program)
    row = _row(got, loop)
    assert row["int"] == 2.0 and row["branch"] == 1.0 and row["imad"] == 1.0
    entry = _row(got, 0)
    assert entry["int"] == 3.0 and entry["imad"] == 1.0 and entry["lsu"] == 1.0


# a guarded tap a trip: line 11 tests (no anchor, its own block), line 10 loads and adds
GUARDED_LOOP = """
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
  mov.f32 %f1, 0f00000000;
$L_loop:
  .loc 1 11 0
  setp.ge.s32 %p2, %r2, %r1;
  @%p2 bra $L_next;
  .loc 1 10 0
  mul.wide.s32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f2, [%rd3];
  add.f32 %f1, %f1, %f2;
$L_next:
  .loc 1 9 0
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, 4;
  @%p1 bra $L_loop;
  .loc 1 12 0
  st.global.f32 [%rd1], %f1;
  ret;
"""


def test_a_loop_unrolled_fully_gives_its_test_the_copies_of_its_loads() -> None:
    """ptxas unrolls the 4 trips fully and predicates the taps: line 11's compare (no anchor, in
    a block of its own) is there 4 times like line 10's loads, so a PTX trip runs one of each;
    line 9's count is gone (its PTX is the rest's, which the SASS has none of)."""
    program = _program(GUARDED_LOOP)
    rows = []
    for k in range(4):
        rows += [("ISETP.GE.AND", 11), ("IMAD.WIDE", 10, f"@!P{k}"), ("LDG.E", 10, f"@!P{k}")]
        rows += [("FADD", 10, f"@!P{k}")]
    rows += [("STG.E", 12), ("EXIT", 12)]
    sass = _sass(rows)
    copies = location_copies(program, sass)
    assert copies[("k.cu", 10, 10)] == 4.0
    assert copies[("k.cu", 11, 11)] == 4.0
    got = sass_block_pipes(program, sass)
    assert got is not None
    total = 4 * got[:-1].sum(axis=0)  # each block of the loop runs 4 times (every tap taken)
    assert total[PIPES.index("int")] == 4.0  # the 4 ISETP, not 16


# A PTX function (no line info, as libdevice's) that the kernel calls at two lines, each behind
# a branch; ptxas keeps it a subroutine: one copy in the SASS, reached by two CALLs.
CALLED = """
.func (.param .b32 r) slow(.param .b32 a)
{
  .reg .f32 %g<4>;
  ld.param.f32 %g1, [a];
  mul.f32 %g2, %g1, %g1;
  sqrt.approx.f32 %g3, %g2;
  st.param.f32 [r], %g3;
  ret;
}
.visible .entry k(.param .u64 p, .param .u32 n)
{
  .reg .pred %p<9>;
  .reg .f32 %f<20>;
  .reg .b64 %rd<20>;
  .loc 1 5 0
  ld.param.u64 %rd1, [p];
  ld.global.f32 %f1, [%rd1];
  .loc 1 6 0
  setp.gt.f32 %p1, %f1, 0f4F000000;
  @!%p1 bra $L_a;
  .loc 1 7 0
  {
  .param .b32 param0;
  st.param.f32 [param0], %f1;
  .param .b32 retval0;
  call.uni (retval0), slow, (param0);
  ld.param.f32 %f1, [retval0];
  }
$L_a:
  .loc 1 8 0
  setp.lt.f32 %p2, %f1, 0fCF000000;
  @!%p2 bra $L_b;
  {
  .param .b32 param1;
  st.param.f32 [param1], %f1;
  .param .b32 retval1;
  call.uni (retval1), slow, (param1);
  ld.param.f32 %f1, [retval1];
  }
$L_b:
  .loc 1 9 0
  st.global.f32 [%rd1], %f1;
  ret;
}
"""


def test_a_called_function_counts_where_the_trace_runs_its_inlined_copies() -> None:
    """The emulator runs the function inlined at each call; the SASS has it once, after the
    kernel's EXIT, reached by the CALLs. Its SASS goes to the blocks of its inlined copies
    only, each execution of a copy issuing all of it (one copy's share, times the two copies
    ptxas folded into one): a path the traced values never take costs nothing (libdevice's
    slow path of a double sin, HeCBench haversine), where it used to land on the kernel's own
    blocks by its line, once a warp."""
    program = build_program(parse_ptx(HEAD + CALLED), "k")
    rows = [("LDG.E", 5), ("FSETP.GT.AND", 6), ("BRA", 6, "@!P0", 0x40)]
    rows += [("CALL.REL.NOINC", 7, None, 0xB0), ("FSETP.GEU.AND", 8), ("BRA", 8, "@P0", 0x70)]
    rows += [("CALL.REL.NOINC", 8, None, 0xB0), ("STG.E", 9), ("EXIT", None)]
    rows += [("BRA", None, None, 0x90), ("NOP", None)]
    rows += [("FMUL", None), ("MUFU.SQRT", None), ("IADD3", None), ("RET.REL.NODEC", None)]
    sass = list(_sass(rows))
    for i in (3, 6):  # the CALLs name the function as nvdisasm prints it
        sass[i] = SassInstruction(**{**sass[i].to_dict(), "operands": "`($k$slow)"})
    assert sass[0xB0 // 16].opcode == "FMUL"
    got = sass_block_pipes(program, tuple(sass))
    assert got is not None
    inlined = {i for i, calls in enumerate(program.inlined) if calls}
    copies = [b for b, blk in enumerate(program.blocks) if set(blk.body) & inlined]
    assert copies
    per_copy = [
        {p: sum(got[b][PIPES.index(p)] for b in copies if b in side) for p in ("fp32", "mufu")}
        for side in (copies[: len(copies) // 2], copies[len(copies) // 2 :])
    ]
    assert per_copy == [{"fp32": 1.0, "mufu": 1.0}] * 2
    own = [b for b in range(len(program.blocks)) if b not in copies]
    assert sum(got[b][PIPES.index("fp32")] + got[b][PIPES.index("mufu")] for b in own) == 0


def test_spills_are_counted_apart_and_are_no_anchors() -> None:
    """ptxas spills in the loop (line 10: an STL.64 and two LDL, the PTX has no local access):
    one iteration issues them on the loop's block (3 LSU instructions more than the load),
    and they are the block's spills: 3 warp instructions, 4 wavefronts (the 64-bit store takes
    two), 2 of them the store's. They are no anchors: line 10's copies stay 1 (the LDG and
    FADD once), where counting them would make 3 copies and divide the line's work by 3."""
    program = _program(LOOP)
    rows = [("ULDC.64", 12), ("MOV", 9)]
    rows += [("IMAD.WIDE", 10), ("LDG.E", 10), ("LDL", 10), ("FADD", 10), ("STL.64", 10)]
    rows += [("LDL", 10), ("IADD3", 9), ("ISETP.GE.AND", 9), ("BRA", 9, "@P0", 0x20)]
    rows += [("STG.E", 12), ("EXIT", None)]
    sass = _sass(rows)
    assert location_copies(program, sass)[("k.cu", 10, 10)] == 1.0
    pipes, local = sass_block_counts(program, sass)
    assert pipes is not None and local is not None
    b = _loop_block(program)
    assert _row(pipes, b)["lsu"] == 4.0
    assert list(local[b]) == [3.0, 4.0, 2.0] * 2  # all of them, and all of them spills
    assert local.sum() == 18.0  # nothing elsewhere


NEST = """
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
$L_outer:
  .loc 1 9 0
  mov.u32 %r3, 0;
$L_inner:
  .loc 1 10 0
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, %r1;
  @%p1 bra $L_inner;
  .loc 1 9 0
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p2, %r2, %r1;
  @%p2 bra $L_outer;
$L_self:
  .loc 1 12 0
  add.s32 %r4, %r4, 1;
  setp.lt.s32 %p3, %r4, %r1;
  @%p3 bra $L_self;
  ret;
"""


def test_cyclic_blocks_are_the_natural_loops_by_outermost_header() -> None:
    """The blocks on a cycle (what sass_counts splits a location's code by), from
    ptx/loops.find_loops: a nest's blocks share its outer loop's header, a one-block loop is
    its own; the entry and the exit are in none."""
    from gpuadvise.ptx.loops import cyclic_blocks

    program = _program(NEST, regs="  .reg .b32 %s<1>;\n")
    got = cyclic_blocks(program)
    start = {program.blocks[b].start: b for b in range(len(program.blocks))}
    entry = start[0]
    assert entry not in got
    nest = {b for b, h in got.items() if h == got[start[2]]}
    assert len(nest) == 3  # the outer loop's head, the inner loop, the outer latch
    selfloop = [b for b in got if b not in nest]
    assert len(selfloop) == 1 and got[selfloop[0]] == selfloop[0]
