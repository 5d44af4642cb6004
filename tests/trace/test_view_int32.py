"""The trace view's int32 lane columns (record, instruction, CTA, thread, width, buffer: s16-mem)
give the same keys as int64 ones where a consumer combines them into a wider value."""

from __future__ import annotations

import numpy as np

from gpuadvise.trace.view import Lanes, TraceView


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
    return view


def test_buffers_at_with_instruction_times_buffers_past_int32():
    # instruction 2**30 of a view of 4 buffers: inst * 4 + buffer passes 2**31 (int32 wraps it
    # to a negative key and an instruction of its own)
    inst = np.array([2**30, 2**30, 5, 2**30 + 1], np.int64)
    buf = np.array([2, -1, 1, 3], np.int64)
    view = _view(inst, buf, 4)
    assert view.buffers_at(np.array([2**30], np.int64)) == ["b2"]
    assert view.buffers_at(np.array([2**30 + 1], np.int64)) == ["b3"]
    assert view.buffers_at(np.array([5], np.int64)) == ["b1"]
