// Shared tiles in other spellings (written for gpuadvise's tests) for GA307: a 5-point stencil
// whose fill walks the window with two loops, the common "centre plus halo" fill (several
// stores: detected, not rewritten), a tile each thread reads back alone (no reuse: silent), and a
// tile read across two barriers (detected, not rewritten).

#define BX 32
#define BY 8

__global__ void cross5_loops(const float* in, float* out, int w, int h) {
    __shared__ float win[BY + 2][BX + 2];
    const int bx = blockIdx.x * BX, by = blockIdx.y * BY;
    for (int r = threadIdx.y; r < BY + 2; r += BY) {
        for (int c = threadIdx.x; c < BX + 2; c += BX) {
            int gx = min(max(bx + c - 1, 0), w - 1);
            int gy = min(max(by + r - 1, 0), h - 1);
            win[r][c] = in[gy * w + gx];
        }
    }
    __syncthreads();
    const int x = bx + threadIdx.x, y = by + threadIdx.y;
    if (x < w && y < h) {
        const int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
        out[y * w + x] = win[ty][tx] * 0.5f +
                         0.125f * (win[ty - 1][tx] + win[ty + 1][tx] + win[ty][tx - 1] + win[ty][tx + 1]);
    }
}

__global__ void cross5_halo(const float* in, float* out, int w, int h) {
    __shared__ float s[BY + 2][BX + 2];
    const int x = min(blockIdx.x * BX + threadIdx.x, w - 1);
    const int y = min(blockIdx.y * BY + threadIdx.y, h - 1);
    const int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    s[ty][tx] = in[y * w + x];
    if (threadIdx.x == 0) s[ty][0] = in[y * w + max(x - 1, 0)];
    if (threadIdx.x == BX - 1) s[ty][BX + 1] = in[y * w + min(x + 1, w - 1)];
    if (threadIdx.y == 0) s[0][tx] = in[max(y - 1, 0) * w + x];
    if (threadIdx.y == BY - 1) s[BY + 1][tx] = in[min(y + 1, h - 1) * w + x];
    __syncthreads();
    out[y * w + x] = s[ty][tx] * 0.5f +
                     0.125f * (s[ty - 1][tx] + s[ty + 1][tx] + s[ty][tx - 1] + s[ty][tx + 1]);
}

__global__ void own_word(const float* in, float* out, int w, int h) {
    __shared__ float s[BY][BX];
    const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
    s[threadIdx.y][threadIdx.x] = in[y * w + x];
    __syncthreads();
    out[y * w + x] = 2.0f * s[threadIdx.y][threadIdx.x];
}

__global__ void two_barriers(const float* in, float* out, int w, int h) {
    __shared__ float win[BY + 2][BX + 2];
    const int bx = blockIdx.x * BX, by = blockIdx.y * BY;
    for (int r = threadIdx.y; r < BY + 2; r += BY) {
        for (int c = threadIdx.x; c < BX + 2; c += BX) {
            int gx = min(max(bx + c - 1, 0), w - 1);
            int gy = min(max(by + r - 1, 0), h - 1);
            win[r][c] = in[gy * w + gx];
        }
    }
    __syncthreads();
    const int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    const float v = win[ty - 1][tx] + win[ty + 1][tx] + win[ty][tx - 1] + win[ty][tx + 1];
    __syncthreads();
    out[(by + threadIdx.y) * w + bx + threadIdx.x] = v;
}
