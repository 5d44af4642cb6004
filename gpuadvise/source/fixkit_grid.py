"""The fix kit's operations for grid-stride rewrites (issue 28): GA206's loop over the original
CTA indices, GA204's first add during the load, on the parser's nodes rather than on the
source's spelling.

- :func:`remapped_text`: the text of a range, comments kept, with member expressions such as
  ``blockIdx.x`` and ``gridDim.x`` (however spaced) read as other names: the body of a kernel
  run once per original CTA index;
- :func:`element_edits`: each ``buf[idx]`` of a range (the index's spaces ignored) made
  another expression: one lane of a vector (``ga206_buf.x``);
- :func:`edited_text`: the text of a range with such edits applied;
- :func:`subscript_store`: ``name[index] = value;``, as :class:`SubscriptStore` (the array,
  the index's and the value's spans), the store a load phase ends with;
- :func:`divisor_edit`: ``X / 2u`` with its literal divisor multiplied (``X / 4u``), the
  user's spelling of ``X`` and of the suffix kept;
- :func:`barrier_after`: the ``__syncthreads();`` statement right after an offset, if any.

Every edit is the range of one node: what lies outside it (comments, macros, formatting) stays
as written. Pure text work on parsed trees: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuadvise.source import tree as T

__all__ = [
    "SubscriptStore",
    "barrier_after",
    "divisor_edit",
    "edited_text",
    "element_edits",
    "remapped_text",
    "subscript_store",
]

Edit = tuple[int, int, str]
"""(start, end, new text): file offsets of the range replaced."""


def edited_text(text: str, span: T.Span, edits: Iterable[Edit]) -> str:
    """``text[span]`` with ``edits`` (file offsets inside ``span``, not overlapping) applied."""
    a, b = span
    out = text[a:b]
    for s, e, new in sorted(edits, reverse=True):
        if a <= s <= e <= b:
            out = out[: s - a] + new + out[e - a :]
    return out


def remapped_text(st: T.SourceTree, text: str, span: T.Span, names: Mapping[str, str]) -> str:
    """The text of ``span`` (``text`` is the parsed file with its comments: they are kept)
    with every identifier or member expression that is a key of ``names`` (``blockIdx.x``,
    spaces ignored, as :func:`gpuadvise.source.tree.uses` finds it) replaced by its value,
    all at once."""
    a, b = span
    edits = [
        (u.span[0], u.span[1], new)
        for name, new in names.items()
        for u in T.uses(st, name, span)
        if a <= u.span[0] and u.span[1] <= b
    ]
    return edited_text(text, span, edits)


def element_edits(
    st: T.SourceTree, span: T.Span, names: Mapping[str, str], index: str
) -> list[Edit]:
    """An edit per one-index access ``name[index]`` within ``span`` to ``names[name]`` (the
    index compared without its spaces)."""
    want = "".join(index.split())
    out: list[Edit] = []
    for s in T.subscripts(st, None, span):
        if s.name not in names or len(s.indices) != 1:
            continue
        if "".join(st.code[s.indices[0][0] : s.indices[0][1]].split()) == want:
            out.append((s.span[0], s.span[1], names[s.name]))
    return out


@dataclass(frozen=True)
class SubscriptStore:
    """``name[index] = value``: the array's name, the index's and the value's spans."""

    name: str
    index: T.Span
    value: T.Span


def subscript_store(st: T.SourceTree, span: T.Span) -> SubscriptStore | None:
    """The expression statement at ``span`` (its ``;`` included or not) as ``name[index] =
    value`` with one index on a plain array name; None when it is anything else (a compound
    assignment, a chain ``a[i][j]``, a comma expression...)."""
    a, b = span
    while b > a and st.code[b - 1] in " \t\n;":
        b -= 1
    e = T.expr_at(st, (a, b))
    if e is None or e.kind != "assignment" or e.op != "=" or len(e.args) != 2:
        return None
    target, value = e.args
    if target.kind != "subscript" or len(target.args) != 2 or target.args[0].kind != "name":
        return None
    return SubscriptStore(target.args[0].text, target.args[1].span, value.span)


def divisor_edit(st: T.SourceTree, span: T.Span, factor: int) -> Edit | None:
    """For the expression at ``span`` written ``X / k`` with ``k`` an integer literal (``2``,
    ``2u``), the edit that makes it ``X / (k * factor)`` in the same spelling (``X / 4u`` for
    ``X / 2u`` and 2); None for any other expression."""
    e = T.expr_at(st, span)
    e = e.stripped() if e is not None else None
    if e is None or e.kind != "binary" or e.op != "/" or e.args[1].kind != "literal":
        return None
    lit = e.args[1]
    digits = lit.text.rstrip("uUlL")
    if not digits.isdigit():
        return None
    return lit.span[0], lit.span[1], f"{int(digits) * factor}{lit.text[len(digits) :]}"


def barrier_after(st: T.SourceTree, offset: int, end: int) -> T.Span | None:
    """The span of the statement ``__syncthreads();`` when it is the first thing after
    ``offset`` (spaces and comments skipped, before ``end``); None otherwise."""
    at = offset
    while at < end and st.code[at].isspace():
        at += 1
    for stmt in T.statements(st, (at, end)):
        if stmt.start != at:
            continue
        e = T.expr_at(st, (stmt.start, stmt.end))
        if e is not None and e.kind == "call" and e.op == "__syncthreads" and not e.args:
            return stmt.start, stmt.end + 1
        return None
    return None
