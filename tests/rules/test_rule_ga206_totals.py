"""GA206 on reductions that pay a per-CTA combine for a few elements per thread
(kernels/few_per_thread, nvcc, no GPU): totals made with shared memory and global atomics (a dot
product's atomic per CTA, a privatised histogram's flush), up to four elements per thread before
the combine, 2D grids whose CTAs partition the array (rows a grid apart, a tile of columns per
``blockIdx.y``), the line reported (the grid-stride loop's header; past ``nid = blockIdx.x``), and
the launch-only variant: one wave, the sums unchanged on the CPU emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import KERNELS, analyze, compiled, ev, run_rule, source_line

import gpuadvise.rules as rule_api
from gpuadvise.rules.grid_stride import BufferUse

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

FEW = KERNELS / "few_per_thread"
TOTALS = FEW / "totals.cu"
TRACE = 8


def ga206(source: Path, kernel: str, **opts: Any) -> list[rule_api.Finding]:
    return run_rule(analyze(source, kernel, TRACE, **opts), "GA206", trace_ctas=TRACE)


def test_a_partition_covers_the_buffer_once() -> None:
    """Disjoint CTAs of four elements per thread whose grid covers the array once (stddev's
    rows a whole grid apart); not when the grid covers a fraction of it, nor with more than
    ``most`` elements per thread, nor without disjoint CTAs."""
    rows = BufferUse("data", 4, 0, False, disjoint=1024, count=8192 * 1024)
    assert rows.partitioned(256, 4, 8192)
    assert not rows.partitioned(256, 4, 4096)  # half the array: not one pass over it
    assert not rows.partitioned(256, 2, 8192)  # four per thread, two allowed
    assert not replace_disjoint(rows, 0).partitioned(256, 4, 8192)


def replace_disjoint(u: BufferUse, disjoint: int) -> BufferUse:
    from dataclasses import replace

    return replace(u, disjoint=disjoint)


@pytest.mark.parametrize(
    "kernel, line_text, totals, k",
    [
        ("dot_total", "gridDim.x * blockDim.x)  // expect: GA206", ("result",), 1),
        ("hist_private<256>", "while (i < n) {", ("bins",), 1),
    ],
)
def test_totals_by_atomics_after_a_shared_combine(
    kernel: str, line_text: str, totals: tuple[str, ...], k: int
) -> None:
    """A grid-stride loop run once per thread, a combine in shared memory, then global atomics
    into outputs every CTA adds to: a reduction into totals, reported at the loop, the launch
    of one wave offered (outputs compared as they are: the same sums), no bound claimed."""
    (f,) = ga206(TOTALS, kernel)
    assert f.line == source_line(TOTALS, line_text)
    assert ev(f)["kind"] == "total" and ev(f)["elements_per_thread"] == k
    assert f.details_as(rule_api.OneElement).totals == totals
    assert "a reduction into totals" in f.message and "launch it with one wave" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "none" and "not bounded" in est.method
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff is None
    wave = f.details_as(rule_api.OneElement).wave_ctas
    assert v.launch == {"grid": [wave, 1, 1]} and v.totals == {}


def test_a_2d_grid_partitioning_rows_and_columns() -> None:
    """stddev's column sums: 32 columns per blockIdx.y, rows a whole x grid apart, four per
    thread; the variant cuts gridDim.x so that the grid is one wave, gridDim.y kept."""
    (f,) = ga206(TOTALS, "col_sumsq")
    assert f.line == source_line(TOTALS, "for (int r = first_row(8)")
    assert ev(f)["kind"] == "total" and ev(f)["elements_per_thread"] == 4
    d = f.details_as(rule_api.OneElement)
    assert d.streamed == ("data",) and d.totals == ("out",)
    v = f.variant
    assert v is not None and v.launch == {"grid": [d.wave_ctas // 32, 32, 1]}
    assert f"{d.wave_ctas // 32} x 32 CTAs" in f.message


def test_four_elements_per_thread_before_a_per_block_partial() -> None:
    (f,) = ga206(TOTALS, "dot4_partials")
    assert f.line == source_line(TOTALS, "blockDim.x) {  // expect: GA206")
    assert ev(f)["kind"] == "per-block" and ev(f)["elements_per_thread"] == 4
    v = f.variant
    assert v is not None and v.totals == {"d": "+"} and v.label == "one wave"


@pytest.mark.parametrize("kernel", ["dot_total_one_wave", "dot8_partials", "scale4"])
def test_silent_with_one_wave_eight_per_thread_or_element_wise(kernel: str) -> None:
    assert ga206(TOTALS, kernel) == []


def test_reported_past_a_name_for_the_block_index() -> None:
    """``const int seg = blockIdx.x;`` only names the CTA: the finding is on the statement
    that makes the element's index from it."""
    src = FEW / "segments.cu"
    (f,) = ga206(src, "segment_fraction")
    assert f.line == source_line(src, "const int gid = seg * blockDim.x")
    assert ev(f)["kind"] == "segmented"


def test_the_one_wave_launch_keeps_the_column_sums(tmp_path: Path) -> None:
    """col_sumsq over the whole launch on the CPU emulator: 16 x 2 CTAs and the variant's grid
    of 1 x 2 write the same column sums (another order of float additions)."""
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    def run(grid: str) -> Any:
        a = compiled(TOTALS, "col_sumsq", grid=grid, args=("rows=512", "cols=64"))
        launch = resolve(a.spec, parse_signature(TOTALS.read_text(), "col_sumsq"))
        return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)

    want, got = run("16x2").outputs["out"], run("1x2").outputs["out"]
    assert np.allclose(want, got, rtol=1e-5)
    assert np.all(want > 0)
