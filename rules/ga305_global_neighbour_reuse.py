"""GA305 global-neighbour-reuse: many threads of a CTA load the same global addresses (a stencil's
neighbours read through global memory): propose a shared tile with halo, if measured faster."""

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
    LaunchReuse,
    LaunchWide,
    Rule,
    RuleContext,
    Space,
    Variant,
    cta_reuse,
    distinct,
    integer_args,
    l1_bytes_left,
    launch_wide,
    proxy_where,
    source_text,
    struct_for,
    tile_estimate,
    tile_l1_estimate,
    tile_pitch,
    tile_proxy,
)

TILE = 8  # a launch-wide fix: each CTA computes TILE times the outputs from what it stages


@dataclass(frozen=True)
class NeighbourReuse(FindingDetails):
    """The line's loads of one buffer (trace instruction indices; the lanes are taken again
    from the context's trace view) and their requests, sectors requested and distinct."""

    buffer: str
    insts: tuple[int, ...]
    requests: int
    requested_sectors: int
    unique_sectors: int
    # a lookup table: every load indexed by data (values read from memory), the whole buffer
    # small enough to stage in shared memory (its bytes); 0: a neighbourhood
    table_bytes: int = 0
    lines: tuple[int, ...] = ()  # a table's (a launch-wide finding's) other lines
    # launch-wide (no CTA re-reads the buffer, many CTAs read each sector): the sampled CTAs'
    # distinct sectors summed (the L2's), the sample's distinct sectors, the launch's footprint
    launch_l2_sectors: int = 0
    sample_sectors: int = 0
    footprint: float = 0.0

    def lanes(self, ctx: RuleContext) -> Any:
        import numpy as np

        lanes, _ = ctx.trace_view.access(np.array(self.insts, np.int64), self.buffer)
        return lanes


