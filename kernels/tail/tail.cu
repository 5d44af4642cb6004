// GA102 case: y = a * x over n elements, launched three ways (see case.toml and the kernel-named
// .toml files beside it). `// expect: GAxxx` marks the line where gpuadvise must report a finding.

// one element per thread, 1.25 waves on an H100: the last wave leaves 75 % of the SMs idle
extern "C" __global__ void scale_tail(const float* __restrict__ x, float* __restrict__ y,  // expect: GA102
                                      float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

// a grid-stride loop launched with fewer CTAs than SMs
extern "C" __global__ void scale_small_grid(const float* __restrict__ x,  // expect: GA102
                                            float* __restrict__ y, float a, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i];
}

// the same loop launched with exactly one wave of CTAs
extern "C" __global__ void scale_stride(const float* __restrict__ x, float* __restrict__ y,
                                        float a, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i];
}
