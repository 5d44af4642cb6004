"""The sample's last, shorter batch takes over a larger batch's registers, zeroed
(emulator._zeroed_registers): the same zeros a new batch gets, without new pages."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuadvise.ptx.emulator import _zeroed_registers

REGS = {"%r1": "b32", "%rd1": "b64", "%p1": "pred", "%f1": "f32"}


def _entry(ncta: int, n: int) -> dict[str, Any]:
    regs = _zeroed_registers(REGS, n, None, ncta)
    for k, arr in enumerate(regs.values()):
        arr[...] = k + 1  # values a run left
    return {"regs": regs}


def test_a_shorter_batch_takes_a_larger_ones_registers_zeroed() -> None:
    cache = {1: _entry(1, 32), 4: _entry(4, 128), 8: _entry(8, 256)}
    donor = cache[4]["regs"]
    got = _zeroed_registers(REGS, 96, cache, 3)
    assert sorted(cache) == [1, 8]  # the smallest larger entry, dropped
    for name, arr in got.items():
        assert arr.shape == (96,) and not arr.any()
        assert arr.dtype == donor[name].dtype
        assert np.shares_memory(arr, donor[name])
    fresh = _zeroed_registers(REGS, 96, None, 3)
    assert {k: (v.dtype, v.tobytes()) for k, v in got.items()} == {
        k: (v.dtype, v.tobytes()) for k, v in fresh.items()
    }


def test_no_larger_batch_or_other_registers_give_new_zeros() -> None:
    cache = {1: _entry(1, 32)}
    got = _zeroed_registers(REGS, 64, cache, 2)
    assert sorted(cache) == [1] and all(not a.any() for a in got.values())
    assert not any(np.shares_memory(a, b) for a in got.values() for b in cache[1]["regs"].values())
    cache = {4: {"regs": {"%r1": np.ones(128, np.uint32)}}}  # another program's registers
    got = _zeroed_registers(REGS, 96, cache, 3)
    assert 4 in cache and all(not a.any() for a in got.values())
