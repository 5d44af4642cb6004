"""What to run: the kernel, its launch, its scalar arguments and its buffers.

Three layers, one direction:

1. Parsing user text: :func:`parse_arg` (``--arg n=4194304``), :func:`parse_buffer`
   (``--buffer in=float32[n]``, ``--buffer cells=Cell[w*h]:zeros``) and :func:`load_spec`
   (a ``case.toml`` / ``<kernel>.toml`` file).
2. :func:`build_kernel_spec` merges a spec file with command-line values (the command line wins)
   into a :class:`KernelSpec`. With no ``--spec``, :func:`find_spec_for` picks up a spec file
   beside the ``.cu``. Integer ``args`` are evaluated here, so grid, block and dynamic shared
   memory may be expressions over them (``grid = "ceil_div(n, 256)"``).
3. :func:`resolve` binds a :class:`KernelSpec` to the kernel's parameters (from
   :func:`gpuadvise.source.signature.parse_signature`) and yields a :class:`ResolvedLaunch`: every
   scalar with its CUDA type and value, every pointer with a buffer of known element type, count
   and byte size, each marked input or output.

:func:`build_kernel_spec` also checks what the user gave against the kernel's parameters as the
source declares them (:func:`check_spec`), before anything is compiled: unknown or misplaced
names (listing the kernel's parameters), values that do not fit their parameter's type, counts
below one, unknown element types, fills and data files that do not match the buffer. So these
are errors (exit 2) with or without a trace. Sizes are checked against the memory budget where
the buffers are made (:mod:`gpuadvise.spec.budget`).

Buffers
-------
A buffer is ``TYPE[COUNT]`` with an optional ``:FILL``. ``TYPE`` is a CUDA type or alias
(``float``, ``float32``, ``half``, ``float4``, ``unsigned int`` ...; see
:mod:`gpuadvise.spec.cuda_types`) or a struct name from the source (``Cell``), whose size and
alignment the compile step reports through ``resolve(..., resolve_struct=...)``. ``COUNT`` is an
integer expression (:mod:`gpuadvise.spec.expr`) over the integer args: ``n``, ``w*h``,
``(n+255)/256``, ``ceil_div(n, 256)``; it counts elements, not bytes. ``FILL`` is ``random``
(seeded by ``seed``; integers over their type's full range), ``random(LOW,HIGH)``, ``zeros``,
``ones``, ``iota`` (element i holds i) or a data file (``PATH.npy``, raw ``PATH.bin``); with no
``FILL`` a buffer gets the default data (floats in [-1, 1), integers in [0, 64)).
``NAME=PATH.npy`` alone takes the type and count from the file. :mod:`gpuadvise.spec.fills` says
exactly what each fill means; the runner makes the bytes (:mod:`gpuadvise.runner.data`).

A pointer parameter that points to ``const`` (``const float* in``) is an input; any other pointer
is an output, and outputs are what verification compares between the baseline and a variant
(``output = true/false`` in a spec file overrides this). An output the user gave no ``FILL``
starts poisoned (0xFF bytes) so that unwritten elements are caught; any explicit fill makes it an
in/out buffer that starts with that data. A pointer with no buffer given gets the
**default buffer**: one element per thread of the launch (grid threads x block threads), of the
type the pointer points to, filled at random, marked ``assumed=True`` so that reports can say so.
A ``void*`` parameter has no default: give its buffer. A scalar parameter with no value takes
the kernel's default argument when that is a plain value (``int stride = 1``); any other scalar
with no value is an error naming the ``--arg`` to add.

The spec file (``case.toml``, ``<kernel>.toml``)
------------------------------------------------
::

    source = "reduce.cu"          # the .cu, relative to this file (optional beside a .cu)
    kernel = "reduce<256, true>"  # plain, ns::name or a template instantiation
    description = "..."           # optional, free text
    grid = "240x135"              # "240x135", "240,135", 256, [240, 135] or expressions
                                  #   over args, comma-separated: "ceil_div(n, 256)"
    block = "16x16"
    dynamic_smem = "4k"           # bytes: 4096, "4k", "48KB", "0x1000" or an expression
    nvcc_flags = ["-DTILE=16"]
    seed = 1                      # random fills (default 0)
    repeat = 1                    # launches per measurement (default 1)
    rtol = 1e-4                   # output verification tolerances (defaults 1e-4, 1e-6)
    atol = 1e-6
    max_instructions = 2000000    # the CPU emulator's budget per warp (long loops are sampled
                                  #   past an eighth of it; gpuadvise.ptx.sampling)

    [args]                        # scalar parameters, and names used in expressions
    n = 4194304                   # integers, floats, true/false, or an expression: "w*h"
    p = { bytes = "0000c03f03000000" }  # a struct or vector by value (:class:`RawBytes`)

    [buffers]                     # pointer parameters
    in = "float32[n]"             # TYPE[COUNT], TYPE[COUNT]:FILL or a .npy file (next to
                                  #   this file): "data.npy"
    out = { type = "float", count = "(n+255)/256", fill = "zeros", output = true }

    [constants]                   # __constant__ variables, named as the source spells them
    d_Kernel = "float[17]:random(0,1)"  # TYPE[COUNT] or TYPE[COUNT]:FILL
    "mask<float>" = "float[10]:ones"     # a templated variable

Constants
---------
``[constants]`` (``--constant NAME=TYPE[COUNT]:FILL`` on the command line) fills the kernel's
``__constant__`` memory before a run, as ``cudaMemcpyToSymbol`` does in the user's host code: on
the CPU emulator (its constant bank) and on the GPU (the module's global, ``cuModuleGetGlobal``).
``TYPE``, ``COUNT`` and ``FILL`` are a buffer's (the same bytes for the same seed and name);
the name, the type and the size are checked against the PTX's ``.const`` declaration once the
kernel is compiled (:mod:`gpuadvise.ptx.constants`). A constant the spec does not fill holds its
PTX initializer (zeros when it has none).

Unknown top-level tables (``[[variants]]``, ``[expect]`` ...) are kept for other parts of
gpuadvise and ignored here; an unknown key anywhere else is an error naming it. Values from the
command line override the file: scalars replace, ``args``/``buffers`` replace by name,
``nvcc_flags`` are appended after the file's.

Spec discovery (no ``--spec``): beside ``path/x.cu`` gpuadvise looks for ``path/<kernel>.toml``
(the kernel's base name: ``reduce.toml`` for ``ns::reduce<256>``), then ``path/x.toml`` (used
unless it names a different kernel), then ``path/case.toml`` (used only if its ``source`` is
``x.cu``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuadvise.errors import ConfigError, DataFileError, UsageError
from gpuadvise.fileio import is_file, lookup_problem
from gpuadvise.inputfiles import file_kind, load_toml_file
from gpuadvise.source.signature import Param, list_kernels
from gpuadvise.spec import expr
from gpuadvise.spec.cuda_types import (
    CudaType,
    ElemType,
    StructType,
    all_types,
    lookup,
    lookup_elem,
)
from gpuadvise.spec.fills import Fill, is_file_fill, npy_layout, parse_fill
from gpuadvise.spec.units import Dim3, parse_dims, parse_size

__all__ = [
    "DEFAULT_ATOL",
    "DEFAULT_RTOL",
    "ArgSpec",
    "BufferSpec",
    "KernelSpec",
    "LaunchConfig",
    "ResolvedArg",
    "ResolvedBuffer",
    "RawBytes",
    "ResolvedLaunch",
    "StructResolver",
    "arg_env",
    "build_kernel_spec",
    "find_spec_for",
    "load_spec",
    "parse_arg",
    "parse_buffer",
    "parse_constant",
    "parse_launch_dims",
    "parse_smem",
    "resolve",
    "resolve_constants",
]

# Variants reorder float arithmetic (reductions, fused multiply-adds), so exact equality is
# too strict; 1e-4 relative is a few float32 ulps times a long accumulation chain.
DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-6

StructResolver = Callable[[str], tuple[int, int]]
"""``resolve_struct(name) -> (size_bytes, align_bytes)``, supplied by the compile step."""


@dataclass(frozen=True)
class RawBytes:
    """A value given as its bytes, for a parameter passed by value that gpuadvise has no scalar
    for (a struct, a vector): ``p = { bytes = "0000c03f03000000" }`` under ``[args]`` (what
    ``gpuadvise record`` writes), or ``--arg p=bytes:0000c03f03000000``; ``hex``: two digits a
    byte, in memory order."""

    hex: str

    @property
    def data(self) -> bytes:
        return bytes.fromhex(self.hex)

    @classmethod
    def parse(cls, text: str, name: str) -> RawBytes:
        h = text.strip().lower().removeprefix("0x")
        try:
            bytes.fromhex(h)
        except ValueError:
            h = ""
        if not h or len(h) % 2:
            raise UsageError(
                f"argument {name!r}: {text[:40]!r} is not bytes in hex",
                "give two hex digits a byte, in memory order: 0000c03f03000000",
            )
        return cls(h)


ArgValue = int | float | bool | str | RawBytes

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_RE = re.compile(r"[+-]?(?:0[xX][0-9a-fA-F]+|\d+)")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fF]?")
_BUFFER_RE = re.compile(
    r"^\s*(?P<name>[^=\s]+)\s*=\s*(?P<type>[^\[\]]*?)\s*\[(?P<count>.*)\]\s*"
    r"(?::\s*(?P<fill>.*?))?\s*$"
)

# CUDA's launch limits, the same on every architecture since Kepler.
MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)


# ---------------------------------------------------------------------------------------------
# Records.


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block dimensions and the dynamic shared memory of one launch."""

    grid: Dim3
    block: Dim3
    dynamic_smem_bytes: int = 0

    def __post_init__(self) -> None:
        if self.block.count > MAX_BLOCK_THREADS:
            raise UsageError(
                f"block {self.block} has {self.block.count} threads, over CUDA's limit of "
                f"{MAX_BLOCK_THREADS}",
                "use at most 1024 threads per block, e.g. 256 or 16x16",
            )
        for axis, value, limit in zip("xyz", self.block.as_tuple(), MAX_BLOCK_DIMS, strict=True):
            if value > limit:
                raise UsageError(
                    f"block {self.block} has {axis} = {value}, over CUDA's limit of {limit}",
                    "reshape the block",
                )
        for axis, value, limit in zip("xyz", self.grid.as_tuple(), MAX_GRID_DIMS, strict=True):
            if value > limit:
                raise UsageError(
                    f"grid {self.grid} has {axis} = {value}, over CUDA's limit of {limit}",
                    "put the large extent in x, or loop inside the kernel (a grid-stride loop)",
                )
        if self.dynamic_smem_bytes < 0:
            raise UsageError(
                f"dynamic shared memory {self.dynamic_smem_bytes} is negative", "give 0 or more"
            )

    @property
    def threads_per_block(self) -> int:
        return self.block.count

    @property
    def total_threads(self) -> int:
        return self.grid.count * self.block.count

    def to_dict(self) -> dict[str, Any]:
        return {
            "grid": list(self.grid.as_tuple()),
            "block": list(self.block.as_tuple()),
            "dynamic_smem_bytes": self.dynamic_smem_bytes,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LaunchConfig:
        return cls(Dim3(*d["grid"]), Dim3(*d["block"]), int(d.get("dynamic_smem_bytes", 0)))


@dataclass(frozen=True)
class ArgSpec:
    """A scalar: ``value`` is an int, float or bool, or (a str) an integer expression over the
    other integer args, evaluated by :func:`arg_env`."""

    name: str
    value: ArgValue

    @property
    def is_expression(self) -> bool:
        return isinstance(self.value, str)

    @property
    def is_bytes(self) -> bool:
        return isinstance(self.value, RawBytes)

    def to_dict(self) -> dict[str, Any]:
        value = {"bytes": self.value.hex} if isinstance(self.value, RawBytes) else self.value
        return {"name": self.name, "value": value}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ArgSpec:
        value = d["value"]
        if isinstance(value, Mapping):
            value = RawBytes(str(value["bytes"]))
        return cls(str(d["name"]), value)


@dataclass(frozen=True)
class BufferSpec:
    """A buffer for pointer parameter ``name``: ``count_expr`` elements of ``elem_type``.

    ``is_output`` None means "decide from the parameter" (non-const pointee: output).
    ``assumed`` marks a buffer gpuadvise made up (the default buffer), not one the user gave.
    ``fill`` is the canonical text of a :class:`~gpuadvise.spec.fills.Fill`; ``fill_given``
    says the user gave it (with no fill, a buffer gets the default data and an output is
    poisoned; see :mod:`gpuadvise.spec.fills`).
    """

    name: str
    elem_type: ElemType
    count_expr: str
    fill: str = "random"
    assumed: bool = False
    is_output: bool | None = None
    fill_given: bool = False

    def __str__(self) -> str:
        text = f"{self.name}={self.elem_type.name}[{self.count_expr}]"
        return f"{text}:{self.fill}" if self.fill_given else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "elem_type": _elem_to_dict(self.elem_type),
            "count_expr": self.count_expr,
            "fill": self.fill,
            "assumed": self.assumed,
            "is_output": self.is_output,
            "fill_given": self.fill_given,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BufferSpec:
        fill = str(d.get("fill", "random"))
        return cls(
            str(d["name"]),
            _elem_from_dict(d["elem_type"]),
            str(d["count_expr"]),
            fill,
            bool(d.get("assumed", False)),
            d.get("is_output"),
            bool(d.get("fill_given", fill != "random")),
        )


@dataclass(frozen=True)
class KernelSpec:
    """Everything the user said about one kernel run (before binding to its parameters).

    ``launch_names`` are the arg names the launch expressions read (so that an arg used only in
    ``grid = "ceil_div(n, 256)"`` is not reported as unknown); ``spec_path`` is the spec file
    that was read, if any.
    """

    source: Path
    kernel: str
    launch: LaunchConfig
    args: tuple[ArgSpec, ...] = ()
    buffers: tuple[BufferSpec, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    seed: int = 0
    repeat: int = 1
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    spec_path: Path | None = None
    launch_names: frozenset[str] = field(default_factory=frozenset)
    # __constant__ variables to fill: name (as the source spells it), type, count, fill
    constants: tuple[BufferSpec, ...] = ()
    # the CPU emulator's instruction budget per warp (None: its default)
    max_instructions: int | None = None

    def arg(self, name: str) -> ArgSpec | None:
        return next((a for a in self.args if a.name == name), None)

    def buffer(self, name: str) -> BufferSpec | None:
        return next((b for b in self.buffers if b.name == name), None)

    def env(self) -> dict[str, int]:
        """The integer args by name (expressions evaluated)."""
        return arg_env(self.args)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "kernel": self.kernel,
            "launch": self.launch.to_dict(),
            "args": [a.to_dict() for a in self.args],
            "buffers": [b.to_dict() for b in self.buffers],
            "nvcc_flags": list(self.nvcc_flags),
            "seed": self.seed,
            "repeat": self.repeat,
            "rtol": self.rtol,
            "atol": self.atol,
            "spec_path": None if self.spec_path is None else str(self.spec_path),
            "launch_names": sorted(self.launch_names),
            "constants": [c.to_dict() for c in self.constants],
            "max_instructions": self.max_instructions,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelSpec:
        return cls(
            source=Path(d["source"]),
            kernel=str(d["kernel"]),
            launch=LaunchConfig.from_dict(d["launch"]),
            args=tuple(ArgSpec.from_dict(a) for a in d.get("args", ())),
            buffers=tuple(BufferSpec.from_dict(b) for b in d.get("buffers", ())),
            nvcc_flags=tuple(d.get("nvcc_flags", ())),
            seed=int(d.get("seed", 0)),
            repeat=int(d.get("repeat", 1)),
            rtol=float(d.get("rtol", DEFAULT_RTOL)),
            atol=float(d.get("atol", DEFAULT_ATOL)),
            spec_path=None if d.get("spec_path") is None else Path(d["spec_path"]),
            launch_names=frozenset(d.get("launch_names", ())),
            constants=tuple(BufferSpec.from_dict(c) for c in d.get("constants", ())),
            max_instructions=d.get("max_instructions"),
        )


@dataclass(frozen=True)
class ResolvedArg:
    """A scalar parameter bound to its value; ``ctype`` is the parameter's CUDA type."""

    name: str
    index: int
    ctype: CudaType
    value: int | float | bool | bytes  # bytes: a value given by its bytes (ctype.kind "bytes")

    def to_dict(self) -> dict[str, Any]:
        if isinstance(self.value, bytes):
            value: Any = {"bytes": self.value.hex(), "align": self.ctype.align_bytes}
        else:
            value = self.value
        return {"name": self.name, "index": self.index, "ctype": self.ctype.name, "value": value}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResolvedArg:
        value = d["value"]
        if isinstance(value, Mapping):
            from gpuadvise.spec.cuda_types import raw_type

            data = bytes.fromhex(str(value["bytes"]))
            raw = raw_type(str(d["ctype"]), len(data), int(value.get("align", 1)))
            return cls(str(d["name"]), int(d["index"]), raw, data)
        ctype = lookup(d["ctype"])
        if ctype is None:
            raise ConfigError(f"unknown CUDA type {d['ctype']!r} in saved data", "re-run")
        return cls(str(d["name"]), int(d["index"]), ctype, value)


@dataclass(frozen=True)
class ResolvedBuffer:
    """A pointer parameter bound to a buffer of ``count`` elements (``size_bytes`` in all).

    ``elem`` is a :class:`CudaType` or a resolved :class:`StructType`. ``is_output`` buffers are
    compared after a run; every buffer, output or not, is filled before it: by ``fill`` (the
    canonical text of a :class:`~gpuadvise.spec.fills.Fill`, with an explicit ``random`` on an
    integer type turned into ``random(LOW,HIGH)`` of the type's full range), or, for an output
    whose fill the user did not give (``fill_given`` False), by the poison (:attr:`poisoned`).
    """

    name: str
    index: int
    elem: ElemType
    count: int
    size_bytes: int
    align_bytes: int
    fill: str
    assumed: bool
    is_output: bool
    count_expr: str
    fill_given: bool = False

    @property
    def elem_size_bytes(self) -> int:
        return self.size_bytes // self.count

    @property
    def poisoned(self) -> bool:
        """Whether a run starts this buffer with the poison (every byte 0xFF) rather than its
        fill: an output whose start value the user did not give. An explicit fill (``random``,
        ``zeros``, a file ...) makes it an in/out buffer that starts with that data."""
        return self.is_output and not self.fill_given

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "elem": _elem_to_dict(self.elem),
            "count": self.count,
            "size_bytes": self.size_bytes,
            "align_bytes": self.align_bytes,
            "fill": self.fill,
            "assumed": self.assumed,
            "is_output": self.is_output,
            "count_expr": self.count_expr,
            "fill_given": self.fill_given,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResolvedBuffer:
        return cls(
            str(d["name"]),
            int(d["index"]),
            _elem_from_dict(d["elem"]),
            int(d["count"]),
            int(d["size_bytes"]),
            int(d["align_bytes"]),
            str(d["fill"]),
            bool(d["assumed"]),
            bool(d["is_output"]),
            str(d["count_expr"]),
            bool(d.get("fill_given", str(d["fill"]) != "random")),
        )


@dataclass(frozen=True)
class ResolvedLaunch:
    """A kernel launch ready to run: ``params`` in the kernel's parameter order.

    ``env`` holds the integer args (name, value) the expressions were evaluated with; ``notes``
    are remarks worth showing (assumed buffers, a buffer type differing from its pointee).
    ``constants``: the ``__constant__`` variables the spec fills, as buffers (``index`` -1,
    never outputs) named as the spec names them (:mod:`gpuadvise.ptx.constants` finds them in
    the PTX).
    """

    kernel: str
    launch: LaunchConfig
    params: tuple[ResolvedArg | ResolvedBuffer, ...]
    seed: int = 0
    env: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()
    constants: tuple[ResolvedBuffer, ...] = ()
    max_instructions: int | None = None  # the emulator's budget per warp (None: its default)

    @property
    def scalars(self) -> tuple[ResolvedArg, ...]:
        return tuple(p for p in self.params if isinstance(p, ResolvedArg))

    @property
    def buffers(self) -> tuple[ResolvedBuffer, ...]:
        return tuple(p for p in self.params if isinstance(p, ResolvedBuffer))

    @property
    def inputs(self) -> tuple[ResolvedBuffer, ...]:
        return tuple(b for b in self.buffers if not b.is_output)

    @property
    def outputs(self) -> tuple[ResolvedBuffer, ...]:
        return tuple(b for b in self.buffers if b.is_output)

    @property
    def total_buffer_bytes(self) -> int:
        return sum(b.size_bytes for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "launch": self.launch.to_dict(),
            "params": [
                {"scalar": p.to_dict()} if isinstance(p, ResolvedArg) else {"buffer": p.to_dict()}
                for p in self.params
            ],
            "seed": self.seed,
            "env": [list(kv) for kv in self.env],
            "notes": list(self.notes),
            "constants": [c.to_dict() for c in self.constants],
            "max_instructions": self.max_instructions,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ResolvedLaunch:
        params: list[ResolvedArg | ResolvedBuffer] = []
        for p in d["params"]:
            if "scalar" in p:
                params.append(ResolvedArg.from_dict(p["scalar"]))
            else:
                params.append(ResolvedBuffer.from_dict(p["buffer"]))
        return cls(
            str(d["kernel"]),
            LaunchConfig.from_dict(d["launch"]),
            tuple(params),
            int(d.get("seed", 0)),
            tuple((str(k), int(v)) for k, v in d.get("env", ())),
            tuple(d.get("notes", ())),
            tuple(ResolvedBuffer.from_dict(c) for c in d.get("constants", ())),
            d.get("max_instructions"),
        )


def _elem_to_dict(elem: ElemType) -> dict[str, Any]:
    if isinstance(elem, StructType):
        return {
            "struct": elem.name,
            "size_bytes": elem.size_bytes,
            "align_bytes": elem.align_bytes,
        }
    return {"cuda": elem.name}


def _elem_from_dict(d: Mapping[str, Any]) -> ElemType:
    if "struct" in d:
        return StructType(str(d["struct"]), d.get("size_bytes"), d.get("align_bytes"))
    found = lookup(str(d["cuda"]))
    if found is None:
        raise ConfigError(f"unknown CUDA type {d['cuda']!r} in saved data", "re-run the analysis")
    return found


# ---------------------------------------------------------------------------------------------
# Parsing user text.


def _check_name(name: str, what: str, example: str) -> str:
    if not _IDENT_RE.fullmatch(name):
        raise UsageError(
            f"{what} name {name!r} is not a C identifier",
            f"use the parameter's name as in the kernel, e.g. {example}",
        )
    return name


def _parse_value(text: str, name: str) -> ArgValue:
    """``4194304``, ``0x100``, ``-3`` -> int; ``0.5``, ``1e-3`` -> float; ``true`` -> bool;
    anything else must be an integer expression over other args (kept as text)."""
    s = text.strip()
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    if _INT_RE.fullmatch(s):
        return expr.evaluate(s.lstrip("+"), {}) if s[0] != "-" else -expr.evaluate(s[1:], {})
    if _FLOAT_RE.fullmatch(s):
        number = float(s.rstrip("fF"))
        if not math.isfinite(number):
            raise UsageError(f"argument {name!r} = {s} is not finite", "give a smaller number")
        return number
    if not s:
        raise UsageError(
            f"argument {name!r} has no value", f"write --arg {name}=VALUE, e.g. {name}=1024"
        )
    try:
        found = expr.names(s)
    except UsageError as err:
        raise UsageError(
            f"value {s!r} of argument {name!r} is neither a number nor an expression "
            f"({err.message})",
            "give an integer (4194304, 0x400000), a float (0.5, 1e-3), true/false, or an "
            "integer expression over other args (n/2)",
        ) from None
    if not found:
        return expr.evaluate(s, {})
    return s


def parse_arg(text: str) -> ArgSpec:
    """An :class:`ArgSpec` from ``name=value`` (``n=4194304``, ``alpha=0.5``, ``m=n/2``)."""
    name, sep, value = str(text).partition("=")
    if not sep:
        raise UsageError(
            f"--arg {text!r} has no '='", "write --arg NAME=VALUE, for example --arg n=4194304"
        )
    name = _check_name(name.strip(), "argument", "--arg n=4194304")
    if value.strip().lower().startswith("bytes:"):
        return ArgSpec(name, RawBytes.parse(value.strip()[6:], name))
    return ArgSpec(name, _parse_value(value, name))


def _arg_from_toml(name: str, value: Any, where: str) -> ArgSpec:
    _check_name(name, "argument", "n = 4194304 under [args]")
    if isinstance(value, bool | int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: [args] {name} is {value}", "give a finite number")
        return ArgSpec(name, value)
    if isinstance(value, str):
        return ArgSpec(name, _parse_value(value, name))
    if isinstance(value, dict) and set(value) == {"bytes"} and isinstance(value["bytes"], str):
        try:
            return ArgSpec(name, RawBytes.parse(value["bytes"], name))
        except UsageError as err:
            raise ConfigError(f"{where}: [args] {name}: {err.message}", err.hint) from None
    raise ConfigError(
        f"{where}: [args] {name} is a {type(value).__name__}",
        "give an integer, a float, true/false, an expression in quotes, or a value by its "
        'bytes: { bytes = "0000c03f03000000" }',
    )


def _make_buffer(
    name: str,
    type_text: str,
    count: str,
    fill: str | None,
    is_output: bool | None,
    text: str,
    base_dir: Path | None = None,
) -> BufferSpec:
    name = _check_name(name.strip(), "buffer", "--buffer in=float32[n]")
    if not type_text.strip():
        raise UsageError(f"buffer {text!r} has no element type", f"write e.g. {name}=float32[n]")
    elem = lookup_elem(type_text)
    if not count.strip():
        raise UsageError(f"buffer {text!r} has no element count", f"write e.g. {name}=float[n]")
    expr.parse(count.strip())
    if fill is None or not fill.strip():
        return BufferSpec(name, elem, count.strip(), "random", False, is_output)
    parsed = parse_fill(fill, base_dir, f"buffer {name}")
    if parsed.kind == "file" and isinstance(elem, CudaType):
        _check_file_type(name, parsed, elem)
    return BufferSpec(name, elem, count.strip(), str(parsed), False, is_output, True)


# numpy scalar formats -> the CUDA type a .npy file of them holds (``--buffer x=data.npy``)
_NPY_TYPES = (
    "float", "double", "__half", "int", "unsigned int", "long long", "unsigned long long",
    "short", "unsigned short", "signed char", "unsigned char", "bool",
)  # fmt: skip


def _npy_elem(name: str, path: Path) -> tuple[CudaType, int]:
    """The element type and count of the .npy file that ``--buffer NAME=PATH.npy`` names."""
    dtype, shape = npy_layout(path, f"buffer {name}")
    count = math.prod(shape)
    for type_name in _NPY_TYPES:
        t = lookup(type_name)
        if t is not None and t.dtype == dtype:
            return t, count
    for t in all_types().values():
        if t.lanes > 1 and t.dtype == dtype:
            return t, count
    raise UsageError(
        f"buffer {name}: {path.name} holds {dtype}, which is no CUDA element type gpuadvise knows",
        f"save it as float32, int32, uint8 ... or give the type: --buffer {name}=TYPE[COUNT]:"
        f"{path.name} (for raw bytes, a .bin file)",
    )


def _file_elements(
    name: str, path: Path, elem: CudaType | None, elem_size_bytes: int, what: str = "buffer"
) -> tuple[int, str]:
    """How many elements of ``elem`` (``elem_size_bytes`` each) the data file holds, and what it
    holds in words ("4096 x float32"). A .npy file's dtype must be ``elem``'s (or its lane type,
    with the lanes as the last axis or flat); a .bin file is raw bytes."""
    if path.suffix.lower() == ".bin":
        size = path.stat().st_size
        if size % elem_size_bytes:
            raise DataFileError(
                f"{what} {name}: {path.name} has {size} bytes, not a whole number of "
                f"{elem_size_bytes}-byte elements",
                "check the element type, or the file",
            )
        return size // elem_size_bytes, f"{size} bytes"
    dtype, shape = npy_layout(path, f"{what} {name}")
    items = math.prod(shape)
    if elem is None:  # a struct: raw bytes of the compiler's size
        size = items * dtype.itemsize
        if size % elem_size_bytes:
            raise DataFileError(
                f"{what} {name}: {path.name} holds {size} bytes, not a whole number of "
                f"{elem_size_bytes}-byte elements",
                "check the element type, or the file",
            )
        return size // elem_size_bytes, f"{size} bytes"
    held = f"{items} x {dtype}" if not shape or len(shape) == 1 else f"{dtype}{list(shape)}"
    if dtype == elem.dtype:
        return items, held
    import numpy as np

    lane = np.dtype(elem.numpy_format)
    if elem.lanes > 1 and dtype == lane and items % elem.lanes == 0:
        if len(shape) <= 1 or shape[-1] == elem.lanes:
            return items // elem.lanes, held
    want = str(lane) if elem.lanes == 1 else f"{lane} with {elem.lanes} lanes as the last axis"
    raise DataFileError(
        f"{what} {name}: {path.name} holds {held}, but the buffer's type {elem.name} is {want}",
        f"convert the data (numpy.save(path, array.astype(numpy.{lane.name}))) or give the "
        "type it holds",
    )


def _check_file_type(name: str, fill: Fill, elem: CudaType) -> None:
    assert fill.path is not None
    if fill.path.suffix.lower() == ".npy":
        _file_elements(name, fill.path, elem, elem.size_bytes)


def _file_buffer(name: str, path_text: str, base_dir: Path | None) -> BufferSpec:
    """``NAME=PATH.npy``: a buffer whose type and count come from the .npy file."""
    name = _check_name(name.strip(), "buffer", "--buffer x=data.npy")
    fill = parse_fill(path_text, base_dir, f"buffer {name}")
    assert fill.path is not None
    if fill.path.suffix.lower() != ".npy":
        raise UsageError(
            f"buffer {name}: a raw .bin file does not say what it holds",
            f"give its type and count: --buffer {name}=uint32[n]:{path_text.strip()}",
        )
    elem, count = _npy_elem(name, fill.path)
    if count <= 0:
        raise UsageError(f"buffer {name}: {fill.path.name} is empty", "save at least one element")
    return BufferSpec(name, elem, str(count), str(fill), False, None, True)


_FILE_BUFFER_RE = re.compile(r"^\s*(?P<name>[^=\s\[\]]+)\s*=\s*(?P<path>[^\[\]]+)$")


def parse_buffer(text: str, base_dir: Path | None = None) -> BufferSpec:
    """A :class:`BufferSpec` from ``name=type[count]``, ``name=type[count]:fill`` or
    ``name=data.npy``; ``base_dir`` resolves relative data files (default: the working
    directory)."""
    m = _BUFFER_RE.match(str(text))
    if not m:
        f = _FILE_BUFFER_RE.match(str(text))
        if f and is_file_fill(f["path"]):
            return _file_buffer(f["name"], f["path"], base_dir)
        raise UsageError(
            f"--buffer {text!r} is not NAME=TYPE[COUNT], NAME=TYPE[COUNT]:FILL or NAME=FILE.npy",
            "for example --buffer in=float32[n], --buffer cells=Cell[w*h]:zeros or "
            "--buffer in=data.npy",
        )
    return _make_buffer(m["name"], m["type"], m["count"], m["fill"], None, str(text), base_dir)


_CONSTANT_RE = re.compile(
    r"^\s*(?P<name>[^=]+?)\s*=\s*(?P<type>[^\[\]=]*?)\s*\[(?P<count>[^\[\]]*)\]\s*"
    r"(?::\s*(?P<fill>.*?))?\s*$"
)
# a __constant__ variable as the source spells it: ns::name, name<float>, name<float, 4>
_CONSTANT_NAME_RE = re.compile(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*(?:\s*<.*>)?", re.S)


def parse_constant(
    text: str, base_dir: Path | None = None, where: str = "--constant"
) -> BufferSpec:
    """A ``__constant__`` variable to fill, from ``NAME=TYPE[COUNT]`` or
    ``NAME=TYPE[COUNT]:FILL`` (``d_Kernel=float[17]:random(0,1)``, ``mask<float>=float[10]:ones``):
    a :class:`BufferSpec` (never an output). ``TYPE``, ``COUNT`` and ``FILL`` are a buffer's;
    ``NAME`` is the variable as the source spells it."""
    m = _CONSTANT_RE.match(str(text))
    if not m:
        raise UsageError(
            f"{where} {text!r} is not NAME=TYPE[COUNT] or NAME=TYPE[COUNT]:FILL",
            "for example --constant d_Kernel=float[17]:random(0,1)",
        )
    name = m["name"].strip()
    if not _CONSTANT_NAME_RE.fullmatch(name):
        raise UsageError(
            f"{where}: constant name {name!r} is not a C++ name",
            "name the __constant__ variable as the source does: d_Kernel, ns::table, mask<float>",
        )
    type_text, count, fill = m["type"].strip(), m["count"].strip(), m["fill"]
    if not type_text:
        raise UsageError(f"{where}: constant {name} has no element type", f"write {name}=float[N]")
    elem = lookup_elem(type_text)
    if not count:
        raise UsageError(f"{where}: constant {name} has no element count", f"write {name}=float[N]")
    expr.parse(count)
    if fill is None or not fill.strip():
        return BufferSpec(name, elem, count, "random", False, False)
    parsed = parse_fill(fill, base_dir, f"constant {name}")
    if parsed.kind == "file" and isinstance(elem, CudaType):
        _check_file_type(name, parsed, elem)
    return BufferSpec(name, elem, count, str(parsed), False, False, True)


def _constant_from_toml(name: str, value: Any, where: str, base_dir: Path | None) -> BufferSpec:
    if not isinstance(value, str):
        raise ConfigError(
            f"{where}: [constants] {name} must be text, TYPE[COUNT]:FILL",
            f'write e.g. {json_key(name)} = "float[17]:random(0,1)"',
        )
    try:
        return parse_constant(f"{name}={value}", base_dir, f"{where}: [constants]")
    except ConfigError:
        raise
    except UsageError as err:
        raise ConfigError(err.message, err.hint) from None


def json_key(name: str) -> str:
    """``name`` as a TOML key: bare when it can be, quoted otherwise (``"mask<float>"``)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + name.replace('"', '\\"') + '"'


_BUFFER_KEYS = {"type", "count", "fill", "output"}


def _buffer_from_toml(
    name: str, value: Any, where: str, base_dir: Path | None = None
) -> BufferSpec:
    if isinstance(value, str):
        m = _BUFFER_RE.match(f"{name}={value}")
        if not m or m["name"] != name:
            if is_file_fill(value) and "[" not in value:
                return _file_buffer(name, value, base_dir)
            raise ConfigError(
                f"{where}: [buffers] {name} = {value!r} is not TYPE[COUNT], TYPE[COUNT]:FILL "
                "or FILE.npy",
                'write e.g. in = "float32[n]" or out = { type = "float", count = "n" }',
            )
        return _make_buffer(
            name, m["type"], m["count"], m["fill"], None, f"{name}={value}", base_dir
        )
    if isinstance(value, dict):
        unknown = sorted(set(value) - _BUFFER_KEYS)
        if unknown:
            raise ConfigError(
                f"{where}: [buffers] {name} has an unknown key {unknown[0]!r}",
                f"the keys of a buffer are {', '.join(sorted(_BUFFER_KEYS))}",
            )
        for key in ("type", "count"):
            if key not in value:
                raise ConfigError(
                    f"{where}: [buffers] {name} has no {key!r}",
                    f'write e.g. {name} = {{ type = "float", count = "n" }}',
                )
        count = value["count"]
        if isinstance(count, bool) or not isinstance(count, int | str):
            raise ConfigError(
                f"{where}: [buffers] {name}.count must be an integer or an expression",
                'write e.g. count = "n" or count = 1024',
            )
        output = value.get("output")
        if output is not None and not isinstance(output, bool):
            raise ConfigError(
                f"{where}: [buffers] {name}.output must be true or false", "write output = true"
            )
        fill = value.get("fill")
        if fill is not None and not isinstance(fill, str):
            raise ConfigError(
                f"{where}: [buffers] {name}.fill must be text",
                "use random, random(LOW,HIGH), zeros, ones, iota or a data file (PATH.npy)",
            )
        type_text = value["type"]
        if not isinstance(type_text, str):
            raise ConfigError(
                f"{where}: [buffers] {name}.type must be text", 'write e.g. type = "float"'
            )
        return _make_buffer(
            name, type_text, str(count), fill, output, f"{name} in {where}", base_dir
        )
    raise ConfigError(
        f"{where}: [buffers] {name} must be text or a table",
        'write e.g. in = "float32[n]" or out = { type = "float", count = "n" }',
    )


def _top_level_comma_split(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return parts


# "ceil_div(n,256)x2", "n/16 x 4": an x written as a separator between expressions
_X_BETWEEN_EXPRS = re.compile(r"(?<=[)\w])\s*[xX]\s*(?=[(\d])|(?<=\))\s*[xX]\s*(?=\w)|\s+[xX]\s+")


def parse_launch_dims(
    text: str | int | Sequence[int | str], env: Mapping[str, int], what: str = "grid"
) -> tuple[Dim3, frozenset[str]]:
    """A Dim3 from ``240x135``/``240,135``/``256``/``[240, 135]`` or from 1-3 comma-separated
    integer expressions over ``env`` (``"ceil_div(n, 256)"``, ``["ceil_div(w,16)", "h/16"]``);
    also returns the names the expressions read."""
    if not isinstance(text, str | int):
        text = ", ".join(str(t) for t in text)
    try:
        return parse_dims(text, what), frozenset()
    except UsageError as plain_error:
        parts = _top_level_comma_split(str(text))
        looks_like_dims = re.fullmatch(r"[\d\s,xX*()\[\]+-]*", str(text))
        if looks_like_dims or not 1 <= len(parts) <= 3:
            raise plain_error from None
        values: list[int] = []
        used: set[str] = set()
        for part in parts:
            try:
                used |= expr.names(part)
            except UsageError:
                if _X_BETWEEN_EXPRS.search(part):
                    comma = _X_BETWEEN_EXPRS.sub(", ", part.strip())
                    raise UsageError(
                        f"{what} {_short(text)!r} is not 1 to 3 dimensions: an x between "
                        "expressions is read as part of them",
                        f"use a comma between dimensions when they are expressions: {comma!r}",
                    ) from None
                raise
            values.append(expr.evaluate(part, env))
        if any(v <= 0 for v in values):
            raise UsageError(
                f"{what} {text!r} evaluates to {'x'.join(map(str, values))}, which has a zero or "
                "negative extent",
                "check the args it uses; every extent must be at least 1",
            ) from None
        return Dim3(*values), frozenset(used)


def parse_smem(text: str | int, env: Mapping[str, int]) -> tuple[int, frozenset[str]]:
    """Dynamic shared memory bytes from a size (``4k``, ``48KB``, 4096) or an expression."""
    try:
        return parse_size(text, "dynamic shared memory"), frozenset()
    except UsageError as size_error:
        looks_like_size = re.fullmatch(r"\s*[\d.]+\s*[A-Za-z]*\s*", str(text))
        if not isinstance(text, str) or looks_like_size:
            raise size_error from None
        value = expr.evaluate(text, env)
        if value < 0:
            raise UsageError(
                f"dynamic shared memory {text!r} evaluates to {value} bytes", "give 0 or more"
            ) from None
        return value, frozenset(expr.names(text))


# ---------------------------------------------------------------------------------------------
# Spec files.

_TOP_KEYS: dict[str, type | tuple[type, ...]] = {
    "source": str,
    "kernel": str,
    "description": str,
    "grid": (str, int, list),
    "block": (str, int, list),
    "dynamic_smem": (str, int),
    "nvcc_flags": list,
    "seed": int,
    "repeat": int,
    "rtol": (int, float),
    "atol": (int, float),
    "max_instructions": int,
}
_TOP_TABLES = {"args", "buffers", "constants"}


def load_spec(path: str | Path) -> dict[str, Any]:
    """Read and check a spec file; returns the keys it sets, normalised.

    The dict holds ``path`` (the file), any of ``source`` (a Path, resolved against the file's
    folder), ``kernel``, ``description``, ``grid``/``block`` (text, evaluated later because they
    may use args), ``dynamic_smem``, ``nvcc_flags`` (tuple), ``seed``, ``repeat``, ``rtol``,
    ``atol``, and always ``args`` (name -> ArgSpec), ``buffers`` (name -> BufferSpec),
    ``constants`` (name -> BufferSpec) and ``extra`` (unknown top-level tables, untouched, e.g.
    ``variants``).
    """
    p = Path(path)
    where = str(p)
    raw = load_toml_file(p, "spec file", missing_hint="check the --spec path")
    out: dict[str, Any] = {"path": p, "args": {}, "buffers": {}, "constants": {}, "extra": {}}
    for key, value in raw.items():
        if key in _TOP_TABLES:
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{where}: {key} must be a table", f"write [{key}] and name = value lines"
                )
            if key == "args":
                out["args"] = {k: _arg_from_toml(k, v, where) for k, v in value.items()}
            elif key == "constants":
                out["constants"] = {
                    k: _constant_from_toml(k, v, where, p.parent) for k, v in value.items()
                }
            else:
                out["buffers"] = {
                    k: _buffer_from_toml(k, v, where, p.parent) for k, v in value.items()
                }
            continue
        if key not in _TOP_KEYS:
            if isinstance(value, dict) or (
                isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
            ):
                out["extra"][key] = value  # a table for someone else: [[variants]], [expect]
                continue
            raise ConfigError(
                f"{where}: unknown key {key!r}",
                f"the known keys are {', '.join(sorted(set(_TOP_KEYS) | _TOP_TABLES))}",
            )
        expected = _TOP_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, expected):
            raise ConfigError(
                f"{where}: {key} has the wrong type ({type(value).__name__})",
                _TYPE_HINTS[key],
            )
        out[key] = _normalise_top(key, value, p, where)
    return out


_TYPE_HINTS = {
    "source": 'write source = "kernel.cu"',
    "kernel": 'write kernel = "saxpy" or kernel = "reduce<256, true>"',
    "description": 'write description = "..."',
    "grid": 'write grid = "240x135", grid = 256 or grid = [240, 135]',
    "block": 'write block = "16x16", block = 256 or block = [16, 16]',
    "dynamic_smem": 'write dynamic_smem = "4k" or dynamic_smem = 4096',
    "nvcc_flags": 'write nvcc_flags = ["-DTILE=16", "-use_fast_math"]',
    "seed": "write seed = 1",
    "repeat": "write repeat = 10",
    "rtol": "write rtol = 1e-4",
    "atol": "write atol = 1e-6",
    "max_instructions": "write max_instructions = 20000000",
}


def _normalise_top(key: str, value: Any, path: Path, where: str) -> Any:
    if key == "source":
        if not value.strip():
            raise ConfigError(f"{where}: source is empty", _TYPE_HINTS[key])
        if "\0" in value:
            raise ConfigError(f"{where}: source {value!r} holds a NUL byte", _TYPE_HINTS[key])
        return (path.parent / value).resolve()
    if key in ("grid", "block"):
        if isinstance(value, list):
            if not value or not all(
                isinstance(v, int | str) and not isinstance(v, bool) for v in value
            ):
                raise ConfigError(f"{where}: {key} list must hold integers", _TYPE_HINTS[key])
            return ", ".join(str(v) for v in value)
        return value
    if key == "nvcc_flags":
        if not all(isinstance(f, str) for f in value):
            raise ConfigError(f"{where}: nvcc_flags must be a list of text", _TYPE_HINTS[key])
        return tuple(value)
    if key in ("rtol", "atol"):
        if value < 0:
            raise ConfigError(f"{where}: {key} is negative", "give 0 or more")
        return float(value)
    if key in ("seed", "repeat", "max_instructions") and value < (0 if key == "seed" else 1):
        raise ConfigError(f"{where}: {key} is {value}", _TYPE_HINTS[key])
    return value


def _kernel_base(kernel: str) -> str:
    return kernel.split("<", 1)[0].strip().rsplit("::", 1)[-1].strip()


def find_spec_for(source: str | Path, kernel: str | None = None) -> Path | None:
    """The spec file beside ``source`` that applies to ``kernel``, or None (see the docstring)."""
    src = Path(source)
    folder = src.parent
    wanted = _kernel_base(kernel) if kernel else None
    if wanted:
        candidate = folder / f"{wanted}.toml"
        if is_file(candidate):
            return candidate
    candidate = folder / f"{src.stem}.toml"
    if is_file(candidate):
        named = load_spec(candidate).get("kernel")
        if not wanted or named is None or _kernel_base(named) == wanted:
            return candidate
    candidate = folder / "case.toml"
    if is_file(candidate):
        # A folder's case applies to every kernel of its source (the command line's --kernel
        # wins over the file's): the launch and buffers of a case are shared by its variants.
        loaded = load_spec(candidate)
        named_source = loaded.get("source")
        if named_source is not None:
            if named_source == src.resolve():
                return candidate
        elif len(list(folder.glob("*.cu"))) == 1:
            return candidate
    return None


# ---------------------------------------------------------------------------------------------
# Merging.


def arg_env(args: Iterable[ArgSpec]) -> dict[str, int]:
    """The integer args by name, with expression args evaluated (in dependency order)."""
    env: dict[str, int] = {}
    pending: dict[str, str] = {}
    for a in args:
        if isinstance(a.value, str):
            pending[a.name] = a.value
        elif isinstance(a.value, int):
            env[a.name] = int(a.value)
    while pending:
        ready = {n: t for n, t in pending.items() if expr.names(t) <= env.keys()}
        if not ready:
            name, text = next(iter(sorted(pending.items())))
            missing = sorted(expr.names(text) - env.keys())
            if set(missing) <= pending.keys():
                raise UsageError(
                    f"args {', '.join(sorted(pending))} are defined in terms of each other",
                    "give at least one of them a number",
                )
            expr.evaluate(text, env)  # raises the unknown-name error with its hint
        for name, text in ready.items():
            env[name] = expr.evaluate(text, env)
            del pending[name]
    return env


def _source_kernel_default(source: Path) -> str:
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise UsageError(f"cannot read {source} ({err.strerror})", "check the path") from None
    kernels = list_kernels(text)
    if len(kernels) == 1:
        return kernels[0]
    if not kernels:
        raise UsageError(f"{source} defines no __global__ kernel", "check the file")
    raise UsageError(
        f"{source} defines several kernels ({', '.join(kernels)}) and none was chosen",
        "name one with --kernel or kernel = ... in the spec file",
    )


def _pick(cli: Any, file: Mapping[str, Any], key: str, default: Any = None) -> Any:
    if cli is not None:
        return cli
    return file.get(key, default)


def build_kernel_spec(
    source: str | Path | None = None,
    kernel: str | None = None,
    *,
    spec: str | Path | None = None,
    grid: str | int | None = None,
    block: str | int | None = None,
    dynamic_smem: str | int | None = None,
    args: Iterable[str | ArgSpec] = (),
    buffers: Iterable[str | BufferSpec] = (),
    nvcc_flags: Iterable[str] = (),
    seed: int | None = None,
    repeat: int | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    discover: bool = True,
    constants: Iterable[str | BufferSpec] = (),
    max_instructions: int | None = None,
) -> KernelSpec:
    """Merge a spec file (``spec``, or one found beside ``source`` when ``discover``) with the
    command-line values given here, which win. ``args``/``buffers`` take the CLI strings
    (``"n=4194304"``, ``"in=float32[n]"``) or ready records. With no kernel named anywhere, a
    source that defines exactly one kernel uses it."""
    file: dict[str, Any] = {}
    if source is not None:
        _check_source(source)  # before a spec is looked for beside it
    if spec is not None:
        file = load_spec(spec)
    elif discover and source is not None:
        found = find_spec_for(source, kernel)
        if found is not None:
            file = load_spec(found)
    src_value = source if source is not None else file.get("source")
    if src_value is None:
        raise UsageError(
            "no CUDA source file was given",
            'pass the .cu file, or write source = "x.cu" in the spec',
        )
    src = _check_source(src_value)
    kernel_name = _pick(kernel, file, "kernel") or _source_kernel_default(src)

    merged_args: dict[str, ArgSpec] = dict(file.get("args", {}))
    for a in args:
        rec = a if isinstance(a, ArgSpec) else parse_arg(a)
        merged_args[rec.name] = rec
    env = arg_env(merged_args.values())

    grid_text = _pick(grid, file, "grid")
    block_text = _pick(block, file, "block")
    for what, value, example in (("grid", grid_text, "240x135"), ("block", block_text, "256")):
        if value is None:
            raise UsageError(
                f"no {what} size was given",
                f'pass --{what} {example}, or write {what} = "{example}" in the spec file',
            )
    grid_dims, grid_names = parse_launch_dims(grid_text, env, "grid")
    block_dims, block_names = parse_launch_dims(block_text, env, "block")
    smem_bytes, smem_names = parse_smem(_pick(dynamic_smem, file, "dynamic_smem", 0), env)
    launch = LaunchConfig(grid_dims, block_dims, smem_bytes)

    merged_buffers: dict[str, BufferSpec] = dict(file.get("buffers", {}))
    for b in buffers:
        rec_b = b if isinstance(b, BufferSpec) else parse_buffer(b)
        merged_buffers[rec_b.name] = rec_b

    merged_constants: dict[str, BufferSpec] = dict(file.get("constants", {}))
    for c in constants:
        rec_c = c if isinstance(c, BufferSpec) else parse_constant(c)
        merged_constants[rec_c.name] = rec_c

    seed_v = _pick(seed, file, "seed", 0)
    repeat_v = _pick(repeat, file, "repeat", 1)
    rtol_v = float(_pick(rtol, file, "rtol", DEFAULT_RTOL))
    atol_v = float(_pick(atol, file, "atol", DEFAULT_ATOL))
    if isinstance(seed_v, bool) or not isinstance(seed_v, int) or seed_v < 0:
        raise UsageError(f"seed {seed_v!r} is not a non-negative integer", "give e.g. --seed 1")
    if isinstance(repeat_v, bool) or not isinstance(repeat_v, int) or repeat_v < 1:
        raise UsageError(f"repeat {repeat_v!r} is not a positive integer", "give e.g. --repeat 10")
    if rtol_v < 0 or atol_v < 0 or not (math.isfinite(rtol_v) and math.isfinite(atol_v)):
        raise UsageError("tolerances must be finite and not negative", "give e.g. --rtol 1e-4")
    budget = _pick(max_instructions, file, "max_instructions")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
    ):
        raise UsageError(
            f"--max-instructions {budget!r} is not a positive number of instructions",
            "give e.g. --max-instructions 20000000",
        )

    built = KernelSpec(
        source=src,
        kernel=str(kernel_name),
        launch=launch,
        args=tuple(merged_args.values()),
        buffers=tuple(merged_buffers.values()),
        nvcc_flags=(*file.get("nvcc_flags", ()), *nvcc_flags),
        seed=seed_v,
        repeat=repeat_v,
        rtol=rtol_v,
        atol=atol_v,
        spec_path=file.get("path"),
        launch_names=grid_names | block_names | smem_names,
        constants=tuple(merged_constants.values()),
        max_instructions=budget,
    )
    if _is_binary(src):  # its parameters are bound to the module's (analyze.binary_input)
        return built
    source_text = src.read_text(encoding="utf-8", errors="replace")
    params = _source_params(source_text, built.kernel)
    if params is not None:
        check_spec(built, params, source_text)
    return built


def _source_params(source_text: str, kernel: str) -> tuple[Param, ...] | None:
    """The kernel's parameters as the source declares them, or None when the source parser cannot
    find them (a kernel made by a macro, say): the compile step then reports what is wrong."""
    from gpuadvise.source.signature import parse_signature

    try:
        return parse_signature(source_text, kernel)
    except UsageError:
        return None


def _check_source(value: str | Path) -> Path:
    """The source file, which must exist and be a regular file (not a folder or a device)."""
    if not str(value).strip():
        raise UsageError("the source file name is empty", 'give the .cu file, e.g. source = "x.cu"')
    if "\0" in str(value):
        raise UsageError(f"source file name {str(value)!r} holds a NUL byte", "check the path")
    src = Path(value)
    problem = lookup_problem(src)
    if problem is not None:
        raise UsageError(f"source {src} {problem}", "check the path to the .cu file")
    if src.is_file():
        return src if _is_binary(src) else _check_source_text(src)
    if not src.exists():
        raise UsageError(f"source file {src} does not exist", "check the path to the .cu file")
    if src.is_dir():
        found = sorted(p.name for p in src.glob("*.cu"))[:5]
        hint = f"name a file in it, e.g. {src / found[0]}" if found else "name the .cu file"
        raise UsageError(f"source {src} is a folder, not a CUDA source file", hint)
    try:
        mode = src.stat().st_mode
    except OSError as err:
        raise UsageError(f"source {src} cannot be read ({err.strerror})", "check it") from None
    raise UsageError(
        f"source {src} is {file_kind(mode)}, not a CUDA source file", "give the .cu file"
    )


def _is_binary(src: Path) -> bool:
    """A ``.ptx``, ``.cubin`` or ``.fatbin``: a kernel without source (its module is read)."""
    from gpuadvise.toolchain.binary import BINARY_SUFFIXES

    return src.suffix.lower() in BINARY_SUFFIXES


def _check_source_text(src: Path) -> Path:
    """A source file gpuadvise may hand to nvcc: a CUDA or C++ name, and text. nvcc's
    diagnostics quote the lines of what it compiles, so that ``source = "/etc/passwd"`` in a
    spec echoed the file's first line; a file that is not a CUDA source is refused without a
    word of its content."""
    from gpuadvise.toolchain.includes import CUDA_SOURCE_SUFFIXES

    if not {src.suffix.lower(), src.resolve().suffix.lower()} <= CUDA_SOURCE_SUFFIXES:
        raise UsageError(
            f"source {src} is not a CUDA source file: its name does not end in .cu, .cuh, "
            ".h, .hpp, .cpp or another CUDA or C++ suffix",
            "give the kernel's .cu file (or the header that defines it)",
        )
    try:
        with open(src, "rb") as f:
            head = f.read(1 << 16)
    except OSError as err:
        raise UsageError(f"source {src} cannot be read ({err.strerror})", "check it") from None
    if b"\0" in head:
        raise UsageError(
            f"source {src} is not CUDA source text (it holds binary data)",
            "give the kernel's .cu file",
        )
    return src


# ---------------------------------------------------------------------------------------------
# Binding to the kernel's parameters.


_FLOAT_MAX = {"bfloat16": 3.3895313892515355e38, "fp8_e4m3": 448.0, "fp8_e5m2": 57344.0}


def _float_max(ctype: CudaType) -> float:
    if ctype.kind in _FLOAT_MAX:
        return _FLOAT_MAX[ctype.kind]
    return {2: 65504.0, 4: 3.4028234663852886e38}.get(ctype.lane_bytes, 1.7976931348623157e308)


def _a(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def _short(value: object, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}...({len(text)} chars)"


def _scalar_value(param: Param, ctype: CudaType, arg: ArgSpec, env: Mapping[str, int]) -> Any:
    value = env[arg.name] if isinstance(arg.value, str) else arg.value
    assert not isinstance(value, RawBytes)  # given by its bytes: _bytes_type checks those
    where = f"--arg {param.name}={_short(arg.value)}"
    if ctype.kind == "bool":
        if isinstance(value, bool) or value in (0, 1):
            return bool(value)
        raise UsageError(
            f"{where}: {param.name} is a bool parameter", f"give --arg {param.name}=true or false"
        )
    if not ctype.is_float:
        if isinstance(value, float):
            raise UsageError(
                f"{where}: {param.name} is {_a(param.value_type)} parameter, the value is not "
                "a whole number",
                f"give an integer, e.g. --arg {param.name}=1024",
            )
        lo, hi = ctype.int_range() or (0, 0)
        if not lo <= int(value) <= hi:
            raise UsageError(
                f"{where}: {_short(value)} does not fit in {param.name}'s type "
                f"{param.value_type} ({lo}..{hi})",
                "give a smaller value, or widen the parameter's type in the kernel",
            )
        return int(value)
    if isinstance(value, bool):
        raise UsageError(
            f"{where}: {param.name} is a {param.value_type} parameter", "give a number, e.g. 0.5"
        )
    top = _float_max(ctype)
    if abs(value) > top:
        raise UsageError(
            f"{where}: {_short(value)} does not fit in {param.name}'s type {param.value_type} "
            f"(at most {top:g} in magnitude)",
            "give a smaller value, or widen the parameter's type in the kernel",
        )
    return float(value)


def _bytes_type(
    param: Param,
    ctype: CudaType | None,
    value: RawBytes,
    resolve_struct: StructResolver | None,
    kernel: str,
) -> CudaType:
    """The type a value given by its bytes is passed as: its parameter's size (from the type
    catalogue, or the compiler for a struct) must be the number of bytes given."""
    from gpuadvise.spec.cuda_types import raw_type

    n = len(value.data)
    size = align = None
    if ctype is not None:
        size, align = ctype.size_bytes, ctype.align_bytes
    elif resolve_struct is not None:
        size, align = (int(v) for v in resolve_struct(param.value_type))
    if size is not None and size != n:
        raise UsageError(
            f"argument {param.name!r} of {kernel} gives {n} bytes, but its type "
            f"{param.value_type} has {size}",
            f"give {size} bytes (two hex digits a byte)",
        )
    return raw_type(param.value_type, n, align or min(n & -n, 8))


def _check_names(spec: KernelSpec, params: Sequence[Param]) -> None:
    """Every --arg and --buffer names a parameter of the right kind (or, for an arg, a name that a
    size expression reads)."""
    by_name = {p.name: p for p in params}
    kernel = spec.kernel
    used_in_exprs = set(spec.launch_names)
    for b in (*spec.buffers, *spec.constants):
        used_in_exprs |= expr.names(b.count_expr)
    for a in spec.args:
        if isinstance(a.value, str):
            used_in_exprs |= expr.names(a.value)
    scalars = [q.name for q in params if not q.is_pointer]
    pointers = [q.name for q in params if q.is_pointer]
    for a in spec.args:
        p = by_name.get(a.name)
        if p is not None and p.is_pointer:
            raise UsageError(
                f"argument {a.name!r} names a pointer parameter of {kernel}",
                f"give it a buffer instead (--buffer {a.name}={p.pointee or 'float'}[n], or under "
                "buffers in a spec)",
            )
        if p is None and a.name not in used_in_exprs:
            raise UsageError(
                f"argument {a.name!r} matches no parameter of {kernel} and no size expression "
                f"uses it (scalar parameters: {', '.join(scalars) or 'none'}; pointer "
                f"parameters: {', '.join(pointers) or 'none'})",
                "check the spelling against the kernel's parameter names",
            )
    for b in spec.buffers:
        p = by_name.get(b.name)
        if p is None:
            raise UsageError(
                f"buffer {b.name!r} matches no parameter of {kernel} "
                f"(pointer parameters: {', '.join(pointers) or 'none'})",
                "check the spelling against the kernel's parameter names",
            )
        if not p.is_pointer:
            raise UsageError(
                f"buffer {b.name!r} names the scalar parameter {b.name} ({p.type_text}) of "
                f"{kernel}",
                f"give it a value instead (--arg {b.name}=..., or under args in a spec)",
            )


def _buffer_count(
    name: str, given: BufferSpec, env: Mapping[str, int], what: str = "buffer"
) -> int:
    count = expr.evaluate(given.count_expr, env)
    if count <= 0:
        used = expr.names(given.count_expr)
        how = f" ({_short(given.count_expr)} with {_env_text(given.count_expr, env)})"
        raise UsageError(
            f"{what} {name} has {count} elements{how if used else ''}",
            "a buffer needs at least one element"
            + ("; check the args its count uses" if used else f", e.g. {name}=TYPE[1024]"),
        )
    return count


def _resolved_fill(
    name: str,
    given: BufferSpec,
    elem: ElemType,
    count: int,
    declared: CudaType | None,
    what: str = "buffer",
) -> str:
    """The fill a run uses for buffer ``name`` (see :class:`ResolvedBuffer`), checked against
    the buffer's type and count (and, for data files, the parameter's declared type)."""
    if not given.fill_given:
        return given.fill
    fill = parse_fill(given.fill, None, f"{what} {name}")
    numeric = isinstance(elem, CudaType)
    if fill.kind == "random":
        if not numeric:
            if fill.has_range:
                raise UsageError(
                    f"{what} {name}: fill {fill} needs a numeric type, and {elem.name} is a "
                    "struct gpuadvise only knows the size of",
                    "use random (random bytes), zeros, or a data file",
                )
            return str(fill)
        assert isinstance(elem, CudaType)
        lane_range = elem.int_range()
        if lane_range is None:  # a float type: [-1, 1) unless a range is given
            return str(fill)
        if not fill.has_range:
            if elem.kind == "bool":
                return str(fill)
            return str(Fill("random", lane_range[0], lane_range[1]))
        lo, hi = fill.low, fill.high
        if not (isinstance(lo, int) and isinstance(hi, int)):
            raise UsageError(
                f"{what} {name}: fill {fill} has a fractional bound, and {elem.name} is an "
                "integer type",
                "give whole numbers, e.g. random(0,255)",
            )
        if lo < lane_range[0] or hi > lane_range[1]:
            raise UsageError(
                f"{what} {name}: fill {fill} is outside the range of {elem.name} "
                f"({lane_range[0]}..{lane_range[1]})",
                "give a range the type can hold",
            )
        return str(fill)
    if fill.kind == "file":
        assert fill.path is not None
        size = elem.size_bytes
        assert size is not None
        as_type = elem if isinstance(elem, CudaType) else None
        held, holds = _file_elements(name, fill.path, as_type, size, what)
        if held != count:
            raise DataFileError(
                f"{what} {name}: {fill.path.name} holds {held} elements of {elem.name} ({holds}), "
                f"but the buffer has {count} ({_short(given.count_expr)})",
                f"give the file's count: {name}={elem.name}[{held}]:{fill.path.name}, or "
                f"--buffer {name}={fill.path.name} for a .npy file",
            )
        if declared is not None and fill.path.suffix.lower() == ".npy":
            dtype, _shape = npy_layout(fill.path, f"{what} {name}")
            import numpy as np

            want = np.dtype(declared.numpy_format)
            have = dtype.base if dtype.names is None else dtype[0]
            if have != want and declared.kind not in ("bfloat16", "fp8_e4m3", "fp8_e5m2"):
                raise UsageError(
                    f"{what} {name}: {fill.path.name} holds {have} values, but the kernel's "
                    f"parameter {name} points to {declared.name} ({want})",
                    f"convert it: numpy.save(path, array.astype(numpy.{want.name}))",
                )
        return str(fill)
    return str(fill)


def _struct_known(name: str, source_text: str) -> bool:
    """Whether a struct buffer type's name appears in the source (as a word): a name the source
    never mentions is a typo or an unknown type, not a struct the compiler could size."""
    base = name.split("<", 1)[0].rsplit("::", 1)[-1].strip()
    return bool(base) and re.search(rf"\b{re.escape(base)}\b", source_text) is not None


def _check_struct_names(spec: KernelSpec, source_text: str) -> None:
    for b in (*spec.buffers, *spec.constants):
        if isinstance(b.elem_type, StructType) and not _struct_known(b.elem_type.name, source_text):
            what = "constant" if b in spec.constants else "buffer"
            raise UsageError(
                f"{what} {b.name}: unknown element type {b.elem_type.name!r} (no CUDA type, and "
                f"{spec.source.name} does not mention it)",
                "use a CUDA type (float, int, uint32, half, float4, uchar4 ...), a numpy name "
                "(float32, int64 ...) or a struct defined in the source",
            )


def check_spec(spec: KernelSpec, params: Sequence[Param], source_text: str | None = None) -> None:
    """Check what the user gave against the kernel's parameters before anything runs: names
    (:func:`resolve` would reject them later, after the compile, or never under ``--no-trace``),
    scalar values against their parameter's type, buffer counts, fills and data files, and
    struct names against ``source_text``. Missing values are not checked here (the static
    analysis needs none); :func:`resolve` names them when a run needs them."""
    _check_names(spec, params)
    if source_text is not None:
        _check_struct_names(spec, source_text)
    by_name = {p.name: p for p in params}
    env = spec.env()
    for a in spec.args:
        p = by_name.get(a.name)
        if p is None or p.is_pointer:
            continue
        ctype = lookup(p.value_type)
        if isinstance(a.value, RawBytes):
            if ctype is not None:
                _bytes_type(p, ctype, a.value, None, spec.kernel)
        elif ctype is not None:
            _scalar_value(p, ctype, a, env)
    for b in spec.buffers:
        p = by_name[b.name]
        count = _buffer_count(b.name, b, env)
        if isinstance(b.elem_type, CudaType):  # a data file's own dtype is named first
            _resolved_fill(b.name, b, b.elem_type, count, _declared(p))
        _check_buffer_type(b, p)
    for c in spec.constants:
        count = _buffer_count(c.name, c, env, "constant")
        if isinstance(c.elem_type, CudaType):
            _resolved_fill(c.name, c, c.elem_type, count, None, "constant")


def _check_buffer_type(given: BufferSpec, p: Param) -> None:
    """A buffer's type against the type its parameter points to, both CUDA types.

    The same type, or the same lanes grouped differently (``float[4*n]`` for a ``float4*``): fine.
    The same size per element (``float`` for an ``int*``): allowed, the bytes are reinterpreted
    (a note of :func:`resolve` says so). Sizes that differ (``double[n]`` for an ``int*``): the
    kernel would read other bytes than those the spec describes, a mistake: refused.
    """
    declared, elem = _declared(p), given.elem_type
    if declared is None or not isinstance(elem, CudaType) or declared == elem:
        return
    if declared.numpy_format == elem.numpy_format and declared.kind == elem.kind:
        return  # one lane type, other vector widths
    if declared.size_bytes == elem.size_bytes:
        return
    raise UsageError(
        f"buffer {given.name} is {elem.name} ({elem.size_bytes} bytes an element), but the "
        f"kernel's parameter {p.name} points to {declared.name} ({declared.size_bytes} bytes)",
        f"give the buffer the parameter's type: {given.name}={declared.name}"
        f"[{_short(given.count_expr)}]",
    )


def _declared(p: Param) -> CudaType | None:
    pointee = p.pointee or "void"
    return lookup(pointee) if pointee != "void" and "*" not in pointee else None


def resolve(
    spec: KernelSpec, params: Sequence[Param], resolve_struct: StructResolver | None = None
) -> ResolvedLaunch:
    """Bind ``spec`` to the kernel's ``params``: values for scalars, buffers for pointers.

    ``resolve_struct(name) -> (size_bytes, align_bytes)`` sizes user types; it is called once
    per struct name and only when a buffer holds a struct. Raises UsageError naming what is
    missing (``--arg n=...``), unknown, or of the wrong kind.
    """
    env = spec.env()
    notes: list[str] = []
    kernel = spec.kernel
    _check_names(spec, params)

    # Scalars without a value take their default argument when it is a plain value.
    defaulted: dict[str, ArgSpec] = {}
    for p in params:
        if p.is_pointer or spec.arg(p.name) is not None or p.default is None:
            continue
        value = _default_value(p.default, env)
        if value is not None:
            defaulted[p.name] = ArgSpec(p.name, value)
            notes.append(f"{p.name} = {p.default} (the kernel's default argument)")
    missing = [
        p.name
        for p in params
        if not p.is_pointer and spec.arg(p.name) is None and p.name not in defaulted
    ]
    if missing:
        flags = " ".join(f"--arg {m}=..." for m in missing)
        raise UsageError(
            f"kernel {kernel} needs a value for {', '.join(missing)}",
            f"give {flags} (or put them under [args] in the spec file)",
        )

    struct_cache: dict[str, StructType] = {}

    def sized(elem: ElemType, buffer_name: str) -> ElemType:
        return _sized(elem, f"buffer {buffer_name}", resolve_struct, struct_cache)

    default_count = spec.launch.total_threads
    resolved: list[ResolvedArg | ResolvedBuffer] = []
    for index, p in enumerate(params):
        if not p.is_pointer:
            ctype = lookup(p.value_type)
            arg = spec.arg(p.name) or defaulted[p.name]
            if isinstance(arg.value, RawBytes):
                raw = _bytes_type(p, ctype, arg.value, resolve_struct, kernel)
                resolved.append(ResolvedArg(p.name, index, raw, arg.value.data))
                continue
            if ctype is None:
                raise UsageError(
                    f"parameter {p.name} of {kernel} is passed by value as {p.value_type!r}, "
                    "which gpuadvise cannot fill from a number",
                    f'give its bytes: {p.name} = {{ bytes = "..." }} under [args] (two hex '
                    "digits a byte; gpuadvise record writes them), or pass it through a pointer",
                )
            resolved.append(ResolvedArg(p.name, index, ctype, _scalar_value(p, ctype, arg, env)))
            continue
        given = spec.buffer(p.name)
        pointee = p.pointee or "void"
        declared = _declared(p)
        if given is None:
            if pointee == "void" or "*" in pointee:
                raise UsageError(
                    f"pointer parameter {p.name} of {kernel} is a {p.type_text}, so gpuadvise "
                    "cannot assume its buffer",
                    f"give it: --buffer {p.name}=float32[n] (an element type and a count)",
                )
            given = BufferSpec(
                p.name, lookup_elem(pointee), str(default_count), "random", assumed=True
            )
            notes.append(
                f"buffer {p.name} assumed: {given.elem_type.name}[{default_count}] (one element "
                f"per thread of the launch, random); give --buffer {p.name}=TYPE[COUNT] to set it"
            )
        else:
            elem_name = given.elem_type.name
            if declared is not None and declared != given.elem_type:
                same_lanes = isinstance(given.elem_type, CudaType) and (
                    declared.numpy_format,
                    declared.kind,
                ) == (given.elem_type.numpy_format, given.elem_type.kind)
                notes.append(
                    f"buffer {p.name} holds {elem_name} but the parameter points to "
                    f"{declared.name}; counts are in {elem_name} elements"
                    + ("" if same_lanes else f" (the kernel reads their bytes as {declared.name})")
                )
        elem = sized(given.elem_type, p.name)
        count = _buffer_count(p.name, given, env)
        size = elem.size_bytes
        align = elem.align_bytes
        assert size is not None and align is not None
        is_output = given.is_output if given.is_output is not None else not p.is_const
        fill = _resolved_fill(p.name, given, elem, count, declared)
        _check_buffer_type(given, p)
        resolved.append(
            ResolvedBuffer(
                p.name,
                index,
                elem,
                count,
                count * size,
                align,
                fill,
                given.assumed,
                is_output,
                given.count_expr,
                given.fill_given,
            )
        )
    constants = resolve_constants(spec, resolve_struct, struct_cache)
    return ResolvedLaunch(
        kernel=kernel,
        launch=spec.launch,
        params=tuple(resolved),
        seed=spec.seed,
        env=tuple(sorted(env.items())),
        notes=tuple(notes),
        constants=constants,
        max_instructions=spec.max_instructions,
    )


def resolve_constants(
    spec: KernelSpec,
    resolve_struct: StructResolver | None = None,
    struct_cache: dict[str, StructType] | None = None,
) -> tuple[ResolvedBuffer, ...]:
    """The spec's ``__constant__`` fills bound to their sizes (``resolve_struct`` sizes user
    structs, as in :func:`resolve`); needs no kernel parameter, so the constants can be checked
    against the compiled module before a launch is resolved."""
    env = spec.env()
    cache = struct_cache if struct_cache is not None else {}
    return tuple(
        _resolved_constant(c, _sized(c.elem_type, f"constant {c.name}", resolve_struct, cache), env)
        for c in spec.constants
    )


def _sized(
    elem: ElemType,
    what: str,
    resolve_struct: StructResolver | None,
    cache: dict[str, StructType],
) -> ElemType:
    """``elem`` with its size: a CUDA type as it is, a user struct sized by the compiler
    (``resolve_struct``, once per name: ``cache``)."""
    if isinstance(elem, CudaType) or elem.is_resolved:
        return elem
    if elem.name not in cache:
        if resolve_struct is None:
            raise UsageError(
                f"{what} holds {elem.name!r}, a type gpuadvise can only size with the compiler",
                "analyze through the CLI (which compiles the source), or use a CUDA type",
            )
        size_bytes, align_bytes = resolve_struct(elem.name)
        cache[elem.name] = elem.with_layout(int(size_bytes), int(align_bytes))
    return cache[elem.name]


def _resolved_constant(c: BufferSpec, elem: ElemType, env: Mapping[str, int]) -> ResolvedBuffer:
    """A ``__constant__`` fill bound to its size: a buffer (index -1) that is never an output."""
    count = _buffer_count(c.name, c, env, "constant")
    size, align = elem.size_bytes, elem.align_bytes
    assert size is not None and align is not None
    fill = _resolved_fill(c.name, c, elem, count, None, "constant")
    return ResolvedBuffer(
        c.name, -1, elem, count, count * size, align, fill, False, False, c.count_expr, c.fill_given
    )


def _default_value(text: str, env: Mapping[str, int]) -> int | float | bool | None:
    """A default argument's value, if it is a number, true/false or an expression over args."""
    try:
        value = _parse_value(text, "default")
        if isinstance(value, RawBytes):
            return None
        return expr.evaluate(value, env) if isinstance(value, str) else value
    except UsageError:
        return None


def _env_text(text: str, env: Mapping[str, int]) -> str:
    used = sorted(expr.names(text))
    return ", ".join(f"{n}={env[n]}" for n in used if n in env) or "no names"
