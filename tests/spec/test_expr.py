"""The size-expression parser: C integer semantics, names, errors, and property tests."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.errors import GpuAdviseError, UsageError
from gpuadvise.spec.expr import c_div, c_mod, ceil_div, evaluate, names, parse

# --- examples -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "env", "value"),
    [
        ("n*4", {"n": 1024}, 4096),
        ("w*h", {"w": 640, "h": 480}, 307200),
        ("(n+255)/256", {"n": 4194304}, 16384),
        ("(n+255)/256", {"n": 4194305}, 16385),
        ("ceil_div(n, 256)", {"n": 1000}, 4),
        ("min(a, b) + max(a, b)", {"a": 3, "b": 9}, 12),
        ("0x10 * 2", {}, 32),
        ("0X1f", {}, 31),
        ("1 + 2 * 3", {}, 7),
        ("(1 + 2) * 3", {}, 9),
        ("10 - 3 - 2", {}, 5),  # left associative
        ("100 / 10 / 5", {}, 2),
        ("2 * 7 % 4", {}, 2),  # (2*7)%4, same precedence, left to right
        ("-7 / 2", {}, -3),  # truncates toward zero, as in C
        ("7 / -2", {}, -3),
        ("-7 % 2", {}, -1),  # the remainder takes the dividend's sign, as in C
        ("7 % -2", {}, 1),
        ("--5", {}, 5),
        ("-(3 - 5)", {}, 2),
        ("+4", {}, 4),
        ("ceil_div(-7, 2)", {}, -3),
        ("min", {"min": 5}, 5),  # a name is a function only when a '(' follows
        ("  n  ", {"n": 1}, 1),
        ("0", {}, 0),
    ],
)
def test_values(text: str, env: dict[str, int], value: int) -> None:
    assert evaluate(text, env) == value


def test_names() -> None:
    assert names("w*h + ceil_div(n, TILE) - min(a, 2)") == {"w", "h", "n", "TILE", "a"}
    assert names("42") == set()
    assert parse("n*4").names == frozenset({"n"})


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("n*(4+", 6),
        ("", 1),
        ("1 2", 3),
        ("(1", 3),
        ("1)", 2),
        ("n $ 2", 3),
        ("4n", 2),
        ("010", 1),
        ("foo(1, 2)", 1),
        ("min(1)", 1),
        ("max(1, 2, 3)", 1),
        ("1 +", 4),
        ("*2", 1),
        ("1.5", 2),
    ],
)
def test_syntax_errors_name_the_column(text: str, column: int) -> None:
    with pytest.raises(UsageError) as info:
        evaluate(text, {"n": 1})
    assert info.value.column == column - 1  # type: ignore[attr-defined]
    assert f"column {column}" in info.value.message
    assert info.value.hint


def test_unknown_name_says_how_to_give_it() -> None:
    with pytest.raises(UsageError) as info:
        evaluate("w*h", {"w": 4})
    assert "'h'" in info.value.message
    assert "--arg h=" in (info.value.hint or "")


@pytest.mark.parametrize("text", ["1/0", "n % (n-n)", "ceil_div(4, 0)", "5 / (2 - 2)"])
def test_division_by_zero(text: str) -> None:
    with pytest.raises(UsageError, match="divides by zero"):
        evaluate(text, {"n": 3})


def test_non_integer_values_are_refused() -> None:
    with pytest.raises(UsageError, match="not an integer"):
        evaluate("n*2", {"n": 0.5})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match="not an integer"):
        evaluate("n*2", {"n": True})


def test_no_python_eval() -> None:
    for text in ["__import__('os')", "n.__class__", "[1]", "1 if 1 else 2", "2**3", "a and b"]:
        with pytest.raises(UsageError):
            evaluate(text, {"n": 1, "a": 1, "b": 1})


def test_limits() -> None:
    assert evaluate("+".join(["1"] * 1500), {}) == 1500  # long chains do not recurse deeply
    with pytest.raises(UsageError, match="nesting"):
        evaluate("(" * 200 + "1" + ")" * 200, {})
    with pytest.raises(UsageError, match="nesting"):
        evaluate("-" * 300 + "1", {})
    with pytest.raises(UsageError, match="characters long"):
        evaluate("1+" * 3000 + "1", {})
    with pytest.raises(UsageError):
        parse(42)  # type: ignore[arg-type]


def test_c_helpers() -> None:
    assert c_div(-7, 2) == -3 and c_mod(-7, 2) == -1
    assert ceil_div(7, 2) == 4 and ceil_div(8, 2) == 4 and ceil_div(0, 5) == 0


# --- property tests ------------------------------------------------------------------------------

VARS = ("n", "w", "h", "tile", "min_")
BINOPS = ("+", "-", "*", "/", "%")
PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


def _trunc(a: int, b: int) -> int:
    return math.trunc(Fraction(a, b))


def ref_eval(node: tuple, env: dict[str, int]) -> int:
    """An independent reference evaluator: C semantics through exact fractions."""
    kind = node[0]
    if kind == "int":
        return node[1]
    if kind == "var":
        return env[node[1]]
    if kind == "neg":
        return -ref_eval(node[1], env)
    if kind == "call":
        a, b = ref_eval(node[2], env), ref_eval(node[3], env)
        if node[1] == "min":
            return min(a, b)
        if node[1] == "max":
            return max(a, b)
        return math.ceil(Fraction(a, b))  # raises ZeroDivisionError on b == 0
    op, a, b = node[1], ref_eval(node[2], env), ref_eval(node[3], env)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return _trunc(a, b)
    return a - b * _trunc(a, b)


def _prec(node: tuple) -> int:
    return PREC[node[1]] if node[0] == "bin" else 3


def render(node: tuple, minimal: bool, ws: str) -> str:
    """Text for ``node``: fully parenthesised, or with only the parentheses C needs."""
    kind = node[0]
    if kind == "int":
        return hex(node[1]) if node[2] else str(node[1])
    if kind == "var":
        return node[1]
    if kind == "neg":
        inner = render(node[1], minimal, ws)
        if node[1][0] == "bin" or inner.startswith("-"):
            inner = f"({inner})"
        return f"-{inner}"
    if kind == "call":
        return f"{node[1]}({render(node[2], minimal, ws)},{ws}{render(node[3], minimal, ws)})"
    op, left, right = node[1], node[2], node[3]
    ltext, rtext = render(left, minimal, ws), render(right, minimal, ws)
    if not minimal or _prec(left) < PREC[op]:
        ltext = f"({ltext})" if left[0] == "bin" else ltext
    if not minimal or _prec(right) <= PREC[op]:
        rtext = f"({rtext})" if right[0] == "bin" else rtext
    return f"{ltext}{ws}{op}{ws}{rtext}"


ints = st.integers(min_value=0, max_value=10**6)
leaves = st.one_of(
    st.tuples(st.just("int"), ints, st.booleans()),
    st.tuples(st.just("var"), st.sampled_from(VARS)),
)


def _extend(children: st.SearchStrategy[tuple]) -> st.SearchStrategy[tuple]:
    return st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(BINOPS), children, children),
        st.tuples(st.just("neg"), children),
        st.tuples(st.just("call"), st.sampled_from(["min", "max", "ceil_div"]), children, children),
    )


trees = st.recursive(leaves, _extend, max_leaves=25)
envs = st.fixed_dictionaries({v: st.integers(min_value=-(10**9), max_value=10**9) for v in VARS})


def _vars_of(node: tuple, out: set[str]) -> set[str]:
    if node[0] == "var":
        out.add(node[1])
    for child in node[1:]:
        if isinstance(child, tuple):
            _vars_of(child, out)
    return out


@settings(max_examples=examples(400), deadline=None)
@given(tree=trees, env=envs, minimal=st.booleans(), ws=st.sampled_from(["", " ", "  \t"]))
def test_random_expressions_match_reference(
    tree: tuple, env: dict[str, int], minimal: bool, ws: str
) -> None:
    text = render(tree, minimal, ws)
    try:
        expected = ref_eval(tree, env)
    except ZeroDivisionError:
        with pytest.raises(UsageError, match="divides by zero"):
            evaluate(text, env)
        return
    assert evaluate(text, env) == expected, text
    assert names(text) == _vars_of(tree, set())


EXPR_ALPHABET = "0123456789xXabnwh_ +-*/%(),.$\t"


@settings(max_examples=examples(500), deadline=None)
@given(text=st.one_of(st.text(max_size=60), st.text(alphabet=EXPR_ALPHABET, max_size=60)))
@example("(" * 500)
@example("-" * 500)
@example("9" * 2000)
@example("0x")
@example("min(")
def test_garbage_only_raises_usage_error(text: str) -> None:
    try:
        value = evaluate(text, {"n": 7, "w": 3, "h": 0, "a": -2, "b": 5})
    except UsageError as err:
        assert isinstance(err, GpuAdviseError) and err.message and err.hint
    else:
        assert isinstance(value, int)
