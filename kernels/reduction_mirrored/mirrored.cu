// Tree reductions that fold towards the block's last word: thread t adds s[t - d] into s[t],
// the sum ends in s[N - 1]. Interleaved (GA202): the active threads are every (2d)-th one
// (Rodinia SRAD's statistics reduction), or packed with a strided index (Blelloch's up-sweep
// with no down-sweep after it). `// expect: GAxxx` marks the line where gpuadvise's rules must
// report a finding.

#define NUMBER_THREADS 256

// 1. Rodinia SRAD's spelling: the stride i doubles from 2, `(tx+1) % i == 0` picks the threads.
__global__ void rodinia_tree(const int* in, int* out, unsigned n) {
    __shared__ int psum[NUMBER_THREADS];
    int tx = threadIdx.x;
    int ei = blockIdx.x * NUMBER_THREADS + tx;
    psum[tx] = ei < n ? in[ei] : 0;
    __syncthreads();
    int i;
    for (i = 2; i <= NUMBER_THREADS; i = 2 * i) {
        if ((tx + 1) % i == 0) {  // expect: GA104
            psum[tx] = psum[tx] + psum[tx - i / 2];  // expect: GA202
        }
        __syncthreads();
    }
    if (tx == NUMBER_THREADS - 1) out[blockIdx.x] = psum[tx];
}

// 2. The block size a template parameter, the threads packed, the word by a strided index.
template <int B>
__global__ void upsweep_tmpl(const int* in, int* out, unsigned n) {
    __shared__ int s[B];
    unsigned t = threadIdx.x, g = blockIdx.x * B + t;
    s[t] = g < n ? in[g] : 0;
    for (int d = 1; d < B; d *= 2) {
        __syncthreads();
        int bi = (2 * t + 2) * d - 1;
        if (bi < B) s[bi] += s[bi - d];  // expect: GA202, GA201
    }
    if (t == B - 1) out[blockIdx.x] = s[B - 1];
}
template __global__ void upsweep_tmpl<256>(const int*, int*, unsigned);

// 3. A bit mask on one line, through an accessor.
__device__ __forceinline__ int& at(int* s, unsigned i) { return s[i]; }
__global__ void mask_oneliner(const int* in, int* out, unsigned n) {
    extern __shared__ int sm[];
    unsigned t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    at(sm, t) = g < n ? in[g] : 0; __syncthreads();
    for (unsigned d = 1; d < blockDim.x; d <<= 1) { if ((t & (2 * d - 1)) == 2 * d - 1) at(sm, t) += at(sm, t - d); __syncthreads(); }  // expect: GA202, GA104
    if (t == blockDim.x - 1) out[blockIdx.x] = at(sm, t);
}

// Silent for GA202: the same fold towards the last word with sequential addressing (the top d
// threads add the d words below them, packed in the last warps).
__global__ void top_sequential(const int* in, int* out, unsigned n) {
    __shared__ int s[NUMBER_THREADS];
    unsigned t = threadIdx.x, g = blockIdx.x * NUMBER_THREADS + t;
    s[t] = g < n ? in[g] : 0;
    __syncthreads();
    for (unsigned d = NUMBER_THREADS / 2; d > 0; d >>= 1) {
        if (t >= NUMBER_THREADS - d) s[t] += s[t - d];
        __syncthreads();
    }
    if (t == NUMBER_THREADS - 1) out[blockIdx.x] = s[t];
}
