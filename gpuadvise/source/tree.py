"""CUDA source as a syntax tree: tree-sitter with its CUDA grammar.

:func:`parse` gives a :class:`SourceTree` (cached per text): the text, the same text with comments
and string contents blanked (``code``: every offset and line unchanged), and the tree. Offsets
everywhere are *character* offsets into the text (the tree's byte offsets are converted), and
spans are half-open ``(start, end)`` pairs.

What it finds, each as a small frozen dataclass that keeps its tree node (``node``) for callers
that want to look further:

- :func:`kernels`: every ``__global__`` function (definitions and declarations), with its
  qualified name (namespaces), template parameters or specialization arguments, ``extern "C"``,
  ``__launch_bounds__``/``__maxnreg__`` attributes, parameters and body;
- :func:`loops` (``for``/``while``/``do``: header, its parts, body), :func:`statement_at` (the
  simple statement holding an offset, and the braceless control header it is the body of),
  :func:`declarations` (``__shared__`` arrays with their dimensions, ``extern``, initializers),
  :func:`calls`, :func:`subscripts` (``a[i][j]`` chains), :func:`uses` (an identifier's
  occurrences), :func:`assignments` (what changes a variable);
- :func:`split_top` splits an expression's text at top-level separators (commas, operators)
  outside brackets; :func:`match_close` gives a bracket's partner.

The grammar does not know ``__maxnreg__(N)``: it is blanked before parsing (so the kernel after it
parses) and reported from a lexical scan as the kernel's :attr:`Kernel.maxnreg`. Nor does it allow
a directive between a braceless control header and its body (``for (...)``, ``#pragma unroll``,
the inner loop): such a directive is blanked too, so the body is the header's. The parser never
raises on any text: unparseable parts become ERROR nodes that the queries skip.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import tree_sitter_cuda
from tree_sitter import Language, Node, Parser

from gpuadvise.source.lexical import blank_comments_and_strings, match_close, split_top

__all__ = [
    "Expr",
    "expr_at",
    "expr_parent",
    "parse_expression",
    "statement_start",
    "called_with",
    "call_of",
    "arithmetic_operators",
    "Assignment",
    "Attribute",
    "Call",
    "Declaration",
    "Declarator",
    "If",
    "Kernel",
    "KernelParam",
    "Loop",
    "SourceTree",
    "Statement",
    "Subscript",
    "TemplateParameter",
    "assignments",
    "block_statements",
    "calls",
    "declarations",
    "find_kernel",
    "identifiers",
    "ifs",
    "kernels",
    "loops",
    "match_close",
    "parse",
    "split_top",
    "statement_at",
    "statements",
    "subscripts",
    "substitute",
    "template_parameters",
    "Use",
    "macro_uses",
    "uses",
]

Span = tuple[int, int]

_LANGUAGE = Language(tree_sitter_cuda.language())
_MAXNREG = re.compile(r"\b__maxnreg__\s*\(")

# statements that hold no other statement (what :func:`statement_at` returns)
SIMPLE_STATEMENTS = frozenset(
    {
        "expression_statement",
        "declaration",
        "return_statement",
        "break_statement",
        "continue_statement",
        "goto_statement",
        "throw_statement",
    }
)
LOOP_TYPES = frozenset({"for_statement", "while_statement", "do_statement", "for_range_loop"})
_CONTROL = frozenset({"if_statement", "else_clause", "switch_statement", *LOOP_TYPES})
_FUNCTIONS = frozenset({"function_definition", "declaration", "template_instantiation"})


# ---------------------------------------------------------------------------------------------
# The parsed file


@dataclass(frozen=True)
class Attribute:
    """``__launch_bounds__(...)`` or ``__maxnreg__(...)`` on a kernel."""

    name: str
    span: Span  # the whole attribute, name to ``)``
    args: tuple[Span, ...]  # each argument's raw text (between ``(``/``,`` and ``,``/``)``)
    text: str  # as written

    @property
    def open_paren(self) -> int:
        return self.args[0][0] - 1 if self.args else self.span[1] - 2


class SourceTree:
    """A parsed CUDA file: ``text``, ``code`` (comments and strings blanked) and the tree."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.code = blank_comments_and_strings(text)
        self.maxnreg: tuple[Attribute, ...] = tuple(self._scan_maxnreg())
        feed = self.text
        for a in reversed(self.maxnreg):  # the grammar does not know it: blank it, same length
            feed = _blank(feed, a.span)
        self._line_starts: list[int] | None = None
        # the nodes of a set of types in the whole tree, with their spans (walk's)
        self._of_types: dict[frozenset[str], tuple[list[Node], list[Span]]] = {}
        self._parse(feed)
        # a directive between a braceless control header and its body (``for (...)`` then
        # ``#pragma unroll`` then the inner ``for``) ends the header with a made-up empty body
        # in the grammar, the real body a sibling after it: such directives are blanked too
        # (same length; at most once per directive, each pass finding the next nesting level)
        for _ in range(_MAX_DIRECTIVE_PASSES):
            misplaced = [self.span(n) for n in _misplaced_directives(self.root)]
            if not misplaced:
                break
            for span in misplaced:
                feed = _blank(feed, span)
            self._parse(feed)

    def _parse(self, feed: str) -> None:
        """Parse ``feed`` (the text with parts blanked, the same length in characters)."""
        data = feed.encode("utf-8", errors="surrogatepass")
        self._ascii = len(data) == len(feed)
        self._char_of: list[int] | None = None
        if not self._ascii:
            char_of = [0] * (len(data) + 1)
            b = 0
            for i, ch in enumerate(feed):
                n = len(ch.encode("utf-8", errors="surrogatepass"))
                for k in range(n):
                    char_of[b + k] = i
                b += n
            char_of[b] = len(feed)
            self._char_of = char_of
        self.tree = Parser(_LANGUAGE).parse(data)
        self.root: Node = self.tree.root_node

    # offsets and text -------------------------------------------------------------------------

    def pos(self, byte_offset: int) -> int:
        """The character offset of a byte offset of the tree."""
        if self._char_of is None:
            return byte_offset
        return self._char_of[min(byte_offset, len(self._char_of) - 1)]

    def start(self, node: Node) -> int:
        return self.pos(node.start_byte)

    def end(self, node: Node) -> int:
        return self.pos(node.end_byte)

    def span(self, node: Node) -> Span:
        return self.start(node), self.end(node)

    def text_of(self, node: Node | Span) -> str:
        a, b = node if isinstance(node, tuple) else self.span(node)
        return self.text[a:b]

    def code_of(self, node: Node | Span) -> str:
        a, b = node if isinstance(node, tuple) else self.span(node)
        return self.code[a:b]

    def line(self, offset: int) -> int:
        """The 1-based line of a character offset."""
        if self._line_starts is None:
            starts = [0]
            k = self.text.find("\n")
            while k >= 0:
                starts.append(k + 1)
                k = self.text.find("\n", k + 1)
            self._line_starts = starts
        import bisect

        return bisect.bisect_right(self._line_starts, offset)

    def line_start(self, line: int) -> int:
        """The offset where 1-based ``line`` begins (the text's length past its end)."""
        self.line(0)
        assert self._line_starts is not None
        if line - 1 < len(self._line_starts):
            return self._line_starts[max(line - 1, 0)]
        return len(self.text)

    # walking ----------------------------------------------------------------------------------

    def walk(
        self,
        node: Node | None = None,
        types: Iterable[str] | None = None,
        within: Span | None = None,
    ) -> Iterator[Node]:
        """Nodes under ``node`` (the root by default) in document order, of ``types`` (all named
        nodes when None), overlapping ``within`` when given."""
        want = frozenset(types) if types is not None else None
        if (node is None or node == self.root) and want is not None:
            # an analysis walks the same tree for the same types hundreds of times (kernels,
            # declarations, calls, uses ... within one span or another): the tree once per set
            # of types, then the nodes kept; a node outside ``within`` is one whose subtree
            # the walk skips (a child lies within its parent)
            found = self._of_types.get(want)
            if found is None:
                typed = list(self._walk_all(self.root, want))
                found = self._of_types[want] = (typed, [self.span(n) for n in typed])
            nodes, spans = found
            if within is None:
                yield from nodes
                return
            lo, hi = within
            for n, (s, e) in zip(nodes, spans, strict=True):
                if s < hi and e > lo:
                    yield n
            return
        stack = [node if node is not None else self.root]
        while stack:
            n = stack.pop()
            if within is not None:
                s, e = self.span(n)
                if e <= within[0] or s >= within[1]:
                    continue
            if n.is_named and (want is None or n.type in want):
                yield n
            stack.extend(reversed(n.children))

    @staticmethod
    def _walk_all(node: Node, want: frozenset[str]) -> Iterator[Node]:
        """The named nodes of types ``want`` under ``node``, in document order."""
        stack = [node]
        while stack:
            n = stack.pop()
            if n.is_named and n.type in want:
                yield n
            stack.extend(reversed(n.children))

    def node_at(self, offset: int, types: Iterable[str] | None = None) -> Node | None:
        """The smallest node holding the character at ``offset`` (of ``types`` when given)."""
        want = frozenset(types) if types is not None else None
        best = None
        n: Node | None = self.root
        while n is not None:
            if want is None or n.type in want:
                best = n
            nxt = None
            for c in n.children:
                s, e = self.span(c)
                if s <= offset < e:
                    nxt = c
                    break
            n = nxt
        return best

    def ancestors(self, node: Node) -> Iterator[Node]:
        p = node.parent
        while p is not None:
            yield p
            p = p.parent

    # helpers ----------------------------------------------------------------------------------

    def _scan_maxnreg(self) -> Iterator[Attribute]:
        code = self.code
        for m in _MAXNREG.finditer(code):
            close = match_close(code, m.end() - 1)
            if close < 0:
                continue
            args = tuple(
                (m.end() + a, m.end() + b) for a, b in split_top(code[m.end() : close], ",")
            )
            yield Attribute(
                "__maxnreg__", (m.start(), close + 1), args, self.text[m.start() : close + 1]
            )


