"""The one-warp latch look in Python integers (ptx/sampling.py ``_latch_one``) against the vector
form it stands for: :func:`first_exit_one` against :func:`first_exit` and ``_as_int_one``
against ``_as_int``, on random and extreme int64 values (where numpy's arithmetic wraps)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gpuadvise.ptx.loops import first_exit, first_exit_one, wrap64
from gpuadvise.ptx.sampling import _as_int, _as_int_one

CMPS = ("lt", "lo", "le", "ls", "gt", "hi", "ge", "hs", "eq", "ne")
EXTREMES = [0, 1, -1, 2, -2, 3, -7, 2**62, -(2**62), 2**63 - 1, -(2**63), 2**63 - 2, -(2**63) + 1]


def test_wrap64() -> None:
    assert wrap64(2**63) == -(2**63)
    assert wrap64(-(2**63) - 1) == 2**63 - 1
    assert wrap64(5) == 5 and wrap64(-5) == -5
    assert wrap64(2**64 + 3) == 3


@pytest.mark.parametrize("cmp", CMPS)
@pytest.mark.parametrize("continues_when", [True, False])
def test_first_exit_one_is_first_exit(cmp: str, continues_when: bool) -> None:
    rng = np.random.default_rng(7)
    ext = np.array(EXTREMES, np.int64)
    d = np.concatenate(
        [
            rng.integers(-40, 40, 600),
            rng.integers(-(2**63), 2**63 - 1, 300, dtype=np.int64),
            np.repeat(ext, ext.size),
        ]
    ).astype(np.int64)
    dd = np.concatenate(
        [
            rng.integers(-9, 9, 600),
            rng.integers(-(2**63), 2**63 - 1, 300, dtype=np.int64),
            np.tile(ext, ext.size),
        ]
    ).astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's overflow warnings on the extremes
        want = np.asarray(first_exit(d, dd, cmp, continues_when)).tolist()
    got = [
        first_exit_one(x, y, cmp, continues_when)
        for x, y in zip(d.tolist(), dd.tolist(), strict=True)
    ]
    assert got == want


@pytest.mark.parametrize(
    "dtype",
    [
        np.uint8,
        np.int8,
        np.uint16,
        np.int16,
        np.uint32,
        np.int32,
        np.uint64,
        np.int64,
        np.float32,
        np.float64,
        np.bool_,
    ],  # fmt: skip
)
def test_as_int_one_is_as_int(dtype: type) -> None:
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, 48 * np.dtype(dtype).itemsize, dtype=np.uint8)
    values = raw % 2 == 1 if dtype is np.bool_ else raw.view(dtype)
    for ptype in ("s32", "u32", "b32", "s64", "u64", "b64", "s16", "u16", "pred"):
        want = _as_int(values, ptype).tolist()
        assert [_as_int_one(values, i, ptype) for i in range(values.size)] == want
