"""Integer constants of CUDA source: one evaluator for ``#define``s, ``const`` integers, array
dimensions, attribute arguments and template arguments.

:func:`evaluate` computes a C integer constant expression from its parse tree (never ``eval``):
literals (decimal, hex, octal, binary, with ``u``/``l`` suffixes), names looked up in an
environment (``blockDim.x`` too, as that key), ``+ - * / %`` with C's truncating division and
remainder (as :mod:`gpuadvise.spec.expr`, whose ``min``/``max``/``ceil_div`` it also knows),
shifts, bitwise and logical operators, comparisons, ``?:``, casts to integer types and
``true``/``false``. Anything else (floats, unknown names, calls, division by zero) raises
:class:`NotConstant`.

:func:`constants` gives a file's integer constants: object-like ``#define NAME expr`` and
``const``/``constexpr`` integer declarations whose value is integer arithmetic over numbers and
constants, evaluated in order until nothing more can be; template arguments of the instantiation
asked for (``reduce<128>``: ``blockSize = 128``) are added by the caller's ``bindings``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

from tree_sitter import Node

from gpuadvise.source.tree import SourceTree, declarations, parse

__all__ = ["NotConstant", "constants", "defines", "evaluate", "int_literal", "try_evaluate"]


class NotConstant(ValueError):
    """The expression is not an integer constant gpuadvise can evaluate."""


_INT_LITERAL = re.compile(
    r"(?P<body>0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)(?P<suffix>[uUlLzZ]*)"
)
_INT_TYPES = frozenset(
    "unsigned signed int long short char size_t int8_t int16_t int32_t int64_t uint8_t "
    "uint16_t uint32_t uint64_t bool auto".split()
)
# the type words of a ``const``/``constexpr`` declaration whose value is a constant
_CONST_TYPE_WORDS = frozenset("unsigned signed int long short size_t auto".split())
_MAX_BITS = 4096  # shifts and products past this many bits are not constants anyone writes


def int_literal(text: str) -> int:
    """The value of a C integer literal (``0x1F``, ``017``, ``0b101``, ``256u``, ``1'000``)."""
    t = text.strip()
    if t[:1] in ("-", "+"):  # the grammar reads `-7` as one literal
        v = int_literal(t[1:])
        return -v if t[0] == "-" else v
    m = _INT_LITERAL.fullmatch(t)
    if m is None:
        raise NotConstant(f"{text!r} is not an integer literal")
    body = m.group("body").replace("'", "")
    low = body.lower()
    if low.startswith("0x"):
        return int(body[2:], 16)
    if low.startswith("0b"):
        return int(body[2:], 2)
    if len(body) > 1 and body.startswith("0"):
        if not all(c in "01234567" for c in body):
            raise NotConstant(f"{text!r} is not an octal literal")
        return int(body, 8)
    return int(body)


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise NotConstant("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


def _ceil_div(a: int, b: int) -> int:
    if b == 0:
        raise NotConstant("division by zero")
    return -((-a) // b)


def _shift(a: int, b: int, left: bool) -> int:
    if b < 0 or b > _MAX_BITS:
        raise NotConstant("shift out of range")
    return a << b if left else a >> b


_BINARY: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _c_div,
    "%": _c_mod,
    "<<": lambda a, b: _shift(a, b, True),
    ">>": lambda a, b: _shift(a, b, False),
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
}
_FUNCTIONS: dict[str, Callable[[int, int], int]] = {"min": min, "max": max, "ceil_div": _ceil_div}


class _Evaluator:
    def __init__(self, st: SourceTree, env: Mapping[str, int]) -> None:
        self.st = st
        self.env = env

    def text(self, n: Node) -> str:
        return self.st.code_of(n).strip()

    def value(self, n: Node) -> int:
        t = n.type
        if t == "number_literal":
            return int_literal(self.text(n))
        if t in ("true", "false"):
            return int(t == "true")
        if t in ("identifier", "field_expression", "qualified_identifier"):
            key = re.sub(r"\s+", "", self.text(n))
            if key in self.env:
                return int(self.env[key])
            raise NotConstant(f"{key} is not a known constant")
        if t == "parenthesized_expression":
            inner = [c for c in n.named_children if c.type != "comment"]
            if len(inner) != 1:
                raise NotConstant("a comma expression")
            return self.value(inner[0])
        if t == "unary_expression":
            op = n.child_by_field_name("operator")
            arg = n.child_by_field_name("argument")
            if op is None or arg is None:
                raise NotConstant("an incomplete expression")
            v = self.value(arg)
            return {"-": -v, "+": v, "~": ~v, "!": int(not v)}[op.type]
        if t == "binary_expression":
            op = n.child_by_field_name("operator")
            left = n.child_by_field_name("left")
            right = n.child_by_field_name("right")
            if op is None or left is None or right is None:
                raise NotConstant("an incomplete expression")
            if op.type == "&&":
                return int(bool(self.value(left)) and bool(self.value(right)))
            if op.type == "||":
                return int(bool(self.value(left)) or bool(self.value(right)))
            fn = _BINARY.get(op.type)
            if fn is None:
                raise NotConstant(f"operator {op.type}")
            a, b = self.value(left), self.value(right)
            r = fn(a, b)
            if r.bit_length() > _MAX_BITS:
                raise NotConstant("a value too large")
            return r
        if t == "conditional_expression":
            c = n.child_by_field_name("condition")
            y = n.child_by_field_name("consequence")
            z = n.child_by_field_name("alternative")
            if c is None or y is None or z is None:
                raise NotConstant("an incomplete expression")
            return self.value(y) if self.value(c) else self.value(z)
        if t == "cast_expression":
            typ = n.child_by_field_name("type")
            words = set(re.findall(r"[A-Za-z_]\w*", self.text(typ) if typ else "")) - {
                "const",
                "volatile",
            }
            operand = n.child_by_field_name("value")
            if not words or not words <= _INT_TYPES or operand is None:
                raise NotConstant("a cast to a non-integer type")
            return self.value(operand)
        if t == "call_expression":
            f = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            fn = _FUNCTIONS.get(self.text(f)) if f is not None else None
            vals = [self.value(a) for a in args.named_children] if args is not None else []
            if fn is None or len(vals) != 2:
                raise NotConstant("a call")
            return fn(vals[0], vals[1])
        raise NotConstant(f"a {t.replace('_', ' ')}")


@functools.lru_cache(maxsize=4096)
def _expression_tree(text: str) -> tuple[SourceTree, Node] | None:
    st = SourceTree(f"int __ga_value = ({text}\n);")  # not parse(): keep its cache for files
    if st.root.has_error:
        return None
    for n in st.walk(types=("init_declarator",)):
        v = n.child_by_field_name("value")
        if v is not None and v.type == "parenthesized_expression" and v.named_child_count == 1:
            return st, v.named_children[0]
    return None


def evaluate(expr: str, env: Mapping[str, int] | None = None) -> int:
    """The value of the C integer constant expression ``expr`` (raises :class:`NotConstant`)."""
    if not expr.strip() or len(expr) > 4096:
        raise NotConstant("an empty or very long expression")
    got = _expression_tree(expr)
    if got is None:
        raise NotConstant(f"{expr!r} does not parse as an expression")
    st, node = got
    try:
        return _Evaluator(st, env or {}).value(node)
    except RecursionError as exc:
        raise NotConstant("nested too deeply") from exc


def evaluate_node(st: SourceTree, node: Node, env: Mapping[str, int] | None = None) -> int:
    """:func:`evaluate` on an expression node of a parsed file."""
    try:
        return _Evaluator(st, env or {}).value(node)
    except RecursionError as exc:
        raise NotConstant("nested too deeply") from exc


def try_evaluate(expr: str, env: Mapping[str, int] | None = None) -> int | None:
    """:func:`evaluate`, or None when ``expr`` is not a constant."""
    try:
        return evaluate(expr, env)
    except NotConstant:
        return None


def defines(st: SourceTree) -> list[tuple[int, str, str]]:
    """Object-like ``#define NAME body`` of a file with a body: (offset, name, body), the body
    without comments or line continuations."""
    out = []
    for n in st.walk(types=("preproc_def",)):
        name = n.child_by_field_name("name")
        value = n.child_by_field_name("value")
        if name is None or value is None:
            continue
        body = " ".join(st.code_of(value).replace("\\\n", " ").split())
        if body:
            out.append((st.start(n), st.text_of(name), body))
    return out


def _const_declarations(st: SourceTree) -> list[tuple[int, str, str]]:
    out = []
    for d in declarations(st):
        if not ({"const", "constexpr"} & set(d.specifiers)):
            continue
        words = set(d.type.split())
        if not words or not words <= _CONST_TYPE_WORDS:
            continue
        for dd in d.declarators:
            if dd.init is None or dd.dims or dd.pointer:
                continue
            out.append((dd.name_span[0], dd.name, st.code_of(dd.init)))
    return out


def constants(st: SourceTree | str, bindings: Mapping[str, str] | None = None) -> dict[str, int]:
    """The integer constants of a file (see the module's doc); ``bindings`` (template parameter
    -> argument text) are evaluated last and shadow the file's names."""
    if isinstance(st, str):
        st = parse(st)
    return dict(_file_constants(st.text)) | _bound(st, bindings or {})


@functools.lru_cache(maxsize=16)
def _file_constants(text: str) -> tuple[tuple[str, int], ...]:
    st = parse(text)
    pending = sorted(defines(st) + _const_declarations(st))
    env: dict[str, int] = {}
    todo = [(name, body) for _, name, body in pending]
    for _ in range(len(todo) + 1):
        left = []
        for name, body in todo:
            v = try_evaluate(body, env)
            if v is None:
                left.append((name, body))
            else:
                env[name] = v
        if len(left) == len(todo):
            break
        todo = left
    return tuple(env.items())


def _bound(st: SourceTree, bindings: Mapping[str, str]) -> dict[str, int]:
    env = dict(_file_constants(st.text))
    out: dict[str, int] = {}
    for name, arg in bindings.items():
        v = try_evaluate(arg, {**env, **out})
        if v is not None:
            out[name] = v
    return out
