"""The fix kit's operations on shared-memory reduction trees (issue 28), on the parser's nodes.

The reduction rules (GA202, GA203, GA205) read a tree's loop and its steps through
:class:`~gpuadvise.source.tree.Expr` values rather than regular expressions over the text, so
that a tree spelled with a macro or template block size, on one line or several, with several
declarators in one declaration or its combine in a helper function reads the same; and they
rewrite it with the edits below, each on a node's own span, so that the user's comments,
macros and formatting outside the edit stay as written.

Reading:

- :func:`stride_loop`: ``for ([type] s = start; cond; update)`` as its stride, the type words
  before it and the spans of its parts; :func:`doubles`, :func:`halves`,
  :func:`halves_to_zero`: its update and condition;
- :func:`is_twice`, :func:`interleaved_guard`, :func:`strided_product`: ``2*s``;
  ``tid % (2*s) == 0`` (and ``(tid & (2*s - 1)) == 0``); ``2*s*tid`` in any order;
- :func:`is_thread`, :func:`literal_value`: a thread index among aliases; an integer literal;
- :func:`sum_step`: ``a[i] += a[j];``, ``a[i] = a[i] + a[j];``, ``a[i] = v = v + a[j];``,
  ``a[i] = __hadd2(a[i], a[j]);`` (the half-precision adds, ``fold``);
  :func:`add_step`, :func:`thread_bound`: ``a[tid] += a[tid + k]`` and its guard ``tid < k``;
- :func:`block_stride_start`: the thread index a block-stride loop ``for (v = tid; v < s;
  v += blockDim.x)`` starts from (:func:`block_stride_step`: the step run by one);
  :func:`tree_loop`, :func:`nested_tree_why`: the halving loop around a combine, and whether
  one inside other loops can be rewritten in place; :func:`ends_with_barrier`: a block that ends with
  ``__syncthreads()``; :func:`in_branch`: an offset inside an ``if`` or ``switch``;
  :func:`zero_thread_read`: ``a[tid]`` read where ``tid == 0`` guards it;
  :func:`read_beyond_root`: a read of the array other than its root after a tree;
- :func:`helper_at` (from :mod:`gpuadvise.source.functions`): the ``__device__`` helper a
  tree's line lies in, when only the kernel calls it; :func:`pointee_type`: a pointer
  parameter's element type.

Writing:

- :func:`halve_loop`: a doubling loop's start, condition and update made ``bound / 2``,
  ``s > 0``, ``s >>= 1`` (its type words, comments and body untouched);
- :func:`remove_statement`, :func:`remove_declarator`: a statement, or one declarator of a
  declaration of several, taken out (its line too when nothing else is on it);
- :func:`replace_statements`: a run of statements replaced by new lines at their indentation;
- :func:`shuffle_lines`: the warp-shuffle reduction of a shared array's first warp
  (:func:`warp_tail_lines`: of its last 64 values; :func:`whole_warp_lines`: a tree within one
  warp).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.functions import Helper, helper_at, pointee_type

if TYPE_CHECKING:
    from gpuadvise.source.text import KernelSource

__all__ = [
    "is_name",
    "StrideLoop",
    "SumStep",
    "add_step",
    "block_stride_start",
    "block_stride_step",
    "ADD_CALLS",
    "Helper",
    "helper_at",
    "pointee_type",
    "bounds_checks",
    "doubles",
    "doubling_bound",
    "ends_with_barrier",
    "first_warp_guard",
    "halve_loop",
    "halves",
    "halves_to_zero",
    "in_branch",
    "indent_of",
    "interleaved_guard",
    "is_thread",
    "is_twice",
    "literal_value",
    "nested_tree_why",
    "pointee",
    "read_beyond_root",
    "remove_declarator",
    "remove_statement",
    "rename_uses",
    "replace_statements",
    "shuffle_lines",
    "stride_loop",
    "strided_product",
    "sum_step",
    "thread_bound",
    "tree_loop",
    "warp_tail_lines",
    "whole_warp_lines",
    "zero_thread_read",
]

Span = tuple[int, int]


# ---------------------------------------------------------------------------------------------
# Reading expressions


def literal_value(e: T.Expr) -> int | None:
    """The value of an integer literal (``2``, ``2u``, ``0x10``), parentheses looked through."""
    e = e.stripped()
    if e.kind != "literal":
        return None
    t = e.text.rstrip("uUlL")
    try:
        return int(t, 0)
    except ValueError:
        return None


def is_name(e: T.Expr, name: str) -> bool:
    """``e`` (parentheses looked through) is the variable ``name``."""
    e = e.stripped()
    return e.kind == "name" and e.text == name


def is_thread(e: T.Expr, tids: Iterable[str]) -> str | None:
    """The thread index ``e`` spells (``threadIdx.x`` or one of its aliases ``tids``), or None."""
    e = e.stripped()
    text = "".join(e.text.split())
    return text if e.kind in ("name", "member") and text in set(tids) else None


def _product(e: T.Expr) -> list[T.Expr]:
    """The factors of a product, parentheses and nested ``*`` flattened."""
    e = e.stripped()
    if e.kind == "binary" and e.op == "*":
        return [*_product(e.args[0]), *_product(e.args[1])]
    return [e]


def is_twice(e: T.Expr, s: str) -> bool:
    """``e`` is twice the variable ``s``: ``2*s``, ``s*2``, ``s << 1``, ``s + s``."""
    e = e.stripped()
    if e.kind != "binary":
        return False
    a, b = e.args
    if e.op == "*":
        return (literal_value(a) == 2 and is_name(b, s)) or (
            is_name(a, s) and literal_value(b) == 2
        )
    if e.op == "<<":
        return is_name(a, s) and literal_value(b) == 1
    return e.op == "+" and is_name(a, s) and is_name(b, s)


def doubles(update: T.Expr, s: str) -> bool:
    """A for loop's update doubles ``s``: ``s *= 2``, ``s <<= 1``, ``s += s``, ``s = 2*s``..."""
    e = update.stripped()
    if e.kind != "assignment" or not is_name(e.args[0], s):
        return False
    v = e.args[1]
    return (
        (e.op == "*=" and literal_value(v) == 2)
        or (e.op == "<<=" and literal_value(v) == 1)
        or (e.op == "+=" and is_name(v, s))
        or (e.op == "=" and is_twice(v, s))
    )


