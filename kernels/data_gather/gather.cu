// Gathers by data (GA301's "gather" pattern): loads whose addresses come from values the kernel
// read (a neighbour list, a distance, a hash) into a buffer bigger than a lookup table (48 KB:
// smaller ones are GA305's, staged whole in shared memory). Over a long loop the warps touch most
// of such a buffer, so the warp's footprint looks used; each request still pays a sector (or
// two) per lane. HeCBench's md (float4 positions by neighbour list) and tissue (a table indexed
// by a distance) are the two shapes of the corpus. Three spellings of the gather (an index
// expression, a macro, pointer arithmetic on a hash) and three gathers that stay silent (a
// CSR-like row read at a loaded offset, consecutive indices, a 1 KB lookup table).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define TAB(t, d) (t)[(d)]

// md's shape: each thread's k neighbours by list, float4 positions (16 of 32 bytes of each
// sector used, 32 sectors per request where 16 would do: 50 %, under the plain array's 60 %).
extern "C" __global__ void neighbour_sum(const float4* __restrict__ pos,
                                         const int* __restrict__ nbr, float* __restrict__ out,
                                         int n, int k) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float4 pi = pos[i];
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
        const float4 pj = pos[nbr[j * n + i]];  // expect: GA301
        const float dx = pi.x - pj.x, dy = pi.y - pj.y, dz = pi.z - pj.z;
        acc += 1.0f / (dx * dx + dy * dy + dz * dz + 1.0f);
    }
    out[i] = acc;
}

// tissue's shape: a 64 KB table indexed by the distance between two loaded coordinates (the
// table through a macro).
extern "C" __global__ void distance_weights(const int* __restrict__ cx,
                                            const float* __restrict__ table,
                                            float* __restrict__ out, int n, int m) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int xi = cx[i];
    float acc = 0.0f;
    for (int j = 0; j < m; ++j) {
        const int xj = cx[(j * 2053) % n];  // the same for the whole warp
        acc += TAB(table, abs(xj - xi));  // expect: GA301
    }
    out[i] = acc;
}

// A hashed bucket of a 256 KB table, through pointer arithmetic.
extern "C" __global__ void hashed_buckets(const unsigned* __restrict__ keys,
                                          const float* __restrict__ buckets,
                                          float* __restrict__ out, int n, int rounds) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = keys[i];
    float acc = 0.0f;
    for (int r = 0; r < rounds; ++r) {
        h = h * 2654435761u + 0x9e3779b9u;
        const float* bucket = buckets + (h >> 16);
        acc += *bucket;  // expect: GA301
    }
    out[i] = acc;
}

// Silent: a row read at an offset loaded from memory (CSR's row pointer): data-addressed, but
// consecutive lanes read consecutive words.
extern "C" __global__ void csr_rows(const int* __restrict__ rowptr, const float* __restrict__ vals,
                                    float* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int start = rowptr[blockIdx.x];
    out[i] = 2.0f * vals[start + threadIdx.x];
}

// Silent: indices that happen to be consecutive (sorted data): no excess.
extern "C" __global__ void sorted_gather(const int* __restrict__ idx,
                                         const float* __restrict__ tab, float* __restrict__ out,
                                         int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = tab[idx[i]];
}

// Silent here: a 1 KB lookup table indexed by a hash is GA305's (the whole table staged in
// shared memory), not a gather of GA301's.
extern "C" __global__ void small_table(const unsigned* __restrict__ keys,
                                       const float* __restrict__ lut, float* __restrict__ out,
                                       int n, int rounds) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = keys[i];
    float acc = 0.0f;
    for (int r = 0; r < rounds; ++r) {
        h = h * 2654435761u + 0x9e3779b9u;
        acc += lut[h >> 24];  // expect: GA305
    }
    out[i] = acc;
}

// A table in constant memory indexed by data (HeCBench's popcount pc5): the constant cache serves
// one address per cycle, so a warp's lookups of up to 32 distinct bytes are replayed one by one.
// Three spellings (an index expression, a macro, pointer arithmetic) and a silent uniform index.
__constant__ unsigned char c_lut[256];
#define LUT(v) c_lut[(v) & 0xFF]

extern "C" __global__ void const_lookup(const unsigned* __restrict__ in, int* __restrict__ out,
                                        int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned x = in[i];
    out[i] = c_lut[x & 0xFF] + c_lut[(x >> 8) & 0xFF];  // expect: GA301
}

extern "C" __global__ void const_lookup_macro(const unsigned* __restrict__ in,
                                              int* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned x = in[i];
    out[i] = LUT(x) + LUT(x >> 16);  // expect: GA301
}

extern "C" __global__ void const_lookup_pointer(const unsigned* __restrict__ in,
                                                int* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned char* t = c_lut + ((in[i] * 2654435761u) >> 24);
    out[i] = *t;  // expect: GA301
}

// Silent: every lane reads the same entry (a filter's coefficients): one address per request.
extern "C" __global__ void const_uniform(const unsigned* __restrict__ in, int* __restrict__ out,
                                         int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = in[i];
    int acc = 0;
    for (int k = 0; k < 128; ++k) {
        acc += c_lut[k] * (int)(x & 1u);
        x = x * 1664525u + 1013904223u;
    }
    out[i] = acc;
}
