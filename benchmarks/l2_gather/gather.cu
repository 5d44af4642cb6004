// Seed 002's wide-footprint gather (thread-group tiling for L2 locality), for benchmarks/l2_gather.
//
// out[y][x] = sum of in[clamp(y + dy)][clamp(x + dx)] for dy, dx in -R, -R + S, ..., R: each pixel
// reads a sparse (2R/S + 1)^2 neighbourhood of a W x H float image, clamped to the image edge, and
// writes one float. The launch order is a compile-time choice: GATHER_KERNEL(name, block index)
// instantiates the kernel with a block index expression. run.py appends one instance per tiled
// order, whose block index is gpuadvise's own remap (gpuadvise.model.l2.tiled_block_index_cuda),
// so the automatic transform of the rule is what runs here. trace_synth.py reproduces this address
// arithmetic exactly for the model.

#define GATHER_KERNEL(NAME, BLOCK_INDEX)                                                   \
    extern "C" __global__ void NAME(const float* __restrict__ in, float* __restrict__ out, \
                                    int W, int H, int R, int S)                            \
    {                                                                                      \
        const uint2 b = BLOCK_INDEX;                                                       \
        const int x = (int)(b.x * blockDim.x + threadIdx.x);                               \
        const int y = (int)(b.y * blockDim.y + threadIdx.y);                               \
        if (x >= W || y >= H) return;                                                      \
        float acc = 0.0f;                                                                  \
        for (int dy = -R; dy <= R; dy += S) {                                              \
            const int yy = min(max(y + dy, 0), H - 1);                                     \
            const float* row = in + (size_t)yy * W;                                        \
            _Pragma("unroll 3")                                                            \
            for (int dx = -R; dx <= R; dx += S) {                                          \
                const int xx = min(max(x + dx, 0), W - 1);                                 \
                acc += row[xx];                                                            \
            }                                                                              \
        }                                                                                  \
        out[(size_t)y * W + x] = acc;                                                      \
    }

// The hardware order: blockIdx as it comes (x fastest).
GATHER_KERNEL(gather_rm, make_uint2(blockIdx.x, blockIdx.y))
