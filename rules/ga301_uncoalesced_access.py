"""GA301 uncoalesced-access: global accesses that move many more sectors than the bytes they use
(an array of structures walked field by field: propose a structure of arrays)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuadvise.rules import (
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
    merge_stores,
    proxy_where,
    soa_description,
    soa_proxy,
    source_text,
    stride_mode,
    struct_for,
    warp_footprint,
)


@dataclass(frozen=True)
class BufferAccess(FindingDetails):
    """The line's accesses of one buffer: the trace instructions (indices) that reach it, the
    kind (``load``/``store``), whether it is an array of structures walked field by field, the
    stride between consecutive threads, and the fields read (byte offset, width, name). The
    lanes and records are taken again from the context's trace view."""

    buffer: str
    kind: str
    insts: tuple[int, ...]
    aos: bool
    stride: int | None
    fields: tuple[tuple[int, int, str], ...]

    def access(self, ctx: RuleContext) -> tuple[Any, Any]:
        """The lanes and the record indices of these instructions on this buffer."""
        import numpy as np

        return ctx.trace_view.access(np.array(self.insts, np.int64), self.buffer)


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
    (``in[i] + in[i + 1]``: GA303's vector loads). When the lanes of a request step through the
    buffer by a multiple of its element size and every load reads one field of the element, the
    pattern is an array of structures (AoS) walked field by field: the finding names the struct
    (its fields from the source, its size from the compiler) and the fields read.

    Why it is slow
    --------------
    A warp's global access is served in 32-byte sectors. When 32 threads read one 4-byte field of
    32 consecutive 44-byte structs, the 128 bytes they need lie in 32 different sectors: 1024
    bytes cross the L2-L1 path and the L1 data path (128 bytes per SM per cycle) for 128 used, and
    the unused fields occupy DRAM bandwidth and cache capacity too. Seed 004 (the Badger cell
    simulation on an RTX 2060) got 139 -> 98 ms from turning its cells from AoS into SoA.

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
    Latency is ignored (the seed's kernels were latency-bound), so the real gain is smaller; the
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
    options = {"min_excess_pct": 50.0, "min_share_pct": 1.0}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        co = ctx.coalescing
        total = co.traced.all.sectors
        if total <= 0:
            return
        view = ctx.trace_view
        min_excess = float(ctx.option("min_excess_pct"))
        min_share = float(ctx.option("min_share_pct"))
        text = source_text(ctx.source_file)
        for cl in co.lines:
            if cl.kind not in (Kind.LOAD, Kind.STORE) or cl.line is None:
                continue
            if not ctx.same_file(cl.file) or cl.sectors <= 0:
                continue
            share = 100.0 * cl.excess / total
            if cl.excess_pct < min_excess or share < min_share:
                continue
            insts = view.insts_at(cl.file, cl.line, cl.kind)
            for b in view.buffers_at(insts):
                lanes, recs = view.access(insts, b)
                fp_sectors, fp_ideal = warp_footprint(lanes)
                if not fp_sectors:
                    continue
                fp_excess = 100.0 * (fp_sectors - fp_ideal) / fp_sectors
                if fp_excess < min_excess:
                    continue
                yield self._finding(ctx, view, cl, b, lanes, recs, (fp_sectors, fp_ideal), text)

    def _finding(
        self,
        ctx: RuleContext,
        view: Any,
        cl: Any,
        buffer: str,
        lanes: Any,
        recs: Any,
        footprint: tuple[int, int],
        text: str,
    ) -> Finding:
        bi = view.buffers[buffer]
        stride = stride_mode(lanes)
        fields = field_loads(lanes, bi.elem_bytes)
        insts = set(int(i) for i in lanes.inst)
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
            f"uncoalesced {verb} of {kind_text}: {cl.sectors_per_request:.1f} sectors per request "
            f"where {cl.ideal / max(cl.requests, 1):.1f} would do ({cl.excess_pct:.0f}% of the "
            f"sectors moved are excess); the warps use {used:.0f}% of the bytes of the sectors "
            "they touch"
        )
        if aos:
            what = (
                f"; an array of structures walked field by field (stride {stride} bytes"
                + (f", {stride // bi.elem_bytes} elements" if stride != bi.elem_bytes else "")
                + f"), fields {', '.join(names)}: use a structure of arrays"
            )
        elif stride:
            what = (
                f"; a strided walk ({stride} bytes between consecutive threads): make "
                "consecutive threads access consecutive words"
            )
        else:
            what = ""
        evidence = [
            Evidence("excess_sectors_pct", round(cl.excess_pct, 2), ctx.option("min_excess_pct"),
                     ">=", "%"),
            Evidence("sectors_per_request", round(cl.sectors_per_request, 3), unit="sectors"),
            Evidence("ideal_sectors_per_request", round(cl.ideal / max(cl.requests, 1), 3),
                     unit="sectors"),
            Evidence("requests", cl.requests),
            Evidence("sectors", cl.sectors),
            Evidence("ideal_sectors", cl.ideal),
            Evidence("warp_footprint_used_pct", round(used, 2), unit="%"),
            Evidence("stride_bytes", stride, unit="B"),
            Evidence("element_bytes", bi.elem_bytes, unit="B"),
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
            ),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        view = ctx.trace_view
        d = finding.details_as(BufferAccess)
        _, recs = d.access(ctx)
        req = float(len(recs))
        sect = float(view.rec_sectors[recs].sum())
        ideal = float(view.rec_ideal[recs].sum())
        saved = l1_cycles(req, sect) - l1_cycles(req, ideal)
        return l1_roofline_estimate(
            ctx.device,
            view,
            saved,
            f"this line's {sect:.0f} sectors (sampled CTAs) brought down to its {ideal:.0f} ideal"
            + (", with every access to the buffer in the new layout" if d.aos else ""),
            records=buffer_records(view, d.buffer) if d.aos else recs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant | None:
        d = finding.details_as(BufferAccess)
        buffer = d.buffer
        view = ctx.trace_view
        bi = view.buffers[buffer]
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
        # the line's loads and stores of the buffer: a load alone, a store alone or a
        # read-modify-write (`p[i].x += p[i].vx * dt`), the same proxy for the line's findings
        lanes, _ = d.access(ctx)
        file = view.inst_line[d.insts[0]][0] if d.insts else finding.file
        other = Kind.STORE if d.kind == "load" else Kind.LOAD
        more, _ = view.access(view.insts_at(file, finding.line or 0, other), buffer)
        loads, stores = (lanes, more) if d.kind == "load" else (more, lanes)

        def names_of(ls: Any) -> dict[int, str]:
            pairs = zip((ls.off % bi.elem_bytes).tolist(), ls.width.tolist(), strict=True)
            return {
                o: layout.describe(o, w) if layout is not None else f"bytes {o}..{o + w - 1}"
                for o, w in sorted(set(pairs))
            }

        def pattern_of(ls: Any) -> Any:
            return view.pattern(ls, bi, names_of(ls), pitches, where)

        desc = soa_description(
            buffer, bi, layout, list(names_of(loads).values()), list(names_of(stores).values())
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
