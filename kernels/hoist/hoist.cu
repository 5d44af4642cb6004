// A thread loading the same global values again in each run of a loop, no store of its own
// forcing the reload (GA309): the fix kit loads them once into a register array before the
// first run (gpuadvise/source/fixkit_hoist.py). Three spellings, a refusal, and the fix.

// HeCBench's ga: a thread's window of the target compared with every offset of the query; the
// window's width is a run-time value, so its bytes are loaded again for each offset.
__global__ void window_match(const char* __restrict__ target, const char* __restrict__ query,
                             int* __restrict__ hits, int n, int queries, int width) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int count = 0;
    for (int q = 0; q + width <= queries; ++q) {
        int same = 0;
        for (int j = 0; j < width; ++j)
            same += target[t + j] == query[q + j];  // expect: GA309, GA305
        count += same == width;
    }
    hits[t] = count;
}

// A warp per row, in a template, through a row pointer spelled `auto`: the max, sum and
// normalise passes each read the lane's 20 values of the row (softMax2's three passes).
template <int WARPS>
__global__ void row_softmax(const float* in, float* out, int rows, int len) {
    int r = blockIdx.x * WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    auto row = in + (size_t)r * len;
    float m = -3.4e38f;
    for (int j = lane; j < len; j += 32) m = fmaxf(m, row[j]);
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int j = lane; j < len; j += 32) s += __expf(row[j] - m);  // expect: GA309
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int j = lane; j < len; j += 32) out[(size_t)r * len + j] = __expf(row[j] - m) / s;
}
template __global__ void row_softmax<4>(const float*, float*, int, int);

// HeCBench's contraction (case 1), C-style: loop variables declared up front, `c = c + 1`, the
// column loaded again for each positive weight of the table, under a guard on the weight.
__global__ void contract_column(const float* __restrict__ tensor, const float* __restrict__ w,
                                float* __restrict__ out, int n, int m, int cols) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int c, d, e;
    float sum = 0.0f;
    if (t < cols) {
        for (d = 0; d < m; d = d + 1) {
            for (e = 0; e < m; e = e + 1) {
                float wv = w[d * m + e];
                if (wv > 0.0f) {
                    for (c = 0; c < n; c = c + 1) {
                        sum += tensor[c * cols + t] * wv;  // expect: GA309
                    }
                }
            }
        }
        out[t] = sum;
    }
}

// Refused: the compare stops at the first mismatch (a `break` out of the loop), so the loads
// past it depend on the data; the finding keeps the advice.
__global__ void first_match(const char* __restrict__ target, const char* __restrict__ query,
                            int* __restrict__ hits, int n, int queries, int width) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int count = 0;
    for (int q = 0; q + width <= queries; ++q) {
        int j;
        for (j = 0; j < width; ++j)
            if (target[t + j] != query[q + j]) break;  // expect: GA309, GA305, GA405
        count += j == width;
    }
    hits[t] = count;
}

// The fix by hand, silent: a warp per row with the lane's 10 values in registers (a compile-time
// count), loaded once for the three passes.
template <int WARPS, int PER>
__global__ void row_softmax_registers(const float* in, float* out, int rows, int len) {
    int r = blockIdx.x * WARPS + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const float* row = in + (size_t)r * len;
    float v[PER];
    float m = -3.4e38f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        v[k] = lane + 32 * k < len ? row[lane + 32 * k] : -3.4e38f;
        m = fmaxf(m, v[k]);
    }
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) s += lane + 32 * k < len ? __expf(v[k] - m) : 0.0f;
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
#pragma unroll
    for (int k = 0; k < PER; ++k)
        if (lane + 32 * k < len) out[(size_t)r * len + lane + 32 * k] = __expf(v[k] - m) / s;
}
template __global__ void row_softmax_registers<4, 10>(const float*, float*, int, int);
