"""The fix kit's order-free reductions (issue 28): which variables a loop's body carries from one
element to the next only as a reduction whose result the order of the elements cannot change.

A strided loop rewritten to take ``k`` consecutive elements per thread
(:func:`gpuadvise.source.fixkit_vector.loop_vectors`) hands each thread other elements than
before. A variable declared before the loop that the body changes (``++count``, ``sum += x``)
then holds, after the loop, the thread's partial over other elements: the same total over the
loop's threads only when every element adds to it by one operation that is associative and
commutative, and the body reads it nowhere else (not for a running prefix ``b[i] = s``, not in a
condition, not in another variable's value). :func:`reductions` finds those variables:

- every change is a statement of its own: ``r++``, ``++r``, ``r--``, ``--r``, ``r += e``,
  ``r -= e`` (add), ``r |= e``, ``r &= e``, ``r ^= e``, ``r = r + e`` / ``r = e + r``,
  ``r = min(r, e)`` / ``max`` / ``fminf`` / ``fmaxf`` / ``fmin`` / ``fmax`` (either order),
  conditional or not, ``e`` reading no variable the body reduces;
- one operation per variable (add and subtract together), and ``r`` read nowhere else in the
  body;
- ``r`` a plain local scalar of the kernel body (no array, pointer, reference, ``__shared__``
  or ``static``), of an integer type (exact in any order, wrapping included) or, for min and max
  (exact too) and add, of ``float``/``double``: a float sum in another order rounds otherwise
  (``Reduction.exact`` False: the caller says so, and the verification's tolerance decides).

What the loop's threads do with their partials after the loop is not read here: the partials
change, and only a combination by the same operation over the same threads (a block's sum of
a block-stride loop's partials) gives the same result; the variant's outputs are compared with
the kernel's before it is taken. Pure text work on parsed trees: no I/O.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from gpuadvise.source import tree as T
from gpuadvise.source.text import KernelSource

__all__ = ["Reduction", "reductions"]

_INTEGERS = frozenset({
    "int", "signed", "signed int", "unsigned", "unsigned int", "long", "long int", "unsigned long",
    "unsigned long int", "long long", "long long int", "unsigned long long",
    "unsigned long long int", "short", "unsigned short", "char", "signed char", "unsigned char",
    "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
    "uint64_t",
})  # fmt: skip
_FLOATS = frozenset({"float", "double"})
_COMPOUND = {"+=": "add", "-=": "add", "|=": "or", "&=": "and", "^=": "xor"}
_CALLS = {"min": "min", "max": "max", "fminf": "min", "fmaxf": "max", "fmin": "min",
          "fmax": "max"}  # fmt: skip
_DESCRIBED = {"add": "a sum", "or": "a bitwise or", "and": "a bitwise and", "xor": "an xor",
              "min": "a minimum", "max": "a maximum"}  # fmt: skip


@dataclass(frozen=True)
class Reduction:
    """A variable the loop's body changes only as a reduction: its name, the operation (``add``,
    ``or``, ``and``, ``xor``, ``min``, ``max``), its type as declared, and whether any order of
    the elements gives the same bits (integers; min and max)."""

    name: str
    op: str
    type: str
    exact: bool

    def words(self) -> str:
        kind = "an integer" if self.type in _INTEGERS else self.type
        return f"`{self.name}` ({_DESCRIBED[self.op]}, {kind})"


def _self_operand(st: T.SourceTree, value: T.Span, name: str) -> tuple[str, T.Span] | None:
    """(operation, the span of ``name`` in ``value``) when ``value`` is ``name + e``, ``e +
    name`` or ``min/max(name, e)`` (either order) with ``e`` not reading ``name``."""
    e = T.expr_at(st, value)
    if e is None:
        return None
    e = e.stripped()
    if e.kind == "binary" and e.op == "+":
        pair, op = e.args, "add"
    elif e.kind == "call" and e.op in _CALLS and len(e.args) == 2:
        pair, op = e.args, _CALLS[e.op]
    else:
        return None
    a, b = (x.stripped() for x in pair)
    for mine, other in ((a, b), (b, a)):
        if mine.kind == "name" and mine.text == name:
            if any(n == name for n, _ in T.identifiers(st, other.span)):
                return None
            return op, mine.span
    return None


def _declared_scalar(ks: KernelSource, name: str, before: int) -> str | None:
    """The type of ``name``'s declaration in the kernel body before ``before`` when it is one
    plain local scalar of an integer or floating type; None otherwise."""
    found = [
        (d, x)
        for d in ks.declarations(within=(ks.body_start, before))
        for x in d.declarators
        if x.name == name
    ]
    if len(found) != 1:
        return None
    d, x = found[0]
    if x.pointer or x.dims or d.file_scope:
        return None
    if any(s in d.specifiers for s in ("__shared__", "static", "extern", "volatile")):
        return None
    if "&" in ks.code[d.span[0] : x.name_span[0]] or "*" in ks.code[d.span[0] : x.name_span[0]]:
        return None
    ty = " ".join(t for t in d.type.split() if t != "const")
    return ty if ty in _INTEGERS or ty in _FLOATS else None


def reductions(
    ks: KernelSource, body: T.Span, local: Set[str], before: int
) -> tuple[dict[str, Reduction], str | None]:
    """The variables declared before ``before`` (outside ``body``; ``local``: those declared in
    it) that ``body`` changes, each an order-free reduction (see the module); or why one is
    not (the reductions found so far, and the sentence)."""
    st = ks.tree
    ops: dict[str, set[str]] = {}
    allowed: dict[str, set[T.Span]] = {}
    for a in T.assignments(st, None, body):
        r = a.target
        if not r or r in local:
            continue
        if not _own_statement(st, a.span):
            return {}, f"`{r}` (declared outside) is changed inside a larger expression"
        if a.kind == "update":
            op = "add"
            mine = _target_span(st, a.span, r)
        elif a.kind == "compound" and a.operator in _COMPOUND and a.value is not None:
            if any(n == r for n, _ in T.identifiers(st, a.value)):
                return {}, f"`{r}` (declared outside) carries a value: its update reads it"
            op = _COMPOUND[a.operator]
            mine = _target_span(st, a.span, r)
        elif a.kind == "assign" and a.value is not None:
            got = _self_operand(st, a.value, r)
            if got is None:
                return {}, f"`{r}` (declared outside) carries a value from one element to the next"
            op, own = got
            allowed.setdefault(r, set()).add(own)
            mine = _target_span(st, a.span, r)
        else:
            return {}, f"`{r}` (declared outside) carries a value from one element to the next"
        ops.setdefault(r, set()).add(op)
        if mine is not None:
            allowed.setdefault(r, set()).add(mine)
    out: dict[str, Reduction] = {}
    for r, kinds in sorted(ops.items()):
        if len(kinds) != 1:
            return {}, f"`{r}` (declared outside) is changed by {len(kinds)} kinds of operation"
        op = next(iter(kinds))
        ty = _declared_scalar(ks, r, before)
        if ty is None:
            return {}, f"`{r}` (declared outside) is not a local integer or floating scalar"
        if ty in _FLOATS and op not in ("add", "min", "max"):
            return {}, f"`{r}` is a {ty} changed by a bitwise operation"
        for u in T.uses(st, r, body):
            if u.span not in allowed.get(r, set()):
                return {}, (
                    f"`{r}` (declared outside) carries a value from one element to the next "
                    "(the loop reads it)"
                )
        out[r] = Reduction(r, op, ty, ty in _INTEGERS or op != "add")
    return out, None


def _own_statement(st: T.SourceTree, span: T.Span) -> bool:
    """Whether the expression at ``span`` is a statement of its own (``r += e;``)."""
    n = st.node_at(span[0])
    while n is not None and st.span(n) != span:
        n = n.parent
    return n is not None and n.parent is not None and n.parent.type == "expression_statement"


def _target_span(st: T.SourceTree, span: T.Span, name: str) -> T.Span | None:
    """The span of the identifier ``name`` that the assignment at ``span`` changes."""
    for n, s in T.identifiers(st, span):
        if n == name:
            return s
    return None
