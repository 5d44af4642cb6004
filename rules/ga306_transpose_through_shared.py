"""GA306 transpose-through-shared: a load coalesced along one index and a store strided along it
(or the reverse), element for element a transposition: stage it through a shared tile."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.errors import UsageError
from gpuadvise.rules import (
    WARP,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    Rule,
    RuleContext,
    Space,
    Variant,
    copy_statement,
    find_transposition,
    index_parameters,
    integer_args,
    l1_cycles,
    l1_roofline_estimate,
    parse_signature,
    stride_mode,
    transpose_body,
    transpose_tiles,
    walks,
)

TILE_ROWS_PER_THREAD = 4
"""Rows of the 32x32 tile each thread of the variant's 32x8 block loads (and stores)."""


@dataclass(frozen=True)
class TransposeAccess(FindingDetails):
    """The load and the store that transpose: buffers, lines and trace instructions; which side
    is coalesced; the coalesced side's matrix (``rows x cols``) and the element size."""

    src: str
    dst: str
    load_line: int
    store_line: int
    load_insts: tuple[int, ...]
    store_insts: tuple[int, ...]
    load_coalesced: bool
    rows: int
    cols: int
    elem_bytes: int

    def strided(self) -> tuple[str, tuple[int, ...]]:
        if self.load_coalesced:
            return self.dst, self.store_insts
        return self.src, self.load_insts


def _side(view: Any, insts: np.ndarray, buffer: str) -> tuple[Any, Any, int, int, int]:
    """(lanes, records, requests, sectors, ideal sectors) of ``insts`` on ``buffer``."""
    lanes, recs = view.access(insts, buffer)
    return (
        lanes,
        recs,
        round(view.weighted(recs)),
        round(view.weighted(recs, view.rec_sectors)),
        round(view.weighted(recs, view.rec_ideal)),
    )


