"""The emulator's heap: zero pages committed when written, without numpy's huge-page advice."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpuadvise.ptx.memory import _SMALL_HEAP_BYTES, GlobalMemory, _zero_heap, anonymous_mapping


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


def _overcommit_heuristic() -> bool:
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "0"
    except OSError:
        return False


@pytest.mark.skipif(
    not _overcommit_heuristic(), reason="needs Linux's default overcommit heuristic"
)
def test_reservations_beyond_the_machine_leave_fork_working() -> None:
    """CI's test worker held the emulator's 8 GiB record reservation and another one; every
    ``fork`` then failed with ENOMEM (the heuristic refuses a child whose commit charge exceeds
    the machine's memory). Reservations are not charged: a plain fork still starts."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    held = [anonymous_mapping(total // 2) for _ in range(3)]  # 1.5x the machine, untouched
    held[0][:4096] = b"\1" * 4096
    p = subprocess.run(["true"], preexec_fn=lambda: None, check=False)  # a real fork, no vfork
    assert p.returncode == 0
    assert len(held) == 3
