// s11-launch (issue 29): is the first round's CTA launch "ramp" additive to a CTA's own critical
// path (last CTA starts (n-2) x 79.4 ns after the first two, then runs its chain), and what do
// the two patterns that reverted s10-launch measure on the H200:
//  (1) ramp: CTAs of 32 threads that each spin a fixed number of cycles from their own start,
//      132 x n CTAs (n an SM, one round), spins 0..8000 cycles: floor + (n-2)*c + spin (additive)
//      or floor + max((n-2)*c, spin) (overlapped)?
//  (2) fan1 (HeCBench gaussian, size 4096, t = 0: 16 CTAs of 256) against GA102's spreads:
//      the same 4095 threads in 128 CTAs of 32, 64 of 64, 32 of 128; a grid-stride fan1 on
//      16x256, 132x32, 264x32, 528x32, 1056x32, 1056x128; empty kernels of those grids.
//  (3) rows_template<16,4> (tests/rules/test_judged_patterns.py: a 2-way conflicted tile, w=512,
//      h=256, grid 16x64, block 16x4): as is, padded (GA201's fix) and read directly through the
//      L1 (GA307's fix); the same at w=3072, h=3072 (grid 96x768); empty kernels of those grids.
// Timed as the runner does: a spin kernel queued first, L2 flushed (and warm), one launch between
// two events, medians.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

__global__ void k_empty() {}
__global__ void k_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
// every CTA spins `cycles` from its own start, then one store (so it is not optimised away)
__global__ void k_cta_spin(long long cycles, int* out) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    if (threadIdx.x == 0) out[blockIdx.x] = (int)(clock64() - t0);
}
__global__ void k_flush(const int4* p, long long n4, int* sink) {
    int acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        int4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;
}

// HeCBench gaussian fan1 as is, and the same work in a grid-stride loop
__global__ void fan1(const float* __restrict__ a, float* __restrict__ m, const int size, const int t) {
    int globalId = blockDim.x * blockIdx.x + threadIdx.x;
    if (globalId < size - 1 - t) {
        m[size * (globalId + t + 1) + t] = a[size * (globalId + t + 1) + t] / a[size * t + t];
    }
}
__global__ void fan1_stride(const float* __restrict__ a, float* __restrict__ m, const int size, const int t) {
    for (int g = blockDim.x * blockIdx.x + threadIdx.x; g < size - 1 - t; g += gridDim.x * blockDim.x)
        m[size * (g + t + 1) + t] = a[size * (g + t + 1) + t] / a[size * t + t];
}

// tests/rules/test_judged_patterns.py rows_template, its padding and its direct reads
template <int BX, int BY, int PAD>
__global__ void rows_template(const float* __restrict__ in, float* __restrict__ out, int w) {
    __shared__ float t[BY][4 * BX + PAD];
    const int row = blockIdx.y * BY + threadIdx.y;
    const int base = blockIdx.x * 2 * BX - BX;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int x = base + threadIdx.x + k * BX;
        t[threadIdx.y][threadIdx.x + k * BX] = (x >= 0 && x < w) ? in[row * w + x] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int o = 0; o < 2; ++o) {
        float acc = 0.f;
#pragma unroll
        for (int j = -8; j <= 8; ++j) acc += 0.0588f * t[threadIdx.y][BX + o * BX + threadIdx.x + j];
        out[row * w + blockIdx.x * 2 * BX + o * BX + threadIdx.x] = acc;
    }
}
template <int BX, int BY>
__global__ void rows_direct(const float* __restrict__ in, float* __restrict__ out, int w) {
    const int row = blockIdx.y * BY + threadIdx.y;
    const int base = blockIdx.x * 2 * BX - BX;
    auto tile_at = [&](int i) { const int x = base + i; return (x >= 0 && x < w) ? in[row * w + x] : 0.f; };
#pragma unroll
    for (int o = 0; o < 2; ++o) {
        float acc = 0.f;
#pragma unroll
        for (int j = -8; j <= 8; ++j) acc += 0.0588f * tile_at(BX + o * BX + threadIdx.x + j);
        out[row * w + blockIdx.x * 2 * BX + o * BX + threadIdx.x] = acc;
    }
}

static cudaEvent_t e0, e1;
static int4* g_flush; static long long g_n4; static int* g_sink; static int g_sms;
static const long long SPIN = 20000;  // ~10 us at 1.98 GHz

template <class F> void single(F launch, int reps, bool flush, float& med, float& lo, float& hi) {
    std::vector<float> v;
    for (int r = 0; r < reps; r++) {
        k_spin<<<1, 1>>>(SPIN);
        if (flush) k_flush<<<g_sms * 4, 256>>>(g_flush, g_n4, g_sink);
        CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000.f);
    }
    std::sort(v.begin(), v.end()); med = v[v.size() / 2]; lo = v[v.size() / 10]; hi = v[v.size() * 9 / 10];
}
template <class F> void row(const char* tag, const char* name, F fn, int reps = 201) {
    float m1, l1, h1, m2, l2, h2;
    single(fn, reps, true, m1, l1, h1);
    single(fn, reps, false, m2, l2, h2);
    printf("%s %s flushed %.3f [%.3f %.3f] warm %.3f [%.3f %.3f]\n", tag, name, m1, l1, h1, m2, l2, h2);
}