class TransposeThroughShared(Rule):
    """A transposition through global memory: one side coalesced, the other strided.

    What it detects
    ---------------
    A global load line and a global store line of two buffers with elements of one size, where
    one side is coalesced (consecutive lanes, consecutive elements) and the other moves at least
    ``min_sector_ratio`` times the sectors its bytes need with a stride of a row between
    consecutive lanes, and where, thread by thread, the k-th element loaded and the k-th element
    stored are the same element of a matrix and of its transpose: with the coalesced side's
    matrix ``rows x cols`` (``rows`` from the stride, ``cols`` from the buffer's size or the
    launch's integer arguments), ``strided[c * rows + r] = coalesced[r * cols + c]`` for at
    least 99 % of the (thread, access) pairs of the sampled CTAs. It reads the per-lane address
    streams of the trace, not the names of the kernel or its variables.

    Why it is slow
    --------------
    The strided side puts each lane of a warp in its own 32-byte sector: 32 sectors (1024
    bytes through the L1/L2 path) for 128 useful bytes per request, partial-sector writes to
    DRAM for a store. Staging a tile in shared memory turns both sides into coalesced accesses;
    the tile's column read is conflict free with a padded row (``[32][33]``). On an H200 (issue
    16) the 32x32 tile measured 6.98x faster than a naive 8192^2 float transpose.

    Example
    -------
    ``kernels/transpose/transpose.cu``: ``transpose_naive`` (32x8 threads per 32x32 tile,
    ``out[x * rows + (y + j)] = in[(y + j) * cols + x]``) and ``transpose_naive2d`` (16x16
    blocks, one element per thread); ``transpose_tiled`` stages the tile and stays silent.

    Fix
    ---
    Read a ``T x T`` tile of the input along its rows into ``__shared__ T tile[T][T + 1]``,
    ``__syncthreads()``, and write the output along its rows from the tile's columns
    (``tile[threadIdx.x][j]``): 32x32 tiles with 32x8 threads (each thread 4 elements each way)
    are the classic shape.

    How the estimate is made
    ------------------------
    An upper bound by the layout rules' roofline (``l1_roofline_estimate``: the SMs' L1 data
    path, ``max(requests, sectors / 4)`` cycles per line, against a DRAM floor): the strided
    side's sectors come down to its ideal and its requests to one per 4 sectors, and the
    sectors its rows refetch from the L2 where they overflow the L1 (``walks.row_refetch``:
    kmeans feature_transpose, 512 KB of rows an SM) go; the shared
    tile's traffic goes through another pipe and is not charged. It leaves out the DRAM sectors
    and partial-sector writes the strided side wastes (the roofline counts each byte once), so
    the measured gain can be larger: the variant is measured.

    Fix safety
    ----------
    Automatic-and-verified when the kernel is the copy itself: the store line is
    ``dst[...] = src[...];`` (parentheses or a cast allowed), the kernel's only global accesses
    are that load and that store, and it uses no shared memory nor atomics. The body is then
    replaced by the tiled transpose (bounds checked, so sizes that are not multiples of the
    tile work; the sizes named by the kernel's integer parameters whose values match and that
    the indices use, else the launch's numbers), with a 32x32 tile and the user's block where
    it is 32 wide and its height divides 32, else 32x8 threads and the grid changed to cover
    the matrix (a launch change the user must make too), and, for square 8x8 or 16x16 blocks,
    a tile of the block's size as an alternative. The measurement stage compares the outputs
    with the kernel's before it reports a speedup. Otherwise the variant describes the change.
    """

    id = "GA306"
    name = "transpose-through-shared"
    title = "Transpose through global memory (no shared tile)"
    severity = "warning"
    models = ("trace",)
    options = {"min_sector_ratio": 2.0}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        view = ctx.trace_view
        min_ratio = float(ctx.option("min_sector_ratio"))
        loads = view.lines(ctx.same_file, [Kind.LOAD])
        stores = view.lines(ctx.same_file, [Kind.STORE])
        pitches = integer_args(ctx.spec)
        reported: set[int] = set()
        sides: dict[tuple[int, str, str], tuple[Any, ...]] = {}

        def side(line: int, insts: np.ndarray, buffer: str, kind: str) -> tuple[Any, ...]:
            key = (line, buffer, kind)
            if key not in sides:  # with its lanes' stride (each side is in many pairs)
                got = _side(view, insts, buffer)
                sides[key] = (*got, stride_mode(got[0]))
            return sides[key]

        for sf, sline, _ in stores:
            s_insts = view.insts_at(sf, sline, Kind.STORE)
            for lf, lline, _ in loads:
                l_insts = view.insts_at(lf, lline, Kind.LOAD)
                for dst in view.buffers_at(s_insts):
                    for src in view.buffers_at(l_insts):
                        if src == dst:
                            continue
                        f = self._pair(
                            ctx,
                            view,
                            (lline, src, side(lline, l_insts, src, "load")),
                            (sline, dst, side(sline, s_insts, dst, "store")),
                            min_ratio,
                            pitches,
                        )
                        if f is not None and (f.line or 0) not in reported:
                            reported.add(f.line or 0)
                            yield f

    def _pair(
        self,
        ctx: RuleContext,
        view: Any,
        load: tuple[int, str, tuple[Any, ...]],
        store: tuple[int, str, tuple[Any, ...]],
        min_ratio: float,
        pitches: list[int],
    ) -> Finding | None:
        lline, src, (ll, _, l_req, l_sect, l_ideal, l_stride) = load
        sline, dst, (sl, _, s_req, s_sect, s_ideal, s_stride) = store
        bs, bd = view.buffers[src], view.buffers[dst]
        size = bs.elem_bytes
        if size != bd.elem_bytes or size <= 0:
            return None
        if l_stride is None or s_stride is None:
            return None
        if l_stride == size and s_sect >= min_ratio * max(s_ideal, 1):
            load_coalesced, step, c_lanes, s_lanes, count = True, s_stride, ll, sl, bs.count
        elif s_stride == size and l_sect >= min_ratio * max(l_ideal, 1):
            load_coalesced, step, c_lanes, s_lanes, count = False, l_stride, sl, ll, bd.count
        else:
            return None
        if step % size or step // size <= 1:
            return None
        t = find_transposition(
            (c_lanes.cta, c_lanes.tid, c_lanes.rec, c_lanes.off // size),
            (s_lanes.cta, s_lanes.tid, s_lanes.rec, s_lanes.off // size),
            step // size,
            count,
            pitches,
        )
        if isinstance(t, str):
            return None
        line = sline if load_coalesced else lline
        req, sect, ideal = (s_req, s_sect, s_ideal) if load_coalesced else (l_req, l_sect, l_ideal)
        strided_buf, verb = (dst, "written") if load_coalesced else (src, "read")
        coalesced_buf = src if load_coalesced else dst
        return self.finding(
            ctx,
            f"a transpose through global memory: `{coalesced_buf}` is "
            f"{'read' if load_coalesced else 'written'} along the rows of a {t.rows}x{t.cols} "
            f"matrix (coalesced) and `{strided_buf}` {verb} along its columns, "
            f"{step} bytes between consecutive threads: {sect / max(req, 1):.1f} sectors per "
            f"request where {ideal / max(req, 1):.1f} would do. Stage a 32x32 tile in shared "
            f"memory ([32][33]) and {'write' if load_coalesced else 'read'} `{strided_buf}` "
            "along its rows",
            line=line,
            evidence=[
                Evidence("sector_ratio", round(sect / max(ideal, 1), 3), min_ratio, ">="),
                Evidence("transposed_pairs_share", round(t.share, 4), 0.99, ">="),
                Evidence("pairs", t.pairs),
                Evidence("matrix_rows", t.rows),
                Evidence("matrix_cols", t.cols),
                Evidence("stride_bytes", int(step), unit="B"),
                Evidence("requests", req),
                Evidence("sectors", sect, unit="sectors"),
                Evidence("ideal_sectors", ideal, unit="sectors"),
            ],
            details=TransposeAccess(
                src,
                dst,
                int(lline),
                int(sline),
                tuple(int(i) for i in np.unique(ll.inst)),
                tuple(int(i) for i in np.unique(sl.inst)),
                load_coalesced,
                t.rows,
                t.cols,
                size,
            ),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(TransposeAccess)
        view = ctx.trace_view
        buf, insts = d.strided()
        lanes, recs, req, sect, ideal = _side(view, np.array(insts, np.int64), buf)
        lines = view.weighted(recs, view.sector_counts.lines)
        saved = l1_cycles(req, sect, lines) - l1_cycles(ideal / 4.0, ideal)
        # the variant's launch: 32x8 threads per 32x32 tile, each warp loading 4 rows of 32
        # consecutive elements before the barrier (the loads independent: all in flight)
        in_flight = TILE_ROWS_PER_THREAD * WARP * view.buffers[buf].elem_bytes
        # the launch roofline with the strided side's records moving only the bytes they use:
        # its L2 sectors, partial-sector writes and DRAM fills brought to the coalesced side's
        return l1_roofline_estimate(
            ctx.device,
            view,
            saved,
            f"the strided side's {sect} sectors in {req} requests (sampled CTAs) brought down to "
            f"{ideal} (the tile's shared traffic, conflict-free with the [32][33] padding, and "
            f"its barrier not charged), launched as the variant is, 32x8 threads with "
            f"{TILE_ROWS_PER_THREAD} independent 128-byte row loads per warp in flight "
            f"({in_flight} bytes per warp)",
            records=np.asarray(recs, np.int64),
            in_flight_after=float(in_flight),
            before_l2_extra=0.0 if d.load_coalesced else walks.row_refetch(ctx, buf, lanes, recs),
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(TransposeAccess)
        side = f"`{d.dst}`" if d.load_coalesced else f"`{d.src}`"
        desc = (
            f"stage the transpose through a shared tile: read a 32x32 tile of `{d.src}` along "
            f"its rows into `__shared__ T tile[32][33]`, __syncthreads(), write {side}"
            " along its rows from the tile's columns (32x8 threads, 4 elements each)"
        )
        why = self._not_automatic(ctx, d)
        if why is not None:
            return Variant("display-only", f"{desc} (not applied automatically: {why})")
        ks = ctx.kernel_source
        text = ks.text
        params = parse_signature(text, ctx.kernel_name)
        try:
            env = {k: int(v) for k, v in ctx.spec.env().items()}
        except UsageError:  # no launch values: the sizes become numbers
            env = {}
        ints = {p.name: env[p.name] for p in params if p.pointee is None and p.name in env}
        pointee = {p.name: p.pointee for p in params if p.pointee}
        elem = (pointee.get(d.src) or "").replace("const", "").strip() or None
        if elem is None:
            return Variant("display-only", f"{desc} (not applied automatically: no element type)")
        c_line = d.load_line if d.load_coalesced else d.store_line
        c_buf = d.src if d.load_coalesced else d.dst
        s_line = d.store_line if d.load_coalesced else d.load_line
        s_buf = d.dst if d.load_coalesced else d.src
        rows = _size_name(index_parameters(ks, s_line, s_buf, ints), ints, d.rows)
        cols = _size_name(index_parameters(ks, c_line, c_buf, ints), ints, d.cols)
        tiles = transpose_tiles(d.rows, d.cols, ctx.launch.block.as_tuple())
        variants = []
        for tile in tiles:
            body = transpose_body(
                src=d.src,
                dst=d.dst,
                elem_type=elem,
                rows=rows,
                cols=cols,
                load_coalesced=d.load_coalesced,
                tile=tile,
            )
            rw = ks.rewrite()
            rw.replace(ks.body_start, ks.body_end + 1, body)
            launch: dict[str, Any] | None = None
            user = (ctx.launch.grid.as_tuple(), ctx.launch.block.as_tuple())
            if (tile.grid, tile.block) != user:
                launch = {"grid": list(tile.grid), "block": list(tile.block)}
            how = (
                f"launched on {tile.grid[0]}x{tile.grid[1]} CTAs of {tile.block[0]}x"
                f"{tile.block[1]} threads (change the launch too)"
                if launch
                else "with the kernel's launch"
            )
            sizes = f"`{d.src}` {'is' if d.load_coalesced else 'is the transpose of'} a {rows} x "
            sizes += f"{cols} matrix"
            variants.append(
                Variant(
                    "automatic-and-verified",
                    f"the body replaced by a transpose through a [{tile.tile}][{tile.tile} + 1] "
                    f"shared tile ({sizes}; loads and stores coalesced, bounds checked), {how}",
                    diff=rw.diff(ctx.source_file),
                    launch=launch,
                    label=tile.label,
                )
            )
        first, *rest = variants
        return Variant(
            first.safety,
            first.description,
            diff=first.diff,
            launch=first.launch,
            label=first.label,
            alternatives=tuple(rest),
        )

    def _not_automatic(self, ctx: RuleContext, d: TransposeAccess) -> str | None:
        trace = ctx.trace
        recs = trace.records
        if (recs["space"] == int(Space.SHARED)).any():
            return "the kernel uses shared memory already"
        if np.isin(recs["kind"], [int(Kind.ATOMIC), int(Kind.REDUCTION)]).any():
            return "the kernel makes atomic accesses"
        glob = np.unique(recs["inst"][recs["space"] == int(Space.GLOBAL)])
        mine = set(d.load_insts) | set(d.store_insts)
        other = [int(i) for i in glob if int(i) not in mine]
        if other:
            lines = sorted({trace.line_of(i)[1] or 0 for i in other})
            return (
                "the kernel makes other global accesses (lines "
                + ", ".join(str(n) for n in lines)
                + "): merge the tile by hand"
            )
        if ctx.launch.grid.as_tuple()[2] != 1 or ctx.launch.block.as_tuple()[2] != 1:
            return "a 3-D launch"
        return copy_statement(ctx.kernel_source, d.store_line, d.dst, d.src)


def _size_name(found: set[str], ints: dict[str, int], value: int) -> str:
    """The parameter that names ``value`` among those the index uses, else the number."""
    names = sorted(n for n in found if ints.get(n) == value)
    return names[0] if len(names) == 1 else str(value)
