"""Integer size expressions: ``n*4``, ``w*h``, ``(n+255)/256``, ``ceil_div(n, 256)``.

A tokenizer and a recursive-descent parser; Python's ``eval`` is never used. The grammar::

    expr    := term (('+' | '-') term)*
    term    := unary (('*' | '/' | '%') unary)*
    unary   := ('-' | '+') unary | primary
    primary := INT | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'
    INT     := decimal digits | 0x hex digits          (no suffixes, no separators)
    NAME    := [A-Za-z_][A-Za-z0-9_]*

Semantics are C's for integers, except that values never overflow (Python ints):
``/`` truncates toward zero and ``%`` is the C remainder (its sign follows the dividend), so
``-7/2 == -3`` and ``-7%2 == -1``. The functions are ``min(a, b)``, ``max(a, b)`` and
``ceil_div(a, b)`` (the exact ceiling of a/b, which is ``(a+b-1)/b`` for positive operands).
A name followed by ``(`` is a function call; any other name is looked up in the environment, so
an argument may be called ``min``.

Every problem (a syntax error, an unknown name, a division by zero) raises
:class:`~gpuadvise.errors.UsageError`; syntax errors name the column (1-based) and show the text
with a ``^`` marking the spot, and the error carries the 0-based offset as ``.column``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from gpuadvise.errors import UsageError

__all__ = ["Expr", "c_div", "c_mod", "ceil_div", "evaluate", "names", "parse"]

MAX_TEXT_CHARS = 4096
MAX_DEPTH = 100
_HINT = (
    "write integer arithmetic with + - * / % and parentheses over your --arg names, "
    "for example (n+255)/256 or ceil_div(n, 256)"
)

_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)|(?P<hex>0[xX][0-9a-fA-F]+)|(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>[-+*/%(),])"
)


def c_div(a: int, b: int) -> int:
    """C integer division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """C remainder: ``a - b * c_div(a, b)``; its sign follows ``a``."""
    return a - b * c_div(a, b)