_MAX_DIRECTIVE_PASSES = 8


def _blank(text: str, span: Span) -> str:
    """``text`` with ``span`` made spaces (its newlines kept: every offset and line stays)."""
    a, b = span
    return text[:a] + "".join(c if c == "\n" else " " for c in text[a:b]) + text[b:]


def _last_leaf(node: Node) -> Node:
    while node.child_count:
        node = node.children[-1]
    return node


def _misplaced_directives(root: Node) -> list[Node]:
    """The directives (``#pragma`` ...) right after a statement the grammar had to close with a
    made-up (missing) token: those that stood between a braceless header and its body."""
    out = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "preproc_call":
            prev = n.prev_sibling
            if prev is not None and _last_leaf(prev).is_missing:
                out.append(n)
            continue
        if n.has_error:  # a missing token and the directive after it share a parent
            stack.extend(n.children)
    return out


@functools.lru_cache(maxsize=16)
def parse(text: str) -> SourceTree:
    """The parsed file (cached for the last few texts)."""
    return SourceTree(text)


# ---------------------------------------------------------------------------------------------
# Kernels


@dataclass(frozen=True)
class TemplateParameter:
    kind: str  # "type" or "value" (a variadic pack: "type" without a name)
    name: str
    default: str | None
    type: str = ""  # a value parameter's type as written (``int``, ``ns::Mode``)
    pack: bool = False  # ``typename... Ts``, ``int... Ns``


@dataclass(frozen=True)
class KernelParam:
    name: str
    type: str  # the declaration's text without the name
    span: Span
    pointer: bool


@dataclass(frozen=True)
class Kernel:
    """A ``__global__`` function of the file."""

    name: str  # qualified, without template arguments: "ns::k"
    line: int  # the line of its name
    start: int  # offset of the declaration (its ``template``/``extern`` prefix included)
    template_params: tuple[TemplateParameter, ...] | None  # None: not a template
    specialization_args: tuple[str, ...] | None  # explicit specialization or instantiation
    extern_c: bool
    launch_bounds: Attribute | None
    maxnreg: Attribute | None
    params: tuple[KernelParam, ...]
    body: Span | None  # offsets of the body's ``{`` and ``}`` (inclusive); None: a declaration
    instantiation: bool = False  # ``template __global__ void k<...>(...);``
    node: Node | None = field(default=None, compare=False, repr=False)

    @property
    def base_name(self) -> str:
        return self.name.rsplit("::", 1)[-1]

    @property
    def is_definition(self) -> bool:
        return self.body is not None


