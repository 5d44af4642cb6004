"""The fix kit (gpuadvise.source.fixkit): the operations automatic fixes are made of, each on
several spellings, each leaving everything outside its edit as written, and the edited text
parsing to the same declarations."""

from __future__ import annotations

import pytest

from gpuadvise.source import fixkit as K
from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite


def _decl(text: str, name: str) -> T.Declaration:
    st = T.parse(text)
    return next(d for d in T.declarations(st) if any(x.name == name for x in d.declarators))


@pytest.mark.parametrize(
    "text, name, want",
    [
        (
            "__global__ void k() { __shared__ int s[8]; unsigned t = threadIdx.x, i = t + 1; }",
            "t",
            ["unsigned t = threadIdx.x;", "unsigned i = t + 1;"],
        ),
        (
            "__global__ void k(const float* a) { const float *p = a + 1, *q = a, r = 2.0f; }",
            "p",
            ["const float *p = a + 1;", "const float *q = a;", "const float r = 2.0f;"],
        ),
        (
            "#define N 4\n__global__ void k() {\n  static __shared__ float a[N][N + 1], b[N];\n}",
            "a",
            ["static __shared__ float a[N][N + 1];", "static __shared__ float b[N];"],
        ),
        (
            "template <int B> __global__ void k() { int x = B, /* y */ y{B * 2}; }",
            "x",
            ["int x = B;", "/* y */ int y{B * 2};"],
        ),
    ],
)
def test_split_declaration(text: str, name: str, want: list[str]) -> None:
    d = _decl(text, name)
    assert [s for _, s in K.split_declaration(text, d)] == want
    rw = Rewrite(text)
    K.split_declaration_edit(rw, d)
    new = rw.text()
    # the same declarators, now one per declaration, the rest of the text unchanged
    names = [x.name for x in d.declarators]
    got = [
        [x.name for x in e.declarators]
        for e in T.declarations(T.parse(new))
        if any(x.name in names for x in e.declarators)
    ]
    assert got == [[n] for n in names]
    assert new[: d.span[0]] == text[: d.span[0]]
    assert new.endswith(text[d.span[1] :])


def test_a_single_declarator_comes_back_as_written() -> None:
    text = "__global__ void k() { float  x =  1.0f ;  }"
    d = _decl(text, "x")
    assert K.split_declaration(text, d) == [(d.declarators[0], "float  x =  1.0f ;")]


@pytest.mark.parametrize(
    "expr, want",
    [
        ("2.0 * x + 1e-3", "2.0f * x + 1e-3f"),
        ("x / 3. - .5 + 7", "x / 3.f - .5f + 7"),
        ("1.0f + 2.5F + 3.0L + 0x10 + 1E+2", "1.0f + 2.5F + 3.0L + 0x10 + 1E+2f"),
    ],
)
def test_float_literals(expr: str, want: str) -> None:
    text = f"__global__ void k(float* o, float x) {{ o[0] = {expr}; }}"
    st = T.parse(text)
    rw = Rewrite(text)
    K.float_literal_edits(st, rw, T.kernels(st)[0].body or (0, len(text)))
    assert rw.text() == f"__global__ void k(float* o, float x) {{ o[0] = {want}; }}"


def test_float_literals_skip_operands_that_are_double() -> None:
    text = "__global__ void k(float* o, double d) { o[0] = 2.0 * o[1] + (d * 3.0); }"
    st = T.parse(text)
    rw = Rewrite(text)
    keep = text.index("(d * 3.0)")
    n = K.float_literal_edits(st, rw, (0, len(text)), skip=[(keep, keep + 9)])
    assert n == 1 and "2.0f * o[1] + (d * 3.0)" in rw.text()


@pytest.mark.parametrize(
    "call, want",
    [
        ("sqrt(x)", "sqrtf(x)"),
        ("::exp(x) + pow(x, 2)", "::expf(x) + powf(x, 2)"),
        ("std::sqrt(x) + sqrtf(x) + __expf(x)", "std::sqrt(x) + sqrtf(x) + __expf(x)"),
    ],
)
def test_float_functions(call: str, want: str) -> None:
    text = f"__global__ void k(float* o, float x) {{ o[0] = {call}; }}"
    st = T.parse(text)
    rw = Rewrite(text)
    K.float_function_edits(st, rw, (0, len(text)))
    assert rw.text() == f"__global__ void k(float* o, float x) {{ o[0] = {want}; }}"


def test_insert_restrict_on_three_spellings() -> None:
    text = (
        "template <typename T>\n__global__ void k(const T* in, float *out,\n"
        "    const float* __restrict__ done, float arr[], int n) { }\n"
    )
    st = T.parse(text)
    rw = Rewrite(text)
    n = K.insert_restrict(st, rw, T.kernels(st)[0], ["in", "out", "done", "arr", "n"])
    assert n == 2
    assert rw.text() == (
        "template <typename T>\n__global__ void k(const T* __restrict__ in, "
        "float *__restrict__ out,\n    const float* __restrict__ done, float arr[], int n) { }\n"
    )


def test_comments_within() -> None:
    text = "void f() { int a = 1; // one\n /* two */ int b; }"
    st = T.parse(text)
    assert K.comments_within(st, (0, len(text))) == ["// one", "/* two */"]
    assert K.comments_within(st, (text.index("/*"), len(text))) == ["/* two */"]
