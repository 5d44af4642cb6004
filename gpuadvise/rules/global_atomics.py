"""GA208's view of a launch's global atomics: per source line, the address its updates pile on
and how they arrive (lanes of one warp-level request, CTAs), the 128-byte line its warp-level
requests pile on, from the trace; and what the L2 takes to apply them one after another.

The L2 applies the atomics of one address one at a time (an H200 measured 1.76 ns an update for
a float add on one word, 0.73 ns for an integer add: ``benchmarks/global_atomics_probe``), so a
launch whose updates pile on one address takes at least their count times that, however many
SMs issue them. It also takes the atomic requests of neighbouring lines one at a time: an
H200 spends about 1 ns a request on each 128-byte line a warp-level request reaches, and the
lines of one 512-byte region queue behind each other (consecutive lines share an L2 slice), so
histogram bins packed in a few hundred bytes serialise on their region however their lanes
spread over words: 768 int bins in 3 KB took 1.83 ms for 2^24 updates, 0.32 ms with one bin a
line (``docs/data/global_atomics_lines_h200_2026-11-29.txt``); two neighbouring regions share
one serial unit of the L2, which a request costs by the lines and sectors it updates there
(:mod:`gpuadvise.model.atomic_units`). The serial terms themselves are
:mod:`gpuadvise.model.atomic_serial` (re-exported here), their use over a launch
:mod:`gpuadvise.rules.global_atomics_serial`, their words :mod:`gpuadvise.rules.global_atomics_text`.
Pure: the trace's records, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.arrays import distinct, distinct_inverse
from gpuadvise.memo import IdentityMemo
from gpuadvise.model.atomic_serial import (
    ONE_LINE_NS,
    REGION_BYTES,
    REQUEST_NS,
    SerialAtomics,
    update_ns,
    with_serial_s,
)
from gpuadvise.model.atomic_units import flush_ns, hot_unit, lane_pairs, runs
from gpuadvise.model.banks import active_lanes
from gpuadvise.ptx.access import record_weights
from gpuadvise.rules.details import FindingDetails
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = [
    "ATOMIC_KINDS",
    "REGION_BYTES",
    "ONE_LINE_NS",
    "REQUEST_NS",
    "HotAddress",
    "SerialAtomics",
    "hot_addresses",
    "combined_lines",
    "update_ns",
    "with_serial_s",
]

ATOMIC_KINDS = (int(Kind.ATOMIC), int(Kind.REDUCTION))


@dataclass(frozen=True)
class HotAddress(FindingDetails):
    """A line's global atomics over the traced CTAs: the updates (weighted where the emulator
    sampled a loop), the distinct addresses, the updates of the most updated address
    (``hot_updates``) and the traced CTAs making them (``hot_ctas``), the mean active lanes
    on that address per warp-level request that updates it, the buffer, the PTX opcode, the
    traced CTAs, and the instructions."""

    updates: float
    addresses: int
    hot_updates: float
    hot_ctas: int
    lanes_per_request: float
    traced_ctas: int
    buffer: str | None
    opcode: str
    insts: tuple[int, ...]

    hot_spread: float = 0.0
    region_requests: float = 0.0
    """The (warp-level request, 128-byte line) pairs (weighted) within the most requested
    :data:`REGION_BYTES` region."""
    region_ctas: int = 0
    """Traced CTAs whose requests reach that region."""
    region_spread: float = 0.0
    region_addresses: int = 0
    """Distinct addresses of that region the requests update."""
    region_lines: int = 0
    """Distinct 128-byte lines of that region the requests reach."""
    region_steps: float = 0.0
    """The region's requests (weighted, less the sample's noise as ``region_requests``) each
    counted as the most lanes it has on one address of the region: the L2 applies a
    request's updates of distinct words together and those of one word one after another
    (a warp of 32 lanes adding to one float: 32 steps; after warp aggregation: 1)."""
    unit_sectors: float = 0.0
    """(request, sector) pairs (weighted) in the most loaded 1 KB unit
    (:mod:`gpuadvise.model.atomic_units`), over the launch where ``unit_wide``."""
    unit_wide: bool = False
    unit_ns: float = 0.0
    """That unit's serial time for the traced requests (weighted), nanoseconds."""
    unit_ctas: int = 0
    """Traced CTAs whose requests reach that unit."""
    unit_bins: tuple[int, int, int] = (0, 0, 0)
    """The distinct sectors, lines and words of that unit the requests update."""
    unit_lanes: float = 0.0
    """The lanes (weighted) updating that unit's words."""

    def launch_unit_s(self, scale: float) -> float:
        """The hot unit's serial seconds over the launch (scaled where :attr:`unit_wide`)."""
        return self.unit_ns * (scale if self.unit_wide else 1.0) * 1e-9

    def unit_flush_s(self, ctas: float, scale: float) -> float:
        """The hot unit's serial seconds when ``ctas`` CTAs each add their copy of its bins
        (a request per line it reaches, one lane per non-zero bin): each bin of the unit
        non-zero in a CTA with the probability that one of its share of the unit's updates
        (Poisson) reaches it, a sector full when its 8 bins are."""
        sectors, lines, words = self.unit_bins
        if not ctas or not words:
            return 0.0
        lanes = self.unit_lanes * (scale if self.unit_wide else 1.0) / ctas
        filled = 1.0 - float(np.exp(-lanes / words))
        return ctas * flush_ns(sectors, lines, filled**8) * 1e-9

    @property
    def once_per_cta(self) -> bool:
        """Each CTA updates the address about once, by one lane a request, and reaches its
        region about once (a block reduction's total, a stream compaction's offset): the CTA
        reduction is made already."""
        return (
            self.lanes_per_request < 1.5
            and self.hot_updates <= 1.5 * self.hot_ctas
            and self.region_requests <= 1.5 * max(self.region_ctas, 1)
        )

    def request_ns(self) -> float:
        """The L2's time per request on the hot region: :data:`ONE_LINE_NS` where they all
        reach one line, else :data:`REQUEST_NS`."""
        return ONE_LINE_NS if self.region_lines == 1 else REQUEST_NS

    @staticmethod
    def _spread_wide(ctas: int, spread: float, traced: int) -> bool:
        if not traced:
            return False
        if ctas * 2 >= traced:
            return True
        return ctas >= 2 and spread >= 0.5

    @property
    def grid_wide(self) -> bool:
        """CTAs all over the traced ones update the hot address: at least half of them (a
        grid-wide sum), or at least two whose positions among the traced CTAs span half of
        them (a histogram's bin, which each CTA's data reach at random); not an address of
        one CTA or of a group of neighbouring CTAs."""
        return self._spread_wide(self.hot_ctas, self.hot_spread, self.traced_ctas)

    @property
    def region_wide(self) -> bool:
        """CTAs all over the traced ones reach the hot region (as :attr:`grid_wide`)."""
        return self._spread_wide(self.region_ctas, self.region_spread, self.traced_ctas)

    def launch_region_requests(self, scale: float) -> float:
        """The hot region's requests over the launch, scaled like :meth:`launch_updates`."""
        return self.region_requests * scale if self.region_wide else self.region_requests

    def launch_region_steps(self, scale: float) -> float:
        """The hot region's steps over the launch (as :meth:`launch_region_requests`)."""
        return self.region_steps * scale if self.region_wide else self.region_steps

    def launch_region_ctas(self, scale: float) -> float:
        """The launch's CTAs reaching the hot region (as :meth:`launch_region_requests`)."""
        return self.region_ctas * scale if self.region_wide else float(self.region_ctas)

    def launch_updates(self, scale: float) -> float:
        """The hot address's updates over the launch: the traced ones times the launch's CTAs
        over the traced where the address is :attr:`grid_wide`, else as traced (addresses of
        their own per CTA or group of CTAs)."""
        return self.hot_updates * scale if self.grid_wide else self.hot_updates

    def launch_ctas(self, scale: float) -> float:
        """The launch's CTAs that update the hot address (as :meth:`launch_updates` counts)."""
        return self.hot_ctas * scale if self.grid_wide else float(self.hot_ctas)


