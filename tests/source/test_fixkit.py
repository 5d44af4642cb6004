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


@pytest.mark.parametrize(
    "body, want, edits",
    [
        # a declaration of several declarators and a functional cast of a sum
        (
            "const double a = x, *p = 0; o[0] = a + double(x);",
            "const float a = x, *p = 0; o[0] = a + float(x);",
            2,
        ),
        # a C++ cast and a C cast; a comment naming the type stays as written
        (
            "o[0] = static_cast<double>(x) / (double)n; // double on purpose?",
            "o[0] = static_cast<float>(x) / (float)n; // double on purpose?",
            2,
        ),
        # `long double`, a vector type and a macro's name stay
        (
            "long double w = x; double2 v; o[0] = w + v.x + DOUBLE;",
            "long double w = x; double2 v; o[0] = w + v.x + DOUBLE;",
            0,
        ),
    ],
)
def test_float_types(body: str, want: str, edits: int) -> None:
    head = "__global__ void k(float* o, float x, int n, double keep) { "
    text = head + body + " }"
    st = T.parse(text)
    rw = Rewrite(text)
    n = K.float_type_edits(st, rw, T.kernels(st)[0].body or (0, len(text)))
    assert rw.text() == head + want + " }"  # the parameter, outside the body, keeps its double
    assert n == edits


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


ACCUMULATE = {
    "compound": (
        "__global__ void k(const float* A, float* tmp, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) {\n"
        "        for (int j = 0; j < n; j++) {\n"
        "            tmp[i] += A[i * n + j];  // row sum\n"
        "        }\n"
        "    }\n"
        "}\n",
        "tmp[i] +=",
        "tmp",
        (
            "        auto tmp_acc = tmp[i];\n"
            "        for (int j = 0; j < n; j++) {\n"
            "            tmp_acc += A[i * n + j];  // row sum\n"
            "        }\n"
            "        tmp[i] = tmp_acc;\n"
        ),
    ),
    "spelled-out": (
        "__global__ void k(const double* v, double* out, unsigned n, unsigned len) {\n"
        "    unsigned r = blockIdx.x * blockDim.x + threadIdx.x, k = 0;\n"
        "    while (k < len) { out[ r ] = out[r] + v[k * n + r]; ++k; }\n"
        "}\n",
        "out[ r ] =",
        "out",
        (
            "    auto out_acc = out[r];\n"
            "    while (k < len) { out_acc = out_acc + v[k * n + r]; ++k; }\n"
            "    out[r] = out_acc;\n"
        ),
    ),
    "unbraced-do": (
        "__global__ void k(const int* keys, int* count, int n) {\n"
        "    int t = threadIdx.x, j = 0, count_acc = 0;\n"
        "    if (t < n)\n"
        "        do count[t]++; while (++j < keys[t]);\n"
        "}\n",
        "count[t]++",
        "count",
        (
            "    if (t < n)\n"
            "        {\n"
            "            auto count_acc2 = count[t];\n"
            "            do count_acc2++; while (++j < keys[t]);\n"
            "            count[t] = count_acc2;\n"
            "        }\n"
        ),
    ),
}


@pytest.mark.parametrize("spelling", list(ACCUMULATE))
def test_accumulate_in_register(spelling: str) -> None:
    text, at, buffer, want = ACCUMULATE[spelling]
    st = T.parse(text)
    body = T.kernels(st)[0].body
    assert body is not None
    rw = Rewrite(text)
    assert K.accumulate_in_register(st, rw, text.index(at), buffer, body) is None
    new = rw.text()
    assert want in new, new
    assert new.startswith(text[: text.index("{") + 1])  # the rest as written


@pytest.mark.parametrize(
    "stmt, why",
    [
        ("if (A[j] > 0) tmp[i] += A[j];", "conditional inside the loop"),
        ("tmp[i] += A[j]; i += 1;", "`i` (in the index) changes in the loop"),
        ("tmp[i] += A[j]; tmp[i + 1] = 0;", "at another index"),
        ("tmp[i] += A[j]; if (A[j] < 0) return;", "can leave the kernel"),
        ("tmp[i] += A[j]; f(tmp);", "the pointer `tmp` itself"),
        ("tmp[g(i)] += A[j];", "calls a function"),
        ("A[j] += tmp[i];", "does not update `tmp[...]`"),
    ],
)
def test_accumulate_in_register_refuses(stmt: str, why: str) -> None:
    text = (
        "__device__ int g(int); __device__ void f(float*);\n"
        "__global__ void k(float* A, float* tmp, int n) {\n"
        "    int i = threadIdx.x;\n"
        f"    for (int j = 0; j < n; j++) {{ {stmt} }}\n"
        "}\n"
    )
    st = T.parse(text)
    body = T.kernels(st)[0].body
    assert body is not None
    rw = Rewrite(text)
    at = text.index(stmt) + stmt.index("tmp[")
    got = K.accumulate_in_register(st, rw, at, "tmp", body)
    assert got is not None and why in got, got
    assert rw.text() == text  # nothing edited
