// s10-launch (issue 29): the launch's fixed cost, the block scheduler's cost per CTA an SM, and
// the per-wave cost on an H200, by empty and near-empty kernels; plus kernels/fuse's and
// kernels/merge16's launches timed the way gpuadvise's runner times them (a spin kernel queued
// first so no host overhead lands between the events, the L2 flushed by a read kernel, one
// launch between two events, the median of many).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

__global__ void k_empty() {}
__global__ void k_write(int* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x; }
// as k_write but holding dynamic shared memory (limits CTAs an SM); touches one word of it
__global__ void k_write_smem(int* out) {
    extern __shared__ int s[];
    if (threadIdx.x == 0) s[0] = blockIdx.x;
    out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x;
}
__global__ void k_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
__global__ void k_flush(const int4* p, long long n4, int* sink) {
    int acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        int4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;
}

// kernels/fuse (included as is) and the variants the analysis makes / a first-loop-only control
#include "../../kernels/fuse/fuse.cu"
__global__ void exp_sum_fused(float* out, const float* inp, float* sums, int n) {
    int row = blockIdx.x; int tid = threadIdx.x; const float* x = inp + row * n;
    float s = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) { out[row * n + i] = expf(x[i]); s += out[row * n + i]; }
    sums[row * blockDim.x + tid] = s;
}
__global__ void exp_only(float* out, const float* inp, float* sums, int n) {
    int row = blockIdx.x; int tid = threadIdx.x;
    for (int i = tid; i < n; i += blockDim.x) out[row * n + i] = expf(inp[row * n + i]);
    sums[row * blockDim.x + tid] = 0.0f;
}
__global__ void square_sum_fused(unsigned* buf, const unsigned* src, unsigned* sums, int len) {
    int base = blockIdx.x * len; unsigned ss = 0;
    for (int i = threadIdx.x; i < len; i += blockDim.x) { unsigned v = src[base + i]; buf[base + i] = v * v; ss += buf[base + i]; }
    sums[blockIdx.x * blockDim.x + threadIdx.x] = ss;
}
// kernels/merge16's reverse_global and two of its blocks in one CTA of 32
__global__ void reverse_global16(const int* __restrict__ in, int* __restrict__ out) { out[blockIdx.x * 16 + 15 - threadIdx.x] = in[blockIdx.x * 16 + threadIdx.x] + 1; }
__global__ void reverse_global_merged(const int* __restrict__ in, int* __restrict__ out) {
    int b = blockIdx.x * 2 + threadIdx.x / 16, t = threadIdx.x % 16;
    out[b * 16 + 15 - t] = in[b * 16 + t] + 1;
}


// a warp's dependent chain of 64 coalesced loads (a pointer chase, 128 B a load) served by:
// mode 0 the thread's own stores just made (does a store leave its line in the L1?), 1 the L2
// (written by an earlier launch), 2 the L1 (a second pass over lines loaded), 3 DRAM (L2 flushed)
__global__ void lat_chase(int* buf, int mode, long long* cyc, int* sink) {
    int lane = threadIdx.x;
    if (mode == 0) for (int i = 0; i < 64; i++) buf[i * 32 + lane] = (i + 1) & 63;
    int idx = 0;
    if (mode == 2) for (int k = 0; k < 64; k++) idx = buf[idx * 32 + lane];
    long long t0 = clock64();
    for (int k = 0; k < 64; k++) idx = buf[idx * 32 + lane];
    long long t1 = clock64();
    if (lane == 0) cyc[0] = t1 - t0;
    if (idx == 12345) *sink = idx;
}
__global__ void chase_init(int* buf) { for (int i = 0; i < 64; i++) buf[i * 32 + threadIdx.x] = (i + 1) & 63; }

static cudaEvent_t e0, e1;
static int4* g_flush; static long long g_n4; static int* g_sink; static int g_sms;
static const long long SPIN = 20000;  // ~10 us at 1.98 GHz

template <class F> float single_median(F launch, int reps, bool flush) {
    std::vector<float> v;
    for (int r = 0; r < reps; r++) {
        k_spin<<<1, 1>>>(SPIN);
        if (flush) k_flush<<<g_sms * 4, 256>>>(g_flush, g_n4, g_sink);
        CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000.f);
    }
    std::sort(v.begin(), v.end()); return v[v.size() / 2];
}
// the same without the spin: the host's launch call inside the events (what a naive timing sees)
template <class F> float single_nospin(F launch, int reps) {
    std::vector<float> v;
    for (int r = 0; r < reps; r++) {
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000.f);
    }
    std::sort(v.begin(), v.end()); return v[v.size() / 2];
}
// back to back: k launches between two events (after a spin), per launch; median of reps
template <class F> float b2b_median(F launch, int k, int reps) {
    std::vector<float> v;
    for (int r = 0; r < reps; r++) {
        k_spin<<<1, 1>>>(SPIN * 4);
        CK(cudaEventRecord(e0)); for (int i = 0; i < k; i++) launch(); CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000.f / k);
    }
    std::sort(v.begin(), v.end()); return v[v.size() / 2];
}

