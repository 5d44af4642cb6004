"""GA205's shuffle rewrite on the fix kit's nodes (issue 28): one halving tree in three more
spellings (issue 28's one line with several declarators and a macro block size, the loop on one
line too; a template block size with the header over two lines, a comment in it and the sum
spelled ``a[t] = a[t] + a[t + s]``; a macro block size with a helper load, a signed stride,
``s >= 1`` and a comment on the combine). Each diff applies, compiles, silences GA205 and GA203
and keeps the block sums on the emulator."""

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
        for (unsigned k = B / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
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
        for (unsigned s = BLOCK / 2;  // halving
             s > 0; s >>= 1) {
            if (tid < s)
                buf[tid] = buf[tid] + buf[tid + s];
            __syncthreads();
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
        for (int s = THREADS / 2; s >= 1; s /= 2) {
            if (lane < s) sm[lane] += sm[lane + s];  // the combine
            __syncthreads();
        }
        if (lane == 0) out[blockIdx.x] = sm[0];
    }
"""

CASES = {
    # kernel: (code, block, the loop's new condition, what stays as written)
    "one": (ONE_LINE, 256, "k > 32", ["unsigned t = threadIdx.x, i = blockIdx.x * B + t;"]),
    "tmpl<256>": (TEMPLATE, 256, "s > 32", ["for (unsigned s = BLOCK / 2;  // halving"]),
    "helper": (HELPER, 128, "s > 32", ["if (lane < s) sm[lane] += sm[lane + s];  // the combine"]),
}


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_rewrite_applies_compiles_and_keeps_the_sums(kernel, tmp_path):
    code, block, cond, kept = CASES[kernel]
    src = kernel_case(tmp_path, code, kernel, block=block, n=4 * block)
    a = analyze(src, kernel, sample_ctas=2, trace=False)
    (f,) = run_rule(a, "GA205")
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    new = apply_unified_diff(src.read_text(), v.diff)
    assert cond in new and "__shfl_down_sync(0xffffffffu, warp_sum, offset)" in new
    for text in kept:
        assert text in new
    src.write_text(new)
    b = analyze(src, kernel, sample_ctas=4, trace=False)
    assert run_rule(b, "GA205") == [] and run_rule(b, "GA203") == []
    got, want = reduction_block_sums(b, 4, block)
    np.testing.assert_array_equal(got, want)
