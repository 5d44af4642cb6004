"""The GPU tracer's PTX rewriter: every memory instruction of a kernel also writes a warp record.

:func:`instrument_ptx` takes the PTX that the compile step produced and the kernel's entry, and
returns PTX in which the entry, before each global, shared, local and constant memory instruction
(and generic ``ld``/``st``/``atom``/``red``, and ``cp.async`` into shared memory), appends one
*warp record* to a trace buffer:

- the lanes are ``activemask`` reduced by the instruction's guard with ``vote.sync.ballot`` (a
  lane whose ``@%p`` is false is not in the mask, as in the CPU emulator's trace); a warp whose
  mask is empty writes nothing;
- the lowest lane of the mask reserves a slot with one ``atom.global.add.u64`` on the buffer's
  counter and hands it to the others with ``shfl.sync``; the counter keeps counting past the
  buffer's capacity, but no record is written there (the host learns how many were lost);
- that lane writes the header (site id, linear CTA id, warp in the CTA, mask) and every lane of
  the mask writes its own address into its slot; slots of lanes off the mask are left unwritten
  (the host clears them);
- addresses are those of the instruction's state space: global ones as they are (device
  pointers: the host maps them back to the emulator's buffer convention), shared ones the offset
  in the CTA's shared window, local and constant ones the address in their window (the host maps
  them through the variable table below). A generic access is classified per lane with
  ``isspacep`` and converted with ``cvta.to.<space>``; it gives one record per space its lanes
  touched, as the emulator's does;
- only CTAs whose linear id lies in ``[lo, hi)`` record: a CTA filter read from the buffer's
  header (the others run the kernel unchanged but for a skipped branch per memory instruction).

The trace buffer's pointer is one more kernel parameter, appended after the user's. Layout (all
little-endian): a :data:`HEADER_BYTES` header, ``u64`` words: 0 the counter, 1 the capacity in
records, 2 and 3 the CTA range ``[lo, hi)``, 4 a magic word the kernel writes (it ran), 8 on the
variable table (the address of each variable in :attr:`Instrumented.table`, written by thread 0 of
CTA 0); then the records, :data:`DEVICE_RECORD`.

Instruction numbering is the emulator's (:func:`gpuadvise.ptx.cfg.build_program`: program order
with calls inlined), so sites map to :class:`~gpuadvise.trace.access.InstrInfo` ids exactly as the
emulator's trace numbers them: :attr:`Instrumented.declared` is the emulator's list of memory
instructions with a state space (:func:`gpuadvise.ptx.emulator.static_accesses`), and each
:class:`Site` names its (instruction, space). Memory instructions inside device functions that are
not inlined in the PTX (``__noinline__``) are not instrumented: :class:`InstrumentError` says so.

The rewrite is textual: the original PTX is kept byte for byte, with the instrumentation inserted
before each memory instruction, the prologue before the entry's first statement, and the parameter
appended to the entry's list (other entries are dropped, so ptxas compiles one kernel). Registers
and labels it adds start with ``%gpa_`` / ``$gpa_``.
"""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuadvise.errors import GpuAdviseError, ToolchainError
from gpuadvise.ptx.access import WARP, Kind, Space
from gpuadvise.ptx.parser import (
    TYPE_SIZES,
    Addr,
    Instr,
    Module,
    Reg,
    Sym,
    Token,
    parse_ptx_cached,
    tokenize,
)
from gpuadvise.words import counted

__all__ = [
    "DEVICE_RECORD",
    "HEADER_BYTES",
    "MAGIC",
    "PARAM_NAME",
    "RECORD_BYTES",
    "TABLE_OFFSET",
    "TABLE_SLOTS",
    "InstrumentError",
    "Instrumented",
    "Site",
    "TableVar",
    "assemble",
    "instrument_ptx",
    "make_header",
    "ptxas_options",
]

HEADER_BYTES = 1024
"""Bytes before the first record in the trace buffer."""

TABLE_OFFSET = 64
TABLE_SLOTS = (HEADER_BYTES - TABLE_OFFSET) // 8
"""At most this many variables in the address table."""

