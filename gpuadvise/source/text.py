"""The analysed kernel's place in its source: :class:`KernelSource` (text, comment-free code,
body offsets, the parsed tree, the template arguments and constants of the instantiation) and
:func:`find_kernel_source`, and :func:`kernel_file`: the file a kernel is defined in (the source
or a header it includes). The plain-text helpers live in :mod:`gpuadvise.source.lexical`
(re-exported here), the parser in :mod:`gpuadvise.source.tree`."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuadvise.errors import GpuAdviseError
from gpuadvise.source import tree as _tree
from gpuadvise.source.constants import constants, try_evaluate
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.lexical import (
    blank_comments_and_strings,
    line_of,
    match_brace,
    match_close,
    split_top,
)
from gpuadvise.source.tree import (
    Assignment,
    Call,
    Declaration,
    Expr,
    If,
    Kernel,
    Loop,
    SourceTree,
    Statement,
    Subscript,
    Use,
    find_kernel,
    parse,
)

__all__ = [
    "KernelSource",
    "blank_comments_and_strings",
    "find_kernel_source",
    "is_binary_data",
    "kernel_file",
    "line_of",
    "match_brace",
    "match_close",
    "split_top",
]


@dataclass(frozen=True)
class KernelSource:
    """Where the analysed kernel lies in its source: declaration line, body offsets and lines,
    and the parsed file."""

    path: str
    text: str
    code: str  # comments and strings blanked
    decl_line: int
    body_start: int  # offset of the body's "{"
    body_end: int  # offset of the matching "}"
    tree: SourceTree = field(compare=False, repr=False)
    kernel: Kernel | None = field(default=None, compare=False, repr=False)
    bindings: Mapping[str, str] = field(default_factory=dict, compare=False)  # template args

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def body(self) -> str:
        """The body's code (comments blanked), from ``{`` to ``}`` inclusive."""
        return self.code[self.body_start : self.body_end + 1]

    @property
    def span(self) -> tuple[int, int]:
        """The body's offsets, ``{`` to just after ``}``."""
        return self.body_start, self.body_end + 1

    @property
    def body_lines(self) -> tuple[int, int]:
        return line_of(self.text, self.body_start), line_of(self.text, self.body_end)

    def line(self, offset_in_body: int) -> int:
        return self.tree.line(self.body_start + offset_in_body)

    def line_at(self, offset: int) -> int:
        """The 1-based line of a file offset."""
        return self.tree.line(offset)

    @functools.cached_property
    def constants(self) -> dict[str, int]:
        """The file's integer constants (``#define``, ``const``) and, shadowing them, the
        template arguments of the instantiation analysed (``reduce<128>``: ``B = 128``)."""
        return constants(self.tree, self.bindings)

    def value(self, expr: str, **env: int) -> int | None:
        """The integer value of ``expr`` over :attr:`constants` and ``env`` (None: not a
        constant). Keys of ``env`` may not hold dots: pass ``blockDim.x`` as
        ``value(e, **{"blockDim.x": 256})``."""
        return try_evaluate(expr, {**self.constants, **env} if env else self.constants)

    # the parsed source, by default within the kernel's body (file offsets throughout) --------

    def _scope(self, file: bool) -> tuple[int, int]:
        return (0, len(self.text)) if file else self.span

    def kernels(self) -> list[Kernel]:
        """Every ``__global__`` function of the file."""
        return _tree.kernels(self.tree)

    def loops(self) -> list[Loop]:
        """The loops of the body, in order."""
        return _tree.loops(self.tree, self.span)

    def declarations(
        self, file: bool = False, within: tuple[int, int] | None = None
    ) -> list[Declaration]:
        """The declarations of the body (of the whole file with ``file``, or ``within``)."""
        return _tree.declarations(self.tree, within or self._scope(file))

    def statement_at(self, offset: int) -> Statement | None:
        """The simple statement of the body holding ``offset`` (see tree.statement_at)."""
        return _tree.statement_at(self.tree, offset, self.span)

    def statements(self, within: tuple[int, int] | None = None) -> list[Statement]:
        """The simple statements of the body (or of ``within``), in order."""
        return _tree.statements(self.tree, within or self.span)

    def ifs(self, within: tuple[int, int] | None = None) -> list[If]:
        """The ``if`` statements of the body (or of ``within``), in order."""
        return _tree.ifs(self.tree, within or self.span)

    def subscripts(
        self, name: str | None = None, file: bool = False, within: tuple[int, int] | None = None
    ) -> list[Subscript]:
        """The subscript chains (``a[i][j]``) on ``name`` (any identifier when None) in the
        body, the file or ``within``."""
        return _tree.subscripts(self.tree, name, within or self._scope(file))

    def uses(
        self, name: str, file: bool = False, within: tuple[int, int] | None = None
    ) -> list[Use]:
        """The occurrences of identifier ``name`` (member names excluded; a dotted name such as
        ``threadIdx.x`` finds that member expression) in the body, the file or ``within``."""
        return _tree.uses(self.tree, name, within or self._scope(file))

    def identifiers(self, within: tuple[int, int]) -> list[tuple[str, tuple[int, int]]]:
        """(name, span) of the identifiers within ``within`` (member names excluded)."""
        return _tree.identifiers(self.tree, within)

    def substitute(self, span: tuple[int, int], names: Mapping[str, str]) -> str:
        """The code of ``span`` with the identifiers (or ``threadIdx.x``-like members) that are
        keys of ``names`` replaced, all at once."""
        return _tree.substitute(self.tree, span, names)

    def macro_uses(self, name: str) -> list[Use]:
        """The occurrences of ``name`` in the bodies of the file's macros."""
        return _tree.macro_uses(self.tree, name)

    def assignments(
        self, name: str | None, within: tuple[int, int] | None = None
    ) -> list[Assignment]:
        """What assigns variable ``name`` (any variable when None) in the body or ``within``."""
        return _tree.assignments(self.tree, name, within or self.span)

    def expr(self, span: tuple[int, int]) -> Expr | None:
        """The expression spanning ``span`` as a plain :class:`~gpuadvise.source.tree.Expr`."""
        return _tree.expr_at(self.tree, span)

    def expr_parent(self, span: tuple[int, int]) -> Expr | None:
        """The expression that the one spanning ``span`` is a direct operand of (None: none)."""
        return _tree.expr_parent(self.tree, span)

    def statement_start(self, offset: int) -> int:
        """The start of the innermost statement (simple or control) holding ``offset``."""
        return _tree.statement_start(self.tree, offset)

    def arithmetic_operators(self, span: tuple[int, int]) -> list[tuple[int, str]]:
        """The binary ``+ - * /`` operators (``+=``... too) right after and right before the
        expression at ``span`` that it is an operand of: (offset, sign)."""
        return _tree.arithmetic_operators(self.tree, span)

    def call_of(self, span: tuple[int, int]) -> Call | None:
        """The call ``f(...)`` that the expression at ``span`` is exactly (None: it is not)."""
        return _tree.call_of(self.tree, span)

    def called_with(self, span: tuple[int, int]) -> str | None:
        """The function whose first argument is exactly the expression at ``span``."""
        return _tree.called_with(self.tree, span)

    def aliases(self, value: str) -> set[str]:
        """Variables of the body declared or assigned as exactly ``value`` (``tid`` for
        ``unsigned tid = threadIdx.x;``), spaces ignored."""
        want = "".join(value.split())
        out = set()
        for n in self.tree.walk(
            types=("init_declarator", "assignment_expression"), within=self.span
        ):
            if n.type == "init_declarator":
                target, v = n.child_by_field_name("declarator"), n.child_by_field_name("value")
            else:
                op = n.child_by_field_name("operator")
                if op is None or op.type != "=":
                    continue
                target, v = n.child_by_field_name("left"), n.child_by_field_name("right")
            if target is None or v is None or target.type != "identifier":
                continue
            if "".join(self.tree.code_of(v).split()) == want:
                out.add(self.tree.text_of(target))
        return out

    def calls(
        self, names: Iterable[str] | None = None, within: tuple[int, int] | None = None
    ) -> list[Call]:
        """The calls (of ``names`` when given) in the body or ``within``, in order."""
        return _tree.calls(self.tree, within or self.span, names)

    def number_literals(
        self, within: tuple[int, int] | None = None
    ) -> list[tuple[tuple[int, int], str]]:
        """The number literals in the body or ``within``: (file offsets, text), in order."""
        return _tree.number_literals(self.tree, within or self.span)

    def top_level(self, within: tuple[int, int] | None = None) -> list[Statement]:
        """The statements directly in the body (or in the block spanning ``within``)."""
        return _tree.block_statements(self.tree, within or self.span)

    def macros(self) -> list[tuple[int, int]]:
        """Spans of the bodies of the file's ``#define``s (the text the tree does not parse)."""
        out = []
        for n in self.tree.walk(types=("preproc_def", "preproc_function_def")):
            v = n.child_by_field_name("value")
            if v is not None:
                out.append(self.tree.span(v))
        return out

    def rewrite(self) -> Rewrite:
        """An empty rewrite of the file's text."""
        return Rewrite(self.text)


