"""Register pressure (gpuadvise.model.registers) on the hand-written function of
tests/livekit.py, every answer worked out on paper there: live counts, the peak, the values
that hold it (definition, last use, distance, kind), the per-line view at the call site, the
control-flow graph, and the dataflow check against the table."""

from __future__ import annotations

import dataclasses

import livekit
import pytest

from gpuadvise.model.registers import (
    RegisterPressure,
    Sass,
    control_flow,
    register_pressure,
    subroutines,
)
from gpuadvise.toolchain.liveness import parse_life_ranges


@pytest.fixture(scope="module")
def rp() -> RegisterPressure:
    table = parse_life_ranges(livekit.table_text())["k"]
    return register_pressure(table, livekit.instructions(), allocated=10)


def test_live_counts_per_instruction(rp):
    assert list(rp.gpr) == livekit.GPR
    assert list(rp.pred) == livekit.PRED
    assert rp.offsets == tuple(16 * i for i in range(16))


def test_the_peak_and_the_allocation(rp):
    assert (rp.peak, rp.peak_index, rp.peak_offset, rp.peak_instructions) == (7, 7, 0x70, 5)
    assert (rp.peak_file, rp.peak_line) == ("k.cu", 5)
    # R0..R7 are all named: the highest is 8, and 10 allocated leaves ptxas's 2
    assert (rp.highest, rp.reserved, rp.holes, rp.floor, rp.slack) == (8, 2, (), 9, 1)


def test_the_values_that_hold_the_peak(rp):
    got = [
        (v.registers, v.kind, v.def_index, v.def_line, v.last_use_index, v.last_use_line,
         v.distance, v.idle_at_peak)
        for v in rp.values
    ]  # fmt: skip
    assert got == [
        (("R1",), "stack pointer", 0, 3, None, None, 14, True),
        (("R2", "R3"), "address", 3, 4, 13, 7, 10, False),  # read by the load at 4
        (("R4",), "loaded value", 4, 4, 12, 7, 8, True),  # waits for the loop to end
        (("R5",), "accumulator", 6, 5, 13, 7, 7, True),  # from its zero to the store
        (("R7",), "loop-invariant constant", 5, 5, 8, 6, 6, True),  # live to the loop's end
        (("R6",), "induction variable", 7, 5, 10, 6, 4, True),
    ]
    r4 = next(v for v in rp.values if v.registers == ("R4",))
    assert (r4.def_opcode, r4.next_use_index, r4.width) == ("LDG.E", 12, 1)
    # the last read before the peak: the address by the load at 4; the others none
    assert {v.registers: v.prev_use_index for v in rp.values} == {
        ("R1",): None, ("R2", "R3"): 4, ("R4",): None, ("R5",): None, ("R7",): None,
        ("R6",): None,
    }  # fmt: skip
    assert sum(v.width for v in rp.values) == rp.peak


def test_lines_max_and_mean_at_the_call_site(rp):
    got = {(x.file, x.line): (x.max, x.mean, x.instructions) for x in rp.lines}
    # instruction 12 is inlined from h.cuh:2: it counts for its call site, k.cu:7
    assert got == {
        ("k.cu", 3): (2, 1.5, 2),
        ("k.cu", 4): (4, 4.0, 3),
        ("k.cu", 5): (7, 6.0, 3),
        ("k.cu", 6): (7, 7.0, 4),
        ("k.cu", 7): (5, 4.5, 2),
        ("k.cu", 8): (1, 1.0, 2),
    }
    assert rp.site(12) == ("k.cu", 7)


def test_the_dataflow_reproduces_the_table(rp):
    assert rp.agreement == (16, 16) and rp.dataflow_peak == 7 and rp.subroutine_instructions == 0


def test_the_dataflow_notices_a_wrong_count():
    gpr = list(livekit.GPR)
    gpr[12] = 6  # the table says 6 where the marks make 5
    table = parse_life_ranges(livekit.table_text(gpr=gpr))["k"]
    rp = register_pressure(table, livekit.instructions(), allocated=10)
    assert rp.agreement == (15, 16)


def test_control_flow():
    table = parse_life_ranges(livekit.table_text())["k"]
    instrs = [Sass.from_text(r.offset, r.text) for r in table.rows]
    succ, pred = control_flow(instrs, table.labels)
    assert succ[11] == [8, 12]  # the predicated back edge falls through too
    assert succ[14] == [] and succ[15] == []  # EXIT; the padding branch to itself
    assert pred[8] == [7, 11]
    assert subroutines(instrs, table.labels, succ) == set()


def test_calls_and_subroutines():
    texts = ["MOV R2, 0x40", "CALL.REL.NOINC `($sub)", "STG.E [R4.64], R0", "EXIT",
             "FADD R0, R0, R3", "@P0 RET.REL.NODEC R2 `(k)", "BRX R8 -0x20"]  # fmt: skip
    instrs = [Sass.from_text(16 * i, t) for i, t in enumerate(texts)]
    labels = {"$sub": 0x40, ".L_x_1": 0x10}
    succ, _pred = control_flow(instrs, labels)
    assert succ[1] == [2]  # a call is one instruction of its caller
    assert succ[5] == [6]  # a predicated return may fall through
    assert succ[6] == [1, 4]  # an indirect branch may go to any label
    assert subroutines(instrs, labels, succ) == {4, 5, 6}


