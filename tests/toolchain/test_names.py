"""The normaliser of kernel names (``gpuadvise.toolchain.names.norm``): spellings that mean the
same in any source are one name; different names stay apart."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.toolchain.names import norm

# --- the normaliser: spellings that mean the same in any source ---------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("reduce<256u>", "reduce<256>"),
        ("reduce<(unsigned int)0x100>", "reduce< 256 >"),
        ("::ns::reduce<256ull, true>", "ns::reduce<256,1>"),
        ("k<const unsigned *>", "k<unsigned int const*>"),
        ("k<long unsigned int>", "k<unsigned long>"),
        ("k<signed>", "k<int>"),
        ("k<(128)>", "k<128>"),
        ("k<((-1))>", "k<-1>"),
        ("k<Vec<float, 4> >", "k<Vec<float,4>>"),
        ("k<struct S>", "k<S>"),
        ("k<(bool)1>", "k<true>"),
    ],
)
def test_norm_makes_spellings_equal(a: str, b: str) -> None:
    assert norm(a) == norm(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("k<(E)1>", "k<1>"),  # an enumerator is not its value
        ("k<float const*>", "k<float* const>"),  # a pointer to const is not a const pointer
        ("k<unsigned char>", "k<char>"),
        ("k<long long>", "k<long>"),
        ("(anonymous namespace)::k", "k"),
    ],
)
def test_norm_keeps_different_names_apart(a: str, b: str) -> None:
    assert norm(a) != norm(b)


def test_norm_keeps_signatures_readable() -> None:
    assert norm("void ns::k<256u>(float const*, int)") == "void ns::k<256>(float const*,int)"
    assert norm("(anonymous namespace)::k") == "(anonymous namespace)::k"


_PIECES = st.sampled_from(
    ["<", ">", "(", ")", ",", "::", "*", "&", " ", "-", "1", "0x1F", "07", "256u", "k", "ns",
     "half", "const", "unsigned", "long", "int", "char", "true", "(int)", "(E)", "float"]
)  # fmt: skip


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_PIECES, max_size=16).map("".join))
def test_norm_is_total_and_idempotent(name: str) -> None:
    once = norm(name)
    assert norm(once) == once
