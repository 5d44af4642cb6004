"""The toolkit's own register life ranges: ``nvdisasm --print-life-ranges`` read per instruction.

``nvdisasm -plr -c kernel.cubin`` (the default ``wide`` mode) prints, after every instruction, a
table of the registers it knows of, one column per register, in four classes: general (``GPR``),
predicate (``PRED``), uniform (``UGPR``) and uniform predicate (``UPRED``) registers::

    // +-------------------------+--------+
    // |           GPR           | PRED   |
    // |  # 0 1 2 3 4 5 6 ... 17 | # 0 1  |
    // +-------------------------+--------+
            /*0070*/   LEA R22, R0, R3, 0x3 ;     // | 10 v : : v   :  ... | 1 ^    |

In each class, ``#`` is the number of registers live at the instruction and each column holds
one mark: ``^`` the instruction writes the register, ``v`` it reads it, ``x`` both, ``:`` the
register is live across it, blank: dead. A 64-bit pair is two columns (two registers). A
predicated write does not kill the value (``x``), as ptxas's allocator must assume. The option
ignores ``-g``, so the instructions carry no source lines: :mod:`gpuadvise.model.registers`
joins these rows to :func:`gpuadvise.toolchain.sass.disassemble`'s by offset.

:func:`life_ranges` runs it (one run per cubin, its output kept beside the cubin as the SASS
is; the SASS is read from the same output when it is there:
:func:`gpuadvise.toolchain.sass.life_range_text`);
:func:`parse_life_ranges` reads the text. Pure text in, frozen rows out.
"""

from __future__ import annotations

import functools
import operator
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuadvise.errors import KernelNotFoundError, ToolchainError
from gpuadvise.toolchain.find import Toolchain, find_toolchain

__all__ = [
    "CLASSES",
    "LifeRanges",
    "LiveRow",
    "life_ranges",
    "parse_life_ranges",
]

CLASSES = ("GPR", "PRED", "UGPR", "UPRED")
"""The register classes of the table, in the order :class:`LiveRow` keeps them."""

MARKS = frozenset("^vx:")


@dataclass(frozen=True)
class LiveRow:
    """One instruction of the life-range table.

    ``counts``: live registers per class (:data:`CLASSES`), as nvdisasm's ``#`` columns print
    them; ``marks``: per class, one character per column of :attr:`LifeRanges.columns` (``^``
    written, ``v`` read, ``x`` both, ``:`` live across, a space: dead); ``text``: the
    instruction as printed (predicate, opcode, operands)."""

    offset: int
    text: str
    counts: tuple[int, int, int, int]
    marks: tuple[str, str, str, str]

    def live(self, cls: int) -> list[int]:
        """The column positions of class ``cls`` that hold a mark (live at this instruction)."""
        return [i for i, c in enumerate(self.marks[cls]) if c != " "]


@dataclass(frozen=True)
class LifeRanges:
    """The life-range table of one function: ``columns``, per class, the register numbers of
    its columns (``R0``..``R99`` is 0..99); ``rows``: its instructions in address order;
    ``labels``: each branch label and the offset of the instruction it names."""

    function: str
    columns: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    rows: tuple[LiveRow, ...]
    labels: Mapping[str, int]

    def register_name(self, cls: int, column: int) -> str:
        """``R12``, ``P0``, ``UR4``, ``UP1`` for a column of class ``cls``."""
        return ("R", "P", "UR", "UP")[cls] + str(self.columns[cls][column])


_FUNC_RE = re.compile(r"^//-+\s+\.text\.(\S+)\s+-+\s*$")
_INSTR_RE = re.compile(r"^\s*/\*(?P<off>[0-9a-fA-F]+)\*/\s*(?P<body>[^;]*);")
_LABEL_RE = re.compile(r"^(?P<label>\.L_[\w.$]+|[A-Za-z_$][\w.$]*):")
_TABLE = "// |"


def _header_columns(line: str, at: int) -> list[tuple[str, int]]:
    """(name, position) of every column of a ``// |  # 0 1 ... | # 0 1 |`` header line; the
    name ``|`` starts a class; a column's mark sits under its label's last character."""
    out = []
    for m in re.finditer(r"\||#|\d+", line[at + 2 :]):
        out.append((m.group(), at + 2 + m.end() - 1))
    return out


