"""gpuadvise.ptx.pipes and gpuadvise.ptx.chains: what a PTX instruction costs on which SASS pipe,
each block's longest dependent chain, and the per-CTA counts the emulator adds up, on
hand-written PTX whose answers are read off the code."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.chains import block_costs, shared_wavefronts
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.ptx.pipes import LATENCY_CLASSES, PIPES, latency_work, pipe_work
from gpuadvise.trace.emulate import emulate_ptx

HEAD = """
.version 8.0
.target sm_90
.address_size 64
"""


def _instr(text: str, regs: str = "") -> object:
    ptx = (
        HEAD
        + ".visible .entry k(.param .u64 p)\n{\n"
        + "  .reg .pred %p<4>;\n  .reg .b32 %r<9>;\n  .reg .f32 %f<9>;\n  .reg .f64 %fd<9>;\n"
        + "  .reg .b64 %rd<9>;\n  .shared .align 16 .b8 s[512];\n"
        + regs
        + f"  {text}\n  ret;\n}}\n"
    )
    return build_program(parse_ptx(ptx), "k").instrs[0]


@pytest.mark.parametrize(
    ("text", "work"),
    [
        ("fma.rn.f32 %f1, %f2, %f3, %f4;", (("fp32", 1.0),)),
        ("fma.rn.f64 %fd1, %fd2, %fd3, %fd4;", (("fp64", 1.0),)),
        ("ex2.approx.ftz.f32 %f1, %f2;", (("mufu", 1.0),)),
        ("div.rn.f32 %f1, %f2, %f3;", (("mufu", 1.0), ("fp32", 8.0))),
        ("add.s64 %rd1, %rd2, %rd3;", (("int", 2.0),)),
        ("mul.wide.s32 %rd1, %r2, 4;", (("imad", 1.0),)),  # IMAD.WIDE: the FMA-heavy pipe
        ("mad.lo.s32 %r1, %r2, %r3, %r4;", (("imad", 1.0),)),
        ("and.b32 %r1, %r2, 7;", (("int", 1.0),)),  # LOP3: the ALU
        ("cvt.rn.f32.s32 %f1, %r1;", (("xu", 1.0),)),
        ("cvt.u64.u32 %rd1, %r1;", (("int", 1.0),)),
        ("setp.lt.f32 %p1, %f1, %f2;", (("int", 1.0),)),
        ("mov.u32 %r1, %tid.x;", (("int", 1.0),)),  # S2R
        ("mov.u32 %r1, %ntid.x;", ()),  # a constant-bank operand
        ("mov.f32 %f1, %f2;", ()),
        ("neg.f32 %f1, %f2;", ()),  # an operand modifier
        ("ld.param.u64 %rd1, [p];", ()),
        ("ld.global.f32 %f1, [%rd1];", (("lsu", 1.0),)),
        ("st.shared.v4.f32 [%r1], {%f1, %f2, %f3, %f4};", (("lsu", 1.0),)),
        ("shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;", (("shuffle", 1.0),)),
        ("bar.sync 0;", (("barrier", 1.0),)),
        ("popc.b32 %r1, %r2;", (("xu", 1.0),)),
    ],
)
def test_pipe_work_of_one_instruction(text: str, work: tuple[tuple[str, float], ...]) -> None:
    assert pipe_work(_instr(text)) == work  # type: ignore[arg-type]


def test_latency_of_results() -> None:
    assert latency_work(_instr("ld.shared.f32 %f1, [%r1];")) == (("shared", 1.0),)  # type: ignore[arg-type]
    assert latency_work(_instr("ld.global.f32 %f1, [%rd1];")) == (("global", 1.0),)  # type: ignore[arg-type]
    assert latency_work(_instr("st.global.f32 [%rd1], %f1;")) == (("store", 1.0),)  # type: ignore[arg-type]
    # MUFU.RCP, then four of the eight FFMAs of the Newton step in a row
    assert latency_work(_instr("div.rn.f32 %f1, %f2, %f3;")) == (("mufu", 1.0), ("fp32", 4.0))  # type: ignore[arg-type]
    assert latency_work(_instr("add.s64 %rd1, %rd2, %rd3;")) == (("int", 2.0),)  # type: ignore[arg-type]
    assert latency_work(_instr("mov.f32 %f1, %f2;")) == ()  # type: ignore[arg-type]


def test_shared_wavefronts_by_width() -> None:
    assert shared_wavefronts(_instr("ld.shared.f32 %f1, [%r1];")) == 1.0  # type: ignore[arg-type]
    assert shared_wavefronts(_instr("ld.shared.v2.f32 {%f1, %f2}, [%r1];")) == 2.0  # type: ignore[arg-type]
    assert shared_wavefronts(_instr("st.shared.v4.f32 [%r1], {%f1, %f2, %f3, %f4};")) == 4.0  # type: ignore[arg-type]
    assert shared_wavefronts(_instr("ld.global.f32 %f1, [%rd1];")) == 0.0  # type: ignore[arg-type]


# One block: a shared load feeding two dependent FMAs, and an independent integer chain of two.
# Longest chain (at the reference latencies, 30 + 4 + 4 against 4 + 4): the shared load and the
# two FMAs.
CHAIN = (
    HEAD
    + """
