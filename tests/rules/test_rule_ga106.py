"""GA106 too-little-in-flight on the inflight case (nvcc, no GPU, the H100 model): the finding and
its Little's-law numbers worked out by hand, the three spellings, the launches and kernels that
must stay silent (the whole wave, unrolled float4 loads, a grid below one CTA per SM, a full
wave), the estimate's promise (an upper bound over the point) and the variant.

The H100 model: 132 SMs, 64 warps per SM; ``sum_*`` use few registers and no shared memory, so
128-thread blocks are limited by the warps: 64 / 4 = 16 blocks per SM, a wave of 16 x 132 = 2112
CTAs. case.toml launches 264 CTAs: 2 per SM, 8 warps.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule

import gpuadvise.rules as R
import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise.devices import memory_rates, preset

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "inflight"
SOURCE = CASE / "inflight.cu"
SMS = 132
WAVE = 16 * SMS  # 2112 CTAs of 128 threads
CTAS = 264


def ga106(kernel: str, spec: str | None = None, **options: Any) -> list[R.Finding]:
    spec_path = CASE / (spec or ("case.toml" if kernel == "sum_few" else f"{kernel}.toml"))
    a = analyze(SOURCE, kernel, 8, spec=str(spec_path))
    return run_rule(a, "GA106", trace_ctas=8, **options)


@pytest.fixture(scope="module")
def few() -> R.Finding:
    (f,) = ga106("sum_few")
    return f


def test_sum_few_is_reported_with_littles_law_numbers(few):
    f = few
    assert f.line == srctext.find_kernel_source(SOURCE, "sum_few").decl_line
    assert rule_registry.expectations(SOURCE)[f.line] == ("GA106",)
    e = ev(f)
    # 264 CTAs x 4 warps over 132 SMs; fewer than half of the 64 warps an SM holds
    assert e["warps_per_sm"] == 8.0 and e["total_ctas"] == CTAS and e["ctas_per_wave"] == WAVE
    thr = next(x for x in f.evidence if x.metric == "warps_per_sm")
    assert (thr.threshold, thr.op) == (32.0, "<")
    # each warp waits for its one 128-byte load (32 lanes x 4 B) before the next: 8 warps keep
    # 1 KB in flight per SM, where DRAM bandwidth x latency over the SMs is ~9 KB
    rates = memory_rates(preset("H100"))
    assert rates is not None
    assert e["bytes_in_flight_per_sm"] == 8 * 128
    assert e["littles_law_bytes_per_sm"] == round(
        rates.dram_sustained_gbps * rates.latency_ns / SMS
    )
    assert e["bound_by"] == "dependency"
    assert "8.0 of 64 warps per SM (264 CTAs where the GPU holds 2112 at once)" in f.message
    assert "keep about 1.0 KB per SM in flight" in f.message


def test_the_estimate_is_an_upper_bound_over_the_grid_stride_point(few):
    est = few.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    i = est.inputs
    assert i["limiter"] == "grid" and i["target_ctas"] == WAVE
    # bound: the launch as it is against the same work over the wave with nothing waited for
    # (at peak rates): it is then bound by its DRAM traffic
    assert i["bound_by_before"] == "dependency" and i["bound_by_floor"] == "dram"
    assert est.speedup == pytest.approx(i["before_s"] / i["floor_s"], rel=1e-3)
    # point: the kernel reads gridDim, so the wave of CTAs is a launch change; its loops shorter
    assert 1.5 < i["point_speedup"] <= est.speedup
    assert i["peak_speedup"] <= est.speedup
    assert "grid-stride loop" in est.method and "upper bound" in est.method


@pytest.mark.parametrize("kernel", ["sum_macro", "sum_template"])
def test_the_other_spellings_give_the_same_finding(few, kernel):
    (f,) = ga106(kernel)
    assert f.line == srctext.find_kernel_source(SOURCE, kernel).decl_line
    assert ev(f) == ev(few)
    # the same within a few tenths of a percent: the execution model counts each spelling's own
    # SASS (the template's issues a few instructions more a warp: 6.761x for 6.760x)
    assert f.estimated_speedup.speedup == pytest.approx(few.estimated_speedup.speedup, rel=2e-3)


def test_the_variant_sweeps_the_count_and_does_not_offer_a_grid_it_cannot_verify(few):
    v = few.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    # each thread writes its own partial sum: 2112 CTAs write other outputs, so no launch
    assert v.launch is None
    assert "sweeping the count from 132 up to the 2112" in v.description
    assert "does not compute the same with 2112 CTAs" in v.description
    assert "independent loads" in v.description


@pytest.mark.parametrize("kernel", ["sum_wave", "sum_unrolled"])
def test_the_fixed_kernels_are_silent(kernel):
    assert ga106(kernel) == []


def test_the_same_loop_is_silent_over_a_wave_or_below_one_cta_per_sm(tmp_path):
    def spec(grid: int) -> str:
        text = (CASE / "case.toml").read_text().replace(f"grid = {CTAS}", f"grid = {grid}")
        text = text.replace('source = "inflight.cu"', f'source = "{SOURCE}"')
        text = text.replace("float[33792]", f"float[{grid * 128}]")
        p = tmp_path / f"g{grid}.toml"
        p.write_text(text)
        return str(p)

    assert ga106("sum_few", spec(WAVE)) == []  # 64 warps per SM
    assert ga106("sum_few", spec(66)) == []  # fewer CTAs than SMs: GA102's small grid
    assert len(ga106("sum_few", spec(2 * SMS))) == 1


def test_the_thresholds():
    assert ga106("sum_few", max_warps_fraction=0.1) == []  # 8 warps are not fewer than 6.4
    assert ga106("sum_few", min_speedup=50.0) == []


def test_waited_bytes_per_warp_follows_the_chain():
    rule = rule_registry.load_registry().get("GA106")
    mod = sys.modules[type(rule).__module__]
    from gpuadvise.model.execution import KernelWork

    work = KernelWork(pipes={"fp32": 10.0}, chain={"global": 4.0}, critical_instructions=10.0,
                      ctas=10, warps_per_cta=2)  # fmt: skip
    # 20 warps load 80 sectors (2560 B) each over 4 waits: 640 B in flight between two
    t = R.Traffic(l2_load_sectors=1600.0, load_requests=80.0, bytes_in_flight_per_warp=512.0,
                  work=work)  # fmt: skip
    assert mod.waited_bytes_per_warp(t) == pytest.approx(1600 * 32 / 20 / 4)
    # no global link on the chain: the traffic's own figure (independent loads back to back)
    free = R.Traffic(l2_load_sectors=1600.0, load_requests=80.0, bytes_in_flight_per_warp=512.0,
                     work=KernelWork(pipes={}, chain={}, critical_instructions=1.0, ctas=10,
                                     warps_per_cta=2))  # fmt: skip
    assert mod.waited_bytes_per_warp(free) == 512.0