int main() {
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    int clk = 0; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    printf("device %s sms %d clock_khz %d\n", prop.name, g_sms, clk);
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    g_n4 = (2LL * prop.l2CacheSize) / 16; CK(cudaMalloc(&g_flush, g_n4 * 16)); CK(cudaMemset(g_flush, 0, g_n4 * 16));
    CK(cudaMalloc(&g_sink, 4));
    int* out; CK(cudaMalloc(&out, 132 * 64 * 4 * 8));
    for (int i = 0; i < 50; i++) { k_empty<<<1, 32>>>(); k_cta_spin<<<g_sms, 32>>>(100, out); }
    CK(cudaDeviceSynchronize());

    // (1) the ramp with work: n CTAs of 32 threads an SM (one round), each spinning S cycles
    printf("\n# ramp: ctas_per_sm spin_cycles single_us (warm, median [p10 p90])\n");
    for (long long s : {0LL, 500LL, 2000LL, 4000LL, 8000LL}) {
        for (int n : {1, 2, 4, 8, 16, 32}) {
            float m, lo, hi;
            single([&] { k_cta_spin<<<g_sms * n, 32>>>(s, out); }, 201, false, m, lo, hi);
            printf("ramp %d %lld %.3f [%.3f %.3f]\n", n, s, m, lo, hi);
        }
    }
    // the same at 8 CTAs an SM of 64 threads (rows_template's shape) and 16 of 128
    for (long long s : {0LL, 2000LL}) {
        float m, lo, hi;
        single([&] { k_cta_spin<<<g_sms * 8, 64>>>(s, out); }, 201, false, m, lo, hi);
        printf("ramp64 8 %lld %.3f [%.3f %.3f]\n", s, m, lo, hi);
        single([&] { k_cta_spin<<<g_sms * 16, 128>>>(s, out); }, 201, false, m, lo, hi);
        printf("ramp128 16 %lld %.3f [%.3f %.3f]\n", s, m, lo, hi);
    }

    // (2) fan1, size 4096, t = 0
    printf("\n# fan1: grid block single_us\n");
    const int size = 4096;
    float *a, *mm; CK(cudaMalloc(&a, (size_t)size * size * 4)); CK(cudaMalloc(&mm, (size_t)size * size * 4));
    {
        std::vector<float> h((size_t)size * size);
        for (size_t i = 0; i < h.size(); i++) h[i] = 1.0f + (float)((i * 2654435761u) % 1000) / 1000.f;
        CK(cudaMemcpy(a, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    }
    for (int t : {0, 2048}) {
        int n = size - 1 - t;
        for (int b : {256, 128, 64, 32}) {
            int g = (n + b - 1) / b;
            char nm[64]; snprintf(nm, sizeof nm, "t%d_%dx%d", t, g, b);
            row("fan1", nm, [&] { fan1<<<g, b>>>(a, mm, size, t); });
        }
        for (int gb : {16 * 1000 + 256, 132 * 1000 + 32, 264 * 1000 + 32, 528 * 1000 + 32, 1056 * 1000 + 32, 1056 * 1000 + 128}) {
            int g = gb / 1000, b = gb % 1000;
            char nm[64]; snprintf(nm, sizeof nm, "t%d_%dx%d", t, g, b);
            row("fan1_stride", nm, [&] { fan1_stride<<<g, b>>>(a, mm, size, t); });
        }
    }
    for (int gb : {16 * 1000 + 256, 128 * 1000 + 32, 132 * 1000 + 32, 1056 * 1000 + 32, 1056 * 1000 + 128}) {
        int g = gb / 1000, b = gb % 1000;
        char nm[64]; snprintf(nm, sizeof nm, "%dx%d", g, b);
        row("empty", nm, [&] { k_empty<<<g, b>>>(); });
    }

    // (3) rows_template<16,4>: as is, padded, direct
    printf("\n# rows: w h variant single_us\n");
    for (int wh : {512 * 10000 + 256, 3072 * 10000 + 3072}) {
        int w = wh / 10000, hgt = wh % 10000;
        float *in, *o; CK(cudaMalloc(&in, (size_t)w * hgt * 4)); CK(cudaMalloc(&o, (size_t)w * hgt * 4));
        CK(cudaMemset(in, 0, (size_t)w * hgt * 4));
        dim3 grid(w / 32, hgt / 4), blk(16, 4);
        char nm[64];
        snprintf(nm, sizeof nm, "%dx%d_tile", w, hgt); row("rows", nm, [&] { rows_template<16, 4, 0><<<grid, blk>>>(in, o, w); });
        snprintf(nm, sizeof nm, "%dx%d_padded", w, hgt); row("rows", nm, [&] { rows_template<16, 4, 1><<<grid, blk>>>(in, o, w); });
        snprintf(nm, sizeof nm, "%dx%d_direct", w, hgt); row("rows", nm, [&] { rows_direct<16, 4><<<grid, blk>>>(in, o, w); });
        snprintf(nm, sizeof nm, "%dx%d_empty", w, hgt); row("rows", nm, [&] { k_empty<<<grid, blk>>>(); });
        CK(cudaFree(in)); CK(cudaFree(o));
    }
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
