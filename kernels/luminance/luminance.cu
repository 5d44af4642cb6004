// Seed 000's luminance reductions (compute-shader parallel reduction, AMD, 2014), ported to CUDA:
// a 1920x1080 RGBA8 frame reduced to 120x68 mean luminances, one block per 16x16-pixel tile.
// Every kernel computes the same result: out[ty * tiles_x + tx] = the tile's mean luminance
// (0..255; pixels below the frame's last row count as black, as the seed's shaders divide by the
// thread count). Luminance is integer fixed point (Rec. 709 weights 0.2125/0.7154/0.0721 scaled
// by 256: 54/183/19), so sums are exact in any order and the mean, sum / 2^16 in float, is exact
// too: every variant gives bit-identical output. w must be a multiple of 16 (rows of whole tiles).
// GA204 (one pixel per thread: half the threads idle from the first step on) marks the sequential
// kernels; the interleaved one is reported for its addressing, as reduce1/2 in kernels/reduction.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define TILE 16
#define TILE_PIXELS (TILE * TILE)

__device__ __forceinline__ unsigned luma(uchar4 p) { return 54u * p.x + 183u * p.y + 19u * p.z; }

// The four pixels of a 16-byte load (RGBA8 each, x in the low byte).
__device__ __forceinline__ unsigned luma4(uint4 v) {
    unsigned s = 0;
    for (unsigned word : {v.x, v.y, v.z, v.w})
        s += 54u * (word & 0xffu) + 183u * ((word >> 8) & 0xffu) + 19u * ((word >> 16) & 0xffu);
    return s;
}

__device__ __forceinline__ float tile_mean(unsigned sum) { return sum * (1.0f / 65536.0f); }

// Reduces v over the 32 lanes of a warp; lane 0 gets the sum.
__device__ __forceinline__ unsigned warp_sum(unsigned v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// 256 threads, one pixel each, interleaved addressing (the seed's first shader).
extern "C" __global__ void lum_interleaved(const uchar4* __restrict__ in, float* __restrict__ out,
                                           int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS];
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + tid % TILE, gy = blockIdx.y * TILE + tid / TILE;
    sm[tid] = gy < (unsigned)h ? luma(in[gy * w + gx]) : 0u;
    __syncthreads();
    for (unsigned s = 1; s < TILE_PIXELS; s *= 2) {
        unsigned index = 2 * s * tid;  // expect: GA202
        if (index < TILE_PIXELS) sm[index] += sm[index + s];  // expect: GA201
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(sm[0]);
}

// 256 threads, one pixel each, sequential addressing: conflict free, but half the threads idle
// from the first step on.
extern "C" __global__ void lum_sequential(const uchar4* __restrict__ in, float* __restrict__ out,
                                          int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS];
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + tid % TILE, gy = blockIdx.y * TILE + tid / TILE;
    sm[tid] = gy < (unsigned)h ? luma(in[gy * w + gx]) : 0u;  // expect: GA204
    __syncthreads();
    for (unsigned s = TILE_PIXELS / 2; s > 0; s >>= 1) {
        if (tid < s) sm[tid] += sm[tid + s];  // expect: GA205
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(sm[0]);
}

// 256 threads, one pixel each, unrolled; the last 64 values without barriers, as the seed wrote it
// ("below the wavefront size a barrier is not necessary"): implicit warp-synchronous code.
extern "C" __global__ void lum_unrolled(const uchar4* __restrict__ in, float* __restrict__ out,
                                        int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS];
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + tid % TILE, gy = blockIdx.y * TILE + tid / TILE;
    sm[tid] = gy < (unsigned)h ? luma(in[gy * w + gx]) : 0u;  // expect: GA204
    __syncthreads();
    if (tid < 128) sm[tid] += sm[tid + 128];
    __syncthreads();
    if (tid < 64) sm[tid] += sm[tid + 64];
    __syncthreads();
    if (tid < 32) {
        volatile unsigned* vs = sm;
        vs[tid] += vs[tid + 32];  // expect: GA203, GA205
        vs[tid] += vs[tid + 16];
        vs[tid] += vs[tid + 8];
        vs[tid] += vs[tid + 4];
        vs[tid] += vs[tid + 2];
        vs[tid] += vs[tid + 1];
    }
    if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(sm[0]);
}

