"""GA208's 1 KB units (nvcc, no GPU): the rule's own estimate and message use the L2 unit's
serial time (gpuadvise.model.atomic_units) where it decides, before and after a copy of the bins
per CTA; the copy's after side drops the line's global atomics from the L2's traffic.
kernels/global_bins' histograms, hand-derived from their launches."""

from __future__ import annotations

import math
from typing import Any

import pytest
from rulekit import KERNELS, analyze, run_rule

from gpuadvise.model.atomic_units import flush_ns
from gpuadvise.rules import HotAddress

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

BINS = KERNELS / "global_bins" / "bins.cu"


@pytest.fixture(scope="module")
def helpers768() -> Any:
    """The analysis of ``hist_helpers<768>`` (8 CTAs traced), made once for the two tests that
    read it."""
    return analyze(BINS, "hist_helpers<768>", 8)


def test_a_kept_grid_flushes_each_ctas_bins_on_the_unit():
    """hist_direct: 2^24 floats one a thread (65,536 CTAs of 256, no grid-stride loop: the grid
    is kept) into 512 int bins, two 1 KB units. A CTA's copy of a unit's 256 bins holds its
    128 elements there (Poisson): 1 - e^-0.5 = 39% of the bins non-zero, hardly a sector full
    (0.39^8), so each CTA's flush costs the unit 8 lines x 0.07 + 32 sectors x 0.33 = 11.1 ns:
    729 us for the grid (an H200 measured 721 us for the whole variant)."""
    (f,) = run_rule(analyze(BINS, "hist_direct", 8), "GA208", trace_ctas=8)
    assert "1024-byte unit" in f.message
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "private"
    full = (1 - math.exp(-0.5)) ** 8
    after = 65536 * flush_ns(32, 8, full) * 1e-3
    assert after == pytest.approx(729.0, rel=0.01)
    assert est.inputs["serial_after_us"] == pytest.approx(after, rel=0.05)
    # before: the traced CTAs' unit time scaled to the launch (the unit term decides)
    h = f.details_as(HotAddress)
    sectors, lines, words = h.unit_bins  # the unit's 256 words, as 8 traced CTAs reach them
    assert (sectors, lines) == (32, 8) and words > 240 and h.unit_wide
    before = h.unit_ns * 65536 / h.traced_ctas * 1e-3
    assert est.inputs["serial_before_us"] == pytest.approx(before, rel=1e-6)


def test_a_copy_of_the_bins_takes_the_atomics_out_of_the_l2_traffic(helpers768: Any) -> None:
    """hist_helpers<768>: the kernel's L2 term carries its 2^24 global atomics (tens of us in
    the launch model); with a copy of the bins per CTA in one wave of 1,056 CTAs, the rest of
    the launch is the loads of x (64 MB) and the flushes (1,056 x 3 units' bins)."""
    (f,) = run_rule(helpers768, "GA208", trace_ctas=8)
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "private"
    assert est.inputs["rest_after_us"] < 0.5 * est.inputs["rest_of_launch_us"]
    # one wave's flushes: 1,056 CTAs x 11-12 ns on a unit, about 10 us
    assert 8.0 < est.inputs["serial_after_us"] < 14.0


def test_a_one_wave_launchs_flushes_follow_its_loops(helpers768: Any) -> None:
    """kernels/spills hist_local: 264 CTAs (one wave on the H100 model's 132 SMs, 2 a SM), each
    thread's 16 atomics after its loop over the data: the L2's serial time follows the loops
    (launch_serial: added, not hidden). hist_helpers<768>'s 16,384 CTAs are many waves: the
    flushes of one round overlap the loops of the next."""
    from gpuadvise.rules.global_atomics import combined_lines
    from gpuadvise.rules.global_atomics_serial import follows, launch_serial

    spills = KERNELS / "spills" / "spills.cu"
    a = analyze(spills, "hist_local", 8)
    trace = a.memory.trace
    wave = a.waves.ctas_per_wave
    assert trace.total_ctas <= wave
    serial, tail = launch_serial(trace, combined_lines(a.sass_instructions), wave)
    assert serial > 0 and tail
    (f,) = run_rule(a, "GA208", trace_ctas=8)
    assert follows(trace, f.details_as(HotAddress).insts)
    b = helpers768
    serial_b, tail_b = launch_serial(b.memory.trace, (), b.waves.ctas_per_wave)
    assert serial_b > 0 and not tail_b
