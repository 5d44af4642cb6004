"""The fix kit's grid-stride operations (gpuadvise.source.fixkit_grid) on the parser's nodes:
several spellings each (spaces inside member expressions and brackets, macros, template block
sizes, one-liners, comments), and what they leave alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuadvise.source import fixkit_grid as G
from gpuadvise.source.text import KernelSource, find_kernel_source

SRC = r"""
#define GID (blockIdx.x * blockDim.x + threadIdx.x)
template <unsigned B>
__global__ void tiled(const float* in, float* out, int n) {
    __shared__ float s[B];
    unsigned t = threadIdx.x, i = blockIdx . x * B + t;  /* blockIdx.x: the tile */
    s[ t ] = i < n ? in[i] : 0.0f;   // the load
    __syncthreads();
    for (unsigned k = (B/2u); k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
    if (t < 32) s[t] += s[t + 32]; /* the last warp */ __syncthreads();
    if (t == 0) out[blockIdx.x + gridDim.x * 0] = s[0] + s[t][0];
}
"""
SRC += (  # a one-liner
    "__global__ void flat(float* x, const float* y, int n) { int i = GID;"
    " if (i < n) x[i] = 2.0f * x[ i ] + y[i] + x[i + 1]; }\n"
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KernelSource]:
    p = Path(tmp_path_factory.mktemp("fixkit_grid")) / "k.cu"
    p.write_text(SRC)
    out = {}
    for name in ("tiled", "flat"):
        ks = find_kernel_source(p, name)
        assert ks is not None
        out[name] = ks
    return out


def _at(ks: KernelSource, needle: str, nth: int = 0) -> int:
    at = -1
    for _ in range(nth + 1):
        at = ks.text.index(needle, at + 1)
    return at


def test_remapped_text_reads_members_however_spaced_and_keeps_comments(sources):
    ks = sources["tiled"]
    a = _at(ks, "unsigned t = threadIdx.x")
    b = ks.text.index("\n", a)
    got = G.remapped_text(ks.tree, ks.text, (a, b), {"blockIdx.x": "blk", "gridDim.x": "blks"})
    # the spaced member is read, the comment's text is not touched
    assert got == "unsigned t = threadIdx.x, i = blk * B + t;  /* blockIdx.x: the tile */"
    a = _at(ks, "if (t == 0)")
    b = ks.text.index("\n", a)
    got = G.remapped_text(ks.tree, ks.text, (a, b), {"blockIdx.x": "blk", "gridDim.x": "blks"})
    assert got == "if (t == 0) out[blk + blks * 0] = s[0] + s[t][0];"


def test_remapped_text_leaves_a_macro_the_range_only_names(sources):
    ks = sources["flat"]
    a, b = ks.body_start, ks.body_end + 1
    got = G.remapped_text(ks.tree, ks.text, (a, b), {"blockIdx.x": "blk"})
    assert got == ks.text[a:b]  # GID's body lies outside the range: the caller sees it


def test_element_edits_find_each_access_at_the_index(sources):
    ks = sources["flat"]
    span = (ks.body_start, ks.body_end + 1)
    edits = G.element_edits(ks.tree, span, {"x": "vx.y", "y": "vy.y"}, "i")
    got = G.edited_text(ks.text, span, edits)
    # x[ i ] and x[i] are the element, x[i + 1] is another one
    assert "vx.y = 2.0f * vx.y + vy.y + x[i + 1];" in got
    assert "int i = GID;" in got


def test_subscript_store_reads_the_stored_element(sources):
    ks = sources["tiled"]
    a = _at(ks, "s[ t ] =")
    b = ks.text.index(";", a) + 1
    ss = G.subscript_store(ks.tree, (a, b))
    assert ss is not None and ss.name == "s"
    assert ks.code[slice(*ss.index)].strip() == "t"
    assert ks.code[slice(*ss.value)] == "i < n ? in[i] : 0.0f"
    # a compound assignment, a chain and an expression that is no store are not stores
    a = _at(ks, "s[t] += s[t + 32]")
    assert G.subscript_store(ks.tree, (a, ks.text.index(";", a) + 1)) is None
    a = _at(ks, "out[blockIdx.x")
    ss = G.subscript_store(ks.tree, (a, ks.text.index(";", a) + 1))
    assert ss is not None and ss.name == "out"
    a = _at(ks, "__syncthreads()")
    assert G.subscript_store(ks.tree, (a, ks.text.index(";", a) + 1)) is None


def test_subscript_store_one_liner_and_chain(tmp_path):
    p = tmp_path / "one.cu"
    p.write_text(
        "__global__ void k(int* a) { __shared__ int m[4][4]; m[0][1]=2; a[threadIdx.x]=m[0][1]; }\n"
    )
    ks = find_kernel_source(p, "k")
    assert ks is not None
    a = _at(ks, "m[0][1]=2")
    assert G.subscript_store(ks.tree, (a, ks.text.index(";", a) + 1)) is None  # a chain
    a = _at(ks, "a[threadIdx.x]=")
    ss = G.subscript_store(ks.tree, (a, ks.text.index(";", a) + 1))
    assert ss is not None and ks.code[slice(*ss.index)] == "threadIdx.x"
    assert ks.code[slice(*ss.value)] == "m[0][1]"


@pytest.mark.parametrize(
    ("init", "want"),
    [
        ("B / 2", "B / 4"),
        ("(B/2u)", "(B/4u)"),  # parentheses looked through, the spelling kept
        ("n / 2L", "n / 4L"),
        ("(a + b) / 2U", "(a + b) / 4U"),
        ("a + b / 2", None),  # halving it is not halving b
        ("n >> 1", None),
        ("n / k", None),
    ],
)
def test_divisor_edit(tmp_path, init, want):
    p = tmp_path / "d.cu"
    p.write_text(f"__global__ void k(int n, int a, int b, int k) {{ unsigned s = {init}; }}\n")
    ks = find_kernel_source(p, "k")
    assert ks is not None
    a = ks.text.index(init)
    span = (a, a + len(init))
    edit = G.divisor_edit(ks.tree, span, 2)
    got = None if edit is None else G.edited_text(ks.text, span, [edit])
    assert got == want


def test_barrier_after_skips_comments_and_finds_only_a_barrier(sources):
    ks = sources["tiled"]
    a = _at(ks, "s[t] += s[t + 32];") + len("s[t] += s[t + 32];")
    got = G.barrier_after(ks.tree, a, ks.body_end)
    assert got is not None and ks.text[got[0] : got[1]] == "__syncthreads();"
    a = _at(ks, "s[ t ] = i < n ? in[i] : 0.0f;") + len("s[ t ] = i < n ? in[i] : 0.0f;")
    got = G.barrier_after(ks.tree, a, ks.body_end)  # past a line comment
    assert got is not None and ks.text[got[0] : got[1]] == "__syncthreads();"
    a = _at(ks, "unsigned t = threadIdx.x")
    assert G.barrier_after(ks.tree, a - 1, ks.body_end) is None  # a declaration comes first
