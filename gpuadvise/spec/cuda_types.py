"""CUDA element types: size, alignment and host (numpy) layout of the types buffers hold.

:func:`lookup` knows the C/C++ scalar types (``int``, ``unsigned long long``, ``int64_t``,
``size_t``, ``float``, ``double``, ``bool``), CUDA's ``half``/``__half``, ``__nv_bfloat16``/
``nv_bfloat16``/``bfloat16`` and the fp8 scalars (``__nv_fp8_e4m3``, ``__nv_fp8_e5m2``), the
vector types of ``vector_types.h`` (``char1``..``double4``, ``uchar4``, ``longlong2``,
``double4_16a``/``double4_32a`` ...), ``half2``/``__half2``/``__nv_bfloat162``, and numpy-style
aliases (``float32``, ``int32``, ``uint8``, ``float16`` ...). Integer spellings are canonicalised
(``long unsigned int`` is ``unsigned long``); ``const``, ``volatile``, ``std::`` and ``struct``
are ignored. Sizes and alignments are those of the x86-64 Linux ABI that nvcc uses on both host
and device (``long`` is 8 bytes), checked against nvcc by ``tests/test_ctypes_cuda.py``:
a vector of 1 or 2 lanes is aligned to its size, one of 3 lanes to its scalar, one of 4 lanes to
``min(size, 16)`` (``_32a`` types to 32).

Any other name is a user type: :func:`lookup_elem` returns a :class:`StructType` placeholder
whose size and alignment only the compiler knows. The compile step supplies them later through
the ``resolve_struct(name) -> (size_bytes, align_bytes)`` callback that
:func:`gpuadvise.spec.kernel_spec.resolve` takes (typically by compiling a one-line
``sizeof``/``alignof`` probe with the user's flags), and :meth:`StructType.with_layout` records
them.

numpy is imported lazily (only by :attr:`CudaType.dtype` and the encoders). Types numpy lacks
are stored as raw bits of the same size (``kind`` tells them apart): ``bfloat16`` as ``uint16``,
fp8 as ``uint8``; :func:`encode_bfloat16` and :func:`encode_fp8` turn float values into those
bits, for whoever fills host buffers (``gpuadvise.runner.data``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FILLS",
    "CudaType",
    "ElemType",
    "StructType",
    "all_spellings",
    "all_types",
    "encode_bfloat16",
    "encode_fp8",
    "lookup",
    "HEADER_TYPEDEFS",
    "canonical_int",
    "lookup_elem",
    "raw_type",
    "normalize_type_name",
]

FILLS = ("random", "zeros", "ones", "iota")  # as gpuadvise.runner.data fills them


@dataclass(frozen=True)
class CudaType:
    """A built-in element type.

    ``numpy_format`` is the numpy format of one lane (``<f4``); ``lanes`` > 1 makes
    :attr:`dtype` a structured dtype with fields x, y, z, w. ``kind`` is ``"float"``,
    ``"bfloat16"``, ``"fp8_e4m3"``, ``"fp8_e5m2"``, ``"int"``, ``"uint"`` or ``"bool"``.
    """

    name: str
    numpy_format: str
    size_bytes: int
    align_bytes: int
    is_float: bool
    kind: str
    lanes: int = 1
    scalar: str = ""  # the lane's canonical name (float for float4); the type itself if lanes == 1

    @property
    def lane_bytes(self) -> int:
        return self.size_bytes // self.lanes

    @property
    def is_signed(self) -> bool:
        return self.kind not in ("uint", "bool")

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of one element (structured x/y/z/w for vectors)."""
        import numpy as np

        if self.lanes == 1:
            return np.dtype(self.numpy_format)
        fields = ["x", "y", "z", "w"][: self.lanes]
        return np.dtype(
            {
                "names": fields,
                "formats": [self.numpy_format] * self.lanes,
                "offsets": [i * self.lane_bytes for i in range(self.lanes)],
                "itemsize": self.size_bytes,
            }
        )

    def int_range(self) -> tuple[int, int] | None:
        """The inclusive range of an integer or bool type; None for floating types."""
        if self.kind == "bool":
            return (0, 1)
        if self.kind not in ("int", "uint"):
            return None
        bits = 8 * self.lane_bytes
        if self.kind == "uint":
            return (0, 2**bits - 1)
        return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