MAGIC = 0x6770_7561_6476_6973  # "gpuadvis" in big-endian ASCII: the instrumented kernel ran

DEVICE_RECORD = np.dtype(
    [
        ("site", np.uint32),  # index into Instrumented.sites
        ("cta", np.uint32),  # linear CTA id (low 32 bits)
        ("warp", np.uint32),  # warp in the CTA (linear thread id // 32)
        ("mask", np.uint32),  # lanes of the record, bit i = lane i
        ("addr", np.uint64, (WARP,)),  # per-lane address in the space (unwritten off the mask)
    ]
)
RECORD_BYTES = DEVICE_RECORD.itemsize  # 272
assert RECORD_BYTES == 272

PARAM_NAME = "__gpuadvise_trace_param"
_PREFIX = "gpa_"
_MEMORY_BASES = ("ld", "ldu", "st", "atom", "red")
_GENERIC_SPACES = (Space.SHARED, Space.LOCAL, Space.CONST, Space.GLOBAL)
_SPACE_NAME = {
    Space.GLOBAL: "global",
    Space.SHARED: "shared",
    Space.LOCAL: "local",
    Space.CONST: "const",
}


class InstrumentError(GpuAdviseError):
    """The kernel's PTX cannot be instrumented for the GPU tracer."""


@dataclass(frozen=True)
class Site:
    """One kind of record the instrumented kernel writes: instruction ``index`` of the emulator's
    program, in ``space``. ``generic``: the instruction names no state space (the space was found
    per lane at run time)."""

    site: int
    index: int
    space: Space
    kind: Kind
    width: int
    generic: bool = False

    @property
    def key(self) -> tuple[int, int]:
        """The emulator's trace key (instruction, space)."""
        return (self.index, int(self.space))


@dataclass(frozen=True)
class TableVar:
    """A variable whose address the kernel writes into the header's table (slot = position)."""

    name: str
    space: str  # global | shared | local | const
    size: int  # bytes


@dataclass(frozen=True)
class Instrumented:
    """The rewritten PTX of one kernel and what the host needs to read its records.

    ``declared``: the emulator's memory instructions with a state space, executed or not
    (instruction, space, kind, width); ``sites``: every record kind the kernel can write, indexed
    by ``Site.site``; ``table``: the variables of the header's address table, in slot order;
    ``instrumented``: how many PTX instructions got a probe.
    """

    ptx: str
    entry: str
    sites: tuple[Site, ...]
    declared: tuple[tuple[int, Space, Kind, int], ...]
    table: tuple[TableVar, ...]
    instrumented: int
    version: str
    notes: tuple[str, ...] = ()


