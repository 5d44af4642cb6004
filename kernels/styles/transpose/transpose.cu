// Matrix transposes in other people's spellings: out (cols x rows) = in (rows x cols)^T, floats.
// The naive ones read coalesced and store with a stride of `rows` (GA301 on the store; GA306:
// stage a [32][33] tile in shared memory); a tile without padding reads shared memory by column
// (GA201); the padded tile is correct and must stay silent.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define TILE_DIM 32
#define BLOCK_ROWS 8

// 2-D blockDim indexing, one element per thread (16x16 blocks)
__global__ void tr_naive_2d(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];  // expect: GA301, GA306
}

// cuda-samples' spelling: TILE_DIM x BLOCK_ROWS threads walk a 32x32 tile, no bounds check
__global__ void tr_naive_tile(float* odata, float* idata, int width, int height) {
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + width * yIndex;
    int index_out = yIndex + height * xIndex;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index_out + i] = idata[index_in + i * width];  // expect: GA301, GA306
}

// a 1-D grid, the 2-D index taken apart with / and % (siboehm style), cooperative groups' rank
__global__ void tr_naive_1d(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    const unsigned k = cg::this_grid().thread_rank();
    const unsigned r = k / cols, c = k % cols;
    if (r < rows) dst[c * rows + r] = src[k];  // expect: GA301, GA306
}

// through shared memory, [32][32]: the column read is a 32-way bank conflict
__global__ void tr_tile_nopad(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int x = blockIdx.x * TILE_DIM + threadIdx.x, y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];  // expect: GA201
}

// correct: [32][33], padded
__global__ void tr_tile_padded(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int x = blockIdx.x * TILE_DIM + threadIdx.x, y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE_DIM + threadIdx.x;
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}
