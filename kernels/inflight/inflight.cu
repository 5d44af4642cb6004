// GA106 case: too little in flight. Each thread sums a grid-stride slice of x; a warp issues one
// load, waits for it (the sum needs it) and only then issues the next: with few warps per SM the
// bytes in flight are far below what the DRAM needs (Little's law). `// expect: GAxxx` marks the
// line where gpuadvise must report a finding. Launches: case.toml and the kernel-named .toml files.

// 264 CTAs of 128 threads on 132 SMs: 8 of 64 warps per SM, one 4-byte load each in flight
extern "C" __global__ void sum_few(const float* __restrict__ x, float* __restrict__ out,  // expect: GA106
                                   unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (unsigned i = t; i < n; i += blockDim.x * gridDim.x) acc += x[i];
    out[t] = acc;
}

// the same loop through a macro
#define STRIDE_SUM(acc, x, start, n) \
    for (unsigned i_ = (start); i_ < (n); i_ += blockDim.x * gridDim.x) (acc) += (x)[i_]

extern "C" __global__ void sum_macro(const float* __restrict__ x, float* __restrict__ out,  // expect: GA106
                                     unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    STRIDE_SUM(acc, x, t, n);
    out[t] = acc;
}

// the same loop in a device template, a while loop over a pointer
template <typename T>
__device__ T strided_sum(const T* p, unsigned start, unsigned n) {
    T acc = T(0);
    unsigned i = start;
    while (i < n) {
        acc += p[i];
        i += blockDim.x * gridDim.x;
    }
    return acc;
}

extern "C" __global__ void sum_template(const float* __restrict__ x, float* __restrict__ out,  // expect: GA106
                                        unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    out[t] = strided_sum<float>(x, t, n);
}

// the fix by the grid: the same loop launched with the whole wave the GPU holds (sum_wave.toml);
// a full wave still has one 4-byte load per thread in flight, which float4 loads widen (GA303)
extern "C" __global__ void sum_wave(const float* __restrict__ x, float* __restrict__ out,
                                    unsigned n) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (unsigned i = t; i < n; i += blockDim.x * gridDim.x) acc += x[i];  // expect: GA303
    out[t] = acc;
}

// the fix in the thread: the same 264 CTAs, each thread keeping 8 independent float4 loads in
// flight (n a multiple of 32 x the threads, as the launch has it)
extern "C" __global__ void sum_unrolled(const float4* __restrict__ x, float* __restrict__ out,
                                        unsigned n4) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned stride = blockDim.x * gridDim.x;
    float4 a[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (unsigned i = t; i + 7 * stride < n4; i += 8 * stride) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            float4 v = x[i + k * stride];
            a[k].x += v.x; a[k].y += v.y; a[k].z += v.z; a[k].w += v.w;
        }
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) acc += (a[k].x + a[k].y) + (a[k].z + a[k].w);
    out[t] = acc;
}
