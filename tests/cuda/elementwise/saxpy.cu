// GA206 (one-element-per-thread) cases: element-wise kernels written in several spellings, each
// computing one or two elements per thread over a grid of many waves, and kernels that must stay
// silent (a grid-stride loop, a 3-point stencil). case.toml launches 2^22 floats with 256-thread
// blocks (16384 CTAs: 15.5 waves on an H100); two_per_thread.toml half the CTAs.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define GID (blockIdx.x * blockDim.x + threadIdx.x)

// the textbook spelling
extern "C" __global__ void saxpy(const float* __restrict__ x, float* __restrict__ y, float a,
                                 int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) y[i] = a * x[i] + y[i];
}

// operands swapped, an early return, unsigned
extern "C" __global__ void scale_return(const float* __restrict__ x, float* __restrict__ y,
                                        float a, int n) {
    const unsigned idx = threadIdx.x + blockDim.x * blockIdx.x;  // expect: GA206
    if (idx >= (unsigned)n) return;
    y[idx] = a * x[idx];
}

// a template block size and a 64-bit index on one line
template <int B>
__global__ void add_tpl(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
    size_t g = (size_t)blockIdx.x * B + threadIdx.x; if (g < (size_t)n) y[g] = x[g] + a;  // expect: GA206
}
template __global__ void add_tpl<256>(const float*, float*, float, int);

// the index from a macro: found from the trace, reported where the kernel reads the macro, not
// rewritten (the macro reads blockIdx)
extern "C" __global__ void axpy_macro(const float* __restrict__ x,
                                      float* __restrict__ y, float a, int n) {
    if (GID < (unsigned)n) y[GID] += a * x[GID];  // expect: GA206
}

// two elements per thread, a block apart (two_per_thread.toml: half the CTAs)
extern "C" __global__ void two_per_thread(const float* __restrict__ x, float* __restrict__ y,
                                          float a, int n) {
    unsigned t = threadIdx.x, base = 2 * blockDim.x * blockIdx.x;  // expect: GA206
    if (base + t < (unsigned)n) y[base + t] = a * x[base + t];
    if (base + t + blockDim.x < (unsigned)n) y[base + t + blockDim.x] = a * x[base + t + blockDim.x];
}

// silent: already a grid-stride loop
extern "C" __global__ void saxpy_stride(const float* __restrict__ x, float* __restrict__ y,
                                        float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}

// silent: each thread reads three elements of x
extern "C" __global__ void stencil3(const float* __restrict__ x, float* __restrict__ y, float a,
                                    int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i + 1 < n) y[i] = a * (x[i - 1] + x[i] + x[i + 1]);
}