.visible .entry c(.param .u64 p)
{
  .reg .b32 %r<9>;
  .reg .f32 %f<9>;
  .shared .align 4 .b8 s[128];
  mov.u32 %r1, s;
  ld.shared.f32 %f1, [%r1];
  fma.rn.f32 %f2, %f1, %f1, %f1;
  add.s32 %r2, %r1, 4;
  fma.rn.f32 %f3, %f2, %f2, %f1;
  add.s32 %r3, %r2, 4;
  ret;
}
"""
)


def test_longest_chain_of_a_block() -> None:
    prog = build_program(parse_ptx(CHAIN), "c")
    costs = block_costs(prog)
    # one block of code (the program adds an empty exit block)
    assert prog.blocks[0].body == (0, 1, 2, 3, 4, 5)
    chain = dict(zip(LATENCY_CLASSES, costs.chain[0], strict=True))
    assert chain["shared"] == 1 and chain["fp32"] == 2 and chain["int"] == 0
    pipes = dict(zip(PIPES, costs.pipes[0], strict=True))
    # mov of a symbol is free; ld.shared (lsu), 2 FFMA, 2 IADD, ret (branch)
    assert (pipes["lsu"], pipes["fp32"], pipes["int"], pipes["branch"]) == (1, 2, 2, 1)
    assert costs.shared[0].tolist() == [1.0, 1.0]
    assert costs.per_warp[0, -1] == 6  # instructions issued


# Memory order: a loop body unrolled twice that stores its running sum after each add (out[r] +=
# v[k] without __restrict__). Each load of v may read what the store before it wrote, so it
# starts when that store does (its sum ready): the chain is ld -> add -> (st) -> ld -> add, two
# global and two fp32 links. Without the stores' hold (unordered) the second load overlaps the
# first: one global link, then the two dependent adds. The .nc load, the load at a disjoint
# offset of the store's own base register and the shared load do not wait.
ORDER = (
    HEAD
    + """
