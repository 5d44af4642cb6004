"""Layout proxies and the trace analysis behind the layout rules (GA301, GA302, GA305).

A data-layout change (an array of structures turned into a structure of arrays, narrow fields
packed into one word, neighbours staged in a shared tile) reaches beyond the kernel: the host code
allocates the data. gpuadvise cannot apply it to the user's kernel, so it measures a *proxy*: two
kernels it synthesizes from the trace of one source line, ``before`` (the line's loads as the
kernel does them) and ``after`` (the same loads in the new layout), with the same grid, block,
element count and element offsets. Everything here is pure: numpy over an
:class:`~gpuadvise.trace.access.AccessTrace`, text in, text out (the proxy is CUDA source plus two
launch specs, :class:`~gpuadvise.rules.Proxy`).

The parts:

- **Struct layouts** (:func:`parse_struct`): the fields of a struct the source defines, laid out
  with the x86-64/CUDA rules (``gpuadvise.spec.cuda_types`` sizes), so that a byte offset the trace
  shows can be named (``Cell.age``). The rules check the parsed size against the compiler's
  (``sizeof`` through :func:`gpuadvise.toolchain.struct_layouts`, which sized the buffer).
- **A lane-level view of the trace** (:class:`TraceView`): the global accesses of a sample of the
  traced CTAs, one row per active lane, with the buffer, the byte offset in it and the thread.
  From it: the sectors a warp's accesses at a line touch against the bytes it uses
  (:func:`warp_footprint`), how many threads of a CTA load each address (:func:`cta_reuse`), which
  struct field each load instruction reads (:func:`field_loads`).
- **The access pattern** (:func:`infer_pattern`): each thread's element visits at the line as
  offsets ``(dx, dy)`` from the thread's own element ``y * pitch + x``, the fields read per visit
  and how often (loads made under a data-dependent condition, like ``a && b`` short circuits, are
  reproduced with the same frequency by a hash of the element).
- **Proxies** (:func:`soa_proxy`, :func:`packed_proxy`, :func:`tile_proxy`): verification across
  layouts works with an ``iota`` fill (each 32-bit word holds its index): each kernel turns every
  word it loads back into the *logical* index (element x words per element + field word) of the
  old layout, with one multiply-add, and folds the logical indices into one word per thread in the
  same order, ``acc = acc * 0x9E3779B1 + logical``. The two kernels' outputs are equal exactly when
  they read the same fields of the same elements in the same order, and no load can be dropped.
  The proxies keep the line's loads and their conditions; they leave out the kernel's own
  arithmetic (one fold per field stands for it in both kernels).
- **Demanded bits** (:func:`demanded_bits`, :func:`load_widths`): for each load of the kernel's PTX,
  which bits of the loaded value the kernel can use at all (``x & 3`` uses 2, ``(x & 255) >= 16``
  uses 8), by a backward data-flow analysis: how GA302 knows a field is narrow.
"""

from __future__ import annotations

import hashlib
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.rules import Proxy
from gpuadvise.trace.access import WARP, AccessTrace, Kind, Space

__all__ = [
    "BufferInfo",
    "FOLD",
    "FieldLoad",
    "Lanes",
    "PackedField",
    "Packing",
    "Pattern",
    "Reuse",
    "StructField",
    "StructLayout",
    "TraceView",
    "buffer_infos",
    "cta_reuse",
    "demanded_bits",
    "field_loads",
    "infer_pattern",
    "integer_args",
    "l1_cycles",
    "load_widths",
    "packed_proxy",
    "parse_struct",
    "plan_packing",
    "proxy_where",
    "roofline",
    "soa_description",
    "soa_proxy",
    "source_text",
    "stride_mode",
    "struct_for",
    "tile_pitch",
    "tile_proxy",
    "trace_view",
    "warp_footprint",
]

SECTOR = 32
MAX_SAMPLED_CTAS = 64
MAX_VISITS = 256
MIN_COVERAGE = 0.9
SHARED_BUDGET_BYTES = 48 * 1024
FOLD = 0x9E3779B1
PICK_MUL = 0x85EBCA6B
PICK_BITS = 10  # a share is reproduced to 1/1024


# ---------------------------------------------------------------------------------------------
# Struct layouts from the source


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


# ---------------------------------------------------------------------------------------------
# Buffers and a lane-level view of the trace


@dataclass(frozen=True)
class BufferInfo:
    """A buffer of the launch as the trace placed it: base address, bytes, elements."""

    name: str
    base: int
    size: int
    elem_bytes: int
    count: int
    type_name: str
    is_struct: bool


def buffer_infos(trace: AccessTrace, spec: Any) -> dict[str, BufferInfo]:
    """The launch's buffers with their element size: the spec's count over the traced bytes; a
    buffer the user did not give is the default one (an element per thread of the launch, of
    the type the parameter points to)."""
    from gpuadvise.errors import GpuAdviseError, UsageError
    from gpuadvise.spec import expr
    from gpuadvise.spec.cuda_types import StructType, lookup_elem

    try:
        env = spec.env()
    except UsageError:
        env = {}
    pointees: dict[str, str] = {}
    try:
        from gpuadvise.source.signature import parse_signature

        text = Path(spec.source).read_text(encoding="utf-8", errors="replace")
        pointees = {p.name: p.pointee for p in parse_signature(text, spec.kernel) if p.pointee}
    except (GpuAdviseError, OSError, AttributeError, TypeError):
        pass
    out: dict[str, BufferInfo] = {}
    for name, (base, size) in trace.buffers.items():
        bs = spec.buffer(name)
        try:
            if bs is not None:
                count, elem = int(expr.evaluate(bs.count_expr, env)), bs.elem_type
            else:
                count = int(spec.launch.total_threads)
                elem = lookup_elem(pointees.get(name) or "void")
        except (UsageError, AttributeError):
            continue
        if count <= 0 or size % count:
            continue
        out[name] = BufferInfo(
            name,
            int(base),
            int(size),
            size // count,
            count,
            elem.name,
            isinstance(elem, StructType),
        )
    return out