def halves(update: T.Expr, s: str) -> bool:
    """A for loop's update halves ``s``: ``s >>= 1``, ``s /= 2``, ``s = s >> 1``, ``s = s / 2``
    (``1u``, ``2u`` too)."""
    e = update.stripped()
    if e.kind != "assignment" or not is_name(e.args[0], s):
        return False
    v = e.args[1].stripped()
    if e.op in (">>=", "/="):
        return literal_value(v) == (1 if e.op == ">>=" else 2)
    if e.op != "=" or v.kind != "binary" or v.op not in (">>", "/") or not is_name(v.args[0], s):
        return False
    return literal_value(v.args[1]) == (1 if v.op == ">>" else 2)


def halves_to_zero(cond: T.Expr) -> str | None:
    """The variable of a condition ``s > 0``, ``s >= 1`` or ``s != 0`` (None: another)."""
    e = cond.stripped()
    if e.kind != "binary" or e.args[0].stripped().kind != "name":
        return None
    want = {">": 0, "!=": 0, ">=": 1}.get(e.op)
    if want is None or literal_value(e.args[1]) != want:
        return None
    return e.args[0].stripped().text


def interleaved_guard(e: T.Expr, s: str, tids: Iterable[str]) -> str | None:
    """The thread index of a divergent pick ``tid % (2*s) == 0`` or ``(tid & (2*s - 1)) == 0``
    (either side of ``==``), or None."""
    e = e.stripped()
    if e.kind != "binary" or e.op != "==":
        return None
    a, b = e.args
    if literal_value(a) == 0:
        a, b = b, a
    if literal_value(b) != 0:
        return None
    a = a.stripped()
    if a.kind != "binary" or a.op not in ("%", "&"):
        return None
    tid = is_thread(a.args[0], tids)
    m = a.args[1].stripped()
    if a.op == "%":
        ok = is_twice(m, s)
    else:
        ok = m.kind == "binary" and m.op == "-" and literal_value(m.args[1]) == 1
        ok = ok and is_twice(m.args[0], s)
    return tid if ok else None