.visible .entry m(.param .u64 p)
{
  .reg .f32 %f<12>;
  .reg .b64 %rd<9>;
  .reg .b32 %r<4>;
  .shared .align 4 .b8 s[128];
  ld.param.u64 %rd1, [p];
  ld.global.f32 %f1, [%rd2];
  add.f32 %f2, %f1, %f9;
  st.global.f32 [%rd1], %f2;
  ld.global.f32 %f3, [%rd3];
  add.f32 %f4, %f2, %f3;
  st.global.f32 [%rd1], %f4;
  ld.global.nc.f32 %f5, [%rd4];
  ld.global.f32 %f6, [%rd1+4];
  mov.u32 %r1, s;
  ld.shared.f32 %f7, [%r1];
  ret;
}
"""
)


def test_loads_wait_for_the_stores_they_may_read() -> None:
    prog = build_program(parse_ptx(ORDER), "m")
    costs = block_costs(prog)
    ordered = dict(zip(LATENCY_CLASSES, costs.chain[0], strict=True))
    free = dict(zip(LATENCY_CLASSES, costs.unordered[0], strict=True))
    assert (ordered["global"], ordered["fp32"]) == (2, 2)
    assert (free["global"], free["fp32"]) == (1, 2)
    # the other loads: none of them starts after a store, so none lengthens the chain
    assert ordered["shared"] == 0 and free["shared"] == 0
    # what a warp adds up: the chain, the unordered chain, the instructions issued
    width = len(LATENCY_CLASSES)
    assert costs.per_warp.shape[1] == 2 * width + 1
    assert costs.per_warp[0, :width].tolist() == costs.chain[0].tolist()
    assert costs.per_warp[0, width : 2 * width].tolist() == costs.unordered[0].tolist()


@pytest.mark.parametrize(
    ("later", "waits"),
    [
        ("ld.global.f32 %f6, [%rd1+4];", False),  # the store's base, 4 bytes on: disjoint
        ("ld.global.f32 %f6, [%rd1+2];", True),  # overlapping bytes
        ("ld.global.v2.f32 {%f6, %f7}, [%rd1+-4];", True),  # 8 bytes from -4 cover the store
        ("ld.global.nc.f32 %f6, [%rd3];", False),  # read-only: ptxas may move it
        ("ld.f32 %f6, [%rd3];", True),  # generic: may be global memory
        ("ld.shared.f32 %f6, [%r1];", False),  # another space
        ("atom.global.add.f32 %f6, [%rd3], %f5;", True),  # an atomic returns what it read
    ],
)
def test_which_loads_a_store_holds(later: str, waits: bool) -> None:
    ptx = (
        HEAD
        + ".visible .entry w(.param .u64 p)\n{\n  .reg .f32 %f<9>;\n  .reg .b64 %rd<9>;\n"
        + "  .reg .b32 %r<4>;\n  ld.global.f32 %f1, [%rd2];\n  st.global.f32 [%rd1], %f1;\n"
        + f"  {later}\n  add.f32 %f8, %f6, %f6;\n  ret;\n}}\n"
    )
    costs = block_costs(build_program(parse_ptx(ptx), "w"))
    chain = dict(zip(LATENCY_CLASSES, costs.chain[0], strict=True))
    free = dict(zip(LATENCY_CLASSES, costs.unordered[0], strict=True))
    # waiting, the later load's latency follows the first one's; else they overlap
    assert chain["global"] == (2 if waits else 1), (later, chain)
    assert free["global"] == 1


# The fast-path test's kernel: each thread sums its column for n iterations (one more on odd
# threads, so every warp runs the loop n + 1 times), storing the running sum each time.
LOOP = (
    HEAD
    + r"""
.visible .entry k(.param .u64 p_in, .param .u64 p_out, .param .u32 p_n)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  ld.param.u32 %r1, [p_n];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r9, %nctaid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.lo.s32 %r10, %r9, %r4;
  mul.wide.s32 %rd3, %r5, 4;
  mul.wide.s32 %rd6, %r10, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  and.b32 %r7, %r2, 1;
  add.s32 %r8, %r1, %r7;
  mov.f32 %f1, 0f00000000;
  mov.u32 %r6, 0;
