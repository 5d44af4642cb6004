// A thread reading back, in a second loop, what it stored in the loop before (GA309): the fix kit
// fuses the two loops, the read written as the store's own target, which the compiler forwards
// (gpuadvise/source/fixkit_fuse.py). Three spellings, a refusal, and the fixed kernel.

// llm.c's softmax_forward_kernel4, its exp and sum passes: a CTA per row, the row pointer
// reassigned between the loops, the sum declared between them.
__global__ void exp_sum(float* out, const float* inp, float* sums, int n) {
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* x = inp + row * n;
    for (int i = tid; i < n; i += blockDim.x) {
        out[row * n + i] = expf(x[i]);
    }
    // the sum of the row's exponentials
    x = out + row * n;
    float s = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        s += x[i];  // expect: GA309
    }
    sums[row * blockDim.x + tid] = s;
}

// A template and a macro, one-line loops, the second also reading a read-only weight vector.
#define ROW(r, i) ((r) * n + (i))
template <int THREADS>
__global__ void scaled_dot(const float* __restrict__ a, const float* __restrict__ w,
                           float* __restrict__ y, float* __restrict__ dots, int n) {
    int r = blockIdx.x;
    for (int i = threadIdx.x; i < n; i += THREADS) y[ROW(r, i)] = a[ROW(r, i)] * 0.5f;
    float acc = 0.0f;
    for (int i = threadIdx.x; i < n; i += THREADS) acc += y[ROW(r, i)] * w[i];  // expect: GA309
    dots[r * THREADS + threadIdx.x] = acc;
}
template __global__ void scaled_dot<128>(const float* __restrict__, const float* __restrict__,
                                         float* __restrict__, float* __restrict__, int);

// C style: the index declared up front, `i = i + step`, a local of the first body, integers.
__global__ void square_sum(unsigned* buf, const unsigned* src, unsigned* sums, int len) {
    int base = blockIdx.x * len;
    int i;
    unsigned ss = 0;
    for (i = threadIdx.x; i < len; i = i + blockDim.x) {
        unsigned v = src[base + i];
        buf[base + i] = v * v;
    }
    for (i = threadIdx.x; i < len; i = i + blockDim.x) {
        ss = ss + buf[base + i];  // expect: GA309
    }
    sums[blockIdx.x * blockDim.x + threadIdx.x] = ss;
}

// Refused: the second loop reads the thread's own next element (its next iteration's store),
// which the trace shows out of step with the stores: fusing would read it before it is written.
__global__ void exp_sum_next(float* out, const float* inp, float* sums, int n) {
    int row = blockIdx.x;
    int tid = threadIdx.x;
    for (int i = tid; i < n; i += blockDim.x) {
        out[row * n + i] = expf(inp[row * n + i]);
    }
    float s = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        s += out[row * n + (i + blockDim.x) % n];  // expect: GA309
    }
    sums[row * blockDim.x + tid] = s;
}

// Silent: the sum reads another thread's exponentials after a barrier (not a reload of the
// thread's own), and the fixed kernel, which keeps the value in a register.
__global__ void exp_sum_mirror(float* out, const float* inp, float* sums, int n) {
    int row = blockIdx.x;
    int tid = threadIdx.x;
    for (int i = tid; i < n; i += blockDim.x) {
        out[row * n + i] = expf(inp[row * n + i]);
    }
    __syncthreads();
    float s = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        s += out[row * n + (n - 1 - i)];
    }
    sums[row * blockDim.x + tid] = s;
}

__global__ void exp_sum_register(float* out, const float* inp, float* sums, int n) {
    int row = blockIdx.x;
    int tid = threadIdx.x;
    float s = 0.0f;
    for (int i = tid; i < n; i += blockDim.x) {
        float v = expf(inp[row * n + i]);
        out[row * n + i] = v;
        s += v;
    }
    sums[row * blockDim.x + tid] = s;
}
