"""Global-memory coalescing: requests and 32-byte sectors per warp-level global access.

HARDWARE.md §3, as Nsight Compute counts them (``l1tex__t_{requests,sectors}_pipe_lsu_mem_global_op_*``):

- requests: 1 per warp-level instruction executed (a record), whatever its lanes touch.
- sectors: the distinct 32-byte sectors the active lanes touch; a lane accessing ``w`` bytes at
  ``a`` touches sectors ``a // 32 .. (a + w - 1) // 32``. H100, 4-byte loads: stride 1 -> 4 per
  request, 8-byte stride -> 8, 16 -> 16, 32 or more -> 32, all lanes one address -> 1, stride 1
  but 4 bytes off alignment -> 5.
- ideal sectors: ``ceil(bytes / 32)`` where ``bytes`` is the number of distinct bytes the active
  lanes access (the size of the union of their ``[a, a + w)`` ranges): what the same data would
  cost packed into whole, aligned sectors. So 4-byte stride 1: 4 sectors, ideal 4; stride 2: 8,
  ideal 4; a broadcast: 1, ideal 1; 4 bytes off: 5, ideal 4; an array-of-structures field (4 bytes
  every 16): 16, ideal 4. Always ``sectors >= ideal >= 1`` for a record with an active lane.
- cache lines: the distinct 128-byte lines a request touches (what the L2 model replays, through
  :func:`touched_lines`).

Excess % is ``100 * (sectors - ideal) / sectors``, Nsight Compute's "excessive sectors, % of the
total sectors". Only ``Space.GLOBAL`` records count (local memory is interleaved per thread by the
hardware; constant accesses go through another cache). Vectorized over records in chunks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gpuadvise.memo import IdentityMemo
from gpuadvise.model.banks import active_lanes
from gpuadvise.model.lines import (
    Counts,
    Line,
    LineResult,
    Totals,
    chunks,
    lines_of,
    per_instruction,
)
from gpuadvise.trace.access import WARP, AccessTrace, Space

__all__ = [
    "LINE_BYTES",
    "RecordSectors",
    "SECTOR_BYTES",
    "CoalescingLine",
    "CoalescingResult",
    "SectorCounts",
    "SectorTotals",
    "analyze_coalescing",
    "cached_global_sectors",
    "global_sectors",
    "record_sectors",
    "touched_lines",
]

SECTOR_BYTES = 32
LINE_BYTES = 128
CHUNK_RECORDS = 4096

_SENT = np.uint32(0xFFFFFFFF)
_SPAN_LIMIT = 0xFFFFFF00  # a chunk whose addresses span less than this is rebased as a whole
_BYTE_SUM = np.uint64(0x0101010101010101)


@dataclass(frozen=True)
class RecordSectors:
    """Per record: sectors, distinct bytes, 128-byte lines (int32 arrays); ``ideal`` derived."""

    sectors: np.ndarray
    bytes: np.ndarray
    lines: np.ndarray

    @property
    def ideal(self) -> np.ndarray:
        return (self.bytes + SECTOR_BYTES - 1) // SECTOR_BYTES

    def take(self, rows: np.ndarray) -> RecordSectors:
        """The values of records ``rows`` (indices)."""
        return RecordSectors(self.sectors[rows], self.bytes[rows], self.lines[rows])


def _rebase(addr: np.ndarray, act: np.ndarray | None) -> np.ndarray:
    """uint32 addresses relative to a base that is a multiple of 128 (sector and line boundaries
    are kept): one base per chunk when its addresses span under 4 GB, else one per record (the
    lowest active address's line). Inactive lanes hold anything: the caller overwrites them."""
    a = addr
    if act is None:
        lo, hi = a.min(initial=2**64 - 1), a.max(initial=0)
    else:  # each record's active extremes (a chunk spanning 4 GB needs them; most do)
        row_lo = np.where(act, a, np.uint64(2**64 - 1)).min(axis=1)
        row_hi = np.where(act, a, np.uint64(0)).max(axis=1)
        lo, hi = row_lo.min(initial=2**64 - 1), row_hi.max(initial=0)
    if hi < lo:  # no active lane
        return np.zeros(a.shape, dtype=np.uint32)
    base = np.uint64(int(lo) & ~(LINE_BYTES - 1))
    if int(hi) - int(base) < _SPAN_LIMIT:
        return (a - base).astype(np.uint32)  # inactive lanes may wrap: they are overwritten
    # a chunk of several buffers (2^36 apart): a base per record
    if act is None:
        row_lo, row_hi = a.min(axis=1), a.max(axis=1)
    row_lo &= np.uint64(2**64 - LINE_BYTES)
    live_rows = row_hi >= row_lo  # a record with no active lane: (MAX & ~127, 0)
    if ((row_hi - row_lo)[live_rows] >= _SPAN_LIMIT).any():
        raise ValueError("the active lanes of one warp access span more than 4 GB")
    return (a - row_lo[:, None]).astype(np.uint32)  # inactive lanes may wrap, as above


def _distinct_sorted(s: np.ndarray, has_sent: np.ndarray | None) -> np.ndarray:
    """Distinct values per row of a row-sorted (n, 32) array, the sentinel not counted."""
    n = len(s)
    flags = np.empty((n, WARP), dtype=np.uint8)
    flags[:, 0] = 1
    np.not_equal(s[:, 1:], s[:, :-1], out=flags[:, 1:].view(bool))
    words = flags.view(np.uint64)  # (n, 4): 8 flags each; byte sum by multiplication
    total = (words[:, 0] * _BYTE_SUM) >> np.uint64(56)
    for j in range(1, words.shape[1]):
        total += (words[:, j] * _BYTE_SUM) >> np.uint64(56)
    out = total.astype(np.int32)
    if has_sent is not None:
        out -= has_sent
    return out


def _interval_union(lo: np.ndarray, hi: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per row: the size of the union of the integer ranges [lo, hi] (rows sorted by lo, hi
    non-decreasing along the row); invalid entries (sorted last) count nothing."""
    prev = np.empty_like(hi)
    prev[:, 0] = -1
    prev[:, 1:] = hi[:, :-1]
    start = np.maximum(lo, prev + 1)
    part = np.clip(hi - start + 1, 0, None)
    part[~valid] = 0
    return part.sum(axis=1).astype(np.int32)


def _chunk_sectors(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(recs)
    if n == 0:
        z = np.zeros(0, dtype=np.int32)
        return z, z.copy(), z.copy()
    mask = recs["mask"]
    full = bool((mask == np.uint32(0xFFFFFFFF)).all())
    act = None if full else active_lanes(mask)
    rel = _rebase(np.ascontiguousarray(recs["addr"]), act)
    width = recs["width"].astype(np.uint32)
    if (width == 0).any():
        raise ValueError("a global access of width 0")
    wcol = width[:, None]
    pow2 = (width & (width - np.uint32(1))) == 0
    off = (rel & (wcol - np.uint32(1))) != 0
    if act is not None:
        off &= act
    aligned = bool(pow2.all()) and not off.any() and bool((width <= SECTOR_BYTES).all())
    if act is not None:
        rel |= (~act).view(np.uint8).astype(np.uint32) * _SENT
    rel.sort(axis=1)
    has_sent = None if act is None else rel[:, -1] == _SENT
    if aligned:
        # naturally aligned, at most a sector wide: each lane in one sector and one line, and two
        # lanes' byte ranges are equal or disjoint
        distinct = _distinct_sorted(rel, has_sent)
        nbytes = distinct * width.astype(np.int32)
        sectors = _distinct_sorted(rel >> np.uint32(5), has_sent)
        lines = _distinct_sorted(rel >> np.uint32(7), has_sent)
        return sectors, nbytes, lines
    s = rel.astype(np.int64)
    valid = rel != _SENT if act is not None else np.ones(rel.shape, dtype=bool)
    e = s + width.astype(np.int64)[:, None] - 1  # last byte
    nbytes = _interval_union(s, e, valid)
    sectors = _interval_union(s >> 5, e >> 5, valid)
    lines = _interval_union(s >> 7, e >> 7, valid)
    return sectors, nbytes, lines


def record_sectors(records: np.ndarray) -> RecordSectors:
    """Sectors, distinct bytes and 128-byte lines per record (each taken as a global access).

    A record with no active lane touches nothing (0, 0, 0); it still counts as a request.
    """
    n = len(records)
    sectors = np.empty(n, dtype=np.int32)
    nbytes = np.empty(n, dtype=np.int32)
    lines = np.empty(n, dtype=np.int32)
    for s in chunks(n, CHUNK_RECORDS):
        sectors[s], nbytes[s], lines[s] = _chunk_sectors(records[s])
    return RecordSectors(sectors, nbytes, lines)


_GLOBAL_SECTORS: IdentityMemo[np.ndarray, RecordSectors] = IdentityMemo()


def global_sectors(records: np.ndarray) -> RecordSectors:
    """:func:`record_sectors` of each ``Space.GLOBAL`` record of ``records`` (0, 0, 0 for the
    records of other spaces), computed once per records array while it lives: the coalescing
    model, the trace view, the estimates and GA303 read the same trace's (issue 31). The array
    must not change in place after the first call (no trace's does)."""
    return _GLOBAL_SECTORS(records, _global_sectors)


def cached_global_sectors(records: np.ndarray) -> RecordSectors | None:
    """:func:`global_sectors` of ``records`` if some caller already made them, else None."""
    return _GLOBAL_SECTORS.peek(records)


def _global_sectors(records: np.ndarray) -> RecordSectors:
    n = len(records)
    sectors = np.zeros(n, dtype=np.int32)
    nbytes = np.zeros(n, dtype=np.int32)
    lines = np.zeros(n, dtype=np.int32)
    for sl in chunks(n, 8 * CHUNK_RECORDS):  # the record fields read while they are cached
        part = records[sl]
        sel = part["space"] == int(Space.GLOBAL)
        if not sel.any():
            continue
        if sel.all():
            rs = record_sectors(part)
            sectors[sl], nbytes[sl], lines[sl] = rs.sectors, rs.bytes, rs.lines
        else:
            rs = record_sectors(part[sel])
            at = sl.start + np.flatnonzero(sel)
            sectors[at], nbytes[at], lines[at] = rs.sectors, rs.bytes, rs.lines
    return RecordSectors(sectors, nbytes, lines)


def touched_lines(
    records: np.ndarray, line_bytes: int = LINE_BYTES
) -> tuple[np.ndarray, np.ndarray]:
    """(record index, line number) of every distinct ``line_bytes`` line each record touches.

    In record order, and within a record in increasing address order: the order in which an L2
    model may replay the trace. ``line number`` is ``address // line_bytes``. Every record is
    taken as it is (filter the records by space first).
    """
    if line_bytes <= 0 or line_bytes & (line_bytes - 1):
        raise ValueError("line_bytes must be a power of two")
    shift = np.uint64(line_bytes.bit_length() - 1)
    rec_out: list[np.ndarray] = []
    line_out: list[np.ndarray] = []
    for sl in chunks(len(records), CHUNK_RECORDS):
        part = records[sl]
        act = active_lanes(part["mask"])
        addr = np.ascontiguousarray(part["addr"])
        width = part["width"].astype(np.uint64)[:, None]
        first = addr >> shift
        last = (addr + np.maximum(width, 1) - np.uint64(1)) >> shift
        if bool(((first == last) | ~act).all()):  # no lane crosses a line: half the sort
            both, live = first, act
        else:
            both = np.concatenate([first, last], axis=1)
            live = np.concatenate([act, act], axis=1)
        both[~live] = np.uint64(2**64 - 1)
        both.sort(axis=1)
        keep = np.empty(both.shape, dtype=bool)
        keep[:, 0] = True
        np.not_equal(both[:, 1:], both[:, :-1], out=keep[:, 1:])
        keep &= both != np.uint64(2**64 - 1)
        rows, cols = np.nonzero(keep)
        rec_out.append(rows.astype(np.int64) + sl.start)
        line_out.append(both[rows, cols])
    if not rec_out:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    return np.concatenate(rec_out), np.concatenate(line_out)


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class SectorCounts(Counts):
    """Requests (warp-level instructions), sectors, ideal sectors, distinct bytes, 128-B lines.

    ``excess``: sectors beyond the ideal; ``excess_pct``: in % of all sectors (Nsight Compute's
    wording).
    """

    COST: ClassVar[str] = "sectors"

    requests: float
    sectors: float
    ideal: float
    bytes: float
    lines: float

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class SectorTotals(Totals[SectorCounts]):
    """Counts by kind: loads, stores, and atomics (reductions included)."""

    COUNTS: ClassVar[type[Counts]] = SectorCounts


@dataclass(frozen=True)
class CoalescingLine(Line):
    """Global accesses of one kind at one source line, over the traced CTAs.

    ``worst_sectors``: the most sectors one request touched; ``insts``: the PTX instructions.
    """

    COUNTS: ClassVar[type[Counts]] = SectorCounts

    requests: int
    sectors: int
    ideal: int
    bytes: int
    lines: int
    worst_sectors: int
    insts: tuple[int, ...] = ()

    @property
    def sectors_per_request(self) -> float:
        return self.counts.sectors_per_request  # type: ignore[attr-defined,no-any-return]


@dataclass(frozen=True)
class CoalescingResult(LineResult[CoalescingLine, SectorTotals]):
    """The coalescing model of one launch (:class:`~gpuadvise.model.lines.LineResult`)."""

    LINE: ClassVar[type[Line]] = CoalescingLine
    TOTALS: ClassVar[type[Totals[Any]]] = SectorTotals


_SUMMED = ("sectors", "ideal", "bytes", "lines")


def analyze_coalescing(trace: AccessTrace, records: np.ndarray | None = None) -> CoalescingResult:
    """The coalescing model over the global accesses of ``trace``.

    ``records``: use these instead of ``trace.records`` (reconciled records); they must index
    ``trace.instructions``. The records' sectors are :func:`global_sectors`' (made once).
    """
    rs = global_sectors(trace.records if records is None else records)
    ideal = rs.ideal

    def measure(rows: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        s = rs.sectors[rows]
        values = {
            "sectors": s,
            "ideal": ideal[rows],
            "bytes": rs.bytes[rows],
            "lines": rs.lines[rows],
        }
        return values, s

    per = per_instruction(
        trace, records, Space.GLOBAL, _SUMMED, measure, np.int64, 8 * CHUNK_RECORDS, by_row=True
    )
    lines = [
        CoalescingLine(
            file=file,
            line=line,
            kind=kind,
            requests=int(per.count[idx].sum()),
            sectors=int(per.sums["sectors"][idx].sum()),
            ideal=int(per.sums["ideal"][idx].sum()),
            bytes=int(per.sums["bytes"][idx].sum()),
            lines=int(per.sums["lines"][idx].sum()),
            worst_sectors=int(per.worst[idx].max()),
            insts=tuple(idx),
        )
        for file, line, kind, idx in lines_of(trace, per)
    ]
    return CoalescingResult.of_lines(lines, trace)  # type: ignore[no-any-return]
