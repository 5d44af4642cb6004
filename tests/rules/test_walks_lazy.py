"""GA301's walk tests that skip work (issue 31: its CPU and peak): a line's thread step found only
where the stride and the footprint leave a row walk to it, and the staged-rows test from the
device's resident warps alone, no launch traffic. Pure: synthetic lanes and views."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gpuadvise.devices import preset
from gpuadvise.rules import walks
from gpuadvise.rules.estimates import resident_warps
from gpuadvise.trace.view import Lanes


def _rows(step: int, stride: int, width: int, threads: int = 64, steps: int = 4) -> Lanes:
    """Each thread ``tid`` reads ``steps`` accesses of ``width`` bytes from ``tid * stride``,
    ``step`` bytes apart, a record (32 threads) per step and warp, in execution order."""
    rows = []
    for s in range(steps):
        for tid in range(threads):
            rows.append((s * (threads // 32) + tid // 32, tid, tid * stride + s * step))
    rec, tid, off = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    n = len(rec)
    return Lanes(
        rec, np.zeros(n, np.int32), np.zeros(n, np.int32), tid.astype(np.int32), off,
        np.full(n, width, np.int32),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("step", "stride", "width", "excess", "is_struct"),
    list(itertools.product((4, 8, 16), (4, 16, 64, 136), (4, 8), (10.0, 60.0), (False, True))),
)
def test_lanes_row_walk_is_row_walk_of_the_thread_step(step, stride, width, excess, is_struct):
    lanes = _rows(step, stride, width)
    buffer = SimpleNamespace(is_struct=is_struct)
    want = walks.row_walk(walks.thread_step(lanes), stride, width, excess, buffer)
    assert walks.lanes_row_walk(lanes, stride, width, excess, buffer) is want
    assert walks.lanes_row_walk(lanes, None, width, excess, buffer) is False


def test_lanes_row_walk_sorts_no_lane_where_the_stride_or_footprint_decide(monkeypatch):
    def no_step(lanes: Lanes) -> int | None:
        raise AssertionError("thread_step called")

    monkeypatch.setattr(walks, "thread_step", no_step)
    lanes = _rows(4, 64, 4)
    # a struct's field walk (most of the footprint unused), a stride within two vectors, none
    assert not walks.lanes_row_walk(lanes, 64, 4, 60.0, SimpleNamespace(is_struct=True))
    assert not walks.lanes_row_walk(lanes, 16, 4, 10.0, SimpleNamespace(is_struct=False))
    assert not walks.lanes_row_walk(lanes, None, 4, 10.0, SimpleNamespace(is_struct=False))
    with pytest.raises(AssertionError, match="thread_step called"):
        walks.lanes_row_walk(lanes, 64, 4, 10.0, SimpleNamespace(is_struct=False))


@pytest.mark.parametrize(
    ("ctas", "block"), [(16, (256, 1, 1)), (4000, (256, 1, 1)), (8, (96, 2, 1))]
)
def test_staged_rows_reads_the_resident_warps_not_the_traffic(ctas, block):
    # a view with no lanes or records: the launch's traffic cannot be made from it
    view = SimpleNamespace(block=block, total_ctas=ctas, work=None)
    device = preset("H100")
    warps = ctas * -(-int(np.prod(block)) // 32)
    assert walks.staged_rows(device, view, "thread-per-row") is (
        warps > resident_warps(device, view)
    )
    assert walks.staged_rows(device, view, "field-walk") is False
    # the H100's 132 SMs hold 64 warps each at most: 4000 CTAs of 8 warps are over a wave
    assert walks.staged_rows(device, view, "thread-per-row") is (ctas == 4000)


@pytest.mark.parametrize("seed", range(8))
def test_rows_held_by_one_sort_are_the_pairs_counts(seed: int) -> None:
    """row_refetch's lines held and threads, from one sort of the (CTA, line, thread) keys, are
    the counts of the (thread, line) pairs' two sorts (issue 31): rows of a thread each, lines
    two rows meet in, a stencil's lines many threads read, repeats and several CTAs."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    ctas = int(rng.integers(1, 64))
    threads = int(rng.choice([32, 100, 256, 1024]))
    cta = rng.integers(0, ctas, n).astype(np.int32)
    tid = rng.integers(0, threads, n).astype(np.int32)
    lines = int(rng.choice([4, 64, 10_000]))
    line = rng.integers(0, lines, n).astype(np.int64) + int(rng.integers(0, 2**40))
    if seed % 2:  # rows: a thread's lanes in its own lines, runs of repeats
        line = (cta.astype(np.int64) * threads + tid) * 3 + rng.integers(0, 3, n) + 2**33
        line = np.repeat(line, 3)[: 3 * n]
        cta, tid = np.repeat(cta, 3), np.repeat(tid, 3)
    got = walks._rows_held(cta, tid, line)
    assert got == walks._rows_held_by_pairs(cta, tid, line)
    assert isinstance(got[0], float) and isinstance(got[1], int)
    # keys too wide to pack: None (row_refetch falls back to the pairs)
    assert walks._rows_held(cta, tid, np.r_[line[:-1], line[-1] + 2**61]) is None
    assert walks._rows_held(cta[:0], tid[:0], line[:0]) == (0.0, 0)


