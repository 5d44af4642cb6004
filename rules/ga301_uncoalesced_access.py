"""GA301 uncoalesced-access: global accesses that move many more sectors than the bytes they use
(an array of structures walked field by field: propose a structure of arrays)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuadvise.rules import (
    WARP,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    Rule,
    RuleContext,
    Variant,
    buffer_records,
    field_loads,
    integer_args,
    l1_cycles,
    l1_roofline_estimate,
    proxy_where,
    source_text,
    stride_mode,
    struct_for,
    view_traffic,
    walks,
    warp_footprint,
)


@dataclass(frozen=True)
class BufferAccess(FindingDetails):
    """The line's accesses of one buffer: the trace instructions (indices) that reach it, the
    kind (``load``/``store``), whether it is an array of structures walked field by field, the
    stride between consecutive threads, the fields read (byte offset, width, name) and the access
    pattern's name (``field-walk``, ``thread-per-row``, ``gather`` (addresses from loaded
    data), ``transposed``, ``strided``, ``scattered``). The
    lanes and records are taken again from the context's trace view."""

    buffer: str
    kind: str
    insts: tuple[int, ...]
    aos: bool
    stride: int | None
    fields: tuple[tuple[int, int, str], ...]
    # field-walk | thread-per-row | gather | transposed | strided | scattered
    pattern: str = "strided"

    def access(self, ctx: RuleContext) -> tuple[Any, Any]:
        """The lanes and the record indices of these instructions on this buffer."""
        import numpy as np

        return ctx.trace_view.access(np.array(self.insts, np.int64), self.buffer)


def _sites_insts(view: Any, finding: Finding) -> Any:
    """The instructions a finding's proxy reproduces (:func:`walks.other_kind_insts`)."""
    d = finding.details_as(BufferAccess)
    return walks.other_kind_insts(view, d.insts, d.kind, finding.file, finding.line)


