"""A parser for the PTX that nvcc emits: module variables, functions, instructions with line info.

It reads what ``nvcc -lineinfo`` writes for real kernels (and what ``-G`` or hand-written PTX
usually contain): ``.version``/``.target``/``.address_size``, ``.file`` tables (anywhere in the
module), ``.global``/``.const``/``.shared`` variables with initializers (numbers, symbol addresses
``sym``/``generic(sym)``), ``.extern`` declarations, ``.entry`` and ``.func`` definitions with
their parameter lists and performance directives, and bodies with ``.reg`` declarations (``%r<34>``
ranges), local/shared/param variables, labels, ``.loc`` directives (``function_name ...,
inlined_at F L C`` included), guards (``@%p``/``@!%p``), vector operands (``{%f1, _, %f2}``),
addresses (``[%rd1+-4]``, ``[sym+8]``), predicate pairs (``%r1|%p1``), call sequences and the
nested ``{ }`` scopes that inline assembly and call sequences open.

Scopes: a register or variable declared inside a nested ``{ }`` block is renamed to a name unique in
the function (``%p1`` declared in a block becomes ``%p1~3``), so the same name declared in two blocks,
or shadowing a function register, means what it means in PTX. Debug sections are skipped.

Source location: an instruction carries the location of the last ``.loc`` before it. When the
``.loc`` has ``inlined_at F L C`` (code of an inlined function, e.g. ``atomicAdd`` from a CUDA
header), the instruction's ``line`` is the ``inlined_at`` location: the user's call site; the
callee's own location is kept in ``inner_loc``. nvcc writes the ``.loc`` of each enclosing call
just before (``.loc 1 10 5`` / ``.loc 1 1 72, ..., inlined_at 1 10 5`` / ``.loc 2 112 3, ...,
inlined_at 1 1 72``): ``call_sites`` follows that chain, innermost first, to the kernel's body.
Later ``.loc``s inlined at the same call often come alone (``.loc 2 112 3, ..., inlined_at 1 1
72`` with no ``.loc 1 1 72`` before it): the chain is then the one last seen for that call.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from gpuadvise.fileio import decode_tool_path
from gpuadvise.ptx.errors import PtxParseError

__all__ = [
    "Addr",
    "Function",
    "Group",
    "Imm",
    "Instr",
    "Label",
    "Loc",
    "Module",
    "Neg",
    "Operand",
    "ParamDecl",
    "PredOut",
    "Reg",
    "Sym",
    "Token",
    "VarDecl",
    "Vec",
    "parse_ptx",
    "parse_ptx_cached",
    "parse_ptx_entry",
    "tokenize",
]


# ---------------------------------------------------------------------------------------------
# The result


@dataclass(frozen=True)
class Loc:
    """A source location: ``file`` id of the ``.file`` table, 1-based ``line``."""

    file: int
    line: int
    col: int = 0


@dataclass(frozen=True)
class Reg:
    name: str


@dataclass(frozen=True)
class Imm:
    """A literal. ``kind``: ``int``, ``f32`` (``0f`` hex bits), ``f64`` (``0d`` hex bits) or
    ``float`` (a decimal literal). ``value`` is the Python value (bits as int for f32/f64)."""

    value: int | float
    kind: str = "int"


@dataclass(frozen=True)
class Sym:
    """A variable, function or parameter name, optionally plus a byte offset (``sym+8``)."""

    name: str
    offset: int = 0


@dataclass(frozen=True)
class Addr:
    """``[base+offset]``: base a register, a symbol or None (an absolute address)."""

    base: Reg | Sym | None
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    """``{a, b, c, d}``; ``None`` items are the sink ``_``."""

    items: tuple[Operand | None, ...]


@dataclass(frozen=True)
class Neg:
    """``!%p``: a negated predicate operand."""

    inner: Operand


@dataclass(frozen=True)
class PredOut:
    """``%r1|%p1``: a value destination with a predicate destination beside it."""

    value: Reg
    pred: Reg


@dataclass(frozen=True)
class Group:
    """``(a, b)`` in a call: the return values or the arguments."""

    items: tuple[Operand, ...]


Operand = Reg | Imm | Sym | Addr | Vec | Neg | PredOut | Group


@dataclass(frozen=True)
class Instr:
    """One PTX instruction. ``opcode``: the full dotted opcode (``ld.global.nc.v4.f32``);
    ``guard``: the predicate register of ``@%p`` (``guard_neg`` for ``@!%p``); ``loc`` the
    location used for reports; ``ptx_line`` the line in the PTX text."""

    opcode: str
    operands: tuple[Operand, ...]
    guard: str | None = None
    guard_neg: bool = False
    loc: Loc | None = None
    inner_loc: Loc | None = None
    ptx_line: int = 0
    call_sites: tuple[Loc, ...] = ()

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def mods(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


@dataclass(frozen=True)
class Label:
    name: str


@dataclass(frozen=True)
class VarDecl:
    """A variable: ``space`` one of global/const/shared/local/param; ``type`` its PTX type
    (``b8``, ``u32`` ...), ``elem_size`` its size, ``count`` the number of elements (None for an
    unsized ``[]`` array), ``align`` its alignment, ``init`` the initializer items (ints, floats or
    ``("sym", name, offset, generic)`` tuples) and ``order`` its position in the PTX text."""

    name: str
    space: str
    type: str
    elem_size: int
    count: int | None
    align: int
    init: tuple[object, ...] | None = None
    extern: bool = False
    vector: int = 1
    order: int = 0

    @property
    def size_bytes(self) -> int:
        return self.elem_size * self.vector * (self.count if self.count is not None else 0)


@dataclass(frozen=True)
class ParamDecl:
    """A parameter of an entry or function: ``size`` bytes, ``align`` bytes."""

    name: str
    type: str
    size: int
    align: int


@dataclass
class Function:
    """An ``.entry`` or ``.func``. ``body`` is None for a declaration without definition."""

    name: str
    is_entry: bool
    params: list[ParamDecl]
    rets: list[ParamDecl]
    body: list[Instr | Label] | None
    regs: dict[str, str] = field(default_factory=dict)
    vars: list[VarDecl] = field(default_factory=list)
    extern: bool = False
    loc: Loc | None = None
    # the performance directives between the parameters and the body: ``.maxntid 256, 1, 1``
    # -> {".maxntid": (256, 1, 1)}, ``.minnctapersm 2``, ``.maxnreg 64``, ``.reqntid`` ...
    directives: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def launch_bounds(self) -> tuple[int | None, int | None]:
        """(max threads per block, min CTAs per SM) of its ``__launch_bounds__``: the product of
        ``.maxntid``'s dimensions and ``.minnctapersm``; None where absent."""
        ntid = self.directives.get(".maxntid")
        threads = None if not ntid else math.prod(ntid)
        minb = self.directives.get(".minnctapersm")
        return threads, (minb[0] if minb else None)