@dataclass(frozen=True)
class StructType:
    """A user type (a struct) that gpuadvise cannot size by itself.

    ``size_bytes``/``align_bytes`` are None until the compile step resolves them through the
    ``resolve_struct(name) -> (size_bytes, align_bytes)`` callback; see the module docstring.
    """

    name: str
    size_bytes: int | None = None
    align_bytes: int | None = None

    @property
    def is_resolved(self) -> bool:
        return self.size_bytes is not None

    def with_layout(self, size_bytes: int, align_bytes: int) -> StructType:
        if size_bytes <= 0 or align_bytes <= 0 or align_bytes & (align_bytes - 1):
            raise UsageError(
                f"the compiler reported an impossible layout for {self.name!r}: "
                f"size {size_bytes}, alignment {align_bytes}",
                "check that the type is complete (defined, not only declared) in the source",
            )
        return replace(self, size_bytes=size_bytes, align_bytes=align_bytes)


ElemType = CudaType | StructType

# ---------------------------------------------------------------------------------------------
# The table.

_SCALARS: dict[str, tuple[str, int, str]] = {
    # canonical name: (numpy format, size, kind)
    "bool": ("?", 1, "bool"),
    "char": ("i1", 1, "int"),  # signed on every platform nvcc supports
    "signed char": ("i1", 1, "int"),
    "unsigned char": ("u1", 1, "uint"),
    "short": ("<i2", 2, "int"),
    "unsigned short": ("<u2", 2, "uint"),
    "int": ("<i4", 4, "int"),
    "unsigned int": ("<u4", 4, "uint"),
    "long": ("<i8", 8, "int"),
    "unsigned long": ("<u8", 8, "uint"),
    "long long": ("<i8", 8, "int"),
    "unsigned long long": ("<u8", 8, "uint"),
    "float": ("<f4", 4, "float"),
    "double": ("<f8", 8, "float"),
    "__half": ("<f2", 2, "float"),
    "__nv_bfloat16": ("<u2", 2, "bfloat16"),
    "__nv_fp8_e4m3": ("u1", 1, "fp8_e4m3"),
    "__nv_fp8_e5m2": ("u1", 1, "fp8_e5m2"),
}

HEADER_TYPEDEFS: dict[str, str] = {
    # typedefs the C, glibc and CUDA headers declare (stdint.h, stddef.h, sys/types.h,
    # cuda_fp16.h, cuda_bf16.h), with the type the compiler names them by (x86-64 Linux):
    # kernel names use them (``--kernel 'k<half, int64_t>'``); tests/source/test_kernel_names.py
    # checks every entry against nvcc
    "int8_t": "signed char",
    "uint8_t": "unsigned char",
    "int16_t": "short",
    "uint16_t": "unsigned short",
    "int32_t": "int",
    "uint32_t": "unsigned int",
    "int64_t": "long",
    "uint64_t": "unsigned long",
    "size_t": "unsigned long",
    "ssize_t": "long",
    "ptrdiff_t": "long",
    "intptr_t": "long",
    "uintptr_t": "unsigned long",
    "ushort": "unsigned short",
    "uint": "unsigned int",
    "ulong": "unsigned long",
    "half": "__half",
    "nv_half": "__half",
    "__nv_half": "__half",
    "half2": "__half2",
    "nv_half2": "__half2",
    "__nv_half2": "__half2",
    "nv_bfloat16": "__nv_bfloat16",
    "nv_bfloat162": "__nv_bfloat162",
}

