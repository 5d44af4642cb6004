// Serial work (GA107): one thread, or one warp, of each CTA runs a long chain of dependent steps
// while the CTA's other threads wait at a barrier or have finished; or a whole launch of one
// thread. PyTorch's nll_loss reduce2d kernel (thread 0 sums the 256 partials), d2q9-bgk's
// per-CTA sums, OpenCV's findTopK (one warp scans 2048 bins) and nbody's accumulate_energy
// (<<<1, 1>>>) are the public kernels of this shape. Each loads one element per thread, so the
// serial part is most of the CTA's time.

// thread 0 sums the CTA's partials in a loop after the barrier (nll_loss's spelling)
__global__ void block_sum_thread0(const float* in, float* out, int n) {
    __shared__ float part[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    part[threadIdx.x] = i < n ? in[i] : 0.f;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int k = 0; k < blockDim.x; ++k) s += part[k];  // expect: GA107
        out[blockIdx.x] = s;
    }
}

// a helper: lane 0 of each warp walks a column (gramschmidt's norm) while its 31 other lanes wait
__device__ float column_norm2(const float* a, int rows, int ld) {
    float s = 0.f;
    for (int r = 0; r < rows; ++r) s += a[(size_t)r * ld] * a[(size_t)r * ld];
    return s;
}
__global__ void normalise_lane0(const float* a, float* scale, int rows, int ld) {  // expect: GA106
    __shared__ float nrm[8];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int col = blockIdx.x * 8 + warp;
    if (lane == 0) nrm[warp] = sqrtf(column_norm2(a + col, rows, ld));  // expect: GA107, GA104
    __syncwarp();
    scale[(size_t)col * 32 + lane] = 1.f / (nrm[warp] + lane);
}

// a template: the first warp scans the bins from the right, 32 at a time, while the others wait
// (findTopK's suffix sum)
template <int BINS>
__global__ void suffix_scan_warp0(const int* in, int* out) {
    __shared__ int bins[BINS];
    for (int k = threadIdx.x; k < BINS; k += blockDim.x) bins[k] = in[blockIdx.x * BINS + k];
    __syncthreads();
    if (threadIdx.x < 32) {
        int carry = 0;
        for (int it = BINS / 32 - 1; it >= 0; --it) {
            int v = bins[it * 32 + threadIdx.x];
            for (int d = 1; d < 32; d *= 2) {
                int o = __shfl_down_sync(0xffffffffu, v, d);
                if (threadIdx.x + d < 32) v += o;  // expect: GA107
            }
            v += carry;
            bins[it * 32 + threadIdx.x] = v;
            carry = __shfl_sync(0xffffffffu, v, 0);
        }
    }
    __syncthreads();
    for (int k = threadIdx.x; k < BINS; k += blockDim.x) out[blockIdx.x * BINS + k] = bins[k];
}
template __global__ void suffix_scan_warp0<2048>(const int*, int*);

// a macro in a launch of one thread: it adds the whole array (accumulate_energy's <<<1, 1>>>)
#define SERIAL_SUM(v, n, dst) { float t_ = 0.f; for (int k_ = 0; k_ < (n); ++k_) t_ += (v)[k_]; *(dst) = t_; }
__global__ void total_one_thread(const float* v, float* total, int n) {  // expect: GA102
    SERIAL_SUM(v, n, total);  // expect: GA107, GA303
}

// The fixes and look-alikes, silent.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// the partials combined by shuffles; thread 0 only stores the CTA's sum (a short epilogue)
__global__ void block_sum_shuffles(const float* in, float* out, int n) {  // expect: GA501
    __shared__ float part[8];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = warp_sum(i < n ? in[i] : 0.f);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;  // expect: GA104
    __syncthreads();
    if (threadIdx.x < 32) {
        v = warp_sum(threadIdx.x < 8 ? part[threadIdx.x] : 0.f);
        if (threadIdx.x == 0) out[blockIdx.x] = v;
    }
}

// every warp walks its own row with all its lanes (a loop, but the whole CTA's)
__global__ void row_sums_per_warp(const float* in, float* out, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    float s = 0.f;
    for (int c = threadIdx.x & 31; c < cols; c += 32) s += in[(size_t)row * cols + c];
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) out[row] = s;
}

// a long per-thread loop in every thread, thread 0 adding one atomic at the end
__global__ void grid_sum_atomic(const float* in, float* total, int n) {
    __shared__ float part[256];
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += in[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];  // expect: GA205
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(total, part[0]);
}

// the CTA's threads split between four loops by a switch on the thread index (each loop run
// by a quarter of the threads, all four at once): divergence, not serial work (as
// contraction's 18 case bodies)
__global__ void split_by_thread(const float* in, float* out, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.f;
    switch (threadIdx.x & 3) {  // expect: GA104
    case 0:
        for (int k = 0; k < n; ++k) s += in[(size_t)k * gridDim.x * blockDim.x + t];  // expect: GA301
        break;
    case 1:
        for (int k = 0; k < n; ++k) s -= in[(size_t)k * gridDim.x * blockDim.x + t];
        break;
    case 2:
        for (int k = 0; k < n; ++k) s = fmaxf(s, in[(size_t)k * gridDim.x * blockDim.x + t]);
        break;
    default:
        for (int k = 0; k < n; ++k) s = fminf(s, in[(size_t)k * gridDim.x * blockDim.x + t]);
    }
    out[t] = s;
}
