// s7-staging probe: staged shared tiles vs direct reads through the L1 (GA307), and a shared
// reduction tree vs warp shuffles (GA205), on the corpus kernels' own sizes.
// Each pair: outputs compared, then cudaEvents over REPS launches after WARM warm-up launches
// (median of 5 blocks of REPS/5 launches each, reported as us per launch).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cmath>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

static const int WARM = 5, BLOCKS = 5, PER = 10;  // 50 timed launches

template <class F>
static float time_us(F launch) {
    for (int i = 0; i < WARM; i++) launch();
    CK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int k = 0; k < BLOCKS; k++) {
        CK(cudaEventRecord(a));
        for (int i = 0; i < PER; i++) launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0f / PER);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void report(const char* name, float before, float after, bool same, const char* note) {
    printf("%-44s before %9.2f us  after %9.2f us  speedup %.3fx  outputs %s  %s\n", name, before,
           after, before / after, same ? "match" : "DIFFER", note);
}

// ------------------------------------------------------------------------------------------
// 1. coffeebeforearch 05_convolution/1d_tiled convolution_1d (n = 1<<20, 4096 x 256, 1048 B)
#define MASK_LENGTH 7
__constant__ int cmask[MASK_LENGTH];

__global__ void cba_tiled(int* array, int* result, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    extern __shared__ int s_array[];
    int r = MASK_LENGTH / 2;
    int d = 2 * r;
    int n_padded = blockDim.x + d;
    int offset = threadIdx.x + blockDim.x;
    int g_offset = blockDim.x * blockIdx.x + offset;
    s_array[threadIdx.x] = array[tid];
    if (offset < n_padded) {
        s_array[offset] = array[g_offset];
    }
    __syncthreads();
    int temp = 0;
    for (int j = 0; j < MASK_LENGTH; j++) {
        temp += s_array[threadIdx.x + j] * cmask[j];
    }
    result[tid] = temp;
}

// the fix: each thread reads its 7 inputs from global memory (L1 hits), plain pointer
__global__ void cba_direct(int* array, int* result, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int temp = 0;
    for (int j = 0; j < MASK_LENGTH; j++) temp += array[tid + j] * cmask[j];
    result[tid] = temp;
}

// the fix, read-only pointers (LDG through the non-coherent path)
__global__ void cba_direct_ro(const int* __restrict__ array, int* __restrict__ result, int n) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int temp = 0;
    for (int j = 0; j < MASK_LENGTH; j++) temp += __ldg(&array[tid + j]) * cmask[j];
    result[tid] = temp;
}

// ------------------------------------------------------------------------------------------
// 2. HeCBench convolution1D conv1d_tiled_caching<float> (134217728, mask 9, 256 threads, 1024 B)
#define MAX_MASK_WIDTH 10
__constant__ float fmask[MAX_MASK_WIDTH];

__global__ void hc_tiled_caching(const float* __restrict__ in, float* __restrict__ out,
                                 const int input_width, const int mask_width) {
    extern __shared__ unsigned char smem[];
    float* tile = reinterpret_cast<float*>(smem);
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    tile[threadIdx.x] = in[i];
    __syncthreads();
    int this_tile_start = blockIdx.x * blockDim.x;
    int next_tile_start = (blockIdx.x + 1) * blockDim.x;
    int start = i - (mask_width / 2);
    float s = 0;
    for (int j = 0; j < mask_width; j++) {
        int in_index = start + j;
        if (in_index >= 0 && in_index < input_width) {
            if (in_index >= this_tile_start && in_index < next_tile_start) {
                s += tile[threadIdx.x + j - (mask_width / 2)] * fmask[j];
            } else {
                s += in[in_index] * fmask[j];
            }
        }
    }
    out[i] = s;
}

// the fix: HeCBench's own conv1d (every tap from global memory)
__global__ void hc_direct(const float* __restrict__ in, float* __restrict__ out,
                          const int input_width, const int mask_width) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    float s = 0;
    int start = i - mask_width / 2;
    for (int j = 0; j < mask_width; j++) {
        if (start + j >= 0 && start + j < input_width) {
            s += in[start + j] * fmask[j];
        }
    }
    out[i] = s;
}

// ------------------------------------------------------------------------------------------
// 3. HeCBench jacobi jacobi_step (N 2048, 128 x 128 CTAs of 16 x 16)
#define N 2048
#define IDX(i, j) ((i) + (j) * N)

