// s10-scan probe: what a Blelloch scan's tile costs an SM (issue 29). Persistent CTAs of W warps
// (N = 64 W ints a tile in shared memory, two a thread, as HeCBench scan), each doing T tiles;
// thread 0 records %smid and clock64 around its loop, so each SM's span in its own cycles over
// the tiles its CTAs did gives SM cycles a tile (whatever the clock). c CTAs an SM: grid = c x SMs.
// Modes (K barriers a tile; shared-only: the tile comes from registers, leaves into a register):
//  bar   : K = 20 __syncthreads, nothing between
//  one   : K = 20, between them warp 0 does s[N/2+t] += s[t] (ld, ld, add, st; conflict-free)
//  all   : K = 20, every thread does it
//  allnb, allcnb: all and allc with a compiler-only fence for each barrier (the shared work alone)
//  onec, allc: as one and all, the load bank-conflicted: s[(32 t) % (N/2)], min(W, 32) words of one bank a warp
//  halv  : Blelloch's active threads (d = N/2 .. 1 then 1 .. N/2: 2 log2 N steps + 1 barrier),
//          the same conflict-free ld-ld-add-st per active thread
//  bcao  : scan_bcao's own shared code (padded addresses, 2 log2 N + 1 barriers)
//  scan  : scan's own shared code (unpadded: bank conflicts)
//  halvnb, bcaonb: halv and bcao with every __syncthreads replaced by a compiler-only fence
//          (wrong results, the same instructions without barriers)
// Then HeCBench scan_bcao and scan themselves (global memory) at c = 1..4 CTAs an SM and the
// corpus grid (2112), 262,144 tiles: median time and SM cycles a tile.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda.h>

#define OFF(n) ((n) >> 5)
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at line %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

enum { BAR, ONE, ALL, ONEC, ALLC, ALLNB, ALLCNB, HALV, BCAO, SCAN, HALVNB, BCAONB, NMODES };
static const char* MODE_NAMES[NMODES] = {"bar", "one", "all", "onec", "allc", "allnb", "allcnb", "halv", "bcao", "scan", "halvnb", "bcaonb"};

template <bool B> __device__ __forceinline__ void sync_() {
  if (B) __syncthreads(); else asm volatile("" ::: "memory");
}

template <int MODE>
__global__ void tiles(int T, int* sink, long long* rec) {
  extern __shared__ int s[];
  const int t = threadIdx.x, N = 2 * blockDim.x;
  constexpr bool B = !(MODE == HALVNB || MODE == BCAONB || MODE == ALLNB || MODE == ALLCNB);
  int acc = 0;
  __syncthreads();
  long long c0 = clock64();
  for (int tile = 0; tile < T; tile++) {
    if (MODE == BCAO || MODE == BCAONB) {
      int a = t, b = t + N / 2;
      s[a + OFF(a)] = tile + t; s[b + OFF(b)] = tile - t;
      int offset = 1;
      for (int d = N >> 1; d > 0; d >>= 1) {
        sync_<B>();
        if (t < d) { int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1; ai += OFF(ai); bi += OFF(bi); s[bi] += s[ai]; }
        offset *= 2;
      }
      if (t == 0) s[N - 1 + OFF(N - 1)] = 0;
      for (int d = 1; d < N; d *= 2) {
        offset >>= 1;
        sync_<B>();
        if (t < d) { int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1; ai += OFF(ai); bi += OFF(bi); int x = s[ai]; s[ai] = s[bi]; s[bi] += x; }
      }
      sync_<B>();
      acc += s[a + OFF(a)] ^ s[b + OFF(b)];
    } else if (MODE == SCAN) {
      s[2 * t] = tile + t; s[2 * t + 1] = tile - t;
      int offset = 1;
      for (int d = N >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) { int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1; s[bi] += s[ai]; }
        offset *= 2;
      }
      if (t == 0) s[N - 1] = 0;
      for (int d = 1; d < N; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) { int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1; int x = s[ai]; s[ai] = s[bi]; s[bi] += x; }
      }
      __syncthreads();  // (scan has none here; its next tile's fill follows its loads)
      acc += s[2 * t] ^ s[2 * t + 1];
    } else if (MODE == HALV || MODE == HALVNB) {
      s[t] = tile + t; s[t + N / 2] = tile - t;
      for (int d = N >> 1; d > 0; d >>= 1) { sync_<B>(); if (t < d) s[N / 2 + t] += s[t]; }
      for (int d = 1; d < N; d *= 2) { sync_<B>(); if (t < d) s[N / 2 + t] += s[t]; }
      sync_<B>();
      acc += s[t] ^ s[t + N / 2];
    } else {
      s[t] = tile + t; s[t + N / 2] = tile - t;
      #pragma unroll 1
      for (int k = 0; k < 20; k++) {
        sync_<B>();
        if (MODE == ONE) { if (t < 32) s[N / 2 + t] += s[t]; }
        if (MODE == ALL || MODE == ALLNB) s[N / 2 + t] += s[t];
        if (MODE == ONEC) { if (t < 32) s[N / 2 + t] += s[(t * 32) % (N / 2)]; }
        if (MODE == ALLC || MODE == ALLCNB) s[N / 2 + t] += s[(t * 32) % (N / 2)];
      }
      acc += s[t] ^ s[t + N / 2];
    }
  }
  long long c1 = clock64();
  if (acc == 0x7fffffff) sink[0] = acc;
  if (t == 0) {
    unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    rec[3 * blockIdx.x] = smid; rec[3 * blockIdx.x + 1] = c0; rec[3 * blockIdx.x + 2] = c1;
  }
}

