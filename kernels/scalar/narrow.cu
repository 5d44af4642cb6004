// Narrow coalesced loads that keep too few bytes in flight (GA303's second finding): each thread
// reads one small element and uses it before it issues its next load, so a warp waits one memory
// round trip per 32-128 bytes. Three spellings of one pixel per thread in bytes (plain, a macro,
// a template through a helper), a row walk of one float per iteration (4-byte loads are
// reported only as such a stream: a loop of one load per wait in the SASS whose widened launch
// streams at the DRAM's rate), and the fixed versions, which stay silent: 16 pixels per thread in
// one uint4, the row walk unrolled by four, and the row walk with float4 loads.

#define PIXEL(p, i) ((p)[i])

// one pixel per thread: a mask byte, then three bytes when the mask is clear (8.4 M pixels)
__global__ void threshold_bytes(const unsigned char* __restrict__ mask,
                                const unsigned char* __restrict__ img,
                                unsigned char* __restrict__ th, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i >= n) return;
    if (mask[i] == 0) {  // expect: GA303, GA104
        int v = th[i] + (img[i] >> 2);
        th[i] = v > 255 ? 255 : v;
    }
}

// the same through a macro
__global__ void threshold_bytes_macro(const unsigned char* __restrict__ mask,
                                      const unsigned char* __restrict__ img,
                                      unsigned char* __restrict__ th, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n && PIXEL(mask, i) == 0) th[i] = min(255, PIXEL(th, i) + (PIXEL(img, i) >> 2));  // expect: GA303, GA104
}

template <typename T>
__device__ __forceinline__ T load_at(const T* p, int i) { return p[i]; }

// the same as a template instance (SHIFT = 2) through a helper template, in a grid-stride loop
template <int SHIFT>
__global__ void threshold_t(const unsigned char* __restrict__ mask,
                            const unsigned char* __restrict__ img,
                            unsigned char* __restrict__ th, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned char m = load_at(mask, i);  // expect: GA303
        if (m == 0) {  // expect: GA104
            int v = load_at(th, i) + (load_at(img, i) >> SHIFT);
            th[i] = (unsigned char)(v > 255 ? 255 : v);
        }
    }
}

template __global__ void threshold_t<2>(const unsigned char*, const unsigned char*, unsigned char*, int);

// silent: sixteen pixels per thread, one uint4 of each array
__global__ void threshold_uint4(const uint4* __restrict__ mask, const uint4* __restrict__ img,
                                uint4* __restrict__ th, int n16)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n16) return;
    const uint4 m = mask[i];
    const uint4 g = img[i];
    uint4 t = th[i];
    const unsigned char* mb = reinterpret_cast<const unsigned char*>(&m);
    const unsigned char* gb = reinterpret_cast<const unsigned char*>(&g);
    unsigned char* tb = reinterpret_cast<unsigned char*>(&t);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        if (mb[j] == 0) {  // expect: GA104
            int v = tb[j] + (gb[j] >> 2);
            tb[j] = v > 255 ? 255 : v;
        }
    }
    th[i] = t;
}

// a CTA per row (2048 rows of 10,000 floats): how many entries beat the row's labelled one,
// one 4-byte load per iteration, compared before the next is issued
__global__ void rank_rows(const float* __restrict__ x, const int* __restrict__ label,
                          int* __restrict__ rank, int d)
{
    __shared__ int part[256];
    const int row = blockIdx.x;
    const float ref = x[(long)row * d + label[row]];
    int n = 0;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        const float v = x[(long)row * d + c];  // expect: GA303
        if (v > ref) ++n;
    }
    part[threadIdx.x] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int t = 0; t < blockDim.x; ++t) s += part[t];
        rank[row] = s;
    }
}

// silent: four independent loads per iteration
__global__ void rank_rows_unrolled(const float* __restrict__ x, const int* __restrict__ label,
                                   int* __restrict__ rank, int d)
{
    __shared__ int part[256];
    const int row = blockIdx.x;
    const float* r = x + (long)row * d;
    const float ref = r[label[row]];
    int n = 0;
    int c = threadIdx.x;
    for (; c + 3 * (int)blockDim.x < d; c += 4 * blockDim.x) {
        const float a = r[c], b = r[c + blockDim.x], e = r[c + 2 * blockDim.x],
                    f = r[c + 3 * blockDim.x];
        n += (a > ref) + (b > ref) + (e > ref) + (f > ref);
    }
    for (; c < d; c += blockDim.x) n += r[c] > ref;
    part[threadIdx.x] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int t = 0; t < blockDim.x; ++t) s += part[t];
        rank[row] = s;
    }
}

// silent: float4 loads, four columns per thread and iteration (d a multiple of 4)
__global__ void rank_rows_float4(const float* __restrict__ x, const int* __restrict__ label,
                                 int* __restrict__ rank, int d)
{
    __shared__ int part[256];
    const int row = blockIdx.x;
    const float ref = x[(long)row * d + label[row]];
    const float4* r = reinterpret_cast<const float4*>(x + (long)row * d);
    int n = 0;
    for (int c = threadIdx.x; c < d / 4; c += blockDim.x) {
        const float4 v = r[c];
        n += (v.x > ref) + (v.y > ref) + (v.z > ref) + (v.w > ref);
    }
    part[threadIdx.x] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int t = 0; t < blockDim.x; ++t) s += part[t];
        rank[row] = s;
    }
}
