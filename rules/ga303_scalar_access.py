"""GA303 scalar-global-access: consecutive per-thread scalar global accesses one vector would do."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    counted,
    dram_bytes_per_s,
    launch_change_estimate,
    line_of,
    parse_expression,
    roofline,
    same_source_file,
    sm_cycles_per_s,
    view_traffic,
    work_ratio,
)

L1_SECTORS_PER_CLOCK = 4
"""L1TEX data-stage throughput per SM: 128 bytes (4 sectors) per clock from Volta to Hopper; a
warp-level request takes at least one clock whatever it touches."""

_VECTORS = (16, 8)  # vector widths tried, widest first
_CHUNK = 1 << 16
"""Records whose addresses are compared at once (a few MB): GA303 reads the trace's records in
place, chunk by chunk, instead of copying the addresses of every global access."""
NOTE_BELOW = 1.02
"""Findings whose estimated bound is below this (a DRAM-bound kernel) are notes, not warnings."""

# element type -> (size in bytes, the vector type of 2 and of 4 of them with .x .y .z .w members)
_NATIVE: dict[str, tuple[int, dict[int, str]]] = {
    "float": (4, {2: "float2", 4: "float4"}),
    "int": (4, {2: "int2", 4: "int4"}),
    "signed": (4, {2: "int2", 4: "int4"}),
    "signed int": (4, {2: "int2", 4: "int4"}),
    "int32_t": (4, {2: "int2", 4: "int4"}),
    "unsigned": (4, {2: "uint2", 4: "uint4"}),
    "unsigned int": (4, {2: "uint2", 4: "uint4"}),
    "uint32_t": (4, {2: "uint2", 4: "uint4"}),
    "double": (8, {2: "double2"}),
    "long long": (8, {2: "longlong2"}),
    "long long int": (8, {2: "longlong2"}),
    "int64_t": (8, {2: "longlong2"}),
    "unsigned long long": (8, {2: "ulonglong2"}),
    "unsigned long long int": (8, {2: "ulonglong2"}),
    "uint64_t": (8, {2: "ulonglong2"}),
}
# other element types of a known size: loaded as raw words and reinterpreted
_RAW_SIZES: dict[str, int] = {
    "uchar4": 4, "char4": 4, "short2": 4, "ushort2": 4, "half2": 4, "__half2": 4,
    "__nv_bfloat162": 4, "nv_bfloat162": 4,
    "float2": 8, "int2": 8, "uint2": 8, "short4": 8, "ushort4": 8, "long": 8, "unsigned long": 8,
    "size_t": 8,
}  # fmt: skip
_RAW_VECTOR = {8: "uint2", 16: "uint4"}
_COMPONENTS = ("x", "y", "z", "w")
_CAST_TYPES = (
    "unsigned", "int", "unsigned int", "long", "unsigned long", "long long",
    "unsigned long long", "size_t", "int64_t", "uint64_t", "int32_t", "uint32_t",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The trace side: which scalar accesses of one thread are consecutive


@dataclass
class _Execs:
    """The executions of one PTX global access, ordered by (CTA, warp), then trace order."""

    inst: int
    file: str | None
    line: int | None
    kind: int
    width: int
    rec: np.ndarray  # record indices
    warp_key: np.ndarray
    mask: np.ndarray
    records: np.ndarray  # the trace's records (not a copy): addresses are read chunk by chunk

    def addr_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(addresses, active lanes) of the executions, ``_CHUNK`` records at a time: the
        addresses of every execution are never copied at once."""
        addr = self.records["addr"]
        for i in range(0, len(self.rec), _CHUNK):
            yield addr[self.rec[i : i + _CHUNK]], _active(self.mask[i : i + _CHUNK])


@dataclass(frozen=True)
class _Piece:
    """Consecutive scalar accesses (address order) that one aligned vector access would make."""

    execs: tuple[_Execs, ...]
    vector: int  # bytes

    @property
    def width(self) -> int:
        return self.execs[0].width

    @property
    def executions(self) -> int:
        return len(self.execs[0].rec)

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({e.line for e in self.execs if e.line is not None}))


def _active(mask: np.ndarray) -> np.ndarray:
    m = np.ascontiguousarray(mask, dtype="<u4").reshape(-1)
    return np.unpackbits(m.view(np.uint8), bitorder="little").view(bool).reshape(-1, 32)


def _exec_tables(trace: Any, widths: Sequence[int]) -> list[_Execs]:
    from gpuadvise.rules import Kind, Space

    records = trace.records
    rec_inst = records["inst"].astype(np.int64)
    order = np.argsort(rec_inst, kind="stable")
    bounds = np.searchsorted(rec_inst[order], np.arange(len(trace.instructions) + 1))
    out = []
    for info in trace.instructions:
        if info.space != Space.GLOBAL or info.kind not in (Kind.LOAD, Kind.STORE):
            continue
        if info.width not in widths:
            continue
        idx = order[bounds[info.inst] : bounds[info.inst + 1]]
        # the reconciled trace may have widened the records of an instruction ptxas merged
        # (the fields are read one by one: no copy of the records and their addresses)
        keep = (records["width"][idx] == info.width) & (records["space"][idx] == int(Space.GLOBAL))
        idx = idx[keep]
        if not len(idx):
            continue
        wk = (records["cta"][idx].astype(np.int64) << np.int64(20)) + records["warp"][idx].astype(
            np.int64
        )
        o = np.argsort(wk, kind="stable")
        out.append(
            _Execs(
                inst=info.inst,
                file=os.path.normpath(info.file) if info.file else None,
                line=info.line,
                kind=int(info.kind),
                width=info.width,
                rec=idx[o],
                warp_key=wk[o],
                mask=records["mask"][idx[o]],
                records=records,
            )
        )
    return out


