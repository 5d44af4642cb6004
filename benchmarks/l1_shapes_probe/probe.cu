// s12-soa (issue 29): (1) the L1 data path's cycles per global load request by the request's
// shape (stride between lanes, active lanes), L1-resident, one CTA of 32 warps per SM, 8
// independent loads per iteration, clock64 per CTA; printed beside the candidate models:
// 128-byte lines, sectors / 4, the most sectors sharing one of a line's four 32-byte slots
// ("slot"), lines / 4 (the tag stage's 4 sets a cycle), the most distinct words in one of the
// 32 four-byte banks ("bankway", as shared memory counts its wavefronts). (2) the kernels/cells GA301
// proxies (proxies.cu) timed, cudaEvent, median of 101 launches (iota fill as gpuadvise's).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "proxies.cu"

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

extern "C" __global__ void __launch_bounds__(1024) l1shape(const unsigned* __restrict__ p, unsigned* out, long long* cyc, int* smid, int stride, int active, int iters, int mask, int off, int pitch2) {
    extern __shared__ unsigned pad[];  // only to keep one CTA per SM
    const int lane = threadIdx.x & 31;
    // lane l at off + l * stride, or with pitch2: two half-warps of 16 lanes, pitch2 bytes apart
    const size_t at = pitch2 ? (size_t)off + (lane >> 4) * pitch2 + (lane & 15) * stride
                             : (size_t)off + (size_t)lane * stride;
    const unsigned* a = (const unsigned*)((const char*)p + at);
    unsigned s = 0;
    __syncthreads();
    long long t0 = clock64();
    if (lane < active) {
        for (int i = 0; i < iters; ++i) {
            // mask is 0 at run time: the same 8 addresses each iteration, unknown to the compiler
            const unsigned* ai = a + ((i & mask) << 10);
#pragma unroll
            for (int r = 0; r < 8; ++r) {  // 8 regions 34,304 bytes apart: no overlap, other sets
                s += ai[r * (34304 / 4)];
            }
        }
    }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) {
        cyc[blockIdx.x] = t1 - t0;
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        smid[blockIdx.x] = (int)id;
    }
    if (s == 0xdeadbeefu) out[threadIdx.x] = s + pad[0];
}

struct Shape { int stride, active, off = 0, pitch2 = 0; };

int main(int argc, char** argv) {
    bool ncu = argc > 1;  // under ncu: each launch once
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("device %s SMs %d\n", prop.name, sms);
    unsigned *p, *out;
    long long* cyc;
    int* smid;
    CHECK(cudaMalloc(&p, 1 << 20));
    CHECK(cudaMemset(p, 1, 1 << 20));  // 8 x 34,304 + 32 x 1,056 bytes < 1 MiB
    CHECK(cudaMalloc(&out, 4096));
    CHECK(cudaMalloc(&cyc, sms * sizeof(long long)));
    CHECK(cudaMalloc(&smid, sms * sizeof(int)));
    const int smem = 100 * 1024;
    CHECK(cudaFuncSetAttribute(l1shape, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    std::vector<Shape> shapes = {{4, 32}, {8, 32}, {32, 32}, {44, 32}, {64, 32}, {96, 32}, {128, 32},
                                 {136, 32}, {160, 32}, {256, 32}, {288, 32}, {1056, 32}, {44, 8},
                                 {44, 4}, {128, 8}, {160, 8}, {160, 16}, {44, 16}, {32, 8}, {12, 32}, {40, 32},
                                 {52, 32}, {132, 32}, {132, 8}, {260, 32}, {2052, 32},
                                 {4, 32, 64}, {4, 32, 0, 4096}, {4, 32, 0, 4160}, {4, 32, 32, 4160},
                                 {4, 32, 96, 4096}, {8, 32, 64}};
    const int iters = ncu ? 16 : 256;
    printf("stride_B active off pitch2 lines sectors sect/4 slot lines/4 bankway | cycles_per_request median min max (CTAs on %s SMs)\n", "distinct");
    for (const Shape& sh : shapes) {
        std::set<long> lines, sectors;
        std::set<long> words;
        int slot[4] = {0, 0, 0, 0}, bank[32] = {0};
        for (int l = 0; l < sh.active; ++l) {
            long b = sh.pitch2 ? sh.off + (l >> 4) * (long)sh.pitch2 + (l & 15) * (long)sh.stride
                               : sh.off + (long)l * sh.stride;
            lines.insert(b / 128);
            if (sectors.insert(b / 32).second) slot[(b / 32) % 4]++;
            if (words.insert(b / 4).second) bank[(b / 4) % 32]++;
        }
        int mslot = *std::max_element(slot, slot + 4), mbank = *std::max_element(bank, bank + 32);
        std::vector<double> per;
        std::vector<long long> h(sms);
        std::vector<int> hs(sms);
        const int reps = ncu ? 1 : 5;
        for (int rep = 0; rep < reps; ++rep) {
            l1shape<<<sms, 1024, smem>>>(p, out, cyc, smid, sh.stride, sh.active, iters, argc > 99 ? 1 : 0, sh.off, sh.pitch2);
            CHECK(cudaDeviceSynchronize());
            CHECK(cudaMemcpy(h.data(), cyc, sms * sizeof(long long), cudaMemcpyDeviceToHost));
            CHECK(cudaMemcpy(hs.data(), smid, sms * sizeof(int), cudaMemcpyDeviceToHost));
            for (int i = 0; i < sms; ++i) per.push_back((double)h[i] / (32.0 * iters * 8.0));
        }
        std::set<int> ds(hs.begin(), hs.end());
        std::sort(per.begin(), per.end());
        printf("%5d %2d %3d %5d %3zu %3zu %5.2f %3d %5.2f %3d | %7.3f %7.3f %7.3f (%zu)\n", sh.stride, sh.active, sh.off, sh.pitch2,
               lines.size(), sectors.size(), sectors.size() / 4.0, mslot, lines.size() / 4.0, mbank,
               per[per.size() / 2], per.front(), per.back(), ds.size());
    }
    // (2) the proxies
    unsigned *aos, *o2;
    const size_t words = 11534336;
    CHECK(cudaMalloc(&aos, words * 4));
    CHECK(cudaMalloc(&o2, 1048576 * 4));
    {
        std::vector<unsigned> iota(words);
        for (size_t i = 0; i < words; ++i) iota[i] = (unsigned)i;
        CHECK(cudaMemcpy(aos, iota.data(), words * 4, cudaMemcpyHostToDevice));
    }
    struct K { const char* name; void (*f)(const unsigned*, unsigned*); };
    K ks[] = {{"fields_aos (f301_aos)", f301_aos}, {"fields_soa (f301_soa)", f301_soa},
              {"packed_aos (p301_aos)", p301_aos}, {"packed_soa (p301_soa)", p301_soa}};
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    const int n = ncu ? 1 : 101;
    for (const K& k : ks) {
        std::vector<float> ms;
        for (int i = 0; i < n + 3; ++i) {
            CHECK(cudaEventRecord(e0));
            k.f<<<dim3(64, 64), dim3(16, 16)>>>(aos, o2);
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float t;
            CHECK(cudaEventElapsedTime(&t, e0, e1));
            if (i >= 3) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        printf("%s median_us %.2f min_us %.2f\n", k.name, ms[ms.size() / 2] * 1e3, ms.front() * 1e3);
    }
    CHECK(cudaGetLastError());
    return 0;
}
