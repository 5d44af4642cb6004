"""GA205's shuffle rewrite beyond the plain top-level loop (issue 28, the corpus's refusals):
kernels/tree_tails/trees.cu holds BabelStream's dot (the barrier first in each step, the root
read as ``tb[li]`` under ``li == 0``) and cuda-samples' scalarProd (a tree per vector inside an
outer loop, its step a block-stride loop), each in three spellings. Every diff must be automatic,
add a barrier before the shuffles exactly where the loop's last statement is not one (the step
at distance 64 is otherwise unsynced when warp 0 reads it), be reported once (a tree per
vector repeats in the trace), apply, compile, silence GA205 and
GA203, and keep every output bit for bit on the emulator."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from patchkit import Patched
from rulekit import KERNELS, analyze, compiled, kernel_case, reduction_block_sums, run_rule

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "tree_tails"
SRC = CASE / "trees.cu"

# kernel: (its output buffer, whether the loop's barrier comes before the combine)
KERNELS_ = {
    "dot_top_barrier": ("sum", True),
    "top_barrier_tmpl<256>": ("out", True),
    "top_barrier_signed": ("out", True),
    "per_vector_cg": ("d_C", True),
    "per_row_tmpl<256>": ("rows", False),
    "per_segment_while": ("out", True),
}


class Fixed:
    """Each kernel of KERNELS_ analysed (4 CTAs traced) with its GA205 findings, and one copy of
    the case with every kernel's diff applied (:class:`patchkit.Patched`): compiled and
    disassembled once for the six kernels, not once per kernel."""

    def __init__(self, folder: Path) -> None:
        self.analyses = {k: analyze(SRC, k, 4) for k in KERNELS_}
        self.found = {k: run_rule(a, "GA205", trace_ctas=4) for k, a in self.analyses.items()}
        diffs = {
            k: found[0].variant.diff
            for k, found in self.found.items()
            if len(found) == 1 and found[0].variant is not None and found[0].variant.diff
        }
        self.patched = Patched(folder, SRC, diffs, beside=("*",))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Fixed:
    return Fixed(tmp_path_factory.mktemp("tree_tails") / "case")


@pytest.mark.parametrize("kernel", sorted(KERNELS_))
def test_the_diff_is_automatic_synced_and_keeps_the_outputs(kernel, fixed):
    out, barrier_first = KERNELS_[kernel]
    a = fixed.analyses[kernel]
    # one finding, though a tree per vector runs once per vector (the fix's steps are matched
    # to findings by rule and line: a repeated finding would be a rejected repeated step)
    (f,) = fixed.found[kernel]
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    added = [ln[1:].strip() for ln in v.diff.splitlines() if ln.startswith("+")]
    at = next(k for k, ln in enumerate(added) if re.fullmatch(r"if \(\w+(\.x)? < 32\) \{", ln))
    assert (added[at - 1] == "__syncthreads();") is barrier_first, added
    patched = fixed.patched.check(kernel, v.diff)  # trees.cu with every kernel's diff
    b = analyze(patched, kernel, 4)
    assert run_rule(b, "GA205", trace_ctas=4) == [] and run_rule(b, "GA203", trace_ctas=4) == []
    want, got = a.memory.outputs[out], b.memory.outputs[out]
    assert np.count_nonzero(want) > 0
    assert got.tobytes() == want.tobytes()


def test_silent_on_a_tree_per_vector_that_ends_in_shuffles():
    assert run_rule(analyze(SRC, "per_vector_shuffled", 4), "GA205", trace_ctas=4) == []


BARRIER_FIRST = """\
    __global__ void first(const int* in, int* out, unsigned n) {
        __shared__ int s[256];
        unsigned t = threadIdx.x;
        s[t] = in[blockIdx.x * 256 + t];
        for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
            __syncthreads();
            if (t < k) s[t] += s[t + k];
        }
        if (t == 0) out[blockIdx.x] = s[0];
    }
"""


def test_a_barrier_first_loop_read_at_zero_gets_its_barrier_before_the_shuffles(tmp_path):
    """Offered before issue 28's tails too, without the barrier: warp 0 read s[32..63], which
    warp 1 stores in the step at distance 64, with no barrier between."""
    src = kernel_case(tmp_path, BARRIER_FIRST, "first", block=256, n=4 * 256)
    a = analyze(src, "first", 2, trace=False)
    (f,) = run_rule(a, "GA205")
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff, v.description
    new = apply_unified_diff(src.read_text(), v.diff)
    head = new.partition("if (t < 32) {")[0]
    assert "k > 32;" in head and head.rstrip().endswith("}\n    __syncthreads();")
    src.write_text(new)
    b = compiled(src, "first")
    got, want = reduction_block_sums(b, 4, 256)
    np.testing.assert_array_equal(got, want)
