// s9-est probe (issue 29): (1) the L1's capacity: a warp re-reading its own lines after the SM's
// warps loaded F bytes (F per SM from 32 KB to 1 MB): where do the re-reads turn into L2 loads?
// (2) the L2's serial time per warp-level RED request on one 512-byte region, by how many
// lanes, words, sectors and lines the request carries (GA208's REQUEST_NS is per request and line).
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

// (1) each warp owns `lines` 128-byte lines (disjoint); `reps` passes over them, a coalesced
// float a lane per line: the SM's 8 warps load 8 * lines * 128 bytes between two reads of a line
__global__ void reread(const float* __restrict__ d, float* out, int lines, int reps) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    const float* p = d + (size_t)warp * lines * 32 + lane;
    float s = 0.f;
    for (int r = 0; r < reps; r++)
        for (int l = 0; l < lines; l++) s += p[(size_t)l * 32];
    if (s == -1.f) out[0] = s;
}

// (2) each warp: `iters` requests to one 512-byte region (128 words = 4 lines of 32 words)
__device__ __forceinline__ int word_of(int pat, int lane, int line) {
    switch (pat) {
    case 0: return line * 32 + lane;                   // 32 lanes, 32 words, 1 line, 4 sectors
    case 1: return lane < 8 ? line * 32 + lane : -1;   // 8 lanes, 8 words, 1 line, 1 sector
    case 2: return lane < 16 ? line * 32 + lane : -1;  // 16 lanes, 2 sectors
    case 3: return (lane >> 3) * 32 + (lane & 7);      // 32 lanes, 4 lines, 1 sector each
    case 4: return (lane >> 3) * 32 + (lane & 7) * 4;  // 32 lanes, 4 lines, 4 sectors each
    case 5: return lane < 4 ? lane * 32 : -1;          // 4 lanes, 4 lines, 1 word each
    case 6: return lane < 1 ? line * 32 : -1;          // 1 lane, 1 word
    case 7: return lane < 4 ? line * 32 + lane * 8 : -1; // 4 lanes, 1 line, 4 sectors, 1 word each
    }
    return -1;
}
__global__ void red(unsigned* bins, int pat, int iters) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    for (int i = 0; i < iters; i++) {
        int w = word_of(pat, lane, (warp + i) & 3);
        if (w >= 0) atomicAdd(&bins[w], 1u);
    }
}
// a histogram's flush: nbins words, every CTA adds each (a thread per word, blockDim apart)
__global__ void flush(unsigned* bins, int nbins) {
    for (int i = threadIdx.x; i < nbins; i += blockDim.x) atomicAdd(&bins[i], (unsigned)i + blockIdx.x);
}

// (3) a serial warp's loop (HeCBench chemv's shape: one warp an SM, two complex loads a lane
// an iteration from L1-resident lines, a complex multiply-add into a sum): cycles an iteration
// (a) with the sum stored to global memory every iteration (nvcc keeps the loads after it),
// (b) the sum in a register, (c) as (a) with only 2 of the 32 lanes active
__global__ void serial(const float2* a, const float2* x, float2* y, int n, int mode, long long* cyc) {
    int lane = threadIdx.x;
    if (mode == 2 && lane >= 2) return;
    const float2* pa = a + lane * 187;
    const float2* px = x + (lane * 7) % 64;
    float2 acc = y[lane];
    long long t0 = clock64();
    for (int i = 0; i < n; i++) {
        float2 u = pa[i & 255], v = px[i & 31];
        float re = u.x * v.x - u.y * v.y, im = u.x * v.y + u.y * v.x;
        if (mode == 1) { acc.x += re; acc.y += im; }
        else { float2 t = y[lane]; t.x += re; t.y += im; y[lane] = t; }
    }
    long long t1 = clock64();
    if (mode == 1) y[lane] = acc;
    if (lane == 0) cyc[blockIdx.x] = t1 - t0;
}

template <typename F>
float time_ms(F launch) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    std::vector<float> t;
    for (int i = 0; i < 9; i++) {
        cudaEventRecord(a); launch(); cudaEventRecord(b);
        cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b);
        if (i >= 2) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

