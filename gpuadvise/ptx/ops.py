"""Semantics of the PTX instructions, each compiled once per batch into a closure ``op(mask)``.

A closure reads its operands as whole lane arrays (zero-copy views of the registers in the
instruction's type), computes with numpy on every lane of the batch, and writes the result back under
the mask of the lanes that execute it (:func:`gpuadvise.ptx.values.write`). Memory instructions,
barriers and control flow are built by the emulator (:mod:`gpuadvise.ptx.emulator`); this module
holds arithmetic, logic, comparisons, conversions, moves and warp-level operations.

Numerics (what differs from the GPU, and by how much):

- ``f32`` arithmetic is numpy ``float32`` (IEEE, round to nearest even); directed rounding modes
  (``.rz``/``.rm``/``.rp``) are computed in float64 and rounded in the asked direction. ``fma``/``mad``
  of ``f32`` is computed in float64 and rounded once to float32 (the product is exact in float64, so
  only the final sum can be off, by a double rounding, in rare cases); ``f64`` fma uses long double.
- ``.ftz`` (flush subnormals to zero) is ignored: subnormal results keep their value.
- The approximate instructions (``ex2``/``lg2``/``sin``/``cos``/``rsqrt``/``rcp``/``sqrt``/
  ``tanh`` ``.approx``, ``div.approx``/``div.full``) are computed exactly: within an ulp or two of
  the hardware's approximation, more for ``sin``/``cos`` of large arguments. The transcendental ones
  (``ex2``/``lg2``/``sin``/``cos``/``tanh``) of ``f32`` and the 16-bit types are computed in float64
  and rounded, never by numpy's float32 functions: those take a different SIMD path on each host CPU
  (AVX2, AVX-512) and differ in the last bit, which moved a data-dependent loop's trip count, and so
  the advice, between two machines. Rounded from float64 they are the correctly rounded value on
  every host, but for a double rounding about once in 2^28.
- ``f16``/``bf16`` (and ``x2``) arithmetic is computed in float32 and rounded to the 16-bit type.
- Integer division by zero gives all ones (as the GPU does for unsigned division); the remainder 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuadvise.ptx.errors import UnsupportedInstructionError
from gpuadvise.ptx.parser import (
    TYPE_SIZES,
    Addr,
    Group,
    Imm,
    Instr,
    Neg,
    Operand,
    PredOut,
    Reg,
    Sym,
    Vec,
    f32_bits_to_float,
    f64_bits_to_float,
)
from gpuadvise.ptx.values import (
    NP_TYPES,
    RUNS,
    SPARSE,
    Mask,
    bits_dtype,
    is_float_type,
    is_signed_type,
    signed_dtype,
    to_storage,
    write,
)

if TYPE_CHECKING:
    from gpuadvise.ptx.emulator import Batch

__all__ = ["Op", "build_op", "type_of"]

Op = Callable[[Mask], None]
Getter = Callable[[], Any]

U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64
F16, F32, F64 = np.float16, np.float32, np.float64

# what np.clip runs for a float array, without its wrappers (~4 us a call; numpy 2)
_clip: Any = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", np.clip)


class _Unsupported(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def type_of(mods: tuple[str, ...]) -> str:
    """The instruction's type: its last modifier that names a PTX type."""
    for m in reversed(mods):
        if m in TYPE_SIZES:
            return m
    raise _Unsupported("an instruction without a type")


def _types(mods: tuple[str, ...]) -> list[str]:
    return [m for m in mods if m in TYPE_SIZES]


# ---------------------------------------------------------------------------------------------
# Operands


def imm_value(imm: Imm, t: str) -> Any:
    """A literal as a numpy scalar of PTX type ``t``."""
    dt = NP_TYPES[t]
    if t == "pred":
        return np.bool_(bool(imm.value))
    if t in ("f32", "f64", "f16"):
        if imm.kind == "f32":
            v = f32_bits_to_float(int(imm.value))
        elif imm.kind == "f64":
            v = f64_bits_to_float(int(imm.value))
        else:
            v = float(imm.value)
        return dt.type(v)
    # integer / bit types (bf16, f16x2 ... are raw bits)
    if imm.kind in ("f32", "f64"):
        bits = int(imm.value)
    elif imm.kind == "float":
        bits = int(imm.value)
    else:
        bits = int(imm.value)
    size = dt.itemsize
    bits &= (1 << (8 * size)) - 1
    return np.array(bits, dtype=bits_dtype(size)).view(dt)[()]


def getter(b: Batch, op: Operand | None, t: str) -> Getter:
    """A zero-argument callable giving operand ``op`` as lane values of PTX type ``t``."""
    dt = NP_TYPES[t]
    if isinstance(op, Reg):
        name = op.name
        store = b.regs.get(name)
        if store is None and name.startswith(("%clock", "%globaltimer")):
            cdt = dt
            return lambda: np.asarray(b.step_counter * 4).astype(cdt)
        if store is None:
            value = b.special(name)
            if isinstance(value, np.ndarray):
                conv = _convert_bits(value, dt, t)
                return lambda: conv
            sval = np.asarray(value).astype(dt) if dt != np.bool_ else np.bool_(value)
            return lambda: sval
        if store.dtype == np.bool_:
            if t == "pred":
                return lambda: store
            return lambda: store.astype(dt)
        if t == "pred":
            return lambda: store != 0
        if store.itemsize == dt.itemsize:
            view = store.view(dt)
            return lambda: view
        if store.itemsize > dt.itemsize:
            ud = bits_dtype(dt.itemsize)
            return lambda: store.astype(ud).view(dt)
        if is_signed_type(t):
            sd = signed_dtype(store.itemsize)
            return lambda: store.view(sd).astype(dt)
        return lambda: store.astype(bits_dtype(dt.itemsize)).view(dt)
    if isinstance(op, Imm):
        value = imm_value(op, t)
        return lambda: value
    if isinstance(op, Sym):
        addr = b.symbol_value(op.name) + op.offset
        value = imm_value(Imm(addr), t)
        return lambda: value
    if isinstance(op, Neg):
        inner = getter(b, op.inner, "pred")
        return lambda: ~inner()
    raise _Unsupported(f"operand {ptx_text(op)!r}")


def ptx_text(op: Operand | None) -> str:
    """An operand as PTX writes it (``%r1``, ``sym+8``, ``[%rd1+4]``, ``{%r1, _}``), for messages."""
    if op is None:
        return "_"
    if isinstance(op, Reg):
        return op.name.split("~", 1)[0]  # a register of a nested scope is renamed name~N
    if isinstance(op, Sym):
        return op.name.split("~", 1)[0] + (f"{op.offset:+d}" if op.offset else "")
    if isinstance(op, Imm):
        return str(op.value)
    if isinstance(op, Addr):
        base = "" if op.base is None else ptx_text(op.base)
        off = f"{op.offset:+d}" if base and op.offset else "" if base else str(op.offset)
        return f"[{base}{off}]"
    if isinstance(op, Vec):
        return "{" + ", ".join(ptx_text(x) for x in op.items) + "}"
    if isinstance(op, Neg):
        return "!" + ptx_text(op.inner)
    if isinstance(op, PredOut):
        return f"{ptx_text(op.value)}|{ptx_text(op.pred)}"
    if isinstance(op, Group):
        return "(" + ", ".join(ptx_text(x) for x in op.items) + ")"
    return str(op)  # pragma: no cover


def _convert_bits(value: np.ndarray, dt: np.dtype[Any], t: str) -> Any:
    if dt == np.bool_:
        return value != 0
    if value.dtype.itemsize == dt.itemsize:
        return value.view(dt)
    ud = bits_dtype(dt.itemsize)
    return value.astype(ud).view(dt)


class Dst:
    """A destination register written as PTX type ``t``."""

    __slots__ = ("direct", "dt", "name", "store", "t")

    def __init__(self, b: Batch, op: Operand | None, t: str) -> None:
        if not isinstance(op, Reg) or op.name not in b.regs:
            what = "a name no .reg declares" if isinstance(op, Sym) else "not a register"
            raise _Unsupported(f"destination {ptx_text(op)!r}, {what}")
        self.name = op.name
        self.store = b.regs[op.name]
        self.t = t
        self.dt = NP_TYPES[t]
        same = (
            self.store.dtype == np.bool_ if t == "pred" else self.store.itemsize == self.dt.itemsize
        )
        self.direct = self.store.view(self.dt) if same and self.store.dtype != np.bool_ else None
        if t == "pred" and self.store.dtype == np.bool_:
            self.direct = self.store

    def __call__(self, val: Any, m: Mask) -> None:
        if type(val) is np.ndarray and val.dtype == self.dt:
            direct = self.direct
            if direct is not None:  # what the conversions below come to: the bits as they are
                if m.b is None:
                    direct[...] = val
                    return
                mode = m._mode  # (kept once made: read without the method call)
                if mode < 0:
                    mode = m.mode()
                if mode == SPARSE and val.ndim:
                    # a few lanes: scattered through the register's view in the value's type
                    # (the bits write() scatters, without its view and checks)
                    idx = m.idx()
                    direct[idx] = val[idx]
                elif mode == RUNS:  # write()'s own step for long runs, without its call
                    np.copyto(self.store, val.view(self.store.dtype), where=m.b, casting="unsafe")
                else:
                    write(self.store, val.view(self.store.dtype), m)
                return
        if self.t == "pred" or self.store.dtype == np.bool_:
            v = np.asarray(val)
            if self.store.dtype == np.bool_:
                write(self.store, v.astype(bool, copy=False), m)
            else:
                write(self.store, v.astype(self.store.dtype), m)
            return
        write(self.store, to_storage(val, self.t, self.store.dtype), m)

    def out(self, m: Mask) -> np.ndarray | None:
        """The register's view to compute into directly (full masks only)."""
        return self.direct if m.b is None else None


