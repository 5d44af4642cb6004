"""s26-trace: ``GlobalMemory.known_window`` (a global access site of the emulator skips
``in_one_buffer`` for addresses whose pages are known filled) gives the offsets, and leaves the
memory, as the steps it skips."""

from __future__ import annotations

import numpy as np

from gpuadvise.ptx.memory import GLOBAL_BASE, PAGE_SHIFT, GlobalMemory
from gpuadvise.runner.data import buffer_filler

PAGE = 1 << PAGE_SHIFT


def _lazy_memory() -> GlobalMemory:
    n = 1 << 16  # 256 KiB of float32 each: 64 pages
    return GlobalMemory(
        [
            ("in", buffer_filler(np.dtype(np.float32), n, "random", 3, "in")),
            ("out", buffer_filler(np.dtype(np.float32), n, "random", 3, "out")),
        ]
    )


def test_the_window_holds_only_filled_pages_of_one_buffer() -> None:
    mem = _lazy_memory()
    b = mem.by_name["out"]
    lo = b.base + 10 * PAGE + 64
    assert mem.known_window(lo, 4) is None  # nothing seen filled yet
    a = lo + np.arange(0, 3 * PAGE, 4, dtype=np.int64)  # pages 10-13 of "out"
    offs = mem.in_one_buffer(a, int(a.min()), int(a.max()), 4, aligned=True)
    assert offs is not None
    assert mem.known_window(lo, 4) is None  # filled, not yet seen filled
    again = mem.in_one_buffer(a, int(a.min()), int(a.max()), 4, aligned=True)
    assert again is not None
    np.testing.assert_array_equal(again, offs)
    got = mem.known_window(lo, 4)
    assert got is not None
    w_lo, w_hi, delta = got
    # the pages the access filled, no more: from page 10's start to page 13's end
    assert (w_lo, w_hi) == (b.base + 10 * PAGE, b.base + 14 * PAGE)
    made = mem.pages_made
    inside = np.array([w_lo, w_lo + 4, w_hi - 4], dtype=np.int64)
    want = mem.in_one_buffer(inside, int(inside.min()), int(inside.max()), 4, aligned=True)
    assert want is not None
    np.testing.assert_array_equal(np.subtract(inside, delta), want)
    assert mem.pages_made == made  # the window's addresses needed no page
    # the page after the window is not filled: in_one_buffer fills it
    after = np.array([w_hi], dtype=np.int64)
    assert mem.in_one_buffer(after, w_hi, w_hi, 4, aligned=True) is not None
    assert mem.pages_made == made + 1
    # the window of a wider width ends where its last access still fits
    got8 = mem.known_window(lo, 8)
    assert got8 is not None and got8[1] <= w_hi + PAGE
    assert mem.known_window(lo, 12) is None  # not a power of two: no window
    assert mem.known_window(GLOBAL_BASE - 4, 4) is None


def test_an_eager_buffers_window_is_the_buffer() -> None:
    mem = GlobalMemory([("a", np.arange(1024, dtype=np.float32)), ("b", bytes(64))])
    b = mem.by_name["a"]
    a = b.base + np.arange(0, 64, 4, dtype=np.int64)
    assert mem.in_one_buffer(a, int(a.min()), int(a.max()), 4, aligned=True) is not None
    got = mem.known_window(b.base, 4)
    assert got is not None and got[:2] == (b.base, b.base + b.size - 4 + 1)
