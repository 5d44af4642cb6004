"""Kernel names as users write them (issue #36), read from the parsed source
(``gpuadvise.source.kernel_names``): what template arguments mean through typedefs (CUDA's
headers', the file's, the user's headers'), enumerators (scoped and unscoped), constexpr
constants, macros, default template arguments, nested templates and structs without their
namespace; what is left to the compiler; the instances as the user's code spells them; and the
source-level selection (spec checks, gate's line lookup) reading the same meaning. The whole
resolution with nvcc is tests/toolchain/test_name_resolution.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.source.kernel_names import (
    compiler_spelling,
    source_names,
    split_template_name,
    user_spelling,
)
from gpuadvise.source.signature import parse_signature, select_kernel
from gpuadvise.spec.cuda_types import HEADER_TYPEDEFS
from gpuadvise.toolchain.names import norm

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "cuda" / "kernel_names"
SOURCE = FOLDER / "instances.cu"


def _names():  # type: ignore[no-untyped-def]
    return source_names(((FOLDER / "types.cuh").read_text(), SOURCE.read_text()))


def _same(a: str, b: str) -> bool:
    return norm(a) == norm(b)


# --- the source's meaning ------------------------------------------------------------------------


def test_split_template_name() -> None:
    assert split_template_name("ns::k<256, (a > b), Vec<int, 2>>") == (
        "ns::k",
        ["256", "(a > b)", "Vec<int, 2>"],
    )
    assert split_template_name("k") is None
    assert split_template_name("k<>") == ("k", [])


@pytest.mark.parametrize(
    ("written", "compiler"),
    [
        ("get_rows<half, float>", "get_rows<__half, float>"),  # cuda_fp16.h
        ("get_rows<nv_bfloat16, float>", "get_rows<__nv_bfloat16, float>"),  # cuda_bf16.h
        ("get_rows<int64_t, unsigned>", "get_rows<long, unsigned int>"),  # stdint.h
        ("get_rows<long, uint>", "get_rows<long, unsigned int>"),  # sys/types.h
        ("get_rows<int64_t, u32>", "get_rows<long, unsigned int>"),  # the file's typedef
        ("get_rows<std::size_t, real_t>", "get_rows<unsigned long, float>"),  # the user's header
        ("get_rows<unsigned long, VALUE_T>", "get_rows<unsigned long, float>"),  # a macro type
        ("quantize<LAYOUT_DS4>", "quantize<(layout)1>"),  # unscoped enumerator
        ("quantize<layout::LAYOUT_DS4>", "quantize<(layout)1>"),
        ("tiled<ga::Mode::exact>", "tiled<(ga::Mode)3, 64, true>"),  # scoped, 2 defaults
        ("tiled<Mode::exact, TILE>", "tiled<(ga::Mode)3, 64, true>"),  # macro, lenient scope
        ("tiled<ga::Mode::exact, kWarps * 16, 1>", "tiled<(ga::Mode)3, 64, true>"),  # constexpr
        ("reduce<128>", "reduce<128u, float>"),  # a default type argument
        ("vec_copy<ga::Vec<half>>", "vec_copy<ga::Vec<__half, 4> >"),  # nested, its default
        ("vec_copy<ga::Vec<half, 2 * 2>>", "vec_copy<ga::Vec<__half, 4> >"),
        ("vec_copy<Pair>", "vec_copy<ga::Pair>"),  # a struct without its namespace
        ("via_pointer<const float *>", "via_pointer<float const*>"),  # pointers
    ],
)
def test_compiler_spelling(written: str, compiler: str) -> None:
    got = compiler_spelling(_names(), written)
    assert got is not None and norm(got) == norm(compiler), got


@pytest.mark.parametrize(
    "written",
    [
        "sized<sizeof(float4)>",  # sizeof: the compiler's to say
        "get_rows<half, float, int>",  # more arguments than the template takes
        "tiled<ga::Mode::exact, kMissing>",  # an unknown constant for a value parameter
        "get_rows<const pu32, float>",  # const on a pointer typedef is no text substitution
    ],
)
def test_what_the_source_cannot_say_is_left_to_the_compiler(written: str) -> None:
    names = source_names((SOURCE.read_text() + "\ntypedef unsigned int* pu32;\n",))
    assert compiler_spelling(names, written) is None


def test_enumerators_and_their_scopes() -> None:
    names = source_names(
        (
            "enum E { A, B = A + 4, C };\n"
            "namespace ns { enum class F : char { X = 2, Y }; enum G { P = B * 2 }; }\n"
            "#define PICK C\n"
            "template <E e, ns::F f, auto g> __global__ void k(float* p) {}\n",
        )
    )
    assert {n: (e.enum, e.value) for n, e in names.enumerators.items()} == {
        "A": ("E", 0),
        "E::A": ("E", 0),
        "B": ("E", 4),
        "E::B": ("E", 4),
        "C": ("E", 5),
        "E::C": ("E", 5),
        "ns::F::X": ("ns::F", 2),
        "ns::F::Y": ("ns::F", 3),
        "ns::P": ("ns::G", 8),
        "ns::G::P": ("ns::G", 8),
    }
    assert "X" not in names.values  # a scoped enumerator is no constant outside its enum
    got = compiler_spelling(names, "k<PICK, F::Y, ns::P>")  # auto: the enumerator's own type
    assert got == "k<(E)5, (ns::F)3, (ns::G)8>"


def test_user_spelling_puts_the_users_names_back() -> None:
    names = _names()
    assert user_spelling(names, "get_rows<__half, float>", _same) == "get_rows<half, float>"
    assert user_spelling(names, "quantize<(layout)1>", _same) == "quantize<LAYOUT_DS4>"
    assert user_spelling(names, "tiled<(ga::Mode)3, 64, true>", _same) == "tiled<ga::Mode::exact>"
    # not written in the code: synthesized from the typedefs the code prefers, checked back
    assert user_spelling(names, "get_rows<__half, __half>", _same) == "get_rows<half, half>"
    assert user_spelling(names, "tiled<(ga::Mode)1, 32, false>", _same) == (
        "tiled<ga::Mode::fast, 32, false>"
    )
    # what the source does not know stays the compiler's
    assert user_spelling(names, "other<(Z)1>", _same) == "other<(Z)1>"


@pytest.mark.toolkit
def test_header_typedefs_are_what_nvcc_says(tmp_path: Path) -> None:
    """Every entry of HEADER_TYPEDEFS is the type nvcc gives it (a wrong one would select the
    wrong instance with no compile to catch it)."""
    from gpuadvise.toolchain import find_toolchain

    lines = [
        "#include <cstdint>",
        "#include <cstddef>",
        "#include <sys/types.h>",
        "#include <cuda_fp16.h>",
        "#include <cuda_bf16.h>",
        "#include <type_traits>",
    ]
    for alias, target in HEADER_TYPEDEFS.items():
        lines.append(f'static_assert(std::is_same<{alias}, {target}>::value, "{alias}");')
    src = tmp_path / "typedefs.cu"
    src.write_text("\n".join(lines) + "\n")
    nvcc = str(find_toolchain().nvcc)
    proc = subprocess.run(
        [nvcc, "-std=c++17", "-c", str(src), "-o", str(tmp_path / "t.o")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# --- the source-level selection (spec checks, gate's line lookup) --------------------------------


def test_source_selection_reads_the_meaning() -> None:
    text = SOURCE.read_text() + (
        "\ntemplate <> __global__ void get_rows<__half, __half>(const __half* s, __half* d, int n)"
        " { }\n"
    )
    decl, bound = select_kernel(text, "get_rows<half, half>")  # the explicit specialization
    assert decl.specialization_args == ("__half", "__half") and bound == {}
    params = parse_signature(text, "vec_copy<Pair>")  # the type the compiler sees
    assert [p.pointee for p in params] == ["ga::Pair", "ga::Pair"]
    assert select_kernel(text, "tiled<Mode::exact, TILE>")[1]["TILE_N"] == "TILE"


_PIECES = st.sampled_from(
    ["<", ">", "(", ")", ",", "::", "*", " ", "-", "1", "0x1f", "get_rows", "tiled", "half",
     "Mode::exact", "LAYOUT_DS4", "ga::Vec", "const", "unsigned", "true", "sizeof", "TILE", "'"]
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_PIECES, max_size=14).map("".join))
def test_any_text_resolves_or_not_without_raising(name: str) -> None:
    names = _names()
    spelled = compiler_spelling(names, name)
    assert spelled is None or split_template_name(spelled) is not None
    user_spelling(names, name, _same)