def is_binary_data(data: bytes) -> bool:
    """Whether ``data`` is a binary file (a cubin, a fat binary: NUL bytes), not text."""
    return b"\0" in data[:65536]


def _no_cxx(path: str | os.PathLike[str], data: bytes) -> bool:
    """No CUDA C++ to read in ``path``: a binary, or PTX (``analyze`` of a module: its kernel
    has no source text, and reading megabytes of a library's module as C++ took minutes)."""
    return is_binary_data(data) or Path(path).suffix.lower() == ".ptx"


def find_kernel_source(path: str | os.PathLike[str], kernel: str) -> KernelSource | None:
    """The declaration and body of ``kernel`` (``k``, ``ns::k``, ``k<args>``) in the file at
    ``path`` (None: not defined there)."""
    from gpuadvise.source.signature import select_kernel

    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if _no_cxx(path, data):
        return None
    text = data.decode("utf-8", errors="replace")
    try:
        decl, bound = select_kernel(text, kernel)
    except GpuAdviseError:
        return None
    if not decl.is_definition:
        return None
    st = parse(text)
    k = find_kernel(st, decl.name, decl.line)
    if k is None or k.body is None:
        return None
    return KernelSource(
        str(path), text, st.code, decl.line, k.body[0], k.body[1], st, k, dict(bound)
    )


