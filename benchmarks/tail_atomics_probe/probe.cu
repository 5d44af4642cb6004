// benchmarks/tail_atomics_probe (H200, 2026-11-30, session 9's s9-atom): (A) scan_bcao<int,1024> (HeCBench scan, a grid-stride loop over 262,144
// tiles) timed at several grids: is GA102's tail of 2112 CTAs = 5.33 waves of 396 real?
// (B) filter (one atomicAdd(nres) per CTA, 390,625 CTAs) against K elements a thread with one
// atomic per CTA of K*256 elements, and a grid-stride loop over the whole body (same atomics).
// (C) jacobi_step (one atomicAdd(error) per 16x16 CTA, 128x128 CTAs) against T tiles a CTA
// with one atomic per CTA. Outputs checked (filter as a multiset: order-free checksums).
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

// ---------------------------------------------------------------- (A) scan_bcao, verbatim
#define LOG_MEM_BANKS 5
#define OFFSET(n) ((n) >> LOG_MEM_BANKS)
template<typename T, int N>
__global__ void scan_bcao(const int64_t nblocks, T *__restrict__ g_odata, const T *__restrict__ g_idata) {
  __shared__ T temp[2*N];
  for (int64_t bid = blockIdx.x; bid < nblocks; bid += gridDim.x) {
    auto gi = g_idata + bid * N;
    auto go = g_odata + bid * N;
    int thid = threadIdx.x;
    int a = thid;
    int b = a + (N/2);
    int oa = OFFSET(a);
    int ob = OFFSET(b);
    temp[a + oa] = gi[a];
    temp[b + ob] = gi[b];
    int offset = 1;
    for (int d = N >> 1; d > 0; d >>= 1) {
      __syncthreads();
      if (thid < d) {
        int ai = offset*(2*thid+1)-1;
        int bi = offset*(2*thid+2)-1;
        ai += OFFSET(ai);
        bi += OFFSET(bi);
        temp[bi] += temp[ai];
      }
      offset *= 2;
    }
    if (thid == 0) temp[N-1+OFFSET(N-1)] = 0;
    for (int d = 1; d < N; d *= 2) {
      offset >>= 1;
      __syncthreads();
      if (thid < d) {
        int ai = offset*(2*thid+1)-1;
        int bi = offset*(2*thid+2)-1;
        ai += OFFSET(ai);
        bi += OFFSET(bi);
        T t = temp[ai];
        temp[ai] = temp[bi];
        temp[bi] += t;
      }
    }
    __syncthreads();
    go[a] = temp[a + oa];
    go[b] = temp[b + ob];
  }
}

// ---------------------------------------------------------------- (B) filter
__global__ void filter(int *__restrict__ dst, int *__restrict__ nres, const int*__restrict__ src, int n) {
  __shared__ int l_n;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) l_n = 0;
  __syncthreads();
  int d, pos;
  if (i < n) { d = src[i]; if (d > 0) pos = atomicAdd(&l_n, 1); }
  __syncthreads();
  if (threadIdx.x == 0) l_n = atomicAdd(nres, l_n);
  __syncthreads();
  if (i < n && d > 0) { pos += l_n; dst[pos] = d; }
  __syncthreads();
}
// the whole body in a grid-stride loop over the original CTA indices (as many atomics)
__global__ void filter_stride(int *__restrict__ dst, int *__restrict__ nres, const int*__restrict__ src, int n, int ctas) {
  __shared__ int l_n;
  for (int bid = blockIdx.x; bid < ctas; bid += gridDim.x) {
    int i = bid * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) l_n = 0;
    __syncthreads();
    int d, pos;
    if (i < n) { d = src[i]; if (d > 0) pos = atomicAdd(&l_n, 1); }
    __syncthreads();
    if (threadIdx.x == 0) l_n = atomicAdd(nres, l_n);
    __syncthreads();
    if (i < n && d > 0) { pos += l_n; dst[pos] = d; }
    __syncthreads();
  }
}
// K elements a thread (a CTA covers K*blockDim consecutive elements), one atomic per CTA
template <int K>
__global__ void filter_k(int *__restrict__ dst, int *__restrict__ nres, const int*__restrict__ src, int n) {
  __shared__ int l_n;
  if (threadIdx.x == 0) l_n = 0;
  __syncthreads();
  int d[K], pos[K];
#pragma unroll
  for (int k = 0; k < K; k++) {
    int i = (blockIdx.x * K + k) * blockDim.x + threadIdx.x;
    d[k] = i < n ? src[i] : 0;
    if (d[k] > 0) pos[k] = atomicAdd(&l_n, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) l_n = atomicAdd(nres, l_n);
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; k++) if (d[k] > 0) dst[pos[k] + l_n] = d[k];
}

