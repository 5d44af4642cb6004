"""gpuadvise.source.fixkit_scans: a warp's racy scan ``a[i] += a[i - d];`` read as one run of
statements (bare, alone in a braced ``if``, alone in a braceless ``if``, on one line) and made
``__shfl_up_sync`` on a register with the word stored back; what it refuses, with a sentence;
the element types the shuffles take."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuadvise.source import fixkit_scans as K
from gpuadvise.source.text import find_kernel_source

CODE = """\
#define W 32
struct Pair { int a, b; };
template <typename V> __device__ V same(V v) { return v; }
__global__ void braced(unsigned* s, int maxlevel) {
    int idx = threadIdx.x + W;
    s[idx - W] = 0; s[idx] = 5;
    if (0 <= maxlevel) { s[idx] += s[idx - 1]; }  // first
    if (1 <= maxlevel) s[idx] += s[idx - 2];
    s[idx] += s[idx - 4];
    s[0] = s[idx];
}
__global__ void one_line(int* win) {
    const unsigned at = threadIdx.x + 32u;
    win[at] += win[at - 1]; win[at] += win[at - 2]; win[at] += win[at - 4];
}
__global__ void between(unsigned* s) {
    int i = threadIdx.x + 32;
    s[i] += s[i - 1];
    i += 0;
    s[i] += s[i - 2];
}
__global__ void with_else(unsigned* s, int m) {
    int i = threadIdx.x + 32;
    if (m > 0) { s[i] += s[i - 1]; } else { s[i] = 0; }
    s[i] += s[i - 2];
}
__global__ void nested(unsigned* s, int m) {
    int i = threadIdx.x + 32;
    if (m > 0) { s[i] += s[i - 1]; s[i] += s[i - 2]; }
}
"""


def _ks(tmp_path: Path, kernel: str):  # noqa: ANN202
    p = tmp_path / "k.cu"
    p.write_text(CODE)
    ks = find_kernel_source(p, kernel)
    assert ks is not None
    return ks


def _line(text: str) -> int:
    (n,) = [i for i, t in enumerate(CODE.splitlines(), 1) if text in t]
    return n


def test_steps_braced_braceless_and_bare_are_one_run(tmp_path: Path) -> None:
    ks = _ks(tmp_path, "braced")
    lines = {_line("s[idx - 1]"), _line("s[idx - 2]"), _line("s[idx - 4]")}
    run = K.warp_scan_steps(ks, lines)
    assert isinstance(run, K.WarpScanSteps), run
    assert (run.array, run.index) == ("s", "idx")
    assert [(s.distance, s.in_braces) for s in run.steps] == [(1, True), (2, False), (4, False)]
    rw = ks.rewrite()
    K.shuffle_warp_scan(ks, rw, run, "unsigned", "threadIdx.x & 31")
    new = rw.text().splitlines()
    at = _line("s[idx - 1]") - 1
    assert new[at] == "    unsigned scan_v = s[idx];  // the warp's scan in a register"
    assert new[at + 1] == "    const unsigned scan_lane = threadIdx.x & 31;"
    assert new[at + 2] == (
        "    if (0 <= maxlevel) { unsigned scan_y = __shfl_up_sync(0xffffffffu, scan_v, 1); "
        "if (scan_lane >= 1) scan_v += scan_y; }  // first"
    )
    assert new[at + 3].startswith("    if (1 <= maxlevel) { unsigned scan_y = __shfl_up_sync(")
    assert new[at + 4].startswith("    { unsigned scan_y = __shfl_up_sync(0xffffffffu, scan_v, 4);")
    assert new[at + 5] == "    s[idx] = scan_v;"
    assert new[at + 6] == "    s[0] = s[idx];"  # the rest untouched
    assert K.stores_zero(ks, _line("s[idx - W] = 0"), [10], [10, 11])
    assert not K.stores_zero(ks, _line("s[idx - W] = 0"), [11], [10, 11])  # the `= 5` store
    assert not K.stores_zero(ks, _line("s[idx - W] = 0"), [10], [10, 11, 12])  # 3 for 2


def test_steps_on_one_line(tmp_path: Path) -> None:
    ks = _ks(tmp_path, "one_line")
    run = K.warp_scan_steps(ks, {_line("win[at] += win[at - 1];")})
    assert isinstance(run, K.WarpScanSteps), run
    assert [s.distance for s in run.steps] == [1, 2, 4] and run.index == "at"


@pytest.mark.parametrize(
    ("kernel", "text", "why"),
    [
        ("between", "s[i] += s[i - ", "other statements lie between the steps"),
        ("with_else", "s[i] += s[i - ", "is no `a[i] += a[i - d];` step on its own"),
        ("nested", "s[i] += s[i - 1]; s[i] += s[i - 2];", "not statements of the function's"),
    ],
)
def test_refused_with_a_sentence(tmp_path: Path, kernel: str, text: str, why: str) -> None:
    ks = _ks(tmp_path, kernel)
    lines = {i for i, t in enumerate(CODE.splitlines(), 1) if text in t and i > _line(kernel)}
    got = K.warp_scan_steps(ks, lines)
    assert isinstance(got, str) and why in got, got


def test_the_types_shuffles_take(tmp_path: Path) -> None:
    ks = _ks(tmp_path, "braced")
    assert K.shuffles(ks, "unsigned int") and K.shuffles(ks, "double") and K.shuffles(ks, "V")
    assert not K.shuffles(ks, "Pair") and not K.shuffles(ks, "uint4")
