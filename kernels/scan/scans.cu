// Prefix sums (scans) in shared memory whose steps below distance 32 GA209 would have done with
// __shfl_up_sync (issue 28 item 8), in four spellings: cuda-samples' padded Hillis-Steele over a
// volatile pointer with two barriers a step, a double-buffered template through a lambda, a
// work-efficient (Blelloch) scan through index macros, and hecbench radixsort's unrolled warp
// scan with no barrier (a race since Volta). The shuffle scan, a shuffle scan whose warps'
// totals are scanned in shared memory by one warp, and a bitonic sort's compare-and-swap steps
// stay silent.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define THREADS 256
#define AI(o, t) ((o) * (2 * (t) + 1) - 1)
#define BI(o, t) ((o) * (2 * (t) + 2) - 1)

// 1. cuda-samples' scan1Inclusive inline: a zero half so that no step tests pos >= offset, a
// barrier before the read and another before the write.
__global__ void hillis_volatile(const unsigned* in, unsigned* out, unsigned n) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ unsigned s_data[2 * THREADS];
    volatile unsigned* s = s_data;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned pos = 2 * threadIdx.x - (threadIdx.x & (THREADS - 1));
    s[pos] = 0;
    pos += THREADS;
    s[pos] = i < n ? in[i] : 0u;
    for (unsigned offset = 1; offset < THREADS; offset <<= 1) {
        cg::sync(cta);
        unsigned t = s[pos] + s[pos - offset];
        cg::sync(cta);
        s[pos] = t;  // expect: GA209
    }
    if (i < n) out[i] = s[pos];
}

// 2. Double-buffered (GPU Gems 3, 39.2.1's naive scan) in a template, the step a lambda.
template <int B>
__global__ void hillis_tmpl(const int* in, int* out, int n) {
    __shared__ int buf[2][B];
    int t = threadIdx.x, i = blockIdx.x * B + t, src = 0;
    buf[0][t] = i < n ? in[i] : 0;
    __syncthreads();
    auto step = [&](int d) {
        buf[1 - src][t] = t >= d ? buf[src][t] + buf[src][t - d] : buf[src][t];  // expect: GA209
        src = 1 - src;
        __syncthreads();
    };
    for (int d = 1; d < B; d *= 2) step(d);
    if (i < n) out[i] = buf[src][t];
}
template __global__ void hillis_tmpl<256>(const int*, int*, int);

// 3. Blelloch's work-efficient exclusive scan of 2 * THREADS values, the indices by macros.
__global__ void blelloch(const unsigned* in, unsigned* out, unsigned n) {
    __shared__ unsigned temp[2 * THREADS];
    unsigned t = threadIdx.x, pair = blockIdx.x * THREADS + t;
    uint2 v2 = 2 * pair + 1 < n ? reinterpret_cast<const uint2*>(in)[pair] : make_uint2(0u, 0u);
    temp[2 * t] = v2.x;
    temp[2 * t + 1] = v2.y;
    unsigned offset = 1;
    for (unsigned d = THREADS; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) temp[BI(offset, t)] += temp[AI(offset, t)];  // expect: GA201, GA209
        offset *= 2;
    }
    if (t == 0) temp[2 * THREADS - 1] = 0;
    for (unsigned d = 1; d < 2 * THREADS; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            unsigned v = temp[AI(offset, t)];
            temp[AI(offset, t)] = temp[BI(offset, t)];
            temp[BI(offset, t)] += v;
        }
    }
    __syncthreads();
    if (2 * pair + 1 < n) reinterpret_cast<uint2*>(out)[pair] = make_uint2(temp[2 * t], temp[2 * t + 1]);
}

// 4. hecbench radixsort's scanwarp, one line: each warp scans its 32 values over a zero
// window, no barrier, no __syncwarp.
__global__ void warp_scan_racy(const unsigned* in, unsigned* out, unsigned n) {  // expect: GA501
    __shared__ unsigned sdata[2 * THREADS];
    volatile unsigned* s = sdata;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, t = threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    int idx = 2 * t - (t & 31);
    s[idx] = 0; idx += 32; s[idx] = v;
    s[idx] += s[idx - 1]; s[idx] += s[idx - 2]; s[idx] += s[idx - 4]; s[idx] += s[idx - 8]; s[idx] += s[idx - 16];  // expect: GA209
    if (i < n) out[i] = s[idx] - v;
}

// Silent: the fix, a shuffle scan per warp and the warps' totals scanned with shuffles.
__global__ void shuffle_scan(const unsigned* in, unsigned* out, unsigned n) {  // expect: GA501
    __shared__ unsigned totals[THREADS / 32];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned v = i < n ? in[i] : 0u;
    for (int d = 1; d < 32; d <<= 1) {
        unsigned y = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += y;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        unsigned t = lane < THREADS / 32 ? totals[lane] : 0u;
        for (int d = 1; d < 32; d <<= 1) {
            unsigned y = __shfl_up_sync(0xffffffffu, t, d);
            if (lane >= d) t += y;
        }
        if (lane < THREADS / 32) totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v += totals[warp - 1];
    if (i < n) out[i] = v;
}

// Silent: a shuffle scan per warp, the 8 warps' totals scanned in shared memory by 8 threads.
// (GA501 no longer: its work, 0.71 us with the barrier latency measured by warps, is 79.8% of
// its launch, under the rule's 80% line; it was 80.6% at 24 cycles a barrier.)
__global__ void shuffle_then_totals(const unsigned* in, unsigned* out, unsigned n) {
    __shared__ unsigned totals[2][THREADS / 32];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = threadIdx.x;
    unsigned v = i < n ? in[i] : 0u;
    for (int d = 1; d < 32; d <<= 1) {
        unsigned y = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += y;
    }
    if (lane == 31) totals[0][warp] = v;
    __syncthreads();
    int src = 0;
    for (unsigned d = 1; d < THREADS / 32; d *= 2) {
        if (t < THREADS / 32) totals[1 - src][t] = t >= d ? totals[src][t] + totals[src][t - d] : totals[src][t];
        src = 1 - src;
        __syncthreads();
    }
    if (warp > 0) v += totals[src][warp - 1];
    if (i < n) out[i] = v;
}

// Silent: a bitonic sort of each block's keys (compare-and-swap: both words stored).
__global__ void bitonic(const unsigned* in, unsigned* out, unsigned n) {
    __shared__ unsigned keys[THREADS];
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    keys[t] = i < n ? in[i] : 0xffffffffu;
    __syncthreads();
    for (unsigned k = 2; k <= THREADS; k <<= 1) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned p = t ^ j;
            if (p > t) {  // expect: GA104
                unsigned a = keys[t], b = keys[p];
                if (((t & k) == 0) == (a > b)) { keys[t] = b; keys[p] = a; }  // expect: GA104
            }
            __syncthreads();
        }
    }
    if (i < n) out[i] = keys[t];
}
