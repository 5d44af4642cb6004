"""ptxas's slow path of IEEE double divisions (gpuadvise.ptx.slow_paths): which lanes take it,
and what the emulator's counts add for the warps that do (hand-derived)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.execution import KernelWork
from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.ptx.pipes import latency_work, pipe_work
from gpuadvise.ptx.slow_paths import SLOW_LINKS, SLOW_WORK, has_slow_path, slow_lanes
from gpuadvise.trace.emulate import emulate_ptx

HEAD = """
.version 8.0
.target sm_90
.address_size 64
"""


def _instr(text: str) -> object:
    ptx = (
        HEAD
        + ".visible .entry k(.param .u64 p)\n{\n  .reg .f64 %fd<9>;\n  .reg .f32 %f<9>;\n"
        + f"  {text}\n  ret;\n}}\n"
    )
    return build_program(parse_ptx(ptx), "k").instrs[0]


@pytest.mark.parametrize(
    ("a", "b", "slow"),
    [
        (0.5, 254.0, False),
        (-0.7, 0.004, False),
        (0.0, 254.0, True),  # a zero numerator: its high word 0 < 0x03600000
        (-0.0, 3.0, True),
        (1e-300, 2.0, True),  # below about 2^-967
        (1e-290, 2.0, False),
        (1.0, 0.0, True),  # 1/0: the reciprocal's high word reads as a NaN float
        (1.0, np.inf, True),  # hi(b) reads as an infinite float
        (1.0, 2.0**1020, True),  # hi(b) reads as a NaN float (exponent field 0x7f8 and up)
        (1.0, 2.0**1000, False),
        (1.0, 1e-310, True),  # a subnormal divisor: 1/b overflows
        (np.nan, 2.0, False),  # GEU: a NaN numerator passes the first check
    ],
)
def test_which_lanes_take_the_slow_path(a: float, b: float, slow: bool) -> None:
    assert bool(slow_lanes(np.array([a]), np.array([b]))[0]) is slow


def test_only_ieee_double_divisions_have_it() -> None:
    assert has_slow_path(_instr("div.rn.f64 %fd1, %fd2, %fd3;"))  # type: ignore[arg-type]
    assert has_slow_path(_instr("div.rz.f64 %fd1, %fd2, %fd3;"))  # type: ignore[arg-type]
    assert not has_slow_path(_instr("div.rn.f32 %f1, %f2, %f3;"))  # type: ignore[arg-type]
    assert not has_slow_path(_instr("div.approx.f32 %f1, %f2, %f3;"))  # type: ignore[arg-type]
    assert not has_slow_path(_instr("mul.rn.f64 %fd1, %fd2, %fd3;"))  # type: ignore[arg-type]


def test_fast_path_as_ptxas_writes_it() -> None:
    ins = _instr("div.rn.f64 %fd1, %fd2, %fd3;")
    # IMAD.MOV (the seed), MUFU.RCP64H, 7 DFMA + 1 DMUL, FFMA + 2 FSETP (the range check), BRA,
    # BSSY, BSYNC (around the slow path's call): 16 warp instructions
    assert pipe_work(ins) == (  # type: ignore[arg-type]
        ("mufu", 1.0), ("fp64", 8.0), ("fp32", 1.0), ("int", 2.0), ("imad", 1.0), ("branch", 3.0)
    )  # fmt: skip
    # MUFU.RCP64H, then half of the sequence's steps of each pipe in a row; no branch link
    assert latency_work(ins) == (  # type: ignore[arg-type]
        ("mufu", 1.0), ("fp64", 4.0), ("fp32", 1.0), ("int", 1.0), ("int", 1.0)
    )  # fmt: skip


DIV = (
    HEAD
    + r"""
