"""The occupancy port against NVIDIA's cuda_occupancy.h, compiled in the test with g++.

At least 10,000 random configurations per compute capability: registers 0-256, block sizes 1-1024 (any
value, not only warp multiples), static and dynamic shared memory up to and beyond the limits, carveouts
-1..100, default and opt-in shared-memory limits, barrier and virtual-resource counts, partitioned
global caching. Zero mismatches allowed in blocks per SM, every per-resource limit, the set of
limiters, the allocations, and cudaOccAvailableDynamicSMemPerBlock.
"""

from __future__ import annotations

import random

import pytest

from gpuadvise import devices
from gpuadvise.model import occupancy as occ
from tests.oracle.occ_header import build_oracle, run_oracle

N_PER_CC = 10_000
BITS = {
    "warps": 0x01,
    "registers": 0x02,
    "shared_memory": 0x04,
    "blocks": 0x08,
    "barriers": 0x10,
    "virtual_resources": 0x20,
}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    exe, reason = build_oracle(tmp_path_factory.mktemp("oracle"))
    if exe is None:
        pytest.skip(f"cannot build the occupancy oracle: {reason}")
    return exe


def _random_config(rng: random.Random, d: devices.DeviceSpec) -> occ.KernelResources:
    top = d.smem_per_block_optin + 8192
    pick_smem = lambda: rng.choice(  # noqa: E731
        [
            0,
            0,
            rng.randrange(0, 4096),
            rng.randrange(0, 49153),
            rng.randrange(0, top),
            rng.choice([49152, 49152 - 1024, d.smem_per_block_optin, d.smem_per_block_optin + 1]),
        ]
    )
    block = rng.choice(
        [rng.randint(1, 1024), 32 * rng.randint(1, 32), rng.choice([1, 31, 32, 33, 1023, 1024])]
    )
    optin = rng.random() < 0.7
    static = pick_smem() if rng.random() < 0.6 else 0
    dynamic = pick_smem() if rng.random() < 0.7 else 0
    k = occ.KernelResources(
        threads_per_block=block,
        regs_per_thread=rng.choice([rng.randint(0, 256), rng.randint(0, 64), 255, 256, 0]),
        static_smem_bytes=static,
        dynamic_smem_bytes=dynamic,
        optin=optin,
        max_dynamic_smem_bytes=None if rng.random() < 0.5 else rng.randrange(0, top),
        barriers=rng.choice([0, 1, 1, 1, 2, 3]),
        virtual_resources=rng.choice([0, 0, 0, 1, 2, 5, 64, 200]),
        partitioned_gc=occ.PartitionedGC(rng.choice([0, 0, 1, 2])),
    )
    return k


def _line(d: devices.DeviceSpec, k: occ.KernelResources, carveout: int, nblocks: int) -> str:
    max_dyn = occ._max_dynamic(k, d)
    return " ".join(
        str(v)
        for v in (
            d.cc_major,
            d.cc_minor,
            d.threads_per_sm,
            d.blocks_per_sm,
            d.regs_per_sm,
            d.regs_per_block,
            d.smem_per_sm,
            d.smem_per_block_optin,
            d.reserved_smem_per_block,
            k.threads_per_block,
            k.regs_per_thread,
            k.static_smem_bytes,
            k.dynamic_smem_bytes,
            int(k.optin),
            max_dyn,
            k.barriers,
            k.virtual_resources,
            int(k.partitioned_gc),
            carveout,
            nblocks,
        )
    )


@pytest.mark.parametrize("cc", devices.known_ccs())
def test_port_matches_cuda_occupancy_h(oracle, cc):
    d = devices.arch_spec(cc)
    rng = random.Random(f"occupancy-{cc}")
    cases = []
    for _ in range(N_PER_CC):
        k = _random_config(rng, d)
        carveout = rng.choice([-1, -1, 0, 100, 50, rng.randint(-1, 100)])
        nblocks = rng.choice([1, 1, 2, rng.randint(1, 32)])
        cases.append((k, carveout, nblocks))
    rows = run_oracle(oracle, [_line(d, k, c, n) for k, c, n in cases])
    assert len(rows) == len(cases)

    mismatches = []
    ok_count = 0
    for (k, carveout, nblocks), row in zip(cases, rows, strict=True):
        status, active, factors, l_regs, l_smem, l_warps, l_blocks, l_bars, l_virt = row[:9]
        alloc_regs, alloc_smem, gc_out, dyn_status, dyn_bytes = row[9:]
        try:
            r = occ.max_active_blocks(d, k, carveout)
        except occ.OccupancyInputError:
            if status == 0:
                mismatches.append((k, carveout, "port raised, header succeeded"))
            continue
        if status != 0:
            mismatches.append((k, carveout, f"header error {status}, port gave {r}"))
            continue
        ok_count += 1
        mine_factors = sum(BITS[name] for name in r.limiters)
        got = (
            r.active_blocks_per_sm,
            mine_factors,
            r.limits["registers"],
            r.limits["shared_memory"],
            r.limits["warps"],
            r.limits["blocks"],
            r.limits["barriers"],
            r.limits["virtual_resources"],
            r.allocated_regs_per_block,
            r.allocated_smem_per_block,
            int(r.partitioned_gc),
        )
        want = (
            active,
            factors,
            l_regs,
            l_smem,
            l_warps,
            l_blocks,
            l_bars,
            l_virt,
            alloc_regs,
            alloc_smem,
            gc_out,
        )
        if got != want:
            mismatches.append((k, carveout, f"port {got} != header {want}"))
        try:
            mine_dyn = occ.available_dynamic_smem(d, k, nblocks, carveout)
            mine_dyn_status = 0
        except occ.OccupancyInputError:
            mine_dyn, mine_dyn_status = 0, 1
        if (mine_dyn_status != 0) != (dyn_status != 0) or (
            dyn_status == 0 and mine_dyn != dyn_bytes
        ):
            mismatches.append((k, nblocks, f"dynamic smem port {mine_dyn} != header {dyn_bytes}"))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}"
    # the random cases must exercise the successful path most of the time
    assert ok_count > N_PER_CC * 0.9
