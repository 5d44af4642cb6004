// Seed 003's seven parallel reductions (DirectCompute, 2010), ported to CUDA, plus a modern
// warp-shuffle version. Each block reduces part of `in` to one partial sum in `out[blockIdx.x]`.
// Integer data, as in HARDWARE.md section 4 (2^26 ints on an H100).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define BLOCK 256

// #1 interleaved addressing with divergent branching
extern "C" __global__ void reduce1(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    sdata[tid] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) {  // expect: GA202, GA104, GA405
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// #2 interleaved addressing, strided index: no divergence, but shared-memory bank conflicts
extern "C" __global__ void reduce2(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    sdata[tid] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        unsigned index = 2 * s * tid;  // expect: GA202
        if (index < blockDim.x) {
            sdata[index] += sdata[index + s];  // expect: GA201
        }
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// #3 sequential addressing: conflict free
extern "C" __global__ void reduce3(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    sdata[tid] = i < n ? in[i] : 0;  // expect: GA204
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // expect: GA205
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// #4 first add during global load: half the blocks, each thread adds two elements
extern "C" __global__ void reduce4(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;  // expect: GA206
    int v = i < n ? in[i] : 0;
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];  // expect: GA205
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// #5 unroll the last warp, as the seed wrote it: relies on implicit warp-synchronous execution,
// a race on Volta and later (independent thread scheduling)
extern "C" __global__ void reduce5(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[BLOCK];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;  // expect: GA206
    int v = i < n ? in[i] : 0;
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid < 32) {
        volatile int* vs = sdata;
        vs[tid] += vs[tid + 32];  // expect: GA203, GA205
        vs[tid] += vs[tid + 16];
        vs[tid] += vs[tid + 8];
        vs[tid] += vs[tid + 4];
        vs[tid] += vs[tid + 2];
        vs[tid] += vs[tid + 1];
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}

// #6 completely unrolled: the block size is a template parameter
template <unsigned blockSize>
__global__ void reduce6(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[blockSize];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (blockSize * 2) + threadIdx.x;  // expect: GA206
    int v = i < n ? in[i] : 0;
    if (i + blockSize < n) v += in[i + blockSize];
    sdata[tid] = v;
    __syncthreads();
    if (blockSize >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
    if (blockSize >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
    if (blockSize >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) {
        int s = sdata[tid] + (blockSize >= 64 ? sdata[tid + 32] : 0);
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
        if (tid == 0) out[blockIdx.x] = s;
    }
}
template __global__ void reduce6<256>(const int*, int*, unsigned);

// #7 multiple elements per thread: a grid-stride loop sized to the device
template <unsigned blockSize>
__global__ void reduce7(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sdata[blockSize];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    unsigned gridSize = blockSize * 2 * gridDim.x;
    int v = 0;
    while (i < n) {
        v += in[i];
        if (i + blockSize < n) v += in[i + blockSize];
        i += gridSize;
    }
    sdata[tid] = v;
    __syncthreads();
    if (blockSize >= 512) { if (tid < 256) sdata[tid] += sdata[tid + 256]; __syncthreads(); }
    if (blockSize >= 256) { if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads(); }
    if (blockSize >= 128) { if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads(); }
    if (tid < 32) {
        int s = sdata[tid] + (blockSize >= 64 ? sdata[tid + 32] : 0);
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
        if (tid == 0) out[blockIdx.x] = s;
    }
}
template __global__ void reduce7<256>(const int*, int*, unsigned);

// Modern: int4 loads, warp shuffles, one atomic per block (HARDWARE.md section 4: 2640 GB/s on H100)
extern "C" __global__ void reduce_shfl(const int4* __restrict__ in, int* __restrict__ out,
                                       unsigned n4) {
    int s = 0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x) {
        int4 v = in[i];
        s += v.x + v.y + v.z + v.w;
    }
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
    __shared__ int warp_sums[32];
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0;
        for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_down_sync(0xffffffffu, s, offset);
        if (threadIdx.x == 0) atomicAdd(out, s);
    }
}
