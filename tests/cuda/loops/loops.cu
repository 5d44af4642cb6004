// Long loops in the CPU emulator (tests/trace/test_long_loops.py): PolyBench's corr_kernel at a
// small size (nested loops with compile-time bounds, one thread per column), and loops that
// cannot be sampled: a barrier inside, a bound read from a buffer, a wait that never ends.
#define M 128
#define N 256

__global__ void corr_kernel(int m, int n, float* symmat, float* data)
{
    int j1 = blockIdx.x * blockDim.x + threadIdx.x;
    int i, j2;
    if (j1 < (M - 1)) {
        symmat[j1 * M + j1] = 1.0;
        for (j2 = (j1 + 1); j2 < M; j2++) {
            symmat[j1 * M + j2] = 0.0;
            for (i = 0; i < N; i++) {
                symmat[j1 * M + j2] += data[i * M + j2] * data[i * M + j1];
            }
            symmat[j2 * M + j1] = symmat[j1 * M + j2];
        }
    }
}

__global__ void synced(float* out, int n)
{
    __shared__ float s[256];
    float acc = 0.0f;
    for (int r = 0; r < 100000; ++r) {
        s[threadIdx.x] = acc + r;
        __syncthreads();
        acc += s[(threadIdx.x + 1) % blockDim.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void bounded(const int* bound, float* out, int n)
{
    unsigned x = threadIdx.x + 1;
    int steps = 0;
    while (x != (unsigned)bound[0]) {  // a walk by a hash: not a fixed step
        x = x * 1103515245u + 12345u;
        ++steps;
    }
    out[threadIdx.x] = steps;
}

__global__ void waits(volatile int* flag, int n)
{
    while (flag[0] == 0) {
    }
}

__global__ void rowsum(const float* a, float* out, int n)
{
    float s = 0.0f;
    for (int i = 0; i < 4096; i++) {  // every warp in step: the emulator's lockstep
        s += a[i * 64 + threadIdx.x];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void oddsum(const float* a, float* out, int n)
{
    // a branch that splits every warp in every iteration of a long loop (the odd lanes add
    // atomically): sampled, its splits weigh as its executions do
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        if (threadIdx.x & 1) {
            atomicAdd(&out[0], a[i]);
        } else {
            s += a[i];
        }
    }
    out[1 + threadIdx.x] = s;
}
