// More kernels for the emulator tests: local memory, vectors, generic pointers, atomics, 64-bit,
// 16-bit floats, fast math, constant memory, device variables, warp intrinsics.
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>

__constant__ float coef[8] = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f};
__device__ int counter;
__device__ float gtab[4] = {0.5f, 1.5f, 2.5f, 3.5f};

__global__ void local_array(const int* in, int* out, int k) {
  int a[16];
  for (int j = 0; j < 16; j++) a[j] = in[threadIdx.x * 16 + j];
  out[threadIdx.x] = a[k & 15] + a[(k + threadIdx.x) & 15];
}

__global__ void vec4(const float4* in, float4* out, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v = in[i];
  v.x *= s;
  v.y += coef[threadIdx.x & 7];
  v.z -= gtab[threadIdx.x & 3];
  v.w = v.x + v.y;
  out[i] = v;
}

__global__ void generic(float* a, int sel) {
  __shared__ float s[64];
  float* p = sel ? s : a;
  p[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  a[threadIdx.x] += s[threadIdx.x & 63];
}

__global__ void switchy(const int* in, int* out) {
  int x = in[threadIdx.x];
  int r;
  switch (x & 7) {
    case 0: r = 5; break;
    case 1: r = x * 3; break;
    case 2: r = x ^ 7; break;
    case 3: r = -x; break;
    case 4: r = x / 3; break;
    case 5: r = x % 5; break;
    case 6: r = x << 2; break;
    default: r = 99;
  }
  out[threadIdx.x] = r;
}

__global__ void atomics(int* c, unsigned* inc, int* cnt) {
  int old = *c, assumed;
  do {
    assumed = old;
    old = atomicCAS(c, assumed, assumed + 1);
  } while (assumed != old);
  atomicInc(inc, 17u);
  atomicMax(c + 1, (int)threadIdx.x);
  atomicMin(c + 2, -(int)threadIdx.x);
  atomicExch(c + 3, 5);
  atomicAnd(c + 4, ~(1 << (threadIdx.x & 31)));
  atomicOr(c + 5, 1 << (threadIdx.x & 15));
  atomicXor(c + 6, (int)threadIdx.x);
  atomicSub(c + 7, 2);
  atomicAdd(&counter, 1);
  int n = __syncthreads_count(threadIdx.x & 1);
  if (threadIdx.x == 0) {
    c[8] = n;
    cnt[0] = counter;
  }
}

__global__ void float_atomics(const float* in, float* sum, double* dsum) {
  atomicAdd(sum, in[threadIdx.x]);
  atomicAdd(dsum, (double)in[threadIdx.x]);
}

__global__ void wide(const long long* a, long long* o, double* d) {
  int i = threadIdx.x;
  long long x = a[i] * 1000003LL - 5000000LL;
  o[2 * i] = x / 7 + x % 11 + (x >> 3) + __mul64hi(x, 12345) + __clzll(x) + __popcll(x);
  o[2 * i + 1] = (long long)((unsigned long long)x / 13ULL) ^ (long long)__brevll(x);
  d[i] = (double)x * 1.5 + sqrt(fabs((double)x)) - 1.0 / (double)(x | 1);
}

__global__ void halves(const __nv_bfloat16* a, __nv_bfloat16* o, const __half* h, __half* ho,
                       float* f) {
  int i = threadIdx.x;
  float x = __bfloat162float(a[i]);
  o[i] = __float2bfloat16(x * 2.0f + 1.0f);
  __half hv = h[i];
  __half p = __hmul(hv, __float2half(3.0f));
  ho[i] = __hgt(p, __float2half(0.25f)) ? __hadd(p, hv) : __hneg(hv);
  f[i] = __half2float(__float2half_rz(x)) + (float)__half2int_rn(__hmul(hv, __float2half(10.f)));
}

__global__ void fastmath(const float* a, float* o) {
  int i = threadIdx.x;
  float x = a[i];
  o[8 * i + 0] = __expf(x);
  o[8 * i + 1] = __logf(fabsf(x) + 1.0f);
  o[8 * i + 2] = rsqrtf(fabsf(x) + 1.0f);
  o[8 * i + 3] = __fdividef(x, 3.0f);
  o[8 * i + 4] = __sinf(x) + __cosf(x);
  o[8 * i + 5] = sqrtf(fabsf(x)) + 1.0f / (x + 2.0f);
  o[8 * i + 6] = floorf(x * 10.0f) + ceilf(x * 3.0f) + truncf(x * 7.0f) + rintf(x * 5.0f);
  o[8 * i + 7] = fminf(x, 0.25f) + fmaxf(x, -0.25f) + __saturatef(x) + (float)(int)(x * 100.0f);
}

__global__ void libm(const float* a, float* o) {
  int i = threadIdx.x;
  float x = a[i];
  o[4 * i + 0] = expf(x);
  o[4 * i + 1] = logf(fabsf(x) + 0.5f);
  o[4 * i + 2] = sinf(x * 3.0f);
  o[4 * i + 3] = powf(fabsf(x) + 0.1f, 1.7f) + tanhf(x);
}

__global__ void shuffles(const int* in, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  int up = __shfl_up_sync(0xffffffff, v, 3);
  int xr = __shfl_xor_sync(0xffffffff, v, 5);
  int idx = __shfl_sync(0xffffffff, v, (threadIdx.x * 7) & 31);
  int w8 = __shfl_down_sync(0xffffffff, v, 2, 8);
  out[4 * i + 0] = up;
  out[4 * i + 1] = xr;
  out[4 * i + 2] = idx;
  out[4 * i + 3] = w8;
}

__global__ void warp_misc(const int* in, unsigned* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  unsigned act = 0;
  if (v & 1) act = __activemask();
  unsigned m = __match_any_sync(0xffffffff, v & 3);
  unsigned r = __reduce_add_sync(0xffffffff, (unsigned)v);
  unsigned mx = __reduce_max_sync(0xffffffff, (unsigned)v);
  out[4 * i + 0] = act;
  out[4 * i + 1] = m;
  out[4 * i + 2] = r;
  out[4 * i + 3] = mx;
}

__global__ void printer(int* out) {
  if (threadIdx.x == 0) printf("hello %d\n", blockIdx.x);
  out[threadIdx.x] = threadIdx.x;
}

__global__ void async_copy(const float* in, float* out) {
  __shared__ float4 s[64];
  int t = threadIdx.x;
  __pipeline_memcpy_async(&s[t], &in[4 * (blockIdx.x * 64 + t)], 16);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  float4 v = s[63 - t];
  out[blockIdx.x * 64 + t] = v.x + v.y + v.z + v.w;
}

__global__ void ints16(const short* a, const unsigned char* b, short* o, int* w) {
  int i = threadIdx.x;
  short x = a[i];
  unsigned char c = b[i];
  o[i] = (short)(x * 3 - c);
  w[i] = (int)x * (int)c + (signed char)c + (x >> 2) + (unsigned short)x;
}

__global__ void selects(const float* a, const int* b, float* o, int* p) {
  int i = threadIdx.x;
  float x = a[i];
  int y = b[i];
  o[i] = (x > 0.25f && y < 40) ? x * 2.0f : (isnan(x) ? 1.0f : -x);
  p[i] = (y > 10) + (y >= 20) * 2 + (y == 33) * 4 + ((unsigned)y < 50u) * 8 + (x <= 0.0f) * 16;
}

__global__ void nested(const int* in, int* out) {
  int t = threadIdx.x;
  int v = in[t];
  int acc = 0;
  for (int k = 0; k < (v & 7); k++) {
    if (k & 1) {
      acc += k * v;
      if (acc > 100) break;
    } else {
      acc -= 1;
    }
  }
  out[t] = acc;
}

// HeCBench bitonic_sort's compare-exchange in a loop over blocks: the swap's then-block is
// reached from both sides of the `||`, before the loop's latch (the branch's post-dominator);
// ptxas reconverges the warp at the then-block (BSYNC, or one PLOP3 predicate), so the swap's
// stores issue once a warp
__global__ void swap_or(int* a, int seq_len, int two_power, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    const int i = (r * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    const int seq_num = i / seq_len;
    int swapped = -1;
    const int h = seq_len / 2;
    if (i < seq_len * seq_num + h) swapped = i + h;
    const bool increasing = ((seq_num / two_power) % 2) == 0;
    if (swapped != -1) {
      if ((a[i] > a[swapped] && increasing) || (a[i] < a[swapped] && !increasing)) {
        const int x = a[i];
        a[i] = a[swapped];
        a[swapped] = x;
      }
    }
  }
}