def _has_global(node: Node) -> bool:
    return any(c.type == "__global__" for c in node.children)


def _dead(st: SourceTree, node: Node) -> bool:
    """Whether ``node`` is in the taken-never branch of an ``#if 0``."""
    for anc in st.ancestors(node):
        if anc.type == "preproc_if":
            cond = anc.child_by_field_name("condition")
            alt = anc.child_by_field_name("alternative")
            if cond is not None and st.code_of(cond).strip() == "0":
                if alt is None or st.start(node) < st.start(alt):
                    return True
    return False


def _declarator_name(node: Node | None) -> Node | None:
    """The name node (identifier, qualified or template function) of a declarator."""
    while node is not None:
        if node.type in ("identifier", "field_identifier", "qualified_identifier"):
            return node
        if node.type == "template_function":
            return node
        if node.type == "function_declarator":
            node = node.child_by_field_name("declarator")
            continue
        if node.type in ("pointer_declarator", "reference_declarator", "init_declarator"):
            node = node.child_by_field_name("declarator")
            continue
        return None
    return None


def _function_declarator(node: Node) -> Node | None:
    d = node.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def template_parameters(st: SourceTree, tl: Node) -> tuple[TemplateParameter, ...]:
    """The parameters of a ``template_parameter_list`` node."""
    out = []
    for p in tl.named_children:
        if p.type in ("type_parameter_declaration", "optional_type_parameter_declaration"):
            name = p.child_by_field_name("name")
            if name is None:
                name = next((c for c in p.named_children if c.type == "type_identifier"), None)
            dflt = p.child_by_field_name("default_type")
            out.append(
                TemplateParameter(
                    "type",
                    st.text_of(name) if name else "",
                    st.text_of(dflt) if dflt else None,
                )
            )
        elif p.type in ("parameter_declaration", "optional_parameter_declaration"):
            name = _declarator_name(p.child_by_field_name("declarator"))
            dflt = p.child_by_field_name("default_value")
            typ = p.child_by_field_name("type")
            out.append(
                TemplateParameter(
                    "value",
                    st.text_of(name) if name else "",
                    st.text_of(dflt) if dflt else None,
                    " ".join(st.code_of(typ).split()) if typ is not None else "",
                )
            )
        elif p.type == "variadic_parameter_declaration" or "parameter" in p.type:
            out.append(TemplateParameter("type", "", None, pack=True))
    return tuple(out)


def _params(st: SourceTree, fd: Node | None) -> tuple[KernelParam, ...]:
    if fd is None:
        return ()
    plist = fd.child_by_field_name("parameters")
    if plist is None:
        return ()
    out = []
    for p in plist.named_children:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        d = p.child_by_field_name("declarator")
        name = _declarator_name(d)
        s, e = st.span(p)
        dflt = p.child_by_field_name("default_value")
        if dflt is not None:  # `int stride = 1`: the type is what comes before the `=`
            e = st.code.rfind("=", s, st.start(dflt))
        if name is not None:
            ns, ne = st.span(name)
            typ = " ".join((st.code[s:ns] + st.code[ne:e]).split())
        else:
            typ = " ".join(st.code[s:e].split())
        pointer = d is not None and any(
            n.type in ("pointer_declarator", "abstract_pointer_declarator", "array_declarator")
            for n in [d, *st.walk(d)]
        )
        out.append(KernelParam(st.text_of(name) if name else "", typ, (s, e), pointer))
    return tuple(out)


def _attribute(st: SourceTree, node: Node) -> Attribute:
    s, e = st.span(node)
    code = st.code
    open_at = code.find("(", s, e)
    close = e - 1 if code[e - 1 : e] == ")" else e
    args = tuple(
        (open_at + 1 + a, open_at + 1 + b)
        for a, b in split_top(code[open_at + 1 : close], ",", "([{<")
    )
    return Attribute(code[s:open_at].strip(), (s, e), args, st.text[s:e])


def kernels(st: SourceTree) -> list[Kernel]:
    """Every ``__global__`` function of the file, in order."""
    out: list[Kernel] = []
    for node in st.walk(types=_FUNCTIONS):
        if not _has_global(node) or _dead(st, node):
            continue
        fd = _function_declarator(node)
        name_node = _declarator_name(fd) if fd is not None else None
        if name_node is None:
            continue
        spec_args: tuple[str, ...] | None = None
        if name_node.type == "template_function":
            args = name_node.child_by_field_name("arguments")
            spec_args = tuple(
                " ".join(st.code_of(a).split()) for a in (args.named_children if args else [])
            )
            name_node = name_node.child_by_field_name("name") or name_node
        parts = [st.code_of(name_node).replace(" ", "")]
        start_node = node
        tparams: tuple[TemplateParameter, ...] | None = None
        extern_c = False
        for anc in st.ancestors(node):
            if anc.type == "template_declaration" and tparams is None and start_node is node:
                tl = anc.child_by_field_name("parameters")
                tparams = template_parameters(st, tl) if tl is not None else ()
                start_node = anc
            elif anc.type == "linkage_specification":
                extern_c = True
                if anc.child_by_field_name("body") is node or start_node.parent is anc:
                    start_node = anc
            elif anc.type == "namespace_definition":
                nm = anc.child_by_field_name("name")
                if nm is not None:
                    parts.insert(0, st.code_of(nm).replace(" ", ""))
        if tparams == () and spec_args is not None:
            tparams = None  # template <> k<args>: an explicit specialization
        lb = next((c for c in node.children if c.type == "launch_bounds"), None)
        body = node.child_by_field_name("body") if node.type == "function_definition" else None
        bspan = None
        if body is not None:
            bs, be = st.span(body)
            bspan = (bs, be - 1)
        s0 = st.start(start_node)
        hdr_end = bspan[0] if bspan else st.end(node)
        maxnreg = next((a for a in st.maxnreg if s0 <= a.span[0] < hdr_end), None)
        if maxnreg is None:  # blanked before the kernel's declaration started: the line before
            prev = node.prev_sibling
            lo = st.end(prev) if prev is not None else 0
            maxnreg = next((a for a in st.maxnreg if lo <= a.span[0] < hdr_end), None)
        out.append(
            Kernel(
                "::".join(parts),
                st.line(st.start(name_node)),
                s0,
                tparams,
                spec_args,
                extern_c,
                _attribute(st, lb) if lb is not None else None,
                maxnreg,
                _params(st, fd),
                bspan,
                node.type == "template_instantiation",
                node,
            )
        )
    return out


