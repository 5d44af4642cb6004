"""What a buffer starts with: the ``FILL`` of ``--buffer NAME=TYPE[COUNT]:FILL``.

``random``
    Random values, seeded by the launch seed and the buffer's name. Given explicitly, integers
    span their type's full range (``uint32``: 0 to 4294967295) and floats lie in [-1, 1) (a
    float's full range would overflow the kernel's first sum). With no fill given at all, a
    buffer gets the *default* data instead: floats in [-1, 1), integers in [0, 64) (small, so
    that data used as an index or a count stays in range), and an output is poisoned (see
    :mod:`gpuadvise.runner.verify`).
``random(LOW, HIGH)``
    Uniform integers in [LOW, HIGH] (both included) for integer types, uniform floats in
    [LOW, HIGH) for float types: ``random(0,255)``, ``random(-0.5, 0.5)``.
``zeros``, ``ones``, ``iota``
    0; 1; element i holds i (every field of a vector or struct alike).
``PATH.npy``, ``PATH.bin``
    Real data from a file: a numpy ``.npy`` file (its dtype checked against the buffer's type,
    its size against the count) or raw little-endian bytes (``.bin``: exactly COUNT elements of
    TYPE). ``--buffer x=data.npy`` takes the type and the count from the ``.npy`` file itself.
    Relative paths are relative to the working directory on the command line, to the spec file's
    folder in a spec file.

:func:`parse_fill` reads the text into a :class:`Fill`; ``str(fill)`` is its canonical text
(absolute path for files), which is what travels in a
:class:`~gpuadvise.spec.kernel_spec.BufferSpec` and to the GPU worker.
:mod:`gpuadvise.runner.data` makes the bytes.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.errors import DataFileError, UsageError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "FILE_SUFFIXES",
    "FILL_KEYWORDS",
    "Fill",
    "is_file_fill",
    "npy_layout",
    "parse_fill",
]

FILL_KEYWORDS = ("random", "zeros", "ones", "iota")
FILE_SUFFIXES = (".npy", ".bin")

_NUMBER = r"[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
_RANGE_RE = re.compile(rf"^random\s*\(\s*(?P<lo>{_NUMBER})\s*,\s*(?P<hi>{_NUMBER})\s*\)$", re.I)
_FILL_HINT = "use random, random(LOW,HIGH), zeros, ones, iota, or a data file: PATH.npy or PATH.bin"


@dataclass(frozen=True)
class Fill:
    """A parsed fill: ``kind`` is random, zeros, ones, iota or file.

    ``low``/``high``: the range of ``random(LOW, HIGH)`` (None: the type's full range);
    ``path``: the data file of a ``file`` fill (absolute).
    """

    kind: str
    low: int | float | None = None
    high: int | float | None = None
    path: Path | None = None

    @property
    def has_range(self) -> bool:
        return self.low is not None

    def __str__(self) -> str:
        if self.kind == "file":
            return str(self.path)
        if self.has_range:
            return f"random({_num_text(self.low)},{_num_text(self.high)})"
        return self.kind


def _num_text(v: int | float | None) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _number(text: str) -> int | float:
    t = text.strip()
    sign = -1 if t.startswith("-") else 1
    body = t.lstrip("+-")
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", body):
        return sign * int(body, 16)
    if re.fullmatch(r"\d+", body):
        return sign * int(body)
    return float(t)


def is_file_fill(text: str) -> bool:
    """Whether ``text`` names a data file (ends in .npy or .bin)."""
    return text.strip().lower().endswith(FILE_SUFFIXES)


def parse_fill(text: str, base_dir: Path | None = None, what: str = "buffer") -> Fill:
    """A :class:`Fill` from its text; ``base_dir`` resolves relative file paths (default: the
    working directory). A data file must exist and be a file."""
    s = str(text).strip()
    low = s.lower()
    if low in FILL_KEYWORDS:
        return Fill(low)
    m = _RANGE_RE.match(s)
    if m:
        lo, hi = _number(m["lo"]), _number(m["hi"])
        if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(hi - lo)) or lo > hi:
            raise UsageError(
                f"{what}: fill {s!r} is not a range (LOW must be at most HIGH, both finite)",
                "write e.g. random(0,255) or random(-1.0,1.0)",
            )
        return Fill("random", lo, hi)
    if low.startswith("random"):
        raise UsageError(
            f"{what}: fill {s!r} is not random or random(LOW,HIGH)",
            "write e.g. random(0,255): two numbers, comma-separated",
        )
    if is_file_fill(s):
        if "\0" in s:
            raise UsageError(f"{what}: data file name {s!r} holds a NUL byte", "check the path")
        path = Path(s).expanduser()
        if not path.is_absolute():
            path = (base_dir or Path.cwd()) / path
        path = path.resolve()
        if not path.exists():
            raise DataFileError(f"{what}: data file {s} does not exist", "check the path")
        if not path.is_file():
            raise DataFileError(
                f"{what}: data file {s} is not a regular file", "give a .npy or .bin"
            )
        _check_readable(path, what)
        return Fill("file", path=path)
    raise UsageError(f"{what} has an unknown fill {s!r}", _FILL_HINT)


def _check_readable(path: Path, what: str) -> None:
    """Refuse a data file that cannot be opened for reading (no permission), before any trace."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise DataFileError(
            f"{what}: data file {path} cannot be read ({err.strerror or err})",
            "check the file's permissions",
        ) from None
    os.close(fd)


def npy_layout(path: Path, what: str = "buffer") -> tuple[np.dtype[Any], tuple[int, ...]]:
    """The dtype and shape in a ``.npy`` file's header (the data is not read), checked against
    the file's size: a file cut short (or with bytes after its data) is refused here, before any
    trace reads it."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            offset = f.tell()
            size = os.fstat(f.fileno()).st_size
    except OSError as err:
        raise DataFileError(
            f"{what}: cannot read {path} ({err.strerror})", "check the file"
        ) from None
    except (ValueError, SyntaxError, TypeError, UnicodeDecodeError):
        raise DataFileError(
            f"{what}: {path} is not a .npy file", "save it with numpy.save(path, array)"
        ) from None
    if dtype.hasobject:
        raise DataFileError(
            f"{what}: {path} holds Python objects, not numbers",
            "save a numeric array (numpy.save(path, array.astype(numpy.float32)))",
        )
    del fortran  # the data is read as numpy stores it; the order does not change the count
    shape = tuple(int(d) for d in shape)
    want = math.prod(shape) * dtype.itemsize
    if size - offset != want:
        cut = "is cut short" if size - offset < want else "has bytes after its data"
        raise DataFileError(
            f"{what}: {path} {cut}: its header says {math.prod(shape)} x {dtype} ({want} bytes), "
            f"the file holds {size - offset} bytes of data",
            "write it again with numpy.save(path, array)",
        )
    return dtype, shape
