// Blelloch's work-efficient scans that GA209 replaces with a scan in warp shuffles (each warp's
// lanes, then the warps' totals): HeCBench scan_bcao's spelling, a template over the tile (the
// element type a template parameter too: tests/rules/test_rule_ga209_blelloch.py), each thread
// holding elements t and t + N/2 at bank-conflict-free offsets, a grid-stride loop over tiles; scans.cu's blelloch holds elements 2t and 2t + 1 (index
// macros). A float scan stays display-only: its additions regrouped would round differently.
#define LOG_BANKS 5
#define PAD(n) ((n) >> LOG_BANKS)

template <int N>
__global__ void tiles_bcao(const long nblocks, unsigned* __restrict__ out, const unsigned* __restrict__ in) {
    __shared__ unsigned temp[2 * N];
    for (long tile = blockIdx.x; tile < nblocks; tile += gridDim.x) {
        const unsigned* gi = in + tile * N;
        unsigned* go = out + tile * N;
        int thid = threadIdx.x, a = thid, b = a + N / 2, oa = PAD(a), ob = PAD(b);
        temp[a + oa] = gi[a];
        temp[b + ob] = gi[b];
        int offset = 1;
        for (int d = N >> 1; d > 0; d >>= 1) {
            __syncthreads();
            if (thid < d) {
                int ai = offset * (2 * thid + 1) - 1, bi = offset * (2 * thid + 2) - 1;
                ai += PAD(ai);
                bi += PAD(bi);
                temp[bi] += temp[ai];  // expect: GA209
            }
            offset *= 2;
        }
        if (thid == 0) temp[N - 1 + PAD(N - 1)] = 0;  // clear the last element
        for (int d = 1; d < N; d *= 2) {  // down-sweep
            offset >>= 1;
            __syncthreads();
            if (thid < d) {
                int ai = offset * (2 * thid + 1) - 1, bi = offset * (2 * thid + 2) - 1;
                ai += PAD(ai);
                bi += PAD(bi);
                unsigned t = temp[ai];
                temp[ai] = temp[bi];
                temp[bi] += t;
            }
        }
        __syncthreads();
        go[a] = temp[a + oa];
        go[b] = temp[b + ob];
    }
}
template __global__ void tiles_bcao<512>(const long, unsigned*, const unsigned*);

// Display-only: the same scan of floats.
__global__ void tiles_float(const long nblocks, float* __restrict__ out, const float* __restrict__ in) {
    __shared__ float temp[512];
    int thid = threadIdx.x;
    temp[2 * thid] = in[blockIdx.x * 512 + 2 * thid];  // expect: GA303
    temp[2 * thid + 1] = in[blockIdx.x * 512 + 2 * thid + 1];
    int offset = 1;
    for (int d = 256; d > 0; d >>= 1) {
        __syncthreads();
        if (thid < d) temp[offset * (2 * thid + 2) - 1] += temp[offset * (2 * thid + 1) - 1];  // expect: GA201, GA209
        offset *= 2;
    }
    if (thid == 0) temp[511] = 0;
    for (int d = 1; d < 512; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (thid < d) {
            float t = temp[offset * (2 * thid + 1) - 1];
            temp[offset * (2 * thid + 1) - 1] = temp[offset * (2 * thid + 2) - 1];
            temp[offset * (2 * thid + 2) - 1] += t;
        }
    }
    __syncthreads();
    out[blockIdx.x * 512 + 2 * thid] = temp[2 * thid];  // expect: GA303
    out[blockIdx.x * 512 + 2 * thid + 1] = temp[2 * thid + 1];
}
