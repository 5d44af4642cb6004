"""A cubin's line table read from its ELF file (pure: bytes in, rows out; no tool).

ptxas writes a DWARF 2 ``.debug_line`` for a ``-lineinfo`` build: one sequence per code
section (its ``DW_LNE_set_address`` relocated against the section's symbol in
``.rela.debug_line``), addresses relative to the section, and NVIDIA's extended opcode
``0x90`` for inlining: two ULEB128 operands, the row of the same sequence (1-based, in the
order rows are emitted) that the following rows were inlined at, 0 for none, and an offset
into ``.debug_str`` (the inlined function's name, not read here). It is what
``nvdisasm -gi`` prints as ``//## File "k.cuh", line 2 inlined at "k.cu", line 5``.

:func:`line_table` gives, per function (mangled name), the rows as
``(offset, file, line, inlined_at)``, ``inlined_at`` the call sites innermost first: what
:func:`gpuadvise.toolchain.sass.parse_nvdisasm` reads from ``-gi``'s comments, so that the SASS
can be taken from ``nvdisasm --print-life-ranges`` (which ignores ``-g``) and one nvdisasm run
gives both (issue 31). Any layout this reader does not know raises :class:`LineTableError`:
the caller then runs ``nvdisasm -gi`` as before.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from gpuadvise.fileio import decode_tool_path

__all__ = ["LineRow", "LineTableError", "code_sections", "line_table", "locate", "trailing_nops"]

LineRow = tuple[int, str, int, tuple[tuple[str, int], ...]]
"""(offset in the function's code section, file, line, call sites innermost first)."""

_NV_INLINED = 0x90
_DW_LNE_END, _DW_LNE_SET_ADDRESS, _DW_LNE_DEFINE_FILE = 1, 2, 3


class LineTableError(ValueError):
    """A line table this reader does not understand."""


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _sleb(data: bytes, pos: int) -> tuple[int, int]:
    value, end = _uleb(data, pos)
    if data[end - 1] & 0x40:  # the last byte's sign bit: the value is negative
        value -= 1 << (7 * (end - pos))
    return value, end


def _cstr(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.index(b"\0", pos)
    return data[pos:end], end + 1


_Section = tuple[str, int, int, int, int, int]


def _sections(data: bytes) -> list[_Section]:
    """(name, type, offset, size, link, info) of every section."""
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise LineTableError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = raw[shstrndx][4], raw[shstrndx][5]
    names = data[str_off : str_off + str_size]
    out = []
    for name_off, kind, _flags, _addr, off, size, link, info in raw:
        end = names.find(b"\0", name_off)
        out.append((names[name_off:end].decode("utf-8", "replace"), kind, off, size, link, info))
    return out


def code_sections(data: bytes) -> dict[str, bytes]:
    """{function (mangled): its code section's bytes} of the cubin ``data``."""
    try:
        sections = _sections(data)
    except (IndexError, struct.error) as exc:
        raise LineTableError(f"unreadable ELF file: {exc}") from None
    return {
        name[len(".text.") :]: data[off : off + size]
        for name, kind, off, size, _link, _info in sections
        if name.startswith(".text.") and kind != 8
    }


_NOP = bytes.fromhex("1879000000000000")  # sm_70 on: NOP, predicate PT, no operand


def trailing_nops(code: bytes, last: int) -> int | None:
    """How many 16-byte instructions follow the one at offset ``last`` to the end of the function's
    ``code`` (the alignment padding ``nvdisasm -plr`` leaves out and ``-c`` prints as ``NOP``),
    or None when one of them is not an unpredicated NOP without operands (its control bits
    aside)."""
    count = 0
    for at in range(last + 16, len(code), 16):
        word = code[at : at + 16]
        if len(word) < 16 or word[:8] != _NOP or any(word[8:13]):
            return None
        count += 1
    return count


def _address_sections(data: bytes, sections: Sequence[_Section], line_index: int) -> dict[int, str]:
    """Offset in ``.debug_line`` of each relocated address -> the code section it names."""
    out: dict[int, str] = {}
    for _name, kind, off, size, link, info in sections:
        if kind not in (4, 9) or info != line_index:  # SHT_RELA, SHT_REL against .debug_line
            continue
        entsize = 24 if kind == 4 else 16
        sym_off = sections[link][2]
        for i in range(size // entsize):
            r_offset, r_info = struct.unpack_from("<QQ", data, off + i * entsize)
            addend = struct.unpack_from("<q", data, off + i * entsize + 16)[0] if kind == 4 else 0
            sym = r_info >> 32
            _st_name, _st_info, _st_other, st_shndx, st_value = struct.unpack_from(
                "<IBBHQ", data, sym_off + 24 * sym
            )
            if st_value + addend != 0:
                raise LineTableError("a sequence that starts inside its section")
            out[r_offset] = sections[st_shndx][0]
    return out


def line_table(data: bytes) -> dict[str, list[LineRow]]:
    """{mangled function name: its rows in emission order} of the cubin ``data``; {} without a
    ``.debug_line``. Raises :class:`LineTableError` on a layout it does not know."""
    try:
        return _line_table(data)
    except (IndexError, ValueError, struct.error) as exc:
        if isinstance(exc, LineTableError):
            raise
        raise LineTableError(f"unreadable line table: {exc}") from None


def _line_table(data: bytes) -> dict[str, list[LineRow]]:
    sections = _sections(data)
    index = next((i for i, s in enumerate(sections) if s[0] == ".debug_line"), None)
    if index is None:
        return {}
    by_address = _address_sections(data, sections, index)
    start = sections[index][2]
    sec = data[start : start + sections[index][3]]
    out: dict[str, list[LineRow]] = {}
    pos = 0
    while pos < len(sec):
        (unit_length,) = struct.unpack_from("<I", sec, pos)
        if unit_length >= 0xFFFFFFF0:
            raise LineTableError("64-bit DWARF")
        end = pos + 4 + unit_length
        (version,) = struct.unpack_from("<H", sec, pos + 4)
        if version not in (2, 3):
            raise LineTableError(f"DWARF line table version {version}")
        (header_length,) = struct.unpack_from("<I", sec, pos + 6)
        program = pos + 10 + header_length
        min_inst, _default_is_stmt, line_base, line_range, opcode_base = struct.unpack_from(
            "<BBbBB", sec, pos + 10
        )
        lengths = list(sec[pos + 15 : pos + 15 + opcode_base - 1])
        q = pos + 15 + opcode_base - 1
        dirs = [b""]
        while sec[q] != 0:
            name, q = _cstr(sec, q)
            dirs.append(name)
        q += 1
        files: list[str] = [""]
        while sec[q] != 0:
            name, q = _cstr(sec, q)
            d, q = _uleb(sec, q)
            _, q = _uleb(sec, q)
            _, q = _uleb(sec, q)
            files.append(_path(dirs, d, name))
        header = _Header(files, dirs, lengths, min_inst, line_base, line_range, opcode_base)
        _run_program(sec, program, end, by_address, header, out)
        pos = end
    return out


def _path(dirs: list[bytes], d: int, name: bytes) -> str:
    joined = name if name.startswith(b"/") or d == 0 else dirs[d] + b"/" + name
    text = joined.decode("utf-8", "surrogateescape")
    return os.path.normpath(decode_tool_path(text)) if text else ""


@dataclass
class _Header:
    files: list[str]
    dirs: list[bytes]
    lengths: list[int]  # the standard opcodes' operand counts
    min_inst: int
    line_base: int
    line_range: int
    opcode_base: int


def _run_program(
    sec: bytes,
    pos: int,
    end: int,
    by_address: dict[int, str],
    h: _Header,
    out: dict[str, list[LineRow]],
) -> None:
    """Run one unit's line program (``sec[pos:end]``), adding each sequence's rows to ``out``."""
    files, opcode_base, line_range = h.files, h.opcode_base, h.line_range
    address, file, line, context = 0, 1, 1, 0
    section: str | None = None
    rows: list[tuple[int, int, int, int]] = []  # (address, file, line, context) of the sequence

    def emit() -> None:
        rows.append((address, file, line, context))

    def close() -> None:
        if section is None:
            if rows:
                raise LineTableError("a sequence without a relocated address")
            return
        name = section[len(".text.") :] if section.startswith(".text.") else section
        resolved: list[LineRow] = []
        for a, f, n, ctx in rows:
            chain = []
            seen = 0
            while ctx:
                if ctx > len(rows) or seen > len(rows):
                    raise LineTableError("an inlining context outside its sequence")
                _, cf, cn, ctx = rows[ctx - 1]
                chain.append((files[cf], cn))
                seen += 1
            resolved.append((a, files[f], n, tuple(chain)))
        out.setdefault(name, []).extend(resolved)

    while pos < end:
        op = sec[pos]
        pos += 1
        if op >= opcode_base:
            adj = op - opcode_base
            address += (adj // line_range) * h.min_inst
            line += h.line_base + adj % line_range
            emit()
        elif op == 0:
            length, pos = _uleb(sec, pos)
            sub = sec[pos]
            body = pos + 1
            if sub == _DW_LNE_END:
                emit()
                close()
                address, file, line, context, section, rows = 0, 1, 1, 0, None, []
            elif sub == _DW_LNE_SET_ADDRESS:
                if body not in by_address:
                    raise LineTableError("a set_address without a relocation")
                section = by_address[body]
                (address,) = struct.unpack_from("<Q", sec, body)
            elif sub == _NV_INLINED:
                context, q = _uleb(sec, body)
                _uleb(sec, q)
            elif sub == _DW_LNE_DEFINE_FILE:
                name, q = _cstr(sec, body)
                d, q = _uleb(sec, q)
                files.append(_path(h.dirs, d, name))
            else:
                raise LineTableError(f"extended opcode {sub:#x}")
            pos += length
        elif op == 1:  # copy
            emit()
        elif op == 2:  # advance_pc
            v, pos = _uleb(sec, pos)
            address += v * h.min_inst
        elif op == 3:  # advance_line
            v, pos = _sleb(sec, pos)
            line += v
        elif op == 4:  # set_file
            file, pos = _uleb(sec, pos)
        elif op == 5:  # set_column
            _, pos = _uleb(sec, pos)
        elif op in (6, 7):  # negate_stmt, set_basic_block
            pass
        elif op == 8:  # const_add_pc
            address += ((255 - opcode_base) // line_range) * h.min_inst
        elif op == 9:  # fixed_advance_pc
            (v,) = struct.unpack_from("<H", sec, pos)
            pos += 2
            address += v
        else:
            for _ in range(h.lengths[op - 1]):
                _, pos = _uleb(sec, pos)
    if rows:
        raise LineTableError("a sequence without its end")


def locate(
    rows: Sequence[LineRow], offsets: Sequence[int]
) -> list[tuple[str | None, int | None, tuple[tuple[str, int], ...]]]:
    """The (file, line, call sites) of each of ``offsets`` (ascending) as ``nvdisasm -gi`` prints
    them: the last row at or before the offset; (None, None, ()) before the first row. Like
    nvdisasm, a row whose innermost file and line are the ones in effect keeps the call sites
    in effect (nvdisasm prints a new location only when the innermost one changes)."""
    out: list[tuple[str | None, int | None, tuple[tuple[str, int], ...]]] = []
    ordered = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
    j = 0
    cur: tuple[str | None, int | None, tuple[tuple[str, int], ...]] = (None, None, ())
    for off in offsets:
        row = None
        while j < len(ordered) and rows[ordered[j]][0] <= off:
            row = rows[ordered[j]]
            j += 1
        if row is not None:
            _, f, n, chain = row
            here = (f or None, n if f else None)
            if here != cur[:2]:
                cur = (*here, tuple((cf, cn) for cf, cn in chain if cf))
        out.append(cur)
    return out
