"""GA202's sequential-addressing rewrite on the fix kit's nodes (issue 28): the same interleaved
tree in spellings the old text patterns missed or broke on (issue 28's one-line declarations
with several declarators and a macro block size, a template block size with the strided index
and its partner in one declaration, a helper function doing the combine with a bit-mask pick and
comments in the loop). Each diff applies, compiles, silences the rule, keeps the comments and
the block sums on the emulator."""

from __future__ import annotations

import numpy as np
import pytest
from rulekit import analyze, kernel_case, reduction_block_sums, run_rule, source_line

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

ONE_LINE = """\
    #define B 256
    __global__ void one(const int* in, int* out, unsigned n) {
        __shared__ int s[B]; unsigned t = threadIdx.x, i = blockIdx.x * B + t;
        s[t] = in[i]; __syncthreads();
        for (unsigned k = 1; k < B; k *= 2) { if (t % (2 * k) == 0) s[t] += s[t + k]; __syncthreads(); }
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
        for (unsigned stride = 1; stride < BLOCK; stride <<= 1) {
            unsigned index = 2 * stride * tid, partner = index + stride;  // one declaration
            if (index < BLOCK) {
                buf[index] += buf[partner];
            }
            __syncthreads();
        }
        if (tid == 0) out[blockIdx.x] = buf[0];
    }
    template __global__ void tmpl<256>(const int*, int*, unsigned);
"""

HELPER = """\
    #define THREADS 128
    __device__ __forceinline__ void combine(int* a, unsigned i, unsigned j) { a[i] += a[j]; }

    __global__ void helper(const int* in, int* out, unsigned n) {
        __shared__ int sm[THREADS];
        unsigned lane = threadIdx.x;
        sm[lane] = in[blockIdx.x * THREADS + lane];
        __syncthreads();
        // interleaved: every other thread, then every fourth...
        for (unsigned s = 1; s < THREADS; s = s * 2) {
            if ((lane & (2 * s - 1)) == 0)  // the pick
                combine(sm, lane, lane + s);
            __syncthreads();
        }
        if (lane == 0) out[blockIdx.x] = sm[0];
    }
"""

CASES = {
    # kernel: (code, block, the pattern's line, its form, the rewritten loop, what stays)
    "one": (
        ONE_LINE,
        256,
        "for (unsigned k = 1;",
        "modulo",
        "for (unsigned k = B / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k];",
        ["unsigned t = threadIdx.x, i = blockIdx.x * B + t;"],
    ),
    "tmpl<256>": (
        TEMPLATE,
        256,
        "unsigned index = 2 * stride * tid",
        "strided-index",
        "for (unsigned stride = BLOCK / 2; stride > 0; stride >>= 1) {",
        [
            "unsigned partner = tid + stride;  // one declaration",
            "if (tid < stride) {",
            "buf[tid] += buf[partner];",
        ],
    ),
    "helper": (
        HELPER,
        128,
        "if ((lane & (2 * s - 1)) == 0)",
        "modulo",
        "for (unsigned s = THREADS / 2; s > 0; s >>= 1) {",
        ["if (lane < s)  // the pick", "// interleaved: every other thread, then every fourth..."],
    ),
}


@pytest.mark.parametrize("kernel", sorted(CASES))
def test_rewrite_applies_compiles_and_keeps_the_sums(kernel, tmp_path):
    code, block, line, form, loop, kept = CASES[kernel]
    src = kernel_case(tmp_path, code, kernel, block=block, n=4 * block)
    a = analyze(src, kernel, trace=False)
    (f,) = run_rule(a, "GA202")
    assert f.line == source_line(src, line)
    assert f.evidence[0].value == form
    assert f.variant is not None and f.variant.diff
    new = apply_unified_diff(src.read_text(), f.variant.diff)
    assert loop in new
    for text in kept:
        assert text in new
    src.write_text(new)
    b = analyze(src, kernel, trace=False)
    assert run_rule(b, "GA202") == []
    got, want = reduction_block_sums(b, 4, block)
    np.testing.assert_array_equal(got, want)
