// __constant__ memory the host code fills with cudaMemcpyToSymbol (tests/trace/test_constants.py):
// a convolution's filter, a templated mask, a namespaced table with an initializer, a scalar.
#define R 8
__constant__ float d_Kernel[2 * R + 1];
template <typename T> __constant__ T mask[10];
namespace tabs { __constant__ int lut[4] = {1, 2, 3, 4}; }
__constant__ float scale;

__global__ void conv_rows(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float s = 0.0f;
    for (int k = -R; k <= R; ++k) {
        int j = min(max(i + k, 0), n - 1);
        s += in[j] * d_Kernel[R + k];
    }
    out[i] = s * scale;
}

__global__ void masked(const float* in, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * mask<float>[i % 10] + tabs::lut[i % 4];
}
