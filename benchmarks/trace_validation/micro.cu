// Micro-kernels for validating the bank and coalescing models against Nsight Compute
// (benchmarks/trace_validation/run.py). One block of 256 threads unless the case says otherwise.

// Shared-memory reads with a stride of S elements of 4, 8 and 16 bytes.
template <typename T, int S>
__global__ void smem_stride(const T* __restrict__ in, T* __restrict__ out) {
    __shared__ T buf[2048];
    for (int i = threadIdx.x; i < 2048; i += blockDim.x) buf[i] = in[i % 256];
    __syncthreads();
    T v = buf[(threadIdx.x * S) % 2048];
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
template __global__ void smem_stride<float, 1>(const float*, float*);
template __global__ void smem_stride<float, 2>(const float*, float*);
template __global__ void smem_stride<float, 32>(const float*, float*);
template __global__ void smem_stride<float, 33>(const float*, float*);
template __global__ void smem_stride<double, 1>(const double*, double*);
template __global__ void smem_stride<double, 2>(const double*, double*);
template __global__ void smem_stride<double, 17>(const double*, double*);
template __global__ void smem_stride<float4, 1>(const float4*, float4*);
template __global__ void smem_stride<float4, 2>(const float4*, float4*);
template __global__ void smem_stride<float4, 9>(const float4*, float4*);

// Every lane reads the same shared word.
extern "C" __global__ void smem_broadcast(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float buf[256];
    buf[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = buf[7] + buf[(threadIdx.x / 32) * 32];
}

// 32x32 tile transpose through shared memory, without and with padding. Block 32x8.
template <int PAD>
__global__ void transpose(const float* __restrict__ in, float* __restrict__ out, int w, int h) {
    __shared__ float tile[32][32 + PAD];
    int x = blockIdx.x * 32 + threadIdx.x;
    int y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}
template __global__ void transpose<0>(const float*, float*, int, int);
template __global__ void transpose<1>(const float*, float*, int, int);

// Global loads with a stride of S floats.
template <int S>
__global__ void global_stride(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[(long long)i * S % ((long long)n * S)];
}
template __global__ void global_stride<1>(const float*, float*, int);
template __global__ void global_stride<2>(const float*, float*, int);
template __global__ void global_stride<8>(const float*, float*, int);
template __global__ void global_stride<32>(const float*, float*, int);

// An array of structs read one field at a time (16-byte stride, 4-byte reads).
struct Particle {
    float x, y, z, m;
};
extern "C" __global__ void aos_field(const Particle* __restrict__ p, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = p[i].x * p[i].m;
}

// Misaligned by one float.
extern "C" __global__ void global_offset(const float* __restrict__ in, float* __restrict__ out,
                                        int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i + 1];
}
