"""GA202 interleaved-reduction (nvcc, no GPU): the two interleaved forms of seed 003's reduction
(``reduce1``'s ``tid % (2*s)``, ``reduce2``'s ``index = 2*s*tid``) and small kernels written
here; the loops that must stay silent (sequential addressing, a scan that doubles its stride);
the estimate's inputs counted by hand; and the sequential-addressing diff, which must apply,
compile, silence the rule and keep the block sums (on the emulator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bundlekit import write_bundle
from rulekit import (
    KERNELS,
    analyze,
    ev,
    kernel_case,
    reduction_block_sums,
    reduction_launch,
    run_rule,
    source_line,
)

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

REDUCE = KERNELS / "reduction" / "reduce.cu"


def ga202(source: Path, kernel: str) -> tuple[Any, list[Any]]:
    a = analyze(source, kernel, trace=False)
    return a, run_rule(a, "GA202")


# ---------------------------------------------------------------------------------------------
# The reduction case


def test_divergent_modulo_form_in_reduce1():
    _, (f,) = ga202(REDUCE, "reduce1")
    assert f.line == source_line(REDUCE, "if (tid % (2 * s) == 0) {  // expect: GA202")
    e = ev(f)
    assert e == {"pattern": "modulo", "loop_line": f.line - 1}
    assert "divergent branch `tid % (2*s)` in a loop doubling s" in f.message
    assert "s halving from blockDim.x / 2, `tid < s`" in f.message
    est = f.estimated_speedup
    # 256 threads: s = 1..16 leave an active lane in all 8 warps (t = 0, 32, ... are active),
    # s = 32, 64, 128 in 4, 2, 1: 5 x 8 + 4 + 2 + 1 = 47 warp-iterations; sequential: s = 128
    # .. 1 keep ceil(s / 32) warps busy: 4 + 2 + 1 x 6 = 12
    assert est.kind == "none" and est.speedup is None
    assert est.inputs == {"block": 256, "warp_iterations_before": 47, "warp_iterations_after": 12}


def test_strided_index_form_in_reduce2():
    _, (f,) = ga202(REDUCE, "reduce2")
    assert f.line == source_line(REDUCE, "unsigned index = 2 * s * tid;  // expect: GA202")
    assert ev(f) == {"pattern": "strided-index", "loop_line": f.line - 1}
    assert "strided index `index = 2*s*tid`" in f.message
    # the working lanes are packed (128, 64, ... threads): 4 + 2 + 1 x 6 = 12, as sequential
    assert f.estimated_speedup.inputs["warp_iterations_before"] == 12
    assert f.estimated_speedup.inputs["warp_iterations_after"] == 12


@pytest.mark.parametrize("kernel", ["reduce3", "reduce4", "reduce5", "reduce6<256>"])
def test_sequential_reductions_are_silent(kernel):
    assert ga202(REDUCE, kernel)[1] == []


@pytest.mark.parametrize("kernel", ["reduce1", "reduce2"])
def test_variant_is_sequential_addressing_and_keeps_the_sums(kernel, tmp_path):
    _, (f,) = ga202(REDUCE, kernel)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff
    (tmp_path / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    patched = tmp_path / "reduce.cu"
    patched.write_text(apply_unified_diff(REDUCE.read_text(), v.diff))
    body = patched.read_text().split(f"void {kernel}(")[1].split("\n}\n")[0]
    assert "for (unsigned s = blockDim.x / 2; s > 0; s >>= 1)" in body
    assert "tid < s" in body and "2 * s" not in body
    a, found = ga202(patched, kernel)
    assert found == []
    got, want = reduction_block_sums(a, 4, 256)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# Small kernels

ALIAS_CONST_BOUND = """\
    __global__ void r(const int* in, int* out, unsigned n) {
        __shared__ int buf[128];
        unsigned t = threadIdx.x;
        buf[t] = in[blockIdx.x * 128 + t];
        __syncthreads();
        for (unsigned s = 1; s < 128; s <<= 1) {
            if (t % (2 * s) == 0) buf[t] += buf[t + s];
            __syncthreads();
        }
        if (t == 0) out[blockIdx.x] = buf[0];
    }
"""


def test_a_thread_index_alias_and_a_constant_bound(tmp_path):
    src = kernel_case(tmp_path, ALIAS_CONST_BOUND, "r", block=128, n=512)
    _, (f,) = ga202(src, "r")
    assert f.line == source_line(src, "if (t % (2 * s) == 0)")
    assert ev(f)["pattern"] == "modulo"
    # the bound 128 is the block: s = 1..16 keep all 4 warps, s = 32 two, s = 64 one:
    # 5 x 4 + 2 + 1 = 23; sequential s = 64 .. 1: 2 + 1 x 6 = 8
    assert f.estimated_speedup.inputs == {
        "block": 128,
        "warp_iterations_before": 23,
        "warp_iterations_after": 8,
    }
    patched = tmp_path / "k.cu"
    patched.write_text(apply_unified_diff(src.read_text(), f.variant.diff))
    assert "for (unsigned s = 128 / 2; s > 0; s >>= 1)" in patched.read_text()
    a, found = ga202(patched, "r")
    assert found == []
    got, want = reduction_block_sums(a, 4, 128)
    np.testing.assert_array_equal(got, want)


SILENT = {
    # Hillis-Steele scan: the stride doubles, but every thread works at its own index
    "scan": """\
        __global__ void scan(const int* in, int* out, unsigned n) {
            __shared__ int x[256];
            unsigned tid = threadIdx.x;
            x[tid] = in[blockIdx.x * 256 + tid];
            __syncthreads();
            for (unsigned s = 1; s < blockDim.x; s *= 2) {
                int v = tid >= s ? x[tid - s] : 0;
                __syncthreads();
                x[tid] += v;
                __syncthreads();
            }
            if (tid == 255) out[blockIdx.x] = x[tid];
        }
    """,
    # a stride times a loop counter, not a thread index
    "counter": """\
        __global__ void counter(const int* in, int* out, unsigned n) {
            int acc = 0;
            for (unsigned s = 1; s < 64; s *= 2) {
                unsigned k = blockIdx.x;
                unsigned j = 2 * s * k;
                acc += in[j % n];
            }
            if (threadIdx.x == 0) out[blockIdx.x] = acc;
        }
    """,
}


@pytest.fixture(scope="module")
def silent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SILENT's kernels in one file (bundlekit), each launched as ``kernel_case`` would."""
    launches = dict.fromkeys(SILENT, reduction_launch())
    return write_bundle(tmp_path_factory.mktemp("ga202-silent"), SILENT, launches)


@pytest.mark.parametrize("kernel", sorted(SILENT))
def test_loops_that_double_without_interleaving_are_silent(kernel, silent):
    assert ga202(silent, kernel)[1] == []
