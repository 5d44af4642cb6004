"""The fix kit's index padding of a 1-D array (gpuadvise/source/fixkit_index.py), without a
compiler: which uses allow it, the rewritten text, where the helper goes; and GA201's PTX-name
reading (gpuadvise/rules/bank_layout.py), which no longer uses regular expressions."""

from __future__ import annotations

import textwrap

import pytest

from gpuadvise.rules.bank_layout import source_name
from gpuadvise.source import fixkit_index as FI
from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite


def _tree(code: str) -> T.SourceTree:
    return T.parse(textwrap.dedent(code))


def _array(st: T.SourceTree, name: str) -> int:
    """The offset of ``name``'s declarator name (its first declaration)."""
    for d in T.declarations(st):
        for dd in d.declarators:
            if dd.name == name:
                return dd.name_span[0]
    raise AssertionError(name)


def _pad(code: str, name: str = "a", shift: int = 5, pad: int = 1) -> str:
    st = _tree(code)
    at = _array(st, name)
    got = FI.index_accesses(st, name, (0, len(st.text)), [at])
    assert not isinstance(got, str), got
    rw = Rewrite(st.text)
    rw.insert(FI.helper_offset(st, [at]), FI.index_helper(f"{name}_padded", shift, pad, name))
    FI.wrap_indices(rw, got, f"{name}_padded")
    return rw.text()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("N", "N"),
        ("2 * B", "2 * B"),
        ("N + 1", "N + 1"),
        ("(N)", "(N)"),
        ("f(N)", "f(N)"),
        ("N << 1", "(N << 1)"),
        ("c ? 4 : 8", "(c ? 4 : 8)"),
        ("(int)N", "((int)N)"),
    ],
)
def test_operand(text: str, want: str) -> None:
    assert FI.operand(text) == want


def test_padded_extent() -> None:
    assert FI.padded_extent("N", 5, 1) == "N + (N >> 5)"
    assert FI.padded_extent(" 2 * B ", 4, 2) == "2 * B + (2 * B >> 4) * 2"
    assert FI.padded_extent("N << 1", 5, 1) == "(N << 1) + ((N << 1) >> 5)"


def test_helper_text() -> None:
    h = FI.index_helper("t_padded", 5, 1, "t")
    assert "__device__ __forceinline__ I t_padded(I e) { return e + (e >> 5); }" in h
    assert FI.index_helper("t_padded", 4, 2, "t").count("e + (e >> 4) * 2") == 1


def test_swizzle_helper_text_is_a_permutation_within_each_group() -> None:
    h = FI.swizzle_helper("s_swizzled", 5, "s")
    assert "__device__ __forceinline__ I s_swizzled(I e) { return e ^ (((e >> 5) & 1) * 31); }" in h
    assert h.startswith("// s[e] is stored at s[s_swizzled(e)]:\n")
    assert all(len(line) <= 100 for line in h.splitlines())
    # the map the helper computes: each group of 32 onto itself, the odd ones reversed
    got = [e ^ (((e >> 5) & 1) * 31) for e in range(128)]
    assert sorted(got) == list(range(128))
    assert got[:32] == list(range(32)) and got[32:64] == list(range(63, 31, -1))


def test_every_access_wrapped_nested_and_with_side_effects() -> None:
    out = _pad(
        """\
        __global__ void k(int* o) {
            __shared__ int a[64];
            int i = threadIdx.x;
            a[ i ] = i;
            a[a[i]] += a[i++];
            o[0] = a[2 * i + 1];
        }
        """
    )
    assert "a[ a_padded(i) ] = i;" in out  # the spaces stay outside
    assert "a[a_padded(a[a_padded(i)])] += a[a_padded(i++)];" in out
    assert "o[0] = a[a_padded(2 * i + 1)];" in out
    assert out.index("a_padded(I e)") < out.index("__global__")


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("int* p = a; p[0] = 1;", "line 3 uses a without a subscript"),
        ("int* p = &a[1]; p[0] = 1;", "line 3 takes the address of an element of a"),
        ("o[0] = sizeof(a);", "line 3 uses a without a subscript"),
        ("o[0] = *(a + 1);", "line 3 uses a without a subscript"),
        ("{ int a[3]; a[0] = 1; }", "a is declared more than once in its scope"),
    ],
)
def test_uses_that_refuse(code: str, why: str) -> None:
    st = _tree(f"__global__ void k(int* o) {{\n    __shared__ int a[64];\n    {code}\n}}\n")
    got = FI.index_accesses(st, "a", (0, len(st.text)), [_array(st, "a")])
    assert got == why


def test_a_macro_naming_the_array_refuses() -> None:
    st = _tree("#define AT(i) a[i]\n__global__ void k(int* o) {\n    __shared__ int a[64];\n"
               "    o[0] = AT(1);\n}\n")  # fmt: skip
    at = [_array(st, "a")]
    assert FI.index_accesses(st, "a", (0, len(st.text)), at) == (
        "a macro names a (its expansions are not rewritten)"
    )
    # allowed, the macro's body is rewritten too
    got = FI.index_accesses(st, "a", (0, len(st.text)), at, macros=True)
    assert isinstance(got, list) and [st.text[a:b] for a, b in got] == ["i"]  # AT(1): a call


def test_macros_naming_the_array_otherwise_refuse() -> None:
    st = _tree("#define P (&a[1])\n__global__ void k(int* o) {\n    __shared__ int a[64];\n"
               "    o[0] = a[threadIdx.x];\n}\n")  # fmt: skip
    assert FI.index_accesses(st, "a", (0, len(st.text)), [_array(st, "a")], macros=True) == (
        "the macro at line 1 uses a otherwise than a[e]"
    )


def test_helper_goes_above_the_item_its_comments_and_template_but_inside_guards() -> None:
    out = _pad(
        """\
        #ifndef K_CUH
        #define K_CUH
        namespace ns {
        // the kernel
        template <int B>
        __global__ void k(int* o) {
            __shared__ int a[2 * B];
            o[0] = a[threadIdx.x * 4];
        }
        }
        #endif
        """
    )
    lines = out.splitlines()
    helper = next(i for i, ln in enumerate(lines) if "a_padded(I e)" in ln)
    assert lines.index("namespace ns {") == helper - 4
    assert lines[helper + 2] == "// the kernel" and lines[helper + 3] == "template <int B>"


def test_helper_goes_outside_an_extern_c_block() -> None:
    out = _pad(
        """\
        extern "C" {
        __global__ void k(int* o) {
            __shared__ int a[64];
            o[0] = a[threadIdx.x * 4];
        }
        }
        """
    )
    assert out.index("a_padded(I e)") < out.index('extern "C" {')


@pytest.mark.parametrize(
    ("ptx", "name"),
    [
        ("_ZZ6kernelE4tile", "tile"),
        ("_ZZ6kernelE4tile_1", "tile"),
        ("_ZZ13scan_templateILi256EEvPKiPiE1s", "s"),
        ("tile", "tile"),
        ("_Z4tile", None),
        ("_ZZ6kernelE4tileX", None),
    ],
)
def test_source_name(ptx: str, name: str | None) -> None:
    assert source_name(ptx) == name
