// GA101 case: occupancy limited by shared memory. Each block copies a lookup table into shared
// memory, then maps 4 elements per thread through it (in[] holds 0, 1, 2 ...: conflict-free).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define PER_THREAD 4

// 12288 floats = 48 KB of shared memory per block: 4 blocks per H100 SM, 25 % occupancy
extern "C" __global__ void lut_big(const unsigned* __restrict__ in,  // expect: GA101
                                   const float* __restrict__ table, float* __restrict__ out,
                                   unsigned n) {
    __shared__ float lut[12288];
    for (unsigned k = threadIdx.x; k < 12288u; k += blockDim.x) lut[k] = table[k];
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x * PER_THREAD + threadIdx.x;
    for (int j = 0; j < PER_THREAD; ++j, i += blockDim.x)
        if (i < n) out[i] = lut[in[i] % 12288u];
}

// 2048 floats = 8 KB per block: 16 blocks per SM, 100 % occupancy
extern "C" __global__ void lut_small(const unsigned* __restrict__ in,
                                     const float* __restrict__ table, float* __restrict__ out,
                                     unsigned n) {
    __shared__ float lut[2048];
    for (unsigned k = threadIdx.x; k < 2048u; k += blockDim.x) lut[k] = table[k];
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x * PER_THREAD + threadIdx.x;
    for (int j = 0; j < PER_THREAD; ++j, i += blockDim.x)
        if (i < n) out[i] = lut[in[i] % 2048u];
}
