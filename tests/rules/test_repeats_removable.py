"""gpuadvise.rules.repeats.removable_records (GA309's requests that go, no nvcc): the records
all of whose lanes are named, counted in integers over the named lanes, against a float mark
over every lane (how it was counted before issue 31's cut), with the lanes named in order,
out of order and twice."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gpuadvise.rules.repeats import removable_records
from gpuadvise.trace.access import Kind
from gpuadvise.trace.view import Lanes


def _reference(view: SimpleNamespace, reload_lanes: np.ndarray) -> np.ndarray:
    n_rec = len(view.records)
    mark = np.zeros(len(view.lanes), np.float64)
    mark[reload_lanes] = 1.0
    total = np.bincount(view.lanes.rec, minlength=n_rec)
    hit = np.bincount(view.lanes.rec, weights=mark, minlength=n_rec)
    return (view.records["kind"] == int(Kind.LOAD)) & (total > 0) & (hit == total)


@pytest.mark.parametrize("seed", range(4))
def test_removable_records_as_a_mark_over_every_lane(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_rec = 400
    per = rng.integers(0, 5, n_rec)  # records of 0 to 4 lanes (some without any)
    rec = np.repeat(np.arange(n_rec), per).astype(np.int32)
    records = np.zeros(n_rec, dtype=[("kind", np.uint8)])
    records["kind"] = np.where(rng.random(n_rec) < 0.8, int(Kind.LOAD), int(Kind.STORE))
    zero = np.zeros(len(rec), np.int32)
    lanes = Lanes(rec, zero, zero, zero, zero.astype(np.int64), zero + 4)
    view = SimpleNamespace(lanes=lanes, records=records)
    # whole records named, and some of their lanes more
    whole = np.flatnonzero(np.isin(rec, np.flatnonzero(rng.random(n_rec) < 0.5)))
    some = np.flatnonzero(rng.random(len(rec)) < 0.3)
    named = np.union1d(whole, some)
    got = removable_records(view, named)  # type: ignore[arg-type]
    assert np.array_equal(got, _reference(view, named))
    assert got.any() and not got.all()
    assert not got[per == 0].any() and not got[records["kind"] != int(Kind.LOAD)].any()
    for shuffled in (rng.permutation(named), np.concatenate([named, named[::3]])):
        assert np.array_equal(removable_records(view, shuffled), got)  # type: ignore[arg-type]
    none = removable_records(view, np.zeros(0, np.int64))  # type: ignore[arg-type]
    assert not none.any() and len(none) == n_rec