template <bool ATOM>
__global__ void jac_tiled(float* __restrict__ f, const float* __restrict__ f_old,
                          float* __restrict__ error) {
    __shared__ float f_old_tile[18][18];
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    int j = threadIdx.y + blockIdx.y * blockDim.y;
    f_old_tile[threadIdx.y + 1][threadIdx.x + 1] = f_old[IDX(i, j)];
    if (threadIdx.x == 0 && i >= 1) f_old_tile[threadIdx.y + 1][threadIdx.x + 0] = f_old[IDX(i - 1, j)];
    if (threadIdx.x == 15 && i <= N - 2) f_old_tile[threadIdx.y + 1][threadIdx.x + 2] = f_old[IDX(i + 1, j)];
    if (threadIdx.y == 0 && j >= 1) f_old_tile[threadIdx.y + 0][threadIdx.x + 1] = f_old[IDX(i, j - 1)];
    if (threadIdx.y == 15 && j <= N - 2) f_old_tile[threadIdx.y + 2][threadIdx.x + 1] = f_old[IDX(i, j + 1)];
    __syncthreads();
    float err = 0.0f;
    if (j >= 1 && j <= N - 2) {
        if (i >= 1 && i <= N - 2) {
            f[IDX(i, j)] = 0.25f * (f_old_tile[threadIdx.y + 1][threadIdx.x + 2] +
                                    f_old_tile[threadIdx.y + 1][threadIdx.x + 0] +
                                    f_old_tile[threadIdx.y + 2][threadIdx.x + 1] +
                                    f_old_tile[threadIdx.y + 0][threadIdx.x + 1]);
            float df = f[IDX(i, j)] - f_old_tile[threadIdx.y + 1][threadIdx.x + 1];
            err = df * df;
        }
    }
    for (int offset = 8; offset > 0; offset /= 2) err += __shfl_down_sync(0xffffffff, err, offset);
    __shared__ float reduction_array[16];
    if (threadIdx.x == 0) reduction_array[threadIdx.y] = err;
    __syncthreads();
    if (threadIdx.y == 0) {
        err = reduction_array[threadIdx.x];
        for (int offset = 8; offset > 0; offset /= 2) err += __shfl_down_sync(0xffffffff, err, offset);
        if (threadIdx.x == 0) { if (ATOM) atomicAdd(error, err); else error[blockIdx.y * gridDim.x + blockIdx.x] = err; }
    }
}

// the fix: the neighbours from global memory (L1 hits); the barrier before the CTA's error
// reduction stays (its own shared array)
template <bool ATOM>
__global__ void jac_direct(float* __restrict__ f, const float* __restrict__ f_old,
                           float* __restrict__ error) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    int j = threadIdx.y + blockIdx.y * blockDim.y;
    float err = 0.0f;
    if (j >= 1 && j <= N - 2) {
        if (i >= 1 && i <= N - 2) {
            float v = 0.25f * (f_old[IDX(i + 1, j)] + f_old[IDX(i - 1, j)] + f_old[IDX(i, j + 1)] +
                               f_old[IDX(i, j - 1)]);
            f[IDX(i, j)] = v;
            float df = v - f_old[IDX(i, j)];
            err = df * df;
        }
    }
    for (int offset = 8; offset > 0; offset /= 2) err += __shfl_down_sync(0xffffffff, err, offset);
    __shared__ float reduction_array[16];
    if (threadIdx.x == 0) reduction_array[threadIdx.y] = err;
    __syncthreads();
    if (threadIdx.y == 0) {
        err = reduction_array[threadIdx.x];
        for (int offset = 8; offset > 0; offset /= 2) err += __shfl_down_sync(0xffffffff, err, offset);
        if (threadIdx.x == 0) { if (ATOM) atomicAdd(error, err); else error[blockIdx.y * gridDim.x + blockIdx.x] = err; }
    }
}

// ------------------------------------------------------------------------------------------
// 4. HeCBench all-pairs-distance k2 (224 x 224 CTAs of 128): shared tree vs shuffles
#define INSTANCES 224
#define ATTRIBUTES 4096
#define THREADS 128