def strided_product(e: T.Expr, s: str, tids: Iterable[str]) -> str | None:
    """The thread index of ``2*s*tid`` (the three factors in any order), or None."""
    fs = _product(e)
    if len(fs) != 3:
        return None
    two = [f for f in fs if literal_value(f) == 2]
    ss = [f for f in fs if is_name(f, s)]
    rest = [f for f in fs if f not in two[:1] and f not in ss[:1]]
    if len(two) < 1 or len(ss) < 1 or len(rest) != 1:
        return None
    return is_thread(rest[0], tids)


def add_step(e: T.Expr, arr: str, tid: str, k: str) -> bool:
    """``e`` is ``arr[tid] += arr[tid + k]`` or ``arr[tid] = arr[tid] + arr[tid + k]`` (``tid``
    the thread index's text, ``k`` the stride's, spaces aside)."""

    def elem(x: T.Expr, plus: bool) -> bool:
        x = x.stripped()
        if x.kind != "subscript" or len(x.args) != 2 or not is_name(x.args[0], arr):
            return False
        i = x.args[1].stripped()
        if not plus:
            return is_thread(i, [tid]) is not None
        if i.kind != "binary" or i.op != "+" or is_thread(i.args[0], [tid]) is None:
            return False
        return "".join(i.args[1].stripped().text.split()) == "".join(k.split())

    e = e.stripped()
    if e.kind != "assignment" or not elem(e.args[0], False):
        return False
    if e.op == "+=":
        return elem(e.args[1], True)
    r = e.args[1].stripped()
    return (
        e.op == "="
        and r.kind == "binary"
        and r.op == "+"
        and elem(r.args[0], False)
        and elem(r.args[1], True)
    )


def thread_bound(e: T.Expr, tid: str) -> str | None:
    """The bound ``k`` of a guard ``tid < k`` (a name, number or member; also one side of an
    ``&&``), as written; None: another condition."""
    e = e.stripped()
    if e.kind == "binary" and e.op == "&&":
        return thread_bound(e.args[0], tid) or thread_bound(e.args[1], tid)
    if e.kind != "binary" or e.op != "<" or is_thread(e.args[0], [tid]) is None:
        return None
    k = e.args[1].stripped()
    return k.text if k.kind in ("name", "literal", "member") else None


def first_warp_guard(e: T.Expr, tids: Iterable[str] | None = None) -> str | None:
    """The variable of a first-warp guard ``tid < 32``, ``tid < warpSize`` or ``tid <= 31``
    (a thread index among ``tids`` when given), or None."""
    e = e.stripped()
    if e.kind != "binary" or e.op not in ("<", "<="):
        return None
    lhs, rhs = e.args[0].stripped(), e.args[1].stripped()
    if lhs.kind not in ("name", "member"):
        return None
    want = 32 if e.op == "<" else 31
    if literal_value(rhs) != want and not (e.op == "<" and is_name(rhs, "warpSize")):
        return None
    return lhs.text if tids is None else is_thread(lhs, tids)


def pointee(e: T.Expr) -> str | None:
    """The array a pointer is set to: ``a``, ``&a[0]``, ``(volatile int*)a``, ``a + 0``."""
    e = e.stripped()
    while e.kind in ("cast", "paren") and e.args:
        e = e.args[-1].stripped()
    if e.kind == "unary" and e.op == "&" and e.args:
        sub = e.args[0].stripped()
        if sub.kind == "subscript" and len(sub.args) == 2 and literal_value(sub.args[1]) == 0:
            e = sub.args[0].stripped()
    if e.kind == "binary" and e.op == "+" and literal_value(e.args[1]) == 0:
        e = e.args[0].stripped()
    return e.text if e.kind == "name" else None


@dataclass(frozen=True)
class SumStep:
    """``a[i] += a[j];`` or ``a[i] = ... + ...;`` (``a[i] = v = v + a[j];``: ``chain`` is v)."""

    array: str
    index: T.Expr  # the stored element's index
    chain: str | None
    fold: str | None = None  # the add function (``__hadd2``) when the sum is written as a call


ADD_CALLS = frozenset({"__hadd", "__hadd2"})
"""The functions that are exactly ``a + b`` of their two arguments (the operator on ``__half``
and ``__half2`` calls them), so a shuffle tail may fold with them in the tree's own order."""


