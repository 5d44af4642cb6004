// Shared trees whose last steps GA205 turns into warp shuffles beyond the plain top-level loop
// (issue 28): a barrier at the top of each step, so the step at distance 64 is not yet synced when
// the loop ends, and the root read as s[tid] under `tid == 0` (BabelStream's dot); a tree per
// vector, row or segment inside an outer loop, its step run by a block-stride loop
// (cuda-samples' scalarProd). The diffs add a barrier before the shuffles where the loop's last
// statement is not one; the pairs stay the tree's own, so the sums come out bit-identical.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define THREADS 256
#define BARRIER() __syncthreads()

// 1. BabelStream's dot_kernel: the barrier first in each step, the root read as tb[li].
__global__ void dot_top_barrier(const float* a, const float* b, float* sum, int n) {
    __shared__ float tb[THREADS];
    const size_t li = threadIdx.x;
    tb[li] = 0.0f;
    for (int i = blockDim.x * blockIdx.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        tb[li] += a[i] * b[i];
    for (int off = blockDim.x / 2; off > 0; off /= 2) {
        __syncthreads();
        if (li < off) {
            tb[li] += tb[li + off];  // expect: GA205
        }
    }
    if (li == 0)
        sum[blockIdx.x] = tb[li];
}

// 2. A template block size, the loop on one line with a barrier macro first, `s[t] = s[t] + ...`,
// the root read under `!t`.
template <unsigned B>
__global__ void top_barrier_tmpl(const float* in, float* out, unsigned n) {
    __shared__ float s[B]; unsigned t = threadIdx.x, i = blockIdx.x * B + t;
    s[t] = i < n ? in[i] : 0.0f;  // expect: GA204
    for (unsigned k = B / 2; k > 0; k >>= 1) { BARRIER(); if (t < k) s[t] = s[t] + s[t + k]; }  // expect: GA205
    if (!t) out[blockIdx.x] = s[t];
}
template __global__ void top_barrier_tmpl<256>(const float*, float*, unsigned);

// 3. A signed stride from `blockDim.x >> 1` to `s >= 1`, a grid-stride fill, `0 == tid`.
__global__ void top_barrier_signed(const float* in, float* out, unsigned n) {
    __shared__ float sm[THREADS];
    int tid = threadIdx.x;
    float v = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) v += in[i];
    sm[tid] = v;
    for (int s = blockDim.x >> 1; s >= 1; s >>= 1) {
        __syncthreads();
        if (tid < s) sm[tid] += sm[tid + s];  // expect: GA205
    }
    if (0 == tid) out[blockIdx.x] = sm[tid];
}

// 4. cuda-samples' scalarProdGPU: a tree per vector, its step a block-stride loop, cg::sync first.
#define ACCUM_N 512
__global__ void per_vector_cg(float* d_C, const float* d_A, const float* d_B, int vectorN,
                              int elementN) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float acc[ACCUM_N];
    for (int vec = blockIdx.x; vec < vectorN; vec += gridDim.x) {
        int base = vec * elementN, end = base + elementN;
        for (int j = threadIdx.x; j < ACCUM_N; j += blockDim.x) {
            float sum = 0;
            for (int pos = base + j; pos < end; pos += ACCUM_N) sum += d_A[pos] * d_B[pos];
            acc[j] = sum;
        }
        for (int stride = ACCUM_N / 2; stride > 0; stride >>= 1) {
            cg::sync(cta);
            for (int j = threadIdx.x; j < stride; j += blockDim.x)
                acc[j] += acc[stride + j];  // expect: GA205
        }
        cg::sync(cta);
        if (threadIdx.x == 0) d_C[vec] = acc[0];
    }
}

// 5. A tree per row of a matrix (template block size, an alias of the thread index), the
// barrier last in each step, the block-stride step spelled `s[q] = s[q] + s[q + d]` (a stride
// from B / 2 would be unrolled whole, and nvcc merges the last step's two loads into one).
template <unsigned B>
__global__ void per_row_tmpl(const float* m, float* rows, unsigned nrows, unsigned ncols) {
    __shared__ float s[B];
    const unsigned tid = threadIdx.x;
    for (unsigned r = blockIdx.x; r < nrows; r += gridDim.x) {
        float v = 0.0f;
        for (unsigned c = tid; c < ncols; c += B) v += m[r * ncols + c];
        s[tid] = v;
        __syncthreads();
        for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
            for (unsigned q = tid; q < d; q += blockDim.x)
                s[q] = s[q] + s[q + d];  // expect: GA205
            __syncthreads();
        }
        if (tid == 0) rows[r] = s[0];
        __syncthreads();
    }
}
template __global__ void per_row_tmpl<256>(const float*, float*, unsigned, unsigned);

// 6. A tree per segment inside a while loop, on few lines, int sums.
__global__ void per_segment_while(const int* in, int* out, int segs, int len) {
    __shared__ int sm[128]; int seg = blockIdx.x;
    while (seg < segs) {
        int v = 0; for (int k = threadIdx.x; k < len; k += 128) v += in[seg * len + k]; sm[threadIdx.x] = v;
        for (int s = 64; s > 0; s >>= 1) { __syncthreads(); for (int j = threadIdx.x; j < s; j += blockDim.x) sm[j] += sm[j + s]; }  // expect: GA205
        __syncthreads(); if (threadIdx.x == 0) out[seg] = sm[0]; __syncthreads(); seg += gridDim.x;
    }
}

// Correct: a tree per vector that stops at 64 values and finishes with shuffles.
__global__ void per_vector_shuffled(float* d_C, const float* d_A, const float* d_B, int vectorN,
                                    int elementN) {
    __shared__ float acc[THREADS];
    for (int vec = blockIdx.x; vec < vectorN; vec += gridDim.x) {
        float sum = 0;
        for (int pos = vec * elementN + threadIdx.x; pos < (vec + 1) * elementN; pos += THREADS)
            sum += d_A[pos] * d_B[pos];
        acc[threadIdx.x] = sum;
        for (int stride = THREADS / 2; stride > 32; stride >>= 1) {
            __syncthreads();
            if (threadIdx.x < stride) acc[threadIdx.x] += acc[threadIdx.x + stride];
        }
        __syncthreads();
        if (threadIdx.x < 32) {
            float w = acc[threadIdx.x] + acc[threadIdx.x + 32];
            for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
            if (threadIdx.x == 0) d_C[vec] = w;
        }
        __syncthreads();
    }
}
