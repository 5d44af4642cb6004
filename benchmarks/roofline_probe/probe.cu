// Roofline constants and the issue-16 fixes, measured with CUDA events (the median of 20 launches
// after 3 warm-ups). Build and run on the GPU: benchmarks/roofline_probe/run.sh OUT.txt
// Prints one "name value unit" line per measurement; gpuadvise/devices.py cites the output.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

template <class F> float time_ms(F f) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) f();
  std::vector<float> t;
  for (int i = 0; i < 20; i++) {
    CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__global__ void copy4(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}
__global__ void read4(const float4* __restrict__ in, float* out, size_t n, int reps) {
  float s = 0.f;
  for (int r = 0; r < reps; r++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
      float4 v = __ldcg(in + i); s += v.x + v.y + v.z + v.w;
    }
  if (s == 12345.f) out[0] = s;
}
// one 4-byte word per 32-byte sector: every lane its own sector (32 sectors per request)
__global__ void read_strided(const float* __restrict__ in, float* out, size_t nsect, int reps) {
  float s = 0.f;
  for (int r = 0; r < reps; r++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nsect; i += (size_t)gridDim.x * blockDim.x)
      s += __ldcg(in + i * 8);
  if (s == 12345.f) out[0] = s;
}
__global__ void write_strided(float* out, size_t nsect, int reps) {
  for (int r = 0; r < reps; r++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < nsect; i += (size_t)gridDim.x * blockDim.x)
      out[i * 8 + (r & 7)] = (float)r;
}
__global__ void write_coal(float4* out, size_t n, int reps) {
  for (int r = 0; r < reps; r++)
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
      out[i] = make_float4(r, r, r, r);
}
// transpose-like partial-sector stores to a buffer larger than L2: warp w of a block writes word w
// of 32 sectors (lane = sector), so the block completes its 32 sectors
__global__ void write_partial_miss(float* out) {
  size_t sector = blockIdx.x * 32 + (threadIdx.x & 31);
  out[sector * 8 + (threadIdx.x >> 5)] = 1.f;
}
__global__ void chase(const unsigned* __restrict__ next, unsigned* out, int steps) {
  unsigned j = 0;
  for (int s = 0; s < steps; s++) j = __ldcg(next + j);
  out[0] = j;
}
#define TILE 32
__global__ void transpose_naive(float* out, const float* in, int w, int h) {
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) out[x * h + (y + j)] = in[(y + j) * w + x];
}
__global__ void transpose_tiled(float* out, const float* in, int w, int h) {
  __shared__ float t[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) t[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += 8) out[(y + j) * h + x] = t[threadIdx.x][threadIdx.y + j];
}
struct Particle { float x, y, z, vx, vy, vz, m, q; };
__global__ void particles_aos(Particle* p, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { p[i].x += p[i].vx * dt; p[i].y += p[i].vy * dt; p[i].z += p[i].vz * dt; }
}
__global__ void particles_soa(float* x, float* y, float* z, const float* vx, const float* vy,
                              const float* vz, int n, float dt) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] += vx[i] * dt; y[i] += vy[i] * dt; z[i] += vz[i] * dt; }
}