def _thread_step_gathered(lanes: Lanes) -> int | None:
    """thread_step as it was written before issue 31's peak: the CTA, thread and offset columns
    gathered by the order, the steps of every lane at once."""
    if len(lanes) < 2:
        return None
    order = np.argsort(
        lanes.cta.astype(np.int64) * (int(lanes.tid.max()) + 1) + lanes.tid, kind="stable"
    )
    if not bool((np.diff(lanes.rec) >= 0).all()):
        order = np.lexsort((lanes.rec, lanes.tid, lanes.cta))
    cta, tid, off = lanes.cta[order], lanes.tid[order], lanes.off[order]
    same = (cta[1:] == cta[:-1]) & (tid[1:] == tid[:-1])
    d = (off[1:] - off[:-1])[same]
    if not len(d):
        return None
    vals, counts = np.unique(d, return_counts=True)
    return int(vals[np.argmax(counts)])


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_thread_step_in_slices_is_the_gathered_one(seed: int, chunk: int, monkeypatch) -> None:
    """thread_step's key sorted in place and its steps a slice of positions at a time (issue 31)
    give the step of the gathered columns: records in order or not, one thread or many, CTAs
    whose thread ranges meet, steps of every sign, and lanes whose threads never repeat."""
    monkeypatch.setattr(walks, "_STEP_CHUNK", chunk)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    ctas, threads = int(rng.integers(1, 40)), int(rng.choice([1, 32, 256, 70_000]))
    rec = np.sort(rng.integers(0, n // 3 + 1, n)) if seed % 3 else rng.integers(0, 50, n)
    cta = rng.integers(0, ctas, n).astype(np.int32)
    tid = rng.integers(0, threads, n).astype(np.int32)
    off = rng.choice([4, 8, -16, 36], n).cumsum() + rng.integers(0, 3, n) * (seed % 2)
    lanes = Lanes(
        rec.astype(np.int32), np.zeros(n, np.int32), cta, tid, off.astype(np.int64),
        np.full(n, 4, np.int32),
    )  # fmt: skip
    assert walks.thread_step(lanes) == _thread_step_gathered(lanes)
    # every lane its own thread: no step
    alone = Lanes(
        lanes.rec, lanes.inst, np.zeros(n, np.int32), np.arange(n, dtype=np.int32), lanes.off,
        lanes.width,
    )  # fmt: skip
    assert walks.thread_step(alone) is None is _thread_step_gathered(alone)


def _stream_view(n: int = 3000, seed: int = 5, buffers: int = 1) -> Any:
    """A view of what walks.line_streams reads: lanes by record (a record's lanes contiguous and
    its instruction's), consecutive threads in a record, each instruction a stride, the
    lanes in ``buffers`` buffers (or outside them)."""
    from gpuadvise.trace.view import TraceView

    rng = np.random.default_rng(seed)
    n_rec = n // 16
    rec = np.repeat(np.arange(n_rec), 16).astype(np.int32)
    rec_inst = rng.integers(0, 4, n_rec)
    tid = np.tile(np.arange(16), n_rec).astype(np.int32)
    stride = np.array([4, 8, 4, 44])[rec_inst[rec]]
    off = (rng.integers(0, 1000, n_rec)[rec] * 64 + tid * stride).astype(np.int64)
    view = object.__new__(TraceView)
    z = np.zeros(len(rec), np.int32)
    view.lanes = Lanes(rec, rec_inst[rec].astype(np.int32), z, tid, off, z + 4)
    view.lane_buffer = rng.integers(-1 if buffers > 1 else 0, buffers, len(rec)).astype(np.int32)
    view.buffer_names = [f"b{i}" for i in range(buffers)]
    sizes: dict[str, Any] = {name: SimpleNamespace(size=1 << 20) for name in view.buffer_names}
    view.buffers = sizes
    view._by_inst = None
    view.inst_line = [(None, 0)] * 4
    view._accessed = {}
    view._accessed_lanes = 0
    return view


@pytest.mark.parametrize(("insts", "buffers"), [([0, 2], 1), ([1], 1), ([0, 1, 3], 1), ([0, 2], 2)])
def test_line_streams_hold_the_lanes_of_a_lone_stream(insts: list[int], buffers: int) -> None:
    """walks.line_streams: address_streams' streams, and where the line reaches one buffer in
    one stream, lanes with the same columns as view.access of the stream (GA301 reads them
    instead of taking them again, issue 31); None for several streams or buffers."""
    view = _stream_view(buffers=buffers)
    at = np.array(insts, np.int64)
    names = list(view.buffer_names)
    got = walks.line_streams(view, at, names, set())
    assert [(b, list(g)) for b, g, _ in got] == [
        (b, list(g)) for b, g in walks.address_streams(view, at, names, set())
    ]
    strides = {4 if i in (0, 2) else 8 if i == 1 else 44 for i in insts}
    assert len(got) == len(strides) * buffers
    lone = len(got) == 1
    for b, group, held in got:
        if not lone:
            assert held is None
            continue
        want, _ = view.access(group, b)
        for col in ("rec", "inst", "cta", "tid", "off", "width"):
            assert np.array_equal(getattr(held, col), getattr(want, col))
            assert getattr(held, col).dtype == getattr(want, col).dtype
