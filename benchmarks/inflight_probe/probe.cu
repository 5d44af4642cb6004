// benchmarks/inflight_probe (s12-inflight, issue 29): do warps of one CTA that load the same line at the same time wait on the
// first one's miss (a miss in flight, merged), or hit the L1? One CTA of W warps (1..16), each warp a
// dependent chain (pointer chase) of 32 loads over the same lines, L2-warm and L1-cold (written by an
// earlier launch). Patterns: "line": a warp's 32 lanes read one 128-byte line a step (4 sectors);
// "rows": lane l reads its own row (32 lines a request, PolyBench atax's shape). Schedules:
// "together": every warp chases at once; "after": warp 0 chases first, a barrier, then warps 1.. chase
// the same lines (then resident in the L1: hits); "lag": warps 1-7 of 8 start 150, 1000 or 4000 cycles
// after warp 0 (timed from their start). Last, PolyBench gemm's launch times (see gemm_mem).
// clock64 per warp around the chain; cycles a load,
// the median over 11 launches of the warps' mean, and the smallest and largest warp's.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define STEPS 32
// line: step i of lane l at i*32 + l (ints); rows: at l*1024 + i*32 (row l 4 KB, each step a new line)
__device__ __forceinline__ int at(int rows, int i, int lane) { return rows ? lane * 1024 + i * 32 : i * 32 + lane; }
__global__ void init(int* buf, int rows) {
    int lane = threadIdx.x;
    for (int i = 0; i < STEPS; i++) buf[at(rows, i, lane)] = (i + 1) % STEPS;
}
__global__ void chase(const int* buf, int rows, int after, long long* cyc, int* sink, int lag) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int idx = 0;
    if (lag && w > 0) { long long s = clock64(); while (clock64() - s < lag) { } }
    if (after) {
        if (w == 0) for (int k = 0; k < STEPS; k++) idx = buf[at(rows, idx, lane)];
        __syncthreads();
        if (w == 0) { if (idx == 12345) *sink = idx; return; }
    }
    long long t0 = clock64();
    for (int k = 0; k < STEPS; k++) idx = buf[at(rows, idx, lane)];
    long long t1 = clock64();
    if (lane == 0) cyc[w] = t1 - t0;
    if (idx == 12345) *sink = idx;
}
// PolyBench gemm (512^3, 32x8 blocks, grid 16x64) as the corpus runs it, and with the sum in a
// register (GA308's fix): each launch's time (cudaEvent, median of 21 after 3 warm-ups)
__global__ void gemm_mem(const float* a, const float* b, float* c) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 512 && j < 512) {
        c[i * 512 + j] *= 2123.0f;
        for (int k = 0; k < 512; k++) c[i * 512 + j] += 32412.0f * a[i * 512 + k] * b[k * 512 + j];
    }
}
__global__ void gemm_reg(const float* a, const float* b, float* c) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < 512 && j < 512) {
        float s = c[i * 512 + j] * 2123.0f;
        for (int k = 0; k < 512; k++) s += 32412.0f * a[i * 512 + k] * b[k * 512 + j];
        c[i * 512 + j] = s;
    }
}
static double time_gemm(int reg, float* a, float* b, float* c) {
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<double> v;
    for (int r = 0; r < 24; r++) {
        CK(cudaEventRecord(e0));
        if (reg) gemm_reg<<<dim3(16, 64), dim3(32, 8)>>>(a, b, c); else gemm_mem<<<dim3(16, 64), dim3(32, 8)>>>(a, b, c);
        CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 3) v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s sms %d\n", prop.name, prop.multiProcessorCount);
    int *buf, *sink; long long* cyc;
    CK(cudaMalloc(&buf, 32 * 1024 * 4 + 4096)); CK(cudaMalloc(&cyc, 16 * 8)); CK(cudaMalloc(&sink, 4));
    const int ws[] = {1, 2, 4, 8, 16};
    for (int rows = 0; rows < 2; rows++)
        for (int after = 0; after < 2; after++)
            for (int wi = 0; wi < 5; wi++) {
                int W = ws[wi];
                if (after && W == 1) continue;
                std::vector<double> mean, lo, hi;
                for (int r = 0; r < 11; r++) {
                    CK(cudaMemset(cyc, 0, 16 * 8));
                    init<<<1, 32>>>(buf, rows);
                    chase<<<1, 32 * W>>>(buf, rows, after, cyc, sink, 0);
                    long long c[16]; CK(cudaMemcpy(c, cyc, 16 * 8, cudaMemcpyDeviceToHost));
                    double s = 0, a = 1e30, b = 0; int n = 0;
                    for (int w = after ? 1 : 0; w < W; w++) { double x = c[w] / (double)STEPS; s += x; a = std::min(a, x); b = std::max(b, x); n++; }
                    mean.push_back(s / n); lo.push_back(a); hi.push_back(b);
                }
                std::sort(mean.begin(), mean.end()); std::sort(lo.begin(), lo.end()); std::sort(hi.begin(), hi.end());
                printf("inflight %s %s warps %d: %.1f cycles a load (warps' least %.1f, most %.1f)\n",
                       rows ? "rows" : "line", after ? "after" : "together", W, mean[5], lo[5], hi[5]);
            }
    // lag: warps 1..7 of 8 start their chase lag cycles after warp 0 (timed from their start)
    const int lags[] = {150, 1000, 4000};
    for (int rows = 0; rows < 2; rows++)
        for (int li = 0; li < 3; li++) {
            std::vector<double> w0, rest;
            for (int r = 0; r < 11; r++) {
                CK(cudaMemset(cyc, 0, 16 * 8));
                init<<<1, 32>>>(buf, rows);
                chase<<<1, 256>>>(buf, rows, 0, cyc, sink, lags[li]);
                long long c[16]; CK(cudaMemcpy(c, cyc, 16 * 8, cudaMemcpyDeviceToHost));
                double s = 0; for (int w = 1; w < 8; w++) s += c[w] / (double)STEPS;
                w0.push_back(c[0] / (double)STEPS); rest.push_back(s / 7);
            }
            std::sort(w0.begin(), w0.end()); std::sort(rest.begin(), rest.end());
            printf("inflight %s lag %d warps 8: warp 0 %.1f cycles a load, warps 1-7 %.1f\n",
                   rows ? "rows" : "line", lags[li], w0[5], rest[5]);
        }
    {
        float *a, *b, *c; CK(cudaMalloc(&a, 512 * 512 * 4)); CK(cudaMalloc(&b, 512 * 512 * 4)); CK(cudaMalloc(&c, 512 * 512 * 4));
        CK(cudaMemset(a, 0, 512 * 512 * 4)); CK(cudaMemset(b, 0, 512 * 512 * 4)); CK(cudaMemset(c, 0, 512 * 512 * 4));
        double m = time_gemm(0, a, b, c), g = time_gemm(1, a, b, c);
        printf("gemm 512^3 32x8: c in memory %.4f ms, sum in a register %.4f ms, ratio %.3f\n", m, g, m / g);
    }
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
