// Global-memory atomics under contention, as ptxas compiles them from CUDA C++: the time of
// 2^24 updates spread over few or many addresses, measured with CUDA events (median of 7).
// Patterns (thread t of the grid, warp w = t / 32, lane l = t % 32), the address index:
//   distinct  t            every update its own word (no contention; the L2's atomic rate)
//   warp      w            the 32 lanes of a warp on one word, every warp another word
//   lanes     l            32 words, every warp updates all 32 (contention across warps only)
//   bins256   hash(t)%256  a 256-bin histogram of random data
//   bins4096  hash(t)%4096
//   one       0            every update on one word (a grid-wide sum)
// Ops: fadd (atomicAdd(float*, v), result unused), iadd (atomicAdd(int*, v)), inc (atomicAdd(p, 1)),
// fadd_uniform (atomicAdd(sum, v) on a kernel parameter: the compiler sees one address),
// fadd_warpred (the fix: a shuffle reduction, then lane 0's atomicAdd on the parameter).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned hash(unsigned x) {
  x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16; return x;
}
__device__ __forceinline__ unsigned index_of(int pat, unsigned t) {
  switch (pat) {
    case 0: return t;
    case 1: return t >> 5;
    case 2: return t & 31;
    case 3: return hash(t) & 255;
    case 4: return hash(t) & 4095;
    default: return 0;
  }
}
__global__ void fadd(float* p, int pat, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) atomicAdd(p + index_of(pat, t), 1.0f + (t & 7));
}
__global__ void iadd(int* p, int pat, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) atomicAdd(p + index_of(pat, t), int(1 + (t & 7)));
}
__global__ void inc(int* p, int pat, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) atomicAdd(p + index_of(pat, t), 1);
}
__global__ void fadd_uniform(float* sum, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) atomicAdd(sum, 1.0f + (t & 7));
}
__global__ void iadd_uniform(int* sum, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) atomicAdd(sum, int(1 + (t & 7)));
}
__global__ void fadd_warpred(float* sum, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  float v = t < n ? 1.0f + (t & 7) : 0.0f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, v);
}

template <class F>
static float time_ms(F launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  launch();
  cudaDeviceSynchronize();
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
    float m; cudaEventElapsedTime(&m, a, b); ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  return ms[3];
}

int main() {
  const unsigned n = 1u << 24, block = 256, grid = n / block;
  void* buf; cudaMalloc(&buf, size_t(n) * 4); cudaMemset(buf, 0, size_t(n) * 4);
  const char* pats[] = {"distinct", "warp", "lanes", "bins256", "bins4096", "one"};
  const unsigned addrs[] = {n, n / 32, 32, 256, 4096, 1};
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  printf("device %s sms %d l2 %d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize);
  printf("op pattern addresses updates ms Gupdates_per_s per_address_ns\n");
  for (int pat = 0; pat < 6; ++pat) {
    float m;
    m = time_ms([&] { fadd<<<grid, block>>>((float*)buf, pat, n); });
    printf("fadd %s %u %u %.4f %.3f %.4f\n", pats[pat], addrs[pat], n, m, n / m / 1e6, m * 1e6 / (n / double(addrs[pat])));
    m = time_ms([&] { iadd<<<grid, block>>>((int*)buf, pat, n); });
    printf("iadd %s %u %u %.4f %.3f %.4f\n", pats[pat], addrs[pat], n, m, n / m / 1e6, m * 1e6 / (n / double(addrs[pat])));
    m = time_ms([&] { inc<<<grid, block>>>((int*)buf, pat, n); });
    printf("inc %s %u %u %.4f %.3f %.4f\n", pats[pat], addrs[pat], n, m, n / m / 1e6, m * 1e6 / (n / double(addrs[pat])));
  }
  float m = time_ms([&] { fadd_uniform<<<grid, block>>>((float*)buf, n); });
  printf("fadd_uniform one 1 %u %.4f %.3f %.4f\n", n, m, n / m / 1e6, m * 1e6 / n);
  m = time_ms([&] { iadd_uniform<<<grid, block>>>((int*)buf, n); });
  printf("iadd_uniform one 1 %u %.4f %.3f %.4f\n", n, m, n / m / 1e6, m * 1e6 / n);
  m = time_ms([&] { fadd_warpred<<<grid, block>>>((float*)buf, n); });
  printf("fadd_warpred one 1 %u %.4f %.3f %.4f\n", n / 32, m, n / 32 / m / 1e6, m * 1e6 / (n / 32));
  cudaError_t e = cudaDeviceSynchronize();
  printf("status %s\n", cudaGetErrorString(e));
  return 0;
}
