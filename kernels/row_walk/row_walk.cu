// Each thread hashes its own key: a row of 16 words (64 bytes) of which it reads the first 10
// (jenkins-hash's keys + id * 16, 40 of 64 bytes), so consecutive lanes are 64 bytes apart and
// every lane of a request reads its own sector (GA301's thread-per-row walk; the warp uses
// 40 of the 64 bytes of the sectors it touches). Three spellings, then two that are coalesced.
#define ROW 16
#define USED 10
#define MIX(h, v) ((((h) ^ (v)) * 0x01000193u) + ((h) >> 7))

__global__ void hash_pointer(const unsigned* __restrict__ keys, unsigned* __restrict__ out, int n) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    const unsigned* k = keys + id * ROW;
    unsigned h = 0x811c9dc5u;
    for (int w = 0; w < USED; ++w) h = MIX(h, *k++);  // expect: GA301, GA303
    out[id] = h;
}

#define KEY(i, w) keys[(i) * ROW + (w)]
__global__ void hash_macro(const unsigned* __restrict__ keys, unsigned* __restrict__ out, int n) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n) {
        unsigned h = 0x811c9dc5u;
#pragma unroll 1
        for (int w = 0; w < USED; w++) { h = MIX(h, KEY(id, w)); }  // expect: GA301
        out[id] = h;
    }
}

__global__ void hash_lambda(const unsigned* __restrict__ keys, unsigned* __restrict__ out, int n) {
    auto hash_row = [](const unsigned* row, int len) {
        unsigned h = 0x811c9dc5u;
#pragma unroll 1
        for (int w = 0; w < len; ++w) h = MIX(h, row[w]);  // expect: GA301
        return h;
    };
    for (int id = blockIdx.x * blockDim.x + threadIdx.x; id < n; id += gridDim.x * blockDim.x)
        out[id] = hash_row(&keys[(size_t)id * ROW], USED);
}

// silent: the CTA's keys staged through shared memory with coalesced 16-byte loads (rows
// padded to 17 words: conflict-free), each thread hashing its row there
__global__ void hash_staged(const unsigned* __restrict__ keys, unsigned* __restrict__ out, int n) {
    __shared__ unsigned rows[256 * (ROW + 1)];
    int base = blockIdx.x * blockDim.x;
    const uint4* src = reinterpret_cast<const uint4*>(keys + (size_t)base * ROW);
    for (int j = threadIdx.x; j < 256 * ROW / 4; j += blockDim.x) {
        uint4 v = src[j];
        unsigned* d = rows + (j / 4) * (ROW + 1) + (j % 4) * 4;
        d[0] = v.x; d[1] = v.y; d[2] = v.z; d[3] = v.w;  // expect: GA201 (2 rows a warp)
    }
    __syncthreads();
    int id = base + threadIdx.x;
    if (id >= n) return;
    unsigned h = 0x811c9dc5u;
    for (int w = 0; w < USED; ++w) h = MIX(h, rows[threadIdx.x * (ROW + 1) + w]);
    out[id] = h;
}

// silent: the keys stored word-major (word w of key i at w * n + i): every request coalesced
__global__ void hash_word_major(const unsigned* __restrict__ keys, unsigned* __restrict__ out, int n) {
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) return;
    unsigned h = 0x811c9dc5u;
    for (int w = 0; w < USED; ++w) h = MIX(h, keys[w * n + id]);
    out[id] = h;
}
