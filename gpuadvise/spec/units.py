"""Parsers for the sizes and launch dimensions users type: ``32k``, ``0x8000``, ``240x135``.

Pure functions, no I/O. Every bad input raises :class:`~gpuadvise.errors.UsageError` with a hint.
``k``/``K``/``KB``/``KiB`` all mean 1024 bytes, as CUDA users mean them (``48KB`` of shared memory is
49152 bytes); ``m``/``M``/``MB``/``MiB`` mean 1024*1024.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuadvise.errors import UsageError

_SIZE_RE = re.compile(
    r"^\s*(?:(?P<hex>0[xX][0-9a-fA-F]+)|(?P<num>\d+(?:\.\d+)?))\s*(?P<unit>[a-zA-Z]*)\s*$"
)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
}


def parse_size(text: str | int, what: str = "size") -> int:
    """Bytes from ``4096``, ``32k``, ``32K``, ``32KiB``, ``48KB``, ``1.5k``, ``0x8000``."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise UsageError(f"{what} must not be negative, got {text}", "give a size such as 32k")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise UsageError(
            f"{what} {text!r} is not a size",
            "write bytes (4096), a hex number (0x8000) or a unit: 32k, 32KiB, 48KB (k = 1024)",
        )
    unit = m.group("unit").lower()
    if unit not in _UNITS:
        raise UsageError(
            f"{what} {text!r} has an unknown unit {m.group('unit')!r}",
            "use b, k/KB/KiB (1024), m/MB/MiB or g/GB/GiB",
        )
    if m.group("hex"):
        if unit:
            raise UsageError(f"{what} {text!r}: a hex size takes no unit", "write 0x8000 alone")
        return int(m.group("hex"), 16)
    num = m.group("num")
    if len(num) > 30:
        raise UsageError(f"{what} {text!r} is too large", "give a size below 2**64 bytes")
    if "." in num:
        whole, frac = num.split(".")
        scaled = int(whole + frac) * _UNITS[unit]
        value, rest = divmod(scaled, 10 ** len(frac))
        if rest:
            raise UsageError(f"{what} {text!r} is not a whole number of bytes", "round it")
        return value
    return int(num) * _UNITS[unit]


@dataclass(frozen=True)
class Dim3:
    x: int
    y: int = 1
    z: int = 1

    @property
    def count(self) -> int:
        return self.x * self.y * self.z

    def as_tuple(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)

    def __str__(self) -> str:
        if self.z != 1:
            return f"{self.x}x{self.y}x{self.z}"
        if self.y != 1:
            return f"{self.x}x{self.y}"
        return str(self.x)


def _noun(what: str) -> str:
    """``--grid`` -> ``grid``: the word for the dimension in a hint."""
    return what.lstrip("-").split()[0] if what.strip() else "launch"


_DIM_SPLIT = re.compile(r"\s*[xX,*]\s*")


def parse_dims(text: str | int, what: str = "launch dimension") -> Dim3:
    """A Dim3 from ``240x135``, ``240x135x1``, ``240,135``, ``240`` (1 to 3 positive integers)."""
    if isinstance(text, int) and not isinstance(text, bool):
        parts = [str(text)]
    else:
        s = str(text).strip().strip("()[]")
        parts = _DIM_SPLIT.split(s) if s else []
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts):
        raise UsageError(
            f"{what} {text!r} is not a launch dimension",
            "write 1 to 3 positive integers: 256, 16x16, 240x135x1 or 240,135",
        )
    if any(p.startswith("-") or not p.lstrip("+").strip("0") for p in parts):
        shown = " by ".join(p.lstrip("+") for p in parts)
        if isinstance(text, str) and re.fullmatch(r"\s*0[xX][0-9a-fA-F]+\s*", text):
            raise UsageError(
                f"{what} {text!r} means {shown} (an x between extents), which has a zero extent",
                f"a {_noun(what)} extent must be >= 1; for the hex number write it in decimal "
                f"({int(text.strip(), 16)})",
            )
        shown = f" ({shown})" if len(parts) > 1 else ""
        raise UsageError(
            f"{what} {text!r}{shown} has a zero or negative extent",
            f"a {_noun(what)} extent must be >= 1",
        )
    if any(len(p.lstrip("+").lstrip("0")) > 30 for p in parts):
        raise UsageError(f"{what} {text!r} is too large", "CUDA's limits are below 2**31")
    values = [int(p) for p in parts]
    while len(values) < 3:
        values.append(1)
    return Dim3(*values)
