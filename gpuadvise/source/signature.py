"""Read a kernel's parameter list from CUDA C++ source text, without a compiler.

:func:`parse_signature` finds the ``__global__`` function named by the user and returns its
parameters as :class:`Param` records. It understands what kernels are written with:
comments anywhere, multi-line signatures, ``extern "C"``, ``static``/``inline``,
``__launch_bounds__(...)``/``__maxnreg__(...)``/``__cluster_dims__(...)``/``__attribute__((...))``
between the return type and the name, ``__restrict__``, ``__grid_constant__``, east and west
``const``, default arguments, unnamed parameters in declarations, namespaces (``ns::k``,
``a::b::k``, C++17 ``namespace a::b``, anonymous namespaces), out-of-line ``ns::k`` definitions,
``#if 0`` blocks (skipped) and object-like ``#define`` macros (expanded, so
``#define RESTRICT __restrict__`` works).

Templates: ``reduce<256, true>`` selects an explicit specialization written with those arguments
if there is one, else the primary template ``reduce``, whose template parameters are
substituted into the parameter types (``T*`` with ``T=float`` is a ``float*``); missing
arguments take the template's defaults. Naming a template without arguments works when no
parameter type uses a template parameter lacking a default.

Limits (documented, not guessed around): other preprocessor conditionals (``#ifdef``) are not
evaluated, so when a name is defined more than once (overloads, ``#ifdef`` branches) the first
definition wins; function-like macros are not expanded; declarators with parentheses
(pointers to arrays or functions) are not understood; a declaration's unnamed parameters are
called ``arg0``, ``arg1`` ... by position.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from gpuadvise.errors import KernelNotFoundError, UsageError

__all__ = [
    "KernelDecl",
    "Param",
    "find_kernels",
    "list_kernels",
    "parse_signature",
    "with_compiled_types",
]


@dataclass(frozen=True)
class Param:
    """One kernel parameter.

    ``type_text`` is the declared type without the name (template parameters substituted),
    e.g. ``const float* __restrict__``. For a pointer (or an array parameter ``float a[]``),
    ``pointee`` is the pointed-to type without cv-qualifiers (``float``, ``Cell``, ``float*`` for
    ``float**``) and ``is_const`` says whether the pointee is const (``const float*``, and not
    ``float* const``). For a scalar, ``pointee`` is None, ``is_const`` says whether the value is
    declared const and :attr:`value_type` is its type without qualifiers.
    """

    name: str
    type_text: str
    is_pointer: bool
    is_const: bool
    pointee: str | None
    is_restrict: bool = False
    index: int = 0
    line: int = 0
    default: str | None = None  # a default argument's text, as written

    @property
    def value_type(self) -> str:
        """The type of a scalar parameter without qualifiers (``unsigned int``)."""
        return _render(
            [t for t in _tokenize_text(self.type_text) if t.text not in _QUALIFIERS]
        ).strip()


@dataclass(frozen=True)
class TemplateParam:
    kind: str  # "type" or "value"
    name: str
    default: str | None


@dataclass(frozen=True)
class KernelDecl:
    """A ``__global__`` function found in the source."""

    name: str  # qualified, without template arguments: "ns::k"
    line: int
    is_definition: bool
    template_params: tuple[TemplateParam, ...] | None  # None: not a template
    specialization_args: tuple[str, ...] | None  # explicit specialization k<float>
    param_text: str
    _param_tokens: tuple[_Tok, ...] = field(repr=False, compare=False, default=())

    @property
    def base_name(self) -> str:
        return self.name.rsplit("::", 1)[-1]


# ---------------------------------------------------------------------------------------------
# Tokens.


@dataclass(frozen=True)
class _Tok:
    kind: str  # "id", "num", "str", "punct"
    text: str
    line: int


_TOKEN_RE = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+|\\\n)
  | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>\.?\d(?:[eEpP][+-]|[A-Za-z0-9_.'])*)
  | (?P<punct>::|\.\.\.|->|&&|\|\||\[\[|\]\]|[^\sA-Za-z0-9_])
    """,
    re.VERBOSE,
)

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__"}
_ELABORATE = {"struct", "class", "union", "enum", "typename"}
_ATTR_CALLS = {
    "__launch_bounds__",
    "__maxnreg__",
    "__cluster_dims__",
    "__attribute__",
    "__declspec",
    "alignas",
    "__align__",
}
_SPECIFIERS = {
    "static",
    "inline",
    "__inline__",
    "__forceinline__",
    "extern",
    "__host__",
    "__device__",
    "__noinline__",
    "constexpr",
}
_BUILTIN_TYPE_WORDS = {
    "void",
    "bool",
    "char",
    "short",
    "int",
    "long",
    "signed",
    "unsigned",
    "float",
    "double",
    "auto",
}


