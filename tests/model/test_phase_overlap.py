"""How much of a launch's memory and compute times its warps hide one behind the other
(gpuadvise.model.execution.phase_overlap through gpuadvise.model.roofline.launch_times), pinned on
hand-derived cases: kernels/fp64 norm's shape (one round of CTAs whose threads load 8 floats,
wait for them once, then run a double pow: 91 FP64 instructions a warp, and store), the same
work over several rounds, and the same work in a loop of 16 waits.

The rates are written out here (the sm_90 defaults of data/pipes.toml), so that a new
measurement in the presets does not move these numbers. H200: 132 SMs at 1980 MHz."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuadvise.devices import PipeRates, memory_rates, preset
from gpuadvise.model.execution import KernelWork, combine, overlap, phase_overlap
from gpuadvise.model.roofline import Traffic, launch_estimate, launch_times

H200 = preset("H200")
MEM = memory_rates(H200)
HZ = 1980e6
RATES = PipeRates(
    lanes_per_clock={"fp32": 128, "fp64": 64, "int": 64, "xu": 16},
    latency_cycles={
        "fp32": 4,
        "fp64": 8,
        "int": 4,
        "xu": 14,
        "l1": 35,
        "l2": 270,
        "dram": 782,
        "store": 1,
        "shared": 30,
        "barrier": 24,
    },  # fmt: skip
    shared_wavefront_cycles=1.0,
    cta_launch_ns=100.0,
    launch_floor_s=2.8e-6,
    measured=frozenset(),
    source="this test's rates",
)

# norm's CTA: 8 warps, each 91 FP64 instructions (the double pow), 8 loads and a store; the
# critical warp's chain: one wait for its loads (global), then 4 FP64 and 20 integer links
NORM = KernelWork(
    pipes={"fp64": 8 * 91.0, "int": 8 * 34.0, "lsu": 8 * 9.0},
    chain={"global": 1.0, "fp64": 4.0, "int": 20.0, "store": 1.0},
    critical_instructions=159.0,
    ctas=512,
    warps_per_cta=8,
    ctas_per_sm=8,
)
# 512 CTAs x 256 threads x (32 bytes read + 4 written)
BYTES = 512 * 256 * 36.0


def _times(work: KernelWork, peak: bool = False):  # type: ignore[no-untyped-def]
    assert MEM is not None
    t = launch_times(
        Traffic(work=work, dram_bytes=work.ctas * 256 * 36.0), H200, MEM, peak, pipes=RATES
    )
    assert t is not None and t.compute is not None
    return t


def test_phase_overlap_rule() -> None:
    # one phase hides nothing however many warps; then 1 - 1/phases up to the warps' 1 - 1/w
    assert phase_overlap(16, 1) == 0.0 and phase_overlap(1, 100) == 0.0
    assert phase_overlap(16, 2) == 0.5 and phase_overlap(16, 4) == 0.75
    assert phase_overlap(8, 16) == overlap(8) == 0.875
    assert phase_overlap(8, 0) == 0.0  # no wait at all: a round is one phase


def test_one_round_one_wait_takes_memory_then_compute() -> None:
    t = _times(NORM)
    c = t.compute
    assert c is not None
    # 512 CTAs on 132 SMs: 4 on the busiest, all resident (one round), 32 warps, 8 a scheduler;
    # one wait on the chain: one phase
    assert (c.rounds, c.busiest_sm_ctas, c.warps_per_scheduler, c.phases) == (1, 4, 8.0, 1.0)
    # FP64 at 64 / 4 = 16 lanes a clock a scheduler: 8 warps x 91 x 32 / 16 = 1,456 cycles
    assert c.pipe == "fp64" and t.pipe_s == pytest.approx(1456 / HZ)
    # every warp issues its loads at the start and computes once they are all back: the memory
    # streams (4.7 MB at the sustained rate) while no warp has anything to compute, then every
    # warp computes: nothing hidden, M + K (1/8 of the smaller hidden would be 7/8 hidden)
    assert t.hidden == 0.0
    assert t.throughput_side_s == pytest.approx(t.memory_s + t.compute_s)
    assert t.memory_s == pytest.approx(BYTES / (MEM.dram_sustained_gbps * 1e9))
    # the upper bounds' after side (peak) keeps full overlap: no bound's after side is longer
    p = _times(NORM, peak=True)
    assert p.hidden == 1.0 and p.throughput_side_s == pytest.approx(max(p.memory_s, p.compute_s))


def test_rounds_and_waits_let_the_phases_drift_apart() -> None:
    # two rounds (2,112 CTAs: 16 on the busiest SM, 8 of them resident at a time, the warp
    # limit's 64 warps): the second round's CTAs start as the first round's retire, while those
    # compute: 2 phases, half the smaller hidden
    two = _times(replace(NORM, ctas=132 * 16))
    assert two.compute is not None and (two.compute.rounds, two.compute.phases) == (2, 2.0)
    assert two.hidden == 0.5
    assert two.throughput_side_s == pytest.approx(combine(two.memory_s, two.compute_s, 0.0, 0.5))
    # one round whose warps loop over 16 loads, one wait each (the same instructions): the
    # phases drift apart, and the 8 warps a scheduler hide all but 1/8 of the smaller, as a
    # launch of warps in every phase does
    loop = _times(replace(NORM, chain={**NORM.chain, "global": 16.0}))
    assert loop.compute is not None and loop.compute.phases == 16.0
    assert loop.hidden == overlap(8)


def test_a_change_of_the_arithmetic_of_a_one_pass_launch() -> None:
    # norm's pow in float (the FP64 instructions on the FP32 pipe): the arithmetic no longer
    # hides behind the memory, so the point is what it saves after the memory, not 1/8 of it
    fp32 = replace(NORM, pipes={"fp32": 8 * 91.0, "int": 8 * 34.0, "lsu": 8 * 9.0})
    assert MEM is not None
    est = launch_estimate(
        Traffic(work=NORM, dram_bytes=BYTES),
        Traffic(work=fp32, dram_bytes=BYTES),
        H200,
        MEM,
        pipes=RATES,
    )
    assert est is not None
    # FP32: 8 x 91 x 32 / 32 = 728 cycles, half the FP64 pipe's 1,456; the scheduler issues
    # 8 warps x 134 instructions = 1,072 cycles, the compute time after: the throughput sides
    # differ by the 384 cycles saved (0.19 us), all of it, where 7/8 hidden saved 1/8 of it
    b, a = est.before, est.after
    assert a.pipe_s == pytest.approx(728 / HZ) and a.issue_s == pytest.approx(1072 / HZ)
    assert b.throughput_side_s - a.throughput_side_s == pytest.approx(384 / HZ)
    assert est.point > 1.0
