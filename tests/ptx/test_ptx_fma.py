"""fma.rn.f64 in float64 arithmetic (gpuadvise.ptx.fma): correctly rounded, checked against the
exact rational result (an oracle that needs no rounding of its own: the result is the nearest
double, ties to the even one), on random doubles of every magnitude, subnormals, infinities, NaNs,
and the cancellations libdevice's FMA chains make (``fma(a, b, -a*b)``: the product's error)."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuadvise.ptx.fma import fma_f64

_MAX = Fraction(np.finfo(np.float64).max)
_HALF_ULP_MAX = Fraction(2) ** 970


def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _correct(a: float, b: float, c: float, r: float) -> bool:
    """Whether ``r`` is ``a * b + c`` rounded to the nearest double, ties to even (IEEE 754)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        with np.errstate(all="ignore"):
            want = np.longdouble(a) * np.longdouble(b) + np.longdouble(c)
        w = float(np.float64(want))
        return (math.isnan(w) and math.isnan(r)) or w == r
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if abs(exact) >= _MAX + _HALF_ULP_MAX:  # past the largest double by half an ulp or more
        return math.isinf(r) and (r > 0) == (exact > 0)
    if not math.isfinite(r):
        return False
    if exact == 0:
        # a zero result: -0 only when both terms are -0 (a zero product then)
        neg = (a == 0 or b == 0) and c == 0 and math.copysign(1, a * b) < 0 > math.copysign(1, c)
        return r == 0 and (math.copysign(1, r) < 0) == neg
    d = abs(Fraction(r) - exact)
    for nb in (math.nextafter(r, math.inf), math.nextafter(r, -math.inf)):
        if not math.isfinite(nb):
            continue
        dn = abs(Fraction(nb) - exact)
        if dn < d or (dn == d and _bits(r) & 1):
            return False
    return True


def _check(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    r = fma_f64(a, b, c)
    assert r.dtype == np.float64 and r.shape == np.broadcast(a, b, c).shape
    for x, y, z, got in zip(
        *(np.broadcast_to(v, r.shape).ravel().tolist() for v in (a, b, c)),
        r.ravel().tolist(),
        strict=True,
    ):
        assert _correct(x, y, z, got), (x.hex(), y.hex(), z.hex(), got.hex())


doubles = st.floats(allow_nan=True, allow_infinity=True, width=64)
normalish = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=64)
tiny = st.floats(min_value=-1e-300, max_value=1e-300, width=64)  # subnormals included
huge = st.one_of(
    st.floats(min_value=1e300, max_value=1.7e308), st.floats(max_value=-1e300, min_value=-1.7e308)
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(doubles, doubles, doubles), min_size=1, max_size=40))
def test_any_doubles(rows: list[tuple[float, float, float]]) -> None:
    a, b, c = (np.array(col, np.float64) for col in zip(*rows, strict=True))
    _check(a, b, c)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(normalish, normalish, normalish), min_size=1, max_size=40))
def test_ordinary_magnitudes(rows: list[tuple[float, float, float]]) -> None:
    a, b, c = (np.array(col, np.float64) for col in zip(*rows, strict=True))
    _check(a, b, c)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(normalish, normalish, st.integers(-3, 3)), min_size=1, max_size=40))
def test_the_products_error_and_near_cancellations(rows: list[tuple[float, float, int]]) -> None:
    # fma(a, b, -RN(a*b)) is the product's rounding error (exact); a step of an ulp or two from
    # there cancels all but the last bits
    a = np.array([r[0] for r in rows])
    b = np.array([r[1] for r in rows])
    c = np.array([-(x * y) for x, y, _ in rows])
    c = np.array([v + k * math.ulp(v) for v, (_, _, k) in zip(c.tolist(), rows, strict=True)])
    _check(a, b, c)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(tiny, huge, normalish),
            st.one_of(tiny, huge, normalish),
            st.one_of(tiny, huge, normalish),
        ),  # fmt: skip
        min_size=1,
        max_size=30,
    )
)
def test_the_ends_of_the_range(rows: list[tuple[float, float, float]]) -> None:
    a, b, c = (np.array(col, np.float64) for col in zip(*rows, strict=True))
    _check(a, b, c)


def test_hand_cases() -> None:
    inf, nan = math.inf, math.nan
    big = np.finfo(np.float64).max
    sub = 5e-324
    rows = [
        (1.0 + 2**-52, 1.0 - 2**-53, -1.0),  # a long double's product is not exact here
        (1.0 + 2**-30, 1.0 + 2**-30, -(1.0 + 2**-29)),  # only 2**-60 is left
        (0.1, 10.0, -1.0),  # the error of 0.1 * 10
        (-0.0, 5.0, -0.0),  # -0: both terms -0
        (0.0, 5.0, -0.0),
        (2.0, -3.0, 6.0),  # an exact zero: +0
        (inf, 0.0, 1.0),  # nan
        (inf, 2.0, -inf),  # nan
        (inf, 2.0, 1.0),
        (nan, 1.0, 1.0),
        (big, 2.0, -big),  # the product overflows, the result does not
        (big, 1.0, big * 2**-53),  # exactly half an ulp past the largest: infinity
        (big, 1.0, big * 2**-54),  # a quarter: the largest
        (sub, 0.5, 0.0),  # half the smallest subnormal: a tie, to 0
        (sub, 0.75, 0.0),
        (2**-537, 2**-537, 0.0),  # a product under the subnormals' range
        (3 * 2**-540, 2**-530, sub),
        (1e308, 1e10, -inf),
    ]
    a, b, c = (np.array(col, np.float64) for col in zip(*rows, strict=True))
    _check(a, b, c)
    # scalars and broadcasting, as the emulator's getters give them
    _check(np.float64(3.0), np.array([1.0 / 3, 0.1, 7.0]), np.float64(-1.0))
