"""GA203's shuffle rewrite on the fix kit's nodes (issue 28): the volatile last-warp steps in
three spellings the old line-based rewrite refused or missed (issue 28's one-line declarations
with the tail two lines of three steps each; a template block size, a ``warpSize`` guard and the
volatile pointer declared beside another variable, with comments on the steps; a macro block
size with a helper load, ``<= 31`` and ``32u`` offsets). Each diff applies, compiles, silences
the rule, keeps the comments and the block sums on the emulator."""

from __future__ import annotations

import numpy as np
import pytest
from rulekit import analyze, kernel_case, reduction_block_sums, run_rule

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

ONE_LINE = """\
    #define B 256
    __global__ void one(const int* in, int* out, unsigned n) {
        __shared__ int s[B]; unsigned t = threadIdx.x, i = blockIdx.x * B + t;
        s[t] = in[i]; __syncthreads();
        for (unsigned k = B / 2; k > 32; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
        if (t < 32) { volatile int* v = s; v[t] += v[t + 32]; v[t] += v[t + 16]; v[t] += v[t + 8];
                      v[t] += v[t + 4]; v[t] += v[t + 2]; v[t] += v[t + 1]; }
        if (t == 0) out[blockIdx.x] = s[0];
    }
"""

TEMPLATE = """\
    template <unsigned BLOCK>
    __global__ void tmpl(const int* in, int* out, unsigned n) {
        __shared__ int buf[BLOCK];
        const unsigned tid = threadIdx.x;
        buf[tid] = in[blockIdx.x * BLOCK + tid];
        __syncthreads();
        for (unsigned s = BLOCK / 2; s > 32; s >>= 1) {
            if (tid < s) buf[tid] += buf[tid + s];
            __syncthreads();
        }
        if (tid < warpSize) {
            int last = 0, *unused = nullptr; volatile int *vs = &buf[0];
            vs[tid] += vs[tid + 32];  // 64 values to 32
            vs[tid] += vs[tid + 16];
            vs[tid] += vs[tid + 8];
            vs[tid] += vs[tid + 4];
            vs[tid] += vs[tid + 2];
            vs[tid] += vs[tid + 1];  // the root
            (void)last; (void)unused;
        }
        if (tid == 0) out[blockIdx.x] = buf[0];
    }
    template __global__ void tmpl<256>(const int*, int*, unsigned);
"""

HELPER = """\
    #define THREADS 128
    __device__ int fetch(const int* p, unsigned i, unsigned n) { return i < n ? p[i] : 0; }

    __global__ void helper(const int* in, int* out, unsigned n) {
        __shared__ int sm[THREADS];
        unsigned lane = threadIdx.x;
        sm[lane] = fetch(in, blockIdx.x * THREADS + lane, n);
        __syncthreads();
        if (lane < 64) sm[lane] += sm[lane + 64];
        __syncthreads();
        if (lane <= 31) {
            volatile int* w = (volatile int*)sm;
            w[lane] += w[lane + 32u];
            w[lane] += w[lane + 16u];
            w[lane] += w[lane + 8u];
            w[lane] += w[lane + 4u];
            w[lane] += w[lane + 2u];
            w[lane] += w[lane + 1u];
        }
        if (lane == 0) out[blockIdx.x] = sm[0];
    }
"""

CASES = {
    # kernel: (code, block, what the rewrite writes, what stays as written)
    "one": (ONE_LINE, 256, "int sum = s[t] + s[t + 32];", ["unsigned t = threadIdx.x, i = "]),
    "tmpl<256>": (
        TEMPLATE,
        256,
        "if (tid == 0) buf[0] = sum;",
        ["// 64 values to 32", "// the root", "int last = 0, *unused = nullptr;"],
    ),
    "helper": (HELPER, 128, "int sum = sm[lane] + sm[lane + 32];", ["if (lane <= 31) {"]),
}


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_rewrite_applies_compiles_and_keeps_the_sums(kernel, tmp_path):
    code, block, wrote, kept = CASES[kernel]
    src = kernel_case(tmp_path, code, kernel, block=block, n=4 * block)
    a = analyze(src, kernel, trace=False)
    (f,) = run_rule(a, "GA203")
    assert f.evidence[0].value == 6
    assert f.variant is not None and f.variant.diff, f.variant
    new = apply_unified_diff(src.read_text(), f.variant.diff)
    assert wrote in new and "__shfl_down_sync(0xffffffffu, sum, offset)" in new
    assert "volatile" not in new
    for text in kept:
        assert text in new
    src.write_text(new)
    b = analyze(src, kernel, trace=False)
    assert run_rule(b, "GA203") == []
    got, want = reduction_block_sums(b, 4, block)
    np.testing.assert_array_equal(got, want)
