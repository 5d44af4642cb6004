// Kernels for the SIMT-efficiency counts and GA104 divergent-branches (written for gpuadvise's
// tests). `// expect: GA104` marks the branch GA104 must report.

// Interleaved tree: `t % (2*k)` keeps lanes 0, 2, 4 ... of every warp busy, the others idle.
template <int B>
__global__ void tree_interleaved(const int* in, int* out) {
    __shared__ int buf[B];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * B + t];
    __syncthreads();
    for (int k = 1; k < B; k <<= 1) {
        if (t % (2 * k) == 0) buf[t] += buf[t + k];  // expect: GA104
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}
template __global__ void tree_interleaved<256>(const int*, int*);

// Sequential tree: warp-uniform until the last warp (little divergence).
template <int B>
__global__ void tree_sequential(const int* in, int* out) {
    __shared__ int buf[B];
    int t = threadIdx.x;
    buf[t] = in[blockIdx.x * B + t];
    __syncthreads();
    for (int k = B / 2; k > 0; k >>= 1) {
        if (t < k) buf[t] += buf[t + k];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}
template __global__ void tree_sequential<256>(const int*, int*);

// Causal scores: a 32x32 tile of query rows (y) x key columns (x); keys after the query are
// masked, so on the diagonal tiles half the lanes of a warp wait while the others do the dot.
__global__ void causal_scores(const float* q, const float* k, float* s, int T, int D) {
    int row = blockIdx.y * 32 + threadIdx.y;
    int col = blockIdx.x * 32 + threadIdx.x;
    float acc = -1e30f;
    if (col <= row) {  // expect: GA104
        acc = 0.f;
        for (int d = 0; d < D; ++d) acc += q[row * D + d] * k[col * D + d];
    }
    s[row * T + col] = acc;
}

// A tail: only the first `k` threads of each block do the long work.
__global__ void few_threads(const float* in, float* out, int k, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = in[i];
    if (threadIdx.x < k) {  // silent: the k threads are packed (a front), nothing to remap
        for (int j = 0; j < iters; ++j) x = x * 0.998f + 0.5f;
    }
    out[i] = x;
}

// Uniform: every lane does the same work.
__global__ void uniform_fma(const float* in, float* out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = in[i];
    for (int j = 0; j < iters; ++j) x = x * 0.999f + 0.5f;
    out[i] = x;
}

// Bounds check only: the last block's last warp is split once.
__global__ void bounded_fma(const float* in, float* out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    for (int j = 0; j < iters; ++j) x = x * 0.996f + 0.5f;
    out[i] = x;
}

// Early exit by thread index: a quarter of each warp leaves, the rest loops.
__global__ void early_exit(const float* in, float* out, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if ((threadIdx.x & 31) >= 8) return;  // expect: GA104
    float x = in[i];
    for (int j = 0; j < iters; ++j) x = x * 0.997f + 0.5f;
    out[i] = x;
}

// Fronts: the threads on each side of the branch are a contiguous range of the CTA, so each
// execution splits at most the one warp at the boundary; the idle lanes are the work's shape.
// A binomial tree's shrinking triangle (cuda-samples' binomialOptions, `i > final_it`):
__global__ void triangle_front(const float* in, float* out, int steps) {
    const int tid = threadIdx.x;
    float v[17];
#pragma unroll
    for (int j = 0; j < 17; ++j) v[j] = in[(blockIdx.x * blockDim.x + tid) * 4 + (j & 3)];
    int last = max(0, tid * 4 - 1);
    for (int i = steps; i > 0; --i) {
        if (i > last) {  // silent: a front
#pragma unroll
            for (int j = 0; j < 16; ++j) v[j] = 0.5f * v[j] + 0.25f * v[j + 1];
        }
    }
    out[blockIdx.x * blockDim.x + tid] = v[0];
}

// A growing front: the rows below the pivot join one by one (a Gaussian elimination's sweep),
// spelled with a while loop and the bound on the right.
__global__ void growing_front(float* a, int n) {
    unsigned row = threadIdx.x + blockIdx.x * blockDim.x;
    float x = a[row];
    unsigned k = 0;
    while (k < n) {
        if (k >= row % blockDim.x)  // silent: a front
            for (int r = 0; r < 64; ++r) x = x * 0.999f + 0.001f * (float)(k + r);
        ++k;
    }
    a[row] = x;
}

// A filter on loaded data: an if without an else whose condition is the value read (about half
// the lanes of every warp at random): a note without an estimate, no remap packs it.
__global__ void data_filter(const float* in, float* out, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = in[i];
    if (x > 0.0f) {
        for (int r = 0; r < iters; ++r) x = x * 0.993f + 0.125f;
        out[i] = x;
    }
}

// An if/else on loaded data: a split warp issues both sides.
__global__ void data_sides(const float* in, float* out, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = in[i];
    if (x >= 0.0f) {
        for (int r = 0; r < iters; ++r) x = x * 0.993f + 0.125f;
    } else {
        for (int r = 0; r < iters; ++r) x = x * 0.995f - 0.25f;
    }
    out[i] = x;
}

// A trip count read from data (0..63 iterations per lane): lanes leave the loop at different
// iterations; a warp per item makes the count warp-uniform, so it stays a divergence finding.
__global__ void data_trips(const int* n, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = 0.0f;
    for (int r = 0; r < n[i]; ++r) x = x * 0.993f + 0.125f;
    out[i] = x;
}

// A data-dependent exit from inside a loop (a `break` to the end): lanes leave the loop at
// different iterations, like a data trip count: a divergence finding with its estimate.
__global__ void data_break(const float* in, float* out, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = in[i];
    for (int r = 0; r < iters; ++r) {
        x = x * 0.991f + 0.0625f;
        if (x > 0.4f) return;
        out[i] = x;
    }
}
