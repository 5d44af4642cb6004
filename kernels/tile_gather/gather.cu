// Seed 002's wide-footprint gather (thread-group ID swizzling for L2 locality), ported to CUDA.
// A full-screen pass in which every pixel reads a sparse (2r/step + 1)^2 neighbourhood of a float
// image, clamped to the image edge (a denoiser-like filter with a wide footprint):
//     out[y][x] = mean of in[clamp(y + dy)][clamp(x + dx)], dx, dy in -r, -r + step, ..., r
// The kernels compute every pixel the same way, in the same order (bit-identical output); they
// differ only in which tile of the image each block computes, that is in the order in which tiles
// are launched. Neighbouring pixels read neighbouring samples, but samples `step` apart are read by
// different blocks: the reuse is between blocks, through L2, and shared memory cannot capture it.
// Seed 002 gained 47% at 1440p on an RTX 2080 (4 MB of L2); on an H100 (50 MB) the remap only pays
// when blocks reuse data after it has left the L2: at 8K with a 2048-pixel footprint N=32 ran 1.19x
// faster, with a 512-pixel one row-major was fastest (docs/validation.md). Hence three launches:
// gather_rowmajor (case.toml: 8K, 2048-pixel footprint), gather_tiled (gather_tiled.toml: 8K tiled
// with N=32), gather_1440p (gather_1440p.toml: row-major at 1440p, where the working set fits).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

// Thread-group tiling along X (the seed's corrected snippet, by Aditya Ukarande): the grid is cut
// into vertical strips `n` tiles wide (the last strip narrower when n does not divide the grid's
// width) and blocks are launched strip by strip, row by row inside a strip, so the blocks in
// flight cover a compact region of the image. Returns the tile this block computes.
__device__ __forceinline__ uint2 tiled_block_index(uint2 grid, uint2 block_id, unsigned n) {
    const unsigned per_strip = n * grid.y;                   // blocks in a full strip
    const unsigned full_strips = grid.x / n;
    const unsigned flat = grid.x * block_id.y + block_id.x;  // the launch order
    const unsigned strip = flat / per_strip, local = flat % per_strip;
    const unsigned strip_w = flat >= full_strips * per_strip ? grid.x % n : n;
    const unsigned swizzled = strip * n + (local / strip_w) * grid.x + local % strip_w;
    return make_uint2(swizzled % grid.x, swizzled / grid.x);
}

// The hardware's launch order: blockIdx.x fastest, so the blocks in flight span whole rows of the
// frame, and their footprint is (rows of tiles in flight x 16 + 2r) rows of the image.
extern "C" __global__ void gather_rowmajor(const float* __restrict__ in, float* __restrict__ out,
                                           int w, int h, int r, int step) {
    const uint2 tile = make_uint2(blockIdx.x, blockIdx.y);  // expect: GA304
    const int x = tile.x * blockDim.x + threadIdx.x, y = tile.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int dy = -r; dy <= r; dy += step) {
        const float* row = in + (size_t)min(max(y + dy, 0), h - 1) * w;
        for (int dx = -r; dx <= r; dx += step) acc += row[min(max(x + dx, 0), w - 1)];
    }
    const int taps = 2 * r / step + 1;
    out[(size_t)y * w + x] = acc / (float)(taps * taps);
}

// Tiled launch order, N = n tiles per strip.
extern "C" __global__ void gather_tiled(const float* __restrict__ in, float* __restrict__ out,
                                        int w, int h, int r, int step, unsigned n) {
    const uint2 tile = tiled_block_index(make_uint2(gridDim.x, gridDim.y),
                                         make_uint2(blockIdx.x, blockIdx.y), n);
    const int x = tile.x * blockDim.x + threadIdx.x, y = tile.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int dy = -r; dy <= r; dy += step) {
        const float* row = in + (size_t)min(max(y + dy, 0), h - 1) * w;
        for (int dx = -r; dx <= r; dx += step) acc += row[min(max(x + dx, 0), w - 1)];  // expect: GA405
    }
    const int taps = 2 * r / step + 1;
    out[(size_t)y * w + x] = acc / (float)(taps * taps);
}

// The row-major kernel again, under its own name so that it can have its own launch
// (gather_1440p.toml): at 1440p the blocks in flight read far less than an H100's L2 holds, and
// the remap has nothing to gain.
extern "C" __global__ void gather_1440p(const float* __restrict__ in, float* __restrict__ out,
                                        int w, int h, int r, int step) {
    const uint2 tile = make_uint2(blockIdx.x, blockIdx.y);
    const int x = tile.x * blockDim.x + threadIdx.x, y = tile.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float acc = 0.0f;
    for (int dy = -r; dy <= r; dy += step) {
        const float* row = in + (size_t)min(max(y + dy, 0), h - 1) * w;
        for (int dx = -r; dx <= r; dx += step) acc += row[min(max(x + dx, 0), w - 1)];  // expect: GA405
    }
    const int taps = 2 * r / step + 1;
    out[(size_t)y * w + x] = acc / (float)(taps * taps);
}
