// Loaded memory latency (issue 29): how a streaming kernel's time depends on the bytes each SM
// keeps in flight, to choose how the execution model combines its latency and DRAM terms.
//   nvcc -O3 -arch=native -o sweep sweep.cu && ./sweep > results.txt
// copy<W, N>: each thread copies N independent elements of W bytes (all N loads issued before the
// first store; element j of thread t at t + j * threads, so every request is coalesced), one pass
// over 1 GiB in and 1 GiB out, 256 threads a CTA, one element group per thread (no loop: the grid
// covers the array, as most corpus kernels launch). Resident CTAs per SM limited to R by dynamic
// shared memory. Printed: W, N, R, CTAs, rounds (CTAs / (SMs x R)), bytes a round in flight per SM
// (R x 256 x N x W), time (median of 10 event-timed launches), GB/s (read + write).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

template <int W> struct Elem;
template <> struct Elem<2> { typedef unsigned short T; };
template <> struct Elem<4> { typedef unsigned T; };
template <> struct Elem<8> { typedef uint2 T; };
template <> struct Elem<16> { typedef uint4 T; };

template <int W, int N>
__global__ void copy(const typename Elem<W>::T* __restrict__ in, typename Elem<W>::T* __restrict__ out) {
    extern __shared__ char pad[];  // only limits the resident CTAs
    typedef typename Elem<W>::T T;
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    T v[N];
#pragma unroll
    for (int j = 0; j < N; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < N; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

static float time_ms(void (*launch)(void*, void*, int, int), void* a, void* b, int ctas, int smem) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    launch(a, b, ctas, smem);  // warm up
    CK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int r = 0; r < 10; r++) {
        CK(cudaEventRecord(e0));
        launch(a, b, ctas, smem);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float x; CK(cudaEventElapsedTime(&x, e0, e1)); ms.push_back(x);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

template <int W, int N>
static void launch(void* a, void* b, int ctas, int smem) {
    typedef typename Elem<W>::T T;
    copy<W, N><<<ctas, 256, smem>>>((const T*)a, (T*)b);
    CK(cudaGetLastError());
}

// the dynamic shared memory allowed, and the CTAs an SM then holds (the occupancy API)
template <int W, int N>
static int setup(int smem) {
    CK(cudaFuncSetAttribute((const void*)copy<W, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy<W, N>, 256, smem));
    return per_sm;
}

int main() {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    int clock_khz = 0; CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    const size_t bytes = 1ull << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes)); CK(cudaMemset(b, 0, bytes));
    printf("device %s sms %d clock_mhz %d smem_per_sm %zu\n", p.name, p.multiProcessorCount,
           clock_khz / 1000, p.sharedMemPerMultiprocessor);
    printf("W N R ctas rounds inflight_per_sm_B ms GBps\n");
    struct Case { int w, n; void (*f)(void*, void*, int, int); int (*s)(int); };
    Case cases[] = {{2, 1, launch<2, 1>, setup<2, 1>}, {2, 2, launch<2, 2>, setup<2, 2>},
                    {2, 4, launch<2, 4>, setup<2, 4>}, {4, 1, launch<4, 1>, setup<4, 1>},
                    {4, 2, launch<4, 2>, setup<4, 2>}, {4, 4, launch<4, 4>, setup<4, 4>},
                    {8, 1, launch<8, 1>, setup<8, 1>}, {8, 2, launch<8, 2>, setup<8, 2>},
                    {16, 1, launch<16, 1>, setup<16, 1>}, {16, 2, launch<16, 2>, setup<16, 2>},
                    {16, 4, launch<16, 4>, setup<16, 4>}};
    int residents[] = {8, 4, 2, 1};
    for (Case c : cases) {
        for (int r : residents) {
            int smem = r >= 8 ? 0 : (int)(p.sharedMemPerMultiprocessor / r) - 1024 - 16;
            smem = std::max(0, std::min(smem, (int)p.sharedMemPerBlockOptin));
            int per_sm = c.s(smem);
            int ctas = (int)(bytes / c.w / ((size_t)256 * c.n));
            float ms = time_ms(c.f, a, b, ctas, smem);
            double rounds = (double)ctas / ((double)p.multiProcessorCount * per_sm);
            printf("%d %d %d %d %.1f %d %.4f %.1f\n", c.w, c.n, per_sm, ctas, rounds,
                   per_sm * 256 * c.n * c.w, ms, 2.0 * bytes / (ms * 1e6));
            fflush(stdout);
        }
    }
    return 0;
}
