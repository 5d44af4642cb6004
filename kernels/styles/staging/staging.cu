// Shared-memory staging that L1 would serve (GA307): a tile filled once from global memory and
// read back by neighbours after one barrier, where reading the neighbours from global memory
// through L1 is faster (measured 1.70x on a 3x3 box filter, issue 16). Three spellings: a 2-D
// 18x18 tile with halo (its 18-word rows also cost 2-way bank conflicts, GA201), a 1-D macro-sized tile, a template radius. The direct version reads
// global memory only (GA305 may propose the tile: the mirror rule, recommended only if faster).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

// 3x3 box filter, 16x16 threads, an 18x18 tile with a one-pixel halo (clamped at the borders)
__global__ void box3_tile(const float* __restrict__ in, float* __restrict__ out, int w, int h) {
    __shared__ float tile[18][18];
    const int x0 = blockIdx.x * 16 - 1, y0 = blockIdx.y * 16 - 1;
    for (int j = threadIdx.y; j < 18; j += 16)
        for (int i = threadIdx.x; i < 18; i += 16) {
            const int gx = min(max(x0 + i, 0), w - 1), gy = min(max(y0 + j, 0), h - 1);
            tile[j][i] = in[gy * w + gx];  // (the tile's conflicts: GA201 at its reads below)
        }
    __syncthreads();
    const int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    float s = 0.0f;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) s += tile[ty + dy][tx + dx];  // expect: GA201, GA307
    out[(blockIdx.y * 16 + threadIdx.y) * w + blockIdx.x * 16 + threadIdx.x] = s * (1.0f / 9.0f);
}

// 1-D three-point smoothing, a macro block size, the halo loaded by the end threads
#define BS 256
__global__ void smooth_tile(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float sx[BS + 2];
    const int g = blockIdx.x * BS + threadIdx.x, l = threadIdx.x + 1;
    sx[l] = x[min(g, n - 1)];
    if (threadIdx.x == 0) sx[0] = x[max(g - 1, 0)];
    if (threadIdx.x == BS - 1) sx[BS + 1] = x[min(g + 1, n - 1)];
    __syncthreads();
    if (g < n) y[g] = 0.25f * sx[l - 1] + 0.5f * sx[l] + 0.25f * sx[l + 1];  // expect: GA307
}

// template radius, the tile loaded in a strided loop
template <int R>
__global__ void window_sum(const float* __restrict__ src, float* __restrict__ dst, int n) {
    __shared__ float buf[256 + 2 * R];
    const int base = blockIdx.x * 256 - R;
    for (int k = threadIdx.x; k < 256 + 2 * R; k += 256) buf[k] = src[min(max(base + k, 0), n - 1)];
    __syncthreads();
    float acc = 0.0f;
    #pragma unroll
    for (int d = 0; d <= 2 * R; ++d) acc += buf[threadIdx.x + d];  // expect: GA307
    const int g = blockIdx.x * 256 + threadIdx.x;
    if (g < n) dst[g] = acc;
}
template __global__ void window_sum<2>(const float*, float*, int);

// direct: neighbours read from global memory (through L1)
__global__ void box3_direct(const float* __restrict__ in, float* __restrict__ out, int w, int h) {
    const int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    float s = 0.0f;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx)
            s += in[min(max(y + dy, 0), h - 1) * w + min(max(x + dx, 0), w - 1)];  // expect: GA305
    out[y * w + x] = s * (1.0f / 9.0f);
}