def _has_sum(e: T.Expr) -> bool:
    e = e.stripped()
    return e.kind == "binary" and e.op == "+"


def _add_call(e: T.Expr) -> str | None:
    e = e.stripped()
    return e.op if e.kind == "call" and e.op in ADD_CALLS and len(e.args) == 2 else None


def sum_step(st: T.SourceTree, stmt: T.Statement) -> SumStep | None:
    """The sum the expression statement ``stmt`` stores into a subscript, or None."""
    if stmt.kind != "expression_statement":
        return None
    e = T.expr_at(st, (stmt.start, stmt.end))
    if e is None or e.kind != "assignment":
        return None
    lhs, rhs = e.args
    if lhs.kind != "subscript" or lhs.args[0].kind != "name" or len(lhs.args) != 2:
        return None
    arr = lhs.args[0].text
    if e.op == "+=":
        r = rhs.stripped()
        ok = r.kind == "subscript" and r.args[0].kind == "name" and r.args[0].text == arr
        return SumStep(arr, lhs.args[1], None) if ok else None
    if e.op != "=":
        return None
    chain = None
    r = rhs.stripped()
    if r.kind == "assignment" and r.op == "=" and r.args[0].kind == "name":
        chain, r = r.args[0].text, r.args[1]
    if _has_sum(r):
        return SumStep(arr, lhs.args[1], chain)
    fold = _add_call(r)
    return SumStep(arr, lhs.args[1], chain, fold) if fold else None


# ---------------------------------------------------------------------------------------------
# Reading a stride loop


@dataclass(frozen=True)
class StrideLoop:
    """A ``for`` loop's stride variable and the spans of its parts (file offsets)."""

    loop: T.Loop
    s: str
    decl: str  # the type words before the variable in the initializer (``unsigned ``), or ""
    start: Span  # the initial value
    condition: T.Expr
    update: T.Expr | None


def stride_loop(st: T.SourceTree, lp: T.Loop) -> StrideLoop | None:
    """``lp`` read as ``for ([type] s = start; cond; update)`` (None: another loop)."""
    if lp.kind != "for" or lp.node is None or lp.init is None or lp.condition is None:
        return None
    init = lp.node.child_by_field_name("initializer")
    if init is None:
        return None
    if init.type == "declaration":
        ds = [c for c in init.named_children if c.type == "init_declarator"]
        if len(ds) != 1:
            return None
        target, value = ds[0].child_by_field_name("declarator"), ds[0].child_by_field_name("value")
        decl = st.text[st.start(init) : st.start(ds[0])] if target is not None else ""
    elif init.type == "assignment_expression":
        op = init.child_by_field_name("operator")
        if op is None or op.type != "=":
            return None
        target, value, decl = (
            init.child_by_field_name("left"),
            init.child_by_field_name("right"),
            "",
        )
    else:
        return None
    if target is None or value is None or target.type != "identifier":
        return None
    cond = T.expr_at(st, lp.condition)
    if cond is None:
        return None
    upd = T.expr_at(st, lp.update) if lp.update is not None else None
    return StrideLoop(lp, st.text_of(target), decl, st.span(value), cond, upd)


def block_stride_start(st: T.SourceTree, lp: T.Loop, s: str, tids: Iterable[str]) -> str | None:
    """The thread index that ``lp``, read as ``for ([type] v = tid; v < s; v += blockDim.x)``,
    starts from (None: another loop). While ``s`` is at most the block's size it runs once, for
    ``v = tid`` with ``tid < s``: the guard of a tree's step spelled as a loop (cuda-samples'
    scalarProd)."""
    sl = stride_loop(st, lp)
    if sl is None or sl.update is None:
        return None
    c, u = sl.condition.stripped(), sl.update.stripped()
    if (
        c.kind != "binary"
        or c.op != "<"
        or not is_name(c.args[0], sl.s)
        or not is_name(c.args[1], s)
    ):
        return None
    if u.kind != "assignment" or not is_name(u.args[0], sl.s):
        return None
    step = "".join(u.args[1].stripped().text.split())
    if not (u.op == "+=" and step == "blockDim.x"):
        return None
    start = T.expr_at(st, sl.start)
    return is_thread(start, tids) if start is not None else None


