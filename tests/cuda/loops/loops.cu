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

// The guard on sampling past the sample's cost (gpuadvise.ptx.steering, tests/ptx/test_steering.py):
// HeCBench perplexity's sigmas_kernel in small: the sums of its inner loop decide the bisection
// and the epoch loop's break, so skipped iterations would move the lanes' paths
__global__ void bisect(const float* d, float* out, int n)
{
    int t = threadIdx.x;
    float lo = 0.0f, hi = 1.0f, mid = 0.5f;
    for (int e = 0; e < 24; e++) {
        float s = 0.0f;
#pragma unroll 4
        for (int j = 0; j < 256; j++) {
            s += d[t * 256 + j] * mid;
        }
        if (fabsf(s - 40.0f) <= 0.5f) {
            break;
        }
        if (s > 40.0f) hi = mid; else lo = mid;
        mid = 0.5f * (lo + hi);
    }
    out[t] = mid;
}

// a loop's shared-memory counts read after it by a branch
__global__ void tallied(float* out, int n)
{
    __shared__ int tally[64];
    tally[threadIdx.x] = 0;
    __syncthreads();
    for (int i = 0; i < 4096; i++) {
        atomicAdd(&tally[(i * 7 + threadIdx.x) & 63], 1);
    }
    __syncthreads();
    if (tally[threadIdx.x] > 64) {
        out[threadIdx.x] = 1.0f;
    }
}

// a count kept only where the data says, read by a branch after the loop
__global__ void counted(const float* a, float* out, int n)
{
    int c = 0;
    for (int i = 0; i < 4096; i++) {
        if (a[i * 64 + threadIdx.x] > 0.5f) c++;
    }
    if (c > 2048) {
        out[threadIdx.x] = 1.0f;
    }
}

// a pointer walked by the loop (nvcc unrolls it into a chain of adds) addresses a load after it
__global__ void walked(const float* a, float* out, int n)
{
    const float* p = a + threadIdx.x;
    float s = 0.0f;
    for (int i = 0; i < n; i++) {
        s += *p;
        p += 64;
    }
    out[threadIdx.x] = s + *p;
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

__global__ void pairs(const float* a, float* out, int n)
{
    // two scalar loads of one thread at consecutive addresses (GA303's float2) in a long loop:
    // sampled, the weighted iterations' requests stand for the skipped ones
    float s = 0.0f;
    for (int i = 0; i < 4096; i++) {
        const float* p = a + 2 * (i * 64 + threadIdx.x);
        s += p[0] + p[1];
    }
    out[threadIdx.x] = s;
}

__global__ void rereads(const float* a, float* out, int n)
{
    // a thread loads its n values again in each of 512 passes (GA309's reloads, as HeCBench
    // contraction's line 44): sampled, a view cut to a warp's first passes ends inside a
    // weighted pass, some of its values loaded once fewer than the others
    float s = 0.0f;
    for (int j = 0; j < 512; j++) {
        for (int c = 0; c < n; c++) {
            s += a[c * 64 + threadIdx.x];
        }
    }
    out[threadIdx.x] = s;
}

__global__ void broadcast(const float* x, float* out, int n)
{
    // every thread of the CTA reads the same x[j] (one address a warp, HeCBench AIDW's dx[j])
    // in a long loop: the first warp's misses are the CTA's, the other warps hit in the L1
    // (one load an iteration, as AIDW's loop: the sampler's weighted iterations are the 8
    // alignments of its 4-byte step through a sector)
    float s = 0.0f;
#pragma unroll 1
    for (int j = 0; j < 4096; j++) {
        s += x[j];
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__global__ void nest(const float* t, float* out, int n)
{
    // HeCBench contraction's case 5 in small: a nest whose outer loops' accesses move by whole
    // 128-byte lines (a row of 64 floats, a plane of 64 rows): one iteration after a skip takes
    // every alignment they take (not the 8 a 4-byte stride needs)
    float s = 0.0f;
    for (int a = 0; a < 64; a++) {
        for (int b = 0; b < 64; b++) {
            for (int c = 0; c < 16; c++) {
                s += t[((a * 64 + b) * 16 + c) * 64 + threadIdx.x];
            }
        }
    }
    out[threadIdx.x] = s;
}

__global__ void classify(const unsigned char* d, int* out, int n)
{
    // HeCBench chi2 in a nest: each byte read sends a lane one way or another (a row of 64
    // bytes an iteration, whole lines: the period follows the branches, not only the addresses)
    int c0 = 0, c1 = 0;
    for (int r = 0; r < 64; r++) {
        for (int m = 0; m < 64; m++) {
            unsigned char y = d[(r * 64 + m) * 64 + threadIdx.x];
            if (y == '0') {
                c0++;
            } else if (y == '1') {
                atomicAdd(&out[64], 1);
            } else {
                c1 += y;
            }
        }
    }
    out[threadIdx.x] = c0 + c1;
}
