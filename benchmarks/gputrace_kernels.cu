// Kernels for the GPU tracer's validation (benchmarks/gputrace_validation.py).

// An 8K-frame gather: each pixel of a w x h float image reads a 5x5 neighbourhood with stride 2
// (taps at -4, -2, 0, 2, 4 in x and y, clamped at the borders) and writes their mean. At 7680x4320
// every CTA traced is 1,036,800 warps x 26 memory instructions: about 27 M warp records.
extern "C" __global__ void gather5x5(const float* __restrict__ in, float* __restrict__ out, int w,
                                     int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
#pragma unroll
    for (int dy = -2; dy <= 2; ++dy) {
        int yy = min(max(y + 2 * dy, 0), h - 1);
#pragma unroll
        for (int dx = -2; dx <= 2; ++dx) {
            int xx = min(max(x + 2 * dx, 0), w - 1);
            s += in[yy * w + xx];
        }
    }
    out[y * w + x] = s * (1.0f / 25.0f);
}