def block_stride_step(
    st: T.SourceTree, loop: T.Loop, inner: Sequence[T.Loop], at: int, index: str, tids: set[str]
) -> tuple[str, str]:
    """The thread index behind the combine's ``index`` (at ``at``) when a loop inside the
    tree's ``loop`` runs the step, ``for (v = tid; v < s; v += blockDim.x) a[v] += a[s + v];``
    (``inner``: the loops inside it around the combine), or why not as the second value."""
    c = T.expr_at(st, loop.condition) if loop.condition is not None else None
    s = halves_to_zero(c) if c is not None else None
    why = "the step runs in a loop that is not `for (v = tid; v < s; v += blockDim.x)`"
    if len(inner) != 1 or s is None:
        return "", why
    sl = stride_loop(st, inner[0])
    start = block_stride_start(st, inner[0], s, tids) if sl is not None and sl.s == index else None
    if start is None:
        return "", why
    body = T.statements(st, inner[0].body)
    if len(body) != 1 or not body[0].start <= at <= body[0].end:
        return "", "the step's loop does more than the combine"
    return start, ""


def tree_loop(st: T.SourceTree, around: Sequence[T.Loop]) -> T.Loop | None:
    """The innermost of the ``for`` loops ``around`` a combine that halves its stride to 0."""
    for lp in sorted(around, key=lambda x: -x.span[0]):
        c = T.expr_at(st, lp.condition) if lp.condition is not None else None
        if c is not None and halves_to_zero(c) is not None:
            return lp
    return None


def nested_tree_why(st: T.SourceTree, loop: T.Loop, arr: str) -> str | None:
    """Why the tree's ``loop``, inside other loops (a tree per vector: cuda-samples'
    scalarProd), cannot leave as they were the words of ``arr`` the shuffles do not write (None:
    it can): what the loops around it do with ``arr`` before it must be stores
    (``arr[i] = ...``) or reads of ``arr[0]``."""
    at = loop.span[0]
    outer = [lp for lp in T.loops(st) if lp.body[0] <= at < lp.body[1]]
    if not outer:
        return None
    first = min(outer, key=lambda x: x.span[0])
    for sub in T.subscripts(st, arr, (first.body[0], at)):
        e = T.expr_at(st, sub.indices[0]) if len(sub.indices) == 1 else None
        p = T.expr_parent(st, sub.span)
        store = p is not None and p.kind == "assignment" and p.op == "="
        store = store and p is not None and p.args[0].span == sub.span
        if not (store or (e is not None and literal_value(e) == 0)):
            return f"`{st.code[sub.span[0] : sub.span[1]]}` is read in the loop around the tree"
    return None


def ends_with_barrier(lp: T.Loop, st: T.SourceTree) -> bool:
    """Whether the body of the loop ``lp`` ends with ``__syncthreads();`` (a group's ``sync``,
    which may be a warp's, is not counted)."""
    body = lp.node.child_by_field_name("body") if lp.node is not None else None
    if body is not None and body.type == "compound_statement":
        kids = [c for c in body.named_children if c.type != "comment"]
        body = kids[-1] if kids else None
    if body is None or body.type != "expression_statement":
        return False
    a, b = st.span(body)
    e = T.expr_at(st, (a, b - 1 if st.text[b - 1 : b] == ";" else b))
    return e is not None and e.kind == "call" and e.op == "__syncthreads" and not e.args


def in_branch(st: T.SourceTree, offset: int, within: Span) -> bool:
    """Whether ``offset`` lies in an ``if``, ``else`` or ``switch`` inside ``within``."""
    kinds = ("if_statement", "else_clause", "switch_statement", "conditional_expression")
    return any(within[0] <= st.start(n) < within[1] for n in T.enclosing(st, offset, kinds))


