// Header for tests/cuda/multi.cu, found through -I tests/cuda/include (another folder).
#pragma once

#define GA_BLOCK 128
#define GA_SCALE_FACTOR 2.0f

__device__ __forceinline__ float ga_load(const float* p, int i) {
  return p[i];  // MARK:header-load
}

__device__ __forceinline__ float ga_scale(float x) { return x * GA_SCALE_FACTOR; }