@dataclass
class Module:
    """A parsed PTX module. ``files`` maps ``.file`` ids to normalized paths; ``variables`` holds
    the module-scope variables in text order."""

    version: str = ""
    target: str = ""
    address_size: int = 64
    files: dict[int, str] = field(default_factory=dict)
    variables: dict[str, VarDecl] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)

    def entries(self) -> list[str]:
        return [f.name for f in self.functions.values() if f.is_entry and f.body is not None]

    def where(self, loc: Loc | None) -> str | None:
        """``file:line`` of a location (the file's base name), or None."""
        if loc is None:
            return None
        path = self.files.get(loc.file)
        return f"{os.path.basename(path) if path else '?'}:{loc.line}"


# ---------------------------------------------------------------------------------------------
# Types


TYPE_SIZES = {
    "pred": 1,
    "b8": 1,
    "u8": 1,
    "s8": 1,
    "b16": 2,
    "u16": 2,
    "s16": 2,
    "f16": 2,
    "bf16": 2,
    "e4m3x2": 2,
    "e5m2x2": 2,
    "b32": 4,
    "u32": 4,
    "s32": 4,
    "f32": 4,
    "f16x2": 4,
    "bf16x2": 4,
    "tf32": 4,
    "b64": 8,
    "u64": 8,
    "s64": 8,
    "f64": 8,
    "b128": 16,
}


# ---------------------------------------------------------------------------------------------
# Tokens


# One match per token, newline or comment, with the blanks before it: ``bad`` is a character no
# token starts with (an error; blanks at the end of the text match nothing and are skipped).
_TOKEN_RE = re.compile(
    r"""
    [ \t\r\f\v]*
    (?:(?P<nl>\n)
    |(?P<lc>//[^\n]*)
    |(?P<bc>/\*.*?\*/)
    |(?P<str>"(?:\\.|[^"\\\n])*")
    |(?P<num>0[fF][0-9a-fA-F]{8}(?![\w.])|0[dD][0-9a-fA-F]{16}(?![\w.])|0[xX][0-9a-fA-F]+U?
        |\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+U?)
    |(?P<id>[%$.A-Za-z_][\w$.%]*(?:::[\w$.%]+)*)
    |(?P<p>[{}\[\](),;:|+\-!@<>=*])
    |(?P<bad>[^ \t\r\f\v]))
    """,
    re.S | re.X,
)
_TOKEN_KINDS = frozenset({"num", "id", "str", "p"})


