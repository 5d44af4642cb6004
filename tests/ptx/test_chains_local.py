"""gpuadvise.ptx.chains on a local array (GA401's local-array estimate): the chains with the
array's ``ld.local``/``st.local`` as they are, their ``ld.local`` links, and the chains were they
register moves (the array in registers), on nvcc's PTX of a 4-bin histogram (sm_90, -O3)
whose answers are read off the code."""

from __future__ import annotations

import numpy as np

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.chains import block_costs
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.ptx.pipes import LATENCY_CLASSES
from gpuadvise.trace.emulate import emulate_ptx

# extern "C" __global__ void h(const int* __restrict__ in, unsigned* __restrict__ out, int n) {
#     unsigned bins[4];
#     for (int b = 0; b < 4; ++b) bins[b] = 0;
#     for (int i = threadIdx.x; i < n; i += blockDim.x) bins[in[i] & 3] += 1;
#     out[threadIdx.x] = bins[in[0] & 3];
# }
HIST = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry h(.param .u64 h_param_0, .param .u64 h_param_1, .param .u32 h_param_2)
{
  .local .align 16 .b8 __local_depot0[16];
  .reg .b64 %SP;
  .reg .b64 %SPL;
  .reg .pred %p<3>;
  .reg .b32 %r<15>;
  .reg .b64 %rd<17>;

  mov.u64 %SPL, __local_depot0;
  ld.param.u64 %rd4, [h_param_0];
  ld.param.u64 %rd3, [h_param_1];
  ld.param.u32 %r5, [h_param_2];
  add.u64 %rd1, %SPL, 0;
  mov.u32 %r6, 0;
  st.local.v4.u32 [%rd1], {%r6, %r6, %r6, %r6};
  cvta.to.global.u64 %rd2, %rd4;
  mov.u32 %r1, %tid.x;
  setp.ge.s32 %p1, %r1, %r5;
  @%p1 bra $L__BB0_3;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r14, %r1;
$L__BB0_2:
  mul.wide.s32 %rd6, %r14, 4;
  add.s64 %rd7, %rd2, %rd6;
  ld.global.nc.u32 %r7, [%rd7];
  shl.b32 %r8, %r7, 2;
  cvt.u64.u32 %rd8, %r8;
  and.b64 %rd9, %rd8, 12;
  add.s64 %rd10, %rd1, %rd9;
  ld.local.u32 %r9, [%rd10];
  add.s32 %r10, %r9, 1;
  st.local.u32 [%rd10], %r10;
  add.s32 %r14, %r14, %r2;
  setp.lt.s32 %p2, %r14, %r5;
  @%p2 bra $L__BB0_2;
$L__BB0_3:
  ld.global.nc.u32 %r11, [%rd2];
  shl.b32 %r12, %r11, 2;
  cvt.u64.u32 %rd11, %r12;
  and.b64 %rd12, %rd11, 12;
  add.s64 %rd13, %rd1, %rd12;
  ld.local.u32 %r13, [%rd13];
  cvta.to.global.u64 %rd14, %rd3;
  mul.wide.u32 %rd15, %r1, 4;
  add.s64 %rd16, %rd14, %rd15;
  st.global.u32 [%rd16], %r13;
  ret;
}
"""


def test_a_programs_local_accesses_give_the_chains_in_registers() -> None:
    """Per block: the loop's chain is in[i] -> shl, cvt, and, add.s64 (the address) -> ld.local
    -> add -> st.local: two memory waits, one of them local, and a store; were the bins
    registers, in[i] -> the address -> add: one wait, no store. The tail: in[0] -> the address
    -> ld.local -> st.global: two waits, one local; in registers one."""
    prog = build_program(parse_ptx(HIST), "h")
    costs = block_costs(prog)
    assert costs.registers is not None
    width = costs.chain.shape[1]
    gi, si = LATENCY_CLASSES.index("global"), LATENCY_CLASSES.index("store")
    loop, tail = 2, 3  # (block 1: the loop's preheader)
    assert costs.chain[loop, gi] == 2 and costs.registers[loop, width] == 1
    assert costs.registers[loop, gi] == 1 and costs.registers[loop, si] == 0  # no store
    assert costs.chain[tail, gi] == 2 and costs.registers[tail, width] == 1
    assert costs.registers[tail, gi] == 1
    # the chain in registers and its local links, after the chain and the unordered chain
    assert costs.per_warp.shape[1] == 3 * width + 2


def test_the_emulator_adds_up_the_local_links() -> None:
    """64 threads a CTA, n = 5 x 64: each warp runs the loop 5 times, then the tail: 5 + 1
    local loads on its chain, 12 memory waits in all, 6 in registers (the loads of in)."""
    grid, block, n = 2, 64, 5 * 64
    inp = np.arange(n, dtype=np.int32)
    out = np.zeros(grid * block, np.uint32)
    work = emulate_ptx(HIST, "h", grid, block, [inp, out, np.int32(n)]).trace.work
    assert work is not None
    assert work.local_links == 6.0
    assert work.chain["global"] == 12.0
    assert work.chain_in_registers is not None
    assert work.chain_in_registers["global"] == 6.0
    assert work.chain_in_registers.get("store", 0.0) < work.chain.get("store", 0.0)


def test_a_program_without_local_accesses_keeps_its_columns() -> None:
    """No ``ld.local``/``st.local``: no chain in registers, the per-warp columns as before."""
    plain = HIST.replace("ld.local.u32 %r9, [%rd10];", "mov.u32 %r9, 0;")
    plain = plain.replace("st.local.u32 [%rd10], %r10;", "")
    plain = plain.replace("ld.local.u32 %r13, [%rd13];", "mov.u32 %r13, 0;")
    plain = plain.replace("st.local.v4.u32 [%rd1], {%r6, %r6, %r6, %r6};", "")
    costs = block_costs(build_program(parse_ptx(plain), "h"))
    assert costs.registers is None
    assert costs.per_warp.shape[1] == 2 * costs.chain.shape[1] + 1
