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
        assert calls == [("mallopt", -3, 1 << 30), ("mallopt", -1, (1 << 31) - 1)]
        with emulator.malloc_tuned():
            pass
        assert len(calls) == 2  # the inner one neither set nor restored
    assert calls[2:] == [("mallopt", -3, 128 * 1024), ("mallopt", -1, 128 * 1024), ("trim", 0, 0)]
    assert emulator._malloc_depth == 0
    with emulator.malloc_tuned():  # set again once the outermost closed
        assert len(calls) == 7