class Token(NamedTuple):
    """A token of PTX text: ``kind`` is ``num``, ``id`` (names, directives, opcodes, registers),
    ``str`` or ``p`` (punctuation); ``start``/``end`` its character offsets; ``line`` 1-based.
    A named tuple, not a frozen dataclass: a large module has 10^5 tokens, and a frozen
    dataclass's ``__init__`` cost more than the rest of :func:`tokenize`."""

    kind: str
    text: str
    start: int
    end: int
    line: int


def tokenize(text: str) -> list[Token]:
    """The tokens of PTX ``text``, without white space and comments (what the parser reads).

    Raises :class:`~gpuadvise.ptx.errors.PtxParseError` at a character no token starts with.
    """
    toks: list[Token] = []
    append = toks.append
    new = tuple.__new__  # Token(...) without the keyword handling of its __new__
    line = 1
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind in _TOKEN_KINDS:
            k = m.lastindex or 0
            start, end = m.span(k)
            append(new(Token, (kind, m[k], start, end, line)))
        elif kind == "nl":
            line += 1
        elif kind == "bc":
            line += m[0].count("\n")
        elif kind == "bad":
            pos = m.start("bad")
            snippet = text[pos : pos + 20].split("\n")[0]
            raise PtxParseError(
                f"PTX line {line}: unexpected character {text[pos]!r} in {snippet!r}",
                "the PTX is malformed or uses syntax the emulator does not know",
            )
    return toks


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    if t.lower().startswith("0x"):
        return int(t, 16)
    if len(t) > 1 and t.startswith("0") and t.isdigit():
        return int(t, 8)
    return int(t)


def _imm(text: str, negative: bool = False) -> Imm:
    low = text.lower()
    if low.startswith("0f") and len(text) == 10:
        bits = int(text[2:], 16)
        if negative:
            bits ^= 0x80000000
        return Imm(bits, "f32")
    if low.startswith("0d") and len(text) == 18:
        bits = int(text[2:], 16)
        if negative:
            bits ^= 1 << 63
        return Imm(bits, "f64")
    if "." in text or ("e" in low and not low.startswith("0x")):
        v = float(text)
        return Imm(-v if negative else v, "float")
    v = parse_int(text)
    return Imm(-v if negative else v, "int")


def f32_bits_to_float(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0])


def f64_bits_to_float(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0])


# ---------------------------------------------------------------------------------------------
# The parser