$L_loop:
  ld.global.f32 %f2, [%rd4];
  fma.rn.f32 %f1, %f2, 0f3F000000, %f1;
  st.global.f32 [%rd5], %f1;
  add.s64 %rd4, %rd4, %rd6;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p1, %r6, %r8;
  @%p1 bra $L_loop;
  setp.lt.u32 %p2, %r2, 40;
  @%p2 st.global.f32 [%rd5], %f2;
  ret;
}
"""
)


def test_emulator_adds_up_each_ctas_critical_warp() -> None:
    grid, block, n = 3, 64, 6
    inp = np.arange(grid * block * (n + 1), dtype=np.float32)
    out = np.zeros(grid * block, np.float32)
    work = emulate_ptx(LOOP, "k", grid, block, [inp, out, np.uint32(n)]).trace.work
    assert work is not None
    # per warp, by hand:
    # entry: S2R of %tid and %ctaid (%ntid, %nctaid are constant-bank operands), 2 add.s64 (two
    #   IADD3 each), and, add on the ALU (8); mad, mul.lo, 2 mul.wide on the IMAD pipe (4): 12
    #   integer instructions; its longest chain %tid -> mad -> mul.wide -> add.s64: 5 integer
    #   links
    # loop, run n + 1 = 7 times: ld (lsu), fma, st (lsu), add.s64 (2), add.s32, setp, bra:
    #   8 issued, chain ld -> fma -> st: global, fp32, store
    # tail: setp, @p st, ret: 3 issued, chain setp -> st: int, store; run twice: the even
    #   lanes leave the loop an iteration early and run it while the odd ones do their last
    #   iteration (they reconverge at the exit)
    assert work.chain == {"int": 5.0 + 2, "fp32": 7.0, "global": 7.0, "store": 7.0 + 2}
    # the loop's load is its block's first instruction: no store before it holds it there
    assert work.chain_unordered == work.chain
    assert work.critical_instructions == 12 + 7 * 8 + 2 * 3
    # two warps a CTA
    assert work.pipes == {"fp32": 14.0, "int": 2 * (8 + 7 * 4 + 2), "imad": 2 * 4,
                          "lsu": 2 * (7 * 2 + 2), "branch": 2 * (7 + 2)}  # fmt: skip
    assert (work.ctas, work.warps_per_cta, work.ctas_traced) == (3, 2, 3)
    assert work.shared_requests == 0.0


def test_barrier_and_tid0_section() -> None:
    # a `tid == 0` section: thread 0 sums 32 shared values one after another, between two
    # barriers; the other warps wait at the second barrier
    ptx = (
        HEAD
        + r"""
.visible .entry t(.param .u64 p_out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<9>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<3>;
  .shared .align 4 .b8 s[128];
  ld.param.u64 %rd1, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  bar.sync 0;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_done;
  mov.u32 %r2, s;
  mov.u32 %r3, 0;
  mov.f32 %f1, 0f00000000;
$L_loop:
  ld.shared.f32 %f2, [%r2];
  add.f32 %f1, %f1, %f2;
  add.s32 %r2, %r2, 4;
  add.s32 %r3, %r3, 1;
  setp.lt.u32 %p2, %r3, 32;
  @%p2 bra $L_loop;
  st.global.f32 [%rd1], %f1;
$L_done:
  bar.sync 0;
  ret;
}
"""
    )
    out = np.zeros(1, np.float32)
    work = emulate_ptx(ptx, "t", 1, 128, [out]).trace.work
    assert work is not None
    # warp 0 is the critical one: per loop iteration the longest chain is the shared load and
    # the add (30 + 4 against add -> setp -> bra, 12): 32 shared loads and 32 FADDs; two
    # barriers; the entry's S2R (the barrier ends its block), the tid test's setp -> bra, the
    # ret: 4 integer links; the store of the sum
    assert work.chain == {"shared": 32.0, "fp32": 32.0, "barrier": 2.0, "int": 4.0, "store": 1.0}
    assert work.shared_requests == 32 and work.shared_wavefronts == 32
    # warp 0 issues: S2R, bar, setp + bra, 32 x (ld.shared, add.f32, 2 add.s32, setp, bra),
    # st.global, bar, ret (the movs are free)
    assert work.critical_instructions == 1 + 1 + 2 + 32 * 6 + 1 + 1 + 1
    # the other three warps: S2R, bar, setp + bra, bar, ret
    assert work.pipes["barrier"] == 2 * 4
    assert work.instructions == 199 + 3 * 6
