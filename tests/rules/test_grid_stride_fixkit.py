"""GA206's and GA204's source rewrites on the fix kit (gpuadvise.source.fixkit_grid), not on
regular expressions over the text: comments and the user's spelling outside the edited nodes
stay as written, in several spellings (a macro index, template block sizes, several
declarators in one declaration, one-liners, spaced member expressions and brackets)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuadvise.rules.grid_stride import elementwise_vector_diff, load_phase, reduction_diff
from gpuadvise.rules.idle_tree import find_idle_loads, first_add_diff
from gpuadvise.source.text import KernelSource, find_kernel_source

ELEMENTWISE = r"""
__global__ void scale(float* x, const float* y, int n) {
    int i = blockIdx . x * blockDim.x + threadIdx.x;
    if (i < n) {
        // x[i] is scaled by y[i] (x[i] stays in place)
        x[ i ] = 2.0f * x[i] + y[i];
    }
}
"""

REDUCTIONS = r"""
#define HALF(b) ((b) / 2)
template <unsigned B>
__global__ void sum(const float* in, float* out, int n) {
    __shared__ float sdata[B];
    unsigned t = threadIdx.x, i = blockIdx.x * B + t;  /* two declarators */
    sdata[ t ] = i < n ? in[i] : 0.0f;   // the load: blockIdx.x picks the tile
    __syncthreads();
    for (unsigned s = (B / 2); s > 0; s >>= 1) {
        if (t < s) sdata[t] += sdata[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sdata[0];
}
__global__ void sum_offset(const float* in, float* out, int n, unsigned base, unsigned w) {
    __shared__ float sdata[256];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * 256 + t;
    sdata[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned s = base + w / 2; s > 0; s >>= 1) { if (t < s) sdata[t] += sdata[t + s]; __syncthreads(); }
    if (t == 0) out[blockIdx.x] = sdata[0];
}
"""
# a one-liner: the whole kernel on one line
REDUCTIONS += " ".join(
    [
        "__global__ void sum_oneliner(const float* in, float* out) {",
        "__shared__ float sm[128]; unsigned t = threadIdx.x; sm[t]=in[blockIdx.x*128+t];",
        "__syncthreads(); for (unsigned s = 128/2u; s > 0; s >>= 1) {",
        "if (t < s) sm[t] += sm[t + s]; __syncthreads(); }",
        "if (t == 0) out[blockIdx.x] = sm[0]; }\n",
    ]
)


def _ks(tmp_path: Path, text: str, name: str) -> KernelSource:
    p = tmp_path / "k.cu"
    p.write_text(text)
    ks = find_kernel_source(p, name)
    assert ks is not None
    return ks


def _added(diff: str) -> list[str]:
    return [ln[1:] for ln in diff.split("\n") if ln.startswith("+") and not ln.startswith("+++")]


def test_vector_lanes_keep_the_comment_as_written(tmp_path):
    ks = _ks(tmp_path, ELEMENTWISE, "scale")
    diff, why = elementwise_vector_diff(ks, "n", ("x", "y"), 4, 1, "k.cu")
    assert diff is not None, why
    added = "\n".join(_added(diff))
    for f in "xyzw":
        assert f"ga206_x.{f} = 2.0f * ga206_x.{f} + ga206_y.{f};" in added
    # the user's comment is copied into each lane as written, not rewritten (a regular
    # expression over the text made it "ga206_x.x is scaled by ga206_y.x")
    assert added.count("// x[i] is scaled by y[i] (x[i] stays in place)") == 4
    assert "ga206_x.x is scaled" not in added


def test_load_phase_of_a_template_with_two_declarators(tmp_path):
    ks = _ks(tmp_path, REDUCTIONS, "sum")
    lp = load_phase(ks)
    assert not isinstance(lp, str), lp
    assert (lp.arr, lp.idx, lp.value) == ("sdata", "t", "i < n ? in[i] : 0.0f")
    assert lp.outside == ("__shared__ float sdata[B];", "unsigned t = threadIdx.x;")
    assert lp.inside == ("unsigned i = ga206_block * B + t;",)
    diff, why = reduction_diff(ks, "(n + B - 1) / B", "k.cu")
    assert diff is not None, why
    added = _added(diff)
    assert "    sdata[t] = ga206_sum;   // the load: blockIdx.x picks the tile" in added
    assert "        ga206_sum += i < n ? in[i] : 0.0f;" in added


def test_load_phase_of_a_one_liner(tmp_path):
    ks = _ks(tmp_path, REDUCTIONS, "sum_oneliner")
    lp = load_phase(ks)
    assert not isinstance(lp, str), lp
    assert (lp.arr, lp.idx, lp.value) == ("sm", "t", "in[ga206_block*128+t]")


def _first_add(ks: KernelSource, name: str, block: int) -> str:
    ctx = SimpleNamespace(kernel_source=ks, spec=SimpleNamespace(kernel=name))
    (match,) = find_idle_loads(ctx)
    diff, why = first_add_diff(ks, match, block, "k.cu")
    assert diff is not None, why
    return diff


@pytest.mark.parametrize(
    ("name", "block", "before", "after"),
    [
        # parentheses looked through: the divisor doubles in place (a regular expression made
        # it "((B / 2)) / 2")
        ("sum", 64, "(B / 2)", "(B / 4)"),
        # `base + w / 2` halves as a whole (a regular expression made it `base + w / 4`)
        ("sum_offset", 256, "base + w / 2", "(base + w / 2) / 2"),
        ("sum_oneliner", 128, "128/2u", "128/4u"),
    ],
)
def test_the_first_step_of_the_tree_halves(tmp_path, name, block, before, after):
    ks = _ks(tmp_path, REDUCTIONS, name)
    diff = _first_add(ks, name, block)
    added = "\n".join(_added(diff))
    assert f"s = {after};" in added
    assert f"s = {before};" not in added
