"""GA402 unpacked-half-math: the SASS classification (one-lane fp16 instructions, half-word
PRMTs) on instructions copied from nvcc 13's output, the numbers behind the findings on seed 001's
moments kernels (one per neighbour of the 9x9 window: 81), the packing it proposes, and the
cases where it must stay quiet. Needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import gpuadvise.rules as rule_api
import gpuadvise.rules.context as rule_context
import gpuadvise.rules.evaluate as rule_evaluate
import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise.analyze.evaluate import run_rules
from gpuadvise.rules.config import Config
from gpuadvise.toolchain import find_toolchain

try:
    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

_K = rule_registry.builtin_kernels_dir()
assert _K is not None
MOMENTS = _K / "fp16_neighbourhood" / "moments.cu"
NEIGHBOURS = 81  # the 9x9 window, unrolled: one instruction per neighbour and operation


@pytest.fixture(scope="module")
def mod() -> Any:
    rule = rule_registry.load_registry().get("GA402")
    return sys.modules[type(rule).__module__]


# ---------------------------------------------------------------------------------------------
# The moments kernels


@pytest.fixture(scope="module", autouse=True)
def _cache(compile_cache: Path) -> Path:
    """The run's compile cache (conftest.py) for every test of the module."""
    return compile_cache


def analyze(source: Path, kernel: str) -> Any:
    """The analysis :func:`ga402` runs every rule on (GA101 and GA403 read the live registers):
    read with the SASS by the pipeline, one ``nvdisasm -plr`` run for both, not the SASS first
    and the life ranges in a second run (rulekit.analyze's ``registers``)."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel

    s, choice, options = build(KernelOptions(source=str(source), kernel=kernel, gpu="H100"))
    return analyze_kernel(s, choice.device, options, trace=True, sample_ctas=4)


def ga402(source: Path, kernel: str, **options: Any) -> list[rule_api.Finding]:
    cfg = Config(trace_ctas=4, rule_options={"GA402": options} if options else {})
    found = run_rules(analyze(source, kernel), cfg)
    assert not [f for f in found if f.is_error], [f.message for f in found if f.is_error]
    return sorted((f for f in found if f.rule == "GA402"), key=lambda f: f.line or 0)


def ev(f: rule_api.Finding) -> dict[str, Any]:
    return {e.metric: e.value for e in f.evidence}


needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (pip install .[toolkit])")


@pytest.fixture(scope="module")
def moments() -> dict[str, list[rule_api.Finding]]:
    if not HAVE_NVCC:
        pytest.skip("no CUDA toolkit")
    ks = ("moments_split", "moments_uint2", "moments_half3", "moments_half4")
    return {k: ga402(MOMENTS, k) for k in ks}


@needs_nvcc
def test_weight_sum_beside_a_spare_lane(moments):
    for kernel, line in (("moments_split", 87), ("moments_uint2", 127)):
        (f,) = moments[kernel]
        assert f.line == line
        e = ev(f)
        # wsum = __hadd(wsum, wt): one HADD2 R2, R2.H0_H0, w, w per neighbour
        assert e["scalar_fp16_ops"] == 1
        assert e["sass_one_lane_fp16"] == NEIGHBOURS and e["sass_packed_fp16"] == 0
        assert e["registers"] > 0  # ptxas -v: registers per thread, as context
        info = f.details.plan_info
        # only __low2half(m_b) is read after the loop: the weight sum fits its high lane
        assert info["spare_lanes"] == {"m_b": "low", "v_b": "low"}
        assert info["into_spare_lane"] == [["wsum", "m_b", "high"]]
        assert f.variant is not None and f.variant.safety == "display-only"
        assert "__high2half(m_b)" in f.variant.description and f.variant.diff is None
    # uint2: the (b, 0) pairs' dead high lanes make m_b and v_b one-lane too: wsum, m_b, b*b, v_b
    assert ev(moments["moments_uint2"][0])["loop_one_lane_fp16"] == 4 * NEIGHBOURS


@needs_nvcc
def test_half3_lines_and_pairs(moments):
    fs = moments["moments_half3"]
    assert [f.line for f in fs] == [163, 164, 165, 166]
    by = {f.line: ev(f) for f in fs}
    assert [by[n]["scalar_fp16_ops"] for n in (163, 164, 165, 166)] == [3, 3, 3, 1]
    # nvcc 13 packs (r, g) itself and puts that code at the load's line 161: nothing at 163-164
    for n in (163, 164):
        assert by[n]["sass_one_lane_fp16"] == by[n]["sass_packed_fp16"] == 0
        assert "at line 161" in next(f for f in fs if f.line == n).message
    # b*b alone in a one-lane HMUL2, then packed with b by a PRMT: one of each per neighbour
    assert (
        by[165]["sass_one_lane_fp16"] == NEIGHBOURS and by[165]["sass_halfword_prmt"] == NEIGHBOURS
    )
    assert by[166]["sass_one_lane_fp16"] == NEIGHBOURS  # the weight sum
    assert by[163]["loop_one_lane_fp16"] == 2 * NEIGHBOURS  # b*b and wsum
    info = fs[0].details.plan_info
    # moments_half4's packing: (r, g), (r^2, g^2), (b, 1) x w; b^2 alone
    assert info["pairs"] == [["m_r", "m_g"], ["v_r", "v_g"], ["m_b", "wsum"]]
    assert info["unpaired"] == ["v_b"]
    assert "m_b with wsum ((t.z, 1) x wt)" in (fs[0].variant.description if fs[0].variant else "")
    assert moments["moments_half4"] == []


@needs_nvcc
def test_estimate_is_the_loops_and_consistent(moments):
    fs = moments["moments_half3"]
    ests = [f.estimated_speedup for f in fs]
    assert all(e is not None and e.kind == "upper-bound" for e in ests)
    assert len({e.speedup for e in ests if e}) == 1  # one fix for the loop, shared
    e = ests[0]
    assert e is not None
    i = e.inputs
    assert i["loop_trips"] == 1.0  # unrolled: every LDS of the loop runs once per warp
    assert i["instructions_saved_per_thread"] == i["one_lane_fp16"] // 2 + i["halfword_prmt"]
    # issue-bound (the DRAM time is shorter): the bound is the instruction ratio
    assert i["dram_time_us"] < i["issue_time_us"] - i["saved_us"]
    n, saved = i["instructions_per_thread"], i["instructions_saved_per_thread"]
    # on the launch model (issue 29) the saved instructions leave the issue term, which bounds
    # the launch; its floor and its other terms stay, so the point is under the instruction
    # ratio n / (n - saved), and the bound, which allows the model 15% of error on the launch
    # before, under that ratio with the same margin
    assert i["after_issue_us"] < i["before_issue_us"]
    assert 1.0 < i["point_speedup"] < n / (n - saved)
    assert 1.0 < e.speedup < 1.15 * n / (n - saved) and "not additive" in e.method
    # on the launch model, bound by issue or the L1 data path the loop's shared loads keep busy,
    # before and after (the L1 before too since the issue count is the SASS's, not the PTX's:
    # the thirteenth session's s13-sass, within 5% of ncu's counts)
    assert "execution model of the launch" in e.method
    assert i["bound_by_before"] in ("issue", "l1") and i["bound_by_after"] in ("issue", "l1")


# ---------------------------------------------------------------------------------------------
# Operators on __half variables, a loop nvcc packs without waste, code outside loops

SMALL = """\
#include <cuda_fp16.h>

