"""TraceView.access keeps which lanes and records each (instructions, buffer) has (issue 31: the
layout rules ask for the same lines in turn): the same lanes and records as a fresh pass, every
call its own arrays, and no more lane indices kept than its bound."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.trace import view as view_mod
from gpuadvise.trace.view import Lanes, TraceView


def _view(n: int = 4000, seed: int = 3) -> tuple[TraceView, np.ndarray, np.ndarray]:
    """A view of what :meth:`TraceView.access` reads: lanes in record order (a record's lanes
    contiguous, as a view's are), int32 columns, three buffers and lanes outside them."""
    rng = np.random.default_rng(seed)
    rec = np.sort(rng.integers(0, n // 8, n)).astype(np.int32)
    inst = rng.integers(0, 6, n).astype(np.int32)
    buf = rng.integers(-1, 3, n).astype(np.int32)
    view = object.__new__(TraceView)
    z = np.zeros(n, np.int32)
    off = rng.integers(0, 1 << 16, n).astype(np.int64)
    view.lanes = Lanes(rec, inst, rng.integers(0, 4, n).astype(np.int32), z + 1, off, z + 4)
    view.lane_buffer = buf
    view.buffer_names = ["a", "b", "c"]
    view._by_inst = None
    view.inst_line = [(None, 0)] * 6
    view._accessed = {}
    view._accessed_lanes = 0
    return view, inst, buf


def _want(view: TraceView, inst: np.ndarray, buf: np.ndarray, insts: list[int], b: int):
    idx = np.flatnonzero(np.isin(inst, insts) & (buf == b))
    return view.lanes.take(idx), np.unique(view.lanes.rec[idx])


def _same(got: tuple[Lanes, np.ndarray], want: tuple[Lanes, np.ndarray]) -> bool:
    cols = ("rec", "inst", "cta", "tid", "off", "width")
    return all(
        np.array_equal(getattr(got[0], c), getattr(want[0], c))
        and getattr(got[0], c).dtype == getattr(want[0], c).dtype
        for c in cols
    ) and np.array_equal(got[1], want[1])


def test_access_again_gives_the_same_lanes_and_records_in_arrays_of_its_own():
    view, inst, buf = _view()
    for insts, name in (([1, 4], "b"), ([0], "a"), ([4, 1, 1], "b"), ([2, 3, 5], "c")):
        b = view.buffer_names.index(name)
        want = _want(view, inst, buf, insts, b)
        first = view.access(np.array(insts), name)
        assert _same(first, want)
        first[1][:] = -7  # a caller's changes reach no later call
        first[0].off[:] = -7
        assert _same(view.access(np.array(insts), name), want)
    # [1, 4] and [4, 1, 1] are one key: three kept
    assert len(view._accessed) == 3
    assert view._accessed_lanes == sum(len(i) for i, _ in view._accessed.values())


def test_access_keeps_no_more_lane_indices_than_its_bound(monkeypatch: pytest.MonkeyPatch):
    view, inst, buf = _view()
    monkeypatch.setattr(view_mod, "MAX_ACCESS_CACHE", 600)
    for k in range(6):
        for b, name in enumerate(view.buffer_names):
            assert _same(view.access(np.array([k]), name), _want(view, inst, buf, [k], b))
            assert view._accessed_lanes <= 600
    assert 0 < len(view._accessed) < 18


def test_records_of_instructions_are_those_of_their_lanes():
    """TraceView.records_of: the records of some instructions that have lanes, from the records
    (a lane's instruction is its record's), the same as the distinct records of the
    instructions' lanes; records without lanes (none of their lanes active) left out."""
    from gpuadvise.arrays import distinct

    rng = np.random.default_rng(11)
    n_rec = 300
    rec_inst = rng.integers(0, 7, n_rec).astype(np.int32)
    # each record 0-4 lanes (some none), in record order, as a view's lanes are
    per = rng.integers(0, 5, n_rec)
    rec = np.repeat(np.arange(n_rec, dtype=np.int32), per)
    n = len(rec)
    view = object.__new__(TraceView)
    z = np.zeros(n, np.int32)
    view.lanes = Lanes(rec, rec_inst[rec], z, z, np.zeros(n, np.int64), z + 4)
    view.records = np.zeros(n_rec, [("inst", np.int32)])
    view.records["inst"] = rec_inst
    view.inst_line = [(None, 0)] * 7
    view._by_inst = None
    view._rec_has_lanes = None
    assert (per == 0).any()
    for insts in ([0], [3, 1], [6, 6, 2], [5, 0, 1, 2, 3, 4, 6], [9]):
        want = distinct(rec[view.lanes_of(np.array(insts))])
        got = view.records_of(np.array(insts))
        assert np.array_equal(got, want)
        assert not np.isin(np.flatnonzero(per == 0), got).any()
