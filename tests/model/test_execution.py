"""The execution model (gpuadvise.model.execution through gpuadvise.model.roofline.launch_times)
pinned on hand-derived cases: small kernels in PTX run through the emulator, their critical paths
and pipe counts read off the code, the times worked out by hand at the rates below.

The rates are written out here (the sm_90 defaults of data/pipes.toml when this test was
written), so that a new measurement in the presets does not move these hand-derived numbers.
H200: 132 SMs at 1980 MHz."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpuadvise.devices import PipeRates, memory_rates, preset
from gpuadvise.model.execution import (
    KernelWork,
    amdahl_with_floor,
    combine,
    overlap,
)
from gpuadvise.model.roofline import Traffic, launch_estimate, launch_times
from gpuadvise.trace.emulate import emulate_ptx

H200 = preset("H200")
MEM = memory_rates(H200)
HZ = 1980e6
FLOOR = 2.8e-6
RATES = PipeRates(
    lanes_per_clock={
        "fp32": 128,
        "fp16": 128,
        "fp64": 64,
        "int": 64,
        "mufu": 16,
        "xu": 16,
        "shuffle": 32,
        "tensor": 32,
    },  # fmt: skip
    latency_cycles={
        "fp32": 4,
        "fp16": 5,
        "fp64": 8,
        "int": 4,
        "mufu": 18,
        "xu": 14,
        "shuffle": 24,
        "shared": 30,
        "l1": 35,
        "l2": 270,
        "dram": 782,
        "tensor": 32,
        "barrier": 24,
        "store": 1,
    },  # fmt: skip
    shared_wavefront_cycles=1.0,
    cta_launch_ns=100.0,
    launch_floor_s=FLOOR,
    measured=frozenset(),
    source="this test's rates",
)

HEAD = """
.version 8.0
.target sm_90
.address_size 64
"""


def _norm(a: float, b: float) -> float:
    """The 2.5-norm of a launch's latency side and throughput side, by hand."""
    return float((a**2.5 + b**2.5) ** 0.4)


def _times(work: KernelWork, **memory: float):  # type: ignore[no-untyped-def]
    assert MEM is not None
    t = launch_times(Traffic(work=work, **memory), H200, MEM, pipes=RATES)
    assert t is not None
    return t


# ---------------------------------------------------------------------------------------------
# 1. A serial one-CTA loop: for (i = 0; i < 255; i++) { if (tid > i) s[tid] -= 0.5 * s[i];
#    __syncthreads(); } (the issue's first stranger: 12.0 us on an H200, 2.8 us empty)

SERIAL = (
    HEAD
    + r"""
.visible .entry serial(.param .u64 p_a)
{
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .f32 %f<5>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 s[1024];
  ld.param.u64 %rd1, [p_a];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  mov.u32 %r2, s;
  shl.b32 %r3, %r1, 2;
  add.s32 %r4, %r2, %r3;
  st.shared.f32 [%r4], %f1;
  bar.sync 0;
  mov.u32 %r5, 0;
  mov.u32 %r6, %r2;
$L_loop:
  setp.le.u32 %p1, %r1, %r5;
  @%p1 bra $L_sync;
  ld.shared.f32 %f2, [%r6];
  ld.shared.f32 %f3, [%r4];
  fma.rn.f32 %f4, %f2, 0fBF000000, %f3;
  st.shared.f32 [%r4], %f4;
$L_sync:
  bar.sync 0;
  add.s32 %r5, %r5, 1;
  add.s32 %r6, %r6, 4;
  setp.lt.u32 %p2, %r5, 255;
  @%p2 bra $L_loop;
  ld.shared.f32 %f1, [%r4];
  st.global.f32 [%rd3], %f1;
  ret;
}
"""
)


def test_serial_one_cta_loop_is_its_critical_path() -> None:
    import numpy as np

    a = np.linspace(0, 1, 256, dtype=np.float32)
    work = emulate_ptx(SERIAL, "serial", 1, 256, [a]).trace.work
    assert work is not None
    # The critical warp is warp 7 (tids 224-255): some lane has tid > i for every i < 255, so
    # it runs the update in all 255 iterations. Its chain, block by block:
    #   entry: S2R -> mul.wide -> add.s64 (2) -> ld.global -> st.shared: int 4, global, store
    #   barrier
    #   255 x (setp -> bra: int 2; ld.shared -> fma -> st.shared: shared, fp32, store;
    #          barrier; add -> setp -> bra: int 3)
    #   exit: ld.shared -> st.global: shared, store
    assert work.chain == {"int": 4 + 255 * 5, "global": 1, "store": 1 + 255 + 1,
                          "shared": 255 + 1, "fp32": 255, "barrier": 1 + 255}  # fmt: skip
    t = _times(work)
    # at the rates above, a global load with no memory counts is an L2 hit (270 cycles):
    # int 1279 x 4 + 270 + store 257 x 1 + shared 256 x 30 + fp32 255 x 4 + barrier 256 x 24
    chain = 1279 * 4 + 270 + 257 + 256 * 30 + 255 * 4 + 256 * 24
    assert chain == 20487
    assert t.compute is not None and t.compute.chain_cycles == chain
    assert t.bound_by == "dependency"
    assert t.dependency_s == pytest.approx(chain / HZ)  # 10.35 us: one round of one CTA
    # the throughput side, the busiest scheduler's issue of 2 warps (2.39 us), adds to it as a
    # 2.5-norm: 10.45 us (the maximum, 10.35 us, before issue 29's loaded-latency fit)
    assert t.issue_s == pytest.approx(2.3929e-6, rel=1e-4) and t.memory_s == 0.0
    assert t.time_s == pytest.approx(FLOOR + _norm(chain / HZ, t.issue_s))  # 13.25 us (12.0)
    # no fix can give more than the launch over its floor: 4.73x (4.70x with the maximum; the
    # issue: 4.4x)
    assert amdahl_with_floor(t.time_s, FLOOR, float("inf")) == pytest.approx(4.733, rel=1e-3)
    # spreading the CTA's work over every SM (a grid of 132 CTAs, each 1/132 of the loop's
    # steps, as a small-grid fix assumes) would shorten the chain; keeping the chain (its steps
    # depend on each other) gains nothing
    spread = KernelWork(**{**work.__dict__, "ctas": 132})
    same = _times(spread)
    assert same.time_s == pytest.approx(t.time_s)