def combined_lines(
    instrs: Iterable[Any], same_file: Callable[[Any], bool] | None = None
) -> set[int]:
    """Lines (at the call site) where ptxas combines a warp's atomic first: the warp's values
    summed (``REDUX``) or one elected lane (``UFLO``) doing the update; ``same_file``, when
    given, keeps the call sites of the kernel's own file."""
    return {
        line
        for ins in instrs
        if ins.base_opcode in ("REDUX", "UFLO")
        for f, line in [ins.call_site]
        if line is not None and (same_file is None or same_file(f))
    }


def _buffer_of(trace: AccessTrace, address: int) -> str | None:
    for name, (base, size) in trace.buffers.items():
        if int(base) <= address < int(base) + int(size):
            return str(name)
    return None


_HOT: IdentityMemo[AccessTrace, dict[tuple[str | None, int | None], HotAddress]] = IdentityMemo()


def hot_addresses(trace: AccessTrace) -> dict[tuple[str | None, int | None], HotAddress]:
    """Per source line (its user's line), the :class:`HotAddress` of its global atomics: made
    once per trace (GA208, GA303's loop context and the launch's serial atomics read it; a
    read-only dict of frozen values)."""
    return _HOT(trace, _hot_addresses)


def _hot_addresses(trace: AccessTrace) -> dict[tuple[str | None, int | None], HotAddress]:
    recs = trace.records
    sel = (recs["space"] == int(Space.GLOBAL)) & np.isin(recs["kind"], ATOMIC_KINDS)
    idx = np.flatnonzero(sel)
    if not len(idx):
        return {}
    atom = recs[idx]
    weights = record_weights(atom)
    w_rec = np.ones(len(atom)) if weights is None else weights
    by_line: dict[tuple[str | None, int | None], list[int]] = {}
    insts = atom["inst"].astype(np.int64)
    for inst in np.unique(insts):
        # the kernel's line (a helper function's atomic at its call in the kernel)
        by_line.setdefault(trace.call_site_of(int(inst)), []).append(int(inst))
    traced = len(trace.ctas)
    position = {int(c): k for k, c in enumerate(sorted(int(x) for x in trace.ctas))}
    out: dict[tuple[str | None, int | None], HotAddress] = {}
    for key, line_insts in by_line.items():
        rows = np.flatnonzero(np.isin(insts, line_insts))
        r = atom[rows]
        act = active_lanes(r["mask"])
        if not act.any():
            continue
        # the active lanes' (request, address), in row order, once for the three views below
        req_idx, lane_idx = np.nonzero(act)
        addr = r["addr"][req_idx, lane_idx].astype(np.uint64)
        lane_w = np.repeat(w_rec[rows], act.sum(axis=1))
        uniq, inverse = distinct_inverse(addr)
        counts = np.bincount(inverse, weights=lane_w, minlength=len(uniq))
        hot = int(np.argmax(counts))
        per_req = np.bincount(req_idx[inverse == hot], minlength=len(r))
        touching = per_req > 0
        ctas = distinct(r["cta"][touching])
        pos = [position.get(int(c), 0) for c in ctas]
        spread = (max(pos) - min(pos) + 1) / traced if pos and traced else 0.0
        pairs = lane_pairs(req_idx, addr)
        reg_req, reg_ctas, reg_spread, reg_addrs, reg_lines, reg_steps = _hot_region(
            r, (req_idx, addr, *pairs), w_rec[rows], position, traced
        )
        unit = hot_unit(req_idx, addr, w_rec[rows], pairs[0])
        u_on = unit.on
        u_pos = sorted({position.get(int(c), 0) for c in r["cta"][u_on]})
        u_spread = (u_pos[-1] - u_pos[0] + 1) / traced if u_pos and traced else 0.0
        opcode = trace.instructions[line_insts[0]].opcode
        out[key] = HotAddress(
            updates=float(lane_w.sum()),
            addresses=len(uniq),
            hot_updates=float(counts[hot]),
            hot_ctas=len(ctas),
            lanes_per_request=float(per_req[touching].mean()),
            traced_ctas=traced,
            buffer=_buffer_of(trace, int(uniq[hot])),
            opcode=opcode,
            insts=tuple(line_insts),
            hot_spread=round(spread, 4),
            region_requests=reg_req,
            region_ctas=reg_ctas,
            region_spread=reg_spread,
            region_addresses=reg_addrs,
            region_lines=reg_lines,
            region_steps=reg_steps,
            unit_sectors=unit.pairs,
            unit_wide=HotAddress._spread_wide(len(u_pos), u_spread, traced),
            unit_ns=unit.ns,
            unit_ctas=len(u_pos),
            unit_bins=(unit.sectors, unit.lines, unit.words),
            unit_lanes=unit.lanes,
        )
    return out