// ---------------------------------------------------------------- (C) jacobi_step
#define NJ 2048
#define IDX(i, j) ((i) + (j) * NJ)
__device__ __forceinline__ float jacobi_tile(float* __restrict__ f, const float* __restrict__ f_old, float (*f_old_tile)[18], int bx, int by) {
  int i = threadIdx.x + bx * blockDim.x;
  int j = threadIdx.y + by * blockDim.y;
  f_old_tile[threadIdx.y+1][threadIdx.x+1] = f_old[IDX(i,j)];
  if (threadIdx.x == 0 && i >= 1) f_old_tile[threadIdx.y+1][threadIdx.x+0] = f_old[IDX(i-1,j)];
  if (threadIdx.x == 15 && i <= NJ-2) f_old_tile[threadIdx.y+1][threadIdx.x+2] = f_old[IDX(i+1,j)];
  if (threadIdx.y == 0 && j >= 1) f_old_tile[threadIdx.y+0][threadIdx.x+1] = f_old[IDX(i,j-1)];
  if (threadIdx.y == 15 && j <= NJ-2) f_old_tile[threadIdx.y+2][threadIdx.x+1] = f_old[IDX(i,j+1)];
  __syncthreads();
  float err = 0.0f;
  if (j >= 1 && j <= NJ-2 && i >= 1 && i <= NJ-2) {
    f[IDX(i,j)] = 0.25f * (f_old_tile[threadIdx.y+1][threadIdx.x+2] + f_old_tile[threadIdx.y+1][threadIdx.x+0] +
                           f_old_tile[threadIdx.y+2][threadIdx.x+1] + f_old_tile[threadIdx.y+0][threadIdx.x+1]);
    float df = f[IDX(i,j)] - f_old_tile[threadIdx.y+1][threadIdx.x+1];
    err = df * df;
  }
  return err;
}
__device__ __forceinline__ float block_sum(float err, float* reduction_array) {
  for (int offset = 8; offset > 0; offset /= 2) err += __shfl_down_sync(0xffffffff, err, offset);
  if (threadIdx.x == 0) reduction_array[threadIdx.y] = err;
  __syncthreads();
  float s = 0.f;
  if (threadIdx.y == 0) {  // lanes 0-15 of warp 0: the mask names them (0xffffffff, as the
    // original writes it, waits for lanes 16-31 that never come: it hung in a loop, 2026-11-30)
    s = reduction_array[threadIdx.x];
    for (int offset = 8; offset > 0; offset /= 2) s += __shfl_down_sync(0x0000ffffu, s, offset);
  }
  return s;
}
__global__ void jacobi_step(float* __restrict__ f, const float* __restrict__ f_old, float* __restrict__ error) {
  __shared__ float f_old_tile[18][18];
  __shared__ float reduction_array[16];
  float err = jacobi_tile(f, f_old, f_old_tile, blockIdx.x, blockIdx.y);
  float s = block_sum(err, reduction_array);
  if (threadIdx.y == 0 && threadIdx.x == 0) atomicAdd(error, s);
}
// T tiles a CTA (blockIdx.y * T + t), each block-reduced, one atomic per CTA
__global__ void jacobi_tiles(float* __restrict__ f, const float* __restrict__ f_old, float* __restrict__ error, int T) {
  __shared__ float f_old_tile[18][18];
  __shared__ float reduction_array[16];
  float total = 0.f;
  for (int t = 0; t < T; t++) {
    float err = jacobi_tile(f, f_old, f_old_tile, blockIdx.x, blockIdx.y * T + t);
    total += block_sum(err, reduction_array);
    __syncthreads();
  }
  if (threadIdx.y == 0 && threadIdx.x == 0) atomicAdd(error, total);
}
// one element per thread and one atomic per warp-level sum, T tiles: the per-thread error summed
// over the tiles first, one block reduction and one atomic per CTA
__global__ void jacobi_tiles_acc(float* __restrict__ f, const float* __restrict__ f_old, float* __restrict__ error, int T) {
  __shared__ float f_old_tile[18][18];
  __shared__ float reduction_array[16];
  float err = 0.f;
  for (int t = 0; t < T; t++) {
    err += jacobi_tile(f, f_old, f_old_tile, blockIdx.x, blockIdx.y * T + t);
    __syncthreads();
  }
  float s = block_sum(err, reduction_array);
  if (threadIdx.y == 0 && threadIdx.x == 0) atomicAdd(error, s);
}