int main() {
    int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    printf("SMs %d clock %d kHz\n", sms, clk);
    // (1)
    int kb[] = {16, 32, 64, 96, 128, 160, 192, 208, 224, 240, 256, 288, 320, 384, 512, 1024};
    size_t most = (size_t)sms * 8 * (1024 * 1024 / 8 / 128) * 32;
    float* d; float* o; cudaMalloc(&d, most * 4); cudaMalloc(&o, 4); cudaMemset(d, 0, most * 4);
    printf("reread: 1 CTA of 8 warps an SM, each warp re-reading its lines; footprint per SM, ns per warp load (an SM), cycles per warp load at the clock\n");
    for (int k : kb) {
        int lines = k * 1024 / 8 / 128;
        long loads_per_sm = 0; int reps = std::max(4, (int)(2000000 / ((long)lines * 8)));
        loads_per_sm = (long)reps * lines * 8;
        float ms = time_ms([&] { reread<<<sms, 256>>>(d, o, lines, reps); });
        double ns = ms * 1e6 / loads_per_sm;
        printf("reread footprint %5d KB/SM lines/warp %5d reps %6d time %.4f ms ns/load %.3f cycles/load %.2f\n",
               k, lines, reps, ms, ns, ns * clk / 1e6);
    }
    cudaFree(d);
    // (2)
    unsigned* bins; cudaMalloc(&bins, 1 << 20); cudaMemset(bins, 0, 1 << 20);
    const char* what[] = {"32 lanes 32 words 1 line 4 sectors", "8 lanes 8 words 1 line 1 sector",
                          "16 lanes 16 words 1 line 2 sectors", "32 lanes 4 lines 1 sector each",
                          "32 lanes 4 lines 4 sectors each (8 words a line)", "4 lanes 4 lines 1 word each",
                          "1 lane 1 word", "4 lanes 1 line 4 sectors 1 word each"};
    int ctas = 4 * sms, iters = 64;
    double requests = (double)ctas * 8 * iters;  // on the one region
    printf("red: %d CTAs x 8 warps x %d requests, all on one 512-byte region (%.0f requests)\n", ctas, iters, requests);
    for (int p = 0; p < 8; p++) {
        float ms = time_ms([&] { red<<<ctas, 256>>>(bins, p, iters); });
        printf("red pattern %d (%s): %.4f ms, %.3f ns a request\n", p, what[p], ms, ms * 1e6 / requests);
    }
    int nb[] = {128, 768, 3072};
    int grids[] = {1056, 39063};
    for (int n : nb) for (int g : grids) {
        float ms = time_ms([&] { flush<<<g, 256>>>(bins, n); });
        double per_region = (double)g * 4;  // a request per line, 4 lines a region, per CTA
        printf("flush %d bins (%d regions) grid %d: %.4f ms, %.3f ns per (CTA, region line-request)\n",
               n, n / 128, g, ms, ms * 1e6 / per_region);
    }
    {
        float2 *a, *x, *y; long long* cyc; cudaMalloc(&a, 40000 * 8); cudaMalloc(&x, 4096 * 8);
        cudaMalloc(&y, 1024 * 8); cudaMalloc(&cyc, 64 * 8);
        cudaMemset(a, 0, 40000 * 8); cudaMemset(x, 0, 4096 * 8); cudaMemset(y, 0, 1024 * 8);
        const char* m[] = {"sum stored every iteration", "sum in a register", "stored, 2 lanes active"};
        for (int mode = 0; mode < 3; mode++) {
            int n = 20000;
            float ms = time_ms([&] { serial<<<12, 32>>>(a, x, y, n, mode, cyc); });
            long long c; cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
            printf("serial warp (12 CTAs of 32 threads) %s: %.4f ms for %d iterations, %.1f cycles an iteration (clock64), %.2f ns an iteration\n",
                   m[mode], ms, n, (double)c / n, ms * 1e6 / n);
        }
    }
    printf("status %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
