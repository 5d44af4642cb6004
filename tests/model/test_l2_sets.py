"""The L2 model's sort-based set helpers against numpy's ``unique`` and ``isin``."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.l2.footprint import distinct, member


@pytest.mark.parametrize("n", [0, 1, 2, 1000, 100_000])
def test_distinct_and_member_match_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    a = rng.integers(-(2**40), 2**40, n) // rng.integers(1, 2**30, n).clip(1)
    got = distinct(a)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, np.unique(a))
    probe = np.concatenate([a[: n // 2], rng.integers(-(2**12), 2**12, 500)])
    np.testing.assert_array_equal(member(probe, got), np.isin(probe, a))
    np.testing.assert_array_equal(member(probe, got[:0]), np.zeros(len(probe), bool))
    grid = probe[: (len(probe) // 10) * 10].reshape(-1, 10)  # any shape, as np.isin
    np.testing.assert_array_equal(member(grid, got), np.isin(grid, a))