def _strip_comments(text: str) -> str:
    """Comments become spaces (newlines kept, so line numbers stay right); strings survive."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            # a line comment ending in a backslash continues; rare enough to ignore
            out.append(" ")
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(text[i:j])
            i = j
        else:
            j = i
            while j < n and text[j] not in "/\"'":
                j += 1
            if j == i:
                j = i + 1
            out.append(text[i:j])
            i = j
    return "".join(out)


def _tokenize_text(text: str, first_line: int = 1) -> list[_Tok]:
    tokens: list[_Tok] = []
    line = first_line
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "nl":
            line += 1
        elif kind == "ws":
            line += m.group().count("\n")
        else:
            tokens.append(_Tok(kind or "punct", m.group(), line))
    return tokens


def _preprocess(text: str) -> list[_Tok]:
    """Tokens of ``text`` with comments, directives and ``#if 0`` blocks gone, macros expanded."""
    text = _strip_comments(text)
    lines = text.split("\n")
    macros: dict[str, list[_Tok]] = {}
    kept: list[_Tok] = []
    skip_depth = 0  # > 0 inside an #if 0 block
    i = 0
    while i < len(lines):
        start = i
        line = lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i]
        i += 1
        stripped = line.strip()
        if stripped.startswith("#"):
            directive = stripped[1:].strip()
            word = re.match(r"[a-z]*", directive).group()  # type: ignore[union-attr]
            if word in ("if", "ifdef", "ifndef"):
                if skip_depth or re.fullmatch(r"if\s+0\s*", directive):
                    skip_depth += 1
            elif word == "endif":
                skip_depth = max(0, skip_depth - 1)
            elif word in ("else", "elif") and skip_depth == 1:
                skip_depth = 0 if word == "else" else 1
            elif word == "define" and not skip_depth:
                m = re.match(r"define\s+([A-Za-z_][A-Za-z0-9_]*)(?!\()\s*(.*)$", directive)
                if m:
                    macros[m.group(1)] = _tokenize_text(m.group(2), start + 1)
            elif word == "undef" and not skip_depth:
                macros.pop(directive[5:].strip(), None)
            continue
        if skip_depth:
            continue
        for tok in _tokenize_text(line, start + 1):
            kept.extend(_expand(tok, macros, set()))
    return kept


def _expand(tok: _Tok, macros: dict[str, list[_Tok]], active: set[str]) -> Iterator[_Tok]:
    if tok.kind != "id" or tok.text not in macros or tok.text in active or len(active) > 16:
        yield tok
        return
    for sub in macros[tok.text]:
        yield from _expand(_Tok(sub.kind, sub.text, tok.line), macros, active | {tok.text})


def _render(tokens: list[_Tok] | tuple[_Tok, ...]) -> str:
    """Tokens back to tidy text: ``const float* __restrict__``, ``Vec<float, 3>``."""
    out = ""
    prev = ""
    for tok in tokens:
        t = tok.text
        if not out:
            out = t
        elif t in ("*", "&", "&&") and prev not in (",", "("):
            out += t
        elif t in (",",):
            out += t
        elif t in (">", ")", "]", "::") or prev in ("<", "(", "[", "::"):
            out += t
        elif t in ("<", "(", "[") and (prev[:1].isalnum() or prev[:1] == "_"):
            out += t
        else:
            out += " " + t
        prev = t
    return out


