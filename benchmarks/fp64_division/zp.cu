// The FP64 division probe (session 9): HeCBench zeropoint's zero_point (double, as in the corpus:
// src/zeropoint-cuda/main.cu, after PyTorch's choose_qparams) and its GA404 float build, timed on
// input distributions that send the divisions to ptxas's slow path or not; plus division
// microbenchmarks (fast path vs zero numerator), double and float. docs/execution-model.md.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
#include <math.h>
__global__ void zp_d (
    const float* x_min,
    const float* x_max,
    int32_t qmin,
    int32_t qmax,
    int size,
    bool preserve_sparsity,
    float* scale,
    int32_t* zero_point)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < size) {
    float min_val = x_min[i];
    float max_val = x_max[i];

    if (min_val < 0 && max_val > 0 && preserve_sparsity) {
      int symmetric_qmin = -((qmax - qmin) / 2 + 1);
      int symmetric_qmax = (qmax - qmin) / 2;
      double max_scale = fmax(
          fabs(min_val / symmetric_qmin), fabs(max_val / symmetric_qmax));
      min_val = max_scale * symmetric_qmin;
      max_val = max_scale * symmetric_qmax;
    }

    // We extend the [min, max] interval to ensure that it contains 0.
    // Otherwise, we would not meet the requirement that 0 be an exactly
    // representable value.
    min_val = fminf(min_val, 0.f);
    max_val = fmaxf(max_val, 0.f);
    scale[i] = (static_cast<double>(max_val) - min_val) / (qmax - qmin);

    // Moving this check outside this function would result in extra Device to
    // Host copy of the min and max val which would result in a perf hit.
    if (scale[i] == 0.0f || isinf(1.0f / scale[i])) {
      scale[i] = 0.1;
    }

    double zero_point_from_min = qmin - min_val / static_cast<double>(scale[i]);
    double zero_point_from_max = qmax - max_val / static_cast<double>(scale[i]);
    double zero_point_from_min_error = abs(qmin) + abs(min_val / static_cast<double>(scale[i]));
    double zero_point_from_max_error = abs(qmax) + abs(max_val / static_cast<double>(scale[i]));
    double initial_zero_point = zero_point_from_min_error < zero_point_from_max_error
                                ? zero_point_from_min
                                : zero_point_from_max;

    // Note: preserve_sparsity here means symmetric quantization.
    // for symmetric quantization, we force zero_point
    // to be a middle value between qmin and qmax.
    // If either min or max is 0, then we just use 0 as zero_point.
    if (min_val < 0 && max_val > 0 && preserve_sparsity) {
      initial_zero_point = static_cast<double>(qmin + qmax) / 2;
    }
    // Now we need to nudge the zero point to be an integer
    // (our zero points are integer, and this is motivated by the
    // requirement to be able to represent the real value "0" exactly as a
    // quantized value, which is required in multiple places, for example in
    // Im2col with zero padding).
    int32_t nudged_zero_point = 0;
    if (initial_zero_point < qmin) {
      nudged_zero_point = qmin;
    } else if (initial_zero_point > qmax) {
      nudged_zero_point = qmax;
    } else {
      nudged_zero_point = nearbyint(initial_zero_point);
    }
    zero_point[i] = nudged_zero_point;
  }
}


__global__ void zp_f (
    const float* x_min,
    const float* x_max,
    int32_t qmin,
    int32_t qmax,
    int size,
    bool preserve_sparsity,
    float* scale,
    int32_t* zero_point)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < size) {
    float min_val = x_min[i];
    float max_val = x_max[i];

    if (min_val < 0 && max_val > 0 && preserve_sparsity) {
      int symmetric_qmin = -((qmax - qmin) / 2 + 1);
      int symmetric_qmax = (qmax - qmin) / 2;
      float max_scale = fmaxf(
          fabsf(min_val / symmetric_qmin), fabsf(max_val / symmetric_qmax));
      min_val = max_scale * symmetric_qmin;
      max_val = max_scale * symmetric_qmax;
    }

    // We extend the [min, max] interval to ensure that it contains 0.
    // Otherwise, we would not meet the requirement that 0 be an exactly
    // representable value.
    min_val = fminf(min_val, 0.f);
    max_val = fmaxf(max_val, 0.f);
    scale[i] = (static_cast<float>(max_val) - min_val) / (qmax - qmin);

    // Moving this check outside this function would result in extra Device to
    // Host copy of the min and max val which would result in a perf hit.
    if (scale[i] == 0.0f || isinf(1.0f / scale[i])) {
      scale[i] = 0.1f;
    }

    float zero_point_from_min = qmin - min_val / static_cast<float>(scale[i]);
    float zero_point_from_max = qmax - max_val / static_cast<float>(scale[i]);
    float zero_point_from_min_error = abs(qmin) + abs(min_val / static_cast<float>(scale[i]));
    float zero_point_from_max_error = abs(qmax) + abs(max_val / static_cast<float>(scale[i]));
    float initial_zero_point = zero_point_from_min_error < zero_point_from_max_error
                                ? zero_point_from_min
                                : zero_point_from_max;

    // Note: preserve_sparsity here means symmetric quantization.
    // for symmetric quantization, we force zero_point
    // to be a middle value between qmin and qmax.
    // If either min or max is 0, then we just use 0 as zero_point.
    if (min_val < 0 && max_val > 0 && preserve_sparsity) {
      initial_zero_point = static_cast<float>(qmin + qmax) / 2;
    }
    // Now we need to nudge the zero point to be an integer
    // (our zero points are integer, and this is motivated by the
    // requirement to be able to represent the real value "0" exactly as a
    // quantized value, which is required in multiple places, for example in
    // Im2col with zero padding).
    int32_t nudged_zero_point = 0;
    if (initial_zero_point < qmin) {
      nudged_zero_point = qmin;
    } else if (initial_zero_point > qmax) {
      nudged_zero_point = qmax;
    } else {
      nudged_zero_point = nearbyint(initial_zero_point);
    }
    zero_point[i] = nudged_zero_point;
  }
}



