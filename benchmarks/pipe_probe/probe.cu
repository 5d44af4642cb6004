// The execution model's pipe rates and latencies (issue 29), measured on the GPU it runs on.
// Build and run: benchmarks/pipe_probe/run.sh (writes $OUT/pipe_probe.json); the method is in
// docs/execution-model.md, and benchmarks/pipe_probe/to_preset.py puts the JSON into
// gpuadvise/data/pipes.toml.
//
// - clock: clock64() against %globaltimer over a busy loop on one SM (MHz the SMs ran at);
// - throughput ("lanes_per_clock", results per clock per SM): every SM full of warps (2,048
//   threads), each thread 8 independent chains of the instruction (inline PTX, so that the
//   compiler keeps them: FFMA, HFMA2, DFMA, LOP3 for the ALU, IMAD, MUFU.EX2, POPC for the XU,
//   SHFL, HMMA), timed with CUDA events: lanes x operations / (time x clock x SMs);
// - latency ("latency_cycles"): one warp, a chain of 512 dependent instructions between two
//   clock64() reads, the cycles over the chain; memory by pointer chasing (shared; L1 hits on a
//   4 KB array; L2 hits on 8 MB with ld.global.cg; DRAM on 1 GB, random lines);
// - shared_wavefront_cycles: the shared chase with the 32 lanes in one bank (32 wavefronts)
//   against one lane's, over the 31 extra wavefronts;
// - barrier: a 1024-thread CTA's bar.sync loop against the same loop without it;
// - launch_floor_us: an empty <<<1, 32>>> kernel timed alone by CUDA events (median of 200);
//   cta_launch_ns: empty kernels of 132 x k CTAs of 128 threads, the slope per CTA an SM.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e = (x);                                                          \
    if (e != cudaSuccess) {                                                       \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

template <class F>
float time_ms(F f, int reps = 7) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < reps; i++) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---------------------------------------------------------------------------------------------
// The SM clock

__global__ void clock_probe(unsigned long long *out, int iters) {
  unsigned long long t0 = gtime();
  long long c0 = clock64();
  float x = threadIdx.x;
  for (int i = 0; i < iters; i++) asm volatile("fma.rn.f32 %0, %0, 0f3F800001, 0f3F800000;" : "+f"(x));
  long long c1 = clock64();
  unsigned long long t1 = gtime();
  if (threadIdx.x == 0) {
    out[0] = (unsigned long long)(c1 - c0);
    out[1] = t1 - t0;
  }
  if (x == 0.f) out[2] = 1;
}

// ---------------------------------------------------------------------------------------------
// Throughput: 8 independent chains per thread, `iters` steps

// unrolled 16 times: 128 of the instruction per loop branch and counter (under 3% of the issue)
#define CHAINS8(OP)                                                                          \
  _Pragma("unroll 16") for (int i = 0; i < iters; i++) {                                     \
    OP(a0) OP(a1) OP(a2) OP(a3) OP(a4) OP(a5) OP(a6) OP(a7)                                  \
  }

#define F32(v) asm volatile("fma.rn.f32 %0, %0, 0f3F800001, 0f3F800000;" : "+f"(v));
#define F64(v) asm volatile("fma.rn.f64 %0, %0, 0d3FF0000000000001, 0d3FF0000000000000;" : "+d"(v));
#define I32(v) asm volatile("mad.lo.s32 %0, %0, 3, 7;" : "+r"(v));
#define MUFU(v) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(v));
#define XU(v) asm volatile("popc.b32 %0, %0;" : "+r"(v));
#define SHFL(v) asm volatile("shfl.sync.bfly.b32 %0, %0, 1, 31, -1;" : "+r"(v));
#define F16(v) asm volatile("fma.rn.f16x2 %0, %0, %0, %0;" : "+r"(v));
// the ALU (LOP3): three-input xor of the chain and two others, which ptxas cannot fold
#define ALU(v, x, y) asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(v) : "r"(x), "r"(y));
#define ALU8                                                                                 \
  _Pragma("unroll 16") for (int i = 0; i < iters; i++) {                                     \
    ALU(a0, a1, a2) ALU(a1, a2, a3) ALU(a2, a3, a4) ALU(a3, a4, a5) ALU(a4, a5, a6)          \
    ALU(a5, a6, a7) ALU(a6, a7, a0) ALU(a7, a0, a1)                                          \
  }