def _follows(a: _Execs, b: _Execs) -> bool:
    """B follows A: executed by the same warps with the same lanes, and every active lane of
    every execution accesses B's element right after A's (address + width)."""
    if len(a.rec) != len(b.rec) or a.width != b.width:
        return False
    if not (np.array_equal(a.warp_key, b.warp_key) and np.array_equal(a.mask, b.mask)):
        return False
    step = np.uint64(a.width)
    b_addr = b.records["addr"]
    for i, (addr, act) in enumerate(a.addr_chunks()):
        nxt = b_addr[b.rec[i * _CHUNK : (i + 1) * _CHUNK]]
        if not bool(((nxt == addr + step) | ~act).all()):
            return False
    return True


def _aligned(e: _Execs, nbytes: int) -> bool:
    n = np.uint64(nbytes)
    return all(bool((((addr % n) == 0) | ~act).all()) for addr, act in e.addr_chunks())


def _chains(execs: list[_Execs], max_gap: int) -> list[list[_Execs]]:
    """Chains of accesses at consecutive addresses (same file and kind, lines at most
    ``max_gap`` apart); each access takes as successor the nearest one (program order)."""
    chains: list[list[_Execs]] = []
    groups: dict[tuple[str | None, int, int], list[_Execs]] = {}
    for e in execs:
        groups.setdefault((e.file, e.kind, e.width), []).append(e)
    for group in groups.values():
        order = sorted(group, key=lambda e: e.inst)
        succ: dict[int, _Execs] = {}
        has_pred: set[int] = set()
        for a in order:
            cands = sorted(
                (
                    b
                    for b in order
                    if b is not a
                    and a.line is not None
                    and b.line is not None
                    and abs(a.line - b.line) <= max_gap
                ),
                key=lambda b: (abs(b.inst - a.inst), -b.inst),
            )
            for b in cands:
                if b.inst not in has_pred and _follows(a, b):
                    succ[a.inst] = b
                    has_pred.add(b.inst)
                    break
        for e in order:
            if e.inst in has_pred or e.inst not in succ:
                continue
            chain = [e]
            while chain[-1].inst in succ and len(chain) <= len(order):
                chain.append(succ[chain[-1].inst])
            chains.append(chain)
    return chains


def _pieces(chain: list[_Execs]) -> list[_Piece]:
    """The chain cut, from its head, into the widest aligned vectors (16, then 8 bytes)."""
    out: list[_Piece] = []
    w = chain[0].width
    i = 0
    while i < len(chain):
        for v in _VECTORS:
            n = v // w
            if n >= 2 and i + n <= len(chain) and _aligned(chain[i], v):
                out.append(_Piece(tuple(chain[i : i + n]), v))
                i += n
                break
        else:
            i += 1
    return out


def _buffer_of(trace: Any, piece: _Piece) -> str | None:
    e = piece.execs[0]
    lows = [int(addr[act].min()) for addr, act in e.addr_chunks() if act.any()]
    if not lows:
        return None
    a = min(lows)
    for name, (base, size) in trace.buffers.items():
        if int(base) <= a < int(base) + int(size):
            return str(name)
    return None


# ---------------------------------------------------------------------------------------------
# The SASS side: did ptxas merge them already?


@dataclass(frozen=True)
class _SassAt:
    scalar: int  # SASS global instructions of this kind at the lines, of the element's width
    wider: int  # ... wider than the element
    opcodes: tuple[str, ...]
    ptx_scalar: int  # PTX instructions of this kind and width at the lines

    @property
    def known(self) -> bool:
        return self.scalar + self.wider > 0

    @property
    def merged(self) -> bool:
        """ptxas turned some of the scalar PTX accesses into wider SASS ones."""
        return self.known and self.scalar < self.ptx_scalar and self.wider > 0

    def text(self, width: int) -> str:
        if not self.known:
            return "no SASS line information at these lines"
        return (
            f"{self.scalar} x {8 * width}-bit"
            + (f" and {self.wider} wider" if self.wider else "")
            + f" ({', '.join(self.opcodes)})"
        )


def _sass_at(
    sass_lines: Sequence[Any], trace: Any, file: str | None, lines: Sequence[int], kind: int,
    width: int,
) -> _SassAt:  # fmt: skip
    kname = "load" if kind == 0 else "store"
    scalar = wider = 0
    opcodes: list[str] = []
    for s in sass_lines:
        if s.line not in lines or s.kind != kname or s.space not in ("global", "generic"):
            continue
        if not same_source_file(s.file, file):
            continue
        if s.width_bits == 8 * width:
            scalar += s.count
        elif s.width_bits > 8 * width:
            wider += s.count
        opcodes += [op for op in s.opcodes if op not in opcodes]
    ptx = sum(
        1
        for i in trace.instructions
        if i.line in lines
        and int(i.space) == 0
        and int(i.kind) == kind
        and i.width == width
        and same_source_file(i.file, file)
    )
    return _SassAt(scalar, wider, tuple(opcodes), ptx)


# ---------------------------------------------------------------------------------------------
# The source side: the accesses, their index, and the rewrite


_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})


@dataclass(frozen=True)
class _Access:
    start: int  # offsets in the file's text of ``name[...]`` (end exclusive)
    end: int
    index: str  # the subscript, whitespace normalized
    base: str  # the index without a trailing ``+ c``
    offset: int  # c
    store: bool
    compound: bool
    base_span: tuple[int, int] = (0, 0)  # where the base is in the text