def zero_thread_read(st: T.SourceTree, sub: T.Subscript, tids: Iterable[str]) -> bool:
    """Whether ``sub`` is ``a[tid]`` inside the braces or statement of an ``if (tid == 0)``
    (``0 == tid``, ``!tid``): the word it reads is ``a[0]``."""
    if len(sub.indices) != 1:
        return False
    e = T.expr_at(st, sub.indices[0])
    tid = is_thread(e, tids) if e is not None else None
    if tid is None:
        return False
    for i in T.ifs(st):
        if not i.consequence[0] <= sub.span[0] < i.consequence[1]:
            continue
        c = T.expr_at(st, i.condition)
        c = c.stripped() if c is not None else None
        if c is None:
            continue
        if c.kind == "unary" and c.op == "!" and is_thread(c.args[0], [tid]):
            return True
        if c.kind == "binary" and c.op == "==":
            a, b = c.args
            if literal_value(a) == 0:
                a, b = b, a
            if literal_value(b) == 0 and is_thread(a, [tid]):
                return True
    return False


def read_beyond_root(ks: KernelSource, arr: str, after: int, tids: set[str]) -> str | None:
    """Why a tree's shuffle tail would change what the code reads after it (file offset
    ``after`` to the body's end): a read of ``arr`` other than ``arr[0]`` (or ``arr[t]`` under
    ``t == 0``); the shuffles leave the other words as they were. None: nothing else read."""
    for sub in ks.subscripts(arr, within=(after, ks.body_end + 1)):
        e = ks.expr(sub.indices[0]) if sub.indices else None
        if (e is None or literal_value(e) != 0) and not zero_thread_read(ks.tree, sub, tids):
            idx = ks.code[sub.indices[0][0] : sub.indices[0][1]].strip() if sub.indices else ""
            return f"`{arr}[{idx}]` is read after the tree (only [0] is kept)"
    return None


def indent_of(text: str, offset: int) -> str:
    """The spaces and tabs that start the line holding ``offset``."""
    a = text.rfind("\n", 0, offset) + 1
    b = a
    while b < len(text) and text[b] in " \t":
        b += 1
    return text[a:b]


# ---------------------------------------------------------------------------------------------
# Writing


def doubling_bound(st: T.SourceTree, sl: StrideLoop) -> T.Expr | None:
    """The bound of a loop ``for (s = 1; s < bound; <s doubles>)`` (None: another loop)."""
    c, start = sl.condition, T.expr_at(st, sl.start)
    if start is None or literal_value(start) != 1 or sl.update is None:
        return None
    if not doubles(sl.update, sl.s) or c.kind != "binary" or c.op != "<":
        return None
    return c.args[1] if is_name(c.args[0], sl.s) else None


def halve_loop(st: T.SourceTree, rw: Rewrite, sl: StrideLoop, bound: T.Expr) -> None:
    """The doubling loop ``sl`` made halving from ``bound / 2`` down to 1: its start value,
    condition and update replaced, each on its own span."""
    lp = sl.loop
    assert lp.condition is not None
    text = st.code[bound.span[0] : bound.span[1]]
    simple = bound.stripped().kind in ("name", "member", "literal", "call", "paren")
    rw.replace(*sl.start, f"{text if simple else f'({text})'} / 2")
    rw.replace(*lp.condition, f"{sl.s} > 0")
    if lp.update is not None:
        rw.replace(*lp.update, f"{sl.s} >>= 1")
    else:
        rw.insert(lp.condition[1] + 1, f" {sl.s} >>= 1")


def bounds_checks(st: T.SourceTree, name: str, within: Span) -> list[Span]:
    """The conditions ``name < ...`` of the ``if`` statements within ``within``."""
    out = []
    for i in T.ifs(st, within):
        c = T.expr_at(st, i.condition)
        if c is not None and c.kind == "binary" and c.op == "<" and is_name(c.args[0], name):
            out.append(i.condition)
    return out


def rename_uses(
    st: T.SourceTree, rw: Rewrite, name: str, new: str, within: Span, skip: Iterable[Span] = ()
) -> None:
    """Every use of the variable ``name`` within ``within`` (not inside ``skip``) made ``new``."""
    skipped = list(skip)
    for u in T.uses(st, name, within):
        if not any(a <= u.span[0] < b for a, b in skipped):
            rw.replace(*u.span, new)


def _whole_lines(text: str, a: int, b: int) -> Span:
    """``a..b`` widened to whole lines when nothing but blanks shares them with it."""
    l0 = text.rfind("\n", 0, a) + 1
    l1 = text.find("\n", b)
    l1 = len(text) if l1 < 0 else l1
    if text[l0:a].strip() or text[b:l1].strip():
        return a, b
    return l0, min(l1 + 1, len(text))


