// column_counts (kernels/vectorize) against hand-vectorised variants, cudaEvent medians of 25 runs.
// nvcc -O3 -arch=sm_90 -o cc benchmarks/column_counts_vectorized.cu && ./cc   (docs/data/column_counts_h200_2026-11-30.txt)
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
__global__ void column_counts(const unsigned char* __restrict__ m, int* __restrict__ count, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int k = 0;
    for (int r = 0; r < rows; ++r) k += m[(size_t)r * cols + c] == '1';
    count[c] = k;
}
__global__ void column_counts4(const unsigned char* __restrict__ m, int* __restrict__ count, int rows, int cols) {
    int c4 = blockIdx.x * blockDim.x + threadIdx.x;
    if (c4 * 4 >= cols) return;
    int k0 = 0, k1 = 0, k2 = 0, k3 = 0;
    for (int r = 0; r < rows; ++r) {
        uchar4 v = reinterpret_cast<const uchar4*>(m + (size_t)r * cols)[c4];
        k0 += v.x == '1'; k1 += v.y == '1'; k2 += v.z == '1'; k3 += v.w == '1';
    }
    count[4 * c4] = k0; count[4 * c4 + 1] = k1; count[4 * c4 + 2] = k2; count[4 * c4 + 3] = k3;
}
__global__ void column_counts16(const unsigned char* __restrict__ m, int* __restrict__ count, int rows, int cols) {
    int c16 = blockIdx.x * blockDim.x + threadIdx.x;
    if (c16 * 16 >= cols) return;
    int k[16] = {0};
    for (int r = 0; r < rows; ++r) {
        uint4 v = reinterpret_cast<const uint4*>(m + (size_t)r * cols)[c16];
        unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 16; ++j) k[j] += ((w[j / 4] >> (8 * (j % 4))) & 0xff) == '1';
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) count[16 * c16 + j] = k[j];
}
int main() {
    const int rows = 2000, cols = 400000;
    size_t n = (size_t)rows * cols;
    std::vector<unsigned char> h(n);
    unsigned s = 1;
    for (size_t i = 0; i < n; ++i) { s = s * 1664525u + 1013904223u; h[i] = (s >> 24) & 1 ? '1' : '0'; }
    unsigned char* m; int *c0, *c1;
    cudaMalloc(&m, n); cudaMalloc(&c0, cols * 4); cudaMalloc(&c1, cols * 4);
    cudaMemcpy(m, h.data(), n, cudaMemcpyHostToDevice);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    auto run = [&](int which) {
        std::vector<float> t;
        for (int it = 0; it < 25; ++it) {
            cudaEventRecord(a);
            if (which == 0) column_counts<<<(cols + 255) / 256, 256>>>(m, c0, rows, cols);
            if (which == 1) column_counts4<<<(cols / 4 + 255) / 256, 256>>>(m, c1, rows, cols);
            if (which == 2) column_counts16<<<(cols / 16 + 255) / 256, 256>>>(m, c1, rows, cols);
            cudaEventRecord(b); cudaEventSynchronize(b);
            float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms);
        }
        std::sort(t.begin(), t.end()); return t[t.size() / 2];
    };
    const char* names[3] = {"column_counts", "uchar4 x4", "uint4 x16"};
    float base = run(0);
    for (int w = 0; w < 3; ++w) {
        float ms = run(w);
        std::vector<int> r0(cols), r1(cols);
        cudaMemcpy(r0.data(), c0, cols * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(r1.data(), c1, cols * 4, cudaMemcpyDeviceToHost);
        bool ok = w == 0 || r0 == r1;
        printf("%-14s median %.4f ms  %.0f GB/s  speedup %.3f  %s\n", names[w], ms, n / ms / 1e6, base / ms, ok ? "same output" : "DIFFERENT");
    }
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
