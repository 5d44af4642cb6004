// Transposes in other spellings (written for gpuadvise's tests in the style of public code), and
// kernels that look like them but are not transposes. GA306 must find the first and not the others.

#define TILE_DIM 32
#define BLOCK_ROWS 8
#define BLOCKSIZE 32

// cuda-samples' spelling: index variables, `width`/`height`, a loop over the tile's rows
__global__ void samples_naive(float* odata, float* idata, int width, int height) {
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + width * yIndex;
    int index_out = yIndex + height * xIndex;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) {
        odata[index_out + i] = idata[index_in + i * width];
    }
}

// siboehm's SGEMM spelling: a 1-D block of 32 * 32 threads split by / and %, M x N matrices
__global__ void sib_transpose(int M, int N, const float* A, float* B) {
    const uint cRow = blockIdx.y * BLOCKSIZE + (threadIdx.x / BLOCKSIZE);
    const uint cCol = blockIdx.x * BLOCKSIZE + (threadIdx.x % BLOCKSIZE);
    if (cRow < M && cCol < N) {
        B[cCol * M + cRow] = A[cRow * N + cCol];
    }
}

// the reverse: the load strided, the store coalesced (a gather of the columns)
__global__ void gather_columns(const float* __restrict__ src, float* __restrict__ dst, int n_rows,
                               int n_cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;  // a column of dst
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < n_rows && c < n_cols) dst[r * n_cols + c] = src[c * n_rows + r];
}

// not transposes: a strided scatter of one row, a plain copy, a scaled transpose (detected, but
// not a copy: no automatic variant)
__global__ void scatter_row(const float* __restrict__ src, float* __restrict__ dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i * 33] = src[i];
}

__global__ void copy2d(const float* __restrict__ src, float* __restrict__ dst, int n_rows,
                       int n_cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < n_rows && c < n_cols) dst[r * n_cols + c] = src[r * n_cols + c];
}

__global__ void scaled_transpose(const float* __restrict__ src, float* __restrict__ dst,
                                 int n_rows, int n_cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < n_rows && c < n_cols) dst[c * n_rows + r] = 2.0f * src[r * n_cols + c];
}