__global__ void k2_tree(const char* data, int* distance) {
    int idx = threadIdx.x;
    int gx = blockIdx.x;
    int gy = blockIdx.y;
    __shared__ int dist[THREADS];
    dist[idx] = 0;
    __syncthreads();
    for (int i = idx * 4; i < ATTRIBUTES; i += THREADS * 4) {
        char4 j = *(char4*)(data + i + ATTRIBUTES * gx);
        char4 k = *(char4*)(data + i + ATTRIBUTES * gy);
        char count = 0;
        if (j.x ^ k.x) count++;
        if (j.y ^ k.y) count++;
        if (j.z ^ k.z) count++;
        if (j.w ^ k.w) count++;
        dist[idx] += count;
    }
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride /= 2) {
        if (idx < stride) dist[idx] += dist[idx + stride];
        __syncthreads();
    }
    if (idx == 0) distance[INSTANCES * gy + gx] = dist[0];
}

// the fix: the sum in a register, the tree's steps below 32 as shuffles, one shared word a warp
__global__ void k2_shfl(const char* data, int* distance) {
    int idx = threadIdx.x;
    int gx = blockIdx.x;
    int gy = blockIdx.y;
    __shared__ int warp_sum[THREADS / 32];
    int d = 0;
    for (int i = idx * 4; i < ATTRIBUTES; i += THREADS * 4) {
        char4 j = *(char4*)(data + i + ATTRIBUTES * gx);
        char4 k = *(char4*)(data + i + ATTRIBUTES * gy);
        char count = 0;
        if (j.x ^ k.x) count++;
        if (j.y ^ k.y) count++;
        if (j.z ^ k.z) count++;
        if (j.w ^ k.w) count++;
        d += count;
    }
    for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffff, d, o);
    if ((idx & 31) == 0) warp_sum[idx >> 5] = d;
    __syncthreads();
    if (idx < 32) {
        d = idx < THREADS / 32 ? warp_sum[idx] : 0;
        for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffff, d, o);
        if (idx == 0) distance[INSTANCES * gy + gx] = d;
    }
}

// the fix as the tree with only the in-warp steps (stride < 32) as shuffles
__global__ void k2_tree_tail(const char* data, int* distance) {
    int idx = threadIdx.x;
    int gx = blockIdx.x;
    int gy = blockIdx.y;
    __shared__ int dist[THREADS];
    dist[idx] = 0;
    __syncthreads();
    for (int i = idx * 4; i < ATTRIBUTES; i += THREADS * 4) {
        char4 j = *(char4*)(data + i + ATTRIBUTES * gx);
        char4 k = *(char4*)(data + i + ATTRIBUTES * gy);
        char count = 0;
        if (j.x ^ k.x) count++;
        if (j.y ^ k.y) count++;
        if (j.z ^ k.z) count++;
        if (j.w ^ k.w) count++;
        dist[idx] += count;
    }
    __syncthreads();
    for (int stride = THREADS / 2; stride >= 32; stride /= 2) {
        if (idx < stride) dist[idx] += dist[idx + stride];
        __syncthreads();
    }
    if (idx < 32) {
        int d = dist[idx];
        for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffff, d, o);
        if (idx == 0) distance[INSTANCES * gy + gx] = d;
    }
}

// ------------------------------------------------------------------------------------------
// 0. calibration: kernels/stencil/box.cu (8192^2, 16x16), measured 1.70x / 1.50x before
#define B 16
#define W (B + 2)  // the window: the block and a halo of 1

extern "C" __global__ void box3_shared(const float* __restrict__ in, float* __restrict__ out,
                                       int w, int h) {
    __shared__ float tile[W][W];
    const int x0 = blockIdx.x * B - 1, y0 = blockIdx.y * B - 1;
    for (int i = threadIdx.y * B + threadIdx.x; i < W * W; i += B * B) {
        const int r = i / W, c = i % W;
        const int gx = x0 + c, gy = y0 + r;
        tile[r][c] = (gx >= 0 && gx < w && gy >= 0 && gy < h) ? in[gy * w + gx] : 0.0f;
    }
    __syncthreads();
    const int x = x0 + 1 + threadIdx.x, y = y0 + 1 + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = 0; dy < 3; ++dy) {
        for (int dx = 0; dx < 3; ++dx) {
            s += tile[threadIdx.y + dy][threadIdx.x + dx];
        }
    }
    out[y * w + x] = s * (1.0f / 9.0f);
}

extern "C" __global__ void box3_direct(const float* __restrict__ in, float* __restrict__ out,
                                       int w, int h) {
    const int x = blockIdx.x * B + threadIdx.x, y = blockIdx.y * B + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            const int gx = x + dx, gy = y + dy;
            s += (gx >= 0 && gx < w && gy >= 0 && gy < h) ? in[gy * w + gx] : 0.0f;
        }
    }
    out[y * w + x] = s * (1.0f / 9.0f);
}