@dataclass(frozen=True)
class Lanes:
    """Active lanes of some records, one row per lane, in execution order.

    ``rec``: the record's index in :attr:`TraceView.records`; ``cta``: dense index of the CTA
    among the sampled ones; ``tid``: the thread in the CTA (warp x 32 + lane); ``off``: the byte
    offset in the buffer; ``width``: bytes per lane.
    """

    rec: np.ndarray
    inst: np.ndarray
    cta: np.ndarray
    tid: np.ndarray
    off: np.ndarray
    width: np.ndarray

    def __len__(self) -> int:
        return len(self.rec)

    def take(self, keep: np.ndarray) -> Lanes:
        return Lanes(
            self.rec[keep],
            self.inst[keep],
            self.cta[keep],
            self.tid[keep],
            self.off[keep],
            self.width[keep],
        )


class TraceView:
    """The global accesses of up to ``max_ctas`` traced CTAs (evenly spread over those traced),
    lane by lane, with the buffer each lane reaches; shared by the layout rules of one run."""

    def __init__(
        self,
        trace: AccessTrace,
        buffers: Mapping[str, BufferInfo],
        max_ctas: int = MAX_SAMPLED_CTAS,
    ) -> None:
        from gpuadvise.model.banks import active_lanes
        from gpuadvise.model.coalescing import record_sectors

        self.grid = tuple(int(g) for g in trace.grid)
        self.block = tuple(int(b) for b in trace.block)
        self.total_ctas = int(trace.total_ctas)
        self.buffers = dict(buffers)
        recs = trace.records[trace.records["space"] == int(Space.GLOBAL)]
        ctas = np.unique(recs["cta"])
        if len(ctas) > max_ctas:
            pick = np.linspace(0, len(ctas) - 1, max_ctas).round().astype(np.int64)
            ctas = ctas[np.unique(pick)]
            recs = recs[np.isin(recs["cta"], ctas)]
        self.ctas = ctas
        self.records = recs
        self.scale = self.total_ctas / max(len(ctas), 1)
        rs = record_sectors(recs)
        self.rec_sectors = rs.sectors.astype(np.int64)
        self.rec_ideal = rs.ideal.astype(np.int64)
        act = active_lanes(recs["mask"]) if len(recs) else np.zeros((0, WARP), bool)
        rows, lanes = np.nonzero(act)
        addr = recs["addr"][rows, lanes] if len(rows) else np.zeros(0, np.uint64)
        names = sorted(self.buffers, key=lambda n: self.buffers[n].base)
        bases = np.array([self.buffers[n].base for n in names], dtype=np.uint64)
        ends = np.array([self.buffers[n].base + self.buffers[n].size for n in names], np.uint64)
        which = np.searchsorted(bases, addr, side="right") - 1
        inside = which >= 0
        safe = np.clip(which, 0, max(len(names) - 1, 0))
        if len(names):
            inside &= addr < ends[safe]
            off = (addr - bases[safe]).astype(np.int64)
        else:
            off = np.zeros(len(addr), np.int64)
        self.buffer_names = names
        self.lane_buffer = np.where(inside, safe, -1)
        self.lanes = Lanes(
            rows.astype(np.int64),
            recs["inst"][rows].astype(np.int64),
            np.searchsorted(ctas, recs["cta"][rows]).astype(np.int64),
            (recs["warp"][rows].astype(np.int64) * WARP + lanes).astype(np.int64),
            off,
            recs["width"][rows].astype(np.int64),
        )
        self.inst_line = [(i.file, i.line) for i in trace.instructions]
        self.inst_kind = np.array([int(i.kind) for i in trace.instructions] or [0], np.int64)
        self._l1_total: float | None = None
        self._useful: float | None = None
        self._patterns: dict[tuple[Any, ...], Pattern | str] = {}

    def lines(self, same_file: Any, kinds: Iterable[Kind]) -> list[tuple[str | None, int, Kind]]:
        """(file, line, kind) of the global accesses in the source file ``same_file(file)``
        accepts, in line order."""
        want = {int(k) for k in kinds}
        seen: set[tuple[str | None, int, Kind]] = set()
        for i in np.unique(self.records["inst"]):
            file, line = self.inst_line[int(i)]
            kind = int(self.inst_kind[int(i)])
            if line is None or kind not in want or not same_file(file):
                continue
            seen.add((file, line, Kind(kind)))
        return sorted(seen, key=lambda t: (t[1], int(t[2])))

    def insts_at(self, file: str | None, line: int, kind: Kind) -> np.ndarray:
        return np.array(
            [
                i
                for i, (f, ln) in enumerate(self.inst_line)
                if f == file and ln == line and int(self.inst_kind[i]) == int(kind)
            ],
            np.int64,
        )

    def access(self, insts: np.ndarray, buffer: str) -> tuple[Lanes, np.ndarray]:
        """The lanes of instructions ``insts`` that reach ``buffer``, and their records' indices."""
        b = self.buffer_names.index(buffer)
        keep = np.isin(self.lanes.inst, insts) & (self.lane_buffer == b)
        lanes = self.lanes.take(keep)
        return lanes, np.unique(lanes.rec)

    def buffers_at(self, insts: np.ndarray) -> list[str]:
        keep = np.isin(self.lanes.inst, insts) & (self.lane_buffer >= 0)
        return [self.buffer_names[int(b)] for b in np.unique(self.lane_buffer[keep])]

    def l1_total(self) -> float:
        """The sampled CTAs' L1 data-path cycles: :func:`l1_cycles` of each (line, kind)'s
        requests and sectors, summed."""
        if self._l1_total is None:
            n = len(self.inst_line)
            inst = self.records["inst"].astype(np.int64)
            req = np.bincount(inst, minlength=n)
            sect = np.bincount(inst, weights=self.rec_sectors, minlength=n)
            groups: dict[tuple[str | None, int | None, int], list[float]] = {}
            for i in np.flatnonzero(req):
                key = (*self.inst_line[int(i)], int(self.inst_kind[int(i)]))
                g = groups.setdefault(key, [0.0, 0.0])
                g[0] += float(req[i])
                g[1] += float(sect[i])
            self._l1_total = sum(l1_cycles(r, s) for r, s in groups.values())
        return self._l1_total

    def useful_bytes(self) -> float:
        """Distinct bytes of every buffer the sampled CTAs access, scaled to the launch: the
        compulsory DRAM traffic (each byte moved once)."""
        if self._useful is None:
            keep = self.lane_buffer >= 0
            if not keep.any():
                self._useful = 0.0
            else:
                lanes = self.lanes.take(keep)
                units = _units(lanes.off, lanes.width)
                key = (self.lane_buffer[keep][units[0]].astype(np.int64) << 44) | units[1]
                self._useful = float(len(np.unique(key))) * units[2] * self.scale
        return self._useful

    def pattern(
        self,
        lanes: Lanes,
        buffer: BufferInfo,
        names: Mapping[int, str] | None,
        pitches: Iterable[int],
        where: str,
    ) -> Pattern | str:
        """:func:`infer_pattern`, cached per set of lanes (the rules of one line share it)."""
        cands = tuple(int(p) for p in pitches)
        digest = hashlib.blake2b(lanes.rec.tobytes(), digest_size=16)
        digest.update(lanes.inst.tobytes())
        key = (buffer.name, len(lanes), digest.hexdigest(), cands)
        got = self._patterns.get(key)
        if got is None:
            got = infer_pattern(self, lanes, buffer, None, cands, "")
            self._patterns[key] = got
        if isinstance(got, str):
            return got
        fields = tuple(
            FieldLoad(f.word, f.words, f.share, (names or {}).get(4 * f.word, f.name))
            for f in got.fields
        )
        return replace(got, fields=fields, where=where)


