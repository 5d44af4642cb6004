// GA106 / GA501 measurements (issue 28 item 3): build and run on a GPU machine:
//   nvcc -O3 -arch=native -o sweep sweep.cu && ./sweep > sweep.txt
// 1. histogram256 (cuda-samples' kernel, per-warp shared sub-histograms, 192 threads) over 64 MB,
//    CTA count swept 132..2640 (the sample launches 240), and a uint4 variant (4 words per load);
// 2. the kernels/inflight grid-stride sum (2^22 floats, 128 threads) swept 132..2112 CTAs, and
//    sum_unrolled (8 float4 in flight) at 264 CTAs;
// 3. one vectorAdd of 50000 floats against an empty kernel and against 8 of them in one launch
//    (GA501's single-launch claim: the launch is mostly its own cost).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); exit(1); } } while (0)

#define WARP_COUNT 6
#define HIST_THREADS (WARP_COUNT * 32)
#define BINS 256
#define TAG_MASK 0xFFFFFFFFU
__device__ __forceinline__ void addByte(unsigned* s, unsigned d) { atomicAdd(s + d, 1); }
__device__ __forceinline__ void addWord(unsigned* s, unsigned w) {
    addByte(s, (w >> 0) & 0xFFU); addByte(s, (w >> 8) & 0xFFU);
    addByte(s, (w >> 16) & 0xFFU); addByte(s, (w >> 24) & 0xFFU);
}
__global__ void hist256(unsigned* partial, const unsigned* data, unsigned n) {
    __shared__ unsigned s[WARP_COUNT * BINS];
    unsigned* w = s + (threadIdx.x >> 5) * BINS;
    for (unsigned i = threadIdx.x; i < WARP_COUNT * BINS; i += blockDim.x) s[i] = 0;
    __syncthreads();
    for (unsigned pos = blockIdx.x * blockDim.x + threadIdx.x; pos < n; pos += blockDim.x * gridDim.x)
        addWord(w, data[pos]);
    __syncthreads();
    for (unsigned b = threadIdx.x; b < BINS; b += blockDim.x) {
        unsigned sum = 0;
        for (int k = 0; k < WARP_COUNT; k++) sum += s[b + k * BINS] & TAG_MASK;
        partial[blockIdx.x * BINS + b] = sum;
    }
}
__global__ void hist256_vec(unsigned* partial, const uint4* data, unsigned n4) {
    __shared__ unsigned s[WARP_COUNT * BINS];
    unsigned* w = s + (threadIdx.x >> 5) * BINS;
    for (unsigned i = threadIdx.x; i < WARP_COUNT * BINS; i += blockDim.x) s[i] = 0;
    __syncthreads();
    for (unsigned pos = blockIdx.x * blockDim.x + threadIdx.x; pos < n4; pos += blockDim.x * gridDim.x) {
        uint4 v = data[pos];
        addWord(w, v.x); addWord(w, v.y); addWord(w, v.z); addWord(w, v.w);
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < BINS; b += blockDim.x) {
        unsigned sum = 0;
        for (int k = 0; k < WARP_COUNT; k++) sum += s[b + k * BINS];
        partial[blockIdx.x * BINS + b] = sum;
    }
}
__global__ void sum_few(const float* __restrict__ x, float* __restrict__ out, unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (unsigned i = t; i < n; i += blockDim.x * gridDim.x) acc += x[i];
    out[t] = acc;
}
__global__ void sum_unrolled(const float4* __restrict__ x, float* __restrict__ out, unsigned n4) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
    float4 a[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (unsigned i = t; i + 7 * stride < n4; i += 8 * stride) {
#pragma unroll
        for (int k = 0; k < 8; ++k) { float4 v = x[i + k * stride]; a[k].x += v.x; a[k].y += v.y; a[k].z += v.z; a[k].w += v.w; }
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) acc += (a[k].x + a[k].y) + (a[k].z + a[k].w);
    out[t] = acc;
}
__global__ void empty() {}
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
__global__ void vadd_batch(const float* a, const float* b, float* c, int n, int batch) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n * batch) c[i] = a[i] + b[i];
}

