// Accumulating into global memory inside a loop (GA308, global-accumulation), and the fix.

// PolyBench-ACC's atax kernel 1: a thread per row, tmp[i] read and written every iteration.
__global__ void atax_rows(const float* A, const float* x, float* tmp, int nx, int ny) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nx) {
        for (int j = 0; j < ny; j++) {
            tmp[i] += A[i * ny + j] * x[j];  // expect: GA308, GA301, GA303
        }
    }
}

// A while loop, the sum spelled out.
__global__ void row_sums(const double* v, double* out, unsigned n, unsigned len) {
    unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    out[r] = 0.0;
    unsigned k = 0;
    while (k < len) {
        out[r] = out[r] + v[(size_t)k * n + r];  // expect: GA308
        ++k;
    }
}

// A template: four outputs per thread, each accumulated in global memory.
template <int K>
__global__ void tile_acc(const float* in, float* acc, int steps) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int s = 0; s < steps; ++s)
#pragma unroll
        for (int q = 0; q < K; ++q) acc[t * K + q] += in[(s * gridDim.x * blockDim.x + t) * K + q];  // expect: GA308, GA303
}
template __global__ void tile_acc<4>(const float*, float*, int);

// The fix: the sum in a register, stored once.
__global__ void row_sums_register(const double* __restrict__ v, double* out, unsigned n,
                                  unsigned len) {
    unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    double s = 0.0;
    for (unsigned k = 0; k < len; ++k) s += v[(size_t)k * n + r];
    out[r] = s;
}

// A do-while under an unbraced if: the positive values of a column counted in global memory.
__global__ void count_positive(const float* v, int* count, int n, int len) {
    int r = blockIdx.x * blockDim.x + threadIdx.x, k = 0;
    if (r < n)
        do count[r] += v[k * n + r] > 0.0f; while (++k < len);  // expect: GA308
}
