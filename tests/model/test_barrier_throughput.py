"""The execution model's barrier throughput (issue 29, gpuadvise.model.execution.barrier_cycles),
pinned on a hand-derived case: HeCBench scan_bcao's launch (2112 CTAs of 16 warps, 125 tiles a
CTA, 21 barriers a tile: its up-sweep's 10, its down-sweep's 10 and the one before the results
are read), worked out by hand at the rates below; and the preset's measured rate."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuadvise.devices import PipeRates, preset
from gpuadvise.devices import pipe_rates as device_rates
from gpuadvise.model.execution import KernelWork, barrier_cycles, compute_terms

H200 = preset("H200")
HZ = 1980e6
RATES = PipeRates(
    lanes_per_clock={"fp32": 128, "int": 64, "shuffle": 32},
    latency_cycles={
        "int": 4,
        "shared": 30,
        "barrier": 24,
        "store": 1,
        "l1": 35,
        "l2": 270,
        "dram": 782,
    },  # fmt: skip
    shared_wavefront_cycles=1.0,
    cta_launch_ns=100.0,
    launch_floor_s=2.8e-6,
    measured=frozenset(),
    source="this test's rates",
    barrier_warp_cycles=4.0,
)

# a CTA of scan_bcao: 125 tiles x 21 barriers x 16 warps = 42,000 warp barriers; 2112 CTAs, 3
# resident on an SM (occupancy), 16 on the busiest SM of 132
SCAN_BCAO = KernelWork(
    pipes={"barrier": 125 * 21 * 16, "int": 100_000.0},
    chain={"barrier": 125 * 21, "shared": 125 * 21},
    critical_instructions=1000.0,
    ctas=2112,
    warps_per_cta=16,
    ctas_per_sm=3,
)


def test_barrier_cycles_by_hand() -> None:
    # 16 CTAs on the busiest SM x 42,000 warp barriers x 4 cycles = 2,688,000 cycles
    assert barrier_cycles(SCAN_BCAO, 16, RATES) == 16 * 42_000 * 4.0 == 2_688_000
    # whichever way the CTAs are resident: 1 CTA of 16 warps pays the same per barrier as 3
    # sharing the SM pay together per CTA (a resource of the SM, not of the CTA)
    assert barrier_cycles(SCAN_BCAO, 1, RATES) == 42_000 * 4.0
    # no rate measured: no term
    assert barrier_cycles(SCAN_BCAO, 16, replace(RATES, barrier_warp_cycles=0.0)) == 0.0


def test_barrier_term_in_compute_terms() -> None:
    t = compute_terms(SCAN_BCAO, H200, RATES)
    assert t is not None
    # 2,688,000 cycles at 1980 MHz: 1.358 ms. The int pipe: the busiest scheduler's share of
    # a CTA's instructions, 16 CTAs x 12 warps of the 48 resident = 4, x 100,000 x 32 lanes at
    # 16 lanes a clock a scheduler = 800,000 cycles. The barrier steps are a pipe of their own
    # (the probe: a barrier step with every warp's shared work between took the larger of the
    # two, not their sum): the slowest pipe, the larger
    assert t.barrier_s == pytest.approx(2_688_000 / HZ)
    assert t.pipe == "barrier" and t.pipe_s == pytest.approx(2_688_000 / HZ)
    # without a rate the term is nothing: the int pipe is the slowest
    t0 = compute_terms(SCAN_BCAO, H200, replace(RATES, barrier_warp_cycles=0.0))
    assert t0 is not None and t0.barrier_s == 0.0
    assert t0.pipe == "int" and t0.pipe_s == pytest.approx(800_000 / HZ)
    # a CTA with few barriers: the int pipe stays the slowest
    few = replace(SCAN_BCAO, pipes={"barrier": 1000.0, "int": 100_000.0})
    t1 = compute_terms(few, H200, RATES)
    assert t1 is not None and t1.pipe == "int" and t1.barrier_s == pytest.approx(64_000 / HZ)
    # the slowest pipe without the barrier steps, which an upper bound's optimistic after side
    # takes (kernels/bank1d's padded scans ran faster on the H200 than the barrier rate allows):
    # the int pipe's 800,000 cycles
    assert t.other_pipes_s == pytest.approx(800_000 / HZ)
    assert t1.other_pipes_s == pytest.approx(t1.pipe_s)


def test_preset_rate_is_the_h200_measurement() -> None:
    h200 = device_rates(H200)
    assert "barrier_warp_cycles" in h200.measured
    assert h200.barrier_warp_cycles > 0
    # the H100 has the same SM (compute capability 9.0): the per-clock figure carries over
    h100 = device_rates(preset("H100"))
    assert h100.barrier_warp_cycles == h200.barrier_warp_cycles
    # an older architecture has no measurement: no term
    assert device_rates(preset("V100")).barrier_warp_cycles == 0.0


def test_a_barrier_on_the_chain_waits_for_each_warp_of_its_cta():
    """gpuadvise.model.execution.barrier_latency, by hand: 24 cycles and 2.2 a warp, a CTA of 8
    warps: 24 + 17.6 = 41.6 cycles a barrier (measured on an H200, one CTA an SM: 43.1). A
    reduction tree's step, one warp's shared load, add and store between two barriers, 8 warps:
    30 + 4 + 1 + 41.6 = 76.6 cycles on the critical path (measured 78.3); 10 steps, one CTA an
    SM, one round: 766 cycles. Without the per-warp term (0: a GPU not measured): 590."""
    from gpuadvise.model.execution import barrier_latency

    rates = replace(RATES, barrier_arrive_cycles=2.2)
    step = KernelWork(
        pipes={"barrier": 80.0, "int": 10.0},
        chain={"shared": 10.0, "int": 10.0, "store": 10.0, "barrier": 10.0},
        critical_instructions=50.0,
        ctas=132,
        warps_per_cta=8,
    )
    assert barrier_latency(step, rates) == pytest.approx(41.6)
    assert barrier_latency(replace(step, warps_per_cta=32), rates) == pytest.approx(94.4)
    t = compute_terms(step, H200, rates)
    assert t is not None and t.chain_cycles == pytest.approx(766.0)
    assert t.dependency_s == pytest.approx(766.0 / HZ)
    plain = compute_terms(step, H200, RATES)
    assert plain is not None and plain.chain_cycles == pytest.approx(590.0)
    assert device_rates(H200).barrier_arrive_cycles == 2.2
