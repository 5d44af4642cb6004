// Shared-memory atomics as ptxas compiles them from CUDA C++ (not inline PTX): one warp, one
// atomic per launch. Kernels:
//   red1   atomicAdd(p, 1u), result unused        (ptxas: ATOMS.POPC.INC, per-lane addresses)
//   redv   atomicAdd(p, lane + 1), result unused  (ATOMS.ADD)
//   ret1   out = atomicAdd(p, 1u)                 (ATOMS.ADD, or aggregated)
//   s_red1 atomicAdd(&s, 1u) on one __shared__ word (uniform address: ATOMS.POPC.INC [UR])
//   s_redv atomicAdd(&s, lane + 1)                 (uniform address: one elected lane)
//   s_ret2 out = atomicAdd(&s, 2u)                 (uniform address, result used)
// p = shared base + offs[lane] (offsets from a pattern; the compiler cannot see them).
#include <cstdio>
#include <cuda_runtime.h>

#define K(name, body)                                                                          \
  __global__ void name(const unsigned* offs, unsigned mask, unsigned* out) {                   \
    __shared__ __align__(16) unsigned char sm[8192];                                           \
    __shared__ unsigned s;                                                                     \
    unsigned lane = threadIdx.x;                                                               \
    unsigned* p = reinterpret_cast<unsigned*>(sm + offs[lane]);                                \
    unsigned r = 0;                                                                            \
    if ((mask >> lane) & 1u) { body; }                                                         \
    out[lane] = r;                                                                             \
  }

K(red1, atomicAdd(p, 1u))
K(redv, atomicAdd(p, lane + 1))
K(ret1, r = atomicAdd(p, 1u))
K(s_red1, atomicAdd(&s, 1u))
K(s_redv, atomicAdd(&s, lane + 1))
K(s_ret2, r = atomicAdd(&s, 2u))

typedef void (*Kern)(const unsigned*, unsigned, unsigned*);

static unsigned off(int pat, unsigned i) {
  switch (pat) {
    case 0: return 64;                          // uniform
    case 1: return 4 * i;                       // stride1
    case 2: return 4 * (i % 2);                 // lane%2: 2 words, 2 banks
    case 3: return 128 * (i % 2);               // lane%2 same bank: 2 words, 1 bank
    case 4: return 128 * i;                     // stride32w: 32 words, 1 bank
    case 5: return 4 * (i / 16);                // lane/16
    case 6: return 64;                          // uniform, 16 lanes (mask)
    case 7: return 128 * (i % 4);               // 4 words, 1 bank
    case 8: return 4 * (i % 4);                 // 4 words, 4 banks
    case 9: return 4 * (i / 2);                 // lane/2: 16 words
    case 10: return 8 * i;                      // stride2
    case 11: return i < 24 ? 0 : 128;           // 2 words, 1 bank, 24 + 8 lanes
    case 12: return i < 16 ? 0 : 4 * i;         // 16 lanes on word 0, 16 on words 16..31
    case 13: return 128 * (i % 3);              // 3 words, 1 bank
    case 14: return 64;                         // uniform, 1 lane (mask)
    case 15: return 64;                         // uniform, lanes 0 and 16 (mask)
    case 16: return 4 * (i % 8) + 128 * (i / 8);// 4 words per bank, 8 banks
    case 17: return 256 * (i % 8);              // 8 words, 1 bank, 4 lanes each
  }
  return 0;
}
static unsigned pmask(int pat) {
  return pat == 6 ? 0xFFFFu : pat == 14 ? 1u : pat == 15 ? 0x00010001u : 0xFFFFFFFFu;
}
#define NPAT 18

int main() {
  Kern ks[] = {red1, redv, ret1, s_red1, s_redv, s_ret2};
  const char* names[] = {"red1", "redv", "ret1", "s_red1", "s_redv", "s_ret2"};
  unsigned *d_offs, *d_out;
  cudaMalloc(&d_offs, 32 * 4);
  cudaMalloc(&d_out, 32 * 4);
  int n = 0;
  for (int k = 0; k < 6; k++)
    for (int pat = 0; pat < NPAT; pat++) {
      if (k >= 3 && pat != 0 && pat != 6 && pat != 14) continue;  // s_*: the mask only
      unsigned h[32];
      for (unsigned i = 0; i < 32; i++) h[i] = off(pat, i);
      cudaMemcpy(d_offs, h, sizeof h, cudaMemcpyHostToDevice);
      ks[k]<<<1, 32>>>(d_offs, pmask(pat), d_out);
      printf("%d %s %d %u", n++, names[k], pat, pmask(pat));
      for (unsigned i = 0; i < 32; i++) printf(" %u", h[i]);
      printf("\n");
    }
  cudaError_t e = cudaDeviceSynchronize();
  fprintf(stderr, "launched %d: %s\n", n, cudaGetErrorString(e));
  return e != cudaSuccess;
}