_VIEWS: dict[int, tuple[weakref.ref[AccessTrace], Any, TraceView]] = {}


def trace_view(trace: AccessTrace, spec: Any) -> TraceView:
    """The :class:`TraceView` of ``trace``, cached while the trace lives (the three layout rules
    of a run share it; the view keeps no reference to the trace)."""
    key = id(trace)
    got = _VIEWS.get(key)
    if got is not None and got[0]() is trace and got[1] is spec:
        return got[2]
    view = TraceView(trace, buffer_infos(trace, spec))
    _VIEWS[key] = (weakref.ref(trace), spec, view)
    weakref.finalize(trace, _VIEWS.pop, key, None)
    return view


def _units(off: np.ndarray, width: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The units (4-byte words, or bytes when some access is narrower or unaligned) each lane
    covers: (lane index per unit, unit number, unit bytes)."""
    if len(off) and ((width < 4).any() or (off % 4 != 0).any()):
        unit = 1
    else:
        unit = 4
    n = np.maximum(width // unit, 1)
    idx = np.repeat(np.arange(len(off)), n)
    start = np.repeat(np.cumsum(n) - n, n)
    k = np.arange(len(idx)) - start
    return idx, off[idx] // unit + k, unit


def warp_footprint(lanes: Lanes) -> tuple[int, int]:
    """(sectors, ideal sectors) of the warps' accesses, all iterations together: per warp, the
    distinct 32-byte sectors its lanes touch and ``ceil(distinct bytes / 32)``, summed. Accesses
    of a warp that another instruction of the same line completes (``in[i]`` and ``in[i + 1]``)
    waste nothing here; an array-of-structures field read wastes the rest of each sector."""
    if not len(lanes):
        return 0, 0
    group = lanes.cta * 64 + lanes.tid // WARP
    first = lanes.off // SECTOR
    last = (lanes.off + lanes.width - 1) // SECTOR
    span = (last - first).max()
    keys = [(group << 44) | first]
    for k in range(1, int(span) + 1):
        more = last - first >= k
        keys.append((group[more] << 44) | (first[more] + k))
    sectors = len(np.unique(np.concatenate(keys)))
    idx, unit_no, unit = _units(lanes.off, lanes.width)
    ukeys = np.unique((group[idx] << 44) | unit_no)
    per_group = np.unique(ukeys >> 44, return_counts=True)[1] * unit
    ideal = int(np.sum(-(-per_group // SECTOR)))
    return int(sectors), ideal


@dataclass(frozen=True)
class Reuse:
    """How the threads of a CTA share the addresses they load at a line (sampled CTAs summed).

    ``pairs``: distinct (thread, address); ``addresses``: distinct addresses per CTA;
    ``factor = pairs / addresses``: how many threads load each address. ``spread``: distinct
    addresses per request over active lanes (1: every lane its own address; a uniform load is
    1/32). ``requested_sectors``: sectors summed over the requests; ``unique_sectors``: distinct
    sectors per CTA (what a shared tile would load once)."""

    pairs: int
    addresses: int
    requests: int
    lanes: int
    spread: float
    requested_sectors: int
    unique_sectors: int

    @property
    def factor(self) -> float:
        return self.pairs / self.addresses if self.addresses else 0.0


def cta_reuse(lanes: Lanes, sectors_of_records: np.ndarray) -> Reuse:
    """The :class:`Reuse` of a line's lanes; ``sectors_of_records``: the sectors of each of their
    records (the coalescing model's)."""
    if not len(lanes):
        return Reuse(0, 0, 0, 0, 0.0, 0, 0)
    addr = (lanes.cta << 44) | lanes.off
    pairs = len(np.unique((lanes.cta << 54) | (lanes.tid << 44) | lanes.off))
    addresses = len(np.unique(addr))
    order = np.lexsort((lanes.off, lanes.rec))
    r, o = lanes.rec[order], lanes.off[order]
    distinct = int(np.count_nonzero(np.r_[True, (r[1:] != r[:-1]) | (o[1:] != o[:-1])]))
    recs = np.unique(lanes.rec)
    sect = np.unique((lanes.cta << 44) | (lanes.off // SECTOR))
    last = (lanes.off + lanes.width - 1) // SECTOR
    cross = last != lanes.off // SECTOR
    if cross.any():
        sect = np.unique(np.concatenate([sect, (lanes.cta[cross] << 44) | last[cross]]))
    return Reuse(
        pairs=pairs,
        addresses=addresses,
        requests=len(recs),
        lanes=len(lanes),
        spread=distinct / len(lanes),
        requested_sectors=int(sectors_of_records.sum()),
        unique_sectors=len(sect),
    )


def field_loads(lanes: Lanes, elem_bytes: int) -> dict[int, tuple[int, int, int]]:
    """Per load instruction: (byte offset in the element, width, active lanes), for the
    instructions whose every lane reads the same offset of its element (a struct field)."""
    out: dict[int, tuple[int, int, int]] = {}
    if not len(lanes) or elem_bytes <= 0:
        return out
    fo = lanes.off % elem_bytes
    order = np.argsort(lanes.inst, kind="stable")
    inst, fo, width = lanes.inst[order], fo[order], lanes.width[order]
    starts = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    ends = np.r_[starts[1:], len(inst)]
    for s, e in zip(starts, ends, strict=True):
        vals = np.unique(fo[s:e])
        if len(vals) == 1:
            out[int(inst[s])] = (int(vals[0]), int(width[s]), int(e - s))
    return out


def stride_mode(lanes: Lanes) -> int | None:
    """The most common byte distance between the addresses of consecutive active lanes of a
    request (the stride of the walk); None with no two such lanes."""
    if len(lanes) < 2:
        return None
    same = (lanes.rec[1:] == lanes.rec[:-1]) & (lanes.tid[1:] == lanes.tid[:-1] + 1)
    d = (lanes.off[1:] - lanes.off[:-1])[same]
    if not len(d):
        return None
    vals, counts = np.unique(d, return_counts=True)
    return int(vals[np.argmax(counts)])


def struct_for(buffer: BufferInfo, text: str) -> StructLayout | None:
    """The layout of a struct buffer's element as the source defines it, when its parsed size is
    the compiler's (``buffer.elem_bytes``); None otherwise."""
    if not buffer.is_struct or not text:
        return None
    layout = parse_struct(text, buffer.type_name)
    return layout if layout is not None and layout.size == buffer.elem_bytes else None


def integer_args(spec: Any) -> list[int]:
    """The launch's integer arguments (candidate row lengths of a 2-D buffer)."""
    from gpuadvise.errors import UsageError

    try:
        return [int(v) for v in spec.env().values() if int(v) > 0]
    except UsageError:
        return []


def soa_description(
    buffer: str, info: BufferInfo, layout: StructLayout | None, read: Sequence[str]
) -> str:
    """GA301's fix in words: the struct, and the arrays that replace it."""
    fields = ", ".join(read)
    if layout is None:
        return (
            f"structure of arrays for `{buffer}` ({info.elem_bytes}-byte {info.type_name} "
            f"elements): one array per field, so that `{buffer}[i].f` becomes `{buffer}.f[i]` and "
            f"a warp's reads of a field are consecutive words (this line reads {fields})"
        )
    arrays = "; ".join(
        f"{f.ctype}* {f.name}" + (f"[{f.count}]" if f.count > 1 else "") for f in layout.fields
    )
    return (
        f"structure of arrays for `{buffer}`: instead of {info.count} structs "
        f"`{layout.declaration()};` ({layout.size} bytes each), one array of {info.count} per "
        f"field, `struct {layout.name}s {{ {arrays}; }};`, read as `{buffer}.f[i]` for "
        f"`{buffer}[i].f` (this line reads {fields}; a warp's reads of one field become "
        "consecutive words)"
    )


def roofline(device: Any, view: TraceView, saved_cycles: float, what: str) -> Any:
    """The layout rules' estimate (an upper bound): the launch's L1 data-path time (:func:`l1_cycles`
    per line over SMs x clock) less ``saved_cycles`` (over the sampled CTAs), against a DRAM floor
    (the distinct bytes the launch touches at peak bandwidth): ``max(T_l1, T_dram) /
    max(T_l1 - T_saved, T_dram)``. Without the device's clock or bandwidth, the cycle ratio."""
    from gpuadvise.rules import Estimate

    total = view.l1_total()
    saved = min(saved_cycles, total * 0.999)
    inputs: dict[str, Any] = {
        "l1_cycles_sampled": total,
        "saved_cycles_sampled": saved,
        "sampled_ctas": len(view.ctas),
        "scale": view.scale,
    }
    sms, clock, bw = device.sm_count, device.sm_clock_mhz, device.mem_bandwidth_gbps
    if not (sms and clock and bw) or total <= 0:
        ratio = total / max(total - saved, 1e-9) if total > 0 else 1.0
        return Estimate(
            round(ratio, 3),
            "upper-bound",
            f"L1 data-path cycles, max(requests, sectors / 4) per line: {total:.0f} before, "
            f"{total - saved:.0f} after {what} (no clock or bandwidth for {device.name}: DRAM "
            "ignored); latency ignored, so the real gain is smaller",
            inputs,
        )
    hz = sms * clock * 1e6
    t_l1 = total * view.scale / hz
    t_saved = saved * view.scale / hz
    nbytes = view.useful_bytes()
    t_dram = nbytes / (bw * 1e9)
    before = max(t_l1, t_dram)
    after = max(t_l1 - t_saved, t_dram, 1e-15)
    inputs.update(l1_time_us=t_l1 * 1e6, saved_time_us=t_saved * 1e6, dram_time_us=t_dram * 1e6,
                  dram_bytes=nbytes)  # fmt: skip
    return Estimate(
        round(before / after, 3),
        "upper-bound",
        f"roofline over the launch: the SMs' L1 data path {t_l1 * 1e6:.2f} us (128 bytes per SM "
        f"per cycle and at least one cycle per request: max(requests, sectors / 4) cycles per "
        f"line, {sms} SMs at {clock} MHz), of which {what} saves {t_saved * 1e6:.2f} us; DRAM "
        f"floor {t_dram * 1e6:.2f} us ({nbytes / 1e6:.1f} MB, each byte the launch touches "
        f"once, at {bw:.0f} GB/s); max before / max after. Latency is ignored, so the real gain "
        "is smaller",
        inputs,
    )


def l1_cycles(requests: float, sectors: float) -> float:
    """Cycles of an SM's L1 data path for global requests: a request takes at least one, and the
    path returns 128 bytes (4 sectors) per cycle."""
    return max(float(requests), float(sectors) / 4.0)


# ---------------------------------------------------------------------------------------------
# The access pattern of a line


@dataclass(frozen=True)
class FieldLoad:
    """A field read at each element visit: its first 32-bit word in the element, its words (1,
    2 or 4: a 4-, 8- or 16-byte load), the share of the visits that read it and its name."""

    word: int
    words: int
    share: float
    name: str


@dataclass(frozen=True)
class Pattern:
    """How the threads of a launch read one buffer at one line.

    Thread ``(x, y)`` (``x = blockIdx.x * block.x + threadIdx.x``, ``y`` alike) visits elements
    ``(y + dy) * pitch + (x + dx)`` for each ``(dx, dy)`` of ``offsets`` in order, skipping those
    outside ``[0, pitch) x [0, rows)``; threads with ``x >= pitch`` or ``y >= rows`` visit nothing.
    At each visit it reads ``fields[0]``, then ``fields[1]`` for a share of the visits, then
    ``fields[2]`` for a share of those, and so on (nested, as short-circuit conditions make them).
    ``coverage``: the share of the sampled threads whose visits follow this.
    """

    buffer: str
    elem_bytes: int
    count: int
    pitch: int
    rows: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    offsets: tuple[tuple[int, int], ...]
    fields: tuple[FieldLoad, ...]
    coverage: float
    where: str = ""

    @property
    def words(self) -> int:
        return self.elem_bytes // 4

    @property
    def one_d(self) -> bool:
        return self.grid[1] * self.block[1] == 1

    @property
    def threads_x(self) -> int:
        return self.grid[0] * self.block[0]

    @property
    def threads(self) -> int:
        return self.threads_x * self.grid[1] * self.block[1]

    @property
    def radius(self) -> tuple[int, int, int, int]:
        """(min dx, max dx, min dy, max dy)."""
        dxs = [d[0] for d in self.offsets]
        dys = [d[1] for d in self.offsets]
        return min(dxs), max(dxs), min(dys), max(dys)


def infer_pattern(
    view: TraceView,
    lanes: Lanes,
    buffer: BufferInfo,
    names: Mapping[int, str] | None = None,
    pitches: Iterable[int] = (),
    where: str = "",
) -> Pattern | str:
    """The :class:`Pattern` of a line's lanes on ``buffer``, or why there is none (a string).

    ``pitches``: candidate row lengths in elements (the kernel's integer arguments); the grid's
    threads in x is always tried. The one that explains the visits with the fewest distinct
    offsets wins. ``names``: field names by byte offset.
    """
    gx, gy, gz = view.grid
    bx, by, bz = view.block
    if gz != 1 or bz != 1:
        return "a 3-D launch"
    if not len(lanes):
        return "no loads"
    s = buffer.elem_bytes
    if s % 4:
        return f"{s}-byte elements (not whole 32-bit words)"
    if s > 2048:
        return f"{s}-byte elements (larger than the proxies handle)"
    fo = lanes.off % s
    if ((fo % 4) != 0).any() or (~np.isin(lanes.width, (4, 8, 16))).any():
        return "loads narrower than 32 bits or not word-aligned"
    if ((fo % lanes.width) != 0).any() or (s % lanes.width.max()) != 0:
        return "vector loads not aligned in the element"
    e = lanes.off // s
    cta = view.ctas[lanes.cta]
    cx, cy = cta % gx, (cta // gx) % gy
    tx, ty = lanes.tid % bx, (lanes.tid // bx) % by
    x = cx * bx + tx
    y = cy * by + ty
    one_d = gy * by == 1
    count = buffer.count
    if one_d:
        best = (count, e - x)
    else:
        cands = {gx * bx, *[int(p) for p in pitches if 0 < int(p) <= count]}
        scored = []
        for p in sorted(cands):
            if count % p:
                continue
            d = e - (y * p + x)
            scored.append((len(np.unique(d)), p != gx * bx, p, d))
        if not scored:
            return "no row length divides the buffer"
        scored.sort(key=lambda t: (t[0], t[1], t[2]))
        best = (scored[0][2], scored[0][3])
    pitch, d = best
    rows = count // pitch
    if len(np.unique(d)) > MAX_VISITS:
        return f"more than {MAX_VISITS} distinct element offsets (not a fixed neighbourhood)"
    thread = (lanes.cta << 20) | lanes.tid
    # visits: consecutive reads of one thread of the same element
    order = np.lexsort((lanes.rec, thread))
    th, dd, ff, ww = thread[order], d[order], fo[order], lanes.width[order]
    new_visit = np.r_[True, (th[1:] != th[:-1]) | (dd[1:] != dd[:-1])]
    visit_id = np.cumsum(new_visit) - 1
    v_thread, v_d = th[new_visit], dd[new_visit]
    n_visits = int(visit_id[-1]) + 1
    # the template: the thread with the most visits
    starts = np.flatnonzero(np.r_[True, v_thread[1:] != v_thread[:-1]])
    ends = np.r_[starts[1:], len(v_thread)]
    longest = int(np.argmax(ends - starts))
    template = [int(t) for t in v_d[starts[longest] : ends[longest]]]
    if len(set(template)) != len(template):
        return "a thread visits the same element twice at this line"
    tmpl = np.array(template, np.int64)
    order_t = np.argsort(tmpl)
    at = np.clip(np.searchsorted(tmpl[order_t], v_d), 0, len(tmpl) - 1)
    found = tmpl[order_t][at] == v_d
    vpos = np.where(found, order_t[at], -1)
    first_of_thread = np.r_[True, v_thread[1:] != v_thread[:-1]]
    rising = np.r_[True, vpos[1:] > vpos[:-1]] | first_of_thread
    bad = (vpos < 0) | ~rising
    thread_no = np.cumsum(first_of_thread) - 1
    good = int(np.sum(np.bincount(thread_no, weights=bad.astype(np.int64)) == 0))
    coverage = good / max(len(starts), 1)
    if coverage < MIN_COVERAGE:
        return (
            f"only {coverage:.0%} of the threads visit elements at fixed offsets from their own "
            "(data-dependent indices?)"
        )
    offsets = []
    for t in template:
        dy = (t + pitch // 2) // pitch if not one_d else 0
        offsets.append((t - dy * pitch, dy))
    # fields: the share of the visits that read each
    fields = []
    for (off, width), n in _field_visit_counts(visit_id, ff, ww).items():
        label = (names or {}).get(off, f"word {off // 4}")
        fields.append(FieldLoad(off // 4, width // 4, n / n_visits, label))
    fields.sort(key=lambda f: (-f.share, f.word))
    return Pattern(
        buffer=buffer.name,
        elem_bytes=s,
        count=count,
        pitch=pitch,
        rows=rows,
        grid=(gx, gy, gz),
        block=(bx, by, bz),
        offsets=tuple(offsets),
        fields=tuple(fields),
        coverage=coverage,
        where=where,
    )


def _field_visit_counts(
    visit_id: np.ndarray, fo: np.ndarray, width: np.ndarray
) -> dict[tuple[int, int], int]:
    """How many visits read each (offset, width)."""
    fields, index = np.unique((fo << 5) | width, return_inverse=True)
    seen = np.zeros((int(visit_id[-1]) + 1, len(fields)), dtype=bool)
    seen[visit_id, index] = True
    counts = seen.sum(axis=0)
    return {(int(f >> 5), int(f & 31)): int(c) for f, c in zip(fields, counts, strict=True)}


# ---------------------------------------------------------------------------------------------
# Packing narrow fields


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


# ---------------------------------------------------------------------------------------------
# Demanded bits of the loads (PTX)


def _mask(bits: int) -> int:
    return (1 << bits) - 1 if bits > 0 else 0


def _low(mask: int) -> int:
    """All bits up to the highest set bit of ``mask``."""
    return _mask(mask.bit_length())


def _type_bits(t: str) -> int:
    from gpuadvise.ptx.parser import TYPE_SIZES

    return 1 if t == "pred" else 8 * TYPE_SIZES.get(t, 8)


_NO_DEST = {"st", "red", "bra", "ret", "exit", "bar", "barrier", "call", "prefetch", "membar",
            "fence", "trap", "brkpt", "nanosleep", "cp", "mbarrier", "ldmatrix", "stmatrix"}  # fmt: skip


def demanded_bits(instrs: Sequence[Any], regs: Mapping[str, str]) -> dict[str, int]:
    """For every register, the bits of its value the kernel can use (0: none), by a backward
    analysis to a fixed point over ``instrs`` (a flattened PTX program: stores, addresses,
    branches and calls use everything they read; ``and`` with a constant, shifts, truncating
    ``cvt``, ``bfe``/``bfi``/``prmt`` narrow it; ``add``/``mul.lo``/``mad.lo`` pass only the bits
    up to the highest used one; anything else uses all its operands' bits)."""
    from gpuadvise.ptx.parser import Addr, Imm, Neg, PredOut, Reg, Vec

    dem: dict[str, int] = {}

    def full(name: str) -> int:
        return _mask(_type_bits(regs.get(name, "b64")))

    def regs_in(op: Any) -> list[str]:
        if isinstance(op, Reg):
            return [op.name]
        if isinstance(op, Addr):
            return [op.base.name] if isinstance(op.base, Reg) else []
        if isinstance(op, Vec):
            return [x.name for x in op.items if isinstance(x, Reg)]
        if isinstance(op, Neg):
            return regs_in(op.inner)
        if isinstance(op, PredOut):
            return [op.value.name, op.pred.name]
        return []

    def use(name: str, bits: int) -> bool:
        if not name.startswith("%") or name.startswith(("%tid", "%ctaid", "%ntid", "%nctaid")):
            return False
        new = (dem.get(name, 0) | bits) & full(name)
        if new != dem.get(name, 0):
            dem[name] = new
            return True
        return False

    def use_all(ops: Iterable[Any]) -> bool:
        ch = False
        for op in ops:
            for r in regs_in(op):
                ch |= use(r, full(r))
        return ch

    def imm(op: Any) -> int | None:
        return int(op.value) if isinstance(op, Imm) and isinstance(op.value, int) else None

    changed = True
    rounds = 0
    while changed and rounds < 64:
        changed = False
        rounds += 1
        for ins in reversed(instrs):
            base = ins.base
            ops = ins.operands
            if ins.guard:
                changed |= use(ins.guard, 1)
            if base in _NO_DEST or not ops:
                changed |= use_all(ops)
                continue
            dst = ops[0]
            srcs = ops[1:]
            if base in ("ld", "ldu", "atom"):
                changed |= use_all(srcs)
                continue
            if isinstance(dst, PredOut):
                d = dem.get(dst.value.name, 0) | dem.get(dst.pred.name, 0)
            elif isinstance(dst, Reg):
                d = dem.get(dst.name, 0)
            else:
                changed |= use_all(ops)
                continue
            if not d:
                continue
            mods = ins.mods
            if base == "setp" or (base in ("and", "or", "xor", "not") and "pred" in mods):
                changed |= use_all(srcs)
                continue
            if base in ("mov", "or", "xor", "not", "selp") and not any(
                isinstance(s, Vec) for s in srcs
            ):
                vals = srcs[:2] if base == "selp" else srcs
                for s in vals:
                    for r in regs_in(s):
                        changed |= use(r, d)
                if base == "selp":
                    changed |= use_all(srcs[2:])
                continue
            if base == "and" and len(srcs) == 2:
                for a, b in ((srcs[0], srcs[1]), (srcs[1], srcs[0])):
                    k = imm(b)
                    for r in regs_in(a):
                        changed |= use(r, d & k if k is not None else d)
                continue
            if base in ("shl", "shr") and len(srcs) == 2 and imm(srcs[1]) is not None:
                k = int(imm(srcs[1]) or 0)
                for r in regs_in(srcs[0]):
                    width = _type_bits(regs.get(r, "b32"))
                    if base == "shl":
                        bits = d >> k
                    else:
                        bits = (d << k) & _mask(width)
                        if "s32" in mods or "s64" in mods or "s16" in mods:
                            if d >> max(width - k, 0):
                                bits |= 1 << (width - 1)
                    changed |= use(r, bits)
                continue
            if base == "cvt" and len(mods) >= 2 and len(srcs) == 1:
                dt, st = mods[-2], mods[-1]
                if dt[0] in "usb" and st[0] in "usb" and dt[1:].isdigit() and st[1:].isdigit():
                    n = min(int(dt[1:]), int(st[1:]))
                    bits = d & _mask(n)
                    if st[0] == "s" and int(dt[1:]) > n and d >> n:
                        bits |= 1 << (n - 1)
                    for r in regs_in(srcs[0]):
                        changed |= use(r, bits)
                    continue
            if base == "bfe" and len(srcs) == 3 and imm(srcs[1]) is not None and imm(srcs[2]):
                pos, ln = int(imm(srcs[1]) or 0), int(imm(srcs[2]) or 0)
                bits = (d & _mask(ln)) << pos
                if mods and mods[0].startswith("s") and d >> ln:
                    bits |= 1 << (pos + ln - 1)
                for r in regs_in(srcs[0]):
                    changed |= use(r, bits)
                continue
            if base == "bfi" and len(srcs) == 4 and imm(srcs[2]) is not None and imm(srcs[3]):
                pos, ln = int(imm(srcs[2]) or 0), int(imm(srcs[3]) or 0)
                for r in regs_in(srcs[0]):
                    changed |= use(r, (d >> pos) & _mask(ln))
                for r in regs_in(srcs[1]):
                    changed |= use(r, d & ~(_mask(ln) << pos))
                continue
            if base == "prmt" and len(mods) == 1 and len(srcs) == 3 and imm(srcs[2]) is not None:
                sel = int(imm(srcs[2]) or 0)
                need = [0] * 8
                for i in range(4):
                    byte = (d >> (8 * i)) & 0xFF
                    if byte:
                        nib = (sel >> (4 * i)) & 0xF
                        need[nib & 7] |= 0x80 if nib & 8 else byte
                for j, src in enumerate(srcs[:2]):
                    bits = sum(need[4 * j + i] << (8 * i) for i in range(4))
                    for r in regs_in(src):
                        changed |= use(r, bits)
                continue
            if base in ("add", "sub", "neg") or (base in ("mul", "mad") and "lo" in mods):
                for s in srcs:
                    for r in regs_in(s):
                        changed |= use(r, _low(d))
                continue
            changed |= use_all(srcs)
    return dem


def load_widths(ptx: str, entry: str, trace: AccessTrace) -> dict[int, int] | None:
    """For each scalar global load of the trace (its instruction index): how many low bits of
    the loaded value the kernel uses (``msb(demanded) + 1``). None when the trace's instructions
    cannot be matched with the PTX program's (then nothing is known)."""
    from gpuadvise.ptx.cfg import build_program
    from gpuadvise.ptx.emulator import static_accesses
    from gpuadvise.ptx.parser import Reg, parse_ptx

    try:
        program = build_program(parse_ptx(ptx), entry)
    except Exception:
        return None
    static = sorted((i, int(sp)) for i, sp, _k, _w in static_accesses(program))
    out: dict[int, int] = {}
    k = 0
    pairs: list[tuple[int, int]] = []
    for t, info in enumerate(trace.instructions):
        parts = {m.split("::")[0] for m in info.opcode.split(".")}
        if not parts & {"global", "shared", "local", "const"}:
            continue  # a generic access: not among the declared ones
        if k >= len(static):
            return None
        idx, sp = static[k]
        k += 1
        if program.instrs[idx].opcode != info.opcode or sp != int(info.space):
            return None
        pairs.append((t, idx))
    if k != len(static):
        return None
    dem = demanded_bits(program.instrs, program.regs)
    for t, idx in pairs:
        ins = program.instrs[idx]
        if (
            ins.base not in ("ld", "ldu")
            or not ins.operands
            or not isinstance(ins.operands[0], Reg)
        ):
            continue
        out[t] = dem.get(ins.operands[0].name, 0).bit_length()
    return out


# ---------------------------------------------------------------------------------------------
# Proxy synthesis


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


def _spec(pattern: Pattern, kernel: str, buffers: Sequence[tuple[str, int]], title: str) -> str:
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
        lines.append(f'{name} = {{ type = "unsigned", count = {count}, fill = "iota" }}')
    lines.append(f'out = {{ type = "unsigned", count = {pattern.threads}, fill = "zeros" }}')
    return "\n".join(lines) + "\n"


def _prologue(pattern: Pattern, what: str) -> str:
    import textwrap

    gx, gy, _ = pattern.grid
    bx, by, _ = pattern.block
    text = (
        f"gpuadvise PROXY: synthesized from the trace of {pattern.where or 'a kernel'}; not the "
        f"user's kernel. It reproduces that line's loads of `{pattern.buffer}` (grid {gx}x{gy}, "
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


def _segments(pattern: Pattern) -> list[int]:
    """The first word of each field's array in the SoA buffer, and the buffer's words at the end
    (each array 256-byte aligned)."""
    out, at = [], 0
    for f in pattern.fields:
        out.append(at)
        at += _align_up(pattern.count * f.words, 64)
    return [*out, at]


def soa_proxy(pattern: Pattern) -> Proxy:
    """GA301's proxy: ``ga301_aos`` reads the pattern's fields from an array of structures of
    ``pattern.words`` words per element; ``ga301_soa`` reads each field from an array of its
    own (the arrays back to back in one buffer, each 256-byte aligned)."""
    seg = _segments(pattern)
    what = (
        f"in the old layout (ga301_aos: an array of {pattern.elem_bytes}-byte structures) and in "
        f"the new one (ga301_soa: one array per field read, {len(pattern.fields)} arrays)"
    )
    aos_body = _visit_chain(pattern.fields, _aos_load(pattern), lambda j, c, comp: comp)

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
    src = "\n\n".join(
        [
            _prologue(pattern, what),
            _visit_function("visit_aos", "const unsigned* __restrict__ p", aos_body, pattern.one_d),
            _visit_function("visit_soa", "const unsigned* __restrict__ p", soa_body, pattern.one_d),
            _kernel("ga301_aos", "const unsigned* __restrict__ aos", "visit_aos", "aos", pattern),
            _kernel("ga301_soa", "const unsigned* __restrict__ soa", "visit_soa", "soa", pattern),
        ]
    )
    return Proxy(
        source=src + "\n",
        before="ga301_aos",
        after="ga301_soa",
        spec_before=_spec(
            pattern, "ga301_aos", [("aos", pattern.count * pattern.words)], "GA301, old layout"
        ),
        spec_after=_spec(pattern, "ga301_soa", [("soa", seg[-1])], "GA301, new layout"),
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
