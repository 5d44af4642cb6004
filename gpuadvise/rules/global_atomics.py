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
line (``docs/data/global_atomics_lines_h200_2026-11-29.txt``). Pure: the trace's records, no
I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.model.atomic_units import SECTOR_NS, hot_unit_sectors
from gpuadvise.model.banks import active_lanes
from gpuadvise.model.roofline import LaunchTimes
from gpuadvise.ptx.access import record_weights
from gpuadvise.rules.details import FindingDetails
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = [
    "REGION_BYTES",
    "ONE_LINE_NS",
    "REQUEST_NS",
    "HotAddress",
    "SerialAtomics",
    "hot_addresses",
    "combined_lines",
    "launch_serial_s",
    "tiles_advice",
    "update_ns",
    "with_serial_s",
]

_ATOMIC_KINDS = (int(Kind.ATOMIC), int(Kind.REDUCTION))

UPDATE_NS = {"f32": 1.76, "f64": 1.76, "f16": 1.76, "bf16": 1.76, "int": 0.73}
"""Nanoseconds the L2 takes per update of one address, by the atomic's type: an H200, CUDA 13,
2^24 updates of one word (``benchmarks/global_atomics_probe``, 2026-11-29): a float add 1.76 ns
(the other float types, unmeasured, taken alike), an integer add 0.73 ns. Other GPUs' L2s are
taken alike until measured."""


REGION_BYTES = 512
"""The span of consecutive memory whose lines' atomic requests queue behind each other."""

REQUEST_NS = 1.0
"""Nanoseconds the L2 takes per (warp-level request, 128-byte line) within one
:data:`REGION_BYTES` region. Fitted on an H200, CUDA 13, 2^24 integer adds (2^19 requests of 32
lanes) to random bins packed in consecutive words (``.gpu/s6-atomics/probe2.cu``, 2026-11-29):
the lines of a region a request reaches (4 lines a region, each reached with probability
1 - (1 - 1/lines)^32) times 2^19 times 1 ns against the measured time: 256 bins (1 KB) 2.2 ms
against 4.34 (its 8 lines in one slice, presumably), 768 (3 KB) 1.56 against 1.83, 1024 (4 KB)
1.34 against 1.42, 4096 (16 KB) 0.47 against 0.48, 32 bins one a line (4 KB) 1.34 against 1.61;
requests that reach one line of a region and no other (seven bins after warp aggregation,
``kernels/global_atomics`` letter_bins: 524,288 requests in at most 0.40 ms) take
:data:`ONE_LINE_NS`. Spread over many regions the launch's other
limits take over (65,536 bins one a line: 0.16 ms, the launch alone). Other GPUs' L2s are taken
alike until measured."""


ONE_LINE_NS = 0.75
"""Nanoseconds per request where a region's requests all reach one line (a few bins in one line):
``kernels/global_atomics`` letter_bins after warp aggregation (seven words, 524,288 requests)
took 0.40 ms on an H200, everything included (0.77 ns a request at most)."""


def update_ns(opcode: str) -> float:
    """The L2's time per update of one address for a PTX atomic ``opcode``."""
    mods = opcode.split(".")[1:]
    for m in reversed(mods):
        if m in UPDATE_NS:
            return UPDATE_NS[m]
    return UPDATE_NS["int"]


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