#define LOP(v) asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(v) : "r"(k1), "r"(k2));

__global__ void tp_f32(float *out, int iters) {
  float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5,
        a6 = a0 + 6, a7 = a0 + 7;
  CHAINS8(F32)
  float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s == 0.123f) out[0] = s;
}
__global__ void tp_f64(double *out, int iters) {
  double a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3, a4 = a0 + 4, a5 = a0 + 5,
         a6 = a0 + 6, a7 = a0 + 7;
  CHAINS8(F64)
  double s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s == 0.123) out[0] = s;
}
template <int KIND>
__global__ void tp_u32(unsigned *out, int iters) {
  unsigned a0 = threadIdx.x | 1, a1 = a0 + 2, a2 = a0 + 4, a3 = a0 + 6, a4 = a0 + 8, a5 = a0 + 10,
           a6 = a0 + 12, a7 = a0 + 14;
  if (KIND == 0) { CHAINS8(I32) }
  if (KIND == 1) { CHAINS8(XU) }
  if (KIND == 2) { CHAINS8(SHFL) }
  if (KIND == 3) { CHAINS8(F16) }
  if (KIND == 4) { ALU8 }
  unsigned s = a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
  if (s == 0x12345u) out[0] = s;
}
__global__ void tp_mufu(float *out, int iters) {
  float a0 = threadIdx.x * 1e-3f, a1 = a0 + .1f, a2 = a0 + .2f, a3 = a0 + .3f, a4 = a0 + .4f,
        a5 = a0 + .5f, a6 = a0 + .6f, a7 = a0 + .7f;
  CHAINS8(MUFU)
  float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
  if (s == 0.123f) out[0] = s;
}
// tensor: m16n8k16 f16 mma with f32 accumulators, 4 independent accumulators per warp
__global__ void tp_mma(float *out, int iters) {
  unsigned a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
  unsigned b[2] = {0x3c003c00u, 0x3c003c00u};
  float c[4][4] = {};
  for (int i = 0; i < iters; i++) {
#pragma unroll
    for (int k = 0; k < 4; k++)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
          "{%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float s = 0;
  for (int k = 0; k < 4; k++) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 0.123f) out[0] = s;
}

// ---------------------------------------------------------------------------------------------
// Latency: one warp, 512 dependent steps between two clock reads

#define DEP512(OP) \
  _Pragma("unroll") for (int i = 0; i < 512; i++) { OP(v) }

template <int KIND>
__global__ void lat_alu(unsigned long long *out, unsigned seed) {
  long long c0, c1;
  if (KIND == 0) {
    float v = seed;
    c0 = clock64();
    DEP512(F32)
    c1 = clock64();
    if (v == 0.123f) out[2] = 1;
  } else if (KIND == 1) {
    double v = seed;
    c0 = clock64();
    DEP512(F64)
    c1 = clock64();
    if (v == 0.123) out[2] = 1;
  } else if (KIND == 2) {
    unsigned v = seed;
    c0 = clock64();
    DEP512(I32)
    c1 = clock64();
    if (v == 0x12345u) out[2] = 1;
  } else if (KIND == 3) {
    float v = seed * 1e-3f;
    c0 = clock64();
    DEP512(MUFU)
    c1 = clock64();
    if (v == 0.123f) out[2] = 1;
  } else if (KIND == 4) {
    unsigned v = seed;
    c0 = clock64();
    DEP512(XU)
    c1 = clock64();
    if (v == 0x12345u) out[2] = 1;
  } else if (KIND == 5) {
    unsigned v = seed + threadIdx.x;
    c0 = clock64();
    DEP512(SHFL)
    c1 = clock64();
    if (v == 0x12345u) out[2] = 1;
  } else if (KIND == 6) {
    unsigned v = seed;
    c0 = clock64();
    DEP512(F16)
    c1 = clock64();
    if (v == 0x12345u) out[2] = 1;
  } else {
    unsigned v = seed, k1 = seed * 3, k2 = seed * 5;
    c0 = clock64();
    DEP512(LOP)
    c1 = clock64();
    if (v == 0x12345u) out[2] = 1;
  }
  if (threadIdx.x == 0) out[0] = (unsigned long long)(c1 - c0);
}

