// Row means of a row-major matrix, defined in a header (tests/cuda/headers/rows.cu includes it;
// gpuadvise analyze takes this .cuh directly too).
#pragma once
#include "pick.cuh"

// one thread per row: each thread walks its own row, so the 32 lanes of a warp read 32 different
// rows at each step (a stride of `cols` floats between consecutive threads)
__global__ void row_mean_thread(const float* __restrict__ in, float* out, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    Pick pick;
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += pick(in, (long)row * cols + j);
    out[row] = s / cols;
}

// one warp per row: the lanes read consecutive words, then add across the warp
__global__ void row_mean_warp(const float* __restrict__ in, float* out, int rows, int cols) {
    int lane = threadIdx.x % warpSize;
    int row = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    if (row >= rows) return;
    Pick pick;
    float s = 0.0f;
    for (int j = lane; j < cols; j += warpSize) s += pick(in, (long)row * cols + j);
    for (int o = warpSize / 2; o > 0; o /= 2) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) out[row] = s / cols;
}
