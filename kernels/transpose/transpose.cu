// Matrix transpose of a rows x cols matrix of floats (row-major) into a cols x rows one, the
// classic case of issue 16: the naive kernels read `in` along its rows (coalesced) and write `out`
// along its columns (each lane of a warp its own 32-byte sector). On an H200 the 32x32 shared
// tile with a padded row ([32][33]) measured 6.98x faster than the naive 32x8 kernel at 8192^2.
//   transpose_naive     32x8 threads per 32x32 tile, each thread 4 elements (cuda-samples' shape)
//   transpose_naive2d   one element per thread, 16x16 blocks
//   transpose_tiled     the fix: a [32][33] shared tile, coalesced both ways (must stay silent)
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define TILE 32
#define ROWS 8

extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols) {
    const int x = blockIdx.x * TILE + threadIdx.x;
    const int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (x < cols && y + j < rows) {
            out[x * rows + (y + j)] = in[(y + j) * cols + x];  // expect: GA301, GA306
        }
    }
}

extern "C" __global__ void transpose_naive2d(const float* __restrict__ in, float* __restrict__ out,
                                             int rows, int cols) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < rows && col < cols) {
        out[col * rows + row] = in[row * cols + col];  // expect: GA301, GA306
    }
}

extern "C" __global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    const int x = blockIdx.x * TILE + threadIdx.x;
    const int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
        }
    }
    __syncthreads();
    const int ox = blockIdx.y * TILE + threadIdx.x;  // a column of `in`, a row of `out`
    const int oy = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS) {
        if (ox < rows && oy + j < cols) {
            out[(oy + j) * rows + ox] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
