"""GA205's shuffle rewrite of a tree that sits in a ``__device__`` helper function the kernel
calls (HeCBench f16sp's reduceInShared_intrinsics): kernels/tree_tails/helpers.cu holds a helper
taking the shared pointer (f16sp's spelling), a template helper (block size and element type) and
a helper whose tree is a one-line loop, and f16sp's own (``v[i] = __hadd2(v[i], v[i + s])``: the
shuffles fold with ``__hadd2`` in the tree's order). The finding stays at the call; the diff rewrites the
helper and nothing else of the file, applies, compiles, silences GA205 and GA203 and keeps every
output bit for bit on the emulator. A helper that two kernels of different block sizes call, or
whose array the kernel reads beyond [0] after the call, stays display-only and says why."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from rulekit import KERNELS, analyze, kernel_case, run_rule, source_line

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "tree_tails"
SRC = CASE / "helpers.cu"

# kernel: (its output buffer, the helper's definition line text, the call's text)
HELPERS = {
    "helper_ptr": ("out", "void reduce_in_shared(", "reduce_in_shared(sh);"),
    "helper_tmpl<256>": ("out", "void tree_tmpl(T* s)", "tree_tmpl<B>(s);"),
    "helper_line": ("out", "void tree_line(int* v)", "tree_line(sv);"),
    "helper_half2": ("out", "void reduce_half2(", "reduce_half2(sh2);"),
}


def _helper_lines(text: str, head: str) -> tuple[int, int]:
    """The 1-based lines of the helper whose definition line holds ``head``: its first line to
    the line of its closing brace (a one-liner: that line)."""
    lines = text.splitlines()
    first = next(i for i, t in enumerate(lines, 1) if head in t)
    last = first
    depth = 0
    for i, t in enumerate(lines[first - 1 :], first):
        depth += t.count("{") - t.count("}")
        last = i
        if depth == 0 and "{" in "".join(lines[first - 1 : i]):
            break
    return first, last


@pytest.mark.parametrize("kernel", sorted(HELPERS))
def test_the_helper_is_rewritten_alone_and_keeps_the_outputs(kernel, tmp_path):
    out, head, call = HELPERS[kernel]
    a = analyze(SRC, kernel, 4)
    (f,) = run_rule(a, "GA205", trace_ctas=4)
    assert f.line == source_line(SRC, call)  # reported at the call, in the kernel
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    text = SRC.read_text()
    new = apply_unified_diff(text, v.diff)
    # only the helper changed: the text before its definition and after its end is the same
    first, last = _helper_lines(text, head)
    old_lines, new_lines = text.splitlines(), new.splitlines()
    tail = len(old_lines) - last
    assert new_lines[: first - 1] == old_lines[: first - 1]
    assert new_lines[len(new_lines) - tail :] == old_lines[last:]
    assert "__shfl_down_sync" in "\n".join(new_lines[first - 1 : len(new_lines) - tail])
    shutil.copytree(CASE, tmp_path / "case")
    patched = tmp_path / "case" / "helpers.cu"
    patched.write_text(new)
    b = analyze(patched, kernel, 4)
    assert run_rule(b, "GA205", trace_ctas=4) == [] and run_rule(b, "GA203", trace_ctas=4) == []
    want, got = a.memory.outputs[out], b.memory.outputs[out]
    assert np.count_nonzero(want) > 0
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("kernel", ["shared_wide", "shared_narrow"])
def test_a_helper_two_kernels_call_stays_display_only(kernel):
    """shared_tree runs in blocks of 256 (shared_wide) and 128 (shared_narrow): a rewrite
    verified for one kernel's launch must not silently change the other kernel."""
    (f,) = run_rule(analyze(SRC, kernel, 4), "GA205", trace_ctas=4)
    v = f.variant
    assert v is not None and v.safety == "display-only" and not v.diff
    assert "outside this kernel" in v.description and "shared_tree" in v.description


def test_silent_on_a_helper_that_ends_in_shuffles():
    assert run_rule(analyze(SRC, "helper_shuffled", 4), "GA205", trace_ctas=4) == []


READ_AFTER = """\
    __device__ void tree(int* s) {
        unsigned t = threadIdx.x;
        for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
            if (t < d) s[t] += s[t + d];
            __syncthreads();
        }
    }
    __global__ void reads_all(const int* in, int* out, unsigned n) {
        __shared__ int s[256];
        s[threadIdx.x] = in[blockIdx.x * 256 + threadIdx.x];
        __syncthreads();
        tree(s);
        if (threadIdx.x == 0) out[blockIdx.x] = s[0] + s[1];
    }
"""


def test_the_kernel_reading_the_array_after_the_call_keeps_it_display_only(tmp_path):
    """The shuffles keep only s[0]: a kernel that reads s[1] after the helper returns would
    read another value (the shared steps at distances 32..1 no longer write it)."""
    src = kernel_case(tmp_path, READ_AFTER, "reads_all", block=256, n=4 * 256)
    (f,) = run_rule(analyze(src, "reads_all", 2, trace=False), "GA205")
    v = f.variant
    assert v is not None and v.safety == "display-only", v.description
    assert "is read after the tree" in v.description
