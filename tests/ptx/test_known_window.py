"""s26-trace: the emulator's per-site shortcuts give what their general steps give.

``GlobalMemory.known_window`` (a global access site skips ``in_one_buffer`` for addresses whose
pages are known filled) and ``Batch._record_lanes_later`` (one warp's records written in bulk)
must leave the memory, the offsets and the trace exactly as the steps they skip."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuadvise.ptx import emulator
from gpuadvise.ptx.memory import GLOBAL_BASE, PAGE_SHIFT, GlobalMemory
from gpuadvise.runner.data import buffer_filler
from gpuadvise.trace.emulate import emulate_ptx

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


# the first warp's threads: one in four loads, scales and stores its element (8 lanes a record),
# twice, at two sites, then its odd threads store once more (16 lanes); the second warp none
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_in, .param .u64 p_out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.wide.s32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  and.b32 %r6, %r2, 35;
  setp.eq.u32 %p1, %r6, 0;
  @%p1 ld.global.f32 %f1, [%rd4];
  mul.f32 %f2, %f1, 0f40000000;
  @%p1 st.global.f32 [%rd5], %f2;
  @%p1 ld.global.f32 %f3, [%rd4+4];
  @%p1 st.global.f32 [%rd5+4], %f3;
  and.b32 %r7, %r2, 33;
  setp.eq.u32 %p2, %r7, 1;
  @%p2 st.global.f32 [%rd5], %f3;
  ret;
}
"""


def _run(monkeypatch: pytest.MonkeyPatch, mode: str) -> tuple[Any, ...]:
    with monkeypatch.context() as mp:
        if mode == "direct":  # each record written as it comes (the s25 code)
            mp.setattr(emulator.Batch, "_record_lanes_later", emulator.Batch._record_lanes)
        elif mode != "bulk":
            mp.setattr(emulator, "_PENDING_RECORDS", int(mode))
        grid, block = 1, 64
        inp = np.arange(grid * block + 1, dtype=np.float32) * np.float32(0.25)
        out = np.zeros(grid * block + 1, np.float32)
        e = emulate_ptx(PTX, "k", grid, block, [inp, out])
    return (
        e.trace.records.tobytes(),
        e.outputs["arg1"].tobytes(),
        e.lane_instructions,
        e.warp_steps,
        e.simt,
        e.trace.work,
    )


def test_records_written_in_bulk_are_those_written_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept: list[int] = []
    flush = emulator.Batch._flush_records

    def counting(self: Any) -> None:
        kept.append(len(self._pending))
        flush(self)

    monkeypatch.setattr(emulator.Batch, "_flush_records", counting)
    direct = _run(monkeypatch, "direct")
    assert not any(kept)  # nothing kept: written one by one
    bulk = _run(monkeypatch, "bulk")
    assert max(kept) == 5  # 5 one-warp accesses, written at the run's end
    kept.clear()
    every3 = _run(monkeypatch, "3")  # three written mid-run, then the last two
    assert kept == [3, 2]
    assert bulk == direct == every3
    recs = np.frombuffer(bulk[0], emulator.RECORD)
    assert len(recs) == 5 and sorted(np.bitwise_count(recs["mask"]).tolist()) == [8, 8, 8, 8, 16]
    assert set(recs["warp"].tolist()) == {0}
