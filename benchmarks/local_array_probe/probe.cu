// s14-local (issue 29, GA401 local array): kernels/spills hist_local vs its hand fix hist_unrolled
// at kernels/spills/hist_local.toml's launch (264 x 256, n = 4M ints in [0, 64), seed 1), L2
// flushed (a 256 MB memset) before each timed launch, cudaEvent median of 51 after 5 warm-ups.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "../../kernels/spills/spills.cu"

typedef void (*K)(const int*, unsigned*, int);

// the same loops without the final atomics (each thread stores its 16 bins to its own words of a
// 264*256*16 buffer): the loops' cost apart from the atomics phase
extern "C" __global__ void loop_local(const int* __restrict__ in, unsigned* __restrict__ out, int n) {
    unsigned bins[BINS];
    for (int b = 0; b < BINS; ++b) bins[b] = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        bins[in[i] & (BINS - 1)] += 1;
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, T = blockDim.x * gridDim.x;
    for (int b = 0; b < BINS; ++b) out[b * T + t] = bins[b];
}
extern "C" __global__ void loop_unrolled(const int* __restrict__ in, unsigned* __restrict__ out, int n) {
    unsigned bins[BINS];
#pragma unroll
    for (int b = 0; b < BINS; ++b) bins[b] = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int v = in[i] & (BINS - 1);
#pragma unroll
        for (int b = 0; b < BINS; ++b) bins[b] += (v == b);
    }
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, T = blockDim.x * gridDim.x;
#pragma unroll
    for (int b = 0; b < BINS; ++b) out[b * T + t] = bins[b];
}

static float med(K k, const int* in, unsigned* out, int n, char* flush, size_t fb, bool ncu) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    if (ncu) { cudaMemset(out, 0, 64); k<<<264, 256>>>(in, out, n); cudaDeviceSynchronize(); return 0.f; }
    std::vector<float> v;
    for (int i = 0; i < 56; ++i) {
        cudaMemset(out, 0, 64); cudaMemset(flush, i & 0xff, fb);
        cudaEventRecord(a); k<<<264, 256>>>(in, out, n); cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); if (i >= 5) v.push_back(ms);
    }
    std::sort(v.begin(), v.end()); return v[v.size() / 2] * 1000.f;
}

int main(int argc, char** argv) {
    bool ncu = argc > 1;
    const int n = 4194304;
    std::vector<int> h(n); srand(1); for (int i = 0; i < n; ++i) h[i] = rand() % 64;
    int* in; unsigned* out; char* flush; size_t fb = 256u << 20;
    cudaMalloc(&in, n * 4); cudaMalloc(&out, 264 * 256 * 16 * 4); cudaMalloc(&flush, fb);
    cudaMemcpy(in, h.data(), n * 4, cudaMemcpyHostToDevice);
    float tl = med(hist_local, in, out, n, flush, fb, ncu);
    unsigned r1[16], r2[16]; cudaMemcpy(r1, out, 64, cudaMemcpyDeviceToHost);
    float tu = med(hist_unrolled, in, out, n, flush, fb, ncu);
    cudaMemcpy(r2, out, 64, cudaMemcpyDeviceToHost);
    bool same = true; for (int i = 0; i < 16; ++i) same = same && r1[i] == r2[i];
    float ll = med(loop_local, in, out, n, flush, fb, ncu), lu = med(loop_unrolled, in, out, n, flush, fb, ncu);
    if (!ncu) printf("hist_local %.2f us, hist_unrolled %.2f us, ratio local/unrolled %.3f, outputs %s, err %s\n",
                     tl, tu, tl / tu, same ? "equal" : "DIFFER", cudaGetErrorString(cudaGetLastError()));
    if (!ncu) printf("without the atomics: loop_local %.2f us, loop_unrolled %.2f us, ratio %.3f\n", ll, lu, ll / lu);
    return 0;
}
