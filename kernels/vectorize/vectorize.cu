// Narrow coalesced loads made vector loads by GA303's rewrite (gpuadvise.source.fixkit_vector):
// one 1- or 2-byte element per thread or per loop iteration, in four spellings: a grid-stride
// loop over halves (a template), a block-stride loop along a row at a row offset, a thread per
// byte under `if (i < n)` and one under an early return (kernels/scalar/narrow.cu's
// threshold_bytes). The rewrite reads each buffer's k consecutive elements as one 16-byte chunk
// and runs the kernel's statements once per element on them. A column walk (each thread a
// column, its loads in a loop over the rows) is reported but not rewritten.

#include <cuda_fp16.h>

// a grid-stride loop over halves, through a template (STRICT: ties take b)
template <bool STRICT>
__global__ void pick_max(const __half* __restrict__ a, const __half* __restrict__ b,
                         __half* __restrict__ r, size_t n)
{
    for (size_t i = threadIdx.x + blockDim.x * blockIdx.x; i < n; i += blockDim.x * gridDim.x)
        r[i] = (STRICT ? __hgt(a[i], b[i]) : __hge(a[i], b[i])) ? a[i] : b[i];  // expect: GA303
}

template __global__ void pick_max<true>(const __half*, const __half*, __half*, size_t);

// a CTA per row, a block-stride loop along it: x[row * w + c] plus s[c], squashed, in place
__global__ void scale_rows(__half* x, const __half* s, int w)
{
    const int row = blockIdx.x;
    const int base = row * w;
    for (int c = threadIdx.x; c < w; c = c + blockDim.x) {
        const float v = __half2float(x[base + c] + s[c]);  // expect: GA303
        x[base + c] = __float2half_rn(v * tanhf(v));
    }
}

// a thread per byte under `if (i < n)`: a saturating brighten
__global__ void brighten(const unsigned char* __restrict__ in, unsigned char* __restrict__ out,
                         unsigned n, int add)
{
    unsigned i = threadIdx.x + blockIdx.x * blockDim.x;  // expect: GA206
    if (i < n) {
        const int v = in[i] + add;  // expect: GA303
        out[i] = v > 255 ? 255 : v;
    }
}

// not rewritten: each thread a column, one byte per row in a loop (the chunk would change
// with the row)
__global__ void column_counts(const unsigned char* __restrict__ m, int* __restrict__ count,  // expect: GA102
                              int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    int k = 0;
    for (int r = 0; r < rows; ++r) k += m[(size_t)r * cols + c] == '1';  // expect: GA303
    count[c] = k;
}
