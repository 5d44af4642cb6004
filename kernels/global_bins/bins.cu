// Histograms in global memory whose bins are packed in a few hundred bytes (GA208,
// contended-global-atomics): the L2 takes the atomic requests that reach the lines of one
// 512-byte region one after another (about 1 ns each on an H200), however the lanes spread
// over the bins' words; and look-alikes that stay silent.

// 512 bins (2 KB) of uniform values, one element per thread (HeCBench's bincount, GLOBAL).
__global__ void hist_direct(const float* x, int* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) atomicAdd(&hist[min((int)(x[i] * 512.f), 511)], 1);  // expect: GA208
}

// A grid-stride macro, the bin from a helper, the atomic in a helper function, the bin count a
// template parameter (768 bins, 3 KB).
#define EACH(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)
__device__ __forceinline__ int bin_of(float v, int bins) { return min((int)(v * bins), bins - 1); }
__device__ void bump(int* h, int b) { atomicAdd(h + b, 1); }

template <int BINS>
__global__ void hist_helpers(const float* x, int* hist, int n) {
    EACH(i, n) bump(hist, bin_of(x[i], BINS));  // expect: GA208
}
template __global__ void hist_helpers<768>(const float*, int*, int);

// A functor counting the four bytes of each word into 256 unsigned bins (1 KB), a one-liner.
struct Tally {
    unsigned* h;
    __device__ void operator()(unsigned b) const { atomicAdd(h + b, 1u); }
};
__global__ void hist_bytes(const unsigned* w, unsigned* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) { const Tally t{hist}; const unsigned v = w[i]; for (int k = 0; k < 32; k += 8) t((v >> k) & 255u); }  // expect: GA208
}

// Silent: 65,536 bins (256 KB): a warp's lanes reach 32 regions of 512, each region's requests
// few.
__global__ void hist_spread(const float* x, int* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) atomicAdd(&hist[(int)(x[i] * 65536.f)], 1);
}

// Silent, the fix: a copy of the 512 bins per CTA in shared memory over a grid-stride loop in
// one wave of CTAs, each CTA adding its bins to the global ones once (4 requests a region).
// GA303 only: the loop has one 4-byte load of x in flight per thread (float4 loads: four).
__global__ void hist_private_wave(const float* x, int* hist, int n) {
    __shared__ int sh[512];
    for (int b = threadIdx.x; b < 512; b += blockDim.x) sh[b] = 0;
    __syncthreads();
    EACH(i, n) atomicAdd(&sh[(int)(x[i] * 512.f)], 1);  // expect: GA303
    __syncthreads();
    for (int b = threadIdx.x; b < 512; b += blockDim.x) atomicAdd(&hist[b], sh[b]);
}

// The fix kit's copy of the bins per CTA (GA208's automatic variant) in three more spellings:
// unsigned bins whose count is a kernel argument in a grid-stride macro (HeCBench's bincount,
// GLOBAL), a macro bin count after an early return, and a template's bins through a helper
// (hist_helpers above).
__global__ void hist_counted(const float* x, unsigned* hist, int nbins, int n) {
    EACH(i, n) { const int b = (int)(x[i] * nbins); atomicAdd(&hist[b < nbins ? b : nbins - 1], 1u); }  // expect: GA208
}

#define NBINS 384
__global__ void hist_macro(const int* v, int* hist, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i >= n) return;
    atomicAdd(hist + (v[i] & 0x7fffffff) % NBINS, 1);  // expect: GA208
}

// No copy per CTA: each element takes a slot of its bucket (the atomic's result is used).
__global__ void bucket_slots(const float* x, int* count, int* slot, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) slot[i] = atomicAdd(&count[(int)(x[i] * 512.f)], 1);  // expect: GA208
}

// No copy per CTA: 16,384 bins (64 KB, more than 48 KB of shared memory) over [0, 1) of values
// in [0, 1/16) (hist_wide.toml): the first 1,024 bins reached.
__global__ void hist_wide(const float* x, int* hist, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) atomicAdd(&hist[min((int)(x[i] * 16384.f), 16383)], 1);  // expect: GA208
}
