// Tree reductions in the spellings of other people's code: a template block size, a macro,
// cuda-samples' SharedMemory<T> helper, cooperative groups, one-line loops, other names (t, k,
// lane), int and unsigned. Each block reduces its part of `in` to one partial sum in
// `out[blockIdx.x]`. The loads are grid-stride loops (several elements per thread, the first add
// done while loading) except where the pattern is the load itself (the idle half, GA204).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include "common.cuh"

// ---- interleaved trees (GA202), the modulo branch splitting every warp (GA104)

// template block size, `t`, one-line loop
template <int B>
__global__ void il_template(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sm[B];
    const int t = threadIdx.x;
    int v = 0;
    for (unsigned i = blockIdx.x * B + t; i < n; i += B * gridDim.x) v += in[i];  // expect: GA303
    sm[t] = v;
    __syncthreads();
    for (int s = 1; s < B; s *= 2) { if (t % (2 * s) == 0) sm[t] += sm[t + s]; __syncthreads(); }  // expect: GA202, GA104
    if (t == 0) out[blockIdx.x] = sm[0];
}
template __global__ void il_template<256>(const int*, int*, unsigned);

// cuda-samples spelling: SharedMemory<T>, cg::this_thread_block, cg::sync, a bit mask for the modulo
__global__ void il_helper(const int* __restrict__ g_idata, int* __restrict__ g_odata, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    int* sdata = SharedMemory<int>();
    unsigned int tid = threadIdx.x;
    int mySum = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) mySum += g_idata[i];  // expect: GA303
    sdata[tid] = mySum;
    cg::sync(cta);
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if ((tid & (2 * s - 1)) == 0) {  // expect: GA202, GA104
            sdata[tid] += sdata[tid + s];
        }
        cg::sync(cta);
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// macro block size, strided index (no divergence, bank conflicts instead), `k`
__global__ void il_strided(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int buf[BLOCK_SIZE];
    unsigned k = threadIdx.x, acc = 0;
    for (unsigned i = blockIdx.x * BLOCK_SIZE + k; i < n; i += BLOCK_SIZE * gridDim.x) acc += in[i];  // expect: GA303
    buf[k] = acc;
    __syncthreads();
    for (unsigned d = 1; d < BLOCK_SIZE; d <<= 1) {
        const unsigned at = 2 * d * k;  // expect: GA202
        if (at < BLOCK_SIZE) buf[at] += buf[at + d];  // expect: GA201
        __syncthreads();
    }
    if (k == 0) out[blockIdx.x] = buf[0];
}

// ---- sequential trees with one element per thread: half the threads idle from the first step
// (GA204: add during the load), barriers down to one thread (GA205: shuffles), one element per
// thread over the whole array (GA206)

template <unsigned B>
__global__ void idle_template(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sm[B];
    const unsigned t = threadIdx.x, i = blockIdx.x * B + t;  // expect: GA206
    sm[t] = i < n ? in[i] : 0;  // expect: GA204
    __syncthreads();
    for (unsigned s = B / 2; s > 0; s >>= 1) { if (t < s) sm[t] += sm[t + s]; __syncthreads(); }  // expect: GA205
    if (t == 0) out[blockIdx.x] = sm[0];
}
template __global__ void idle_template<256>(const int*, int*, unsigned);

__global__ void idle_helper(const int* __restrict__ g_idata, int* __restrict__ g_odata, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    int* sdata = SharedMemory<int>();
    unsigned int tid = cta.thread_rank();
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    sdata[tid] = (i < n) ? g_idata[i] : 0;  // expect: GA204
    cg::sync(cta);
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];  // expect: GA205
        }
        cg::sync(cta);
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

__global__ void idle_macro(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int partial[BLOCK_SIZE];
    int lane = threadIdx.x;
    int gid = blockIdx.x * BLOCK_SIZE + lane;  // expect: GA206
    partial[lane] = 0;
    if (gid < n) partial[lane] = in[gid];  // expect: GA204
    __syncthreads();
    #pragma unroll
    for (int half = BLOCK_SIZE >> 1; half >= 1; half >>= 1) {
        if (lane < half) partial[lane] = partial[lane] + partial[lane + half];  // expect: GA205
        __syncthreads();
    }
    if (lane == 0) out[blockIdx.x] = partial[0];
}