__global__ void lat_mma(unsigned long long *out) {
  unsigned a0 = 0x3c003c00u, b0 = 0x3c003c00u;
  float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  long long t0 = clock64();
  for (int i = 0; i < 256; i++)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, "
        "{%5,%5}, {%0,%1,%2,%3};"
        : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
        : "r"(a0), "r"(b0));
  long long t1 = clock64();
  if (threadIdx.x == 0) out[0] = (unsigned long long)(t1 - t0);
  if (c0 + c1 + c2 + c3 == 0.123f) out[2] = 1;
}

// shared-memory chase: lane l follows its own ring; `spread` = 1: every lane in its own bank
// (one wavefront), `spread` = 32: all lanes in one bank (32 wavefronts)
__global__ void lat_shared(unsigned long long *out, int spread, int steps) {
  __shared__ unsigned ring[32 * 32 * 2];
  unsigned lane = threadIdx.x;
  for (int i = 0; i < 32; i++) {
    // slot i of lane l at word (i * 32 + l) * spread % 2048 ... spread 32: word i*32*32+l*32
    unsigned here = spread == 1 ? i * 32 + lane : ((i & 1) * 1024 + lane * 32);
    unsigned next = spread == 1 ? ((i + 1) % 32) * 32 + lane : (((i + 1) & 1) * 1024 + lane * 32);
    ring[here] = next;
  }
  __syncwarp();
  unsigned j = spread == 1 ? lane : lane * 32;
  long long c0 = clock64();
  for (int s = 0; s < steps; s++) j = ring[j];
  long long c1 = clock64();
  if (lane == 0) out[0] = (unsigned long long)(c1 - c0);
  if (j == 0xFFFFFFFFu) out[2] = 1;
}

// global chase (one thread): `next` holds the ring; cg: skip L1
template <bool CG>
__global__ void lat_global(const unsigned *__restrict__ next, unsigned long long *out, int steps) {
  unsigned j = 0;
  for (int s = 0; s < 64; s++) j = CG ? __ldcg(next + j) : next[j];  // warm up (L1 case)
  long long c0 = clock64();
  for (int s = 0; s < steps; s++) j = CG ? __ldcg(next + j) : __ldca(next + j);
  long long c1 = clock64();
  out[0] = (unsigned long long)(c1 - c0);
  out[1] = j;
}

// barrier: `bars` bar.sync in a loop, and the same loop without them
template <bool BAR>
__global__ void lat_bar(unsigned long long *out, int iters) {
  unsigned v = threadIdx.x;
  __syncthreads();
  long long c0 = clock64();
  for (int i = 0; i < iters; i++) {
    asm volatile("add.u32 %0, %0, 1;" : "+r"(v));
    if (BAR) __syncthreads();
  }
  long long c1 = clock64();
  if (threadIdx.x == 0) out[0] = (unsigned long long)(c1 - c0);
  if (v == 0xFFFFFFFFu) out[2] = 1;
}

__global__ void empty() {}

// ---------------------------------------------------------------------------------------------

