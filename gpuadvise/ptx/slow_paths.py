"""ptxas's slow path of an IEEE double division: which lanes take it, and what it issues.

``div.rn.f64`` becomes, in SASS (ptxas 12-13, sm_70 to sm_90), a fast path of MUFU.RCP64H and a
Newton sequence of eight DFMA/DMUL (:func:`gpuadvise.ptx.pipes.pipe_work`), then a check: the
numerator's high word read as a float (``FSETP.GEU |hi(a)|, 6.58e-37``: 0x03600000) and the
reciprocal's (``FFMA R, RZ, hi(b), hi(rcp)``; ``FSETP.GT |R|, 1.47e-39``: 0x00100000). Where a
lane fails either, the warp calls ``__internal_0_$__cuda_sm20_div_rn_f64_full``, about 60
instructions more (integer exponent arithmetic, a second Newton sequence, the special cases),
as a divergent call: once for every warp with a lane on it. A zero numerator (its high word 0)
takes it, as does a zero, huge or non-finite divisor and a numerator below about 2^-967: HeCBench
zeropoint's ``min_val / scale`` with ``min_val = fminf(x, 0)`` sends half of its lanes, so every
warp, through it twice per thread (its SASS: 61 instructions on that path, plus the call's moves).

The emulator counts, for each such instruction, the warps that executed it and those with a lane
on the slow path (:func:`slow_lanes`, on the operands' values before the instruction runs);
:func:`gpuadvise.trace.simt.kernel_work` adds :data:`SLOW_WORK` and :data:`SLOW_LINKS` for that
share of the instruction's warp executions (the execution model's
:attr:`~gpuadvise.model.execution.KernelWork.slow_paths`).

Measured on an H200 (2026-11-30, benchmarks/fp64_division/probe.sh, ncu): HeCBench zeropoint
as traced issues 393 warp instructions a warp (362 on this count, 140 before it); a division
with a zero numerator takes 27.2 SM-clocks a warp where the fast path takes 7.1 (double), and
14.4 where it takes 4.5 (float: FCHK sends a zero numerator to its slow path too).

Left out: ``rcp.rn``/``sqrt.rn`` of doubles, and ``div.rn.f32``'s FCHK slow path in the
emulator's counts (:data:`FLOAT_SLOW_WORK` is what a double's trip becomes in float, for GA404's
float side only).

Pure: numpy on operand values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuadvise.ptx.parser import Instr

__all__ = [
    "FLOAT_SLOW_LINKS",
    "FLOAT_SLOW_WORK",
    "SLOW_LINKS",
    "SLOW_WORK",
    "has_slow_path",
    "slow_lanes",
]

SLOW_WORK: tuple[tuple[str, float], ...] = (
    ("imad", 20.0),
    ("int", 26.0),
    ("fp64", 12.0),
    ("mufu", 1.0),
    ("branch", 9.0),
)
"""Warp instructions by pipe of one warp's trip through the slow path: the subroutine's path for
a zero numerator in ptxas 13.0's sm_90 SASS (61: IMAD 15, LOP3 12, ISETP 7, FSETP 2, SEL 2,
VIADD 2, DFMA 8, DMUL 2, DSETP 2, MUFU.RCP64H 1, BRA 5, BSSY, BSYNC, RET) and the call's own
(MOV, CALL, the result's and the arguments' IMAD.MOV: 2 to 6)."""

SLOW_LINKS: tuple[tuple[str, float], ...] = (("mufu", 1.0), ("fp64", 8.0), ("int", 8.0))
"""Its dependent steps: the second reciprocal (MUFU.RCP64H, then eight dependent DFMA/DMUL) and
the exponent arithmetic and selects of the special case (about eight in a row)."""

FLOAT_SLOW_WORK: tuple[tuple[str, float], ...] = (("int", 19.0), ("imad", 5.0), ("branch", 10.0))
"""The same division in float (``div.rn.f32``): FCHK sends the lanes whose operands it flags (a
zero numerator among them: 14.4 SM-clocks a warp against 4.5, measured on an H200) to
``__internal_1_$__cuda_sm3x_div_rn_noftz_f32_slowpath``; its path for a zero numerator in ptxas
13.0's sm_90 SASS is 30 instructions (SHF, LOP3, VIADD, ISETP, FSETP, PLOP3 and six branches),
the call's 4 more. What a double division's slow-path trip becomes in float (GA404's after
side)."""

FLOAT_SLOW_LINKS: tuple[tuple[str, float], ...] = (("int", 10.0),)
"""Its dependent steps: the exponent extraction and the tests of the special cases in a row."""

_NUM_MIN = np.uint32(0x03600000)  # |hi(a)| as a float >= 6.58e-37
_RCP_MIN = np.uint32(0x00100000)  # |hi(rcp)| as a float > 1.47e-39
_INF = np.uint32(0x7F800000)
_ABS = np.uint32(0x7FFFFFFF)


def has_slow_path(ins: Instr) -> bool:
    """An IEEE double division (``div.rn.f64`` and the other rounding modes; not ``.approx``/
    ``.full``, which have none)."""
    mods = ins.mods
    return ins.base == "div" and "f64" in mods and "approx" not in mods and "full" not in mods


def _hi(x: Any) -> np.ndarray:
    bits = np.ascontiguousarray(np.asarray(x, dtype=np.float64)).view(np.uint64)
    return (bits >> np.uint64(32)).astype(np.uint32) & _ABS


def slow_lanes(a: Any, b: Any) -> np.ndarray:
    """Per lane (or a scalar, both operands immediate): whether ``a / b`` leaves the fast path,
    by the SASS's two checks on the operands' bits (the module doc)."""
    ha = _hi(a)
    hb = _hi(b)
    with np.errstate(all="ignore"):
        hr = _hi(np.float64(1.0) / np.asarray(b, dtype=np.float64))
    num_ok = ha >= _NUM_MIN  # NaN's high word passes too (GEU)
    # 0 * hi(b) + hi(rcp): NaN when hi(b) reads as an infinite or NaN float
    rcp_ok = (hb < _INF) & (hr > _RCP_MIN) & (hr <= _INF)
    return np.asarray(~(num_ok & rcp_ok))
