"""Kernel names: demangling and the forms a name can be written in.

Names are demangled with ``cu++filt`` or ``c++filt`` (a small built-in fallback handles plain
names when neither exists) and shown without return type and parameters:
``ns::reduce<256, true>``. :func:`norm` makes the spellings of one name equal without knowing
the source: whitespace, integer literals (suffixes, hex, octal), the casts cu++filt writes,
the order of integer type words (``unsigned`` is ``unsigned int``), where ``const`` stands
(``const float*`` is ``float const*``), ``true``/``false`` as 1/0 and parentheses around one
operand (``reduce<(256)>``). What a name means in the user's source (typedefs, enumerators,
macros) is :mod:`gpuadvise.source.kernel_names`'s, and the compiler's (``templates.py``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from gpuadvise.spec.cuda_types import canonical_int
from gpuadvise.toolchain.find import Toolchain

__all__ = [
    "base_name",
    "demangle",
    "display_name",
    "has_template_args",
    "norm",
    "split_qualified",
]


def demangle(names: Sequence[str], toolchain: Toolchain | None = None) -> dict[str, str]:
    """Mangled -> demangled (with parameters) for all ``names``, with one demangler run.

    Uses ``toolchain.demangler`` (cu++filt or c++filt); without one, or if it fails, a small
    built-in demangler handles plain (non-template) names and leaves others mangled.
    """
    out = {n: n for n in names}
    todo = [n for n in names if n.startswith("_Z")]
    if not todo:
        return out
    tool = toolchain.demangler if toolchain else None
    if tool is None and (cxxfilt := shutil.which("c++filt")):
        tool = Path(cxxfilt)
    if tool is not None:
        try:
            proc = subprocess.run(
                [str(tool)],
                input="\n".join(todo) + "\n",
                capture_output=True,
                text=True,
                timeout=60,
            )
            lines = proc.stdout.splitlines()
            if proc.returncode == 0 and len(lines) == len(todo):
                out.update(zip(todo, lines, strict=True))
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    for n in todo:
        out[n] = _fallback_demangle(n)
    return out


def _fallback_demangle(mangled: str) -> str:
    """``_Z7vec_addPf`` -> ``vec_add(...)``; ``_ZN2ns5scaleEPf`` -> ``ns::scale(...)``."""

    def ident(s: str, i: int) -> tuple[str, int] | None:
        m = re.match(r"\d+", s[i:])
        if not m:
            return None
        n = int(m.group())
        start = i + len(m.group())
        return s[start : start + n], start + n

    s = mangled
    if s.startswith("_ZN"):
        i, parts = 3, []
        while i < len(s) and s[i] != "E":
            got = ident(s, i)
            if got is None:
                return mangled
            part, i = got
            parts.append("(anonymous namespace)" if part == "_GLOBAL__N_1" else part)
        return "::".join(parts) + "(...)" if parts and i < len(s) else mangled
    got = ident(s, 2)
    if got is None or (got[1] < len(s) and s[got[1]] == "I"):
        return mangled
    return f"{got[0]}(...)"


def _param_list_start(text: str) -> int | None:
    """Where the parameter list closing ``text`` opens (its ``(``); None when ``text`` does
    not end with one."""
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return i
    return None


def display_name(signature: str) -> str:
    """``void ns::reduce<256, true>(float*)`` -> ``ns::reduce<256, true>``."""
    text = signature.strip()
    start = _param_list_start(text)
    if start:  # "(anonymous namespace)::k" alone (start 0) never ends a signature
        text = text[:start]
    text = text.strip()
    if text.startswith("void "):
        text = text[5:]
    return _uncast(text.strip())


def split_qualified(name: str) -> list[str]:
    """Split ``a::b<x::y>::k`` on the ``::`` outside template arguments and parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(name):
        c = name[i]
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth = max(0, depth - 1)
        elif c == ":" and depth == 0 and name.startswith("::", i):
            parts.append(name[start:i])
            i += 2
            start = i
            continue
        i += 1
    parts.append(name[start:])
    return [p for p in parts if p] or [name]


# cu++filt writes template arguments as casts: ``reduce<(int)256, (bool)1>``.
_CAST_LITERAL = re.compile(
    r"\((?:unsigned |signed )?(?:int|long|short|char|long long|unsigned)\)\s*(-?\d+)"
)
_CAST_BOOL = re.compile(r"\(bool\)\s*([01])")


def _uncast(name: str) -> str:
    name = _CAST_LITERAL.sub(r"\1", name)
    return _CAST_BOOL.sub(lambda m: "true" if m.group(1) == "1" else "false", name)


_TOKEN_RE = re.compile(
    r"\s+|(?P<num>\.?\d(?:[eEpP][+-]|[\w.'])*)|(?P<id>[A-Za-z_]\w*)|(?P<op>::|&&|\S)"
)
_INT_LITERAL_RE = re.compile(r"(0[xX][0-9a-fA-F']+|0[bB][01']+|\d[\d']*)[uUlLzZ]*")
_INT_WORDS = frozenset("unsigned signed short long int char".split())
_CV = ("const", "volatile")
_ELABORATE = frozenset("struct class union enum typename".split())
_SEPARATORS = frozenset("<>,()")
_POINTERS = frozenset(("*", "&", "&&"))


def _number(text: str) -> str:
    """An integer literal in decimal without suffix (``0x100u`` -> ``256``); others as they are."""
    m = _INT_LITERAL_RE.fullmatch(text)
    if m is None:
        return text
    body = m.group(1).replace("'", "")
    low = body.lower()
    if low.startswith(("0x", "0b")):
        return str(int(body[2:], 16 if low[1] == "x" else 2))
    if len(body) > 1 and body[0] == "0" and set(body) <= set("01234567"):
        return str(int(body, 8))
    return str(int(body))


def _declarator(part: list[str]) -> list[str]:
    """One type or value between separators: ``const unsigned *`` -> ``unsigned int const *``
    (cv-qualifiers of the base type after it, integer words in one order)."""
    part = [t for t in part if t not in _ELABORATE]
    part = ["1" if t == "true" else "0" if t == "false" else t for t in part]
    cut = next((i for i, t in enumerate(part) if t in _POINTERS), len(part))
    head, tail = part[:cut], part[cut:]
    base = [t for t in head if t not in _CV]
    if base and all(t in _INT_WORDS for t in base):
        base = (canonical_int(base) or " ".join(base)).split()
    return base + [q for q in _CV if q in head] + tail


def _unparen(tokens: list[str]) -> list[str]:
    """Drop parentheses around one operand in argument position (``<(256)>``, ``<(-1)>``); a
    cast (``(E)1``) or a call keeps them."""
    i = 0
    while i < len(tokens):
        if tokens[i] == "(" and (i == 0 or tokens[i - 1] in ("<", ",", "(")):
            j = i + 2 if i + 1 < len(tokens) and tokens[i + 1] == "-" else i + 1
            after = tokens[j + 2] if j + 2 < len(tokens) else None
            if (
                j + 1 < len(tokens)
                and tokens[j + 1] == ")"
                and (tokens[j][:1].isalnum() or tokens[j][:1] == "_")
                and not (after is not None and (after[:1].isalnum() or after in ("_", "(")))
            ):
                tokens = tokens[:i] + tokens[i + 1 : j + 1] + tokens[j + 2 :]
                i = max(i - 1, 0)
                continue
        i += 1
    return tokens


def norm(name: str) -> str:
    """One spelling for the spellings of a name that mean the same in any source (see the
    module's doc): ``reduce<256u>``, ``reduce<(unsigned int)0x100>`` and ``::reduce< 256 >``
    are ``reduce<256>``; ``k<const unsigned*>`` is ``k<unsigned int const*>``. Applied until
    nothing changes (a cast under parentheses, ``(int)(1)``), so ``norm(norm(x)) == norm(x)``."""
    out = name
    for _ in range(8):
        again = _norm_once(out)
        if again == out:
            break
        out = again
    return out


def _norm_once(name: str) -> str:
    tokens: list[str] = []
    text = re.sub(r"\bfalse\b", "0", re.sub(r"\btrue\b", "1", name))
    for m in _TOKEN_RE.finditer(_uncast(text)):
        if m.group("num"):
            tokens.append(_number(m.group("num")))
        elif m.group("id") or m.group("op"):
            tokens.append(m.group(0))
    out: list[str] = []
    part: list[str] = []
    for t in [*tokens, None]:
        if t is None or t in _SEPARATORS:
            out += _declarator(part)
            part = []
            if t is not None:
                out.append(t)
        else:
            part.append(t)
    kept: list[str] = []
    for t in out:  # the global scope's ``::`` is no part of a name
        if t != "::" or (kept and kept[-1] not in ("<", ",", "(", "::")):
            kept.append(t)
    out = kept
    out = _unparen(out)
    text = ""
    for i, t in enumerate(out):
        word = t[:1].isalnum() or t[:1] == "_"
        if i and word and (out[i - 1][-1:].isalnum() or out[i - 1][-1:] == "_"):
            text += " "
        text += t
    return text


def base_name(component: str) -> str:
    i = component.find("<")
    return component[:i] if i > 0 else component


def has_template_args(name: str) -> bool:
    return "<" in split_qualified(name.strip())[-1]


def split_params(signature: str) -> list[str] | None:
    """The parameter types of a demangled signature (``void k<1>(float*, S<int, 2>)`` ->
    ``["float*", "S<int, 2>"]``); None when the text has no parameter list."""
    text = signature.strip()
    start = _param_list_start(text)
    if start is None:
        return None
    inner = text[start + 1 : -1].strip()
    if inner in ("", "void"):
        return []
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in inner:
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur).strip())
    return parts