# ---------------------------------------------------------------------------------------------
# 2. A tid == 0 section: thread 0 of a 1024-thread CTA sums the block's 1024 shared values one
#    after another, against the tree reduction that fixes it (the issue: 6.4x measured)

TID0 = (
    HEAD
    + r"""
.visible .entry tid0(.param .u64 p_a, .param .u64 p_out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .f32 %f<5>;
  .reg .b64 %rd<5>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [p_a];
  ld.param.u64 %rd4, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd4, %rd4;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  mov.u32 %r2, s;
  shl.b32 %r3, %r1, 2;
  add.s32 %r4, %r2, %r3;
  st.shared.f32 [%r4], %f1;
  bar.sync 0;
  setp.ne.s32 %p1, %r1, 0;
  @%p1 bra $L_done;
  mov.u32 %r5, %r2;
  mov.u32 %r6, 0;
  mov.f32 %f2, 0f00000000;
$L_loop:
  ld.shared.f32 %f3, [%r5];
  add.f32 %f2, %f2, %f3;
  add.s32 %r5, %r5, 4;
  add.s32 %r6, %r6, 1;
  setp.lt.u32 %p2, %r6, 1024;
  @%p2 bra $L_loop;
  st.global.f32 [%rd4], %f2;
$L_done:
  bar.sync 0;
  ret;
}
"""
)

TREE = (
    HEAD
    + r"""
.visible .entry tree(.param .u64 p_a, .param .u64 p_out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .f32 %f<6>;
  .reg .b64 %rd<5>;
  .shared .align 4 .b8 s[4096];
  ld.param.u64 %rd1, [p_a];
  ld.param.u64 %rd4, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd4, %rd4;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  mov.u32 %r2, s;
  shl.b32 %r3, %r1, 2;
  add.s32 %r4, %r2, %r3;
  st.shared.f32 [%r4], %f1;
  bar.sync 0;
  mov.u32 %r8, 2048;
$L_level:
  setp.ge.u32 %p1, %r3, %r8;
  @%p1 bra $L_sync;
  add.s32 %r7, %r4, %r8;
  ld.shared.f32 %f2, [%r7];
  ld.shared.f32 %f3, [%r4];
  add.f32 %f4, %f3, %f2;
  st.shared.f32 [%r4], %f4;
$L_sync:
  bar.sync 0;
  shr.u32 %r8, %r8, 1;
  setp.ge.u32 %p2, %r8, 4;
  @%p2 bra $L_level;
  setp.ne.s32 %p3, %r1, 0;
  @%p3 bra $L_end;
  ld.shared.f32 %f5, [%r2];
  st.global.f32 [%rd4], %f5;
$L_end:
  ret;
}
"""
)