@dataclass(frozen=True)
class SerialAtomics:
    """GA208's view of a source line's atomics as the L2 takes them in turn over the launch:
    the hot address's updates (``lanes`` of a warp-level request on it), the hot region's
    requests (:data:`REGION_BYTES`), the same with one update per CTA of one wave (one request
    per line and CTA), the L2's time per update and per request, and the hot region's steps
    (:attr:`HotAddress.region_steps`; after a CTA reduction one per request)."""

    updates: float
    lanes: float
    line_requests: float
    cta_updates: float
    cta_line_requests: float
    update_s: float
    line_s: float
    line_scaled: bool
    steps: float = 0.0

    def time_s(self, updates: float, line_requests: float, steps: float = 0.0) -> float:
        """The largest of the address's, the line's and the region's steps' serial times."""
        return max(updates * self.update_s, line_requests * self.line_s, steps * self.update_s)

    @property
    def serial_s(self) -> float:
        return self.time_s(self.updates, self.line_requests, self.steps)

    @property
    def cta_serial_s(self) -> float:
        return self.time_s(self.cta_updates, self.cta_line_requests, self.cta_line_requests)

    @property
    def by_line(self) -> bool:
        """The hot line's requests take the L2 longer than the hot address's updates."""
        return self.line_requests * self.line_s > self.updates * self.update_s

    @property
    def by_steps(self) -> bool:
        """The region's steps (requests, each its most lanes on one word) take the L2 longer
        than both the hot address's updates and the region's requests."""
        t = self.steps * self.update_s
        return t > self.updates * self.update_s and t > self.line_requests * self.line_s

    def finding_text(self, h: HotAddress, scale: float) -> str:
        """What takes the L2 longest, for GA208's message (``scale``: the trace's)."""
        where = f"`{h.buffer}`" if h.buffer else "one address"
        if self.by_steps:
            return (
                f"{h.launch_region_requests(scale):.0f} warp-level requests on one "
                f"{REGION_BYTES}-byte region of {where} over the launch, each applying its "
                f"lanes on one word one after another ({self.steps:.0f} updates in turn, "
                f"{self.lanes:.1f} lanes of a request on the hottest address, from "
                f"{h.launch_region_ctas(scale):.0f} CTAs) at about "
                f"{self.update_s * 1e9:.2f} ns each"
            )
        if self.by_line:
            return (
                f"{self.line_requests:.0f} requests on the 128-byte lines of one "
                f"{REGION_BYTES}-byte region of {where} over the launch (a warp-level request "
                f"once per line it reaches; {h.region_addresses} addresses, from "
                f"{h.launch_region_ctas(scale):.0f} CTAs), which the L2 takes one after "
                f"another at about {h.request_ns():.2f} ns each"
            )
        return (
            f"{self.updates:.0f} updates of one address of {where} over the launch "
            f"({self.lanes:.1f} lanes of a warp-level request, from "
            f"{h.launch_ctas(scale):.0f} CTAs), which the L2 applies one after another "
            f"at about {update_ns(h.opcode):.2f} ns each"
        )

    def estimate_text(self, h: HotAddress) -> str:
        """The serial term of GA208's estimate, in words."""
        if self.by_steps:
            return (
                f"the L2's {self.steps:.0f} updates in turn on one {REGION_BYTES}-byte region "
                f"(each request's lanes on one word one after another) at "
                f"{self.update_s * 1e9:.2f} ns each"
            )
        if self.by_line:
            return (
                f"the L2's {self.line_requests:.0f} requests on the lines of one "
                f"{REGION_BYTES}-byte region at {h.request_ns():.2f} ns each"
            )
        return (
            f"the L2's {self.updates:.0f} serial updates of one address at "
            f"{update_ns(h.opcode):.2f} ns each"
        )


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


def launch_serial_s(trace: AccessTrace, combined: Collection[int] = ()) -> float:
    """The longest the L2 takes for one source line's global atomics over the launch, one
    after another (GA208's serial time: the hot address's updates, the hot region's requests
    or its steps, the larger), 0 without global atomics: what the launch model leaves out.
    ``combined``: lines where ptxas combines a warp's lanes first (``REDUX``/``UFLO``: one
    update per warp-level request)."""
    scale = trace.scale
    most = 0.0
    for (_, line), h in hot_addresses(trace).items():
        updates, requests = h.launch_updates(scale), h.launch_region_requests(scale)
        steps = h.launch_region_steps(scale)
        if line in combined:
            updates, steps = updates / max(h.lanes_per_request, 1.0), requests
        u = update_ns(h.opcode)
        most = max(most, updates * u, requests * h.request_ns(), steps * u)
        if line not in combined:  # a 1 KB unit's sectors (gpuadvise.model.atomic_units)
            most = max(most, h.unit_sectors * (scale if h.unit_wide else 1.0) * SECTOR_NS)
    return most * 1e-9


def with_serial_s(times: LaunchTimes, serial_s: float) -> float:
    """The launch's time with the L2's serial atomics (``serial_s``) as its L2 term where they
    take longer: the launch model then combines them with the rest as it combines its own
    throughput terms, overlapped with compute (HeCBench michalewicz, bound by its pipes: the
    atomics' 0.71 ms hidden, measured 1.01x at most without them) and added in part to a
    latency-bound launch's waits (llm.c layernorm_backward_kernel1: 2.08 ms modelled without
    the atomics' 1.80 ms, 4.28 ms measured, 1.78 ms after warp aggregation)."""
    if serial_s <= times.l2_s:
        return times.time_s
    return replace(times, l2_s=serial_s).time_s


def _buffer_of(trace: AccessTrace, address: int) -> str | None:
    for name, (base, size) in trace.buffers.items():
        if int(base) <= address < int(base) + int(size):
            return str(name)
    return None