static cudaEvent_t ea, eb;
template <typename F, typename P> float med_ms(F launch, P pre, int reps = 15) {
  std::vector<float> t;
  for (int r = 0; r < reps + 2; r++) {
    pre();
    cudaEventRecord(ea); launch(); cudaEventRecord(eb); cudaEventSynchronize(eb);
    float ms; cudaEventElapsedTime(&ms, ea, eb); if (r >= 2) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
static uint64_t mix(uint64_t x) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; return x; }

int main() {
  setvbuf(stdout, NULL, _IONBF, 0);  // every line reaches the log even if the run is cut short
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("device %s SMs %d\n", p.name, p.multiProcessorCount);
  CK(cudaEventCreate(&ea)); CK(cudaEventCreate(&eb));
  // ---------------- (A)
  {
    const int64_t nb = 262144; const size_t n = nb * 1024;
    int *in, *out; CK(cudaMalloc(&in, n * 4)); CK(cudaMalloc(&out, n * 4));
    std::vector<int> h(n); for (size_t i = 0; i < n; i++) h[i] = 1 + (int)(mix(i) % 5);
    CK(cudaMemcpy(in, h.data(), n * 4, cudaMemcpyHostToDevice));
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, scan_bcao<int, 1024>));
    int per_sm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan_bcao<int, 1024>, 512, 0));
    printf("A scan_bcao regs %d smem %zu ctas_per_sm %d wave %d\n", fa.numRegs, fa.sharedSizeBytes, per_sm, per_sm * p.multiProcessorCount);
    uint64_t ref = 0;
    int grids[] = {2112, 1584, 2376, 1980, 2244, 396, 792, 1188, 2640, 3168, 4224};
    for (int g : grids) {
      float ms = med_ms([&] { scan_bcao<int, 1024><<<g, 512>>>(nb, out, in); }, [] {});
      CK(cudaGetLastError());
      CK(cudaMemcpy(h.data(), out, n * 4, cudaMemcpyDeviceToHost));
      uint64_t c = 0; for (size_t i = 0; i < n; i += 7) c += mix(i ^ (uint64_t)h[i]);
      if (g == 2112) ref = c;
      printf("A scan_bcao grid %d waves %.3f ms %.4f same %d\n", g, (double)g / (per_sm * p.multiProcessorCount), ms, c == ref);
    }
    cudaFree(in); cudaFree(out);
  }
  // ---------------- (B)
  {
    const int n = 100000000; const int ctas = (n + 255) / 256;
    int *src, *dst, *nres; CK(cudaMalloc(&src, (size_t)n * 4)); CK(cudaMalloc(&dst, (size_t)n * 4)); CK(cudaMalloc(&nres, 4));
    std::vector<int> h(n); for (int i = 0; i < n; i++) h[i] = (int)(mix(i + 17) % 100000001ULL) - 50000000;
    CK(cudaMemcpy(src, h.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
    auto check = [&](const char* name, float ms) {
      int cnt; cudaMemcpy(&cnt, nres, 4, cudaMemcpyDeviceToHost);
      std::vector<int> o(cnt > 0 && cnt <= n ? cnt : 0);
      if (!o.empty()) cudaMemcpy(o.data(), dst, (size_t)cnt * 4, cudaMemcpyDeviceToHost);
      uint64_t s = 0; for (int v : o) s += mix((uint64_t)v);
      printf("B %s ms %.4f count %d multiset_hash %llu\n", name, ms, cnt, (unsigned long long)s);
    };
    auto run = [&](auto launch) { return med_ms(launch, [&] { cudaMemsetAsync(nres, 0, 4); }); };
    check("filter grid 390625", run([&] { filter<<<ctas, 256>>>(dst, nres, src, n); }));
    int per_sm = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, filter_stride, 256, 0);
    int wave = per_sm * p.multiProcessorCount;
    check("filter_stride one wave", run([&] { filter_stride<<<wave, 256>>>(dst, nres, src, n, ctas); }));
    check("filter_stride 4 waves", run([&] { filter_stride<<<4 * wave, 256>>>(dst, nres, src, n, ctas); }));
    check("filter_k2", run([&] { filter_k<2><<<(n + 511) / 512, 256>>>(dst, nres, src, n); }));
    check("filter_k4", run([&] { filter_k<4><<<(n + 1023) / 1024, 256>>>(dst, nres, src, n); }));
    check("filter_k8", run([&] { filter_k<8><<<(n + 2047) / 2048, 256>>>(dst, nres, src, n); }));
    check("filter_k16", run([&] { filter_k<16><<<(n + 4095) / 4096, 256>>>(dst, nres, src, n); }));
    cudaFree(src); cudaFree(dst); cudaFree(nres);
  }
  // ---------------- (C)
  {
    const size_t n = (size_t)NJ * NJ;
    float *f, *fo, *err; CK(cudaMalloc(&f, n * 4)); CK(cudaMalloc(&fo, n * 4)); CK(cudaMalloc(&err, 4));
    std::vector<float> h(n); for (size_t i = 0; i < n; i++) h[i] = (float)(mix(i + 5) % 2001) / 1000.f - 1.f;
    CK(cudaMemcpy(fo, h.data(), n * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(f, h.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<float> ref(n), o(n);
    auto check = [&](const char* name, float ms, bool first) {
      float e; cudaMemcpy(&e, err, 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(o.data(), f, n * 4, cudaMemcpyDeviceToHost);
      if (first) ref = o;
      printf("C %s ms %.4f error %.6e f_same %d\n", name, ms, e, o == ref);
    };
    auto run = [&](auto launch) { return med_ms(launch, [&] { cudaMemsetAsync(err, 0, 4); }); };
    dim3 b(16, 16);
    check("jacobi_step 128x128", run([&] { jacobi_step<<<dim3(128, 128), b>>>(f, fo, err); }), true);
    for (int T : {1, 2, 4, 8, 16}) {
      char nm[64]; snprintf(nm, 64, "jacobi_tiles T=%d", T);
      check(nm, run([&] { jacobi_tiles<<<dim3(128, 128 / T), b>>>(f, fo, err, T); }), false);
      snprintf(nm, 64, "jacobi_tiles_acc T=%d", T);
      check(nm, run([&] { jacobi_tiles_acc<<<dim3(128, 128 / T), b>>>(f, fo, err, T); }), false);
    }
    cudaFree(f); cudaFree(fo); cudaFree(err);
  }
  return 0;
}