def make_header(capacity: int, cta_lo: int, cta_hi: int) -> np.ndarray:
    """The header the host uploads before a run (counter 0)."""
    h = np.zeros(HEADER_BYTES // 8, np.uint64)
    h[1] = capacity
    h[2] = cta_lo
    h[3] = cta_hi
    return h


# ---------------------------------------------------------------------------------------------
# Statements of the PTX text, with their character offsets


@dataclass(frozen=True)
class _FuncSpan:
    kind: str  # .entry | .func
    name: str
    start: int  # token index of the first token of the definition (.visible ...)
    params_close: int | None  # token index of the ')' closing the parameter list
    name_tok: int
    body_open: int | None
    end: int  # token index of the last token ('}' or ';')


def _skip_group(toks: Sequence[Token], i: int) -> int:
    """Index of the token closing the bracket opened at ``i``."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind == "p" and t.text in "([{":
            depth += 1
        elif t.kind == "p" and t.text in ")]}":
            depth -= 1
            if depth == 0:
                return j
    raise InstrumentError("unbalanced brackets in the PTX", "the PTX text is truncated")


def _functions(toks: Sequence[Token]) -> list[_FuncSpan]:
    out: list[_FuncSpan] = []
    i = 0
    n = len(toks)
    while i < n:
        t = toks[i]
        if t.kind == "p" and t.text == "{":  # an initializer or a section at module scope
            i = _skip_group(toks, i) + 1
            continue
        if t.text not in (".entry", ".func"):
            i += 1
            continue
        start = i
        while start > 0 and toks[start - 1].text in (".visible", ".extern", ".weak", ".common"):
            start -= 1
        j = i + 1
        if t.text == ".func" and j < n and toks[j].text == "(":
            j = _skip_group(toks, j) + 1
        name_tok = j
        name = toks[j].text
        j += 1
        params_close = None
        if j < n and toks[j].text == "(":
            params_close = _skip_group(toks, j)
            j = params_close + 1
        while j < n and toks[j].text not in ("{", ";"):
            j += 1
        if j >= n:
            raise InstrumentError(f"function {name} has no body", "the PTX text is truncated")
        if toks[j].text == ";":
            out.append(_FuncSpan(t.text, name, start, params_close, name_tok, None, j))
            i = j + 1
            continue
        end = _skip_group(toks, j)
        out.append(_FuncSpan(t.text, name, start, params_close, name_tok, j, end))
        i = end + 1
    return out


@functools.lru_cache(maxsize=1)
def _tokens_by_digest(digest: str, text: str) -> tuple[tuple[Token, ...], tuple[_FuncSpan, ...]]:
    toks = tokenize(text)
    return tuple(toks), tuple(_functions(toks))


def _tokens_and_functions(text: str) -> tuple[Sequence[Token], Sequence[_FuncSpan]]:
    """The tokens of ``text`` and its functions' spans, those of the last text kept (the entries
    of one module, instrumented in turn, read the same text; one text: a large module's tokens
    are tens of MB)."""
    return _tokens_by_digest(hashlib.sha256(text.encode()).hexdigest(), text)


_TO_SEMICOLON = (".reg", ".local", ".shared", ".param", ".const", ".global", ".pragma")


def _statements(toks: Sequence[Token], lo: int, hi: int) -> tuple[list[tuple[int, int, str]], int]:
    """Instruction statements of a body (tokens ``lo``..``hi`` exclusive, inside the braces):
    (first token, last token, opcode) in text order, as :mod:`gpuadvise.ptx.parser` reads them;
    and the token where the first label, instruction or nested block of the body starts."""
    out: list[tuple[int, int, str]] = []
    first = hi
    i = lo
    while i < hi:
        t = toks[i]
        if t.kind == "p" and t.text in "{}":
            first = min(first, i)
            i += 1
            continue
        if t.text == ";":
            i += 1
            continue
        nxt = toks[i + 1] if i + 1 < hi else None
        if t.kind == "id" and nxt is not None and nxt.text == ":":
            after = toks[i + 2] if i + 2 < hi else None
            if after is not None and after.text in (
                ".branchtargets",
                ".calltargets",
                ".callprototype",
            ):
                i = _to_semicolon(toks, i, hi) + 1
                continue
            first = min(first, i)
            i += 2
            continue
        if t.text.startswith("."):
            if t.text in _TO_SEMICOLON:
                i = _to_semicolon(toks, i, hi) + 1
            else:
                line = t.line
                while i < hi and toks[i].line == line:
                    i += 1
            continue
        first = min(first, i)
        j = i
        if toks[j].text == "@":
            j += 1
            if toks[j].text == "!":
                j += 1
            j += 1
        opcode = toks[j].text
        end = _to_semicolon(toks, i, hi)
        out.append((i, end, opcode))
        i = end + 1
    return out, first


def _to_semicolon(toks: Sequence[Token], i: int, hi: int) -> int:
    depth = 0
    while i < hi:
        t = toks[i]
        if t.kind == "p":
            if t.text in "([{":
                depth += 1
            elif t.text in ")]}":
                depth -= 1
            elif t.text == ";" and depth <= 0:
                return i
        i += 1
    raise InstrumentError("a PTX statement has no closing ';'", "the PTX text is truncated")


# ---------------------------------------------------------------------------------------------
# What to record


def _type_size(ins: Instr) -> int:
    from gpuadvise.ptx.ops import type_of

    return TYPE_SIZES[type_of(ins.mods)]


def _generic_kind_width(ins: Instr) -> tuple[Kind, int] | None:
    base = ins.base
    try:
        es = _type_size(ins)
    except Exception:  # a form the emulator rejects too
        return None
    if base in ("ld", "ldu", "st"):
        vec = next((int(m[1:]) for m in ins.mods if m in ("v2", "v4", "v8")), 1)
        return (Kind.LOAD if base != "st" else Kind.STORE), es * vec
    return (Kind.ATOMIC if base == "atom" else Kind.REDUCTION), es


def _address_operand(ins: Instr) -> Addr | None:
    ops = ins.operands
    k = 0 if ins.base in ("st", "red") else 1
    if len(ops) <= k or not isinstance(ops[k], Addr):
        return None
    op = ops[k]
    assert isinstance(op, Addr)
    return op


def _orig(name: str) -> str:
    """The name as written in the PTX text (the parser renames block-scoped names ``%r1~3``)."""
    return name.split("~", 1)[0]


# ---------------------------------------------------------------------------------------------
# Code generation


class _Gen:
    def __init__(self, regs: dict[str, str]) -> None:
        self.regs = regs
        self.lines: list[str] = []

    def emit(self, s: str) -> None:
        self.lines.append("\t" + s if not s.endswith(":") else s)

    def address(self, a: Addr, dst: str) -> None:
        """``dst`` (b64) = the address of ``[a]`` in the instruction's space."""
        off = a.offset
        base = a.base
        if base is None:
            self.emit(f"mov.u64 \t{dst}, {off};")
            return
        if isinstance(base, Sym):
            self.emit(f"mov.u64 \t{dst}, {_orig(base.name)};")
        else:
            assert isinstance(base, Reg)
            rtype = self.regs.get(base.name)
            name = _orig(base.name)
            if rtype is None:  # a special register
                self.emit(f"mov.u32 \t%{_PREFIX}w5, {name};")
                self.emit(f"cvt.u64.u32 \t{dst}, %{_PREFIX}w5;")
            elif TYPE_SIZES.get(rtype, 4) == 8:
                self.emit(f"mov.b64 \t{dst}, {name};")
            else:
                self.emit(f"cvt.u64.u32 \t{dst}, {name};")
        if off:
            self.emit(f"add.s64 \t{dst}, {dst}, {off};")

    def record(self, site: int, mask: str, addr: str, skip: str) -> None:
        """Append one record: ``mask`` (b32, uniform, non-zero), ``addr`` (b64 per lane)."""
        p = "%" + _PREFIX
        e = self.emit
        e(f"neg.s32 \t{p}w3, {mask};")
        e(f"and.b32 \t{p}w3, {p}w3, {mask};")
        e(f"bfind.u32 \t{p}w3, {p}w3;")
        e(f"setp.eq.u32 \t{p}q2, {p}lane, {p}w3;")
        e(f"@{p}q2 atom.global.add.u64 \t{p}x2, [{p}buf], 1;")
        e(f"mov.b64 \t{{{p}w4, {p}w5}}, {p}x2;")
        e(f"shfl.sync.idx.b32 \t{p}w4, {p}w4, {p}w3, 31, {p}w0;")
        e(f"shfl.sync.idx.b32 \t{p}w5, {p}w5, {p}w3, 31, {p}w0;")
        e(f"mov.b64 \t{p}x2, {{{p}w4, {p}w5}};")
        e(f"setp.ge.u64 \t{p}q3, {p}x2, {p}cap;")
        e(f"@{p}q3 bra \t{skip};")
        e(f"mad.lo.u64 \t{p}x2, {p}x2, {RECORD_BYTES}, {p}rec;")
        e(f"mov.u32 \t{p}w4, {site};")
        e(f"@{p}q2 st.global.v4.u32 \t[{p}x2], {{{p}w4, {p}cta, {p}warp, {mask}}};")
        e(f"shr.b32 \t{p}w5, {mask}, {p}lane;")
        e(f"and.b32 \t{p}w5, {p}w5, 1;")
        e(f"setp.ne.u32 \t{p}q3, {p}w5, 0;")
        e(f"mul.wide.u32 \t{p}x3, {p}lane, 8;")
        e(f"add.s64 \t{p}x3, {p}x2, {p}x3;")
        e(f"@{p}q3 st.global.u64 \t[{p}x3+16], {addr};")
        self.lines.append(f"{skip}:")


