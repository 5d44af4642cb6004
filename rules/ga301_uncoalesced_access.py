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
    distinct,
    field_loads,
    integer_args,
    l1_cycles,
    l1_roofline_estimate,
    merge_stores,
    proxy_where,
    soa_description,
    soa_proxy,
    source_text,
    stride_mode,
    struct_for,
    view_traffic,
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


SECTOR_BYTES = 32
ROW_FOOTPRINT_EXCESS_PCT = 25.0
"""A thread-per-row walk: the warp's own accesses over the line's iterations leave at most this
share of the sectors they touch unused (each thread reads its whole row)."""
VECTOR_BYTES = 16
"""The widest vector access a lane makes: lanes further apart than this cannot share a request's
sectors however wide their loads (GA303's fix leaves the excess). A thread walking a row of at
most two vectors (8 floats) is GA303's (two float4 loads a lane, every sector of the warp's
requests used), not a thread-per-row walk: a warp per 32-byte row would idle most lanes."""


@dataclass(frozen=True)
class _Counts:
    """Requests, sectors and ideal sectors of one buffer's accesses at a line (the traced CTAs)."""

    requests: float
    sectors: float
    ideal: float

    @classmethod
    def of(cls, view: Any, recs: Any, scale: float, whole_line: bool, cl: Any) -> _Counts:
        """The buffer's records ``recs`` in the trace view, scaled to the traced CTAs by
        ``scale``; the coalescing model's line itself when the buffer is the line's only one."""
        if whole_line:
            return cls(float(cl.requests), float(cl.sectors), float(cl.ideal))
        return cls(
            view.weighted(recs) * scale,
            view.weighted(recs, view.rec_sectors) * scale,
            view.weighted(recs, view.rec_ideal) * scale,
        )

    @property
    def excess(self) -> float:
        return self.sectors - self.ideal

    @property
    def excess_pct(self) -> float:
        return 100.0 * self.excess / self.sectors if self.sectors else 0.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal_per_request(self) -> float:
        return self.ideal / self.requests if self.requests else 0.0


def _thread_step(lanes: Any) -> int | None:
    """The most common byte distance between a thread's successive accesses (in execution order)
    of the buffer at the line: its own walk (4 for a thread walking a row of floats); None when
    no thread accesses it twice."""
    import numpy as np

    if len(lanes) < 2:
        return None
    # by thread, then record: the lanes come in record order (TraceView.lanes_of), so one
    # stable sort of a combined thread key
    order = np.argsort(lanes.cta * (int(lanes.tid.max()) + 1) + lanes.tid, kind="stable")
    if not bool((np.diff(lanes.rec) >= 0).all()):
        order = np.lexsort((lanes.rec, lanes.tid, lanes.cta))
    cta, tid, off = lanes.cta[order], lanes.tid[order], lanes.off[order]
    same = (cta[1:] == cta[:-1]) & (tid[1:] == tid[:-1])
    d = (off[1:] - off[:-1])[same]
    if not len(d):
        return None
    vals, counts = np.unique(d, return_counts=True)
    return int(vals[np.argmax(counts)])


def _streams(view: Any, insts: Any, buffers: list[str]) -> Iterator[tuple[str, Any]]:
    """The line's address streams: per buffer, its instructions grouped by the byte stride
    between a request's consecutive lanes (:func:`stride_mode`). One line may walk one buffer
    in two ways (llm.c's attention ``query_t[i] * key_t2[i]``: the query the same address for
    the whole warp, the key one row per thread); judged together, the broadcast hides the
    strided walk. Instructions without a stride (one active lane) join the buffer's largest
    group."""
    import numpy as np

    for b in buffers:
        lanes, _ = view.access(insts, b)
        groups: dict[int | None, list[int]] = {}
        for inst in np.unique(lanes.inst):
            groups.setdefault(stride_mode(lanes.take(lanes.inst == inst)), []).append(int(inst))
        loose = groups.pop(None, [])
        if not groups:
            yield b, np.array(loose, np.int64)
            continue
        biggest = max(groups, key=lambda k: len(groups[k]))
        groups[biggest] += loose
        for key in sorted(groups, key=lambda k: (k is None, k)):
            yield b, np.array(sorted(groups[key]), np.int64)