def find_kernel(st: SourceTree, name: str, line: int | None = None) -> Kernel | None:
    """The definition of kernel ``name`` (``k``, ``ns::k``; template arguments ignored), the one
    whose declaration spans ``line`` (from its first keyword to its name) when given, else the
    first."""
    base = name.split("<", 1)[0].strip().lstrip(":")
    want = base.split("::")
    for k in kernels(st):
        if k.body is None or k.name.split("::")[-len(want) :] != want:
            continue
        if line is None or st.line(k.start) <= line <= k.line:
            return k
    return None


# ---------------------------------------------------------------------------------------------
# Loops and statements


@dataclass(frozen=True)
class Loop:
    """A ``for``, ``while`` or ``do`` loop: offsets of its parts (half-open spans)."""

    kind: str  # "for", "while", "do"
    span: Span  # keyword to the body's end (the do-while's ``;`` included)
    header: Span | None  # ``(`` to ``)`` inclusive (None for a do loop's head)
    init: Span | None  # a for loop's parts, without their ``;``
    condition: Span | None
    update: Span | None
    body: Span  # the body statement (braces or ``;`` included)
    braced: bool
    node: Node | None = field(default=None, compare=False, repr=False)


def _loop(st: SourceTree, n: Node) -> Loop:
    kind = {"for_statement": "for", "while_statement": "while", "do_statement": "do"}.get(
        n.type, "for"
    )
    body = n.child_by_field_name("body")
    header = init = cond = upd = None
    if kind != "do":
        op = next((c for c in n.children if c.type == "("), None)
        cp = next((c for c in n.children if c.type == ")"), None)
        if kind == "while":
            cc = n.child_by_field_name("condition")
            if cc is not None:
                op = cc.children[0] if cc.children and cc.children[0].type == "(" else op
                cp = cc.children[-1] if cc.children and cc.children[-1].type == ")" else cp
                inner = cc.child_by_field_name("value") or next(iter(cc.named_children), None)
                cond = st.span(inner) if inner is not None else None
        if op is not None and cp is not None:
            header = (st.start(op), st.end(cp))
        if kind == "for":
            i = n.child_by_field_name("initializer")
            c = n.child_by_field_name("condition")
            u = n.child_by_field_name("update")
            if i is not None:
                a, b = st.span(i)
                init = (a, b - 1) if st.text[b - 1 : b] == ";" else (a, b)
            cond = st.span(c) if c is not None else None
            upd = st.span(u) if u is not None else None
    else:
        c = n.child_by_field_name("condition")
        cond = st.span(c) if c is not None else None
    bspan = st.span(body) if body is not None else (st.end(n), st.end(n))
    return Loop(
        kind,
        st.span(n),
        header,
        init,
        cond,
        upd,
        bspan,
        body is not None and body.type == "compound_statement",
        n,
    )


def loops(st: SourceTree, within: Span | None = None) -> list[Loop]:
    """The loops that start within ``within`` (the whole file by default), in order."""
    out = []
    for n in st.walk(types=("for_statement", "while_statement", "do_statement"), within=within):
        lp = _loop(st, n)
        if within is None or within[0] <= lp.span[0] < within[1]:
            out.append(lp)
    return out


@dataclass(frozen=True)
class Statement:
    """A simple statement (expression, declaration, return...)."""

    start: int  # its first character
    end: int  # offset of its ``;`` (or its last character)
    kind: str  # the tree's node type
    header_end: int | None  # just after the braceless control header it is the body of
    node: Node | None = field(default=None, compare=False, repr=False)

    @property
    def labelled(self) -> bool:
        """Whether a label (``name:``, ``case k:``, ``default:``) stands before it."""
        p = self.node.parent if self.node is not None else None
        return p is not None and p.type in ("labeled_statement", "case_statement")


def _header_end(st: SourceTree, stmt: Node) -> int | None:
    """The end of the control header ``stmt`` is the braceless body of (None: it is not)."""
    p = stmt.parent
    if p is None:
        return None
    if p.type == "else_clause":
        kw = next((c for c in p.children if c.type == "else"), None)
        return st.end(kw) if kw is not None else None
    if p.type == "do_statement" and p.child_by_field_name("body") == stmt:
        return st.end(p.children[0])
    if p.type in ("if_statement", "while_statement", "switch_statement"):
        if p.child_by_field_name("consequence") == stmt or p.child_by_field_name("body") == stmt:
            cond = p.child_by_field_name("condition")
            return st.end(cond) if cond is not None else None
    if p.type in ("for_statement", "for_range_loop") and p.child_by_field_name("body") == stmt:
        cp = [c for c in p.children if c.type == ")"]
        return st.end(cp[-1]) if cp else None
    return None


def statement_at(st: SourceTree, offset: int, within: Span | None = None) -> Statement | None:
    """The innermost simple statement holding ``offset`` (None: the offset is in a control
    header, a for loop's parts, or no statement; or the statement is not inside ``within``)."""
    n = st.node_at(offset)
    while n is not None:
        if n.type in ("condition_clause", "parenthesized_expression") and n.parent is not None:
            if n.parent.type in _CONTROL and n.parent.child_by_field_name("condition") == n:
                return None
        if n.type in SIMPLE_STATEMENTS:
            p = n.parent
            if p is not None and p.type in ("for_statement", "for_range_loop"):
                if p.child_by_field_name("body") != n:
                    return None  # the for loop's initializer
            break
        if n.type in LOOP_TYPES or n.type == "compound_statement":
            return None
        n = n.parent
    if n is None:
        return None
    s, e = st.span(n)
    if within is not None and not (within[0] <= s and e <= within[1]):
        return None
    end = e - 1
    return Statement(s, end, n.type, _header_end(st, n), n)


