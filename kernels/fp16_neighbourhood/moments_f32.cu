// Seed 001's fp32 build of the neighbourhood statistics: moments_split (moments.cu) with the
// arithmetic in fp32, as the seed's original shader did it. The same shared-memory layout (the
// half3 radiance in two uint arrays, (r, g) and (b, 0)), each half widened to float after its
// read, and float accumulators. Beside moments_split it reproduces the seed's figure of live
// registers along the instructions, fp32 against fp16 (docs/registers.md): gpuadvise analyze
// kernels/fp16_neighbourhood/case.toml kernels/fp16_neighbourhood/moments_f32.toml --format html.
// Its results differ from the fp16 kernels' in the last bits (fp32 rounding). GA201 marks the
// shared reads: the same 2-way bank conflicts as moments_split's.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#include <cuda_fp16.h>

#define RADIUS 4
#define BLOCK 8
#define TILE (BLOCK + 2 * RADIUS)  // 16

// the Gaussian weight of offset (i, j), in fp32 (moments.cu's weight() before its rounding)
__device__ __forceinline__ float weight32(int i, int j) {
    constexpr float k[RADIUS + 1] = {1.0f, 0.88692044f, 0.61878339f, 0.33959553f, 0.14660696f};
    return k[i < 0 ? -i : i] * k[j < 0 ? -j : j];
}

__device__ __forceinline__ float lo(unsigned bits) {
    return __half2float(__ushort_as_half(bits & 0xffffu));
}
__device__ __forceinline__ float hi(unsigned bits) {
    return __half2float(__ushort_as_half(bits >> 16));
}

extern "C" __global__ void moments_f32(const __half* __restrict__ rgba, float4* __restrict__ mean,
                                       float4* __restrict__ variance, int w, int h) {
    __shared__ unsigned s_rg[TILE][TILE], s_b[TILE][TILE];
    const int x0 = blockIdx.x * BLOCK - RADIUS, y0 = blockIdx.y * BLOCK - RADIUS;
    const uint2* px = reinterpret_cast<const uint2*>(rgba);
    for (unsigned k = threadIdx.y * BLOCK + threadIdx.x; k < TILE * TILE; k += BLOCK * BLOCK) {
        const int gx = min(max(x0 + (int)(k % TILE), 0), w - 1);
        const int gy = min(max(y0 + (int)(k / TILE), 0), h - 1);
        const uint2 p = px[gy * w + gx];
        s_rg[k / TILE][k % TILE] = p.x;
        s_b[k / TILE][k % TILE] = p.y & 0xffffu;
    }
    __syncthreads();
    const int x = blockIdx.x * BLOCK + threadIdx.x, y = blockIdx.y * BLOCK + threadIdx.y;
    if (x >= w || y >= h) return;
    float m_r = 0.0f, m_g = 0.0f, m_b = 0.0f, v_r = 0.0f, v_g = 0.0f, v_b = 0.0f, wsum = 0.0f;
#pragma unroll
    for (int j = -RADIUS; j <= RADIUS; ++j) {
#pragma unroll
        for (int i = -RADIUS; i <= RADIUS; ++i) {
            const unsigned ty = threadIdx.y + RADIUS + j, tx = threadIdx.x + RADIUS + i;
            const unsigned rg = s_rg[ty][tx], b = s_b[ty][tx];  // expect: GA201
            const float r = lo(rg), g = hi(rg), bl = lo(b), wt = weight32(i, j);  // expect: GA405
            m_r = fmaf(r, wt, m_r), v_r = fmaf(r * r, wt, v_r);
            m_g = fmaf(g, wt, m_g), v_g = fmaf(g * g, wt, v_g);
            m_b = fmaf(bl, wt, m_b), v_b = fmaf(bl * bl, wt, v_b);
            wsum += wt;
        }
    }
    const float mr = m_r / wsum, mg = m_g / wsum, mb = m_b / wsum;
    mean[(size_t)y * w + x] = make_float4(mr, mg, mb, 0.0f);
    variance[(size_t)y * w + x] = make_float4(fabsf(v_r / wsum - mr * mr), fabsf(v_g / wsum - mg * mg),
                                              fabsf(v_b / wsum - mb * mb), 0.0f);
}
