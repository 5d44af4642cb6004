"""The operations automatic fixes are made of, on the parser's nodes (issue 28's fix kit).

A rule's transform composes these instead of matching the source's spelling with regular
expressions: each takes what :mod:`gpuadvise.source.tree` found (a declaration, an expression's
span) and returns text or edits of a :class:`~gpuadvise.source.edit.Rewrite` that touch only the
node's own range, so the user's comments, macros, templates and formatting outside the edit stay
as they are.

- :func:`split_declaration`: ``unsigned t = threadIdx.x, i = blockIdx.x * B + t;`` as one
  declaration per declarator (``unsigned t = threadIdx.x;`` ``unsigned i = ...;``), qualifiers,
  ``__shared__`` and each declarator's own pointer stars and dimensions kept;
- :func:`float_literal_edits`: the double literals of a float expression suffixed ``f``
  (``2.0`` -> ``2.0f``, ``1e-3`` -> ``1e-3f``, ``2.`` -> ``2.f``), integers and literals that
  already carry a suffix left alone;
- :func:`float_function_edits`: double math functions called in float code renamed to their
  float versions (``sqrt`` -> ``sqrtf``, ``exp`` -> ``expf``); ``std::`` and ``::`` spellings
  and overloads on float (``fabs``) kept apart;
- :func:`float_type_edits`: the ``double`` type of declarations and casts made ``float``
  (``double v = ...``, ``static_cast<double>(x)``, ``(double)x``); ``long double`` left alone;
- :func:`insert_restrict`: ``__restrict__`` after the ``*`` of pointer parameters.

Pure text work on parsed trees: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite

__all__ = [
    "DOUBLE_TO_FLOAT_FUNCTIONS",
    "accumulate_in_register",
    "comments_within",
    "declaration_prefix",
    "declarator_text",
    "float_function_edits",
    "float_literal_edits",
    "float_type_edits",
    "fresh_name",
    "insert_restrict",
    "split_declaration",
    "written",
]


def declaration_prefix(text: str, decl: T.Declaration) -> str:
    """What every declarator of ``decl`` shares, as written: its specifiers and type, up to the
    first declarator (whose own pointer stars belong to it: tree-sitter's declarator span
    starts at the star, so ``float *a, *b`` gives ``float ``)."""
    return text[decl.span[0] : decl.declarators[0].span[0]]


def declarator_text(text: str, decl: T.Declaration, d: T.Declarator) -> str:
    """Declarator ``d`` of ``decl`` as a declaration of its own, without the ``;``: the
    declaration's prefix (:func:`declaration_prefix`), then ``d`` as written (its pointer
    stars, dimensions and initializer)."""
    return declaration_prefix(text, decl) + text[d.span[0] : d.span[1]]


def split_declaration(text: str, decl: T.Declaration) -> list[tuple[T.Declarator, str]]:
    """Each declarator of ``decl`` as a statement of its own, in order: (declarator, text with
    ``;``). A declaration of one declarator comes back as it is written."""
    if len(decl.declarators) == 1:
        return [(decl.declarators[0], text[decl.span[0] : decl.span[1]])]
    out = []
    prev = None
    for d in decl.declarators:
        # what stood between the declarators besides the comma (a comment) goes before it
        gap = "" if prev is None else text[prev : d.span[0]].replace(",", "", 1).strip()
        out.append((d, (gap + " " if gap else "") + declarator_text(text, decl, d) + ";"))
        prev = d.span[1]
    tail = text[prev : decl.span[1]].rstrip(";").strip() if prev is not None else ""
    if tail:  # a comment before the `;`
        d, s = out[-1]
        out[-1] = (d, s + " " + tail)
    return out


def split_declaration_edit(rw: Rewrite, decl: T.Declaration, sep: str = " ") -> None:
    """Replace ``decl`` in ``rw`` by one declaration per declarator, joined by ``sep`` (a
    newline and the statement's indentation keeps one per line)."""
    parts = split_declaration(rw.original, decl)
    if len(parts) > 1:
        rw.replace(decl.span[0], decl.span[1], sep.join(p for _, p in parts))


def comments_within(st: T.SourceTree, span: T.Span) -> list[str]:
    """The comments that start inside ``span``, as written, in order: what a rewrite that
    replaces the whole range must carry over (``// index first`` after a moved statement)."""
    return [
        st.text_of(n)
        for n in st.walk(types=("comment",), within=span)
        if span[0] <= st.start(n) < span[1]
    ]


# A floating literal without a suffix: digits with a point or an exponent (C's decimal
# floating constants; hexadecimal ones are rare in kernels and left alone).
_DOUBLE_LITERAL = re.compile(r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")


def is_double_literal(lit: str) -> bool:
    """``lit`` (a number literal as written) is a double constant: a point or an exponent, no
    ``f``/``F``/``l``/``L`` suffix, not hexadecimal."""
    s = lit.strip()
    if s.lower().startswith("0x") or s[-1:] in "fFlL":
        return False
    return bool(_DOUBLE_LITERAL.fullmatch(s)) and ("." in s or "e" in s.lower())


def float_literal_edits(
    st: T.SourceTree, rw: Rewrite, within: T.Span, skip: Iterable[T.Span] = ()
) -> int:
    """Suffix ``f`` to every double literal within ``within`` (not inside the ``skip`` spans:
    operands that really are double). Returns the number of literals edited."""
    skipped = list(skip)
    n = 0
    for (a, b), lit in T.number_literals(st, within):
        if any(s0 <= a < s1 for s0, s1 in skipped):
            continue
        if is_double_literal(lit):
            rw.insert(b, "f")
            n += 1
    return n


DOUBLE_TO_FLOAT_FUNCTIONS: dict[str, str] = {
    name: name + "f"
    for name in (
        "sqrt", "rsqrt", "cbrt", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10",
        "log1p", "pow", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
        "tanh", "erf", "erfc", "floor", "ceil", "round", "trunc", "fabs", "fmod", "fmin",
        "fmax", "fma", "hypot", "lgamma", "tgamma", "copysign", "rint", "nearbyint",
    )
}  # fmt: skip
"""The double-precision math functions of CUDA's library and their float versions."""


def float_function_edits(
    st: T.SourceTree, rw: Rewrite, within: T.Span, names: Sequence[str] | None = None
) -> int:
    """Rename the double math functions called within ``within`` (of ``names`` when given) to
    their float versions: ``sqrt(x)`` -> ``sqrtf(x)``; ``std::sqrt`` and ``::sqrt`` keep their
    qualifier. Returns the number of calls edited."""
    want = set(names) if names is not None else set(DOUBLE_TO_FLOAT_FUNCTIONS)
    n = 0
    for c in T.calls(st, within):
        name = c.name.rsplit("::", 1)[-1]
        if name not in want or name not in DOUBLE_TO_FLOAT_FUNCTIONS:
            continue
        if c.name.startswith("std::"):
            continue  # std::sqrt(float) is already the float overload
        fn = c.node.child_by_field_name("function") if c.node is not None else None
        if fn is None:
            continue
        a, b = st.span(fn)
        rw.insert(b, "f")
        n += 1
    return n


def float_type_edits(st: T.SourceTree, rw: Rewrite, within: T.Span) -> int:
    """Make float the ``double`` type named within ``within``: a declaration's (``double v =``,
    ``const double a, b``), a cast's (``static_cast<double>(x)``, ``(double)x``), a template
    argument's; ``long double`` and names such as ``double2`` (other nodes) are left alone.
    Returns the number of types edited."""
    n = 0
    for node in st.walk(types=("primitive_type",), within=within):
        a, b = st.span(node)
        if not within[0] <= a < within[1] or st.code_of(node) != "double":
            continue
        if node.parent is not None and node.parent.type == "sized_type_specifier":
            continue  # ``long double``
        rw.replace(a, b, "float")
        n += 1
    return n


def insert_restrict(
    st: T.SourceTree, rw: Rewrite, kernel: T.Kernel, params: Iterable[str] | None = None
) -> int:
    """Add ``__restrict__`` before the name of the kernel's pointer parameters named in
    ``params`` (None: all of them) that lack it (``const float* in`` -> ``const float*
    __restrict__ in``); array parameters (``float in[]``) and parameters without a ``*`` are
    left alone. Returns the number of parameters edited."""
    want = None if params is None else set(params)
    n = 0
    for p in kernel.params:
        if (
            (want is not None and p.name not in want)
            or not p.pointer
            or re.search(r"\b(__)?restrict(__)?\b", p.type)
        ):
            continue
        s, e = p.span
        code = st.code[s:e]
        names = [m for m in re.finditer(rf"\b{re.escape(p.name)}\b", code)]
        if not names or "*" not in code[: names[-1].start()] or "[" in code[names[-1].end() :]:
            continue
        rw.insert(s + names[-1].start(), "__restrict__ ")
        n += 1
    return n


_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")
_GUARDS = ("if_statement", "conditional_expression", "switch_statement", "case_statement")


def _norm(text: str) -> str:
    return "".join(text.split())


def fresh_name(st: T.SourceTree, base: str, within: T.Span) -> str:
    """``base``, or ``base`` with a number, that no identifier within ``within`` spells."""
    taken = {n for n, _ in T.identifiers(st, within)}
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


def accumulate_in_register(
    st: T.SourceTree, rw: Rewrite, at: int, buffer: str, scope: T.Span, name: str | None = None
) -> str | None:
    """Hold the element of ``buffer`` that the statement at offset ``at`` updates
    (``buffer[index] += ...``, ``buffer[index] = buffer[index] + ...``, ``buffer[index]++``) in
    a register across the innermost loop around it that keeps its address: ``auto acc =
    buffer[index];`` before the loop, every ``buffer[index]`` of the loop read and written as
    ``acc``, ``buffer[index] = acc;`` after it. ``scope``: the kernel's body (where names are
    looked up). Returns why not (a sentence), or None when the edits were made.

    Refused, with the reason, when the update is conditional inside the loop (hoisting the load
    would read an element the guard protects), the loop can leave the kernel (``return``), an
    index variable changes in the loop or is declared in it, the loop reaches ``buffer``
    another way (another index, the bare pointer), or the index calls a function. Other
    pointers may still alias ``buffer``: an assumption the output check of the launch covers
    and the fix's description states."""
    stmt = T.statement_at(st, at)
    if stmt is None:
        return "no statement at the update"
    target = next(
        (
            s
            for s in T.subscripts(st, buffer, (stmt.start, stmt.end + 1))
            if len(s.indices) == 1 and written(s)
        ),
        None,
    )
    if target is None:
        return f"the statement does not update `{buffer}[...]`"
    index = st.text[target.indices[0][0] : target.indices[0][1]]
    if any(T.calls(st, target.indices[0])) or re.search(r"\+\+|--|(?<![=!<>])=(?!=)", index):
        return "the index calls a function or assigns"
    loop_node = next(iter(T.enclosing(st, stmt.start, _LOOPS)), None)
    if loop_node is None:
        return "the update is not in a loop"
    loop = T.loops(st, st.span(loop_node))[0]
    lo, hi = loop.span
    for g in T.enclosing(st, stmt.start, _GUARDS):
        if loop.body[0] <= st.start(g) < hi:
            return "the update is conditional inside the loop"
    if any(st.walk(types=("return_statement", "goto_statement"), within=loop.span)):
        return "the loop can leave the kernel (return)"
    names = {n for n, _ in T.identifiers(st, target.indices[0])}
    for n in sorted(names):
        if T.assignments(st, n, loop.span):
            return f"`{n}` (in the index) changes in the loop"
    for d in T.declarations(st, loop.span):
        if names & {x.name for x in d.declarators}:
            return "the index is declared inside the loop"
    want = _norm(index)
    subs = T.subscripts(st, buffer, loop.span)
    if any(
        len(s.indices) != 1 or _norm(st.text[s.indices[0][0] : s.indices[0][1]]) != want
        for s in subs
    ):
        return f"the loop also reaches `{buffer}` at another index"
    covered = [s.span for s in subs]
    for u in T.uses(st, buffer, loop.span):
        if not any(a <= u.span[0] < b for a, b in covered):
            return f"the loop uses the pointer `{buffer}` itself"
    name = name or fresh_name(st, f"{buffer}_acc", scope)
    line0 = st.text.rfind("\n", 0, lo) + 1
    indent = re.match(r"[ \t]*", st.text[line0:lo])
    pad = indent.group(0) if indent else ""
    element = f"{buffer}[{index.strip()}]"
    parent = loop_node.parent
    braced = parent is not None and parent.type == "compound_statement"
    if braced:
        rw.insert(lo, f"auto {name} = {element};\n{pad}")
        rw.insert(hi, f"\n{pad}{element} = {name};")
    else:  # the loop is another statement's body: a block keeps the three together
        rw.insert(lo, f"{{\n{pad}    auto {name} = {element};\n{pad}    ")
        rw.insert(hi, f"\n{pad}    {element} = {name};\n{pad}}}")
    for s in subs:
        rw.replace(s.span[0], s.span[1], name)
    return None


def written(s: T.Subscript) -> bool:
    """The subscript is the target of an assignment, a compound assignment or ``++``/``--``."""
    n = s.node
    p = n.parent if n is not None else None
    if p is None:
        return False
    if p.type == "assignment_expression":
        return p.child_by_field_name("left") == n
    return p.type == "update_expression"
