"""GA205 shared-tree-to-shuffles (nvcc, no GPU): fires on the trees that finish in shared memory
(seed 003's reduce3-5, kernels in other spellings), stays silent on reduce6 (shuffles already)
and on interleaved trees (GA202's); its diff must apply, keep the block sums on the emulator and
silence the rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rulekit import KERNELS, analyze, reduction_block_sums, run_rule, source_line

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

REDUCE = KERNELS / "reduction" / "reduce.cu"
STYLES = Path(__file__).parent.parent / "cuda" / "reductions"


@pytest.mark.parametrize("kernel", ["reduce3", "reduce4", "reduce5"])
def test_fires_and_the_diff_keeps_the_sums(kernel, tmp_path):
    a = analyze(REDUCE, kernel, sample_ctas=2, trace=False)
    (f,) = run_rule(a, "GA205")
    assert "distances 32, 16, 8, 4, 2, 1" in f.message
    v = f.variant
    assert v.safety == "automatic-and-verified" and "__shfl_down_sync" in v.diff
    (tmp_path / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    patched = tmp_path / "reduce.cu"
    patched.write_text(apply_unified_diff(REDUCE.read_text(), v.diff))
    b = analyze(patched, kernel, sample_ctas=4, trace=False)
    assert run_rule(b, "GA205") == [] and run_rule(b, "GA203") == []
    got, want = reduction_block_sums(b, 4, 512 if kernel != "reduce3" else 256)
    np.testing.assert_array_equal(got, want)


def test_reported_at_the_combine_of_distance_32():
    a = analyze(REDUCE, "reduce3", sample_ctas=1, trace=False)
    (f,) = run_rule(a, "GA205")
    reduce3 = source_line(REDUCE, "void reduce3(")
    assert f.line == reduce3 + 7  # `if (tid < s) sdata[tid] += sdata[tid + s];` in its loop


@pytest.mark.parametrize("kernel", ["reduce1", "reduce2", "reduce6<256>", "reduce7<256>"])
def test_silent(kernel):
    assert run_rule(analyze(REDUCE, kernel, sample_ctas=1, trace=False), "GA205") == []


@pytest.mark.parametrize(
    ("kernel", "spec", "rules"),
    [
        ("tpl_interleaved<256>", "tpl_interleaved", {"GA202"}),
        ("helper_sequential", "helper_sequential", {"GA204", "GA205"}),
        ("tpl_loop_tail<256>", "tpl_loop_tail", {"GA203", "GA205"}),
    ],
)
def test_other_spellings(kernel, spec, rules):
    a = analyze(STYLES / "styles.cu", kernel, sample_ctas=2, spec=str(STYLES / f"{spec}.toml"))
    got = {f.rule for r in ("GA202", "GA203", "GA204", "GA205") for f in run_rule(a, r)}
    assert got == rules
    for f in run_rule(a, "GA205"):  # the helper accessor and the loop tail are rewritten
        assert f.variant.safety == "automatic-and-verified"


# The kernels the advice chain (benchmarks/advice_chain.py) reaches from reduce1: GA204's first
# add during the load (blocks of 128, a braced `if (tid < s) { ... }` in the loop), and GA206's
# grid-stride int4 accumulation before the tree. GA205 must be offered on both.
CHAIN = """#define BLOCK 256
extern "C" __global__ void after_ga204(const int* __restrict__ in, int* __restrict__ out,
                                       unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (2 * blockDim.x) + threadIdx.x;
    unsigned i_hi = blockIdx.x * (2 * blockDim.x) + (threadIdx.x + blockDim.x);
    sdata[tid] = (i < n ? in[i] : 0) + (i_hi < n ? in[i_hi] : 0);
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

extern "C" __global__ void after_ga206(const int* __restrict__ in, int* __restrict__ out,
                                       unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    int acc = 0;
    const int4* v = reinterpret_cast<const int4*>(in);
    for (unsigned j = blockIdx.x * blockDim.x + threadIdx.x; j < n / 4; j += blockDim.x * gridDim.x) {
        const int4 e = v[j];
        acc += e.x + e.y + e.z + e.w;
    }
    for (unsigned j = n / 4 * 4 + blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += blockDim.x * gridDim.x)
        acc += in[j];
    sdata[tid] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""


@pytest.mark.parametrize(
    ("kernel", "grid", "block"),
    [("after_ga204", "ceil_div(n, 256)", "128"), ("after_ga206", "12", "256")],
)
def test_offered_on_the_chains_kernels(kernel, grid, block, tmp_path):
    src = tmp_path / "chain.cu"
    src.write_text(CHAIN)
    (tmp_path / "case.toml").write_text(
        'seed = 3\n[buffers]\nin = "int[n]"\n'
        'out = { type = "int", count = "ceil_div(n, 256)", fill = "zeros" }\n'
    )
    kw = {"grid": grid, "block": block, "spec": str(tmp_path / "case.toml")}
    a = analyze(src, kernel, "all", ("n=10003",), **kw)
    (f,) = run_rule(a, "GA205", trace_ctas="all")
    assert "distances 32, 16, 8, 4, 2, 1" in f.message
    v = f.variant
    assert v.safety == "automatic-and-verified" and "__shfl_down_sync" in v.diff
    patched = tmp_path / "patched" / "chain.cu"
    patched.parent.mkdir()
    (patched.parent / "case.toml").write_text((tmp_path / "case.toml").read_text())
    patched.write_text(apply_unified_diff(CHAIN, v.diff))
    kw["spec"] = str(patched.parent / "case.toml")
    b = analyze(patched, kernel, "all", ("n=10003",), **kw)
    assert run_rule(b, "GA205", trace_ctas="all") == []
    # the pairs are the tree's own: every CTA's partial is bit-identical
    want, got = a.memory.outputs["out"], b.memory.outputs["out"]
    assert np.count_nonzero(want) > 0
    np.testing.assert_array_equal(got, want)


WARP_TREES = """extern "C" __global__ void warp_tree(const float* in, float* out, unsigned n) {
    __shared__ float sm[32];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    sm[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
        if (t < d) sm[t] += sm[t + d];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sm[0];
}
"""


@pytest.mark.parametrize("block", [32, 16])
def test_a_tree_within_one_warp_is_shuffled_whole(block, tmp_path):
    src = tmp_path / "warp.cu"
    src.write_text(WARP_TREES)
    (tmp_path / "case.toml").write_text(
        f'seed = 5\n[buffers]\nin = "float[n]"\nout = {{ type = "float", count = '
        f'"ceil_div(n, {block})", fill = "zeros" }}\n'
    )
    kw = {"grid": f"ceil_div(n, {block})", "block": str(block), "spec": str(tmp_path / "case.toml")}
    a = analyze(src, "warp_tree", "all", ("n=1000",), **kw)
    (f,) = run_rule(a, "GA205", trace_ctas="all")
    assert "whole tree" in f.message and f"({block} threads)" in f.message
    assert f.line == 8  # the combine of the first step
    v = f.variant
    assert v.safety == "automatic-and-verified", v.description
    assert "for (unsigned offset = blockDim.x / 2; offset > 0" in v.diff
    assert "(1u << blockDim.x) - 1u" in v.diff
    patched = tmp_path / "patched" / "warp.cu"
    patched.parent.mkdir()
    (patched.parent / "case.toml").write_text((tmp_path / "case.toml").read_text())
    patched.write_text(apply_unified_diff(WARP_TREES, v.diff))
    kw["spec"] = str(patched.parent / "case.toml")
    b = analyze(patched, "warp_tree", "all", ("n=1000",), **kw)
    assert run_rule(b, "GA205", trace_ctas="all") == []
    # the pairs are the tree's own: float partials bit-identical
    want, got = a.memory.outputs["out"], b.memory.outputs["out"]
    assert np.count_nonzero(want) > 0
    assert got.tobytes() == want.tobytes()


CHAINED = """
template <class T> struct Shared {
    __device__ T* get() { extern __shared__ int raw[]; return (T*)raw; }
};
template <class T>
__global__ void chained(const T* g_in, T* g_out, unsigned int n) {
    T* sdata = Shared<T>().get();
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    T mySum = (i < n) ? g_in[i] : 0;
    if (i + blockDim.x < n) mySum += g_in[i + blockDim.x];
    sdata[tid] = mySum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = mySum = mySum + sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) g_out[blockIdx.x] = mySum;
}
template __global__ void chained<int>(const int*, int*, unsigned int);
"""


def test_a_tree_that_keeps_its_sum_in_a_register_gets_the_root_there_too(tmp_path):
    """cuda-samples' reduce3 spelling: `sdata[tid] = mySum = mySum + sdata[tid + s]`, and the
    block writes `mySum`, not `sdata[0]`: the shuffled root must reach the register (the H200
    caught the first rewrite: -8 written where -512 was the sum)."""
    src = tmp_path / "chained.cu"
    src.write_text(CHAINED)
    (tmp_path / "case.toml").write_text(
        'seed = 3\ndynamic_smem = 1024\n[buffers]\ng_in = "int[n]"\n'
        'g_out = { type = "int", count = "ceil_div(n, 512)", fill = "zeros" }\n'
    )
    kw = {"grid": "ceil_div(n, 512)", "block": "256", "spec": str(tmp_path / "case.toml")}
    a = analyze(src, "chained<int>", "all", ("n=5000",), **kw)
    (f,) = run_rule(a, "GA205", trace_ctas="all")
    v = f.variant
    assert v.safety == "automatic-and-verified", v.description
    assert "mySum = warp_sum;" in v.diff
    patched = tmp_path / "patched" / "chained.cu"
    patched.parent.mkdir()
    (patched.parent / "case.toml").write_text((tmp_path / "case.toml").read_text())
    patched.write_text(apply_unified_diff(CHAINED, v.diff))
    kw["spec"] = str(patched.parent / "case.toml")
    b = analyze(patched, "chained<int>", "all", ("n=5000",), **kw)
    want, got = a.memory.outputs["g_out"], b.memory.outputs["g_out"]
    assert np.count_nonzero(want) > 0
    assert np.array_equal(got, want)
