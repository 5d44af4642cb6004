"""Layout proxies for the layout rules (GA301, GA302, GA305).

A data-layout change (an array of structures turned into a structure of arrays, narrow fields
packed into one word, neighbours staged in a shared tile) reaches beyond the kernel: the host code
allocates the data. gpuadvise cannot apply it to the user's kernel, so it measures a *proxy*: two
kernels it synthesizes from the trace of one source line, ``before`` (the line's loads as the
kernel does them) and ``after`` (the same loads in the new layout), with the same grid, block,
element count and element offsets, from the line's :class:`~gpuadvise.trace.view.Pattern`.
Text in, text out (the proxy is CUDA source plus two launch specs, :class:`~gpuadvise.rules.findings.Proxy`).

Verification across layouts works with an ``iota`` fill (each 32-bit word holds its index): each
kernel turns every word it loads back into the *logical* index (element x words per element +
field word) of the old layout, with one multiply-add, and folds the logical indices into one word
per thread in the same order, ``acc = acc * 0x9E3779B1 + logical``. The two kernels' outputs are
equal exactly when they read the same fields of the same elements in the same order, and no load
can be dropped. The proxies keep the line's loads and their conditions; they leave out the
kernel's own arithmetic (one fold per field stands for it in both kernels).

Stores and read-modify-writes (GA301's ``p[i].x += p[i].vx * dt``): after a visit's loads, each
stored field is written in the kernel's own layout with a value made from the fold so far (the
same in both layouts, so the stored words hold the same values wherever each layout puts them),
and the logical index of every word stored is folded in after it. The written buffer is not an
output of the launch spec (``output = false``: its two layouts cannot be compared word for word);
``out`` is, and carries the stores. A read-modify-write loads the words it stores, so their
address is verified by the load's iota value; a store alone is checked in the tests by
comparing the two buffers field by field on the CPU emulator.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuadvise.rules.findings import Proxy
from gpuadvise.rules.structs import StructLayout
from gpuadvise.trace.view import BufferInfo, FieldLoad, Pattern

__all__ = [
    "FOLD",
    "PackedField",
    "Packing",
    "packed_proxy",
    "plan_packing",
    "proxy_where",
    "merge_stores",
    "soa_description",
    "soa_proxy",
    "source_text",
    "tile_pitch",
    "tile_proxy",
]

SHARED_BUDGET_BYTES = 48 * 1024
FOLD = 0x9E3779B1
PICK_MUL = 0x85EBCA6B
PICK_BITS = 10  # a share is reproduced to 1/1024
STORE_SALT = 16  # pick()'s salt of stored field j: STORE_SALT + j (loads use 1, 2, ...)


def _align_up(n: int, a: int) -> int:
    return -(-n // a) * a


def soa_description(
    buffer: str,
    info: BufferInfo,
    layout: StructLayout | None,
    read: Sequence[str],
    written: Sequence[str] = (),
    lines: Sequence[int] = (),
) -> str:
    """GA301's fix in words: the struct, and the arrays that replace it (``read``, ``written``:
    the fields the line loads and stores; ``lines``: the lines, when one finding stands for
    several)."""
    several = len(lines) > 1
    if several:
        who, reads, writes, it = f"lines {', '.join(map(str, lines))}", "read", "write", "they"
    else:
        who, reads, writes, it = "this line", "reads", "writes", "it"
    if read:
        fields = ", ".join(read) + (f" and {writes} " + ", ".join(written) if written else "")
    elif written:
        fields = f"no field; {it} {writes} " + ", ".join(written)
    else:
        fields = "no field"
    fields = f"{who} {reads} {fields}"
    if layout is None:
        return (
            f"structure of arrays for `{buffer}` ({info.elem_bytes}-byte {info.type_name} "
            f"elements): one array per field, so that `{buffer}[i].f` becomes `{buffer}.f[i]` and "
            f"a warp's accesses of a field are consecutive words ({fields})"
        )
    arrays = "; ".join(
        f"{f.ctype}* {f.name}" + (f"[{f.count}]" if f.count > 1 else "") for f in layout.fields
    )
    return (
        f"structure of arrays for `{buffer}`: instead of {info.count} structs "
        f"`{layout.declaration()};` ({layout.size} bytes each), one array of {info.count} per "
        f"field, `struct {layout.name}s {{ {arrays}; }};`, read as `{buffer}.f[i]` for "
        f"`{buffer}[i].f` ({fields}; a warp's accesses of one field become "
        "consecutive words)"
    )


@dataclass(frozen=True)
class PackedField:
    """A field in the packed word: its old byte offset, the bits the kernel uses, and where it
    goes (``shift``, ``bits`` allotted)."""

    name: str
    offset: int
    used_bits: int
    shift: int
    bits: int


@dataclass(frozen=True)
class Packing:
    """Narrow fields packed into one 32-bit word (``style``: ``bytes``, one byte lane each as a
    ``uchar4``; ``bits``: bit-fields of the widths used)."""

    fields: tuple[PackedField, ...]
    style: str

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(f.offset for f in self.fields)

    def layout_text(self) -> str:
        return ", ".join(f"{f.name} bits {f.shift}..{f.shift + f.bits - 1}" for f in self.fields)

    def unpack_code(self, word: str = "info") -> str:
        lines = []
        for f in self.fields:
            mask = (1 << f.bits) - 1
            shifted = f"({word} >> {f.shift})" if f.shift else word
            lines.append(f"const unsigned {f.name} = {shifted} & 0x{mask:x}u;")
        return " ".join(lines)

    def pack_code(self) -> str:
        parts = [
            (f"({f.name} & 0x{(1 << f.bits) - 1:x}u)" + (f" << {f.shift}" if f.shift else ""))
            for f in self.fields
        ]
        return "info = " + " | ".join(parts) + ";"


def plan_packing(fields: Sequence[tuple[str, int, int]]) -> Packing | None:
    """A one-word packing of narrow fields ``(name, byte offset, used bits)``, in offset order:
    one byte lane each when at most four fit 8 bits (the seed's ``uchar4``), else bit-fields of
    the widths used; None when they do not fit 32 bits."""
    fs = sorted(fields, key=lambda f: f[1])
    if len(fs) < 2:
        return None
    if len(fs) <= 4 and all(b <= 8 for _, _, b in fs):
        return Packing(
            tuple(PackedField(n, o, b, 8 * i, 8) for i, (n, o, b) in enumerate(fs)), "bytes"
        )
    if sum(max(b, 1) for _, _, b in fs) > 32:
        return None
    out, shift = [], 0
    for n, o, b in fs:
        out.append(PackedField(n, o, b, shift, max(b, 1)))
        shift += max(b, 1)
    return Packing(tuple(out), "bits")


_PROLOGUE = """\
{comment}
#define PITCH {pitch}u  // elements per row
#define ROWS {rows}u  // rows
#define WORDS {words}u  // 32-bit words per element in the old layout

__device__ __forceinline__ unsigned fold(unsigned acc, unsigned logical) {{
    return acc * 0x{fold:08X}u + logical;
}}

// whether a visit reads one more field: a hash of the element's first logical index
__device__ __forceinline__ bool pick(unsigned first, unsigned salt, unsigned share) {{
    return (((first ^ (salt * 0x9E3779B9u)) * 0x{pick:08X}u) >> {shift}) < share;
}}
"""


def _threshold(p: float) -> int:
    return max(0, min(1 << PICK_BITS, round(p * (1 << PICK_BITS))))


def _conditions(fields: Sequence[FieldLoad]) -> list[int | None]:
    """Per field after the first: the threshold (out of 1024) of its nested condition, None when
    it is read whenever the field before it is."""
    out: list[int | None] = [None]
    for prev, f in zip(fields, fields[1:], strict=False):
        p = f.share / prev.share if prev.share > 0 else 1.0
        out.append(None if p >= 0.98 else _threshold(min(p, 1.0)))
    return out


def _vec(words: int) -> str:
    return {1: "unsigned", 2: "uint2", 4: "uint4"}[words]


def _comps(var: str, words: int) -> list[str]:
    return [var] if words == 1 else [f"{var}.{c}" for c in "xyzw"[:words]]


def _visit_chain(
    fields: Sequence[FieldLoad],
    load: Any,
    logical: Any,
    indent: str = "    ",
) -> list[str]:
    """The nested reads of one visit: ``load(j)`` gives (statements, value expression) of field
    ``j``, ``logical(j, c, value)`` the logical index of its component ``c``."""
    conds = _conditions(fields)
    lines: list[str] = []
    depth = 0
    for j, f in enumerate(fields):
        pad = indent + "    " * depth
        if j > 0 and conds[j] is not None:
            lines.append(f"{pad}if (pick(first, {j}u, {conds[j]}u)) {{")
            depth += 1
            pad = indent + "    " * depth
        stmts, val = load(j)
        lines += [pad + s for s in stmts]
        for c, comp in enumerate(_comps(val, f.words)):
            lines.append(f"{pad}acc = fold(acc, {logical(j, c, comp)});")
        if j == 0 and any(c is not None for c in conds[1:]):
            lines.append(f"{pad}const unsigned first = {logical(0, 0, _comps(val, f.words)[0])};")
    for k in range(depth, 0, -1):
        lines.append(indent + "    " * (k - 1) + "}")
    return lines


def _visit_function(name: str, params: str, body: list[str], one_d: bool) -> str:
    check = (
        "n < 0 || n >= (int)(PITCH * ROWS)"
        if one_d
        else ("nx < 0 || ny < 0 || nx >= (int)PITCH || ny >= (int)ROWS")
    )
    args = "int n" if one_d else "int nx, int ny"
    elem = "(unsigned)n" if one_d else "(unsigned)ny * PITCH + (unsigned)nx"
    return "\n".join(
        [
            f"__device__ __forceinline__ unsigned {name}({params}, {args}, unsigned acc) {{",
            f"    if ({check}) return acc;",
            f"    const unsigned e = {elem};",
            *body,
            "    return acc;",
            "}",
        ]
    )


def _kernel(name: str, params: str, visit: str, arg: str, pattern: Pattern) -> str:
    """A kernel: each thread visits the pattern's offsets around its element through the
    ``visit`` function (applied to ``arg``) and writes its fold to ``out``."""
    bx, by, _ = pattern.block
    lines = [
        f'extern "C" __global__ void {name}({params}, unsigned* __restrict__ out) {{',
        f"    const int x = blockIdx.x * {bx} + threadIdx.x, y = blockIdx.y * {by} + threadIdx.y;",
    ]
    if pattern.one_d:
        lines.append("    if (x >= (int)(PITCH * ROWS)) return;")
    else:
        lines.append("    if (x >= (int)PITCH || y >= (int)ROWS) return;")
    lines.append("    unsigned acc = 0u;")
    for dx, dy in pattern.offsets:
        xs = f"x + {dx}" if dx > 0 else (f"x - {-dx}" if dx < 0 else "x")
        ys = f"y + {dy}" if dy > 0 else (f"y - {-dy}" if dy < 0 else "y")
        where = xs if pattern.one_d else f"{xs}, {ys}"
        lines.append(f"    acc = {visit}({arg}, {where}, acc);")
    lines.append(f"    out[(unsigned)y * {pattern.threads_x}u + (unsigned)x] = acc;")
    lines.append("}")
    return "\n".join(lines)


def _spec(
    pattern: Pattern,
    kernel: str,
    buffers: Sequence[tuple[str, int]],
    title: str,
    written: bool = False,
) -> str:
    """The launch spec of one proxy kernel; ``written``: the kernel stores into ``buffers``,
    which are then no outputs (their layouts differ between the two kernels: ``out`` is
    compared)."""
    gx, gy, gz = pattern.grid
    bx, by, bz = pattern.block
    lines = [
        f"# gpuadvise PROXY ({title}): synthesized from {pattern.where}; not the user's kernel.",
        'source = "proxy.cu"',
        f'kernel = "{kernel}"',
        f"grid = [{gx}, {gy}, {gz}]",
        f"block = [{bx}, {by}, {bz}]",
        "seed = 1",
        "",
        "[buffers]",
    ]
    for name, count in buffers:
        not_out = ", output = false" if written else ""
        lines.append(f'{name} = {{ type = "unsigned", count = {count}, fill = "iota"{not_out} }}')
    lines.append(f'out = {{ type = "unsigned", count = {pattern.threads}, fill = "zeros" }}')
    return "\n".join(lines) + "\n"


def _prologue(pattern: Pattern, what: str) -> str:
    import textwrap

    gx, gy, _ = pattern.grid
    bx, by, _ = pattern.block
    text = (
        f"gpuadvise PROXY: synthesized from the trace of {pattern.where or 'a kernel'}; not the "
        f"user's kernel. It reproduces that line's loads (and stores) of `{pattern.buffer}` (grid {gx}x{gy}, "
        f"block {bx}x{by}, the same element visits and fields; loads made only for a share of "
        f"the visits keep that share, chosen by a hash of the element) {what}. Every 32-bit "
        "word of the input holds its index (iota fill): each kernel turns the words it loads "
        f"back into logical indices of the old layout (element x {pattern.words} + field word) "
        "and folds them in the same order, so the two outputs are equal exactly when both read "
        "the same fields of the same elements. The kernel's own arithmetic is left out."
    )
    comment = "\n".join("// " + ln for ln in textwrap.wrap(text, 96))
    return _PROLOGUE.format(
        comment=comment,
        words=pattern.words,
        pitch=pattern.pitch,
        rows=pattern.rows,
        fold=FOLD,
        pick=PICK_MUL,
        shift=32 - PICK_BITS,
    )


def _aos_load(pattern: Pattern, ptr: str = "p") -> Any:
    def load(j: int) -> tuple[list[str], str]:
        f = pattern.fields[j]
        at = f"e * WORDS + {f.word}u"
        if f.words == 1:
            return [f"const unsigned v{j} = {ptr}[{at}];  // {f.name}"], f"v{j}"
        t = _vec(f.words)
        return [f"const {t} v{j} = *reinterpret_cast<const {t}*>({ptr} + {at});  // {f.name}"], (
            f"v{j}"
        )

    return load


def _arrays(pattern: Pattern, stores: Sequence[FieldLoad]) -> list[tuple[int, int]]:
    """The (first word, words) of each field the SoA proxy gives an array: the loaded fields in
    order, then the stored fields no load reads."""
    out = [(f.word, f.words) for f in pattern.fields]
    for f in stores:
        if (f.word, f.words) not in out:
            out.append((f.word, f.words))
    return out


def _segments(pattern: Pattern, stores: Sequence[FieldLoad] = ()) -> list[int]:
    """The first word of each field's array (:func:`_arrays` order) in the SoA buffer, and the
    buffer's words at the end (each array 256-byte aligned)."""
    out, at = [], 0
    for _, words in _arrays(pattern, stores):
        out.append(at)
        at += _align_up(pattern.count * words, 64)
    return [*out, at]


def merge_stores(
    loads: Pattern | str | None, stores: Pattern | str
) -> tuple[Pattern, tuple[FieldLoad, ...]] | str:
    """A line's loads and stores of one buffer as one proxy pattern: the loads' pattern (the
    stores' without fields when the line only stores) and the stored fields, or why not (a
    string). Each thread must store to one element (then no two threads write the same words,
    and the outputs do not depend on their order), the one its loads visit, and a stored field
    must be a loaded one or lie apart from every loaded field."""
    if isinstance(stores, str):
        return f"stores: {stores}"
    if isinstance(loads, str):
        return loads
    if not stores.fields:
        return "no stores"
    if len(stores.offsets) != 1:
        return "stores to several elements per thread (threads would write each other's elements)"
    if loads is None:
        return replace(stores, fields=()), stores.fields
    keys = ("elem_bytes", "count", "pitch", "rows", "grid", "block", "offsets")
    if any(getattr(loads, k) != getattr(stores, k) for k in keys):
        return "the line's stores visit other elements than its loads"
    for f in stores.fields:
        for g in loads.fields:
            apart = f.word + f.words <= g.word or g.word + g.words <= f.word
            if not apart and (f.word, f.words) != (g.word, g.words):
                return f"a store of {f.name} overlaps the load of {g.name} with another width"
    return loads, stores.fields


def _store_chain(stores: Sequence[FieldLoad], store_at: Any, indent: str = "    ") -> list[str]:
    """The stores of one visit, after its loads: stored field ``j`` (``store_at(j)``: the
    lvalue) gets the fold so far (plus the component), for the share of the visits that store
    it (chosen by a hash of the element); then each word's logical index is folded in."""
    lines: list[str] = []
    for j, f in enumerate(stores):
        pad = indent
        cond = f.share < 0.98
        if cond:
            lines.append(f"{pad}if (pick(e, {STORE_SALT + j}u, {_threshold(f.share)}u)) {{")
            pad += "    "
        comps = ["acc"] + [f"acc + {c}u" for c in range(1, f.words)]
        value = comps[0] if f.words == 1 else f"make_{_vec(f.words)}({', '.join(comps)})"
        lines.append(f"{pad}{store_at(j)} = {value};  // {f.name} (stored)")
        for c in range(f.words):
            lines.append(f"{pad}acc = fold(acc, e * WORDS + {f.word + c}u);")
        if cond:
            lines.append(indent + "}")
    return lines


def soa_proxy(pattern: Pattern, stores: Sequence[FieldLoad] = ()) -> Proxy:
    """GA301's proxy: ``ga301_aos`` reads the pattern's fields from an array of structures of
    ``pattern.words`` words per element; ``ga301_soa`` reads each field from an array of its
    own (the arrays back to back in one buffer, each 256-byte aligned). With ``stores`` (from
    :func:`merge_stores`), each visit then writes those fields, in place in the structures or
    into their arrays: a store or a read-modify-write."""
    seg = _segments(pattern, stores)
    arrays = _arrays(pattern, stores)
    n_stored = f"; and stores {len(stores)} of them" if stores else ""
    what = (
        f"in the old layout (ga301_aos: an array of {pattern.elem_bytes}-byte structures) and in "
        f"the new one (ga301_soa: one array per field accessed, {len(arrays)} arrays){n_stored}"
    )
    aos_body = _visit_chain(pattern.fields, _aos_load(pattern), lambda j, c, comp: comp)

    def aos_store(j: int) -> str:
        f = stores[j]
        at = f"e * WORDS + {f.word}u"
        if f.words == 1:
            return f"p[{at}]"
        return f"*reinterpret_cast<{_vec(f.words)}*>(p + {at})"

    def soa_store(j: int) -> str:
        f = stores[j]
        base = f"p + {seg[arrays.index((f.word, f.words))]}u"
        if f.words == 1:
            return f"({base})[e]"
        return f"reinterpret_cast<{_vec(f.words)}*>({base})[e]"

    def soa_load(j: int) -> tuple[list[str], str]:
        f = pattern.fields[j]
        t = _vec(f.words)
        at = f"p + {seg[j]}u"
        if f.words == 1:
            return [f"const unsigned v{j} = ({at})[e];  // {f.name}[]"], f"v{j}"
        return [f"const {t} v{j} = reinterpret_cast<const {t}*>({at})[e];  // {f.name}[]"], (
            f"v{j}"
        )

    def soa_logical(j: int, c: int, comp: str) -> str:
        f = pattern.fields[j]
        shift = {1: 0, 2: 1, 4: 2}[f.words]
        elem = f"({comp} - {seg[j]}u)" if seg[j] else comp
        if shift:
            elem = f"({elem} >> {shift})"
        return f"{elem} * WORDS + {f.word + c}u"

    soa_body = _visit_chain(pattern.fields, soa_load, soa_logical)
    if stores:
        aos_body += _store_chain(stores, aos_store)
        soa_body += _store_chain(stores, soa_store)
    ptr = "unsigned* __restrict__" if stores else "const unsigned* __restrict__"
    src = "\n\n".join(
        [
            _prologue(pattern, what),
            _visit_function("visit_aos", f"{ptr} p", aos_body, pattern.one_d),
            _visit_function("visit_soa", f"{ptr} p", soa_body, pattern.one_d),
            _kernel("ga301_aos", f"{ptr} aos", "visit_aos", "aos", pattern),
            _kernel("ga301_soa", f"{ptr} soa", "visit_soa", "soa", pattern),
        ]
    )
    written = bool(stores)
    return Proxy(
        source=src + "\n",
        before="ga301_aos",
        after="ga301_soa",
        spec_before=_spec(
            pattern,
            "ga301_aos",
            [("aos", pattern.count * pattern.words)],
            "GA301, old layout",
            written,
        ),
        spec_after=_spec(pattern, "ga301_soa", [("soa", seg[-1])], "GA301, new layout", written),
    )


def packed_proxy(pattern: Pattern, packing: Packing) -> Proxy | None:
    """GA302's proxy: ``ga302_unpacked`` reads the pattern's fields, each from its own word of
    the element; ``ga302_packed`` reads one word holding the packed fields (the element shrunk
    to ``words - len(packing) + 1`` words, the packed word where the first packed field was)
    and the other fields at their new places. None when no packed field is read at the line."""
    packed_words = sorted(o // 4 for o in packing.offsets)
    if not any(f.word in packed_words and f.words == 1 for f in pattern.fields):
        return None
    first = packed_words[0]
    new_index: dict[int, int] = {}
    n = 0
    for w in range(pattern.words):
        if w in packed_words and w != first:
            continue
        new_index[w] = n
        n += 1
    words2 = n
    pw = new_index[first]
    what = (
        f"with each narrow field in its own 32-bit word (ga302_unpacked, {pattern.elem_bytes}-byte "
        f"elements) and with {len(packing.fields)} fields packed in one word (ga302_packed, "
        f"{words2 * 4}-byte elements; {packing.layout_text()})"
    )
    before_body = _visit_chain(
        pattern.fields, _aos_load(pattern), lambda j, c, comp: f"{comp} * {words2}u"
    )
    loaded = {"packed": False}

    def after_load(j: int) -> tuple[list[str], str]:
        f = pattern.fields[j]
        if f.word in packed_words and f.words == 1:
            if not loaded["packed"]:
                loaded["packed"] = True
                return [f"const unsigned packed = p[e * {words2}u + {pw}u];  // the packed word"], (
                    "packed"
                )
            return [], "packed"
        at = f"e * {words2}u + {new_index[f.word]}u"
        if f.words == 1:
            return [f"const unsigned v{j} = p[{at}];  // {f.name}"], f"v{j}"
        t = _vec(f.words)
        return [f"const {t} v{j} = *reinterpret_cast<const {t}*>(p + {at});  // {f.name}"], (
            f"v{j}"
        )

    def after_logical(j: int, c: int, comp: str) -> str:
        f = pattern.fields[j]
        src = pw if (f.word in packed_words and f.words == 1) else new_index[f.word]
        return f"({comp} - {src}u) * WORDS + {(f.word + c) * words2}u"

    for f in pattern.fields:
        if f.words > 1 and (new_index[f.word] * 4) % (4 * f.words):
            return None  # a vector field would lose its alignment in the packed element
    after_body = _visit_chain(pattern.fields, after_load, after_logical)
    src = "\n\n".join(
        [
            _prologue(pattern, what),
            f"#define WORDS2 {words2}u  // 32-bit words per element once packed",
            _visit_function(
                "visit_unpacked", "const unsigned* __restrict__ p", before_body, pattern.one_d
            ),
            _visit_function(
                "visit_packed", "const unsigned* __restrict__ p", after_body, pattern.one_d
            ),
            _kernel(
                "ga302_unpacked", "const unsigned* __restrict__ cells", "visit_unpacked",
                "cells", pattern,
            ),
            _kernel(
                "ga302_packed", "const unsigned* __restrict__ packed",
                "visit_packed", "packed", pattern,
            ),
        ]
    )  # fmt: skip
    return Proxy(
        source=src + "\n",
        before="ga302_unpacked",
        after="ga302_packed",
        spec_before=_spec(
            pattern,
            "ga302_unpacked",
            [("cells", pattern.count * pattern.words)],
            "GA302, fields in words of their own",
        ),
        spec_after=_spec(
            pattern, "ga302_packed", [("packed", pattern.count * words2)], "GA302, packed fields"
        ),
    )


def tile_pitch(width: int, block_x: int) -> int:
    """A shared row pitch (words) of at least ``width`` that puts the rows one warp reads in
    different banks: ``pitch = block_x (mod 32)`` when a warp spans several rows."""
    if block_x >= 32 or 32 % block_x:
        return width
    p = width
    while p % 32 != block_x % 32:
        p += 1
    return p


def tile_proxy(pattern: Pattern) -> Proxy | str:
    """GA305's proxy: ``ga305_global`` reads the neighbours from global memory as the kernel
    does; ``ga305_tile`` first stages the block's window (the block and a halo of the pattern's
    reach, every field read) in shared memory, synchronizes, and reads the neighbours from there.
    The same layout for both. A string (why not) when the tile would exceed 48 KB."""
    if pattern.one_d:
        return "a 1-D launch (the tile proxy is 2-D)"
    x0, x1, y0, y1 = pattern.radius
    bx, by, _ = pattern.block
    tw, th = bx + x1 - x0, by + y1 - y0
    pitch = tile_pitch(tw, bx)
    smem = sum(th * pitch * 4 * f.words for f in pattern.fields)
    if smem > SHARED_BUDGET_BYTES:
        return f"the tile would take {smem} bytes of shared memory (more than 48 KB)"
    what = (
        f"reading the neighbours from global memory (ga305_global) and from a {tw}x{th} "
        f"shared tile with halo staged once per block (ga305_tile)"
    )
    global_body = _visit_chain(pattern.fields, _aos_load(pattern), lambda j, c, comp: comp)

    def tile_load(j: int) -> tuple[list[str], str]:
        f = pattern.fields[j]
        t = _vec(f.words)
        return [f"const {t} v{j} = tile{j}[ty][tx];  // {f.name}"], f"v{j}"

    tile_body = _visit_chain(pattern.fields, tile_load, lambda j, c, comp: comp)
    decls = "\n".join(
        f"    __shared__ {_vec(f.words)} tile{j}[{th}][{pitch}];  // {f.name}"
        for j, f in enumerate(pattern.fields)
    )
    stores = []
    for j, f in enumerate(pattern.fields):
        t = _vec(f.words)
        at = f"e * WORDS + {f.word}u"
        src = f"p[{at}]" if f.words == 1 else f"*reinterpret_cast<const {t}*>(p + {at})"
        zero = "0u" if f.words == 1 else f"{t}{{}}"
        stores.append(f"            tile{j}[wy][wx] = inside ? {src} : {zero};")
    threads = bx * by
    stage = "\n".join(
        [
            decls,
            f"    const int x0 = (int)(blockIdx.x * {bx}) + ({x0}), "
            f"y0 = (int)(blockIdx.y * {by}) + ({y0});",
            f"    for (int i = threadIdx.y * {bx} + threadIdx.x; i < {tw * th}; i += {threads}) {{",
            f"        const int wx = i % {tw}, wy = i / {tw}, gx = x0 + wx, gy = y0 + wy;",
            "        const bool inside = gx >= 0 && gy >= 0 && gx < (int)PITCH && gy < (int)ROWS;",
            "        const unsigned e = inside ? (unsigned)gy * PITCH + (unsigned)gx : 0u;",
            "        {",
            *stores,
            "        }",
            "    }",
            "    __syncthreads();",
        ]
    )
    lines = [
        'extern "C" __global__ void ga305_tile(const unsigned* __restrict__ p, '
        "unsigned* __restrict__ out) {",
        f"    const int x = blockIdx.x * {bx} + threadIdx.x, y = blockIdx.y * {by} + threadIdx.y;",
        stage,
        "    if (x >= (int)PITCH || y >= (int)ROWS) return;",
        "    unsigned acc = 0u;",
    ]
    for dx, dy in pattern.offsets:
        lines += [
            "    {",
            f"        const int nx = x + ({dx}), ny = y + ({dy});",
            "        if (nx >= 0 && ny >= 0 && nx < (int)PITCH && ny < (int)ROWS) {",
            f"            const int tx = threadIdx.x + ({dx - x0}), ty = threadIdx.y + ({dy - y0});",
            *["        " + ln for ln in tile_body],
            "        }",
            "    }",
        ]
    lines += [f"    out[(unsigned)y * {pattern.threads_x}u + (unsigned)x] = acc;", "}"]
    src = "\n\n".join(
        [
            _prologue(pattern, what),
            _visit_function("visit_global", "const unsigned* __restrict__ p", global_body, False),
            _kernel("ga305_global", "const unsigned* __restrict__ p", "visit_global", "p", pattern),
            "\n".join(lines),
        ]
    )
    count = pattern.count * pattern.words
    return Proxy(
        source=src + "\n",
        before="ga305_global",
        after="ga305_tile",
        spec_before=_spec(pattern, "ga305_global", [("p", count)], "GA305, global neighbours"),
        spec_after=_spec(pattern, "ga305_tile", [("p", count)], "GA305, shared tile"),
    )


def proxy_where(kernel: str, file: str | None, line: int) -> str:
    return f"{kernel} at {os.path.basename(file or '?')}:{line}"


def source_text(path: str | os.PathLike[str]) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
