def test_an_upper_bound_shows_its_point_beside_it():
    # issue 29: each estimate a point and an upper bound; the bound alone read as a promise of
    # 1.49x for a change the model predicts at 1.03x (a compute-bound GEMM's memory fix)
    from gpuadvise.rules.findings import Estimate

    both = Estimate(1.49, "upper-bound", "m", {"point_speedup": 1.031})
    assert both.point == 1.031
    assert both.label() == "~1.03x, ≤ 1.49x (estimated: point, upper bound)"
    for inputs in ({}, {"point_speedup": 1.49}, {"point_speedup": 0.8}, {"point_speedup": None}):
        alone = Estimate(1.49, "upper-bound", "m", inputs)
        assert alone.point is None and alone.label() == "≤ 1.49x (estimated, upper bound)"
    assert Estimate(1.2, "point", "m", {"point_speedup": 1.2}).label() == "~1.20x (estimated)"


def test_a_launch_change_bound_is_its_ceiling_and_says_so():
    # GA105's path: same DRAM bytes, a fifth of the L1 traffic; the bound's before side is the
    # launch with the model's error allowed (15% on its work), the after side its floor
    import re

    import pytest

    from gpuadvise.devices import memory_rates, preset
    from gpuadvise.model.roofline import Traffic, ceiling_s, launch_times
    from gpuadvise.rules.estimates import launch_change_estimate

    h200 = preset("H200")
    rates = memory_rates(h200)
    assert rates is not None
    before = Traffic(l1_cycles=5e6, dram_bytes=2**26, resident_warps=132 * 8,
                     bytes_in_flight_per_warp=512)  # fmt: skip
    after = Traffic(l1_cycles=1e6, dram_bytes=2**26, resident_warps=132 * 8,
                    bytes_in_flight_per_warp=512)  # fmt: skip
    est = launch_change_estimate(h200, before, after, "a fifth of the L1 requests", {})
    assert est is not None and est.kind == "upper-bound" and est.speedup is not None
    b = launch_times(before, h200, rates, peak_dram=True)
    a = launch_times(after, h200, rates, peak_dram=True)
    assert b is not None and a is not None
    # or both sides at sustained rates, the before side with the error allowed too (s8-est:
    # where the point's before side, its latency and throughput sides added in part, is the
    # longer one), the larger
    bs, as_ = launch_times(before, h200, rates), launch_times(after, h200, rates)
    assert bs is not None and as_ is not None
    peak, sustained = ceiling_s(b) / a.time_s, ceiling_s(bs) / as_.time_s
    assert sustained > peak  # here: the same latency side both ways, added in part
    assert est.speedup == round(max(peak, sustained, 1.0), 3)
    assert ceiling_s(b) == pytest.approx(b.floor_s + 1.15 * b.work_s)
    said = re.search(r"upper bound ([0-9.]+)x \(both at peak DRAM", est.method)
    assert said is not None and float(said.group(1)) == round(est.speedup, 2)


def test_like_for_like_judges_a_bound_by_its_point_and_peak():
    from gpuadvise.rules.findings import Estimate

    both = {"point_speedup": 1.01, "peak_speedup": 1.03}
    assert Estimate(1.2, "upper-bound", "m", both).like_for_like == 1.03
    memory = {"point_speedup": 1.0, "bound_by_before": "dram", "bound_by_after": "l2"}
    assert Estimate(1.2, "upper-bound", "m", memory).like_for_like == 1.0
    latency = {"point_speedup": 1.0, "bound_by_before": "dependency", "bound_by_after": "dram"}
    assert Estimate(1.2, "upper-bound", "m", latency).like_for_like == 1.2
    assert Estimate(1.3, "point", "m", both).like_for_like == 1.3
    assert Estimate(None, "none", "m").like_for_like is None
