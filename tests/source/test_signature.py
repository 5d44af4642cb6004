"""Reading kernel parameter lists from CUDA source text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.errors import KernelNotFoundError, UsageError
from gpuadvise.source.signature import Param, find_kernels, list_kernels, parse_signature

SOURCE = r"""
#include <cuda_fp16.h>
#define RESTRICT __restrict__
#define BLOCK 256

struct Cell { float a; int b; };

// __global__ void commented_out(int x) {}
/* __global__ void also_commented(int x) {} */
const char* s = "__global__ void in_a_string(int x)";

extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = a * x[i] + y[i]; }
}

namespace physics {
namespace detail {
__global__ void __launch_bounds__(BLOCK, 2)
step(const Cell* cells,   // the grid
     unsigned int n /* count */,
     float4* v,
     Cell const* c2,
     float* const out,
     const int stride = 1)
{
    for (;;) { if (n) break; }
}
}  // namespace detail
}  // namespace physics

namespace a::b { __global__ void nested(double2* p) {} }
namespace { __global__ void hidden(int x) {} }

template <typename T, int BLOCK_SIZE = 256, bool ATOMIC = false>
__global__ void reduce(const T* RESTRICT in, T* out, int n)
{
    __shared__ T partial[BLOCK_SIZE];
}

template <>
__global__ void reduce<double, 128>(const double* in, double* out, long n) {}

template __global__ void reduce<float, 256, true>(const float*, float*, int);

#if 0
__global__ void dead(int x) {}
#endif

__global__ void declared_only(float*, int);

static __global__ void arrays(float a[], struct Cell c[], half2* h,
                              const __nv_bfloat16* b, __grid_constant__ const Cell p) {}

__global__ void no_params(void) {}

template <typename T>
__global__ void
__launch_bounds__(128)
needs_t(T* data, int n) {}

void __device__ helper(float* x) {}
"""


def names(params: tuple[Param, ...]) -> list[str]:
    return [p.name for p in params]


def test_kernels_of_a_text_are_found_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An analysis asks about the same source some ten times: it is read once, and each caller
    gets its own list of the same (frozen) declarations."""
    import gpuadvise.source.signature as signature

    text = SOURCE + "\n// a text of this test's own\n"
    seen: list[str] = []
    real = signature._preprocess
    monkeypatch.setattr(signature, "_preprocess", lambda t: seen.append(t) or real(t))
    first = find_kernels(text)
    first.clear()
    again = find_kernels(text)
    assert again and [d.name for d in again] == [d.name for d in find_kernels(SOURCE)]
    assert parse_signature(text, "saxpy")[0].name == "n"
    assert seen.count(text) == 1


def test_saxpy() -> None:
    n, a, x, y = parse_signature(SOURCE, "saxpy")
    assert (n.name, n.type_text, n.is_pointer, n.pointee, n.value_type) == (
        "n",
        "int",
        False,
        None,
        "int",
    )
    assert (a.name, a.value_type, a.is_const) == ("a", "float", False)
    assert (x.name, x.is_pointer, x.is_const, x.pointee, x.is_restrict) == (
        "x",
        True,
        True,
        "float",
        True,
    )
    assert x.type_text == "const float* __restrict__"
    assert (y.name, y.is_pointer, y.is_const, y.pointee, y.type_text) == (
        "y",
        True,
        False,
        "float",
        "float*",
    )
    assert [p.index for p in (n, a, x, y)] == [0, 1, 2, 3]
    assert n.line == 12


def test_namespaces_attributes_comments_multiline() -> None:
    for name in ("step", "detail::step", "physics::detail::step", "::physics::detail::step"):
        params = parse_signature(SOURCE, name)
        assert names(params) == ["cells", "n", "v", "c2", "out", "stride"]
    cells, n, v, c2, out, stride = parse_signature(SOURCE, "step")
    assert (cells.pointee, cells.is_const) == ("Cell", True)
    assert (n.value_type, n.is_pointer) == ("unsigned int", False)
    assert (v.pointee, v.is_const) == ("float4", False)
    assert (c2.pointee, c2.is_const) == ("Cell", True)  # east const
    assert (out.pointee, out.is_const) == ("float", False)  # const pointer, writable data
    assert (stride.is_const, stride.default, stride.value_type) == (True, "1", "int")
    assert parse_signature(SOURCE, "a::b::nested")[0].pointee == "double2"
    assert names(parse_signature(SOURCE, "hidden")) == ["x"]


def test_templates() -> None:
    inp, out, n = parse_signature(SOURCE, "reduce<float, 256, true>")
    assert (inp.pointee, inp.type_text, inp.is_const) == (
        "float",
        "const float* __restrict__",
        True,
    )
    assert out.pointee == "float"
    assert n.value_type == "int"
    # defaults fill the missing template arguments; spacing does not matter
    assert parse_signature(SOURCE, "reduce<int>")[0].pointee == "int"
    assert parse_signature(SOURCE, "reduce< unsigned int ,64>")[1].pointee == "unsigned int"
    # an explicit specialization wins when its arguments match
    spec = parse_signature(SOURCE, "reduce<double,128>")
    assert spec[2].value_type == "long"
    # the primary template otherwise
    assert parse_signature(SOURCE, "reduce<double, 64>")[2].value_type == "int"
    assert parse_signature(SOURCE, "needs_t<float4>")[0].pointee == "float4"


def test_template_without_arguments_when_types_need_them() -> None:
    with pytest.raises(UsageError, match="template argument 'T'"):
        parse_signature(SOURCE, "reduce")
    with pytest.raises(UsageError, match="not a template"):
        parse_signature(SOURCE, "saxpy<float>")
    with pytest.raises(UsageError, match="template arguments"):
        parse_signature(SOURCE, "reduce<float, 1, true, 4>")


