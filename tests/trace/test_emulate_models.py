"""An emulation without the models (``models=False``: a launch check's, which reads its outputs
and its global traffic alone) computes what the full one computes: the same outputs, counts
and global records, bit for bit, without the shared and local records, the block costs and
the SIMT profile."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.coalescing import record_sectors
from gpuadvise.trace.access import Space
from gpuadvise.trace.emulate import emulate_ptx

# Each thread stages in[i] in shared memory, then (after a barrier) reads its neighbour's and
# walks a loop of n global loads; the threads under 40 of each CTA store (a partial mask), the
# others store in a second buffer through a one-lane-in-three predicate: full-mask and
# partial-mask global and shared accesses, a divergent loop, a barrier.
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_in, .param .u64 p_out, .param .u64 p_side, .param .u32 p_n)
{
  .reg .pred %p<5>;
  .reg .b32 %r<16>;
  .reg .f32 %f<6>;
  .reg .b64 %rd<12>;
  .shared .align 4 .b8 tile[512];
  ld.param.u64 %rd1, [p_in];
  ld.param.u64 %rd2, [p_out];
  ld.param.u64 %rd9, [p_side];
  ld.param.u32 %r1, [p_n];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd9, %rd9;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.wide.s32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  add.s64 %rd10, %rd9, %rd3;
  ld.global.f32 %f1, [%rd4];
  mov.u32 %r6, tile;
  shl.b32 %r7, %r2, 2;
  add.s32 %r8, %r6, %r7;
  st.shared.f32 [%r8], %f1;
  bar.sync 0;
  add.s32 %r9, %r2, 1;
  rem.u32 %r9, %r9, %r4;
  shl.b32 %r9, %r9, 2;
  add.s32 %r9, %r6, %r9;
  ld.shared.f32 %f2, [%r9];
  and.b32 %r10, %r2, 3;
  add.s32 %r11, %r1, %r10;
  mov.u32 %r12, 0;
  mul.lo.s32 %r13, %r4, 4;
  mul.wide.s32 %rd6, %r13, 4;
  mov.u64 %rd7, %rd4;
$L_loop:
  ld.global.f32 %f3, [%rd7];
  add.f32 %f2, %f2, %f3;
  add.s64 %rd7, %rd7, %rd6;
  add.s32 %r12, %r12, 1;
  setp.lt.u32 %p1, %r12, %r11;
  @%p1 bra $L_loop;
  setp.lt.u32 %p2, %r2, 40;
  @%p2 st.global.f32 [%rd5], %f2;
  rem.u32 %r14, %r2, 3;
  setp.eq.u32 %p3, %r14, 0;
  @%p3 st.global.f32 [%rd10], %f1;
  ret;
}
"""


def _run(models: bool, ctas: int = 3, block: int = 128) -> object:
    rng = np.random.default_rng(5)
    n = 4
    data = rng.standard_normal(block * ctas + 4 * block * (n + 4)).astype(np.float32)
    out = np.zeros(block * ctas, np.float32)
    side = np.full(block * ctas, -1.0, np.float32)
    return emulate_ptx(PTX, "k", ctas, block, [data, out, side, np.uint32(n)], models=models)


@pytest.mark.parametrize("block", [128, 96])
def test_the_outputs_counts_and_global_records_are_the_full_runs(block: int) -> None:
    full, bare = _run(True, block=block), _run(False, block=block)
    for name in full.outputs:
        assert np.array_equal(full.outputs[name].view(np.uint8), bare.outputs[name].view(np.uint8))
    assert (full.lane_instructions, full.warp_steps, full.warp_accesses) == (
        bare.lane_instructions,
        bare.warp_steps,
        bare.warp_accesses,
    )
    r_full, r_bare = full.trace.records, bare.trace.records
    g_full = r_full[r_full["space"] == int(Space.GLOBAL)]
    assert len(g_full) < len(r_full)  # the kernel has shared accesses, in the full trace
    assert np.all(r_bare["space"] == int(Space.GLOBAL))  # and none in the bare one
    # every field, bit for bit; every memory instruction listed (declared) in both
    assert g_full.tobytes() == r_bare.tobytes()
    assert full.trace.instructions == bare.trace.instructions
    assert np.array_equal(record_sectors(g_full).sectors, record_sectors(r_bare).sectors)
    # the models are there in the full run only
    assert full.simt is not None and full.trace.work is not None
    assert bare.simt is None and bare.trace.work is None


def test_an_untraced_run_without_models_has_the_outputs() -> None:
    rng = np.random.default_rng(6)
    data = rng.standard_normal(128 * 2 + 4 * 128 * 8).astype(np.float32)
    args = [data, np.zeros(256, np.float32), np.zeros(256, np.float32), np.uint32(4)]
    full = emulate_ptx(PTX, "k", 2, 128, list(args), trace=False)
    bare = emulate_ptx(PTX, "k", 2, 128, list(args), trace=False, models=False)
    assert len(bare.trace.records) == 0
    for name in full.outputs:
        assert np.array_equal(full.outputs[name], bare.outputs[name])
    assert bare.simt is None
