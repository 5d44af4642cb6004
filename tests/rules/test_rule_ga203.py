"""GA203 warp-synchronous (nvcc, no GPU): seed 003's unrolled last warp (``reduce5``) and small
kernels written here; the code that must stay silent (shuffles, ``__syncwarp()`` between the
steps, a single step, steps of a warp or more apart); the finding's evidence, its severity and
its (absent) estimate; and the shuffle diff, which must apply, compile, silence the rule and keep
the block sums (on the emulator), or be left out when the steps are not the plain form."""

from __future__ import annotations

import shutil
import subprocess
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


def ga203(source: Path, kernel: str) -> tuple[Any, list[Any]]:
    a = analyze(source, kernel, trace=False)
    return a, run_rule(a, "GA203")


# ---------------------------------------------------------------------------------------------
# The reduction case


def test_reduce5_unrolled_last_warp():
    a, (f,) = ga203(REDUCE, "reduce5")
    assert f.line == source_line(REDUCE, "vs[tid] += vs[tid + 32];  // expect: GA203")
    assert f.severity == "error"
    assert ev(f) == {"unrolled_steps": 6, "syncwarp_calls": 0, "arch": "sm_90"}
    steps = next(x for x in f.evidence if x.metric == "unrolled_steps")
    assert (steps.threshold, steps.op) == (2, ">=")
    assert (
        "volatile `vs` (6 unrolled steps, offsets 32, 16, 8, 4, 2, 1, under `if (tid < 32)`)"
        in (f.message)
    )
    est = f.estimated_speedup
    assert est is not None and est.kind == "none" and est.speedup is None
    assert "correctness" in est.method