def _prologue(table: Sequence[TableVar]) -> str:
    p = "%" + _PREFIX
    lines = [
        "// gpuadvise GPU tracer: prologue",
        f"\t.reg .pred \t{p}on, {p}q<4>;",
        f"\t.reg .b32 \t{p}cta, {p}warp, {p}lane, {p}w<6>;",
        f"\t.reg .b64 \t{p}buf, {p}cap, {p}rec, {p}x<4>;",
        f"\tld.param.u64 \t{p}buf, [{PARAM_NAME}];",
        f"\tcvta.to.global.u64 \t{p}buf, {p}buf;",
        f"\tld.global.u64 \t{p}cap, [{p}buf+8];",
        f"\tadd.s64 \t{p}rec, {p}buf, {HEADER_BYTES};",
        f"\tmov.u32 \t{p}w0, %ctaid.z;",
        f"\tmov.u32 \t{p}w1, %nctaid.y;",
        f"\tmul.wide.u32 \t{p}x0, {p}w0, {p}w1;",
        f"\tmov.u32 \t{p}w0, %ctaid.y;",
        f"\tcvt.u64.u32 \t{p}x1, {p}w0;",
        f"\tadd.s64 \t{p}x0, {p}x0, {p}x1;",
        f"\tmov.u32 \t{p}w1, %nctaid.x;",
        f"\tcvt.u64.u32 \t{p}x1, {p}w1;",
        f"\tmul.lo.u64 \t{p}x0, {p}x0, {p}x1;",
        f"\tmov.u32 \t{p}w0, %ctaid.x;",
        f"\tcvt.u64.u32 \t{p}x1, {p}w0;",
        f"\tadd.s64 \t{p}x0, {p}x0, {p}x1;",
        f"\tcvt.u32.u64 \t{p}cta, {p}x0;",
        f"\tld.global.u64 \t{p}x1, [{p}buf+16];",
        f"\tld.global.u64 \t{p}x2, [{p}buf+24];",
        f"\tsetp.ge.u64 \t{p}q0, {p}x0, {p}x1;",
        f"\tsetp.lt.and.u64 \t{p}on, {p}x0, {p}x2, {p}q0;",
        f"\tmov.u32 \t{p}w0, %tid.z;",
        f"\tmov.u32 \t{p}w1, %ntid.y;",
        f"\tmul.lo.u32 \t{p}w0, {p}w0, {p}w1;",
        f"\tmov.u32 \t{p}w1, %tid.y;",
        f"\tadd.s32 \t{p}w0, {p}w0, {p}w1;",
        f"\tmov.u32 \t{p}w1, %ntid.x;",
        f"\tmul.lo.u32 \t{p}w0, {p}w0, {p}w1;",
        f"\tmov.u32 \t{p}w1, %tid.x;",
        f"\tadd.s32 \t{p}w0, {p}w0, {p}w1;",
        f"\tshr.u32 \t{p}warp, {p}w0, 5;",
        f"\tmov.u32 \t{p}lane, %laneid;",
        f"\tsetp.eq.u64 \t{p}q1, {p}x0, 0;",
        f"\tsetp.eq.and.u32 \t{p}q1, {p}w0, 0, {p}q1;",
        f"\tmov.u64 \t{p}x3, {MAGIC};",
        f"\t@{p}q1 st.global.u64 \t[{p}buf+32], {p}x3;",
    ]
    for k, var in enumerate(table):
        lines.append(f"\tmov.u64 \t{p}x3, {var.name};")
        lines.append(f"\t@{p}q1 st.global.u64 \t[{p}buf+{TABLE_OFFSET + 8 * k}], {p}x3;")
    lines.append("\t// gpuadvise GPU tracer: end of prologue")
    return "\n".join(lines) + "\n"


