"""A lane-level view of an :class:`~gpuadvise.trace.access.AccessTrace`: the global accesses of a
sample of the traced CTAs, one row per active lane, with the buffer, the byte offset in it and the
thread (:class:`TraceView`), and what the layout rules measure on it.

From the view: the sectors a warp's accesses at a line touch against the bytes it uses
(:func:`warp_footprint`), how many threads of a CTA load each address (:func:`cta_reuse`), which
struct field each load instruction reads (:func:`field_loads`), the stride of a walk
(:func:`stride_mode`), and the access pattern of a line (:func:`infer_pattern`): each thread's
element visits as offsets ``(dx, dy)`` from the thread's own element ``y * pitch + x``, the fields
read per visit and how often (loads made under a data-dependent condition, like ``a && b`` short
circuits, keep their share); the layout proxies of GA301, GA302 and GA305 reproduce it. Pure: numpy
over the trace, no I/O but the kernel's source text (for the pointee types of its parameters).
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.arrays import distinct as unique_int
from gpuadvise.arrays import (
    distinct_first,
    distinct_inverse,
    distinct_rows,
    lexsort_pair,
    most_common,
    run_heads,
    sort_in_place,
    stable_argsort,
)
from gpuadvise.model.roofline import l1_cycles
from gpuadvise.spec.kernel_spec import KernelSpec
from gpuadvise.trace.access import RECORD, WARP, AccessTrace, Kind, Space, record_weights

__all__ = [
    "BufferInfo",
    "FieldLoad",
    "Lanes",
    "Pattern",
    "MAX_SAMPLED_CTAS",
    "Reuse",
    "SECTOR",
    "TraceView",
    "buffer_infos",
    "cta_reuse",
    "field_loads",
    "forget_view",
    "infer_pattern",
    "integer_args",
    "stride_mode",
    "trace_view",
    "unique_int",
    "warp_footprint",
]

SECTOR = 32
MAX_SAMPLED_CTAS = 64
MAX_VIEW_LANES = 1 << 23
"""Active lanes a :class:`TraceView` holds at most (about 60 bytes each, so ~500 MB): CTAs that
loop over long rows (llm.c's layernorm, 1.2 million lanes per CTA) are sampled more thinly."""
MAX_WARP_LANES = 1 << 20
"""Active lanes one warp keeps in a :class:`TraceView`. A warp over it (a thread walking a
50,257-float row three times: llm.c's softmax, 8 million lanes per warp) keeps the first records
of each of its instructions, as many per instruction as fit (the first iterations of its loops),
and :attr:`TraceView.rec_weight` counts the records left out: every rule's pass over the view
costs as much as its lanes, and a loop's first iterations show its pattern as well as all of
them."""
SHARED_BY_WARPS = 2.0
"""Warps of a CTA over the view's lane bound that read the sector an access reads (on average
over the accesses: :func:`_warps_per_sector`) from which the view keeps every warp, each cut to
fewer first iterations, rather than some warps scaled to all: a pick counts a sector shared by
``f`` warps ``f`` times (HeCBench AIDW's broadcast loop: 8, its 8 warps; a thread per row: 1)."""
MAX_ACCESS_CACHE = 1 << 23
"""Lane indices :meth:`TraceView.access` keeps at most (int32: 32 MB), and never more than the
view's lanes."""
_MARK_FRACTION = 16
"""TraceView.lanes_of sorts the lanes of several instructions when they are fewer than this
fraction of the view's, and marks them in a mask of every lane otherwise."""
MAX_VISITS = 256
MIN_COVERAGE = 0.9
VIEW_RECORD = np.dtype(
    [
        (n, RECORD[n])
        # the trace's fields but ``addr``, the 8-byte one first: 32 bytes, no padding
        for n in ("cta", "inst", "warp", "mask", "epoch", "extra", "width", "space", "kind")
    ],
    align=True,
)
"""What :attr:`TraceView.records` holds of each record: every field of the trace's but the
lanes' addresses (256 of a record's 287 bytes), which the view's lanes hold as offsets in their
buffers; the same values and types, 32 bytes a record (issue 31: the copy is held through the
rules, 60-70 MB of addresses on the corpus's largest views)."""


@dataclass(frozen=True)
class BufferInfo:
    """A buffer of the launch as the trace placed it: base address, bytes, elements."""

    name: str
    base: int
    size: int
    elem_bytes: int
    count: int
    type_name: str
    is_struct: bool


def buffer_infos(trace: AccessTrace, spec: KernelSpec) -> dict[str, BufferInfo]:
    """The launch's buffers with their element size: the spec's count over the traced bytes; a
    buffer the user did not give is the default one (an element per thread of the launch, of
    the type the parameter points to)."""
    from gpuadvise.errors import GpuAdviseError, UsageError
    from gpuadvise.spec import expr
    from gpuadvise.spec.cuda_types import StructType, lookup_elem

    try:
        env = spec.env()
    except UsageError:
        env = {}
    pointees: dict[str, str] = {}
    try:
        from gpuadvise.source.signature import parse_signature

        text = Path(spec.source).read_text(encoding="utf-8", errors="replace")
        pointees = {p.name: p.pointee for p in parse_signature(text, spec.kernel) if p.pointee}
    except (GpuAdviseError, OSError, AttributeError, TypeError):
        pass
    out: dict[str, BufferInfo] = {}
    for name, (base, size) in trace.buffers.items():
        bs = spec.buffer(name)
        try:
            if bs is not None:
                count, elem = int(expr.evaluate(bs.count_expr, env)), bs.elem_type
            else:
                count = int(spec.launch.total_threads)
                elem = lookup_elem(pointees.get(name) or "void")
        except (UsageError, AttributeError):
            continue
        if count <= 0 or size % count:
            continue
        out[name] = BufferInfo(
            name,
            int(base),
            int(size),
            size // count,
            count,
            elem.name,
            isinstance(elem, StructType),
        )
    return out


@dataclass(frozen=True)
class Lanes:
    """Active lanes of some records, one row per lane, in execution order.

    ``rec``: the record's index in :attr:`TraceView.records`; ``cta``: dense index of the CTA
    among the sampled ones; ``tid``: the thread in the CTA (warp x 32 + lane); ``off``: the byte
    offset in the buffer; ``width``: bytes per lane.
    """

    rec: np.ndarray
    inst: np.ndarray
    cta: np.ndarray
    tid: np.ndarray
    off: np.ndarray
    width: np.ndarray

    def __len__(self) -> int:
        return len(self.rec)

    def take(self, keep: np.ndarray) -> Lanes:
        """The lanes ``keep`` selects (indices or a mask over the lanes). A mask is made indices
        once: six gathers by index are several times faster than six by a boolean mask. Each
        column is gathered when it is first read (:class:`_TakenLanes`): most readers of a
        line's lanes read two to four of the six (issue 31: ``take`` was the layout rules'
        largest own cost after the sorts). ``keep`` is held until then: not to be changed."""
        if isinstance(keep, np.ndarray) and keep.dtype == bool and keep.ndim == 1:
            keep = np.flatnonzero(keep)
        if isinstance(keep, np.ndarray) and keep.ndim == 1 and keep.dtype.kind in "iu":
            return _TakenLanes(self, keep)
        return Lanes(
            self.rec[keep],
            self.inst[keep],
            self.cta[keep],
            self.tid[keep],
            self.off[keep],
            self.width[keep],
        )

    def columns(self) -> tuple[np.ndarray, ...]:
        """The six columns, in the constructor's order."""
        return (self.rec, self.inst, self.cta, self.tid, self.off, self.width)

    def column_slice(self, name: str, lo: int, hi: int) -> np.ndarray:
        """``getattr(self, name)[lo:hi]``, the column ``name``'s lanes ``lo`` to ``hi``, without
        gathering the whole column where it is not read yet (:meth:`take`'s lanes: the source's
        at the slice's kept indices, not kept; issue 31: a reader of millions of lanes a chunk
        at a time holds none of their columns)."""
        col: np.ndarray = getattr(self, name)
        return col[lo:hi]

    def lean(self) -> Lanes:
        """The same lanes holding none of the columns read so far: of :meth:`take`'s lanes,
        the kept indices over the first source that is not itself taken, each column gathered
        again when read (issue 31: GA305 keeps a line's lanes through the rest of its lines,
        after reading five of their six columns; on 8 million lanes 190 MB instead of 32);
        lanes that hold their columns, as they are."""
        return self

    @staticmethod
    def joined(parts: Sequence[Lanes]) -> Lanes:
        """The lanes of ``parts`` one after another: where every part is taken from the same
        source (:meth:`take`, :meth:`lean`), taken from it by the parts' indices joined, no
        column gathered until it is read; else each column concatenated. The same values
        either way."""
        leans = [p.lean() for p in parts]
        sources = {id(p.__dict__.get("_source")) for p in leans if isinstance(p, _TakenLanes)}
        if len(sources) == 1 and all(isinstance(p, _TakenLanes) for p in leans):
            source = leans[0].__dict__["_source"]
            return _TakenLanes(source, np.concatenate([p.__dict__["_keep"] for p in leans]))
        cols = [p.columns() for p in parts]
        return Lanes(*(np.concatenate([c[k] for c in cols]) for k in range(len(cols[0]))))


class _TakenLanes(Lanes):
    """:meth:`Lanes.take`'s lanes: each column gathered from the source lanes by the kept
    indices when it is first read, then kept (the same values as the eager gather, which made
    all six). Pickled as plain :class:`Lanes` (its columns gathered), not with its source."""

    # (not a dataclass: the fields are properties over the source; the frozen parent's
    # __setattr__ refuses assignment, hence object.__setattr__)
    def __init__(self, source: Lanes, keep: np.ndarray) -> None:
        object.__setattr__(self, "_source", source)
        object.__setattr__(self, "_keep", keep)
        object.__setattr__(self, "_got", {})

    def _column(self, name: str) -> np.ndarray:
        got: dict[str, np.ndarray] = self.__dict__["_got"]
        col = got.get(name)
        if col is None:
            col = got[name] = getattr(self.__dict__["_source"], name)[self.__dict__["_keep"]]
        return col

    @property
    def rec(self) -> np.ndarray:
        return self._column("rec")

    @property
    def inst(self) -> np.ndarray:
        return self._column("inst")

    @property
    def cta(self) -> np.ndarray:
        return self._column("cta")

    @property
    def tid(self) -> np.ndarray:
        return self._column("tid")

    @property
    def off(self) -> np.ndarray:
        return self._column("off")

    @property
    def width(self) -> np.ndarray:
        return self._column("width")

    def __len__(self) -> int:
        return len(self.__dict__["_keep"])

    def column_slice(self, name: str, lo: int, hi: int) -> np.ndarray:
        got: np.ndarray | None = self.__dict__["_got"].get(name)
        if got is not None:
            return got[lo:hi]
        col: np.ndarray = getattr(self.__dict__["_source"], name)
        return col[self.__dict__["_keep"][lo:hi]]

    def lean(self) -> Lanes:
        source, keep = self.__dict__["_source"], self.__dict__["_keep"]
        while isinstance(source, _TakenLanes):  # (taken from taken lanes: one gather)
            source, keep = source.__dict__["_source"], source.__dict__["_keep"][keep]
        return _TakenLanes(source, keep)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Lanes, self.columns())


