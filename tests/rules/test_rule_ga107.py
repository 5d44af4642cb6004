"""GA107 serial-work (nvcc, no GPU): kernels/serial_work/serial.cu, four spellings of work done by
one thread or one warp of each CTA while the others wait (thread 0 sums the CTA's partials in a
loop; a lane-0 helper walks a column; a template whose first warp scans 2048 bins; a macro in a
launch of one thread), reported at their ``// expect: GA107`` lines with the threads that run the
region counted by hand; the shuffle fix (thread 0 only stores), a loop that every warp runs with
all its lanes and a grid-stride sum with a one-atomic epilogue stay silent."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "serial_work" / "serial.cu"
SPECS = {
    "block_sum_thread0": "case.toml",
    "normalise_lane0": "normalise_lane0.toml",
    "suffix_scan_warp0<2048>": "suffix_scan_warp0.toml",
    "total_one_thread": "total_one_thread.toml",
    "block_sum_shuffles": "block_sum_shuffles.toml",
    "row_sums_per_warp": "row_sums_per_warp.toml",
    "grid_sum_atomic": "grid_sum_atomic.toml",
    "split_by_thread": "split_by_thread.toml",
}


def ga107(kernel: str, **options):
    a = analyze(SRC, kernel, 8, spec=str(SRC.parent / SPECS[kernel]))
    return run_rule(a, "GA107", trace_ctas=8, **options)


@pytest.mark.parametrize(
    ("kernel", "marker", "threads", "cta_threads", "whole"),
    [
        # thread 0 of 256 (one warp, one lane)
        ("block_sum_thread0", "for (int k = 0; k < blockDim.x; ++k) s += part[k];", 1, 256, False),
        # lane 0 of each of the 8 warps: 8 threads of 256; at the helper's call in the kernel
        ("normalise_lane0", "nrm[warp] = sqrtf(column_norm2(", 8, 256, False),
        # the first warp, all 32 lanes, of 8 warps
        ("suffix_scan_warp0<2048>", "if (threadIdx.x + d < 32) v += o;", 32, 256, False),
        # one thread is the whole launch
        ("total_one_thread", "SERIAL_SUM(v, n, total);", 1, 1, True),
    ],
)
def test_serial_regions_reported(kernel, marker, threads, cta_threads, whole):
    (f,) = ga107(kernel)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["threads_running_it"] == pytest.approx(threads, rel=0.02)
    assert e["cta_threads"] == cta_threads
    assert e["whole_launch"] is whole
    assert e["serial_time_share"] >= 0.08 and e["serial_instructions"] >= 64
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and est.speedup > 1.1
    # the point is Amdahl's: at most the launch without the serial share (1 / (1 - share)),
    # unless the launch of one thread also gets a full grid's loads in flight; the bound takes
    # the launch after at peak rates
    point = est.inputs["point_speedup"]
    assert 1.0 < point <= est.speedup
    if not whole:
        assert point <= 1.0 / (1.0 - e["serial_time_share"]) + 1e-3
    assert "execution model of the launch" in est.method
    assert "shuffle" in f.message or "block reduction" in f.message


@pytest.mark.parametrize("kernel", ["block_sum_shuffles", "row_sums_per_warp", "grid_sum_atomic"])
def test_short_epilogues_and_warp_wide_loops_are_silent(kernel):
    assert ga107(kernel) == []


def test_loops_that_split_the_threads_between_them_are_not_serial():
    """A switch on threadIdx.x & 3: four loops of a quarter of the CTA each, all at once (as
    contraction's 18 case bodies, which got five wrong warnings). Each is a narrow region of 64
    threads, and 22% of the modelled launch when taken alone; together they run every thread."""
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules.config import Config

    a = analyze(SRC, "split_by_thread", 8, spec=str(SRC.parent / SPECS["split_by_thread"]))
    assert run_rule(a, "GA107", trace_ctas=8) == []
    regions = rule_context(a, Config(trace_ctas=8)).emulation.simt.regions
    assert len(regions) == 4 and all(r.threads == pytest.approx(64) for r in regions)
    assert all(r.issued >= 64 for r in regions)  # long enough: silent for the split alone


def test_a_short_epilogue_is_found_only_without_the_thresholds():
    """The shuffle fix has narrow regions (the last warp's shuffles, thread 0's store), a few
    instructions and a few percent of the launch: below both thresholds."""
    found = ga107("block_sum_shuffles", min_share=0.0, min_instructions=0)
    assert found and all(ev(f)["serial_time_share"] < 0.1 for f in found)
    assert all(ev(f)["serial_instructions"] < 64 for f in found)


def test_the_warp_counts_come_from_the_emulator():
    """The regions come with the SIMT profile: thread 0's loop is one lane of one warp per CTA
    over the 8 traced CTAs."""
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules.config import Config

    a = analyze(SRC, "block_sum_thread0", 8, spec=str(SRC.parent / "case.toml"))
    ctx = rule_context(a, Config(trace_ctas=8))
    simt = ctx.emulation.simt
    top = simt.regions[0]
    assert top.warps == pytest.approx(1.0) and top.lanes == pytest.approx(1.0)
    assert top.cta_threads == 256 and top.looped
    line = source_line(SRC, "for (int k = 0; k < blockDim.x; ++k) s += part[k];")
    assert top.lines[0].line == line
