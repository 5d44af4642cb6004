// Particles advanced by one time step, issue 16's array-of-structures case: 16.7M (2^24)
// particles of a 32-byte struct, `p[i].x += p[i].vx * dt` for x, y and z. Each field access of a
// warp touches 32 sectors where 4 would do, and the stores are read-modify-writes of a quarter of
// each sector's words. particles_soa (particles_soa.toml) is the structure-of-arrays version: on
// an H200 it runs 2.63x faster (docs/data/roofline_probe_h200_2026-11-25.txt).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

struct Particle {
    float x, y, z;
    float vx, vy, vz;
    float mass, charge;
};

__global__ void particles_aos(Particle* p, int n, float dt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) {
        p[i].x += p[i].vx * dt;  // expect: GA301, GA303
        p[i].y += p[i].vy * dt;  // expect: GA303
        p[i].z += p[i].vz * dt;  // (GA301: the same array of structures, reported at the first line)
    }
}

__global__ void particles_soa(float* x, float* y, float* z, const float* vx, const float* vy,
                              const float* vz, int n, float dt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) {
        x[i] += vx[i] * dt;
        y[i] += vy[i] * dt;
        z[i] += vz[i] * dt;
    }
}
