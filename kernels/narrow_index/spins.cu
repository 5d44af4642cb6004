// One byte per thread where the index work and the CTA launches take the time (GA303's narrow
// finding, bound by its CTA launches on the SASS counts): HeCBench ising's update_lattice, a spin
// per thread on a periodic 2D lattice of signed chars, its row and column from a 64-bit tid / ny
// and tid % ny, four neighbour loads of one byte each. The division, the wrap-around and the
// addresses are done per spin; sixteen spins per thread (one 16-byte access each row) do them
// once per sixteen, in a 16x smaller grid. Three spellings: plain, the
// index in a macro, a template on the index type through a helper. Silent: the same lattice
// with a 32-bit power-of-two width (a shift and a mask: little index work) and a per-spin
// exponential that takes the time, and sixteen spins a thread in one uint4 each row.

__global__ void flip(signed char* __restrict__ s, const signed char* __restrict__ o,
                     const float* __restrict__ rnd, float beta, long long nx, long long ny)
{
    const long long tid = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    const int i = tid / ny;
    const int j = tid % ny;
    if (i >= nx || j >= ny) return;
    const int ip = (i + 1 < nx) ? i + 1 : 0, im = (i - 1 >= 0) ? i - 1 : nx - 1;
    const int jp = (j + 1 < ny) ? j + 1 : 0, jm = (j - 1 >= 0) ? j - 1 : ny - 1;
    const int n = o[im * ny + j] + o[i * ny + j] + o[ip * ny + j] + o[i * ny + ((i & 1) ? jp : jm)];  // expect: GA303 (16 spins a thread 1.546x on an H200, s14-miss; its 32-bit index alone 1.016x, no GA405)
    const signed char v = s[i * ny + j];
    if (rnd[i * ny + j] < beta * n * v) s[i * ny + j] = -v;
}

#define ROW(t, w) ((int)((t) / (w)))
#define COL(t, w) ((int)((t) % (w)))

__global__ void flip_macro(signed char* __restrict__ s, const signed char* __restrict__ o,
                           const float* __restrict__ rnd, float beta, long long nx, long long ny)
{
    const long long tid = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    const int i = ROW(tid, ny), j = COL(tid, ny);
    if (i >= nx || j >= ny) return;
    const int ip = (i + 1 < nx) ? i + 1 : 0, im = (i - 1 >= 0) ? i - 1 : nx - 1;
    const int jp = (j + 1 < ny) ? j + 1 : 0, jm = (j - 1 >= 0) ? j - 1 : ny - 1;
    const int n = o[im * ny + j] + o[i * ny + j] + o[ip * ny + j] + o[i * ny + ((i & 1) ? jp : jm)];  // expect: GA303 (16 spins a thread 1.546x on an H200, s14-miss; its 32-bit index alone 1.016x, no GA405)
    const signed char v = s[i * ny + j];
    if (rnd[i * ny + j] < beta * n * v) s[i * ny + j] = -v;
}

template <typename I>
__device__ __forceinline__ int spin_sum(const signed char* o, I i, I j, I nx, I ny)
{
    const I ip = (i + 1 < nx) ? i + 1 : 0, im = (i - 1 >= 0) ? i - 1 : nx - 1;
    const I jp = (j + 1 < ny) ? j + 1 : 0, jm = (j - 1 >= 0) ? j - 1 : ny - 1;
    return o[im * ny + j] + o[i * ny + j] + o[ip * ny + j] + o[i * ny + ((i & 1) ? jp : jm)];
}

template <typename I>
__global__ void flip_t(signed char* __restrict__ s, const signed char* __restrict__ o,
                       const float* __restrict__ rnd, float beta, long long nx, long long ny)
{
    const I tid = (I)blockDim.x * blockIdx.x + threadIdx.x;
    const I i = tid / (I)ny, j = tid % (I)ny;
    if (i >= nx || j >= ny) return;
    const int n = spin_sum(o, i, j, (I)nx, (I)ny);  // expect: GA303 (see flip)
    const signed char v = s[i * ny + j];
    if (rnd[i * ny + j] < beta * n * v) s[i * ny + j] = -v;
}

template __global__ void flip_t<long long>(signed char*, const signed char*, const float*, float,
                                           long long, long long);

// silent: a power-of-two width (shift and mask) and an exponential per spin
__global__ void flip_pow2(signed char* __restrict__ s, const signed char* __restrict__ o,
                          const float* __restrict__ rnd, float beta, int log2ny)
{
    const int tid = blockDim.x * blockIdx.x + threadIdx.x;  // expect: GA206
    const int ny = 1 << log2ny, i = tid >> log2ny, j = tid & (ny - 1);
    const int jm = (j - 1) & (ny - 1);
    const int n = o[tid] + o[i * ny + jm];
    const signed char v = s[tid];
    float a = expf(-2.f * beta * n * v);
    for (int k = 0; k < 8; ++k) a = expf(-a * beta) + 0.5f * a;
    if (rnd[tid] < a) s[tid] = -v;
}
