// Compute-bound kernels (GA405): the launch's time is its arithmetic, not its memory traffic.
// Three spellings of precise math in a loop (a powf over all pairs, a device function of sinf
// and cosf, a macro of expf and divisions), and memory-bound kernels that stay silent.
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding (GA206 and
// GA305 on the silent kernels: one element per thread, neighbours' loads other threads repeat).

// all pairs: inverse-distance weights with a per-thread power (the AIDW interpolation)
__global__ void weights(const float* __restrict__ px, const float* __restrict__ py,
                        const float* __restrict__ pv, const float* __restrict__ qx,
                        const float* __restrict__ qy, float* __restrict__ out, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    float x = qx[i], y = qy[i];
    float alpha = 1.5f + 0.25f * (i & 3);
    float sum = 0.f, acc = 0.f;
    for (int j = 0; j < n; j++) {
        float d = (x - px[j]) * (x - px[j]) + (y - py[j]) * (y - py[j]);
        float t = 1.f / powf(d, alpha);  // expect: GA405
        sum += t;
        acc += pv[j] * t;
    }
    out[i] = acc / sum;
}

// a periodogram's sums through a device function of sinf and cosf
__device__ float wave(float t, float w, float* c) {
    float s = sinf(w * t);
    *c = cosf(w * t);
    return s;
}

__global__ void phases(const float* __restrict__ t, const float* __restrict__ y,
                       const float* __restrict__ freq, float* __restrict__ power, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    float w = freq[i];
    float ss = 0.f, cc = 0.f;
    for (int j = 0; j < n; j++) {
        float c;
        float s = wave(t[j], w, &c);  // expect: GA405
        ss += y[j] * s;
        cc += y[j] * c;
    }
    power[i] = ss * ss + cc * cc;
}

// a bilateral-style filter: a macro of expf and divisions by loop-invariant variances
#define GAUSS(d2, var) expf(-(d2) / (2.f * (var)))
__global__ void gauss(const float* __restrict__ in, float* __restrict__ out, int w, int h,
                      float var_i, float var_s) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float c = in[y * w + x], num = 0.f, den = 0.f;
    for (int dy = -4; dy <= 4; dy++)
        for (int dx = -4; dx <= 4; dx++) {
            int xx = min(max(x + dx, 0), w - 1), yy = min(max(y + dy, 0), h - 1);
            float v = in[yy * w + xx];  // expect: GA305
            float k = GAUSS((v - c) * (v - c), var_i) * GAUSS((float)(dx * dx + dy * dy), var_s);  // expect: GA405
            num += k * v;
            den += k;
        }
    out[y * w + x] = num / den;
}

// memory-bound: a streaming copy
__global__ void copy(const float4* __restrict__ x, float4* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) y[i] = x[i];
}

// memory-bound: one precise expf and a division per element read and written
__global__ void sigmoid(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    if (i < n) y[i] = 1.f / (1.f + expf(-x[i]));
}

// memory-bound: a five-point stencil
__global__ void stencil(const float* __restrict__ in, float* __restrict__ out, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
    int i = y * w + x;
    out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
}
