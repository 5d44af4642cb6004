// Test fixture (tests/test_toolchain.py, tests/test_sass.py): several kernels in one file, a
// header from another folder, a namespace, and templates that gpuadvise instantiates itself.
// The MARK comments locate lines for the tests; keep each on the line of its access.
#include "ga_helpers.cuh"

__global__ void vec_add(const float4* a, const float4* b, float4* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 x = a[i];  // MARK:float4-load
    float4 y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);  // MARK:float4-store
  }
}

__global__ void smem_widths(const float* in, float* out) {
  __shared__ float s1[GA_BLOCK];
  __shared__ float2 s2[GA_BLOCK];
  __shared__ float4 s4[GA_BLOCK];
  int t = threadIdx.x;
  float v = in[blockIdx.x * GA_BLOCK + t];
  s1[t] = v;  // MARK:sts32
  s2[t] = make_float2(v, 2.0f * v);  // MARK:sts64
  s4[t] = make_float4(v, v + 1.0f, v + 2.0f, v + 3.0f);  // MARK:sts128
  __syncthreads();
  float r = s1[GA_BLOCK - 1 - t];  // MARK:lds32
  float2 r2 = s2[(t + 1) % GA_BLOCK];  // MARK:lds64
  float4 r4 = s4[(t + 3) % GA_BLOCK];  // MARK:lds128
  out[blockIdx.x * GA_BLOCK + t] = r + r2.x * r2.y + r4.x * r4.y + r4.z * r4.w;
}

extern "C" __global__ void count_positive(const float* in, int* counter, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > 0.0f) atomicAdd(counter, 1);
}

namespace ga {

__global__ void scale(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = ga_scale(ga_load(in, i));  // MARK:scale-call
}

template <int BLOCK, bool SQUARE>
__global__ void reduce(const float* in, float* out) {
  __shared__ float partial[BLOCK];
  int t = threadIdx.x;
  float v = in[blockIdx.x * BLOCK + t];
  partial[t] = SQUARE ? v * v : v;
  __syncthreads();
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

namespace inner {
template <typename T>
__global__ void fill(T* p, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;  // MARK:fill-store
}
}  // namespace inner

}  // namespace ga

// One instance of ga::reduce exists in the file; others are instantiated by gpuadvise.
template __global__ void ga::reduce<64, false>(const float*, float*);
