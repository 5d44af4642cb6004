// The kernels of sweep.cu as gpuadvise analyzes them (calibrate.py): copy_W_N copies N
// independent elements of W bytes per thread, all loads before the first store. Written out one
// by one rather than by a macro: gpuadvise's source
// reader lists kernels a macro defines as none (a limitation noted in docs/execution-model.md).

extern "C" __global__ void copy_2_1(const unsigned short* __restrict__ in, unsigned short* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned short v[1];
#pragma unroll
    for (int j = 0; j < 1; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 1; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_2_2(const unsigned short* __restrict__ in, unsigned short* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned short v[2];
#pragma unroll
    for (int j = 0; j < 2; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 2; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_2_4(const unsigned short* __restrict__ in, unsigned short* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned short v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 4; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_4_1(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v[1];
#pragma unroll
    for (int j = 0; j < 1; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 1; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_4_2(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v[2];
#pragma unroll
    for (int j = 0; j < 2; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 2; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_4_4(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 4; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_8_1(const uint2* __restrict__ in, uint2* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint2 v[1];
#pragma unroll
    for (int j = 0; j < 1; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 1; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_8_2(const uint2* __restrict__ in, uint2* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint2 v[2];
#pragma unroll
    for (int j = 0; j < 2; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 2; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_16_1(const uint4* __restrict__ in, uint4* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 v[1];
#pragma unroll
    for (int j = 0; j < 1; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 1; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_16_2(const uint4* __restrict__ in, uint4* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 v[2];
#pragma unroll
    for (int j = 0; j < 2; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 2; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}

extern "C" __global__ void copy_16_4(const uint4* __restrict__ in, uint4* __restrict__ out) {
    extern __shared__ char pad[];
    const size_t threads = (size_t)gridDim.x * blockDim.x;
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = in[t + j * threads];
#pragma unroll
    for (int j = 0; j < 4; j++) out[t + j * threads] = v[j];
    if (t == (size_t)-1) pad[0] = 0;
}
