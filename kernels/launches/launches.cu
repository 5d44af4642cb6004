// GA501 case: many short launches. `// expect: GAxxx` marks the line where gpuadvise's rules must
// report a finding.
//
// A small particle system advanced one time step per launch, as seed 004's simulation launched
// one kernel per phase and iteration: 16896 particles (132 CTAs of 128 threads, one per SM of an
// H100) and 1000 steps per sequence (case.toml: repeat = 1000). Each launch moves 270 KB, a
// fraction of a microsecond at 3 TB/s, while the host needs a few microseconds to submit it: the
// GPU mostly waits for the next launch. Capturing the 1000 launches once in a CUDA graph and
// replaying it takes one host call per sequence (seed 004: 192 ms -> 139 ms on an RTX 2060).
//
// step_fused does the same 1000 steps in one launch (step_fused.toml: steps = 1000, repeat = 1):
// each particle's steps read only what the same thread wrote, so the launches fuse into a loop.
// Both compute bit-identical results (dv = -g dt is passed in, so no expression is contracted
// differently).

extern "C" __global__ void step(float* __restrict__ pos, float* __restrict__ vel,  // expect: GA501
                                float dv, float dt, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = vel[i] + dv;
        vel[i] = v;
        pos[i] += v * dt;
    }
}

extern "C" __global__ void step_fused(float* __restrict__ pos, float* __restrict__ vel, float dv,
                                      float dt, unsigned n, unsigned steps) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float p = pos[i], v = vel[i];
        for (unsigned s = 0; s < steps; ++s) {
            v = v + dv;
            p += v * dt;
        }
        vel[i] = v;
        pos[i] = p;
    }
}
