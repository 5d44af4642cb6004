"""Per-kernel resources and kernel info: ptxas's own ``-v`` report, and the cubin's sizes.

nvcc always runs with ``-Xptxas -v``; the report is parsed per entry function. It is the only
place that states spill stores/loads, and it gives registers, the stack frame (``local_bytes``),
static shared memory (``static_smem_bytes``: the user's ``__shared__`` bytes, without the 1 KB
the cubin reserves on sm_80+) and the number of named barriers (``used N barriers``: highest
barrier id + 1; ``bar.sync 3`` counts 4). Where an older ptxas prints no barrier count,
``barriers`` is 1 if the kernel's PTX uses ``bar``/``barrier``, else 0. ptxas 13 no longer
prints ``cmem[0]``, so ``const_bytes`` alone is read from the cubin: the size of the kernel's
``.nv.constant0.<kernel>`` ELF section (constant bank 0: the parameters plus the driver's area,
what ``cuobjdump -res-usage`` calls ``CONSTANT[0]``). The cubin's ``.nv.info`` attributes were
not chosen: they carry no spill counts.

Everything here round-trips through JSON; ``from_dict`` checks every type and raises
``ValueError`` on anything else (the compile cache treats that as a miss).
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuadvise.errors import ToolchainError
from gpuadvise.fileio import decode_tool_path
from gpuadvise.toolchain.names import display_name, split_qualified

__all__ = [
    "KernelInfo",
    "KernelResources",
    "elf_section_sizes",
    "kernel_infos",
    "parse_ptxas_report",
]


def field_of(data: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    """``data[key]``, checked to be a ``kind`` (bool is not an int); else ``ValueError``."""
    if not isinstance(data, Mapping):
        raise ValueError(f"expected an object holding {key!r}, got {type(data).__name__}")
    if key not in data:
        raise ValueError(f"missing {key!r}")
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise ValueError(f"{key!r} is a bool")
    if not isinstance(value, kinds):
        raise ValueError(f"{key!r} is a {type(value).__name__}")
    return value


@dataclass(frozen=True)
class KernelResources:
    """Per-thread and per-block resources of one kernel, from ptxas ``-v`` (see module doc)."""

    registers: int
    static_smem_bytes: int
    local_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    const_bytes: int
    barriers: int

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelResources:
        values = {}
        for f in dataclasses.fields(cls):
            value = field_of(data, f.name, int)
            if value < 0:
                raise ValueError(f"{f.name!r} is negative")
            values[f.name] = value
        return cls(**values)


@dataclass(frozen=True)
class KernelInfo:
    """A kernel of a compiled module.

    ``name``: demangled, without return type and parameters (``ns::reduce<256, true>``);
    ``signature``: the full demangled name with parameter types; ``mangled``: the symbol.
    """

    name: str
    mangled: str
    signature: str
    resources: KernelResources

    @property
    def short_name(self) -> str:
        """``name`` without namespaces: ``reduce<256, true>``."""
        return split_qualified(self.name)[-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mangled": self.mangled,
            "signature": self.signature,
            "resources": self.resources.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelInfo:
        return cls(
            name=field_of(data, "name", str),
            mangled=field_of(data, "mangled", str),
            signature=field_of(data, "signature", str),
            resources=KernelResources.from_dict(field_of(data, "resources", Mapping)),
        )


# --------------------------------------------------------------------------------------------
# ptxas -v


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_NUM_RES = {
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "registers": re.compile(r"Used (\d+) registers"),
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
}


def parse_ptxas_report(text: str) -> dict[str, dict[str, int]]:
    """ptxas ``-v`` output -> {mangled entry name: {registers, stack, spill_stores, ...}}.

    Only entry functions (``Compiling entry function``) are reported; the properties of
    non-inlined device functions that ptxas prints along are skipped.
    """
    result: dict[str, dict[str, int]] = {}
    current: str | None = None
    props_for: str | None = None
    for line in text.splitlines():
        if m := _ENTRY_RE.search(line):
            current = m.group(1)
            result.setdefault(current, {})
            props_for = None
            continue
        if m := _PROPS_RE.search(line):
            props_for = m.group(1)
            continue
        if current is None:
            continue
        is_props = "bytes stack frame" in line
        if is_props and props_for != current:
            continue
        if is_props or "Used " in line:
            for key, rx in _NUM_RES.items():
                if (m := rx.search(line)) is not None:
                    result[current][key] = int(m.group(1))
    return result


_PTX_BARRIER_RE = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:bar|barrier)\.", re.M)


def ptx_entry_body(ptx: str, mangled: str) -> str:
    """The PTX text of entry ``mangled``, up to the next function ("" if absent)."""
    m = re.search(rf"\.entry\s+{re.escape(mangled)}\s*\(", ptx)
    if not m:
        return ""
    end = re.search(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s", ptx[m.end() :], re.M)
    return ptx[m.start() : m.end() + end.start()] if end else ptx[m.start() :]


_PTX_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)
_PTX_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)", re.M)


def entry_source_order(ptx: str, src: Path) -> dict[str, tuple[int, int]]:
    """Mangled entry -> (0 if defined in ``src`` else 1, first line) from the PTX line info."""
    files = {int(n): os.path.normpath(decode_tool_path(p)) for n, p in _PTX_FILE_RE.findall(ptx)}
    order = {}
    for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(", ptx):
        loc = _PTX_LOC_RE.search(ptx_entry_body(ptx, m.group(1)))
        if loc:
            in_src = files.get(int(loc.group(1))) == str(src)
            order[m.group(1)] = (0 if in_src else 1, int(loc.group(2)))
    return order


def elf_section_sizes(data: bytes) -> dict[str, int]:
    """Section name -> size of a 64-bit little-endian ELF file (a cubin).

    Raises :class:`ToolchainError` when ``data`` is not one (truncated or corrupt).
    """
    bad = ToolchainError(
        "nvcc wrote a cubin that is not a 64-bit ELF file",
        "report this with your nvcc version (nvcc --version)",
    )
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise bad
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        headers = []
        for i in range(shnum):
            name, _type, _flags, _addr, offset, size = struct.unpack_from(
                "<IIQQQQ", data, shoff + i * shentsize
            )
            headers.append((name, offset, size))
    except struct.error:
        raise bad from None
    str_off = headers[shstrndx][1] if shstrndx < len(headers) else 0
    sizes = {}
    for name, _offset, size in headers:
        end = data.find(b"\0", str_off + name)
        sizes[data[str_off + name : end].decode(errors="replace")] = size
    return sizes


def kernel_infos(
    ptx: str, ptxas_log: str, cubin: bytes, src: Path, names: Mapping[str, str]
) -> tuple[KernelInfo, ...]:
    """Every entry of a compiled module, in source order (``src``'s own kernels first).

    ``ptxas_log``: nvcc's output with ptxas's ``-v`` report; ``names``: mangled -> demangled.
    """
    report = parse_ptxas_report(ptxas_log)
    sections = elf_section_sizes(cubin)
    kernels = []
    for sym, res in report.items():
        barriers = res.get("barriers")
        if barriers is None:
            barriers = 1 if _PTX_BARRIER_RE.search(ptx_entry_body(ptx, sym)) else 0
        signature = names.get(sym, sym)
        kernels.append(
            KernelInfo(
                name=display_name(signature),
                mangled=sym,
                signature=signature,
                resources=KernelResources(
                    registers=res.get("registers", 0),
                    static_smem_bytes=res.get("smem", 0),
                    local_bytes=res.get("stack", 0),
                    spill_store_bytes=res.get("spill_stores", 0),
                    spill_load_bytes=res.get("spill_loads", 0),
                    const_bytes=sections.get(f".nv.constant0.{sym}", 0),
                    barriers=barriers,
                ),
            )
        )
    order = entry_source_order(ptx, src)
    kernels.sort(key=lambda k: order.get(k.mangled, (2, 0)))
    return tuple(kernels)
