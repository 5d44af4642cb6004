// Duplicate threads (GA105): a block dimension the kernel never reads, so the threads that differ
// only there do the same work. PolyBench-ACC's atax runs a 32x8 block over a kernel written for
// threadIdx.x alone: 8 threads accumulate each tmp[i] together, racing. The corrected kernel
// splits the row over the y threads and combines their shares; it must stay silent for GA105.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#define NX 256
#define NY 256

__global__ void atax_copies(const float* A, const float* x, float* tmp) {  // expect: GA102
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < NX) {
        for (int j = 0; j < NY; j++) {
            tmp[i] += A[i * NY + j] * x[j];  // expect: GA105, GA301, GA303, GA308
        }
    }
}

// correct: the 8 y threads split the row, then one of them adds the 8 shares
__global__ void atax_split(const float* A, const float* x, float* tmp) {  // expect: GA102
    __shared__ float part[8][33];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.f;
    if (i < NX)
        for (int j = threadIdx.y; j < NY; j += blockDim.y) s += A[i * NY + j] * x[j];  // expect: GA301
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && i < NX) {
        float t = 0.f;
        for (int k = 0; k < 8; k++) t += part[k][threadIdx.x];
        tmp[i] = t;
    }
}
