"""GA207 contended-atomics (nvcc, no GPU): kernels/atomics/contended.cu, three spellings of a
shared-memory atomic whose lanes update few addresses (a CTA-wide float sum, an 8-bin weighted
histogram, a maximum through a macro in a template), reported at their ``// expect: GA207``
lines and left alone by GA201 (no padding helps updates of one word); an unused-result increment
(ATOMS.POPC.INC) and one address per lane stay silent."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "atomics" / "contended.cu"
BUFS = {
    "cta_sum": ("x=float[4096]", "out=float[16]"),
    "bins8": ("data=int[4096]", "out=int[128]"),
    "block_max<256>": ("in=int[16384]", "out=int[16]"),
    "count_positive": ("x=float[4096]", "out=int[16]"),
    "per_lane": ("x=float[4096]", "out=float[4096]"),
}


def case(kernel: str):
    return analyze(SRC, kernel, 8, grid="16", block="256", buffers=BUFS[kernel])


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("cta_sum", "atomicAdd(&sum, v);"),
        ("bins8", "atomicAdd(&h[v & 7], v >> 3);"),
        ("block_max<256>", "KEEP_MAX(&m, in["),
    ],
)
def test_contended_atomics_reported(kernel, marker):
    a = case(kernel)
    (f,) = run_rule(a, "GA207", trace_ctas=8)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["lanes_per_address"] >= 4.0
    assert e["wavefronts"] > e["wavefronts_one_per_address"]
    assert "__shfl_down_sync" in f.message
    est = f.estimated_speedup
    # a float add is a compare-and-swap loop on sm_90 (a point on the CTA's serial chain); the
    # integer atomics are native (a bound on the wavefronts)
    cas = kernel == "cta_sum"
    assert est is not None and est.speedup >= 1.0
    assert est.kind == ("point" if cas else "upper-bound")
    assert ("compare-and-swap loop" in f.message) == cas
    assert f.variant is not None and f.variant.safety == "display-only"
    # the same line is no bank conflict: GA201 leaves it
    assert [g for g in run_rule(a, "GA201", trace_ctas=8) if g.line == f.line] == []


def test_a_compare_and_swap_loop_puts_every_update_on_the_ctas_chain():
    """cta_sum: 8 warps x 32 lanes add to one float: ptxas's ATOMS.CAST.SPIN loop makes the
    CTA's 256 updates follow each other (a round trip each: the shared load, the add, the
    CAS, the test); one atomic per warp leaves 8. The chain's extra links are read off the
    inputs: 255 more round trips before, 7 after."""
    (f,) = run_rule(case("cta_sum"), "GA207", trace_ctas=8)
    est = f.estimated_speedup
    assert est is not None and est.kind == "point"
    assert est.inputs["serial_updates_per_cta"] == 256.0
    assert est.inputs["serial_updates_after"] == 8.0
    # the serial chain is what bounds the launch before the change
    assert est.inputs["bound_by_before"] == "dependency"
    assert est.speedup > 2.0


def test_a_cta_sum_has_32_lanes_per_address():
    (f,) = run_rule(case("cta_sum"), "GA207", trace_ctas=8)
    e = ev(f)
    # 8 warps per CTA, each request all 32 lanes on `sum`: 32 updates of 1 address
    assert e["lanes_per_address"] == 32.0
    assert e["requests"] == 8 * 8
    assert e["wavefronts_one_per_address"] == 8 * 8
    assert e["wavefronts"] == 32 * 8 * 8


@pytest.mark.parametrize("kernel", ["count_positive", "per_lane"])
def test_silent(kernel):
    assert run_rule(case(kernel), "GA207", trace_ctas=8) == []
