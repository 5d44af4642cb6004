// FP64 promotion of integers (GA404): bytes times a double literal are converted to double
// (I2F.F64), computed on the FP64 pipe and brought back to float (F2F.F32.F64) for a float
// result. Three spellings (one line, a macro constant, a template helper), and the same blend
// written in float (silent).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.

// one line: a double literal times a byte, the sum kept in a float
__global__ void blend(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b,
                      unsigned char* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float th = 0.92 * a[i] + 0.24 * (a[i] - b[i]);  // expect: GA404
    y[i] = fmaxf(th, 20.f);
}

// a macro constant
#define DECAY 0.75
__global__ void blend_macro(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b,
                            unsigned char* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = DECAY * a[i] + (1 - DECAY) * b[i];  // expect: GA404
        y[i] = fminf(v, 255.f);
    }
}

// a template helper: the double literal is in the helper, the promotion at its call
template <typename T>
__device__ inline float half_of(T v) { return v * 0.5; }

__global__ void blend_helper(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b,
                             unsigned char* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = half_of(a[i]) + half_of<unsigned char>(b[i]);  // expect: GA404
    y[i] = fminf(v, 255.f);
}

// correct: the same blend in float
__global__ void blend_f(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b,
                        unsigned char* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float th = 0.92f * a[i] + 0.24f * (a[i] - b[i]);
    y[i] = fmaxf(th, 20.f);
}