// 128 threads, two neighbouring pixels each added during the load ("pre-fetching two color
// values"), read as the seed did: two 4-byte loads where one 8-byte load would do. (The seed ran
// 64 threads without barriers, one AMD wavefront; four warps need them until one warp is left.)
extern "C" __global__ void lum_prefetch2(const uchar4* __restrict__ in, float* __restrict__ out,
                                         int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS / 2];
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + 2 * (tid % 8), gy = blockIdx.y * TILE + tid / 8;
    const unsigned i = gy * w + gx;
    sm[tid] = gy < (unsigned)h ? luma(in[i]) + luma(in[i + 1]) : 0u;  // expect: GA303
    __syncthreads();
    if (tid < 64) sm[tid] += sm[tid + 64];
    __syncthreads();
    if (tid < 32) {
        unsigned s = warp_sum(sm[tid] + sm[tid + 32]);
        if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(s);
    }
}

// 64 threads, four neighbouring pixels each, as four 4-byte loads.
extern "C" __global__ void lum_prefetch4(const uchar4* __restrict__ in, float* __restrict__ out,
                                         int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS / 4];
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + 4 * (tid % 4), gy = blockIdx.y * TILE + tid / 4;
    const unsigned i = gy * w + gx;
    unsigned v = 0;
    if (gy < (unsigned)h)
        v = luma(in[i]) + luma(in[i + 1]) + luma(in[i + 2]) + luma(in[i + 3]);  // expect: GA303
    sm[tid] = v;
    __syncthreads();
    if (tid < 32) {
        unsigned s = warp_sum(sm[tid] + sm[tid + 32]);
        if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(s);
    }
}

// 64 threads, four neighbouring pixels each in one 16-byte load.
extern "C" __global__ void lum_prefetch4_vec(const uchar4* __restrict__ in,
                                             float* __restrict__ out, int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS / 4];
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + 4 * (tid % 4), gy = blockIdx.y * TILE + tid / 4;
    const uint4* in4 = reinterpret_cast<const uint4*>(in);  // w % 4 == 0: rows are 16-byte aligned
    sm[tid] = gy < (unsigned)h ? luma4(in4[(gy * w + gx) / 4]) : 0u;
    __syncthreads();
    if (tid < 32) {
        unsigned s = warp_sum(sm[tid] + sm[tid + 32]);
        if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(s);
    }
}

// 16 threads (the seed's 4x4 group), sixteen pixels each in four 16-byte loads, no shared memory
// and no barrier: each block fills half a warp, and the 32 blocks an SM holds fill half its warp
// slots with half-idle warps (the seed: "considered not efficient").
extern "C" __global__ void lum_prefetch16(const uchar4* __restrict__ in,  // expect: GA103
                                          float* __restrict__ out, int w, int h) {
    const unsigned tid = threadIdx.x;
    const unsigned gx = blockIdx.x * TILE + 4 * (tid % 4);
    const uint4* in4 = reinterpret_cast<const uint4*>(in);
    unsigned s = 0;
    for (unsigned r = tid / 4; r < TILE; r += 4) {  // rows tid/4, +4, +8, +12
        const unsigned gy = blockIdx.y * TILE + r;
        if (gy < (unsigned)h) s += luma4(in4[(gy * w + gx) / 4]);
    }
    for (int offset = 8; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffu, s, offset);
    if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(s);
}

// 64 threads, four neighbouring pixels each, as four 4-byte loads at a quad index: i = 4 * q is a
// multiple of 4 by construction, so the 16-byte alignment of in[i] is provable (in is a kernel
// parameter from cudaMalloc) and gpuadvise's rewrite to one 16-byte load is automatic.
extern "C" __global__ void lum_prefetch4_quad(const uchar4* __restrict__ in,
                                              float* __restrict__ out, int w, int h) {
    __shared__ unsigned sm[TILE_PIXELS / 4];
    const unsigned tid = threadIdx.x;
    const unsigned gy = blockIdx.y * TILE + tid / 4;
    const unsigned q = gy * (w / 4) + blockIdx.x * (TILE / 4) + tid % 4;  // quads of 4 pixels
    const unsigned i = 4 * q;
    unsigned v = 0;
    if (gy < (unsigned)h)
        v = luma(in[i]) + luma(in[i + 1]) + luma(in[i + 2]) + luma(in[i + 3]);  // expect: GA303
    sm[tid] = v;
    __syncthreads();
    if (tid < 32) {
        unsigned s = warp_sum(sm[tid] + sm[tid + 32]);
        if (tid == 0) out[blockIdx.y * gridDim.x + blockIdx.x] = tile_mean(s);
    }
}
