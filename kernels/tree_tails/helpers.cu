// Shared trees that sit in a __device__ helper function the kernel calls (f16sp's
// reduceInShared_intrinsics): GA205 reports them at the call and rewrites the helper itself,
// the rest of the file untouched, when this kernel alone calls it. A helper that two kernels
// of different block sizes call stays display-only: a rewrite verified for one launch must not
// change the other kernel.
#include <cuda_fp16.h>

#define THREADS 256
#define SYNC __syncthreads

// 1. A helper taking the shared pointer (`T* const v`), the loop to `i >= 1`, #pragma unroll,
// the barrier last in each step (f16sp's spelling).
__forceinline__ __device__ void reduce_in_shared(float* const v) {
    int lid = threadIdx.x;
#pragma unroll
    for (int i = THREADS / 2; i >= 1; i = i / 2) {
        if (lid < i) v[lid] += v[lid + i];
        __syncthreads();
    }
}

__global__ void helper_ptr(const float* in, float* out, unsigned n) {
    __shared__ float sh[THREADS];
    float v = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += in[i];
    sh[threadIdx.x] = v;
    __syncthreads();
    reduce_in_shared(sh);  // expect: GA205
    if (threadIdx.x == 0) out[blockIdx.x] = sh[0];
}

// 2. A template helper (block size and element type), the barrier first in each step,
// `s[t] = s[t] + s[t + k]`, several declarators; the root read as s[t] under `t == 0`.
template <unsigned B, typename T>
__device__ void tree_tmpl(T* s) {
    const unsigned t = threadIdx.x, half = B / 2;
    for (unsigned k = half; k > 0; k >>= 1) {
        SYNC();
        if (t < k) s[t] = s[t] + s[t + k];
    }
}

template <unsigned B>
__global__ void helper_tmpl(const double* in, double* out, unsigned n) {
    __shared__ double s[B]; unsigned t = threadIdx.x, g = blockIdx.x * B + t;
    double v = 0.0;
    for (; g < n; g += B * gridDim.x) v += in[g];
    s[t] = v;
    tree_tmpl<B>(s);  // expect: GA205
    __syncthreads();
    if (t == 0) out[blockIdx.x] = s[t];
}
template __global__ void helper_tmpl<256>(const double*, double*, unsigned);

// 3. A helper whose tree is a one-line loop over threadIdx.x itself, int sums, blocks of 128.
__device__ void tree_line(int* v) { for (int k = 64; k > 0; k >>= 1) { __syncthreads(); if (threadIdx.x < k) v[threadIdx.x] += v[threadIdx.x + k]; } }

__global__ void helper_line(const int* in, int* out, int n) {
    __shared__ int sv[128]; int v = 0;
    for (int i = blockIdx.x * 128 + threadIdx.x; i < n; i += 128 * gridDim.x) v += in[i];
    sv[threadIdx.x] = v; tree_line(sv); __syncthreads();  // expect: GA205
    if (threadIdx.x == 0) out[blockIdx.x] = sv[0];
}

// 4. f16sp's own: half2 sums by __hadd2 (the shuffles fold with __hadd2 too), blocks of 128.
__forceinline__ __device__ void reduce_half2(half2* const v) {
    int lid = threadIdx.x;
#pragma unroll
    for (int i = 128 / 2; i >= 1; i = i / 2) {
        if (lid < i) v[lid] = __hadd2(v[lid], v[lid + i]);
        __syncthreads();
    }
}

__global__ void helper_half2(const half2* a, float* out, unsigned n) {
    __shared__ half2 sh2[128];
    half2 v = __float2half2_rn(0.f);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v = __hadd2(v, a[i]);
    sh2[threadIdx.x] = v;
    __syncthreads();
    reduce_half2(sh2);  // expect: GA205
    if (threadIdx.x == 0) out[blockIdx.x] = __low2float(sh2[0]) + __high2float(sh2[0]);
}

// Display-only: one helper, two kernels of different block sizes (256 and 128 threads).
__device__ void shared_tree(float* s) {
    unsigned t = threadIdx.x;
    for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }
}

__global__ void shared_wide(const float* in, float* out, unsigned n) {
    __shared__ float s[256];
    float v = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += in[i];
    s[threadIdx.x] = v;
    __syncthreads();
    shared_tree(s);  // expect: GA205
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

__global__ void shared_narrow(const float* in, float* out, unsigned n) {
    __shared__ float s[128];
    float v = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += in[i];
    s[threadIdx.x] = v;
    __syncthreads();
    shared_tree(s);  // expect: GA205
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// Correct: a helper whose tree stops at 64 values and finishes with shuffles.
__device__ float block_sum_shuffled(float* s) {
    unsigned t = threadIdx.x;
    for (unsigned d = blockDim.x / 2; d > 32; d >>= 1) {
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }
    float w = 0.0f;
    if (t < 32) {
        w = s[t] + s[t + 32];
        for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
    }
    return w;
}

__global__ void helper_shuffled(const float* in, float* out, unsigned n) {
    __shared__ float s[THREADS];
    float v = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += in[i];
    s[threadIdx.x] = v;
    __syncthreads();
    float w = block_sum_shuffled(s);
    if (threadIdx.x == 0) out[blockIdx.x] = w;
}
