// A 3x3 box filter over a w x h image of floats (zero outside the image), one output per thread,
// 16x16 blocks: the case of issue 16 where staging the block's 18x18 window in shared memory is
// slower than reading the neighbours from global memory through the L1 (H200, 8192^2: 1.70x
// faster without the tile).
//   box3_shared   the block's window staged in an 18x18 shared tile, one barrier, then the 9
//                 neighbours read from the tile
//   box3_direct   the 9 neighbours read from global memory (the L1 serves the reuse)
// Both write the same values (the same 9 terms, summed in the same order).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define B 16
#define W (B + 2)  // the window: the block and a halo of 1

extern "C" __global__ void box3_shared(const float* __restrict__ in, float* __restrict__ out,
                                       int w, int h) {
    __shared__ float tile[W][W];
    const int x0 = blockIdx.x * B - 1, y0 = blockIdx.y * B - 1;
    for (int i = threadIdx.y * B + threadIdx.x; i < W * W; i += B * B) {
        const int r = i / W, c = i % W;
        const int gx = x0 + c, gy = y0 + r;
        tile[r][c] = (gx >= 0 && gx < w && gy >= 0 && gy < h) ? in[gy * w + gx] : 0.0f;
    }
    __syncthreads();
    const int x = x0 + 1 + threadIdx.x, y = y0 + 1 + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = 0; dy < 3; ++dy) {
        for (int dx = 0; dx < 3; ++dx) {
            s += tile[threadIdx.y + dy][threadIdx.x + dx];  // expect: GA201, GA307
        }
    }
    out[y * w + x] = s * (1.0f / 9.0f);
}

extern "C" __global__ void box3_direct(const float* __restrict__ in, float* __restrict__ out,
                                       int w, int h) {
    const int x = blockIdx.x * B + threadIdx.x, y = blockIdx.y * B + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            const int gx = x + dx, gy = y + dy;
            s += (gx >= 0 && gx < w && gy >= 0 && gy < h) ? in[gy * w + gx] : 0.0f;  // expect: GA305
        }
    }
    out[y * w + x] = s * (1.0f / 9.0f);
}
