// Narrow loads in block-stride loops that reduce (GA303's rewrite with an order-free reduction,
// gpuadvise.source.fixkit_reduce): a CTA per row of 10,000 floats, each thread walking the row one
// 4-byte load per iteration into a count, a sum or a maximum that the block then combines. Taking
// 4 consecutive floats per thread with one 16-byte load changes which elements each thread
// reduces, not the block's total: integer sums, counts and maxima are exact in any order. Three
// spellings: a macro stride with an `unsigned` index and `++`, a one-line `+=` of a comparison, a
// braced `fmaxf` at a row offset; also a float sum (equal within the launch's tolerance). A
// running count stored per element (a prefix, not a reduction) gets no finding at these sizes
// (the rewrite would refuse it: tests/rules/test_rule_ga303_reduce.py); the float4 version is
// silent. The variants measured on an H200: count_above 1.72x, row_max 1.68x
// (docs/data/ga303_reduce_h200_2026-11-30.txt).

#define ROW_STRIDE blockDim.x

// the block's count in shared memory, then one atomic per CTA
__device__ __forceinline__ void add_block(int v, int* out)
{
    __shared__ int part[256];
    part[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int t = 0; t < blockDim.x; ++t) s += part[t];
        atomicAdd(out, s);
    }
}

// how many entries of each row beat a threshold: a macro stride, an unsigned index, `++`
__global__ void count_above(const float* __restrict__ x, int* __restrict__ hits, unsigned d,
                            float t)
{
    const unsigned long base = (unsigned long)blockIdx.x * d;
    int n = 0;
    for (unsigned c = threadIdx.x; c < d; c += ROW_STRIDE) {
        if (x[base + c] > t)  // expect: GA303
            n++;
    }
    add_block(n, hits);
}

// the same as a one-liner: the comparison's 0 or 1 added with `+=`
__global__ void count_above_inline(const float* __restrict__ x, int* __restrict__ hits, int d,
                                   float t)
{
    int n = 0;
    for (int c = threadIdx.x; c < d; c += blockDim.x) n += x[(long)blockIdx.x * d + c] > t;  // expect: GA303
    add_block(n, hits);
}

// each row's largest entry: `m = fmaxf(m, v)` (exact in any order), the row as a pointer offset
__global__ void row_max(const float* __restrict__ x, float* __restrict__ best, int d)
{
    __shared__ float part[256];
    const int row = blockIdx.x;
    float m = -1.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        const float v = x[row * d + c];  // expect: GA303
        m = fmaxf(m, v);
    }
    part[threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int t = 1; t < blockDim.x; ++t) m = fmaxf(m, part[t]);
        best[row] = m;
    }
}

// each row's sum of squares in float: the reordered sum rounds otherwise, equal within the launch's
// tolerance (rtol 1e-4)
__global__ void row_energy(const float* __restrict__ x, float* __restrict__ energy, int d)
{
    __shared__ float part[256];
    float s = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        const float v = x[(size_t)blockIdx.x * d + c];  // expect: GA303
        s += v * v;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int t = 1; t < blockDim.x; ++t) s += part[t];
        energy[blockIdx.x] = s;
    }
}

// display-only: a running count stored per element (a prefix, not a reduction)
__global__ void running_count(const float* __restrict__ x, int* __restrict__ seen, int d, float t)
{
    int n = 0;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        n += x[(long)blockIdx.x * d + c] > t;
        seen[(long)blockIdx.x * d + c] = n;
    }
}

// silent: float4 loads, four entries per thread and iteration (d a multiple of 4)
__global__ void count_above_float4(const float* __restrict__ x, int* __restrict__ hits, int d,
                                   float t)
{
    const float4* r = reinterpret_cast<const float4*>(x + (long)blockIdx.x * d);
    int n = 0;
    for (int c = threadIdx.x; c < d / 4; c += blockDim.x) {
        const float4 v = r[c];
        n += (v.x > t) + (v.y > t) + (v.z > t) + (v.w > t);
    }
    add_block(n, hits);
}
