// Duplicate work across the lanes (GA105): a kernel that reads threadIdx.x only to guard its work,
// so every thread of a warp loads and stores the same addresses, doing one thread's work 32 times
// and more. Infatoshi's course softmax_cuda launches a thread per column and lets each of them
// compute the whole row; its fix gives each thread a share of the row and combines the shares.

// every thread of a row computes the whole row's softmax (softmax_cuda's spelling)
__global__ void row_softmax(const float* input, float* output, int B, int N) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y;
    if (tid < N && row < B) {
        int offset = row * N;
        float m = input[offset];
        for (int i = 1; i < N; i++) m = fmaxf(m, input[offset + i]);  // expect: GA303
        float sum = 0.0f;
        for (int i = 0; i < N; i++) sum += expf(input[offset + i] - m);  // expect: GA303
        for (int i = 0; i < N; i++) output[offset + i] = expf(input[offset + i] - m) / sum;  // expect: GA303, GA105
    }
}

// a macro: every thread of the CTA sums the whole array and stores the CTA's total
#define TOTAL_OF(v, n, out) { float t = 0.f; for (int k = 0; k < (n); ++k) t += (v)[k]; out = t; }
__global__ void block_total(const float* v, float* totals, int n) {
    if (threadIdx.x < blockDim.x) TOTAL_OF(v, n, totals[blockIdx.x]);  // expect: GA303, GA105
}

// a template: each thread scales the whole vector into its CTA's slice
template <int STEP>
__global__ void scaled_slices(const float* in, float* out, float a, int len) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= 0) {
        float* dst = out + (size_t)blockIdx.x * len;
        for (int i = 0; i < len; i += STEP) dst[i] = a * in[i];  // expect: GA303, GA105
    }
}
template __global__ void scaled_slices<1>(const float*, float*, float, int);

// The fixes and look-alikes, silent.

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// each lane a share of the row, the shares combined, one lane stores
__global__ void row_sum_split(const float* input, float* sums, int N) {
    const float* row = input + (size_t)blockIdx.x * N;
    float s = 0.f;
    for (int i = threadIdx.x; i < N; i += 32) s += row[i];
    s = warp_sum(s);
    if (threadIdx.x == 0) sums[blockIdx.x] = s;
}

// a value every lane reads (a broadcast) but each lane its own element
__global__ void broadcast_scale(const float* a, const float* x, float* y, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) y[t] = a[0] * x[t];
}