template <typename F> float time_ms(F f, int reps = 50) {
    cudaEvent_t s, e; CK(cudaEventCreate(&s)); CK(cudaEventCreate(&e));
    f(); CK(cudaDeviceSynchronize());
    // cold-ish: each sample separately timed, median
    std::vector<float> v;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(s)); f(); CK(cudaEventRecord(e)); CK(cudaEventSynchronize(e));
        float ms; CK(cudaEventElapsedTime(&ms, s, e)); v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}


int main() {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    int sms = p.multiProcessorCount;
    printf("device %s, %d SMs\n", p.name, sms);
    // 1. histogram256
    const unsigned words = 16777216;  // 64 MB
    unsigned *d, *part; CK(cudaMalloc(&d, words * 4)); CK(cudaMalloc(&part, 64 * sms * BINS * 4));
    std::vector<unsigned> h(words); srand(2009); for (auto& x : h) x = (rand() & 0xFF) | ((rand() & 0xFF) << 8) | ((rand() & 0xFF) << 16) | ((unsigned)(rand() & 0xFF) << 24);
    CK(cudaMemcpy(d, h.data(), words * 4, cudaMemcpyHostToDevice));
    float base = time_ms([&] { hist256<<<240, HIST_THREADS>>>(part, d, words); });
    printf("histogram256 (64 MB): 240 CTAs %.3f ms (%.0f GB/s)\n", base, words * 4 / base / 1e6);
    int counts[] = {1, 2, 3, 4, 6, 8, 10, 12, 16, 20};
    for (int c : counts) {
        int g = c * sms;
        float t = time_ms([&] { hist256<<<g, HIST_THREADS>>>(part, d, words); });
        float tv = time_ms([&] { hist256_vec<<<g, HIST_THREADS>>>(part, (const uint4*)d, words / 4); });
        printf("  %5d CTAs (%2d/SM): %.3f ms = %.2fx of 240 | uint4 loads %.3f ms = %.2fx\n", g, c, t, base / t, tv, base / tv);
    }
    float tv240 = time_ms([&] { hist256_vec<<<240, HIST_THREADS>>>(part, (const uint4*)d, words / 4); });
    printf("  240 CTAs, uint4 loads: %.3f ms = %.2fx\n", tv240, base / tv240);
    // 2. the grid-stride sum of kernels/inflight
    const unsigned n = 1u << 22;
    float *x, *out; CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&out, 16 * sms * 128 * 4 * 2));
    CK(cudaMemset(x, 0, n * 4));
    float s264 = time_ms([&] { sum_few<<<264, 128>>>(x, out, n); });
    printf("sum_few (16 MB): 264 CTAs %.4f ms (%.0f GB/s)\n", s264, n * 4 / s264 / 1e6);
    for (int c : {1, 2, 4, 8, 12, 16}) {
        int g = c * sms;
        float t = time_ms([&] { sum_few<<<g, 128>>>(x, out, n); });
        printf("  %5d CTAs (%2d/SM): %.4f ms = %.2fx of 264\n", g, c, t, s264 / t);
    }
    float su = time_ms([&] { sum_unrolled<<<264, 128>>>((const float4*)x, out, n / 4); });
    printf("  sum_unrolled 264 CTAs: %.4f ms = %.2fx\n", su, s264 / su);
    // 3. one vectorAdd launch against an empty one and a batch of 8 in one launch
    const int ne = 50000;
    float *a, *b, *c; CK(cudaMalloc(&a, 8 * ne * 4)); CK(cudaMalloc(&b, 8 * ne * 4)); CK(cudaMalloc(&c, 8 * ne * 4));
    float te = time_ms([&] { empty<<<1, 32>>>(); }, 200);
    float t1 = time_ms([&] { vadd<<<196, 256>>>(a, b, c, ne); }, 200);
    float t8 = time_ms([&] { vadd_batch<<<(8 * ne + 255) / 256, 256>>>(a, b, c, ne, 8); }, 200);
    float t8s = time_ms([&] { for (int k = 0; k < 8; ++k) vadd<<<196, 256>>>(a + k * ne, b + k * ne, c + k * ne, ne); }, 200);
    printf("vectorAdd 50000: empty kernel %.4f ms, one launch %.4f ms, 8 launches %.4f ms, 8 batched in one %.4f ms (%.2fx of 8 launches)\n",
           te, t1, t8s, t8, t8s / t8);
    return 0;
}
