"""memory._distinct (the pages to fill, sorted and each once) is numpy's unique."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.ptx.memory import _distinct


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000])
def test_distinct_is_unique(n: int) -> None:
    rng = np.random.default_rng(n)
    pages = rng.integers(0, max(n // 3, 1) + 1, n).astype(np.int64)
    got = _distinct(pages)
    np.testing.assert_array_equal(got, np.unique(pages))
    assert got.dtype == np.int64
