// Runner test kernels: a struct buffer, more than 48 KB of dynamic shared memory, a template.
struct Cell {
    int type;
    short age;
    unsigned char moved;
    float energy;
};

extern "C" __global__ void age_cells(const Cell* __restrict__ in, Cell* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Cell c = in[i];
        c.age += 1;
        c.energy *= 0.5f;
        out[i] = c;
    }
}

extern "C" __global__ void big_smem(const float* __restrict__ in, float* __restrict__ out, int n) {
    extern __shared__ float tile[];  // launched with 100 KB
    int per = 100 * 1024 / 4 / blockDim.x;
    for (int k = 0; k < per; ++k) tile[threadIdx.x * per + k] = in[blockIdx.x % n] + k;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tile[(blockDim.x - 1 - threadIdx.x) * per];
}

template <int SCALE>
__global__ void scale(const int* __restrict__ in, int* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = SCALE * in[i];
}
