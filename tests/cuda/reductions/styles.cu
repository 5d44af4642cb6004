// Tree reductions in spellings the source patterns do not read: a template block size, `t`/`k`
// names, one-line loops, a macro, an extern-shared helper accessor. Written for gpuadvise's tests
// (tests/model/test_reduction.py, tests/rules/test_rule_ga205.py); launched with 256 threads.
#define SUM_STEP(a, i, k) a[i] = a[i] + a[(i) + (k)]

template <class T> struct Smem {
    __device__ operator T*() { extern __shared__ int raw[]; return (T*)raw; }
};

// interleaved (divergent), template block size, one-line loop
template <unsigned B>
__global__ void tpl_interleaved(const int* in, int* out, unsigned n) {
    __shared__ int a[B];
    unsigned t = threadIdx.x, g = blockIdx.x * B + t;
    a[t] = g < n ? in[g] : 0; __syncthreads();
    for (unsigned k = 1; k < B; k <<= 1) { if ((t & (2 * k - 1)) == 0) SUM_STEP(a, t, k); __syncthreads(); }
    if (t == 0) out[blockIdx.x] = a[0];
}
template __global__ void tpl_interleaved<256>(const int*, int*, unsigned);

// sequential, helper accessor, one element per thread, loop to 1 with a barrier each step
__global__ void helper_sequential(const float* in, float* out, unsigned n) {
    float* a = Smem<float>();
    unsigned t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    a[t] = g < n ? in[g] : 0.0f;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) a[t] += a[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = a[0];
}

// a warp-synchronous tail written as a loop (no volatile, no __syncwarp): a race since Volta
template <unsigned B>
__global__ void tpl_loop_tail(const int* in, int* out, unsigned n) {
    __shared__ int a[B];
    unsigned t = threadIdx.x, g = blockIdx.x * B * 2 + t;
    a[t] = (g < n ? in[g] : 0) + (g + B < n ? in[g + B] : 0);
    __syncthreads();
    for (unsigned k = B / 2; k > 32; k >>= 1) { if (t < k) a[t] += a[t + k]; __syncthreads(); }
    if (t < 32) {
        volatile int* v = a;
#pragma unroll
        for (unsigned k = 32; k > 0; k >>= 1) v[t] = v[t] + v[t + k];
    }
    if (t == 0) out[blockIdx.x] = a[0];
}
template __global__ void tpl_loop_tail<256>(const int*, int*, unsigned);
