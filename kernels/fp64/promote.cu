// FP64 promotion (GA404): float code that C++ computes in double because of a double literal or
// a double function. Three spellings, and float code written right (silent). Then the kernel
// naming `double` itself between float inputs and float outputs (HeCBench zeropoint's shape:
// double locals and casts of floats, no double parameter; the fix makes the whole body float):
// three spellings, and a float kernel that names double in a comment only (silent).
// `// expect: GAxxx` marks the line where gpuadvise's rules must report a finding.
#include <cmath>

// a double literal times a float
__global__ void scale2(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.1 * x[i] + 0.3;  // expect: GA404
}

// a double division around a float function
__global__ void sigmoid(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 1.0 / (1.0 + expf(-v));  // expect: GA404
    }
}

// a double power of a float sum (pow(float, double) is the double pow)
#define DIM 8
__global__ void norm(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.f;
    for (int k = 0; k < DIM; ++k) s += x[i * DIM + k] * x[i * DIM + k];  // expect: GA303
    y[i] = pow(s, 0.5);  // expect: GA404
}

// correct: float literals and float functions
__global__ void sigmoid_f(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.0f / (1.0f + expf(-x[i])) + sqrtf(2.0f);
}

// a double local of a float, a double literal
__global__ void local_double(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        double v = x[i];  // expect: GA404
        y[i] = v * v + 0.25 * v;
    }
}

// a C++ cast of a float, divided by an integer in double
__global__ void cast_double(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = static_cast<double>(x[i]) / (n % 7 + 3) + (double)x[i];  // expect: GA404
}

// one declaration of two double declarators, a function of one
__global__ void span_double(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const double lo = x[i] - 1, hi = x[i] + 1;  // expect: GA404
    y[i] = sqrt(hi * hi + lo * lo);
}

// correct: float locals and a float cast (a double in this comment only)
__global__ void local_float(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v * v + 0.25f * static_cast<float>(n);
    }
}
