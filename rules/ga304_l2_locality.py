"""GA304 l2-locality: a 2D grid whose row-major launch order loses L2 reuse that tiling keeps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.errors import GpuAdviseError
from gpuadvise.rules import (
    TILE_SIZES,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    LaunchTimes,
    ModelUnavailable,
    PatchError,
    Remap,
    Rule,
    RuleContext,
    Variant,
    buffers_outgrow_l2,
    kernel_launch_times,
    launch_change_estimate,
    probe_ctas,
    probe_l2,
    probe_limit,
    remap_safety,
    through_model,
    tiling_diff,
    view_traffic,
)
from gpuadvise.rules import probe_trace as probe_trace  # the tests read it here

_USABLE_MODES = ("synthesized", "complete")  # an L2 result for the whole grid


@dataclass(frozen=True)
class OrderTraffic(FindingDetails):
    """The DRAM traffic the L2 model predicts under one launch order (its label, N)."""

    label: str
    n: int | None
    dram_bytes: float
    dram_write_bytes: float

    @classmethod
    def of(cls, order: Any) -> OrderTraffic:
        n = None if order.n is None else int(order.n)
        return cls(order.label, n, float(order.dram_bytes), float(order.dram_write_bytes))


@dataclass(frozen=True)
class L2Tiling(FindingDetails):
    """The row-major and the best tiled order's traffic, and whether the block index can be
    remapped automatically (the kernel's source is parsed again for the diffs)."""

    row: OrderTraffic
    best: OrderTraffic
    remap: Remap


def _best_tiled(l2: Any) -> Any | None:
    """The model's best tiled order: its overall best when that is tiled, else the tiled order
    with the fewest DRAM reads (the first of equals)."""
    if l2.best.order == "tile-x":
        return l2.best
    tiled = [o for o in l2.orders if o.order == "tile-x"]
    if not tiled:
        return None
    low = min(o.dram_bytes for o in tiled)
    return next(o for o in tiled if o.dram_bytes <= low * 1.01 + l2.fetch_bytes)


def _mb(x: float) -> str:
    return f"{x / 1e6:.1f} MB"


def _tiled(ks: KernelSource, source_file: Any, sizes: Any, best: int | None) -> list[Variant]:
    """The automatic tiled candidates, one per N of ``sizes`` (PatchError: no remap)."""
    diffs = {n: tiling_diff(ks, n, source_file) for n in sizes}
    return [
        Variant(
            "automatic-and-verified",
            f"thread-group tiling along X with N = {n}: blockIdx remapped so that "
            f"blocks are launched in strips of {n} tiles"
            + (" (the L2 model's best N)" if n == best else ""),
            diff=diffs[n],
            label=f"N={n}",
        )
        for n in sizes
    ]


# ---------------------------------------------------------------------------------------------


class L2Locality(Rule):
    """A 2D grid whose hardware launch order loses L2 reuse that thread-group tiling keeps.

    What it detects
    ---------------
    A kernel launched on a 2D grid whose blocks read overlapping data (an image filter with a
    wide footprint, a stencil), where gpuadvise's L2 model predicts that, with the hardware's
    row-major launch order (``blockIdx.x`` fastest), much of that reuse is lost: the launch
    reads more than the L2 holds in effect (``efficiency x L2 size``), and launching the blocks
    in strips of N tiles (NVIDIA's thread-group ID tiling along X, N = 4, 8, 16, 32) cuts the
    predicted DRAM reads by at least ``min_dram_reduction`` or raises the L2 hit rate by at least
    ``min_hit_rate_gain``. Reported at the kernel's first ``blockIdx``, with the launch's
    footprint and the L2 capacity, and the predicted hit rate and DRAM reads of row-major
    against the best tiled order.

    The model needs footprints for the whole grid. When the analysis' trace cannot give them
    (the first CTAs of an image kernel all lie on its top edge), and the block index can be
    remapped safely (see Fix safety), the rule traces its own sample (option ``probe``, on by
    default): it emulates a 4x3 patch of CTAs at the centre and 2x2 patches at the corners and
    the middles of the edges, and lets the model synthesize the rest.
    Otherwise the rule is skipped with a note.

    Why it is slow
    --------------
    Blocks launched one after the other run at the same time and share the L2. In row-major order, a
    block and the blocks that reuse its data (the ones below it, for a vertical reach of several
    tile rows) are launched whole grid rows apart: on a wide frame the data has been evicted by the
    time they run, and it is read from DRAM again. Tiling hands out the blocks strip by strip, so
    the blocks in flight cover a compact region and the reuse hits in L2. NVIDIA's thread-group
    tiling (L. Bavoil) gained 47% with N = 16 at 1440p on an RTX 2080 (4 MB of L2; L2 hit rate 63%
    -> 86%). On an H100 (50 MB) the same frame fits and tiling is 0-7% slower; at 8K with a
    2048-pixel footprint N = 32 is 1.19x faster (docs/validation.md).

    Example
    -------
    ``kernels/tile_gather/gather.cu``: ``gather_rowmajor`` on an 8K frame with a 2048-pixel
    footprint (``case.toml``) is reported; ``gather_1440p`` (the working set fits) is not, nor
    is ``gather_tiled``, which computes its own tiled block order (it reads ``gridDim``: never
    remapped again).

    Fix
    ---
    Remap the block index at the top of the kernel (NVIDIA's published snippet, corrected, the last
    strip narrower when N does not divide the grid's width) and use it for every
    ``blockIdx.x``/``blockIdx.y``::

        const unsigned n = 32, per_strip = n * gridDim.y, full = gridDim.x / n;
        const unsigned flat = gridDim.x * blockIdx.y + blockIdx.x;
        const unsigned strip = flat / per_strip, local = flat % per_strip;
        const unsigned w = flat >= full * per_strip ? gridDim.x % n : n;
        const unsigned s = strip * n + (local / w) * gridDim.x + local % w;
        const uint2 tile = make_uint2(s % gridDim.x, s / gridDim.x);

    The best N depends on the frame, the footprint and the GPU: measure N = 4, 8, 16, 32.

    How the estimate is made
    ------------------------
    An upper bound from the L2 model: the ratio of the predicted DRAM traffic (reads plus
    write-backs) of row-major to that of the best tiled order, as if the kernel's time were all
    DRAM time. Most kernels this rule finds are bound by L2 bandwidth or latency as much as by
    DRAM, so the real gain is smaller (8K, 2048-pixel footprint on an H100: 1.57x estimated,
    1.19x measured). The inputs give both DRAM times at the device's bandwidth. The point (issue
    29) is the launch model's on the kernel's trace with its DRAM reads scaled by the L2 model's
    ratio, everything else as traced: 1.11x for gather_rowmajor on the H200 model, 1.19x
    measured on an H200 (2026-11-30); the bound is the larger of the two models'.

    Fix safety
    ----------
    Automatic and verified when the kernel reads ``blockIdx`` only as ``blockIdx.x`` and
    ``blockIdx.y`` in its own body, does not read ``gridDim`` (a kernel that does may already
    compute its own order or loop over the grid), no device function or macro of the file reads
    ``blockIdx``, it uses neither cooperative groups nor inline assembly, it does not loop on
    inter-block signals (atomics, fences, volatile: a block waiting for another may rely on the
    launch order), and the grid is 2D. Each block then computes exactly the tile it computed
    before, in another order: outputs are unchanged, and the measurement stage checks that they
    are, for every N. Otherwise the fix is display-only, with the reasons.
    """

    id = "GA304"
    name = "l2-locality"
    title = "Row-major block order loses L2 reuse: tile the thread-group IDs"
    severity = "warning"
    models = ("source", "trace", "l2")
    options = {"min_dram_reduction": 0.1, "min_hit_rate_gain": 0.03, "probe": True}

    def _l2(self, ctx: RuleContext, ks: KernelSource, remap: Remap) -> tuple[Any, str]:
        """An L2 result for the whole grid and where it came from; ModelUnavailable otherwise."""
        l2 = ctx.l2
        if l2.mode in _USABLE_MODES:
            return l2, f"the analysis' trace ({l2.mode})"
        why = "; ".join(l2.notes) or f"mode {l2.mode}"
        if not (remap.safe and ctx.option("probe")):
            extra = (
                "the probe is turned off"
                if remap.safe
                else "the kernel's own sample cannot be traced: " + remap.reasons[0]
            )
            raise ModelUnavailable(
                f"the L2 model has no footprint for the whole grid ({why}); {extra}"
            )
        limit = probe_limit(ctx)
        if limit == 0:
            raise ModelUnavailable(
                f"the L2 model has no footprint for the whole grid ({why}); the probe is bounded "
                "to 0 CTAs (--l2-probe-ctas 0)"
            )
        try:
            probed, n = probe_l2(ctx, ks)
        except (GpuAdviseError, ValueError, MemoryError) as exc:
            text = exc.one_line() if isinstance(exc, GpuAdviseError) else str(exc)
            raise ModelUnavailable(f"the L2 probe failed: {type(exc).__name__}: {text}") from exc
        if probed.mode not in _USABLE_MODES:
            bound = (
                f" (the probe was bounded to {limit} CTAs by --l2-probe-ctas or --sample-ctas)"
                if limit is not None
                and limit < len(probe_ctas(int(ctx.launch.grid.x), int(ctx.launch.grid.y)))
                else ""
            )
            raise ModelUnavailable(
                "the L2 model cannot synthesize the grid from the probe's CTAs: "
                + ("; ".join(probed.notes) or probed.mode)
                + bound
            )
        return probed, f"a probe of {n} CTAs across the grid ({probed.mode})"

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        g = ctx.launch.grid
        grid = (int(g.x), int(g.y), int(g.z))
        if grid[2] != 1 or grid[0] < 2 or grid[1] < 2:
            return
        ks = ctx.kernel_source
        remap = remap_safety(ks, grid)
        l2, source = self._l2(ctx, ks, remap)
        row = l2.order("row-major")
        best = _best_tiled(l2)
        if best is None or row.dram_bytes <= 0:
            return
        cut = 1.0 - best.dram_bytes / row.dram_bytes
        gain = best.hit_rate - row.hit_rate
        min_cut = float(ctx.option("min_dram_reduction"))
        min_gain = float(ctx.option("min_hit_rate_gain"))
        if l2.fits or not (cut >= min_cut or gain >= min_gain):
            return
        n = int(best.n)
        line = remap.first_line if remap.first_line is not None else ctx.kernel_line
        yield self.finding(
            ctx,
            f"L2 locality: the launch reads {_mb(l2.footprint_bytes)}, more than the "
            f"{_mb(l2.capacity_bytes)} the L2 holds in effect, and in row-major block order "
            f"blocks that reuse data run too far apart: predicted L2 hit rate "
            f"{row.hit_rate:.1%}, {_mb(row.dram_bytes)} read from DRAM. Thread-group tiling "
            f"along X with N = {n}: {best.hit_rate:.1%}, {_mb(best.dram_bytes)} "
            f"({abs(cut):.0%} {'fewer' if cut >= 0 else 'more'} DRAM reads); remap blockIdx",
            line=line,
            evidence=[
                Evidence(
                    "footprint_bytes", round(l2.footprint_bytes), round(l2.capacity_bytes), ">", "B"
                ),  # fmt: skip
                Evidence("dram_read_reduction", round(cut, 4), min_cut, ">="),
                Evidence("hit_rate_gain", round(gain, 4), min_gain, ">="),
                Evidence("best_order", best.label),
                Evidence("row_major_hit_rate", round(row.hit_rate, 4)),
                Evidence("best_order_hit_rate", round(best.hit_rate, 4)),
                Evidence("row_major_dram_bytes", round(row.dram_bytes), unit="B"),
                Evidence("best_order_dram_bytes", round(best.dram_bytes), unit="B"),
                Evidence("row_major_inflight_bytes", round(row.working_set_bytes), unit="B"),
                Evidence("l2_bytes", l2.l2_bytes, unit="B"),
                Evidence("l2_efficiency", l2.efficiency),
                Evidence("model_source", source),
            ],
            details=L2Tiling(OrderTraffic.of(row), OrderTraffic.of(best), remap),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(L2Tiling)
        row, best = d.row, d.best
        before = row.dram_bytes + row.dram_write_bytes
        after = best.dram_bytes + best.dram_write_bytes
        speedup = max(before / max(after, 1.0), 1.0)
        bw = ctx.device.mem_bandwidth_gbps
        inputs: dict[str, Any] = {
            "row_major_dram_read_bytes": row.dram_bytes,
            "best_dram_read_bytes": best.dram_bytes,
            "dram_write_bytes": row.dram_write_bytes,
            "best_order": best.label,
        }
        times = ""
        if bw:
            inputs["row_major_dram_time_us"] = before / (bw * 1e9) * 1e6
            inputs["best_dram_time_us"] = after / (bw * 1e9) * 1e6
            times = (
                f" ({inputs['row_major_dram_time_us']:.0f} us and "
                f"{inputs['best_dram_time_us']:.0f} us at {bw:.0f} GB/s)"
            )
        method = (
            f"L2 model: DRAM traffic row-major / {best.label} = ({_mb(row.dram_bytes)} read + "
            f"{_mb(row.dram_write_bytes)} written) / ({_mb(best.dram_bytes)} + "
            f"{_mb(best.dram_write_bytes)}){times}, as if the kernel were DRAM-bound"
        )
        rule = Estimate(round(speedup, 3), "upper-bound", method, inputs)
        ratio = self._on_launch(ctx, row.dram_bytes, best.dram_bytes, best.label, inputs)
        if ratio is None:
            return replace(
                rule,
                method=method + "; L2 bandwidth and latency usually bound it too, so the real "
                "gain is smaller",
            )
        launch, on_launch = ratio
        # the DRAM ratio on the launch (its floor and CTA launches staying) stays the bound
        # where it is larger than the launch model's; the point is the launch model's
        ratio_bound = through_model(rule, launch)
        top = max(ratio_bound.speedup or 1.0, on_launch.speedup or 1.0)
        return Estimate(
            round(top, 3),
            "upper-bound",
            f"{ratio_bound.method}; the traced launch with its DRAM reads scaled by the L2 "
            f"model's {best.label} / row-major: {on_launch.method}",
            {**ratio_bound.inputs, **on_launch.inputs},
        )

    def _on_launch(
        self, ctx: RuleContext, row_bytes: float, best_bytes: float, label: str,
        inputs: dict[str, Any],
    ) -> tuple[LaunchTimes, Estimate] | None:  # fmt: skip
        """The traced launch's times, and the launch model on the kernel's trace with its DRAM
        reads scaled by the L2 model's ratio of the two launch orders (the L2's sectors and
        everything else as traced): the point and bound of issue 29; None without a trace or
        the device's rates."""
        if not ctx.has_model("trace") or row_bytes <= 0:
            return None
        try:
            view = ctx.trace_view
        except ModelUnavailable:
            return None
        times = kernel_launch_times(ctx.device, view)
        before = view_traffic(ctx.device, view)
        ratio = min(best_bytes / row_bytes, 1.0)
        saved = before.dram_load_bytes * (1.0 - ratio)
        after = replace(
            before,
            dram_bytes=before.dram_bytes - saved,
            dram_load_bytes=before.dram_load_bytes - saved,
        )
        est = launch_change_estimate(
            ctx.device, before, after, f"the {label} launch order's DRAM reads", {}
        )
        if times is None or est is None or est.speedup is None:
            return None
        return times, est

    def variants_ahead(self, ctx: RuleContext) -> list[Variant]:
        """The tiled candidates of a finding, before the L2 model says whether there is one
        (their diffs need the source and the grid only): compiled while the model runs. None
        where the buffers fit the L2 (nothing to find)."""
        g = ctx.launch.grid
        grid = (int(g.x), int(g.y), int(g.z))
        if grid[2] != 1 or grid[0] < 2 or grid[1] < 2 or not buffers_outgrow_l2(ctx):
            return []
        ks = ctx.kernel_source
        if not remap_safety(ks, grid).safe:
            return []
        try:
            return _tiled(ks, ctx.source_file, TILE_SIZES, None)
        except PatchError:
            return []

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(L2Tiling)
        remap = d.remap
        ks = ctx.kernel_source
        best = int(d.best.n or 0)
        sizes = [best, *(n for n in TILE_SIZES if n != best)]
        if remap.safe:
            try:
                variants = _tiled(ks, ctx.source_file, sizes, best)
            except PatchError as exc:
                remap = Remap(remap.first_line, (exc.one_line(),))
            else:
                return replace(variants[0], alternatives=tuple(variants[1:]))
        from gpuadvise.rules import tiled_block_index_cuda

        return Variant(
            "display-only",
            f"remap blockIdx by hand to thread-group tiling along X with N = {best} (measure "
            f"N = {', '.join(str(n) for n in TILE_SIZES)}); not automatic because "
            + "; ".join(remap.reasons)
            + ". A device function computing the remapped (x, y):\n"
            + tiled_block_index_cuda(best),
            label=f"N={best}",
        )
