"""The emulator's heap: zero pages committed when written, without numpy's huge-page advice."""

from __future__ import annotations

import numpy as np

from gpuadvise.ptx.memory import _SMALL_HEAP_BYTES, GlobalMemory, _zero_heap


def test_large_heap_is_a_writable_zero_mapping() -> None:
    n = 64 << 20
    heap = _zero_heap(n)
    assert heap.dtype == np.uint8 and len(heap) == n
    assert heap.base is not None and not heap.flags.owndata  # not a numpy allocation
    heap[n - 4096 :] = 7
    heap[:16] = np.arange(16, dtype=np.uint8)
    assert int(heap[n - 1]) == 7 and heap[:16].tolist() == list(range(16))
    assert not heap[1 << 20 : 2 << 20].any()
    small = _zero_heap(_SMALL_HEAP_BYTES - 16)
    assert small.flags.owndata and not small.any()


def test_global_memory_over_a_large_heap() -> None:
    data = np.arange(3 << 20, dtype=np.float32)  # 12 MiB: a mapped heap
    mem = GlobalMemory([("a", data), ("b", bytes(16))])
    assert not mem.heap.flags.owndata
    np.testing.assert_array_equal(mem.read("a").view(np.float32), data)
    assert mem.read("b").tolist() == [0] * 16
