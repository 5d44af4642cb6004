// One element per thread in other people's spellings: the grid covers the array with one (or
// two) elements per thread (GA206: a grid-stride loop over whole waves, several elements per
// thread). The grid-stride kernel sized to the device is correct and must stay silent.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// the textbook saxpy
__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) y[i] = a * x[i] + y[i];
}

// template block size, cooperative groups' indices, `idx`
template <unsigned B>
__global__ void scale_cg(const float* __restrict__ in, float* __restrict__ out, float s, unsigned n) {
    cg::thread_block tb = cg::this_thread_block();
    const unsigned idx = tb.group_index().x * B + tb.thread_rank();  // expect: GA206
    if (idx < n) out[idx] = s * in[idx];
}
template __global__ void scale_cg<256>(const float*, float*, float, unsigned);

// a macro index, two elements per thread (the second half of the array), ints
#define GID (blockIdx.x * blockDim.x + threadIdx.x)
__global__ void add_two(const int* __restrict__ a, const int* __restrict__ b, int* __restrict__ c, int n) {
    const int k = GID;  // expect: GA206
    if (k < n / 2) { c[k] = a[k] + b[k]; c[k + n / 2] = a[k + n / 2] + b[k + n / 2]; }
}

// correct: a grid-stride loop over a grid sized to the device (1056 CTAs: 8 per SM of an H100)
__global__ void saxpy_stride(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}
