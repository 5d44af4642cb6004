"""The execution model below saturation (issue 29, benchmarks/loaded_latency): the CTA turnaround
of each round of resident CTAs in the dependency term, the 2.5-norm of a launch's latency and
throughput sides, and the upper bounds' after side left at the maximum, on hand-derived numbers.
H200: 132 SMs at 1980 MHz."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest

from gpuadvise.devices import memory_rates, pipe_rates, preset
from gpuadvise.model.execution import (
    SIDES_NORM,
    KernelWork,
    combine,
    combine_sides,
    compute_terms,
)
from gpuadvise.model.roofline import (
    LaunchTimes,
    Traffic,
    ceiling_s,
    launch_estimate,
    launch_times,
)

H200 = preset("H200")
MEM = memory_rates(H200)
PIPES = pipe_rates(H200)
HZ = 1980e6


def _old_work(t: LaunchTimes) -> float:
    """The work as the model made it before the p-norm: memory (with the Little's-law latency)
    and compute overlapping but for ``1 - hidden`` of the smaller, at least dependency and cta."""
    memory = max(t.l1_s, t.l2_s, t.dram_s, t.latency_s)
    return combine(memory, t.compute_s, max(t.dependency_s, t.cta_s), t.hidden)


def test_the_preset_turnaround_and_norm() -> None:
    # fitted on the 44 launches of benchmarks/loaded_latency (calibrate.py --fit)
    assert PIPES.cta_turnaround_ns == 280.0
    assert "cta_turnaround_ns" in PIPES.measured
    assert SIDES_NORM == 2.5
    # every architecture has one (assumed the H200's where not measured)
    assert pipe_rates(preset("A100")).cta_turnaround_ns > 0


def test_turnaround_is_paid_once_a_round_after_the_first() -> None:
    # 10,560 CTAs of 8 warps, 8 resident an SM: the busiest SM runs 80 in 10 rounds; a chain of
    # 100 dependent FP32 instructions, 400 cycles
    work = KernelWork(pipes={"fp32": 800.0}, chain={"fp32": 100.0}, critical_instructions=100.0,
                      ctas=132 * 80, warps_per_cta=8, ctas_per_sm=8)  # fmt: skip
    rates = replace(PIPES, cta_turnaround_ns=280.0)
    t = compute_terms(work, H200, rates)
    assert t is not None and t.rounds == 10 and t.chain_cycles == 400.0
    # 10 x 400 cycles + 9 x 280 ns = 2.020 us + 2.520 us, and the first round's 6 CTA launches
    # after the first two (the ramp)
    ramp = 6 * PIPES.cta_launch_ns * 1e-9
    assert t.turnaround_s == pytest.approx(9 * 280e-9) and t.ramp_s == pytest.approx(ramp)
    assert t.dependency_s == pytest.approx(10 * 400 / HZ + 9 * 280e-9 + ramp)
    assert "280 ns CTA turnaround x 10 rounds" in t.describe()
    # one round: the launch floor (an empty kernel's launch to completion) holds its CTAs' launch
    one = compute_terms(replace(work, ctas=132 * 8), H200, rates)
    assert one is not None and one.rounds == 1 and one.turnaround_s == 0.0
    assert one.dependency_s == pytest.approx(400 / HZ + ramp)
    # none without a turnaround
    zero = compute_terms(work, H200, replace(PIPES, cta_turnaround_ns=0.0))
    assert zero is not None and zero.dependency_s == pytest.approx(10 * 400 / HZ + ramp)


def test_sides_combine_as_a_p_norm() -> None:
    assert combine_sides(3.0, 4.0, 2.0) == pytest.approx(5.0)
    # two equal sides: 2^(1/2.5) = 1.32 times either
    assert combine_sides(1.0, 1.0) == pytest.approx(2**0.4)
    assert combine_sides(2.0, 1.0) == pytest.approx((2**2.5 + 1) ** 0.4)  # 2.19
    # one side much the larger: little more than it
    assert combine_sides(10.0, 1.0) == pytest.approx(10.0 * (1 + 10**-2.5) ** 0.4)
    assert combine_sides(1.0, 0.0) == 1.0 and combine_sides(0.0, 0.0) == 0.0
    # infinite norm: the maximum; 1: the sum
    assert combine_sides(3.0, 4.0, math.inf) == 4.0
    assert combine_sides(3.0, 4.0, 1.0) == pytest.approx(7.0)
    # tiny times do not underflow
    assert combine_sides(3e-200, 4e-200, 2.0) == pytest.approx(5e-200)
    # a warp's waits (latency 1) and its own instructions (compute 1) in turn, one warp a
    # scheduler: 2, more than the sides' norm
    assert combine_sides(1.0, 1.0, 2.5, latency_s=1.0, compute_s=1.0, hidden=0.0) == 2.0
    # sixteen warps hide all but a sixteenth of the smaller: the norm is the larger
    assert combine_sides(1.0, 1.0, 2.5, latency_s=1.0, compute_s=1.0, hidden=15 / 16) == (
        pytest.approx(2**0.4)
    )


def test_latency_moves_to_the_latency_side() -> None:
    t = LaunchTimes(l1_s=1.0, l2_s=2.0, dram_s=3.0, issue_s=1.5, latency_s=4.0, pipe_s=0.5,
                    dependency_s=3.5, cta_s=0.2, hidden=0.75)  # fmt: skip
    assert t.memory_s == 3.0  # L1, L2, DRAM
    assert t.latency_side_s == 4.0  # dependency, latency, cta
    # DRAM 3 and issue 1.5 overlapping but for a quarter of the smaller
    assert t.throughput_side_s == pytest.approx(3.0 + 0.25 * 1.5)
    assert t.work_s == pytest.approx((4.0**2.5 + 3.375**2.5) ** 0.4)  # 4.94
    assert t.bound_by == "latency"
    # at peak (full overlap, the maximum): the largest term
    peak = replace(t, hidden=1.0, norm=math.inf)
    assert peak.work_s == 4.0


def test_never_shorter_than_the_maximum() -> None:
    # over a grid of terms: the new work is at least the old model's, so a bound (the launch
    # before against its after side at peak, which is the old model's) never gets smaller
    values = (0.0, 0.1, 0.5, 1.0, 3.0)
    for lat, dram, issue, dep, hidden in itertools.product(values, values, values, values,
                                                            (0.0, 0.5, 0.75, 15 / 16, 1.0)):  # fmt: skip
        t = LaunchTimes(l1_s=0.0, l2_s=0.0, dram_s=dram, issue_s=issue, latency_s=lat,
                        dependency_s=dep, hidden=hidden)  # fmt: skip
        assert t.work_s >= _old_work(t) * (1 - 1e-12), (lat, dram, issue, dep, hidden)


def _copy2(resident: int) -> Traffic:
    """copy<2, 1> of benchmarks/loaded_latency: 2^29 2-byte elements in and out, a thread each,
    CTAs of 256 threads, ``resident`` of them an SM. Each warp loads 64 bytes (one request, two
    sectors, from DRAM) and stores them: the chain is the load (782 cycles) between 9 integer
    links (the index) and the store."""
    ctas = (1 << 29) // 256
    work = KernelWork(pipes={"int": 8 * 14.0, "imad": 8 * 2.0, "lsu": 8 * 2.0},
                      chain={"int": 9.0, "global": 1.0, "store": 1.0}, critical_instructions=18.0,
                      ctas=ctas, warps_per_cta=8, ctas_per_sm=resident)  # fmt: skip
    requests = ctas * 8.0
    return Traffic(work=work, load_requests=requests, l2_load_sectors=2 * requests,
                   l2_store_sectors=2 * requests, dram_bytes=2.0 * (1 << 30),
                   dram_load_bytes=float(1 << 30), resident_warps=132 * 8.0 * resident,
                   bytes_in_flight_per_warp=64.0, l1_cycles=2 * requests)  # fmt: skip


@pytest.mark.parametrize(("resident", "measured_ms"),
                         [(8, 1.3818), (4, 2.5843), (2, 4.8884), (1, 9.6030)])  # fmt: skip
def test_a_streaming_copy_below_saturation(resident: int, measured_ms: float) -> None:
    assert MEM is not None
    t = launch_times(_copy2(resident), H200, MEM)
    assert t is not None and t.compute is not None
    # the busiest SM: 15,888 CTAs in 15,888 / R rounds, each the 819-cycle chain (413.6 ns)
    # and 280 ns of turnaround (the first round's in the floor), and the first round's R - 2
    # CTA launches after the first two (the ramp)
    rounds = -(-15888 // resident)
    assert t.compute.rounds == rounds and t.compute.chain_cycles == 819.0
    c = PIPES.cta_launch_ns * 1e-9
    dep = rounds * 819 / HZ + (rounds - 1) * 280e-9 + max(resident - 2, 0) * c
    assert t.dependency_s == pytest.approx(dep)
    # longer than Little's law (395 ns a round); the SM's 15,888 CTA launches after the two the
    # floor holds (cta) as long with 8 resident
    assert t.cta_s == pytest.approx(15886 * c)
    assert t.latency_side_s == pytest.approx(max(dep, 15886 * c))
    lat = t.latency_side_s
    # the DRAM's 2 GiB at the sustained rate, the issue overlapping but for 1/(2R)
    dram = 2.0 * (1 << 30) / (MEM.dram_sustained_gbps * 1e9)
    assert t.dram_s == pytest.approx(dram)
    through = dram + t.compute_s / (2 * resident)
    assert t.throughput_side_s == pytest.approx(through)
    assert t.time_s == pytest.approx(PIPES.launch_floor_s + (lat**2.5 + through**2.5) ** 0.4)
    # within 16% of the H200's time, where the maximum without the turnaround was 32-49% short
    assert abs(t.time_s * 1e3 / measured_ms - 1) < 0.16
    # (the old model: no turnaround, no ramp, the CTA launches at the 30 ns guess)
    old = _old_work(
        replace(
            t,
            dependency_s=t.dependency_s - t.compute.turnaround_s - t.compute.ramp_s,
            cta_s=15888 * 30e-9,
        )
    )
    assert (t.floor_s + old) * 1e3 / measured_ms - 1 < -0.3
    # the upper bound's after side is that old model: the maximum, no turnaround
    peak = launch_times(_copy2(resident), H200, MEM, peak_dram=True)
    assert peak is not None and peak.norm == math.inf
    assert peak.dependency_s == pytest.approx(rounds * 819 / HZ)
    assert peak.work_s == pytest.approx(
        max(peak.dependency_s, peak.latency_s, peak.cta_s, peak.memory_s, peak.compute_s)
    )


def test_bound_gets_larger_point_follows_the_sides() -> None:
    # doubling the CTAs resident (R = 1 -> 2) of the copy: the point is the model's before over
    # after; the bound the before against the after side at peak, which did not change
    assert MEM is not None
    est = launch_estimate(_copy2(1), _copy2(2), H200, MEM)
    assert est is not None
    old_before = est.before.floor_s + _old_work(
        replace(est.before, dependency_s=est.before.dependency_s - est.before.compute.turnaround_s)  # type: ignore[union-attr]
    )
    assert est.before.time_s > old_before
    assert est.bound == pytest.approx(ceiling_s(est.before) / est.after_floor.time_s)
    assert est.bound > old_before / est.after_floor.time_s
    # measured 9.603 / 4.888 = 1.96x; the point 1.98x
    assert est.point == pytest.approx(1.96, rel=0.05)