class _Parser:
    def __init__(
        self, text: str, keep: frozenset[str] | None = None, toks: list[Token] | None = None
    ) -> None:
        self.toks = tokenize(text) if toks is None else toks
        self.i = 0
        # the functions whose bodies are parsed (None: all); the others' are skipped, as a
        # declaration's (parse_ptx_entry)
        self.keep = keep
        self.module = Module()
        self.order = 0
        # function-local state
        self.scopes: list[dict[str, str]] = []
        self.regs: dict[str, str] = {}
        self.scope_counter = 0
        self.loc: Loc | None = None
        self.inner_loc: Loc | None = None
        self.chain: list[tuple[int, int, int]] = []  # (file, line, column), innermost first
        self.call_sites: tuple[Loc, ...] = ()  # the chain's call sites (Instr.call_sites)
        # the last chain seen starting at each location of the function: nvcc writes the .loc of
        # an enclosing inlined call once, before the first instruction it inlines, and the later
        # ".loc F L C, ..., inlined_at <that call>" alone
        self.chains: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}

    # -- token helpers -------------------------------------------------------------------------

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Token:
        i = self.i
        if i >= len(self.toks):
            raise PtxParseError("unexpected end of PTX", "the PTX text is truncated")
        self.i = i + 1
        return self.toks[i]

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.text == text

    def expect(self, text: str) -> Token:
        tok = self.next()
        if tok.text != text:
            raise PtxParseError(
                f"PTX line {tok.line}: expected {text!r}, found {tok.text!r}",
                "the PTX is malformed or uses syntax the emulator does not know",
            )
        return tok

    def error(self, tok: Token | None, what: str) -> PtxParseError:
        line = tok.line if tok else "end"
        return PtxParseError(
            f"PTX line {line}: {what}",
            "the PTX is malformed or uses syntax the emulator does not know",
        )

    def skip_line(self, line: int) -> list[Token]:
        out = []
        while (tok := self.peek()) is not None and tok.line == line:
            out.append(self.next())
        return out

    def skip_statement(self) -> None:
        depth = 0
        while (tok := self.peek()) is not None:
            self.i += 1
            if tok.text in "({[" and tok.kind == "p":
                depth += 1
            elif tok.text in ")}]" and tok.kind == "p":
                depth -= 1
            elif tok.text == ";" and depth <= 0:
                return

    def skip_braces(self) -> None:
        self.expect("{")
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == "p" and tok.text == "{":
                depth += 1
            elif tok.kind == "p" and tok.text == "}":
                depth -= 1

    # -- module ---------------------------------------------------------------------------------

    def parse(self) -> Module:
        mod = self.module
        while (tok := self.peek()) is not None:
            t = tok.text
            if t == ".version":
                self.next()
                mod.version = "".join(x.text for x in self.skip_line(tok.line))
            elif t == ".target":
                self.next()
                mod.target = " ".join(x.text for x in self.skip_line(tok.line) if x.text != ",")
            elif t == ".address_size":
                self.next()
                mod.address_size = parse_int(self.next().text)
            elif t == ".file":
                self.next()
                rest = self.skip_line(tok.line)
                if len(rest) >= 2 and rest[0].kind == "num" and rest[1].kind == "str":
                    path = rest[1].text[1:-1]
                    mod.files[parse_int(rest[0].text)] = os.path.normpath(decode_tool_path(path))
            elif t == ".section":
                self.next()
                while not self.at("{"):
                    self.next()
                self.skip_braces()
            elif t in (".visible", ".extern", ".weak", ".common"):
                self.next()
                self.parse_top(extern=t == ".extern")
            elif t == ";":
                self.next()
            else:
                self.parse_top(extern=False)
        return mod

    def parse_top(self, extern: bool) -> None:
        tok = self.peek()
        if tok is None:
            return
        t = tok.text
        if t in (".visible", ".extern", ".weak", ".common"):
            self.next()
            self.parse_top(extern or t == ".extern")
        elif t in (".entry", ".func"):
            self.parse_function(extern)
        elif t in (".global", ".const", ".shared", ".local"):
            decl = self.parse_var(extern, module_scope=True)
            if decl is not None:
                self.module.variables[decl.name] = decl
        elif t in (".tex", ".surfref", ".texref", ".samplerref"):
            raise self.error(tok, f"texture/surface declaration {t} is not supported")
        elif t.startswith("."):
            # unknown module directive: skip its statement
            self.skip_statement()
        else:
            raise self.error(tok, f"unexpected {t!r} at module scope")

    # -- variables -----------------------------------------------------------------------------

    def parse_var(self, extern: bool, module_scope: bool) -> VarDecl | None:
        """``.space [.align N] [.vN] .type name[dims] [= init];`` (one name)."""
        space_tok = self.next()
        space = space_tok.text[1:]
        align = 0
        vector = 1
        vtype = ""
        while (tok := self.peek()) is not None and tok.text.startswith("."):
            self.next()
            t = tok.text[1:]
            if t == "align":
                align = parse_int(self.next().text)
            elif t in ("v2", "v4", "v8"):
                vector = int(t[1:])
            elif t in TYPE_SIZES:
                vtype = t
            elif t == "attribute":
                # .attribute(.managed) and the like
                self.expect("(")
                depth = 1
                while depth:
                    x = self.next().text
                    depth += {"(": 1, ")": -1}.get(x, 0)
            elif t in ("ptr", "global", "shared", "const", "local", "ro", "rw", "volatile"):
                continue
            else:
                continue
        name_tok = self.next()
        if name_tok.kind != "id":
            raise self.error(name_tok, f"expected a variable name, found {name_tok.text!r}")
        name = name_tok.text
        count: int | None = 1
        dims_given = False
        while self.at("["):
            self.next()
            dims_given = True
            if self.at("]"):
                self.next()
                count = None
                continue
            n = parse_int(self.next().text)
            self.expect("]")
            count = n if count is None else count * n
        if not dims_given:
            count = 1
        init: tuple[object, ...] | None = None
        if self.at("="):
            self.next()
            init = tuple(self.parse_init())
        if self.at(";"):
            self.next()
        if not vtype:
            raise self.error(name_tok, f"variable {name} has no type")
        size = TYPE_SIZES[vtype]
        if align == 0:
            align = size * vector
        self.order += 1
        return VarDecl(
            name=name,
            space=space,
            type=vtype,
            elem_size=size,
            count=count,
            align=align,
            init=init,
            extern=extern,
            vector=vector,
            order=self.order,
        )

    def parse_init(self) -> list[object]:
        out: list[object] = []
        if self.at("{"):
            self.next()
            while not self.at("}"):
                if self.at(","):
                    self.next()
                    continue
                out.extend(self.parse_init())
            self.next()
            return out
        tok = self.next()
        if tok.text == "-":
            num = self.next()
            imm = _imm(num.text, negative=True)
            out.append(_imm_value(imm))
        elif tok.kind == "num":
            out.append(_imm_value(_imm(tok.text)))
        elif tok.text == "generic":
            self.expect("(")
            name = self.next().text
            off = self.parse_sym_offset()
            self.expect(")")
            out.append(("sym", name, off, True))
        elif tok.kind == "id":
            out.append(("sym", tok.text, self.parse_sym_offset(), False))
        else:
            raise self.error(tok, f"unexpected {tok.text!r} in an initializer")
        return out

    def parse_sym_offset(self) -> int:
        off = 0
        while self.at("+") or self.at("-"):
            sign = -1 if self.next().text == "-" else 1
            if self.at("-"):
                self.next()
                sign = -sign
            off += sign * parse_int(self.next().text)
        return off

    # -- functions -----------------------------------------------------------------------------

    def parse_params(self) -> list[ParamDecl]:
        params: list[ParamDecl] = []
        self.expect("(")
        while not self.at(")"):
            if self.at(","):
                self.next()
                continue
            tok = self.next()
            if tok.text not in (".param", ".reg"):
                raise self.error(tok, f"expected .param in a parameter list, found {tok.text!r}")
            align = 0
            ptype = ""
            while (t := self.peek()) is not None and t.text.startswith("."):
                self.next()
                s = t.text[1:]
                if s == "align":
                    align = parse_int(self.next().text)
                elif s in TYPE_SIZES:
                    ptype = s
            name = self.next().text
            count = 1
            if self.at("["):
                self.next()
                count = parse_int(self.next().text)
                self.expect("]")
            size = TYPE_SIZES.get(ptype, 4) * count
            params.append(ParamDecl(name, ptype, size, align or TYPE_SIZES.get(ptype, 4)))
        self.expect(")")
        return params

    def parse_function(self, extern: bool) -> None:
        kind = self.next().text
        rets: list[ParamDecl] = []
        if self.at("("):
            rets = self.parse_params()
        name = self.next().text
        params: list[ParamDecl] = []
        if self.at("("):
            params = self.parse_params()
        # performance directives, .noreturn ... up to the body or the end of a declaration
        directives: dict[str, list[int]] = {}
        current: list[int] | None = None
        while not (self.at("{") or self.at(";")):
            tok = self.next()
            if tok.text.startswith("."):
                current = directives.setdefault(tok.text, [])
            elif current is not None and tok.text.isdigit():
                current.append(int(tok.text))
        func = Function(
            name=name,
            is_entry=kind == ".entry",
            params=params,
            rets=rets,
            body=None,
            extern=extern,
            directives={k: tuple(v) for k, v in directives.items()},
        )
        if self.at(";"):
            self.next()
            if name not in self.module.functions:
                self.module.functions[name] = func
            return
        if self.keep is not None and name not in self.keep:
            self.skip_braces()
            if name not in self.module.functions:
                self.module.functions[name] = func
            return
        self.parse_body(func)
        self.module.functions[name] = func

    # -- bodies --------------------------------------------------------------------------------

    def resolve(self, name: str) -> str:
        for scope in reversed(self.scopes):
            got = scope.get(name)
            if got is not None:
                return got
        return name

    def declare(self, name: str) -> str:
        """The name a declaration in the current scope gets (renamed inside nested blocks)."""
        if len(self.scopes) <= 1:
            self.scopes[0][name] = name
            return name
        self.scope_counter += 1
        new = f"{name}~{self.scope_counter}"
        self.scopes[-1][name] = new
        return new

    def parse_body(self, func: Function) -> None:
        self.expect("{")
        self.scopes = [{}]
        self.regs = {}
        self.loc = None
        self.inner_loc = None
        self.chain = []
        self.call_sites = ()
        self.chains = {}
        body: list[Instr | Label] = []
        func.body = body
        func.regs = self.regs
        while True:
            tok = self.peek()
            if tok is None:
                raise self.error(tok, f"function {func.name} has no closing brace")
            t = tok.text
            if tok.kind == "p" and t == "{":
                self.next()
                self.scopes.append({})
                continue
            if tok.kind == "p" and t == "}":
                self.next()
                self.scopes.pop()
                if not self.scopes:
                    break
                continue
            if t == ";":
                self.next()
                continue
            nxt = self.peek(1)
            if tok.kind == "id" and nxt is not None and nxt.text == ":":
                self.next()
                self.next()
                after = self.peek()
                if after is not None and after.text in (".branchtargets", ".calltargets"):
                    self.next()
                    targets = []
                    while not self.at(";"):
                        x = self.next()
                        if x.text != ",":
                            targets.append(x.text)
                    self.next()
                    body.append(Label(t))
                    body.append(Instr("." + after.text[1:], tuple(Sym(x) for x in targets)))
                    continue
                if after is not None and after.text == ".callprototype":
                    self.skip_statement()
                    continue
                body.append(Label(t))
                continue
            if t.startswith("."):
                self.parse_directive(func, tok)
                continue
            body.append(self.parse_instr())

    def parse_directive(self, func: Function, tok: Token) -> None:
        t = tok.text
        if t == ".reg" or t.startswith(".reg."):  # inline asm writes ".reg.b32 f;" as one token
            self.next()
            self.parse_reg_decl(t.split(".")[2:])
        elif t in (".local", ".shared", ".param", ".const", ".global"):
            decl = self.parse_var(False, module_scope=False)
            if decl is not None:
                if decl.space in ("local", "param"):
                    decl = _renamed(decl, self.declare(decl.name))
                func.vars.append(decl)
        elif t == ".loc":
            self.next()
            rest = self.skip_line(tok.line)
            nums = [x for x in rest if x.kind == "num"]
            if len(nums) >= 2 and parse_int(nums[1].text) == 0:
                # ``.loc F 0 C``: code nvcc ties to no source line (compiler-made): no location,
                # not a "line 0" a finding could point at
                self.loc, self.inner_loc, self.chain, self.call_sites = None, None, [], ()
            elif len(nums) >= 2:
                loc = Loc(parse_int(nums[0].text), parse_int(nums[1].text))
                here = (loc.file, loc.line, parse_int(nums[2].text) if len(nums) > 2 else 0)
                chain = [here]
                texts = [x.text for x in rest]
                if "inlined_at" in texts:
                    k = texts.index("inlined_at")
                    at = [x for x in rest[k + 1 :] if x.kind == "num"]
                    if len(at) >= 2:
                        self.inner_loc = loc
                        loc = Loc(parse_int(at[0].text), parse_int(at[1].text))
                        caller = (loc.file, loc.line, parse_int(at[2].text) if len(at) > 2 else 0)
                        # the caller's own .loc came just before, with its call sites
                        up = self.chain.index(caller) if caller in self.chain else -1
                        if up >= 0:
                            chain += self.chain[up:]
                        else:
                            chain += self.chains.get(caller, [caller])
                    else:
                        self.inner_loc = None
                else:
                    self.inner_loc = None
                self.chain = chain
                self.call_sites = tuple(Loc(f, n) for f, n, _ in chain[1:])
                self.chains[here] = chain
                self.loc = loc
                if func.loc is None:
                    func.loc = loc
        elif t == ".pragma":
            self.skip_statement()
        else:
            # .maxntid and friends inside a body, .file inside a function: skip the line
            self.next()
            self.skip_line(tok.line)

    def parse_reg_decl(self, suffixes: list[str] | None = None) -> None:
        rtype = ""
        vector = 1
        for s in suffixes or ():
            if s in ("v2", "v4"):
                vector = int(s[1:])
            elif s in TYPE_SIZES:
                rtype = s
        while (tok := self.peek()) is not None and tok.text.startswith("."):
            self.next()
            s = tok.text[1:]
            if s in ("v2", "v4"):
                vector = int(s[1:])
            elif s in TYPE_SIZES:
                rtype = s
        if vector != 1:
            raise self.error(self.peek(), "vector registers (.reg .v2/.v4) are not supported")
        while True:
            name_tok = self.next()
            name = name_tok.text
            if self.at("<"):
                self.next()
                n = parse_int(self.next().text)
                self.expect(">")
                for k in range(n):
                    self.regs[self.declare(f"{name}{k}")] = rtype
            else:
                self.regs[self.declare(name)] = rtype
            if self.at(","):
                self.next()
                continue
            break
        if self.at(";"):
            self.next()

    def parse_instr(self) -> Instr:
        guard = None
        neg = False
        first = self.peek()
        line = first.line if first else 0
        if self.at("@"):
            self.next()
            if self.at("!"):
                self.next()
                neg = True
            guard = self.resolve(self.next().text)
        op_tok = self.next()
        if op_tok.kind != "id":
            raise self.error(op_tok, f"expected an instruction, found {op_tok.text!r}")
        opcode = op_tok.text
        operands: list[Operand] = []
        current: list[Token] = []
        depth = 0
        while True:
            tok = self.next()
            if tok.kind == "p":
                if tok.text in "([{":
                    depth += 1
                elif tok.text in ")]}":
                    depth -= 1
                elif tok.text == ";" and depth == 0:
                    if current:
                        operands.append(self.operand(current))
                    break
                elif tok.text == "," and depth == 0:
                    operands.append(self.operand(current))
                    current = []
                    continue
            current.append(tok)
        return Instr(
            opcode=opcode,
            operands=tuple(operands),
            guard=guard,
            guard_neg=neg,
            loc=self.loc,
            inner_loc=self.inner_loc,
            ptx_line=line,
            call_sites=self.call_sites,
        )

    # -- operands ------------------------------------------------------------------------------

    def name_operand(self, text: str) -> Reg | Sym:
        name = self.resolve(text)
        if name in self.regs or text.startswith("%"):
            return Reg(name)
        return Sym(name)

    def operand(self, toks: list[Token]) -> Operand:
        if not toks:
            raise self.error(self.peek(), "empty operand")
        first = toks[0].text
        if first == "[":
            return self.address(toks[1:-1], toks[0])
        if first == "{":
            items = _split_commas(toks[1:-1])
            return Vec(tuple(None if _is_sink(x) else self.operand(x) for x in items))
        if first == "(":
            items = _split_commas(toks[1:-1])
            return Group(tuple(self.operand(x) for x in items if x))
        if first == "!":
            return Neg(self.operand(toks[1:]))
        if first == "-" and len(toks) == 2 and toks[1].kind == "num":
            return _imm(toks[1].text, negative=True)
        if toks[0].kind == "num" and len(toks) == 1:
            return _imm(first)
        if toks[0].kind == "id":
            if len(toks) == 3 and toks[1].text == "|":
                value = self.name_operand(first)
                pred = self.name_operand(toks[2].text)
                if not isinstance(value, Reg) or not isinstance(pred, Reg):
                    raise self.error(toks[0], "bad predicate pair operand")
                return PredOut(value, pred)
            if len(toks) == 1:
                return self.name_operand(first)
            if first == "generic" and len(toks) >= 4:
                return Sym(self.resolve(toks[2].text), _sum_offset(toks[3:-1]))
            sym = self.name_operand(first)
            if isinstance(sym, Sym):
                return Sym(sym.name, _sum_offset(toks[1:]))
        raise self.error(toks[0], f"cannot read operand {' '.join(t.text for t in toks)!r}")

    def address(self, toks: list[Token], at: Token) -> Addr:
        if not toks:
            raise self.error(at, "empty address []")
        if toks[0].kind == "num":
            return Addr(None, _sum_offset(toks, start_sign=True))
        if toks[0].kind != "id":
            raise self.error(at, f"cannot read address {' '.join(t.text for t in toks)!r}")
        base = self.name_operand(toks[0].text)
        return Addr(base, _sum_offset(toks[1:]))