extern "C" __global__ void dot_ops(const __half* __restrict__ x, __half* __restrict__ out,
                                   __half s, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    __half acc = __float2half(0.0f);
    for (int k = 0; k < 16; ++k) {
        const __half v = x[t * 16 + k];
        acc += v * s;
    }
    out[t] = acc;
}

extern "C" __global__ void pair_packed(const __half2* __restrict__ x, __half2* __restrict__ out,
                                       int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    __half a = __float2half(0.0f), b = a;
    const __half w = __float2half(0.5f);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const __half2 p = x[t * 8 + k];
        a = __hfma(__low2half(p), w, a);
        b = __hfma(__high2half(p), w, b);
    }
    out[t] = __halves2half2(a, b);
}

extern "C" __global__ void once(const __half* __restrict__ x, __half* __restrict__ out, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = __hadd(x[2 * t], x[2 * t + 1]);
}
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SMALL and its case, written once for the module's two tests that read them (a kernel
    written to a new folder compiles again: the path is in the compile cache's key)."""
    folder = tmp_path_factory.mktemp("ga402-small")
    src = folder / "h.cu"
    src.write_text(SMALL)
    (folder / "case.toml").write_text(
        'source = "h.cu"\nkernel = "dot_ops"\ngrid = "ceil_div(n, 64)"\nblock = 64\nseed = 1\n'
        '[args]\nn = 256\n[buffers]\nx = "half[16*n]"\nout = "half[n]"\n'
    )
    return src