.visible .entry q(.param .u64 p_a, .param .u64 p_b, .param .u64 p_out)
{
  .reg .b32 %r<4>;
  .reg .f64 %fd<4>;
  .reg .b64 %rd<9>;
  ld.param.u64 %rd1, [p_a];
  ld.param.u64 %rd2, [p_b];
  ld.param.u64 %rd3, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 8;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  add.s64 %rd7, %rd3, %rd4;
  ld.global.f64 %fd1, [%rd5];
  ld.global.f64 %fd2, [%rd6];
  div.rn.f64 %fd3, %fd1, %fd2;
  st.global.f64 [%rd7], %fd3;
  ret;
}
"""
)


def test_emulator_counts_the_warps_on_the_slow_path() -> None:
    # one CTA of four warps: warp 0 divides normal numbers; warp 1 has one zero numerator
    # (lane 5), warp 2 only zero numerators, warp 3 one zero divisor (lane 0)
    a = np.linspace(0.5, 2.0, 128)
    b = np.full(128, 3.0)
    a[32 + 5] = 0.0
    a[64:96] = 0.0
    b[96] = 0.0
    out = np.zeros(128)
    work = emulate_ptx(DIV, "q", 1, 128, [a, b, out]).trace.work
    assert work is not None
    # three warps take the slow path once: 3 x its 68 instructions, on top of the fast path's
    # 16 of each of the four warps (8 of them on the FP64 pipe)
    assert work.slow_paths == {p: 3.0 * k for p, k in SLOW_WORK}
    assert work.pipes["fp64"] == 4 * 8.0 + 3 * 12.0
    assert work.pipes["mufu"] == 4 * 1.0 + 3 * 1.0
    # the chain of a warp: three quarters of a trip (the CTA's warps alike)
    assert work.slow_chain == {c: 0.75 * k for c, k in SLOW_LINKS}
    assert work.chain["fp64"] == 4.0 + 0.75 * 8.0
    # what float leaves: the same work without the slow paths
    plain = work.without_slow_paths()
    assert plain.pipes["fp64"] == 4 * 8.0
    assert plain.chain["fp64"] == 4.0
    assert plain.slow_paths == {} and plain.slow_chain == {}
    assert plain.critical_instructions == pytest.approx(
        work.critical_instructions - 0.75 * sum(k for _, k in SLOW_WORK)
    )
    assert KernelWork.from_dict(work.to_dict()) == work


def test_no_slow_path_no_extra_work() -> None:
    a = np.linspace(0.5, 2.0, 64)
    b = np.full(64, 3.0)
    work = emulate_ptx(DIV, "q", 1, 64, [a, b, np.zeros(64)]).trace.work
    assert work is not None
    assert work.slow_paths == {} and work.slow_chain == {}
    assert work.pipes["fp64"] == 2 * 8.0
    assert work.without_slow_paths() is work


def test_float_takes_the_shorter_slow_path_for_the_same_lanes() -> None:
    # GA404's after side: two warps a CTA, one slow-path trip each (a zero numerator): the double
    # trip's 68 instructions and links go, the float division's 34 and its 10 links come
    from gpuadvise.ptx.slow_paths import FLOAT_SLOW_LINKS, FLOAT_SLOW_WORK
    from gpuadvise.rules.estimates import _float_slow_paths

    slow = {p: 2.0 * k for p, k in SLOW_WORK}
    links = {c: 1.0 * k for c, k in SLOW_LINKS}
    fast = {"fp64": 16.0, "mufu": 2.0, "int": 4.0, "lsu": 6.0}
    w = KernelWork(
        pipes={p: fast.get(p, 0.0) + slow.get(p, 0.0) for p in {*fast, *slow}},
        chain={"global": 2.0, "fp64": 4.0 + links["fp64"], "int": 3.0 + links["int"], "mufu": 2.0},
        critical_instructions=14.0 + 68.0,
        ctas=100,
        warps_per_cta=2,
        slow_paths=slow,
        slow_chain=links,
    )
    f = _float_slow_paths(w)
    assert f.pipes == pytest.approx(
        {
            "fp64": 16.0,
            "mufu": 2.0,
            "int": 4.0 + 2 * 19.0,
            "imad": 2 * 5.0,
            "lsu": 6.0,
            "branch": 2 * 10.0,
        }
    )
    assert dict(FLOAT_SLOW_WORK) == {"int": 19.0, "imad": 5.0, "branch": 10.0}
    assert f.chain == pytest.approx({"global": 2.0, "fp64": 4.0, "int": 3.0 + 10.0, "mufu": 1.0})
    assert dict(FLOAT_SLOW_LINKS) == {"int": 10.0}
    assert f.critical_instructions == pytest.approx(14.0 + 34.0)
    assert f.slow_paths == {}
