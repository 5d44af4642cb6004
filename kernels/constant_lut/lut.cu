// GA206 silent where a __constant__ table indexed by data bounds the launch (HeCBench popcount's
// pc5): each lookup of a warp names up to 32 addresses and the constant cache serves them one at
// a time, far longer than the loads and stores a grid-stride loop would keep in flight; the loop
// leaves those lookups as they are (the table in shared memory is the fix, GA301's). The same
// element-wise kernel without the table (popcount_intrinsic) is GA206's.
// `// expect: GAxxx` marks the line where gpuadvise must report a finding.

__constant__ unsigned char lut[256];

// the lookups written out, one per byte
__global__ void popcount_lut(const unsigned long long* __restrict__ data, int* __restrict__ r,
                             int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long x = data[i];
    unsigned char c1 = lut[x & 0xFF];  // expect: GA301
    unsigned char c2 = lut[(x >> 8) & 0xFF];
    unsigned char c3 = lut[(x >> 16) & 0xFF];
    unsigned char c4 = lut[(x >> 24) & 0xFF];
    unsigned char c5 = lut[(x >> 32) & 0xFF];
    unsigned char c6 = lut[(x >> 40) & 0xFF];
    unsigned char c7 = lut[(x >> 48) & 0xFF];
    unsigned char c8 = lut[(x >> 56) & 0xFF];
    r[i] = (c1 + c2) + (c3 + c4) + (c5 + c6) + (c7 + c8);
}

// the lookups in an unrolled loop over the bytes, the index in a macro
#define BYTE_AT(x, b) (((x) >> (8 * (b))) & 0xFF)
__global__ void popcount_lut_loop(const unsigned long long* __restrict__ data,
                                  int* __restrict__ r, int n) {
    const int tid = threadIdx.x + blockDim.x * blockIdx.x;
    if (tid < n) {
        const unsigned long long x = data[tid];
        int count = 0;
#pragma unroll
        for (int b = 0; b < 8; ++b) count += lut[BYTE_AT(x, b)];  // expect: GA301
        r[tid] = count;
    }
}

// the lookups in a macro over 16-bit halves
#define BITS16(v) (lut[(v) & 0xFF] + lut[((v) >> 8) & 0xFF])
__global__ void popcount_lut_macro(const unsigned long long* __restrict__ data,
                                   int* __restrict__ r, int n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned long long x = data[i];
        r[i] = BITS16(x & 0xFFFF) + BITS16((x >> 16) & 0xFFFF) +  // expect: GA301
               BITS16((x >> 32) & 0xFFFF) + BITS16(x >> 48);
    }
}

// the same count without the table: an element-wise kernel of one element per thread (GA206)
__global__ void popcount_intrinsic(const unsigned long long* __restrict__ data,
                                   int* __restrict__ r, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i >= n) return;
    r[i] = __popcll(data[i]);
}
