"""Struct layouts from the CUDA source: the fields of a struct the source defines, laid out with the
x86-64/CUDA rules (``gpuadvise.spec.cuda_types`` sizes), so that a byte offset the trace shows can
be named (``Cell.age``). The rules check the parsed size against the compiler's (``sizeof``
through :func:`gpuadvise.toolchain.struct_layouts`, which sized the buffer): :func:`struct_for`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuadvise.trace.view import BufferInfo

__all__ = ["StructField", "StructLayout", "parse_struct", "struct_for"]


@dataclass(frozen=True)
class StructField:
    """A field as the struct declares it: C type, byte offset, size and alignment of one item,
    ``count`` items (an array ``T name[count]``), ``lanes`` per item (``float4``: 4) and the
    layout of a nested struct."""

    name: str
    ctype: str
    offset: int
    size: int
    align: int
    count: int = 1
    lanes: int = 1
    nested: StructLayout | None = None

    @property
    def total(self) -> int:
        return self.size * self.count

    def declaration(self) -> str:
        return f"{self.ctype} {self.name}" + (f"[{self.count}]" if self.count > 1 else "")


@dataclass(frozen=True)
class StructLayout:
    """A struct as the compiler lays it out: ``size`` and ``align`` in bytes, fields in order."""

    name: str
    size: int
    align: int
    fields: tuple[StructField, ...]

    def field_at(self, offset: int) -> StructField | None:
        for f in self.fields:
            if f.offset <= offset < f.offset + f.total:
                return f
        return None

    def describe(self, offset: int, width: int = 4) -> str:
        """The field a ``width``-byte access at ``offset`` reads: ``age``, ``pos.y``, ``v[2]``,
        ``inner.x``; ``bytes 12..15`` where no field lies there (padding)."""
        f = self.field_at(offset)
        if f is None:
            return f"bytes {offset}..{offset + width - 1}"
        rel = offset - f.offset
        item, within = divmod(rel, f.size)
        name = f.name + (f"[{item}]" if f.count > 1 else "")
        if f.nested is not None:
            return f"{name}.{f.nested.describe(within, width)}"
        if f.lanes > 1:
            lane_bytes = f.size // f.lanes
            lanes = "xyzw"
            first, last = within // lane_bytes, (within + width - 1) // lane_bytes
            if first == last:
                return f"{name}.{lanes[first]}"
            if within == 0 and width >= f.size:
                return name
            return f"{name}.{lanes[first]}..{lanes[min(last, f.lanes - 1)]}"
        if within == 0 and width >= f.size:
            return name
        return f"{name} (bytes {within}..{within + width - 1})"

    def declaration(self) -> str:
        body = "; ".join(f.declaration() for f in self.fields)
        return f"struct {self.name} {{ {body}; }}"


_ALIGN_RE = re.compile(r"(?:__align__|alignas)\s*\(\s*(\w+)\s*\)")
_DEFINE_RE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+\(?[ \t]*(\d+)[ \t]*\)?[ \t]*$", re.M
)
_FIRST_DECL = re.compile(
    r"^(?P<type>[A-Za-z_][\w:\s]*?)\s*(?P<ptr>\*+)?\s*(?P<name>[A-Za-z_]\w*)\s*"
    r"(?P<dims>(?:\[[^\]]+\]\s*)*)$"
)
_NEXT_DECL = re.compile(r"^(?P<ptr>\*+)?\s*(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]+\]\s*)*)$")
_QUALIFIERS = re.compile(r"\b(?:const|volatile|mutable|struct|class|__restrict__)\b")


def _align_up(n: int, a: int) -> int:
    return -(-n // a) * a


def _int_value(text: str, defines: Mapping[str, int]) -> int | None:
    from gpuadvise.errors import UsageError
    from gpuadvise.spec import expr

    try:
        return int(expr.evaluate(text.strip(), defines))
    except (UsageError, ValueError):
        return None


def _struct_body(code: str, name: str) -> tuple[str, int] | None:
    """The body text of ``struct name { ... }`` (or ``typedef struct { ... } name;``) in
    comment-free ``code``, and the alignment its declaration asks for (0: none)."""
    from gpuadvise.source.text import match_brace

    head = re.compile(
        r"\b(?:struct|class)\s+(?P<al>(?:__align__|alignas)\s*\(\s*\w+\s*\)\s*)?"
        + re.escape(name)
        + r"\s*(?::[^{;]*)?\{"
    )
    for m in head.finditer(code):
        close = match_brace(code, m.end() - 1)
        if close < len(code):
            al = _ALIGN_RE.search(m.group("al") or "")
            return code[m.end() : close], int(al.group(1)) if al and al.group(1).isdigit() else 0
    td = re.compile(
        r"\btypedef\s+struct\s*(?P<al>(?:__align__|alignas)\s*\(\s*\w+\s*\)\s*)?\w*\s*\{"
    )
    for m in td.finditer(code):
        close = match_brace(code, m.end() - 1)
        tail = re.match(r"\s*(\w+)\s*;", code[close + 1 :])
        if tail and tail.group(1) == name:
            al = _ALIGN_RE.search(m.group("al") or "")
            return code[m.end() : close], int(al.group(1)) if al and al.group(1).isdigit() else 0
    return None


def _type_layout(
    ctype: str, code: str, defines: Mapping[str, int], depth: int
) -> tuple[int, int, int, StructLayout | None] | None:
    """(size, align, lanes, nested layout) of a field type; None when unknown."""
    from gpuadvise.spec.cuda_types import lookup

    t = " ".join(_QUALIFIERS.sub(" ", ctype).split())
    t = t.removeprefix("std::")
    ct = lookup(t)
    if ct is not None:
        return ct.size_bytes, ct.align_bytes, ct.lanes, None
    if depth < 4 and re.fullmatch(r"[A-Za-z_]\w*", t):
        nested = _parse_struct_code(code, t, defines, depth + 1)
        if nested is not None:
            return nested.size, nested.align, 1, nested
    return None


def _parse_struct_code(
    code: str, name: str, defines: Mapping[str, int], depth: int
) -> StructLayout | None:
    found = _struct_body(code, name)
    if found is None:
        return None
    body, decl_align = found
    if "{" in body:
        return None  # nested definitions or member functions with bodies: not a plain struct
    fields: list[StructField] = []
    offset, max_align = 0, 1
    for raw in body.split(";"):
        stmt = re.sub(r"^\s*(?:(?:public|private|protected)\s*:\s*)+", "", raw).strip()
        if not stmt:
            continue
        if re.match(r"(?:static|using|typedef|friend|template|enum)\b", stmt):
            continue
        if "virtual" in stmt.split():
            return None
        field_align = 0
        m_al = _ALIGN_RE.search(stmt)
        if m_al:
            v = _int_value(m_al.group(1), defines)
            if v is None:
                return None
            field_align = v
            stmt = _ALIGN_RE.sub(" ", stmt).strip()
        if "(" in stmt:
            continue  # a member function's declaration: no storage
        if ":" in stmt.replace("::", ""):
            return None  # bit-fields: left to the compiler
        parts = [p.strip() for p in stmt.split(",")]
        first = _FIRST_DECL.match(parts[0])
        if first is None:
            return None
        ctype = first.group("type").strip()
        decls = [(first.group("ptr"), first.group("name"), first.group("dims"))]
        for p in parts[1:]:
            m = _NEXT_DECL.match(p)
            if m is None:
                return None
            decls.append((m.group("ptr"), m.group("name"), m.group("dims")))
        for ptr, fname, dims in decls:
            if ptr:
                size, align, lanes, nested = 8, 8, 1, None
                shown = ctype + "*" * len(ptr)
            else:
                tl = _type_layout(ctype, code, defines, depth)
                if tl is None:
                    return None
                size, align, lanes, nested = tl
                shown = ctype
            count = 1
            for d in re.findall(r"\[([^\]]+)\]", dims or ""):
                v = _int_value(d, defines)
                if v is None or v <= 0:
                    return None
                count *= v
            align = max(align, field_align)
            offset = _align_up(offset, align)
            fields.append(StructField(fname, shown, offset, size, align, count, lanes, nested))
            offset += size * count
            max_align = max(max_align, align)
    if not fields:
        return None
    align = max(max_align, decl_align)
    return StructLayout(name, _align_up(offset, align), align, tuple(fields))


def parse_struct(text: str, name: str) -> StructLayout | None:
    """The layout of ``struct name`` as defined in the CUDA source ``text``; None when the source
    does not define it plainly (bit-fields, virtual members, unknown field types, nested
    definitions). Array sizes may use ``#define`` constants. Compare ``size`` with the
    compiler's before trusting it."""
    from gpuadvise.source.text import blank_comments_and_strings

    code = blank_comments_and_strings(text)
    defines = {m.group(1): int(m.group(2)) for m in _DEFINE_RE.finditer(text)}
    base = name.split("::")[-1].strip()
    return _parse_struct_code(code, base, defines, 0)


def struct_for(buffer: BufferInfo, text: str) -> StructLayout | None:
    """The layout of a struct buffer's element as the source defines it, when its parsed size is
    the compiler's (``buffer.elem_bytes``); None otherwise."""
    if not buffer.is_struct or not text:
        return None
    layout = parse_struct(text, buffer.type_name)
    return layout if layout is not None and layout.size == buffer.elem_bytes else None
