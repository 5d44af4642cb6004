// A 7x7 integer convolution over an n x n matrix (zero outside it), 16x16 blocks, one output per
// thread: coffeebeforearch's convolution_2d (a stranger's kernel of the corpus) in three
// spellings that read the 49 neighbours straight from global memory, and the same with the
// block's 22x22 window staged in shared memory. A warp (16 x 2 threads) reads two rows of 16
// ints, misaligned by the halo: 5.7 sectors but 2.9 128-byte lines a request, a wavefront each
// (GA305's before side). On an H200 the tool's shared-tile proxy of the corpus kernel measured
// 1.55x (2026-11-29). At a wavefront a line (the launch model's since s8-est) the 49 taps keep
// the L1 busier than the bounds tests keep the integer pipe: no GA405 (the corpus kernel's
// staged window ran 1.56-1.75x faster: the L1's time, not the arithmetic's).
//   window7_loops   nested loops over the mask with the bounds tests (the corpus kernel)
//   window7_macro   a macro for one bounded tap, loops over the mask
//   window7_rows    a row pointer per mask row, the taps unrolled in a one-liner
//   window7_tiled   the 22x22 window staged in shared memory first (no reuse through global)
// All four write the same values. `// expect: GAxxx` marks the line where gpuadvise's rules must
// report a finding.

#define R 3
#define D (2 * R + 1)
#define B 16

__constant__ int mask7[D * D];

extern "C" __global__ void window7_loops(const int* m, int* out, int n) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    int temp = 0;
    for (int i = 0; i < D; i++) {
        for (int j = 0; j < D; j++) {
            const int r = row - R + i, c = col - R + j;
            if (r >= 0 && r < n && c >= 0 && c < n) {
                temp += m[r * n + c] * mask7[i * D + j];  // expect: GA305
            }
        }
    }
    out[row * n + col] = temp;
}

#define TAP(r, c) (((r) >= 0 && (r) < n && (c) >= 0 && (c) < n) ? m[(r) * n + (c)] : 0)

extern "C" __global__ void window7_macro(const int* m, int* out, int n) {  // expect: GA102
    const int row = blockIdx.y * B + threadIdx.y, col = blockIdx.x * B + threadIdx.x;
    int temp = 0;
    for (int i = -R; i <= R; i++)
        for (int j = -R; j <= R; j++)
            temp += TAP(row + i, col + j) * mask7[(i + R) * D + j + R];  // expect: GA305
    out[row * n + col] = temp;
}

extern "C" __global__ void window7_rows(const int* m, int* out, int n) {  // expect: GA102
    const int row = blockIdx.y * B + threadIdx.y, col = blockIdx.x * B + threadIdx.x;
    int temp = 0;
    for (int i = 0; i < D; i++) {
        const int* line = m + (row - R + i) * n;  // the row of the window, bounds per tap
#pragma unroll
        for (int j = 0; j < D; j++) temp += (row - R + i >= 0 && row - R + i < n && col - R + j >= 0 && col - R + j < n) ? line[col - R + j] * mask7[i * D + j] : 0;  // expect: GA305
    }
    out[row * n + col] = temp;
}

#define TW (B + 2 * R)
#define PITCH 48  // rows 48 words apart: the two rows a warp reads fall in different banks

extern "C" __global__ void window7_tiled(const int* m, int* out, int n) {
    __shared__ int tile[TW * PITCH];
    const int x0 = blockIdx.x * B - R, y0 = blockIdx.y * B - R;
    for (int k = threadIdx.y * B + threadIdx.x; k < TW * TW; k += B * B) {
        const int r = y0 + k / TW, c = x0 + k % TW;
        tile[(k / TW) * PITCH + k % TW] = (r >= 0 && r < n && c >= 0 && c < n) ? m[r * n + c] : 0;
    }
    __syncthreads();
    int temp = 0;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++)
            temp += tile[(threadIdx.y + i) * PITCH + threadIdx.x + j] * mask7[i * D + j];  // expect: GA307
    out[(blockIdx.y * B + threadIdx.y) * n + blockIdx.x * B + threadIdx.x] = temp;
}
