// Bitonic sort of 512 keys per CTA in shared memory (256 threads, GA201). The compare-exchange
// at stride k pairs the words pos and pos + k, pos = 2t - (t & (k - 1)): for k < 32 a warp
// touches runs of k words every 2k, 64 words over two bank rows, 2-way conflicts at every such
// stride. No padding serves all strides (a spare word per 32 fixes k = 1 only); the index
// swizzled, every odd group of 32 words backwards, puts each odd row's run in the banks the even
// row leaves free at every stride. Three spellings (CUDA samples' Comparator by reference, a
// template block size with the pair's index written another way, a macro's compare-exchange),
// and the other classic formulation (partner t ^ k: a permutation within the warp, silent).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define N 512

#include "comparator.cuh"  // CUDA samples keep Comparator in a header too

// CUDA samples' bitonicSortShared: the pair by reference to a helper
__global__ void bitonic_samples(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    __shared__ unsigned s_key[N];
    const unsigned t = threadIdx.x;
    s_key[t] = in[blockIdx.x * N + t];
    s_key[t + N / 2] = in[blockIdx.x * N + t + N / 2];
    for (unsigned size = 2; size <= N; size <<= 1) {
        unsigned up = (t & (size / 2)) == 0;
        for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
            __syncthreads();
            unsigned pos = 2 * t - (t & (stride - 1));
            Comparator(s_key[pos + 0], s_key[pos + stride], up);  // expect: GA201
        }
    }
    __syncthreads();
    out[blockIdx.x * N + t] = s_key[t];
    out[blockIdx.x * N + t + N / 2] = s_key[t + N / 2];
}

// a template block size, the pair's first index as (t / k) * 2k + t % k, the exchange inline
template <int B>
__global__ void bitonic_template(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    __shared__ unsigned keys[2 * B];
    const int t = threadIdx.x;
    keys[t] = in[blockIdx.x * 2 * B + t];
    keys[t + B] = in[blockIdx.x * 2 * B + t + B];
    for (int size = 2; size <= 2 * B; size *= 2) {
        const bool up = (t & (size / 2)) == 0;
        for (int k = size / 2; k >= 1; k /= 2) {
            __syncthreads();
            int lo = (t / k) * 2 * k + t % k;
            unsigned a = keys[lo], b = keys[lo + k];  // expect: GA201
            if ((a > b) == up) { keys[lo] = b; keys[lo + k] = a; }
        }
    }
    __syncthreads();
    out[blockIdx.x * 2 * B + t] = keys[t];
    out[blockIdx.x * 2 * B + t + B] = keys[t + B];
}
template __global__ void bitonic_template<256>(const unsigned*, unsigned*);

// a macro's compare-exchange on one line
#define CMP_SWAP(x, y, up) if (((x) > (y)) == (up)) { unsigned tmp_ = (x); (x) = (y); (y) = tmp_; }
__global__ void bitonic_macro(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    __shared__ unsigned sk[N];
    unsigned t = threadIdx.x;
    sk[t] = in[blockIdx.x * N + t]; sk[t + N / 2] = in[blockIdx.x * N + t + N / 2];
    for (unsigned size = 2; size <= N; size <<= 1)
        for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
            __syncthreads();
            unsigned p = 2 * t - (t & (stride - 1));
            CMP_SWAP(sk[p], sk[p + stride], (t & (size / 2)) == 0)  // expect: GA201
        }
    __syncthreads();
    out[blockIdx.x * N + t] = sk[t]; out[blockIdx.x * N + t + N / 2] = sk[t + N / 2];
}

// correct: each thread owns two words (t and t + 256) and exchanges with partner t ^ k, a
// permutation within the warp for k < 32 and whole rows beyond: conflict free
__global__ void bitonic_xor(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    __shared__ unsigned s[N];
    const unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * N + t];
    s[t + N / 2] = in[blockIdx.x * N + t + N / 2];
    for (unsigned size = 2; size <= N; size <<= 1) {
        for (unsigned k = size / 2; k > 0; k >>= 1) {
            for (unsigned i = t; i < N; i += N / 2) {
                __syncthreads();
                unsigned j = i ^ k;
                unsigned a = s[i], b = s[j];
                __syncthreads();
                if (j > i && ((a > b) == ((i & size) == 0))) { s[i] = b; s[j] = a; }
            }
        }
    }
    __syncthreads();
    out[blockIdx.x * N + t] = s[t];
    out[blockIdx.x * N + t + N / 2] = s[t + N / 2];
}
