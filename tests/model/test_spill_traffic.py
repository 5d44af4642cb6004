"""gpuadvise.model.execution.local_traffic: what a launch's register spills move, by hand (H200:
132 SMs; the L1 left to cached lines as GA401 gives it, 256 KB - 40 KB unused = 216 KB = 221,184
B, here 212,992 B: the numbers are the function's arithmetic, not the device's)."""

from __future__ import annotations

import pytest

from gpuadvise.devices import preset
from gpuadvise.model.execution import (
    LOCAL_LOAD_CYCLES,
    LOCAL_STORE_CYCLES,
    KernelWork,
    local_traffic,
)

H200 = preset("H200")
L1 = 212_992.0


def _work(frame_ctas_per_sm: int = 8) -> KernelWork:
    # kernels/spills moments_capped's shape: 660 CTAs of 8 warps, 8 CTAs an SM allowed (5 run:
    # 660 / 132), 100 spill wavefronts a CTA, 40 of them stores
    return KernelWork(
        pipes={"lsu": 120.0},
        chain={},
        critical_instructions=0.0,
        ctas=660,
        warps_per_cta=8,
        ctas_per_sm=frame_ctas_per_sm,
        spill_requests=100.0,
        spill_wavefronts=100.0,
        spill_store_wavefronts=40.0,
    )


def test_frames_that_fit_the_l1_cost_its_wavefronts() -> None:
    """96 B frames x 5 CTAs x 256 threads = 122,880 B an SM: in the L1, no L2 traffic; the L1
    data path's cycles are the wavefronts' (660 x 60 loads, 660 x 40 stores)."""
    got = local_traffic(_work(), H200, 96, L1, 100.0, 40.0)
    assert got.footprint_bytes == 96 * 5 * 256
    assert got.miss == 0.0
    assert got.l2_sectors == 0.0 and got.dram_bytes == 0.0
    assert got.l1_cycles == pytest.approx(660 * (60 * LOCAL_LOAD_CYCLES + 40 * LOCAL_STORE_CYCLES))


def test_frames_past_the_l1_go_to_the_l2_in_proportion() -> None:
    """1 KB frames: 1,310,720 B an SM, the L1 misses 1 - 212,992 / 1,310,720 = 83.75% of the
    accesses, four sectors a wavefront; every SM's frames (173 MB) outgrow the L2, which misses
    1 - L2 / 173 MB of them, DRAM's."""
    got = local_traffic(_work(), H200, 1024, L1, 100.0, 40.0)
    footprint = 1024 * 5 * 256
    assert got.miss == pytest.approx(1 - L1 / footprint)
    assert got.l2_sectors == pytest.approx(66_000 * 4 * (1 - L1 / footprint))
    assert H200.l2_bytes is not None
    l2_miss = 1 - H200.l2_bytes / (footprint * 132)
    assert got.dram_bytes == pytest.approx(got.l2_sectors * 32 * l2_miss)


def test_no_spills_no_traffic() -> None:
    got = local_traffic(_work(), H200, 96, L1, 0.0)
    assert (got.l1_cycles, got.l2_sectors, got.dram_bytes) == (0.0, 0.0, 0.0)