def test_round_trip(rp):
    again = RegisterPressure.from_dict(rp.to_dict())
    assert again == rp
    assert again.to_dict()["floor"] == 9


def test_a_wider_allocation_is_slack_not_pressure(rp):
    table = parse_life_ranges(livekit.table_text())["k"]
    wide = register_pressure(table, livekit.instructions(), allocated=14)
    assert dataclasses.replace(wide, reserved=2, allocated=10) == rp
    assert wide.reserved == 6  # what the code does not name is not attributed to the peak


@pytest.fixture(scope="module")
def rp2() -> RegisterPressure:
    table = parse_life_ranges(livekit.table_text2())["k2"]
    return register_pressure(table, livekit.instructions(rows=livekit.ROWS2), allocated=7)


def test_a_predicated_write_does_not_kill(rp2):
    # R3 stays live over 3..4: where P0 is false, 4 leaves the thread index the loop reads
    assert list(rp2.gpr) == livekit.GPR2
    assert rp2.agreement == (13, 13)


def test_the_values_of_a_peak_inside_a_loop(rp2):
    assert (rp2.peak, rp2.peak_index, rp2.peak_instructions, rp2.peak_line) == (5, 6, 2, 16)
    got = [
        (v.registers, v.kind, v.def_index, v.last_use_index, v.distance, v.idle_at_peak, v.defs)
        for v in rp2.values
    ]
    assert got == [
        (("R1",), "stack pointer", 0, None, 12, True, 1),
        (("R3",), "loop-invariant constant", 1, 6, 9, False, 2),  # S2R, or 7 where P0
        # its update reaches itself; not read since the last iteration's update wrote it
        (("R2",), "accumulator", 3, 11, 8, True, 1),
        (("R0",), "induction variable", 5, 9, 5, False, 1),
        (("R4",), "computed value", 6, 7, 1, True, 1),
    ]


def test_the_dataflow_check_fails_on_a_killing_predicated_write():
    gpr = list(livekit.GPR2)
    gpr[3] = 2  # what a predicated write that killed R3 would leave
    table = parse_life_ranges(livekit.table_text2(gpr))["k2"]
    rp = register_pressure(table, livekit.instructions(rows=livekit.ROWS2), allocated=7)
    assert rp.agreement == (12, 13)


# k3: a load into the register that held its address (``x``: it reads the address, writes the
# value): the loaded value is idle until 6, whatever the load itself read
ROWS3 = [
    ("LDC R1, c[0x0][0x28]", " ^  ", " "),
    ("LDC.64 R2, c[0x0][0x210]", " :^^", " "),
    ("LDG.E R2, desc[UR4][R2.64]", " :xv", " "),
    ("S2R R0, SR_TID.X", "^:: ", " "),
    ("S2R R3, SR_LANEID", ":::^", " "),
    ("IADD3 R0, R0, R3, RZ", "x::v", " "),
    ("FADD R0, R0, R2", "x:v ", " "),
    ("EXIT", " :  ", " "),
]
GPR3 = [1, 3, 3, 3, 4, 4, 3, 1]


def test_a_load_over_its_own_address_is_idle_until_read():
    text = livekit.table_text("k3", GPR3, ROWS3, {}, [0] * 8)
    rp = register_pressure(
        parse_life_ranges(text)["k3"], livekit.instructions(rows=ROWS3), allocated=6
    )
    assert (rp.peak, rp.peak_index, rp.agreement) == (4, 4, (8, 8))
    r2 = next(v for v in rp.values if v.registers == ("R2",))
    assert (r2.kind, r2.def_index, r2.idle_at_peak, r2.next_use_index) == (
        "loaded value", 2, True, 6,
    )  # fmt: skip


# k4: a call to a subroutine; the CALL writes the return address in R2:R3, the two registers
# ptxas reserves at the top of the allocation (4 = R0, R1 + 2): nvdisasm counts them at the call
ROWS4 = [
    ("LDC R1, c[0x0][0x28]", " ^  ", " "),
    ("MOV R0, 0x1", "^:  ", " "),
    ("CALL.REL.NOINC `($sub)", "x:^^", " "),
    ("STS [RZ], R0", "v:  ", " "),
    ("EXIT", " :  ", " "),
    ("FADD R0, R0, R0", "x:::", " "),
    ("RET.REL.NODEC R2 `(k4)", "::vv", " "),
]
GPR4 = [1, 2, 4, 2, 1, 4, 4]


def test_the_reserved_pair_of_a_call():
    text = livekit.table_text("k4", GPR4, ROWS4, {5: "$sub"}, [0] * 7)
    rp = register_pressure(
        parse_life_ranges(text)["k4"], livekit.instructions(rows=ROWS4), allocated=4
    )
    # the peak is the call, and 2 of its 4 are the reserved pair: floor 2 + 2, no slack
    assert (rp.peak, rp.peak_index, rp.reserved_at_peak) == (4, 2, 2)
    assert (rp.highest, rp.reserved, rp.floor, rp.slack) == (2, 2, 4, 0)
    # the kernel's own code is compared, the subroutine's two instructions are not
    assert rp.agreement == (5, 5) and rp.subroutine_instructions == 2
    kinds = {v.registers: v.kind for v in rp.values}
    assert kinds[("R2", "R3")] == "reserved"
