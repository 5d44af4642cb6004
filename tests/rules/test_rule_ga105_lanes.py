"""GA105 on duplicate work across the lanes (nvcc, no GPU): kernels/duplicates/lanes.cu, three
spellings of a kernel that reads threadIdx.x only to guard its work and lets every thread do the
whole of it (softmax_cuda's row loops, a macro summing the whole array, a template scaling the
whole vector into its CTA's slice), reported at their first store with every lane of a request on
one address; the fix (a share of the row per lane) and a broadcast load stay silent; GA102's
small grid and GA106's too-little-in-flight, whose advice (more CTAs) would copy the work more,
stay silent on them. The variant: a block of one thread in x (on one CTA in x where the traced
CTAs of a row are copies too)."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

from gpuadvise.rules.lanes import UniformLanes

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "duplicates" / "lanes.cu"


def case(kernel: str):
    return analyze(SRC, kernel, 4, spec=str(SRC.parent / f"{kernel}.toml"))


@pytest.mark.parametrize(
    ("kernel", "marker", "launches"),
    [
        # the traced CTAs of a row are copies too: one thread a row
        ("row_softmax", "output[offset + i] = expf(", [[1, 32, 1]]),
        # blockIdx.x picks the CTA's total and slice (the traced CTAs differ): the grid stays
        ("block_total", "TOTAL_OF(v, n, totals[blockIdx.x]);", [[132, 1, 1]]),
        ("scaled_slices", "dst[i] = a * in[i];", [[264, 1, 1]]),
    ],
)
def test_lanes_doing_the_same_work_reported(kernel, marker, launches):
    a = case(kernel)
    (f,) = run_rule(a, "GA105", trace_ctas=4)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    # every store and load of two or more lanes names one address: all the lanes alike
    assert e["store_share_alike"] == 1.0 and e["load_share_alike"] == 1.0
    assert e["copies_per_piece_of_work"] >= 32
    assert "share of the loop" in f.message and "threadIdx.x only to guard" in f.message
    # the estimate is the automatic variant's (one thread per piece of work: each result still
    # computed serially, so about 1x; softmax_cuda's measured 1.08x on an H200); the further
    # fix, the lanes sharing the loop, is named with its bound
    est = f.estimated_speedup
    assert est is not None and est.kind in ("upper-bound", "none")
    assert est.inputs["share_the_loop_bound"] > 2.0
    assert est.speedup is None or est.speedup < est.inputs["share_the_loop_bound"]
    assert "sharing the loop" in est.method
    # the variant: one thread where blockDim.x copies were (the rewrite that shares the loop
    # is named as the further fix)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff is None
    assert [c.launch for c in v.candidates()] == [{"block": [1, 1, 1], "grid": g} for g in launches]
    assert "share of the loop" in v.description
    # no rule offers more CTAs to copies
    assert run_rule(a, "GA102", trace_ctas=4) == []
    assert run_rule(a, "GA106", trace_ctas=4) == []


@pytest.mark.parametrize("kernel", ["row_sum_split", "broadcast_scale"])
def test_silent(kernel):
    assert run_rule(case(kernel), "GA105", trace_ctas=4) == []


def test_the_share_is_of_requests_with_two_lanes_or_more():
    u = UniformLanes(
        load_requests=10, store_requests=4, load_share=1.0, store_share=1.0, lanes=32.0,
        first_store_inst=3,
    )  # fmt: skip
    assert u.duplicated()
    # one store of a lane's own address among twenty: 95% still alike
    assert UniformLanes(10, 20, 1.0, 0.95, 32.0, 3).duplicated()
    assert not UniformLanes(10, 20, 1.0, 0.9, 32.0, 3).duplicated()
    # loads of each lane's own element (a broadcast_scale): not alike
    assert not UniformLanes(10, 4, 0.5, 1.0, 32.0, 3).duplicated()
    # no store at all: nothing duplicated to report
    assert not UniformLanes(10, 0, 1.0, 0.0, 32.0, -1).duplicated()