def _renamed(decl: VarDecl, name: str) -> VarDecl:
    if name == decl.name:
        return decl
    return VarDecl(
        name=name,
        space=decl.space,
        type=decl.type,
        elem_size=decl.elem_size,
        count=decl.count,
        align=decl.align,
        init=decl.init,
        extern=decl.extern,
        vector=decl.vector,
        order=decl.order,
    )


def _imm_value(imm: Imm) -> int | float:
    if imm.kind == "f32":
        return f32_bits_to_float(int(imm.value))
    if imm.kind == "f64":
        return f64_bits_to_float(int(imm.value))
    return imm.value


def _is_sink(toks: list[Token]) -> bool:
    return len(toks) == 1 and toks[0].text == "_"


def _split_commas(toks: list[Token]) -> list[list[Token]]:
    out: list[list[Token]] = []
    cur: list[Token] = []
    depth = 0
    for t in toks:
        if t.kind == "p" and t.text in "([{":
            depth += 1
        elif t.kind == "p" and t.text in ")]}":
            depth -= 1
        if t.kind == "p" and t.text == "," and depth == 0:
            out.append(cur)
            cur = []
            continue
        cur.append(t)
    if cur:
        out.append(cur)
    return out


def _sum_offset(toks: list[Token], start_sign: bool = False) -> int:
    """``+ 4``, ``+ - 4``, ``- 8``, ``4`` -> the integer sum."""
    total = 0
    sign = 1
    expect_number = start_sign
    for t in toks:
        if t.text == "+":
            expect_number = True
            continue
        if t.text == "-":
            sign = -sign
            expect_number = True
            continue
        if t.kind == "num" and expect_number:
            total += sign * parse_int(t.text)
            sign = 1
            expect_number = False
            continue
        raise PtxParseError(
            f"PTX line {t.line}: cannot read the address offset {t.text!r}",
            "the PTX is malformed or uses syntax the emulator does not know",
        )
    return total


