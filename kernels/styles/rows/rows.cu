// Thread per row in other people's spellings: each thread walks its own row, so the lanes of a
// warp stride by the row length (GA301; the fix: a warp per row, lanes along the row). Row sums
// of a rows x cols float matrix. The warp-per-row kernel is correct and must stay silent.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

// blockDim indexing, llm.c's layernorm_forward_kernel1 spelling (a pointer to the row)
// (GA106 no longer: each warp load is 32 rows, 32 L1 cycles at a cycle per 128-byte line, so the
// L1, not the bytes in flight, sets the launch's time; GA301 and GA303 say what lowers it)
__global__ void row_sum_ptr(const float* __restrict__ inp, float* __restrict__ out, int N, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        const float* x = inp + idx * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];  // expect: GA301, GA303
        }
        out[idx] = m / C;
    }
}

// template column count, `row`, one-line loop
template <int COLS>
__global__ void row_sum_template(const float* __restrict__ a, float* __restrict__ sums, int rows) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    if (row < rows) { for (int c = 0; c < COLS; ++c) s += a[row * COLS + c]; sums[row] = s; }  // expect: GA301, GA303
}
template __global__ void row_sum_template<64>(const float*, float*, int);

// a macro index, unsigned, a while loop
#define GTID (blockIdx.x * blockDim.x + threadIdx.x)
__global__ void row_max_macro(const float* __restrict__ m, float* __restrict__ best, unsigned nrows, unsigned ncols) {
    unsigned r = GTID;
    if (r >= nrows) return;
    float v = -1e30f;
    unsigned j = 0;
    while (j < ncols) v = fmaxf(v, m[r * ncols + j++]);  // expect: GA301, GA303
    best[r] = v;
}

// correct: a warp per row, lanes along the row, a shuffle reduction
__global__ void row_sum_warp(const float* __restrict__ inp, float* __restrict__ out, int N, int C) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= N) return;
    const float* x = inp + (size_t)warp * C;
    float m = 0.0f;
    for (int i = lane; i < C; i += 32) m += x[i];
    for (int o = 16; o > 0; o >>= 1) m += __shfl_xor_sync(0xffffffffu, m, o);
    if (lane == 0) out[warp] = m / C;
}