// ---- the seed's "unroll the last warp": warp-synchronous without __syncwarp, a race since
// Volta (GA203); shuffles are the fix (GA205)

template <unsigned B>
__device__ void warp_tail(volatile int* s, unsigned t) {
    s[t] += s[t + 32]; s[t] += s[t + 16]; s[t] += s[t + 8]; s[t] += s[t + 4]; s[t] += s[t + 2]; s[t] += s[t + 1];
}

template <unsigned B>
__global__ void tail_template(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sm[B];
    const unsigned t = threadIdx.x;
    int v = 0;
    for (unsigned i = blockIdx.x * B + t; i < n; i += B * gridDim.x) v += in[i];  // expect: GA303
    sm[t] = v;
    __syncthreads();
    for (unsigned s = B / 2; s > 32; s >>= 1) { if (t < s) sm[t] += sm[t + s]; __syncthreads(); }
    if (t < 32) warp_tail<B>(sm, t);  // expect: GA203, GA205
    if (t == 0) out[blockIdx.x] = sm[0];
}
template __global__ void tail_template<256>(const int*, int*, unsigned);

#define VADD(o) vs[lane] += vs[lane + (o)]
__global__ void tail_macro(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int partial[BLOCK_SIZE];
    const unsigned lane = threadIdx.x;
    int v = 0;
    for (unsigned i = blockIdx.x * BLOCK_SIZE + lane; i < n; i += BLOCK_SIZE * gridDim.x) v += in[i];  // expect: GA303
    partial[lane] = v;
    __syncthreads();
    if (lane < 128) partial[lane] += partial[lane + 128];
    __syncthreads();
    if (lane < 64) partial[lane] += partial[lane + 64];
    __syncthreads();
    if (lane < 32) {
        volatile int* vs = partial;
        VADD(32);  // expect: GA203, GA205
        VADD(16);
        VADD(8);
        VADD(4);
        VADD(2);
        VADD(1);
    }
    if (lane == 0) out[blockIdx.x] = partial[0];
}

__global__ void tail_helper(const int* __restrict__ g_idata, int* __restrict__ g_odata, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    int* sdata = SharedMemory<int>();
    unsigned int tid = threadIdx.x;
    int mySum = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) mySum += g_idata[i];  // expect: GA303
    sdata[tid] = mySum;
    cg::sync(cta);
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] = mySum = mySum + sdata[tid + s];
        cg::sync(cta);
    }
    if (tid < 32) {
        volatile int* smem = sdata;
        smem[tid] = mySum = mySum + smem[tid + 32];  // expect: GA203, GA205
        smem[tid] = mySum = mySum + smem[tid + 16];
        smem[tid] = mySum = mySum + smem[tid + 8];
        smem[tid] = mySum = mySum + smem[tid + 4];
        smem[tid] = mySum = mySum + smem[tid + 2];
        smem[tid] = mySum = mySum + smem[tid + 1];
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// ---- correct: must stay silent

// warp shuffles, one shared word per warp
__global__ void good_shfl(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int warp_sums[32];
    int s = 0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) s += in[i];  // expect: GA303
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) out[blockIdx.x] = s;
    }
}

// cooperative groups: tiled_partition<32> and its shfl_xor
template <unsigned B>
__global__ void good_cg(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int sums[B / 32];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int v = 0;
    for (unsigned k = blockIdx.x * B + block.thread_rank(); k < n; k += B * gridDim.x) v += in[k];  // expect: GA303
    for (int o = warp.size() / 2; o > 0; o /= 2) v += warp.shfl_xor(v, o);
    if (warp.thread_rank() == 0) sums[warp.meta_group_rank()] = v;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        v = warp.thread_rank() < B / 32 ? sums[warp.thread_rank()] : 0;
        for (int o = warp.size() / 2; o > 0; o /= 2) v += warp.shfl_xor(v, o);
        if (warp.thread_rank() == 0) out[blockIdx.x] = v;
    }
}
template __global__ void good_cg<256>(const int*, int*, unsigned);