class TraceView:
    """The global accesses of up to ``max_ctas`` traced CTAs (evenly spread over those traced),
    fewer when they have more than ``max_lanes`` active lanes together (at least one CTA; of a
    single CTA over it, some of its warps, evenly spread, and ``scale`` counts the others; or,
    where its warps share sectors, every warp cut to fewer first iterations), lane by lane, with
    the buffer each lane reaches; shared by the layout rules of one run."""

    def __init__(
        self,
        trace: AccessTrace,
        buffers: Mapping[str, BufferInfo],
        max_ctas: int = MAX_SAMPLED_CTAS,
        max_lanes: int = MAX_VIEW_LANES,
    ) -> None:
        from gpuadvise.model.banks import active_lanes
        from gpuadvise.model.coalescing import cached_global_sectors, record_sectors

        self.grid = tuple(int(g) for g in trace.grid)
        self.block = tuple(int(b) for b in trace.block)
        self.total_ctas = int(trace.total_ctas)
        self.buffers = dict(buffers)
        # the CTAs are chosen on the record fields first: one copy, of the chosen records only
        all_recs = trace.records
        glob = all_recs["space"] == int(Space.GLOBAL)
        rec_cta = all_recs["cta"]
        ctas = unique_int(rec_cta[glob])
        if len(ctas) > max_ctas:
            pick = np.linspace(0, len(ctas) - 1, max_ctas).round().astype(np.int64)
            ctas = ctas[np.unique(pick)]
            glob &= np.isin(rec_cta, ctas)
        # the lanes the full run would have: a sampled loop's record counts its skipped
        # executions (the sample is cut as its full run would be, not kept 5x larger)
        n_lanes = _weighted_lanes(all_recs, glob)
        if n_lanes > max_lanes and len(ctas) > 1:
            keep = max(1, len(ctas) * max_lanes // n_lanes)
            pick = np.linspace(0, len(ctas) - 1, keep).round().astype(np.int64)
            ctas = ctas[np.unique(pick)]
            glob &= np.isin(rec_cta, ctas)
        # one CTA over the bound (llm.c's softmax: 38 million lanes): some of its warps, evenly
        # spread, stand for the others, where its warps touch sectors of their own. Where they
        # share them (HeCBench AIDW: 8 warps each walking the same 102,400 points, ``dx[j]`` one
        # address for every thread) the first warp's misses are the others' L1 hits, which a
        # view of some warps scaled to all counts as every warp's own misses (AIDW's 1 warp of
        # 8: 35 GB of DRAM for 1.2 MB read): there every warp is kept, each cut to fewer of its
        # first iterations, as many lanes in all as the warps a pick would keep (the cut's
        # weights count the rest); a pick only where even that cut is over the bound.
        warp_scale = 1.0
        cut: tuple[np.ndarray | None, np.ndarray | None] | None = None
        n_lanes = _weighted_lanes(all_recs, glob)
        if n_lanes > max_lanes:
            warps = unique_int(all_recs["warp"][glob])
            keep = max(1, len(warps) * max_lanes // n_lanes)
            if keep < len(warps) and _warps_per_sector(all_recs[glob]) >= SHARED_BY_WARPS:
                # the lanes the pick's ``keep`` warps would hold, spread over every warp
                per_warp = min(n_lanes // len(warps), MAX_WARP_LANES)
                cut = _kept_iterations(all_recs[glob], max(keep * per_warp // len(warps), WARP))
                kept_mask = cut[0]
                held = (
                    n_lanes
                    if kept_mask is None
                    else int(np.bitwise_count(all_recs["mask"][glob][kept_mask]).sum())
                )
                if held > max_lanes:
                    cut = None
            if keep < len(warps) and cut is None:
                pick = np.linspace(0, len(warps) - 1, keep).round().astype(np.int64)
                kept = warps[np.unique(pick)]
                glob &= np.isin(all_recs["warp"], kept)
                warp_scale = len(warps) / len(kept)
        rows = np.flatnonzero(glob)  # the view's records' indices in the trace
        recs = all_recs[rows]
        # (the records the CTA's cut was found on: the same, in the same order)
        first, weight = _kept_iterations(recs, MAX_WARP_LANES) if cut is None else cut
        if first is not None:
            recs, rows = recs[first], rows[first]
        self.iterations_sampled = weight is not None or trace.sampled_iterations
        self.rec_weight: np.ndarray = np.ones(len(recs)) if weight is None else weight
        # per record: its warp's instruction lost its later records to the cut (the weight of
        # the cut alone is the group's executions over those kept: 1 where none was cut); its
        # last pass over a row may be partial (HeCBench contraction's cut ends inside a sampled
        # iteration: 14 of its 16 loads kept)
        self.rec_cut: np.ndarray = (
            np.zeros(len(recs), bool) if weight is None else np.asarray(weight > 1.0)
        )
        # the emulator's own sampling of long loops: a record stands for 1 + extra executions
        emulated = record_weights(recs)
        if emulated is not None:
            self.rec_weight = self.rec_weight * emulated
        self.ctas = ctas
        self.work = trace.work  # what the CTAs execute (the execution model's input), per CTA
        stand_for = trace.launch_working_ctas  # CTAs doing memory work, when some do none
        self.scale = (
            (self.total_ctas if stand_for is None else stand_for) / max(len(ctas), 1) * warp_scale
        )
        # the trace's per-record sectors when the coalescing model made them (issue 31)
        whole = cached_global_sectors(all_recs)
        rs = record_sectors(recs) if whole is None else whole.take(rows)
        self.sector_counts = rs  # sectors, bytes and lines per record of the view
        self.rec_sectors = rs.sectors.astype(np.int64)
        self.rec_ideal = rs.ideal.astype(np.int64)
        act = active_lanes(recs["mask"]) if len(recs) else np.zeros((0, WARP), bool)
        # each active lane's record and lane from its flat index, row x 32 + lane (the same
        # order and values as ``np.nonzero(act)``, which made its two index arrays 2-4 times
        # slower on the 8 million lanes of HeCBench softmax, issue 31)
        rows = np.flatnonzero(act)
        lanes = rows & (WARP - 1)
        rows >>= WARP.bit_length() - 1
        # (the mask selects the lanes in the order of nonzero's: row by row)
        addr = recs["addr"][act] if len(rows) else np.zeros(0, np.uint64)
        del act
        # the records without their addresses from here on (the lanes' offsets hold them)
        self.records = recs = _without_addr(recs)
        names = sorted(self.buffers, key=lambda n: self.buffers[n].base)
        bases = np.array([self.buffers[n].base for n in names], dtype=np.uint64)
        ends = np.array([self.buffers[n].base + self.buffers[n].size for n in names], np.uint64)
        which = np.searchsorted(bases, addr, side="right")
        which -= 1  # (in place: no second lane-sized array, issue 31)
        inside = which >= 0
        safe = np.clip(which, 0, max(len(names) - 1, 0), out=which)
        del which
        if len(names):
            inside &= addr < ends[safe]
            # (int64 arithmetic wraps as uint64's does: the same offsets, one pass fewer)
            off = addr.view(np.int64) - bases.view(np.int64)[safe]
        else:
            off = np.zeros(len(addr), np.int64)
        del addr
        self.buffer_names = names
        # the lanes' index columns (record, instruction, CTA, thread, width, buffer) in int32
        # where every value fits (checked here: the records, the CTAs, the instructions and
        # the threads number fewer than 2**31), half the memory of int64 (issue 31); the
        # offsets stay int64. Who combines them into wider keys widens them first.
        narrow = (
            max(
                len(recs),
                len(ctas),
                len(trace.instructions),
                (int(recs["warp"].max()) + 1) * WARP if len(recs) else 0,
                len(names),
            )
            < 2**31 - 1
        )
        ix = np.int32 if narrow else np.int64
        buf: np.ndarray = safe.astype(ix)
        del safe
        buf[~inside] = -1
        del inside
        self.lane_buffer = buf
        # the records' fields made contiguous (ix) before they are spread over the lanes: a
        # gather from the wide records per lane is the slow part
        tid = (recs["warp"].astype(ix) * WARP)[rows]
        np.add(tid, lanes, out=tid, casting="same_kind")  # lane < 32: fits
        del lanes
        self.lanes = Lanes(
            rows.astype(ix),
            recs["inst"].astype(ix)[rows],
            np.searchsorted(ctas, recs["cta"]).astype(ix)[rows],
            tid,
            off,
            recs["width"].astype(ix)[rows],
        )
        del rows, recs
        # the user's line of each instruction (its call site for code inlined from a header), as
        # the coalescing model keys its lines
        self.inst_line = [trace.line_of(k) for k in range(len(trace.instructions))]
        self.inst_kind = np.array([int(i.kind) for i in trace.instructions] or [0], np.int64)
        # evict-first accesses (`__ldcs`/`__stcs`: `.cs`, `L2::evict_first`), the first lines
        # the caches give up: they push no other line out
        self.inst_streaming = np.array(
            [_streaming(i.opcode) for i in trace.instructions] or [False], bool
        )
        self._l1_total: float | None = None
        self._by_inst: tuple[np.ndarray, np.ndarray] | None = None
        self._inst_buffers: dict[int, set[int]] | None = None
        self._warps: int | None = None
        self._useful: float | None = None
        self._patterns: dict[tuple[Any, ...], Pattern | str] = {}
        self._accessed: dict[tuple[bytes, str], tuple[np.ndarray, np.ndarray]] = {}
        self._accessed_lanes = 0
        self._rec_has_lanes: np.ndarray | None = None

    def lines(
        self, same_file: Callable[[str | None], bool], kinds: Iterable[Kind]
    ) -> list[tuple[str | None, int, Kind]]:
        """(file, line, kind) of the global accesses in the source file ``same_file(file)``
        accepts, in line order."""
        want = {int(k) for k in kinds}
        seen: set[tuple[str | None, int, Kind]] = set()
        for i in unique_int(self.records["inst"]):
            file, line = self.inst_line[int(i)]
            kind = int(self.inst_kind[int(i)])
            if line is None or kind not in want or not same_file(file):
                continue
            seen.add((file, line, Kind(kind)))
        return sorted(seen, key=lambda t: (t[1], int(t[2])))

    def insts_at(self, file: str | None, line: int, kind: Kind) -> np.ndarray:
        return np.array(
            [
                i
                for i, (f, ln) in enumerate(self.inst_line)
                if f == file and ln == line and int(self.inst_kind[i]) == int(kind)
            ],
            np.int64,
        )

    def _inst_index(self) -> tuple[np.ndarray, np.ndarray]:
        """The lanes by instruction (each one's in lane order) and where each instruction's
        start, built on first use."""
        if self._by_inst is None:
            order = stable_argsort(self.lanes.inst)
            bounds = np.searchsorted(
                self.lanes.inst[order], np.arange(len(self.inst_line) + 1), side="left"
            )
            # held while the view lives: lane indices in int32 where they fit, as the view's
            # own index columns (issue 31); lanes_of's callers only index with them
            if len(order) < 2**31 - 1:
                order = order.astype(np.int32)
            self._by_inst = (order, bounds)
        return self._by_inst

    def build_indexes(self) -> None:
        """Build now the indexes :meth:`lanes_of` (and through it :meth:`access`) and
        :meth:`buffers_at` build on first use: the lanes by instruction and the distinct
        (instruction, buffer) pairs. For a caller that shares the view with a process it
        forks (:func:`gpuadvise.rules.evaluate.shared_pieces`): each process built its own
        after the fork (issue 31: 0.15-0.2 CPU-s twice on HeCBench softmax's 8 M lanes)."""
        self._inst_index()
        self.buffers_at(np.zeros(0, np.int64))

    def lane_insts(self) -> np.ndarray:
        """The instructions with lanes in the view, ascending (``distinct(lanes.inst)``, from
        the index :meth:`lanes_of` reads: no sort of every lane)."""
        _, bounds = self._inst_index()
        return np.flatnonzero(bounds[1:] > bounds[:-1])

    def lanes_of(self, insts: np.ndarray) -> np.ndarray:
        """Indices of the lanes of instructions ``insts``, in lane order (from an index of the
        lanes by instruction built on first use: no pass over every lane per call)."""
        order, bounds = self._inst_index()
        n = len(bounds) - 1
        parts = [
            order[bounds[i] : bounds[i + 1]]
            for i in np.unique(np.asarray(insts, np.int64))
            if 0 <= i < n
        ]
        if not parts:
            return np.zeros(0, np.int64)
        if len(parts) == 1:
            return parts[0]
        total = sum(len(p) for p in parts)
        if total * _MARK_FRACTION < len(self.lanes):
            return np.sort(np.concatenate(parts))
        # many lanes (an unrolled loop's instructions of one line): marked, not sorted
        mark = np.zeros(len(self.lanes), bool)
        for p in parts:
            mark[p] = True
        return np.flatnonzero(mark)

    def records_of(self, insts: np.ndarray) -> np.ndarray:
        """The records of instructions ``insts`` that have lanes in the view, ascending:
        ``distinct(lanes.rec[lanes_of(insts)])`` from the records alone (a lane's instruction
        is its record's), not a gather of every lane of the instructions (issue 31: GA301
        asked for every line's, 0.17 CPU-s on HeCBench softmax's 8 M lanes)."""
        if self._rec_has_lanes is None:
            self._rec_has_lanes = np.bincount(self.lanes.rec, minlength=len(self.records)) > 0
        want = np.isin(self.records["inst"], np.asarray(insts, np.int64))
        want &= self._rec_has_lanes
        return np.flatnonzero(want)

    def access(self, insts: np.ndarray, buffer: str) -> tuple[Lanes, np.ndarray]:
        """The lanes of instructions ``insts`` that reach ``buffer``, and their records' indices.

        Which lanes and records those are is kept per (instructions, buffer), at most
        :data:`MAX_ACCESS_CACHE` lane indices a view (int32 where the lanes allow): the layout
        rules ask for the same lines' accesses in turn (GA301, GA303, GA305, GA306, GA308, each
        finding's estimate again), and each asking costs a pass over the lines' lanes (issue
        31). Each call gathers its own :class:`Lanes` and gets its own copy of the records."""
        ids = np.unique(np.asarray(insts, np.int64))
        key = (ids.tobytes(), buffer)
        got = self._accessed.get(key)
        if got is None:
            got = self._access(ids, buffer)
            if self._accessed_lanes + len(got[0]) <= min(MAX_ACCESS_CACHE, len(self.lanes)):
                self._accessed[key] = got
                self._accessed_lanes += len(got[0])
        idx, recs = got
        return self.lanes.take(idx), recs.copy()

    def _access(self, insts: np.ndarray, buffer: str) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`access`'s lane indices (ascending) and distinct records."""
        b = self.buffer_names.index(buffer)
        idx = self.lanes_of(insts)
        idx = idx[self.lane_buffer[idx] == b]
        if len(self.lanes) <= np.iinfo(np.int32).max:
            idx = idx.astype(np.int32)
        rec = self.lanes.rec[idx]
        if len(rec) > 1 and bool((rec[1:] >= rec[:-1]).all()):
            # in lane order, so by record (the view's lanes are): the distinct records are the
            # first of each run, no sort
            head = np.empty(len(rec), bool)
            head[0] = True
            np.not_equal(rec[1:], rec[:-1], out=head[1:])
            return idx, rec[head]
        return idx, unique_int(rec)

    def buffers_at(self, insts: np.ndarray) -> list[str]:
        """The buffers the lanes of instructions ``insts`` reach, in buffer order (from the
        distinct (instruction, buffer) pairs of the view, found on first use: the layout rules
        ask for every line, 32 times a run on llm.c's layernorm)."""
        if self._inst_buffers is None:
            inside = self.lane_buffer >= 0
            nb = max(len(self.buffer_names), 1)
            # (int64: the lanes' int32 instruction times the buffers may pass 2**31)
            inst = self.lanes.inst[inside].astype(np.int64)
            pairs = unique_int(inst * nb + self.lane_buffer[inside])
            by_inst: dict[int, set[int]] = {}
            for i, b in zip((pairs // nb).tolist(), (pairs % nb).tolist(), strict=True):
                by_inst.setdefault(i, set()).add(b)
            self._inst_buffers = by_inst
        got: set[int] = set()
        for i in np.unique(np.asarray(insts, np.int64)).tolist():
            got |= self._inst_buffers.get(int(i), set())
        return [self.buffer_names[b] for b in sorted(got)]

    def weighted(self, recs: np.ndarray, values: np.ndarray | None = None) -> float:
        """The sum over records ``recs`` (indices) of ``values`` (per record of the view; 1 when
        None), each record counted as often as the records it stands for
        (:attr:`rec_weight`: 1 but where a warp's long loops were cut to their first
        iterations)."""
        recs = np.asarray(recs, np.int64)
        if values is None:
            return float(self.rec_weight[recs].sum())
        if not self.iterations_sampled:
            return float(values[recs].sum())
        return float((values[recs] * self.rec_weight[recs]).sum())

    def warps(self) -> int:
        """Distinct (CTA, warp) of the view's records."""
        if self._warps is None:
            r = self.records
            self._warps = len(unique_int((r["cta"].astype(np.int64) << 16) | r["warp"]))
        return self._warps

    def l1_total(self) -> float:
        """The sampled CTAs' L1 data-path cycles: :func:`l1_cycles` of each (line, kind)'s
        requests, sectors and 128-byte lines, summed."""
        if self._l1_total is None:
            n = len(self.inst_line)
            inst = self.records["inst"].astype(np.int64)
            w = self.rec_weight
            req = np.bincount(inst, weights=w, minlength=n)
            sect = np.bincount(inst, weights=self.rec_sectors * w, minlength=n)
            lines = np.bincount(inst, weights=self.sector_counts.lines * w, minlength=n)
            groups: dict[tuple[str | None, int | None, int], list[float]] = {}
            for i in np.flatnonzero(req):
                key = (*self.inst_line[int(i)], int(self.inst_kind[int(i)]))
                g = groups.setdefault(key, [0.0, 0.0, 0.0])
                g[0] += float(req[i])
                g[1] += float(sect[i])
                g[2] += float(lines[i])
            self._l1_total = sum(l1_cycles(r, s, ln) for r, s, ln in groups.values())
        return self._l1_total

    def useful_bytes(self) -> float:
        """Distinct bytes of every buffer the sampled CTAs access, scaled to the launch: the
        compulsory DRAM traffic (each byte moved once)."""
        if self._useful is None:
            keep = self.lane_buffer >= 0
            if not keep.any():
                self._useful = 0.0
            else:
                lanes = self.lanes.take(keep)
                units = _units(lanes.off, lanes.width)
                key = (self.lane_buffer[keep][units[0]].astype(np.int64) << 44) | units[1]
                if self.iterations_sampled:
                    # each distinct unit counted as often as the records it stands for
                    w = self.rec_weight[lanes.rec[units[0]]]
                    _, first = distinct_first(key)
                    n_units = float(w[first].sum())
                else:
                    n_units = float(len(unique_int(key)))
                self._useful = n_units * units[2] * self.scale
        return self._useful

    def pattern(
        self,
        lanes: Lanes,
        buffer: BufferInfo,
        names: Mapping[int, str] | None,
        pitches: Iterable[int],
        where: str,
    ) -> Pattern | str:
        """:func:`infer_pattern`, cached per set of lanes (the rules of one line share it)."""
        cands = tuple(int(p) for p in pitches)
        digest = hashlib.blake2b(lanes.rec.tobytes(), digest_size=16)
        digest.update(lanes.inst.tobytes())
        key = (buffer.name, len(lanes), digest.hexdigest(), cands)
        got = self._patterns.get(key)
        if got is None:
            got = infer_pattern(self, lanes, buffer, None, cands, "")
            self._patterns[key] = got
        if isinstance(got, str):
            return got
        fields = tuple(
            FieldLoad(f.word, f.words, f.share, (names or {}).get(4 * f.word, f.name))
            for f in got.fields
        )
        return replace(got, fields=fields, where=where)


_VIEWS: dict[int, tuple[weakref.ref[AccessTrace], Any, TraceView]] = {}


def _without_addr(recs: np.ndarray) -> np.ndarray:
    """``recs`` as :data:`VIEW_RECORD` records: a copy of every field but ``addr``."""
    out = np.empty(len(recs), VIEW_RECORD)
    for name in VIEW_RECORD.names or ():
        out[name] = recs[name]
    return out


def _streaming(opcode: str) -> bool:
    mods = opcode.split(".")[1:]
    return "cs" in mods or any("evict_first" in m for m in mods)


def trace_view(trace: AccessTrace, spec: KernelSpec) -> TraceView:
    """The :class:`TraceView` of ``trace``, cached while the trace lives (the three layout rules
    of a run share it; the view keeps no reference to the trace)."""
    key = id(trace)
    got = _VIEWS.get(key)
    if got is not None and got[0]() is trace and got[1] is spec:
        return got[2]
    view = TraceView(trace, buffer_infos(trace, spec))
    _VIEWS[key] = (weakref.ref(trace), spec, view)
    weakref.finalize(trace, _VIEWS.pop, key, None)
    return view


def forget_view(trace: AccessTrace) -> None:
    """Drop ``trace``'s cached :class:`TraceView` (and with it what the rules cached on the view:
    its sector sets, L1 refetches, traffic) while the trace itself lives on: the variant traces
    that follow the rules hold their own views, and the kernel's (llm.c layernorm_backward: 4.5
    million lanes, ~0.4 GB with its caches) need not be held beside them. A later
    :func:`trace_view` makes it again."""
    got = _VIEWS.get(id(trace))
    if got is not None and got[0]() is trace:
        del _VIEWS[id(trace)]


def _weighted_lanes(recs: np.ndarray, sel: np.ndarray) -> int:
    """The active lanes of the records ``sel`` selects, each record's counted as often as the
    executions it stands for (1 + ``extra``: a loop the emulator sampled)."""
    lanes = np.bitwise_count(recs["mask"][sel])
    extra = recs["extra"][sel]
    if extra.any():
        return int((lanes.astype(np.int64) * (extra.astype(np.int64) + 1)).sum())
    return int(lanes.sum(dtype=np.int64))


def _warps_per_sector(recs: np.ndarray, probe_lanes: int = 64 * WARP) -> float:
    """How many warps of ``recs`` (one CTA's global records) read the sector an access of
    theirs reads, on average over their accesses in their first iterations (each instruction cut
    to its first executions, ``probe_lanes`` a warp on average: :func:`_kept_iterations`), each
    access weighed as the executions its record stands for. 1 where the warps touch sectors of
    their own, the warps' count where every warp reads the same (a loop's broadcast loads)."""
    from gpuadvise.model.banks import active_lanes

    kept, weight = _kept_iterations(recs, probe_lanes)
    sub = recs if kept is None else recs[kept]
    if not len(sub):
        return 1.0
    w = np.ones(len(sub)) if weight is None else weight
    w = w * (sub["extra"].astype(np.float64) + 1.0)
    act = active_lanes(sub["mask"])
    rows = np.nonzero(act)[0]
    sector = (sub["addr"][act] // SECTOR).astype(np.int64)
    sectors, which = distinct_inverse(sector)
    warp = (sub["cta"].astype(np.int64) << 16) | sub["warp"].astype(np.int64)
    pairs = distinct_rows([warp[rows], sector])  # (each warp's sectors once)
    readers = np.bincount(np.searchsorted(sectors, pairs[1]), minlength=len(sectors))
    # (each lane's access weighed as the executions its record stands for)
    per_lane = w[rows]
    whole = float(per_lane.sum())
    return float((per_lane * readers[which.reshape(-1)]).sum()) / whole if whole > 0 else 1.0


def _first_iterations(
    recs: np.ndarray, max_warp_lanes: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """``recs`` (in execution order) with each warp's records of one instruction cut to their
    first ``k``, one ``k`` for every (CTA, warp, instruction) chosen so that the warps keep
    ``max_warp_lanes / 32`` records each on average; and each kept record's weight (the
    records of its (CTA, warp, instruction) over those kept). ``(recs, None)`` when no warp has
    more than ``max_warp_lanes`` active lanes."""
    kept, weight = _kept_iterations(recs, max_warp_lanes)
    return (recs, None) if kept is None else (recs[kept], weight)


def _kept_iterations(
    recs: np.ndarray, max_warp_lanes: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`_first_iterations` as a mask of the records kept (None: all, with no weight).

    A record of a loop the emulator sampled stands for ``1 + extra`` executions (its skipped
    iterations, :func:`~gpuadvise.trace.access.record_weights`): the lanes, the group sizes and
    each record's rank in its group count executions, so that a sampled trace is cut where its
    full run would be (the same first iterations, run in full by the sampler) and the kept
    records' weights (times their own) sum to the group's executions. Without sampled loops
    (``extra`` 0) the counts are the records'."""
    if not len(recs):
        return None, None
    wkey = (recs["cta"].astype(np.int64) << 16) | recs["warp"].astype(np.int64)
    wu, wi = distinct_inverse(wkey)
    runs = recs["extra"].astype(np.int64) + 1 if recs["extra"].any() else None
    per_rec = (
        np.bitwise_count(recs["mask"]) if runs is None else np.bitwise_count(recs["mask"]) * runs
    )
    lanes = np.bincount(wi, weights=per_rec, minlength=len(wu))
    if lanes.max() <= max_warp_lanes:
        return None, None
    n_inst = int(recs["inst"].max()) + 1
    gkey = wi.astype(np.int64) * n_inst + recs["inst"].astype(np.int64)
    order = stable_argsort(gkey)  # each group's records in execution order
    sk = gkey[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    counts = np.diff(np.r_[starts, len(sk)])
    if runs is None:
        sizes = counts
        rank = np.arange(len(sk)) - np.repeat(starts, counts)
    else:
        # executions, not records: a group's size and each record's first execution in it
        run_sorted = runs[order]
        ends = np.cumsum(run_sorted)
        sizes = np.diff(np.r_[0, ends[starts + counts - 1]])
        rank = ends - run_sorted - np.repeat(ends[starts] - run_sorted[starts], counts)
    budget = max(max_warp_lanes // WARP, 1) * len(wu)
    lo, hi = 1, int(sizes.max())  # the largest k with sum(min(sizes, k)) <= budget (at least 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if int(np.minimum(sizes, mid).sum()) <= budget:
            lo = mid
        else:
            hi = mid - 1
    k = lo
    keep_sorted = rank < k
    if runs is not None:
        # a sampled loop's weighted records (its skipped iterations, the sampler's last ones:
        # the alignments of a stride through a sector, HeCBench AIDW's 8 loads of ``dx[j]``
        # in one sector, each standing for 12,799 iterations) are kept together once the cut
        # reaches the first: their weights count the distinct sectors of the iterations they
        # stand for only together (a view's distinct sectors weigh as their first lane's
        # record), and the first alone, weighted for its 7 siblings too, counted 8 times the
        # sectors (AIDW: 102,336 sectors of ``dx`` a warp where the loop reads 12,800)
        weighted = run_sorted > 1
        same = np.r_[False, sk[1:] == sk[:-1]]
        head = weighted & ~(same & np.r_[False, weighted[:-1]])
        seg = np.cumsum(head)  # (per weighted record: its run's number, from 1)
        reached = np.zeros(int(seg[-1]) + 1, bool)
        reached[seg[head & keep_sorted]] = True
        keep_sorted |= weighted & reached[seg]
    kept = np.zeros(len(recs), bool)
    kept[order[keep_sorted]] = True
    group_of = np.empty(len(recs), np.int64)
    group_of[order] = np.repeat(np.arange(len(counts)), counts)
    if runs is None:
        weight_of_group = sizes / np.minimum(sizes, k)
    else:
        # the kept records' executions per group (a weighted record kept whole)
        kept_runs = np.bincount(group_of[kept], weights=runs[kept], minlength=len(counts))
        weight_of_group = sizes / np.maximum(kept_runs, 1)
    return kept, weight_of_group[group_of[kept]].astype(np.float64)


def _units(off: np.ndarray, width: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The units (4-byte words, or bytes when some access is narrower or unaligned) each lane
    covers: (lane index per unit, unit number, unit bytes)."""
    if len(off) and ((width < 4).any() or (off % 4 != 0).any()):
        unit = 1
    else:
        unit = 4
    n = np.maximum(width // unit, 1)
    if bool((n == 1).all()):  # a unit a lane: no repeat (the same indices and numbers)
        return np.arange(len(off)), off // unit, unit
    idx = np.repeat(np.arange(len(off)), n)
    # (each unit's number in its lane made in place: one unit-sized temporary, issue 31)
    k = np.arange(len(idx))
    k -= np.repeat(np.cumsum(n) - n, n)
    unit_no = off[idx] // unit
    unit_no += k
    return idx, unit_no, unit


def warp_footprint(lanes: Lanes) -> tuple[int, int]:
    """(sectors, ideal sectors) of the warps' accesses, all iterations together: per warp, the
    distinct 32-byte sectors its lanes touch and ``ceil(distinct bytes / 32)``, summed. Accesses
    of a warp that another instruction of the same line completes (``in[i]`` and ``in[i + 1]``)
    waste nothing here; an array-of-structures field read wastes the rest of each sector."""
    if not len(lanes):
        return 0, 0
    # (the keys made in place and each lane-sized array freed once read: a line's lanes are
    # millions, AoSKernel's GA301 peak, issue 31)
    group = lanes.cta.astype(np.int64) * 64 + lanes.tid // WARP
    off, width = lanes.off, lanes.width
    idx, unit_no, unit = _units(off, width)
    # where each lane's units are exactly its bytes (a unit divides every width) and the keys
    # fit, the distinct sectors are the distinct units' sectors: a unit lies in one sector and
    # the sorted (warp, unit) keys' sectors do not decrease, so one sort gives both counts
    # (issue 31: GA301's detect sorted the lanes' sector keys and then their unit keys)
    one_sort = (
        int(off.min()) >= 0
        and int(off.max()) + int(width.max()) < _KEY_UNIT_LIMIT
        and (unit == 1 or not bool((width % unit).any()))
    )
    sectors = 0
    if not one_sort:
        sectors = _sector_keys_count(group, off, width)
    # (a unit a lane: idx is every lane in order, and the lanes' groups are made the keys)
    ukey = group if len(idx) == len(group) else group[idx]
    del group, idx
    ukey <<= 44
    ukey |= unit_no
    del unit_no
    sort_in_place(ukey)  # (its own keys, in place; by warp in execution order: often long runs)
    ukeys = ukey[run_heads(ukey)] if len(ukey) else ukey
    del ukey
    g = ukeys >> 44  # sorted: each group's distinct units are one run
    if one_sort:
        sect = ukeys & np.int64((1 << 44) - 1)
        sect *= np.int64(unit)
        sect //= np.int64(SECTOR)
        sect |= g << 44
        sectors = _distinct_sorted(sect)  # non-decreasing: no sort of its own
        del sect
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, np.int64)
    per_group = np.diff(np.r_[starts, len(g)]) * unit
    ideal = int(np.sum(-(-per_group // SECTOR)))
    return int(sectors), ideal


_KEY_UNIT_LIMIT = 1 << 44  # warp_footprint's keys: a unit's or sector's number below 2**44


def _sector_keys_count(group: np.ndarray, off: np.ndarray, width: np.ndarray) -> int:
    """The distinct (warp ``group``, 32-byte sector) of lanes of byte offsets ``off`` and
    widths ``width``, each lane every sector it touches: :func:`warp_footprint`'s count where
    its units do not give it."""
    first = off // SECTOR
    last = (off + width - 1) // SECTOR
    last -= first  # the sectors past the first
    span = last.max()
    key = group << 44
    key |= first
    keys = [key]
    for k in range(1, int(span) + 1):
        more = last >= k
        keys.append((group[more] << 44) | (first[more] + k))
    del first, last, key
    if len(keys) == 1:
        key = keys.pop()
    else:
        key = np.concatenate(keys)
        del keys
    sort_in_place(key)
    return _distinct_sorted(key)


@dataclass(frozen=True)
class Reuse:
    """How the threads of a CTA share the addresses they load at a line (sampled CTAs summed).

    ``pairs``: distinct (thread, address); ``addresses``: distinct addresses per CTA;
    ``factor = pairs / addresses``: how many threads load each address. ``spread``: distinct
    addresses per request over active lanes (1: every lane its own address; a uniform load is
    1/32). ``requested_sectors``: sectors summed over the requests; ``unique_sectors``: distinct
    sectors per CTA (what a shared tile would load once)."""

    pairs: int
    addresses: int
    requests: int
    lanes: int
    spread: float
    requested_sectors: int
    unique_sectors: int

    @property
    def factor(self) -> float:
        return self.pairs / self.addresses if self.addresses else 0.0


def cta_reuse(lanes: Lanes, sectors_of_records: np.ndarray) -> Reuse:
    """The :class:`Reuse` of a line's lanes; ``sectors_of_records``: the sectors of each of their
    records (the coalescing model's).

    One sort of the lanes by (CTA, offset, thread) gives the distinct pairs, addresses and
    sectors; the distinct addresses of each request come from its (at most 32) lanes sorted in
    place, as lanes of one record are contiguous in a view (else a sort by (record, offset))."""
    if not len(lanes):
        return Reuse(0, 0, 0, 0, 0.0, 0, 0)
    # (the keys made in place and the lanes' own offsets read, not copied: a line's lanes are
    # most of the view's on some kernels, 8 million in clenergy: each int64 copy 62 MB, issue 31)
    cta = lanes.cta.astype(np.int64)
    off = lanes.off.astype(np.int64, copy=False)
    if (
        int(off.min(initial=0)) >= 0
        and int(off.max(initial=0)) < (1 << 44)
        and int(lanes.tid.max(initial=0)) < (1 << 10)
    ):
        key = cta << 54
        key |= off << 10
        key |= lanes.tid
        sort_in_place(key)  # (in execution order, by CTA: often long runs already)
        pairs = _distinct_sorted(key)
        key >>= 10  # the address key
        addresses = _distinct_sorted(key)
        low = key & ((1 << 44) - 1)
        low //= SECTOR
        key >>= 44
        key <<= 44
        key |= low  # the first sector's key
        del low
        sectors = _distinct_sorted(key)  # monotonic in the sorted key: no second sort
        del key
    else:  # offsets or threads too large for one key: three sorts
        tid = lanes.tid.astype(np.int64)
        pairs = len(unique_int((cta << 54) | (tid << 44) | off))
        del tid
        addresses = len(unique_int((cta << 44) | off))
        first_sect = unique_int((cta << 44) | (off // SECTOR))
        sectors = len(first_sect)
    last = (off + lanes.width - 1) // SECTOR
    cross = last != off // SECTOR
    if cross.any():
        sect = unique_int(
            np.concatenate([(cta << 44) | (off // SECTOR), (cta[cross] << 44) | last[cross]])
        )
        sectors = len(sect)
    del cta, last, cross  # (lane-sized: not held beside the requests' matrix)
    rec = lanes.rec
    if len(rec) < 2 or bool((rec[1:] >= rec[:-1]).all()):
        starts = np.flatnonzero(np.r_[True, rec[1:] != rec[:-1]])
        requests = len(starts)
        distinct = _distinct_per_segment(off, starts)
    else:
        order = np.lexsort((off, rec))
        r, o = rec[order], off[order]
        distinct = int(np.count_nonzero(np.r_[True, (r[1:] != r[:-1]) | (o[1:] != o[:-1])]))
        requests = len(unique_int(rec))
    return Reuse(
        pairs=pairs,
        addresses=addresses,
        requests=requests,
        lanes=len(lanes),
        spread=distinct / len(lanes),
        requested_sectors=int(sectors_of_records.sum()),
        unique_sectors=sectors,
    )


def _distinct_sorted(a: np.ndarray) -> int:
    """Distinct values of a sorted array."""
    return int(np.count_nonzero(a[1:] != a[:-1])) + 1 if len(a) else 0


def _distinct_per_segment(values: np.ndarray, starts: np.ndarray) -> int:
    """Distinct values within each segment ``values[starts[i]:starts[i + 1]]``, summed. Segments
    of up to :data:`WARP` values (the lanes of one record) are sorted as rows of a matrix."""
    n = len(values)
    lengths = np.diff(np.r_[starts, n])
    width = int(lengths.max(initial=0))
    if width > WARP:  # not the lanes of single records: sort by (segment, value)
        seg = np.repeat(np.arange(len(starts)), lengths)
        order = np.lexsort((values, seg))
        s, v = seg[order], values[order]
        return int(np.count_nonzero(np.r_[True, (s[1:] != s[:-1]) | (v[1:] != v[:-1])]))
    # each value's place in the matrix, row x width + column, made in place: one lane-sized
    # index, not a row and a column (issue 31)
    at = np.arange(n)
    at -= np.repeat(starts, lengths)
    row = np.repeat(np.arange(len(starts)), lengths)
    row *= width
    at += row
    del row
    big = np.iinfo(np.int64).max
    mat = np.full((len(starts), width), big, dtype=np.int64)
    mat.reshape(-1)[at] = values
    del at
    mat.sort(axis=1)
    new = mat[:, 1:] != mat[:, :-1]
    new &= mat[:, 1:] != big
    return len(starts) + int(np.count_nonzero(new))


def field_loads(lanes: Lanes, elem_bytes: int) -> dict[int, tuple[int, int, int]]:
    """Per load instruction: (byte offset in the element, width, active lanes), for the
    instructions whose every lane reads the same offset of its element (a struct field)."""
    out: dict[int, tuple[int, int, int]] = {}
    if not len(lanes) or elem_bytes <= 0:
        return out
    fo = lanes.off % elem_bytes
    order = stable_argsort(lanes.inst)
    inst, fo, width = lanes.inst[order], fo[order], lanes.width[order]
    starts = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    ends = np.r_[starts[1:], len(inst)]
    # one offset an instruction: its lanes' least and greatest the same (no np.unique a segment)
    one = np.minimum.reduceat(fo, starts) == np.maximum.reduceat(fo, starts)
    for s, e in zip(starts[one].tolist(), ends[one].tolist(), strict=True):
        out[int(inst[s])] = (int(fo[s]), int(width[s]), int(e - s))
    return out


def stride_mode(lanes: Lanes) -> int | None:
    """The most common byte distance between the addresses of consecutive active lanes of a
    request (the stride of the walk); None with no two such lanes."""
    if len(lanes) < 2:
        return None
    same = (lanes.rec[1:] == lanes.rec[:-1]) & (lanes.tid[1:] == lanes.tid[:-1] + 1)
    d = (lanes.off[1:] - lanes.off[:-1])[same]
    if not len(d):
        return None
    return most_common(d)


def integer_args(spec: KernelSpec) -> list[int]:
    """The launch's integer arguments (candidate row lengths of a 2-D buffer)."""
    from gpuadvise.errors import UsageError

    try:
        return [int(v) for v in spec.env().values() if int(v) > 0]
    except UsageError:
        return []


# ---------------------------------------------------------------------------------------------
# The access pattern of a line


@dataclass(frozen=True)
class FieldLoad:
    """A field read at each element visit: its first 32-bit word in the element, its words (1,
    2 or 4: a 4-, 8- or 16-byte load), the share of the visits that read it and its name."""

    word: int
    words: int
    share: float
    name: str


@dataclass(frozen=True)
class Pattern:
    """How the threads of a launch read one buffer at one line.

    Thread ``(x, y)`` (``x = blockIdx.x * block.x + threadIdx.x``, ``y`` alike) visits elements
    ``(y + dy) * pitch + (x + dx)`` for each ``(dx, dy)`` of ``offsets`` in order, skipping those
    outside ``[0, pitch) x [0, rows)``; threads with ``x >= pitch`` or ``y >= rows`` visit nothing.
    At each visit it reads ``fields[0]``, then ``fields[1]`` for a share of the visits, then
    ``fields[2]`` for a share of those, and so on (nested, as short-circuit conditions make them).
    ``coverage``: the share of the sampled threads whose visits follow this.
    """

    buffer: str
    elem_bytes: int
    count: int
    pitch: int
    rows: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    offsets: tuple[tuple[int, int], ...]
    fields: tuple[FieldLoad, ...]
    coverage: float
    where: str = ""

    @property
    def words(self) -> int:
        return self.elem_bytes // 4

    @property
    def one_d(self) -> bool:
        return self.grid[1] * self.block[1] == 1

    @property
    def threads_x(self) -> int:
        return self.grid[0] * self.block[0]

    @property
    def threads(self) -> int:
        return self.threads_x * self.grid[1] * self.block[1]

    @property
    def radius(self) -> tuple[int, int, int, int]:
        """(min dx, max dx, min dy, max dy)."""
        dxs = [d[0] for d in self.offsets]
        dys = [d[1] for d in self.offsets]
        return min(dxs), max(dxs), min(dys), max(dys)


def infer_pattern(
    view: TraceView,
    lanes: Lanes,
    buffer: BufferInfo,
    names: Mapping[int, str] | None = None,
    pitches: Iterable[int] = (),
    where: str = "",
) -> Pattern | str:
    """The :class:`Pattern` of a line's lanes on ``buffer``, or why there is none (a string).

    ``pitches``: candidate row lengths in elements (the kernel's integer arguments); the grid's
    threads in x is always tried. The one that explains the visits with the fewest distinct
    offsets wins. ``names``: field names by byte offset.
    """
    gx, gy, gz = view.grid
    bx, by, bz = view.block
    if gz != 1 or bz != 1:
        return "a 3-D launch"
    if not len(lanes):
        return "no loads"
    s = buffer.elem_bytes
    if s % 4:
        return f"{s}-byte elements (not whole 32-bit words)"
    if s > 2048:
        return f"{s}-byte elements (larger than the proxies handle)"
    fo = lanes.off % s
    if ((fo % 4) != 0).any() or (~np.isin(lanes.width, (4, 8, 16))).any():
        return "loads narrower than 32 bits or not word-aligned"
    if ((fo % lanes.width) != 0).any() or (s % lanes.width.max()) != 0:
        return "vector loads not aligned in the element"
    del fo  # (made again after the row lengths' search: not held through it, issue 31)
    # (each lane-sized temporary freed once read, and only the best pitch's offsets held: a
    # line's lanes are millions, issue 31)
    e = lanes.off // s
    cta = view.ctas[lanes.cta]
    # each thread's (x, y) made in place: x = (cta % gx) * bx + tid % bx, y = ((cta // gx) %
    # gy) * by + (tid // bx) % by, the same integers (issue 31: gpu_matrix_mult's GA305 peak)
    x = cta % gx
    x *= bx
    x += lanes.tid % bx
    cta //= gx
    y = cta
    y %= gy
    y *= by
    ty = lanes.tid // bx
    ty %= by
    y += ty
    del cta, ty
    # e - (y * p + x) for each row length p is (e - x) - y * p, the same integers: e - x made
    # once, in e's memory (x not held through the search, issue 31: gpu_matrix_mult's peak)
    e -= x
    del x
    one_d = gy * by == 1
    count = buffer.count
    if one_d:
        pitch, d = count, e
        visits = len(unique_int(d))
    else:
        cands = {gx * bx, *[int(p) for p in pitches if 0 < int(p) <= count]}
        top: tuple[int, bool, int] | None = None
        for p in sorted(cands):
            if count % p:
                continue
            d = y * p
            np.subtract(e, d, out=d)  # e - (y * p + x), in d's own memory
            scored = (_distinct_consumed(d), p != gx * bx, p)
            del d
            if top is None or scored < top:
                top = scored
        if top is None:
            return "no row length divides the buffer"
        # only the best row length's offsets made again (not held through the search)
        visits, _, pitch = top
        d = y * pitch
        np.subtract(e, d, out=d)
    del e, y
    rows = count // pitch
    if visits > MAX_VISITS:
        return f"more than {MAX_VISITS} distinct element offsets (not a fixed neighbourhood)"
    fo = lanes.off % s
    thread = (lanes.cta.astype(np.int64) << 20) | lanes.tid
    # visits: consecutive reads of one thread of the same element
    order = lexsort_pair(lanes.rec, thread)
    th, dd, ff, ww = thread[order], d[order], fo[order], lanes.width[order]
    del thread, order, d, fo
    new_visit = np.r_[True, (th[1:] != th[:-1]) | (dd[1:] != dd[:-1])]
    visit_id = np.cumsum(new_visit) - 1
    v_thread, v_d = th[new_visit], dd[new_visit]
    n_visits = int(visit_id[-1]) + 1
    # the template: the thread with the most visits
    starts = np.flatnonzero(np.r_[True, v_thread[1:] != v_thread[:-1]])
    ends = np.r_[starts[1:], len(v_thread)]
    longest = int(np.argmax(ends - starts))
    template = [int(t) for t in v_d[starts[longest] : ends[longest]]]
    if len(set(template)) != len(template):
        return "a thread visits the same element twice at this line"
    tmpl = np.array(template, np.int64)
    order_t = np.argsort(tmpl)
    at = np.clip(np.searchsorted(tmpl[order_t], v_d), 0, len(tmpl) - 1)
    found = tmpl[order_t][at] == v_d
    vpos = np.where(found, order_t[at], -1)
    first_of_thread = np.r_[True, v_thread[1:] != v_thread[:-1]]
    rising = np.r_[True, vpos[1:] > vpos[:-1]] | first_of_thread
    bad = (vpos < 0) | ~rising
    thread_no = np.cumsum(first_of_thread) - 1
    good = int(np.sum(np.bincount(thread_no, weights=bad.astype(np.int64)) == 0))
    coverage = good / max(len(starts), 1)
    if coverage < MIN_COVERAGE:
        return (
            f"only {coverage:.0%} of the threads visit elements at fixed offsets from their own "
            "(data-dependent indices?)"
        )
    offsets = []
    for t in template:
        dy = (t + pitch // 2) // pitch if not one_d else 0
        offsets.append((t - dy * pitch, dy))
    # fields: the share of the visits that read each
    fields = []
    for (off, width), n in _field_visit_counts(visit_id, ff, ww).items():
        label = (names or {}).get(off, f"word {off // 4}")
        fields.append(FieldLoad(off // 4, width // 4, n / n_visits, label))
    fields.sort(key=lambda f: (-f.share, f.word))
    return Pattern(
        buffer=buffer.name,
        elem_bytes=s,
        count=count,
        pitch=pitch,
        rows=rows,
        grid=(gx, gy, gz),
        block=(bx, by, bz),
        offsets=tuple(offsets),
        fields=tuple(fields),
        coverage=coverage,
        where=where,
    )


def _distinct_consumed(a: np.ndarray) -> int:
    """The distinct values of the int64 array ``a``, which is the caller's temporary and is
    changed: marked in a mask where their range is at most four times their number, else
    sorted in place (no copy of ``a`` either way, issue 31)."""
    if len(a) < 2:
        return len(a)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo < 4 * len(a):
        a -= np.int64(lo)
        mark = np.zeros(hi - lo + 1, bool)
        mark[a] = True
        return int(np.count_nonzero(mark))
    sort_in_place(a)
    return _distinct_sorted(a)


def _field_visit_counts(
    visit_id: np.ndarray, fo: np.ndarray, width: np.ndarray
) -> dict[tuple[int, int], int]:
    """How many visits read each (offset, width)."""
    fields, index = np.unique((fo << 5) | width, return_inverse=True)
    seen = np.zeros((int(visit_id[-1]) + 1, len(fields)), dtype=bool)
    seen[visit_id, index] = True
    counts = seen.sum(axis=0)
    return {(int(f >> 5), int(f & 31)): int(c) for f, c in zip(fields, counts, strict=True)}