def _dst(b: Batch, op: Operand | None, t: str) -> Dst | None:
    """A destination, or None for the sink ``_``."""
    if op is None or (isinstance(op, Sym) and op.name == "_"):
        return None
    return Dst(b, op, t)


# ---------------------------------------------------------------------------------------------
# Helpers


def _ufunc_op(b: Batch, ins: Instr, t: str, fn: Any, nsrc: int = 2) -> Op:
    ops = ins.operands
    d = Dst(b, ops[0], t)
    srcs = [getter(b, ops[1 + k], t) for k in range(nsrc)]
    if nsrc == 1:
        (a,) = srcs

        def op1(m: Mask) -> None:
            out = d.out(m)
            if out is not None:
                fn(a(), out=out)
            else:
                d(fn(a()), m)

        return op1
    a, c = srcs[0], srcs[1]
    direct = d.direct

    def op2(m: Mask) -> None:
        if direct is not None and m.b is None:  # d.out(m), without the call
            fn(a(), c(), out=direct)
        else:
            d(fn(a(), c()), m)

    return op2


def _func_op(b: Batch, ins: Instr, tin: str | list[str], tout: str, fn: Callable[..., Any]) -> Op:
    ops = ins.operands
    d = Dst(b, ops[0], tout)
    tins = tin if isinstance(tin, list) else [tin] * (len(ops) - 1)
    srcs = [getter(b, o, ti) for o, ti in zip(ops[1:], tins, strict=False)]
    if len(srcs) == 1:  # (the usual counts without the generator and the unpacking)
        (s0,) = srcs
        return lambda m: d(fn(s0()), m)
    if len(srcs) == 2:
        s0, s1 = srcs
        return lambda m: d(fn(s0(), s1()), m)
    if len(srcs) == 3:
        s0, s1, s2 = srcs
        return lambda m: d(fn(s0(), s1(), s2()), m)

    def op(m: Mask) -> None:
        d(fn(*(s() for s in srcs)), m)

    return op


def round_to_f32(x: Any, mode: str) -> Any:
    """float64 values rounded to float32 in direction ``mode`` (rn, rz, rm, rp)."""
    r = np.asarray(x, dtype=F64).astype(F32)
    if mode in ("rn", "", "rna"):
        return r
    back = r.astype(F64)
    x = np.asarray(x, dtype=F64)
    if mode == "rz":
        fix = np.abs(back) > np.abs(x)
        return np.where(fix, np.nextafter(r, F32(0)), r)
    if mode == "rm":
        return np.where(back > x, np.nextafter(r, F32(-np.inf)), r)
    if mode == "rp":
        return np.where(back < x, np.nextafter(r, F32(np.inf)), r)
    return r


def _rounding(mods: tuple[str, ...]) -> str:
    for m in mods:
        if m in ("rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi", "rs"):
            return m
    return ""


def _sat01(x: Any) -> Any:
    return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


def bf16_to_f32(u: Any) -> Any:
    return (np.asarray(u).astype(U32) << U32(16)).view(F32)


def f32_to_bf16(f: Any, mode: str = "rn") -> Any:
    u = np.asarray(f, dtype=F32).view(U32)
    if mode == "rz":
        r = u >> U32(16)
    else:
        bias = ((u >> U32(16)) & U32(1)) + U32(0x7FFF)
        r = (u + bias) >> U32(16)
    nan = np.isnan(np.asarray(f, dtype=F32))
    return np.where(nan, U32(0x7FFF), r).astype(U16)


# from this many halves on, f16 -> f32 is a gather from the table of all 65,536 (made once, by
# the same conversion): numpy converts halves one at a time in software (~8 ns a value), the
# gather takes a third to two thirds of that; fewer halves convert faster than they gather
_F16_TABLE_FROM = 1024
_f16_table: list[np.ndarray] = []


def f16_bits_to_f32(u: Any) -> Any:
    arr = np.asarray(u)
    if arr.size < _F16_TABLE_FROM or arr.ndim == 0:
        return arr.astype(U16).view(F16).astype(F32)
    if not _f16_table:
        _f16_table.append(np.arange(1 << 16, dtype=np.uint32).astype(U16).view(F16).astype(F32))
    return np.take(_f16_table[0], arr.astype(U16, copy=False))


def f32_to_f16_bits(f: Any) -> Any:
    return np.asarray(f, dtype=F32).astype(F16).view(U16)


def _unpack2(u: Any) -> tuple[Any, Any]:
    u = np.asarray(u).astype(U32, copy=False)  # read only
    return (u & U32(0xFFFF)).astype(U16), (u >> U32(16)).astype(U16)


def _pack2(lo: Any, hi: Any) -> Any:
    return np.asarray(lo).astype(U32) | (np.asarray(hi).astype(U32) << U32(16))


def _half_unary(kind: str) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    if kind.startswith("bf16"):
        return bf16_to_f32, f32_to_bf16
    return f16_bits_to_f32, f32_to_f16_bits


def _bit_length(x: Any, bits: int) -> Any:
    """Number of significant bits of unsigned values (0 for 0)."""
    x = np.asarray(x)
    if bits <= 32:
        _, e = np.frexp(x.astype(F64))
        return np.where(x == 0, 0, e).astype(np.int64)
    hi = (x >> U64(32)).astype(U32)
    lo = (x & U64(0xFFFFFFFF)).astype(U32)
    return np.where(hi != 0, 32 + _bit_length(hi, 32), _bit_length(lo, 32))


_REV_TABLE = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=U8)


def _brev(x: Any) -> Any:
    x = np.ascontiguousarray(np.atleast_1d(x))
    size = x.dtype.itemsize
    bytes_ = x.view(U8).reshape(-1, size)
    return _REV_TABLE[bytes_][:, ::-1].copy().view(x.dtype).reshape(x.shape)


def _mulhi_u64(a: Any, c: Any) -> Any:
    a = np.asarray(a, dtype=U64)
    c = np.asarray(c, dtype=U64)
    m32 = U64(0xFFFFFFFF)
    s32 = U64(32)
    al, ah = a & m32, a >> s32
    cl, ch = c & m32, c >> s32
    ll = al * cl
    lh = al * ch
    hl = ah * cl
    hh = ah * ch
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    return hh + (lh >> s32) + (hl >> s32) + (mid >> s32)


def _mulhi_s64(a: Any, c: Any) -> Any:
    a = np.asarray(a, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    hi = _mulhi_u64(
        a.view(U64) if a.ndim else a.astype(U64), c.view(U64) if c.ndim else c.astype(U64)
    )
    hi = hi - np.where(a < 0, c.astype(U64), U64(0)) - np.where(c < 0, a.astype(U64), U64(0))
    return np.asarray(hi).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Arithmetic


def _int_div(a: Any, c: Any, signed: bool, dt: np.dtype[Any]) -> Any:
    a = np.asarray(a)
    c = np.asarray(c)
    zero = c == 0
    safe = np.where(zero, dt.type(1), c)
    if signed:
        q = np.abs(a.astype(np.int64) if dt.itemsize < 8 else a) // np.abs(
            safe.astype(np.int64) if dt.itemsize < 8 else safe
        )
        neg = (a < 0) ^ (safe < 0)
        q = np.where(neg, -q, q).astype(dt)
        return np.where(zero, dt.type(-1), q)
    q = a // safe
    return np.where(zero, np.array(-1).astype(dt), q).astype(dt)


def _int_rem(a: Any, c: Any, dt: np.dtype[Any]) -> Any:
    a = np.asarray(a)
    c = np.asarray(c)
    zero = c == 0
    safe = np.where(zero, dt.type(1), c)
    r = np.fmod(a, safe).astype(dt)
    return np.where(zero, a, r).astype(dt)


