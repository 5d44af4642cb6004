// Kernels for the emulator tests (tests/test_ptx_emulator.py): one instruction family each.
#include <cuda_fp16.h>

__global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void saxpy(const float* x, float* y, float alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(alpha, x[i], y[i]);
}

__global__ void int_bits(const unsigned* a, unsigned* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned x = a[i];
  unsigned s = (unsigned)i;
  o[4 * i + 0] = __popc(x * 2654435761u) + (__clz(x) << 8);
  o[4 * i + 1] = __brev(x ^ s);
  o[4 * i + 2] = __byte_perm(x, s * 977u, 0x5140) ^ ((x >> 3) & 0x1f);
  o[4 * i + 3] = (x * 7u) / 13u + (x % 11u) + (unsigned)((int)(x - 40) / -3);
}

__global__ void reduce_smem(const int* in, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  for (int st = 128; st > 0; st >>= 1) {
    if (t < st) s[t] += s[t + st];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void warp_reduce(const float* in, float* out) {
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}

__global__ void vote(const int* in, unsigned* ballots, int* anys) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  unsigned b = __ballot_sync(0xffffffff, v > 31);
  int a = __any_sync(0xffffffff, v == 7);
  int all = __all_sync(0xffffffff, v >= 0);
  if ((threadIdx.x & 31) == 0) {
    ballots[i / 32] = b;
    anys[i / 32] = a + 2 * all;
  }
}

__global__ void histogram(const int* in, int* hist, int n) {
  __shared__ int sh[64];
  if (threadIdx.x < 64) sh[threadIdx.x] = 0;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&sh[in[i] & 63], 1);
  __syncthreads();
  if (threadIdx.x < 64) atomicAdd(&hist[threadIdx.x], sh[threadIdx.x]);
}

__global__ void divergent(const int* in, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  if (threadIdx.x % 2) {
    v = v * 3 + 1;
  } else {
    v = v / 2 - 5;
  }
  out[i] = v;
}

__global__ void half_store(const float* in, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  if (threadIdx.x < 16) out[i] = v * 2.0f;
}

__global__ void reconverge(const int* in, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  int v = in[blockIdx.x * blockDim.x + t];
  if (v & 1) {
    v = v * 5 + in[(t * 7) % 256];
  } else {
    v = v - in[(t * 3) % 256] * 2;
  }
  s[t] = v;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[255 - t];
}

__global__ void half2_math(const __half2* a, const __half2* b, __half2* c, float* f, const float* g) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = __hadd2(a[i], b[i]);
  __half h = __float2half(g[i]);
  f[i] = __half2float(h) + __half2float(__low2half(a[i]));
}

__device__ __noinline__ float scale_add(float x, int k) { return x * (float)k + 1.0f; }

__global__ void calls(float* a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  a[i] = scale_add(a[i], i % 5);
}

__global__ void block2d(const float* in, float* out, int w) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  out[y * w + x] = in[y * w + x] * 2.0f + (float)threadIdx.y;
}

extern __shared__ float dyn[];
__global__ void dyn_smem(const float* in, float* out) {
  int t = threadIdx.x;
  int base = blockIdx.x * blockDim.x;
  dyn[t] = in[base + t];
  __syncthreads();
  out[base + t] = dyn[blockDim.x - 1 - t];
}

__global__ void oob(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i + n];
}

__global__ void spin(int* flag) {
  while (flag[0] == 0) {
    flag[1] += 1;
  }
}

__global__ void early_exit(const int* in, int* out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  int v = in[t];
  if (t < 16) {
    for (int k = 0; k < 4; k++) {
      if (v == k) return;
      v += in[(t + k) & 127];
    }
  }
  s[t] = v;
  out[t] = s[t ^ 1] + v;
}
