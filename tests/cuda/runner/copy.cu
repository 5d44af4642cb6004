// Runner test kernels: a plain copy, and a copy that leaves its upper half unwritten.
extern "C" __global__ void copy(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
extern "C" __global__ void copy_half(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 2) out[i] = in[i];
}
extern "C" __global__ void copy_wrong(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i == 77 ? in[i] + 1.0f : in[i];
}
// 10% more work than copy: reads the input again
extern "C" __global__ void copy_slow(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i];
        if ((i & 15) < 2) v += 0.0f * in[(i * 7919) % n];
        out[i] = v;
    }
}