@needs_nvcc
def test_operators_on_half_variables(mod, small):
    ks = srctext.find_kernel_source(small, "dot_ops")
    assert ks is not None
    assert mod.half_variables(ks) == {"s", "acc", "v"}
    assert sorted(o.op for o in mod.scalar_ops(ks)) == ["operator*", "operator+"]
    (f,) = ga402(small, "dot_ops")
    assert f.line == 9
    # acc += v * s fused into one one-lane HFMA2 per iteration, 16 iterations unrolled
    assert ev(f)["sass_one_lane_fp16"] == 16 and ev(f)["sass_packed_fp16"] == 0
    assert f.variant is not None and "alternate iterations" in f.variant.description


@needs_nvcc
def test_quiet_when_nvcc_packs_or_outside_loops(small):
    # pairs loaded packed: nvcc's HFMA2 uses both lanes, no PRMT repacks anything
    assert ga402(small, "pair_packed") == []
    assert ga402(small, "once") == []  # not in a loop
    (f,) = ga402(small, "once", loops_only=False)
    assert f.line == 30 and ev(f)["sass_one_lane_fp16"] == 1


def test_updates_and_shapes(mod, tmp_path):
    src = tmp_path / "u.cu"
    src.write_text(
        "__global__ void k(float* o) {\n"
        "    m_r = __hfma(t.x, wt, m_r), v_r = __hfma(__hmul(t.x, t.x), wt, v_r);\n"
        "    wsum = __hadd(wsum, wt); acc += v * s; m_b = __hfma2(b, w2, m_b);\n"
        "    for (int i = 0; i < 4; i += 1) q = __hfma(i, wt, q);\n"
        "}\n"
    )
    ks = srctext.find_kernel_source(src, "k")
    assert ks is not None
    ups = {u.acc: u for u in mod.updates(ks, ks.span)}
    assert (ups["m_r"].multiplicand, ups["m_r"].multiplier) == ("t.x", "wt")
    assert ups["v_r"].multiplicand == "__hmul(t.x, t.x)"
    assert (ups["wsum"].multiplicand, ups["wsum"].multiplier) == ("1", "wt")
    assert (ups["acc"].multiplicand, ups["acc"].multiplier) == ("v", "s")
    assert ups["m_b"].packed and not ups["m_r"].packed
    # a loop header's update is read as what it is, and the body's update after it is kept
    assert (ups["i"].multiplicand, ups["i"].multiplier) == ("1", "1")
    assert (ups["q"].multiplicand, ups["q"].multiplier) == ("i", "wt")
    assert mod._shape("__hmul(t.x, t.x)") == mod._shape("__hmul(t.z, t.z)")


def test_skipped_with_a_note_without_a_compiled_kernel(tmp_path):
    """A modelled launch with no compiled module (as the engine's own tests make): the SASS
    cannot be read, so the rule is skipped with a note, not an error row."""
    from types import SimpleNamespace

    from gpuadvise.devices import preset
    from gpuadvise.spec.kernel_spec import KernelSpec, LaunchConfig
    from gpuadvise.spec.units import Dim3

    src = tmp_path / "k.cu"
    src.write_text(
        "#include <cuda_fp16.h>\n"
        'extern "C" __global__ void k(const __half* x, __half* out) {\n'
        "    __half s = x[0];\n"
        "    for (int i = 1; i < 8; ++i) s = __hadd(s, x[i]);\n"
        "    out[0] = s;\n"
        "}\n"
    )
    spec = KernelSpec(source=src, kernel="k", launch=LaunchConfig(Dim3(1, 1, 1), Dim3(32, 1, 1), 0))
    facts = rule_context.KernelFacts(
        spec=spec,
        device=preset("H100"),
        kernel=SimpleNamespace(name="k"),  # type: ignore[arg-type]
        occupancy_input=None,  # type: ignore[arg-type]
        occupancy=None,  # type: ignore[arg-type]
    )  # no compiled kernel: no SASS
    r = rule_evaluate.evaluate_rules(rule_api.RuleContext(facts), Config(select=("GA402",)))
    assert r.findings == ()
    assert r.notes and r.notes[0].startswith("GA402 (unpacked-half-math) not evaluated")
