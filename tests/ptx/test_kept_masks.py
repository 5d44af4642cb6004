"""A few warps' partial masks kept across steps (``Batch.run``: the same warps and lanes, the same
mask, its index and records' layout) and a small batch's stale record templates made again
(``Batch._record_lanes``): the records and outputs are those of the steps that make every mask
again and set each record's epoch and weight, byte for byte."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gpuadvise.ptx.emulator as emulator
from gpuadvise.trace.access import Kind, Space
from gpuadvise.trace.emulate import emulate_ptx

# Four rounds, each after a barrier (a new epoch for every warp: the record templates go stale):
# the threads with tid % 3 == 0 (lanes of every warp) copy a[gid + j] to b[8 gid + j] for
# j = 0 .. tid % 7, so the inner loop's mask shrinks iteration by iteration, the same masks
# round after round.
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_a, .param .u64 p_b)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [p_a];
  ld.param.u64 %rd2, [p_b];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  rem.u32 %r5, %r1, 7;
  mov.u32 %r6, 0;
$L_outer:
  bar.sync 0;
  rem.u32 %r7, %r1, 3;
  setp.ne.u32 %p1, %r7, 0;
  @%p1 bra $L_next;
  mov.u32 %r8, 0;
  mul.wide.s32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  mul.wide.s32 %rd5, %r4, 32;
  add.s64 %rd6, %rd2, %rd5;
$L_inner:
  ld.global.f32 %f1, [%rd4];
  st.global.f32 [%rd6], %f1;
  add.s64 %rd4, %rd4, 4;
  add.s64 %rd6, %rd6, 4;
  add.u32 %r8, %r8, 1;
  setp.le.u32 %p2, %r8, %r5;
  @%p2 bra $L_inner;
$L_next:
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p3, %r6, 4;
  @%p3 bra $L_outer;
  ret;
}
"""


def _run(block: int, ctas: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, int]:
    """The emulation, and how many lane masks the steps made."""
    made = [0]
    real = emulator.Batch._lane_mask

    def counting(self: Any, ws: np.ndarray, masks: np.ndarray, n: int) -> Any:
        made[0] += 1
        return real(self, ws, masks, n)

    monkeypatch.setattr(emulator.Batch, "_lane_mask", counting)
    n = block * ctas
    a = np.arange(n + 8, dtype=np.float32) + 1
    b = np.zeros(8 * n, np.float32)
    emu = emulate_ptx(PTX, "k", ctas, block, [a, b])
    return emu, made[0]


@pytest.mark.parametrize("block", [96, 70])
def test_kept_masks_and_fresh_templates_leave_the_records_as_they_were(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctas = 2
    kept, kept_made = _run(block, ctas, monkeypatch)
    with monkeypatch.context() as mp:  # every mask made again, every record's epoch set
        mp.setattr(emulator, "_MASKS_KEPT_WARPS", 0)
        mp.setattr(emulator, "_FRESH_TEMPLATE_WARPS", 0)
        plain, plain_made = _run(block, ctas, mp)
    with monkeypatch.context() as mp:  # a mask kept at a time: the cache emptied as it fills
        mp.setattr(emulator, "_MASKS_KEPT", 1)
        one, _ = _run(block, ctas, mp)
    # the masks were kept: a round's masks are the last round's
    assert kept_made < plain_made
    for other in (plain, one):
        assert kept.trace.records.tobytes() == other.trace.records.tobytes()
        assert np.array_equal(kept.outputs["arg1"], other.outputs["arg1"])
        assert kept.lane_instructions == other.lane_instructions
    # what the copies hold: b[8 gid + j] = a[gid + j] for the chosen threads, j <= tid % 7
    n = block * ctas
    a = np.arange(n + 8, dtype=np.float32) + 1
    want = np.zeros(8 * n, np.float32)
    for gid in range(n):
        tid = gid % block
        if tid % 3 == 0:
            for j in range(tid % 7 + 1):
                want[8 * gid + j] = a[gid + j]
    assert np.array_equal(kept.outputs["arg1"], want)
    # each round's records carry its epoch (the barriers before it), from the templates made
    # again after each barrier
    rec = kept.trace.records
    rec = rec[(rec["space"] == int(Space.GLOBAL)) & (rec["kind"] == int(Kind.LOAD))]
    assert sorted(set(rec["epoch"].tolist())) == [1, 2, 3, 4]
    per_round = len(rec) // 4
    for r in range(4):
        assert (rec["epoch"][r * per_round : (r + 1) * per_round] == r + 1).all()
