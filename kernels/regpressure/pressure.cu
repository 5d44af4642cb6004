// GA403 case: values loaded before a register-heavy loop and read only after it. Each thread owns
// one column of an n-column problem: an 8x6 tile of accumulators summed over k steps (x holds k*8
// rows, w k*6 weights, read by every thread alike), then scaled and offset per column by the
// float4s scale[col] and bias[col] in the epilogue. Loaded before the loop, the 8 floats of scale
// and bias stay live through it: 80 registers per thread, 6 blocks of 128 threads per H100 SM
// (24 of 64 warps). Loaded after it: 72 registers, 7 blocks (28 warps). Every kernel writes the
// same y for the same launch.
//   tile_early        the loads in a declaration before the loop
//   tile_helper       the same through a helper that returns both (inlined at its call)
//   tile_macro<8, 6>  a template tile, the loads spelled through a macro, one statement each
//   tile_late         the loads after the loop (the fix): nothing held across the peak but the
//                     tile itself, which GA403 does not report
//   tile_small        a 4x4 tile: registers do not limit occupancy
// GA303 marks the weights: 6 scalar loads where 8-byte ones would do (the compiler cannot know
// w + p * 6 is 8-byte aligned).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define TM 8
#define TN 6

__device__ __forceinline__ float lane(float4 v, int j) {
    return (j & 3) == 0 ? v.x : (j & 3) == 1 ? v.y : (j & 3) == 2 ? v.z : v.w;
}

// y[col] = sum over the tile of acc[i][j] * scale[col][j % 4] + bias[col][i % 4]
template <int M, int N>
__device__ __forceinline__ float epilogue(const float (&acc)[M][N], float4 s, float4 b) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < M; ++i)
#pragma unroll
        for (int j = 0; j < N; ++j) sum += acc[i][j] * lane(s, j) + lane(b, i);
    return sum;
}

extern "C" __global__ void tile_early(const float* __restrict__ x,  // expect: GA101
                                      const float* __restrict__ w,
                                      const float4* __restrict__ scale,
                                      const float4* __restrict__ bias, float* __restrict__ y,
                                      int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    const float4 s = scale[col], b = bias[col];  // expect: GA403
    float acc[TM][TN] = {};
    for (int p = 0; p < k; ++p) {
        float a[TM], c[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = x[(p * TM + i) * n + col];
#pragma unroll
        for (int j = 0; j < TN; ++j) c[j] = w[p * TN + j];  // expect: GA303
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * c[j];
    }
    y[col] = epilogue(acc, s, b);
}

struct Affine {
    float4 scale, bias;
};

__device__ __forceinline__ Affine affine_at(const float4* scale, const float4* bias, int col) {
    return {scale[col], bias[col]};
}

extern "C" __global__ void tile_helper(const float* __restrict__ x,  // expect: GA101
                                       const float* __restrict__ w,
                                       const float4* __restrict__ scale,
                                       const float4* __restrict__ bias, float* __restrict__ y,
                                       int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    const Affine f = affine_at(scale, bias, col);  // expect: GA403
    float acc[TM][TN] = {};
    for (int p = 0; p < k; ++p) {
        float a[TM], c[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = x[(p * TM + i) * n + col];
#pragma unroll
        for (int j = 0; j < TN; ++j) c[j] = w[p * TN + j];  // expect: GA303
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * c[j];
    }
    y[col] = epilogue(acc, f.scale, f.bias);
}

#define COLUMN(p, i) (__ldg(&(p)[i]))

template <int M, int N>
__global__ void tile_macro(const float* __restrict__ x,  // expect: GA101
                           const float* __restrict__ w, const float4* __restrict__ scale,
                           const float4* __restrict__ bias, float* __restrict__ y, int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    const float4 s = COLUMN(scale, col);  // expect: GA403
    const float4 b = COLUMN(bias, col);
    float acc[M][N] = {};
    for (int p = 0; p < k; ++p) {
        float a[M], c[N];
#pragma unroll
        for (int i = 0; i < M; ++i) a[i] = x[(p * M + i) * n + col];
#pragma unroll
        for (int j = 0; j < N; ++j) c[j] = w[p * N + j];  // expect: GA303
#pragma unroll
        for (int i = 0; i < M; ++i)
#pragma unroll
            for (int j = 0; j < N; ++j) acc[i][j] += a[i] * c[j];
    }
    y[col] = epilogue(acc, s, b);
}
template __global__ void tile_macro<8, 6>(const float*, const float*, const float4*, const float4*,
                                          float*, int, int);

extern "C" __global__ void tile_late(const float* __restrict__ x,  // expect: GA101
                                     const float* __restrict__ w,
                                     const float4* __restrict__ scale,
                                     const float4* __restrict__ bias, float* __restrict__ y,
                                     int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    float acc[TM][TN] = {};
    for (int p = 0; p < k; ++p) {
        float a[TM], c[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a[i] = x[(p * TM + i) * n + col];
#pragma unroll
        for (int j = 0; j < TN; ++j) c[j] = w[p * TN + j];  // expect: GA303
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * c[j];
    }
    const float4 s = scale[col], b = bias[col];
    y[col] = epilogue(acc, s, b);
}

extern "C" __global__ void tile_small(const float* __restrict__ x, const float* __restrict__ w,
                                      const float4* __restrict__ scale,
                                      const float4* __restrict__ bias, float* __restrict__ y,
                                      int n, int k) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= n) return;
    const float4 s = scale[col], b = bias[col];
    float acc[4][4] = {};
    for (int p = 0; p < k; ++p) {
        float a[4], c[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = x[(p * 4 + i) * n + col];
#pragma unroll
        for (int j = 0; j < 4; ++j) c[j] = w[p * 4 + j];  // expect: GA303
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * c[j];
    }
    y[col] = epilogue(acc, s, b);
}