def statements(st: SourceTree, within: Span | None = None) -> list[Statement]:
    """The simple statements starting within ``within``, in order (for-loop parts excluded)."""
    out = []
    for n in st.walk(types=SIMPLE_STATEMENTS, within=within):
        p = n.parent
        if p is not None and p.type in ("for_statement", "for_range_loop"):
            if p.child_by_field_name("body") != n:
                continue
        s, e = st.span(n)
        if e <= s:  # a zero-width statement tree-sitter made up to recover from an error
            continue
        if within is None or within[0] <= s < within[1]:
            out.append(Statement(s, e - 1, n.type, _header_end(st, n), n))
    return out


def block_statements(st: SourceTree, block: Span) -> list[Statement]:
    """The statements directly in the ``{...}`` block spanning ``block`` (comments and
    preprocessor lines count as statements of their own kind), in order."""
    n = st.node_at(block[0])
    while n is not None and not (n.type == "compound_statement" and st.span(n) == block):
        n = n.parent
    if n is None:
        return []
    out = []
    for c in n.named_children:
        if c.type == "comment":
            continue
        s, e = st.span(c)
        if e > s:  # skip zero-width nodes made up by error recovery
            out.append(Statement(s, e - 1, c.type, None, c))
    return out


@dataclass(frozen=True)
class If:
    """An ``if`` statement: its head (``if`` to the condition's ``)``) and condition."""

    head: Span
    condition: Span  # the expression inside the parentheses
    consequence: Span
    braced: bool
    node: Node | None = field(default=None, compare=False, repr=False)


def ifs(st: SourceTree, within: Span | None = None) -> list[If]:
    """The ``if`` statements starting within ``within``, in order."""
    out = []
    for n in st.walk(types=("if_statement",), within=within):
        s = st.start(n)
        cond = n.child_by_field_name("condition")
        then = n.child_by_field_name("consequence")
        if cond is None or then is None or (within is not None and not within[0] <= s < within[1]):
            continue
        inner = cond.child_by_field_name("value") or next(iter(cond.named_children), None)
        if inner is None:
            continue
        out.append(
            If(
                (s, st.end(cond)),
                st.span(inner),
                st.span(then),
                then.type == "compound_statement",
                n,
            )
        )
    return out


def enclosing(st: SourceTree, offset: int, types: Iterable[str]) -> list[Node]:
    """The nodes of ``types`` holding ``offset``, innermost first."""
    want = frozenset(types)
    n = st.node_at(offset)
    out = []
    while n is not None:
        if n.type in want:
            out.append(n)
        n = n.parent
    return out


# ---------------------------------------------------------------------------------------------
# Declarations


@dataclass(frozen=True)
class Declarator:
    name: str
    name_span: Span
    span: Span  # the whole declarator (its initializer included)
    dims: tuple[Span, ...]  # the text inside each ``[...]`` (spaces included), first first
    init: Span | None  # the initializer's expression
    pointer: bool


@dataclass(frozen=True)
class Declaration:
    """A declaration statement: ``[qualifiers] type declarator, ...;``."""

    span: Span  # first character to ``;`` inclusive
    specifiers: tuple[str, ...]  # storage classes and qualifiers as written: extern, __shared__...
    type: str  # the type's text (normalized spaces), qualifiers and pointers excluded
    prefix: str  # everything before the first declarator's name (normalized spaces)
    declarators: tuple[Declarator, ...]
    file_scope: bool
    node: Node | None = field(default=None, compare=False, repr=False)

    def has(self, specifier: str) -> bool:
        return specifier in self.specifiers


def _declarator(st: SourceTree, d: Node) -> Declarator | None:
    init = None
    whole = d
    if d.type == "init_declarator":
        v = d.child_by_field_name("value")
        init = st.span(v) if v is not None else None
        d = d.child_by_field_name("declarator") or d
    dims: list[Span] = []
    pointer = False
    n: Node | None = d
    while n is not None and n.type not in ("identifier", "field_identifier"):
        if n.type == "array_declarator":
            ob = next((c for c in n.children if c.type == "["), None)
            cb = next((c for c in n.children if c.type == "]"), None)
            if ob is None or cb is None:
                return None
            dims.insert(0, (st.end(ob), st.start(cb)))
        elif n.type in ("pointer_declarator", "reference_declarator"):
            pointer = True
        elif n.type not in ("parenthesized_declarator", "attributed_declarator"):
            return None
        n = n.child_by_field_name("declarator") or next(
            (
                c
                for c in n.named_children
                if c.type.endswith("declarator") or c.type == "identifier"
            ),
            None,
        )
    if n is None:
        return None
    return Declarator(st.text_of(n), st.span(n), st.span(whole), tuple(dims), init, pointer)


def _declaration(st: SourceTree, n: Node) -> Declaration | None:
    specs = []
    type_text = ""
    decls = []
    for i, c in enumerate(n.children):
        fname = n.field_name_for_child(i)
        if c.type in ("storage_class_specifier", "type_qualifier", "attribute_specifier"):
            specs.append(st.code_of(c).strip())
        elif c.type in ("__shared__", "__constant__", "__device__", "__managed__"):
            specs.append(c.type)
        elif fname == "type":
            type_text = " ".join(st.code_of(c).split())
        elif fname == "declarator":
            d = _declarator(st, c)
            if d is None:
                return None
            decls.append(d)
    if not decls:
        return None
    s, e = st.span(n)
    prefix = " ".join(st.code[s : decls[0].name_span[0]].split())
    file_scope = not any(a.type == "compound_statement" for a in st.ancestors(n))
    return Declaration((s, e), tuple(specs), type_text, prefix, tuple(decls), file_scope, n)


