"""The L2 replay's hits of a block's later touches, a chunk of rows at a time (issue 31's peak
memory): the mask the whole arrays gave."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.l2 import replay


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_hits_by_chunks_are_the_whole_arrays(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(replay, "_TAKE_CHUNK", chunk)
    rng = np.random.default_rng(5)
    P = 50
    r = np.sort(rng.integers(0, P + 1, (37, 6), dtype=np.int32), axis=1)
    valid = r[:, 1:] < P
    thr = rng.integers(-1, 12, P + 1).astype(np.int32)
    want = valid & ((r[:, 1:] - r[:, :-1]) <= thr[r[:, 1:]])
    got = replay._hits(r, valid, thr)
    assert got.dtype == bool and np.array_equal(got, want)
    assert want.any() and not want.all()
