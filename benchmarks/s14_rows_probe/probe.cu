// s14-rows probe (issue 29: flip_pow2 GA206's recommended slowdown). Do the warps of a one-wave
// grid-stride loop stay in step (every warp waits for its loads at the same time, then computes
// with the others: memory and compute in turn), where a grid of many waves refills a finished
// CTA's slots at staggered times? Times (CUDA events, medians) of: flip_pow2 as kernels/ has it,
// its one-wave grid-stride form (k=1, one original CTA index per iteration), and the same with
// odd warps started half an iteration late; a synthetic element-wise kernel (load a float, C
// dependent FMAs, store) many-wave vs one-wave vs one-wave staggered, C = 16, 64, 256.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

__device__ __forceinline__ void flip_body(signed char* __restrict__ s, const signed char* __restrict__ o,
                                          const float* __restrict__ rnd, float beta, int log2ny, int tid)
{
    const int ny = 1 << log2ny, i = tid >> log2ny, j = tid & (ny - 1);
    const int jm = (j - 1) & (ny - 1);
    const int n = o[tid] + o[i * ny + jm];
    const signed char v = s[tid];
    float a = expf(-2.f * beta * n * v);
    for (int k = 0; k < 8; ++k) a = expf(-a * beta) + 0.5f * a;
    if (rnd[tid] < a) s[tid] = -v;
}

__global__ void flip_pow2(signed char* __restrict__ s, const signed char* __restrict__ o,
                          const float* __restrict__ rnd, float beta, int log2ny)
{
    flip_body(s, o, rnd, beta, log2ny, blockDim.x * blockIdx.x + threadIdx.x);
}

// one wave, one original CTA index per iteration (gpuadvise's GA206 variant k=1)
__global__ void flip_gs(signed char* __restrict__ s, const signed char* __restrict__ o,
                        const float* __restrict__ rnd, float beta, int log2ny, int nblocks, int stagger)
{
    float d = 0.f;
    if (stagger && ((threadIdx.x >> 5) & 1)) {  // odd warps: about half an iteration's arithmetic first
        d = beta;
        for (int k = 0; k < 4; ++k) d = expf(-d * beta) + 0.5f * d;
    }
    for (int b = blockIdx.x; b < nblocks; b += gridDim.x)
        flip_body(s, o, rnd, beta + d * 1e-30f, log2ny, b * blockDim.x + threadIdx.x);
}

template <int C>
__device__ __forceinline__ float chain(float v)
{
#pragma unroll
    for (int c = 0; c < C; ++c) v = v * 1.0001f + 0.5f;
    return v;
}

template <int C>
__global__ void elem(const float* __restrict__ x, float* __restrict__ y)
{
    const int i = blockDim.x * blockIdx.x + threadIdx.x;
    y[i] = chain<C>(x[i]);
}

template <int C>
__global__ void elem_gs(const float* __restrict__ x, float* __restrict__ y, int nblocks, int stagger)
{
    float d = 0.f;
    if (stagger && ((threadIdx.x >> 5) & 1)) d = chain<C / 2>(x[threadIdx.x]) * 1e-30f;
    for (int b = blockIdx.x; b < nblocks; b += gridDim.x) {
        const int i = b * blockDim.x + threadIdx.x;
        y[i] = chain<C>(x[i] + d);
    }
}

struct Particle { float x, y, z, vx, vy, vz, m, pad; };

__global__ void particles_aos(Particle* p, int n, float dt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i].x += p[i].vx * dt;
        p[i].y += p[i].vy * dt;
        p[i].z += p[i].vz * dt;
    }
}

// one wave, one original CTA index per iteration (GA206's variant k=1)
__global__ void particles_gs(Particle* p, int n, float dt, int nblocks)
{
    for (int b = blockIdx.x; b < nblocks; b += gridDim.x) {
        int i = b * blockDim.x + threadIdx.x;
        if (i < n) {
            p[i].x += p[i].vx * dt;
            p[i].y += p[i].vy * dt;
            p[i].z += p[i].vz * dt;
        }
    }
}

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
#undef B
#undef W

static char* g_flush;
static bool g_once = false;
static const size_t FLUSH = 256u << 20;

template <typename F>
static void timeit(const char* label, int grid, F launch)
{
    if (g_once) { launch(); CK(cudaDeviceSynchronize()); return; }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int r = 0; r < 20; ++r) launch();
    CK(cudaDeviceSynchronize());
    std::vector<float> warm, cold;
    for (int r = 0; r < 200; ++r) {
        CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); warm.push_back(ms * 1000.f);
    }
    for (int r = 0; r < 40; ++r) {
        CK(cudaMemsetAsync(g_flush, r & 0xff, FLUSH));
        CK(cudaEventRecord(e0)); launch(); CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); cold.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    std::sort(warm.begin(), warm.end()); std::sort(cold.begin(), cold.end());
    printf("%-28s grid %6d: warm median %8.2f us (p10 %7.2f p90 %7.2f)  cold median %8.2f us (p10 %7.2f p90 %7.2f)\n",
           label, grid, warm[100], warm[20], warm[180], cold[20], cold[4], cold[36]);
    fflush(stdout);
    CK(cudaEventDestroy(e0)); CK(cudaEventDestroy(e1));
}