def declarations(st: SourceTree, within: Span | None = None) -> list[Declaration]:
    """The declaration statements starting within ``within`` (whole file by default): variables
    and arrays with their dimensions and initializers (function prototypes excluded)."""
    out = []
    for n in st.walk(types=("declaration",), within=within):
        if within is not None and not within[0] <= st.start(n) < within[1]:
            continue
        if any(c.type == "function_declarator" for c in n.named_children):
            continue
        if n.parent is not None and n.parent.type in ("for_statement", "condition_clause"):
            continue
        d = _declaration(st, n)
        if d is not None:
            out.append(d)
    return out


# ---------------------------------------------------------------------------------------------
# Expressions: calls, subscripts, identifiers, assignments


@dataclass(frozen=True)
class Call:
    name: str  # the function's text (``__hadd``, ``ns::f``, ``f<T>``)
    span: Span  # the whole call
    args: tuple[Span, ...]
    node: Node | None = field(default=None, compare=False, repr=False)


def calls(
    st: SourceTree, within: Span | None = None, names: Iterable[str] | None = None
) -> list[Call]:
    """Function calls starting within ``within`` (of ``names`` when given), in order."""
    want = set(names) if names is not None else None
    out = []
    for n in st.walk(types=("call_expression",), within=within):
        f = n.child_by_field_name("function")
        if f is None:
            continue
        name = st.code_of(f).strip()
        if want is not None and name not in want:
            continue
        s = st.start(n)
        if within is not None and not within[0] <= s < within[1]:
            continue
        args = n.child_by_field_name("arguments")
        spans = (
            tuple(st.span(a) for a in args.named_children if a.type != "comment") if args else ()
        )
        out.append(Call(name, st.span(n), spans, n))
    return out


def number_literals(st: SourceTree, within: Span | None = None) -> list[tuple[Span, str]]:
    """The number literals starting within ``within``: (span, text), in order."""
    out = []
    for n in st.walk(types=("number_literal",), within=within):
        s = st.start(n)
        if within is None or within[0] <= s < within[1]:
            out.append((st.span(n), st.code_of(n)))
    return sorted(out)


def call_of(st: SourceTree, expr: Span) -> Call | None:
    """The call of a named function that the expression at ``expr`` is, exactly."""
    n = _expression_at(st, expr)
    if n is None or n.type != "call_expression":
        return None
    f = n.child_by_field_name("function")
    if f is None or f.type != "identifier":
        return None
    got = calls(st, st.span(n))
    return got[0] if got and got[0].span == st.span(n) else None


def _expression_at(st: SourceTree, span: Span) -> Node | None:
    """The largest node whose span is ``span`` after trimming whitespace (None: none is)."""
    a, b = span
    while a < b and st.text[a].isspace():
        a += 1
    while b > a and st.text[b - 1].isspace():
        b -= 1
    n = st.node_at(a)
    best = None
    while n is not None:
        s, e = st.span(n)
        if s == a and e == b:
            best = n
        elif s < a or e > b:
            break
        n = n.parent
    return best


@dataclass(frozen=True)
class Subscript:
    """An array access ``name[i]...[k]``."""

    name: str
    span: Span  # ``name`` to the last ``]``
    indices: tuple[Span, ...]  # each index's text (inside its brackets), first first
    node: Node | None = field(default=None, compare=False, repr=False)


def subscripts(
    st: SourceTree, name: str | None = None, within: Span | None = None
) -> list[Subscript]:
    """The outermost subscript chains on an identifier (``name`` when given), in order."""
    out = []
    for n in st.walk(types=("subscript_expression",), within=within):
        p = n.parent
        if (
            p is not None
            and p.type == "subscript_expression"
            and p.child_by_field_name("argument") == n
        ):
            continue  # an inner link of a chain
        chain: list[Span] = []
        cur: Node | None = n
        while cur is not None and cur.type == "subscript_expression":
            idx = cur.child_by_field_name("indices")
            if idx is not None:
                ob, cb = idx.children[0], idx.children[-1]
                chain.insert(0, (st.end(ob), st.start(cb)))
            cur = cur.child_by_field_name("argument")
        if cur is None or cur.type != "identifier":
            continue
        nm = st.text_of(cur)
        if name is not None and nm != name:
            continue
        s = st.start(n)
        if within is not None and not within[0] <= s < within[1]:
            continue
        out.append(Subscript(nm, (st.start(cur), st.end(n)), tuple(chain), n))
    return out


@dataclass(frozen=True)
class Use:
    """An occurrence of an identifier: how many subscripts apply to it (a declarator's
    dimensions count), whether ``&`` takes the address of what they give, whether it is a
    declarator's name."""

    span: Span
    subscripts: int
    address_taken: bool
    declared: bool


def _use(st: SourceTree, n: Node) -> Use:
    count = 0
    cur = n
    declared = False
    while cur.parent is not None:
        p = cur.parent
        if p.type == "subscript_expression" and p.child_by_field_name("argument") == cur:
            count += 1
        elif p.type == "array_declarator" and p.child_by_field_name("declarator") == cur:
            count += 1
            declared = True
        elif p.type in ("init_declarator", "declaration", "pointer_declarator") and (
            p.child_by_field_name("declarator") == cur
        ):
            declared = True
            break
        else:
            break
        cur = p
    outer = cur.parent
    address = (
        outer is not None
        and outer.type == "pointer_expression"
        and (op := outer.child_by_field_name("operator")) is not None
        and op.type == "&"
    )
    return Use(st.span(n), count, bool(address), declared)


def uses(st: SourceTree, name: str, within: Span | None = None) -> list[Use]:
    """The occurrences of the identifier ``name`` (not member names after ``.``/``->``, not
    inside the text of a macro definition: see :func:`macro_uses`), in order. A dotted
    ``name`` (``threadIdx.x``) finds that member expression, spaces ignored."""
    out = []
    member = "." in name or "->" in name
    for n in st.walk(types=("field_expression" if member else "identifier",), within=within):
        if ("".join(st.code_of(n).split()) if member else st.text_of(n)) != name:
            continue
        if within is not None and not within[0] <= st.start(n) < within[1]:
            continue
        out.append(_use(st, n))
    return out


def identifiers(st: SourceTree, within: Span) -> list[tuple[str, Span]]:
    """The identifiers within ``within`` (member names excluded), in order."""
    return [
        (st.text_of(n), st.span(n))
        for n in st.walk(types=("identifier",), within=within)
        if within[0] <= st.start(n) < within[1]
    ]


