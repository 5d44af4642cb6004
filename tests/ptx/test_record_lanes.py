"""The records of a partial-mask global access whose lanes span several warps (the emulator's
several-warp record path, ``Batch._record_lanes``): each warp's record holds its active lanes'
addresses and zeros in the others, access after access under one block's mask."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.trace.access import Kind, Space
from gpuadvise.trace.emulate import emulate_ptx

# The threads with tid % 3 == 0 (lanes of every warp) load a[gid] and store it at b[2 gid + 1]:
# two accesses under the block's one mask; the others skip them.
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_a, .param .u64 p_b)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
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
  mul.wide.s32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  mul.wide.s32 %rd5, %r4, 8;
  add.s64 %rd6, %rd2, %rd5;
  rem.u32 %r5, %r1, 3;
  setp.ne.u32 %p1, %r5, 0;
  @%p1 bra $L_skip;
  ld.global.f32 %f1, [%rd4];
  st.global.f32 [%rd6+4], %f1;
$L_skip:
  ret;
}
"""


@pytest.mark.parametrize("block", [96, 70])
def test_several_warp_records_hold_their_lanes_addresses_and_zeros(block: int) -> None:
    ctas = 3
    a = np.arange(block * ctas, dtype=np.float32) + 1
    b = np.zeros(2 * block * ctas, np.float32)
    emu = emulate_ptx(PTX, "k", ctas, block, [a, b])
    gid = np.arange(block * ctas)
    chosen = gid[(gid % block) % 3 == 0]
    assert np.array_equal(emu.outputs["arg1"][2 * chosen + 1], a[chosen])
    rec = emu.trace.records
    rec = rec[rec["space"] == int(Space.GLOBAL)]
    for kind, stride, offset in ((Kind.LOAD, 4, 0), (Kind.STORE, 8, 4)):
        r = rec[rec["kind"] == int(kind)]
        assert len(r) == ctas * -(-block // 32)  # one record a warp, every warp has lanes
        base = None
        for x in r:
            tid = 32 * int(x["warp"]) + np.arange(32)
            active = (tid % 3 == 0) & (tid < block)
            assert int(x["mask"]) == sum(1 << int(lane) for lane in np.flatnonzero(active))
            g = int(x["cta"]) * block + tid
            lane0 = int(np.flatnonzero(active)[0])
            if base is None:
                base = int(x["addr"][lane0]) - stride * int(g[lane0]) - offset
            want = np.where(active, base + stride * g + offset, 0).astype(np.uint64)
            assert np.array_equal(x["addr"], want)
