// GA303 narrow-load probe: does widening per-thread loads speed up these corpus patterns?
// Build: nvcc -O3 -arch=sm_90 -o narrow_probe narrow_probe.cu ; run: ./narrow_probe
// Each line: pattern, variant, median ms over 20 runs, effective GB/s (bytes the kernel must move).
#include <cstdio>
#include <cuda_fp16.h>
#include <vector>
#include <algorithm>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s\n", cudaGetErrorString(e)); exit(1);} } while (0)

template <class F> float timeit(F f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  f(); CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int r = 0; r < 20; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
static void report(const char* p, const char* v, float ms, double bytes) {
  printf("%-22s %-28s %9.4f ms %8.1f GB/s\n", p, v, ms, bytes / ms / 1e6);
}

// 1) hmax (f16max): r[i] = max(a[i], b[i]), 2^29 halves
__global__ void hmax1(const __half* a, const __half* b, __half* r, size_t n) {
  for (size_t i = threadIdx.x + (size_t)blockDim.x * blockIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    r[i] = __hmax(a[i], b[i]); }
__global__ void hmax2(const __half2* a, const __half2* b, __half2* r, size_t n2) {
  for (size_t i = threadIdx.x + (size_t)blockDim.x * blockIdx.x; i < n2; i += (size_t)blockDim.x * gridDim.x)
    r[i] = __hmax2(a[i], b[i]); }
__global__ void hmax8(const uint4* a, const uint4* b, uint4* r, size_t n8) {
  for (size_t i = threadIdx.x + (size_t)blockDim.x * blockIdx.x; i < n8; i += (size_t)blockDim.x * gridDim.x) {
    uint4 x = a[i], y = b[i], z; const __half2* xp = (const __half2*)&x; const __half2* yp = (const __half2*)&y; __half2* zp = (__half2*)&z;
    for (int j = 0; j < 4; ++j) zp[j] = __hmax2(xp[j], yp[j]); r[i] = z; } }

// 2) dp4a dot_product2: 4 scalar ints vs one int4 per array per thread, 2^26 groups
__global__ void dp4(const int* a, const int* b, int* d, size_t n) {
  int s = 0; for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
    size_t o = idx * 4;
#pragma unroll
    for (int i = 0; i < 4; i++) s = __dp4a(a[o + i], b[o + i], s); }
  if (s == 0x7fffffff) d[0] = s; }
__global__ void dp4v(const int4* a, const int4* b, int* d, size_t n) {
  int s = 0; for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
    int4 x = a[idx], y = b[idx]; s = __dp4a(x.x, y.x, s); s = __dp4a(x.y, y.y, s); s = __dp4a(x.z, y.z, s); s = __dp4a(x.w, y.w, s); }
  if (s == 0x7fffffff) d[0] = s; }

// 3) accuracy: a CTA per row, count entries > ref; scalar / float4
__global__ void rank1(const float* x, int* out, int d) {
  const float* r = x + (size_t)blockIdx.x * d; float ref = r[0]; int n = 0;
  for (int c = threadIdx.x; c < d; c += blockDim.x) n += r[c] > ref;
  if (n < 0) out[blockIdx.x] = n; }
__global__ void rank4(const float* x, int* out, int d) {
  const float4* r = (const float4*)(x + (size_t)blockIdx.x * d); float ref = x[(size_t)blockIdx.x * d]; int n = 0;
  for (int c = threadIdx.x; c < d / 4; c += blockDim.x) { float4 v = r[c]; n += (v.x > ref) + (v.y > ref) + (v.z > ref) + (v.w > ref); }
  if (n < 0) out[blockIdx.x] = n; }

// 4) chi2: thread per column, branchy count over rows of bytes; 1 column vs 4 (uchar4) vs 16 (uint4)
__global__ void chi1(const unsigned char* s, float* res, int rows, int cols) {
  int t = blockIdx.x * blockDim.x + threadIdx.x; if (t >= cols) return; int c0 = 0, c1 = 0, c2 = 0;
  for (int m = 0; m < rows; m++) { unsigned char y = s[(size_t)m * cols + t]; if (y == '0') c0++; else if (y == '1') c1++; else if (y == '2') c2++; }
  res[t] = c0 + 2.f * c1 + 3.f * c2; }
__global__ void chi16(const uint4* s, float* res, int rows, int cols16) {
  int t = blockIdx.x * blockDim.x + threadIdx.x; if (t >= cols16) return; int c[16][3] = {};
  for (int m = 0; m < rows; m++) { uint4 v = s[(size_t)m * cols16 + t]; const unsigned char* y = (const unsigned char*)&v;
#pragma unroll
    for (int j = 0; j < 16; ++j) { c[j][0] += y[j] == '0'; c[j][1] += y[j] == '1'; c[j][2] += y[j] == '2'; } }
  for (int j = 0; j < 16; ++j) res[16 * t + j] = c[j][0] + 2.f * c[j][1] + 3.f * c[j][2]; }

__global__ void chi4(const uchar4* s, float* res, int rows, int cols4) {
  int t = blockIdx.x * blockDim.x + threadIdx.x; if (t >= cols4) return; int c[4][3] = {};
  for (int m = 0; m < rows; m++) { uchar4 v = s[(size_t)m * cols4 + t]; unsigned char y[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) { c[j][0] += y[j] == '0'; c[j][1] += y[j] == '1'; c[j][2] += y[j] == '2'; } }
  for (int j = 0; j < 4; ++j) res[4 * t + j] = c[j][0] + 2.f * c[j][1] + 3.f * c[j][2]; }
