"""A kernel's ``__constant__`` variables, and the launch spec's fills bound to them.

The host code of a kernel that reads ``__constant__`` memory fills it before the launch
(``cudaMemcpyToSymbol``); gpuadvise does the same from the spec's ``[constants]``
(``--constant NAME=TYPE[COUNT]:FILL``, :func:`gpuadvise.spec.kernel_spec.parse_constant`). Here:

- :func:`const_variables`: the module-scope ``.const`` variables of a PTX module, each with its
  PTX symbol (mangled for a template or a namespace: ``_Z4maskIfE``), its name as the source
  spells it (``mask<float>``, demangled by :func:`gpuadvise.toolchain.names.demangle`), its
  PTX type, size, and whether the PTX gives it an initializer;
- :func:`bind_constants`: each constant the spec fills matched to its variable by name (the
  symbol, or the demangled name in any spelling :func:`gpuadvise.toolchain.names.norm` makes
  equal), its size checked against the declaration's, and its type where the PTX declares one
  (an array of ``float`` is ``.b8 d_Kernel[68]`` in nvcc's PTX: only the size is known there).
  A mismatch is a :class:`~gpuadvise.errors.UsageError` naming the problem and the fix, one line;
- :func:`unfilled_constants`: the variables a kernel reads that have no initializer and no fill:
  zeros (the host code that would fill them does not run), so the outputs computed from them
  say little.

The emulator writes the fills into its constant bank (:mod:`gpuadvise.trace.emulate`), the GPU
worker into the module's global (``cuModuleGetGlobal``, :mod:`gpuadvise.runner.worker`); both make
the bytes as a buffer's (:func:`gpuadvise.runner.data.make_host_buffer`, same seed and name).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuadvise.errors import UsageError
from gpuadvise.ptx.parser import Addr, Instr, Module, Sym, parse_ptx_cached

if TYPE_CHECKING:
    from gpuadvise.spec.kernel_spec import ResolvedBuffer

__all__ = [
    "BoundConstant",
    "ConstVariable",
    "bind_constants",
    "const_variables",
    "element_type_read",
    "fill_example",
    "unfilled_constants",
]

# PTX types that say what an element is (the b types are raw bits: any element of their size)
_FLOAT_TYPES = {"f16", "f32", "f64", "bf16"}
_INT_TYPES = {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"}


@dataclass(frozen=True)
class ConstVariable:
    """A module-scope ``.const`` variable: ``symbol`` in the PTX, ``name`` as the source spells
    it, its PTX ``type`` and element size, ``size_bytes`` in all, ``initialized``: the PTX gives
    it an initializer (a ``__constant__`` defined with values)."""

    symbol: str
    name: str
    type: str
    elem_size: int
    size_bytes: int
    initialized: bool

    @property
    def declaration(self) -> str:
        count = self.size_bytes // max(self.elem_size, 1)
        return f".const .{self.type} {self.symbol}[{count}]"


@dataclass(frozen=True)
class BoundConstant:
    """A spec's constant (``fill``: its type, count and fill as a buffer) and the variable it
    fills."""

    variable: ConstVariable
    fill: ResolvedBuffer


def const_variables(ptx: str | Module) -> tuple[ConstVariable, ...]:
    """The module-scope ``.const`` variables of a PTX module (its text or the parsed module)."""
    from gpuadvise.toolchain.names import demangle

    module = parse_ptx_cached(ptx) if isinstance(ptx, str) else ptx
    decls = [v for v in module.variables.values() if v.space == "const" and not v.extern]
    names = demangle([v.name for v in decls])
    return tuple(
        ConstVariable(
            v.name,
            _plain(names.get(v.name, v.name)),
            v.type,
            v.elem_size * v.vector,
            v.size_bytes,
            bool(v.init),
        )
        for v in decls
    )


def _plain(demangled: str) -> str:
    """A demangled variable name without what a demangler may add around it."""
    return demangled.strip()


def bind_constants(
    ptx: str | Module, constants: Sequence[ResolvedBuffer]
) -> tuple[BoundConstant, ...]:
    """Each constant of ``constants`` bound to the ``.const`` variable it names in the module
    ``ptx`` (see the module docstring); raises UsageError on an unknown name, a size or a type
    that does not match the declaration."""
    if not constants:
        return ()
    from gpuadvise.toolchain.names import norm

    variables = const_variables(ptx)
    out = []
    for c in constants:
        wanted = norm(c.name)
        found = [v for v in variables if v.symbol == c.name or norm(v.name) == wanted]
        if not found:
            raise UsageError(_unknown(c.name, variables), _unknown_hint(c.name, variables))
        v = found[0]
        _check_size(c, v)
        _check_type(c, v)
        out.append(BoundConstant(v, c))
    return tuple(out)


def _unknown(name: str, variables: Sequence[ConstVariable]) -> str:
    if not variables:
        return f"constant {name}: the kernel's module declares no __constant__ variable"
    have = ", ".join(v.name for v in variables[:12]) + (" ..." if len(variables) > 12 else "")
    return (
        f"constant {name}: the kernel's module has no __constant__ variable of that name ({have})"
    )


def _unknown_hint(name: str, variables: Sequence[ConstVariable]) -> str:
    import difflib

    if not variables:
        return (
            "drop it from the spec (--constant, [constants]): the kernel reads no constant memory"
        )
    close = difflib.get_close_matches(name, [v.name for v in variables], n=1)
    if close:
        return f"did you mean {close[0]}? Name the variable as the source spells it"
    return "name the variable as the source spells it (a template as mask<float>)"


def _type_text(c: ResolvedBuffer) -> str:
    return f"{c.elem.name}[{c.count}]"


def _check_size(c: ResolvedBuffer, v: ConstVariable) -> None:
    if c.size_bytes == v.size_bytes:
        return
    elem = c.elem_size_bytes
    fits = v.size_bytes // elem if elem and v.size_bytes % elem == 0 else None
    hint = (
        f"give its size: {c.name}={c.elem.name}[{fits}]"
        if fits
        else f"give the element type it holds ({v.size_bytes} bytes in all)"
    )
    raise UsageError(
        f"constant {c.name}: {_type_text(c)} is {c.size_bytes} bytes, but the kernel declares "
        f"{v.size_bytes} ({v.declaration})",
        hint,
    )


def _check_type(c: ResolvedBuffer, v: ConstVariable) -> None:
    """The element type against the declaration's, where the PTX says what an element is (not
    for ``.b`` types, nor for structs gpuadvise only knows the size of)."""
    from gpuadvise.spec.cuda_types import CudaType

    if v.type not in _FLOAT_TYPES | _INT_TYPES or not isinstance(c.elem, CudaType):
        return
    lane_bytes = c.elem.lane_bytes
    is_float = c.elem.is_float
    ptx_float = v.type in _FLOAT_TYPES
    ptx_bytes = int(v.type[1:]) // 8 if v.type[1:].isdigit() else v.elem_size
    if is_float == ptx_float and lane_bytes == ptx_bytes:
        return
    raise UsageError(
        f"constant {c.name}: the kernel declares it of PTX type .{v.type} ({v.declaration}), "
        f"not {c.elem.name}",
        f"give the type the source declares it with: {c.name}=TYPE[{c.count}]",
    )


def unfilled_constants(
    variables: Sequence[ConstVariable], used: Collection[str], filled: Collection[str]
) -> tuple[ConstVariable, ...]:
    """The variables the kernel uses (``used``: PTX symbols its code names) that have no
    initializer and that no constant of the spec fills (``filled``: symbols)."""
    return tuple(
        v for v in variables if v.symbol in used and not v.initialized and v.symbol not in filled
    )


# PTX load types -> the CUDA type a ``--constant`` names them with
_CUDA_NAMES = {
    "f32": "float", "f64": "double", "f16": "half", "s32": "int", "u32": "uint32",
    "s64": "int64", "u64": "uint64", "s16": "int16", "u16": "uint16", "s8": "int8",
    "u8": "uint8", "b32": "uint32", "b64": "uint64", "b16": "uint16", "b8": "uint8",
}  # fmt: skip


def element_type_read(instrs: Sequence[Instr], symbol: str) -> str | None:
    """The CUDA type the kernel's loads read ``symbol`` as (``ld.const.f32 [d_Kernel+4]``:
    float), when every load that names it directly agrees; None otherwise (no such load, or
    loads through a computed address)."""
    types = set()
    for ins in instrs:
        if ins.base not in ("ld", "ldu") or "const" not in ins.mods:
            continue
        addr = next((o for o in ins.operands if isinstance(o, Addr)), None)
        if addr is None or not isinstance(addr.base, Sym) or addr.base.name != symbol:
            continue
        t = next((m for m in reversed(ins.mods) if m in _CUDA_NAMES), None)
        vec = next((m for m in ins.mods if m in ("v2", "v4")), None)
        if t is None or vec is not None:
            return None
        types.add(_CUDA_NAMES[t])
    return types.pop() if len(types) == 1 else None


def fill_example(v: ConstVariable, instrs: Sequence[Instr]) -> str:
    """``d_Kernel=float[17]:random`` for a ``--constant`` that fills ``v``: the element type
    its loads read, else ``TYPE[N]`` with the bytes to fill."""
    from gpuadvise.spec.cuda_types import lookup

    t = element_type_read(instrs, v.symbol)
    ct = lookup(t) if t else None
    if ct is not None and v.size_bytes % ct.size_bytes == 0:
        return f"{v.name}={t}[{v.size_bytes // ct.size_bytes}]:random"
    return f"{v.name}=TYPE[N]:random ({v.size_bytes} bytes)"
