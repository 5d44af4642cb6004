"""GA301 on gathers by data into more than a lookup table (kernels/data_gather): judged request by
request, not by the warp's footprint over the loop (a reused 256 KB table looks used), and at 40 %
excess (a float4 gather, a sector per lane, is 50 %: HeCBench md); three spellings fire (an
index expression, a macro, pointer arithmetic on a hash), not estimated; a row read at a loaded
offset, consecutive indices and a 1 KB table (GA305's) stay silent. A __constant__ table indexed
by data (HeCBench popcount pc5) in three spellings fires; a uniform constant index does not.
Needs nvcc, no GPU."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

# the module's analyses are kept per process (_analysis): its tests run on one xdist worker
pytestmark = [
    pytest.mark.toolkit,
    pytest.mark.usefixtures("compile_cache"),
    pytest.mark.xdist_group(__name__),
]

SOURCE = KERNELS / "data_gather" / "gather.cu"
TRACE_CTAS = 8


@cache
def _analysis(kernel: str) -> Any:
    return analyze(SOURCE, kernel, TRACE_CTAS)


def ga301(kernel: str, **options: Any) -> list[Any]:
    return run_rule(_analysis(kernel), "GA301", TRACE_CTAS, **options)


@pytest.mark.parametrize(
    ("kernel", "buffer", "text"),
    [
        ("neighbour_sum", "pos", "pos[nbr[j * n + i]]"),
        ("distance_weights", "table", "TAB(table, abs(xj - xi))"),
        ("hashed_buckets", "buckets", "acc += *bucket;"),
    ],
)
def test_three_spellings_of_a_gather_fire(kernel: str, buffer: str, text: str) -> None:
    (f,) = ga301(kernel)
    assert f.line == source_line(SOURCE, text) and f.severity == "warning"
    d = f.details
    assert d.buffer == buffer and d.pattern == "gather" and not d.aos
    assert "gather by data" in f.message and "sort or bucket the indices" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "none" and est.speedup is None
    assert "would not hold" in est.method
    assert f.variant is None or f.variant.safety == "display-only"


def test_a_float4_gather_is_a_sector_per_lane_at_50_percent() -> None:
    (f,) = ga301("neighbour_sum")
    e = ev(f)
    # 32 lanes, 32 random float4 of 2.1 MB: a sector each, 16 would hold the 512 bytes
    assert 31.0 <= e["sectors_per_request"] <= 32.0 and e["ideal_sectors_per_request"] == 16.0
    assert 45.0 <= e["excess_sectors_pct"] < 50.0 + 1e-9  # below the plain array's 60 %
    assert e["element_bytes"] == 16
    # the option: a gather must reach min_excess_pct_gather
    assert ga301("neighbour_sum", min_excess_pct_gather=55.0) == []


def test_a_reused_table_is_judged_by_request_not_by_footprint() -> None:
    (f,) = ga301("distance_weights")
    e = ev(f)
    # 512 distances per thread into a 64 KB table: over the loop the warp uses most of the bytes
    # of the sectors it touches (the footprint test would call the line GA303's), each request
    # a sector per lane all the same
    assert e["warp_footprint_used_pct"] > 50.0
    assert e["sectors_per_request"] > 30.0 and e["excess_sectors_pct"] > 85.0


@pytest.mark.parametrize("kernel", ["csr_rows", "sorted_gather", "small_table"])
def test_data_addressed_loads_without_a_gather_stay_silent(kernel: str) -> None:
    assert ga301(kernel) == []


@pytest.mark.parametrize(
    ("kernel", "text"),
    [
        ("const_lookup", "c_lut[x & 0xFF] + c_lut[(x >> 8) & 0xFF]"),
        ("const_lookup_macro", "LUT(x) + LUT(x >> 16)"),
        ("const_lookup_pointer", "out[i] = *t;"),
    ],
)
def test_a_constant_table_indexed_by_data_fires(kernel: str, text: str) -> None:
    # HeCBench popcount pc5: the constant cache serves one address per cycle
    (f,) = ga301(kernel)
    assert f.line == source_line(SOURCE, text) and f.severity == "warning"
    assert f.details.pattern == "constant-gather" and f.details.buffer == "__constant__"
    assert ev(f)["distinct_addresses_per_request"] >= 4.0
    assert "__constant__" in f.message and "shared memory" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "none" and "constant cache" in est.method
    assert f.variant is None


def test_a_uniform_constant_index_stays_silent() -> None:
    assert ga301("const_uniform") == []
