// All pairs of rows: one output per pair (gx, gy), the rows a CTA reads read again by every CTA of
// the same gx or gy (hecbench all-pairs-distance's k1/k2 shape). 64 rows of 256 floats; each
// row reaches the SMs once for each of the 128 CTAs that read it, where a tile of pairs per CTA
// would send it once per tile.
//   pair_dot          one CTA per pair (2-D grid), a strided loop, a warp shuffle sum
//   pair_dot_t<N>     the same as a template over the row length, through row pointers
//   pair_dot_flat     a 1-D grid (pair = blockIdx.x), the rows read through a macro
//   pair_dot_tiled    16 x 16 pairs per CTA, the 32 rows staged in shared memory in chunks:
//                     each row read by 8 CTAs (silent)
//   row_scale         each element read by one CTA (silent)
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define N 256   // floats per row
#define R 64    // rows
#define T 16    // pairs per tile side

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void pair_dot(const float* __restrict__ data, float* __restrict__ out) {
    const int gx = blockIdx.x, gy = blockIdx.y;
    float s = 0.0f;
    for (int k = threadIdx.x; k < N; k += blockDim.x) {
        s += data[gx * N + k] * data[gy * N + k];  // expect: GA305
    }
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) atomicAdd(&out[gx * R + gy], s);
}

template <int L>
__global__ void pair_dot_t(const float* __restrict__ data, float* __restrict__ out) {
    const float* __restrict__ ra = data + blockIdx.x * L;  // the pair's two rows
    const float* __restrict__ rb = data + blockIdx.y * L;
    float s = 0.0f;
    for (int k = threadIdx.x; k < L; k += blockDim.x) {
        const float a = ra[k];  // expect: GA305
        s += a * rb[k];
    }
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) atomicAdd(&out[blockIdx.x * R + blockIdx.y], s);
}
template __global__ void pair_dot_t<N>(const float* __restrict__, float* __restrict__);

#define ROW(r, k) data[(r) * N + (k)]

extern "C" __global__ void pair_dot_flat(const float* __restrict__ data, float* __restrict__ out) {
    const int gx = blockIdx.x % R, gy = blockIdx.x / R;
    float s = 0.0f;
    for (int k = threadIdx.x; k < N; k += blockDim.x) s += ROW(gx, k) * ROW(gy, k);  // expect: GA305
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) atomicAdd(&out[gx * R + gy], s);
}

// 16 x 16 pairs per CTA (a 16 x 16 block, a thread per pair): the CTA's 16 + 16 rows staged in
// 64-float chunks, each pair's sum over the chunk read from shared memory.
#define C 64
// A small grid (16 CTAs: GA102); a CTA on the diagonal stages the same rows twice (GA309).
extern "C" __global__ void pair_dot_tiled(const float* __restrict__ data,  // expect: GA102
                                          float* __restrict__ out) {
    __shared__ float rx[T][C + 1], ry[T][C + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * T + tx;
    const int x0 = blockIdx.x * T, y0 = blockIdx.y * T;
    float s = 0.0f;
    for (int c = 0; c < N; c += C) {
        for (int i = t; i < T * C; i += T * T) {
            rx[i / C][i % C] = data[(x0 + i / C) * N + c + i % C];
            ry[i / C][i % C] = data[(y0 + i / C) * N + c + i % C];  // expect: GA309
        }
        __syncthreads();
        for (int k = 0; k < C; ++k) s += rx[tx][k] * ry[ty][k];
        __syncthreads();
    }
    out[(y0 + ty) * R + x0 + tx] = s;
}

// 64 CTAs of 256 threads: a small grid and mostly launch overhead (GA102, GA501).
extern "C" __global__ void row_scale(const float* __restrict__ data,  // expect: GA102, GA501
                                     float* __restrict__ out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < R * N) out[i] = 2.0f * data[i];
}