_ALIASES: dict[str, str] = {
    **HEADER_TYPEDEFS,
    # names of gpuadvise's buffer types that are no C++ typedef
    "uchar": "unsigned char",
    "longlong": "long long",
    "ulonglong": "unsigned long long",
    "bfloat16": "__nv_bfloat16",
    "fp8_e4m3": "__nv_fp8_e4m3",
    "float8_e4m3": "__nv_fp8_e4m3",
    "fp8_e5m2": "__nv_fp8_e5m2",
    "float8_e5m2": "__nv_fp8_e5m2",
    # numpy-style names
    "float16": "__half",
    "float32": "float",
    "float64": "double",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "uint16": "unsigned short",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    # vector aliases
    "bfloat162": "__nv_bfloat162",
}

# vector_types.h prefixes and their lane type
_VECTOR_BASES = {
    "char": "signed char",
    "uchar": "unsigned char",
    "short": "short",
    "ushort": "unsigned short",
    "int": "int",
    "uint": "unsigned int",
    "long": "long",
    "ulong": "unsigned long",
    "longlong": "long long",
    "ulonglong": "unsigned long long",
    "float": "float",
    "double": "double",
}


def _make_scalar(name: str) -> CudaType:
    fmt, size, kind = _SCALARS[name]
    is_float = kind not in ("int", "uint", "bool")
    return CudaType(name, fmt, size, size, is_float, kind, 1, name)


def _make_vector(name: str, lane: str, lanes: int, align_override: int | None = None) -> CudaType:
    base = _make_scalar(lane)
    size = base.size_bytes * lanes
    if align_override is not None:
        align = align_override
    elif lanes in (1, 2):
        align = size
    elif lanes == 3:
        align = base.size_bytes
    else:
        align = min(size, 16)
    return CudaType(name, base.numpy_format, size, align, base.is_float, base.kind, lanes, lane)


def _build_table() -> dict[str, CudaType]:
    table = {name: _make_scalar(name) for name in _SCALARS}
    for prefix, lane in _VECTOR_BASES.items():
        for lanes in (1, 2, 3, 4):
            name = f"{prefix}{lanes}"
            table[name] = _make_vector(name, lane, lanes)
    for prefix in ("long", "ulong", "longlong", "ulonglong", "double"):
        for align in (16, 32):
            name = f"{prefix}4_{align}a"
            table[name] = _make_vector(name, _VECTOR_BASES[prefix], 4, align)
    table["__half2"] = _make_vector("__half2", "__half", 2)
    table["__nv_bfloat162"] = _make_vector("__nv_bfloat162", "__nv_bfloat16", 2)
    return table


_TABLE = _build_table()

_INT_WORDS = {"signed", "unsigned", "short", "long", "int", "char"}
_IGNORED_WORDS = {"const", "volatile", "struct", "class", "union", "enum", "typename"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)*(?:\s*<.*>)?$")


def canonical_int(words: list[str]) -> str | None:
    """``long unsigned int`` -> ``unsigned long``; None if the words are not an integer type."""
    unsigned = words.count("unsigned")
    signed = words.count("signed")
    longs = words.count("long")
    shorts = words.count("short")
    chars = words.count("char")
    ints = words.count("int")
    if unsigned + signed > 1 or longs > 2 or shorts > 1 or chars > 1 or ints > 1:
        return None
    if chars and (longs or shorts or ints):
        return None
    if shorts and longs:
        return None
    prefix = "unsigned " if unsigned else ""
    if chars:
        return "unsigned char" if unsigned else ("signed char" if signed else "char")
    if shorts:
        return prefix + "short"
    if longs == 2:
        return prefix + "long long"
    if longs == 1:
        return prefix + "long"
    return prefix + "int"


def normalize_type_name(text: str) -> str:
    """Collapse spaces, drop cv-qualifiers, ``struct``, ``std::`` and the global ``::``."""
    s = re.sub(r"\bstd\s*::\s*", "", text.strip())
    s = re.sub(r"^::\s*", "", s)
    words = [w for w in s.split() if w not in _IGNORED_WORDS]
    s = " ".join(words)
    s = re.sub(r"\s*(::|<|>|,|\*)\s*", lambda m: m.group(1) + (" " if m.group(1) == "," else ""), s)
    return s


