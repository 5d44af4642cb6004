// A CTA per segment and a thread per element of it, the segment's index given a name first
// (HeCBench's damage: `nid = blockIdx.x`): GA206 reports the statement that makes the element's
// index from it, not the naming.

__global__ void segment_fraction(int n, const int* __restrict__ links, const int* __restrict__ total,
                                 float* __restrict__ frac) {
    extern __shared__ int cache[];
    const int seg = blockIdx.x;
    const int gid = seg * blockDim.x + threadIdx.x;  // expect: GA206
    cache[threadIdx.x] = (gid < n && links[gid] != -1) ? 1 : 0;  // expect: GA204
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];  // expect: GA205
        __syncthreads();
    }
    if (threadIdx.x == 0) frac[seg] = 1.0f - (float)cache[0] / (float)total[seg];
}
