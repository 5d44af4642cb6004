// s14-spill (issue 29, GA401): local memory's rate on an H200. A thread's array indexed at run
// time lives in local memory (LDL/STL, 32-bit, interleaved per word across a warp: one 128 B line
// a warp instruction). Timed (cudaEvent, median of 41 after 3 warm-ups) at 4 and 8 CTAs of 256
// threads an SM and frames of 64 B to 1 KB a thread (in L1 or not), read-modify-write and
// read-only; and kernels/spills moments_capped / moments at the case's size.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "../../kernels/spills/spills.cu"

template <int N, bool RMW>
__global__ void localk(float* out, int iters) {
    float a[N];
    unsigned t = threadIdx.x;
#pragma unroll
    for (int j = 0; j < N; ++j) a[j] = (float)(j ^ t);
    float s = 0.f;
    for (int it = 0; it < iters; ++it) {
        unsigned idx = (it * 7u + t) & (N - 1);
        if (RMW) a[idx] += 1.0f; else s += a[idx];
    }
    unsigned idx = (t * 3u) & (N - 1);
    out[blockIdx.x * blockDim.x + t] = s + a[idx];
}

__global__ void empty_k(float* out) { if (out == nullptr) out[0] = 0.f; }

template <typename F>
static float med(F f) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int i = 0; i < 3; ++i) f();
    std::vector<float> v;
    for (int i = 0; i < 41; ++i) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); v.push_back(ms); }
    std::sort(v.begin(), v.end()); return v[v.size() / 2] * 1000.f;  // us
}

template <int N, bool RMW>
static void run(float* out, int sms, int ctas_per_sm, int iters, double clk_ghz, bool ncu) {
    int grid = sms * ctas_per_sm;
    if (ncu) { localk<N, RMW><<<grid, 256>>>(out, iters); cudaDeviceSynchronize(); return; }
    float us = med([&] { localk<N, RMW><<<grid, 256>>>(out, iters); });
    double warp_ins = (double)grid * 8 * iters * (RMW ? 2 : 1);  // LDL (+STL) a warp an iteration
    double per_sm_clk = warp_ins / sms / (us * 1e-6 * clk_ghz * 1e9);
    printf("local N=%d frame=%dB rmw=%d ctas/sm=%d threads/sm=%d footprint/sm=%dKB iters=%d: %.2f us, %.3f local warp instr / SM / clk (at %.2f GHz)\n",
           N, N * 4, (int)RMW, ctas_per_sm, ctas_per_sm * 256, ctas_per_sm * 256 * N * 4 / 1024, iters, us, per_sm_clk, clk_ghz);
}

int main(int argc, char** argv) {
    bool ncu = argc > 1;
    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
    int sms = p.multiProcessorCount;
    int clk_khz = 0; cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0);
    double clk = clk_khz / 1e6;
    printf("%s sms=%d clock attr %.3f GHz l1+smem/SM %zu B, max smem/SM %zu\n", p.name, sms, clk, (size_t)p.sharedMemPerMultiprocessor, (size_t)p.sharedMemPerMultiprocessor);
    float* out; cudaMalloc(&out, sizeof(float) * sms * 8 * 256 * 2);
    if (!ncu) printf("empty kernel (%d CTAs): %.2f us\n", sms * 8, med([&] { empty_k<<<sms * 8, 256>>>(out); }));
    const int it = 4096;
    for (int c : {4, 8}) {
        run<16, true>(out, sms, c, it, clk, ncu);
        run<64, true>(out, sms, c, it, clk, ncu);
        run<128, true>(out, sms, c, it / 2, clk, ncu);
        run<256, true>(out, sms, c, it / 4, clk, ncu);
        run<16, false>(out, sms, c, it, clk, ncu);
        run<128, false>(out, sms, c, it / 2, clk, ncu);
    }
    // kernels/spills: moments_capped (32 regs, 504 B of spills, 96 B frame) and moments, case.toml's size
    int rows = 64, n = 168960;
    float *x, *m; cudaMalloc(&x, sizeof(float) * rows * n); cudaMalloc(&m, sizeof(float) * 32 * n);
    cudaMemset(x, 0, sizeof(float) * rows * n);
    int g = (n + 255) / 256;
    if (ncu) { moments_capped<<<g, 256>>>(x, m, rows, n); moments<<<g, 256>>>(x, m, rows, n); cudaDeviceSynchronize(); return 0; }
    float mc = med([&] { moments_capped<<<g, 256>>>(x, m, rows, n); });
    float mo = med([&] { moments<<<g, 256>>>(x, m, rows, n); });
    printf("moments_capped %.2f us, moments %.2f us, ratio %.3f (no L2 flush)\n", mc, mo, mc / mo);
    cudaError_t e = cudaGetLastError(); printf("cuda: %s\n", cudaGetErrorString(e));
    return 0;
}
