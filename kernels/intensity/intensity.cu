// Low arithmetic intensity in a shared-memory tiled loop (GA310): one output per thread, so each
// FMA of the k loop needs its own shared loads and the shared data path, not the FP32 pipe, sets
// the loop's time. `// expect: GAxxx` marks the line where gpuadvise's rules must report a
// finding. Three spellings of the classic tiled matrix multiply (a macro tile, a template tile,
// a helper function's dot step), then kernels that stay silent: the same product with a 4 x 4
// register tile per thread, a streaming a*x + y (memory-bound) and a tile transpose through
// shared memory (no arithmetic on what it loads).

#define TILE 16

// The classic: TILE x TILE threads, one output each, a macro tile size.
__global__ void tiled_macro(const float* A, const float* B, float* C, int n) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < n / TILE; ++t) {
        As[ty][tx] = A[row * n + t * TILE + tx];
        Bs[ty][tx] = B[(t * TILE + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k) sum += As[ty][k] * Bs[k][tx];  // expect: GA310
        __syncthreads();
    }
    C[row * n + col] = sum;
}

// A template tile size, the product written as an explicit fmaf, a flattened shared array.
template <int T>
__global__ void tiled_template(const float* __restrict__ A, const float* __restrict__ B,
                               float* __restrict__ C, int n) {
    __shared__ float sa[T * T], sb[T * T];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.f;
    for (int t = 0; t < n; t += T) {
        sa[ty * T + tx] = A[row * n + t + tx];
        sb[ty * T + tx] = B[(t + ty) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) {
            acc = fmaf(sa[ty * T + k], sb[k * T + tx], acc);  // expect: GA310
        }
        __syncthreads();
    }
    C[row * n + col] = acc;
}
template __global__ void tiled_template<16>(const float*, const float*, float*, int);

// A helper: the dot step over a staged tile is a device function; a 1-D block of 256 threads.
__device__ __forceinline__ float dot_tile(const float (*a)[16], const float (*b)[16], int r,
                                          int c) {
    float s = 0.f;
    for (int k = 0; k < 16; ++k) s += a[r][k] * b[k][c];
    return s;
}

__global__ void tiled_helper(const float* A, const float* B, float* C, int n) {
    __shared__ float a[16][16], b[16][16];
    int r = threadIdx.x / 16, c = threadIdx.x % 16;
    int row = blockIdx.y * 16 + r, col = blockIdx.x * 16 + c;
    float out = 0.f;
    for (int t = 0; t < n; t += 16) {
        a[r][c] = A[row * n + t + c]; b[r][c] = B[(t + r) * n + col]; __syncthreads();
        out += dot_tile(a, b, r, c);  // expect: GA310
        __syncthreads();
    }
    C[row * n + col] = out;
}

// The fix: a 4 x 4 register tile per thread (a 64 x 64 tile for 16 x 16 threads): each k step
// loads four values of A and four of B into registers and makes sixteen FMAs of them. Silent.
__global__ void regtile4(const float* __restrict__ A, const float* __restrict__ B,
                         float* __restrict__ C, int n) {
    __shared__ float As[16][68];  // As[k][m]: A's tile transposed, rows padded (16-byte aligned)
    __shared__ float Bs[16][64];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < n; k0 += 16) {
        for (int i = tid; i < 64 * 16; i += 256) {
            As[i % 16][i / 16] = A[(row0 + i / 16) * n + k0 + i % 16];
            Bs[i / 64][i % 64] = B[(k0 + i / 64) * n + col0 + i % 64];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            float4 a = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            float4 b = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(&C[(row0 + ty * 4 + i) * n + col0 + tx * 4]) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// Memory-bound: one FMA per two loads from DRAM. Silent (GA206: one element per thread).
__global__ void axpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) y[i] = a * x[i] + y[i];
}

// A tile transpose through shared memory: loads that feed no arithmetic. Silent.
__global__ void transpose_tile(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float t[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) t[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * n + x] = t[threadIdx.x][threadIdx.y + j];
}
