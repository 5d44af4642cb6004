"""GA302 unpacked-fields: several narrow fields of one struct, each in a 32-bit word of its own,
loaded one by one at a line (propose packing them into one word)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    Rule,
    RuleContext,
    Variant,
    field_loads,
    integer_args,
    l1_cycles,
    l1_roofline_estimate,
    load_widths,
    packed_proxy,
    plan_packing,
    proxy_where,
    source_text,
    struct_for,
)


@dataclass(frozen=True)
class PackedLine(FindingDetails):
    """One line's loads of the packed fields: the buffer, the line's scalar loads of it (trace
    instruction indices) and those of the packed fields, and the fields packed (name, byte
    offset, used bits: ``plan_packing`` of them is the packing). The lanes are taken again from
    the context's trace view."""

    buffer: str
    line_insts: tuple[int, ...]
    insts: tuple[int, ...]
    packed: tuple[tuple[str, int, int], ...]

    def lanes(self, ctx: RuleContext) -> Any:
        lanes, _ = ctx.trace_view.access(np.array(self.line_insts, np.int64), self.buffer)
        return lanes


class UnpackedFields(Rule):
    """Narrow fields of a struct, each in a 32-bit word of its own, loaded one by one.

    What it detects
    ---------------
    Source lines that load two or more fields of the same struct element with separate 32-bit
    loads, where each of those fields is narrow: the kernel uses at most ``max_field_bits`` low
    bits of it. Which bits a load's value can influence comes from a backward data-flow analysis
    of the kernel's PTX (``x & 3`` uses 2 bits, ``(x & 255) >= 16`` 8, ``x & 1`` 1; an add or a
    compare uses everything), over every use of the field in the kernel. The fields are named
    from the struct in the source (its size checked against the compiler's). Reported at each
    line that loads two or more of them from one element.

    Why it is slow
    --------------
    Each load is a request of its own through the load/store unit and the L1, and in an array of
    structures each one touches its own sectors: four 1- or 2-bit values cost four requests and up
    to four times the sectors of one packed word. Packed, one load brings them all, the element
    shrinks (a cellular simulation's port: a 44-byte cell became 32 bytes, aligned, so that whole
    cells move as two 128-bit accesses), and the unpacking is a shift and a mask per field. That
    port went from 312 to 192 ms on an RTX 2060 with this change.

    Example
    -------
    ``kernels/cells/cells.cu``: ``cells_fields`` keeps ``type`` (2 bits used), ``gender`` (1),
    ``moved`` (1) and ``age`` (8) in four ``int`` fields of its 44-byte ``Cell`` and loads them
    one by one for the cell itself and for each of its 24 neighbours; ``cells_packed`` packs them
    into a ``uchar4 info``.

    Fix
    ---
    Pack the narrow fields into one 32-bit word (one byte each, a ``uchar4``, when four or fewer
    fit 8 bits; bit-fields of the widths used otherwise), load it once, and unpack with shifts and
    masks: ``const unsigned info = c.info; const unsigned type = info & 0xffu; const unsigned
    gender = (info >> 8) & 0xffu; ...``. The finding gives the bit layout and the code.

    How the estimate is made
    ------------------------
    An upper bound by the same roofline as GA301 (the SMs' L1 data path, ``max(requests,
    sectors / 4)`` cycles per line at 4 sectors per SM per cycle, against a DRAM floor of the
    distinct bytes the launch touches): the line's loads of every packed field but the most
    frequently read one disappear. The element's shrinking (fewer bytes per sector in an array of
    structures) is not counted. Latency is ignored, so the real gain is smaller. The proxy's own
    point is the launch model's on the proxy's two kernels' traces (gpuadvise.analyze.proxy_trace).

    Fix safety
    ----------
    Proxy: packing changes the data layout, which the host code builds, so it is never applied to
    the user's kernel. gpuadvise synthesizes two kernels from the line's trace, one reading the
    fields from words of their own and one reading the packed word (in the shrunk element), checks
    that they fold the same logical (element, field) indices, and times them: a *proxy*
    measurement, labelled as such, of this line's loads alone (not of the whole kernel). The
    packing is exact only if the fields never hold values wider than the bits the kernel uses:
    check that the code that writes them agrees.
    """

    id = "GA302"
    name = "unpacked-fields"
    title = "Narrow struct fields loaded one by one from words of their own"
    severity = "warning"
    models = ("trace",)
    proxy_point_from_trace = True  # the proxy pair's own point: its own traces
    options = {"max_field_bits": 16}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        view = ctx.trace_view
        structs = [b for b in view.buffers.values() if b.is_struct and b.elem_bytes >= 8]
        if not structs:
            return
        widths = load_widths(ctx.ptx, ctx.kernel.mangled, ctx.trace)
        if not widths:
            return
        max_bits = int(ctx.option("max_field_bits"))
        text = source_text(ctx.source_file)
        scalar = {
            i
            for i, info in enumerate(ctx.trace.instructions)
            if info.kind == Kind.LOAD and info.width == 4 and ".v" not in info.opcode
        }
        for bi in structs:
            all_insts = np.array(sorted(scalar), np.int64)
            lanes, _ = view.access(all_insts, bi.name)
            fields = field_loads(lanes, bi.elem_bytes)
            bits: dict[int, int] = {}
            for inst, (off, _w, _n) in fields.items():
                if inst in widths and off % 4 == 0:
                    bits[off] = max(bits.get(off, 0), widths[inst])
            narrow = {o: b for o, b in bits.items() if 0 < b <= max_bits}
            if len(narrow) < 2:
                continue
            layout = struct_for(bi, text)
            names = {
                o: (layout.describe(o, 4) if layout is not None else f"word {o // 4}")
                for o in narrow
            }
            packing = self._plan(names, narrow)
            if packing is None:
                continue
            yield from self._lines(ctx, view, bi, fields, packing, layout, lanes)

    @staticmethod
    def _plan(names: dict[int, str], narrow: dict[int, int]) -> Any:
        chosen = sorted(narrow, key=lambda o: (narrow[o], o))
        while len(chosen) >= 2:
            plan = plan_packing([(_ident(names[o]), o, narrow[o]) for o in chosen])
            if plan is not None:
                return plan
            chosen = chosen[:-1]  # leave the widest out until the rest fits one word
        return None

    def _lines(
        self,
        ctx: RuleContext,
        view: Any,
        bi: Any,
        fields: dict[int, tuple[int, int, int]],
        packing: Any,
        layout: Any,
        lanes: Any,
    ) -> Iterator[Finding]:
        packed = set(packing.offsets)
        by_line: dict[tuple[str | None, int], list[int]] = {}
        for inst, (off, _w, _n) in fields.items():
            if off in packed:
                file, line = view.inst_line[inst]
                if line is not None and ctx.same_file(file):
                    by_line.setdefault((file, line), []).append(inst)
        for (file, line), insts in sorted(by_line.items(), key=lambda kv: kv[0][1]):
            offs = sorted({fields[i][0] for i in insts})
            if len(offs) < 2:
                continue
            sel = np.isin(lanes.inst, insts)
            sub = lanes.take(sel)
            elem = sub.off // bi.elem_bytes
            key = (sub.cta.astype(np.int64) << 54) | (sub.tid.astype(np.int64) << 44) | elem
            _, per = np.unique(key, return_counts=True)
            together = int(np.sum(per >= 2))
            if together == 0:
                continue  # never two of them from one element by one thread
            by_off = {f.offset: f for f in packing.fields}
            here = [by_off[o] for o in offs]
            desc = ", ".join(f"{f.name} ({f.used_bits} bit{'s' * (f.used_bits > 1)})" for f in here)
            elem_after = bi.elem_bytes - 4 * (len(packing.fields) - 1)
            line_lanes = lanes.take(np.isin(lanes.inst, view.insts_at(file, line, Kind.LOAD)))
            message = (
                f"{len(here)} narrow fields of `{bi.name}` ({bi.type_name}) are loaded one by one "
                f"at this line, each from a 32-bit word of its own: {desc}; {len(here)} loads per "
                f"element where 1 would do. Pack "
                f"{'them' if len(here) == len(packing.fields) else 'the narrow fields'} into one "
                f"word ({packing.layout_text()}); the element shrinks from {bi.elem_bytes} to "
                f"{elem_after} bytes"
            )
            yield self.finding(
                ctx,
                message,
                line=line,
                evidence=[
                    Evidence("narrow_fields_loaded", len(here), 2, ">="),
                    Evidence(
                        "max_used_bits",
                        max(f.used_bits for f in here),
                        ctx.option("max_field_bits"),
                        "<=",
                        "bits",
                    ),
                    Evidence("loads_per_element", len(here)),
                    Evidence("element_bytes", bi.elem_bytes, unit="B"),
                    Evidence("packed_element_bytes", elem_after, unit="B"),
                    Evidence("visits_with_two_or_more", together),
                ],  # fmt: skip
                details=PackedLine(
                    bi.name,
                    tuple(sorted({int(i) for i in line_lanes.inst})),
                    tuple(sorted(int(i) for i in insts)),
                    tuple((f.name, int(f.offset), int(f.used_bits)) for f in packing.fields),
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        view = ctx.trace_view
        d = finding.details_as(PackedLine)
        insts = d.insts
        rec_inst = view.records["inst"]
        by_field: dict[int, list[float]] = {}
        fields = field_loads(d.lanes(ctx), view.buffers[d.buffer].elem_bytes)
        for i in insts:
            sel = rec_inst == i
            off = fields[i][0]
            acc = by_field.setdefault(off, [0.0, 0.0, 0.0])
            recs = np.flatnonzero(sel)
            acc[0] += view.weighted(recs)
            acc[1] += view.weighted(recs, view.rec_sectors)
            acc[2] += view.weighted(recs, view.sector_counts.lines)
        ranked = sorted(by_field.items(), key=lambda kv: -kv[1][0])
        saved = sum(l1_cycles(r, s, ln) for _, (r, s, ln) in ranked[1:])
        return l1_roofline_estimate(
            ctx.device,
            view,
            saved,
            f"dropping the loads of {len(ranked) - 1} of this line's {len(ranked)} packed fields",
            proxy_records=view.access(np.asarray(insts, np.int64), d.buffer)[1],
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(PackedLine)
        view = ctx.trace_view
        bi = view.buffers[d.buffer]
        packing = plan_packing(d.packed)
        if packing is None:  # detect reports only fields that plan_packing packs
            raise ValueError(f"the fields {d.packed} of `{d.buffer}` do not fit one 32-bit word")
        layout = struct_for(bi, source_text(ctx.source_file))
        desc = _description(bi, layout, packing)
        names = {f.offset: f.name for f in packing.fields}
        if layout is not None:
            for f in layout.fields:
                names.setdefault(f.offset, f.name)
        where = proxy_where(ctx.kernel_name, finding.file, finding.line or 0)
        pattern = view.pattern(d.lanes(ctx), bi, names, integer_args(ctx.spec), where)
        if isinstance(pattern, str):
            return Variant("display-only", desc + f" (no proxy: {pattern})")
        proxy = packed_proxy(pattern, packing)
        if proxy is None:
            return Variant("display-only", desc + " (no proxy: the line's loads do not fit it)")
        return Variant("proxy", desc, proxy=proxy, label="packed")


def _ident(name: str) -> str:
    """A C identifier for a field's name (``pos.y`` -> ``pos_y``)."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_")
    return out if out and not out[0].isdigit() else f"f_{out}"


def _description(bi: Any, layout: Any, packing: Any) -> str:
    """The packed struct and the unpacking code, in words."""
    packed = {f.offset for f in packing.fields}
    first = min(packed)
    if layout is not None:
        kept = []
        for f in layout.fields:
            if f.offset == first:
                kept.append(f"unsigned info /* {packing.layout_text()} */")
            elif f.offset not in packed:
                kept.append(f.declaration())
        struct = f"struct {layout.name} {{ {'; '.join(kept)}; }};"
    else:
        struct = f"the word at offset {first} holds {packing.layout_text()}"
    style = "one byte each (a uchar4)" if packing.style == "bytes" else "bit-fields"
    return (
        f"pack {len(packing.fields)} narrow fields of `{bi.name}` into one 32-bit word, {style}: "
        f"{struct} Read it once and unpack: `{packing.unpack_code('info')}`; write it as "
        f"`{packing.pack_code()}`"
    )
