// benchmarks/store_reload_probe (s11-fuse, issue 29): does the L1 keep what a warp stores, and how do a warp's misses share its
// waits? One warp, clock64 around 64 dependent loads (a pointer chase), median of 21 launches.
// Part 1, a store then a reload of the stored words (or the sector's other words):
//   full      : 32 lanes store 32 consecutive ints (4 full sectors a store), reload them
//   half      : lane stores int 2*lane (half of each sector's bytes), reload the same words
//   quarter   : lane stores int 8*lane (4 of a sector's 32 bytes), reload the same words
//   two_halves: the even words, then the odd words (two stores fill each sector), reload even
//   other_word: lane stores int 2*lane, reloads int 2*lane+1 (written by an earlier launch)
//   l2_hit    : no store, lines written by an earlier launch   l1_hit: read once before
// Part 2, a one-warp loop of 512 iterations (#pragma unroll 1), two float loads an iteration
// into one FADD chain: both arrays L2-warm, each a new sector every 8th iteration; "together"
// both cross into a new sector in the same iteration, "apart" 4 iterations apart, "resident"
// both re-read L1-resident lines (a first pass before): cycles an iteration.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

// stride: ints between a lane's words of one step; step i of lane l at i * 256 + l * stride
__global__ void init_chain(int* buf, int stride, int plus) {
    int lane = threadIdx.x;
    for (int i = 0; i < 64; i++) buf[i * 256 + lane * stride + plus] = (i + 1) & 63;
}
__global__ void store_chase(int* buf, int mode, long long* cyc, int* sink) {
    int lane = threadIdx.x;
    int stride = 1, plus = 0;
    if (mode == 0) { for (int i = 0; i < 64; i++) buf[i * 256 + lane] = (i + 1) & 63; }
    if (mode == 1) { stride = 2; for (int i = 0; i < 64; i++) buf[i * 256 + 2 * lane] = (i + 1) & 63; }
    if (mode == 2) { stride = 8; for (int i = 0; i < 64; i++) buf[i * 256 + 8 * lane] = (i + 1) & 63; }
    if (mode == 3) {
        stride = 2;
        for (int i = 0; i < 64; i++) buf[i * 256 + 2 * lane] = (i + 1) & 63;
        for (int i = 0; i < 64; i++) buf[i * 256 + 2 * lane + 1] = 0;
    }
    if (mode == 4) { stride = 2; plus = 1; for (int i = 0; i < 64; i++) buf[i * 256 + 2 * lane] = 0; }
    // mode 5: l2 hit (nothing before); mode 6: l1 hit (a pass before)
    int idx = 0;
    // the pass's last index is 0 again (64 steps round the ring): kept, so the pass is live (the
    // recorded run of 2026-11-30 reset it to 0 here and the compiler removed the pass)
    if (mode == 6) for (int k = 0; k < 64; k++) idx = buf[idx * 256 + lane + plus];
    long long t0 = clock64();
    for (int k = 0; k < 64; k++) idx = buf[idx * 256 + lane * stride + plus];
    long long t1 = clock64();
    if (lane == 0) cyc[0] = t1 - t0;
    if (idx == 12345) *sink = idx;
}

__global__ void two_streams(const float* a, const float* b, int shift, int resident, long long* cyc, float* sink) {
    int lane = threadIdx.x;
    float s = 0.f;
    // lane reads element j of its own 512-float row; a row is 2 KB: 64 sectors, a new one every 8th j
    const float* ra = a + lane * 512;
    const float* rb = b + lane * 512 + shift;
    if (resident) {
#pragma unroll 1
        for (int j = 0; j < 512; j++) s += ra[j] + rb[j];
    }
    long long t0 = clock64();
#pragma unroll 1
    for (int j = 0; j < 512; j++) s += ra[j] + rb[j];
    long long t1 = clock64();
    if (lane == 0) cyc[0] = t1 - t0;
    if (s == 1234.5f) *sink = s;
}
__global__ void fill(float* p, int n) { for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = 1e-3f * (i & 7); }

int main() {
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s sms %d\n", prop.name, prop.multiProcessorCount);
    int* buf; long long* cyc; int* sink; float* fsink;
    CK(cudaMalloc(&buf, 64 * 256 * 4 + 64)); CK(cudaMalloc(&cyc, 8)); CK(cudaMalloc(&sink, 4)); CK(cudaMalloc(&fsink, 4));
    const char* names[] = {"full", "half", "quarter", "two_halves", "other_word", "l2_hit", "l1_hit"};
    const int strides[] = {1, 2, 8, 2, 2, 1, 1};
    const int pluses[] = {0, 0, 0, 0, 1, 0, 0};
    for (int mode = 0; mode < 7; mode++) {
        std::vector<double> v;
        for (int r = 0; r < 21; r++) {
            CK(cudaMemset(buf, 0, 64 * 256 * 4));
            init_chain<<<1, 32>>>(buf, strides[mode], pluses[mode]);
            store_chase<<<1, 32>>>(buf, mode, cyc, sink);
            long long c; CK(cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost)); v.push_back(c / 64.0);
        }
        std::sort(v.begin(), v.end());
        printf("store_reload %s %.1f cycles a load (min %.1f max %.1f)\n", names[mode], v[10], v[0], v[20]);
    }
    float *a, *b; int n = 32 * 512 + 64;
    CK(cudaMalloc(&a, n * 4)); CK(cudaMalloc(&b, n * 4));
    const char* snames[] = {"together", "apart", "resident"};
    const int shifts[] = {0, 4, 0};
    for (int m = 0; m < 3; m++) {
        std::vector<double> v;
        for (int r = 0; r < 21; r++) {
            fill<<<64, 256>>>(a, n); fill<<<64, 256>>>(b, n);
            two_streams<<<1, 32>>>(a, b, shifts[m], m == 2, cyc, fsink);
            long long c; CK(cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost)); v.push_back(c / 512.0);
        }
        std::sort(v.begin(), v.end());
        printf("two_streams %s %.1f cycles an iteration (min %.1f max %.1f)\n", snames[m], v[10], v[0], v[20]);
    }
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
