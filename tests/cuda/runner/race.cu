// Adaptive A/B timing tests (tests/runner/test_gpu_race.py): one copy kernel whose variants,
// chosen by defines, read the input EXTRA more times (the extra reads are multiplied by zero, so
// every variant writes the same output) or, with WRONG, write a wrong output.
#ifndef EXTRA
#define EXTRA 2
#endif
extern "C" __global__ void copy_extra(const float* __restrict__ in, float* __restrict__ out,
                                      int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i];
        for (int k = 1; k <= EXTRA; ++k) v += 0.0f * in[(i + k * 4099) % n];
#ifdef WRONG
        v += 1.0f;
#endif
        out[i] = v;
    }
}