struct Pt { double x, y; };
static void fit(const std::vector<Pt>& p, double& a, double& b) {
    double n = p.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto& q : p) { sx += q.x; sy += q.y; sxx += q.x * q.x; sxy += q.x * q.y; }
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx); a = (sy - b * sx) / n;
}

int main() {
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    int clk = 0; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    printf("device %s sms %d l2 %d smem/sm %zu clock_khz %d\n", prop.name, g_sms, prop.l2CacheSize, prop.sharedMemPerMultiprocessor, clk);
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    g_n4 = (2LL * prop.l2CacheSize) / 16; CK(cudaMalloc(&g_flush, g_n4 * 16)); CK(cudaMemset(g_flush, 0, g_n4 * 16));
    CK(cudaMalloc(&g_sink, 4));
    const int MAXW = 64;
    size_t out_n = (size_t)g_sms * 2048 * MAXW + 4096;  // 64 waves of full SMs
    int* out; CK(cudaMalloc(&out, out_n * 4));
    CK(cudaFuncSetAttribute(k_write_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop.sharedMemPerBlockOptin));
    // warm up
    for (int i = 0; i < 50; i++) { k_empty<<<1, 32>>>(); k_write<<<g_sms, 128>>>(out); }
    CK(cudaDeviceSynchronize());

    // 1) the floor
    printf("\n# floor: empty kernel, 1 CTA of 32, median us\n");
    printf("floor spin_single %.3f nospin_single %.3f b2b100 %.3f\n",
           single_median([&] { k_empty<<<1, 32>>>(); }, 301, false),
           single_nospin([&] { k_empty<<<1, 32>>>(); }, 301),
           b2b_median([&] { k_empty<<<1, 32>>>(); }, 100, 21));
    printf("floor_write spin_single %.3f  flushed %.3f\n",
           single_median([&] { k_write<<<1, 32>>>(out); }, 301, false),
           single_median([&] { k_write<<<1, 32>>>(out); }, 101, true));

    // 2) sweep: block sizes x CTA counts (in waves of the occupancy), empty and write kernels
    printf("\n# sweep: kernel block resident_per_sm grid ctas_per_sm(busiest) waves single_us b2b_us\n");
    int blocks[] = {16, 32, 64, 128, 256, 512, 1024};
    double wfr[] = {0, 1.0 / 32, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64};  // 0: one CTA
    printf("\n# fit per (kernel, block, resident): single_us = a + b * ctas_per_sm over grids >= 1 wave\n");
    for (int kind = 0; kind < 2; kind++) {
        for (int B : blocks) {
            int res = 0;
            if (kind == 0) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&res, k_empty, B, 0));
            else CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&res, k_write, B, 0));
            std::vector<Pt> pts, pts_b2b;
            for (double w : wfr) {
                long long grid = w == 0 ? 1 : std::max(1LL, (long long)(w * res * g_sms));
                if ((size_t)grid * B > out_n) continue;
                long long busiest = (grid + g_sms - 1) / g_sms;
                int reps = grid > 100000 ? 31 : 101;
                float s, b;
                if (kind == 0) {
                    s = single_median([&] { k_empty<<<(unsigned)grid, B>>>(); }, reps, false);
                    b = b2b_median([&] { k_empty<<<(unsigned)grid, B>>>(); }, 20, 7);
                } else {
                    s = single_median([&] { k_write<<<(unsigned)grid, B>>>(out); }, reps, false);
                    b = b2b_median([&] { k_write<<<(unsigned)grid, B>>>(out); }, 20, 7);
                }
                printf("sweep %s %d %d %lld %lld %.4f %.3f %.3f\n", kind ? "write" : "empty", B, res, grid, busiest,
                       (double)grid / ((double)res * g_sms), s, b);
                if (w >= 1) { pts.push_back({(double)busiest, s}); pts_b2b.push_back({(double)busiest, b}); }
            }
            double a, sl, a2, sl2; fit(pts, a, sl); fit(pts_b2b, a2, sl2);
            printf("fit %s block %d resident %d: single a=%.3f us, b=%.2f ns/CTA/SM (%.1f ns/warp/SM); b2b a=%.3f us b=%.2f ns/CTA/SM\n",
                   kind ? "write" : "empty", B, res, a, sl * 1000, sl * 1000 / ((B + 31) / 32), a2, sl2 * 1000);
        }
    }

    // 3) occupancy limited by shared memory: write kernel, 128 and 32 threads, R CTAs an SM
    printf("\n# smem-limited: kernel block smem_bytes resident grid ctas_per_sm waves single_us b2b_us\n");
    for (int B : {32, 128}) {
        for (int R : {1, 2, 4, 8, 16}) {
            size_t sm = prop.sharedMemPerMultiprocessor / R - prop.reservedSharedMemPerBlock - 16;
            sm = std::min(sm, prop.sharedMemPerBlockOptin); sm &= ~(size_t)127;
            int res = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&res, k_write_smem, B, sm));
            std::vector<Pt> pts;
            for (double w : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0}) {
                long long grid = (long long)(w * res * g_sms);
                long long busiest = (grid + g_sms - 1) / g_sms;
                float s = single_median([&] { k_write_smem<<<(unsigned)grid, B, sm>>>(out); }, 101, false);
                float b = b2b_median([&] { k_write_smem<<<(unsigned)grid, B, sm>>>(out); }, 20, 7);
                printf("smem write %d %zu %d %lld %lld %.1f %.3f %.3f\n", B, sm, res, grid, busiest, w, s, b);
                pts.push_back({(double)busiest, s});
            }
            double a, sl; fit(pts, a, sl);
            printf("fit smem block %d resident %d: single a=%.3f us b=%.2f ns/CTA/SM\n", B, res, a, sl * 1000);
        }
    }

    // 4) kernels/fuse and merge16 as the runner times them (spin, flushed L2, single launch)
    printf("\n# cases: name grid block single_flushed_us single_warm_us\n");
    int n = 2048, rows = 264;
    float *inp, *o, *sums; unsigned *usrc, *ubuf, *usums;
    CK(cudaMalloc(&inp, rows * n * 4)); CK(cudaMalloc(&o, rows * n * 4)); CK(cudaMalloc(&sums, rows * 128 * 4));
    CK(cudaMalloc(&usrc, rows * n * 4)); CK(cudaMalloc(&ubuf, rows * n * 4)); CK(cudaMalloc(&usums, rows * 128 * 4));
    CK(cudaMemset(inp, 0, rows * n * 4)); CK(cudaMemset(usrc, 0, rows * n * 4));
    auto casef = [&](const char* name, int g, int b, auto fn) {
        printf("case %s %d %d %.3f %.3f\n", name, g, b, single_median(fn, 401, true), single_median(fn, 201, false));
    };
    casef("exp_sum", rows, 128, [&] { exp_sum<<<rows, 128>>>(o, inp, sums, n); });
    casef("exp_sum_fused", rows, 128, [&] { exp_sum_fused<<<rows, 128>>>(o, inp, sums, n); });
    casef("exp_only", rows, 128, [&] { exp_only<<<rows, 128>>>(o, inp, sums, n); });
    casef("exp_sum_next", rows, 128, [&] { exp_sum_next<<<rows, 128>>>(o, inp, sums, n); });
    casef("exp_sum_mirror", rows, 128, [&] { exp_sum_mirror<<<rows, 128>>>(o, inp, sums, n); });
    casef("square_sum", rows, 128, [&] { square_sum<<<rows, 128>>>(ubuf, usrc, usums, n); });
    casef("square_sum_fused", rows, 128, [&] { square_sum_fused<<<rows, 128>>>(ubuf, usrc, usums, n); });
    casef("scaled_dot", rows, 128, [&] { scaled_dot<128><<<rows, 128>>>(inp, inp, o, sums, n); });
    int m = 67584; int *mi, *mo; CK(cudaMalloc(&mi, m * 4)); CK(cudaMalloc(&mo, m * 4)); CK(cudaMemset(mi, 0, m * 4));
    casef("reverse_global16", m / 16, 16, [&] { reverse_global16<<<m / 16, 16>>>(mi, mo); });
    casef("reverse_global_merged32", m / 32, 32, [&] { reverse_global_merged<<<m / 32, 32>>>(mi, mo); });
    casef("empty_4224x16", m / 16, 16, [&] { k_empty<<<m / 16, 16>>>(); });
    casef("empty_2112x32", m / 32, 32, [&] { k_empty<<<m / 32, 32>>>(); });
    casef("empty_264x128", rows, 128, [&] { k_empty<<<rows, 128>>>(); });

    // 5) a dependent load's latency by where it is served (cycles a load, median of 21)
    {
        int* buf; long long* cyc; CK(cudaMalloc(&buf, 64 * 32 * 4)); CK(cudaMalloc(&cyc, 8));
        const char* names[] = {"own_store_reload", "l2_hit", "l1_hit", "dram"};
        for (int mode = 0; mode < 4; mode++) {
            std::vector<double> v;
            for (int r = 0; r < 21; r++) {
                chase_init<<<1, 32>>>(buf);
                if (mode == 3) k_flush<<<g_sms * 4, 256>>>(g_flush, g_n4, g_sink);
                lat_chase<<<1, 32>>>(buf, mode == 3 ? 1 : mode, cyc, g_sink);
                long long c; CK(cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost)); v.push_back(c / 64.0);
            }
            std::sort(v.begin(), v.end());
            printf("chase %s %.1f cycles a load (min %.1f max %.1f)\n", names[mode], v[10], v[0], v[20]);
        }
    }
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
