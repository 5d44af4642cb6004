// Runner test kernels that fail: an illegal address, a device assert, an endless loop.
#include <cassert>
extern "C" __global__ void oob(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i + (1 << 28)] = 1.0f;  // far past the end of the buffer
}
extern "C" __global__ void fails_assert(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(i < 0);
    out[i] = 1.0f;
}
extern "C" __global__ void spin(volatile int* flag, int n) {
    while (flag[0] == 0) {
    }
}
