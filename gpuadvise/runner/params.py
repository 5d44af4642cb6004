"""A resolved launch's arguments as the GPU worker takes them: scalars packed by value, buffers
with their initial fill (shared by bench, measurement and the GPU tracer)."""

from __future__ import annotations

import numpy as np

from gpuadvise.errors import UsageError
from gpuadvise.runner.job import BufferInit, ConstantInit, Param
from gpuadvise.spec.kernel_spec import ResolvedArg, ResolvedBuffer

_STRUCT_CODES = {
    "f4": "f", "f8": "d", "i4": "i", "u4": "I", "i8": "q", "u8": "Q", "i2": "h", "u2": "H",
    "i1": "b", "u1": "B", "b1": "?", "?": "?",  # numpy spells bool "?"
}  # fmt: skip


def scalar_param(a: ResolvedArg) -> Param:
    ct = a.ctype
    if isinstance(a.value, bytes):  # a struct or vector given by its bytes, at its alignment
        return Param("scalar", f"{len(a.value)}s", a.value, align=ct.align_bytes)
    if ct.kind == "bfloat16":
        from gpuadvise.spec.cuda_types import encode_bfloat16

        return Param("scalar", "H", int(encode_bfloat16(np.array([a.value]))[0]))
    fmt = ct.numpy_format.lstrip("<>=|")
    if fmt == "f2":
        return Param("scalar", "H", int(np.array([a.value], np.float16).view(np.uint16)[0]))
    code = _STRUCT_CODES.get(fmt)
    if code is None or ct.lanes > 1:
        raise UsageError(
            f"parameter {a.name} of type {ct.name} cannot be passed by value yet",
            "pass it through a pointer",
        )
    value: int | float = float(a.value) if code in "fd" else int(a.value)
    return Param("scalar", code, value)


def buffer_init(b: ResolvedBuffer) -> BufferInit:
    from gpuadvise.spec.cuda_types import CudaType

    if isinstance(b.elem, CudaType):
        dtype = b.elem.dtype
        kind = b.elem.kind if b.elem.kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2") else None
    else:  # a user struct: raw bytes of the compiler's size
        dtype = np.dtype((np.void, b.elem_size_bytes))
        kind = None
        if b.fill in ("ones", "iota"):
            raise UsageError(
                f"buffer {b.name}: fill {b.fill!r} needs a type with fields, and {b.elem.name} is a "
                "struct gpuadvise only knows the size of",
                "use zeros or random for struct buffers",
            )
    # Outputs start poisoned (NaN / 0xFF) unless the user gave their start value (any explicit
    # fill, random included): then they are in/out buffers and start with that value.
    return BufferInit(b.name, dtype, b.count, b.fill, b.is_output, b.poisoned, kind)


def constant_inits(ptx: str, constants: tuple[ResolvedBuffer, ...]) -> tuple[ConstantInit, ...]:
    """The spec's ``__constant__`` fills bound to the module ``ptx`` declares
    (:func:`gpuadvise.ptx.constants.bind_constants`: a wrong name, type or size is a
    UsageError), as the worker fills them."""
    from gpuadvise.ptx.constants import bind_constants

    out = []
    for bound in bind_constants(ptx, constants):
        b = buffer_init(bound.fill)
        out.append(
            ConstantInit(bound.variable.symbol, b.name, b.dtype, b.count, b.fill, b.float_kind)
        )
    return tuple(out)