def test_arrays_bf16_grid_constant_and_void() -> None:
    a, c, h, b, p = parse_signature(SOURCE, "arrays")
    assert (a.is_pointer, a.pointee) == (True, "float")
    assert (c.is_pointer, c.pointee) == (True, "Cell")
    assert h.pointee == "half2"
    assert (b.pointee, b.is_const) == ("__nv_bfloat16", True)
    assert (p.is_pointer, p.value_type, p.is_const) == (False, "Cell", True)
    assert parse_signature(SOURCE, "no_params") == ()


def test_declaration_only_gets_positional_names() -> None:
    p0, p1 = parse_signature(SOURCE, "declared_only")
    assert (p0.name, p0.pointee, p1.name, p1.value_type) == ("arg0", "float", "arg1", "int")


def test_not_found_lists_the_kernels() -> None:
    for missing in ("dead", "commented_out", "also_commented", "in_a_string", "helper", "nope"):
        with pytest.raises(KernelNotFoundError) as info:
            parse_signature(SOURCE, missing)
        assert "saxpy" in info.value.message
        assert isinstance(info.value, UsageError)


def test_list_kernels() -> None:
    assert list_kernels(SOURCE) == (
        "saxpy",
        "physics::detail::step",
        "a::b::nested",
        "hidden",
        "reduce",
        "reduce<double, 128>",
        "declared_only",
        "arrays",
        "no_params",
        "needs_t",
    )
    decls = {d.name: d for d in find_kernels(SOURCE)}
    assert decls["declared_only"].is_definition is False
    assert decls["saxpy"].is_definition is True
    assert decls["saxpy"].line == 12


def test_ambiguous_and_bad_names() -> None:
    src = (
        "namespace a { __global__ void k(int n) {} }\nnamespace b { __global__ void k(float x) {} }"
    )
    with pytest.raises(UsageError, match="ambiguous"):
        parse_signature(src, "k")
    assert names(parse_signature(src, "b::k")) == ["x"]
    for bad in ("", "1k", "k<", "a b"):
        with pytest.raises(UsageError):
            parse_signature(src, bad)


def test_odd_but_valid_forms() -> None:
    src = """
    #define KERNEL __global__
    #define PTR(T) T*
    KERNEL void k1(int n, float *__restrict__ out) {}
    __global__ __launch_bounds__(256) void k2(const float * const __restrict__ p) {}
    __global__ void k3(std::size_t n, unsigned long long int m, const struct Cell *c) {}
    __global__ void k4(float** pp, const float* const* cpp, Foo<int, 3>* f) {}
    __global__ void k5(const int* __restrict__ a, int b = (1 < 2), float c = 0.5f) {}
    __global__ void k6(float (*fp)[4]) {}
    """
    assert [p.name for p in parse_signature(src, "k1")] == ["n", "out"]
    (p,) = parse_signature(src, "k2")
    assert (p.name, p.pointee, p.is_const, p.is_restrict) == ("p", "float", True, True)
    n, m, c = parse_signature(src, "k3")
    assert (n.value_type, m.value_type, c.pointee, c.is_const) == (
        "std::size_t",
        "unsigned long long int",
        "Cell",
        True,
    )
    pp, cpp, f = parse_signature(src, "k4")
    assert (pp.pointee, pp.is_const) == ("float*", False)
    assert (cpp.pointee, cpp.is_const) == ("float*", True)
    assert f.pointee == "Foo<int, 3>"
    a, b, cc = parse_signature(src, "k5")
    assert (b.default, cc.default) == ("(1<2)", "0.5f")
    assert a.is_const
    assert parse_signature(src, "k6")[0].is_pointer


def test_duplicate_parameter_names_are_refused() -> None:
    with pytest.raises(UsageError, match="two parameters"):
        parse_signature("__global__ void k(int n, float n) {}", "k")


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet='_global vidkn(){}<>*,;:&"/\n#0123456789[]=', max_size=200))
def test_garbage_source_never_crashes(text: str) -> None:
    for kernel in ("k", "ns::k", "k<int>"):
        try:
            parse_signature("__global__ " + text, kernel)
        except UsageError:
            pass
    list_kernels(text)


# A scalar typed by a macro, a typedef or an enum takes the type the compiler gave it (the
# demangled signature; corpus: PolyBench's DATA_TYPE macro, cuda-hashing-algos' WORD typedef,
# HeCBench adam's adamMode_t enum)
COMPILED_TYPES_SRC = """\
#define DATA_TYPE float
typedef unsigned int WORD;
enum Mode { A, B };
enum class Small : unsigned char { X, Y };
struct Pair { float a, b; };
__global__ void k(DATA_TYPE alpha, WORD n, Mode m, Small s, Pair p, float* c) {}
"""


def test_scalars_of_user_type_names_take_the_compiled_type() -> None:
    from gpuadvise.source.signature import with_compiled_types
    from gpuadvise.spec.cuda_types import lookup

    params = parse_signature(COMPILED_TYPES_SRC, "k")
    compiled = ["float", "unsigned int", "Mode", "Small", "Pair", "float*"]  # the demangled
    out = with_compiled_types(params, compiled, lambda t: lookup(t) is not None, COMPILED_TYPES_SRC)
    assert [p.value_type for p in out[:5]] == [
        "float",
        "unsigned int",
        "int",
        "unsigned char",
        "Pair",
    ]
    assert out[5] == params[5]  # pointers untouched
    assert [p.name for p in out] == [p.name for p in params]
    # a signature that does not match the parameters' count changes nothing
    assert with_compiled_types(params, ["float"], lambda t: lookup(t) is not None) == list(params)