def test_reduce5_shuffle_diff_applies_and_keeps_the_sums(tmp_path):
    _, (f,) = ga203(REDUCE, "reduce5")
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff
    (tmp_path / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    patched = tmp_path / "reduce.cu"
    patched.write_text(apply_unified_diff(REDUCE.read_text(), v.diff))
    body = patched.read_text().split("void reduce5(")[1].split("\n}\n")[0]
    # the first step folds the upper 32 values in; shuffles from 16 down to 1 do the rest
    assert "int sum = sdata[tid] + sdata[tid + 32];" in body
    assert "for (int offset = 16; offset > 0; offset >>= 1)" in body
    assert "sum += __shfl_down_sync(0xffffffffu, sum, offset);" in body
    assert "if (tid == 0) sdata[0] = sum;" in body
    assert "volatile" not in body and "vs[" not in body
    a, found = ga203(patched, "reduce5")
    assert found == []
    got, want = reduction_block_sums(a, 4, 512)  # two elements per thread
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kernel", ["reduce1", "reduce3", "reduce4", "reduce6<256>"])
def test_kernels_without_the_idiom_are_silent(kernel):
    assert ga203(REDUCE, kernel)[1] == []


# ---------------------------------------------------------------------------------------------
# Small kernels

# a volatile __shared__ array at file scope, no lane guard, five steps from 16 to 1
FILE_SCOPE = """\
    volatile __shared__ int acc[64];
    __global__ void w(const int* in, int* out, unsigned n) {
        unsigned t = threadIdx.x;
        acc[t] = in[blockIdx.x * 32 + t];
        acc[t + 32] = 0;
        acc[t] += acc[t + 16];
        acc[t] += acc[t + 8];
        acc[t] += acc[t + 4];
        acc[t] += acc[t + 2];
        acc[t] += acc[t + 1];
        if (t == 0) out[blockIdx.x] = acc[0];
    }

    __global__ void after(int* out) { out[0] = 0; }
"""


def test_a_file_scope_volatile_array_without_a_guard(tmp_path):
    src = kernel_case(tmp_path, FILE_SCOPE, "w", block=32, n=128)
    _, (f,) = ga203(src, "w")
    assert f.line == source_line(src, "acc[t] += acc[t + 16];")
    assert ev(f)["unrolled_steps"] == 5
    assert "offsets 16, 8, 4, 2, 1, without a lane guard" in f.message
    patched = tmp_path / "k.cu"
    patched.write_text(apply_unified_diff(src.read_text(), f.variant.diff))
    text = patched.read_text()
    # the steps start at 16: the shuffles start from the lane's own value
    assert "int sum = acc[t];" in text and "for (int offset = 16;" in text
    a, found = ga203(patched, "w")
    assert found == []
    got, want = reduction_block_sums(a, 4, 32)
    np.testing.assert_array_equal(got, want)


NOT_PLAIN = """\
    __global__ void np_(const int* in, int* out, unsigned n) {
        __shared__ int s[64];
        unsigned tid = threadIdx.x;
        s[tid] = in[blockIdx.x * 64 + tid];
        __syncthreads();
        if (tid < 32) {
            volatile int* vs = s;
            vs[tid] = vs[tid] + vs[tid + 32];
            vs[tid] = vs[tid] + vs[tid + 16];
            vs[tid] = vs[tid] + vs[tid + 8];
        }
        if (tid == 0) out[blockIdx.x] = s[0];
    }
"""


def test_the_diff_applies_when_the_kernel_ends_the_file(tmp_path):
    code = FILE_SCOPE.split("\n\n    __global__ void after")[0] + "\n"
    src = kernel_case(tmp_path, code, "w", block=32, n=128)
    assert src.read_text().rstrip().endswith("}")
    _, (f,) = ga203(src, "w")
    apply_unified_diff(src.read_text(), f.variant.diff)
    # no phantom empty context line after the file's last line (patch(1) needed fuzz for it)
    hunk = f.variant.diff.rstrip("\n").split("\n")
    assert hunk[-1].strip() not in ("", "+", "-"), hunk[-3:]
    if shutil.which("patch"):
        (tmp_path / "p.diff").write_text(f.variant.diff)
        p = subprocess.run(
            ["patch", "--dry-run", "-F0", str(src), str(tmp_path / "p.diff")],
            capture_output=True,
            text=True,
        )
        assert p.returncode == 0 and "fuzz" not in p.stdout, p.stdout + p.stderr


def test_steps_not_in_the_plain_form_get_advice_without_a_diff(tmp_path):
    src = kernel_case(tmp_path, NOT_PLAIN, "np_", block=64, n=256)
    _, (f,) = ga203(src, "np_")
    assert f.line == source_line(src, "vs[tid] = vs[tid] + vs[tid + 32];")
    assert ev(f)["unrolled_steps"] == 3 and "under `if (tid < 32)`" in f.message
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "__shfl_down_sync" in v.description and "__syncwarp()" in v.description


SILENT = {
    # the same steps, each separated by __syncwarp()
    "synced": """\
        __global__ void synced(const int* in, int* out, unsigned n) {
            __shared__ int s[64];
            unsigned tid = threadIdx.x;
            s[tid] = in[blockIdx.x * 64 + tid];
            __syncthreads();
            if (tid < 32) {
                volatile int* vs = s;
                vs[tid] += vs[tid + 32]; __syncwarp();
                vs[tid] += vs[tid + 16]; __syncwarp();
                vs[tid] += vs[tid + 8]; __syncwarp();
            }
            if (tid == 0) out[blockIdx.x] = s[0];
        }
    """,
    # one step is no unrolled reduction
    "single": """\
        __global__ void single(const int* in, int* out, unsigned n) {
            __shared__ int s[64];
            unsigned tid = threadIdx.x;
            s[tid] = in[blockIdx.x * 64 + tid];
            __syncthreads();
            if (tid < 32) {
                volatile int* vs = s;
                vs[tid] += vs[tid + 16];
            }
            if (tid == 0) out[blockIdx.x] = s[0];
        }
    """,
    # steps a warp or more apart: other warps, not lanes of one
    "wide": """\
        __global__ void wide(const int* in, int* out, unsigned n) {
            __shared__ int s[256];
            unsigned tid = threadIdx.x;
            s[tid] = in[blockIdx.x * 256 + tid];
            __syncthreads();
            if (tid < 64) {
                volatile int* vs = s;
                vs[tid] += vs[tid + 128];
                vs[tid] += vs[tid + 64];
            }
            if (tid == 0) out[blockIdx.x] = s[0];
        }
    """,
    # the same reduction without volatile: a shared array the compiler may cache, not the idiom
    "plain": """\
        __global__ void plain(const int* in, int* out, unsigned n) {
            __shared__ int s[64];
            unsigned tid = threadIdx.x;
            s[tid] = in[blockIdx.x * 64 + tid];
            __syncthreads();
            for (unsigned k = 32; k > 0; k >>= 1) {
                if (tid < k) s[tid] += s[tid + k];
                __syncthreads();
            }
            if (tid == 0) out[blockIdx.x] = s[0];
        }
    """,
}


@pytest.fixture(scope="module")
def silent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SILENT's kernels in one file (bundlekit: one compile and one disassembly for the four),
    each launched as ``kernel_case`` would: 64 threads, ``wide`` 256."""
    launches = {k: reduction_launch(block=64 if k != "wide" else 256) for k in SILENT}
    return write_bundle(tmp_path_factory.mktemp("ga203-silent"), SILENT, launches)


@pytest.mark.parametrize("kernel", sorted(SILENT))
def test_silent_kernels(kernel, silent):
    assert ga203(silent, kernel)[1] == []
