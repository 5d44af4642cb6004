// Shared-memory bank conflicts in other people's spellings (GA201): a 16x16 tile read by column,
// thread-private scratch rows in shared memory. The mirrored tile is
// correct and must stay silent.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// a 16x16 tile written by row, read by column (16x16 blocks): lanes 16 words apart
__global__ void tile_col16(const float* __restrict__ in, float* __restrict__ out, int w) {
    __shared__ float tile[16][16];
    const int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    out[y * w + x] = tile[threadIdx.x][threadIdx.y] + tile[threadIdx.y][threadIdx.x];  // expect: GA201
}

// every thread keeps 8 private floats in shared memory, laid out by thread (stride 8 words)
template <int K>
__global__ void private_rows(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float scratch[256 * K];
    cg::thread_block tb = cg::this_thread_block();
    const int t = tb.thread_rank();
    for (int i = blockIdx.x * 256 + t; i < n; i += 256 * gridDim.x) {
        #pragma unroll
        for (int k = 0; k < K; ++k) scratch[t * K + k] = in[i] * k;  // expect: GA201
        float s = 0.0f;
        #pragma unroll
        for (int k = 0; k < K; ++k) s += scratch[t * K + k] * scratch[t * K + (K - 1 - k)];  // kept in registers: no shared load
        out[i] = s;
    }
}
template __global__ void private_rows<8>(const float*, float*, int);

// conflict-free: the same tile read along its rows (mirrored): every lane of a warp in its own bank;
// the tile is read back by two threads per word, which the L1 would serve (GA307: drop it if faster)
// (a [16][17] padding would not do: a warp spans two rows of a 16x16 block)
__global__ void tile_mirror16(const float* __restrict__ in, float* __restrict__ out, int w) {
    __shared__ float tile[16][16];
    const int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    out[y * w + x] = tile[threadIdx.y][15 - threadIdx.x] + tile[threadIdx.y][threadIdx.x];  // expect: GA307
}

// correct: a tiled transpose through a [32][33] tile (the padding spreads a column's 32 words
// over the 32 banks; each word is read once, by one thread)
__global__ void tile_transpose33(const float* __restrict__ in, float* __restrict__ out, int w) {
    __shared__ float tile[32][33];
    const int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
    __syncthreads();
    const int tx = blockIdx.y * 32 + threadIdx.x, ty = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(ty + j) * w + tx] = tile[threadIdx.x][threadIdx.y + j];
}
