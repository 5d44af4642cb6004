// PolyBench atax's first kernel reduced to its rows (tmp[i] += A[i][j] * x[j] over j, no __restrict__),
// and the same sum kept in a register (GA308's fix): timed against each other by gpuadvise bench.
__global__ void atax_rows(const float* A, const float* x, float* tmp, int nx, int ny) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nx) { for (int j = 0; j < ny; j++) { tmp[i] += A[i * ny + j] * x[j]; } }
}
__global__ void atax_rows_register(const float* A, const float* x, float* tmp, int nx, int ny) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nx) { float s = tmp[i]; for (int j = 0; j < ny; j++) { s += A[i * ny + j] * x[j]; } tmp[i] = s; }
}
