"""The fix kit's reduction-tree operations (gpuadvise.source.fixkit_trees): the readers on several
spellings of one pattern, and the edits leaving everything outside their node as written."""

from __future__ import annotations

import pytest

from gpuadvise.source import fixkit_trees as K
from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite

TIDS = {"threadIdx.x", "tid"}


def _e(text: str) -> T.Expr:
    e = T.parse_expression(text)
    assert e is not None
    return e


@pytest.mark.parametrize(
    "text", ["tid % (2 * s) == 0", "0 == (tid % (s * 2))", "(threadIdx.x & (2*s - 1)) == 0u",
             "tid % (s << 1) == 0", "tid % (s + s) == 0"],
)  # fmt: skip
def test_interleaved_guard(text: str) -> None:
    assert K.interleaved_guard(_e(text), "s", TIDS) in TIDS


@pytest.mark.parametrize("text", ["tid % 2 * s == 0", "tid % (2 * s) == 1", "k % (2 * s) == 0"])
def test_not_an_interleaved_guard(text: str) -> None:
    assert K.interleaved_guard(_e(text), "s", TIDS) is None


@pytest.mark.parametrize("text", ["2 * s * tid", "tid * (2 * s)", "s * 2u * threadIdx.x"])
def test_strided_product(text: str) -> None:
    assert K.strided_product(_e(text), "s", TIDS) in TIDS


@pytest.mark.parametrize("text", ["s *= 2", "s <<= 1", "s += s", "s = 2 * s", "s = s << 1"])
def test_doubles(text: str) -> None:
    assert K.doubles(_e(text), "s")


@pytest.mark.parametrize(
    "stmt, arr, chain",
    [("a[t] += a[t + s];", "a", None), ("a[t] = a[t] + a[t + s];", "a", None),
     ("a[t] = v = v + a[t + s];", "a", "v"), ("a[t] = (a[t] + a[t ^ s]);", "a", None)],
)  # fmt: skip
def test_sum_step(stmt: str, arr: str, chain: str | None) -> None:
    st = T.parse("__global__ void k(int* a) { int v = 0; unsigned t = 0, s = 1; " + stmt + " }")
    (x,) = [s for s in T.statements(st) if s.kind == "expression_statement"]
    got = K.sum_step(st, x)
    assert got is not None and (got.array, got.chain) == (arr, chain)


def test_a_max_is_no_sum_step() -> None:
    st = T.parse("__global__ void k(int* a) { a[0] = max(a[0], a[0 + 1]); }")
    (x,) = T.statements(st)
    assert K.sum_step(st, x) is None


LOOP = """\
#define B 256
__global__ void k(int* a) {
    for (unsigned s = 1 /* first */; s < B; s *= 2) {  // doubling
        unsigned i = 2 * s * threadIdx.x, j = i + s;  // both
        if (i < B) a[i] += a[j];
    }
}
"""


def test_halve_loop_and_remove_declarator_keep_the_rest() -> None:
    st = T.parse(LOOP)
    (lp,) = T.loops(st)
    sl = K.stride_loop(st, lp)
    assert sl is not None and sl.s == "s" and sl.decl == "unsigned "
    bound = K.doubling_bound(st, sl)
    assert bound is not None and bound.text == "B"
    rw = Rewrite(LOOP)
    K.halve_loop(st, rw, sl, bound)
    (d,) = T.declarations(st, lp.body)
    K.remove_declarator(rw, d, d.declarators[0])
    (check,) = K.bounds_checks(st, "i", lp.body)
    rw.replace(*check, "threadIdx.x < s")
    K.rename_uses(st, rw, "i", "threadIdx.x", lp.body, skip=[d.declarators[0].span, check])
    assert rw.text().splitlines()[2:5] == [
        "    for (unsigned s = B / 2 /* first */; s > 0; s >>= 1) {  // doubling",
        "        unsigned j = threadIdx.x + s;  // both",
        "        if (threadIdx.x < s) a[threadIdx.x] += a[j];",
    ]


def test_remove_and_replace_statements_by_whole_lines() -> None:
    text = "void f() {\n    int a = 1;\n    a += 2; a += 3;\n    a += 4;\n}\n"
    st = T.parse(text)
    ss = T.statements(st)
    rw = Rewrite(text)
    K.remove_statement(rw, (ss[0].start, ss[0].end + 1))
    K.replace_statements(rw, (ss[1].start, ss[2].end + 1), ["a += 5;", "a += 6;"])
    K.replace_statements(rw, (ss[3].start, ss[3].end + 1), ["a += 7;"])
    assert rw.text() == "void f() {\n    a += 5;\n    a += 6;\n    a += 7;\n}\n"
