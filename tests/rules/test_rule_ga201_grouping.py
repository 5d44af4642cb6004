"""GA201 reports one finding per root cause (issue 27): the conflicting lines of one shared array
(one padding fixes them together) are one finding at the worst line, listing the others and
estimated together; two arrays are two findings. Three spellings: a 2-D tile read by column on
four lines, a strided 1-D scratch written and read on separate lines, and two tiles behind a
macro, each conflicting on its own lines."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from bundlekit import write_bundle
from rulekit import analyze, reduction_launch, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

COLUMNS = """
__global__ void columns(const int* in, int* out, unsigned n) {
    __shared__ int tile[32][32];
    unsigned tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    for (unsigned r = ty; r < 32; r += 8) tile[r][tx] = in[blockIdx.x * 1024 + r * 32 + tx];
    __syncthreads();
    int a = tile[tx][ty];           // col a
    int b = tile[tx][ty + 8];       // col b
    int c = tile[tx][ty + 16];      // col c
    int d = tile[tx][ty + 24] * 2;  // col d
    out[blockIdx.x * 256 + threadIdx.x] = a + b + c + d;
}
"""

STRIDED = """
__global__ void strided(const int* in, int* out, unsigned n) {
    __shared__ int scratch[256 * 4];
    unsigned t = threadIdx.x;
    scratch[t * 4] = in[blockIdx.x * 256 + t];          // first store
    scratch[t * 4 + 1] = in[blockIdx.x * 256 + t] + 1;  // second store
    __syncthreads();
    out[blockIdx.x * 256 + t] = scratch[t * 4] + scratch[t * 4 + 1];  // load
}
"""

TWO_TILES = """
#define AT(s, r, c) s[(c)][(r)]
__global__ void two_tiles(const int* in, int* out, unsigned n) {
    __shared__ int p[32][32];
    __shared__ int q[32][32];
    unsigned x = threadIdx.x % 32, y = threadIdx.x / 32;
    for (unsigned r = y; r < 32; r += 8) {
        p[r][x] = in[blockIdx.x * 1024 + r * 32 + x];
        q[r][x] = 2 * in[blockIdx.x * 1024 + r * 32 + x];
    }
    __syncthreads();
    int a = AT(p, y, x) + AT(p, y + 8, x);  // p twice
    int b = AT(q, y, x);                    // q once
    int c = AT(q, y + 16, x);               // q again
    out[blockIdx.x * 256 + threadIdx.x] = a + b + c;
}
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three kernels in one file (bundlekit: one compile and one disassembly), each
    launched as ``kernel_case`` would with 8 CTAs of 256 and n = 8192, every thread writing one
    output."""
    launch = reduction_launch(grid=8, block=256, n=8192).replace("count = 8,", "count = 2048,")
    codes = {"columns": COLUMNS, "strided": STRIDED, "two_tiles": textwrap.dedent(TWO_TILES)}
    return write_bundle(
        tmp_path_factory.mktemp("ga201-grouping"), codes, dict.fromkeys(codes, launch)
    )


def _ga201(src, kernel):
    return src, run_rule(analyze(src, kernel, trace=False), "GA201")


def test_four_column_reads_of_one_tile_are_one_finding(bundle):
    src, (f,) = _ga201(bundle, "columns")
    lines = [source_line(src, f"// col {k}") for k in "abcd"]
    assert f.line in lines
    others = sorted(set(lines) - {f.line})
    assert f"with lines {', '.join(map(str, others))}, the same array's conflicts" in f.message
    assert "of `tile`" in f.message
    # the estimate and the padding cover all four lines
    assert len(f.details.insts) >= 4
    assert f.variant.safety == "automatic-and-verified" and "tile[32][32] -> [32][33]" in (
        f.variant.description
    )


def test_a_strided_scratch_written_and_read_on_three_lines_is_one_finding(bundle):
    src, (f,) = _ga201(bundle, "strided")
    lines = {source_line(src, t) for t in ("// first store", "// second store", "// load")}
    assert "of `scratch`" in f.message and f.line in lines
    others = sorted(lines - {f.line})
    assert f"with lines {', '.join(map(str, others))}, the same array's conflicts" in f.message


def test_two_arrays_are_two_findings(bundle):
    src, found = _ga201(bundle, "two_tiles")
    assert len(found) == 2
    by = {("`p`" in f.message, "`q`" in f.message): f for f in found}
    p, q = by[(True, False)], by[(False, True)]
    assert p.line == source_line(src, "// p twice") and "with line" not in p.message
    assert q.line in (source_line(src, "// q once"), source_line(src, "// q again"))
    assert "the same array's conflicts" in q.message
