// Shared-memory atomics: contended (GA207) and not. Each kernel writes one value per CTA.

// A CTA-wide sum into one __shared__ float (HeCBench's expdist): 32 lanes per address.
__global__ void cta_sum(const float* x, float* out) {
    __shared__ float sum;
    if (threadIdx.x == 0) sum = 0.f;
    __syncthreads();
    float v = __expf(-x[blockIdx.x * blockDim.x + threadIdx.x]);
    atomicAdd(&sum, v);  // expect: GA207
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// The fix: a shuffle reduction in each warp, then one atomic per warp (silent).
__global__ void cta_sum_warp(const float* x, float* out) {
    __shared__ float sum;
    if (threadIdx.x == 0) sum = 0.f;
    __syncthreads();
    float w = __expf(-x[blockIdx.x * blockDim.x + threadIdx.x]);
    for (int o = 16; o > 0; o /= 2) w += __shfl_down_sync(0xffffffffu, w, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&sum, w);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// A histogram of 8 bins weighted by the data: about 4 lanes per bin.
__global__ void bins8(const int* data, int* out) {
    __shared__ int h[8];
    unsigned t = threadIdx.x;
    if (t < 8) h[t] = 0;
    __syncthreads();
    int v = data[blockIdx.x * blockDim.x + t];
    atomicAdd(&h[v & 7], v >> 3);  // expect: GA207
    __syncthreads();
    if (t < 8) out[blockIdx.x * 8 + t] = h[t];
}

// A maximum through a macro, a template block size. Silent: ptxas aggregates it (REDUX.MAX, one lane's ATOMS.MAX [UR]).
#define KEEP_MAX(where, v) atomicMax((where), (v))

template <int B>
__global__ void block_max(const int* __restrict__ in, int* __restrict__ out) {
    __shared__ int m;
    if (threadIdx.x == 0) m = -2147483647 - 1;
    __syncthreads();
    for (int k = 0; k < 4; ++k) KEEP_MAX(&m, in[(blockIdx.x * 4 + k) * B + threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = m;
}
template __global__ void block_max<256>(const int* __restrict__, int* __restrict__);

// Silent: an increment whose result is unused (ATOMS.POPC.INC: one update per address).
__global__ void count_positive(const float* x, int* out) {
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    if (x[blockIdx.x * blockDim.x + threadIdx.x] > 0.f) atomicAdd(&count, 1);
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = count;
}

// Silent: one address per lane.
__global__ void per_lane(const float* x, float* out) {
    __shared__ float s[256];
    s[threadIdx.x] = 0.f;
    __syncthreads();
    atomicAdd(&s[threadIdx.x], x[blockIdx.x * blockDim.x + threadIdx.x]);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
}
