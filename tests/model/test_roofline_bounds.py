"""The bounds issue 16's second round added to the launch roofline, on hand-derived numbers:
Little's law for a change of resident warps, the work CTAs repeat amortised by a block-size
change, the floor's partial-store rate and the bytes a reshaped launch keeps in flight."""

from __future__ import annotations

import pytest

from gpuadvise.devices import memory_rates, preset
from gpuadvise.model.roofline import (
    PARTIAL_STORE_PEAK_FACTOR,
    Traffic,
    amortised_ratio,
    ceiling_s,
    launch_estimate,
    launch_times,
    occupancy_ratio,
)

H200 = preset("H200")
RATES = memory_rates(H200)


def test_occupancy_ratio_latency_bound_grows_with_the_warps() -> None:
    # 16 -> 64 warps per SM: a latency-bound launch keeps 4x the bytes in flight
    assert occupancy_ratio(16, 64, 32, latency_bound=True) == pytest.approx(4.0)
    # not latency-bound: held to the saturation (32 warps): 32 / 16
    assert occupancy_ratio(16, 64, 32, latency_bound=False) == pytest.approx(2.0)
    # fewer warps after, or none before: no gain claimed
    assert occupancy_ratio(32, 16, 32, latency_bound=True) == 1.0
    assert occupancy_ratio(0, 64, 32, latency_bound=True) == 1.0


def test_amortised_ratio_of_lut_big() -> None:
    # lut_big: each 128-thread CTA stages a 48 KB table, 384 warp requests, and maps 512
    # elements, 32 requests; 2112 CTAs become 528 of 512 threads:
    # 2112 * 416 / (528 * 384 + 2112 * 32) = 878592 / 270336 = 3.25
    assert amortised_ratio(384, 32, 2112, 528) == pytest.approx(3.25)
    # nothing repeated: the block size changes nothing
    assert amortised_ratio(0, 32, 2112, 528) == pytest.approx(1.0)
    # everything repeated: the work falls with the CTA count
    assert amortised_ratio(10, 0, 2112, 528) == pytest.approx(4.0)


def test_partial_store_floor_uses_the_best_partial_rate() -> None:
    assert RATES is not None
    # 50.3M partial-sector stores (particles_aos: x, y, z of 2^24 32-byte structs, one word
    # per sector): 98.77 G/s at the point's rate, 422.17 G/s in the floor
    t = Traffic(l2_partial_store_sectors=3 * 2**24)
    point = launch_times(t, H200, RATES)
    floor = launch_times(t, H200, RATES, peak_dram=True)
    assert point is not None and floor is not None
    assert point.l2_s == pytest.approx(3 * 2**24 / 98.8e9, rel=1e-3)
    assert floor.l2_s == pytest.approx(3 * 2**24 / 422.17e9, rel=2e-3)
    assert PARTIAL_STORE_PEAK_FACTOR == pytest.approx(4.274, rel=1e-3)


def test_bound_of_a_partial_store_launch_holds_the_grid_stride_measurement() -> None:
    assert RATES is not None
    # particles_aos before and after GA206's grid-stride loop: the same traffic, 2^24 sectors
    # loaded and 3 x 2^24 partial stores, 1 GiB of DRAM (each 32-byte struct read and written
    # back); measured 1.38x on the H200. Point: no change; bound: the floor's partial rate and
    # peak DRAM (1 GiB / 4.8 TB/s = 224 us) against 2^24 / 234 G + 3 x 2^24 / 98.8 G = 581 us
    t = Traffic(
        l2_load_sectors=2**24,
        l2_partial_store_sectors=3 * 2**24,
        dram_bytes=2 * 2**24 * 32,
        resident_warps=132 * 64,
        bytes_in_flight_per_warp=4096,
    )
    est = launch_estimate(t, t, H200, RATES)
    assert est is not None
    assert est.point == pytest.approx(1.0)
    # both sides pay the launch floor, 2.8 us (an empty kernel on the H200)
    before_s = 2**24 / 234e9 + 3 * 2**24 / 98.8e9 + 2.8e-6
    assert est.before.time_s == pytest.approx(before_s, rel=1e-3)
    assert est.after_floor.bound_by == "dram"
    # the bound's before side with the model's error allowed: 15% on the work, not the floor
    ceil_s = 2.8e-6 + (before_s - 2.8e-6) * 1.15
    assert ceiling_s(est.before) == pytest.approx(ceil_s, rel=1e-3)
    assert est.bound == pytest.approx(ceil_s / (2**30 / 4.8e12 + 2.8e-6), rel=0.01)
    assert est.bound >= 1.38 / 1.05


def test_in_flight_bytes_of_a_reshaped_launch() -> None:
    assert RATES is not None
    # 8192^2 floats read and written (512 MiB of DRAM), 64 warps on each of 132 SMs:
    # 128 bytes in flight per warp (one 16x16 row pair): 2^29 B x 395 ns / (8448 x 128 B)
    # = 196 us; the 32x8 tile's four 128-byte rows per warp: a quarter of it
    n = 8192 * 8192
    one = Traffic(dram_bytes=8 * n, resident_warps=8448, bytes_in_flight_per_warp=128)
    four = Traffic(dram_bytes=8 * n, resident_warps=8448, bytes_in_flight_per_warp=512)
    a, b = launch_times(one, H200, RATES), launch_times(four, H200, RATES)
    assert a is not None and b is not None
    assert a.latency_s == pytest.approx(8 * n * 395e-9 / (8448 * 128), rel=1e-6)
    assert a.latency_s == pytest.approx(196e-6, rel=0.01)
    assert b.latency_s == pytest.approx(a.latency_s / 4)
    assert a.bound_by == "latency" and b.bound_by == "dram"
