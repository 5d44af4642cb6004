"""An emulation's changed output elements, found from the pages its accesses reached
(:mod:`gpuadvise.trace.changes`), equal the whole buffers compared with their start data; the
pages no access reached are neither read nor made."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.launch_change import changed_positions
from gpuadvise.ptx.memory import GlobalMemory
from gpuadvise.runner.data import buffer_filler
from gpuadvise.trace.changes import OutputChanges, as_elements
from gpuadvise.trace.emulate import LazyArrays

DTYPES = [
    np.dtype(np.int32),
    np.dtype(np.float64),
    np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("w", "<f4")]),  # float4
    np.dtype((np.void, 12)),  # elements that straddle pages
]


def _store(mem: GlobalMemory, name: str, byte_offsets: np.ndarray, values: np.ndarray) -> None:
    """Write ``values`` (uint8 rows, one per offset) as the emulator's stores do: through
    ``translate``, which fills the pages first."""
    b = mem.by_name[name]
    width = values.shape[1]
    offs, bad = mem.translate(np.int64(b.base) + byte_offsets.astype(np.int64), width)
    assert bad is None
    for k in range(width):
        mem.heap[offs + k] = values[:, k]


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("poisoned", [False, True])
def test_changes_equal_the_whole_buffers_compared(dt: np.dtype, poisoned: bool) -> None:
    n = 300_000  # over a megabyte: hundreds of pages, most never reached
    src = buffer_filler(dt, n, "random", 5, "out", poisoned=poisoned)
    other = buffer_filler(np.dtype(np.float32), 1000, "random", 5, "in")
    mem = GlobalMemory([("in", other), ("out", src)])
    size = dt.itemsize
    rng = np.random.default_rng(0)
    elems = np.unique(rng.integers(0, n, 400))
    rows = rng.integers(0, 256, (len(elems), size), dtype=np.uint8)
    _store(mem, "out", elems * size, rows)
    # some stores write back the start value: reached, but not changed
    same = elems[::7]
    start_rows = src.array().view(np.uint8).reshape(n, size)
    _store(mem, "out", same * size, start_rows[same])
    reached = mem.pages_made
    outputs = LazyArrays({"out": lambda: as_elements(mem.read("out"), dt)})
    inputs = LazyArrays({"out": src.array})
    got = OutputChanges(mem, {"out": src}, inputs, outputs).changes("out")
    assert mem.pages_made <= reached + 2 * len(elems)  # at most the pages beside the reached ones
    whole = as_elements(mem.read("out"), dt)
    want = changed_positions(whole, src.array())
    assert np.array_equal(got.positions, want)
    assert got.after.tobytes() == whole[want].tobytes()
    assert not np.isin(same, got.positions).any()
    pick = np.unique(np.concatenate([elems[::3], rng.integers(0, n, 50)]))
    changes = OutputChanges(mem, {"out": src}, inputs, outputs)
    assert changes.start_values("out", pick).tobytes() == src.array()[pick].tobytes()


def test_a_buffer_given_whole_is_compared_whole() -> None:
    data = np.arange(5000, dtype=np.int32)
    mem = GlobalMemory([("out", data)])
    b = mem.by_name["out"]
    offs, _ = mem.translate(np.array([b.base + 40, b.base + 4 * 4000], dtype=np.int64), 4)
    mem.views[4][offs >> 2] = np.array([7, 4000], dtype=np.uint32)  # 10 -> 7; 4000 stays
    outputs = LazyArrays({"out": lambda: mem.read("out").view(np.int32)})
    inputs = LazyArrays({"out": lambda: data})
    got = OutputChanges(mem, {"out": data}, inputs, outputs)
    c = got.changes("out")
    assert c.positions.tolist() == [10] and c.after.tolist() == [7]
    assert got.start_values("out", np.array([10, 11])).tolist() == [10, 11]


def test_nothing_reached_nothing_changed() -> None:
    src = buffer_filler(np.dtype(np.float32), 1 << 20, "random", 1, "out")
    mem = GlobalMemory(
        [("out", src), ("x", buffer_filler(np.dtype(np.uint8), 64, "zeros", 1, "x"))]
    )
    ch = OutputChanges(mem, {"out": src}, LazyArrays({}), LazyArrays({})).changes("out")
    assert len(ch.positions) == 0 and len(ch.after) == 0 and mem.pages_made == 0


def test_asking_whether_an_output_is_there_makes_nothing() -> None:
    made = []
    lazy = LazyArrays({"out": lambda: made.append(1) or np.zeros(3)})
    assert "out" in lazy and "x" not in lazy and list(lazy) == ["out"] and not made


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("group", [1, 3000])
def test_changes_compared_a_few_pages_at_a_time_equal_the_whole_buffers_compared(
    dt: np.dtype, group: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reached pages' chunks and the start values' clusters made and compared in groups
    (``GROUP_ELEMENTS``: one chunk a group, or a few pages) give what the whole buffers do."""
    import gpuadvise.trace.changes as changes

    monkeypatch.setattr(changes, "GROUP_ELEMENTS", group)
    test_changes_equal_the_whole_buffers_compared(dt, False)