// HeCBench scan_bcao<int,1024> and scan<int,1024> (benchmarks/corpus/src/hecbench/src/scan-cuda/main.cu)
template<typename T, int N>
__global__ void scan_bcao(const int64_t nblocks, T *__restrict__ g_odata, const T *__restrict__ g_idata) {
  __shared__ T temp[2*N];
  for (int64_t bid = blockIdx.x; bid < nblocks; bid += gridDim.x) {
    auto gi = g_idata + bid * N; auto go = g_odata + bid * N;
    int thid = threadIdx.x; int a = thid; int b = a + (N/2); int oa = OFF(a); int ob = OFF(b);
    temp[a + oa] = gi[a]; temp[b + ob] = gi[b];
    int offset = 1;
    for (int d = N >> 1; d > 0; d >>= 1) {
      __syncthreads();
      if (thid < d) { int ai = offset*(2*thid+1)-1; int bi = offset*(2*thid+2)-1; ai += OFF(ai); bi += OFF(bi); temp[bi] += temp[ai]; }
      offset *= 2;
    }
    if (thid == 0) temp[N-1+OFF(N-1)] = 0;
    for (int d = 1; d < N; d *= 2) {
      offset >>= 1;
      __syncthreads();
      if (thid < d) { int ai = offset*(2*thid+1)-1; int bi = offset*(2*thid+2)-1; ai += OFF(ai); bi += OFF(bi); T t = temp[ai]; temp[ai] = temp[bi]; temp[bi] += t; }
    }
    __syncthreads();
    go[a] = temp[a + oa]; go[b] = temp[b + ob];
  }
}
template<typename T, int N>
__global__ void scan(const int64_t nblocks, T *__restrict__ g_odata, const T *__restrict__ g_idata) {
  __shared__ T temp[N];
  for (int64_t bid = blockIdx.x; bid < nblocks; bid += gridDim.x) {
    auto gi = g_idata + bid * N; auto go = g_odata + bid * N;
    int thid = threadIdx.x; int offset = 1;
    temp[2*thid] = gi[2*thid]; temp[2*thid+1] = gi[2*thid+1];
    for (int d = N >> 1; d > 0; d >>= 1) {
      __syncthreads();
      if (thid < d) { int ai = offset*(2*thid+1)-1; int bi = offset*(2*thid+2)-1; temp[bi] += temp[ai]; }
      offset *= 2;
    }
    if (thid == 0) temp[N-1] = 0;
    for (int d = 1; d < N; d *= 2) {
      offset >>= 1;
      __syncthreads();
      if (thid < d) { int ai = offset*(2*thid+1)-1; int bi = offset*(2*thid+2)-1; T t = temp[ai]; temp[ai] = temp[bi]; temp[bi] += t; }
    }
    go[2*thid] = temp[2*thid]; go[2*thid+1] = temp[2*thid+1];
  }
}

typedef void (*TileK)(int, int*, long long*);
static TileK KS[NMODES] = {tiles<BAR>, tiles<ONE>, tiles<ALL>, tiles<ONEC>, tiles<ALLC>, tiles<ALLNB>, tiles<ALLCNB>, tiles<HALV>, tiles<BCAO>, tiles<SCAN>, tiles<HALVNB>, tiles<BCAONB>};

static int g_sms;
static int *g_sink; static long long *g_rec;

