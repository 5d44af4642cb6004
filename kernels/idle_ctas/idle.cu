// GA108 case: one launch updates a band of `cols` columns, but the grid is sized for the whole
// problem (800 times the CTAs the band needs, as HeCBench's pathfinder sizes its grid from
// rows * cols): the CTAs past the band return at their guard. `// expect: GAxxx` marks the line
// where gpuadvise must report a finding (see case.toml and the kernel-named .toml files).

// the guard written out
extern "C" __global__ void band_guard(const float* __restrict__ in,  // expect: GA108
                                      float* __restrict__ out, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cols) return;
    out[i] = 2.0f * in[i] + 1.0f;
}

// the guard in a macro
#define COLUMN_OR_LEAVE(i, n)                          \
    int i = blockIdx.x * blockDim.x + threadIdx.x;     \
    if (i >= (n)) return
extern "C" __global__ void band_macro(const float* __restrict__ in,  // expect: GA108
                                      float* __restrict__ out, int cols) {
    COLUMN_OR_LEAVE(i, cols);
    out[i] = 2.0f * in[i] + 1.0f;
}

// the guard in a template helper, the work under it
template <int B>
__device__ bool in_band(int n, int& i) {
    i = blockIdx.x * B + threadIdx.x;
    return i < n;
}
extern "C" __global__ void band_template(const float* __restrict__ in,  // expect: GA108
                                         float* __restrict__ out, int cols) {
    int i;
    if (in_band<256>(cols, i)) out[i] = 2.0f * in[i] + 1.0f;
}

// silent: the same kernel launched with the CTAs the band needs (band_sized.toml)
extern "C" __global__ void band_sized(const float* __restrict__ in, float* __restrict__ out,
                                      int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= cols) return;
    out[i] = 2.0f * in[i] + 1.0f;
}

// silent: a grid-stride loop over the band, every CTA working (band_stride.toml)
extern "C" __global__ void band_stride(const float* __restrict__ in, float* __restrict__ out,
                                       int cols) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < cols; i += blockDim.x * gridDim.x)
        out[i] = 2.0f * in[i] + 1.0f;
}

// silent: a search that computes without touching memory (md5-style brute force): every CTA
// hashes its own candidates in registers and writes only on the rare match (search.toml)
extern "C" __global__ void search(unsigned target, int* __restrict__ found, int rounds) {
    unsigned x = blockIdx.x * blockDim.x + threadIdx.x, h = x;
    for (int r = 0; r < rounds; ++r) h = (h ^ (h >> 13)) * 0x5bd1e995u + r;  // expect: GA405
    if (h == target) *found = (int)x;
}

// a few steps of a pyramid in shared memory with a barrier each, run by every CTA; the CTAs past
// the band only test their indices and wait at the barriers (HeCBench pathfinder's shape): the
// launch's instructions are theirs, GA108's problem, not arithmetic to rewrite (GA405 silent;
// band_steps.toml)
extern "C" __global__ void band_steps(const int* __restrict__ in,  // expect: GA108
                                      int* __restrict__ out, int cols, int steps) {
    __shared__ int row[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lo = max(0, -(int)(blockIdx.x * blockDim.x));
    int hi = min((int)blockDim.x - 1, cols - 1 - (int)(blockIdx.x * blockDim.x));
    int tx = threadIdx.x;
    int w = max(tx - 1, lo), e = min(tx + 1, hi);
    bool valid = tx >= lo && tx <= hi;
    if (i < cols) row[tx] = in[i];
    __syncthreads();
    for (int s = 0; s < steps; ++s) {
        int v = 0;
        bool inside = valid && tx >= s + 1 && tx + s + 2 <= (int)blockDim.x;
        if (inside) v = min(min(row[w], row[e]), row[tx]) + (i ^ s) % 7;
        __syncthreads();
        if (inside) row[tx] = v;
        __syncthreads();
    }
    if (i < cols) out[i] = row[tx];
}
