"""``malloc_tuned`` (the emulator's, around the rules too): nested, only the outermost sets glibc's
thresholds and restores them, so an emulation inside the rules (a candidate launch compared)
leaves the rules after it their kept memory (issue 31)."""

from __future__ import annotations

import types

import pytest

import gpuadvise.ptx.emulator as emulator


def test_a_nested_malloc_tuned_leaves_the_setting_to_the_outermost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(pad: int) -> int:
        calls.append(("trim", pad, 0))
        return 1

    fake = types.SimpleNamespace(mallopt=mallopt, malloc_trim=malloc_trim)
    monkeypatch.setattr(emulator.ctypes, "CDLL", lambda name: fake)
    with emulator.malloc_tuned():
        assert calls == [("mallopt", -3, 1 << 24), ("mallopt", -1, (1 << 31) - 1)]
        with emulator.malloc_tuned():
            pass
        assert len(calls) == 2  # the inner one neither set nor restored
    assert calls[2:] == [("mallopt", -3, 128 * 1024), ("mallopt", -1, 128 * 1024), ("trim", 0, 0)]
    assert emulator._malloc_depth == 0
    with emulator.malloc_tuned():  # set again once the outermost closed
        assert len(calls) == 7


def test_an_array_of_the_mmap_threshold_or_more_is_given_back_when_freed() -> None:
    """Under malloc_tuned, an array of :data:`MMAP_FROM_BYTES` or more is mapped and unmapped
    when freed (issue 31: the peak RSS follows what is live), where the heap has no free block
    for it. Linux with glibc only (the RSS from /proc, the thresholds glibc's); in a process of
    its own, as the tests' processes map nothing (``conftest``: ``M_MMAP_MAX`` 0)."""
    import ctypes
    import pathlib
    import subprocess
    import sys

    try:
        ctypes.CDLL(None).mallopt  # noqa: B018
    except (OSError, AttributeError):
        pytest.skip("not glibc")
    if not pathlib.Path("/proc/self/statm").exists():
        pytest.skip("no /proc")
    assert 512 * 1024 < emulator.MMAP_FROM_BYTES <= 32 * 2**20
    code = (
        "import numpy as np, gpuadvise.ptx.emulator as e\n"
        "def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4096 / 2**20\n"
        "with e.malloc_tuned():\n"
        "    before = rss()\n"
        "    big = np.ones(96 * 2**20 // 8)\n"
        "    grown = rss() - before\n"
        "    del big\n"
        "    print(grown, rss() - before)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    grown, left = map(float, out.stdout.split())
    assert grown > 80
    assert left < 16
