// The GPU test's program (tests/record/test_record_gpu.py): runtime API, a templated kernel, a
// struct passed by value, two streams. It prints a checksum of its results, which must not
// change when it runs under `gpuadvise record`.
#include <cstdio>
#include <vector>

struct Params {
    float scale;
    int shift;
};

template <int STRIDE>
__global__ void gather(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(i * STRIDE) % n];
}

__global__ void scaled(const float* x, float* y, Params p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = p.scale * x[i] + p.shift;
}

__global__ void saxpy(const float* __restrict__ x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    const int n = 1 << 16;
    std::vector<float> h(n);
    for (int i = 0; i < n; ++i) h[i] = (i % 97) * 0.25f - 3.0f;
    float *x, *y, *z;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, (n + 64) * sizeof(float));
    cudaMalloc(&z, n * sizeof(float));
    cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(y, 0, (n + 64) * sizeof(float));
    cudaStream_t s1, s2;
    cudaStreamCreate(&s1);
    cudaStreamCreate(&s2);
    int block = 256, grid = (n + block - 1) / block;
    gather<32><<<grid, block, 0, s1>>>(x, z, n);
    scaled<<<grid, block, 0, s2>>>(x, y + 16, Params{1.5f, 3}, n);
    cudaStreamSynchronize(s2);
    for (int k = 0; k < 3; ++k) saxpy<<<grid, block, 0, s1>>>(z, y + 16, n, 2.0f);
    cudaDeviceSynchronize();
    std::vector<float> out(n);
    cudaMemcpy(out.data(), y + 16, n * sizeof(float), cudaMemcpyDeviceToHost);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += out[i] * ((i % 13) + 1);
    printf("checksum %.6f\n", sum);
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? 0 : 1;
}
