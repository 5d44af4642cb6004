"""The trace view's int32 lane columns (record, instruction, CTA, thread, width, buffer: s16-mem)
give the same keys as int64 ones where a consumer combines them into a wider value."""

from __future__ import annotations

import numpy as np

from gpuadvise.trace.view import Lanes, TraceView


class _Lines:
    """``inst_line`` of ``n`` instructions, each ``(None, 0)``, without a list of ``n`` entries:
    the instructions here reach 2**30 (a list of them was 8 GB, 1-1.5 minutes of page faults)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[None, int]:
        if not -self.n <= i < self.n:
            raise IndexError(i)
        return (None, 0)


def _view(inst: np.ndarray, buf: np.ndarray, n_buffers: int) -> TraceView:
    """A view of only what :meth:`TraceView.buffers_at` reads, its columns int32 as the view
    makes them."""
    n = len(inst)
    view = object.__new__(TraceView)
    z = np.zeros(n, np.int32)
    view.lanes = Lanes(z, inst.astype(np.int32), z, z, np.zeros(n, np.int64), z + 4)
    view.lane_buffer = buf.astype(np.int32)
    view.buffer_names = [f"b{k}" for k in range(n_buffers)]
    view._inst_buffers = None
    view._by_inst = None
    view.inst_line = _Lines(int(inst.max(initial=-1)) + 1)  # type: ignore[assignment]
    return view


def test_lane_insts_are_the_distinct_instructions_of_the_lanes():
    """:meth:`TraceView.lane_insts` (from the lanes' index by instruction) is
    ``distinct(lanes.inst)``; :meth:`TraceView.lanes_of` reads the same index."""
    rng = np.random.default_rng(5)
    inst = rng.choice(np.array([0, 3, 4, 9]), 500)
    view = _view(inst, np.zeros(500, np.int64), 1)
    got = view.lane_insts()
    assert got.tolist() == [0, 3, 4, 9]
    assert np.array_equal(
        view.lanes_of(np.array([3, 9])), np.flatnonzero((inst == 3) | (inst == 9))
    )


def test_buffers_at_with_instruction_times_buffers_past_int32():
    # instruction 2**30 of a view of 4 buffers: inst * 4 + buffer passes 2**31 (int32 wraps it
    # to a negative key and an instruction of its own)
    inst = np.array([2**30, 2**30, 5, 2**30 + 1], np.int64)
    buf = np.array([2, -1, 1, 3], np.int64)
    view = _view(inst, buf, 4)
    assert view.buffers_at(np.array([2**30], np.int64)) == ["b2"]
    assert view.buffers_at(np.array([2**30 + 1], np.int64)) == ["b3"]
    assert view.buffers_at(np.array([5], np.int64)) == ["b1"]


def _lanes_near_limit(dtype: type) -> Lanes:
    """Lanes whose record, instruction, CTA and thread indices lie just below 2**31 (the view's
    int32 bound), in ``dtype``; byte offsets int64 as the view keeps them."""
    rng = np.random.default_rng(7)
    n, top = 3000, 2**31 - 3
    rec = np.sort(rng.integers(top - 400, top, n))
    inst = rng.integers(top - 8, top, n)
    cta = rng.integers(top - 4, top, n)
    tid = rng.integers(top - 64, top, n)
    off = rng.integers(0, 1 << 20, n) * 4
    width = rng.choice([4, 8, 16], n)
    return Lanes(
        rec.astype(dtype),
        inst.astype(dtype),
        cta.astype(dtype),
        tid.astype(dtype),
        off.astype(np.int64),
        width.astype(dtype),
    )


def test_lane_consumers_give_the_int64_results_on_int32_columns():
    from gpuadvise.rules.reload_advice import coalesced_lanes
    from gpuadvise.rules.repeats import thread_keys
    from gpuadvise.rules.walks import thread_step
    from gpuadvise.trace.view import cta_reuse, field_loads, stride_mode, warp_footprint

    wide, narrow = _lanes_near_limit(np.int64), _lanes_near_limit(np.int32)
    every = np.arange(len(wide))
    for f in (
        warp_footprint,
        lambda x: cta_reuse(x, np.ones(4, np.int64)),
        lambda x: field_loads(x, 16),
        stride_mode,
        thread_step,
        lambda x: thread_keys(x).tolist(),
        lambda x: coalesced_lanes(x, every),
    ):
        assert f(narrow) == f(wide)
