"""GA208 contended-global-atomics (nvcc, no GPU): kernels/global_atomics/atomics.cu, three
spellings of global atomics that pile on one address (every thread adding to one float, one
atomic per CTA over many CTAs through a macro, seven histogram bins in a template's grid-stride
loop), reported at their ``// expect: GA208`` lines with the updates the L2 applies in turn;
one address per thread and the fix (one atomic per CTA of one wave) stay silent. The counts are
derived by hand from small launches traced whole."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, kernel_case, run_rule, source_line

from gpuadvise.rules import HotAddress, update_ns

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "global_atomics" / "atomics.cu"


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("grid_sum", "atomicAdd(sum, x[i]);"),
        ("cta_partials", "ACCUMULATE(result, s);"),
        ("letter_bins", "atomicAdd(bins + c / WIDTH, 1);"),
    ],
)
def test_contended_global_atomics_reported(kernel, marker):
    (f,) = run_rule(analyze(SRC, kernel, 8), "GA208", trace_ctas=8)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["serial_share"] >= 0.2
    assert e["serial_us"] > e["rest_of_launch_us"] * 0.2
    assert "one thread per CTA" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup > 1.0
    assert est.inputs["updates_after"] < est.inputs["updates_before"]
    assert f.variant is not None and f.variant.safety == "display-only"


@pytest.mark.parametrize("kernel", ["scatter_add", "grid_sum_one_wave"])
def test_silent(kernel):
    assert run_rule(analyze(SRC, kernel, 8), "GA208", trace_ctas=8) == []


def test_a_grid_sum_counts_every_lane_on_one_address():
    """grid_sum over 16 CTAs of 256 threads, all traced: 4,096 float adds of `sum`, 32 lanes a
    request; the fix leaves one per CTA (16); 1.76 ns each (an H200's float add)."""
    a = analyze(SRC, "grid_sum", 16, args=("n=4096",), grid="16")
    (f,) = run_rule(a, "GA208", trace_ctas=16, min_share=0.0)
    e = ev(f)
    assert e["updates_of_one_address"] == 4096
    assert e["lanes_per_request"] == 32.0
    assert e["distinct_addresses"] == 1
    assert e["serial_us"] == pytest.approx(4096 * 1.76e-3, abs=0.01)
    assert "`sum`" in f.message
    est = f.estimated_speedup
    assert est is not None and est.inputs["updates_after"] == 16


def test_an_integer_add_ptxas_combines_counts_one_update_a_warp(tmp_path):
    """Every thread adds 1 to out[0] (a warp-uniform address): ptxas combines the warp's lanes
    (a vote, its POPC, one elected lane: UFLO), so 4 CTAs x 8 warps make 32 updates, not
    1,024."""
    src = kernel_case(
        tmp_path,
        """
        __global__ void count_all(const int* in, int* out, unsigned n) {
            unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n && in[i] != 12345) atomicAdd(&out[0], 1);
        }
        """,
        "count_all",
    )
    a = analyze(src, "count_all", 4)
    (f,) = run_rule(a, "GA208", trace_ctas=4, min_share=0.0)
    e = ev(f)
    assert e["lanes_per_request"] == 1.0
    assert e["updates_of_one_address"] == pytest.approx(32, rel=0.1)


def test_update_times_by_type():
    assert update_ns("atom.global.add.f32") == 1.76
    assert update_ns("red.global.add.u32") == 0.73
    assert update_ns("atom.global.add.s64") == 0.73


def _hot(hot_ctas: int, traced: int) -> HotAddress:
    return HotAddress(
        updates=800.0,
        addresses=1,
        hot_updates=800.0,
        hot_ctas=hot_ctas,
        lanes_per_request=32.0,
        traced_ctas=traced,
        buffer="sum",
        opcode="red.global.add.f32",
        insts=(0,),
    )


def test_a_grid_wide_address_scales_with_the_launch_a_ctas_own_does_not():
    # every traced CTA updates it: a grid-wide sum, 100x the CTAs, 100x the updates
    assert _hot(8, 8).launch_updates(100.0) == 80000.0
    assert _hot(8, 8).launch_ctas(100.0) == 800.0
    # one traced CTA of eight: an address of its own (a block's bin), as traced
    assert _hot(1, 8).launch_updates(100.0) == 800.0
    assert _hot(1, 8).launch_ctas(100.0) == 1.0