def ceil_div(a: int, b: int) -> int:
    """The exact ceiling of ``a / b``."""
    return -((-a) // b)


_FUNCTIONS: dict[str, Callable[[int, int], int]] = {
    "min": min,
    "max": max,
    "ceil_div": ceil_div,
}


@dataclass(frozen=True)
class _Tok:
    kind: str  # "int", "name", "op", "end"
    text: str
    pos: int
    value: int = 0


# The tree: ("int", value) | ("name", name, pos) | ("neg", node) | ("call", fname, (args...), pos)
# | ("chain", first, ((op, operand, pos), ...)) for a run of operators of one precedence, kept
# flat so that a long sum (1+1+...+1) does not nest deeper than Python's recursion limit.
# Tuples keep it small, hashable and immutable.
_Node = tuple


def _syntax_error(text: str, pos: int, what: str) -> UsageError:
    shown = text if len(text) <= 80 else text[:77] + "..."
    marked = text[:pos] + "^" + text[pos:] if len(text) <= 80 else shown
    err = UsageError(
        f"size expression {shown!r}: {what} at column {pos + 1} (marked ^ in {marked!r})", _HINT
    )
    err.column = pos  # type: ignore[attr-defined]
    return err


def _tokenize(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise _syntax_error(text, pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        s = m.group()
        if kind == "hex":
            tokens.append(_Tok("int", s, pos, int(s, 16)))
        elif kind == "int":
            if len(s) > 1000:
                raise _syntax_error(text, pos, "a number with more than 1000 digits")
            if len(s) > 1 and s[0] == "0":
                # C would read 010 as octal 8: refuse rather than guess.
                raise _syntax_error(text, pos, f"a number with a leading zero ({s})")
            tokens.append(_Tok("int", s, pos, int(s)))
        elif kind == "name":
            tokens.append(_Tok("name", s, pos))
        elif kind == "op":
            tokens.append(_Tok("op", s, pos))
        pos = m.end()
    # A number glued to a name (4n, 0x10g) is a typo, not a product.
    for a, b in zip(tokens, tokens[1:], strict=False):
        if a.kind == "int" and b.kind == "name" and b.pos == a.pos + len(a.text):
            raise _syntax_error(text, b.pos, f"a name glued to the number {a.text}")
    tokens.append(_Tok("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Tok:
        return self.tokens[self.i]

    def _describe(self, tok: _Tok) -> str:
        return "the end of the expression" if tok.kind == "end" else repr(tok.text)

    def _expect(self, op: str) -> None:
        if self.tok.kind == "op" and self.tok.text == op:
            self.i += 1
            return
        raise _syntax_error(
            self.text, self.tok.pos, f"expected {op!r} but found {self._describe(self.tok)}"
        )

    def parse(self) -> _Node:
        if self.tok.kind == "end":
            raise _syntax_error(self.text, 0, "the expression is empty")
        node = self._expr()
        if self.tok.kind != "end":
            raise _syntax_error(
                self.text,
                self.tok.pos,
                f"expected an operator but found {self._describe(self.tok)}",
            )
        return node

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _syntax_error(self.text, self.tok.pos, f"nesting deeper than {MAX_DEPTH}")

    def _expr(self) -> _Node:
        first = self._term()
        rest = []
        while self.tok.kind == "op" and self.tok.text in "+-":
            op, pos = self.tok.text, self.tok.pos
            self.i += 1
            rest.append((op, self._term(), pos))
        return ("chain", first, tuple(rest)) if rest else first

    def _term(self) -> _Node:
        first = self._unary()
        rest = []
        while self.tok.kind == "op" and self.tok.text in "*/%":
            op, pos = self.tok.text, self.tok.pos
            self.i += 1
            rest.append((op, self._unary(), pos))
        return ("chain", first, tuple(rest)) if rest else first

    def _unary(self) -> _Node:
        if self.tok.kind == "op" and self.tok.text in "+-":
            op = self.tok.text
            self.i += 1
            self._enter()
            inner = self._unary()
            self.depth -= 1
            return ("neg", inner) if op == "-" else inner
        return self._primary()

    def _primary(self) -> _Node:
        tok = self.tok
        if tok.kind == "int":
            self.i += 1
            return ("int", tok.value)
        if tok.kind == "name":
            self.i += 1
            nxt = self.tok
            if nxt.kind == "op" and nxt.text == "(":
                return self._call(tok)
            return ("name", tok.text, tok.pos)
        if tok.kind == "op" and tok.text == "(":
            self.i += 1
            self._enter()
            node = self._expr()
            self.depth -= 1
            self._expect(")")
            return node
        raise _syntax_error(
            self.text,
            tok.pos,
            f"expected a number, a name or '(' but found {self._describe(tok)}",
        )

    def _call(self, name_tok: _Tok) -> _Node:
        if name_tok.text not in _FUNCTIONS:
            raise _syntax_error(
                self.text,
                name_tok.pos,
                f"unknown function {name_tok.text!r} (known: {', '.join(sorted(_FUNCTIONS))})",
            )
        self._expect("(")
        self._enter()
        args = [self._expr()]
        while self.tok.kind == "op" and self.tok.text == ",":
            self.i += 1
            args.append(self._expr())
        self.depth -= 1
        self._expect(")")
        if len(args) != 2:
            raise _syntax_error(
                self.text,
                name_tok.pos,
                f"{name_tok.text}() takes 2 arguments, got {len(args)}",
            )
        return ("call", name_tok.text, tuple(args), name_tok.pos)


def _collect_names(node: _Node, out: set[str]) -> None:
    kind = node[0]
    if kind == "name":
        out.add(node[1])
    elif kind == "neg":
        _collect_names(node[1], out)
    elif kind == "chain":
        _collect_names(node[1], out)
        for _, operand, _ in node[2]:
            _collect_names(operand, out)
    elif kind == "call":
        for arg in node[2]:
            _collect_names(arg, out)


@dataclass(frozen=True)
class Expr:
    """A parsed expression: ``text`` as written, the names it reads, and :meth:`evaluate`."""

    text: str
    tree: tuple
    names: frozenset[str]

    def evaluate(self, env: Mapping[str, int]) -> int:
        return _Evaluator(self.text, env).run(self.tree)


class _Evaluator:
    def __init__(self, text: str, env: Mapping[str, int]) -> None:
        self.text = text
        self.env = env

    def run(self, node: _Node) -> int:
        kind = node[0]
        if kind == "int":
            return int(node[1])
        if kind == "name":
            return self._lookup(node[1])
        if kind == "neg":
            return -self.run(node[1])
        if kind == "chain":
            a = self.run(node[1])
            for op, operand, pos in node[2]:
                b = self.run(operand)
                if op == "+":
                    a += b
                elif op == "-":
                    a -= b
                elif op == "*":
                    a *= b
                elif b == 0:
                    raise UsageError(
                        f"size expression {self.text!r} divides by zero at column {pos + 1}",
                        "check the values of the --arg names it uses",
                    )
                else:
                    a = c_div(a, b) if op == "/" else c_mod(a, b)
            return a
        if kind == "call":
            _, fname, args, pos = node
            values = [self.run(a) for a in args]
            if fname == "ceil_div" and values[1] == 0:
                raise UsageError(
                    f"size expression {self.text!r} divides by zero in ceil_div at column "
                    f"{pos + 1}",
                    "check the values of the --arg names it uses",
                )
            return _FUNCTIONS[fname](values[0], values[1])
        raise AssertionError(f"unknown node {kind}")  # pragma: no cover

    def _lookup(self, name: str) -> int:
        if name not in self.env:
            known = ", ".join(sorted(self.env)) or "none"
            raise UsageError(
                f"size expression {self.text!r} uses {name!r}, which has no value "
                f"(names with values: {known})",
                f"give it with --arg {name}=VALUE or under [args] in the spec file",
            )
        value = self.env[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise UsageError(
                f"size expression {self.text!r} uses {name!r}, whose value {value!r} is not an "
                "integer",
                f"give an integer: --arg {name}=1024",
            )
        return value


def parse(text: str) -> Expr:
    """Parse ``text`` once (cached); raises UsageError on any syntax error."""
    if not isinstance(text, str):
        raise UsageError(f"size expression {text!r} is not text", _HINT)
    return _parse_cached(text)


@lru_cache(maxsize=512)
def _parse_cached(text: str) -> Expr:
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(
            f"size expression is {len(text)} characters long, over the limit of {MAX_TEXT_CHARS}",
            "shorten it, or give intermediate values as --arg names",
        )
    tree = _Parser(text).parse()
    found: set[str] = set()
    _collect_names(tree, found)
    return Expr(text, tree, frozenset(found))


def evaluate(text: str, env: Mapping[str, int]) -> int:
    """The value of the integer expression ``text`` with names bound from ``env``."""
    return parse(text).evaluate(env)


def names(text: str) -> set[str]:
    """The variable names ``text`` reads (function names excluded); validates the syntax."""
    return set(parse(text).names)
