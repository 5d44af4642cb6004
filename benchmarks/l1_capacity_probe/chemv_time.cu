// s9-est: HeCBench chemv_kernel1 (12 CTAs of one warp) timed as written (KR undefined) or with
// __restrict__ pointers (KR=1, the GA308 variant measured 1.03x): is a serial warp's loop ~3x the
// launch model on both sides? Prints ms and SM cycles per CTA (clock64 around the kernel body is
// not possible without editing it: the event time at the device clock instead).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "kernel.h"
int main() {
    int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    ComplexFloat *AT, *X, *Y;
    cudaMalloc(&AT, 136900 * 8); cudaMalloc(&X, 370 * 8); cudaMalloc(&Y, 370 * 8);
    std::vector<float> h(136900 * 2);
    for (size_t i = 0; i < h.size(); i++) h[i] = (float)((i * 2654435761u) % 1000) / 1000.f;
    cudaMemcpy(AT, h.data(), 136900 * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(X, h.data(), 370 * 8, cudaMemcpyHostToDevice);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int grid : {12, 1}) {
        std::vector<float> t;
        for (int i = 0; i < 15; i++) {
            cudaMemcpy(Y, h.data(), 370 * 8, cudaMemcpyHostToDevice);
            cudaEventRecord(a); chemv_kernel1<<<grid, 32>>>(AT, X, Y, 1.59f, 3.14f); cudaEventRecord(b);
            cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 3) t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        printf("chemv_kernel1 %s grid %d: %.4f ms (%.0f cycles at %d kHz)\n",
#ifdef KR
               "restrict",
#else
               "as written",
#endif
               grid, t[t.size() / 2], t[t.size() / 2] * clk, clk);
    }
    printf("status %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
