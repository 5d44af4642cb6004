// Kernels the recorder's CPU tests record through a fake CUPTI: a plain C++ kernel, a
// template instance, a struct passed by value, and an extern "C" kernel (CuPy's RawKernel style).
struct Params {
    float scale;
    int shift;
};

__global__ void saxpy(const float* __restrict__ x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

template <int STRIDE>
__global__ void gather(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(i * STRIDE) % n];
}
template __global__ void gather<32>(const float*, float*, int);

__global__ void scaled(const float* x, float* y, Params p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = p.scale * x[i] + p.shift;
}

extern "C" __global__ void add_one(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}
