// Racy warp scans in __device__ helpers (hecbench radixsort's scanwarp): each lane owns a word
// above a zero window and adds the word d below its own (d = 1, 2, 4, 8, 16) through volatile
// shared memory with neither a barrier nor __syncwarp, a race since Volta. GA209 reports them at
// their first step, in the helper, and rewrites the helper with __shfl_up_sync on a register
// (the lane's word stored back after the steps) when only this kernel calls it, directly or
// through another helper; scans.cu's warp_scan_racy is the same scan on one line of a kernel.
// A helper two kernels call stays display-only (tests/rules/test_rule_ga209_warp.py: steps
// guarded per lane too); a scan with __syncwarp between each step's read and write is no race
// and has no barrier to save: silent.
#define WARP 32
#define LOG_WARP 5
#define THREADS 256

// 1. radixsort's spelling: the shared pointer passed in, a macro'd warp size, each step alone
// in `if (k <= maxlevel) { ... }`, an exclusive result; called twice by another helper (the
// warps' values, then the first warp on the warps' totals), which the kernel calls.
__device__ unsigned warp_scan_excl(unsigned val, volatile unsigned* s, const int maxlevel) {
    int id = threadIdx.x;
    int idx = 2 * id - (id & (WARP - 1));
    s[idx] = 0;
    idx += WARP;
    s[idx] = val;

    if (0 <= maxlevel) { s[idx] += s[idx - 1]; }  // expect: GA209
    if (1 <= maxlevel) { s[idx] += s[idx - 2]; }
    if (2 <= maxlevel) { s[idx] += s[idx - 4]; }
    if (3 <= maxlevel) { s[idx] += s[idx - 8]; }
    if (4 <= maxlevel) { s[idx] += s[idx - 16]; }

    return s[idx] - val;  // inclusive -> exclusive
}

__device__ unsigned block_scan_excl(unsigned v, unsigned* s) {
    unsigned t = threadIdx.x;
    unsigned x = warp_scan_excl(v, s, LOG_WARP - 1);
    __syncthreads();
    if ((t & (WARP - 1)) == WARP - 1) s[t >> LOG_WARP] = x + v;
    __syncthreads();
    if (t < WARP) s[t] = warp_scan_excl(s[t], s, 2);  // 8 warps: distances 1, 2, 4
    __syncthreads();
    return x + s[t >> LOG_WARP];
}

__global__ void scan_via_helpers(const unsigned* in, unsigned* out, unsigned n) {  // expect: GA501
    __shared__ unsigned sm[2 * THREADS];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned r = block_scan_excl(i < n ? in[i] : 0u, sm);
    if (i < n) out[i] = r;
}

// 2. A template helper (element type), the steps bare statements over a window index kept in
// a variable, an inclusive result, int values; each warp scans its 32 values.
template <typename T>
__device__ T warp_inclusive(volatile T* win, T v) {
    const unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const unsigned at = w * 64 + 32 + lane;
    win[at - 32] = 0;
    win[at] = v;
    win[at] += win[at - 1];  // expect: GA209
    win[at] += win[at - 2];
    win[at] += win[at - 4];
    win[at] += win[at - 8];
    win[at] += win[at - 16];
    return win[at];
}

__global__ void warp_sums_tmpl(const int* in, int* out, int n) {  // expect: GA501
    __shared__ int win[2 * THREADS];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int r = warp_inclusive<int>(win, i < n ? in[i] : 0);
    if (i < n) out[i] = r;
}

// Display-only: one helper, two kernels (blocks of 256 and of 128 threads).
__device__ unsigned shared_warp_scan(unsigned v, volatile unsigned* s) {
    unsigned idx = 2 * threadIdx.x - (threadIdx.x & 31) + 32;
    s[idx - 32] = 0;
    s[idx] = v;
    s[idx] += s[idx - 1];  // expect: GA209
    s[idx] += s[idx - 2];
    s[idx] += s[idx - 4];
    s[idx] += s[idx - 8];
    s[idx] += s[idx - 16];
    return s[idx];
}

__global__ void shared_wide(const unsigned* in, unsigned* out, unsigned n) {  // expect: GA501
    __shared__ unsigned s[2 * THREADS];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned r = shared_warp_scan(i < n ? in[i] : 0u, s);
    if (i < n) out[i] = r;
}

__global__ void shared_narrow(const unsigned* in, unsigned* out, unsigned n) {  // expect: GA501
    __shared__ unsigned s[THREADS];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned r = shared_warp_scan(i < n ? in[i] : 0u, s);
    if (i < n) out[i] = 2 * r;
}

// Silent (no race): __syncwarp between each step's read and its write. GA501 (a single launch
// that is mostly its own cost) no longer: since s13-norm its one round of warps loads, waits once
// and scans together (one phase, memory and compute add), 0.73 us of work against the 2.8 us
// floor, 79% of the launch, under the rule's 80% (it was 87%; the other scans here stay above).
__global__ void synced_warp_scan(const unsigned* in, unsigned* out, unsigned n) {
    __shared__ unsigned s[2 * THREADS];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned idx = 2 * threadIdx.x - (threadIdx.x & 31) + 32;
    s[idx - 32] = 0;
    s[idx] = i < n ? in[i] : 0u;
    __syncwarp();
    for (int d = 1; d < 32; d *= 2) {
        unsigned y = s[idx - d];
        __syncwarp();
        s[idx] += y;
        __syncwarp();
    }
    if (i < n) out[i] = s[idx];
}
