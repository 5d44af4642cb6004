"""GA304's family: remapping a 2D grid's block index to thread-group tiling, and the probe that
gives the L2 model footprints for the whole grid.

- :func:`buffers_outgrow_l2`: whether the launch's buffers are more than the L2 holds in
  effect (when not, no launch order loses reuse: GA304's candidates are not compiled ahead);
- :func:`remap_safety`: whether every block computes the same when its block index is
  remapped (:class:`Remap`, with the reasons when not);
- :func:`tiling_diff`: the diff that remaps ``blockIdx`` to NVIDIA's thread-group tiling;
- :func:`probe_ctas`, :func:`probe_trace`, :func:`probe_l2`: the CTAs that let the L2 model
  synthesize every CTA, traced by emulating the analysed kernel on them, and the model of the
  whole launch from them (memoized); :func:`probe_limit`: the analysis' bound on the probe.

Kept beside the rule (issue 28: no rule file over 400 lines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.model.l2 import l2_model
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.details import FindingDetails
from gpuadvise.source.edit import unified_diff
from gpuadvise.source.patch import (
    PatchError,
    block_index_uses,
    remap_block_index,
    tiled_block_index_lines,
)
from gpuadvise.source.text import KernelSource, line_of
from gpuadvise.trace.access import AccessTrace, Space

__all__ = [
    "TILE_SIZES",
    "Remap",
    "buffers_outgrow_l2",
    "probe_ctas",
    "probe_l2",
    "probe_limit",
    "probe_trace",
    "remap_safety",
    "tiling_diff",
]

TILE_SIZES = (4, 8, 16, 32)
"""The strip widths N offered (and measured): NVIDIA's thread-group tiling used 16; 32 won at 8K
on an H100."""

BLOCK_NAME = "ga304_block"
"""The variable the transform defines at the top of the kernel and uses for blockIdx.x/.y."""
PREFIX = "ga304_"
"""The prefix of the transform's helper variables (a source that uses it is not remapped)."""

_PROBE_ORDERS: tuple[Any, ...] = ("row-major", *(("tile-x", n) for n in TILE_SIZES))
# uses of the block index the remap cannot see, or inter-block signalling that may depend on the
# order in which blocks are launched
_HIDDEN_READS = re.compile(
    r"\b(?:cooperative_groups|this_thread_block|this_grid|asm)\b"
    r"|\b(?:group_index|block_index)\s*\("
)
_SIGNALLING = re.compile(r"\b(?:atomic\w*|__threadfence\w*|volatile|cuda::atomic\w*)\b")


@dataclass(frozen=True)
class Remap(FindingDetails):
    """Whether the kernel's block index can be remapped automatically.

    ``first_line``: the line of the kernel's first ``blockIdx`` (None: it reads none);
    ``reasons``: why an automatic remap would not be safe (empty: it is).
    """

    first_line: int | None
    reasons: tuple[str, ...]

    @property
    def safe(self) -> bool:
        return not self.reasons