def build_arith(b: Batch, ins: Instr) -> Op:
    base = ins.base
    mods = ins.mods
    t = type_of(mods)
    ops = ins.operands
    if t in ("f16", "bf16", "f16x2", "bf16x2"):
        return _build_half(b, ins, t)
    dt = NP_TYPES[t]
    isf = is_float_type(t)
    rnd = _rounding(mods)
    sat = "sat" in mods

    if base in ("add", "sub") and ("cc" in mods or base in ("addc", "subc")):
        return _build_carry(b, ins, t)
    if base in ("addc", "subc"):
        return _build_carry(b, ins, t)

    if base in ("add", "sub", "mul") and isf:
        if base == "mul" and any(x in mods for x in ("wide", "hi", "lo")):
            raise _Unsupported(ins.opcode)
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
        if rnd in ("", "rn") and not sat:
            return _ufunc_op(b, ins, t, fn)
        a, c = getter(b, ops[1], t), getter(b, ops[2], t)
        d = Dst(b, ops[0], t)

        def fop(m: Mask) -> None:
            if t == "f32" and rnd in ("rz", "rm", "rp"):
                r = round_to_f32(fn(np.asarray(a(), F64), np.asarray(c(), F64)), rnd)
            else:
                r = fn(a(), c())
            if sat:
                r = _sat01(np.asarray(r))
            d(r, m)

        return fop

    if base in ("add", "sub") and not isf:
        fn = np.add if base == "add" else np.subtract
        if not sat:
            return _ufunc_op(b, ins, t, fn)
        info = np.iinfo(dt)

        def satop(a: Any, c: Any) -> Any:
            r = fn(np.asarray(a, np.int64), np.asarray(c, np.int64))
            return np.clip(r, info.min, info.max).astype(dt)

        return _func_op(b, ins, t, t, satop)

    if base == "mul" and not isf:
        if "wide" in mods:
            wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}.get(t)
            if wide is None:
                raise _Unsupported(ins.opcode)
            wdt = NP_TYPES[wide]
            a, c = getter(b, ops[1], t), getter(b, ops[2], t)
            d = Dst(b, ops[0], wide)

            def wop(m: Mask) -> None:
                out = d.out(m)
                x = np.asarray(a()).astype(wdt)
                y = np.asarray(c()).astype(wdt)
                if out is not None:
                    np.multiply(x, y, out=out)
                else:
                    d(x * y, m)

            return wop
        if "hi" in mods:
            if dt.itemsize == 8:
                fn2 = _mulhi_s64 if is_signed_type(t) else _mulhi_u64
                return _func_op(b, ins, t, t, lambda x, y: np.asarray(fn2(x, y)).astype(dt))
            wd = np.dtype(np.int64) if is_signed_type(t) else np.dtype(np.uint64)
            shift = 8 * dt.itemsize

            def hiop(x: Any, y: Any) -> Any:
                return ((np.asarray(x).astype(wd) * np.asarray(y).astype(wd)) >> shift).astype(dt)

            return _func_op(b, ins, t, t, hiop)
        return _ufunc_op(b, ins, t, np.multiply)

    if base in ("mad", "fma"):
        if isf:
            return _build_fma(b, ins, t, rnd or "rn", sat)
        return _build_mad_int(b, ins, t)

    if base == "div":
        if isf:
            if t == "f32" and rnd in ("rz", "rm", "rp"):
                return _func_op(
                    b, ins, t, t, lambda x, y: round_to_f32(np.divide(np.asarray(x, F64), y), rnd)
                )
            return _ufunc_op(b, ins, t, np.divide)
        return _func_op(b, ins, t, t, lambda x, y: _int_div(x, y, is_signed_type(t), dt))
    if base == "rem":
        return _func_op(b, ins, t, t, lambda x, y: _int_rem(x, y, dt))
    if base in ("min", "max"):
        if isf:
            if "NaN" in mods:
                return _ufunc_op(b, ins, t, np.minimum if base == "min" else np.maximum)
            return _ufunc_op(b, ins, t, np.fmin if base == "min" else np.fmax)
        if "relu" in mods:
            f = np.minimum if base == "min" else np.maximum
            return _func_op(b, ins, t, t, lambda x, y: np.maximum(f(x, y), dt.type(0)))
        return _ufunc_op(b, ins, t, np.minimum if base == "min" else np.maximum)
    if base == "abs":
        if isf:
            ud = bits_dtype(dt.itemsize)
            mask = ud.type((1 << (8 * dt.itemsize - 1)) - 1)
            return _func_op(b, ins, t, t, lambda x: (np.asarray(x).view(ud) & mask).view(dt))
        return _ufunc_op(b, ins, t, np.abs, nsrc=1)
    if base == "neg":
        if isf:
            ud = bits_dtype(dt.itemsize)
            sign = ud.type(1 << (8 * dt.itemsize - 1))
            return _func_op(b, ins, t, t, lambda x: (np.asarray(x).view(ud) ^ sign).view(dt))
        return _ufunc_op(b, ins, t, np.negative, nsrc=1)
    if base == "copysign":
        return _func_op(b, ins, t, t, lambda x, y: np.copysign(y, x).astype(dt))
    if base == "sad":

        def sad(x: Any, y: Any, z: Any) -> Any:
            wx = np.asarray(x).astype(np.int64) if dt.itemsize < 8 else np.asarray(x)
            diff = np.where(x > y, wx - y, np.asarray(y).astype(wx.dtype) - x)
            return (np.asarray(diff).astype(dt) + z).astype(dt)

        return _func_op(b, ins, t, t, sad)
    if base in ("mul24", "mad24"):
        if "lo" not in mods:
            raise _Unsupported(ins.opcode)
        sd = np.dtype(np.int64)

        def m24(x: Any, y: Any, z: Any = 0) -> Any:
            ax = np.asarray(x).astype(sd)
            ay = np.asarray(y).astype(sd)
            if is_signed_type(t):
                ax = (ax << 40) >> 40
                ay = (ay << 40) >> 40
            else:
                ax &= 0xFFFFFF
                ay &= 0xFFFFFF
            return ((ax * ay) + np.asarray(z).astype(sd)).astype(dt)

        return _func_op(b, ins, t, t, m24)
    raise _Unsupported(ins.opcode)


def _build_carry(b: Batch, ins: Instr, t: str) -> Op:
    """add.cc / addc / sub.cc / subc on 32- and 64-bit integers through a per-lane carry flag."""
    base = ins.base
    mods = ins.mods
    dt = NP_TYPES[t]
    bits = 8 * dt.itemsize
    ud = bits_dtype(dt.itemsize)
    ops = ins.operands
    a, c = getter(b, ops[1], t), getter(b, ops[2], t)
    d = Dst(b, ops[0], t)
    cc = b.carry_flag()
    use_in = base in ("addc", "subc")
    set_out = "cc" in mods
    sub = base in ("sub", "subc")
    mask = (1 << bits) - 1

    def op(m: Mask) -> None:
        x = np.asarray(a()).view(ud) if np.ndim(a()) else np.asarray(a()).astype(ud)
        y = np.asarray(c()).view(ud) if np.ndim(c()) else np.asarray(c()).astype(ud)
        cin = cc.astype(ud) if use_in else ud.type(0)
        if bits == 32:
            wx = np.asarray(x).astype(U64)
            wy = np.asarray(y).astype(U64)
            wc = np.asarray(cin).astype(U64)
            if sub:
                r = wx - wy - wc
                carry = (wx < wy + wc).astype(U8)
            else:
                r = wx + wy + wc
                carry = (r >> U64(32)).astype(U8)
            res = (r & U64(mask)).astype(ud)
        else:
            if sub:
                r1 = x - y
                r = r1 - cin
                carry = ((x < y) | (r1 < cin)).astype(U8)
            else:
                r1 = x + y
                r = r1 + cin
                carry = ((r1 < x) | (r < r1)).astype(U8)
            res = np.asarray(r).astype(ud)
        d(np.asarray(res).view(dt) if np.ndim(res) else np.asarray(res).astype(dt), m)
        if set_out:
            write(cc, np.broadcast_to(carry, cc.shape).astype(U8), m)

    return op


def _build_fma(b: Batch, ins: Instr, t: str, rnd: str, sat: bool) -> Op:
    ops = ins.operands
    a, c, e = (getter(b, ops[k], t) for k in (1, 2, 3))
    d = Dst(b, ops[0], t)
    if t == "f32":
        nearest = rnd in ("rn", "", "rna") and not sat
        # nearest rounding: the product and sum into the batch's float64 scratch (ops run one
        # at a time), cast into the register (the same values, fewer new arrays)
        tmp = b.scratch_f64 if nearest else None
        dview = d.direct

        def op32(m: Mask) -> None:
            if tmp is not None:
                np.multiply(a(), c(), out=tmp, dtype=F64)
                np.add(tmp, e(), out=tmp)
                if dview is not None and m.b is None:
                    dview[...] = tmp
                else:  # rounded to nearest by the cast, as round_to_f32 does
                    d(tmp.astype(F32), m)
                return
            r = np.asarray(a(), F64) * c()
            r += e()
            if nearest:
                direct = d.out(m)
                if direct is not None:  # rounded to nearest by the cast
                    direct[...] = r
                    return
            out = round_to_f32(r, rnd)
            if sat:
                out = _sat01(np.asarray(out))
            d(out, m)

        return op32
    if t == "f64":
        ld = np.longdouble

        def op64(m: Mask) -> None:
            r = (np.asarray(a(), ld) * np.asarray(c(), ld) + np.asarray(e(), ld)).astype(F64)
            if sat:
                r = _sat01(r)
            d(r, m)

        return op64
    raise _Unsupported(ins.opcode)


def _build_mad_int(b: Batch, ins: Instr, t: str) -> Op:
    mods = ins.mods
    dt = NP_TYPES[t]
    ops = ins.operands
    if "cc" in mods or ins.base == "madc":
        raise _Unsupported(ins.opcode)
    if "wide" in mods:
        wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}.get(t)
        if wide is None:
            raise _Unsupported(ins.opcode)
        wdt = NP_TYPES[wide]
        return _func_op(
            b,
            ins,
            [t, t, wide],
            wide,
            lambda x, y, z: np.asarray(x).astype(wdt) * np.asarray(y).astype(wdt) + z,
        )
    if "hi" in mods:
        if dt.itemsize == 8:
            fn2 = _mulhi_s64 if is_signed_type(t) else _mulhi_u64
            return _func_op(b, ins, t, t, lambda x, y, z: np.asarray(fn2(x, y)).astype(dt) + z)
        wd = np.dtype(np.int64) if is_signed_type(t) else np.dtype(np.uint64)
        shift = 8 * dt.itemsize
        return _func_op(
            b,
            ins,
            t,
            t,
            lambda x, y, z: (
                ((np.asarray(x).astype(wd) * np.asarray(y).astype(wd)) >> shift).astype(dt) + z
            ).astype(dt),
        )
    a, c, e = (getter(b, ops[k], t) for k in (1, 2, 3))
    d = Dst(b, ops[0], t)

    def op(m: Mask) -> None:
        out = d.out(m)
        if out is not None:
            np.multiply(a(), c(), out=out)
            np.add(out, e(), out=out)
        else:
            d(np.add(np.multiply(a(), c()), e()), m)

    return op