class UncoalescedAccess(Rule):
    """Global loads or stores that move many more 32-byte sectors than the bytes they use.

    What it detects
    ---------------
    Source lines whose global accesses (the coalescing model over the CPU emulator's trace) touch
    at least ``min_excess_pct`` % more sectors than the same bytes packed into whole sectors would
    (``excess = (sectors - ideal) / sectors``, Nsight Compute's "excessive sectors"), where the
    excess is at least ``min_share_pct`` % of all the kernel's global sectors, and where the rest
    of those sectors stays unused by the warp: over all the line's accesses of one warp (every
    iteration), the distinct sectors touched exceed ``ceil(distinct bytes / 32)`` by the same
    ``min_excess_pct``. That last test keeps out lines whose instructions complete each other
    (``in[i] + in[i + 1]``: GA303's vector loads). A plain array (no structure walked by field)
    is held to ``min_excess_pct_plain`` (60 %): requests touching twice the sectors they need
    (50 %) are the signature of a misaligned row, a warp spanning two 16-wide rows or a stencil's
    shifted neighbour, which no layout change removes; the layout problems this rule is for move
    4 to 32 times the sectors (75-97 %). An array of structures read at half its bytes is one.
    Requests whose consecutive lanes read consecutive whole elements are left alone whatever
    their excess: the sectors they lose are the rows' (a 16x16 block over bytes moves two
    16-byte rows per warp) or the alignment's, not a layout's.
    A gather (addresses computed from loaded data: a neighbour list, a distance into a table)
    into a buffer bigger than a lookup table (48 KB; smaller ones are GA305's) is judged request
    by request: over a long loop the warp may touch every sector of a reused table, but each
    request still pays a sector per lane, so the footprint test does not apply, and its excess
    need only reach ``min_excess_pct_gather`` (40 %: 16-byte elements, a sector each, are 50 %).
    A ``__constant__`` table indexed by data (``lut[x & 0xff]``), whose warp requests name at
    least 4 distinct addresses on average, is reported too: the constant cache serializes them.
    When the lanes of a request step through the
    buffer by a multiple of its element size and every load reads one field of the element, the
    pattern is an array of structures (AoS) walked field by field: the finding names the struct
    (its fields from the source, its size from the compiler) and the fields read.

    Why it is slow
    --------------
    A warp's global access is served in 32-byte sectors. When 32 threads read one 4-byte field of 32
    consecutive 44-byte structs, the 128 bytes they need lie in 32 different sectors: 1024 bytes
    cross the L2-L1 path and the L1 data path (128 bytes per SM per cycle) for 128 used, and the
    unused fields occupy DRAM bandwidth and cache capacity too. A port of a cellular simulation to
    the GPU (Space Engineers' study, on an RTX 2060) got 139 -> 98 ms from turning its cells from
    AoS into SoA.

    Example
    -------
    ``kernels/cells/cells.cu``: ``cells_fields`` reads ``type``, ``gender``, ``moved`` and
    ``age`` of 44-byte ``Cell`` structs (32 sectors per request where 4 would do; the warps use
    36 % of the bytes they move), ``cells_packed`` reads the packed ``info`` word of 32-byte
    ``PackedCell`` structs (1 of 8 words); ``cells_soa`` reads ``info`` from an array of its own.

    Fix
    ---
    A structure of arrays: one array per field (``int* type; int* gender; ...``, indexed
    ``cells.type[i]``), so that a warp's reads of one field are consecutive words. Keep fields
    that are always read together in one array of small structs (or pack them: GA302). For a
    strided walk over a plain array (a column of a row-major matrix), stage a tile through shared
    memory and read it transposed, or swap the roles of the indices.

    How the estimate is made
    ------------------------
    An upper bound from the launch's execution model over the sampled CTAs. The SMs' L1 data
    path returns 128 bytes (4 sectors) a cycle and takes at least a cycle per request, so the
    line's requests cost ``max(requests, sectors / 4, lines)`` cycles (a cycle per 128-byte
    line a request touches) before the fix and their ideal
    after; DRAM moves the distinct bytes; rows that overflow the L1 (walks.row_refetch) are read
    again from the L2 before. A thread-per-row walk in a launch of more than a wave is fixed by
    staging its rows through shared memory (a conflict-free shared request per access after);
    in a smaller launch by a warp per row (32x the warps, as many as the device holds). The
    proxy measures a layout change's line alone; its own point is the model's on its two traces.

    Fix safety
    ----------
    Proxy: a layout change reaches into the host code that allocates and fills the data, so it is
    never applied to the user's kernel. gpuadvise synthesizes two kernels from the line's trace
    (the same grid, block, elements, element offsets and fields, with the same share of
    conditional loads), reading an array of structures and a structure of arrays, verifies that
    they fold the same logical (element, field) indices, and times them: a *proxy* measurement of
    the layout's effect, labelled as such. The proxy reproduces this line's loads and stores of
    the buffer (a read-modify-write ``p[i].x += p[i].vx * dt`` in place, in either layout; the
    stores verified through ``out``, see gpuadvise.rules.proxy) alone: its speedup is the
    line's, which is the kernel's only where the line dominates (the estimate weighs the line
    against the whole kernel). Lines it cannot reproduce (no fixed neighbourhood, stores that
    visit other elements than the loads, 3-D launches) get a display-only variant.
    """

    id = "GA301"
    name = "uncoalesced-access"
    title = "Uncoalesced global access (array of structures)"
    severity = "warning"
    models = ("trace", "coalescing")
    proxy_point_from_trace = True
    options = {
        "min_excess_pct": 50.0,
        "min_excess_pct_plain": 60.0,
        "min_excess_pct_gather": 40.0,
        "min_share_pct": 1.0,
    }

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        import numpy as np

        co = ctx.coalescing
        total = co.traced.all.sectors
        if total <= 0:
            return
        view = ctx.trace_view
        min_excess = float(ctx.option("min_excess_pct"))
        min_gather = float(ctx.option("min_excess_pct_gather"))
        min_share = float(ctx.option("min_share_pct"))
        data = {i for i, x in enumerate(ctx.trace.instructions) if x.data_address}
        text = source_text(ctx.source_file)
        found: list[Finding] = []
        for cl in co.lines:
            if cl.kind not in (Kind.LOAD, Kind.STORE) or cl.line is None:
                continue
            if not ctx.same_file(cl.file) or cl.sectors <= 0:
                continue
            if cl.excess_pct < min(min_excess, min_gather):
                continue
            insts = view.insts_at(cl.file, cl.line, cl.kind)
            buffers = view.buffers_at(insts)
            recs_at = view.records_of(insts)  # (from the records: no pass over the lanes)
            line_requests = max(view.weighted(recs_at), 1.0)
            streams = walks.line_streams(view, insts, buffers, data)
            for b, group, held in streams:
                lanes, recs = view.access(group, b)
                lanes = lanes if held is None else held  # (the same lanes, gathered already)
                # the stream's own requests and sectors, not the line's: two buffers loaded on
                # one line, or two walks of one buffer (``q[i] * k[i]`` with ``q`` the same
                # for the whole warp and ``k`` a row per thread), are told apart
                own = walks.SectorCounts.of(
                    view, recs, cl.requests / line_requests, len(streams) == 1, cl
                )
                # a gather into more than a lookup table's bytes: the warp's requests over the
                # whole loop may touch all of a reused table, but each request pays a sector
                # per lane (a float4 gather cannot exceed 50 % excess: min_excess_pct_gather)
                scattered = bool(
                    int(group[0]) in data and view.buffers[b].size > walks.GATHER_TABLE_BYTES
                )
                if own.sectors <= 0 or own.excess_pct < (min_gather if scattered else min_excess):
                    continue
                if 100.0 * own.excess / total < min_share:
                    continue
                if not len(lanes):  # (cheap tests first: the footprint sorts every lane, issue 31)
                    continue
                stride = stride_mode(lanes)
                width = int(np.max(lanes.width))
                if stride is not None and abs(stride) == view.buffers[b].elem_bytes == width:
                    # consecutive threads already read consecutive whole elements: the sectors
                    # lost are the rows' (a warp over two 16-wide rows of bytes, a shifted
                    # window's misalignment), which no layout or index change removes
                    continue
                fp_sectors, fp_ideal = warp_footprint(lanes)
                fp_excess = 100.0 * (fp_sectors - fp_ideal) / fp_sectors
                per_row = walks.lanes_row_walk(lanes, stride, width, fp_excess, view.buffers[b])
                if fp_excess < min_excess and not per_row and not scattered:
                    # the warp's other accesses of this line use the rest of the sectors
                    # (in[i] + in[i + 1]): vector loads fix it (GA303)
                    continue
                f = self._finding(
                    ctx, view, cl, own, b, lanes, stride, (fp_sectors, fp_ideal), text, per_row
                )
                if scattered or f.details_as(BufferAccess).aos:
                    found.append(f)
                elif own.excess_pct >= float(ctx.option("min_excess_pct_plain")):
                    found.append(f)
        for g in walks.constant_gathers(ctx.trace):
            if ctx.same_file(g.file):
                d = BufferAccess(
                    "__constant__", "load", g.insts, False, None, (), "constant-gather"
                )
                evidence = [
                    Evidence("distinct_addresses_per_request", round(g.per_request, 2),
                             walks.MIN_CONSTANT_ADDRESSES, ">="),
                    Evidence("requests", round(g.requests)),
                    Evidence("pattern", "constant-gather"),
                ]  # fmt: skip
                found.append(self.finding(ctx, walks.constant_message(g), line=g.line,
                                          evidence=evidence, details=d))  # fmt: skip
        yield from walks.group_walks(found, BufferAccess)

    def _finding(
        self,
        ctx: RuleContext,
        view: Any,
        cl: Any,
        own: Any,
        buffer: str,
        lanes: Any,
        stride: int | None,
        footprint: tuple[int, int],
        text: str,
        per_row: bool,
    ) -> Finding:
        """The finding of one stream (``lanes``, their :func:`stride_mode` ``stride``)."""
        bi = view.buffers[buffer]
        fields = field_loads(lanes, bi.elem_bytes)
        import numpy as np

        insts = set(np.flatnonzero(np.bincount(lanes.inst)).tolist()) if len(lanes) else set()
        layout = struct_for(bi, text)
        width = int(lanes.width.max()) if len(lanes) else 4
        aos = (
            bi.elem_bytes > width
            and stride is not None
            and stride != 0
            and stride % bi.elem_bytes == 0
            and insts <= set(fields)
        )
        offsets = sorted({(o, w) for o, w, _ in fields.values()})
        names = [
            layout.describe(o, w) if layout is not None else f"bytes {o}..{o + w - 1}"
            for o, w in offsets
        ]
        verb = "loads" if cl.kind == Kind.LOAD else "stores"
        kind_text = f"`{buffer}` ({bi.type_name}, {bi.elem_bytes}-byte elements)"
        used = 100.0 * footprint[1] / footprint[0]
        head = (
            f"uncoalesced {verb} of {kind_text}: {own.sectors_per_request:.1f} sectors per "
            f"request where {own.ideal_per_request:.1f} would do ({own.excess_pct:.0f}% of the "
            f"sectors moved are excess); the warps use {used:.0f}% of the bytes of the sectors "
            "they touch"
        )
        if aos:
            pattern = "field-walk"
            what = (
                f"; an array of structures walked field by field (stride {stride} bytes"
                + (f", {stride // bi.elem_bytes} elements" if stride != bi.elem_bytes else "")
                + f"), fields {', '.join(names)}: use a structure of arrays"
            )
        elif per_row and stride is not None:
            pattern = "thread-per-row"
        elif any(ctx.trace.instructions[i].data_address for i in insts):
            pattern = "gather"
        elif stride and abs(stride) >= walks.SECTOR_BYTES and stride % bi.elem_bytes == 0:
            pattern = "transposed"
        else:
            pattern = "strided" if stride else "scattered"
        if not aos:
            staged = walks.staged_rows(ctx.device, view, pattern)
            what = walks.walk_advice(pattern, cl.kind, stride, width, bi.elem_bytes, staged)
        evidence = [
            Evidence("excess_sectors_pct", round(own.excess_pct, 2),
                     ctx.option("min_excess_pct"), ">=", "%"),
            Evidence("sectors_per_request", round(own.sectors_per_request, 3), unit="sectors"),
            Evidence("ideal_sectors_per_request", round(own.ideal_per_request, 3),
                     unit="sectors"),
            Evidence("requests", round(own.requests)),
            Evidence("sectors", round(own.sectors)),
            Evidence("ideal_sectors", round(own.ideal)),
            Evidence("warp_footprint_used_pct", round(used, 2), unit="%"),
            Evidence("stride_bytes", stride, unit="B"),
            Evidence("element_bytes", bi.elem_bytes, unit="B"),
            Evidence("pattern", pattern),
        ]  # fmt: skip
        return self.finding(
            ctx,
            head + what,
            line=cl.line,
            evidence=evidence,
            details=BufferAccess(
                buffer,
                cl.kind.name.lower(),
                tuple(sorted(insts)),
                bool(aos),
                None if stride is None else int(stride),
                tuple((int(o), int(w), n) for (o, w), n in zip(offsets, names, strict=True)),
                pattern,
            ),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        view = ctx.trace_view
        d = finding.details_as(BufferAccess)
        if d.pattern in ("gather", "constant-gather"):
            return walks.gather_estimate(d.pattern == "constant-gather")
        lanes, recs = d.access(ctx)
        req = view.weighted(recs)
        sect = view.weighted(recs, view.rec_sectors)
        ideal = view.weighted(recs, view.rec_ideal)
        lines = view.weighted(recs, view.sector_counts.lines)
        ideal_lines = view.weighted(recs, (view.rec_ideal + 3) // 4)
        saved = l1_cycles(req, sect, lines) - l1_cycles(req, ideal, ideal_lines)
        refetch = walks.row_refetch(ctx, d.buffer, lanes, recs) if d.kind == "load" else 0.0
        # (the line's lanes, most of the view's for a struct's buffer, freed before the launch's
        # traffic is made below: issue 31's peak)
        del lanes
        what = (
            f"this line's {sect:.0f} sectors (sampled CTAs) brought down to its {ideal:.0f} ideal"
        )
        extra: dict[str, Any] = {}
        if walks.staged_rows(ctx.device, view, d.pattern):
            what += (
                ", the rows staged through shared memory (coalesced loads; each thread's "
                "accesses then one conflict-free shared request each)"
            )
        elif d.pattern == "thread-per-row" and sect > 0:
            # the fix gives each row a warp: 32 times the warps (as many as the device holds)
            # each keeping the row's ideal sectors in flight instead of a sector per lane
            before = view_traffic(ctx.device, view)
            extra = {
                "warps_factor": float(WARP),
                "in_flight_after": before.bytes_in_flight_per_warp * ideal / sect,
            }
            what += ", a warp per row (32x the warps, each with the row's ideal sectors in flight)"
        return l1_roofline_estimate(
            ctx.device,
            view,
            saved,
            what + (", with every access to the buffer in the new layout" if d.aos else ""),
            records=buffer_records(view, d.buffer) if d.aos else recs,
            # the records the line's proxy reproduces: the lines' loads and stores of the buffer
            proxy_records=view.access(_sites_insts(view, finding), d.buffer)[1] if d.aos else None,
            before_l2_extra=refetch,
            **extra,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant | None:
        d = finding.details_as(BufferAccess)
        if not d.aos:  # no proxy for a remapping of the threads
            staged = walks.staged_rows(ctx.device, ctx.trace_view, d.pattern)
            return walks.display_fix(d.pattern, d.kind, d.buffer, d.stride, staged)
        buffer, view = d.buffer, ctx.trace_view
        bi = view.buffers[buffer]
        # the lines' loads and stores of the buffer: a load alone, a store alone or a
        # read-modify-write (`p[i].x += p[i].vx * dt`), each instruction taken by its own kind
        # (one finding may stand for several lines' loads and stores: walks.group_walks)
        insts = _sites_insts(view, finding)
        return walks.soa_variant(
            view,
            bi,
            buffer,
            insts,
            struct_for(bi, source_text(ctx.source_file)),
            proxy_where(ctx.kernel_name, finding.file, finding.line or 0),
            integer_args(ctx.spec),
        )
