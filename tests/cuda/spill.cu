// Test fixture: compiled with maxrregcount=24 this kernel keeps more values live than it has
// registers, so ptxas spills to local memory. named_barrier uses barrier 3 (4 barriers).
__global__ void spill(const float* in, float* out, int stride) {
  float r[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) r[i] = in[i * stride + threadIdx.x];
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 48; ++i) acc += r[i] * r[47 - i] + r[(i * 7) % 48];
  out[threadIdx.x] = acc;
}

__global__ void named_barrier(float* x) {
  x[threadIdx.x] += 1.0f;
  asm volatile("bar.sync 3, 64;");
  x[threadIdx.x] *= 2.0f;
}