def _probe(
    k: int,
    ins: Instr,
    sites: list[Site],
    regs: dict[str, str],
) -> str:
    """The code inserted before instruction ``ins`` (its sites: one, two for cp.async, or one per
    space for a generic access)."""
    p = "%" + _PREFIX
    g = _Gen(regs)
    e = g.emit
    end = f"${_PREFIX}end_{k}"
    g.lines.append(f"// gpuadvise GPU tracer: {ins.opcode}")
    e(f"@!{p}on bra \t{end};")
    e(f"activemask.b32 \t{p}w0;")
    guard = None
    if ins.guard is not None:
        guard = ("!" if ins.guard_neg else "") + _orig(ins.guard)
        e(f"vote.sync.ballot.b32 \t{p}w1, {guard}, {p}w0;")
    else:
        e(f"mov.b32 \t{p}w1, {p}w0;")
    e(f"setp.eq.u32 \t{p}q0, {p}w1, 0;")
    e(f"@{p}q0 bra \t{end};")
    if ins.base == "cp":
        # cp.async [shared dst], [global src], size: a global load and a shared store
        dst, src = ins.operands[0], ins.operands[1]
        assert isinstance(dst, Addr) and isinstance(src, Addr)
        by_space = {s.space: s for s in sites}
        g.address(src, f"{p}x0")
        g.record(by_space[Space.GLOBAL].site, f"{p}w1", f"{p}x0", f"${_PREFIX}end_{k}_g")
        g.address(dst, f"{p}x0")
        g.record(by_space[Space.SHARED].site, f"{p}w1", f"{p}x0", f"${_PREFIX}end_{k}_s")
    elif sites[0].generic:
        a = _address_operand(ins)
        assert a is not None
        g.address(a, f"{p}x0")
        for s in sites:
            name = _SPACE_NAME[s.space]
            tag = name[0]
            e(f"isspacep.{name} \t{p}q1, {p}x0;")
            if guard is not None:
                # the lane's own guard bit: bit lane of w1
                e(f"shr.b32 \t{p}w2, {p}w1, {p}lane;")
                e(f"and.b32 \t{p}w2, {p}w2, 1;")
                e(f"setp.ne.and.u32 \t{p}q1, {p}w2, 0, {p}q1;")
            e(f"vote.sync.ballot.b32 \t{p}w2, {p}q1, {p}w0;")
            e(f"setp.eq.u32 \t{p}q0, {p}w2, 0;")
            skip = f"${_PREFIX}end_{k}_{tag}"
            e(f"@{p}q0 bra \t{skip};")
            if s.space == Space.GLOBAL:
                conv = f"{p}x0"
            else:
                e(f"cvta.to.{name}.u64 \t{p}x1, {p}x0;")
                conv = f"{p}x1"
            g.record(s.site, f"{p}w2", conv, skip + "r")
            g.lines.append(f"{skip}:")
    else:
        a = _address_operand(ins)
        assert a is not None
        g.address(a, f"{p}x0")
        g.record(sites[0].site, f"{p}w1", f"{p}x0", f"${_PREFIX}end_{k}_r")
    g.lines.append(f"{end}:")
    return "\n".join(g.lines) + "\n\t"