def _build_half(b: Batch, ins: Instr, t: str) -> Op:
    """f16 / bf16 / f16x2 / bf16x2 arithmetic, computed in float32."""
    base = ins.base
    mods = ins.mods
    to32, from32 = _half_unary(t)
    pair = t.endswith("x2")
    ops = ins.operands
    store_t = "b32" if pair else "b16"
    d = Dst(b, ops[0], store_t)
    srcs = [getter(b, o, store_t) for o in ops[1:]]
    sat = "sat" in mods
    relu = "relu" in mods

    def f(*xs: Any) -> Any:
        if base in ("add", "sub", "mul"):
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[base]
            return fn(xs[0], xs[1])
        if base in ("fma", "mad"):
            return (np.asarray(xs[0], F64) * xs[1] + xs[2]).astype(F32)
        if base == "neg":
            return -xs[0]
        if base == "abs":
            return np.abs(xs[0])
        if base == "min":
            return np.fmin(xs[0], xs[1])
        if base == "max":
            return np.fmax(xs[0], xs[1])
        if base == "ex2":
            return np.exp2(np.asarray(xs[0], F64))  # in float64: the same on every host
        if base == "tanh":
            return np.tanh(np.asarray(xs[0], F64))
        raise _Unsupported(ins.opcode)

    if base not in ("add", "sub", "mul", "fma", "mad", "neg", "abs", "min", "max", "ex2", "tanh"):
        raise _Unsupported(ins.opcode)

    def finish(r: Any) -> Any:
        r = np.asarray(r, F32)
        if sat:
            r = _sat01(r)
        if relu:
            r = np.where(r < 0, F32(0), r).astype(F32)
        return from32(r)

    if base in ("neg", "abs") and not pair:
        sign = U16(0x8000)

        def bitop16(m: Mask) -> None:
            x = np.asarray(srcs[0]()).astype(U16)
            d(x ^ sign if base == "neg" else x & U16(0x7FFF), m)

        return bitop16

    def op(m: Mask) -> None:
        vals = [s() for s in srcs]
        if pair:
            los, his = zip(*(_unpack2(v) for v in vals), strict=True)
            lo = finish(f(*(to32(x) for x in los)))
            hi = finish(f(*(to32(x) for x in his)))
            d(_pack2(lo, hi), m)
        else:
            d(
                np.asarray(finish(f(*(to32(np.asarray(v).astype(U16)) for v in vals)))).astype(U16),
                m,
            )

    return op


