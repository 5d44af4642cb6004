"""gpuadvise.source.functions: the ``__device__`` helper a source line lies in, read as the
kernel's source over the helper's body, offered only when the analysed kernel alone calls it."""

from __future__ import annotations

from pathlib import Path

from gpuadvise.source.fixkit_trees import SumStep, sum_step
from gpuadvise.source.functions import Helper, helper_at, pointee_type
from gpuadvise.source.text import find_kernel_source

CODE = """\
template <unsigned B, typename T>
__device__ void tree(T* const s) {
    for (unsigned k = B / 2; k > 0; k >>= 1) { if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k]; }
}
__device__ void twice(float* s) {
    if (threadIdx.x < 1) s[0] = __hadd(s[0], s[1]);
}
__device__ void relay(float* s) { twice(s); }
__device__ void unused(float* s) { s[0] = 1.0f; }
__global__ void k1(float* out) {
    __shared__ float s[256];
    tree<256>(s);
    twice(s);
}
__global__ void k2(float* out) {
    __shared__ float s[256];
    relay(s);
}
"""


def _ks(tmp_path: Path, kernel: str):  # noqa: ANN202
    p = tmp_path / "k.cu"
    p.write_text(CODE)
    ks = find_kernel_source(p, kernel)
    assert ks is not None
    return ks


def test_a_template_helper_only_this_kernel_calls(tmp_path: Path) -> None:
    ks = _ks(tmp_path, "k1")
    h = helper_at(ks, 3)  # a one-line loop: the line's end lies in the body
    assert isinstance(h, Helper), h
    assert h.name == "tree" and len(h.calls) == 1 and h.source.decl_line == 2
    assert h.source.code[h.source.body_start] == "{" and h.source.code[h.source.body_end] == "}"
    (st,) = [s for s in h.source.statements() if "+=" in h.source.code[s.start : s.end]]
    assert isinstance(sum_step(h.source.tree, st), SumStep)
    assert pointee_type(h.params[0]) == "T"
    assert h.passed(ks, "s") == [("s", h.calls[0].span[1])]


def test_a_helper_another_function_calls_is_refused(tmp_path: Path) -> None:
    why = helper_at(_ks(tmp_path, "k1"), 6)
    assert isinstance(why, str) and "outside this kernel" in why and "line 8" in why  # relay


def test_a_line_of_the_kernel_or_of_no_function(tmp_path: Path) -> None:
    ks = _ks(tmp_path, "k2")
    assert "no __device__ function" in str(helper_at(ks, 12))  # another kernel's line
    assert "outside this kernel" in str(helper_at(ks, 3))  # k1 calls tree
    assert "does not call" in str(helper_at(ks, 9))


def test_a_half_add_call_is_a_sum_folded_with_it(tmp_path: Path) -> None:
    ks = _ks(tmp_path, "k1")
    every = ks.statements(within=(0, len(ks.text)))
    (st,) = [s for s in every if "__hadd" in ks.code[s.start : s.end]]
    step = sum_step(ks.tree, st)
    assert step is not None and step.fold == "__hadd" and step.array == "s"
