// GA103 case for block merging: kernels written for blocks of 16 (or 16x3) threads whose
// indexing or shared tiles are tied to the block, so no block shape of a multiple of 32 threads
// computes the same; GA103's automatic variant runs two of the blocks side by side in one CTA
// (gpuadvise/source/fixkit_merge.py), checked on the emulator. Spellings: a #define tile with
// barriers (1-D), a template tile (2-D, 16x3), a one-line kernel without shared memory (the
// spare half returns early). Kernels that stay as they are: a warp shuffle across the 16 lanes
// (merging is refused: the finding stays advice) and the same tile with 32 threads (silent).
// `// expect: GAxxx` marks the line where gpuadvise must report a finding.

#define TILE 16

// each block reverses its tile of 16 elements through shared memory
__global__ void reverse_tile(const float* __restrict__ in, float* __restrict__ out) {  // expect: GA103
    __shared__ float tile[TILE];
    const int base = blockIdx.x * TILE;
    tile[threadIdx.x] = in[base + threadIdx.x];
    __syncthreads();
    out[base + threadIdx.x] = 2.0f * tile[TILE - 1 - threadIdx.x];
}

// each W x H block mirrors its tile left to right (template sizes, a 2-D block)
template <int W, int H>
__global__ void mirror_tile(const float* __restrict__ in, float* __restrict__ out, int w) {  // expect: GA103
    __shared__ float tile[H][W];
    const int x = blockIdx.x * W + threadIdx.x, y = blockIdx.y * H + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    out[y * w + x] = tile[threadIdx.y][W - 1 - threadIdx.x] + 1.0f;
}
template __global__ void mirror_tile<16, 3>(const float* __restrict__, float* __restrict__, int);

// a one-liner: a block of 16 reverses its 16 elements in global memory
__global__ void reverse_global(const int* __restrict__ in, int* __restrict__ out) { out[blockIdx.x * 16 + 15 - threadIdx.x] = in[blockIdx.x * 16 + threadIdx.x] + 1; }  // expect: GA103

// stays as it is: the 16 lanes exchange values with a shuffle (merged blocks would share a warp
// whose lanes the shuffle's mask names): GA103 warns, block merging is not offered
__global__ void swap_halves(const float* __restrict__ in, float* __restrict__ out) {  // expect: GA103
    float v = in[blockIdx.x * 16 + threadIdx.x];
    float w = __shfl_xor_sync(0xffffu, v, 8, 16);
    out[blockIdx.x * 16 + threadIdx.x] = v - w;
}

// silent: the same tile as reverse_tile, 32 threads a block
__global__ void reverse_tile32(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[32];
    const int base = blockIdx.x * 32;
    tile[threadIdx.x] = in[base + threadIdx.x];
    __syncthreads();
    out[base + threadIdx.x] = 2.0f * tile[31 - threadIdx.x];
}