def _hot_region(
    r: np.ndarray,
    lanes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    w: np.ndarray,
    position: dict[int, int],
    traced: int,
) -> tuple[float, int, float, int, int, float]:
    """The :data:`REGION_BYTES` region that the most (warp-level request, 128-byte line) pairs
    of records ``r`` reach (each with its request's weight ``w``): those pairs (less the
    sample's noise), the traced CTAs
    making them, their spread over the traced CTAs, the region's distinct addresses and
    lines, and its steps (:attr:`HotAddress.region_steps`, less the noise alike). ``lanes``:
    the active lanes' requests and addresses (in row order), their distinct (request, address)
    pairs and each pair's lanes (:func:`~gpuadvise.model.atomic_units.lane_pairs`)."""
    req, addr, by_addr, by_addr_lanes = lanes
    if not len(req):
        return 0.0, 0, 0.0, 0, 0, 0.0
    pairs, _ = runs(by_addr[0], by_addr[1] >> np.uint64(7))  # (request, line), sorted
    shift = np.uint64(REGION_BYTES.bit_length() - 1 - 7)
    regions = pairs[:, 1] >> shift
    uniq, inverse = distinct_inverse(regions)
    counts = np.bincount(inverse, weights=w[pairs[:, 0].astype(np.int64)], minlength=len(uniq))
    hot = int(np.argmax(counts))
    # the hottest of many regions that a sample reaches a few times each is the sample's luck
    # (65,536 bins over 8 traced CTAs: 10 requests on one region, 4 on average): its count
    # less two of its standard deviations, at least the regions' mean
    top = float(counts[hot])
    hot_count = max(top - 2.0 * np.sqrt(top), float(counts.mean()))
    on = pairs[inverse == hot, 0].astype(np.int64)
    ctas = distinct(r["cta"][on])
    pos = [position.get(int(c), 0) for c in ctas]
    spread = (max(pos) - min(pos) + 1) / traced if pos and traced else 0.0
    in_region = (addr >> np.uint64(REGION_BYTES.bit_length() - 1)) == uniq[hot]
    n_lines = len(distinct(addr[in_region] >> np.uint64(7)))
    # each request's most lanes on one word of the region
    in_pairs = (by_addr[1] >> np.uint64(REGION_BYTES.bit_length() - 1)) == uniq[hot]
    words, per_word = by_addr[:, in_pairs].T, by_addr_lanes[in_pairs]
    most = np.zeros(len(r))
    np.maximum.at(most, words[:, 0].astype(np.int64), per_word)
    steps = float((most * w).sum()) * (hot_count / top if top else 1.0)
    return (
        hot_count,
        len(ctas),
        round(spread, 4),
        len(distinct(addr[in_region])),
        n_lines,
        steps,
    )
