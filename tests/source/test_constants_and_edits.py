"""The one constant evaluator (gpuadvise.source.constants) and rewriting by ranges
(gpuadvise.source.edit), with property-based tests that the parser and a no-op rewrite never
fail on arbitrary text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.source import tree as T
from gpuadvise.source.constants import NotConstant, constants, evaluate, int_literal
from gpuadvise.source.edit import EditConflict, Rewrite
from gpuadvise.source.patch import apply_unified_diff


def test_constants_evaluates_macros_and_const_ints() -> None:
    text = (
        "#define RADIUS 4\n#define BLOCK 8u  // eight\n#define TILE (BLOCK + 2 * RADIUS)\n"
        "#define F(x) (x)\nconstexpr int W = TILE * 2;\nstatic const unsigned H = 0x10;\n"
        "#define NAME something_else\n#define LONG (1 << \\\n  4)\n"
        "const int A = 1, B = A + 1;\nconst float NOT_INT = 1.5f;\n"
    )
    env = constants(text)
    assert env == {
        "RADIUS": 4,
        "BLOCK": 8,
        "TILE": 16,
        "W": 32,
        "H": 16,
        "LONG": 16,
        "A": 1,
        "B": 2,
    }
    # template arguments of an instantiation shadow the file's names
    assert constants(text, {"RADIUS": "3", "K": "TILE * 2", "T": "float"})["RADIUS"] == 3
    assert constants(text, {"K": "TILE * 2"})["K"] == 32
    assert "T" not in constants(text, {"T": "float"})


@pytest.mark.parametrize(
    "expr, want",
    [
        ("7 / 2", 3),
        ("-7 / 2", -3),  # C truncates toward zero
        ("-7 % 2", -1),
        ("1 << 10", 1024),
        ("0x1F & ~1", 30),
        ("010", 8),
        ("0b101", 5),
        ("256u / 2ul", 128),
        ("(int)(N + 1)", 11),
        ("N > 8 ? N : 8", 10),
        ("min(N, 4) + max(2, 3) + ceil_div(N, 4)", 10),
        ("blockDim.x * 2", 512),
        ("true + !0", 2),
    ],
)
def test_evaluate(expr: str, want: int) -> None:
    assert evaluate(expr, {"N": 10, "blockDim.x": 256}) == want


@pytest.mark.parametrize(
    "expr", ["1 / 0", "M + 1", "1.5", "(float)2", "f(2)", "a +", "", "1 << 99999", "09"]
)
def test_evaluate_refuses(expr: str) -> None:
    with pytest.raises(NotConstant):
        evaluate(expr, {})


def test_int_literal() -> None:
    assert int_literal("0XfFu") == 255 and int_literal("0") == 0 and int_literal("1'000") == 1000
    with pytest.raises(NotConstant):
        int_literal("1.0")


TEXT = "line one\n    x = a[i];\nline three\nlast\n"


def test_rewrite_by_ranges_and_its_diff() -> None:
    rw = Rewrite(TEXT)
    a = TEXT.index("a[i]")
    rw.replace(a, a + 4, "b[j]").insert(0, "// head\n").replace_lines(3, 3, ["3a", "3b"])
    new = rw.text()
    assert new == "// head\nline one\n    x = b[j];\n3a\n3b\nlast\n"
    diff = rw.diff("k.cu")
    assert diff is not None and diff.startswith("--- a/k.cu\n+++ b/k.cu\n")
    assert apply_unified_diff(TEXT, diff) == new
    assert Rewrite(TEXT).diff("k.cu") is None
    two = Rewrite(TEXT).insert(5, "A").insert(5, "B")
    assert two.text() == TEXT[:5] + "AB" + TEXT[5:]  # insertions at one offset keep their order
    gone = Rewrite(TEXT).delete_lines(2)
    assert gone.text() == "line one\nline three\nlast\n"
    assert Rewrite(TEXT).replace_lines(4, 4, []).text() == "line one\n    x = a[i];\nline three\n"
    assert Rewrite("a\nb").replace_lines(2, 2, []).text() == "a"  # the last line, no newline


def test_rewrite_refuses_overlaps() -> None:
    rw = Rewrite(TEXT).replace(2, 6, "x")
    with pytest.raises(EditConflict):
        rw.replace(4, 8, "y")
    with pytest.raises(EditConflict):
        rw.insert(3, "z")
    with pytest.raises(EditConflict):
        rw.replace(0, len(TEXT) + 1, "")
    rw.insert(6, "after")  # at the boundary: fine
    assert rw.text().startswith("lixafter")


def test_rewrite_of_a_kernel_round_trips(tmp_path) -> None:
    """Rename every use of a variable by node ranges: the diff applies and gives the text."""
    from gpuadvise.source.text import find_kernel_source

    p = tmp_path / "k.cu"
    p.write_text(
        "__global__ void k(float* o) {\n    int tid = threadIdx.x;  // tid\n"
        "    o[tid] = tid * 2;\n    o.tid = 1;\n}\n"
    )
    ks = find_kernel_source(p, "k")
    assert ks is not None
    rw = ks.rewrite()
    for u in ks.uses("tid"):
        rw.replace(*u.span, "t")
    new = rw.text()
    assert "int t = threadIdx.x;  // tid" in new and "o[t] = t * 2;" in new
    assert "o.tid = 1;" in new  # a member of that name is another thing
    assert apply_unified_diff(ks.text, rw.diff("k.cu") or "") == new


_CODEISH = st.text(
    alphabet=st.sampled_from(list("abcxyz_019 \n\t{}()[];,<>=+-*/%&|^!?:#\"'\\.") + ["é", "→"]),
    max_size=300,
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), _CODEISH))
@example("A: ")  # error recovery makes up a zero-width statement (CI, 2026-11-29)
def test_the_parser_never_raises(text: str) -> None:
    tree = T.parse(text)
    assert tree.text == text and len(tree.code) == len(text)
    for k in T.kernels(tree):
        assert 0 <= k.start <= len(text)
    whole = (0, len(text))
    for lp in T.loops(tree):
        assert 0 <= lp.span[0] <= lp.span[1] <= len(text)
    T.declarations(tree)
    T.calls(tree)
    T.subscripts(tree)
    T.ifs(tree, whole)
    for s in T.statements(tree, whole):
        assert 0 <= s.start <= s.end < len(text)
    constants(text)
    for off in range(0, len(text), 37):
        at = T.statement_at(tree, off)
        assert at is None or 0 <= at.start <= at.end < len(text)


@settings(max_examples=examples(150), deadline=None)
@given(st.one_of(st.text(max_size=300), _CODEISH))
def test_a_noop_rewrite_returns_the_text(text: str) -> None:
    rw = Rewrite(text)
    assert rw.text() == text and rw.diff("k.cu") is None
    rw.replace(0, 0, "").replace(len(text), len(text), "")
    assert rw.text() == text


@settings(max_examples=examples(100), deadline=None)
@given(st.text(alphabet="ab\n ", max_size=80), st.data())
def test_non_overlapping_edits_apply_as_a_diff(body: str, data: st.DataObject) -> None:
    text = body + "\n"  # a source file's lines end with a newline (as the diffs assume)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text) - 1), max_size=6)))
    rw = Rewrite(text)
    for a, b in zip(cuts[::2], cuts[1::2], strict=False):
        rw.replace(a, b, data.draw(st.text(alphabet="XY\n", max_size=5)))
    new = rw.text()
    diff = rw.diff("k.cu")
    if diff is None:
        assert new.split("\n") == text.split("\n")
    else:
        assert apply_unified_diff(text, diff) == new