def parse_ptx(text: str) -> Module:
    """Parse a PTX module (see the module docstring for what is understood)."""
    return _Parser(text).parse()


def parse_ptx_entry(text: str, entry: str) -> Module:
    """:func:`parse_ptx` with the bodies of kernel ``entry`` and of the functions it calls
    (directly or not) parsed, the other functions' skipped (kept as declarations): what the
    emulator reads of a module to run ``entry`` (:func:`gpuadvise.ptx.cfg.build_program`), the
    module-scope variables and ``.file`` table whole. A variant's module holds every kernel of
    its source, of which it runs one (HeCBench groupnorm: three). The whole module's parse where
    ``entry`` has no body in it (its error as the emulator's)."""
    toks = tokenize(text)
    bodies = _function_bodies(toks)
    if entry not in bodies:
        return parse_ptx(text)
    keep = {entry}
    todo = [entry]
    while todo and len(keep) < len(bodies):
        lo, hi = bodies[todo.pop()]
        # any function the body names (a call's target, an address taken): a superset of its
        # callees, whose bodies are parsed too
        named = bodies.keys() & {tok.text for tok in toks[lo:hi]}
        todo += named - keep
        keep |= named
    # every body kept (one kernel, or its callees): the whole parse, of the same tokens
    return _Parser(text, None if len(keep) == len(bodies) else frozenset(keep), toks).parse()


