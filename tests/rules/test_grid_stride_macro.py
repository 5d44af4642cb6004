"""A grid-stride loop however spelled, a file's function-like macro included (HeCBench's
``FOR_KERNEL_LOOP``): GA206's and GA208's one-wave launch both read it."""

from __future__ import annotations

from gpuadvise.rules.grid_stride import is_grid_stride
from gpuadvise.source.text import find_kernel_source

MACRO = """
#define FOR_KERNEL_LOOP(i, n) \\
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)
#define SQUARE(x) ((x) * (x))
__global__ void count(const int* in, int* out, int n) {
    FOR_KERNEL_LOOP(i, n) { atomicAdd(out + (in[i] & 7), 1); }
}
__global__ void squares(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = SQUARE(in[i]);
}
__global__ void strided(const int* in, int* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = in[i];
}
"""


def test_a_macro_loop_over_the_grid_is_a_grid_stride_loop(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(MACRO)

    def ks(name: str):
        found = find_kernel_source(cu, name)
        assert found is not None
        return found

    assert is_grid_stride(ks("count"))
    assert is_grid_stride(ks("strided"))
    # a macro that neither loops nor reads gridDim does not make one
    assert not is_grid_stride(ks("squares"))
