// Seed 004's cellular simulation (the "Badger" of Space Engineers' parallelization study, phase 3),
// ported to CUDA: one thread per cell of a w x h grid, 16x16 blocks. Each cell reads four small
// fields of its own and of its 24 neighbours (a 5x5 window, clipped at the grid's edge):
//     same  = neighbours of the same type
//     mates = neighbours of the same type, the other gender and an age of at least 16
// and writes its next state as one word, in the same format for every kernel (bytes, low first):
//     next = type' | gender << 8 | (mates > 0) << 16 | age' << 24
// where the cell survives (type' = type, age' = age + 1 unless it moved this frame, at most 255)
// when it is not empty and 2 <= same <= 12, and else becomes empty (type' = age' = 0).
// The kernels differ in the layout of the cells in global memory, the seed's steps:
//   cells_fields     AoS, 11 x 32-bit fields per cell (44 bytes), each small field an int
//   cells_packed     AoS, the four small fields packed in one word, a uchar4 (32-byte cells)
//   cells_soa        SoA: the packed words in an array of their own
//   cells_soa_tiled  SoA, and the 20x20 window of the block staged in shared memory
// Given the same cells (in each kernel's layout) they write the same words; the random fill of a
// launch spec is bytes of each layout, so each kernel gets cells of its own there.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

#define TILE 16
#define R 2                  // neighbourhood radius: 5x5
#define WIN (TILE + 2 * R)   // 20: the block's window
#define PITCH 48             // shared row pitch: a warp's two rows of 16 lie 16 banks apart

struct Cell {  // the seed's cell before packing: every field 32 bits
    int type, gender, moved, age;  // type: 2 bits, gender and moved: 1, age: 8
    float energy, food;
    int lsa, target_x, target_y;
    float trait0, trait1;
};

struct PackedCell {  // 32 bytes: the small fields in one word (type, gender, moved, age), the rest
    uchar4 info;
    float energy, food;
    int lsa, target_x, target_y;
    float trait0, trait1;
};

__device__ __forceinline__ uchar4 pack(int type, int gender, int moved, int age) {
    return make_uchar4(type, gender, moved, age);
}

__device__ __forceinline__ int type_of(uchar4 info) { return info.x & 3; }
__device__ __forceinline__ int gender_of(uchar4 info) { return info.y & 1; }
__device__ __forceinline__ int moved_of(uchar4 info) { return info.z & 1; }
__device__ __forceinline__ int age_of(uchar4 info) { return info.w; }

__device__ __forceinline__ unsigned next_state(uchar4 self, int same, int mates) {
    const int type = type_of(self), age = age_of(self);
    const bool alive = type != 0 && same >= 2 && same <= 12;
    const int next_age = alive ? (moved_of(self) ? age : min(age + 1, 255)) : 0;
    return (alive ? type : 0) | gender_of(self) << 8 | (mates > 0) << 16 | (unsigned)next_age << 24;
}

// Counts a neighbour (its fields, unmasked) into same/mates.
__device__ __forceinline__ void meet(uchar4 self, int type, int gender, int age, int& same,
                                     int& mates) {
    const bool kin = (type & 3) == type_of(self);
    same += kin;
    mates += kin && (gender & 1) != gender_of(self) && (age & 255) >= 16;
}

extern "C" __global__ void cells_fields(const Cell* __restrict__ cells,
                                        unsigned* __restrict__ next, int w, int h) {
    const int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x >= w || y >= h) return;
    const Cell& c = cells[y * w + x];
    const uchar4 self = pack(c.type, c.gender, c.moved, c.age);  // expect: GA301, GA302
    int same = 0, mates = 0;
    for (int dy = -R; dy <= R; ++dy) {
        for (int dx = -R; dx <= R; ++dx) {
            const int nx = x + dx, ny = y + dy;
            if ((dx == 0 && dy == 0) || nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
            const Cell& n = cells[ny * w + nx];
            meet(self, n.type, n.gender, n.age, same, mates);  // expect: GA302, GA305, GA104
        }
    }
    next[y * w + x] = next_state(self, same, mates);
}

extern "C" __global__ void cells_packed(const PackedCell* __restrict__ cells,
                                        unsigned* __restrict__ next, int w, int h) {
    const int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x >= w || y >= h) return;
    const uchar4 self = cells[y * w + x].info;  // expect: GA301
    int same = 0, mates = 0;
    for (int dy = -R; dy <= R; ++dy) {
        for (int dx = -R; dx <= R; ++dx) {
            const int nx = x + dx, ny = y + dy;
            if ((dx == 0 && dy == 0) || nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
            const uchar4 n = cells[ny * w + nx].info;  // expect: GA305
            meet(self, type_of(n), gender_of(n), age_of(n), same, mates);  // expect: GA104
        }
    }
    next[y * w + x] = next_state(self, same, mates);
}

extern "C" __global__ void cells_soa(const uchar4* __restrict__ info,
                                     unsigned* __restrict__ next, int w, int h) {
    const int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x >= w || y >= h) return;
    const uchar4 self = info[y * w + x];
    int same = 0, mates = 0;
    for (int dy = -R; dy <= R; ++dy) {
        for (int dx = -R; dx <= R; ++dx) {
            const int nx = x + dx, ny = y + dy;
            if ((dx == 0 && dy == 0) || nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
            const uchar4 n = info[ny * w + nx];  // expect: GA305
            meet(self, type_of(n), gender_of(n), age_of(n), same, mates);  // expect: GA104, GA405
        }
    }
    next[y * w + x] = next_state(self, same, mates);
}

// Each cell's word is read from global memory once per block (400 words for 256 cells) instead
// of 25 times.
extern "C" __global__ void cells_soa_tiled(const uchar4* __restrict__ info,
                                           unsigned* __restrict__ next, int w, int h) {
    __shared__ uchar4 win[WIN][PITCH];
    const int x0 = blockIdx.x * TILE - R, y0 = blockIdx.y * TILE - R;
    const int lane = threadIdx.x + (threadIdx.y % 2) * TILE, warp = threadIdx.y / 2;
    for (int wy = warp; wy < WIN && lane < WIN; wy += TILE * TILE / 32) {  // a row per warp
        const int gx = x0 + lane, gy = y0 + wy;
        const bool inside = gx >= 0 && gy >= 0 && gx < w && gy < h;
        win[wy][lane] = inside ? info[gy * w + gx] : uchar4{};  // outside: never read
    }
    __syncthreads();
    const int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x >= w || y >= h) return;
    const uchar4 self = win[threadIdx.y + R][threadIdx.x + R];  // expect: GA307
    int same = 0, mates = 0;
    for (int dy = -R; dy <= R; ++dy) {
        for (int dx = -R; dx <= R; ++dx) {
            const int nx = x + dx, ny = y + dy;
            if ((dx == 0 && dy == 0) || nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
            const uchar4 n = win[threadIdx.y + R + dy][threadIdx.x + R + dx];
            meet(self, type_of(n), gender_of(n), age_of(n), same, mates);  // expect: GA104, GA405
        }
    }
    next[y * w + x] = next_state(self, same, mates);
}
