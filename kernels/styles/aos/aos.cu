// Array-of-structures field walks in other people's spellings: each thread updates a few fields
// of its own 32-byte record, so a warp's access to one field strides by the record size (GA301:
// structure of arrays); narrow int fields each in a word of its own (GA302: pack them). The SoA
// version is correct and must stay silent.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

struct Particle {
    float x, y, z, vx, vy, vz, mass, charge;  // 32 bytes
};

// p[i].field, blockDim indexing, a grid-stride loop
__global__ void aos_move(Particle* __restrict__ p, float dt, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        p[i].x += p[i].vx * dt;  // expect: GA301, GA303
        p[i].y += p[i].vy * dt;  // expect: GA303
        p[i].z += p[i].vz * dt;  // (GA301: the same array of structures, reported at the first line)
    }
}

// float4 members read through a reference helper, cooperative groups' grid rank, `k`
struct Body {
    float4 pos;  // x, y, z, w = mass
    float4 vel;
};
__device__ __forceinline__ Body& body(Body* b, unsigned k) { return b[k]; }
__global__ void aos_body(Body* __restrict__ bodies, float dt, unsigned count) {
    cg::grid_group grid = cg::this_grid();
    for (unsigned k = grid.thread_rank(); k < count; k += grid.size()) {
        Body& b = body(bodies, k);
        b.pos.x += b.vel.x * dt;  // expect: GA301
    }
}

// narrow int fields of a cell, one 32-bit word each, read one by one (GA302), a macro index
struct Cell {
    int type, age, alive, flags;  // each holds a value below 64
    float energy, food, temp, pad;
};
#define IDX (blockIdx.x * blockDim.x + threadIdx.x)
__global__ void aos_cells(const Cell* __restrict__ cells, unsigned* __restrict__ code, int n) {
    for (int i = IDX; i < n; i += blockDim.x * gridDim.x) {
        code[i] = ((cells[i].type & 3) << 9) | ((cells[i].age & 63) << 3) | ((cells[i].alive & 1) << 2) | (cells[i].flags & 3);  // expect: GA301, GA302, GA303
    }
}

// correct: structure of arrays
__global__ void soa_move(float* __restrict__ x, float* __restrict__ y, float* __restrict__ z,
                         const float* __restrict__ vx, const float* __restrict__ vy,
                         const float* __restrict__ vz, float dt, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        x[i] += vx[i] * dt;
        y[i] += vy[i] * dt;
        z[i] += vz[i] * dt;
    }
}
