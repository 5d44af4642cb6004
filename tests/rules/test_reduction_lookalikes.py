"""Shared-memory code that looks like a reduction tree and is not one (issue 27): a sort's
compare-and-swap with strides that halve or double (three spellings) must not be called an
interleaved reduction (GA202) or a reduction's idle half (GA204); trees that each warp runs on its
own 32 values (three spellings) are sequential, not interleaved, and the advice is the warp
shuffles of GA205 (or GA203's race when nothing synchronizes the warp). The emulator's trace
decides: a combine folds a partner word into the thread's own, an exchange writes both."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from bundlekit import write_bundle
from rulekit import analyze, reduction_launch, run_rule

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

KERNELS = {
    # cuda-samples bitonic style: Comparator on key/val pairs, stride halving within a size loop
    "bitonic_cmp": (
        """
__device__ inline void Comparator(int &keyA, int &valA, int &keyB, int &valB, unsigned dir) {
    int t;
    if ((keyA > keyB) == dir) {
        t = keyA; keyA = keyB; keyB = t;
        t = valA; valA = valB; valB = t;
    }
}
__global__ void bitonic_cmp(const int* in, int* out, unsigned n) {
    __shared__ int s_key[512];
    __shared__ int s_val[512];
    const int* d = in + blockIdx.x * 512;
    s_key[threadIdx.x] = d[threadIdx.x];
    s_val[threadIdx.x] = threadIdx.x;
    s_key[threadIdx.x + 256] = d[threadIdx.x + 256];
    s_val[threadIdx.x + 256] = threadIdx.x + 256;
    for (unsigned size = 2; size < 512; size <<= 1) {
        unsigned ddd = (threadIdx.x & (size / 2)) != 0;
        for (unsigned stride = size / 2; stride > 0; stride >>= 1) {
            __syncthreads();
            unsigned pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
            Comparator(s_key[pos], s_val[pos], s_key[pos + stride], s_val[pos + stride], ddd);
        }
    }
    for (unsigned stride = 256; stride > 0; stride >>= 1) {
        __syncthreads();
        unsigned pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
        Comparator(s_key[pos], s_val[pos], s_key[pos + stride], s_val[pos + stride], 1);
    }
    __syncthreads();
    out[blockIdx.x] = s_key[threadIdx.x] + s_val[threadIdx.x + 256];
}
""",
        256,
    ),
    # xor-partner bitonic (ixj = tid ^ j), one element per thread
    "bitonic_xor": (
        """
__global__ void bitonic_xor(const int* in, int* out, unsigned n) {
    __shared__ float sh[256];
    unsigned tid = threadIdx.x;
    sh[tid] = in[blockIdx.x * 256 + tid];
    __syncthreads();
    for (unsigned k = 2; k <= 256; k *= 2) {
        for (unsigned j = k >> 1; j > 0; j >>= 1) {
            unsigned ixj = tid ^ j;
            if (ixj > tid) {
                float a = sh[tid], b = sh[ixj];
                if (((tid & k) == 0) == (a > b)) { sh[tid] = b; sh[ixj] = a; }
            }
            __syncthreads();
        }
    }
    if (tid == 0) out[blockIdx.x] = (int)sh[255];
}
""",
        256,
    ),
    # odd-even merge style with a template size and a swap helper
    "oddeven_tpl": (
        """
template <typename T> __device__ void cswap(T& a, T& b) { if (a > b) { T t = a; a = b; b = t; } }
template <int N>
__global__ void oddeven_tpl(const int* in, int* out, unsigned n) {
    __shared__ int v[N];
    int t = threadIdx.x;
    v[t] = in[blockIdx.x * N + t];
    __syncthreads();
    for (int size = 2; size <= N; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            int partner = t ^ stride;
            if (partner > t) cswap(v[t], v[partner]);
            __syncthreads();
        }
    out[blockIdx.x] = v[0];
}
template __global__ void oddeven_tpl<256>(const int*, int*, unsigned);
""",
        256,
    ),
    # per-warp tree, halving strides, shared memory (the spelling)
    "warp_tree_vid": (
        """
__global__ void warp_tree_vid(const int* in, int* out, unsigned n) {
    __shared__ volatile int sdata[256];
    unsigned tid = threadIdx.x, vid = tid & 31;
    int beta = in[blockIdx.x * 256 + tid];
    sdata[tid] = beta;
    for (int i = 16; i >= 1; i /= 2) {
        if (vid < i) { int temp = sdata[tid + i]; beta += temp; sdata[tid] = beta; }
    }
    if (vid == 0) atomicAdd(out + blockIdx.x, beta);
}
""",
        256,
    ),
    "warp_tree_lane": (
        """
#define WARP 32
__global__ void warp_tree_lane(const int* in, int* out, unsigned n) {
    __shared__ int buf[256];
    const int lane = threadIdx.x % WARP;
    buf[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncwarp();
    for (int off = WARP / 2; off > 0; off >>= 1) {
        if (lane < off) buf[threadIdx.x] += buf[threadIdx.x + off];
        __syncwarp();
    }
    if (lane == 0) atomicAdd(&out[blockIdx.x], buf[threadIdx.x]);
}
""",
        256,
    ),
    "warp_tree_rows": (
        """
__global__ void warp_tree_rows(const int* in, int* out, unsigned n) {
    __shared__ int rows[8][32];
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    rows[w][l] = in[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    for (int s = 16; s > 0; s /= 2) {
        if (l < s) rows[w][l] = rows[w][l] + rows[w][l + s];
        __syncthreads();
    }
    if (l == 0) atomicAdd(out + blockIdx.x, rows[w][0]);
}
""",
        256,
    ),
}

SORTS = ["bitonic_cmp", "bitonic_xor", "oddeven_tpl"]
WARP_TREES = ["warp_tree_vid", "warp_tree_lane", "warp_tree_rows"]
RULES = ("GA202", "GA203", "GA204", "GA205")


def _kernel(name: str) -> str:
    return "oddeven_tpl<256>" if name == "oddeven_tpl" else name


@cache
def _findings(name: str, src: Path) -> dict[str, list]:
    a = analyze(src, _kernel(name), trace=False)
    return {r: run_rule(a, r) for r in RULES}


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory):
    """Each kernel's findings, the six kernels in one file (bundlekit: one compile and one
    disassembly), each launched as ``kernel_case`` would with its block and n = 8192."""
    src = write_bundle(
        tmp_path_factory.mktemp("lookalikes"),
        {_kernel(name): code for name, (code, _) in KERNELS.items()},
        {
            _kernel(name): reduction_launch(block=block, n=8192)
            for name, (_, block) in KERNELS.items()
        },
    )
    return lambda name: _findings(name, src)


@pytest.mark.parametrize("name", SORTS)
def test_a_sorts_compare_and_swap_is_no_reduction(found, name):
    got = found(name)
    assert got["GA202"] == [] and got["GA204"] == [] and got["GA205"] == []
    assert got["GA203"] == []


@pytest.mark.parametrize("name", WARP_TREES)
def test_per_warp_trees_are_sequential_and_get_shuffles(found, name):
    got = found(name)
    assert got["GA202"] == [] and got["GA204"] == []
    synced = name != "warp_tree_vid"  # volatile steps with no __syncwarp: GA203's race
    (f,) = got["GA205"] if synced else got["GA203"]
    assert got["GA203" if synced else "GA205"] == []
    assert "__shfl" in f.message or "__shfl" in (f.variant.description if f.variant else "")
    assert "8 warps" in f.message
