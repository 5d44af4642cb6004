"""The fix kit's index padding of a one-dimensional array (issue 28), on the parser's nodes.

GA201 pads a 1-D ``__shared__`` array the way GPU Gems 3's scan does (``CONFLICT_FREE_OFFSET``):
element ``e`` moves to ``e + (e >> s) * p``, ``p`` spare elements after every ``2**s``, so that
lanes ``2**s`` elements apart start in different banks. Every access of the array is rewritten,
or none:

- :func:`index_accesses`: the accesses ``a[e]`` of an array within a scope, or why not all of its
  uses are such accesses (a pointer to it or into it, the bare name, a second subscript, a macro
  that names it, another declaration of the name);
- :func:`wrap_indices`: each index ``e`` made ``helper(e)`` (two insertions per access, so that an
  index holding another access of the array, ``a[a[i]]``, is wrapped too; an index with side
  effects, ``a[i++]``, is still evaluated once);
- :func:`index_helper`: the ``__device__`` function computing the padded index, and
  :func:`helper_offset`: where it goes (before the top-level item that holds the first use);
- :func:`padded_extent`: a dimension ``n`` grown to ``n + (n >> s) * p``, and :func:`operand`:
  an expression's text as an operand of ``+`` or ``>>`` (parenthesized unless it binds tighter).

Pure text work on parsed trees: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite

__all__ = [
    "helper_offset",
    "index_accesses",
    "index_helper",
    "operand",
    "padded_extent",
    "wrap_indices",
]

Span = tuple[int, int]

# expression kinds that bind at least as tightly as the binary + - * / % they may stand in
_TIGHT = ("name", "member", "literal", "call", "paren", "subscript")
_ARITHMETIC = ("+", "-", "*", "/", "%")


def operand(text: str) -> str:
    """``text`` (an expression) as an operand of ``+`` or ``>>``: as written when it is a name,
    a literal, a call, a member, a subscript, a parenthesized expression or an arithmetic
    ``+ - * / %`` of such, parenthesized otherwise (``a << 1``, ``c ? x : y``, a cast)."""
    s = text.strip()
    e = T.parse_expression(s)
    if e is None:
        return f"({s})"
    if e.kind in _TIGHT or (e.kind == "binary" and e.op in _ARITHMETIC):
        return s
    return f"({s})"


def padded_extent(extent: str, shift: int, pad: int) -> str:
    """The text of an array extent ``n`` grown by ``pad`` elements per ``2**shift``:
    ``n + (n >> shift)`` (times ``pad`` when it is not 1)."""
    n = operand(extent)
    spare = f"({n} >> {shift})" if pad == 1 else f"({n} >> {shift}) * {pad}"
    return f"{n} + {spare}"


def index_helper(name: str, shift: int, pad: int, array: str) -> str:
    """A ``__device__`` function template ``name(e)`` returning ``e + (e >> shift) * pad`` in
    ``e``'s own type, with a comment that says what it is for."""
    spare = f"(e >> {shift})" if pad == 1 else f"(e >> {shift}) * {pad}"
    plural = "s" if pad != 1 else ""
    return (
        f"// {array}[e] is stored at {array}[{name}(e)]: {pad} spare element{plural} after every\n"
        f"// {1 << shift}, so that lanes {1 << shift} elements apart use different banks\n"
        "template <typename I>\n"
        f"__device__ __forceinline__ I {name}(I e) {{ return e + {spare}; }}\n\n"
    )


def helper_offset(st: T.SourceTree, offsets: Iterable[int]) -> int:
    """Where a file-scope helper goes so that every offset of ``offsets`` sees it: the start of
    the line of the outermost item holding the first of them that is a child of the file, of a
    namespace or of a preprocessor conditional (an include guard's ``#ifndef``: the helper stays
    inside it); a linkage block (``extern "C" { ... }``) is left whole, templates have no C
    linkage."""
    first = min(offsets)
    node = st.node_at(first)
    top = node
    while node is not None and node.parent is not None:
        parent = node.parent
        top = node
        if parent.type in _CONTAINERS and not (
            parent.type == "declaration_list"
            and parent.parent is not None
            and parent.parent.type == "linkage_specification"
        ):
            break
        node = parent
    if top is None:
        return st.text.rfind("\n", 0, first) + 1
    # the comments right above the item (no blank line between) stay with it
    while (prev := top.prev_sibling) is not None and prev.type == "comment":
        if st.line(st.start(top)) - st.line(st.end(prev) - 1) > 1:
            break
        top = prev
    return st.text.rfind("\n", 0, st.start(top)) + 1


_CONTAINERS = (
    "translation_unit",
    "declaration_list",  # a namespace's body
    "preproc_if",
    "preproc_ifdef",
    "preproc_else",
    "preproc_elif",
)


def _declared_elsewhere(uses: Sequence[T.Use], decl_name_at: int) -> bool:
    return any(u.declared and u.span[0] != decl_name_at for u in uses)


def index_accesses(
    st: T.SourceTree, name: str, within: Span, decl_name_at: int
) -> list[T.Subscript] | str:
    """The accesses ``name[e]`` within ``within`` (the array's scope), or why its padding could
    change what the program does: a use other than one subscript (the bare name decays to a
    pointer, ``sizeof``, ``name[i][j]``), ``&name[e]`` (a pointer into it), another declaration
    of the name in the scope, or a macro whose body names it (its expansions are not parsed
    here). ``decl_name_at``: the offset of the array's own declarator name."""
    found = T.uses(st, name, within)
    if _declared_elsewhere(found, decl_name_at):
        return f"{name} is declared more than once in its scope"
    if T.macro_uses(st, name):
        return f"a macro names {name} (its expansions are not rewritten)"
    for u in found:
        if u.span[0] == decl_name_at:
            continue
        line = st.line(u.span[0])
        if u.subscripts != 1:
            how = "without a subscript" if not u.subscripts else f"with {u.subscripts} subscripts"
            return f"line {line} uses {name} {how}"
        if u.address_taken:
            return f"line {line} takes the address of an element of {name}"
    subs = [s for s in T.subscripts(st, name, within) if len(s.indices) == 1]
    accesses = sum(1 for u in found if u.span[0] != decl_name_at)
    if len(subs) != accesses:
        return f"not every use of {name} is an access {name}[e]"
    return subs


def wrap_indices(
    st: T.SourceTree, rw: Rewrite, accesses: Sequence[T.Subscript], helper: str
) -> int:
    """Make the index ``e`` of each access ``helper(e)`` (the spaces around it kept outside).
    Returns the number of accesses edited."""
    n = 0
    for s in accesses:
        a, b = s.indices[0]
        while a < b and st.text[a].isspace():
            a += 1
        while b > a and st.text[b - 1].isspace():
            b -= 1
        if a == b:
            continue
        rw.insert(a, f"{helper}(")
        rw.insert(b, ")")
        n += 1
    return n