__global__ void chi1u(const unsigned char* s, float* res, int rows, int cols) {
  int t = blockIdx.x * blockDim.x + threadIdx.x; if (t >= cols) return; int c0 = 0, c1 = 0, c2 = 0;
#pragma unroll 8
  for (int m = 0; m < rows; m++) { unsigned char y = s[(size_t)m * cols + t]; c0 += y == '0'; c1 += y == '1'; c2 += y == '2'; }
  res[t] = c0 + 2.f * c1 + 3.f * c2; }

// 5) updateThreshold: one byte per thread vs 16 (uint4)
__global__ void thr1(const unsigned char* img, const unsigned char* mp, const unsigned char* bn, unsigned char* tn, size_t n) {
  size_t i = blockDim.x * (size_t)blockIdx.x + threadIdx.x; if (i >= n) return;
  if (mp[i] == 0) { float th = 0.92f * tn[i] + 0.24f * (img[i] - bn[i]); tn[i] = fmaxf(th, 20.f); } }
__global__ void thr16(const uint4* img, const uint4* mp, const uint4* bn, uint4* tn, size_t n16) {
  size_t i = blockDim.x * (size_t)blockIdx.x + threadIdx.x; if (i >= n16) return;
  uint4 m = mp[i], g = img[i], b = bn[i], t = tn[i]; const unsigned char *mb = (const unsigned char*)&m, *gb = (const unsigned char*)&g, *bb = (const unsigned char*)&b; unsigned char* tb = (unsigned char*)&t;
  for (int j = 0; j < 16; ++j) if (mb[j] == 0) tb[j] = (unsigned char)fmaxf(0.92f * tb[j] + 0.24f * (gb[j] - bb[j]), 20.f);
  tn[i] = t; }

int main() {
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0)); printf("device %s sms %d\n", p.name, p.multiProcessorCount);
  size_t big = (size_t)1 << 31;  // 2 GiB per buffer
  char *A, *B, *C; CK(cudaMalloc(&A, big)); CK(cudaMalloc(&B, big)); CK(cudaMalloc(&C, big));
  CK(cudaMemset(A, 49, big)); CK(cudaMemset(B, 48, big)); CK(cudaMemset(C, 0, big));
  { size_t n = (size_t)1 << 29; double by = 3.0 * n * 2;  // f16max sizes
    report("hmax", "half, 1048576 x 256", timeit([&] { hmax1<<<1048576, 256>>>((__half*)A, (__half*)B, (__half*)C, n); }), by);
    report("hmax", "half2, grid/2", timeit([&] { hmax2<<<524288, 256>>>((__half2*)A, (__half2*)B, (__half2*)C, n / 2); }), by);
    report("hmax", "8 halves (uint4), grid/8", timeit([&] { hmax8<<<131072, 256>>>((uint4*)A, (uint4*)B, (uint4*)C, n / 8); }), by); }
  { size_t n = (size_t)1 << 26; double by = 2.0 * n * 16;
    report("dp4a", "4 x LDG.32 per array", timeit([&] { dp4<<<65536, 1024>>>((int*)A, (int*)B, (int*)C, n); }), by);
    report("dp4a", "1 x LDG.128 per array", timeit([&] { dp4v<<<65536, 1024>>>((int4*)A, (int4*)B, (int*)C, n); }), by); }
  { int rows = 8192, d = 10000; double by = (double)rows * d * 4;
    report("accuracy", "float per iteration", timeit([&] { rank1<<<2048, 256>>>((float*)A, (int*)C, d); }), by / 4);
    report("accuracy", "float4 per iteration", timeit([&] { rank4<<<2048, 256>>>((float*)A, (int*)C, d); }), by / 4); }
  { int rows = 4000, cols = 400000; double by = (double)rows * cols;
    report("chi2", "byte per row, branchy", timeit([&] { chi1<<<(cols + 255) / 256, 256>>>((unsigned char*)A, (float*)C, rows, cols); }), by);
    report("chi2", "uchar4 (4 cols), no branch", timeit([&] { chi4<<<(cols / 4 + 255) / 256, 256>>>((uchar4*)A, (float*)C, rows, cols / 4); }), by);
    report("chi2", "byte per row, no branch, unroll 8", timeit([&] { chi1u<<<(cols + 255) / 256, 256>>>((unsigned char*)A, (float*)C, rows, cols); }), by);
    report("chi2", "uint4 (16 cols), no branch", timeit([&] { chi16<<<(cols / 16 + 255) / 256, 256>>>((uint4*)A, (float*)C, rows, cols / 16); }), by); }
  { size_t n = 8388608; double by = 5.0 * n;
    CK(cudaMemset(B, 0, n));  // Mp = 0: every pixel updated
    report("updateThreshold", "byte per thread", timeit([&] { thr1<<<(n + 255) / 256, 256>>>((unsigned char*)A, (unsigned char*)B, (unsigned char*)A, (unsigned char*)C, n); }), by);
    report("updateThreshold", "uint4 per thread", timeit([&] { thr16<<<(n / 16 + 255) / 256, 256>>>((uint4*)A, (uint4*)B, (uint4*)A, (uint4*)C, n / 16); }), by); }
  return 0;
}
