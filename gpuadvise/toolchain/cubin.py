"""What a cubin says about its kernels, read from the ELF file alone (pure: bytes in, records
out; no tool, no GPU): a recorded module (``gpuadvise record``) or a cubin given to ``analyze``.

A cubin is an ELF64 file. Each kernel ``K`` has a code section ``.text.K`` and an information
section ``.nv.info.K`` holding attributes (format byte, attribute byte, value); the
``EIATTR_KPARAM_INFO`` attributes give every parameter's ordinal, offset and size in the
device-side parameter buffer: the same numbers ``cuFuncGetParamInfo`` returns, so a launch
whose ``CUfunction`` is not at hand (a runtime launch of a host stub) is decoded with them. A
``.debug_line`` (or ``.nv_debug_line_sass``) section means the module was built with
``-lineinfo`` (or ``-G``): nvdisasm can then name the source lines.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["CubinInfo", "ParamSlot", "elf_images", "function_symbols", "is_elf", "read_cubin"]

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian: a fat binary, not one cubin

# .nv.info attribute formats (the byte before the attribute id) and the one attribute read here
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_KPARAM_INFO = 0x17


@dataclass(frozen=True)
class ParamSlot:
    """One kernel parameter in the device-side parameter buffer: ``ordinal`` (its position in the
    signature), ``offset`` and ``size_bytes``."""

    ordinal: int
    offset: int
    size_bytes: int

    def to_dict(self) -> dict[str, int]:
        return {"ordinal": self.ordinal, "offset": self.offset, "size_bytes": self.size_bytes}


@dataclass(frozen=True)
class CubinInfo:
    """The kernels of one cubin (mangled names) with their parameter slots, in ordinal order, and
    whether it carries line information."""

    kernels: dict[str, tuple[ParamSlot, ...]]
    has_line_info: bool


def is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def _elf_end(data: bytes, start: int) -> int | None:
    """Where the ELF file that begins at ``start`` ends (its last section or its section table),
    or None when its header does not hold together."""
    if len(data) < start + 64 or data[start + 4] != 2 or data[start + 5] != 1:
        return None
    (shoff,) = struct.unpack_from("<Q", data, start + 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, start + 0x3A)
    end = shoff + shnum * shentsize
    if shentsize < 64 or start + end > len(data):
        return None
    for i in range(shnum):
        _, kind, _, _, off, size = struct.unpack_from(
            "<IIQQQQ", data, start + shoff + i * shentsize
        )
        if kind != 8:  # SHT_NOBITS holds no bytes
            end = max(end, off + size)
    return start + end if start + end <= len(data) else None


def elf_images(data: bytes) -> list[bytes]:
    """The cubins in a module's image: the image itself when it is one, else the uncompressed
    ELF files a fat binary holds (a compressed entry is not unpacked here)."""
    if is_elf(data):
        return [data]
    out, pos = [], data.find(ELF_MAGIC)
    while pos >= 0:
        end = _elf_end(data, pos)
        if end is not None:
            out.append(data[pos:end])
            pos = data.find(ELF_MAGIC, end)
        else:
            pos = data.find(ELF_MAGIC, pos + 4)
    return out


def read_cubin(data: bytes) -> CubinInfo:
    """The kernels and parameter slots of the cubin ``data``. Raises ValueError for data that is
    not a 64-bit little-endian ELF file (a fat binary, PTX text, a truncated file)."""
    if data[:4] == FATBIN_MAGIC:
        raise ValueError("a fat binary, not a cubin")
    if not is_elf(data) or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF cubin")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise ValueError("the ELF section table lies outside the file")
    sections = []
    for i in range(shnum):
        name_off, _type, _flags, _addr, off, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize
        )
        if off + size > len(data) and _type != 8:  # SHT_NOBITS has no bytes in the file
            raise ValueError(f"ELF section {i} lies outside the file")
        sections.append((name_off, _type, off, size))
    _, _, str_off, str_size = sections[shstrndx]
    names = data[str_off : str_off + str_size]

    def name_of(off: int) -> str:
        end = names.find(b"\0", off)
        return names[off : end if end >= 0 else len(names)].decode("utf-8", "replace")

    kernels: dict[str, tuple[ParamSlot, ...]] = {}
    info: dict[str, bytes] = {}
    line_info = False
    for name_off, _type, off, size in sections:
        name = name_of(name_off)
        if name.startswith(".text."):
            kernels.setdefault(name[len(".text.") :], ())
        elif name.startswith(".nv.info."):
            info[name[len(".nv.info.") :]] = data[off : off + size]
        elif name in (".debug_line", ".nv_debug_line_sass"):
            line_info = True
    for kernel in kernels:
        if kernel in info:
            kernels[kernel] = _param_slots(info[kernel])
    return CubinInfo(kernels=kernels, has_line_info=line_info)


def function_symbols(data: bytes) -> dict[str, int]:
    """The cubin's function symbols: mangled name -> index in its ``.symtab`` (what
    ``nvdisasm -fun`` takes). Empty for data that is not a readable ELF64 file."""
    try:
        if not is_elf(data) or len(data) < 64 or data[4] != 2 or data[5] != 1:
            return {}
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [
            struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)
        ]
        out: dict[str, int] = {}
        for _name, kind, _flags, _addr, off, size, link, _info in sections:
            if kind != 2:  # SHT_SYMTAB
                continue
            str_off, str_size = sections[link][4], sections[link][5]
            strings = data[str_off : str_off + str_size]
            for i in range(size // 24):
                st_name, st_info = struct.unpack_from("<IB", data, off + 24 * i)
                if st_info & 0xF != 2:  # STT_FUNC
                    continue
                end = strings.find(b"\0", st_name)
                out[strings[st_name:end].decode("utf-8", "replace")] = i
        return out
    except (struct.error, IndexError):
        return {}


def _param_slots(section: bytes) -> tuple[ParamSlot, ...]:
    """The EIATTR_KPARAM_INFO records of one ``.nv.info.K`` section, by ordinal. Each is 12
    bytes: a u32 index, a u16 ordinal, a u16 offset, and a u32 whose bits 18-31 are the size."""
    slots: dict[int, ParamSlot] = {}
    pos = 0
    while pos + 2 <= len(section):
        fmt, attr = section[pos], section[pos + 1]
        if fmt == _EIFMT_NVAL:
            pos += 2
        elif fmt in (_EIFMT_BVAL, _EIFMT_HVAL):
            pos += 4
        elif fmt == _EIFMT_SVAL:
            if pos + 4 > len(section):
                break
            (size,) = struct.unpack_from("<H", section, pos + 2)
            value = section[pos + 4 : pos + 4 + size]
            if attr == _EIATTR_KPARAM_INFO and len(value) >= 12:
                _index, ordinal, offset, packed = struct.unpack_from("<IHHI", value)
                slots[ordinal] = ParamSlot(ordinal, offset, (packed >> 18) & 0x3FFF)
            pos += 4 + size
        else:  # an unknown format: the rest cannot be framed
            break
    return tuple(slots[k] for k in sorted(slots))