def _norm(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


def _split_offset(ks: KernelSource, index: tuple[int, int]) -> tuple[str, int, tuple[int, int]]:
    """``i + 3`` -> (``i``, 3); ``i`` -> (``i``, 0): a trailing ``+ <decimal literal>`` only."""
    e = ks.expr(index)
    if e is not None and e.kind == "binary" and e.op == "+":
        left, right = e.args
        if right.kind == "literal" and re.fullmatch(r"\d+[uU]?", right.text):
            return left.text, int(right.text.rstrip("uU")), left.span
    return _norm(ks.code[index[0] : index[1]]), 0, index


def _accesses(ks: KernelSource, name: str, lines: Sequence[int]) -> list[_Access]:
    """Every ``name[...]`` on ``lines`` of the kernel body (its first subscript)."""
    out = []
    for sub in ks.subscripts(name):
        if ks.line_at(sub.span[0]) not in lines:
            continue
        first = sub.indices[0]
        end = first[1] + 1  # after its ``]``
        e = ks.expr(sub.span)
        parent = ks.expr_parent(sub.span)
        store = compound = False
        if parent is not None and parent.kind == "assignment" and parent.args[0].span == sub.span:
            store, compound = parent.op == "=", parent.op != "="
        elif parent is not None and parent.kind == "update":
            compound = True
        if e is None:
            continue
        base, off, base_span = _split_offset(ks, first)
        index = _norm(ks.code[first[0] : first[1]])
        out.append(_Access(sub.span[0], end, index, base, off, store, compound, base_span))
    return out


def _identifiers(ks: KernelSource, span: tuple[int, int]) -> set[str]:
    return {n for n, _ in ks.identifiers(span)} - _BUILTINS


def _modified(ks: KernelSource, ident: str, within: tuple[int, int] | None = None) -> bool:
    """Whether ``ident`` is assigned (its declaration's initializer included) in the body."""
    return bool(ks.assignments(ident, within))


def _definition(ks: KernelSource, ident: str) -> tuple[int, int] | None:
    """Where the expression ``ident`` is initialized with is, when that is its only
    assignment in the body."""
    a = ks.assignments(ident)
    if len(a) != 1 or a[0].kind not in ("init", "assign") or a[0].value is None:
        return None
    return a[0].value


def multiple_of(ks: KernelSource, expr: Any, n: int, depth: int = 0) -> bool:
    """Whether the integer expression ``expr`` (an :class:`Expr`, a span of the file or a text)
    is a multiple of ``n`` (a power of two) by construction: sums of terms each a multiple; a
    term is a product with a multiple factor, a shift left by enough bits, a literal multiple,
    or a variable whose only assignment (its initialization in the body) is such an
    expression. Unsigned wrap-around keeps multiples of a power of two."""
    if depth > 8 or n <= 1:
        return n <= 1
    if isinstance(expr, str):
        expr = parse_expression(expr)
    elif isinstance(expr, tuple):
        expr = ks.expr(expr)
    if expr is None:
        return False
    e = expr.stripped(_CAST_TYPES)
    terms = e.chain("+-")
    if len(terms) > 1:
        return all(multiple_of(ks, t, n, depth + 1) for _op, t in terms)
    if e.kind == "binary" and e.op == "<<":
        x, sh = e.args
        s = sh.stripped()
        if s.kind == "literal" and re.fullmatch(r"\d+[uU]?", s.text):
            return (1 << int(s.text.rstrip("uU"))) % n == 0 or multiple_of(ks, x, n, depth + 1)
        return False
    factors = e.chain("*/%")
    if len(factors) > 1:
        if any(op in ("/", "%") for op, _ in factors):
            return False  # (a * b) / c, a % c: not provably a multiple
        return any(multiple_of(ks, f, n, depth + 1) for _op, f in factors)
    if e.kind == "literal":
        v = ks.value(e.text)
        return v is not None and v % n == 0
    if e.kind == "name":
        d = _definition(ks, e.text)
        return d is not None and multiple_of(ks, d, n, depth + 1)
    return False


@dataclass(frozen=True)
class _Rewrite:
    diff: str | None
    why_not: str  # why there is no diff ("" when there is one)
    vector_type: str = ""
    index: str = ""
    automatic: bool = False
    why_display: str = ""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _fresh(body: str, want: str) -> str:
    name, k = want, 2
    while re.search(rf"\b{re.escape(name)}\b", body):
        name, k = f"{want}{k}", k + 1
    return name


def _vector_for(elem: str, size: int, n: int) -> tuple[str, bool] | None:
    """(vector type, native: has .x .y .z .w members of the element type) for n elements."""
    native = _NATIVE.get(elem)
    if native is not None and native[0] == size and n in native[1]:
        return native[1][n], True
    if _RAW_SIZES.get(elem, native[0] if native else 0) == size and size * n in _RAW_VECTOR:
        return _RAW_VECTOR[size * n], False
    return None


def rewrite(
    ks: KernelSource, path: str, name: str, elem: str, is_const: bool, width: int, vector: int,
    lines: Sequence[int], store: bool,
) -> _Rewrite:  # fmt: skip
    """A diff making the ``vector // width`` consecutive accesses ``name[E + c]`` on ``lines``
    one vector access, or why not; and whether the alignment is provable (automatic)."""
    n = vector // width
    vt = _vector_for(elem, width, n)
    if vt is None:
        return _Rewrite(None, f"no vector type of {n} {elem} is known to gpuadvise")
    vtype, native = vt
    every = _accesses(ks, name, lines)
    acc = [a for a in every if a.store == store]
    if any(a.compound for a in every):
        return _Rewrite(None, f"{name} is read and written by one expression")
    by_base: dict[str, list[_Access]] = {}
    for a in acc:
        by_base.setdefault(a.base, []).append(a)
    group = None
    for base, items in by_base.items():
        offs = sorted(a.offset for a in items)
        lo = offs[0]
        if offs == list(range(lo, lo + n)) and lo % n == 0:
            group = (base, sorted(items, key=lambda a: a.offset))
    if group is None or len(acc) != n:
        found = ", ".join(f"{name}[{a.index}]" for a in acc) or "none"
        return _Rewrite(
            None,
            f"the source does not show {n} accesses {name}[E + 0..{n - 1}] here (found: {found})",
        )
    base, items = group
    lo = items[0].offset
    index = base if lo == 0 else f"{base} + {lo}"
    base_span = items[0].base_span
    for ident in _identifiers(ks, base_span):
        if ident == name:
            return _Rewrite(None, "the index reads the array itself")
    if _modified(ks, name):
        return _Rewrite(None, f"the pointer {name} is changed in the kernel")
    if store:
        rw = _rewrite_stores(ks, path, name, elem, vtype, native, items, index)
    else:
        rw = _rewrite_loads(ks, path, name, elem, is_const, vtype, native, items, index, vector)
    if rw.diff is None:
        return rw
    if multiple_of(ks, base_span, n) and lo % n == 0:
        auto, why = True, ""
    else:
        ident_defs = [
            f"{i} = {_norm(ks.code[d[0] : d[1]])}"
            for i in sorted(_identifiers(ks, base_span))
            if (d := _definition(ks, i))
        ]
        shown = f"`{base}`" + (f" ({'; '.join(ident_defs)})" if ident_defs else "")
        why = (
            f"the index {shown} is not a multiple of {n} by construction, so {vector}-byte "
            "alignment cannot be proven from the source (every traced access was aligned)"
        )
        auto = False
    return _Rewrite(rw.diff, "", vtype, index, auto, why)


def _component(vname: str, ename: str, native: bool, j: int) -> str:
    return f"{vname}.{_COMPONENTS[j]}" if native else f"{ename}[{j}]"


def _rewrite_loads(
    ks: KernelSource, path: str, name: str, elem: str, is_const: bool, vtype: str, native: bool,
    items: list[_Access], index: str, vector: int,
) -> _Rewrite:  # fmt: skip
    first = min(items, key=lambda a: a.start)
    st = ks.statement_at(first.start)
    if st is None or any(not (st.start <= a.start < st.end) for a in items):
        return _Rewrite(
            None, "the accesses are not in one statement (or are in an if/for/while header)"
        )
    code, text = ks.code, ks.text
    stmt_code = code[st.start : st.end]
    if st.labelled:
        return _Rewrite(None, "the statement carries a label")
    for ident in sorted(_identifiers(ks, items[0].base_span)):
        if _modified(ks, ident, (st.start, st.end)):
            return _Rewrite(None, f"the statement changes {ident}, which the index reads")
    line0 = line_of(text, st.start)
    line1 = line_of(text, st.end)
    line_start = text.rfind("\n", 0, st.start) + 1
    if code[line_start : st.start].strip():
        return _Rewrite(None, "the statement shares its first line with other code")
    if code[st.end + 1 : text.find("\n", st.end) if "\n" in text[st.end :] else len(text)].strip():
        return _Rewrite(None, "the statement shares its last line with other code")
    body = code[ks.body_start : ks.body_end + 1]
    vname = _fresh(body, f"{name}_v")
    ename = _fresh(body, f"{name}_e")
    cq = "const " if is_const else ""
    n = len(items)
    comment = f"  // {name}[{index}] .. {name}[{index} + {n - 1}] in one {vector}-byte access"
    decl = [f"const {vtype} {vname} = *reinterpret_cast<{cq}{vtype}*>(&{name}[{index}]);{comment}"]
    if not native:
        decl.append(f"const {elem}* {ename} = reinterpret_cast<const {elem}*>(&{vname});")

    def replaced(seg_start: int, seg_end: int) -> str:
        """The text of ``seg_start:seg_end`` with the accesses replaced (right to left)."""
        out = text[seg_start:seg_end]
        for a in sorted(items, key=lambda a: a.start, reverse=True):
            if seg_start <= a.start < seg_end:
                j = a.offset - items[0].offset
                r0, r1 = a.start - seg_start, a.end - seg_start
                out = out[:r0] + _component(vname, ename, native, j) + out[r1:]
        return out

    old_lines = text.split("\n")
    ed = ks.rewrite()
    ind = _indent(old_lines[line0 - 1])
    last_line_end = text.find("\n", st.end)
    last_line_end = len(text) if last_line_end < 0 else last_line_end
    tern = _ternary(ks, st)
    has_cond = any(tok in stmt_code for tok in ("?", "&&", "||"))
    if tern is None and has_cond:
        return _Rewrite(
            None, "the accesses are evaluated conditionally (?:, && or ||) within the statement"
        )
    if tern is not None:
        lhs, cond, (off_yes, end_yes), no = tern
        yes = code[off_yes:end_yes]
        if any(not (off_yes <= a.start < off_yes + len(yes)) for a in items):
            return _Rewrite(None, "the accesses are not all in the taken branch of ?:")
        if any(t in cond + no for t in ("?", "&&", "||")) or any(
            t in yes for t in ("?", "&&", "||")
        ):
            return _Rewrite(None, "the statement's condition is too complex to rewrite")
        if st.header_end is not None or re.match(r"[A-Za-z_][\w\s:<>,*&]*\s+\w+$", lhs.strip()):
            return _Rewrite(None, "a declaration or braceless body holds the ?: statement")
        tail = text[st.end + 1 : last_line_end]
        yes_text = replaced(off_yes, off_yes + len(yes))
        inner = ind + "    "
        new = [f"{ind}if ({_norm(cond)}) {{"]
        new += [inner + d for d in decl]
        new += [f"{inner}{_norm(lhs)} = {_norm(yes_text)};{tail}", f"{ind}}} else {{"]
        new += [f"{inner}{_norm(lhs)} = {_norm(no)};", f"{ind}}}"]
        ed.replace_lines(line0, line1, new)
        return _Rewrite(ed.diff(path), "")
    new_stmt = replaced(line_start, last_line_end).split("\n")
    if st.header_end is None:
        ed.replace_lines(line0, line1, [ind + d for d in decl] + new_stmt)
        return _Rewrite(ed.diff(path), "")
    # the body of a braceless if/for/while/else: give it braces
    hline = line_of(text, st.header_end - 1)
    if hline != line0 - 1 or code[st.header_end : text.find("\n", st.header_end)].strip():
        return _Rewrite(None, "the statement is a braceless body on its header's line")
    hl = old_lines[hline - 1]
    hcode = code[text.rfind("\n", 0, st.header_end - 1) + 1 : text.find("\n", st.header_end)]
    if len(hcode.rstrip()) != len(hl.rstrip()):
        return _Rewrite(None, "the control header has a comment after it")
    hind = _indent(hl)
    ed.replace_lines(hline, hline, [hl.rstrip() + " {"])
    ed.replace_lines(line0, line1, [ind + d for d in decl] + new_stmt + [hind + "}"])
    return _Rewrite(ed.diff(path), "")


def _ternary(ks: KernelSource, st: Any) -> tuple[str, str, tuple[int, int], str] | None:
    """``LHS = COND ? A : B;`` (an assignment or a one-declarator declaration): the left side's
    and the condition's code, the taken branch's span, the other branch's code; None when the
    statement is not one."""
    if st.kind == "expression_statement":
        e = ks.expr((st.start, st.end))
        if e is None or e.kind != "assignment" or e.op != "=":
            return None
        lhs_end, value = e.args[0].span[1], e.args[1]
    elif st.kind == "declaration":
        inits = [d for d in ks.declarations(within=(st.start, st.end + 1))]
        dd = inits[0].declarators if len(inits) == 1 else ()
        if len(dd) != 1 or dd[0].init is None:
            return None
        value = ks.expr(dd[0].init)
        lhs_end = dd[0].name_span[1]
        if value is None:
            return None
    else:
        return None
    if value.kind != "conditional" or len(value.args) != 3:
        return None
    cond, yes, no = value.args
    return ks.code[st.start : lhs_end], cond.text, yes.span, no.text


def _rewrite_stores(
    ks: KernelSource, path: str, name: str, elem: str, vtype: str, native: bool,
    items: list[_Access], index: str,
) -> _Rewrite:  # fmt: skip
    code, text = ks.code, ks.text
    stmts = []
    for a in sorted(items, key=lambda a: a.start):
        st = ks.statement_at(a.start)
        if st is None or st.start != a.start or st.header_end is not None:
            return _Rewrite(None, "each store must be a plain statement `a[i + c] = value;`")
        stmts.append((a, st))
    # consecutive statements, nothing between them
    for (_a, s0), (_b, s1) in zip(stmts, stmts[1:], strict=False):
        if code[s0.end + 1 : s1.start].strip():
            return _Rewrite(None, "the stores are not consecutive statements")
    values = []
    for a, st in stmts:
        m = re.match(r"\s*=", code[a.end : st.end])
        assert m is not None
        rhs = text[a.end + m.end() : st.end]
        if ks.uses(name, within=(a.end + m.end(), st.end)):
            return _Rewrite(None, f"a stored value reads {name}")
        values.append((a.offset, _norm(rhs)))
    values.sort()
    first, last = stmts[0][1], stmts[-1][1]
    line0, line1 = line_of(text, first.start), line_of(text, last.end)
    old_lines = text.split("\n")
    line_start = text.rfind("\n", 0, first.start) + 1
    end_line = text.find("\n", last.end)
    end_line = len(text) if end_line < 0 else end_line
    if code[line_start : first.start].strip() or code[last.end + 1 : end_line].strip():
        return _Rewrite(None, "the stores share their lines with other code")
    tail = text[last.end + 1 : end_line]
    ind = _indent(old_lines[line0 - 1])
    body = code[ks.body_start : ks.body_end + 1]
    ptr = f"*reinterpret_cast<{vtype}*>(&{name}[{index}])"
    if native:
        new = [f"{ind}{ptr} = make_{vtype}({', '.join(v for _o, v in values)});{tail}"]
    else:
        vname, ename = _fresh(body, f"{name}_v"), _fresh(body, f"{name}_e")
        new = [f"{ind}{{", f"{ind}    {vtype} {vname};"]
        new.append(f"{ind}    {elem}* {ename} = reinterpret_cast<{elem}*>(&{vname});")
        new += [f"{ind}    {ename}[{j}] = {v};" for j, (_o, v) in enumerate(values)]
        new += [f"{ind}    {ptr} = {vname};{tail}", f"{ind}}}"]
    ed = ks.rewrite()
    ed.replace_lines(line0, line1, new)
    return _Rewrite(ed.diff(path), "")


# ---------------------------------------------------------------------------------------------
# The rule


@dataclass(frozen=True)
class _Group:
    """The pieces of one finding (one source line, one buffer, one kind)."""

    pieces: tuple[_Piece, ...]
    buffer: str | None
    sass: _SassAt


@dataclass(frozen=True)
class ScalarRun(FindingDetails):
    """One finding's group in numbers: the buffer (None: unknown), the kind (0 load, 1 store),
    the source lines, the element and vector widths in bytes, the pieces (runs of consecutive
    accesses), the instructions one thread saves, the file of the first access, and the
    requests/sectors/clocks of ``_numbers`` with the totals over the traced CTAs."""

    buffer: str | None
    kind: int
    lines: tuple[int, ...]
    width: int
    vector: int
    pieces: int
    saved_per_thread: int
    file: str | None
    numbers: dict[str, int | float]


class ScalarGlobalAccess(Rule):
    """Consecutive scalar global accesses of one thread that one 8- or 16-byte access would do.

    What it detects
    ---------------
    From the traced run: global loads (or stores) of 4- or 8-byte elements that the same thread
    makes at consecutive addresses, from one source line or lines at most ``max_line_gap`` apart
    (``in[i]``, ``in[i + 1]``, ... ``in[i + 3]``), executed by the same warps with the same
    lanes, where the first address is 8- or 16-byte aligned on every active lane of every traced
    execution. The SASS must show that ptxas did not merge them already: the line still has
    as many SASS accesses of the element's width (``LDG.E``) as the PTX has, not an
    ``LDG.E.64``/``LDG.E.128``. Reported at the line of the first access.

    Why it is slow
    --------------
    Every memory instruction costs an issue slot, an LSU request and an L1 tag lookup whatever
    it carries: four 4-byte loads of neighbouring pixels take four requests and, when the
    threads of a warp are 16 bytes apart, touch every sector four times, where one 16-byte load
    takes one request and touches each sector once. When the kernel streams from DRAM, the
    sectors are fetched once either way (L1 keeps them between the scalar loads), so the gain
    is in instructions and L1 work, not in DRAM traffic: a DRAM-bound kernel gains little.

    Example
    -------
    ``kernels/luminance/luminance.cu``: ``lum_prefetch2`` reads two neighbouring ``uchar4`` pixels
    with ``in[i]`` and ``in[i + 1]``, ``lum_prefetch4`` four; ``lum_prefetch4_vec`` is the
    16-byte version. ``lum_prefetch4_quad`` indexes by 4-pixel quads (``i = 4 * q``), so the
    alignment is provable and the rewrite automatic.

    Fix
    ---
    Load the elements as one vector and take them apart in registers::

        const uint4 in_v = *reinterpret_cast<const uint4*>(&in[i]);  // i % 4 == 0
        const uchar4* in_e = reinterpret_cast<const uchar4*>(&in_v);
        v = luma(in_e[0]) + luma(in_e[1]) + luma(in_e[2]) + luma(in_e[3]);

    (``float4``/``int4``/``uint2``... with ``.x .. .w`` for float and int elements). The vector
    access must be aligned to its size: the index a multiple of 2 or 4, the pointer the start
    of an allocation (``cudaMalloc`` returns 256-byte aligned memory). Stores likewise:
    ``*reinterpret_cast<float4*>(&out[i]) = make_float4(a, b, c, d);``.

    How the estimate is made
    ------------------------
    An upper bound on the launch roofline (gpuadvise.model.roofline; the traced CTAs times the
    trace's scale): the L1 data path of all global accesses, each warp-level request taking
    ``max(1, sectors / 4)`` clocks of an SM (128 bytes per clock), the L2 sectors, the DRAM
    bytes, the issue of the memory instructions and the latency term. With the finding's
    accesses vectorized (one request per vector, its own sectors) the L1 cycles and the
    instructions drop and the sectors stay; the launch takes at least its largest term before
    and after (both with DRAM at peak bandwidth for the bound, at sustained rates for the point
    value in the inputs). When DRAM, L2 or latency bounds both sides, that is 1.0x and the
    finding says so (and is a note, not a warning): vectorizing moves the same sectors. The
    inputs give the requests and instructions saved; ALU instructions and overlap between the
    terms are left out. Without the device's rates, ``max(T_L1, T_DRAM) / max(T_L1 - saved,
    T_DRAM)``.

    Fix safety
    ----------
    A source diff when the accesses are ``a[E]``, ``a[E + 1]`` ... in one statement (loads) or
    in consecutive statements (stores) and the element type has a vector type. Automatic (built,
    verified and measured) when the alignment is provable: ``E`` is a multiple of the vector's
    element count by construction (``i = 4 * q``, a shift, a sum of such terms, through
    variables assigned once) and ``a`` is a kernel parameter the kernel never changes, taken to
    be what ``cudaMalloc`` returned (256-byte aligned: an interior pointer passed by the host
    would break it, as it would any vector access). Otherwise display-only: the diff holds for
    the traced launch (every access was aligned) but not provably for every launch
    (``i = gy * w + gx`` is aligned only when ``w`` is a multiple of 4). Loads guarded by
    ``c ? a[i] : 0`` become an ``if``/``else`` that keeps the guard.
    """

    id = "GA303"
    name = "scalar-global-access"
    title = "Scalar global accesses where one vector access would do"
    severity = "warning"
    models = ("trace", "sass", "source")
    options = {"max_line_gap": 2}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        trace = ctx.trace
        execs = _exec_tables(trace, (4, 8))
        if not execs:
            return
        chains = _chains(execs, int(ctx.option("max_line_gap")))
        pieces = [p for c in chains for p in _pieces(c)]
        if not pieces:
            return
        sass_lines = ctx.sass_lines_innermost
        # every global access's totals and sectors: made for the first finding
        totals: dict[str, Any] = {}
        per_record = np.zeros(0, np.int64)
        groups: dict[tuple[str | None, int, int, str | None], list[_Piece]] = {}
        for p in pieces:
            first = p.lines[0] if p.lines else 0
            key = (p.execs[0].file, first, p.execs[0].kind, _buffer_of(trace, p))
            groups.setdefault(key, []).append(p)
        ordered = sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1], kv[0][2]))
        for (file, line, kind, buf), ps in ordered:
            lines = sorted({ln for p in ps for ln in p.lines})
            sat = _sass_at(sass_lines, trace, file, lines, kind, ps[0].width)
            if sat.merged:
                continue
            g = _Group(tuple(ps), buf, sat)
            if not totals:
                totals, per_record = _global_totals(trace.records)
            nums = {**_numbers(trace, g, per_record), **totals}
            w = ps[0].width
            vec = max(p.vector for p in ps)
            n = sum(len(p.execs) for p in ps)
            what = "loads" if kind == 0 else "stores"
            name = buf or "a buffer"
            per_thread = sum(len(p.execs) - 1 for p in ps)
            est = _estimate(ctx, ps[0].width, per_thread, nums)
            # a fix worth nothing on this launch (DRAM-bound) is a note unless configured
            quiet = est.speedup is not None and est.speedup < NOTE_BELOW
            # code inlined from a header (__ldg, a helper's) is reported at the user's call site
            at_file, at_line = (
                (str(ctx.source_file), line)
                if ctx.same_file(file)
                else _site(trace, ps[0], file, line)
            )
            yield self.finding(
                ctx,
                f"{n} scalar {w}-byte {what} of {name} per thread at consecutive addresses "
                f"(aligned to {vec} bytes in every traced execution) make "
                f"{nums['requests_before']} warp-level requests in the {len(trace.ctas)} traced "
                f"CTAs where {nums['requests_after']} {vec}-byte ones would do; the SASS has "
                f"{sat.text(w)}",
                line=at_line,
                file=at_file,
                severity=ctx.severity or ("note" if quiet else None),
                evidence=[
                    Evidence("consecutive_accesses", n, 2, ">=", "accesses/thread"),
                    Evidence("element_bytes", w, unit="B"),
                    Evidence("vector_bytes", vec, unit="B"),
                    Evidence("aligned_executions", nums["executions"], unit="warp executions"),
                    Evidence("sass_scalar_accesses", sat.scalar, sat.ptx_scalar, ">="),
                    Evidence("sass_opcodes", ", ".join(sat.opcodes) or "none"),
                    Evidence("requests", nums["requests_before"], unit="requests"),
                    Evidence("requests_vectorized", nums["requests_after"], unit="requests"),
                    Evidence("l1_sectors", nums["sectors_before"], unit="sectors"),
                    Evidence("l1_sectors_vectorized", nums["sectors_after"], unit="sectors"),
                ],
                details=ScalarRun(
                    buf,
                    int(kind),
                    tuple(int(x) for x in lines),
                    int(w),
                    int(vec),
                    len(ps),
                    int(per_thread),
                    ps[0].execs[0].file,
                    {k: _plain(v) for k, v in nums.items()},
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(ScalarRun)
        return _estimate(ctx, d.width, d.saved_per_thread, d.numbers)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(ScalarRun)
        kind = d.kind
        w = d.width
        vec = d.vector
        n = vec // w
        name = d.buffer
        types = "uint2/float2/int2" if vec == 8 else "uint4/float4/int4/double2"
        hint = (
            f"make the {n} accesses one {vec}-byte vector access ({types} through a "
            "reinterpret_cast of the element's address) and take the elements apart in "
            f"registers; the index must be a multiple of {n} and the pointer the start of an "
            "allocation"
        )
        if d.pieces != 1 or name is None or not ctx.same_file(d.file):
            return Variant("display-only", hint)
        try:
            ks = ctx.kernel_source
        except ModelUnavailable:
            return Variant("display-only", hint)
        params = _params(ks, ctx)
        p = params.get(name)
        if p is None or not p.is_pointer or p.pointee is None:
            return Variant("display-only", f"{hint} ({name} is not a pointer parameter)")
        elem = _norm(p.pointee)
        rw = rewrite(
            ks, ctx.source_file, name, elem, p.is_const, w, vec, list(d.lines),
            store=kind != 0,
        )  # fmt: skip
        if rw.diff is None:
            return Variant("display-only", f"{hint}; no diff: {rw.why_not}")
        what = f"one {vec}-byte {rw.vector_type} access at &{name}[{rw.index}]"
        if rw.automatic:
            return Variant(
                "automatic-and-verified",
                f"{what} ({rw.index} is a multiple of {n} by construction and {name} a kernel "
                "parameter, taken as cudaMalloc'ed: 256-byte aligned)",
                diff=rw.diff,
            )
        return Variant(
            "display-only",
            f"{what}; display-only: {rw.why_display}. It holds for this launch; make sure of "
            "the alignment before taking it",
            diff=rw.diff,
        )


def _plain(value: Any) -> int | float:
    """A number of ``_numbers`` as a plain Python int or float."""
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def _estimate(ctx: RuleContext, w: int, per_thread: int, nums: dict[str, Any]) -> Estimate:
    """The roofline bound of the module docstring ("How the estimate is made"): ``w``, the
    element's bytes; ``per_thread``, the instructions one thread saves."""
    trace = ctx.trace
    d = ctx.device
    scale = float(trace.scale)
    cyc_before = nums["l1_clocks_all"]
    cyc_after = cyc_before - nums["l1_clocks_saved"]
    inputs: dict[str, Any] = {
        "requests_saved": nums["requests_saved"] * scale,
        "instructions_saved_per_thread": per_thread,
        "l1_clocks": cyc_before * scale,
        "l1_clocks_saved": nums["l1_clocks_saved"] * scale,
        "scale": scale,
    }
    rate, bandwidth = sm_cycles_per_s(d), dram_bytes_per_s(d)
    if rate is None or bandwidth is None:
        sp = work_ratio(cyc_before, nums["l1_clocks_saved"])
        return Estimate(
            round(max(sp, 1.0), 3),
            "upper-bound",
            f"L1-bound kernel: {cyc_before:.0f} -> {cyc_after:.0f} L1 clocks over the traced "
            f"CTAs (no clock or bandwidth for {d.name}: DRAM time ignored)",
            inputs,
        )
    try:
        base = view_traffic(d, ctx.trace_view)
    except ModelUnavailable:
        base = None
    if base is not None:
        # the launch roofline: the same sectors from L2 and DRAM, fewer L1 requests and
        # instructions
        after = replace(
            base,
            l1_cycles=max(base.l1_cycles - nums["l1_clocks_saved"] * scale, 0.0),
            instructions=max(base.instructions - nums["requests_saved"] * scale, 0.0),
        )
        inputs["dram_bytes"] = base.dram_bytes
        est = launch_change_estimate(
            d,
            base,
            after,
            f"{counted(per_thread, f'{w}-byte instruction')} per thread vectorized",
            inputs,
        )
        if est is not None:
            if est.speedup is not None and est.speedup < NOTE_BELOW:
                what = {"dram": "DRAM", "l2": "L2", "latency": "latency"}.get(
                    str(inputs["bound_by_after"]), str(inputs["bound_by_after"])
                )
                return replace(
                    est,
                    method=f"{what}-bound: vectorizing moves the same sectors, so it saves "
                    f"{counted(per_thread, f'{w}-byte instruction')} per thread and L1 work, not time; "
                    + est.method,
                )
            return est
    dram_bytes = nums["distinct_sectors_all"] * 32 * scale
    r = roofline(cyc_before * scale, nums["l1_clocks_saved"] * scale, rate, dram_bytes, bandwidth)
    t_l1, t_saved, t_dram = r.pipe_s, r.saved_s, r.dram_s
    sp = max(r.speedup, 1.0)
    inputs.update(
        {"l1_time_us": t_l1 * 1e6, "l1_saved_us": t_saved * 1e6, "dram_time_us": t_dram * 1e6,
         "dram_bytes": dram_bytes}
    )  # fmt: skip
    bound = (
        f"DRAM-bound: vectorizing fetches the same sectors from DRAM ({dram_bytes / 1e6:.1f} "
        f"MB take {t_dram * 1e6:.2f} us at {d.mem_bandwidth_gbps:.0f} GB/s, the L1 work of all "
        f"global accesses {t_l1 * 1e6:.2f} us), so it saves {per_thread} {w}-byte "
        "instruction(s) per thread and L1 work, not time"
        if r.dram_bound
        else f"L1-bound: {t_l1 * 1e6:.2f} us of L1 work (1 request or 4 sectors per SM clock "
        f"at {d.sm_clock_mhz} MHz), {t_saved * 1e6:.2f} us of it saved; DRAM "
        f"{t_dram * 1e6:.2f} us"
    )
    return Estimate(
        round(sp, 3),
        "upper-bound",
        f"roofline over the launch, max(L1, DRAM) before / after: {bound}. Issue slots and "
        "latency are not modelled",
        inputs,
    )


def _params(ks: KernelSource, ctx: RuleContext) -> dict[str, Any]:
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import parse_signature

    try:
        return {p.name: p for p in parse_signature(ks.text, ctx.spec.kernel)}
    except GpuAdviseError:
        return {}


def _global_totals(records: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """L1 clocks and distinct sectors of every global access of the trace, taken ``_CHUNK``
    records at a time (no copy of the global records), and the sectors of each record (the
    coalescing model's; -1 for the records of other spaces), for :func:`_numbers`."""
    from gpuadvise.rules import Space, record_sectors, record_weights, touched_lines

    glob = np.flatnonzero(records["space"] == int(Space.GLOBAL))
    per_record = np.full(len(records), -1, np.int64)
    sectors: list[np.ndarray] = []
    for i in range(0, len(glob), _CHUNK):
        part = records[glob[i : i + _CHUNK]]
        rows, sect = touched_lines(part, 32)
        if len(part) and int(part["width"].max()) <= 32:
            # a lane of at most 32 bytes touches its first and last sector only: the distinct
            # (record, sector) pairs counted per record are the coalescing model's sectors
            per_record[glob[i : i + _CHUNK]] = np.bincount(rows, minlength=len(part))
        else:
            per_record[glob[i : i + _CHUNK]] = record_sectors(part).sectors
        sectors.append(_distinct_values(sect))
    distinct = len(_distinct_values(np.concatenate(sectors))) if sectors else 0
    per_clock = np.maximum(1, np.ceil(per_record[glob] / L1_SECTORS_PER_CLOCK))
    weight = record_weights(records[glob])  # a sampled loop's records stand for the skipped
    clocks = float(per_clock.sum() if weight is None else (per_clock * weight).sum())
    return {"l1_clocks_all": clocks, "distinct_sectors_all": int(distinct)}, per_record


def _distinct_values(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` by one sort (numpy 2.3+'s ``np.unique`` is a hash
    table, many times slower on millions of values)."""
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) > 1 else s


def _numbers(trace: Any, g: _Group, per_record: np.ndarray) -> dict[str, Any]:
    """Requests, L1 sectors and clocks of the group's accesses as they are and vectorized
    (over the traced CTAs); ``per_record``: each global record's sectors (:func:`_global_totals`)."""
    from gpuadvise.rules import record_sectors

    records = trace.records
    before_req = after_req = 0
    before_sec = after_sec = 0
    before_clk = after_clk = 0.0
    executions = 0
    for p in g.pieces:
        s = per_record[np.concatenate([e.rec for e in p.execs])]
        if len(s) and int(s.min()) < 0:  # not a global record (never, as the tables are made)
            s = record_sectors(np.concatenate([records[e.rec] for e in p.execs])).sectors
        before_req += len(s)
        before_sec += int(s.sum())
        before_clk += float(np.maximum(1, np.ceil(s / L1_SECTORS_PER_CLOCK)).sum())
        vec = records[p.execs[0].rec].copy()
        vec["width"] = p.vector
        sv = record_sectors(vec).sectors
        after_req += len(vec)
        after_sec += int(sv.sum())
        after_clk += float(np.maximum(1, np.ceil(sv / L1_SECTORS_PER_CLOCK)).sum())
        executions += p.executions
    return {
        "requests_before": before_req,
        "requests_after": after_req,
        "requests_saved": before_req - after_req,
        "sectors_before": before_sec,
        "sectors_after": after_sec,
        "l1_clocks_saved": before_clk - after_clk,
        "executions": executions,
    }


def _site(trace: Any, piece: _Piece, file: str | None, line: int) -> tuple[str | None, int]:
    """(file, line) where a piece is reported: its first access's line in the user's source (the
    call site of code inlined from a header, as the trace reports it), else ``file``/``line``."""
    at_file, at_line = trace.line_of(piece.execs[0].inst)
    return (at_file, at_line) if at_line is not None else (file, line)