def _excess_pct(f: Finding) -> float:
    """The finding's ``excess_sectors_pct`` evidence (a number: ``_finding`` sets it)."""
    v = next(e.value for e in f.evidence if e.metric == "excess_sectors_pct")
    if not isinstance(v, int | float):
        raise TypeError(f"GA301's excess_sectors_pct is {v!r}, not a number")
    return v


def _grouped(found: list[Finding]) -> Iterator[Finding]:
    """One finding per root cause: the lines that walk one buffer in one pattern (an array of
    structures read field by field on six lines is one layout to change) become the finding of
    the first of them (its evidence), naming the others, with every line's instructions and
    fields in its details (its estimate and variant cover them all)."""
    from dataclasses import replace

    groups: dict[tuple[str, str], list[Finding]] = {}
    for f in found:
        d = f.details_as(BufferAccess)
        groups.setdefault((d.buffer, d.pattern), []).append(f)

    for fs in groups.values():
        top = min(fs, key=lambda f: f.line or 0)
        others = sorted({f.line for f in fs if f.line is not None and f.line != top.line})
        if not others:
            yield top
            continue
        d = top.details_as(BufferAccess)
        insts = tuple(sorted({i for f in fs for i in f.details_as(BufferAccess).insts}))
        fields = tuple(sorted({x for f in fs for x in f.details_as(BufferAccess).fields}))
        what = "array of structures" if d.aos else "walk of the buffer"
        yield replace(
            top,
            message=top.message
            + f" (with line{'s' if len(others) > 1 else ''} {', '.join(map(str, others))}: "
            f"the same {what}, one change for all)",
            details=replace(d, insts=insts, fields=fields),
        )