_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*", re.MULTILINE)
_NAME_RE = re.compile(r'([<"])([^">\n]+)[">]')
_MAX_INCLUDED_FILES = 256


def _defines_kernel(text: str, kernel: str) -> bool:
    from gpuadvise.source.signature import select_kernel

    try:
        decl, _ = select_kernel(text, kernel)
    except GpuAdviseError:
        return False
    return bool(decl.is_definition)


def kernel_file(
    path: str | os.PathLike[str], kernel: str, include_dirs: Iterable[str | os.PathLike[str]] = ()
) -> Path:
    """The file that defines ``kernel``: ``path`` itself when it does, else the first header
    ``path`` includes, directly or through other headers, that does (breadth first; ``#include
    "x"`` looked up beside the including file, then in ``include_dirs``; ``#include <x>`` in
    ``include_dirs`` only, so the toolkit's and the system's headers are never read). ``path`` when
    none does (a kernel made by a macro, say: the callers report it as before)."""
    start = Path(path)
    dirs = [Path(d) for d in include_dirs]
    queue = [start]
    seen: set[str] = set()
    while queue and len(seen) < _MAX_INCLUDED_FILES:
        file = queue.pop(0)
        key = os.path.normpath(os.path.abspath(file))
        if key in seen:
            continue
        seen.add(key)
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if _no_cxx(file, data):
            continue
        text = data.decode("utf-8", errors="replace")
        if kernel.split("<")[0].split("::")[-1].strip() in text and _defines_kernel(text, kernel):
            return file
        for directive in _INCLUDE_RE.finditer(blank_comments_and_strings(text)):
            m = _NAME_RE.match(text, directive.end())  # the name, blanked in the code
            if m is None:
                continue
            roots = ([file.parent] if m.group(1) == '"' else []) + dirs
            for root in roots:
                candidate = root / m.group(2).strip()
                if candidate.is_file():
                    queue.append(candidate)
                    break
    return start