# ---------------------------------------------------------------------------------------------
# The rewrite


def instrument_ptx(ptx: str, entry: str, keep_other_entries: bool = False) -> Instrumented:
    """Rewrite ``ptx`` so that kernel ``entry`` records its memory accesses (module docstring).

    Raises :class:`InstrumentError` when the entry is missing, when a memory instruction lies in a
    device function that is not inlined, or when the text does not read as the parser read it.
    """
    from gpuadvise.ptx.cfg import build_program
    from gpuadvise.ptx.emulator import space_of, static_accesses

    module = parse_ptx_cached(ptx)  # a module's entries instrumented in turn parse it once
    func = module.functions.get(entry)
    if func is None or func.body is None or not func.is_entry:
        raise InstrumentError(
            f"the PTX has no kernel entry {entry!r}",
            f"entries in the PTX: {', '.join(module.entries()) or 'none'}",
        )
    if module.address_size != 64:
        raise InstrumentError(
            "the GPU tracer needs 64-bit PTX (.address_size 64)", "compile for a 64-bit target"
        )
    if f"%{_PREFIX}" in ptx or f"${_PREFIX}" in ptx or PARAM_NAME in ptx:
        raise InstrumentError(
            "the PTX already holds gpuadvise's tracer registers (instrumented twice?)",
            "instrument the PTX that nvcc produced",
        )
    toks, spans = _tokens_and_functions(ptx)  # the parser read it: no error here
    span = next((s for s in spans if s.name == entry and s.body_open is not None), None)
    if span is None or span.body_open is None:
        raise InstrumentError(f"cannot find the body of {entry} in the PTX text", None)
    stmts, first = _statements(toks, span.body_open + 1, span.end)
    body_instrs = [x for x in func.body if isinstance(x, Instr) and not x.opcode.startswith(".")]
    if len(body_instrs) != len(stmts) or any(
        ins.opcode != op for ins, (_, _, op) in zip(body_instrs, stmts, strict=False)
    ):
        raise InstrumentError(
            f"the PTX text of {entry} does not read as the parser read it "
            f"({len(stmts)} statements, {len(body_instrs)} instructions)",
            "report this with the kernel's PTX",
        )
    stmt_of = {id(ins): k for k, ins in enumerate(body_instrs)}

    program = build_program(module, entry)
    declared = static_accesses(program)
    by_index: dict[int, list[tuple[Space, Kind, int, bool]]] = {}
    for index, space, kind, width in declared:
        by_index.setdefault(index, []).append((space, kind, width, False))
    for index, ins in enumerate(program.instrs):
        if ins.base in _MEMORY_BASES and space_of(ins) == "generic":
            kw = _generic_kind_width(ins)
            if kw is None or _address_operand(ins) is None:
                continue
            for sp in _GENERIC_SPACES:
                by_index.setdefault(index, []).append((sp, kw[0], kw[1], True))

    sites: list[Site] = []
    inserts: list[tuple[int, str]] = []  # (character offset, text)
    outside: list[str] = []
    for index in sorted(by_index):
        ins = program.instrs[index]
        k = stmt_of.get(id(ins))
        if k is None:
            outside.append(ins.opcode)
            continue
        if ins.base != "cp" and _address_operand(ins) is None:
            continue
        mine = []
        for space, kind, width, generic in by_index[index]:
            site = Site(len(sites), index, space, kind, width, generic)
            sites.append(site)
            mine.append(site)
        start_tok = stmts[k][0]
        inserts.append((toks[start_tok].start, _probe(index, ins, mine, program.regs)))
    if outside:
        raise InstrumentError(
            f"{counted(len(outside), 'memory instruction')} of {entry} lie in device functions that the "
            f"PTX calls instead of inlining ({outside[0]} ...): the GPU tracer does not follow them",
            "let the compiler inline them (drop __noinline__), or use --tracer emu",
        )

    table = _table(module, program, func)
    notes: list[str] = []
    if len(table) > TABLE_SLOTS:
        notes.append(f"only the first {TABLE_SLOTS} variables are mapped back to the emulator")
        table = table[:TABLE_SLOTS]

    # the prologue, before the body's first statement
    first_off = toks[first].start if first < span.end else toks[span.end].start
    inserts.append((first_off, _prologue(table) + "\t"))
    # the parameter
    if span.params_close is not None:
        last = toks[span.params_close - 1]
        if last.text == "(":
            inserts.append((last.end, f"\n\t.param .u64 {PARAM_NAME}\n"))
        else:
            inserts.append((last.end, f",\n\t.param .u64 {PARAM_NAME}"))
    else:
        inserts.append((toks[span.name_tok].end, f"(\n\t.param .u64 {PARAM_NAME}\n)"))

    cuts: list[tuple[int, int]] = []
    if not keep_other_entries:
        for s in spans:
            if s.kind == ".entry" and s.name != entry:
                cuts.append((toks[s.start].start, toks[s.end].end))

    out = _apply(ptx, inserts, cuts)
    return Instrumented(
        ptx=out,
        entry=entry,
        sites=tuple(sites),
        declared=tuple(declared),
        table=tuple(table),
        instrumented=sum(1 for _ in inserts) - 2,
        version=module.version,
        notes=tuple(notes),
    )


