"""The launch roofline's terms, bounds and points on issue 16's H200 measurements."""

from __future__ import annotations

import pytest

from gpuadvise.devices import memory_rates, preset
from gpuadvise.model.roofline import Traffic, launch_estimate, launch_times

H200 = preset("H200")
RATES = memory_rates(H200)


def test_rates_scale_to_other_gpus() -> None:
    assert RATES is not None and RATES.source == "measured on an H200"
    h100 = memory_rates(preset("H100"))
    assert h100 is not None and h100.dram_sustained_gbps == 2990.0
    assert h100.l2_load_gsectors == pytest.approx(RATES.l2_load_gsectors)  # same SMs x clock


def test_latency_term_for_few_warps() -> None:
    # 1 GiB read with one warp per SM, one 512-byte request in flight each: Little's law
    # gives the 171 GB/s measured on the H200
    t = Traffic(dram_bytes=2**30, resident_warps=132, bytes_in_flight_per_warp=512)
    times = launch_times(t, H200, RATES)
    assert times is not None and times.bound_by == "latency"
    assert 2**30 / times.time_s / 1e9 == pytest.approx(171, rel=0.05)


def test_naive_transpose_bound_holds() -> None:
    # 8192^2 floats: loads 4 sectors per request, stores one sector per lane in 32 lines;
    # the shared tile moves whole sectors both ways (measured 6.99x on the H200)
    n = 8192 * 8192
    before = Traffic(l2_load_sectors=n / 8, l2_scattered_store_sectors=n, dram_bytes=8 * n)
    after = Traffic(l2_load_sectors=n / 8, l2_store_sectors=n / 8, dram_bytes=8 * n)
    est = launch_estimate(before, after, H200, RATES)
    assert est is not None
    assert est.before.bound_by == "l2" and est.after.bound_by == "dram"
    assert est.bound >= 6.99 * 0.95
    assert est.point == pytest.approx(6.99, rel=0.2)
    assert est.bound >= est.point
