// Test fixture (tests/source/test_kernel_names.py): kernel templates instantiated under one
// spelling and named with --kernel under others: typedefs from CUDA's headers and from the
// user's, enumerators (scoped and unscoped), constexpr constants, macros, default template
// arguments, nested templates, structs without their namespace, pointers.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "types.cuh"

#define TILE 64
#define VALUE_T float
constexpr int kWarps = 4;
typedef unsigned int u32;

enum layout { LAYOUT_D4, LAYOUT_DS4, LAYOUT_D2S6 };

namespace ga {
enum class Mode : int { fast = 1, exact = fast + 2 };
struct Pair {
  float a, b;
};
template <typename T, int N = 4>
struct Vec {
  T v[N];
};
}  // namespace ga

template <typename src_t, typename dst_t>
__global__ void get_rows(const src_t* src, dst_t* dst, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = (dst_t)(float)src[i];
}
template __global__ void get_rows<half, float>(const half*, float*, int);
template __global__ void get_rows<nv_bfloat16, float>(const nv_bfloat16*, float*, int);
template __global__ void get_rows<int64_t, uint>(const int64_t*, uint*, int);
template __global__ void get_rows<size_t, real_t>(const size_t*, real_t*, int);

template <layout L>
__global__ void quantize(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * (1 + (int)L);
}
template __global__ void quantize<LAYOUT_DS4>(const float*, float*, int);

template <ga::Mode M, int TILE_N = TILE, bool CHECK = (TILE_N > 32)>
__global__ void tiled(float* y, int n) {
  int i = blockIdx.x * TILE_N + threadIdx.x;
  if (!CHECK || i < n) y[i] = (float)M;
}
template __global__ void tiled<ga::Mode::exact>(float*, int);

template <unsigned BLOCK, typename T = float>
__global__ void reduce(const T* x, T* y) {
  __shared__ T s[BLOCK];
  s[threadIdx.x] = x[blockIdx.x * BLOCK + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) y[blockIdx.x] = s[BLOCK - 1];
}
template __global__ void reduce<128u>(const float*, float*);

template <typename V>
__global__ void vec_copy(const V* x, V* y) {
  y[threadIdx.x] = x[threadIdx.x];
}
template __global__ void vec_copy<ga::Vec<half>>(const ga::Vec<half>*, ga::Vec<half>*);
template __global__ void vec_copy<ga::Pair>(const ga::Pair*, ga::Pair*);

template <typename P>
__global__ void via_pointer(P p, float* y) {
  y[threadIdx.x] = p[threadIdx.x];
}
template __global__ void via_pointer<const float*>(const float*, float*);

template <int N>
__global__ void sized(float* y) {
  y[threadIdx.x] = (float)N;
}
template __global__ void sized<sizeof(float4)>(float*);
