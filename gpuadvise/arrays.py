"""Set operations on large numpy integer arrays by sorting.

numpy 2.3+ makes ``np.unique`` (without flags) and ``np.isin`` hash tables, 20-60 times slower
than a sort on the millions of distinct keys of a traced wave (8 M int64: 8 s against 0.15 s).
The trace view, the L2 model and the staging analysis use these instead; same results.
"""

from __future__ import annotations

import numpy as np

__all__ = ["distinct", "member"]


def distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` (flattened, sorted distinct values) by one sort."""
    s = np.sort(np.asarray(a).reshape(-1))
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def member(a: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(a, values)`` for ``values`` sorted and distinct (:func:`distinct`): a binary
    search per element of ``a``."""
    a = np.asarray(a)
    if len(values) == 0 or a.size == 0:
        return np.zeros(a.shape, dtype=bool)
    at = np.minimum(np.searchsorted(values, a), len(values) - 1)
    return values[at] == a
