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
- :func:`index_helper`: the ``__device__`` function computing the padded index (or
  :func:`swizzle_helper`: the swizzled one, every odd group of ``2**s`` elements read backwards,
  no spare element), and :func:`helper_offset`: where it goes (before the top-level item that
  holds the first use);
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
    "swizzle_helper",
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
        f"// {array}[e] is stored at {array}[{name}(e)]:\n"
        f"// {pad} spare element{plural} after every {1 << shift}, so that lanes "
        f"{1 << shift} elements apart use different banks\n"
        "template <typename I>\n"
        f"__device__ __forceinline__ I {name}(I e) {{ return e + {spare}; }}\n\n"
    )


def swizzle_helper(name: str, shift: int, array: str) -> str:
    """A ``__device__`` function template ``name(e)`` returning ``e`` with its low ``shift``
    bits inverted when bit ``shift`` is set (every odd group of ``2**shift`` elements read
    backwards: one-to-one within each group, no spare element), in ``e``'s own type, with a
    comment that says what it is for."""
    n = 1 << shift
    return (
        f"// {array}[e] is stored at {array}[{name}(e)]:\n"
        f"// every odd group of {n} elements backwards, so that strided lanes use the\n"
        f"// banks the even group leaves free\n"
        "template <typename I>\n"
        f"__device__ __forceinline__ I {name}(I e) "
        f"{{ return e ^ (((e >> {shift}) & 1) * {n - 1}); }}\n\n"
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


def _check_uses(st: T.SourceTree, uses: Sequence[T.Use], name: str) -> str | None:
    for u in uses:
        line = st.line(u.span[0])
        if u.subscripts != 1:
            how = "without a subscript" if not u.subscripts else f"with {u.subscripts} subscripts"
            return f"line {line} uses {name} {how}"
        if u.address_taken:
            return f"line {line} takes the address of an element of {name}"
    return None


def _indices(st: T.SourceTree, name: str, within: Span | None, shift: int = 0) -> list[Span]:
    return [
        (s.indices[0][0] + shift, s.indices[0][1] + shift)
        for s in T.subscripts(st, name, within)
        if len(s.indices) == 1
    ]


_MACRO_PREFIX = "void __ga_macro() {\n"


def _macro_indices(st: T.SourceTree, name: str) -> list[Span] | str:
    """The indices of the accesses ``name[e]`` in the bodies of the file's ``#define``s (file
    offsets), or why a macro's use of ``name`` is not such an access."""
    out: list[Span] = []
    for n in st.walk(types=("preproc_def", "preproc_function_def")):
        v = n.child_by_field_name("value")
        if v is None:
            continue
        a, b = st.span(v)
        body = st.code[a:b].replace("\\\n", "  ")  # a continued line: same length, one line
        if name not in body:
            continue
        sub = T.SourceTree(_MACRO_PREFIX + body + "\n;}")
        uses = T.uses(sub, name)
        if any(u.subscripts != 1 or u.address_taken for u in uses):
            return f"the macro at line {st.line(a)} uses {name} otherwise than {name}[e]"
        found = _indices(sub, name, None, a - len(_MACRO_PREFIX))
        if len(found) != len(uses):
            return f"the macro at line {st.line(a)} uses {name} otherwise than {name}[e]"
        out += found
    return out


def index_accesses(
    st: T.SourceTree, name: str, within: Span, declared: Sequence[int], *, macros: bool = False
) -> list[Span] | str:
    """The indices (spans inside the brackets) of the accesses ``name[e]`` within ``within``
    (the array's scope) and, with ``macros``, in the bodies of the file's macros; or why its
    padding could change what the program does: a use other than one subscript (the bare name
    decays to a pointer, ``sizeof``, ``name[i][j]``), ``&name[e]`` (a pointer into it), another
    declaration of the name in the scope than ``declared`` (declarator names' offsets: the
    arrays padded alike), or, without ``macros``, a macro whose body names it (its expansions
    reach beyond the scope)."""
    found = T.uses(st, name, within)
    if any(u.declared and u.span[0] not in declared for u in found):
        return f"{name} is declared more than once in its scope"
    in_macros: list[Span] = []
    if T.macro_uses(st, name):
        if not macros:
            return f"a macro names {name} (its expansions are not rewritten)"
        got = _macro_indices(st, name)
        if isinstance(got, str):
            return got
        in_macros = got
    used = [u for u in found if u.span[0] not in declared]
    why = _check_uses(st, used, name)
    if why is not None:
        return why
    spans = _indices(st, name, within)
    if len(spans) != len(used):
        return f"not every use of {name} is an access {name}[e]"
    return sorted(spans + in_macros)


def wrap_indices(rw: Rewrite, indices: Sequence[Span], helper: str) -> int:
    """Make each index ``e`` (its span inside the brackets) ``helper(e)``, the spaces around it
    kept outside. Returns the number of indices edited."""
    text = rw.original
    n = 0
    for a, b in indices:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a == b:
            continue
        rw.insert(a, f"{helper}(")
        rw.insert(b, ")")
        n += 1
    return n
