"""cvt's fast conversions (ops._cvt_fast) give the general conversion's bits (ops._cvt_general)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpuadvise.ptx import ops
from gpuadvise.ptx.values import NP_TYPES

ROUNDINGS = ["", "rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi", "rna"]
INTS = ["u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64"]


def _floats(t: str) -> np.ndarray:
    """Specials, halves, values near every integer type's bounds, random values of every size."""
    rng = np.random.default_rng(7)
    special = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5]
    special += [0.49999997, 1.0, -1.0, 0.99999994, 1.0000001, 1e-45, -1e-45, 3.4e38, -3.4e38]
    for k in (7, 8, 15, 16, 31, 32, 63, 64):
        for s in (-1.0, 1.0):
            special += [s * 2.0**k + d for d in (-1.5, -1.0, -0.5, 0.0, 0.5, 1.0)]
    wide = rng.standard_normal(400) * 10.0 ** rng.integers(-3, 21, 400)
    small = rng.uniform(-3, 3, 200)
    out = np.concatenate([np.array(special), wide, small, np.round(small * 4) / 4])
    with np.errstate(all="ignore"):
        return out.astype(NP_TYPES[t])


def _ints(t: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    dt = NP_TYPES[t]
    info = np.iinfo(dt)
    edges = [info.min, info.min + 1, -1 if info.min else 0, 0, 1, info.max - 1, info.max]
    edges += [(1 << 24) + 1, (1 << 53) + 1] if dt.itemsize == 8 else []
    edges = [e for e in edges if info.min <= e <= info.max]
    rand = rng.integers(info.min, info.max, 500, dtype=dt, endpoint=True)
    return np.concatenate([np.array(edges, dt), rand])


def _same_bits(a: object, b: object) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    ua = a.view(f"u{a.dtype.itemsize}")
    ub = b.view(f"u{b.dtype.itemsize}")
    np.testing.assert_array_equal(ua, ub)


def _forms() -> list[tuple[str, str, str, bool]]:
    forms = []
    for at, dt in itertools.product(["f32", "f64"], INTS):
        forms += [(at, dt, r, s) for r in ROUNDINGS for s in (False, True)]
    for at, dt in itertools.product(INTS, ["f32", "f64"]):
        forms += [(at, dt, r, False) for r in ("", "rn", "rz", "rm", "rp")]
    for at, dt in itertools.product(["f32", "f64"], ["f32", "f64"]):
        forms += [(at, dt, r, s) for r in ROUNDINGS for s in (False, True)]
    return forms


@pytest.mark.parametrize("form", _forms(), ids=lambda f: f"{f[2] or 'none'}.{f[1]}.{f[0]}.{f[3]}")
def test_fast_conversion_gives_the_general_bits(form: tuple[str, str, str, bool]) -> None:
    at, dt, rnd, sat = form
    fast = ops._cvt_fast(at, dt, rnd, sat)
    if fast is None:
        return  # the form keeps the general conversion (64-bit integers, directed f64 -> f32)
    x = _floats(at) if at in ("f32", "f64") else _ints(at)
    before = x.copy()
    with np.errstate(all="ignore"):
        want = ops._cvt_general(at, dt, rnd, sat)(x)
        got = fast(x)
    _same_bits(got, want)
    _same_bits(x, before)  # the source lanes are left as they were
    assert got is not x


FAST = [
    ("f32", "s32", "rzi", False),
    ("f32", "u32", "rni", False),
    ("f64", "s32", "rn", False),
    ("f32", "f32", "", True),
    ("f32", "f64", "", False),
    ("f64", "f32", "rn", False),
    ("s32", "f32", "rn", False),
    ("u32", "f64", "rn", False),
    ("f32", "f32", "rmi", False),
]
GENERAL = [
    ("f32", "u64", "rzi", False),
    ("f64", "f32", "rz", False),
    ("s32", "f32", "rz", False),
    ("f16", "f32", "", False),
    ("u32", "s64", "", False),
]


def test_the_common_forms_are_fast() -> None:
    for form in FAST:
        assert ops._cvt_fast(*form) is not None, form
    for form in GENERAL:
        assert ops._cvt_fast(*form) is None, form
