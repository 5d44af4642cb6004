"""GA208's serial terms for a line's global atomics over a launch, from its
:class:`HotAddress` (:mod:`gpuadvise.model.atomic_serial`, :mod:`gpuadvise.model.atomic_units`),
before and after a fix; the launch's serial time for the variant-trace points; the traffic a
copy of the bins per CTA leaves. Pure: the trace's records, no I/O."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

import numpy as np

from gpuadvise.model.atomic_serial import REGION_BYTES, SerialAtomics, update_ns
from gpuadvise.model.roofline import Traffic
from gpuadvise.rules.global_atomics import ATOMIC_KINDS, HotAddress, hot_addresses
from gpuadvise.trace.access import AccessTrace, Space

__all__ = ["follows", "launch_serial", "launch_serial_s", "serial_atomics", "traffic_without"]


def launch_serial_s(trace: AccessTrace, combined: Collection[int] = ()) -> float:
    """The longest the L2 takes for one source line's global atomics over the launch, one
    after another (GA208's serial time: the hot address's updates, the hot region's requests
    or its steps, the larger), 0 without global atomics: what the launch model leaves out.
    ``combined``: lines where ptxas combines a warp's lanes first (``REDUX``/``UFLO``: one
    update per warp-level request)."""
    return launch_serial(trace, combined)[0]


def launch_serial(
    trace: AccessTrace, combined: Collection[int] = (), wave: int = 0
) -> tuple[float, bool]:
    """:func:`launch_serial_s` and whether that line's atomics follow the rest of the launch
    rather than overlap it: a launch of at most ``wave`` CTAs (one wave; 0: not known) whose
    warps make them after all their other global accesses (:func:`follows`): every CTA runs
    its loop at once, then flushes at once, so the L2's serial time adds to the loop's in part
    (:data:`gpuadvise.model.atomic_serial.AFTER_LOOP_SHARE`, measured). An H200 measured
    37.8 us for hist_helpers' one-wave copy of the bins where the launch model said 34 us with
    10 us of flushes hidden, and 62.6 us for kernels/spills hist_local (one wave, 25 us of
    flushes after 54 us of loop) where hiding them said 54."""
    scale = trace.scale
    most, tail = 0.0, False
    for (_, line), h in hot_addresses(trace).items():
        updates, requests = h.launch_updates(scale), h.launch_region_requests(scale)
        steps = h.launch_region_steps(scale)
        if line in combined:
            updates, steps = updates / max(h.lanes_per_request, 1.0), requests
        u = update_ns(h.opcode)
        t = max(updates * u, requests * h.request_ns(), steps * u)
        if line not in combined:  # a 1 KB unit's requests (gpuadvise.model.atomic_units)
            t = max(t, h.launch_unit_s(scale) * 1e9)
        if t > most:
            most, tail = t, 0 < trace.total_ctas <= wave and follows(trace, h.insts)
    return most * 1e-9, tail


_FOLLOWING = 0.9
"""The share of a line's warps that must make its atomics after their other global accesses."""


def follows(trace: AccessTrace, insts: Collection[int]) -> bool:
    """Whether the global atomics of ``insts`` come, in nearly every warp that makes them
    (:data:`_FOLLOWING`), after all that warp's other global accesses (the trace's records
    are in each warp's program order)."""
    recs = trace.records
    glob = recs["space"] == int(Space.GLOBAL)
    line = glob & np.isin(recs["inst"], list(insts)) & np.isin(recs["kind"], ATOMIC_KINDS)
    if not line.any():
        return False
    warp = (recs["cta"].astype(np.int64) << 16) | recs["warp"].astype(np.int64)
    idx = np.arange(len(recs))
    keys, first = np.unique(warp[line], return_index=True)
    first_atomic = idx[line][first]
    other = glob & ~line
    last_other = np.full(len(keys), -1, dtype=np.int64)
    pos = np.searchsorted(keys, warp[other])
    ok = (pos < len(keys)) & (keys[np.minimum(pos, len(keys) - 1)] == warp[other])
    np.maximum.at(last_other, pos[ok], idx[other][ok])
    return float(np.mean(last_other < first_atomic)) >= _FOLLOWING


def serial_atomics(
    h: HotAddress, scale: float, combined: bool, wave: int, private: bool = False
) -> SerialAtomics:
    """GA208's serial terms for the line's hot address, region and 1 KB unit over the launch
    (``scale``: the trace's), before and with one update per CTA of at most ``wave`` CTAs (0:
    of every CTA) or, ``private``, each of those CTAs adding its copy of the unit's bins;
    ``combined``: ptxas combines a warp's lanes first (one update per warp-level request)."""
    lanes, updates = h.lanes_per_request, h.launch_updates(scale)
    if combined:  # one update per warp-level request
        updates /= max(lanes, 1.0)
        lanes = 1.0
    ctas = h.launch_ctas(scale)
    line_requests = h.launch_region_requests(scale)
    line_ctas = h.launch_region_ctas(scale)
    # one CTA's updates of the region's words: a request per line of them (4-byte words)
    lines = min(REGION_BYTES // 128, max(1, -(-h.region_addresses // 32)))
    unit_ctas = h.unit_ctas * scale if h.unit_wide else float(h.unit_ctas)
    return SerialAtomics(
        updates,
        lanes,
        line_requests,
        min(ctas, wave) if wave else ctas,
        (min(line_ctas, wave) if wave else line_ctas) * lines,
        update_ns(h.opcode) * 1e-9,
        h.request_ns() * 1e-9,
        h.region_wide,
        line_requests if combined else h.launch_region_steps(scale),
        0.0 if combined else h.launch_unit_s(scale),
        h.unit_flush_s(min(unit_ctas, wave) if wave else unit_ctas, scale) if private else 0.0,
    )


def traffic_without(device: Any, view: Any, insts: Collection[int]) -> Traffic:
    """The launch's :class:`Traffic` (``view``: a trace view) less the L2 store sectors of the
    global atomics of ``insts``: what the launch moves once those atomics go to a copy of the
    bins in shared memory (the rest of the launch, its execution model included, as it is)."""
    from gpuadvise.rules.estimates import view_traffic

    recs = view.records
    line = np.isin(recs["inst"], list(insts)) & np.isin(recs["kind"], ATOMIC_KINDS)
    line &= recs["space"] == int(Space.GLOBAL)
    full = view_traffic(device, view)
    if not line.any():
        return full
    gone = view_traffic(device, view, only=np.flatnonzero(line))
    return replace(
        full,
        l2_store_sectors=max(0.0, full.l2_store_sectors - gone.l2_store_sectors),
        l2_partial_store_sectors=max(
            0.0, full.l2_partial_store_sectors - gone.l2_partial_store_sectors
        ),
        l2_scattered_store_sectors=max(
            0.0, full.l2_scattered_store_sectors - gone.l2_scattered_store_sectors
        ),
    )
