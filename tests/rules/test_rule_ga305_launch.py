"""GA305 launch-wide: kernels/pairs/pairs.cu, one CTA per pair of rows (hecbench
all-pairs-distance's shape) in three spellings, each row read by every CTA of its row and column
of the grid, reported at their ``// expect: GA305`` lines with the CTAs per sector counted by
hand; the tiled kernel (16 x 16 pairs per CTA) and a streaming kernel stay silent. And the
neighbourhood estimate's chain: the line's global loads read from the tile. Needs nvcc, no GPU."""

from __future__ import annotations

from typing import Any

import pytest
import rulekit
from rulekit import KERNELS, ev, run_rule, source_line

import gpuadvise.rules as rule_api

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "pairs" / "pairs.cu"
TRACE_CTAS = 8


def ga305(kernel: str, source: Any = SRC, **options: Any) -> list[rule_api.Finding]:
    a = rulekit.analyze(source, kernel, TRACE_CTAS)
    return run_rule(a, "GA305", TRACE_CTAS, **options)


# The first 8 CTAs are pairs (0..7, 0): CTA 0 reads row 0 (32 sectors of 1 KB), the others rows
# gx and 0 (64 sectors): 32 + 7 x 64 = 480 sectors to the SMs; the sample's distinct rows 0..7
# (256 sectors) x 512 (4096 CTAs / 8) is more than the buffer (64 rows, 2048 sectors): the
# footprint is the buffer. CTAs per sector: 480 x 512 / 2048 = 120.
L2_SECTORS, FOOTPRINT = 480 * 512, 2048


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("pair_dot", "s += data[gx * N + k] * data[gy * N + k];"),
        ("pair_dot_t<256>", "const float a = ra[k];"),
        ("pair_dot_flat", "s += ROW(gx, k) * ROW(gy, k);"),
    ],
)
def test_rows_read_by_many_ctas_reported(kernel, marker):
    (f,) = ga305(kernel)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert (e["l2_sectors"], e["footprint_sectors"]) == (L2_SECTORS, FOOTPRINT)
    assert e["ctas_per_sector"] == pytest.approx(L2_SECTORS / FOOTPRINT)
    assert e["l2_share"] > 0.9  # the only buffer loaded
    assert "read by 120 CTAs on average" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and est.speedup >= 1.0
    assert est.inputs["tile"] == 8.0 and "L2 load sectors divided by 8.0" in est.method
    assert f.variant is not None and f.variant.safety == "display-only"
    assert "tile of outputs" in f.variant.description


@pytest.mark.parametrize("kernel", ["pair_dot_tiled", "row_scale"])
def test_tiled_and_streaming_kernels_are_silent(kernel):
    assert ga305(kernel) == []


def test_options():
    assert ga305("pair_dot", min_cta_reuse=121.0) == []
    assert ga305("pair_dot", min_cta_reuse=119.0) != []
    assert ga305("pair_dot", min_l2_share=1.01) == []


def test_neighbourhood_estimate_stays_on_the_l1():
    """box3_direct (the tile measured 1.70x slower on an H200): the neighbourhood's estimate is
    the L1 data path's alone, a launch-wide finding does not join it for the same buffer, and
    no gain worth a warning is predicted."""
    box = KERNELS / "stencil" / "box.cu"
    (f,) = ga305("box3_direct", box)
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and "shared tile" in est.method
    assert "footprint_sectors" not in est.inputs
    assert est.inputs["point_speedup"] <= 1.05
    assert f.recommend_only_if_faster is True  # the measurement decides
