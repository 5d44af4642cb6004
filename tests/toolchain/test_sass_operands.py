"""Reading SASS operands (gpuadvise.toolchain.sass): one-lane fp16 instructions and half-word
PRMTs, on operands copied from nvcc 13's output (nvdisasm's text)."""

from __future__ import annotations

import pytest

from gpuadvise.toolchain.sass import halfword_prmt, one_lane_fp16, same_source_file


@pytest.mark.parametrize(
    "operands, want",
    [
        ("R2, R2.H0_H0, 0.049774169921875, 0.049774169921875", True),  # wsum += wt
        ("R2, RZ.H0_H0, 0.0214996337890625, 0.0214996337890625", True),
        ("R22, R29.H0_H0, R29.H0_H0", True),  # z * z
        ("R6, R13.reuse.H0_H0, R13.H0_H0", True),
        ("R22, R13.H0_H0, 0.0214996337890625, 0.0214996337890625, RZ.H0_H0", True),
        ("R4, R15.H0_H0, UR6.H0_H0, R4.H0_H0", True),  # a uniform register operand
        ("R20, R14, 0.0214996337890625, 0.0214996337890625, RZ", False),  # both lanes
        ("R10, R10, R10, -RZ", False),
        ("R22, R19, 0.1300048828125, 0.1300048828125, R22", False),
        ("R2, R2.H0_H0, 0.5, 0.25", False),  # two different immediates: two values
        ("R0, R0.H0_H0, R9.H1_H1", True),
        ("R0, R0.H0_H0, R9", False),
    ],
)
def test_one_lane(operands, want):
    assert one_lane_fp16(operands) is want


@pytest.mark.parametrize(
    "operands, want",
    [
        ("R29, R29, 0x5410, R22", True),  # low halves of two registers -> a pair
        ("R22, R6, 0x7632, R22", True),  # the high half
        ("R23, R14, 0x7610, R23", True),
        ("R16, R7, 0x7710, RZ", False),  # byte replication
        ("R0, R1, 0x8880, RZ", False),  # sign extension of a byte
        ("R0, R1, 0x3210, R2", True),  # identity: half-words too
        ("R0, R1, 0x4321, R2", False),  # bytes shifted by one
    ],
)
def test_halfword_prmt(operands, want):
    assert halfword_prmt(operands) is want


def test_same_source_file() -> None:
    assert same_source_file("/a/b/k.cu", "k.cu") and same_source_file("x/../k.cu", "k.cu")
    assert not same_source_file("k.cu", "j.cu") and not same_source_file(None, "k.cu")
