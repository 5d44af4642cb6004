// GA103 case: out = a * in over a w x h image, one pixel per thread. The two kernels are the
// same code; their launches differ (case.toml: 10x10 blocks; scale2d_32x4.toml: 32x4 blocks).
// `// expect: GAxxx` marks the line where gpuadvise must report a finding.

extern "C" __global__ void scale2d_10x10(const float* __restrict__ in,  // expect: GA103
                                         float* __restrict__ out, int w, int h, float a) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) out[y * w + x] = a * in[y * w + x];
}

extern "C" __global__ void scale2d_32x4(const float* __restrict__ in, float* __restrict__ out,
                                        int w, int h, float a) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) out[y * w + x] = a * in[y * w + x];
}