int main() {
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  int clk = 0, mclk = 0, bus = 0;
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0);
  printf("device %s sms %d l2 %d clock_khz %d memclock_khz %d bus_bits %d\n", pr.name,
         pr.multiProcessorCount, pr.l2CacheSize, clk, mclk, bus);
  int sms = pr.multiProcessorCount;
  size_t big = (size_t)1 << 30;  // 1 GiB
  float *a, *b; CK(cudaMalloc(&a, big)); CK(cudaMalloc(&b, big));
  CK(cudaMemset(a, 0, big)); CK(cudaMemset(b, 0, big));
  size_t n4 = big / 16;
  float ms = time_ms([&] { copy4<<<sms * 8, 256>>>((float4*)a, (float4*)b, n4); });
  printf("dram_copy_gbps %.1f GB/s (read+write)\n", 2.0 * big / ms / 1e6);
  ms = time_ms([&] { read4<<<sms * 8, 256>>>((float4*)a, b, n4, 1); });
  printf("dram_read_gbps %.1f GB/s\n", 1.0 * big / ms / 1e6);
  ms = time_ms([&] { write_coal<<<sms * 8, 256>>>((float4*)b, n4, 1); });
  printf("dram_write_gbps %.1f GB/s\n", 1.0 * big / ms / 1e6);
  // latency-bound reads: few warps per SM
  for (int wps : {1, 2, 4, 8, 16, 32}) {
    ms = time_ms([&] { read4<<<sms, 32 * wps>>>((float4*)a, b, n4, 1); });
    printf("dram_read_warps_per_sm_%d %.1f GB/s\n", wps, 1.0 * big / ms / 1e6);
  }
  // L2-resident: 8 MiB read 50 times
  size_t small = 8u << 20; int reps = 50;
  ms = time_ms([&] { read4<<<sms * 8, 256>>>((float4*)a, b, small / 16, reps); });
  printf("l2_read_gbps %.1f GB/s (coalesced, 8 MiB resident)\n", 1.0 * small * reps / ms / 1e6);
  size_t nsect = small / 32;
  ms = time_ms([&] { read_strided<<<sms * 8, 256>>>(a, b, nsect, reps); });
  printf("l2_read_strided_gsectors %.2f Gsector/s (%.1f GB/s of sectors)\n",
         1.0 * nsect * reps / ms / 1e6, 32.0 * nsect * reps / ms / 1e6);
  ms = time_ms([&] { write_coal<<<sms * 8, 256>>>((float4*)b, small / 16, reps); });
  printf("l2_write_gbps %.1f GB/s (coalesced, 8 MiB resident)\n", 1.0 * small * reps / ms / 1e6);
  ms = time_ms([&] { write_strided<<<sms * 8, 256>>>(b, nsect, reps); });
  printf("l2_write_strided_gsectors %.2f Gsector/s (%.1f GB/s of sectors)\n",
         1.0 * nsect * reps / ms / 1e6, 32.0 * nsect * reps / ms / 1e6);
  ms = time_ms([&] { write_partial_miss<<<big / 32 / 32, 256>>>(b); });
  printf("l2_write_partial_miss_gsectors %.2f Gsector/s (one word per sector per request, 1 GiB)\n",
         1.0 * (big / 32) * 8 / ms / 1e6);
  // latency: a random cycle over 1 GiB (DRAM) and over 4 MiB (L2)
  for (size_t span : {(size_t)1 << 30, (size_t)4 << 20}) {
    size_t m = span / 128;  // one index per 128-byte line
    std::vector<unsigned> perm(m), next(span / 4, 0);
    for (size_t i = 0; i < m; i++) perm[i] = i;
    srand(1);
    for (size_t i = m - 1; i > 0; i--) std::swap(perm[i], perm[rand() % (i + 1)]);
    for (size_t i = 0; i < m; i++) next[perm[i] * 32] = perm[(i + 1) % m] * 32;
    CK(cudaMemcpy(a, next.data(), span, cudaMemcpyHostToDevice));
    int steps = 20000;
    ms = time_ms([&] { chase<<<1, 1>>>((unsigned*)a, (unsigned*)b, steps); });
    printf("latency_%s_ns %.1f ns\n", span > (64u << 20) ? "dram" : "l2", ms * 1e6 / steps);
  }
  // naive vs tiled transpose, 8192^2 floats
  int w = 8192;
  dim3 g(w / TILE, w / TILE), blk(TILE, 8);
  float tn = time_ms([&] { transpose_naive<<<g, blk>>>(b, a, w, w); });
  float tt = time_ms([&] { transpose_tiled<<<g, blk>>>(b, a, w, w); });
  printf("transpose_naive_ms %.4f ms\ntranspose_tiled_ms %.4f ms\ntranspose_speedup %.3f x\n", tn, tt, tn / tt);
  // particles: 16.7M (2^24) 32-byte structs, x += vx dt for x, y, z
  int np = 1 << 24;
  float ta = time_ms([&] { particles_aos<<<np / 256, 256>>>((Particle*)a, np, 0.01f); });
  float* s = b;
  float tsoa = time_ms([&] { particles_soa<<<np / 256, 256>>>(s, s + np, s + 2 * np, s + 3 * np,
                                                               s + 4 * np, s + 5 * np, np, 0.01f); });
  printf("particles_aos_ms %.4f ms\nparticles_soa_ms %.4f ms\nparticles_speedup %.3f x\n", ta, tsoa, ta / tsoa);
  return 0;
}
