"""Kernel names: demangling and the forms a name can be written in.

Names are demangled with ``cu++filt`` or ``c++filt`` (a small built-in fallback handles plain
names when neither exists) and shown without return type and parameters:
``ns::reduce<256, true>``. :func:`norm` makes the spellings of one name equal (whitespace,
integer suffixes and the casts cu++filt writes do not matter).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

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


def display_name(signature: str) -> str:
    """``void ns::reduce<256, true>(float*)`` -> ``ns::reduce<256, true>``."""
    text = signature.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            c = text[i]
            if c == ")":
                depth += 1
            elif c == "(":
                depth -= 1
                if depth == 0:
                    if i > 0:  # "(anonymous namespace)::k" alone never ends a signature
                        text = text[:i]
                    break
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


_INT_SUFFIX = re.compile(r"(?<![\w.])(\d+)(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)\b")


# cu++filt writes template arguments as casts: ``reduce<(int)256, (bool)1>``.
_CAST_LITERAL = re.compile(
    r"\((?:unsigned |signed )?(?:int|long|short|char|long long|unsigned)\)\s*(-?\d+)"
)
_CAST_BOOL = re.compile(r"\(bool\)\s*([01])")


def _uncast(name: str) -> str:
    name = _CAST_LITERAL.sub(r"\1", name)
    return _CAST_BOOL.sub(lambda m: "true" if m.group(1) == "1" else "false", name)


def norm(name: str) -> str:
    """Whitespace, integer-literal suffixes and casts do not matter: ``reduce<256u>``,
    ``reduce<(unsigned int)256>`` and ``reduce<256>`` are one name."""
    return _INT_SUFFIX.sub(r"\1", re.sub(r"\s+", "", _uncast(name))).removeprefix("::")


def base_name(component: str) -> str:
    i = component.find("<")
    return component[:i] if i > 0 else component


def has_template_args(name: str) -> bool:
    return "<" in split_qualified(name.strip())[-1]