def build_math(b: Batch, ins: Instr) -> Op:
    """rcp, sqrt, rsqrt, ex2, lg2, sin, cos, tanh (exact numpy versions of the approximations)."""
    base = ins.base
    mods = ins.mods
    t = type_of(mods)
    if t in ("f16", "bf16", "f16x2", "bf16x2"):
        return _build_half(b, ins, t)
    if t not in ("f32", "f64"):
        raise _Unsupported(ins.opcode)
    dt = NP_TYPES[t]
    one = dt.type(1)
    rnd = _rounding(mods)

    def rcp(x: Any) -> Any:
        if t == "f32" and rnd in ("rz", "rm", "rp"):
            return round_to_f32(1.0 / np.asarray(x, F64), rnd)
        return np.divide(one, x)

    def sqrt(x: Any) -> Any:
        if t == "f32" and rnd in ("rz", "rm", "rp"):
            return round_to_f32(np.sqrt(np.asarray(x, F64)), rnd)
        return np.sqrt(x)

    def wide(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``f`` of f32 in float64, rounded once: numpy's float32 ``f`` differs between host CPUs."""
        if t != "f32":
            return f
        return lambda x: f(np.asarray(x, F64))

    fns: dict[str, Callable[[Any], Any]] = {
        "rcp": rcp,
        "sqrt": sqrt,
        "rsqrt": lambda x: np.divide(one, np.sqrt(x)),
        "ex2": wide(np.exp2),
        "lg2": wide(np.log2),
        "sin": wide(np.sin),
        "cos": wide(np.cos),
        "tanh": wide(np.tanh),
    }
    fn = fns.get(base)
    if fn is None:
        raise _Unsupported(ins.opcode)
    if base == "rsqrt":  # a register's lanes: the root's array divided in place (same values)
        g = getter(b, ins.operands[1], t)
        d = Dst(b, ins.operands[0], t)

        def rsqrt(m: Mask) -> None:
            x = g()
            if type(x) is np.ndarray and x.dtype == dt:
                r = np.sqrt(x)
                np.divide(one, r, out=r)
                d(r, m)
            else:
                d(np.asarray(fn(x)).astype(dt, copy=False), m)

        return rsqrt
    return _func_op(b, ins, t, t, lambda x: np.asarray(fn(x)).astype(dt, copy=False))


def build_testp(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    t = type_of(mods)
    dt = NP_TYPES[t]
    tiny = np.finfo(dt).tiny
    tests: dict[str, Callable[[Any], Any]] = {
        "finite": np.isfinite,
        "infinite": np.isinf,
        "number": lambda x: ~np.isnan(x),
        "notanumber": np.isnan,
        "normal": lambda x: np.isfinite(x) & (np.abs(x) >= tiny),
        "subnormal": lambda x: (x != 0) & (np.abs(x) < tiny),
    }
    for k, fn in tests.items():
        if k in mods:
            return _func_op(b, ins, t, "pred", fn)
    raise _Unsupported(ins.opcode)


# ---------------------------------------------------------------------------------------------
# Logic and bits


def build_logic(b: Batch, ins: Instr) -> Op:
    base = ins.base
    t = type_of(ins.mods)
    if t == "pred":
        fn = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(base)
        if base == "not":
            return _ufunc_op(b, ins, t, np.logical_not, nsrc=1)
        if fn is None:
            raise _Unsupported(ins.opcode)
        return _ufunc_op(b, ins, t, fn)
    bt = {1: "b8", 2: "b16", 4: "b32", 8: "b64"}[NP_TYPES[t].itemsize]
    if base == "not":
        return _ufunc_op(b, ins, bt, np.invert, nsrc=1)
    if base == "cnot":
        dt = NP_TYPES[bt]
        return _func_op(b, ins, bt, bt, lambda x: (np.asarray(x) == 0).astype(dt))
    bitfn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[base]
    return _ufunc_op(b, ins, bt, bitfn)


def build_shift(b: Batch, ins: Instr) -> Op:
    base = ins.base
    t = type_of(ins.mods)
    if base == "shr" and t.startswith("b"):
        t = "u" + t[1:]
    dt = NP_TYPES[t]
    nbits = 8 * dt.itemsize
    ops = ins.operands
    a = getter(b, ops[1], t)
    amount = ops[2]
    d = Dst(b, ops[0], t)
    signed = is_signed_type(t)
    fn = np.left_shift if base == "shl" else np.right_shift
    if isinstance(amount, Imm):
        k = int(amount.value) & 0xFFFFFFFF
        if k >= nbits:
            if base == "shr" and signed:
                return _func_op(b, ins, [t], t, lambda x: np.right_shift(x, dt.type(nbits - 1)))
            zero = dt.type(0)
            dd = d
            return lambda m: dd(zero, m)
        kk = dt.type(k)

        def op_imm(m: Mask) -> None:
            out = d.out(m)
            if out is not None:
                fn(a(), kk, out=out)
            else:
                d(fn(a(), kk), m)

        return op_imm
    s = getter(b, amount, "u32")

    def op(m: Mask) -> None:
        sh = np.asarray(s())
        capped = np.minimum(sh, nbits - 1).astype(dt)
        r = fn(a(), capped)
        if base == "shr" and signed:
            d(r, m)
        else:
            d(np.where(sh >= nbits, dt.type(0), r), m)

    return op


def build_bits(b: Batch, ins: Instr) -> Op:
    base = ins.base
    t = type_of(ins.mods)
    dt = NP_TYPES[t]
    nbits = 8 * dt.itemsize
    if base == "popc":
        return _func_op(b, ins, [t], "u32", lambda x: np.bitwise_count(x).astype(U32))
    if base == "clz":
        ud = bits_dtype(dt.itemsize)
        return _func_op(
            b,
            ins,
            [t],
            "u32",
            lambda x: (nbits - _bit_length(np.asarray(x).view(ud), nbits)).astype(U32),
        )
    if base == "brev":
        return _func_op(b, ins, [t], t, _brev)
    if base == "bfind":
        shiftamt = "shiftamt" in ins.mods
        ud = bits_dtype(dt.itemsize)

        def bfind(x: Any) -> Any:
            x = np.asarray(x)
            if is_signed_type(t):
                x = np.where(x < 0, ~x, x)
            bl = _bit_length(x.astype(dt).view(ud) if x.ndim else np.asarray(x).astype(ud), nbits)
            pos = bl - 1
            r = (nbits - 1 - pos) if shiftamt else pos
            return np.where(bl == 0, 0xFFFFFFFF, r).astype(U32)

        return _func_op(b, ins, [t], "u32", bfind)
    if base == "bfe":
        signed = is_signed_type(t)
        ud = bits_dtype(dt.itemsize)
        sd = signed_dtype(dt.itemsize)

        def bfe(x: Any, pos: Any, ln: Any) -> Any:
            x = np.asarray(x).astype(dt).view(ud) if np.ndim(x) else np.asarray(x).astype(ud)
            pos = np.asarray(pos).astype(np.int64) & 0xFF
            ln = np.asarray(ln).astype(np.int64) & 0xFF
            eff = np.clip(np.minimum(ln, nbits - pos), 0, nbits)
            if signed:
                up = np.clip(nbits - pos - eff, 0, nbits - 1).astype(ud)
                down = np.clip(nbits - eff, 0, nbits - 1).astype(ud)
                v = np.left_shift(x, up).view(sd) if np.ndim(x) else np.left_shift(x, up).astype(sd)
                r = np.right_shift(np.asarray(v).astype(sd), down.astype(sd))
                fill = np.right_shift(np.asarray(x).astype(sd), sd.type(nbits - 1))
                return np.where(eff == 0, np.where(ln > 0, fill, 0), r).astype(dt)
            sh = np.minimum(pos, nbits - 1).astype(ud)
            v = np.right_shift(x, sh)
            lenmask = np.where(
                eff >= nbits,
                ud.type(-1 & ((1 << nbits) - 1)),
                (np.left_shift(ud.type(1), np.minimum(eff, nbits - 1).astype(ud)) - ud.type(1)),
            ).astype(ud)
            return np.where(pos >= nbits, 0, v & lenmask).astype(dt)

        return _func_op(b, ins, [t, "u32", "u32"], t, bfe)
    if base == "bfi":
        ud = bits_dtype(dt.itemsize)
        allones = ud.type((1 << nbits) - 1)

        def bfi(f: Any, x: Any, pos: Any, ln: Any) -> Any:
            f = np.asarray(f).astype(ud)
            x = np.asarray(x).astype(ud)
            pos = np.asarray(pos).astype(np.int64) & 0xFF
            ln = np.asarray(ln).astype(np.int64) & 0xFF
            eff = np.clip(np.minimum(ln, nbits - pos), 0, nbits)
            fieldmask = np.where(
                eff >= nbits,
                allones,
                np.left_shift(ud.type(1), np.minimum(eff, nbits - 1).astype(ud)) - ud.type(1),
            ).astype(ud)
            sh = np.minimum(pos, nbits - 1).astype(ud)
            mask = np.left_shift(fieldmask, sh)
            r = (x & ~mask) | (np.left_shift(f, sh) & mask)
            return (
                np.where((pos >= nbits) | (eff == 0), x, r).astype(ud).view(dt)
                if np.ndim(r)
                else np.asarray(r).astype(dt)
            )

        return _func_op(b, ins, [t, t, "u32", "u32"], t, bfi)
    if base == "prmt":
        return _build_prmt(b, ins)
    if base == "lop3":

        def lop3(x: Any, y: Any, z: Any, lut: Any) -> Any:
            lut_i = int(np.asarray(lut).flat[0]) if np.ndim(lut) else int(lut)
            x = np.asarray(x, U32)
            y = np.asarray(y, U32)
            z = np.asarray(z, U32)
            r = np.zeros(np.broadcast_shapes(x.shape, y.shape, z.shape), U32)
            for k in range(8):
                if lut_i >> k & 1:
                    r |= (x if k & 4 else ~x) & (y if k & 2 else ~y) & (z if k & 1 else ~z)
            return r

        return _func_op(b, ins, ["b32", "b32", "b32", "u32"], "b32", lop3)
    if base == "shf":
        left = "l" in ins.mods
        clamp = "clamp" in ins.mods

        def shf(lo: Any, hi: Any, n: Any) -> Any:
            n = np.asarray(n).astype(U64)
            n = np.minimum(n, U64(32)) if clamp else (n & U64(31))
            x = (np.asarray(hi).astype(U64) << U64(32)) | np.asarray(lo).astype(U64)
            if left:
                return ((x << n) >> U64(32)).astype(U32)
            return ((x >> n) & U64(0xFFFFFFFF)).astype(U32)

        amount = ins.operands[3] if len(ins.operands) == 4 else None
        if isinstance(amount, Imm):  # a literal shift (a rotate): in 32 bits, decided once
            return _shf_by(b, ins, shf, _shf_amount(amount, clamp), left)
        return _func_op(b, ins, ["b32", "b32", "u32"], "b32", shf)
    if base in ("dp4a", "dp2a"):
        tys = _types(ins.mods)
        sa, sb = (is_signed_type(x) for x in tys[:2])
        hi = "hi" in ins.mods

        def parts(x: Any, signed: bool, width: int) -> list[Any]:
            x = np.asarray(x).astype(U32)
            k = 32 // width
            out = []
            for i in range(k):
                v = ((x >> U32(width * i)) & U32((1 << width) - 1)).astype(np.int64)
                if signed:
                    v = np.where(v >= 1 << (width - 1), v - (1 << width), v)
                out.append(v)
            return out

        def dp(x: Any, y: Any, z: Any) -> Any:
            if base == "dp4a":
                xa, ya = parts(x, sa, 8), parts(y, sb, 8)
            else:
                xa = parts(x, sa, 16)
                ya = parts(y, sb, 8)[2:] if hi else parts(y, sb, 8)[:2]
            s = sum(p * q for p, q in zip(xa, ya, strict=True))
            return (s + np.asarray(z).astype(np.int64)).astype(np.int64).astype(U32)

        return _func_op(b, ins, ["b32", "b32", "b32"], "b32", dp)
    raise _Unsupported(ins.opcode)


def _shf_amount(imm: Imm, clamp: bool) -> int:
    """A literal funnel-shift amount as :func:`build_bits`' ``shf`` takes it (0 to 32)."""
    k = int(imm_value(imm, "u32"))
    return min(k, 32) if clamp else k & 31


def _shf_by(b: Batch, ins: Instr, general: Callable[..., Any], k: int, left: bool) -> Op:
    """``shf`` by a literal ``k`` (0 to 32) on 32-bit lanes: ``(hi << k) | (lo >> 32 - k)``
    left, ``(lo >> k) | (hi << 32 - k)`` right, the bits the 64-bit funnel ``general`` gives
    (tests/ptx/test_ptx_ops.py compares them); literal halves take ``general``."""
    ops = ins.operands
    d = Dst(b, ops[0], "b32")
    glo, ghi = getter(b, ops[1], "b32"), getter(b, ops[2], "b32")
    n = U32(k)
    if left:
        lead, trail = (ghi, glo)  # the half shifted by k, the half that fills in
    else:
        lead, trail = (glo, ghi)
    if k in (0, 32):  # one half as it is: hi or lo
        whole = lead if k == 0 else trail
        return lambda m: d(np.array(whole(), U32), m)
    back = U32(32 - k)

    def op(m: Mask) -> None:
        x, y = lead(), trail()
        if type(x) is not np.ndarray or type(y) is not np.ndarray:
            d(general(glo(), ghi(), n), m)
            return
        if left:
            r = np.left_shift(x, n)
            r |= np.right_shift(y, back)
        else:
            r = np.right_shift(x, n)
            r |= np.left_shift(y, back)
        d(r, m)

    return op


_PRMT_MODES = {
    "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
}


def _build_prmt(b: Batch, ins: Instr) -> Op:
    mode = next((m for m in ins.mods if m in _PRMT_MODES), None)

    def prmt(x: Any, y: Any, c: Any) -> Any:
        src = np.asarray(x).astype(U64) | (np.asarray(y).astype(U64) << U64(32))
        c = np.asarray(c).astype(U32)
        out = np.zeros(np.broadcast_shapes(src.shape, c.shape), U32)
        if mode is None:
            for i in range(4):
                s = (c >> U32(4 * i)) & U32(0xF)
                byte = ((src >> (U64(8) * (s & U32(7)).astype(U64))) & U64(0xFF)).astype(U32)
                sign = (byte >> U32(7)) * U32(0xFF)
                byte = np.where((s & U32(8)) != 0, sign, byte)
                out |= byte << U32(8 * i)
            return out
        table = np.array(_PRMT_MODES[mode], dtype=U32)
        sel = table[(c & U32(3)).astype(np.int64)]
        for i in range(4):
            s = sel[..., i] if sel.ndim > 1 else sel[i]
            byte = ((src >> (U64(8) * np.asarray(s).astype(U64))) & U64(0xFF)).astype(U32)
            out |= byte << U32(8 * i)
        return out

    return _func_op(b, ins, ["b32", "b32", "b32"], "b32", prmt)


# ---------------------------------------------------------------------------------------------
# Comparisons and selection


def _compare(cmp: str, t: str) -> Callable[[Any, Any], Any]:
    isf = is_float_type(t)
    if isf:
        ordered: dict[str, Callable[[Any, Any], Any]] = {
            "eq": np.equal,
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
        }
        if cmp in ordered:
            return ordered[cmp]
        if cmp == "ne":
            return lambda x, y: np.not_equal(x, y) & ~(np.isnan(x) | np.isnan(y))
        if cmp in ("equ", "ltu", "leu", "gtu", "geu"):
            f = ordered[cmp[:-1]]
            return lambda x, y: f(x, y) | np.isnan(x) | np.isnan(y)
        if cmp == "neu":
            return np.not_equal
        if cmp == "num":
            return lambda x, y: ~(np.isnan(x) | np.isnan(y))
        if cmp == "nan":
            return lambda x, y: np.isnan(x) | np.isnan(y)
        raise _Unsupported(f"comparison {cmp}.{t}")
    table: dict[str, Callable[[Any, Any], Any]] = {
        "eq": np.equal,
        "ne": np.not_equal,
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
        "lo": np.less,
        "ls": np.less_equal,
        "hi": np.greater,
        "hs": np.greater_equal,
    }
    if cmp not in table:
        raise _Unsupported(f"comparison {cmp}.{t}")
    return table[cmp]


_CMPS = "eq ne lt le gt ge lo ls hi hs equ neu ltu leu gtu geu num nan".split()
_BOOLS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _cmp_type(mods: tuple[str, ...]) -> tuple[str, str]:
    cmp = next((m for m in mods if m in _CMPS), None)
    if cmp is None:
        raise _Unsupported("a comparison without an operator")
    t = type_of(mods)
    if cmp in ("lo", "ls", "hi", "hs") and t.startswith("s"):
        t = "u" + t[1:]
    if t.startswith("b") and t != "bf16" and t != "bf16x2":
        t = "u" + t[1:]
    return cmp, t


def _half_cmp_vals(t: str) -> tuple[str, Callable[[Any], Any]]:
    to32, _ = _half_unary(t)
    return ("b32" if t.endswith("x2") else "b16"), to32


def build_setp(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    cmp, t = _cmp_type(mods)
    ops = ins.operands
    boolop = next((_BOOLS[m] for m in mods if m in _BOOLS), None)
    first = ops[0]
    if isinstance(first, PredOut):
        p_dst: Dst | None = Dst(b, first.value, "pred")
        q_dst: Dst | None = Dst(b, first.pred, "pred")
    else:
        p_dst = _dst(b, first, "pred")
        q_dst = None
    c = getter(b, ops[3], "pred") if boolop is not None and len(ops) > 3 else None
    if t in ("f16", "bf16", "f16x2", "bf16x2"):
        st, to32 = _half_cmp_vals(t)
        fn32 = _compare(cmp, "f32")
        ga, gb = getter(b, ops[1], st), getter(b, ops[2], st)

        def hop(m: Mask) -> None:
            if t.endswith("x2"):
                alo, ahi = _unpack2(ga())
                blo, bhi = _unpack2(gb())
                r1, r2 = fn32(to32(alo), to32(blo)), fn32(to32(ahi), to32(bhi))
            else:
                r1 = fn32(to32(np.asarray(ga()).astype(U16)), to32(np.asarray(gb()).astype(U16)))
                r2 = ~np.asarray(r1)
            if boolop is not None and c is not None:
                cv = c()
                r1, r2 = boolop(r1, cv), boolop(r2, cv)
            if p_dst is not None:
                p_dst(r1, m)
            if q_dst is not None:
                q_dst(r2, m)

        return hop
    fn = _compare(cmp, t)
    ga, gb = getter(b, ops[1], t), getter(b, ops[2], t)

    def op(m: Mask) -> None:
        r = fn(ga(), gb())
        if boolop is not None and c is not None:
            cv = c()
            if p_dst is not None:
                p_dst(boolop(r, cv), m)
            if q_dst is not None:
                q_dst(boolop(~np.asarray(r), cv), m)
            return
        if p_dst is not None:
            out = p_dst.out(m)
            if out is not None and np.ndim(r):
                out[...] = r
            else:
                p_dst(r, m)
        if q_dst is not None:
            q_dst(~np.asarray(r), m)

    return op


def build_set(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    tys = _types(mods)
    if len(tys) < 2:
        raise _Unsupported(ins.opcode)
    dtype_t, stype_t = tys[-2], tys[-1]
    cmp = next((m for m in mods if m in _CMPS), None)
    if cmp is None:
        raise _Unsupported(ins.opcode)
    st = stype_t
    if cmp in ("lo", "ls", "hi", "hs") and st.startswith("s"):
        st = "u" + st[1:]
    if st.startswith("b"):
        st = "u" + st[1:]
    fn = _compare(cmp, st)
    boolop = next((_BOOLS[m] for m in mods if m in _BOOLS), None)
    ops = ins.operands
    ga, gb = getter(b, ops[1], st), getter(b, ops[2], st)
    c = getter(b, ops[3], "pred") if boolop is not None and len(ops) > 3 else None
    d = Dst(b, ops[0], dtype_t)
    if dtype_t == "f32":
        yes: Any = F32(1.0)
        no: Any = F32(0.0)
    else:
        ddt = NP_TYPES[dtype_t]
        yes = np.array(0xFFFFFFFF, U32).view(ddt)[()] if ddt.itemsize == 4 else ddt.type(-1)
        no = ddt.type(0)

    def op(m: Mask) -> None:
        r = fn(ga(), gb())
        if boolop is not None and c is not None:
            r = boolop(r, c())
        d(np.where(r, yes, no), m)

    return op


def build_selp(b: Batch, ins: Instr) -> Op:
    t = type_of(ins.mods)
    ops = ins.operands
    d = Dst(b, ops[0], t)
    a, c, p = getter(b, ops[1], t), getter(b, ops[2], t), getter(b, ops[3], "pred")

    def op(m: Mask) -> None:
        d(np.where(p(), a(), c()), m)

    return op


def build_slct(b: Batch, ins: Instr) -> Op:
    tys = _types(ins.mods)
    t, ct = tys[-2], tys[-1]
    ops = ins.operands
    d = Dst(b, ops[0], t)
    a, c, s = getter(b, ops[1], t), getter(b, ops[2], t), getter(b, ops[3], ct)

    def op(m: Mask) -> None:
        d(np.where(np.asarray(s()) >= 0, a(), c()), m)

    return op


# ---------------------------------------------------------------------------------------------
# Moves and conversions


def build_mov(b: Batch, ins: Instr) -> Op:
    t = type_of(ins.mods)
    ops = ins.operands
    dst, src = ops[0], ops[1]
    if isinstance(dst, Vec):  # unpack: mov.b32 {lo, hi}, %r
        k = len(dst.items)
        size = NP_TYPES[t].itemsize // k
        et = {1: "b8", 2: "b16", 4: "b32"}[size]
        g = getter(b, src, t)
        dsts = [_dst(b, x, et) for x in dst.items]
        ud = bits_dtype(size)

        def unpack(m: Mask) -> None:
            v = np.asarray(g())
            parts = np.ascontiguousarray(np.atleast_1d(v)).view(ud).reshape(-1, k)
            for j, dd in enumerate(dsts):
                if dd is not None:
                    col = parts[:, j]
                    dd(col if v.ndim else col[0], m)

        return unpack
    if isinstance(src, Vec):  # pack: mov.b64 %rd, {%r1, %r2}
        k = len(src.items)
        size = NP_TYPES[t].itemsize // k
        et = {1: "b8", 2: "b16", 4: "b32"}[size]
        gs = [getter(b, x, et) for x in src.items]
        d = Dst(b, dst, t)
        wide = bits_dtype(NP_TYPES[t].itemsize)

        def pack(m: Mask) -> None:
            r: Any = wide.type(0)
            for j, gg in enumerate(gs):
                r = r | (np.asarray(gg()).astype(wide) << wide.type(8 * size * j))
            d(
                np.asarray(r).view(NP_TYPES[t])
                if np.ndim(r)
                else np.asarray(r).astype(wide).view(NP_TYPES[t]),
                m,
            )

        return pack
    if t == "pred":
        g = getter(b, src, "pred")
        d = Dst(b, dst, "pred")
        return lambda m: d(g(), m)
    g = getter(b, src, t)
    d = Dst(b, dst, t)

    def op(m: Mask) -> None:
        out = d.out(m)
        v = g()
        if out is not None:
            out[...] = v
        else:
            d(v, m)

    return op


def build_cvta(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    t = type_of(mods)
    to = "to" in mods
    space = next((x for x in mods if x in ("global", "shared", "local", "const", "param")), None)
    if space is None or space.startswith("shared::"):
        space = "shared" if any(x.startswith("shared") for x in mods) else None
    if space is None:
        raise _Unsupported(ins.opcode)
    window = b.window(space)
    ops = ins.operands
    g = getter(b, ops[1], t)
    d = Dst(b, ops[0], t)
    if window == 0:
        return lambda m: d(g(), m)
    if t != "u64":
        raise _Unsupported(ins.opcode + " (32-bit generic addresses)")
    w = U64(window)
    if to:
        return lambda m: d(np.asarray(g()) - w, m)
    return lambda m: d(np.asarray(g()) + w, m)


def build_cvt(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    tys = _types(mods)
    if len(tys) < 2:
        raise _Unsupported(ins.opcode)
    dt_t, at_t = tys[-2], tys[-1]
    rnd = _rounding(mods)
    sat = "sat" in mods
    ops = ins.operands
    if dt_t in ("f16x2", "bf16x2"):  # cvt.rn.f16x2.f32 d, a, b: a -> upper half, b -> lower
        _, from32 = _half_unary(dt_t)
        ga, gb = getter(b, ops[1], at_t), getter(b, ops[2], at_t)
        d = Dst(b, ops[0], "b32")

        def half(x: Any) -> Any:
            x = np.asarray(x, F32)
            if sat:
                x = _sat01(x)
            if "relu" in mods:
                x = np.where(x < 0, F32(0), x).astype(F32)
            return from32(x) if dt_t == "f16x2" else f32_to_bf16(x, rnd or "rn")

        def pack(m: Mask) -> None:
            d(_pack2(half(gb()), half(ga())), m)

        return pack
    if dt_t in ("e4m3x2", "e5m2x2", "tf32") or at_t in ("e4m3x2", "e5m2x2", "tf32"):
        raise _Unsupported(ins.opcode)
    g = getter(b, ops[1], at_t)
    d = Dst(b, ops[0], dt_t)
    conv = _cvt_general(at_t, dt_t, rnd, sat)
    fast = _cvt_fast(at_t, dt_t, rnd, sat)
    if fast is not None:
        src_dt = NP_TYPES[at_t]

        def op_fast(m: Mask) -> None:
            x = g()
            if type(x) is np.ndarray and x.dtype == src_dt:  # a register's lanes
                d(fast(x), m)
            else:
                d(conv(x), m)

        return op_fast

    def op(m: Mask) -> None:
        d(conv(g()), m)

    return op


def _cvt_general(at_t: str, dt_t: str, rnd: str, sat: bool) -> Callable[[Any], Any]:
    """``cvt``'s conversion from PTX type ``at_t`` to ``dt_t`` (rounding ``rnd``, ``.sat``) of
    any operand (lanes or a literal): every form :func:`build_cvt` takes but the packed halves."""

    def to_float32(x: Any) -> Any:
        if at_t == "bf16":
            return bf16_to_f32(x)
        if at_t == "f16":
            return np.asarray(x, F16).astype(F32)
        return x

    dst_dt = NP_TYPES[dt_t]
    dst_float = dt_t in ("f16", "f32", "f64", "bf16")
    src_float = at_t in ("f16", "f32", "f64", "bf16")

    def conv(x: Any) -> Any:
        x = np.asarray(x)
        if src_float and not dst_float:
            v = np.asarray(to_float32(x))
            if v.dtype == F16:
                v = v.astype(F32)
            if rnd in ("rni", "rn", ""):
                v = np.rint(v)
            elif rnd in ("rzi", "rz"):
                v = np.trunc(v)
            elif rnd in ("rmi", "rm"):
                v = np.floor(v)
            elif rnd in ("rpi", "rp"):
                v = np.ceil(v)
            info = np.iinfo(dst_dt)
            wide = np.asarray(v, F64)
            lo, hi = float(info.min), float(info.max)
            out = np.where(np.isnan(wide), 0.0, np.clip(wide, lo, hi))
            if dst_dt.itemsize == 8:
                big = out >= 2.0**63 if info.min < 0 else out >= 2.0**64
                res = np.where(big, 0, out).astype(dst_dt)
                return np.where(big, dst_dt.type(info.max), res).astype(dst_dt)
            return out.astype(np.int64).astype(dst_dt)
        if not src_float and dst_float:
            if dt_t == "f16":
                return x.astype(F32).astype(F16)
            if dt_t == "bf16":
                return f32_to_bf16(x.astype(F32), rnd or "rn")
            if dt_t == "f32" and rnd in ("rz", "rm", "rp"):
                return round_to_f32(x.astype(F64), rnd)
            return x.astype(dst_dt)
        if src_float and dst_float:
            v = x
            if at_t == "bf16":
                v = bf16_to_f32(x)
            if dt_t == "bf16":
                r = f32_to_bf16(np.asarray(v, F32), rnd or "rn")
                return r
            if dt_t == "f32":
                if at_t == "f64" and rnd in ("rz", "rm", "rp"):
                    r = round_to_f32(v, rnd)
                else:
                    r = np.asarray(v).astype(F32)
                if rnd in ("rni", "rzi", "rmi", "rpi"):
                    r = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](r)
            elif dt_t == "f16":
                r = np.asarray(v).astype(F32).astype(F16) if at_t != "f16" else np.asarray(v)
                if rnd in ("rni", "rzi", "rmi", "rpi"):
                    f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd]
                    r = f(r.astype(F32)).astype(F16)
            else:
                r = np.asarray(v).astype(dst_dt)
                if rnd in ("rni", "rzi", "rmi", "rpi"):
                    r = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](r)
            if sat:
                r = _sat01(np.asarray(r))
            return r
        # integer to integer
        r = x.astype(dst_dt)
        if sat:
            info_d = np.iinfo(dst_dt)
            wide_x = x.astype(np.int64) if x.dtype.itemsize < 8 or x.dtype.kind == "i" else x
            if x.dtype.kind == "u" and x.dtype.itemsize == 8:
                r = np.where(x > np.uint64(info_d.max), dst_dt.type(info_d.max), r)
            else:
                r = np.clip(wide_x, info_d.min, info_d.max).astype(dst_dt)
        return r

    return conv


# rounding to an integral value by cvt's modifier (in any float type: exact in a wider one)
_INTEGRAL = {"rni": np.rint, "rn": np.rint, "": np.rint, "rzi": np.trunc, "rz": np.trunc}
_INTEGRAL.update({"rmi": np.floor, "rm": np.floor, "rpi": np.ceil, "rp": np.ceil})
_INT_ROUNDING = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
_INT32_TYPES = ("u8", "s8", "u16", "s16", "u32", "s32")
_INT_TYPES = (*_INT32_TYPES, "u64", "s64")


def _cvt_fast(at_t: str, dt_t: str, rnd: str, sat: bool) -> Callable[[np.ndarray], Any] | None:
    """:func:`_cvt_general`'s conversion for the common forms, of a register's lanes (an array of
    ``at_t``'s type), with its decisions taken once and fewer arrays: the same values, bit for
    bit (tests/ptx/test_cvt_fast.py compares them). None for the other forms.

    - ``f32``/``f64`` to an integer of up to 32 bits: rounded to an integral value in float64
      (exact: ``f32`` widens exactly, and rounding commutes with the widening), clipped to the
      type's range, NaN to 0, then cast (the values are in range: the cast is exact).
    - an integer to ``f32`` (round to nearest) or ``f64``: numpy's cast.
    - ``f32``/``f64`` to ``f32``/``f64`` (but ``f64`` to ``f32`` rounded towards zero or an
      infinity): the cast, the integral rounding of ``.rni`` and the like, ``.sat``."""
    floats = ("f32", "f64")
    dst_dt = NP_TYPES[dt_t]
    if at_t in floats and dt_t in _INT32_TYPES:
        info = np.iinfo(dst_dt)
        lo, hi = float(info.min), float(info.max)
        integral = _INTEGRAL.get(rnd)
        signed = info.min < 0

        def to_int(x: np.ndarray) -> Any:
            w = x.astype(F64)
            if integral is not None:
                integral(w, out=w)
            if signed:
                nan = np.isnan(w)
                _clip(w, lo, hi, out=w)
                np.copyto(w, 0.0, where=nan)
            else:
                np.fmax(w, 0.0, out=w)  # NaN to 0 (fmax takes the number)
                np.minimum(w, hi, out=w)
            return w.astype(dst_dt)

        return to_int
    if at_t in _INT_TYPES and (dt_t == "f64" or (dt_t == "f32" and rnd not in ("rz", "rm", "rp"))):
        return lambda x: x.astype(dst_dt)
    if (
        at_t in floats
        and dt_t in floats
        and not (at_t == "f64" and dt_t == "f32" and rnd in ("rz", "rm", "rp"))
    ):
        rounding = _INT_ROUNDING.get(rnd)

        def to_float(x: np.ndarray) -> Any:
            r = x.astype(dst_dt)
            if rounding is not None:
                rounding(r, out=r)
            if sat:  # _sat01: NaN to +0, else clipped to [0, 1]
                nan = np.isnan(r)
                _clip(r, 0, 1, out=r)
                np.copyto(r, 0, where=nan)
            return r

        return to_float
    return None


# ---------------------------------------------------------------------------------------------
# Warp-level operations


def build_shfl(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    mode = next((x for x in ("up", "down", "bfly", "idx") if x in mods), None)
    if mode is None:
        raise _Unsupported(ins.opcode)
    ops = ins.operands
    first = ops[0]
    if isinstance(first, PredOut):
        d = Dst(b, first.value, "b32")
        pd: Dst | None = Dst(b, first.pred, "pred")
    else:
        d = Dst(b, first, "b32")
        pd = None
    a = getter(b, ops[1], "b32")
    gb = getter(b, ops[2], "u32")
    gc = getter(b, ops[3], "u32")
    lane = b.lane_in_warp.astype(np.int64)
    base = b.warp_base

    def op(m: Mask) -> None:
        bval = np.asarray(gb()).astype(np.int64) & 0x1F
        c = np.asarray(gc()).astype(np.int64)
        cval = c & 0x1F
        segmask = (c >> 8) & 0x1F
        max_lane = (lane & segmask) | (cval & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~segmask)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = np.asarray(a())
        vals = src[base + j] if src.ndim else np.full(b.n, src)
        d(vals, m)
        if pd is not None:
            pd(np.broadcast_to(ok, (b.n,)), m)

    return op


def _warp_bits(b: Batch, lanes: np.ndarray) -> np.ndarray:
    """Per-warp uint32 masks of a bool lane array."""
    return np.packbits(lanes, bitorder="little").view(U32)


def _lane_mask(m: Mask, n: int) -> np.ndarray:
    return np.ones(n, bool) if m.b is None else m.b


def build_vote(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    ops = ins.operands
    p = getter(b, ops[1], "pred")
    if "ballot" in mods:
        d = Dst(b, ops[0], "b32")

        def ballot(m: Mask) -> None:
            act = _lane_mask(m, b.n)
            bits = _warp_bits(b, np.asarray(p()) & act)
            d(np.repeat(bits, 32), m)

        return ballot
    kind = next((x for x in ("all", "any", "uni") if x in mods), None)
    if kind is None:
        raise _Unsupported(ins.opcode)
    d = Dst(b, ops[0], "pred")

    def vote(m: Mask) -> None:
        act = _lane_mask(m, b.n)
        pv = np.broadcast_to(np.asarray(p()), (b.n,))
        yes = _warp_bits(b, pv & act)
        active = _warp_bits(b, act)
        if kind == "all":
            r = yes == active
        elif kind == "any":
            r = yes != 0
        else:
            r = (yes == 0) | (yes == active)
        d(np.repeat(r, 32), m)

    return vote


def build_activemask(b: Batch, ins: Instr) -> Op:
    d = Dst(b, ins.operands[0], "b32")

    def op(m: Mask) -> None:
        d(np.repeat(_warp_bits(b, _lane_mask(m, b.n)), 32), m)

    return op


def build_redux(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    t = type_of(mods)
    kind = next((x for x in ("add", "min", "max", "and", "or", "xor") if x in mods), None)
    if kind is None or t not in ("u32", "s32", "b32"):
        raise _Unsupported(ins.opcode)
    dt = NP_TYPES[t]
    ops = ins.operands
    a = getter(b, ops[1], t)
    d = Dst(b, ops[0], t)
    nw = b.n // 32

    def op(m: Mask) -> None:
        act = _lane_mask(m, b.n).reshape(nw, 32)
        v = np.broadcast_to(np.asarray(a()), (b.n,)).reshape(nw, 32)
        if kind == "add":
            r = np.where(act, v.astype(np.int64), 0).sum(axis=1).astype(dt)
        elif kind == "min":
            big = np.iinfo(dt).max
            r = np.where(act, v, dt.type(big)).min(axis=1)
        elif kind == "max":
            small = np.iinfo(dt).min
            r = np.where(act, v, dt.type(small)).max(axis=1)
        elif kind == "and":
            r = np.bitwise_and.reduce(
                np.where(act, v, dt.type(-1) if dt.kind == "i" else np.array(-1).astype(dt)), axis=1
            )
        elif kind == "or":
            r = np.bitwise_or.reduce(np.where(act, v, dt.type(0)), axis=1)
        else:
            r = np.bitwise_xor.reduce(np.where(act, v, dt.type(0)), axis=1)
        d(np.repeat(r, 32), m)

    return op


def build_match(b: Batch, ins: Instr) -> Op:
    mods = ins.mods
    t = type_of(mods)
    if "any" not in mods and "all" not in mods:
        raise _Unsupported(ins.opcode)
    ops = ins.operands
    first = ops[0]
    pd: Dst | None = None
    if isinstance(first, PredOut):
        d = Dst(b, first.value, "b32")
        pd = Dst(b, first.pred, "pred")
    else:
        d = Dst(b, first, "b32")
    a = getter(b, ops[1], t)
    nw = b.n // 32
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64)).astype(np.uint64)

    def op(m: Mask) -> None:
        act = _lane_mask(m, b.n).reshape(nw, 32)
        v = np.broadcast_to(np.asarray(a()), (b.n,)).reshape(nw, 32)
        eq = (v[:, :, None] == v[:, None, :]) & act[:, None, :]
        masks = (eq.astype(np.uint64) * weights).sum(axis=2).astype(U32)
        if "any" in mods:
            d(masks.reshape(-1), m)
        else:
            active = _warp_bits(b, act.reshape(-1))
            same = masks == active[:, None]
            allsame = np.all(same | ~act, axis=1)
            d(np.repeat(np.where(allsame, active, 0).astype(U32), 32), m)
            if pd is not None:
                pd(np.repeat(allsame, 32), m)

    return op


def build_elect(b: Batch, ins: Instr) -> Op:
    """elect.sync d|p, membermask: the lowest active lane is elected; d = its lane id."""
    first = ins.operands[0]
    if isinstance(first, PredOut):
        d: Dst | None = _dst(b, first.value, "b32")
        pd: Dst | None = Dst(b, first.pred, "pred")
    else:
        d, pd = None, _dst(b, first, "pred")
    nw = b.n // 32

    def op(m: Mask) -> None:
        act = _lane_mask(m, b.n).reshape(nw, 32)
        leader = np.argmax(act, axis=1).astype(U32)
        if d is not None:
            d(np.repeat(leader, 32), m)
        if pd is not None:
            pd((b.lane_in_warp == np.repeat(leader, 32)) & act.reshape(-1), m)

    return op


def build_isspacep(b: Batch, ins: Instr) -> Op:
    from gpuadvise.ptx.memory import WINDOW_IDS, WINDOW_SHIFT

    space = next((m.split("::")[0] for m in ins.mods if m.split("::")[0] in WINDOW_IDS), None)
    if space is None:
        raise _Unsupported(ins.opcode)
    win = WINDOW_IDS[space]
    a = getter(b, ins.operands[1], "u64")
    d = Dst(b, ins.operands[0], "pred")
    return lambda m: d((np.asarray(a()) >> U64(WINDOW_SHIFT)) == win, m)


def build_bar_red(b: Batch, ins: Instr) -> Op:
    """bar.red.popc.u32 / bar.red.and.pred / bar.red.or.pred: a barrier with a CTA reduction."""
    mods = ins.mods
    kind = next((x for x in ("popc", "and", "or") if x in mods), None)
    ops = ins.operands
    if kind is None or len(ops) < 3:
        raise _Unsupported(ins.opcode)
    p = getter(b, ops[-1], "pred")
    d = Dst(b, ops[0], "u32" if kind == "popc" else "pred")
    cta = b.cta_of_lane
    ncta = b.ncta

    def op(m: Mask) -> None:
        act = _lane_mask(m, b.n)
        pv = np.broadcast_to(np.asarray(p()), (b.n,))
        counts = np.bincount(cta[act & pv], minlength=ncta)
        if kind == "popc":
            d(counts[cta].astype(U32), m)
            return
        totals = np.bincount(cta[act], minlength=ncta)
        r = counts[cta] == totals[cta] if kind == "and" else counts[cta] > 0
        d(r, m)

    return op


# ---------------------------------------------------------------------------------------------
# Dispatch


def _nop(m: Mask) -> None:
    return None


_BUILDERS: dict[str, Callable[[Batch, Instr], Op]] = {
    "add": build_arith,
    "sub": build_arith,
    "addc": build_arith,
    "subc": build_arith,
    "mul": build_arith,
    "mad": build_arith,
    "fma": build_arith,
    "div": build_arith,
    "rem": build_arith,
    "min": build_arith,
    "max": build_arith,
    "abs": build_arith,
    "neg": build_arith,
    "copysign": build_arith,
    "sad": build_arith,
    "mul24": build_arith,
    "mad24": build_arith,
    "rcp": build_math,
    "sqrt": build_math,
    "rsqrt": build_math,
    "ex2": build_math,
    "lg2": build_math,
    "sin": build_math,
    "cos": build_math,
    "tanh": build_math,
    "testp": build_testp,
    "and": build_logic,
    "or": build_logic,
    "xor": build_logic,
    "not": build_logic,
    "cnot": build_logic,
    "shl": build_shift,
    "shr": build_shift,
    "popc": build_bits,
    "clz": build_bits,
    "brev": build_bits,
    "bfind": build_bits,
    "bfe": build_bits,
    "bfi": build_bits,
    "prmt": build_bits,
    "lop3": build_bits,
    "shf": build_bits,
    "dp4a": build_bits,
    "dp2a": build_bits,
    "setp": build_setp,
    "set": build_set,
    "selp": build_selp,
    "slct": build_slct,
    "mov": build_mov,
    "cvt": build_cvt,
    "cvta": build_cvta,
    "shfl": build_shfl,
    "vote": build_vote,
    "activemask": build_activemask,
    "redux": build_redux,
    "match": build_match,
    "elect": build_elect,
    "isspacep": build_isspacep,
}

_NOPS = (
    "membar",
    "fence",
    "prefetch",
    "prefetchu",
    "nanosleep",
    "pmevent",
    "discard",
    "applypriority",
    "createpolicy",
    "griddepcontrol",
    "bra",
    "ret",
    "exit",
)


def build_op(b: Batch, ins: Instr) -> Op:
    """The closure executing ``ins`` on batch ``b``; raises :class:`UnsupportedInstructionError`
    (without line: the caller adds it) for an instruction it does not know."""
    base = ins.base
    try:
        if base in _NOPS:
            return _nop
        if base in ("bar", "barrier"):
            if "red" in ins.mods:
                return build_bar_red(b, ins)
            return _nop
        builder = _BUILDERS.get(base)
        if builder is None:
            raise _Unsupported(ins.opcode)
        return builder(b, ins)
    except _Unsupported as exc:
        raise UnsupportedInstructionError(
            f"unsupported PTX instruction {ins.opcode!r}"
            + (f" ({exc.what})" if exc.what != ins.opcode else ""),
            None,
            opcode=ins.opcode,
        ) from None
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise UnsupportedInstructionError(
            f"unsupported form of PTX instruction {ins.opcode!r} ({exc})", None, opcode=ins.opcode
        ) from None
