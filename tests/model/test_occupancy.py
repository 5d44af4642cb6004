"""Occupancy: hand-derived cases (HARDWARE.md section 1) and the advice built on the model."""

from __future__ import annotations

import pytest

from gpuadvise import devices
from gpuadvise.model import occupancy as occ

H100 = devices.preset("H100")
RTX2080 = devices.preset("RTX2080")
A100 = devices.preset("A100-80GB")


def k(threads, regs=0, smem=0, dyn=0, **kw):
    return occ.KernelResources(threads, regs, smem, dyn, **kw)


def test_h100_256_threads_64_regs_32k_smem():
    # regs: 64*32 = 2048 per warp; 16384 per sub-partition -> 8 warps each, 32 per SM -> 4 blocks
    # smem: 32768 + 1024 reserved = 33792 per block; 233472 // 33792 = 6
    r = occ.max_active_blocks(H100, k(256, 64, 32 * 1024))
    assert r.limits["registers"] == 4
    assert r.limits["shared_memory"] == 6
    assert r.limits["warps"] == 8
    assert r.limits["blocks"] == 32
    assert r.active_blocks_per_sm == 4
    assert r.limiters == ("registers",)
    assert r.occupancy == 0.5
    assert r.allocated_smem_per_block == 33792
    assert r.allocated_regs_per_block == 16384


def test_reserved_kilobyte_caps_blocks_without_smem_at_228():
    r = occ.max_active_blocks(H100, k(32, 0, 0, barriers=0))
    assert r.limits["shared_memory"] == 228
    assert r.active_blocks_per_sm == 32  # the block limit comes first
    assert r.limiters == ("blocks",)


def test_register_allocation_rounds_to_256_per_warp():
    # 33 registers -> 1056 per warp -> 1280 allocated; 16384 // 1280 = 12 warps per sub-partition
    r = occ.max_active_blocks(H100, k(128, 33))
    assert r.limits["registers"] == (12 * 4) // 4
    assert r.allocated_regs_per_block == 1280 * 4


def test_turing_limits():
    # cc 7.5: 1024 threads and 16 blocks per SM, 64 KB shared memory, 256-byte granularity
    r = occ.max_active_blocks(RTX2080, k(64, 32, 100))
    assert r.limits["warps"] == 16
    assert r.limits["blocks"] == 16
    assert r.allocated_smem_per_block == 256
    assert r.active_blocks_per_sm == 16
    assert set(r.limiters) == {"warps", "blocks"}


def test_carveout_preference_limits_until_it_is_raised():
    # 50% of 164 KB = 83,968 B -> rounded up to the 100 KB carveout on cc 8.0
    r = occ.max_active_blocks(A100, k(256, 32, 0, 40 * 1024), carveout=50)
    assert r.smem_per_sm_bytes == 100 * 1024
    assert r.limits["shared_memory"] == (100 * 1024) // (41 * 1024)
    full = occ.max_active_blocks(A100, k(256, 32, 0, 40 * 1024), carveout=100)
    assert full.limits["shared_memory"] == (164 * 1024) // (41 * 1024)


def test_block_too_large_and_too_many_registers_give_zero():
    assert occ.max_active_blocks(H100, k(1025)).active_blocks_per_sm == 0
    r = occ.max_active_blocks(H100, k(1024, 255))
    assert r.active_blocks_per_sm == 0 and r.limiters == ("registers",)


def test_available_dynamic_smem_ignores_the_reserved_kilobyte_like_the_runtime():
    kk = k(256, 32)
    avail = occ.available_dynamic_smem(H100, kk, 2)
    assert avail == 233472 // 2 // 128 * 128
    # launching with exactly that gives one block fewer than asked for (HARDWARE.md section 1)
    r = occ.max_active_blocks(H100, k(256, 32, 0, avail))
    assert r.active_blocks_per_sm == 1


def test_next_steps_registers():
    steps = occ.next_steps(H100, k(256, 64, 32 * 1024))
    regs = [s for s in steps if s.resource == "registers"]
    assert regs and regs[0].value == 48  # 48 regs: 10 warps per sub-partition -> 5 blocks
    assert regs[0].active_warps_per_sm == 40
    # one more register than suggested does not reach the step
    r49 = occ.max_active_blocks(H100, k(256, 49, 32 * 1024))
    assert r49.active_warps_per_sm == 32


def test_next_steps_shared_memory_is_the_largest_size_that_fits_another_block():
    base = k(256, 32, 0, 100 * 1024)
    steps = occ.next_steps(H100, base)
    smem = [s for s in steps if s.resource == "shared_memory"][0]
    assert occ.max_active_blocks(H100, k(256, 32, 0, smem.value)).active_blocks_per_sm == 3
    assert occ.max_active_blocks(H100, k(256, 32, 0, smem.value + 128)).active_blocks_per_sm == 2


def test_next_steps_block_size_when_blocks_limit():
    steps = occ.next_steps(H100, k(32, 16))
    bs = [s for s in steps if s.resource == "block_size"]
    assert bs and bs[0].occupancy == 1.0 and bs[0].value == 64


def test_full_occupancy_has_no_steps():
    assert occ.next_steps(H100, k(256, 32)) == []


@pytest.mark.parametrize("cc", devices.known_ccs())
def test_sweeps_cover_the_calculator_views(cc):
    d = devices.arch_spec(cc)
    views = occ.sweeps(d, k(128, 40, 4096))
    assert [v.resource for v in views] == ["block_size", "registers", "shared_memory"]
    for v in views:
        assert len(v.values) == len(v.occupancy)
        assert v.current in v.values
        assert all(0.0 <= o <= 1.0 for o in v.occupancy)
    # occupancy never rises with more registers per thread
    regs = views[1].occupancy
    assert all(a >= b for a, b in zip(regs, regs[1:], strict=False))