def _function_bodies(toks: list[Token]) -> dict[str, tuple[int, int]]:
    """Each function defined at module scope: its name -> the token range of its body (its
    braces included)."""
    out: dict[str, tuple[int, int]] = {}
    depth = 0
    i, n = 0, len(toks)
    while i < n:
        tok = toks[i]
        if tok.kind == "p" and tok.text == "{":
            depth += 1
        elif tok.kind == "p" and tok.text == "}":
            depth -= 1
        elif depth == 0 and tok.text in (".entry", ".func"):
            j = i + 1
            if j < n and toks[j].text == "(":  # the return parameters
                j = _closing(toks, j, "(", ")") + 1
            if j >= n:
                break
            name = toks[j].text
            # up to the body or the end of a declaration (no braces in a signature)
            while j < n and toks[j].text not in ("{", ";"):
                j += 1
            if j < n and toks[j].text == "{":
                end = _closing(toks, j, "{", "}")
                out[name] = (j, end + 1)
                i = end + 1
                continue
            i = j
        i += 1
    return out


def _closing(toks: list[Token], i: int, opening: str, closing: str) -> int:
    """The index of the token that closes the bracket ``toks[i]`` (the last token when none)."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind == "p" and t.text == opening:
            depth += 1
        elif t.kind == "p" and t.text == closing:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


@functools.lru_cache(maxsize=8)
def _parse_by_digest(digest: str, text: str) -> Module:
    return parse_ptx(text)


def parse_ptx_cached(text: str) -> Module:
    """:func:`parse_ptx`, of the last few modules parsed kept (the emulator, and the binding of
    a spec's constants to the module's ``.const`` variables, read the same module)."""
    return _parse_by_digest(hashlib.sha256(text.encode()).hexdigest(), text)