def raw_type(name: str, size_bytes: int, align_bytes: int = 1) -> CudaType:
    """A value gpuadvise passes as its bytes (``kind`` ``"bytes"``): a struct or vector passed by
    value whose bytes a spec gives (``p = { bytes = "..." }``)."""
    return CudaType(name, f"V{size_bytes}", size_bytes, max(align_bytes, 1), False, "bytes")


def lookup(name: str) -> CudaType | None:
    """The built-in type called ``name`` (any accepted spelling), or None."""
    s = normalize_type_name(name)
    if s in _TABLE:
        return _TABLE[s]
    if s in _ALIASES:
        return _TABLE[_ALIASES[s]]
    words = s.split()
    if words and all(w in _INT_WORDS for w in words):
        canon = canonical_int(words)
        if canon is not None:
            return _TABLE[canon]
    return None


def lookup_elem(name: str) -> ElemType:
    """A :class:`CudaType`, or a :class:`StructType` placeholder for any other valid type name."""
    found = lookup(name)
    if found is not None:
        return found
    s = normalize_type_name(name)
    if not s or not _NAME_RE.match(s) or "*" in s or s in ("void", "auto"):
        raise UsageError(
            f"{name!r} is not an element type",
            "use a CUDA type (float, int, half, float4, uchar4, unsigned int ...), a numpy "
            "name (float32, int64 ...) or the name of a struct defined in your source",
        )
    if s.split()[0] in _INT_WORDS:
        raise UsageError(
            f"{name!r} is not a valid integer type",
            "write e.g. unsigned int, long long, unsigned char or int64_t",
        )
    return StructType(s)


def all_types() -> dict[str, CudaType]:
    """Every canonical built-in type, by canonical name."""
    return dict(_TABLE)


def all_spellings() -> dict[str, CudaType]:
    """Every canonical name and alias, mapped to its type (for help texts and tests)."""
    out = dict(_TABLE)
    out.update({alias: _TABLE[target] for alias, target in _ALIASES.items()})
    return out


# ---------------------------------------------------------------------------------------------
# Encoding values of the types numpy lacks (for whoever fills host buffers).


def encode_bfloat16(values: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of float values, rounded to nearest even."""
    import numpy as np

    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    return rounded.astype(np.uint16)


def encode_fp8(values: np.ndarray, kind: str) -> np.ndarray:
    """The fp8 codes (uint8) nearest to float values; ``kind`` is ``fp8_e4m3`` (e4m3fn) or
    ``fp8_e5m2`` as in :attr:`CudaType.kind`."""
    import numpy as np

    if kind == "fp8_e4m3":
        exp_bits, man_bits, bias = 4, 3, 7
    else:
        exp_bits, man_bits, bias = 5, 2, 15
    codes = np.arange(256, dtype=np.uint16)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> man_bits) & ((1 << exp_bits) - 1)
    man = codes & ((1 << man_bits) - 1)
    normal = (1.0 + man / (1 << man_bits)) * np.power(2.0, exp.astype(np.float64) - bias)
    subnormal = (man / (1 << man_bits)) * 2.0 ** (1 - bias)
    decoded = sign * np.where(exp == 0, subnormal, normal)
    finite = np.isfinite(decoded)
    if kind == "fp8_e4m3":
        finite &= (codes & 0x7F) != 0x7F  # e4m3fn: S.1111.111 is NaN
    else:
        finite &= exp != (1 << exp_bits) - 1  # e5m2: top exponent is inf/NaN
    order = np.argsort(decoded[finite], kind="stable")
    table = decoded[finite][order]
    valid = codes[finite][order]
    flat = np.asarray(values, dtype=np.float64).ravel()
    hi = np.clip(np.searchsorted(table, flat), 1, len(table) - 1)
    lo = hi - 1
    nearest = np.where(np.abs(flat - table[lo]) <= np.abs(table[hi] - flat), lo, hi)
    return valid[nearest].astype(np.uint8).reshape(np.shape(values))