template <typename T>
__global__ void divloop(T* out, T num, T den, int iters) {
  // 4 independent chains a thread: x_k = x_k / den (x stays 0 with num 0: the zero-numerator path)
  T a = num, b = num * (T)1.5, c = num * (T)0.75, d = num * (T)1.25;
  T q = den + (T)(threadIdx.x & 1) * (T)1e-7;
  for (int i = 0; i < iters; i++) { a = a / q; b = b / q; c = c / q; d = d / q; }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

template <typename T>
__global__ void fmaloop(T* out, T x, int iters) {
  T a = x, b = x * (T)1.5, c = x * (T)0.75, d = x * (T)1.25;
  T m = (T)0.999999;
  for (int i = 0; i < iters; i++) { a = a * m + x; b = b * m + x; c = c * m + x; d = d * m + x; }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

template <typename F>
static float time_us(F launch, int reps = 30) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  launch(); launch(); CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < reps; r++) {
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000.f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  const int size = 10000000, qmin = -127, qmax = 127;
  std::vector<float> hmin(size), hmax(size);
  float *dmin, *dmax, *dscale; int32_t* dzp;
  CK(cudaMalloc(&dmin, size * 4)); CK(cudaMalloc(&dmax, size * 4));
  CK(cudaMalloc(&dscale, size * 4)); CK(cudaMalloc(&dzp, size * 4));
  std::mt19937 g(19937);
  struct Case { const char* name; float lo1, hi1, lo2, hi2; bool preserve; };
  Case cases[] = {
    {"A corpus: min,max U(-1,1), preserve_sparsity=1", -1, 1, -1, 1, true},
    {"B no zero: min U(-1,-0.01), max U(0.01,1), preserve=0 (FP64 div fast path only)", -1, -0.01f, 0.01f, 1, false},
    {"C min zero: min U(0.01,1) -> min_val 0, max U(0.01,1), preserve=0 (one div slow path, every lane)", 0.01f, 1, 0.01f, 1, false},
    {"E min,max U(-1,1), preserve=0 (both divs: half the lanes slow)", -1, 1, -1, 1, false},
  };
  int grid = (size + 255) / 256;
  for (auto& c : cases) {
    std::uniform_real_distribution<float> u1(c.lo1, c.hi1), u2(c.lo2, c.hi2);
    for (int i = 0; i < size; i++) { hmin[i] = u1(g); hmax[i] = u2(g); }
    CK(cudaMemcpy(dmin, hmin.data(), size * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dmax, hmax.data(), size * 4, cudaMemcpyHostToDevice));
    float td = time_us([&] { zp_d<<<grid, 256>>>(dmin, dmax, qmin, qmax, size, c.preserve, dscale, dzp); });
    float tf = time_us([&] { zp_f<<<grid, 256>>>(dmin, dmax, qmin, qmax, size, c.preserve, dscale, dzp); });
    CK(cudaGetLastError());
    printf("zero_point %-100s double %8.2f us  float %8.2f us  ratio %.3f\n", c.name, td, tf, td / tf);
  }
  // division microbenchmarks: ns per thread-division over a full GPU, and warp-divisions per SM-clock
  int dev; CK(cudaGetDevice(&dev)); cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, dev));
  int clk_khz = 0; cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, dev);
  int sms = p.multiProcessorCount, blocks = sms * 8, threads = 256, iters = 2000;
  double *od; float* of; CK(cudaMalloc(&od, blocks * threads * 8)); CK(cudaMalloc(&of, blocks * threads * 4));
  double ops = 4.0 * iters * blocks * threads / 32.0;  // warp-operations
  auto rep = [&](const char* what, float us) {
    double per_sm_clk = ops / sms / (us * 1e-6 * 1980e6);
    printf("micro %-44s %9.1f us  %.4f warp-ops per SM per clock at 1980 MHz (%.1f SM-clocks per warp-op)\n", what, us, per_sm_clk, 1.0 / per_sm_clk);
  };
  rep("double div, fast path (num 1, den ~1)", time_us([&] { divloop<double><<<blocks, threads>>>(od, 1.0, 1.0000001, iters); }, 5));
  rep("double div, zero numerator", time_us([&] { divloop<double><<<blocks, threads>>>(od, 0.0, 1.0000001, iters); }, 5));
  rep("float div, fast path", time_us([&] { divloop<float><<<blocks, threads>>>(of, 1.0f, 1.0000001f, iters); }, 5));
  rep("float div, zero numerator", time_us([&] { divloop<float><<<blocks, threads>>>(of, 0.0f, 1.0000001f, iters); }, 5));
  rep("double fma (DFMA)", time_us([&] { fmaloop<double><<<blocks, threads>>>(od, 1.0, iters); }, 5));
  rep("float fma (FFMA)", time_us([&] { fmaloop<float><<<blocks, threads>>>(of, 1.0f, iters); }, 5));
  CK(cudaGetLastError());
  printf("device %s, %d SMs, clock attr %d kHz\n", p.name, sms, clk_khz);
  return 0;
}
