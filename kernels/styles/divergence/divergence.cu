// Branch divergence in other people's spellings (GA104: active lanes per executed warp
// instruction low, with the branch that splits the warp): a causal mask whose rows run loops of
// different lengths, an even/odd split by lane, and a data-dependent branch. All loop over the
// array grid-stride. The uniform kernel must stay silent for GA104 (the loops are GA405's).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// causal attention row (llm.c's attention_softmax_kernel1 spelling): row t sums t + 1 scores
__global__ void causal_rows(const float* __restrict__ att, float* __restrict__ out, int rows, int T) {
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < rows; idx += blockDim.x * gridDim.x) {
        const int t = idx % T;
        const float* row = att + (size_t)idx * T;
        float s = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) s += row[t2];  // expect: GA104, GA301, GA303
        out[idx] = s;
    }
}

// even lanes take the long path, odd ones the short one (template trip count, `lane`)
template <int ITERS>
__global__ void even_odd(const float* __restrict__ in, float* __restrict__ out, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const unsigned lane = threadIdx.x & 31;
        float v = in[i];
        if (lane % 2 == 0) {  // expect: GA104
            #pragma unroll 1
            for (int k = 0; k < ITERS; ++k) v = v * 1.0001f + 0.5f;  // expect: GA405
        } else {
            v = -v;
        }
        out[i] = v;
    }
}
template __global__ void even_odd<64>(const float*, float*, unsigned);

// the branch depends on the data: about half the lanes of every warp iterate
__global__ void data_branch(const float* __restrict__ x, float* __restrict__ y, int n) {
    cg::grid_group g = cg::this_grid();
    for (int k = g.thread_rank(); k < n; k += g.size()) {
        float v = x[k];
        if (v > 0.0f) {  // expect: GA104
            #pragma unroll 1
            for (int it = 0; it < 64; ++it) v = sqrtf(v * v + 1.0f);  // expect: GA405
        }
        y[k] = v;
    }
}

// correct: every lane does the same work
__global__ void uniform_work(const float* __restrict__ x, float* __restrict__ y, int n) {
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += blockDim.x * gridDim.x) {
        float v = x[k];
        #pragma unroll 1
        for (int it = 0; it < 64; ++it) v = sqrtf(v * v + 1.0f);  // expect: GA405
        y[k] = v;
    }
}
