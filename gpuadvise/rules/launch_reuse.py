"""GA305's launch-wide side: how many CTAs read each sector of a buffer (what the L2 serves again
and again to the SMs), and what a tile of outputs per CTA changes.

- :func:`launch_reuse`: a buffer's loads over the sampled CTAs: the sectors each CTA reads
  (distinct per CTA: the L1 serves the CTA's own re-reads, the model's L2 load sectors), and the
  buffer's footprint over the launch, at most the buffer (the sampled CTAs' distinct sectors
  scaled to the launch, which overcounts where CTAs outside the sample share them, and the
  buffer's size, which no launch exceeds). ``factor`` = L2 sectors over the footprint: how many
  CTAs, on average, read each sector; the footprint being counted high, the factor is low.
- :func:`cap_dram_at_footprint`: the launch model's DRAM bytes with that buffer's loads counted
  once (its footprint) where the footprint fits in the L2: the model scales the sample's
  distinct sectors to the launch, which counts a row that every CTA reads once per sample.
- :func:`read_once`: :func:`cap_dram_at_footprint` for every buffer the kernel's own lines
  load (GA310's launch model, GA405's memory side).
- :func:`tile_estimate`: a tile of outputs per CTA on the launch model: the buffer's L2 load
  sectors divided by the tile, its DRAM bytes at its footprint (:func:`cap_dram_at_footprint`).
- :func:`launch_wide`: a buffer's (line, lanes) over the thresholds, as :class:`LaunchWide`.
- :func:`tile_l1_estimate`: GA305's neighbourhood (or table) staged in shared memory, on the
  L1 roofline (:func:`~gpuadvise.rules.estimates.l1_roofline_estimate`).

Pure numpy over the trace view; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.arrays import count_distinct_sorting, sort_in_place
from gpuadvise.devices import DeviceSpec, memory_rates
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.roofline import Traffic, l1_cycles, launch_estimate
from gpuadvise.rules.context import ModelUnavailable
from gpuadvise.rules.estimates import l1_roofline_estimate, launch_change_estimate, view_traffic
from gpuadvise.rules.findings import Estimate, Evidence
from gpuadvise.trace.access import Kind
from gpuadvise.trace.view import Lanes, TraceView

__all__ = [
    "tile_l1_estimate",
    "LaunchReuse",
    "LaunchWide",
    "launch_wide",
    "cap_dram_at_footprint",
    "read_once",
    "launch_reuse",
    "tile_estimate",
]

SECTOR = 32
_KEY_CHUNK = 1 << 20  # lanes a step of launch_reuse's keys (8 MB temporaries)


@dataclass(frozen=True)
class LaunchReuse:
    """A buffer's loads over the launch (sampled CTAs scaled by ``scale``): ``l2_sectors``, the
    distinct sectors of each sampled CTA summed (what the L2 sends the SMs, the CTA's own
    re-reads served by its L1); ``sample_sectors``: the distinct sectors of the sample;
    ``footprint``: the launch's distinct sectors (at most the buffer's); ``scale``."""

    l2_sectors: int
    sample_sectors: int
    footprint: float
    scale: float

    @property
    def factor(self) -> float:
        """CTAs reading each sector of the footprint, on average (at least that many)."""
        return self.l2_sectors * self.scale / self.footprint if self.footprint > 0 else 0.0

    @property
    def launch_l2_sectors(self) -> float:
        return self.l2_sectors * self.scale


def launch_reuse(view: TraceView, lanes: Lanes, buffer_bytes: int) -> LaunchReuse:
    """The :class:`LaunchReuse` of ``lanes`` (one buffer's load lanes) in ``view``."""
    if not len(lanes):
        return LaunchReuse(0, 0, 0.0, view.scale)
    # each lane's first sector, and its last where it crosses into the next: (off + width -
    # 1) // SECTOR = off // SECTOR + (off % SECTOR + width - 1) // SECTOR. One key array of
    # both, (CTA << 44) | sector, counted by a sort in place; the sample's distinct sectors
    # are those of the distinct (CTA, sector) keys (issue 31: a buffer's lanes over the
    # sampled CTAs are millions, read several times by each CTA: no lane-sized copy kept,
    # no second sort of every lane)
    # (each column read a chunk of lanes at a time, Lanes.column_slice: a line's taken lanes
    # gather none of their columns whole, nor keep them; issue 31: GA305's peak on AoSKernel,
    # the offsets, CTAs and widths of 7 M lanes held through the keys' sort)
    n = len(lanes)
    col = lanes.column_slice
    # the sectors past the first, in int32 (0 or 1 but for accesses wider than a sector; issue
    # 31: no int64 lane-sized temporaries but the keys; off % SECTOR is off & 31, negative too)
    step = np.empty(n, np.int32)
    for i in range(0, n, _KEY_CHUNK):
        j = min(i + _KEY_CHUNK, n)
        steps = step[i:j]
        np.bitwise_and(
            col("off", i, j).astype(np.int64, copy=False), SECTOR - 1, out=steps, casting="unsafe"
        )
        np.add(steps, col("width", i, j), out=steps, casting="unsafe")
        steps -= 1
        steps //= SECTOR
    crossing = int(np.count_nonzero(step))
    # the (CTA << 44) | sector keys, made a chunk of lanes at a time in the one array sorted in
    # place (no lane-sized int64 temporary); the crossing lanes' next sectors after them (the
    # same keys as one array of the first sectors, then one of the next: sorted, the same
    # values); the sample's distinct sectors are those of the distinct keys
    ctas = np.empty(n + crossing, np.int64)
    at = n
    for i in range(0, n, _KEY_CHUNK):
        j = min(i + _KEY_CHUNK, n)
        sector = col("off", i, j).astype(np.int64, copy=False) // SECTOR
        part = ctas[i:j]
        part[...] = col("cta", i, j)
        part <<= 44
        part |= sector
        if crossing:
            cross = np.flatnonzero(step[i:j])
            tail = sector[cross]
            tail += step[i:j][cross]
            last = ctas[at : at + len(cross)]
            last[...] = col("cta", i, j)[cross]
            last <<= 44
            last |= tail
            at += len(cross)
        del sector
    del step
    sort_in_place(ctas)
    head = np.empty(len(ctas), bool)
    head[0] = True
    np.not_equal(ctas[1:], ctas[:-1], out=head[1:])
    sectors = ctas[head]
    del ctas, head
    per_cta = len(sectors)
    sectors &= np.int64((1 << 44) - 1)
    sample = count_distinct_sorting(sectors)
    footprint = min(sample * view.scale, math.ceil(buffer_bytes / SECTOR))
    return LaunchReuse(per_cta, sample, float(footprint), view.scale)


def cap_dram_at_footprint(t: Traffic, reuse: LaunchReuse, device: DeviceSpec) -> Traffic:
    """``t`` with the buffer's DRAM loads at its footprint instead of the sample's distinct
    sectors scaled to the launch, when the footprint fits in half the device's L2 (read once,
    then served by the L2 to every CTA that reads it again); ``t`` as it is otherwise."""
    l2 = device.l2_bytes or 0
    if reuse.footprint * SECTOR > l2 / 2:
        return t
    extra = max(reuse.sample_sectors * reuse.scale - reuse.footprint, 0.0) * SECTOR
    extra = min(extra, t.dram_load_bytes, t.dram_bytes)
    return replace(t, dram_bytes=t.dram_bytes - extra, dram_load_bytes=t.dram_load_bytes - extra)


def read_once(
    view: TraceView, same_file: Callable[[str | None], bool], device: DeviceSpec, t: Traffic
) -> Traffic:
    """``t`` with each buffer that the lines of the kernel's file (``same_file``) load at its
    footprint where it fits in half the L2 (:func:`cap_dram_at_footprint`: read once, then
    served by the L2 to every CTA that reads it again: a matrix product's operands, a table
    every CTA reads)."""
    found = view.lines(same_file, [Kind.LOAD])
    if not found:
        return t
    insts = np.unique(np.concatenate([view.insts_at(f, ln, Kind.LOAD) for f, ln, _ in found]))
    for b in view.buffers_at(insts):
        lanes, _ = view.access(insts, b)
        t = cap_dram_at_footprint(t, launch_reuse(view, lanes, view.buffers[b].size), device)
        del lanes  # (not held while the next buffer's are gathered: issue 31's peak)
    return t


def tile_estimate(
    device: DeviceSpec, view: TraceView, lr: LaunchReuse, buffer: str, tile_max: int
) -> Estimate:
    """A tile of ``tile_max`` outputs per CTA (fewer where fewer CTAs read each sector) sharing
    what it loads: ``buffer``'s L2 load sectors divided by it; the model's DRAM bytes with the
    buffer read once where it fits in the L2 (before and after alike)."""
    tile = min(lr.factor, float(tile_max))
    inputs: dict[str, Any] = {
        "ctas_per_sector": round(lr.factor, 1),
        "tile": round(tile, 2),
        "l2_sectors": lr.launch_l2_sectors,
        "footprint_sectors": lr.footprint,
    }
    try:
        base = view_traffic(device, view)
    except ModelUnavailable:
        return Estimate(None, "none", "no launch model for this trace", inputs)
    before = cap_dram_at_footprint(base, lr, device)
    saved = lr.launch_l2_sectors * (1.0 - 1.0 / tile) if tile > 0 else 0.0
    after = replace(before, l2_load_sectors=max(before.l2_load_sectors - saved, 0.0))
    capped = " (its DRAM bytes at its footprint, read once into the L2)" * (
        before.dram_bytes != base.dram_bytes
    )
    est = launch_change_estimate(
        device,
        before,
        after,
        f"a tile of {tile:.0f} outputs per CTA sharing what it loads: `{buffer}`'s "
        f"{lr.launch_l2_sectors:.0f} L2 load sectors divided by {tile:.1f}{capped}",
        inputs,
    )
    if est is None:
        return Estimate(None, "none", "no clock or memory rates for the launch model", inputs)
    return est


@dataclass(frozen=True)
class LaunchWide:
    """A buffer's loads over the lines that read it (``lanes``, concatenated), their
    :class:`LaunchReuse`, their share of the launch's L2 load sectors, the first line and the
    others, and the message of the finding."""

    lanes: Lanes
    reuse: LaunchReuse
    l2_share: float
    line: int
    others: tuple[int, ...]

    def message(self, buffer: str) -> str:
        lr = self.reuse
        where = f" (and lines {', '.join(map(str, self.others))})" if self.others else ""
        return (
            f"data many CTAs read again through the L2: each sector of `{buffer}` this "
            f"line{where} loads is read by {lr.factor:.0f} CTAs on average "
            f"({lr.launch_l2_sectors:.0f} sectors sent to the SMs for a footprint of "
            f"{lr.footprint:.0f}; {self.l2_share:.0%} of the launch's L2 load sectors), while no "
            "CTA reads it much more than once. Give each CTA more outputs that share what it "
            "loads (a tile of outputs: the rows or columns it needs staged once in shared memory "
            "or registers), so that each sector reaches the SMs fewer times"
        )

    def evidence(self, min_factor: float, min_share: float, sampled: int) -> list[Evidence]:
        lr = self.reuse
        return [
            Evidence("ctas_per_sector", round(lr.factor, 1), min_factor, ">="),
            Evidence("l2_share", round(self.l2_share, 3), min_share, ">="),
            Evidence("l2_sectors", round(lr.launch_l2_sectors), unit="sectors"),
            Evidence("footprint_sectors", round(lr.footprint), unit="sectors"),
            Evidence("sampled_ctas", sampled),
        ]

    @staticmethod
    def fix(buffer: str, tile: int) -> str:
        return (
            f"give each CTA a tile of outputs that read the same `{buffer}` data (e.g. {tile} x "
            f"{tile} pairs, or {tile} rows or columns per thread), stage what the tile reads once "
            "in shared memory (or registers) and compute every output of the tile from it; "
            "launch that many times fewer CTAs"
        )


def launch_wide(
    device: DeviceSpec,
    view: TraceView,
    got: list[tuple[int, Lanes]],
    buffer_bytes: int,
    min_factor: float,
    min_share: float,
    l1_bytes: int | None = None,
) -> LaunchWide | None:
    """The :class:`LaunchWide` of one buffer's (line, lanes), when at least ``min_factor`` CTAs
    read each sector on average and those sectors are at least ``min_share`` of the launch's L2
    load sectors; else None. Also None when the buffer's footprint is at most ``l1_bytes``
    (a resident CTA's share of the L1 an SM keeps for global data at this launch): the SM's L1
    keeps so small a buffer from one CTA to the next while each CTA streams its own share
    through, so the re-reads are L1 hits the trace's per-CTA counts do not see (a scale vector
    of 1 KB read by every CTA)."""
    # (the lines' lanes joined without a copy of their columns where they are taken from the
    # view: each column gathered once, when read; issue 31)
    lanes = Lanes.joined([x for _, x in got])
    lr = launch_reuse(view, lanes, buffer_bytes)
    if lr.factor < min_factor:
        return None
    if l1_bytes is not None and lr.footprint * SECTOR <= l1_bytes:
        return None
    try:
        l2_all = view_traffic(device, view).l2_load_sectors
    except ModelUnavailable:
        return None
    share = lr.launch_l2_sectors / l2_all if l2_all > 0 else 0.0
    if share < min_share:
        return None
    line = got[0][0]
    others = tuple(sorted({ln for ln, _ in got[1:]} - {line}))
    return LaunchWide(lanes, lr, share, line, others)


def tile_l1_estimate(
    device: DeviceSpec,
    view: TraceView,
    recs: np.ndarray,
    requests: int,
    requested_sectors: int,
    unique_sectors: int,
    what: str,
) -> Estimate:
    """A line's loads (``recs``: its records of one buffer; ``requests``, their sectors
    requested and distinct per CTA) read from shared memory instead: before, the L1 cycles of
    :func:`~gpuadvise.model.roofline.l1_cycles` (a request's sectors at 4 a cycle, and a cycle
    for each 128-byte line it touches: a stencil's request of two rows of 64 bytes, misaligned
    by the halo, takes two to four; coffeebeforearch's 7x7 convolution_2d, 5.7 sectors and 2.9
    lines a request, runs at the time of 3 L1 cycles a request on an H200, not 1.4); after, the
    distinct sectors staged (/ 4) and one shared wavefront a request. The proxy reproduces the
    line's loads: its own estimate goes in the inputs, like for like."""
    lines = view.weighted(recs, view.sector_counts.lines) if len(recs) else 0.0
    before = l1_cycles(requests, requested_sectors, lines)
    after = unique_sectors / 4.0 + requests  # staging, then one wavefront a request
    est = l1_roofline_estimate(
        device,
        view,
        before - after,
        f"{what} ({requests} requests as shared wavefronts, {unique_sectors} sectors staged "
        f"instead of {requested_sectors} requested in {lines:.0f} lines; sampled CTAs)",
        proxy_records=recs,
    )
    inputs = {**est.inputs, "lines_sampled": lines}
    chained = _chain_bound(device, view, recs, float(inputs.get("saved_cycles_sampled", 0)))
    if chained is None or est.speedup is None or round(chained, 3) <= est.speedup:
        return replace(est, inputs=inputs)
    inputs["bound_without_chain"] = est.speedup
    method = (
        f"{est.method}. The bound also credits the dependent chain: the line's share of its "
        f"global loads read from shared memory instead ({chained:.2f}x; the point does not, as "
        "the L1 may serve them already)"
    )
    return replace(est, speedup=round(chained, 3), method=method, inputs=inputs)


def _moved_chain(chain: dict[str, float], share: float) -> dict[str, float]:
    moved = chain.get("global", 0.0) * share
    out = dict(chain)
    out["global"] = chain.get("global", 0.0) - moved
    out["shared"] = chain.get("shared", 0.0) + moved
    return out


def _chain_bound(
    device: DeviceSpec, view: TraceView, recs: np.ndarray, saved: float
) -> float | None:
    """The upper bound with the after side's dependent chain shortened too: the share of the
    critical warp's global links that ``recs`` are of the kernel's global load requests become
    shared-memory links (a stencil's taps waited on in groups: convolution_2d's SASS issues a
    row of 7 predicated LDGs, then their IMADs; its window staged by hand ran 1.75x faster on an
    H200 where the L1 path alone bounded it at 1.43x). None without the kernel's work or the
    device's rates."""
    rates = memory_rates(device)
    if rates is None:
        return None
    try:
        before = view_traffic(device, view)
    except ModelUnavailable:
        return None
    w = before.work
    kinds = view.records["kind"]
    loads = view.rec_weight[kinds == int(Kind.LOAD)].sum() if len(kinds) else 0.0
    if w is None or loads <= 0:
        return None
    share = min(float(view.rec_weight[np.asarray(recs, np.int64)].sum() / loads), 1.0)
    work = KernelWork(
        **{
            **{f: getattr(w, f) for f in w.__dataclass_fields__},
            "chain": _moved_chain(dict(w.chain), share),
            "chain_unordered": None
            if w.chain_unordered is None
            else _moved_chain(dict(w.chain_unordered), share),
        }
    )
    after = replace(before, l1_cycles=max(before.l1_cycles - saved * view.scale, 0.0), work=work)
    est = launch_estimate(before, after, device, rates)
    return None if est is None else float(est.bound)