static void run_mode(int mode, int W, int c, int T) {
  const int threads = 32 * W, N = 2 * threads, smem = (N + N / 32 + 8) * 4;
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, KS[mode], threads, smem));
  if (occ < c) { printf("%-7s W=%2d c=%d skipped (occupancy %d)\n", MODE_NAMES[mode], W, c, occ); return; }
  const int grid = c * g_sms;
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  KS[mode]<<<grid, threads, smem>>>(T, g_sink, g_rec); CK(cudaDeviceSynchronize());
  std::vector<float> ts; std::vector<double> cyc;
  std::vector<long long> h(3 * grid);
  int cmin = 1 << 30, cmax = 0;
  for (int r = 0; r < 5; r++) {
    cudaEventRecord(e0); KS[mode]<<<grid, threads, smem>>>(T, g_sink, g_rec); cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1)); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms * 1000.f);
    CK(cudaMemcpy(h.data(), g_rec, 3 * grid * sizeof(long long), cudaMemcpyDeviceToHost));
    std::vector<long long> lo(g_sms, 1LL << 62), hi(g_sms, 0); std::vector<int> n(g_sms, 0);
    for (int b = 0; b < grid; b++) { int sm = (int)h[3 * b]; n[sm]++; lo[sm] = std::min(lo[sm], h[3 * b + 1]); hi[sm] = std::max(hi[sm], h[3 * b + 2]); }
    std::vector<double> per;
    for (int sm = 0; sm < g_sms; sm++) if (n[sm]) { per.push_back(double(hi[sm] - lo[sm]) / (double(n[sm]) * T)); cmin = std::min(cmin, n[sm]); cmax = std::max(cmax, n[sm]); }
    std::sort(per.begin(), per.end()); cyc.push_back(per[per.size() / 2]);
  }
  std::sort(ts.begin(), ts.end()); std::sort(cyc.begin(), cyc.end());
  const int K = (mode <= ALLCNB) ? 20 : 0;
  int lg = 0; while ((1 << lg) < N) lg++;
  const int bars = K ? K : (mode == BCAO || mode == BCAONB ? 2 * lg + 1 : 2 * lg + 1);
  printf("%-7s W=%2d c=%d occ=%d ctas/sm=%d-%d barriers/tile=%2d  SM cycles/tile %8.1f  per barrier %6.1f  per barrier-warp %5.2f  time %8.1f us  MHz %.0f\n",
         MODE_NAMES[mode], W, c, occ, cmin, cmax, bars, cyc[2], cyc[2] / bars, cyc[2] / bars / W, ts[2],
         cyc[2] * double(c) * T / (ts[2] * 1e-6) / 1e6);
}

template <typename K>
static float time_us(K k, int reps) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int r = 0; r < reps; r++) { cudaEventRecord(a); k(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms * 1000.f); }
  std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
}

int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); g_sms = p.multiProcessorCount;
  printf("device %s, %d SMs\n", p.name, g_sms);
  CK(cudaMalloc(&g_sink, 64)); CK(cudaMalloc(&g_rec, 3 * 64 * 200 * sizeof(long long)));
  const int Ws[6] = {1, 2, 4, 8, 16, 32};
  printf("== barriers with 0 / 1 / all warps working between them (20 a tile, T=256 tiles a CTA)\n");
  for (int mode = BAR; mode <= ALLCNB; mode++)
    for (int wi = 0; wi < 6; wi++) for (int c = 1; c <= 4; c++) if (c * Ws[wi] <= 64) run_mode(mode, Ws[wi], c, 256);
  printf("== Blelloch-shaped tiles (N = 64 W ints), T=256 tiles a CTA\n");
  for (int mode = HALV; mode < NMODES; mode++)
    for (int W : {4, 8, 16, 32}) for (int c = 1; c <= 4; c++) if (c * W <= 64) run_mode(mode, W, c, 256);
  printf("== HeCBench scan_bcao<int,1024> / scan<int,1024>, 262144 tiles, 512 threads\n");
  const int64_t nblocks = 262144, n = nblocks * 1024;
  int *in, *out; CK(cudaMalloc(&in, n * 4)); CK(cudaMalloc(&out, n * 4)); CK(cudaMemset(in, 1, n * 4));
  int o1 = 0, o2 = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o1, scan_bcao<int, 1024>, 512, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o2, scan<int, 1024>, 512, 0));
  cudaFuncAttributes fa, fb; cudaFuncGetAttributes(&fa, scan_bcao<int, 1024>); cudaFuncGetAttributes(&fb, scan<int, 1024>);
  printf("occupancy: scan_bcao %d CTAs/SM (%d regs), scan %d CTAs/SM (%d regs)\n", o1, fa.numRegs, o2, fb.numRegs);
  for (int grid : {g_sms, 2 * g_sms, 3 * g_sms, 4 * g_sms, 2112}) {
    auto k0 = [&] { scan_bcao<int, 1024><<<grid, 512>>>(nblocks, out, in); };
    auto k1 = [&] { scan<int, 1024><<<grid, 512>>>(nblocks, out, in); };
    k0(); k1(); CK(cudaDeviceSynchronize());
    float t0 = time_us(k0, 7), t1 = time_us(k1, 7);
    printf("grid %4d: scan_bcao %8.1f us, scan %8.1f us  (us x SMs / tiles x 1980 MHz: %.0f, %.0f cycles a tile an SM)\n", grid, t0, t1,
           t0 * 1e-6 * 1.98e9 * g_sms / nblocks, t1 * 1e-6 * 1.98e9 * g_sms / nblocks);
  }
  CK(cudaGetLastError());
  return 0;
}