def _normalize_args_text(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _match(tokens: list[_Tok] | tuple[_Tok, ...], i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``tokens[i]`` (counting only this pair)."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j].text
        if t == open_:
            depth += 1
        elif t == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _match_angle(tokens: list[_Tok] | tuple[_Tok, ...], i: int) -> int:
    """Index of the ``>`` closing the ``<`` at ``tokens[i]``; ignores ``<``/``>`` inside parens."""
    depth = 0
    paren = 0
    for j in range(i, len(tokens)):
        t = tokens[j].text
        if t in ("(", "["):
            paren += 1
        elif t in (")", "]"):
            paren -= 1
        elif paren == 0 and t == "<":
            depth += 1
        elif paren == 0 and t == ">":
            depth -= 1
            if depth == 0:
                return j
        elif paren == 0 and t in (";", "{", "}"):
            return -1
    return -1


def _split_top(tokens: list[_Tok] | tuple[_Tok, ...], sep: str = ",") -> list[list[_Tok]]:
    """Split at top-level ``sep`` (outside (), [], {} and template <>)."""
    parts: list[list[_Tok]] = [[]]
    depth = 0
    angle = 0
    for k, tok in enumerate(tokens):
        t = tok.text
        if t in ("(", "[", "{"):
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
        elif t == "<" and depth == 0 and k > 0 and tokens[k - 1].kind == "id":
            angle += 1
        elif t == ">" and depth == 0 and angle > 0:
            angle -= 1
        if t == sep and depth == 0 and angle == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


# ---------------------------------------------------------------------------------------------
# Finding kernels.


def _parse_template_params(tokens: list[_Tok]) -> tuple[TemplateParam, ...]:
    params: list[TemplateParam] = []
    for part in _split_top(tokens):
        if not part:
            continue
        default: str | None = None
        eq = next((k for k, t in enumerate(part) if t.text == "="), None)
        if eq is not None:
            default = _render(part[eq + 1 :])
            part = part[:eq]
        kind = "type" if part[0].text in ("typename", "class") else "value"
        ids = [t.text for t in part if t.kind == "id" and t.text not in ("typename", "class")]
        if kind == "type":
            name = ids[0] if ids else ""
        else:
            name = ids[-1] if len(ids) >= 2 else ""
        params.append(TemplateParam(kind, name, default))
    return tuple(params)


def find_kernels(source_text: str) -> list[KernelDecl]:
    """Every ``__global__`` function in ``source_text``, in order."""
    return list(_kernels_in(source_text))


@functools.lru_cache(maxsize=8)
def _kernels_in(source_text: str) -> tuple[KernelDecl, ...]:
    """:func:`find_kernels`, of the last few texts kept: an analysis asks about the same source
    (and its variants') about ten times (the spec, the launch, the buffers, the report), and the
    declarations are frozen."""
    tokens = _preprocess(source_text)
    decls: list[KernelDecl] = []
    frames: list[str | None] = []  # namespace name per open brace; None for other braces
    decl_start = 0
    i = 0
    n = len(tokens)
    while i < n:
        t = tokens[i].text
        if t == "namespace":
            j = i + 1
            parts: list[str] = []
            while j < n and (tokens[j].kind == "id" or tokens[j].text == "::"):
                if tokens[j].kind == "id" and tokens[j].text != "inline":
                    parts.append(tokens[j].text)
                j += 1
            if j < n and tokens[j].text == "{":
                frames.append("::".join(parts) if parts else "")
                i = j + 1
                decl_start = i
                continue
            i = j
            continue
        if t == "{":
            frames.append(None)
            decl_start = i + 1
        elif t == "}":
            if frames:
                frames.pop()
            decl_start = i + 1
        elif t == ";":
            decl_start = i + 1
        elif t == "__global__":
            decl, end = _parse_kernel(tokens, decl_start, i, frames)
            if decl is not None:
                decls.append(decl)
                i = end
                continue
        i += 1
    return tuple(decls)


def _parse_kernel(
    tokens: list[_Tok], decl_start: int, at: int, frames: list[str | None]
) -> tuple[KernelDecl | None, int]:
    n = len(tokens)
    head = tokens[decl_start:at]
    template_params: tuple[TemplateParam, ...] | None = None
    explicit_instantiation = False
    for k, tok in enumerate(head):
        if tok.text == "template":
            if k + 1 < len(head) and head[k + 1].text == "<":
                close = _match_angle(head, k + 1)
                if close > 0:
                    template_params = _parse_template_params(head[k + 2 : close])
            else:
                explicit_instantiation = True
    # Walk from __global__ to the name: the identifier (or qualified id) followed by ( or <...>(.
    j = at + 1
    name_parts: list[str] = []
    spec_args: tuple[str, ...] | None = None
    while j < n:
        tok = tokens[j]
        if tok.text in (";", "{", "}"):
            return None, j
        if tok.text in _ATTR_CALLS and j + 1 < n and tokens[j + 1].text == "(":
            j = _match(tokens, j + 1, "(", ")") + 1
            if j <= 0:
                return None, n
            continue
        if tok.text == "[[":
            j = _match(tokens, j, "[[", "]]") + 1
            if j <= 0:
                return None, n
            continue
        if tok.kind == "id":
            k = j
            parts = [tok.text]
            while k + 2 < n and tokens[k + 1].text == "::" and tokens[k + 2].kind == "id":
                parts.append(tokens[k + 2].text)
                k += 2
            nxt = tokens[k + 1] if k + 1 < n else None
            if nxt is not None and nxt.text == "<" and parts[-1] not in _BUILTIN_TYPE_WORDS:
                close = _match_angle(tokens, k + 1)
                if close > 0 and close + 1 < n and tokens[close + 1].text == "(":
                    args = _split_top(tokens[k + 2 : close])
                    spec_args = tuple(_render(a) for a in args if a)
                    name_parts = parts
                    j = close + 1
                    break
                if close > 0:
                    j = close + 1
                    continue
            if nxt is not None and nxt.text == "(":
                name_parts = parts
                j = k + 1
                break
            j = k + 1
            continue
        j += 1
    else:
        return None, n
    if explicit_instantiation and template_params is None:
        # "template __global__ void k<float>(float*);" instantiates; it declares nothing new.
        close = _match(tokens, j, "(", ")")
        return None, (close + 1 if close > 0 else n)
    close = _match(tokens, j, "(", ")")
    if close < 0:
        return None, n
    param_tokens = tuple(tokens[j + 1 : close])
    # After the parameter list: a body, or a semicolon (trailing attributes skipped).
    k = close + 1
    is_definition = False
    while k < n:
        if tokens[k].text == "{":
            is_definition = True
            break
        if tokens[k].text == ";":
            break
        k += 1
    namespaces = [f for f in frames if f]
    qualified = "::".join([*namespaces, *name_parts])
    decl = KernelDecl(
        name=qualified,
        line=tokens[at].line,
        is_definition=is_definition,
        template_params=template_params,
        specialization_args=spec_args,
        param_text=_render(param_tokens),
        _param_tokens=param_tokens,
    )
    # Resume at the body's "{" (or the ";") so brace tracking stays right.
    return decl, k if k < n else n


def list_kernels(source_text: str) -> tuple[str, ...]:
    """The qualified names of the kernels in the source, each once, in order."""
    seen: dict[str, None] = {}
    for d in find_kernels(source_text):
        label = d.name
        if d.specialization_args is not None:
            label += "<" + ", ".join(d.specialization_args) + ">"
        seen.setdefault(label, None)
    return tuple(seen)


# ---------------------------------------------------------------------------------------------
# Selecting the kernel and reading its parameters.


def _split_kernel_name(kernel: str) -> tuple[list[str], tuple[str, ...] | None, bool]:
    """``::ns::reduce<256, true>`` -> (["ns", "reduce"], ("256", "true"), anchored=True)."""
    tokens = _tokenize_text(kernel)
    anchored = bool(tokens) and tokens[0].text == "::"
    if anchored:
        tokens = tokens[1:]
    args: tuple[str, ...] | None = None
    lt = next((k for k, t in enumerate(tokens) if t.text == "<"), None)
    if lt is not None:
        close = _match_angle(tokens, lt)
        if close != len(tokens) - 1:
            raise UsageError(
                f"kernel name {kernel!r} has unbalanced template brackets",
                "write it as name<args>, e.g. reduce<256, true>",
            )
        args = tuple(_render(a) for a in _split_top(tokens[lt + 1 : close]) if a)
        tokens = tokens[:lt]
    parts = [t.text for t in tokens if t.text != "::"]
    ok = parts and all(t.kind == "id" for t in tokens if t.text != "::")
    if not ok:
        raise UsageError(
            f"{kernel!r} is not a kernel name",
            "give the function name, e.g. saxpy, ns::saxpy or reduce<256, true>",
        )
    return parts, args, anchored


def _name_matches(decl: KernelDecl, parts: list[str], anchored: bool) -> bool:
    have = decl.name.split("::")
    if anchored:
        return have == parts
    return have[-len(parts) :] == parts


def _not_found(kernel: str, source_text: str, why: str) -> KernelNotFoundError:
    found = list_kernels(source_text)
    listing = ", ".join(found) if found else "none"
    return KernelNotFoundError(
        f"kernel {kernel!r} {why} (kernels in the source: {listing})",
        "pass one of those names with --kernel, or check the spelling",
    )


def select_kernel(source_text: str, kernel: str) -> tuple[KernelDecl, dict[str, str]]:
    """The declaration for ``kernel`` and its template bindings (parameter name -> argument)."""
    parts, args, anchored = _split_kernel_name(kernel)
    decls = [d for d in find_kernels(source_text) if _name_matches(d, parts, anchored)]
    if not decls:
        raise _not_found(kernel, source_text, "is not defined as __global__ in the source")
    names = sorted({d.name for d in decls})
    if len(names) > 1:
        raise UsageError(
            f"kernel name {kernel!r} is ambiguous: it matches {', '.join(names)}",
            "qualify it with its namespace, e.g. " + names[0],
        )

    def best(cands: list[KernelDecl]) -> KernelDecl:
        defs = [d for d in cands if d.is_definition]
        return (defs or cands)[0]

    if args is not None:
        wanted = tuple(_normalize_args_text(a) for a in args)
        specs = [
            d
            for d in decls
            if d.specialization_args is not None
            and tuple(_normalize_args_text(a) for a in d.specialization_args) == wanted
        ]
        if not specs:  # the same arguments in another spelling (a typedef, an enumerator ...)
            meaning = _meaning(source_text, names[0], args)
            specs = [
                d
                for d in decls
                if d.specialization_args is not None
                and meaning is not None
                and _meaning(source_text, names[0], d.specialization_args) == meaning
            ]
        if specs:
            return best(specs), {}
        primaries = [d for d in decls if d.template_params and d.specialization_args is None]
        if not primaries:
            raise UsageError(
                f"kernel {kernel!r} has template arguments but {names[0]} is not a template",
                f"name it without them: --kernel {names[0]}",
            )
        decl = best(primaries)
        return decl, _bind_template(kernel, decl, _resolved_types(source_text, decl, args))
    plain = [d for d in decls if d.specialization_args is None]
    if not plain:
        raise _not_found(kernel, source_text, "exists only as explicit specializations")
    decl = best(plain)
    return decl, _bind_template(kernel, decl, ())


def _meaning(source_text: str, name: str, args: Sequence[str]) -> str | None:
    """``name<args>`` as the compiler writes it, normalised (None: not resolvable from the
    source; :mod:`gpuadvise.source.kernel_names`)."""
    from gpuadvise.source.kernel_names import compiler_spelling, source_names
    from gpuadvise.toolchain.names import norm

    spelled = compiler_spelling(source_names((source_text,)), f"{name}<{', '.join(args)}>")
    return norm(spelled) if spelled is not None else None


def _resolved_types(source_text: str, decl: KernelDecl, args: tuple[str, ...]) -> tuple[str, ...]:
    """``args`` with each type argument as the compiler names it when the source says
    (``real_t`` -> ``float``, ``Pair`` -> ``ga::Pair``): parameter types are then the types the
    compiler sees. Value arguments stay as written (the constants evaluator reads them)."""
    from gpuadvise.source.kernel_names import compiler_spelling, source_names, split_template_name

    params = decl.template_params or ()
    if not any(p.kind == "type" for p in params[: len(args)]):
        return args
    spelled = compiler_spelling(source_names((source_text,)), f"{decl.name}<{', '.join(args)}>")
    split = split_template_name(spelled) if spelled is not None else None
    if split is None or len(split[1]) < len(args):
        return args
    return tuple(
        split[1][i] if i < len(params) and params[i].kind == "type" else a
        for i, a in enumerate(args)
    )


def _bind_template(kernel: str, decl: KernelDecl, args: tuple[str, ...]) -> dict[str, str]:
    params = decl.template_params or ()
    if len(args) > len(params):
        raise UsageError(
            f"kernel {kernel!r} gives {len(args)} template arguments but {decl.name} takes "
            f"{len(params)}",
            "give at most as many template arguments as the template declares",
        )
    bound: dict[str, str] = {}
    for k, tp in enumerate(params):
        if not tp.name:
            continue
        if k < len(args):
            bound[tp.name] = args[k]
        elif tp.default is not None:
            bound[tp.name] = _substitute_text(tp.default, bound)
    return bound


def _substitute(tokens: list[_Tok], bound: dict[str, str]) -> list[_Tok]:
    out: list[_Tok] = []
    for k, tok in enumerate(tokens):
        qualified = k > 0 and tokens[k - 1].text in ("::", ".", "->")
        if tok.kind == "id" and tok.text in bound and not qualified:
            out.extend(_Tok(s.kind, s.text, tok.line) for s in _tokenize_text(bound[tok.text]))
        else:
            out.append(tok)
    return out


def _substitute_text(text: str, bound: dict[str, str]) -> str:
    return _render(_substitute(_tokenize_text(text), bound))


def _parse_param(
    tokens: list[_Tok], index: int, bound: dict[str, str], unbound: set[str], kernel: str
) -> Param | None:
    line = tokens[0].line if tokens else 0
    default: str | None = None
    head = _split_top(tokens, "=")[0]
    if len(head) < len(tokens):  # a default argument: keep its text, drop it from the type
        default = _render(_substitute(tokens[len(head) + 1 :], bound)) or None
        tokens = head
    # Drop attributes and their arguments.
    cleaned: list[_Tok] = []
    k = 0
    while k < len(tokens):
        t = tokens[k].text
        if t in _ATTR_CALLS and k + 1 < len(tokens) and tokens[k + 1].text == "(":
            close = _match(tokens, k + 1, "(", ")")
            k = close + 1 if close >= 0 else len(tokens)
            continue
        if t == "[[":
            close = _match(tokens, k, "[[", "]]")
            k = close + 1 if close >= 0 else len(tokens)
            continue
        cleaned.append(tokens[k])
        k += 1
    tokens = cleaned
    if not tokens or (len(tokens) == 1 and tokens[0].text == "void"):
        return None
    if tokens[-1].text == "...":
        raise UsageError(
            f"kernel {kernel!r} is variadic",
            "gpuadvise needs a fixed parameter list; name an instantiation of it instead",
        )
    # Array declarators (float a[], float a[4]) are pointers.
    is_array = False
    while tokens and tokens[-1].text == "]":
        open_ = max(k for k, t in enumerate(tokens) if t.text == "[")
        tokens = tokens[:open_]
        is_array = True
    # The name: a trailing identifier preceded by a type, not itself a type word.
    units = [t for t in tokens if t.text not in _QUALIFIERS]
    name = ""
    if (
        len(units) >= 2
        and tokens[-1].kind == "id"
        and tokens[-1].text not in _BUILTIN_TYPE_WORDS
        and tokens[-1].text not in _QUALIFIERS
        and tokens[-2].text not in ("::", "<", ",")
        and tokens[-2].text not in _ELABORATE
    ):
        name = tokens[-1].text
        tokens = tokens[:-1]
    if not name:
        name = f"arg{index}"
    used = {t.text for t in tokens if t.kind == "id"} & unbound
    if used:
        raise UsageError(
            f"parameter {name!r} of kernel {kernel!r} has type {_render(tokens)!r}, which needs "
            f"the template argument {sorted(used)[0]!r}",
            f"name an instantiation, e.g. --kernel '{kernel}<float>'",
        )
    tokens = _substitute(tokens, bound)
    type_text = _render(tokens) + ("*" if is_array else "")
    is_restrict = any(t.text in ("__restrict__", "__restrict", "restrict") for t in tokens)
    # The last top-level '*' separates the pointee from the pointer's own qualifiers.
    depth = 0
    last_star = -1
    for k, tok in enumerate(tokens):
        if tok.text in ("<", "("):
            depth += 1
        elif tok.text in (">", ")"):
            depth -= 1
        elif tok.text in ("*", "&") and depth == 0:
            last_star = k
    if tokens and tokens[-1].text in ("&", "&&"):
        raise UsageError(
            f"parameter {name!r} of kernel {kernel!r} is a reference ({type_text})",
            "kernels take values and pointers; pass a pointer instead",
        )
    if last_star >= 0 or is_array:
        pointee_toks = tokens[:last_star] if last_star >= 0 else tokens
        inner_star = max((k for k, t in enumerate(pointee_toks) if t.text == "*"), default=-1)
        is_const = any(t.text == "const" for t in pointee_toks[inner_star + 1 :])
        pointee = _render(
            [t for t in pointee_toks if t.text not in _QUALIFIERS and t.text not in _ELABORATE]
        )
        return Param(name, type_text, True, is_const, pointee, is_restrict, index, line, default)
    is_const = any(t.text == "const" for t in tokens)
    return Param(name, type_text, False, is_const, None, False, index, line, default)


def parse_signature(source_text: str, kernel: str) -> tuple[Param, ...]:
    """The parameters of ``kernel`` (plain, ``ns::k`` or ``k<args>``) in ``source_text``.

    Raises :class:`~gpuadvise.errors.KernelNotFoundError` (a UsageError) naming the kernels
    that are there when ``kernel`` is not.
    """
    decl, bound = select_kernel(source_text, kernel)
    unbound = {tp.name for tp in decl.template_params or () if tp.name and tp.name not in bound}
    params: list[Param] = []
    for part in _split_top(decl._param_tokens):
        p = _parse_param(part, len(params), bound, unbound, kernel)
        if p is not None:
            params.append(p)
    seen: set[str] = set()
    for p in params:
        if p.name in seen:
            raise UsageError(
                f"kernel {kernel!r} has two parameters called {p.name!r}",
                "give every parameter a distinct name",
            )
        seen.add(p.name)
    return tuple(params)


_ENUM_RE = r"\benum\s+(?:class\s+|struct\s+)?{name}\s*(?::\s*(?P<base>[\w\s:]+?))?\s*\{{"


def with_compiled_types(
    params: Sequence[Param],
    compiled: Sequence[str],
    known: Callable[[str], bool],
    code: str = "",
) -> list[Param]:
    """``params`` with each by-value parameter whose type ``known`` refuses (a macro, a
    typedef, an enum) given the type the compiler names for it: ``compiled``, the parameter
    types of the kernel's demangled signature (typedefs and macros are gone there:
    ``gemm_kernel(int, float, float*)``; :func:`gpuadvise.toolchain.names.split_params`); an enum the
    compiler names is its underlying type as ``code`` (the source) declares it, else ``int``.
    A parameter neither resolves keeps its type (a struct by value: given by its bytes)."""
    if len(compiled) != len(params):
        return list(params)
    out = []
    for p, c in zip(params, compiled, strict=True):
        if p.is_pointer or known(p.value_type):
            out.append(p)
            continue
        ctype = " ".join(w for w in c.split() if w not in ("const", "volatile"))
        if not known(ctype):
            name = re.escape(ctype.split("::")[-1].strip())
            m = re.search(_ENUM_RE.format(name=name), code) if name else None
            if m is None:
                out.append(p)
                continue
            ctype = (m["base"] or "int").strip()
            if not known(ctype):
                out.append(p)
                continue
        out.append(replace(p, type_text=ctype))
    return out
