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


def _si(offset, opcode, operands, predicate=None, line=152):
    from gpuadvise.toolchain.sass import SassInstruction

    return SassInstruction(
        offset, opcode, opcode.split(".")[0], predicate, operands, "atomics.hpp", line
    )


def test_warp_aggregated_atomics_need_a_redux_a_uniform_address_and_an_elected_lane():
    """ptxas's code for ``atomicMax(&m, v)`` on a ``__shared__ int`` (sm_90, kernels/atomics
    block_max): REDUX.MAX.S32 of the warp into a uniform register, then one elected lane's
    predicated ATOMS.MAX on ``[UR4]``: one update per warp. A per-lane address (``[R4+UR4]``,
    bins8), an unpredicated ATOMS, no REDUX at the line, or a compare-and-swap loop: not."""
    from gpuadvise.toolchain.sass import warp_aggregated_atomics

    redux = _si(0x10, "REDUX.MAX.S32", "UR7, R2")
    elected = _si(0x20, "ATOMS.MAX.S32", "RZ, [UR4], R0", "@P1")
    assert warp_aggregated_atomics([redux, elected]) == {("atomics.hpp", 152)}
    assert warp_aggregated_atomics([redux, _si(0x20, "ATOMS.MAX.S32", "RZ, [UR4+0x10], R0", "@P1")])
    assert not warp_aggregated_atomics([elected])
    assert not warp_aggregated_atomics([redux, _si(0x20, "ATOMS.ADD", "RZ, [R4+UR4], R5", "@P1")])
    assert not warp_aggregated_atomics([redux, _si(0x20, "ATOMS.MAX.S32", "RZ, [UR4], R0")])
    assert not warp_aggregated_atomics([redux, elected, _si(0x30, "ATOMS.MAX.S32", "RZ, [R3], R0")])
    assert not warp_aggregated_atomics(
        [redux, _si(0x20, "ATOMS.MAX.S32", "RZ, [UR4], R0", "@P1", 7)]
    )
    cas = _si(0x20, "ATOMS.CAST.SPIN", "R3, [UR4], R2, R3", "@P1")
    assert not warp_aggregated_atomics([redux, cas])
