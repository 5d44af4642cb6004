"""The synthesis's CTA columns of a shape's units (``synthesis._column_ctas``): written per
relative toucher on its run of units on the grid, the same table as the whole-table formula."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.l2.synthesis import _column_ctas

OFF = np.int32(-(1 << 30))


def _whole_table(ax0: int, nx: int, sx: np.ndarray, sph: np.ndarray, m: int, gx: int):
    """The formula over the whole (nx, K) table (what ``_build_units`` computed before)."""
    ax = ax0 + np.arange(nx, dtype=np.int64)
    tX = ax[:, None] - sx[None, :]
    tbx = tX * m + sph[None, :]
    valid = (tX >= 0) & (tbx < gx)
    return np.where(valid, tbx, OFF).astype(np.int32)


@pytest.mark.parametrize("seed", range(6))
def test_column_ctas_match_the_whole_table(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 4))
    gx = int(rng.integers(1, 40))
    K = int(rng.integers(1, 12))
    sx = rng.integers(-6, 8, K).astype(np.int64)
    sph = rng.integers(-1, m + 1, K).astype(np.int64)  # phases past [0, m) too
    ax0 = int(rng.integers(-8, 4))
    nx = int(rng.integers(1, 60))
    got = _column_ctas(ax0, nx, sx, sph, m, gx, OFF)
    assert got.dtype == np.int32 and got.shape == (nx, K)
    np.testing.assert_array_equal(got, _whole_table(ax0, nx, sx, sph, m, gx))


def test_column_ctas_of_a_wide_one_row_grid() -> None:
    """hecbench scan's shape: many unit columns, each touched by one CTA of a few."""
    sx = np.arange(0, 125, dtype=np.int64)
    sph = np.zeros(125, dtype=np.int64)
    got = _column_ctas(-124, 2112 + 124, sx, sph, 1, 2112, OFF)
    np.testing.assert_array_equal(got, _whole_table(-124, 2112 + 124, sx, sph, 1, 2112))
    # column k: units k + 124 .. 2235 (the CTAs 0 .. 2111 - k)
    assert (got >= 0).sum() == sum(2112 - k for k in range(125))
