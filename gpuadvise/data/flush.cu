// Empties the L2 before a cold sample by *reading* a buffer twice the L2's size: the L2 is left
// full of clean lines, so the timed kernel pays no write-back of the flush (a memset would leave
// dirty lines whose eviction the timed kernel would pay for).
extern "C" __global__ void gpuadvise_flush(const int4* __restrict__ buf, unsigned long long n4,
                                           int* __restrict__ sink) {
    int acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n4;
         i += (unsigned long long)blockDim.x * gridDim.x) {
        int4 v = __ldcg(buf + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) sink[0] = acc;  // never true for the zeroed buffer; keeps the loads
}