int main(int argc, char** argv)
{
    g_once = argc > 1;
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    int sms = p.multiProcessorCount;
    printf("# %s, %d SMs\n", p.name, sms);
    CK(cudaMalloc(&g_flush, FLUSH));
    const int NS = 2048 * 1024;
    signed char *s, *o; float* rnd;
    CK(cudaMalloc(&s, NS)); CK(cudaMalloc(&o, NS)); CK(cudaMalloc(&rnd, NS * 4));
    {
        std::vector<signed char> h(NS); std::vector<float> hr(NS);
        srand(1);
        for (int i = 0; i < NS; ++i) { h[i] = (signed char)(rand() % 3 - 1); hr[i] = rand() / (float)RAND_MAX; }
        CK(cudaMemcpy(o, h.data(), NS, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(s, h.data(), NS, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(rnd, hr.data(), NS * 4, cudaMemcpyHostToDevice));
    }
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, flip_gs, 128, 0));
    const int wave = per_sm * sms, nb = NS / 128;
    printf("# flip: %d CTAs of 128 (%d a wave: %d an SM)\n", nb, wave, per_sm);
    const float beta = 0.44f;
    timeit("flip_pow2 base", nb, [&] { flip_pow2<<<nb, 128>>>(s, o, rnd, beta, 10); });
    timeit("flip_pow2 one-wave k1", wave, [&] { flip_gs<<<wave, 128>>>(s, o, rnd, beta, 10, nb, 0); });
    timeit("flip_pow2 one-wave k1 stag", wave, [&] { flip_gs<<<wave, 128>>>(s, o, rnd, beta, 10, nb, 1); });
    timeit("flip_pow2 two-wave k1", 2 * wave, [&] { flip_gs<<<2 * wave, 128>>>(s, o, rnd, beta, 10, nb, 0); });

    {
        const int NP = 1 << 24, nbp = NP / 256;
        Particle* pp;
        CK(cudaMalloc(&pp, (size_t)NP * sizeof(Particle))); CK(cudaMemset(pp, 0, (size_t)NP * sizeof(Particle)));
        int pw = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pw, particles_gs, 256, 0));
        const int wp = pw * sms;
        printf("# particles: %d structs of 32 bytes, %d CTAs of 256 (%d a wave)\n", NP, nbp, wp);
        timeit("particles_aos base", nbp, [&] { particles_aos<<<nbp, 256>>>(pp, NP, 0.01f); });
        timeit("particles_aos one-wave k1", wp, [&] { particles_gs<<<wp, 256>>>(pp, NP, 0.01f, nbp); });
        CK(cudaFree(pp));
    }
    {
        const int w = 8192, h = 8192;
        float *bi, *bo;
        CK(cudaMalloc(&bi, (size_t)w * h * 4)); CK(cudaMalloc(&bo, (size_t)w * h * 4));
        CK(cudaMemset(bi, 0, (size_t)w * h * 4));
        dim3 g(w / 16, h / 16), b(16, 16);
        timeit("box3_shared", g.x * g.y, [&] { box3_shared<<<g, b>>>(bi, bo, w, h); });
        timeit("box3_direct", g.x * g.y, [&] { box3_direct<<<g, b>>>(bi, bo, w, h); });
        CK(cudaFree(bi)); CK(cudaFree(bo));
    }
    const int N = 1 << 22, nbe = N / 128;
    float *x, *y;
    CK(cudaMalloc(&x, N * 4)); CK(cudaMalloc(&y, N * 4)); CK(cudaMemset(x, 0, N * 4));
    int pe = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pe, elem_gs<64>, 128, 0));
    const int we = pe * sms;
    printf("# elem: %d floats, %d CTAs of 128 (%d a wave)\n", N, nbe, we);
#define ELEM(C) \
    timeit("elem C=" #C " many-wave", nbe, [&] { elem<C><<<nbe, 128>>>(x, y); }); \
    timeit("elem C=" #C " one-wave", we, [&] { elem_gs<C><<<we, 128>>>(x, y, nbe, 0); }); \
    timeit("elem C=" #C " one-wave stag", we, [&] { elem_gs<C><<<we, 128>>>(x, y, nbe, 1); });
    ELEM(16)
    ELEM(64)
    ELEM(256)
    // an empty launch of each grid: the floor and the CTA launches
    timeit("empty flip grid", nb, [&] { elem<0><<<1, 32>>>(x, y); });
    CK(cudaFree(g_flush));
    return 0;
}