def parse_life_ranges(text: str) -> dict[str, LifeRanges]:
    """``nvdisasm --print-life-ranges -c`` text (wide mode) -> {mangled name: its table}.

    Raises ToolchainError when a function's table cannot be read (another layout of the
    output): the caller then has no life ranges rather than wrong ones."""
    out: dict[str, LifeRanges] = {}
    name: str | None = None
    names: list[str] = []  # the class names of the current table, in order
    layout: list[tuple[int, str, int]] | None = None  # (class, column name, position)
    plan: _Plan | None = None  # where _row reads each class's count and marks
    rows: list[LiveRow] = []
    labels: dict[str, int] = {}
    pending: list[str] = []  # labels waiting for their instruction

    def close() -> None:
        if name is not None and layout is not None:
            out[name] = _table(name, names, layout, rows, labels)

    lines = text.splitlines()
    for i, line in enumerate(lines):
        if m := _FUNC_RE.match(line):
            close()
            name, names, layout, plan = m.group(1), [], None, None
            rows, labels, pending = [], {}, []
            continue
        if name is None:
            continue
        at = line.find(_TABLE)
        if at >= 0 and layout is None and re.search(r"\|\s+#", line[at:]):
            # the class names are on the line above the column numbers
            above = lines[i - 1] if i else ""
            names = (
                re.findall(r"[A-Z]+", above[above.find(_TABLE) + 2 :]) if _TABLE in above else []
            )
            layout, cls = [], -1
            for col, pos in _header_columns(line, at):
                if col == "|":
                    cls += 1
                    continue
                layout.append((cls, col, pos))
            used = {c for c, _col, _pos in layout}
            if not names or any(n not in CLASSES for n in names) or used != set(range(len(names))):
                raise ToolchainError(
                    f"cannot read nvdisasm's life-range table of {name} (classes {names})",
                    'use the nvdisasm of CUDA 12 or 13 (pip install "gpuadvise[toolkit]")',
                )
            plan = _plan(names, layout)
            continue
        code = line[:at] if at >= 0 else line
        if m := _LABEL_RE.match(code.strip()):
            pending.append(m.group("label"))
            continue
        m = _INSTR_RE.match(code)
        if m is None or plan is None or at < 0:
            continue
        offset = int(m.group("off"), 16)
        for label in pending:
            labels[label] = offset
        pending = []
        rows.append(_row(line, offset, m.group("body").strip(), plan))
    close()
    return out


_Plan = tuple[
    tuple[tuple[int, int], ...], tuple[tuple[tuple[int, ...], Callable[[str], Any] | None], ...]
]
"""Where a row's columns are: (class slot, position) of each ``#`` count, and per class slot
(:data:`CLASSES` order) the positions of its mark columns with a getter of those characters."""

_NOT_MARK = re.compile(r"[^\^vx:]")


def _plan(names: list[str], layout: list[tuple[int, str, int]]) -> _Plan:
    counts: list[tuple[int, int]] = []
    marks: list[list[int]] = [[], [], [], []]
    for cls, col, pos in layout:
        slot = CLASSES.index(names[cls])
        if col == "#":
            counts.append((slot, pos))
        else:
            marks[slot].append(pos)
    getters = tuple((tuple(m), operator.itemgetter(*m) if len(m) > 1 else None) for m in marks)
    return tuple(counts), getters


def _row(line: str, offset: int, body: str, plan: _Plan) -> LiveRow:
    n = len(line)
    counts = [0, 0, 0, 0]
    for slot, pos in plan[0]:
        # the count is right-aligned under ``#``: read the number that ends here
        start = pos + 1
        if pos < n:
            while start > 0 and line[start - 1].isdigit():
                start -= 1
        counts[slot] = int(line[start : pos + 1]) if start <= pos else 0
    marks = []
    for positions, getter in plan[1]:
        if getter is not None and positions[-1] < n:
            chars = "".join(getter(line))
        else:
            chars = "".join(line[p] if p < n else " " for p in positions)
        marks.append(_NOT_MARK.sub(" ", chars))
    return LiveRow(
        offset,
        body.strip("{} "),
        (counts[0], counts[1], counts[2], counts[3]),
        (marks[0], marks[1], marks[2], marks[3]),
    )


def _table(
    name: str,
    names: list[str],
    layout: list[tuple[int, str, int]],
    rows: list[LiveRow],
    labels: dict[str, int],
) -> LifeRanges:
    columns: list[list[int]] = [[], [], [], []]
    for cls, col, _pos in layout:
        if col != "#":
            columns[CLASSES.index(names[cls])].append(int(col))
    return LifeRanges(
        name,
        (tuple(columns[0]), tuple(columns[1]), tuple(columns[2]), tuple(columns[3])),
        tuple(rows),
        dict(labels),
    )


# --------------------------------------------------------------------------------------------
# Running nvdisasm


def life_ranges(
    cubin: str | os.PathLike[str], kernel: str, toolchain: Toolchain | None = None
) -> LifeRanges:
    """The life-range table of function ``kernel`` (mangled) of ``cubin``.

    ToolchainError without nvdisasm (``cuobjdump`` prints no life ranges) or when it fails;
    KernelNotFoundError when the cubin has no such function."""
    from gpuadvise.toolchain.sass import cubin_stat, function_index

    path = Path(cubin)
    stat = cubin_stat(path)
    tc = toolchain or find_toolchain()
    if tc.nvdisasm is None:
        raise ToolchainError(
            "nvdisasm was not found, so the live registers cannot be read",
            'pip install "gpuadvise[toolkit]" (nvidia-cuda-nvdisasm) or use a full CUDA toolkit',
        )
    tables = _cached(
        str(path.resolve()),
        stat.st_mtime_ns,
        stat.st_size,
        str(tc.nvdisasm),
        function_index(path, kernel),
    )
    if kernel in tables:
        return tables[kernel]
    raise KernelNotFoundError(
        f"no function {kernel!r} in the life ranges of {path.name}",
        f"pass a mangled name; the cubin has: {', '.join(tables) or 'no functions'}",
    )


@functools.lru_cache(maxsize=16)
def _cached(
    cubin: str, _mtime_ns: int, size: int, tool: str, function: int | None
) -> dict[str, LifeRanges]:
    from gpuadvise.toolchain.sass import life_range_text

    return parse_life_ranges(life_range_text(cubin, _mtime_ns, size, tool, function))
