"""GA307 shared-staging-that-L1-serves: a shared tile filled once from global memory and read back
by neighbours, small enough for the L1 to serve the same reuse: propose reading global memory
directly, if measured faster (the mirror of GA305)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    Rule,
    RuleContext,
    Space,
    Variant,
    distinct,
    dram_bytes_per_s,
    l1_cycles,
    plan_direct_reads,
    record_wavefronts,
    roofline,
    sm_cycles_per_s,
    staged_tiles,
    work_ratio,
)

SECTOR = 32
UNIFIED_EXTRA_BYTES = 28 * 1024
"""The part of an SM's unified L1/shared array that shared memory can never take (Volta to Hopper:
128 - 96, 192 - 164 and 256 - 228 KiB); the L1 has this plus the carveout shared memory leaves."""


@dataclass(frozen=True)
class StagedRead(FindingDetails):
    """A tile filled at ``fill_line`` (shared stores ``fill_insts``, global loads
    ``global_insts`` of ``buffer``) and read at ``read_insts``; counts over the traced CTAs."""

    buffer: str
    fill_line: int
    fill_insts: tuple[int, ...]
    global_insts: tuple[int, ...]
    read_insts: tuple[int, ...]
    words: int
    reads: int
    footprint_bytes_per_sm: int
    l1_bytes: int


class SharedStagingL1Serves(Rule):
    """A shared tile filled once from global memory and read back by neighbours, where the L1
    would serve the reuse.

    What it detects
    ---------------
    A source line that stores into shared memory what the same line loads from global memory,
    each shared word once per CTA and no other line writing it (a tile filled once, not a
    scratch array like a reduction's partial sums), and other lines that read those words
    back, each word by at least ``min_reuse`` threads of the CTA on average (a stencil's
    neighbours), on a GPU whose L1 caches global loads (compute capability 7.0 and later), where
    the global bytes the resident CTAs stage at once (distinct sectors per CTA x CTAs per SM)
    fit in the L1 that the shared-memory carveout leaves (the unified array less the shared
    memory the resident CTAs allocate: the driver sizes the carveout to the launch's need):
    the L1 would hold the window while its neighbours reuse it. Found in the trace's
    shared and global accesses, per CTA.

    Why it is slow
    --------------
    The tile costs a global load and a shared store per word, a barrier that holds every warp
    of the CTA until the slowest has filled its part, and a shared read per neighbour; reading
    the neighbours from global memory instead costs one L1 request per neighbour (hits, the
    window is small) and no barrier. On Volta and later the L1 and shared memory are one array
    with one data path, so the tile saves little bandwidth and adds the barrier's stall: for a
    3x3 box filter over 8192^2 floats on an H200 (issue 16), the direct reads measured 1.70x
    faster than an 18x18 tile. It does not always pay (wide windows, many reuses): recommended
    only when measured faster.

    Example
    -------
    ``kernels/stencil/box.cu``: ``box3_shared`` stages the block's 18x18 window and reads its 9
    neighbours from the tile; ``box3_direct`` reads them through the L1 (GA305 asks it the
    opposite question). ``kernels/cells/cells.cu``'s ``cells_soa_tiled`` (GA305's fix) too:
    the measurement says which of the two pays on the GPU at hand.

    Fix
    ---
    Drop the tile: read each neighbour ``in[(y + dy) * w + (x + dx)]`` (with the fill's bounds
    handling) where the kernel read the tile, remove the fill and the barrier, and keep the
    loads read-only (``const __restrict__``) so they go through the L1.

    How the estimate is made
    ------------------------
    The roofline of the SMs' data path shared by the L1 and shared memory (``max(requests,
    sectors / 4)`` cycles per global line, a cycle per shared wavefront) against the DRAM
    floor: the fill's global requests and the tile's shared wavefronts (as many as the same words
    take without bank conflicts: those are GA201's finding and fix) go; the reads become
    global requests, each with as many sectors as a fill request moves on average. The
    barrier's stall and latency are not in it, which is where the measured gain comes from.
    Where the fix is automatic, the point is the launch model's on the variant's own trace
    (``point_from_variant_trace``): the fill, the barrier, the chain through them and the
    direct reads' own instructions and waits as the variant executes them (box3_shared on an
    H200: 0.85x on the data path alone, 1.18x on the variant's trace, 1.49x measured;
    cells_soa_tiled 1.16x and 1.03x for 1.03x). The estimate can be below 1 when the fix pays;
    the measurement decides.

    Fix safety
    ----------
    Automatic-and-verified when the tile is only read after one barrier: one ``__shared__``
    array written by a single statement ``tile[i][j] = value;`` in the loops that fill it
    (``i``, ``j`` plain variables: the loops', or the kernel's that never change), one
    ``__syncthreads()``, every other use a read ``tile[a][b]`` after it, and nothing the value
    uses changed in between. The fill becomes a lambda ``tile_at(i, j)`` computing ``value``
    (with the loops' other declarations), each read ``tile_at(a, b)``, and the declaration, the
    fill's loops and the barrier go. The kernel must not write the buffer it stages. The
    measurement stage compares outputs and the finding stays a recommendation only when the
    variant measures faster (else a note). Otherwise the variant describes the change.
    """

    id = "GA307"
    name = "shared-staging-l1-serves"
    title = "Shared tile that the L1 would serve (staging that may not pay)"
    severity = "warning"
    models = ("trace",)
    # dropping the tile removes its fill, its barrier and the chain through them, which the
    # data-path roofline on the kernel's trace does not follow: the point is the launch model's
    # on the variant's own trace (box3_shared: 0.85x on the roofline, 1.49x measured)
    point_from_variant_trace = True
    options = {"min_reuse": 2.0}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        d = ctx.device
        if d.cc_major < 7:
            return
        min_reuse = float(ctx.option("min_reuse"))
        trace = ctx.trace
        view = ctx.trace_view
        occ = ctx.occupancy
        resident = max(occ.active_blocks_per_sm, 1)
        carveout = min(occ.allocated_smem_per_block * resident, d.smem_per_sm)
        l1 = max(d.smem_per_sm + UNIFIED_EXTRA_BYTES - carveout, 0)
        for t in staged_tiles(trace, ctx.same_file):
            if t.reuse < min_reuse:
                continue
            file = trace.line_of(t.fill_insts[0])[0]
            g = view.insts_at(file, t.fill_line, Kind.LOAD)
            bufs = view.buffers_at(g)
            if len(bufs) != 1:
                continue
            lanes, _ = view.access(g, bufs[0])
            if not len(lanes):
                continue
            sectors = distinct((lanes.cta.astype(np.int64) << 40) | (lanes.off // SECTOR))
            per_cta = len(sectors) * SECTOR / max(len(distinct(lanes.cta)), 1)
            footprint = int(per_cta * resident)
            if footprint > l1:
                continue
            read_line = t.read_lines[0]
            yield self.finding(
                ctx,
                f"a shared tile filled once from `{bufs[0]}` (line {t.fill_line}, {t.words} words "
                f"over {t.ctas} traced CTAs) and read back by {t.reuse:.1f} threads per word; the "
                f"{resident} CTAs an SM holds stage {footprint / 1024:.1f} KiB of global memory at "
                f"once, which the L1 ({l1 / 1024:.0f} KiB beside the resident CTAs' shared memory) "
                "would hold: reading the neighbours from global memory drops the fill and the "
                "barrier; recommended only if measured faster",
                line=read_line,
                evidence=[
                    Evidence("threads_per_word", round(t.reuse, 3), min_reuse, ">="),
                    Evidence("staged_bytes_per_sm", footprint, l1, "<=", "B"),
                    Evidence("tile_words", t.words),
                    Evidence("read_pairs", t.reads),
                    Evidence("fill_requests", t.fill_requests),
                    Evidence("read_requests", t.read_requests),
                    Evidence("resident_ctas_per_sm", resident),
                    Evidence("traced_ctas", t.ctas),
                ],
                recommend_only_if_faster=True,
                details=StagedRead(
                    bufs[0],
                    t.fill_line,
                    t.fill_insts,
                    tuple(int(i) for i in distinct(lanes.inst)),
                    t.read_insts,
                    t.words,
                    t.reads,
                    footprint,
                    int(l1),
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        s = finding.details_as(StagedRead)
        view = ctx.trace_view
        trace = ctx.trace
        _, g_recs = view.access(np.array(s.global_insts, np.int64), s.buffer)
        g_req = view.weighted(g_recs)
        g_sect = view.weighted(g_recs, view.rec_sectors)
        recs = trace.records
        sample = np.isin(recs["cta"], view.ctas) & (recs["space"] == int(Space.SHARED))
        sh = recs[sample]
        fill = sh[np.isin(sh["inst"], s.fill_insts)]
        reads = sh[np.isin(sh["inst"], s.read_insts)]
        # the tile at its best: its bank conflicts are GA201's finding, whose fix (padding) is
        # the smaller change, so the direct reads are weighed against the conflict-free tile
        # (convolutionSeparable's rows kernel: 2-way conflicts made the tile look 1.5x slower
        # than the L1, where the padded tile is the right code). Two findings never argue.
        _, wf_fill = record_wavefronts(fill)
        _, wf_read = record_wavefronts(reads)
        shared_wf = float(wf_fill.sum() + wf_read.sum())
        r_req = float(len(reads))
        per_req = g_sect / g_req if g_req else 1.0
        direct = l1_cycles(r_req, r_req * per_req)
        before = view.l1_total() + shared_wf
        saved = l1_cycles(g_req, g_sect) + shared_wf - direct
        what = (
            f"the fill's {g_req:.0f} global requests ({g_sect:.0f} sectors) and the tile's "
            f"{shared_wf:.0f} shared wavefronts (without bank conflicts) replaced by "
            f"{r_req:.0f} global requests of {per_req:.1f} sectors each (sampled CTAs)"
        )
        inputs = {
            "pipe_cycles_sampled": before,
            "saved_cycles_sampled": saved,
            "shared_wavefronts": shared_wf,
            "direct_requests": r_req,
            "scale": view.scale,
        }
        hz, bw = sm_cycles_per_s(ctx.device), dram_bytes_per_s(ctx.device)
        if hz is None or bw is None or before <= 0:
            ratio = work_ratio(before, saved) if before > 0 else 1.0
            return Estimate(
                round(ratio, 3),
                "point",
                f"data-path cycles {before:.0f} before, {before - saved:.0f} after {what}; the "
                "barrier's stall and latency are not modelled (no clock or bandwidth: DRAM "
                "ignored)",
                inputs,
            )
        nbytes = view.useful_bytes()
        r = roofline(before * view.scale, saved * view.scale, hz, nbytes, bw)
        inputs.update(pipe_time_us=r.pipe_s * 1e6, dram_time_us=r.dram_s * 1e6)
        # a point, not a bound: the barrier's stall the fix removes is not in it (box3_shared on
        # an H200, 2026-11-25: 1.33x estimated, 1.50x measured)
        return Estimate(
            round(r.speedup, 3),
            "point",
            f"roofline over the launch: the SMs' L1/shared data path {r.pipe_s * 1e6:.2f} us "
            f"(max(requests, sectors / 4) cycles per global line, a cycle per shared wavefront), "
            f"{(r.pipe_s - r.saved_s) * 1e6:.2f} us after {what}; DRAM floor "
            f"{r.dram_s * 1e6:.2f} us. The barrier's stall and latency are not modelled (what "
            "the fix mostly saves, so the gain can exceed this point): the measurement decides",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        s = finding.details_as(StagedRead)
        desc = (
            f"read the neighbours from `{s.buffer}` directly (through the L1) where the kernel "
            "reads the tile, and drop the tile's fill and the barrier"
        )
        stored = set()
        for f, ln, _ in ctx.trace_view.lines(ctx.same_file, [Kind.STORE]):
            stored.update(ctx.trace_view.buffers_at(ctx.trace_view.insts_at(f, ln, Kind.STORE)))
        if s.buffer in stored:
            return Variant(
                "display-only", f"{desc} (not applied: the kernel writes `{s.buffer}` too)"
            )
        plan = plan_direct_reads(ctx.kernel_source, s.fill_line, ctx.source_file)
        if isinstance(plan, str):
            return Variant("display-only", f"{desc} (not applied automatically: {plan})")
        return Variant(
            "automatic-and-verified",
            f"{desc}: `{plan.tile}` becomes `{plan.helper}(i, j)`, the value its fill stored "
            f"there, computed from `{s.buffer}` where the kernel read the tile ({plan.reads} "
            "subscripts); the fill's "
            "loop, the declaration and __syncthreads() go",
            diff=plan.diff,
        )