def test_tid0_section_against_its_tree_reduction() -> None:
    import numpy as np

    a = np.ones(1024, np.float32)
    serial = emulate_ptx(TID0, "tid0", 1, 1024, [a, np.zeros(1, np.float32)])
    tree = emulate_ptx(TREE, "tree", 1, 1024, [a, np.zeros(1, np.float32)])
    assert serial.outputs["arg1"][0] == tree.outputs["arg1"][0] == 1024.0
    ws, wt = serial.trace.work, tree.trace.work
    assert ws is not None and wt is not None
    # serial, warp 0: entry S2R -> mul.wide -> add.s64 (2) -> ld.global -> st.shared (int 4,
    # global, store; 16 + 270 + 1 = 287 cycles), barrier (24), setp -> bra (int 2, 8), 1024 x
    # (ld.shared -> add.f32: 34 cycles, longer than add -> setp -> bra), the store (1), barrier
    # (24), ret (4)
    serial_cycles = 287 + 24 + 8 + 1024 * 34 + 1 + 24 + 4
    ts = _times(ws)
    assert ts.compute is not None and ts.compute.chain_cycles == serial_cycles  # 35164
    assert ts.bound_by == "dependency"
    # tree, warp 0 (tid 0 adds at every level): entry 287, barrier 24, 10 levels x (setp ->
    # bra 8; add -> ld.shared -> add.f32 -> st.shared 4 + 30 + 4 + 1; barrier 24; shr -> setp
    # -> bra 12 = 83), setp -> bra 8, ld.shared -> st.global 31, ret 4 twice (lane 0 comes to
    # it after the store, the other lanes before: they reconverge at the exit)
    tree_cycles = 287 + 24 + 10 * 83 + 8 + 31 + 2 * 4
    tt = _times(wt)
    assert tt.compute is not None and tt.compute.chain_cycles == tree_cycles  # 1188
    assert tt.bound_by == "launch"  # 0.60 us of work under a 2.8 us floor
    assert MEM is not None
    est = launch_estimate(Traffic(work=ws), Traffic(work=wt), H200, MEM, pipes=RATES)
    assert est is not None
    # each chain and its launch's issue (8 warps a scheduler: 0.83 us serial, 0.31 us the tree)
    # as a 2.5-norm: the tree's 0.60 us chain becomes 0.645 us
    assert ts.issue_s == pytest.approx(0.8284e-6, rel=1e-4)
    assert tt.issue_s == pytest.approx(0.3140e-6, rel=1e-4)
    point = (FLOOR + _norm(serial_cycles / HZ, ts.issue_s)) / (
        FLOOR + _norm(tree_cycles / HZ, tt.issue_s)
    )
    assert est.point == pytest.approx(point)  # 5.97x (a block reduction measured 6.4x)
    assert est.point == pytest.approx(5.97, abs=0.01)
    assert est.bound >= est.point


# ---------------------------------------------------------------------------------------------
# 3. A launch-bound tiny kernel: 2,047 threads (8 CTAs of 256) each scale one float

TINY = (
    HEAD
    + r"""
.visible .entry tiny(.param .u64 p_a, .param .u32 p_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<3>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p_a];
  ld.param.u32 %r1, [p_n];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra $L_end;
  mul.wide.u32 %rd2, %r5, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  mul.f32 %f2, %f1, 0f40000000;
  st.global.f32 [%rd3], %f2;
$L_end:
  ret;
}
"""
)


def test_launch_bound_tiny_kernel_caps_any_speedup() -> None:
    import numpy as np

    a = np.ones(2048, np.float32)
    work = emulate_ptx(TINY, "tiny", 8, 256, [a, np.uint32(2047)]).trace.work
    assert work is not None
    # chain: S2R -> mad -> setp -> bra (int 4: 16 cycles); mul.wide -> add.s64 (2) -> ld.global
    # -> mul.f32 -> st.global (int 3, global, fp32, store: 12 + 270 + 4 + 1 = 287); ret (4).
    # The last CTA's last warp splits at the bounds check (thread 2047 leaves early) and runs
    # the ret twice: one more integer link in one CTA of 8
    assert work.chain == {"int": 4 + 3 + 1 + 1 / 8, "global": 1, "fp32": 1, "store": 1}
    cycles = 16 + 287 + 4 + 4 / 8
    # 16 KB read and written once: 2 x 8,188 B from DRAM at 3,913 GB/s, 4 ns
    t = _times(work, dram_bytes=2 * 2047 * 4, load_requests=64, l2_load_sectors=256)
    assert t.compute is not None and t.compute.chain_cycles == cycles
    # one CTA on the busiest SM: its launch is in the floor (cta 0), the chain (155 ns) is the
    # work
    assert t.cta_s == 0.0
    # the throughput side (14 ns: issue 12 ns, the DRAM's 4 ns overlapping but for half of it)
    # adds 0.2 ns to the chain's 155 ns
    assert t.work_s == pytest.approx(_norm(cycles / HZ, t.throughput_side_s))
    assert t.work_s == pytest.approx(cycles / HZ, rel=0.002)
    assert t.time_s == pytest.approx(FLOOR + cycles / HZ, rel=1e-4)  # 2.955 us: the launch
    assert t.bound_by == "launch"
    # a rule that finds its memory work 33x smaller gives the launch 1.05x at most
    assert amdahl_with_floor(t.time_s, t.floor_s, 33.0) == pytest.approx(
        t.time_s / (FLOOR + t.work_s / 33)
    )
    assert amdahl_with_floor(t.time_s, t.floor_s, 33.0) < 1.06