class GlobalNeighbourReuse(Rule):
    """Neighbours read through global memory: many threads of a CTA load the same addresses.

    What it detects
    ---------------
    Source lines whose global loads, within one CTA, reach each address from at least
    ``min_reuse`` threads on average (distinct (thread, address) pairs over distinct addresses,
    per CTA, over a sample of the traced CTAs), where the lanes of a request read different
    addresses (distinct addresses per request over active lanes at least ``min_spread``: a
    uniform load of a coefficient is not a neighbourhood). That is a stencil or window whose
    elements every thread of the neighbourhood loads again from global memory. Threads that differ
    only in a block dimension the kernel never reads are copies (GA105), not neighbours: only the
    first copy's loads are counted. A line that stores into shared memory fills a tile already
    (``sh[t] = g[i]``): threads loading one address there fill the same words (every row of a
    block staging the same row of a tile), which a tile does not fix; such lines are left alone.

    Loads whose addresses come from values the kernel read from memory (the PTX's data flow: an
    S-box ``sbox[s]``, a CRC table ``table[b * 256 + (crc & 0xff)]``, ``__ldg(&lut[key & 31])``)
    are no neighbourhood: into a buffer of at most ``max_table_bytes`` (48 KB, what a CTA may
    take of shared memory without opting in) they are a lookup table, one finding per table at
    its first line (its other lines named), whose fix is staging the whole table; into a bigger
    buffer they are a gather, GA301's, and this rule leaves them.

    Launch-wide: a buffer whose loads no CTA re-reads enough for a neighbourhood, but whose
    sectors many CTAs read (one CTA per pair of rows, each row read by every CTA of its row and
    column of the grid): the sampled CTAs' distinct sectors summed and scaled to the launch (what
    the L2 sends the SMs) over the buffer's footprint (the sample's distinct sectors scaled, at
    most the buffer: counted high, so the ratio is low) at least ``min_cta_reuse`` (64) CTAs per
    sector, those sectors at least ``min_l2_share`` of the launch's L2 load sectors. One finding
    per buffer, at its first line. Fewer CTAs per sector (the overlap of neighbouring blocks'
    wide footprints: tile_gather's ``gather_1440p``, 39) are the L2's to serve (GA304's).

    Why it is slow
    --------------
    Launch-wide, the L2-to-SM path carries each sector as many times as CTAs read it.
    Every reload is a request through the load/store unit and the L1: a 5x5 window read by a
    16x16 block makes 24 requests per thread where a tile staged once in shared memory (the block
    and a halo of 2, 400 words) needs 400 / 256 loads per thread and then conflict-free shared
    reads. A cellular simulation's port (phase 3, on an RTX 2060) got 432 -> 312 ms from such a
    tile. On GPUs with a large L1 (Volta and later) the L1 often serves this reuse already, and
    the tile adds a barrier and shared-memory traffic: the gain must be measured, and this rule
    recommends the tile only when its proxy measures faster (else the finding becomes a note).

    Example
    -------
    ``kernels/cells/cells.cu``: ``cells_fields``, ``cells_packed`` and ``cells_soa`` read the 24
    neighbours of each cell from global memory (each cell's word loaded by about 16 threads of a
    block); ``cells_soa_tiled`` stages the block's 20x20 window in shared memory first.

    Fix
    ---
    Stage the block's window in shared memory, the block plus a halo of the neighbourhood's
    reach on each side, with a loop in which consecutive threads load consecutive elements, then
    ``__syncthreads()`` and read the neighbours from the tile. Pad the tile's rows so that the
    rows one warp reads fall in different banks (``pitch = block.x (mod 32)``). A lookup table:
    copy it whole into a ``__shared__`` array at the kernel's start (a strided loop over the
    CTA's threads, then ``__syncthreads()``) and look it up there.

    How the estimate is made
    ------------------------
    An upper bound by the same roofline as GA301 (the SMs' L1 data path, ``max(requests,
    sectors / 4)`` cycles per line at 4 sectors per SM per cycle, against a DRAM floor), with
    the line's requests before the tile at a wavefront per 128-byte line they touch where that
    is more (two rows of a 16x16 block's window, misaligned by the halo, touch two to four:
    convolution_2d's shared-tile proxy measured 1.55x on an H200 where sectors / 4 bounded it
    at 1.39x): the line's requests then cost one shared-memory wavefront each (conflict-free),
    and its global sectors come down to the distinct sectors each CTA touches (loaded once for
    the tile). It assumes the L1 serves none of the reuse today; where it serves most, the
    measured gain is nil, which is why this rule asks for the measurement. The point leaves the
    dependent chain as it is: the model weighs a global load's latency by L2 sectors over
    requests, which for a stencil's requests (a row of two or three sectors, most of them L1
    hits) is near an L2 round trip each, so crediting the tile with them predicted
    ``box3_direct`` 2.7x where the tile measured 1.70x slower (H200); the bound credits it
    (the line's share of the chain's global links as shared ones; convolution_2d staged by hand
    ran 1.75x faster. Its taps are predicated loads issued a row of taps together, one chain
    since s12-window, so the credit is small: the int pipe, which counts the taps' bounds tests
    and addresses on both sides, bounds its launch in the model). Launch-wide: a tile of
    ``TILE`` (8) outputs per CTA divides the buffer's L2 load sectors by 8 (by the CTAs per
    sector where fewer), its DRAM bytes at its footprint on both sides (read once into the L2,
    where it fits in half of it); the arithmetic per output stays.

    Fix safety
    ----------
    Launch-wide: display-only (the tile of outputs changes the launch and the kernel's loops).
    Proxy: the tile rewrites the kernel's loop (and the kernel may need the window in another
    shape), so it is not applied to the user's kernel. gpuadvise synthesizes two kernels from the
    line's trace, one reading the neighbours from global memory as the kernel does and one from a
    shared tile with halo, checks that they fold the same words in the same order, and times
    them (this line's loads alone, not the whole kernel). The finding is kept as a
    recommendation only when that proxy measures faster (the 95 % interval above 1); otherwise
    it is demoted to a note.
    """

    id = "GA305"
    name = "global-neighbour-reuse"
    title = "Neighbour reuse through global memory (no shared tile)"
    severity = "warning"
    models = ("trace",)
    options = {
        "min_reuse": 4.0,
        "min_spread": 0.5,
        "max_table_bytes": 48 * 1024,
        "min_cta_reuse": 64.0,
        "min_l2_share": 0.25,
    }

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        view = ctx.trace_view
        min_reuse = float(ctx.option("min_reuse"))
        min_spread = float(ctx.option("min_spread"))
        # threads that differ only in a block dimension the kernel never reads are copies of
        # each other (GA105): their loads of the same addresses are duplicate work, not reuse
        bx, by, _ = view.block
        copies = ctx.unread_block_dims
        max_table = int(ctx.option("max_table_bytes"))
        tables: dict[str, list[tuple[int, Any, Any]]] = {}  # buffer -> (line, lanes, reuse)
        spread_out: dict[str, list[tuple[int, Any]]] = {}  # buffer -> (line, lanes)
        reported: set[str] = set()
        # lines that store into shared memory: a line that loads there fills a tile already
        # (`sh[t] = g[i]`); threads loading one address there fill the same words (every row
        # of a block staging the same tile: expdist's fill), which a tile does not fix
        trace = ctx.trace
        fills = {
            trace.line_of(info.inst)
            for info in trace.instructions
            if info.space == Space.SHARED and info.kind == Kind.STORE
        }
        for file, line, kind in view.lines(ctx.same_file, [Kind.LOAD]):
            if (file, line) in fills:
                continue
            insts = view.insts_at(file, line, kind)
            for b in view.buffers_at(insts):
                lanes, recs = view.access(insts, b)
                if copies:
                    first = (("y" not in copies) | ((lanes.tid // bx) % by == 0)) & (
                        ("z" not in copies) | (lanes.tid // (bx * by) == 0)
                    )
                    lanes = lanes.take(first)
                    recs = distinct(lanes.rec)
                    if not len(lanes):
                        continue
                ru = cta_reuse(lanes, view.rec_sectors[recs])
                if ru.spread < min_spread:
                    continue
                # loads whose addresses come from the data: a lookup table (staged whole, if
                # small) or a gather (GA301's), not a neighbourhood a tile with halo holds
                data = all(
                    ctx.trace.instructions[int(i)].data_address for i in distinct(lanes.inst)
                )
                if not data:
                    # (held through the other lines without the columns read above: issue 31)
                    spread_out.setdefault(b, []).append((line, lanes.lean()))
                if ru.factor < min_reuse:
                    continue
                if data:
                    if view.buffers[b].size <= max_table:
                        tables.setdefault(b, []).append((line, lanes, ru))
                    continue
                reported.add(b)
                per_cta = ru.addresses / max(len(view.ctas), 1)
                yield self.finding(
                    ctx,
                    f"neighbours read through global memory: each address of `{b}` this line "
                    f"loads is loaded by {ru.factor:.1f} threads of a CTA on average "
                    f"({ru.pairs} thread-address pairs for {ru.addresses} addresses over "
                    f"{len(view.ctas)} CTAs); the requests move {ru.requested_sectors} sectors "
                    f"for {ru.unique_sectors} distinct ones. A shared tile with halo "
                    f"({per_cta:.0f} distinct addresses per CTA) would load each once; the L1 "
                    "may serve the reuse already: recommended only if measured faster",
                    line=line,
                    evidence=[
                        Evidence("threads_per_address", round(ru.factor, 3), min_reuse, ">="),
                        Evidence(
                            "addresses_per_request_share", round(ru.spread, 3), min_spread, ">="
                        ),
                        Evidence("thread_address_pairs", ru.pairs),
                        Evidence("addresses", ru.addresses),
                        Evidence("requested_sectors", ru.requested_sectors, unit="sectors"),
                        Evidence("unique_sectors", ru.unique_sectors, unit="sectors"),
                        Evidence("requests", ru.requests),
                        Evidence("sampled_ctas", len(view.ctas)),
                    ],  # fmt: skip
                    recommend_only_if_faster=True,
                    details=NeighbourReuse(
                        b,
                        tuple(distinct(lanes.inst).tolist()),
                        int(ru.requests),
                        int(ru.requested_sectors),
                        int(ru.unique_sectors),
                    ),
                )

        for b, seen in tables.items():
            yield self._table(ctx, b, seen)
        for b, got in spread_out.items():
            if b not in reported and b not in tables and (f := self._launch_wide(ctx, b, got)):
                yield f

    def _launch_wide(self, ctx: RuleContext, b: str, got: list[tuple[int, Any]]) -> Finding | None:
        """One finding per buffer whose sectors many CTAs read (none re-read within a CTA
        enough for a neighbourhood): at its first such line, the others named."""
        view = ctx.trace_view
        min_factor, min_share = (float(ctx.option(k)) for k in ("min_cta_reuse", "min_l2_share"))
        occ = ctx.occupancy
        l1 = l1_bytes_left(ctx.device, occ) // max(occ.active_blocks_per_sm, 1)
        lw = launch_wide(ctx.device, view, got, view.buffers[b].size, min_factor, min_share, l1)
        if lw is None:
            return None
        lr, recs = lw.reuse, distinct(lw.lanes.rec)
        return self.finding(
            ctx,
            lw.message(b),
            line=lw.line,
            evidence=lw.evidence(min_factor, min_share, len(view.ctas)),
            details=NeighbourReuse(
                b,
                tuple(distinct(lw.lanes.inst).tolist()),
                int(len(recs)),
                int(view.rec_sectors[recs].sum()),
                int(lr.l2_sectors),
                lines=lw.others,
                launch_l2_sectors=int(lr.l2_sectors),
                sample_sectors=int(lr.sample_sectors),
                footprint=float(lr.footprint),
            ),
        )

    def _table(self, ctx: RuleContext, b: str, seen: list[tuple[int, Any, Any]]) -> Finding:
        """One finding per lookup table, at its first line: the loads of every line summed."""
        view = ctx.trace_view
        bi = view.buffers[b]
        line = seen[0][0]
        pairs = sum(ru.pairs for _, _, ru in seen)
        requests = sum(ru.requests for _, _, ru in seen)
        requested = sum(ru.requested_sectors for _, _, ru in seen)
        unique = max(ru.unique_sectors for _, _, ru in seen)
        factor = max(ru.factor for _, _, ru in seen)
        others = [ln for ln, _, _ in seen[1:]]
        where = f" (and lines {', '.join(map(str, others))})" if others else ""
        insts = distinct(np.concatenate([lanes.inst for _, lanes, _ in seen])).tolist()
        return self.finding(
            ctx,
            f"a lookup table read through global memory: `{b}` ({bi.size} bytes) is indexed by "
            f"values the kernel reads from memory, and each entry a line loads is loaded by up "
            f"to {factor:.1f} threads of a CTA{where}; the requests move {requested} sectors "
            f"for {unique} distinct ones. Copy the whole table to shared memory at the start "
            "of each CTA (its threads in a strided loop, then __syncthreads()) and look it up "
            "there; the L1 may serve the lookups already: recommended only if measured faster",
            line=line,
            evidence=[
                Evidence(
                    "threads_per_address", round(factor, 3), float(ctx.option("min_reuse")), ">="
                ),
                Evidence("table_bytes", bi.size, int(ctx.option("max_table_bytes")), "<=", "B"),
                Evidence("thread_address_pairs", pairs),
                Evidence("requested_sectors", requested, unit="sectors"),
                Evidence("requests", requests),
                Evidence("lines", len(seen)),
            ],
            recommend_only_if_faster=True,
            details=NeighbourReuse(
                b,
                tuple(insts),
                int(requests),
                int(requested),
                int(unique),
                int(bi.size),
                tuple(others),
            ),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        view = ctx.trace_view
        ru = finding.details_as(NeighbourReuse)
        if ru.footprint:
            lr = LaunchReuse(ru.launch_l2_sectors, ru.sample_sectors, ru.footprint, view.scale)
            return tile_estimate(ctx.device, view, lr, ru.buffer, TILE)
        recs = view.access(np.array(ru.insts, np.int64), ru.buffer)[1]
        what = "the table in shared memory" if ru.table_bytes else "a shared tile"
        return tile_l1_estimate(
            ctx.device, view, recs, ru.requests, ru.requested_sectors, ru.unique_sectors, what
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(NeighbourReuse)
        view = ctx.trace_view
        bi = view.buffers[d.buffer]
        if d.footprint:
            return Variant("display-only", LaunchWide.fix(d.buffer, TILE))
        if d.table_bytes:
            return Variant(
                "display-only",
                f"declare `__shared__ {bi.type_name} s_{d.buffer}[{bi.count}];`, fill it at the "
                f"start of the kernel (`for (int i = threadIdx.x; i < {bi.count}; i += "
                f"blockDim.x) s_{d.buffer}[i] = {d.buffer}[i];` then `__syncthreads();`) and "
                f"read s_{d.buffer} where the kernel reads {d.buffer}",
            )
        text = source_text(ctx.source_file)
        layout = struct_for(bi, text)
        if layout is not None:
            names = {f.offset: f.name for f in layout.fields}
        else:  # a plain element (a uchar4, a float): name it by its type
            names = {0: bi.type_name} if not bi.is_struct else {}
        where = proxy_where(ctx.kernel_name, finding.file, finding.line or 0)
        pattern = view.pattern(d.lanes(ctx), bi, names, integer_args(ctx.spec), where)
        if isinstance(pattern, str):
            return Variant(
                "display-only",
                f"stage the block's window of `{bi.name}` in shared memory (the block and a halo "
                f"of the neighbourhood's reach), __syncthreads(), read the neighbours from it "
                f"(no proxy: {pattern})",
            )
        x0, x1, y0, y1 = pattern.radius
        bx, by, _ = pattern.block
        tw, th = bx + x1 - x0, by + y1 - y0
        fields = ", ".join(f.name for f in pattern.fields)
        if (-x0, -y0) == (x1, y1):
            halo = f"a halo of {x1} in x and {y1} in y on each side"
        else:
            halo = f"a halo of {-x0} left, {x1} right, {-y0} above and {y1} below"
        desc = (
            f"stage the block's {tw}x{th} window of `{bi.name}` ({fields}) in shared memory: "
            f"the {bx}x{by} block and {halo}, loaded by "
            f"consecutive threads, then __syncthreads() and read the {len(pattern.offsets)} "
            f"neighbours from the tile (rows padded to {tile_pitch(tw, bx)} words: the rows a "
            "warp reads fall in different banks)"
        )
        proxy = tile_proxy(pattern)
        if isinstance(proxy, str):
            return Variant("display-only", desc + f" (no proxy: {proxy})")
        return Variant("proxy", desc, proxy=proxy, label="shared tile")
