"""The masks' counts and indices without numpy's Python wrappers (ptx/values.py): ``count_true``
against ``np.count_nonzero``, ``Mask.idx`` against ``np.flatnonzero``, and masked writes the
same whether the mask's mode was made before the write or by it (every mode, every dtype)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.ptx.values import FULL, RUNS, SCATTER, SPARSE, Mask, count_true, write

DTYPES = (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int64, np.float32)
STORES = (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64)  # the registers' dtypes


@pytest.mark.parametrize("dtype", DTYPES)
def test_count_true_is_count_nonzero(dtype: type[np.generic]) -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 32, 256, 4099):
        a = (rng.integers(0, 3, n) * rng.integers(0, 2, n)).astype(dtype)
        got, want = count_true(a), np.count_nonzero(a)
        assert got == want and type(got) is type(want)
    assert count_true(np.zeros((4, 8), np.uint32)) == 0  # every element of a 2-D array
    assert count_true(np.ones((4, 8), bool)[:, ::2]) == 16  # and of a strided view


def _masks(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    runs = np.zeros(n, bool)
    runs[32:96] = True
    return [
        np.zeros(n, bool),
        rng.random(n) < 0.02,  # a few lanes: SPARSE
        runs,  # long runs: RUNS
        np.arange(n) % 2 == 0,  # every other lane: SCATTER
        np.ones(n, bool),
    ]


def test_idx_is_flatnonzero() -> None:
    for b in _masks(512):
        got = Mask(b, b.size).idx()
        want = np.flatnonzero(b)
        assert got is not None and got.dtype == want.dtype and np.array_equal(got, want)
    assert Mask(None, 64).idx() is None


@pytest.mark.parametrize("dtype", STORES)
def test_write_same_with_mode_made_first(dtype: type[np.generic]) -> None:
    n = 512
    rng = np.random.default_rng(5)
    seen = set()
    for b in _masks(n):
        start = rng.integers(0, 200, n).astype(dtype)
        val = rng.integers(0, 200, n).astype(dtype)
        for scalar in (False, True):
            v = val[7] if scalar else val
            fresh, early = start.copy(), start.copy()
            write(fresh, v, Mask(b, n))  # the mode made inside write
            m = Mask(b, n)
            seen.add(m.mode())  # made before
            write(early, v, m)
            want: np.ndarray = np.where(b, v, start).astype(dtype)
            assert np.array_equal(fresh, want) and np.array_equal(early, want)
    write(start := np.zeros(n, dtype), np.ones(n, dtype), Mask(None, n))
    assert count_true(start) == n
    assert {SPARSE, RUNS, SCATTER} <= seen and FULL not in seen
