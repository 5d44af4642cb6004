"""A recorded launch's parameters, typed (pure).

The bytes of each parameter come from the launch (offset and size from ``cuFuncGetParamInfo``
or the cubin); what they mean comes, best first, from the kernel's declaration in its source
(names and types), from its mangled name (C++ kernels: the types, no names), or, for an
``extern "C"`` kernel with no source, from the launch itself: an 8-byte value inside a device
allocation is a pointer, anything else is kept as raw bytes of its size.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from gpuadvise.spec.cuda_types import CudaType, lookup
from gpuadvise.toolchain.names import split_params

__all__ = ["ParamType", "TypedParam", "decode_params", "demangled_types", "split_params"]

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}


@dataclass(frozen=True)
class ParamType:
    """What one parameter is declared as: ``name`` (None when only the mangled name is known),
    the type's text, and for a pointer its pointee without qualifiers and its constness."""

    name: str | None
    type_text: str
    is_pointer: bool
    pointee: str | None = None
    is_const: bool = False

    @classmethod
    def parse(cls, type_text: str, name: str | None = None) -> ParamType:
        """From a C++ type as cu++filt/c++filt or a declaration writes it (``float const*``,
        ``const float*``, ``Params``, ``unsigned long``)."""
        text = " ".join(type_text.replace("*", " * ").replace("&", " & ").split())
        if "*" not in text and not text.endswith("[]"):
            return cls(name, type_text.strip(), False)
        base = text[: text.index("*")] if "*" in text else text[:-2]
        words = base.split()
        pointee = " ".join(w for w in words if w not in _QUALIFIERS) or "void"
        if text.count("*") > 1:
            pointee += "*"
        return cls(name, type_text.strip(), True, pointee, "const" in words)


@dataclass(frozen=True)
class TypedParam:
    """One parameter of one launch: ``kind`` is ``pointer``, ``scalar`` (``ctype`` and ``value``
    set) or ``bytes`` (a value gpuadvise cannot pass as a scalar: a struct or vector by value,
    or an unknown type; ``value`` is its bytes in hex)."""

    ordinal: int
    name: str
    kind: str
    declared: ParamType | None
    ctype: CudaType | None = None
    value: int | float | bool | str | None = None


def demangled_types(signature: str) -> list[ParamType] | None:
    """The parameter types a demangled signature names."""
    parts = split_params(signature)
    return None if parts is None else [ParamType.parse(p) for p in parts]


def _scalar(data: bytes, ctype: CudaType) -> int | float | bool | None:
    if ctype.lanes != 1 or len(data) != ctype.size_bytes:
        return None
    if ctype.kind == "bool":
        return data != b"\0" * len(data)
    if ctype.kind == "float" and ctype.size_bytes in (4, 8):
        return float(struct.unpack("<f" if ctype.size_bytes == 4 else "<d", data)[0])
    if ctype.kind in ("int", "uint"):
        return int.from_bytes(data, "little", signed=ctype.kind == "int")
    return None  # half, bfloat16, fp8 by value: kept as bytes


def decode_params(
    slots: Sequence[tuple[int, int]],
    params: bytes,
    declared: Sequence[ParamType] | None,
    pointer_ordinals: set[int],
) -> list[TypedParam]:
    """Each parameter's meaning. ``declared``: the types (source or mangled name), or None;
    ``pointer_ordinals``: the parameters whose value lay in a device allocation at launch."""
    if declared is not None and len(declared) != len(slots):
        declared = None  # a signature that does not match the launch says nothing
    out = []
    for i, (off, size) in enumerate(slots):
        data = params[off : off + size]
        decl = declared[i] if declared is not None else None
        name = (decl.name if decl and decl.name else None) or f"arg{i}"
        if (decl.is_pointer if decl else i in pointer_ordinals) and size == 8:
            out.append(TypedParam(i, name, "pointer", decl, value=int.from_bytes(data, "little")))
            continue
        ctype = lookup(decl.type_text) if decl else None
        value = _scalar(data, ctype) if ctype is not None else None
        if ctype is None or value is None:
            out.append(TypedParam(i, name, "bytes", decl, None, data.hex()))
        else:
            out.append(TypedParam(i, name, "scalar", decl, ctype, value))
    return out
