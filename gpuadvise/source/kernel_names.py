"""What the template arguments of a kernel name mean in the user's source, without a compiler.

Users name a template instance the way their code spells it: ``k_get_rows_float<half, float>``
(cuda_fp16.h's typedef) for the instance the compiler calls ``k_get_rows_float<__half, float>``,
``quantize<MMQ_Q8_1_DS_LAYOUT_DS4>`` for ``quantize<(mmq_q8_1_ds_layout)1>``, ``reduce<BLOCK>``
for ``reduce<256>``, ``reduce<256>`` for ``reduce<256, true>`` (a default argument).

Why this module and a compiler probe both: the compiler is the authority on what a spelling
means, and ``gpuadvise.toolchain.templates`` asks it (one probe compile that reads the symbol
nvcc gives each spelling). But a probe compiles the whole file again (minutes for some public
kernels), while the spellings people write are a few kinds this module resolves from the parsed
source at no cost: typedefs and ``using`` aliases of the user's files, the typedefs of the C and
CUDA headers (:data:`gpuadvise.spec.cuda_types.HEADER_TYPEDEFS`), enumerators of scoped and
unscoped enums, integer constants (``#define``, ``const``/``constexpr``, expressions over them),
object-like macros naming types, struct names without their namespace, and the template's
default arguments. It never guesses: what it cannot evaluate (``sizeof``, a ``constexpr``
function, a member typedef, a template alias, a variadic template) leaves the name unresolved
(None) and the caller asks the compiler; a spelling it resolves but no instance matches is
checked by the compiler too before it is reported missing.

- :func:`source_names` reads what the files declare (cached per text);
- :func:`compiler_spelling` writes a name as the compiler would (``k<__half, float>``), to be
  compared with :func:`gpuadvise.toolchain.names.norm`;
- :func:`user_spelling` writes an instance the compiler named as the user's source spells it
  (``k<half, float>``): the listings of error messages show those.

Lookups are lenient where C++ would not be: ``Mode::A`` finds ``ns::Mode::A`` when the name is
unique (a name at the global scope wins, as in C++), since a command line has no enclosing
namespace.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from tree_sitter import Node

from gpuadvise.source.constants import constants, defines, try_evaluate
from gpuadvise.source.tree import (
    SourceTree,
    TemplateParameter,
    kernels,
    parse,
    template_parameters,
)
from gpuadvise.spec.cuda_types import HEADER_TYPEDEFS, canonical_int

__all__ = [
    "Enumerator",
    "SourceNames",
    "compiler_spelling",
    "source_names",
    "split_template_name",
    "user_spelling",
]

_MAX_DEPTH = 16  # typedefs of typedefs, macros of macros
_TOKEN_RE = re.compile(
    r"\s+|(?P<name>(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)"
    r"|(?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)|(?P<op>\S)"
)
_INT_WORDS = frozenset("unsigned signed short long int char".split())
_TYPE_WORDS = _INT_WORDS | frozenset(
    "void bool float double auto const volatile struct class union enum typename".split()
)
_CV = frozenset(("const", "volatile"))
_SCOPES = {
    "namespace_definition": "name",
    "class_specifier": "name",
    "struct_specifier": "name",
    "union_specifier": "name",
}
_RECORDS = ("class_specifier", "struct_specifier", "union_specifier", "enum_specifier")

T = TypeVar("T")


@dataclass(frozen=True)
class Enumerator:
    """An enumerator: ``enum`` the enum's qualified name ('' for an anonymous enum), ``name``
    its qualified spelling (``ns::Mode::A`` when scoped, ``ns::A`` when not), its value."""

    enum: str
    name: str
    value: int


@dataclass(frozen=True, eq=False)
class SourceNames:
    """What the user's files declare that a kernel name may use, keyed by qualified name (one
    object per text: it hashes by identity)."""

    types: Mapping[str, str]  # typedef, using alias or object-like macro -> the type's text
    records: frozenset[str]  # structs, classes, unions and enums
    enums: frozenset[str]
    enumerators: Mapping[str, Enumerator]  # every qualified spelling -> the enumerator
    values: Mapping[str, int]  # integer constants and enumerators, for constant expressions
    macros: Mapping[str, str]  # object-like macro -> body
    templates: Mapping[str, tuple[tuple[TemplateParameter, ...], ...]]  # kernel -> its templates
    classes: Mapping[str, tuple[TemplateParameter, ...]]  # class template -> its parameters
    written: tuple[str, ...]  # template-ids of kernels in the code: ``k<half, float>``
    code: str  # the files' text, comments and strings blanked (to count how a type is written)


def _lookup(table: Mapping[str, T], name: str) -> T | None:
    """``table[name]``; else the one entry whose qualified key ends with ``::name``."""
    key = re.sub(r"\s+", "", name).removeprefix("::")
    if key in table:
        return table[key]
    found = {k: v for k, v in table.items() if k.endswith("::" + key)}
    values = list(dict.fromkeys(found.values()))
    return values[0] if len(values) == 1 else None


def _scope(st: SourceTree, node: Node) -> list[str]:
    parts: list[str] = []
    for anc in st.ancestors(node):
        field = _SCOPES.get(anc.type)
        if field is None:
            continue
        nm = anc.child_by_field_name(field)
        if nm is not None:
            parts.insert(0, re.sub(r"\s+", "", st.code_of(nm)))
    return parts


def _qualified(scope: Sequence[str], name: str) -> str:
    return "::".join([*scope, name])


def _typedef(st: SourceTree, node: Node, declarator: Node) -> tuple[str, str] | None:
    """(name, the type it names) of one declarator of a ``typedef``: the type's text plus the
    declarator's pointers (``typedef unsigned int u32, *pu32;``); None for other declarators
    (arrays, functions) and for ``typedef struct {...} S`` (S is the struct's own name)."""
    typ = node.child_by_field_name("type")
    if typ is None or "{" in st.code_of(typ):
        return None
    quals = [st.code_of(c) for c in node.children if c.type == "type_qualifier"]
    text = " ".join([*quals, st.code_of(typ)])
    d: Node | None = declarator
    while d is not None and d.type in ("pointer_declarator", "reference_declarator"):
        cv = [st.code_of(c) for c in d.children if c.type == "type_qualifier"]
        text += (
            " " + ("*" if d.type == "pointer_declarator" else "&") + "".join(" " + q for q in cv)
        )
        d = d.child_by_field_name("declarator") or next(
            (c for c in d.named_children if c.type.endswith(("declarator", "identifier"))), None
        )
    if d is None or d.type != "type_identifier":
        return None
    return st.code_of(d).strip(), " ".join(text.split())


def _enumerators(
    st: SourceTree, node: Node, env: dict[str, int], out: dict[str, Enumerator]
) -> str | None:
    """The enum's qualified name ('' if anonymous); its enumerators into ``out`` and ``env``."""
    scope = _scope(st, node)
    nm = node.child_by_field_name("name")
    enum = _qualified(scope, re.sub(r"\s+", "", st.code_of(nm))) if nm is not None else ""
    scoped = any(c.type in ("class", "struct") for c in node.children)
    body = node.child_by_field_name("body")
    if body is None:
        return enum or None
    value: int | None = -1
    local = env if not scoped else dict(env)  # a scoped enum's enumerators are not visible outside
    for e in body.named_children:
        if e.type != "enumerator":
            continue
        en = e.child_by_field_name("name")
        ev = e.child_by_field_name("value")
        if en is None:
            continue
        if ev is not None:
            value = try_evaluate(st.code_of(ev), local)
        elif value is not None:
            value += 1
        if value is None:  # not a constant gpuadvise evaluates: nor are the ones after it
            continue
        short = st.code_of(en).strip()
        spellings = [_qualified([*scope, enum.rsplit("::", 1)[-1]], short)] if enum else []
        if not scoped:
            spellings.insert(0, _qualified(scope, short))
        if not spellings:
            continue
        item = Enumerator(enum, spellings[0], value)
        for s in spellings:
            out.setdefault(s, item)
            env.setdefault(s, value)
        local.setdefault(short, value)  # later enumerators of the enum use it bare
    return enum or None


@functools.lru_cache(maxsize=8)
def source_names(texts: tuple[str, ...]) -> SourceNames:
    """What ``texts`` (the file and the user's headers it includes) declare."""
    st = parse("\n".join(texts))  # the tree constants() reads too
    env = dict(constants(st))
    macros = {name: body for _, name, body in defines(st)}
    types: dict[str, str] = {}
    records: set[str] = set()
    enums: set[str] = set()
    enumerators: dict[str, Enumerator] = {}
    classes: dict[str, tuple[TemplateParameter, ...]] = {}
    for node in st.walk(types=("type_definition", "alias_declaration", *_RECORDS)):
        if node.type == "type_definition":
            scope = _scope(st, node)
            for i, c in enumerate(node.children):
                got = (
                    _typedef(st, node, c) if node.field_name_for_child(i) == "declarator" else None
                )
                if got is not None:
                    types.setdefault(_qualified(scope, got[0]), got[1])
        elif node.type == "alias_declaration":
            if node.parent is not None and node.parent.type == "template_declaration":
                continue  # a template alias: not resolved here
            nm = node.child_by_field_name("name")
            typ = node.child_by_field_name("type")
            if nm is not None and typ is not None:
                key = _qualified(_scope(st, node), st.code_of(nm).strip())
                types.setdefault(key, " ".join(st.code_of(typ).split()))
        elif node.type == "enum_specifier":
            enum = _enumerators(st, node, env, enumerators)
            if enum:
                records.add(enum)
                enums.add(enum)
        else:
            nm = node.child_by_field_name("name")
            if nm is None or node.child_by_field_name("body") is None:
                continue
            record = _qualified(_scope(st, node), re.sub(r"\s+", "", st.code_of(nm)))
            records.add(record)
            parent = node.parent
            tl = parent.child_by_field_name("parameters") if parent is not None else None
            if parent is not None and parent.type == "template_declaration" and tl is not None:
                classes.setdefault(record, template_parameters(st, tl))
    for macro, body in macros.items():
        if try_evaluate(body, env) is None and macro not in types:
            types[macro] = body
    templates: dict[str, list[tuple[TemplateParameter, ...]]] = {}
    for k in kernels(st):
        if k.template_params is not None and k.specialization_args is None:
            found = templates.setdefault(k.name, [])
            if k.template_params not in found:
                found.append(k.template_params)
    bases = {name.rsplit("::", 1)[-1] for name in templates}
    written = []
    for node in st.walk(types=("template_function",)):
        nm = node.child_by_field_name("name")
        if nm is not None and st.code_of(nm).strip() in bases:
            written.append(" ".join(st.code_of(node).split()))
    return SourceNames(
        types=types,
        records=frozenset(records),
        enums=frozenset(enums),
        enumerators=enumerators,
        values=env,
        macros=macros,
        templates={k: tuple(v) for k, v in templates.items()},
        classes=classes,
        written=tuple(dict.fromkeys(written)),
        code=st.code,
    )


# ---------------------------------------------------------------------------------------------
# The compiler's spelling


def split_template_name(name: str) -> tuple[str, list[str]] | None:
    """``ns::reduce<256, (a > b)>`` -> (``ns::reduce``, [``256``, ``(a > b)``]); None when the
    last component has no template arguments. Inside parentheses ``<`` and ``>`` compare."""
    text = name.strip()
    stack: list[str] = []
    start = -1
    for i, c in enumerate(text):
        inside = bool(stack) and stack[-1] != "<"
        if c in "([{":
            stack.append(c)
        elif c in ")]}":
            if not stack or stack[-1] == "<":
                return None
            stack.pop()
        elif c == "<" and not inside:
            if not stack:
                start = i
            stack.append(c)
        elif c == ">" and not inside:
            if not stack:
                return None
            stack.pop()
            if not stack and i == len(text) - 1:
                inner = text[start + 1 : i]
                args = [inner[a:b].strip() for a, b in _split_args(inner)]
                return text[:start].strip(), [a for a in args if a]
    return None


def _split_args(text: str) -> list[tuple[int, int]]:
    """Spans of the template arguments in ``text``, split at the commas outside brackets
    (angle brackets outside parentheses)."""
    out: list[tuple[int, int]] = []
    stack: list[str] = []
    begin = 0
    for i, c in enumerate(text):
        inside = bool(stack) and stack[-1] != "<"
        if c in "([{" or (c == "<" and not inside):
            stack.append(c)
        elif (c in ")]}" or (c == ">" and not inside)) and stack:
            stack.pop()
        elif c == "," and not stack:
            out.append((begin, i))
            begin = i + 1
    out.append((begin, len(text)))
    return out


def _params_of(names: SourceNames, head: str) -> tuple[TemplateParameter, ...] | None:
    """The template parameters of kernel ``head`` (``ns::k`` or ``k``), defaults merged from its
    declarations; None when not one template of the source, or several whose parameters differ."""
    found = _lookup(names.templates, head)
    if found is None or len({tuple((p.kind, p.type, p.pack) for p in ps) for ps in found}) != 1:
        return None
    return tuple(
        replace(p, default=next((ps[i].default for ps in found if ps[i].default), None))
        for i, p in enumerate(found[0])
    )


def _substitute(text: str, bound: Mapping[str, str]) -> str:
    """``text`` with the template parameters ``bound`` replaced by their arguments."""

    def one(m: re.Match[str]) -> str:
        return bound.get(m.group(1), m.group(0))

    return re.sub(r"(?<![\w:.>])\b([A-Za-z_]\w*)\b(?!\s*::)", one, text)


def _tokens(text: str) -> list[str]:
    return [
        re.sub(r"\s+", "", m.group(0)) if m.group("name") else m.group(0)
        for m in _TOKEN_RE.finditer(text)
        if not m.group(0).isspace()
    ]


def _value(names: SourceNames, text: str, depth: int = 0) -> int | None:
    v = try_evaluate(text, names.values)
    if v is None and depth < _MAX_DEPTH and (body := names.macros.get(text.strip())):
        return _value(names, body, depth + 1)
    return v


def _enumerator(names: SourceNames, text: str, depth: int = 0) -> Enumerator | None:
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and split_template_name(text) is None:
        text = text[1:-1].strip()
    if not re.fullmatch(r"(?:::)?\s*[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*", text):
        return None
    found = _lookup(names.enumerators, text)
    if found is None and depth < _MAX_DEPTH and (body := names.macros.get(text)):
        return _enumerator(names, body, depth + 1)
    return found


def _argument(
    names: SourceNames, text: str, param: TemplateParameter | None, depth: int = 0
) -> str | None:
    """One template argument as the compiler writes it (None: not resolvable here). Without
    ``param`` (a class template's argument) an argument is a value if it evaluates, else a type."""
    if param is not None and param.kind == "type":
        return _type(names, text, depth)
    declared = _type(names, param.type, depth) if param is not None and param.type else ""
    words = set((declared or "").split()) - _CV
    e = _enumerator(names, text)
    if declared in names.enums:
        v = e.value if e is not None else _value(names, text)
        return None if v is None else f"({declared}){v}"
    if words and words <= _INT_WORDS | {"bool"}:
        v = e.value if e is not None else _value(names, text)
        if v is None:
            return None
        return str(int(bool(v))) if words == {"bool"} else str(v)
    if e is not None and e.enum:  # auto, a dependent type: the enumerator's own type
        return f"({e.enum}){e.value}"
    v = _value(names, text)
    if v is not None:
        return str(v)
    if param is not None:  # a value parameter whose argument is no constant evaluated here
        return None
    return _type(names, text, depth)


def _type(names: SourceNames, text: str, depth: int = 0) -> str | None:
    """A type as the compiler writes it: aliases, header typedefs and macros replaced, structs
    qualified, template arguments resolved (None: not resolvable here)."""
    if depth > _MAX_DEPTH:
        return None
    toks = _tokens(text)
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if not (t[:1].isalpha() or t[:1] in "_:") or t in _TYPE_WORDS:
            out.append(t)
            i += 1
            continue
        name = t.removeprefix("::")
        if nxt == "<":  # a class template's id: its arguments resolved one by one
            close, level = i + 1, 0
            for close in range(i + 1, len(toks)):
                level += {"<": 1, ">": -1}.get(toks[close], 0)
                if level == 0:
                    break
            inner = " ".join(toks[i + 2 : close])
            args = [inner[a:b].strip() for a, b in _split_args(inner)] if inner else []
            record = _lookup({r: r for r in names.records}, name) or name
            instance = _instance(names, record, args, names.classes.get(record), depth + 1)
            if instance is None:
                return None
            out.append(instance)
            i = close + 1
            continue
        std = name.removeprefix("std::")
        target = _lookup(names.types, name)
        if target is None and std in HEADER_TYPEDEFS:
            target = HEADER_TYPEDEFS[std]
        if target is not None:
            resolved = _type(names, target, depth + 1)
            if resolved is None:
                return None
            near = {toks[j] for j in (i - 1, i + 1) if 0 <= j < len(toks)}
            if ("*" in resolved or "&" in resolved) and near & _CV:
                return None  # const on a pointer typedef: not a textual substitution
            out.append(resolved)
        else:
            out.append(_lookup({r: r for r in names.records}, name) or name)
        i += 1
    return _int_words(" ".join(out))


def _int_words(text: str) -> str:
    """``unsigned`` -> ``unsigned int`` and the like, wherever integer type words run."""

    def one(m: re.Match[str]) -> str:
        words = m.group(0).split()
        return canonical_int(words) or m.group(0)

    alts = "|".join(sorted(_INT_WORDS))
    return re.sub(rf"\b(?:{alts})(?:\s+(?:{alts}))*\b", one, text)


def compiler_spelling(names: SourceNames, name: str) -> str | None:
    """``name`` with its template arguments written as the compiler writes them (omitted
    default arguments added); None when some argument cannot be resolved from the source."""
    split = split_template_name(name)
    if split is None:
        return None
    head, args = split
    return _instance(names, head, args, _params_of(names, head))


def _instance(
    names: SourceNames,
    head: str,
    args: Sequence[str],
    params: tuple[TemplateParameter, ...] | None,
    depth: int = 0,
) -> str | None:
    """``head<args>`` as the compiler writes it, given the template's ``params`` (None: not
    known; then an argument is a value if it evaluates, else a type)."""
    if params is not None and (any(p.pack for p in params) or len(args) > len(params)):
        return None
    out: list[str] = []
    bound: dict[str, str] = {}
    for i in range(max(len(args), len(params or ()))):
        p = params[i] if params is not None else None
        if i < len(args):
            text = args[i]
        elif p is not None and p.default is not None:
            text = _substitute(p.default, bound)
        else:
            return None
        if p is not None and p.name:
            bound[p.name] = text if p.kind == "type" else f"({text})"
        resolved = _argument(names, text, p, depth)
        if resolved is None:
            return None
        out.append(resolved)
    return f"{head}<{', '.join(out)}>"


# ---------------------------------------------------------------------------------------------
# The user's spelling


def _count(code: str, phrase: str) -> int:
    words = r"\s+".join(re.escape(w) for w in phrase.split())
    return len(re.findall(rf"(?<![\w:]){words}(?!\w)", code))


@functools.lru_cache(maxsize=8)
def _preferred(names: SourceNames) -> dict[str, str]:
    """Type as the compiler writes it -> the alias the code writes more often than it."""
    best: dict[str, tuple[int, str]] = {}
    candidates = list(names.types) + [t for t in HEADER_TYPEDEFS if t not in names.types]
    for alias in candidates:
        target = _type(names, alias)
        if target is None or not re.fullmatch(r"[\w: ]+", target) or target == alias:
            continue
        uses = _count(names.code, alias.rsplit("::", 1)[-1])
        if uses > max(_count(names.code, target), best.get(target, (0, ""))[0]):
            best[target] = (uses, alias)
    return {target: alias for target, (_, alias) in best.items()}


def user_spelling(
    names: SourceNames, compiled: str, same: Callable[[str, str], bool] | None = None
) -> str:
    """The instance the compiler calls ``compiled`` as the user's code writes it: a template-id
    of the code that means it (``k<half, float>``), else the compiler's name with enumerators and
    the typedefs the code prefers put back; ``compiled`` itself when neither resolves back to
    it. ``same(a, b)``: whether two compiler spellings are one name (a normaliser)."""
    split = split_template_name(compiled)
    if split is None:
        return compiled
    head, args = split
    same = same or (lambda a, b: " ".join(a.split()) == " ".join(b.split()))
    prefix = head.rsplit("::", 1)[0] + "::" if "::" in head else ""
    base = head.rsplit("::", 1)[-1]
    for w in names.written:
        if w.split("<", 1)[0].strip().rsplit("::", 1)[-1] != base:
            continue
        candidate = prefix + w.split("<", 1)[0].strip().rsplit("::", 1)[-1] + w[w.index("<") :]
        resolved = compiler_spelling(names, candidate)
        if resolved is not None and same(resolved, compiled):
            return candidate
    preferred = _preferred(names)
    out = []
    for a in args:
        m = re.fullmatch(r"\((?P<enum>[\w:]+)\)\s*(?P<value>-?\d+)", a)
        if m is not None:
            e = next(
                (
                    e
                    for e in names.enumerators.values()
                    if e.enum == m["enum"] and e.value == int(m["value"])
                ),
                None,
            )
            out.append(e.name if e is not None else a)
            continue
        for target in sorted(preferred, key=len, reverse=True):
            a = re.sub(rf"(?<![\w:]){re.escape(target)}(?![\w:])", preferred[target], a)
        out.append(a)
    candidate = f"{head}<{', '.join(out)}>"
    resolved = compiler_spelling(names, candidate)
    return candidate if resolved is not None and same(resolved, compiled) else compiled
