// Global-memory atomics that pile on one address (GA208, contended-global-atomics), and ones that
// do not. The L2 applies the updates of one address one at a time.

// A grid-wide sum: every thread adds its element to one float (the OLCF training's atomic_red).
__global__ void grid_sum(const float* x, float* sum, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) atomicAdd(sum, x[i]);  // expect: GA208
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// A partial per CTA, then one atomic per CTA through a macro, over 262,144 CTAs (HeCBench's
// f16sp adds a partial per CTA this way).
#define ACCUMULATE(dst, v) atomicAdd((dst), (v))
template <int WARPS>
__global__ void cta_partials(const float* a, const float* b, float* result) {
    __shared__ float warp_part[WARPS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    float v = warp_sum(a[i] * b[i]);
    if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = v;  // expect: GA104
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < WARPS; ++w) s += warp_part[w];
        ACCUMULATE(result, s);  // expect: GA208
    }
}
template __global__ void cta_partials<4>(const float*, const float*, float*);

// Seven bins of letters counted in global memory, a grid-stride loop, the bin width a template
// parameter (CoffeeBeforeArch's histogram): about 4.6 lanes of a warp per bin. The byte loads
// are not worth widening (GA303 silent): the updates of a bin in turn take the time, and 16
// bytes a thread measured 1.00x on the H200 (the corpus' histogram).
template <int WIDTH>
__global__ void letter_bins(const char* text, int* bins, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        int c = text[i] - 'a';
        if (c >= 0 && c < 26) atomicAdd(bins + c / WIDTH, 1);  // expect: GA208
    }
}
template __global__ void letter_bins<4>(const char*, int*, int);

// The largest key over the grid through a helper function, keys of 4 lanes at a time to one of
// 8 slots (an unsigned atomicMax, data-dependent addresses): reported at the helper's call.
__device__ void keep_max(unsigned* slots, unsigned key) { atomicMax(&slots[key & 7], key); }

__global__ void slot_max(const unsigned* keys, unsigned* slots, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) keep_max(slots, keys[i / 4]);  // expect: GA208
}

// The fixes and look-alikes, silent.

// Every thread its own address: no contention.
__global__ void scatter_add(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) atomicAdd(&out[i], x[i]);
}

// The fix: a grid-stride loop in one wave of CTAs, the CTA's sum reduced first, one atomic per
// CTA (1,056 updates of one address). GA303: one 4-byte load per iteration in flight.
__global__ void grid_sum_one_wave(const float* x, float* sum, int n) {
    __shared__ float warp_part[8];
    float v = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += x[i];  // expect: GA303
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) warp_part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < 8 ? warp_part[threadIdx.x] : 0.f;
        w = warp_sum(w);
        if (threadIdx.x == 0) atomicAdd(sum, w);
    }
}

// Column sums by a thread per row (llm.c's layernorm_backward_kernel1: dbias[i] and dweight[i]
// added to by every row's thread, column after column): the 32 lanes of a warp add to one
// word at each step, and the words change along the loop, so no one address takes the
// launch's updates but each request's 32 lanes on one word are applied in turn, request after
// request on the lines of one 512-byte region. The input is read column-major (coalesced).
__global__ void col_sums(const float* m, float* colsum, int rows, int cols) {  // expect: GA102
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int j = 0; j < cols; j++) {
        atomicAdd(&colsum[j], m[j * rows + r]);  // expect: GA208
    }
}

// The same through a macro, the column count a template parameter, two sums (a bias and a
// weight gradient) on one line.
#define ADD_COL(dst, j, v) atomicAdd((dst) + (j), (v))
template <int COLS>
__global__ void col_sums_pair(const float* g, const float* x, float* db, float* dw, int rows) {  // expect: GA102
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows)
        for (int j = 0; j < COLS; ++j) { float v = g[j * rows + r]; ADD_COL(db, j, v); ADD_COL(dw, j, v * x[j * rows + r]); }  // expect: GA208
}
template __global__ void col_sums_pair<128>(const float*, const float*, float*, float*, int);

// Sums of squares per column through a helper function (a float add, which ptxas does not
// combine across the warp): reported at the helper's call.
__device__ void add_square(float* sums, int j, float v) { atomicAdd(&sums[j], v * v); }

__global__ void col_squares(const float* m, float* sums, int rows, int cols) {  // expect: GA102
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    for (int j = 0; j < cols; j++) add_square(sums, j, m[j * rows + r]);  // expect: GA208
}

// The fix: each warp's sum per column by shuffles into the CTA's partials in shared memory,
// then one atomic per column and CTA (silent but for the small grid).
__global__ void col_sums_cta(const float* m, float* colsum, int rows, int cols) {  // expect: GA102
    __shared__ float part[128];
    for (int j = threadIdx.x; j < cols; j += blockDim.x) part[j] = 0.f;
    __syncthreads();
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = 0; j < cols; j++) {
        float v = warp_sum(r < rows ? m[j * rows + r] : 0.f);
        if ((threadIdx.x & 31) == 0) atomicAdd(&part[j], v);
    }
    __syncthreads();
    for (int j = threadIdx.x; j < cols; j += blockDim.x) atomicAdd(&colsum[j], part[j]);
}
