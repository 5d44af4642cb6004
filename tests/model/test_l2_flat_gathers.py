"""The L2 model's gathers by flat indices (s21-gather: the replays and the synthesis of the 8K
gather without 2-D fancy indexing): the arrays the 2-D gathers gave, in their order."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.l2 import replay, synthesis


@pytest.mark.parametrize("width", [1, 2, 6, 81])
def test_long_gaps_are_the_nonzero_gathers(width: int) -> None:
    rng = np.random.default_rng(width)
    P = 400
    r = np.sort(rng.integers(0, P + 1, (53, width), dtype=np.int32), axis=1)
    kf = 40
    sel = (r[:, 1:] < P) & (r[:, 1:] - r[:, :-1] > kf)
    rows, cols = np.nonzero(sel)
    start, end, got_rows = replay._long_gaps(r, P, kf)
    assert start.dtype == end.dtype == np.int64
    assert np.array_equal(start, r[rows, cols].astype(np.int64))
    assert np.array_equal(end, r[rows, cols + 1].astype(np.int64))
    assert np.array_equal(got_rows, rows)
    if width > 2:  # some gaps taken, some not: the test can tell a wrong index
        assert 0 < len(rows) < sel.size


@pytest.mark.parametrize("k", [1, 3, 16])
def test_valid_touches_and_scaled_counts_are_the_fancy_indexes(k: int) -> None:
    rng = np.random.default_rng(k)
    tch = rng.integers(-1, 1000, (29, k), dtype=np.int32)
    tch[rng.random(tch.shape) < 0.3] = -1
    pi, kk = np.nonzero(tch >= 0)
    got_pi, got_kk, who = synthesis._valid_touches(tch)
    assert np.array_equal(got_pi, pi) and np.array_equal(got_kk, kk)
    assert who.dtype == np.int64 and np.array_equal(who, tch[pi, kk].astype(np.int64))
    counts = rng.random((4, k + 5))[:, 2 : 2 + k]  # a view of a wider table, as the shapes' are
    frac = rng.random(len(kk)) * 3.0
    want = counts[:, kk] * frac[None, :]
    got = synthesis._scaled_counts(counts, kk, frac)
    assert got.dtype == want.dtype and np.array_equal(got, want)
