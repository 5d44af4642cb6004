// GA401 case: local-memory traffic, from register spills and from a local array.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
//
// moments_capped / moments: the power sums x^1 .. x^32 of every column of a rows x n matrix (the
// raw moments behind a column's statistics), one thread per column. The 32 running sums live in
// registers: 48 of them per thread. __launch_bounds__(256, 8) asks for 8 blocks of 256 threads
// per SM, which allows 65536 / 2048 = 32 registers: ptxas spills the sums to local memory inside
// the row loop. moments is the same code without the bound: 48 registers, no spills, 5 blocks per
// SM (62.5 % occupancy). The grid (660 CTAs, 5 per SM) fits one wave of either.

#define ORDERS 32

extern "C" __global__ void __launch_bounds__(256, 8) moments_capped(  // expect: GA401
    const float* __restrict__ x, float* __restrict__ m, int rows, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    float acc[ORDERS];
#pragma unroll
    for (int k = 0; k < ORDERS; ++k) acc[k] = 0.0f;
    for (int r = 0; r < rows; ++r) {
        float v = x[r * n + col];
        float p = v;
#pragma unroll
        for (int k = 0; k < ORDERS; ++k) {
            acc[k] += p;
            p *= v;
        }
    }
#pragma unroll
    for (int k = 0; k < ORDERS; ++k) m[k * n + col] = acc[k];
}

extern "C" __global__ void moments(const float* __restrict__ x, float* __restrict__ m, int rows,
                                   int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    float acc[ORDERS];
#pragma unroll
    for (int k = 0; k < ORDERS; ++k) acc[k] = 0.0f;
    for (int r = 0; r < rows; ++r) {
        float v = x[r * n + col];
        float p = v;
#pragma unroll
        for (int k = 0; k < ORDERS; ++k) {
            acc[k] += p;
            p *= v;
        }
    }
#pragma unroll
    for (int k = 0; k < ORDERS; ++k) m[k * n + col] = acc[k];
}

// hist_local / hist_unrolled: a 16-bin histogram of in[i] & 15, one private histogram per thread
// (grid-stride loop), merged with atomics. bins[in[i] & 15] is indexed by the data, so the array
// cannot live in registers: it is a 64-byte local-memory array (not a spill), read and written in
// the loop. hist_unrolled adds (v == b) to every bin in a fully unrolled loop: constant indices,
// so the bins stay in registers.

#define BINS 16

extern "C" __global__ void hist_local(const int* __restrict__ in, unsigned* __restrict__ out,
                                      int n) {
    unsigned bins[BINS];  // expect: GA401
    for (int b = 0; b < BINS; ++b) bins[b] = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        bins[in[i] & (BINS - 1)] += 1;
    // every thread adds its 16 bins to the same 16 words: GA208 (the L2 takes a 512-byte region's
    // requests one after another)
    for (int b = 0; b < BINS; ++b) atomicAdd(&out[b], bins[b]);  // expect: GA208
}

extern "C" __global__ void hist_unrolled(const int* __restrict__ in, unsigned* __restrict__ out,  // expect: GA106
                                         int n) {  // GA106: 16 of 64 warps/SM, one load waited per step
    unsigned bins[BINS];
#pragma unroll
    for (int b = 0; b < BINS; ++b) bins[b] = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int v = in[i] & (BINS - 1);
#pragma unroll
        for (int b = 0; b < BINS; ++b) bins[b] += (v == b);
    }
#pragma unroll
    for (int b = 0; b < BINS; ++b) atomicAdd(&out[b], bins[b]);  // expect: GA208
}