def _sites_insts(view: Any, finding: Finding) -> Any:
    """The instructions a finding's proxy reproduces: its own (every line of its group, loads
    and stores: _grouped) and the other kind's at each of those lines (the load of a
    read-modify-write whose store is the finding, or its store), sorted."""
    import numpy as np

    d = finding.details_as(BufferAccess)
    sites = {view.inst_line[i] for i in d.insts}
    sites = {(file, line) for file, line in sites if line is not None}
    if not sites:  # no line for the instructions: the finding's
        file = view.inst_line[d.insts[0]][0] if d.insts else finding.file
        sites = {(file, finding.line or 0)}
    other = Kind.STORE if d.kind == "load" else Kind.LOAD
    more = [view.insts_at(file, line, other) for file, line in sites]
    return np.unique(np.concatenate([np.array(d.insts, np.int64), *more]))


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
    An upper bound from a roofline over the sampled CTAs, scaled to the launch. The SMs' L1 data
    path returns 128 bytes (4 sectors) per cycle and takes at least a cycle per request, so a
    line costs ``max(requests, sectors / 4)`` cycles; the kernel's L1 time is the sum over its
    lines over ``SMs x clock``. DRAM time is the distinct bytes the launch reads and writes over
    the peak bandwidth (each byte moved once: the floor the layout cannot beat). The fix brings
    the line's sectors down to its ideal: ``max(T_l1, T_dram) / max(T_l1 - saved, T_dram)``.
    Latency is ignored (that study's kernels were latency-bound), so the real gain is smaller; the
    proxy measures it.

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
    options = {"min_excess_pct": 50.0, "min_excess_pct_plain": 60.0, "min_share_pct": 1.0}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        import numpy as np

        co = ctx.coalescing
        total = co.traced.all.sectors
        if total <= 0:
            return
        view = ctx.trace_view
        min_excess = float(ctx.option("min_excess_pct"))
        min_share = float(ctx.option("min_share_pct"))
        text = source_text(ctx.source_file)
        found: list[Finding] = []
        for cl in co.lines:
            if cl.kind not in (Kind.LOAD, Kind.STORE) or cl.line is None:
                continue
            if not ctx.same_file(cl.file) or cl.sectors <= 0:
                continue
            if cl.excess_pct < min_excess:
                continue
            insts = view.insts_at(cl.file, cl.line, cl.kind)
            buffers = view.buffers_at(insts)
            recs_at = distinct(view.lanes.rec[np.isin(view.lanes.inst, insts)])
            line_requests = max(view.weighted(recs_at), 1.0)
            streams = list(_streams(view, insts, buffers))
            for b, group in streams:
                lanes, recs = view.access(group, b)
                # the stream's own requests and sectors, not the line's: two buffers loaded on
                # one line, or two walks of one buffer (``q[i] * k[i]`` with ``q`` the same
                # for the whole warp and ``k`` a row per thread), are told apart
                own = _Counts.of(view, recs, cl.requests / line_requests, len(streams) == 1, cl)
                if own.sectors <= 0 or own.excess_pct < min_excess:
                    continue
                if 100.0 * own.excess / total < min_share:
                    continue
                fp_sectors, fp_ideal = warp_footprint(lanes)
                if not fp_sectors:
                    continue
                fp_excess = 100.0 * (fp_sectors - fp_ideal) / fp_sectors
                stride = stride_mode(lanes)
                step = _thread_step(lanes)
                per_row = (
                    fp_excess <= ROW_FOOTPRINT_EXCESS_PCT
                    and step is not None
                    and stride is not None
                    and abs(step) == int(np.max(lanes.width))
                    and abs(stride) > 2 * VECTOR_BYTES
                )
                if fp_excess < min_excess and not per_row:
                    # the warp's other accesses of this line use the rest of the sectors
                    # (in[i] + in[i + 1]): vector loads fix it (GA303)
                    continue
                if stride is not None and abs(stride) == view.buffers[b].elem_bytes == int(
                    np.max(lanes.width)
                ):
                    # consecutive threads already read consecutive whole elements: the sectors
                    # lost are the rows' (a warp over two 16-wide rows of bytes, a shifted
                    # window's misalignment), which no layout or index change removes
                    # (HeCBench's entropy: "a strided walk (1 bytes between consecutive threads)")
                    continue
                found.append(
                    self._finding(
                        ctx, view, cl, own, b, lanes, (fp_sectors, fp_ideal), text, per_row
                    )
                )
        plain = float(ctx.option("min_excess_pct_plain"))
        yield from _grouped(
            [f for f in found if f.details_as(BufferAccess).aos or _excess_pct(f) >= plain]
        )

    def _finding(
        self,
        ctx: RuleContext,
        view: Any,
        cl: Any,
        own: _Counts,
        buffer: str,
        lanes: Any,
        footprint: tuple[int, int],
        text: str,
        per_row: bool,
    ) -> Finding:
        bi = view.buffers[buffer]
        stride = stride_mode(lanes)
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
            if cl.kind == Kind.LOAD:
                fix = (
                    "give each row a warp (the lanes read consecutive words of the row; where "
                    "the row is reduced to one value, they combine their partial results with "
                    "__shfl_down_sync)"
                )
            else:
                fix = "give each row a warp (lane l writes elements l, l + 32, ... of the row)"
            what = (
                f"; each thread walks its own row (thread per row: consecutive threads are "
                f"{stride} bytes apart, and each steps {width} bytes through its row), so every "
                f"lane of a request {'reads' if cl.kind == Kind.LOAD else 'writes'} its own "
                f"sector: {fix}"
            )
        elif any(ctx.trace.instructions[i].data_address for i in insts):
            pattern = "gather"
            what = (
                f"; a {'gather' if cl.kind == Kind.LOAD else 'scatter'} by data: the addresses "
                "come from values the kernel loaded (an index "
                "array, a hash, a graph's edges), so no remapping of the threads makes them "
                "consecutive. Where the data allows: sort or bucket the indices so that "
                "neighbouring threads read neighbouring elements, keep a reused part in shared "
                "memory, or use a smaller element type; otherwise the sectors are the price of "
                "the data structure"
            )
        elif stride and abs(stride) >= SECTOR_BYTES and stride % bi.elem_bytes == 0:
            pattern = "transposed"
            what = (
                f"; a transposed index (consecutive threads are {stride // bi.elem_bytes} "
                f"elements, {stride} bytes, apart: a column walk of a row-major array): put "
                "threadIdx.x on the contiguous index, or stage a tile through shared memory and "
                "read it transposed"
            )
        elif stride:
            pattern = "strided"
            what = (
                f"; a strided walk ({stride} bytes between consecutive threads): make "
                "consecutive threads access consecutive words"
            )
        else:
            pattern = "scattered"
            what = ""
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
        if d.pattern == "gather":
            return Estimate(
                None,
                "none",
                "not estimated: the addresses come from the data, and no change of the kernel "
                "alone makes them consecutive (how much sorting or reordering the data helps "
                "depends on the data)",
            )
        _, recs = d.access(ctx)
        req = view.weighted(recs)
        sect = view.weighted(recs, view.rec_sectors)
        ideal = view.weighted(recs, view.rec_ideal)
        saved = l1_cycles(req, sect) - l1_cycles(req, ideal)
        what = (
            f"this line's {sect:.0f} sectors (sampled CTAs) brought down to its {ideal:.0f} ideal"
        )
        extra: dict[str, Any] = {}
        if d.pattern == "thread-per-row" and sect > 0:
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
            proxy_records=self._proxy_records(ctx, finding) if d.aos else None,
            **extra,
        )

    def _proxy_records(self, ctx: RuleContext, finding: Finding) -> Any:
        """The records the line's proxy reproduces: the lines' loads and stores of the buffer
        (a read-modify-write's both)."""
        _, recs = ctx.trace_view.access(
            _sites_insts(ctx.trace_view, finding), finding.details_as(BufferAccess).buffer
        )
        return recs

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant | None:
        d = finding.details_as(BufferAccess)
        buffer = d.buffer
        view = ctx.trace_view
        bi = view.buffers[buffer]
        if d.pattern == "gather":
            return None  # no layout or launch change fixes addresses chosen by the data
        if d.pattern == "thread-per-row" and d.kind == "store":
            return Variant(
                "display-only",
                f"give each row of `{buffer}` a warp instead of a thread: lane l writes elements "
                "l, l + 32, ... of the row (consecutive words in every request); launch 32 times "
                "the threads (or loop the warps over the rows)",
            )
        if d.pattern == "thread-per-row":
            return Variant(
                "display-only",
                f"give each row of `{buffer}` a warp instead of a thread: lane l reads elements "
                "l, l + 32, ... of the row (consecutive words in every request); where the row is "
                "reduced to one value, the lanes combine their partial results with "
                "__shfl_down_sync (offsets 16, 8, 4, 2, 1) and lane 0 writes the row's result; "
                "launch 32 times the threads (or loop the warps over the rows)",
            )
        if not d.aos:
            now = f" (a stride of {d.stride} bytes now)" if d.stride else ""
            return Variant(
                "display-only",
                f"make consecutive threads access consecutive words of `{buffer}`{now}: swap "
                "the roles of the indices, or stage a tile through shared memory and read it "
                "transposed",
            )
        layout = struct_for(bi, source_text(ctx.source_file))
        where = proxy_where(ctx.kernel_name, finding.file, finding.line or 0)
        pitches = integer_args(ctx.spec)
        # the lines' loads and stores of the buffer: a load alone, a store alone or a
        # read-modify-write (`p[i].x += p[i].vx * dt`), each instruction taken by its own kind
        # (one finding may stand for several lines' loads and stores: _grouped)
        insts = _sites_insts(view, finding)
        kinds = view.inst_kind[insts]
        loads, _ = view.access(insts[kinds == int(Kind.LOAD)], buffer)
        stores, _ = view.access(insts[kinds == int(Kind.STORE)], buffer)

        def names_of(ls: Any) -> dict[int, str]:
            pairs = zip((ls.off % bi.elem_bytes).tolist(), ls.width.tolist(), strict=True)
            return {
                o: layout.describe(o, w) if layout is not None else f"bytes {o}..{o + w - 1}"
                for o, w in sorted(set(pairs))
            }

        def pattern_of(ls: Any) -> Any:
            return view.pattern(ls, bi, names_of(ls), pitches, where)

        desc = soa_description(
            buffer,
            bi,
            layout,
            list(names_of(loads).values()),
            list(names_of(stores).values()),
            sorted({view.inst_line[i][1] for i in insts.tolist()} - {None}),
        )
        load_pattern = pattern_of(loads) if len(loads) else None
        if not len(stores):
            if isinstance(load_pattern, str) or load_pattern is None:
                return Variant("display-only", desc + f" (no proxy: {load_pattern or 'no loads'})")
            return Variant("proxy", desc, proxy=soa_proxy(load_pattern), label="SoA")
        merged = merge_stores(load_pattern, pattern_of(stores))
        if isinstance(merged, str):
            return Variant("display-only", desc + f" (no proxy: {merged})")
        pattern, stored = merged
        return Variant("proxy", desc, proxy=soa_proxy(pattern, stored), label="SoA")