def _apply(text: str, inserts: list[tuple[int, str]], cuts: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    pos = 0
    events: list[tuple[int, int, str, int]] = [(off, 0, s, off) for off, s in inserts]
    events += [(a, 1, "", b) for a, b in cuts]
    events.sort(key=lambda x: (x[0], x[1]))
    for off, what, s, end in events:
        if off < pos:
            continue
        parts.append(text[pos:off])
        if what == 0:
            parts.append(s)
            pos = off
        else:
            parts.append("// (another kernel, removed by gpuadvise's GPU tracer)")
            pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _table(module: Module, program: object, func: object) -> list[TableVar]:
    """The variables whose addresses the host needs: those the kernel uses, in the spaces whose
    addresses it maps back (global variables, local and constant ones) or checks (shared)."""
    from gpuadvise.ptx.cfg import Program, symbols_used
    from gpuadvise.ptx.parser import Function

    assert isinstance(program, Program) and isinstance(func, Function)
    used = symbols_used(program)
    out: list[TableVar] = []
    seen: set[str] = set()
    candidates = list(func.vars) + list(module.variables.values())
    for v in candidates:
        if v.name in seen or v.name not in used or "~" in v.name:
            continue
        if v.space not in ("global", "shared", "local", "const"):
            continue
        if v.space == "global" and v.extern:
            continue
        seen.add(v.name)
        out.append(TableVar(v.name, v.space, v.size_bytes))
    return out


# ---------------------------------------------------------------------------------------------
# Assembling


_PTX_VERSION_RE = re.compile(r"^\s*\.version\s+\S+", re.M)


def assemble(
    ptx: str,
    arch: str,
    ptxas: str | Path,
    out: Path,
    options: Sequence[str] = (),
    timeout_s: float = 600.0,
) -> Path:
    """Compile PTX text to the cubin ``out`` with ``ptxas -arch=<arch>`` (the PTX is written beside
    it; the caller owns the folder). Raises :class:`ToolchainError` with ptxas's messages when it
    refuses."""
    src = out.with_suffix(".ptx")
    src.write_text(ptx)
    cubin = out
    cmd = [str(ptxas), f"-arch={arch}", *options, str(src), "-o", str(cubin)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainError(f"ptxas failed to run: {exc}", "check the CUDA toolkit") from None
    if proc.returncode != 0 or not cubin.is_file():
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        first = "; ".join(msg[:3]) if msg else f"exit status {proc.returncode}"
        raise ToolchainError(
            f"ptxas rejected the instrumented PTX ({src}): {first}",
            "report this with the kernel, or use --tracer emu",
        )
    return cubin


def ptxas_options(flags: Sequence[str]) -> list[str]:
    """The ptxas options among nvcc flags (``-Xptxas X``, ``-maxrregcount=N``), without ``-v``."""
    out: list[str] = []
    it = iter(range(len(flags)))
    for i in it:
        f = flags[i]
        if f in ("-Xptxas", "--ptxas-options") and i + 1 < len(flags):
            out += [x for x in flags[i + 1].split(",") if x and x != "-v"]
            next(it, None)
        elif f.startswith(("-Xptxas=", "--ptxas-options=")):
            out += [x for x in f.split("=", 1)[1].split(",") if x and x != "-v"]
        elif f.startswith(("-maxrregcount=", "--maxrregcount=")):
            out.append("-maxrregcount=" + f.split("=", 1)[1])
    return out