int main() {
    srand(1);
    char note[256];
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);

    {  // 0
        const int w = 8192, h = 8192;
        const size_t nn = (size_t)w * h;
        std::vector<float> hin(nn), o0(nn), o1(nn);
        for (auto& v : hin) v = (float)rand() / RAND_MAX;
        float *in, *out;
        CK(cudaMalloc(&in, nn * 4)); CK(cudaMalloc(&out, nn * 4));
        CK(cudaMemcpy(in, hin.data(), nn * 4, cudaMemcpyHostToDevice));
        dim3 G(w / 16, h / 16), T(16, 16);
        auto L0 = [&] { box3_shared<<<G, T>>>(in, out, w, h); };
        auto L1 = [&] { box3_direct<<<G, T>>>(in, out, w, h); };
        L0(); CK(cudaMemcpy(o0.data(), out, nn * 4, cudaMemcpyDeviceToHost));
        L1(); CK(cudaMemcpy(o1.data(), out, nn * 4, cudaMemcpyDeviceToHost));
        float t0 = time_us(L0), t1 = time_us(L1);
        report("calibration box3_shared -> box3_direct", t0, t1, o0 == o1, "");
        CK(cudaFree(in)); CK(cudaFree(out));
    }
    {  // 1
        const int n = 1 << 20, np = n + 6;
        std::vector<int> h(np), m(MASK_LENGTH), r0(n), r1(n), r2(n);
        for (auto& v : h) v = rand() % 100;
        for (auto& v : m) v = rand() % 10;
        CK(cudaMemcpyToSymbol(cmask, m.data(), sizeof(int) * MASK_LENGTH));
        int *a, *r;
        CK(cudaMalloc(&a, np * 4)); CK(cudaMalloc(&r, n * 4));
        CK(cudaMemcpy(a, h.data(), np * 4, cudaMemcpyHostToDevice));
        const int T = 256, G = n / T, S = (T + 6) * 4;
        auto L0 = [&] { cba_tiled<<<G, T, S>>>(a, r, n); };
        auto L1 = [&] { cba_direct<<<G, T>>>(a, r, n); };
        auto L2 = [&] { cba_direct_ro<<<G, T>>>(a, r, n); };
        L0(); CK(cudaMemcpy(r0.data(), r, n * 4, cudaMemcpyDeviceToHost));
        L1(); CK(cudaMemcpy(r1.data(), r, n * 4, cudaMemcpyDeviceToHost));
        L2(); CK(cudaMemcpy(r2.data(), r, n * 4, cudaMemcpyDeviceToHost));
        float t0 = time_us(L0), t1 = time_us(L1), t2 = time_us(L2);
        // again, the other order
        float t1b = time_us(L1), t0b = time_us(L0);
        snprintf(note, sizeof note, "(repeat: before %.2f after %.2f)", t0b, t1b);
        report("cba convolution_1d tiled -> direct", t0, t1, r0 == r1, note);
        report("cba convolution_1d tiled -> direct __ldg", t0, t2, r0 == r2, "");
        CK(cudaFree(a)); CK(cudaFree(r));
    }
    {  // 2
        const int n = 134217728, mw = 9;
        std::vector<float> h(n), m(MAX_MASK_WIDTH, 1.0f), o0(n), o1(n);
        for (auto& v : h) v = (float)(rand() % 256);
        CK(cudaMemcpyToSymbol(fmask, m.data(), sizeof(float) * MAX_MASK_WIDTH));
        float *in, *out;
        CK(cudaMalloc(&in, (size_t)n * 4)); CK(cudaMalloc(&out, (size_t)n * 4));
        CK(cudaMemcpy(in, h.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
        const int T = 256, G = n / T;
        auto L0 = [&] { hc_tiled_caching<<<G, T, T * 4>>>(in, out, n, mw); };
        auto L1 = [&] { hc_direct<<<G, T>>>(in, out, n, mw); };
        L0(); CK(cudaMemcpy(o0.data(), out, (size_t)n * 4, cudaMemcpyDeviceToHost));
        L1(); CK(cudaMemcpy(o1.data(), out, (size_t)n * 4, cudaMemcpyDeviceToHost));
        bool same = memcmp(o0.data(), o1.data(), (size_t)n * 4) == 0;
        float t0 = time_us(L0), t1 = time_us(L1);
        float t1b = time_us(L1), t0b = time_us(L0);
        snprintf(note, sizeof note, "(repeat: before %.2f after %.2f; DRAM floor %.1f us at 4.8 TB/s)",
                 t0b, t1b, 2.0 * n * 4 / 4.8e12 * 1e6);
        report("hecbench conv1d_tiled_caching -> conv1d", t0, t1, same, note);
        CK(cudaFree(in)); CK(cudaFree(out));
    }
    {  // 3
        const size_t nn = (size_t)N * N;
        std::vector<float> h(nn), f0(nn), f1(nn);
        for (auto& v : h) v = (float)rand() / RAND_MAX * 2.0f - 1.0f;
        float *f, *fo, *err, *errs;
        CK(cudaMalloc(&f, nn * 4)); CK(cudaMalloc(&fo, nn * 4)); CK(cudaMalloc(&err, 4));
        CK(cudaMalloc(&errs, (N / 16) * (N / 16) * 4));
        CK(cudaMemcpy(fo, h.data(), nn * 4, cudaMemcpyHostToDevice));
        dim3 G(N / 16, N / 16), T(16, 16);
        auto L0 = [&] { jac_tiled<true><<<G, T>>>(f, fo, err); };
        auto L1 = [&] { jac_direct<true><<<G, T>>>(f, fo, err); };
        auto L2 = [&] { jac_tiled<false><<<G, T>>>(f, fo, errs); };
        auto L3 = [&] { jac_direct<false><<<G, T>>>(f, fo, errs); };
        float e0, e1;
        CK(cudaMemset(f, 0, nn * 4)); CK(cudaMemset(err, 0, 4)); L0();
        CK(cudaMemcpy(f0.data(), f, nn * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&e0, err, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemset(f, 0, nn * 4)); CK(cudaMemset(err, 0, 4)); L1();
        CK(cudaMemcpy(f1.data(), f, nn * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&e1, err, 4, cudaMemcpyDeviceToHost));
        bool same = memcmp(f0.data(), f1.data(), nn * 4) == 0 &&
                    std::fabs(e0 - e1) <= 1e-4f * std::fabs(e0);
        float t0 = time_us(L0), t1 = time_us(L1);
        float t1b = time_us(L1), t0b = time_us(L0);
        snprintf(note, sizeof note, "(repeat: before %.2f after %.2f; error %.6g vs %.6g)", t0b, t1b,
                 e0, e1);
        report("hecbench jacobi_step tiled -> direct", t0, t1, same, note);
        float t2 = time_us(L2), t3 = time_us(L3);
        report("(jacobi without the one-address atomic)", t2, t3, true, "(a partial per CTA instead)");
        CK(cudaFree(errs));
        CK(cudaFree(f)); CK(cudaFree(fo)); CK(cudaFree(err));
    }
    {  // 4
        const size_t nd = (size_t)INSTANCES * ATTRIBUTES, no = (size_t)INSTANCES * INSTANCES;
        std::vector<char> h(nd);
        std::vector<int> d0(no), d1(no), d2(no);
        for (auto& v : h) v = (char)(rand() % 3);
        char* data; int* dist;
        CK(cudaMalloc(&data, nd)); CK(cudaMalloc(&dist, no * 4));
        CK(cudaMemcpy(data, h.data(), nd, cudaMemcpyHostToDevice));
        dim3 G(INSTANCES, INSTANCES);
        auto L0 = [&] { k2_tree<<<G, THREADS>>>(data, dist); };
        auto L1 = [&] { k2_shfl<<<G, THREADS>>>(data, dist); };
        auto L2 = [&] { k2_tree_tail<<<G, THREADS>>>(data, dist); };
        CK(cudaMemset(dist, 0, no * 4)); L0(); CK(cudaMemcpy(d0.data(), dist, no * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemset(dist, 0, no * 4)); L1(); CK(cudaMemcpy(d1.data(), dist, no * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemset(dist, 0, no * 4)); L2(); CK(cudaMemcpy(d2.data(), dist, no * 4, cudaMemcpyDeviceToHost));
        float t0 = time_us(L0), t1 = time_us(L1), t2 = time_us(L2);
        float t1b = time_us(L1), t0b = time_us(L0);
        snprintf(note, sizeof note, "(repeat: before %.2f after %.2f)", t0b, t1b);
        report("hecbench all-pairs k2 tree -> shuffles", t0, t1, d0 == d1, note);
        report("hecbench all-pairs k2 tree -> tree + warp tail", t0, t2, d0 == d2, "");
        CK(cudaFree(data)); CK(cudaFree(dist));
    }
    return 0;
}