def buffers_outgrow_l2(ctx: RuleContext) -> bool:
    """Whether the launch's buffers together hold more bytes than the L2 model's effective
    capacity (``efficiency x L2 size``), or cannot be sized: when they do not, the launch's
    footprint (distinct bytes touched) fits and the model finds nothing to gain from another
    launch order. Cheap, no model: what decides whether GA304's candidates are worth compiling
    before the L2 model says whether there is a finding (``Rule.variants_ahead``)."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.model.l2.replay import capacities

    try:
        total = int(ctx.services.resolved_launch().total_buffer_bytes)
        (capacity,) = capacities(ctx.device, None)
    except GpuAdviseError:
        return True
    return total > capacity


def remap_safety(ks: KernelSource, grid: Sequence[int]) -> Remap:
    """Whether every block of the kernel computes the same thing when its block index is
    remapped (a permutation of the 2D grid): the kernel reads ``blockIdx`` only as ``.x`` and
    ``.y`` in its own body, nothing else reads it for the kernel, and no block waits for another
    (whose launch order the remap changes)."""
    code = ks.code
    body_lo, body_hi = ks.body_start, ks.body_end
    body = code[body_lo : body_hi + 1]
    uses = block_index_uses(code, body_lo, body_hi)
    first = line_of(ks.text, uses[0][0]) if uses else None
    reasons: list[str] = []
    if len(grid) < 3 or grid[2] != 1 or grid[0] < 2 or grid[1] < 2:
        reasons.append(f"the grid {tuple(grid)} is not two-dimensional")
    if not uses:
        reasons.append("the kernel does not read blockIdx itself (a helper may)")
    for s, _e, member in uses:
        if member not in ("x", "y"):
            what = f"blockIdx.{member}" if member else "blockIdx as a whole"
            reasons.append(f"it reads {what} (line {line_of(ks.text, s)})")
            break
    if re.search(r"\bgridDim\b", body):
        reasons.append(
            "it reads gridDim: it may compute its own block order or loop over the grid "
            "(remap such a kernel by hand)"
        )
    inside = [k.body for k in ks.kernels() if k.body is not None]
    for s, _e, _m in block_index_uses(code):
        if not any(lo <= s <= hi for lo, hi in inside):
            reasons.append(
                f"blockIdx is read outside a kernel (line {line_of(ks.text, s)}: a device "
                "function or macro the kernel may call would keep the hardware's order)"
            )
            break
    hidden = _HIDDEN_READS.search(body)
    if hidden:
        reasons.append(
            f"it uses {hidden.group(0).rstrip('( ')}, which may read the block index behind "
            "the remap's back"
        )
    if _SIGNALLING.search(body) and any(lp.kind in ("while", "do") for lp in ks.loops()):
        reasons.append(
            "it loops and signals between blocks (atomics, fences or volatile): a block waiting "
            "for another may rely on the hardware's launch order"
        )
    clash = re.search(rf"\b{PREFIX}\w*", code)
    if clash:
        reasons.append(f"the source already uses the name {clash.group(0)}")
    return Remap(first, tuple(dict.fromkeys(reasons)))


def tiling_diff(ks: KernelSource, n: int, path: str) -> str:
    """The unified diff that remaps the kernel's blockIdx to NVIDIA's thread-group tiling with ``n`` tiles
    per strip (raises :class:`~gpuadvise.source.patch.PatchError` when it cannot)."""
    lines = tiled_block_index_lines(n, BLOCK_NAME, PREFIX)
    new = remap_block_index(ks.text, ks.body_start, ks.body_end, lines, BLOCK_NAME)
    diff = unified_diff(ks.text.split("\n"), new.split("\n"), path)
    if diff is None:  # pragma: no cover - remap_block_index always inserts lines
        raise PatchError("the remap changed nothing", "report this bug")
    return diff


def probe_ctas(gx: int, gy: int) -> list[int]:
    """CTAs (linear ids) whose footprints let the L2 model synthesize every CTA of a
    ``gx`` x ``gy`` grid: a 4x3 patch at the centre (the per-CTA steps in x and y, and a footprint
    clear of the image's edges, for up to 4 phases of the x step) and 2x2 patches at the corners
    and the middles of the edges (how accesses beyond the edge behave: clamped or dropped)."""
    picked: dict[int, None] = {}

    def patch(x0: int, y0: int, w: int, h: int) -> None:
        for y in range(max(y0, 0), min(y0 + h, gy)):
            for x in range(max(x0, 0), min(x0 + w, gx)):
                picked[y * gx + x] = None

    cx, cy = gx // 2, gy // 2
    patch(cx - 1, cy - 1, 4, 3)
    for x0 in (0, cx, gx - 2):
        for y0 in (0, cy, gy - 2):
            if (x0, y0) != (cx, cy):
                patch(x0, y0, 2, 2)
    return list(picked)


def probe_trace(ctx: RuleContext, ks: KernelSource) -> AccessTrace:
    """A trace of the :func:`probe_ctas` of the launch: the analysed kernel emulated on those
    CTAs alone (the rules' trace-a-candidate service, with chosen CTA ids; ``ctas`` in the
    order of :func:`probe_ctas`). It once compiled the kernel again with its block index
    remapped so that the first launch positions computed those tiles: where
    :func:`remap_safety` holds (GA304 probes only then) that run touches the same global
    memory, at the cost of a compile and a disassembly more."""
    return _probe_trace(ctx, ks)


def _probe_trace(ctx: RuleContext, ks: KernelSource, space: Space | None = None) -> AccessTrace:
    """:func:`probe_trace`; ``space``: with the records of that state space alone (what the L2
    model reads: the others are not copied)."""
    gx, gy = int(ctx.launch.grid.x), int(ctx.launch.grid.y)
    ctas = probe_ctas(gx, gy)[: probe_limit(ctx)]
    # the analysed kernel (compiled already) run on those CTAs: what the remapped kernel's first
    # launch positions compute where remap_safety holds, without building that kernel
    trace = ctx.services.trace_candidate(None, ctas)
    recs = trace.records
    if space is not None and not (keep := recs["space"] == int(space)).all():
        recs = recs[keep]  # a copy of those records alone
    return replace(trace, records=recs, ctas=tuple(int(c) for c in ctas))


def probe_limit(ctx: RuleContext) -> int | None:
    """The most CTAs the probe may trace: the analysis' L2 probe size (``--l2-probe-ctas``,
    at most ``--sample-ctas N``), None when unbounded. The centre patch comes first in
    :func:`probe_ctas`, so a bounded probe keeps it."""
    limit = ctx.models.l2_probe_ctas
    return None if limit is None else max(0, int(limit))


_PROBE_CACHE: dict[tuple[Any, ...], tuple[Any, int]] = {}
_PROBE_CACHE_SIZE = 8


def probe_l2(ctx: RuleContext, ks: KernelSource) -> tuple[Any, int]:
    """The L2 model of the whole launch (row-major and tiled N = 4, 8, 16, 32) from
    :func:`probe_trace`, and the number of CTAs traced. Memoized per kernel source, launch spec,
    compile flags, device and occupancy (a second analysis of the same launch reuses it)."""
    d = ctx.device
    blocks_per_sm = int(ctx.occupancy.active_blocks_per_sm)
    key = (
        ks.text,
        repr(ctx.spec),
        ctx.compile_flags,
        (d.name, d.cc, d.l2_bytes, d.sm_count),
        blocks_per_sm,
        probe_limit(ctx),
    )
    hit = _PROBE_CACHE.get(key)
    if hit is not None:
        return hit
    trace = _probe_trace(ctx, ks, Space.GLOBAL)  # the L2 model reads the global records
    result = (l2_model(trace, d, blocks_per_sm, _PROBE_ORDERS), len(trace.ctas))
    while len(_PROBE_CACHE) >= _PROBE_CACHE_SIZE:
        _PROBE_CACHE.pop(next(iter(_PROBE_CACHE)))
    _PROBE_CACHE[key] = result
    return result