def substitute(st: SourceTree, span: Span, names: Mapping[str, str]) -> str:
    """The code of ``span`` with every identifier or member expression (``threadIdx.x``) that
    is a key of ``names`` replaced by its value, all at once (a value is not substituted again)."""
    a, b = span
    edits = []
    for name in names:
        for u in uses(st, name, span):
            if a <= u.span[0] and u.span[1] <= b:
                edits.append((u.span[0], u.span[1], names[name]))
    out = st.code[a:b]
    for s, e, new in sorted(edits, reverse=True):
        out = out[: s - a] + new + out[e - a :]
    return out


_MACRO_PREFIX = "void __ga_macro() {\n"


def macro_uses(st: SourceTree, name: str) -> list[Use]:
    """The occurrences of ``name`` in the bodies of the file's ``#define``s, each body parsed as
    code of its own (file offsets)."""
    out = []
    for n in st.walk(types=("preproc_def", "preproc_function_def")):
        v = n.child_by_field_name("value")
        if v is None:
            continue
        a, b = st.span(v)
        body = st.code[a:b].replace("\\\n", "  ")
        if name not in body:
            continue
        sub = SourceTree(_MACRO_PREFIX + body + "\n;}")
        shift = a - len(_MACRO_PREFIX)
        for u in uses(sub, name):
            out.append(
                Use((u.span[0] + shift, u.span[1] + shift), u.subscripts, u.address_taken, False)
            )
    return out


@dataclass(frozen=True)
class Assignment:
    """Something that changes a variable: its declaration's initializer, ``=``, a compound
    assignment or ``++``/``--``."""

    kind: str  # "init", "assign", "compound", "update"
    span: Span  # the whole expression (or declarator)
    value: Span | None  # the assigned expression (init, assign and compound)
    target: str = ""  # the variable
    operator: str = ""  # "=", "+=", "++"...


def assignments(st: SourceTree, name: str | None, within: Span | None = None) -> list[Assignment]:
    """What assigns the variable ``name`` (any plain variable when None) within ``within``, in
    order."""
    out = []
    for n in st.walk(
        types=("assignment_expression", "update_expression", "init_declarator"), within=within
    ):
        s = st.start(n)
        if within is not None and not within[0] <= s < within[1]:
            continue
        if n.type == "update_expression":
            target = n.child_by_field_name("argument")
            op = n.child_by_field_name("operator")
            if target is not None and target.type == "identifier":
                t = st.text_of(target)
                if name is None or t == name:
                    out.append(Assignment("update", st.span(n), None, t, op.type if op else ""))
            continue
        if n.type == "init_declarator":
            d = n.child_by_field_name("declarator")
            v = n.child_by_field_name("value")
            if d is not None and d.type == "identifier":
                t = st.text_of(d)
                if name is None or t == name:
                    val = st.span(v) if v is not None else None
                    out.append(Assignment("init", st.span(n), val, t, "="))
            continue
        left = n.child_by_field_name("left")
        op = n.child_by_field_name("operator")
        if left is None or left.type != "identifier":
            continue
        t = st.text_of(left)
        if name is not None and t != name:
            continue
        right = n.child_by_field_name("right")
        val = st.span(right) if right is not None else None
        kind = "assign" if op is not None and op.type == "=" else "compound"
        out.append(Assignment(kind, st.span(n), val, t, op.type if op is not None else ""))
    return out


_ARITHMETIC = frozenset("+-*/")


def arithmetic_operators(st: SourceTree, span: Span) -> list[tuple[int, str]]:
    """The binary ``+ - * /`` (or ``+= -= *= /=``) operators right after and right before the
    expression at ``span``, of which it is an operand: (offset of the operator, its sign)."""
    n = _expression_at(st, span)
    if n is None:
        return []
    out = []
    cur = n
    while cur.parent is not None:  # the operator after: the expression ends a left operand
        p = cur.parent
        op = p.child_by_field_name("operator")
        if p.child_by_field_name("left") == cur and op is not None:
            if p.type == "binary_expression" and op.type in _ARITHMETIC:
                out.append((st.start(op), op.type))
            elif p.type == "assignment_expression" and op.type in ("+=", "-=", "*=", "/="):
                out.append((st.start(op), op.type[0]))
            break
        if st.end(p) != st.end(cur):
            break
        cur = p
    cur = n
    while cur.parent is not None:  # the operator before: it starts a right operand
        p = cur.parent
        op = p.child_by_field_name("operator")
        if p.type == "binary_expression" and p.child_by_field_name("right") == cur:
            if op is not None and op.type in _ARITHMETIC:
                out.append((st.start(op), op.type))
            break
        if st.start(p) != st.start(cur):
            break
        cur = p
    return out


def called_with(st: SourceTree, span: Span) -> str | None:
    """The name of the function whose first argument is exactly the expression at ``span``."""
    n = _expression_at(st, span)
    if n is None or n.parent is None or n.parent.type != "argument_list":
        return None
    args = [c for c in n.parent.named_children if c.type != "comment"]
    call = n.parent.parent
    if not args or args[0] != n or call is None or call.type != "call_expression":
        return None
    f = call.child_by_field_name("function")
    return st.code_of(f).strip() if f is not None else None


def statement_start(st: SourceTree, offset: int) -> int:
    """The start of the innermost statement (simple or control) holding ``offset``."""
    n = st.node_at(offset)
    while n is not None:
        if n.type.endswith("_statement") or n.type == "declaration":
            return st.start(n)
        n = n.parent
    return offset


