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


SWEEPS = """\
#define AI(o, t) ((o) * (2 * (t) + 1) - 1)
#define BI(o, t) ((o) * (2 * (t) + 2) - 1)
__device__ void note(unsigned* p, unsigned v) { p[0] = v; }
__global__ void k(unsigned* out, unsigned* sums) {
    __shared__ unsigned temp[256];
    unsigned t = threadIdx.x, offset = 1;
    temp[2 * t] = out[2 * t];
    temp[2 * t + 1] = out[2 * t + 1];
    for (unsigned d = 128; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) temp[BI(offset, t)] += temp[AI(offset, t)];
        offset *= 2;
    }
    CLEAR
    for (unsigned d = 1; d < 256; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            unsigned v = temp[AI(offset, t)];
            temp[AI(offset, t)] = temp[BI(offset, t)];
            temp[BI(offset, t)] += v;
        }
    }
    __syncthreads();
    out[2 * t] = temp[2 * t] AFTER;
}
"""


@pytest.mark.parametrize(
    ("clear", "after", "why"),
    [
        ("if (t == 0) temp[255] = 0;  // the last", "", ""),
        ("if (t == 0) { sums[blockIdx.x] = temp[255]; temp[255] = 0; }", "", "the last element's clear"),
        ("if (t == 0) { note(sums, 1u); temp[255] = 0; }", "", "the last element's clear"),
        ("if (t == 0) temp[255] = 0;", "+ offset", "`offset`, which the sweeps change, is read after them"),
    ],
)  # fmt: skip
def test_the_blelloch_sweeps_and_what_else_they_do(
    tmp_path: Path, clear: str, after: str, why: str
) -> None:
    p = tmp_path / "k.cu"
    code = SWEEPS.replace("CLEAR", clear).replace(" AFTER", f" {after}" if after else "")
    p.write_text(code)
    ks = find_kernel_source(p, "k")
    assert ks is not None
    line = next(i for i, t in enumerate(code.splitlines(), 1) if "+= temp[AI(" in t)
    got = K.blelloch_region(ks, line, "temp")
    if not why:
        assert isinstance(got, K.BlockScanRegion), got
        assert ks.line_at(got.span[0]) == line - 2 and ks.text[got.span[1] - 1] == "}"
        x = K.element_store(ks, line - 3, "temp")
        assert x is not None and x[0] == "2 * t + 1"
    else:
        assert isinstance(got, str) and why in got, got