def test_launch_bound_by_its_cta_launches() -> None:
    """The same one-load kernel on 4,224 CTAs of 16 threads (32 an SM: one round, as
    kernels/merge16's reverse_global) and merged two blocks a CTA (2,112 CTAs of 32): the
    block scheduler launches an SM's 32 CTAs one after another, 100 ns each here (the floor
    holds the first two), so the last starts 3.0 us after them, then runs its 155 ns chain."""
    from dataclasses import replace

    import numpy as np

    a = np.ones(256, np.float32)
    work = emulate_ptx(TINY, "tiny", 8, 16, [a, np.uint32(128)]).trace.work
    assert work is not None and work.warps_per_cta == 1
    # the chain of the test above without the early exit: int 4 + 3 + 1, global, fp32, store
    assert work.chain == {"int": 8, "global": 1, "fp32": 1, "store": 1}
    cycles = 16 + 287 + 4
    n = 67584  # floats, read and written once: 2 sectors a warp's request of 16 floats
    mem = {"dram_bytes": 2 * n * 4, "load_requests": n / 16, "l2_load_sectors": n / 8}
    t = _times(replace(work, ctas=n // 16), **mem)
    assert t.compute is not None and t.compute.rounds == 1 and t.compute.busiest_sm_ctas == 32
    ramp = 30 * 100e-9
    assert t.compute.ramp_s == pytest.approx(ramp)
    assert t.dependency_s == pytest.approx(cycles / HZ + ramp)
    # the scheduler's rate, the 30 launches after the two the floor holds (3.0 us): the ramp
    # and the chain are longer
    assert t.cta_s == pytest.approx(30 * 100e-9)
    assert t.latency_side_s == pytest.approx(cycles / HZ + ramp)
    # the throughput side (issue 0.1 us, DRAM 0.14 us at 3.9 TB/s, one warp a scheduler: added)
    # adds little to the latency side
    assert t.work_s == pytest.approx(_norm(t.latency_side_s, t.throughput_side_s))
    assert t.work_s == pytest.approx(3.155e-6, rel=0.01)
    assert t.time_s == pytest.approx(FLOOR + 3.155e-6, rel=0.01)  # 5.96 us: the H200 ran 5.98
    # merged: 16 CTAs an SM, the ramp 14 launches and the chain (1.555 us), the rate 14 (1.4)
    m = _times(replace(work, ctas=n // 32), **mem)
    assert m.compute is not None and m.compute.ramp_s == pytest.approx(14 * 100e-9)
    assert m.time_s == pytest.approx(FLOOR + 1.555e-6, rel=0.01)  # 4.36 us (4.67)
    assert t.time_s / m.time_s == pytest.approx(1.37, abs=0.01)  # measured 1.28x
    # one or two CTAs an SM (132, 264 CTAs): no ramp and no launch over the floor's two
    for ctas in (132, 264):
        one = _times(replace(work, ctas=ctas), **mem)
        assert one.compute is not None and one.compute.ramp_s == 0.0 and one.cta_s == 0.0


def test_a_change_of_the_ctas_code_leaves_their_launches() -> None:
    """The launch-bound tiny kernel of issue 29 on the block scheduler's rate measured on an H200
    (79.4 ns a CTA an SM after the two the floor holds): the one-load kernel on 4,224 CTAs of
    16 threads (32 an SM, one round). A change that makes each CTA's code k times shorter
    leaves the launches as they are: the launch stays at least as long as an empty kernel of
    the same grid, which the H200 ran in 5.25 us (docs/data/cta_launch_h200_2026-11-30.txt)."""
    from dataclasses import replace

    import numpy as np

    a = np.ones(256, np.float32)
    work = emulate_ptx(TINY, "tiny", 8, 16, [a, np.uint32(128)]).trace.work
    assert work is not None
    cycles = 16 + 287 + 4  # the chain of the test above: 155 ns
    n = 67584
    mem = {"dram_bytes": 2 * n * 4, "load_requests": n / 16, "l2_load_sectors": n / 8}
    assert MEM is not None
    measured = replace(RATES, cta_launch_ns=79.4)
    traffic = Traffic(work=replace(work, ctas=n // 16), **mem)
    t = launch_times(traffic, H200, MEM, pipes=measured)
    assert t is not None and t.compute is not None
    launches = 30 * 79.4e-9  # 2.382 us: the first round's launches after the floor's two
    assert t.ramp_s == pytest.approx(launches) and t.cta_s == pytest.approx(launches)
    assert t.dependency_s == pytest.approx(cycles / HZ + launches)
    assert t.time_s == pytest.approx(FLOOR + 2.537e-6, rel=0.01)  # 5.34 us; the H200: 5.79
    # the CTAs' code made infinitely short: the launches are left, 2.8 + 2.38 = 5.18 us, an
    # empty kernel of this grid (5.25 us on the H200)
    empty = t.shortened(math.inf)
    assert empty.time_s == pytest.approx(FLOOR + launches)
    assert abs(empty.time_s / 5.248e-6 - 1) < 0.02
    # 2x shorter code: the ramp stays and the chain halves; the throughput side halves
    half = t.shortened(2.0)
    assert half.dependency_s == pytest.approx(cycles / HZ / 2 + launches)
    assert half.throughput_side_s == pytest.approx(t.throughput_side_s / 2)
    assert t.time_s / half.time_s == pytest.approx(1.015, abs=0.005)  # Amdahl: 1.27x
    assert amdahl_with_floor(t.time_s, t.floor_s, 2.0) > 1.25
    # a change that launches half the CTAs too (a merge) shortens the launches with the rest
    assert t.shortened(2.0, keep_cta_launches=False).work_s == pytest.approx(t.work_s / 2)
    # one CTA an SM: no launch over the floor's, every term of degree one
    one = launch_times(replace(traffic, work=replace(work, ctas=132)), H200, MEM, pipes=measured)
    assert one is not None and one.cta_s == 0.0 and one.ramp_s == 0.0
    assert one.shortened(3.0).work_s == pytest.approx(one.work_s / 3)


# ---------------------------------------------------------------------------------------------
# 4. An FP64-bound kernel: 1,056 CTAs of 256 threads (8 a SM: 64 warps), each thread 64 steps
#    of four independent DFMA chains

FP64 = (
    HEAD
    + r"""
.visible .entry dfma(.param .u64 p_out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f64 %fd<9>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p_out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd2, %r4, 8;
  add.s64 %rd3, %rd1, %rd2;
  cvt.rn.f64.s32 %fd1, %r4;
  mov.f64 %fd2, %fd1;
  mov.f64 %fd3, %fd1;
  mov.f64 %fd4, %fd1;
  mov.u32 %r5, 0;
$L_loop:
  fma.rn.f64 %fd1, %fd1, 0d3FF0000000000001, 0d3F50624DD2F1A9FC;
  fma.rn.f64 %fd2, %fd2, 0d3FF0000000000001, 0d3F50624DD2F1A9FC;
  fma.rn.f64 %fd3, %fd3, 0d3FF0000000000001, 0d3F50624DD2F1A9FC;
  fma.rn.f64 %fd4, %fd4, 0d3FF0000000000001, 0d3F50624DD2F1A9FC;
  add.s32 %r5, %r5, 1;
  setp.lt.u32 %p1, %r5, 64;
  @%p1 bra $L_loop;
  add.f64 %fd5, %fd1, %fd2;
  add.f64 %fd6, %fd3, %fd4;
  add.f64 %fd7, %fd5, %fd6;
  st.global.f64 [%rd3], %fd7;
  ret;
}
"""
)


def test_fp64_bound_kernel_is_bound_by_its_pipe() -> None:
    import numpy as np

    ctas = 132 * 8
    out = np.zeros(ctas * 256, np.float64)
    work = emulate_ptx(FP64, "dfma", ctas, 256, [out], sample_ctas=1).trace.work
    assert work is not None and work.ctas == ctas and work.ctas_traced == 1
    # per warp: 64 x 4 DFMA + 3 DADD = 259 FP64; S2R x 2, add.s64 (2) and 64 x (add, setp) =
    # 132 on the ALU; mad and mul.wide on the IMAD pipe; the cvt (XU); 64 bra + ret; the store.
    # Eight warps a CTA.
    assert work.pipes == {"fp64": 8 * 259, "int": 8 * 132, "imad": 8 * 2, "xu": 8,
                          "branch": 8 * 65, "lsu": 8}  # fmt: skip
    t = _times(work, dram_bytes=ctas * 256 * 8)
    # the busiest SM runs 8 CTAs at once (the warp limit: 64 warps), 16 warps a scheduler, so
    # a scheduler issues 2 CTAs' instructions: FP64 at 64 / 4 = 16 lanes a clock, 2 clocks a
    # warp DFMA: 2 x 2072 x 2 = 8,288 cycles; issue 2 x 3,680 = 7,360 cycles
    assert t.compute is not None and t.compute.pipe == "fp64"
    assert t.pipe_s == pytest.approx(8288 / HZ)
    assert t.issue_s == pytest.approx(7360 / HZ)
    assert t.bound_by == "pipe"
    # memory (2.16 MB written: 0.55 us at 3,913 GB/s) comes after the arithmetic: one round of
    # CTAs whose warps wait for no load (phases 1), every warp computes and then stores with the
    # others, so nothing of it is hidden (16 warps a scheduler would hide all but 1/16 of it in
    # a launch whose warps drift apart); the latency side, the last CTA's chain after the 6 CTA
    # launches before it on the SM (0.6 us; the scheduler's rate, the same 6 launches after the
    # floor's two, is shorter), adds to that as a 2.5-norm: 4.77 us of work
    assert t.cta_s == pytest.approx(600e-9)
    assert t.compute.ramp_s == pytest.approx(600e-9)
    assert t.compute.phases == 1 and t.hidden == 0
    latency = t.compute.chain_cycles / HZ + 600e-9
    assert t.latency_side_s == pytest.approx(latency)
    through = 8288 / HZ + t.memory_s
    assert t.time_s == pytest.approx(FLOOR + _norm(latency, through), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# 5. A compute-bound SGEMM, 4096^3: 128x128 C tiles (1,024 CTAs of 256 threads, 8x8 outputs a
#    thread), 8-deep k tiles staged through shared memory


def _gemm_ptx() -> str:
    acc = [f"%f{i}" for i in range(64)]
    body = []
    for kk in range(8):
        a0, b0 = 1024 * 0 + kk * 512, 4096 + kk * 512
        body += [
            f"  ld.shared.v4.f32 {{%a0, %a1, %a2, %a3}}, [%r20+{a0}];",
            f"  ld.shared.v4.f32 {{%a4, %a5, %a6, %a7}}, [%r20+{a0 + 16}];",
            f"  ld.shared.v4.f32 {{%b0, %b1, %b2, %b3}}, [%r21+{b0}];",
            f"  ld.shared.v4.f32 {{%b4, %b5, %b6, %b7}}, [%r21+{b0 + 16}];",
        ]
        for i in range(8):
            for j in range(8):
                c = acc[i * 8 + j]
                body.append(f"  fma.rn.f32 {c}, %a{i}, %b{j}, {c};")
    stores = [f"  st.global.f32 [%rd5+{4 * i}], {acc[i]};" for i in range(64)]
    return (
        HEAD
        + r"""
.visible .entry sgemm(.param .u64 p_a, .param .u64 p_b, .param .u64 p_c, .param .u32 p_k)
{
  .reg .pred %p<2>;
  .reg .b32 %r<30>;
  .reg .f32 %f<64>;
  .reg .f32 %a<8>;
  .reg .f32 %b<8>;
  .reg .f32 %g<8>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 sh[8192];
  ld.param.u64 %rd1, [p_a];
  ld.param.u64 %rd2, [p_b];
  ld.param.u64 %rd3, [p_c];
  ld.param.u32 %r1, [p_k];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3;
  mov.u32 %r2, %tid.x;
  and.b32 %r3, %r2, 15;
  shr.u32 %r4, %r2, 4;
  mov.u32 %r5, sh;
  shl.b32 %r6, %r2, 4;
  add.s32 %r7, %r5, %r6;
  shl.b32 %r8, %r4, 5;
  add.s32 %r20, %r5, %r8;
  shl.b32 %r9, %r3, 5;
  add.s32 %r21, %r5, %r9;
  mul.wide.u32 %rd4, %r6, 1;
  add.s64 %rd6, %rd1, %rd4;
  add.s64 %rd7, %rd2, %rd4;
  mul.wide.u32 %rd5, %r2, 256;
  add.s64 %rd5, %rd3, %rd5;
"""
        + "".join(f"  mov.f32 %f{i}, 0f00000000;\n" for i in range(64))
        + r"""  mov.u32 %r10, 0;
$L_tile:
  ld.global.v4.f32 {%g0, %g1, %g2, %g3}, [%rd6];
  ld.global.v4.f32 {%g4, %g5, %g6, %g7}, [%rd7];
  st.shared.v4.f32 [%r7], {%g0, %g1, %g2, %g3};
  st.shared.v4.f32 [%r7+4096], {%g4, %g5, %g6, %g7};
  bar.sync 0;
"""
        + "\n".join(body)
        + r"""
  bar.sync 0;
  add.s64 %rd6, %rd6, 4096;
  add.s64 %rd7, %rd7, 4096;
  add.s32 %r10, %r10, 8;
  setp.lt.u32 %p1, %r10, %r1;
  @%p1 bra $L_tile;
"""
        + "\n".join(stores)
        + "\n  ret;\n}\n"
    )


def test_compute_bound_gemm_gains_nothing_from_a_memory_fix() -> None:
    import numpy as np

    k = 32  # four k tiles emulated; the model's kernel runs 4096 / 32 = 128 times as long
    a = np.ones(2048 * 32, np.float32)
    c = np.zeros(256 * 64, np.float32)
    emu = emulate_ptx(_gemm_ptx(), "sgemm", 1, 256, [a, a.copy(), c, np.uint32(k)])
    assert emu.outputs["arg2"][0] == k  # each output a dot product of k ones
    got = emu.trace.work
    assert got is not None
    # per warp and k tile: 4 x LDS.128 and 64 FFMA for each of 8 k steps (512 FFMA, 32 LDS), 2
    # LDG.128, 2 STS.128, 2 BAR, 2 add.s64 (4), add, setp, bra
    assert got.pipes["fp32"] == 8 * 4 * 512
    assert got.pipes["barrier"] == 8 * 4 * 2
    # 4096^3 over 1,024 CTAs, 2 resident a SM (128 registers a thread)
    work = KernelWork(**{**got.per_cta_scaled(4096 / k).__dict__, "ctas": 1024, "ctas_per_sm": 2})
    ffma = 1024 * 8 * 128 * 4 * 512  # 2.15e9 warp FFMAs = 4096^3 / 32
    assert ffma == 4096**3 // 32
    # the busiest SM: 8 CTAs in 4 rounds of 2, 16 warps, 4 a scheduler: a scheduler issues 2
    # CTAs' instructions, FP32 at one warp FFMA a clock: 2 x 8 x 128 x 2048 = 4.19 M cycles
    n = 4096**3
    traffic = dict(
        l2_load_sectors=2 * n / 128 * 4 / 32,  # each CTA reads its A and B panels: 4 GB
        dram_bytes=3 * 4096 * 4096 * 4,  # A, B and C once
        resident_warps=132 * 16,
        bytes_in_flight_per_warp=1024,
    )
    t = _times(work, **traffic)
    assert t.pipe_s == pytest.approx(2 * 8 * 128 * 2048 / HZ, rel=1e-9)  # 2.12 ms
    assert t.bound_by == "issue"  # every other instruction on top of the FFMAs
    assert t.compute_s > 3 * t.memory_s
    # a layout fix that halves the L2 sectors: the launch does not get faster (the issue: a
    # memory-only roofline said 0.507x and an "upper bound" of 0.441x here)
    assert MEM is not None
    fixed = Traffic(work=work, **{**traffic, "l2_load_sectors": traffic["l2_load_sectors"] / 2})
    est = launch_estimate(Traffic(work=work, **traffic), fixed, H200, MEM, pipes=RATES)
    assert est is not None
    # issue: a CTA issues 18,480 instructions a warp per 4 k tiles (16,384 FFMA, 1,664 LDS/LDG/
    # STS/STG, 328 integer, 40 branches, 64 barriers), 128 times over: 2.37 M, and a scheduler
    # issues two CTAs' worth: 2.39 ms. The L2 (134 M sectors at 234 G/s, 574 us) overlaps it
    # but for a quarter (4 warps a scheduler); the fix takes half of that quarter away: 1.03x
    issue = 2 * 18480 * 128 / HZ
    l2 = traffic["l2_load_sectors"] / 234e9
    assert t.issue_s == pytest.approx(issue)
    assert t.l2_s == pytest.approx(l2)
    # the latency side, 4 rounds of a 148,000-cycle chain (0.60 ms), adds to that as a 2.5-norm
    dep = t.dependency_s
    assert dep == pytest.approx(0.597e-3, rel=1e-3)
    assert est.point == pytest.approx(
        (FLOOR + _norm(dep, issue + l2 / 4)) / (FLOOR + _norm(dep, issue + l2 / 8))
    )
    assert est.point < 1.03
    # the bound: the launch before with the model's error allowed (15% on its work) against
    # everything overlapped after the fix, the issue alone: 1.23x, where the point says 1.03x
    # (and the report shows both)
    before = FLOOR + 1.15 * _norm(dep, issue + l2 / 4)
    assert est.bound == pytest.approx(before / (FLOOR + issue))
    assert est.bound < 1.25


def test_overlap_and_combination_rules() -> None:
    # one warp a scheduler hides nothing: memory and compute add up; sixteen hide 15/16
    assert overlap(1) == 0.0 and overlap(16) == pytest.approx(15 / 16)
    assert combine(3.0, 1.0, 0.0, overlap(1)) == 4.0
    assert combine(3.0, 1.0, 0.0, overlap(16)) == pytest.approx(3.0625)
    assert combine(3.0, 1.0, 5.0, 1.0) == 5.0  # a dependent chain longer than both
    assert amdahl_with_floor(10.0, 2.0, 1.0) == 1.0
    assert amdahl_with_floor(10.0, 2.0, 2.0) == pytest.approx(10 / 6)


# ---------------------------------------------------------------------------------------------
# 6. A serial warp that waits for several loads at once (HeCBench chemv_kernel1's shape: each
#    iteration loads a row element that streams through new sectors and three values the L1
#    keeps, then adds them into a register): the wait misses the L1 whenever any of its loads
#    does, so the launch's misses are spread over the warp's waits, not its requests


def test_serial_loop_waits_for_the_slowest_of_its_loads() -> None:
    # one CTA of one warp, 256 iterations: 4 loads a wait (1024 requests), 1 global link a wait
    # on the chain, then 3 dependent FADDs; the streaming load reaches a new sector every 4th
    # iteration (64 requests bring 64 sectors from the L2, all L2 hits)
    work = KernelWork(
        pipes={"fp32": 768.0, "lsu": 1024.0},
        chain={"global": 256.0, "fp32": 768.0},
        critical_instructions=1792.0,
        ctas=1,
        warps_per_cta=1,
    )
    mem = {"load_requests": 1024.0, "l2_load_sectors": 64.0, "l2_missing_load_requests": 64.0}
    t = _times(work, **mem)
    mix = Traffic(work=work, **mem).load_mix()
    # per request: 64 / 1024 = 1/16 miss the L1; the 64 missing requests on 256 waits: 1/4
    assert mix.l1_miss == pytest.approx(1 / 16) and mix.missing_per_warp == 64.0
    assert mix.per_wait(256.0).l1_miss == pytest.approx(1 / 4)
    # a wait: L1 35 cycles + 1/4 x (L2 270 - 35) = 93.75; chain 256 x 93.75 + 768 x 4 = 27072
    # cycles (with the requests' 1/16: 256 x 49.69 + 3072 = 15792)
    assert t.compute is not None and t.compute.chain_cycles == pytest.approx(27072.0)
    assert t.dependency_s == pytest.approx(27072.0 / HZ)
    assert t.bound_by == "dependency"
    # one load a wait (the same misses on 256 requests): the request's fraction, 64 / 256
    one = KernelWork(**{**work.__dict__, "pipes": {"fp32": 768.0, "lsu": 256.0}})
    t1 = _times(one, **{**mem, "load_requests": 256.0})
    assert t1.compute is not None
    assert t1.compute.chain_cycles == pytest.approx(256 * (35 + 235 / 4) + 3072)
    # more missing requests than waits: every wait misses, no more (one L2 round trip a wait)
    many = _times(work, load_requests=1024.0, l2_load_sectors=512.0, l2_missing_load_requests=512.0)
    assert many.compute is not None
    assert many.compute.chain_cycles == pytest.approx(256 * 270 + 3072)
    # PolyBench atax's shape: a warp's 32 lanes read 32 rows, all crossing into new sectors in
    # the same iteration, one in 8: 32 of 256 waits miss, each with 32 sectors. The request
    # counts once (32 missing requests: 1/16 of the 512 requests, 1/8 of the waits), not 32
    # times (1024 sectors over 512 requests, capped at 1, said every request missed)
    rows = KernelWork(**{**work.__dict__, "pipes": {"fp32": 768.0, "lsu": 512.0}})
    r = Traffic(
        work=rows, load_requests=512.0, l2_load_sectors=1024.0, l2_missing_load_requests=32.0
    ).load_mix()
    assert r.l1_miss == pytest.approx(1 / 16) and r.per_wait(256.0).l1_miss == pytest.approx(1 / 8)
    # without the missing requests' count, the sectors over the requests, at most 1
    assert Traffic(work=rows, load_requests=512.0, l2_load_sectors=1024.0).load_mix().l1_miss == 1
    # the L1's capacity misses count by the sectors re-read (each its own wait): 64 more
    refetched = Traffic(
        work=rows,
        load_requests=512.0,
        l2_load_sectors=1088.0,
        l2_missing_load_requests=32.0,
        l2_refetch_load_sectors=64.0,
    ).load_mix()
    assert refetched.l1_miss == pytest.approx(96 / 512)
    # the per-wait fraction never falls below the requests' (a chain with more global links
    # than the mean warp's requests: the critical warp of an uneven CTA)
    assert mix.per_wait(4096.0).l1_miss == pytest.approx(1 / 16)
    assert mix.per_wait(0.0) == mix
    # an upper bound's after side (peak) takes the fewest waits the misses can fall on: the
    # requests' 1/16 (256 x 49.69 + 3072 = 15792 cycles), so no bound's after side is longer
    # than it was before the per-wait misses
    assert MEM is not None
    peak = launch_times(Traffic(work=work, **mem), H200, MEM, peak_dram=True, pipes=RATES)
    assert peak is not None and peak.compute is not None
    assert peak.compute.chain_cycles == pytest.approx(256 * (35 + 235 / 16) + 3072)


def test_the_waits_on_another_warps_miss_in_flight() -> None:
    """Issue 29, PolyBench atax's 8 copies (model/l1.py's misses in flight): a CTA of 8 warps
    doing the same work, 512 load requests a warp of which one warp's 32 bring sectors; the
    other 7 warps' 32 requests each at the same steps wait for those misses in flight (224
    requests): a warp's 256 waits miss 32 times, as the one warp left after the fix does. Seen
    as L1 hits (the trace's first access brings a sector, the rest hit) a warp's waits would
    miss 4 times."""
    work = KernelWork(
        pipes={"fp32": 8 * 768.0, "lsu": 8 * 512.0},
        chain={"global": 256.0, "fp32": 768.0},
        critical_instructions=1792.0,
        ctas=1,
        warps_per_cta=8,
    )
    mem = {"load_requests": 8 * 512.0, "l2_load_sectors": 1024.0, "l2_missing_load_requests": 32.0}
    hits = Traffic(work=work, **mem).load_mix()
    assert hits.l1_miss == pytest.approx(32 / 4096) and hits.missing_per_warp == 4.0
    merged = Traffic(work=work, l1_pending_load_requests=224.0, **mem)
    mix = merged.load_mix()
    # 256 missing requests of 4096: 1/16, as one warp's 32 of 512; a warp's 32 on its 256 waits
    assert mix.l1_miss == pytest.approx(1 / 16) and mix.missing_per_warp == 32.0
    assert mix.per_wait(256.0).l1_miss == pytest.approx(1 / 8)
    one = Traffic(
        work=replace(work, pipes={"fp32": 768.0, "lsu": 512.0}, warps_per_cta=1),
        load_requests=512.0,
        l2_load_sectors=1024.0,
        l2_missing_load_requests=32.0,
    ).load_mix()
    assert (one.l1_miss, one.missing_per_warp) == (mix.l1_miss, mix.missing_per_warp)
    # the chain: 256 waits x (35 + 235 / 8) + 768 x 4 = 19552 cycles, as the one warp's
    t = launch_times(merged, H200, MEM, pipes=RATES)
    assert t is not None and t.compute is not None
    assert t.compute.chain_cycles == pytest.approx(256 * (35 + 235 / 8) + 3072)
    # an upper bound's after side takes none of them (the fewest misses): the requests' 32
    assert merged.load_mix(in_flight=False) == hits
    peak = launch_times(merged, H200, MEM, peak_dram=True, pipes=RATES)
    assert peak is not None and peak.compute is not None
    assert peak.compute.chain_cycles == pytest.approx(256 * (35 + 235 * 32 / 4096) + 3072)
