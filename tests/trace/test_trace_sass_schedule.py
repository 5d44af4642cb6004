"""gpuadvise.trace.sass_schedule: a loop iteration's time as ptxas scheduled it (issue 29, GA309),
on hand-made control bits and a hand-made PTX loop; the cycles are derived by hand below."""

from __future__ import annotations

import numpy as np

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.chains import REFERENCE_CYCLES, block_costs
from gpuadvise.ptx.loops import find_loops
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.ptx.pipes import LATENCY_CLASSES
from gpuadvise.toolchain.sass import SassInstruction
from gpuadvise.trace.sass_schedule import (
    Control,
    control,
    iteration_links,
    loop_schedules,
)


def _hi(stall: int, write: int = 7, read: int = 7, wait: int = 0) -> int:
    return (stall | write << 5 | read << 8 | wait << 11) << 41


def test_control_bits_and_branch_target():
    c = control(_hi(13, write=2, wait=0b000101))
    assert (c.stall, c.write, c.read, c.wait) == (13, 2, 7, 0b101)
    # nvdisasm's labels for two sm_90 branches: 0x1a20 -> 0xd10, 0x1a30 -> 0x36d0
    assert control(0, 0xFFFFFFF000B86947).target(0x1A20) == 0xD10
    assert control(0, 0x0000001C00247947).target(0x1A30) == 0x36D0


def _ins(
    offset: int, op: str, line: int | None = None, guard: str | None = None
) -> SassInstruction:
    return SassInstruction(offset, op, op.split(".")[0], guard, "", "k.cu", line)


def test_one_iteration_waits_its_load_once_then_the_fixed_cycles():
    # LDG (stall 2, scoreboard 0), IMAD (stall 5), FADD waiting for scoreboard 0 (stall 1),
    # BRA back (stall 1). The load issues at 0; the FADD waits for it (one global link), then
    # the FADD and the BRA: 2 cycles. The 7 cycles of stalls before the wait are under the load.
    body = [_ins(0x00, "LDG.E", 10), _ins(0x10, "IMAD"), _ins(0x20, "FADD"), _ins(0x30, "BRA")]
    ctl = {
        0x00: Control(2, 0, 7, 0),
        0x10: Control(5, 7, 7, 0),
        0x20: Control(1, 7, 7, 0b1),
        0x30: Control(1, 7, 7, 0),
    }
    assert iteration_links(body, ctl) == {"global": 1, "store": 2.0}
    # two loads waited for one after the other: the second's latency lay under the first's
    # wait, so one link; the cycles it was issued later are fixed
    body2 = [_ins(0x00, "LDG.E"), _ins(0x10, "LDG.E"), _ins(0x20, "FADD"), _ins(0x30, "FADD")]
    ctl2 = {
        0x00: Control(2, 0, 7, 0),
        0x10: Control(5, 1, 7, 0),
        0x20: Control(1, 7, 7, 0b01),
        0x30: Control(1, 7, 7, 0b10),
    }
    links = iteration_links(body2, ctl2)
    assert links["global"] == 1
    # a pass: load A at 0, B at 2, wait for A until 500, FADD, wait for B until 502, FADD: 503
    # cycles, one link (B's latency lay under A's wait) and 3 fixed
    assert links["store"] == 503 - REFERENCE_CYCLES["global"]
    # a stall of 13 after a guard compare counts in full when nothing waits
    body3 = [_ins(0x00, "ISETP.GE.AND"), _ins(0x10, "IADD3")]
    assert iteration_links(body3, {0x00: Control(13, 7, 7, 0), 0x10: Control(1, 7, 7, 0)}) == {
        "store": 14.0
    }
    assert iteration_links(body3, {0x00: Control(13, 7, 7, 0)}) == {}  # bits missing


# a one-block PTX loop with one global load of line 5 an iteration, its use and the latch
LOOP = """
.version 8.0
.target sm_90
.address_size 64
.file 1 "k.cu"
.visible .entry k(.param .u64 p, .param .u32 n)
{
  .reg .pred %p<3>;
  .reg .b32 %r<9>;
  .reg .f32 %f<9>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [p];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, 0;
  mov.f32 %f1, 0f00000000;
$L_loop:
  .loc 1 5 0
  ld.global.f32 %f2, [%rd1];
  add.f32 %f1, %f1, %f2;
  add.s64 %rd1, %rd1, 4;
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, %r1;
  @%p1 bra $L_loop;
  ret;
}
"""


def test_a_loop_unrolled_four_times_by_ptxas_costs_a_quarter_iteration():
    program = build_program(parse_ptx(LOOP), "k")
    loops = find_loops(program)
    # the SASS loop: 4 guarded loads of line 5 issued together, one wait, 4 FADDs and the back
    # edge
    sass = [_ins(0x100 + 0x10 * i, "LDG.E", 5, "@P0") for i in range(4)]
    sass += [_ins(0x140 + 0x10 * i, "FADD", 5) for i in range(4)]
    sass += [_ins(0x180, "BRA")]
    ctl = {s.offset: Control(1, 0, 7, 0) for s in sass[:4]}
    ctl |= {s.offset: Control(4, 7, 7, 0b1 if s.offset == 0x140 else 0) for s in sass[4:8]}
    ctl[0x180] = Control(1, 7, 7, 0, 0x100 - (0x180 + 16))  # back to 0x100
    assert ctl[0x180].target(0x180) == 0x100
    got = loop_schedules(program, loops, sass, ctl)
    (head,) = got
    blocks, links = got[head]
    # a pass: loads at 0-3 on one scoreboard, ready when the last is (3 + 500), 4 FADDs of 4
    # cycles, the BRA: 520 cycles, one global link and 20 fixed cycles, over 4 PTX iterations
    assert links == {"global": 0.25, "store": 20 / 4}
    costs = block_costs(program, got)
    g = LATENCY_CLASSES.index("global")
    assert costs.chain[head, g] == 0.25
    assert np.all(costs.chain[[b for b in blocks if b != head]] == 0)
    # no SASS loop holding line 5's loads: the PTX's chain stays
    assert loop_schedules(program, loops, sass[4:], ctl) == {}
    # unguarded loads: the SASS loop unrolled 4 times is taken, one PTX iteration a SASS
    # iteration (the PTX's blocks are the SASS's) is not
    plain = [_ins(s.offset, s.opcode, s.line) for s in sass]
    assert loop_schedules(program, loops, plain, ctl) == got
    one = plain[3:]
    ctl1 = dict(ctl)
    ctl1[0x180] = Control(1, 7, 7, 0, 0x130 - (0x180 + 16))  # back to the one load at 0x130
    assert loop_schedules(program, loops, one, ctl1) == {}