def remove_statement(rw: Rewrite, span: Span) -> None:
    """Take out the statement spanning ``span`` (its ``;`` included), with its line when
    nothing else is on it."""
    rw.delete(*_whole_lines(rw.original, *span))


def remove_declarator(rw: Rewrite, decl: T.Declaration, d: T.Declarator) -> None:
    """Take ``d`` out of ``decl``: the whole declaration when it is the only declarator, else
    the declarator and the comma next to it (the others keep their text)."""
    ds = list(decl.declarators)
    if len(ds) == 1:
        remove_statement(rw, decl.span)
        return
    k = ds.index(d)
    if k + 1 < len(ds):
        rw.delete(d.span[0], ds[k + 1].span[0])
    else:
        rw.delete(ds[k - 1].span[1], d.span[1])


def replace_statements(rw: Rewrite, span: Span, lines: Sequence[str]) -> None:
    """Replace the statements spanning ``span`` by ``lines``, written at the indentation of the
    first: whole lines when nothing else shares them, else in place."""
    text = rw.original
    a, b = _whole_lines(text, *span)
    pad = indent_of(text, span[0])
    body = "\n".join(pad + ln for ln in lines)
    if (a, b) == span:
        rw.replace(a, b, body.lstrip(" \t"))
    else:
        rw.replace(a, b, body + ("\n" if text[b - 1 : b] == "\n" else ""))


def shuffle_lines(
    tid: str,
    arr: str,
    typ: str,
    var: str,
    first: str | int,
    *,
    add_32: bool = False,
    mask: str = "0xffffffffu",
    chain: str | None = None,
    counter: str = "int",
    fold: str | None = None,
) -> list[str]:
    """The reduction of ``arr``'s first warp by ``__shfl_down_sync``, lane 0 storing the result
    into ``arr[0]`` (and ``chain``, a register the code keeps the sum in, when given): ``var``
    starts as ``arr[tid]`` (plus ``arr[tid + 32]`` with ``add_32``), the offsets run from
    ``first`` down to 1. Lines without indentation, for the lanes ``tid < 32`` to run."""
    start = f"{arr}[{tid}] + {arr}[{tid} + 32]" if add_32 else f"{arr}[{tid}]"
    step = f"{var} += __shfl_down_sync({mask}, {var}, offset);"
    if fold:  # ``fold(a, b)`` for ``a + b``, the tree's own function
        start = f"{fold}({arr}[{tid}], {arr}[{tid} + 32])" if add_32 else start
        step = f"{var} = {fold}({var}, __shfl_down_sync({mask}, {var}, offset));"
    root = (
        f"if ({tid} == 0) {{ {arr}[0] = {var}; {chain} = {var}; }}"
        if chain
        else f"if ({tid} == 0) {arr}[0] = {var};"
    )
    return [
        f"{typ} {var} = {start};",
        f"for ({counter} offset = {first}; offset > 0; offset >>= 1)",
        f"    {step}",
        root,
    ]


def warp_tail_lines(
    tid: str, arr: str, typ: str, var: str, chain: str | None, fold: str | None = None
) -> list[str]:
    """The last 64 values of ``arr`` reduced by the first warp's shuffles."""
    body = shuffle_lines(tid, arr, typ, var, 16, add_32=True, chain=chain, fold=fold)
    return [f"if ({tid} < 32) {{", *(f"    {ln}" for ln in body), "}"]


def whole_warp_lines(
    tid: str, arr: str, typ: str, var: str, first: str, chain: str | None, fold: str | None = None
) -> list[str]:
    """The whole tree (its first distance ``first``, at most 16) by shuffles in the first warp;
    the mask names the lanes the block has (fewer than 32 in a block of 16)."""
    mask = "const unsigned mask = blockDim.x >= 32u ? 0xffffffffu : (1u << blockDim.x) - 1u;"
    body = shuffle_lines(
        tid, arr, typ, var, first, mask="mask", chain=chain, counter="unsigned", fold=fold
    )
    return [
        f"if ({tid} < 32) {{  // the whole tree within one warp: shuffles",
        f"    {mask}",
        *(f"    {ln}" for ln in body),
        "}",
        "__syncthreads();",
    ]