@dataclass(frozen=True)
class Expr:
    """An expression as a small tree of plain values (no parser objects): what a rule walks.

    ``kind``: ``binary`` (``op`` the operator, ``args`` the two operands), ``unary`` (``op``),
    ``literal`` (a number), ``name`` (an identifier), ``member`` (``a.b``, ``p->b``), ``call``
    (``op`` the function's text, ``args`` the arguments), ``cast`` (``op`` the type's text),
    ``paren``, ``subscript`` (``args``: the array, then the index), ``conditional`` (``args``:
    condition, then, else), ``assignment`` (``op``: ``=``, ``+=``...; ``args``: target, value),
    ``update`` (``++``/``--``), or ``other``. ``text``: the code, spaces normalized; ``span``:
    where it is in the parsed text.
    """

    kind: str
    op: str
    args: tuple[Expr, ...]
    text: str
    span: Span

    def stripped(self, casts: Iterable[str] = ()) -> Expr:
        """Without the parentheses around it and the casts to the types ``casts``."""
        allowed = set(casts)
        e = self
        while e.args and (e.kind == "paren" or (e.kind == "cast" and e.op in allowed)):
            e = e.args[-1]
        return e

    def chain(self, ops: Iterable[str]) -> list[tuple[str, Expr]]:
        """The operands of a run of binary operators among ``ops`` (``a - b + c``: ``[("", a),
        ("-", b), ("+", c)]``), parentheses not looked through; ``[("", self)]`` otherwise."""
        want = set(ops)
        if self.kind != "binary" or self.op not in want:
            return [("", self)]
        left = self.args[0].chain(want)
        return [*left, (self.op, self.args[1])]


_EXPR_KIND = {
    "binary_expression": "binary",
    "unary_expression": "unary",
    "pointer_expression": "unary",
    "number_literal": "literal",
    "identifier": "name",
    "field_expression": "member",
    "call_expression": "call",
    "cast_expression": "cast",
    "parenthesized_expression": "paren",
    "subscript_expression": "subscript",
    "conditional_expression": "conditional",
    "assignment_expression": "assignment",
    "update_expression": "update",
}


def _expr(st: SourceTree, n: Node, depth: int = 0) -> Expr:
    kind = _EXPR_KIND.get(n.type, "other")
    span = st.span(n)
    text = " ".join(st.code_of(n).split())
    if depth > 200:
        return Expr("other", "", (), text, span)
    op = ""
    kids: list[Node] = []
    if kind in ("binary", "unary", "assignment", "update"):
        o = n.child_by_field_name("operator")
        op = o.type if o is not None else ""
        kids = [c for c in n.named_children if c.type != "comment"]
    elif kind == "call":
        f = n.child_by_field_name("function")
        a = n.child_by_field_name("arguments")
        op = " ".join(st.code_of(f).split()) if f is not None else ""
        kids = [c for c in a.named_children if c.type != "comment"] if a is not None else []
    elif kind == "cast":
        t = n.child_by_field_name("type")
        op = " ".join(w for w in st.code_of(t).split() if w != "const") if t is not None else ""
        v = n.child_by_field_name("value")
        kids = [v] if v is not None else []
    elif kind == "paren":
        kids = [c for c in n.named_children if c.type != "comment"][:1]
    elif kind == "subscript":
        arg = n.child_by_field_name("argument")
        idx = n.child_by_field_name("indices")
        inner = [c for c in idx.named_children if c.type != "comment"] if idx is not None else []
        kids = [k for k in (arg, *inner[:1]) if k is not None]
    elif kind == "conditional":
        kids = [
            c
            for c in (
                n.child_by_field_name("condition"),
                n.child_by_field_name("consequence"),
                n.child_by_field_name("alternative"),
            )
            if c is not None
        ]
    elif kind == "member":
        o = n.child_by_field_name("operator")
        op = o.type if o is not None else "."
        a = n.child_by_field_name("argument")
        kids = [a] if a is not None else []
    return Expr(kind, op, tuple(_expr(st, c, depth + 1) for c in kids), text, span)


def expr_parent(st: SourceTree, span: Span) -> Expr | None:
    """The expression that the one spanning ``span`` is a direct part of (None: none)."""
    n = _expression_at(st, span)
    if n is None or n.parent is None or n.parent.type not in _EXPR_KIND:
        return None
    return _expr(st, n.parent)


def expr_at(st: SourceTree, span: Span) -> Expr | None:
    """The expression spanning ``span`` (spaces around it ignored), or None."""
    n = _expression_at(st, span)
    return _expr(st, n) if n is not None else None


@functools.lru_cache(maxsize=1024)
def parse_expression(text: str) -> Expr | None:
    """``text`` parsed as one C expression on its own (None: it is not one). Spans are offsets
    in ``text``."""
    prefix = "int __ga_expr = ("
    sub = SourceTree(prefix + text + "\n);")
    if sub.root.has_error:
        return None
    for n in sub.walk(types=("init_declarator",)):
        v = n.child_by_field_name("value")
        if v is not None and v.type == "parenthesized_expression" and v.named_child_count == 1:
            e = _expr(sub, v.named_children[0])
            return _shift(e, -len(prefix))
        break
    return None


def _shift(e: Expr, by: int) -> Expr:
    return Expr(
        e.kind, e.op, tuple(_shift(a, by) for a in e.args), e.text, (e.span[0] + by, e.span[1] + by)
    )


def strip_parens(st: SourceTree, node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


def expression(st: SourceTree, span: Span) -> Node | None:
    """The expression node spanning ``span`` exactly (whitespace trimmed), or None."""
    return _expression_at(st, span)


def function_at(
    st: SourceTree, offset: int
) -> tuple[str, Span, Span, tuple[KernelParam, ...]] | None:
    """The innermost function definition whose body holds ``offset``: its name (without
    template arguments or qualification), its whole span, its body's span (``{`` to just after
    ``}``) and its parameters; None outside every function body."""
    n = st.node_at(offset, types=("function_definition",))
    while n is not None:
        body = n.child_by_field_name("body")
        if body is not None and st.start(body) <= offset < st.end(body):
            break
        n = next((a for a in st.ancestors(n) if a.type == "function_definition"), None)
    if n is None or body is None:
        return None
    fd = _function_declarator(n)
    name = _declarator_name(fd) if fd is not None else None
    if name is not None and name.type == "template_function":
        name = name.child_by_field_name("name") or name
    if name is None:
        return None
    return st.code_of(name).strip().split("::")[-1], st.span(n), st.span(body), _params(st, fd)


def is_kernel_definition(st: SourceTree, offset: int) -> bool:
    """Whether the innermost function definition holding ``offset`` is ``__global__``."""
    n = st.node_at(offset, types=("function_definition",))
    return n is not None and _has_global(n)