static std::vector<unsigned> ring_of(size_t words, size_t stride_words, unsigned seed) {
  size_t n = words / stride_words;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; i++) order[i] = i;
  srand(seed);
  for (size_t i = n - 1; i > 0; i--) std::swap(order[i], order[(size_t)rand() % (i + 1)]);
  std::vector<unsigned> ring(words, 0);
  for (size_t i = 0; i < n; i++) ring[order[i] * stride_words] = (unsigned)(order[(i + 1) % n] * stride_words);
  return ring;
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  int sms = p.multiProcessorCount;
  unsigned long long *dout;
  CK(cudaMalloc(&dout, 64));
  unsigned long long h[4];
  std::string json = "{\n";
  char buf[512];
  snprintf(buf, sizeof buf, "  \"device\": \"%s\",\n  \"cc\": \"%d.%d\",\n  \"sm_count\": %d,\n", p.name,
           p.major, p.minor, sms);
  json += buf;

  // clock: a long FMA chain on one warp, clock64 against globaltimer (after a warm-up)
  clock_probe<<<sms, 32>>>(dout, 1 << 20);
  CK(cudaDeviceSynchronize());
  clock_probe<<<1, 32>>>(dout, 1 << 22);
  CK(cudaMemcpy(h, dout, 24, cudaMemcpyDeviceToHost));
  double mhz = (double)h[0] / (double)h[1] * 1e3;
  snprintf(buf, sizeof buf, "  \"sm_clock_mhz\": %.1f,\n", mhz);
  json += buf;

  // throughput: 8 warps x 8 CTAs... 2048 threads per SM
  int threads = 256, ctas = sms * 8, iters = 4096;
  double lanes = (double)ctas * threads;
  auto rate = [&](float ms, double ops_per_lane) {
    return lanes * ops_per_lane / (ms * 1e-3 * mhz * 1e6 * sms);
  };
  float *f;
  CK(cudaMalloc(&f, 64));
  json += "  \"lanes_per_clock\": {";
  double r;
  r = rate(time_ms([&] { tp_f32<<<ctas, threads>>>(f, iters); }), 8.0 * iters);
  snprintf(buf, sizeof buf, "\"fp32\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_u32<3><<<ctas, threads>>>((unsigned *)f, iters); }), 8.0 * iters);
  snprintf(buf, sizeof buf, ", \"fp16\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_f64<<<ctas, threads>>>((double *)f, iters / 4); }), 8.0 * iters / 4);
  snprintf(buf, sizeof buf, ", \"fp64\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_u32<4><<<ctas, threads>>>((unsigned *)f, iters); }), 8.0 * iters);
  snprintf(buf, sizeof buf, ", \"int\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_u32<0><<<ctas, threads>>>((unsigned *)f, iters); }), 8.0 * iters);
  snprintf(buf, sizeof buf, ", \"imad\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_mufu<<<ctas, threads>>>(f, iters / 4); }), 8.0 * iters / 4);
  snprintf(buf, sizeof buf, ", \"mufu\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_u32<1><<<ctas, threads>>>((unsigned *)f, iters / 4); }), 8.0 * iters / 4);
  snprintf(buf, sizeof buf, ", \"xu\": %.2f", r), json += buf;
  r = rate(time_ms([&] { tp_u32<2><<<ctas, threads>>>((unsigned *)f, iters / 2); }), 8.0 * iters / 2);
  snprintf(buf, sizeof buf, ", \"shuffle\": %.2f", r), json += buf;
  // an mma per warp is 32 lanes' worth of the tensor pipe in the model's units
  r = rate(time_ms([&] { tp_mma<<<ctas, threads>>>(f, iters / 8); }), 4.0 * iters / 8);
  snprintf(buf, sizeof buf, ", \"tensor\": %.2f", r), json += buf;
  json += "},\n";

  // latencies
  json += "  \"latency_cycles\": {";
  // the model's "int" latency class is the ALU's and IMAD's alike: the LOP3 chain stands for it
  const char *names[] = {"fp32", "fp64", "imad", "mufu", "xu", "shuffle", "fp16", "int"};
  for (int k = 0; k < 8; k++) {
    switch (k) {
      case 0: lat_alu<0><<<1, 32>>>(dout, 3); break;
      case 1: lat_alu<1><<<1, 32>>>(dout, 3); break;
      case 2: lat_alu<2><<<1, 32>>>(dout, 3); break;
      case 3: lat_alu<3><<<1, 32>>>(dout, 3); break;
      case 4: lat_alu<4><<<1, 32>>>(dout, 3); break;
      case 5: lat_alu<5><<<1, 32>>>(dout, 3); break;
      case 6: lat_alu<6><<<1, 32>>>(dout, 3); break;
      default: lat_alu<7><<<1, 32>>>(dout, 3); break;
    }
    CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
    snprintf(buf, sizeof buf, "%s\"%s\": %.2f", k ? ", " : "", names[k], h[0] / 512.0);
    json += buf;
  }
  lat_mma<<<1, 32>>>(dout);
  CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
  snprintf(buf, sizeof buf, ", \"tensor\": %.2f", h[0] / 256.0), json += buf;
  int steps = 4096;
  lat_shared<<<1, 32>>>(dout, 1, steps);
  CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
  double shared1 = h[0] / (double)steps;
  lat_shared<<<1, 32>>>(dout, 32, steps);
  CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
  double shared32 = h[0] / (double)steps;
  snprintf(buf, sizeof buf, ", \"shared\": %.2f", shared1), json += buf;

  unsigned *ring;
  size_t big = (size_t)1 << 28;  // 1 GB of words
  CK(cudaMalloc(&ring, big * 4));
  struct Level { const char *name; size_t words, stride; bool cg; int steps; };
  Level levels[] = {{"l1", 1024, 32, false, 4096},
                    {"l2", (size_t)2 << 20, 32, true, 4096},
                    {"dram", big, 1024 + 32, true, 2048}};
  for (auto &lv : levels) {
    auto hr = ring_of(lv.words, lv.stride, 7);
    CK(cudaMemcpy(ring, hr.data(), lv.words * 4, cudaMemcpyHostToDevice));
    if (lv.cg) lat_global<true><<<1, 1>>>(ring, dout, lv.steps);
    else lat_global<false><<<1, 1>>>(ring, dout, lv.steps);
    CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
    snprintf(buf, sizeof buf, ", \"%s\": %.2f", lv.name, h[0] / (double)lv.steps), json += buf;
  }
  CK(cudaFree(ring));

  int bars = 4096;
  lat_bar<true><<<1, 1024>>>(dout, bars);
  CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
  double with_bar = h[0];
  lat_bar<false><<<1, 1024>>>(dout, bars);
  CK(cudaMemcpy(h, dout, 8, cudaMemcpyDeviceToHost));
  snprintf(buf, sizeof buf, ", \"barrier\": %.2f", (with_bar - h[0]) / bars), json += buf;
  json += ", \"store\": 1},\n";
  snprintf(buf, sizeof buf, "  \"shared_wavefront_cycles\": %.3f,\n", (shared32 - shared1) / 31.0);
  json += buf;

  // launch floor: an empty kernel timed alone, median of 200; and back to back
  std::vector<float> one;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 220; i++) {
    CK(cudaEventRecord(a));
    empty<<<1, 32>>>();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 20) one.push_back(ms);
  }
  std::sort(one.begin(), one.end());
  float b2b = time_ms([&] { for (int i = 0; i < 1000; i++) empty<<<1, 32>>>(); }, 5) / 1000;
  snprintf(buf, sizeof buf, "  \"launch_floor_us\": %.3f,\n  \"launch_back_to_back_us\": %.3f,\n",
           one[one.size() / 2] * 1e3, b2b * 1e3);
  json += buf;

  // CTA launches: empty kernels of sms x k CTAs of 128 threads; slope per CTA per SM
  int ks[] = {1, 64, 256, 1024};
  double t_k[4];
  json += "  \"cta_launch_us\": {";
  for (int i = 0; i < 4; i++) {
    int k = ks[i];
    t_k[i] = time_ms([&] { empty<<<sms * k, 128>>>(); }, 9) * 1e3;
    snprintf(buf, sizeof buf, "%s\"%d\": %.3f", i ? ", " : "", k, t_k[i]), json += buf;
  }
  json += "},\n";
  snprintf(buf, sizeof buf, "  \"cta_launch_ns\": %.2f,\n", (t_k[3] - t_k[1]) / (1024 - 64) * 1e3);
  json += buf;
  snprintf(buf, sizeof buf, "  \"shared_conflict32_cycles\": %.2f\n}\n", shared32);
  json += buf;
  fputs(json.c_str(), stdout);
  return 0;
}
