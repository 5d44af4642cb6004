// Bank conflicts on one-dimensional shared arrays (GA201's index padding): the work-efficient
// (Blelloch) scan of GPU Gems 3, chapter 39, whose tree steps make the lanes of a warp touch
// words 2, 4, 8 ... 512 apart, in three spellings (an index macro, an index helper function, a
// template block size), and two correct kernels that stay silent: the same scan with the
// chapter's CONFLICT_FREE_OFFSET padding, and a reversal through shared memory.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define N 512  // elements per CTA, two per thread (256 threads)
#define LEFT(o, t) ((o) * (2 * (t) + 1) - 1)
#define RIGHT(o, t) ((o) * (2 * (t) + 2) - 1)

// the tree's indices from a macro
__global__ void scan_macro(const int* __restrict__ in, int* __restrict__ out) {
    __shared__ int temp[N];
    const int t = threadIdx.x;
    const int* g = in + blockIdx.x * N;
    int* o = out + blockIdx.x * N;
    temp[t] = g[t];
    temp[t + N / 2] = g[t + N / 2];
    int offset = 1;
    for (int d = N >> 1; d > 0; d >>= 1) {  // up-sweep
        __syncthreads();
        if (t < d) temp[RIGHT(offset, t)] += temp[LEFT(offset, t)];  // expect: GA201, GA209
        offset *= 2;
    }
    if (t == 0) temp[N - 1] = 0;
    for (int d = 1; d < N; d *= 2) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            const int v = temp[LEFT(offset, t)];
            temp[LEFT(offset, t)] = temp[RIGHT(offset, t)];
            temp[RIGHT(offset, t)] += v;
        }
    }
    __syncthreads();
    o[t] = temp[t];
    o[t + N / 2] = temp[t + N / 2];
}

// the tree's indices from a helper function
__device__ __forceinline__ unsigned leaf(unsigned offset, unsigned t, unsigned k) {
    return offset * (2 * t + k) - 1;
}

__global__ void scan_helper(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float buf[N];
    const unsigned t = threadIdx.x, base = blockIdx.x * N;
    buf[t] = in[base + t];
    buf[t + N / 2] = in[base + t + N / 2];
    unsigned offset = 1;
    for (unsigned d = N / 2; d > 0; d /= 2) {
        __syncthreads();
        if (t < d) {
            buf[leaf(offset, t, 2)] += buf[leaf(offset, t, 1)];  // expect: GA201, GA209
        }
        offset <<= 1;
    }
    if (t == 0) buf[N - 1] = 0.0f;
    for (unsigned d = 1; d < N; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            const unsigned a = leaf(offset, t, 1), b = leaf(offset, t, 2);
            const float v = buf[a];
            buf[a] = buf[b];
            buf[b] += v;
        }
    }
    __syncthreads();
    out[base + t] = buf[t];
    out[base + t + N / 2] = buf[t + N / 2];
}

// a template: the block size is a parameter (the array's length 2 * B)
template <int B>
__global__ void scan_template(const int* __restrict__ in, int* __restrict__ out) {
    __shared__ int s[2 * B];
    const int t = threadIdx.x;
    in += blockIdx.x * 2 * B;
    out += blockIdx.x * 2 * B;
    s[t] = in[t];
    s[t + B] = in[t + B];
    int offset = 1;
    for (int d = B; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            const int ai = offset * (2 * t + 1) - 1, bi = ai + offset;
            s[bi] += s[ai];  // expect: GA201, GA209
        }
        offset *= 2;
    }
    if (t == 0) s[2 * B - 1] = 0;
    for (int d = 1; d < 2 * B; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            const int ai = offset * (2 * t + 1) - 1, bi = ai + offset;
            const int v = s[ai];
            s[ai] = s[bi];
            s[bi] += v;
        }
    }
    __syncthreads();
    out[t] = s[t];
    out[t + B] = s[t + B];
}
template __global__ void scan_template<256>(const int*, int*);

// correct: the chapter's own fix, the index padded by hand (a spare word after every 32)
#define CONFLICT_FREE_OFFSET(n) ((n) >> 5)
__global__ void scan_offset(const int* __restrict__ in, int* __restrict__ out) {
    __shared__ int temp[N + N / 32];
    const int t = threadIdx.x;
    const int* g = in + blockIdx.x * N;
    int* o = out + blockIdx.x * N;
    const int ai = t, bi = t + N / 2;
    temp[ai + CONFLICT_FREE_OFFSET(ai)] = g[ai];
    temp[bi + CONFLICT_FREE_OFFSET(bi)] = g[bi];
    int offset = 1;
    for (int d = N >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
            a += CONFLICT_FREE_OFFSET(a);
            b += CONFLICT_FREE_OFFSET(b);
            temp[b] += temp[a];  // expect: GA209
        }
        offset *= 2;
    }
    if (t == 0) temp[N - 1 + CONFLICT_FREE_OFFSET(N - 1)] = 0;
    for (int d = 1; d < N; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
            a += CONFLICT_FREE_OFFSET(a);
            b += CONFLICT_FREE_OFFSET(b);
            const int v = temp[a];
            temp[a] = temp[b];
            temp[b] += v;
        }
    }
    __syncthreads();
    o[ai] = temp[ai + CONFLICT_FREE_OFFSET(ai)];
    o[bi] = temp[bi + CONFLICT_FREE_OFFSET(bi)];
}

// correct: each CTA reverses its 512 elements through shared memory (consecutive lanes,
// consecutive words both ways)
__global__ void reverse(const int* __restrict__ in, int* __restrict__ out) {
    __shared__ int r[N];
    const int t = threadIdx.x;
    in += blockIdx.x * N;
    out += blockIdx.x * N;
    r[t] = in[t];
    r[t + N / 2] = in[t + N / 2];
    __syncthreads();
    out[t] = r[N - 1 - t];
    out[t + N / 2] = r[N / 2 - 1 - t];
}