def hot_addresses(trace: AccessTrace) -> dict[tuple[str | None, int | None], HotAddress]:
    """Per source line (its user's line), the :class:`HotAddress` of its global atomics."""
    recs = trace.records
    sel = (recs["space"] == int(Space.GLOBAL)) & np.isin(recs["kind"], _ATOMIC_KINDS)
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
        addr = r["addr"][act].astype(np.uint64)
        lane_w = np.repeat(w_rec[rows], act.sum(axis=1))
        uniq, inverse = np.unique(addr, return_inverse=True)
        counts = np.bincount(inverse, weights=lane_w, minlength=len(uniq))
        hot = int(np.argmax(counts))
        on_hot = r["addr"] == uniq[hot]
        on_hot &= act
        per_req = on_hot.sum(axis=1)
        touching = per_req > 0
        ctas = np.unique(r["cta"][touching])
        pos = [position.get(int(c), 0) for c in ctas]
        spread = (max(pos) - min(pos) + 1) / traced if pos and traced else 0.0
        reg_req, reg_ctas, reg_spread, reg_addrs, reg_lines, reg_steps = _hot_region(
            r, act, w_rec[rows], position, traced
        )
        req_idx, lane_idx = np.nonzero(act)
        u_count, u_on = hot_unit_sectors(req_idx, r["addr"][req_idx, lane_idx], w_rec[rows])
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
            unit_sectors=u_count,
            unit_wide=HotAddress._spread_wide(len(u_pos), u_spread, traced),
        )
    return out


def _hot_region(
    r: np.ndarray, act: np.ndarray, w: np.ndarray, position: dict[int, int], traced: int
) -> tuple[float, int, float, int, int, float]:
    """The :data:`REGION_BYTES` region that the most (warp-level request, 128-byte line) pairs
    of records ``r`` reach (each with its request's weight ``w``): those pairs (less the
    sample's noise), the traced CTAs
    making them, their spread over the traced CTAs, the region's distinct addresses and
    lines, and its steps (:attr:`HotAddress.region_steps`, less the noise alike)."""
    req, lane = np.nonzero(act)
    if not len(req):
        return 0.0, 0, 0.0, 0, 0, 0.0
    addr = r["addr"][req, lane].astype(np.uint64)
    pairs = np.unique(np.stack([req.astype(np.uint64), addr >> np.uint64(7)], axis=1), axis=0)
    shift = np.uint64(REGION_BYTES.bit_length() - 1 - 7)
    regions = pairs[:, 1] >> shift
    uniq, inverse = np.unique(regions, return_inverse=True)
    counts = np.bincount(inverse, weights=w[pairs[:, 0].astype(np.int64)], minlength=len(uniq))
    hot = int(np.argmax(counts))
    # the hottest of many regions that a sample reaches a few times each is the sample's luck
    # (65,536 bins over 8 traced CTAs: 10 requests on one region, 4 on average): its count
    # less two of its standard deviations, at least the regions' mean
    top = float(counts[hot])
    hot_count = max(top - 2.0 * np.sqrt(top), float(counts.mean()))
    on = pairs[inverse == hot, 0].astype(np.int64)
    ctas = np.unique(r["cta"][on])
    pos = [position.get(int(c), 0) for c in ctas]
    spread = (max(pos) - min(pos) + 1) / traced if pos and traced else 0.0
    in_region = (addr >> np.uint64(REGION_BYTES.bit_length() - 1)) == uniq[hot]
    n_lines = len(np.unique(addr[in_region] >> np.uint64(7)))
    # each request's most lanes on one word of the region
    words, per_word = np.unique(
        np.stack([req[in_region].astype(np.uint64), addr[in_region]], axis=1),
        axis=0,
        return_counts=True,
    )
    most = np.zeros(len(r))
    np.maximum.at(most, words[:, 0].astype(np.int64), per_word)
    steps = float((most * w).sum()) * (hot_count / top if top else 1.0)
    return (
        hot_count,
        len(ctas),
        round(spread, 4),
        len(np.unique(addr[in_region])),
        n_lines,
        steps,
    )


def tiles_advice(wave: int) -> str:
    """GA208's advice where each CTA makes one atomic on the address already and the kernel has
    no loop a smaller grid could use (a block reduction, then ``atomicAdd(error, s)``; a stream
    compaction's ``l_n = atomicAdd(nres, l_n)``): fewer CTAs, each doing the work of several
    and its atomic once (``wave``: the CTAs of one wave)."""
    return (
        "the kernel makes one atomic per CTA already: give each CTA the work of several of its "
        "CTAs (a loop over their tiles, or a grid-stride loop over the data, launched with about "
        f"{wave} CTAs, one wave), each thread's partial kept in a register across them and the "
        "CTA's reduction and its atomic made once, after the loop; where the atomic's returned "
        "value places the CTA's output (an offset into a compacted array), count the CTA's "
        "whole share first and take one offset for all of it (not automatic: splitting the "
        "kernel's body at its reduction is the author's rewrite; the estimate is for one atomic "
        "per CTA of one wave)"
    )
