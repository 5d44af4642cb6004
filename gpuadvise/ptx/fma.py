"""``fma.rn.f64`` on numpy arrays, correctly rounded, in float64 arithmetic: :func:`fma_f64`.

numpy has no fused multiply-add. The emulator computed ``a * b + c`` in ``np.longdouble`` (x87,
64-bit significands): not exact (the product of two doubles has up to 106 bits), and some 50 ns
an element, unvectorized: in FP64 kernels (``pow``, ``exp``, ``log`` from libdevice are chains
of FMAs) it was most of the emulation's time (HeCBench vanGenuchten: 60 of 111 s).

Here, with error-free transformations in float64 (about 30 vectorized operations):

1. ``p + e == a * b`` exactly (Dekker's product: Veltkamp's split of ``a`` and ``b`` at 27 bits);
2. ``u + t == c + p`` exactly (Knuth's TwoSum);
3. ``v = RO(t + e)``, the sum rounded to odd (rounded to nearest, then, when inexact, truncated
   and its last bit set), and ``RN(u + v)`` is the correctly rounded ``a * b + c`` (Boldo and
   Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to
   odd", IEEE Trans. Computers 57(4), 2008, Algorithm 5).

The transformations are exact away from the ends of the exponent range: lanes with ``a`` or
``b`` zero are ``a * b + c`` (the product is exact); lanes with a magnitude near overflow or a
product near underflow are computed exactly with :class:`fractions.Fraction` (rare: a few lanes
of a batch at most), and lanes with an infinite or NaN operand in ``np.longdouble``, whose
special values follow IEEE 754 as the GPU's do. tests/ptx/test_ptx_fma.py checks every path
against the exact rational result, subnormals, infinities and NaNs included.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["fma_f64"]

_F64 = np.dtype(np.float64)
_SPLIT = 134217729.0  # 2**27 + 1
_BIG = 2.0**995  # the split of a larger magnitude overflows
_PROD_MAX = 2.0**1000
_PROD_MIN = 2.0**-900  # the product's error term stays a normal number
_SUM_MAX = 2.0**1022
_OVERFLOW = Fraction(2**1024 - 2**970)  # the largest double and a half ulp: rounds to infinity


def fma_f64(a: object, b: object, c: object) -> np.ndarray:
    """``a * b + c`` rounded once to the nearest double (ties to even), elementwise."""
    a_, b_, c_ = np.broadcast_arrays(np.asarray(a, _F64), np.asarray(b, _F64), np.asarray(c, _F64))
    with np.errstate(all="ignore"):
        p = a_ * b_
        u = c_ + p
        ta = a_ * _SPLIT
        ah = ta - (ta - a_)
        al = a_ - ah
        tb = b_ * _SPLIT
        bh = tb - (tb - b_)
        bl = b_ - bh
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + e == a * b
        bv = u - c_
        t = (c_ - (u - bv)) + (p - bv)  # u + t == c + p
        v = t + e
        bw = v - t
        w = (t - (v - bw)) + (e - bw)  # v + w == t + e
        # v rounded to odd: when inexact, truncated (one step toward zero where rounding went
        # away from it: the bits as an integer step the magnitude for either sign), last bit set
        inexact = w != 0
        vb = v.view(np.int64) - (inexact & (np.signbit(w) != np.signbit(v)))
        vb |= inexact
        r = u + vb.view(_F64)
        ap = np.abs(p)
        safe = (
            (np.abs(a_) <= _BIG)
            & (np.abs(b_) <= _BIG)
            & (ap >= _PROD_MIN)
            & (ap <= _PROD_MAX)
            & (np.abs(u) <= _SUM_MAX)
        )
        trivial = (a_ == 0) | (b_ == 0)
        if trivial.any():
            r = np.where(trivial, u, r)
            safe |= trivial
        if not safe.all():
            r = np.array(r, copy=True)
            rest = np.flatnonzero(~safe.reshape(-1))
            flat = r.reshape(-1)
            fa, fb, fc = (x.reshape(-1)[rest] for x in (a_, b_, c_))
            for k, x, y, z in zip(
                rest.tolist(), fa.tolist(), fb.tolist(), fc.tolist(), strict=True
            ):
                flat[k] = _one(x, y, z)
    return r


def _one(x: float, y: float, z: float) -> float:
    """One lane off the fast path: exact with fractions when every operand is finite, else as
    ``np.longdouble`` computes it (infinities and NaNs: IEEE 754's special cases)."""
    if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
        ld = np.longdouble
        with np.errstate(all="ignore"):
            return float(np.float64(ld(x) * ld(y) + ld(z)))
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:  # +0 in round-to-nearest (a product of nonzero numbers is not -0 here)
        return 0.0
    if abs(exact) >= _OVERFLOW:
        return float("inf") if exact > 0 else float("-inf")
    if abs(exact) >= 1:  # halved, exactly, away from the edge where int division gives up early
        half = exact / 2
        return 2.0 * (half.numerator / half.denominator)
    return exact.numerator / exact.denominator  # correctly rounded by Python's int division
