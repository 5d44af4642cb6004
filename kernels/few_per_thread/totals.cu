// Reductions over a grid of many waves whose threads each take one or a few elements, then pay a
// per-CTA combine (a shared tree, shared atomics) and a flush (global atomics into totals, or a
// partial per CTA): GA206, the loop run once, the fix a launch of one wave (HeCBench's f16sp,
// bincount, stddev and dp4a). The launches are in <kernel>.toml beside this file.

#define NT 128

// A dot product: a grid-stride loop that runs once per thread, a shared tree, one atomic per CTA.
__global__ void dot_total(const float* a, const float* b, float* result, int n) {
    __shared__ float sh[NT];
    float v = 0.f;
    for (int i = threadIdx.x + blockDim.x * blockIdx.x; i < n; i += gridDim.x * blockDim.x)  // expect: GA206
        v += a[i] * b[i];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];  // expect: GA205
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(result, sh[0]);  // expect: GA208
}

// A privatised histogram (a template, a while loop): each CTA zeroes its bins, counts its
// elements in shared memory and flushes every bin with a global atomic.
template <int BINS>
__global__ void hist_private(const int* in, int* bins, int n) {
    __shared__ int sh[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int step = blockDim.x * gridDim.x;
    while (i < n) {  // expect: GA206
        atomicAdd(&sh[in[i] & (BINS - 1)], 1);
        i += step;
    }
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x) atomicAdd(&bins[b], sh[b]);  // expect: GA208
}
template __global__ void hist_private<256>(const int*, int*, int);

// Column sums of squares over a 2D grid (stddev's sopKernel): blockIdx.y picks 32 columns,
// blockIdx.x eight rows, the loop strides by the rows of the whole x grid (four per thread).
__device__ __forceinline__ int first_row(int per_cta) { return blockIdx.x * per_cta + threadIdx.x / 32; }

__global__ void col_sumsq(const float* __restrict__ data, float* __restrict__ out, int rows,
                          int cols) {
    const int col = blockIdx.y * 32 + threadIdx.x % 32;
    const int stride = 8 * gridDim.x;
    float acc = 0.f;
    for (int r = first_row(8); r < rows; r += stride) {  // expect: GA206
        const float x = data[(size_t)r * cols + col];
        acc += x * x;
    }
    __shared__ float part[32];
    if (threadIdx.x < 32) part[threadIdx.x] = 0.f;
    __syncthreads();
    atomicAdd(&part[threadIdx.x % 32], acc);
    __syncthreads();
    if (threadIdx.x < 32) atomicAdd(&out[col], part[threadIdx.x]);  // expect: GA208
}

// Four consecutive ints per thread and a partial per CTA (dp4a's dot_product2), one-liners.
__global__ void dot4_partials(const int* __restrict__ a, const int* __restrict__ b, int* __restrict__ d, unsigned n) {
    __shared__ int sh[NT];
    int s = 0;
    for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < n; q += gridDim.x * blockDim.x) {  // expect: GA206
#pragma unroll
        for (int k = 0; k < 4; ++k) s += a[q * 4 + k] * b[q * 4 + k];  // expect: GA303
    }
    sh[threadIdx.x] = s; __syncthreads();
    for (int w = NT / 2; w > 0; w >>= 1) { if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w]; __syncthreads(); }  // expect: GA205
    if (threadIdx.x == 0) d[blockIdx.x] = sh[0];
}

// The fixes and look-alikes: GA206 silent (the other rules as marked).

// The dot product launched with one wave (132 SMs x 16 CTAs of 128 threads): the loop runs ~8
// times per thread.
__global__ void dot_total_one_wave(const float* a, const float* b, float* result, int n) {
    __shared__ float sh[NT];
    float v = 0.f;
    for (int i = threadIdx.x + blockDim.x * blockIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += a[i] * b[i];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];  // expect: GA205
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(result, sh[0]);
}

// Eight consecutive ints per thread before the tree: enough work per CTA combine.
__global__ void dot8_partials(const int* __restrict__ a, const int* __restrict__ b, int* __restrict__ d, unsigned n) {
    __shared__ int sh[NT];
    int s = 0;
    for (unsigned q = blockIdx.x * blockDim.x + threadIdx.x; q < n; q += gridDim.x * blockDim.x) {
#pragma unroll
        for (int k = 0; k < 8; ++k) s += a[q * 8 + k] * b[q * 8 + k];  // expect: GA303
    }
    sh[threadIdx.x] = s; __syncthreads();
    for (int w = NT / 2; w > 0; w >>= 1) { if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w]; __syncthreads(); }  // expect: GA205
    if (threadIdx.x == 0) d[blockIdx.x] = sh[0];
}

// Four floats per thread of an element-wise grid-stride kernel: its iterations are the CTAs'
// (nothing to save by a launch change), and four per thread is the fix itself.
__global__ void scale4(const float4* __restrict__ x, float4* __restrict__ y, float a, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
        float4 v = x[i];
        y[i] = make_float4(a * v.x, a * v.y, a * v.z, a * v.w);
    }
}
