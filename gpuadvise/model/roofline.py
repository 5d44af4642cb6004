"""The one roofline of every estimate: a kernel takes at least the larger of the time of its busiest
on-chip pipe and the time of its DRAM traffic.

A fix that saves ``saved`` units of the pipe's work (L1 data-path cycles, shared-memory wavefronts,
issue slots) bounds the speedup by ``max(T_pipe, T_dram) / max(T_pipe - T_saved, T_dram)``; the
rules turn that into an upper-bound estimate. Latency, dependencies and overlap are ignored, so
the real gain is smaller. Without the device's clock or bandwidth the DRAM floor is dropped and
the bound is the ratio of the pipe's work (:func:`work_ratio`).

The launch model (:class:`Traffic`, :func:`launch_times`, :class:`LaunchEstimate`) has these
terms, each a time over the whole launch: the SMs' L1/shared data path (requests and
wavefronts, on the busiest SM), the L2 (sectors from the coalescing model, stores split into
full, partial and scattered), DRAM (bytes from the L2 side: distinct sectors filled and written
back), latency (Little's law: the bytes the resident warps keep in flight against latency x
bandwidth), and, from the execution model (:mod:`gpuadvise.model.execution`) when the traffic
carries the kernel's :class:`~gpuadvise.model.execution.KernelWork`: issue (every warp
instruction on the busiest scheduler), pipe (the slowest arithmetic pipe), dependency (the
critical path of serial phases and the CTA turnaround of each round) and cta (CTA launches);
without it, issue counts the memory instructions alone. A launch takes its floor (an empty
kernel's launch, measured) plus its work (:func:`gpuadvise.model.execution.combine_sides`: the
latency side, the largest of dependency, latency and cta, and the throughput side, memory and
compute overlapping but for a fraction ``1 / warps per scheduler`` of the smaller, as a 2.5-norm;
at peak, for the upper bounds, their maximum with full overlap and no CTA turnaround); an
estimate compares the launch before and after a change, and names the term that bounds each.

Pure arithmetic: no I/O, no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.devices import DeviceSpec, MemoryRates, PipeRates, pipe_rates
from gpuadvise.model.execution import (
    SIDES_NORM,
    ComputeTerms,
    KernelWork,
    LoadMix,
    combine,
    combine_sides,
    compute_terms,
    overlap,
    phase_overlap,
)

__all__ = [
    "ALL_TERMS",
    "ISSUE_PER_SM_PER_CLOCK",
    "L1_BYTES_PER_CLOCK",
    "PARTIAL_STORE_PEAK_FACTOR",
    "LaunchEstimate",
    "LaunchTimes",
    "TERMS",
    "Traffic",
    "launch_estimate",
    "launch_times",
    "Roofline",
    "dram_bytes_per_s",
    "amortised_ratio",
    "l1_cycles",
    "record_l1_cycles",
    "occupancy_ratio",
    "roofline",
    "sm_cycles_per_s",
    "work_ratio",
]

L1_BYTES_PER_CLOCK = 128
"""An SM's L1 data path returns 128 bytes (4 sectors of 32) per clock, of one 128-byte line: a
request's sectors in distinct lines take a clock each (a warp's load of 32 rows, one float a
row: 32 clocks, not the 8 its 32 sectors would take at 4 a clock)."""

L1_CYCLES_PER_LINE = 1.0
"""The L1 data path's cycles for each distinct 128-byte line of a request (see
:data:`L1_BYTES_PER_CLOCK`)."""

_MIN_TIME_S = 1e-15


def l1_cycles(requests: float, sectors: float, lines: float = 0.0) -> float:
    """Cycles of an SM's L1 data path for global requests: a request takes at least one, the
    path returns 128 bytes (4 sectors) of one line per cycle, so each distinct 128-byte line a
    request touches takes a cycle (``lines``: summed over the requests; 0: not known, the
    sectors alone). PolyBench atax's rows, a thread per row (each warp load 32 lines, 32
    sectors): 32 cycles a load, as its register variant measured on an H200 (0.64 ms; 8 cycles
    a load would make it 0.15 ms)."""
    return max(float(requests), float(sectors) / 4.0, float(lines) * L1_CYCLES_PER_LINE)


def record_l1_cycles(sectors: Any, lines: Any) -> Any:
    """:func:`l1_cycles` of each request of ``sectors`` and ``lines`` (arrays, one per request)."""
    import numpy as np

    per_sector = np.maximum(np.asarray(sectors, np.float64) / 4.0, 1.0)
    return np.maximum(per_sector, np.asarray(lines, np.float64) * L1_CYCLES_PER_LINE)


def sm_cycles_per_s(device: DeviceSpec, per_sm_per_clock: float = 1.0) -> float | None:
    """Units of a per-SM pipe the whole GPU completes per second (``per_sm_per_clock`` each SM
    per clock, at the SM clock); None without the SM count or clock."""
    if not (device.sm_count and device.sm_clock_mhz):
        return None
    return device.sm_count * device.sm_clock_mhz * 1e6 * per_sm_per_clock


def dram_bytes_per_s(device: DeviceSpec) -> float | None:
    """The device's peak DRAM bandwidth in bytes per second; None when its model has none."""
    if not device.mem_bandwidth_gbps:
        return None
    return device.mem_bandwidth_gbps * 1e9


@dataclass(frozen=True)
class Roofline:
    """A pipe's time and the part a fix saves, against a DRAM floor (seconds, whole launch)."""

    pipe_s: float
    saved_s: float
    dram_s: float

    @property
    def before_s(self) -> float:
        return max(self.pipe_s, self.dram_s)

    @property
    def after_s(self) -> float:
        return max(self.pipe_s - self.saved_s, self.dram_s, _MIN_TIME_S)

    @property
    def speedup(self) -> float:
        """``max(T_pipe, T_dram) / max(T_pipe - T_saved, T_dram)``: an upper bound."""
        return self.before_s / self.after_s

    @property
    def dram_bound(self) -> bool:
        """Whether the DRAM floor decides the time once the fix is made."""
        return self.dram_s >= self.pipe_s - self.saved_s


def roofline(
    pipe_work: float,
    saved_work: float,
    pipe_per_s: float,
    dram_bytes: float = 0.0,
    dram_per_s: float | None = None,
) -> Roofline:
    """The :class:`Roofline` of a launch whose busiest pipe does ``pipe_work`` units at
    ``pipe_per_s`` (:func:`sm_cycles_per_s`), of which a fix saves ``saved_work``, and which
    moves ``dram_bytes`` at ``dram_per_s`` (:func:`dram_bytes_per_s`; None: no DRAM floor)."""
    dram_s = dram_bytes / dram_per_s if dram_per_s else 0.0
    return Roofline(pipe_work / pipe_per_s, saved_work / pipe_per_s, dram_s)


def work_ratio(work: float, saved: float, floor: float = 1e-9) -> float:
    """The bound without clock or bandwidth figures: the pipe's work before over after
    (``after`` at least ``floor``)."""
    return work / max(work - saved, floor)


# ---------------------------------------------------------------------------------------------
# The launch model: five terms before and after a change

ISSUE_PER_SM_PER_CLOCK = 4
"""Warp instructions an SM issues per clock: four schedulers, one each (Volta and later)."""

TERMS = ("l1", "l2", "dram", "issue", "latency")
"""The memory roofline's terms (and issue), the first of every launch's."""
ALL_TERMS = (*TERMS, "pipe", "dependency", "cta")
"""Every term of the launch model: the roofline's and the execution model's."""

PARTIAL_STORE_PEAK_FACTOR = 422.17 / 98.77
"""How much faster the L2 takes partial-sector stores at best than at the rate the point uses:
on the H200 (docs/data/roofline_probe_h200_2026-11-25.txt) one word per sector, four sectors per
line, L2-resident: 98.77 G sectors/s (``MemoryRates.l2_partial_store_gsectors``); the same
pattern with each block's warps writing the other words of the same sectors (the sectors
completed in the L2 before they leave it): 422.17 G sectors/s. The floor of an upper bound
takes partial stores at the faster rate (the model cannot tell which one a launch gets)."""


@dataclass(frozen=True)
class Traffic:
    """What a launch moves, counted over the whole launch (all CTAs).

    ``l1_cycles``: the L1 data path's cycles for global accesses (:func:`l1_cycles` per line,
    summed); ``shared_wavefronts``: shared-memory wavefronts (the same data path);
    ``l2_*_sectors``: 32-byte sectors the L2 serves: loads (L1 misses), full-sector stores,
    partial-sector stores (merged under byte masks) and scattered partial stores (each lane
    another 128-byte line); ``dram_bytes``: sectors filled from DRAM and written back;
    ``instructions``: warp instructions issued (memory ones: the issue term when there is no
    ``work``); ``resident_warps``: warps on the device at once; ``bytes_in_flight_per_warp``:
    what each keeps in flight (0: no latency term). ``work``: what the CTAs execute (the
    execution model's input; None: memory instructions alone). ``load_requests``: the global
    load requests (warp instructions; with ``l2_load_sectors`` and ``dram_load_bytes``, where a
    load is served: the latency of a global load on a dependent chain); ``shared_requests``:
    shared warp accesses (with ``shared_wavefronts``, the bank conflicts on a chain);
    ``l2_missing_load_requests``: the load requests that bring a sector into the L1 (each once,
    however many sectors it misses: the waits of a warp's chain that go to the L2,
    :meth:`~gpuadvise.model.execution.LoadMix.per_wait`; 0: not known);
    ``l2_refetch_load_sectors``: the part of ``l2_load_sectors`` that re-reads sectors the L1
    gave up (its capacity); ``l1_pending_load_requests``: the load requests that bring no
    sector but wait for another warp's miss in flight (:func:`gpuadvise.model.l1.misses_in_flight`:
    waits on the L2 for the chains, no L2 sectors)."""

    l1_cycles: float = 0.0
    shared_wavefronts: float = 0.0
    l2_load_sectors: float = 0.0
    l2_store_sectors: float = 0.0
    l2_partial_store_sectors: float = 0.0
    l2_scattered_store_sectors: float = 0.0
    dram_bytes: float = 0.0
    instructions: float = 0.0
    resident_warps: float = 0.0
    bytes_in_flight_per_warp: float = 0.0
    work: KernelWork | None = None
    load_requests: float = 0.0
    dram_load_bytes: float = 0.0
    shared_requests: float = 0.0
    l2_missing_load_requests: float = 0.0
    l2_refetch_load_sectors: float = 0.0
    l1_pending_load_requests: float = 0.0

    def without_memory(self, **fields: Any) -> Traffic:
        """This launch with none of its memory traffic (the L1, shared, L2 and DRAM terms and
        the bytes in flight), ``fields`` replaced besides: its arithmetic alone (GA405's
        compute side, the idle CTAs' launch in :mod:`gpuadvise.rules.idle_cost`)."""
        return replace(
            self,
            **{
                "l1_cycles": 0.0,
                "shared_wavefronts": 0.0,
                "l2_load_sectors": 0.0,
                "l2_store_sectors": 0.0,
                "l2_partial_store_sectors": 0.0,
                "l2_scattered_store_sectors": 0.0,
                "dram_bytes": 0.0,
                "dram_load_bytes": 0.0,
                "bytes_in_flight_per_warp": 0.0,
                **fields,
            },
        )

    def load_mix(self, in_flight: bool = True) -> LoadMix:
        """Where the loads are served and the shared accesses' wavefronts per request. A load
        waits for its slowest sector: it misses the L1 when one of its sectors does, so the L1
        miss fraction is that of requests: the requests that bring a sector into the L1, each
        once however many sectors it misses (a strided request of 32 sectors and a coalesced
        one of 4 both wait for the L2 once), and the sectors re-read after the L1 gave them up
        (each its own wait: the capacity model's share is a sector's), over the requests, at
        most 1; without the missing requests' count, the L2 sectors over the requests (which
        counted a coalesced miss four times). The requests that wait for another warp's miss
        in flight count as missing requests too (``in_flight`` False: not, the fewest misses,
        an upper bound's optimistic after side). The L2's is that of its sectors (those DRAM
        fills)."""
        pending = self.l1_pending_load_requests if in_flight else 0.0
        if self.l2_missing_load_requests > 0 and self.load_requests > 0:
            missed = self.l2_missing_load_requests + pending + self.l2_refetch_load_sectors
            l1_miss = missed / self.load_requests
        else:
            l1_miss = self.l2_load_sectors / self.load_requests if self.load_requests > 0 else 1.0
        l2_sectors = self.l2_load_sectors * 32.0
        l2_miss = self.dram_load_bytes / l2_sectors if l2_sectors > 0 else 0.0
        ways = self.shared_wavefronts / self.shared_requests if self.shared_requests > 0 else 1.0
        warps = self.work.ctas * self.work.warps_per_cta if self.work is not None else 0
        per_warp = (self.l2_missing_load_requests + pending) / warps if warps > 0 else 0.0
        return LoadMix(
            min(max(l1_miss, 0.0), 1.0), min(max(l2_miss, 0.0), 1.0), max(ways, 1.0), per_warp
        )


@dataclass(frozen=True)
class LaunchTimes:
    """The terms of one launch in seconds (:data:`ALL_TERMS`), its floor, and the overlap of
    its memory and compute times (``hidden``: :func:`gpuadvise.model.execution.overlap`; 1:
    full); ``compute``: the execution model's terms with what they were made of (None when the
    traffic carried no :class:`~gpuadvise.model.execution.KernelWork`); ``norm``: the p of the
    p-norm of the latency and throughput sides (:data:`~gpuadvise.model.execution.SIDES_NORM`;
    infinite at peak: their maximum)."""

    l1_s: float
    l2_s: float
    dram_s: float
    issue_s: float
    latency_s: float
    pipe_s: float = 0.0
    dependency_s: float = 0.0
    cta_s: float = 0.0
    floor_s: float = 0.0
    hidden: float = 1.0
    compute: ComputeTerms | None = None
    norm: float = SIDES_NORM
    #: the part of ``dependency_s`` that is the first round's CTA launches (the ramp; 0 where
    #: it is left out, at peak)
    ramp_s: float = 0.0

    def term(self, name: str) -> float:
        return float(getattr(self, name + "_s"))

    def shortened(self, speedup: float, keep_cta_launches: bool = True) -> LaunchTimes:
        """The launch after a change that makes its CTAs' own work ``speedup`` times shorter:
        every term divided by ``speedup`` (the work too, every term being of degree one)
        except, with ``keep_cta_launches``, the CTA launches, which the block scheduler's rate
        sets and no change of a CTA's code touches: the ``cta`` term and the ramp in the
        dependency term (an empty kernel of the same grid takes them on the GPU: docs/data/
        cta_launch_h200_2026-11-30.txt). ``keep_cta_launches`` False: a change that launches
        fewer CTAs too (GA103's merges), the launches shortened with the rest."""
        s = max(speedup, 1e-9)
        keep = keep_cta_launches
        ramp = self.ramp_s if keep else 0.0
        return replace(
            self,
            l1_s=self.l1_s / s,
            l2_s=self.l2_s / s,
            dram_s=self.dram_s / s,
            issue_s=self.issue_s / s,
            latency_s=self.latency_s / s,
            pipe_s=self.pipe_s / s,
            dependency_s=(self.dependency_s - ramp) / s + ramp,
            cta_s=self.cta_s if keep else self.cta_s / s,
            ramp_s=ramp if keep else self.ramp_s / s,
        )

    @property
    def memory_s(self) -> float:
        """The memory system's throughput time: the largest of L1, L2 and DRAM (the latency
        term is on the latency side)."""
        return max(self.l1_s, self.l2_s, self.dram_s)

    @property
    def compute_s(self) -> float:
        return max(self.issue_s, self.pipe_s)

    @property
    def latency_side_s(self) -> float:
        """How long the launch takes when nothing queues: dependency, latency or CTA launches."""
        return max(self.dependency_s, self.latency_s, self.cta_s)

    @property
    def throughput_side_s(self) -> float:
        """Memory and compute overlapping but for ``1 - hidden`` of the smaller."""
        return combine(self.memory_s, self.compute_s, 0.0, self.hidden)

    @property
    def work_s(self) -> float:
        """The launch's work, without its floor
        (:func:`~gpuadvise.model.execution.combine_sides`)."""
        return combine_sides(
            self.latency_side_s,
            self.throughput_side_s,
            self.norm,
            self.latency_s,
            self.compute_s,
            self.hidden,
        )

    @property
    def time_s(self) -> float:
        return max(self.floor_s + self.work_s, _MIN_TIME_S)

    @property
    def bound_by(self) -> str:
        """The term that decides the time (the first of :data:`ALL_TERMS` on a tie), or
        ``launch`` when the floor is more than the work."""
        if self.floor_s > self.work_s:
            return "launch"
        return max(ALL_TERMS, key=lambda t: (self.term(t), -ALL_TERMS.index(t)))

    def describe(self) -> str:
        terms = [t for t in ALL_TERMS if t in TERMS or self.term(t) > 0]
        out = ", ".join(f"{t} {self.term(t) * 1e6:.2f}" for t in terms) + " us"
        if self.floor_s > 0:
            out += f"; launch floor {self.floor_s * 1e6:.2f} us"
        if self.compute is not None and self.pipe_s > 0:
            out += f" (slowest pipe {self.compute.pipe})"
        return out


def launch_times(
    traffic: Traffic,
    device: DeviceSpec,
    rates: MemoryRates,
    peak_dram: bool = False,
    pipes: PipeRates | None = None,
    turnaround: bool = True,
    barriers: bool = False,
) -> LaunchTimes | None:
    """The terms of ``traffic`` on ``device``: L1 at 128 bytes per SM per clock (on the busiest
    SM when the CTAs are known), L2 at the rates' sector rates (loads and stores share the
    slices, so their times add up), DRAM at the sustained copy rate, latency by Little's law;
    issue, pipe, dependency and CTA terms from the execution model when the traffic carries the
    kernel's work (else issue at four warp instructions per SM per clock of its memory
    instructions); the launch floor of the device (:func:`gpuadvise.devices.pipe_rates`).
    ``peak_dram``: the floor no launch beats, DRAM at its peak bandwidth, partial-sector stores
    at the L2's best partial-store rate (:data:`PARTIAL_STORE_PEAK_FACTOR`), memory and compute
    fully overlapped, the latency and throughput sides taking turns (their maximum, no p-norm),
    no barrier steps in the pipe term (:attr:`~gpuadvise.model.execution.ComputeTerms.other_pipes_s`),
    no CTA turnaround nor first-round CTA launches (the ramp) in the dependency term, and a
    chain's L1 misses at the requests' fraction
    (:meth:`~gpuadvise.model.execution.LoadMix.per_wait` not applied: the misses taken to fall
    on as few waits as can hold them). ``pipes``: the device's pipe rates (default:
    :func:`pipe_rates`). ``turnaround``: False leaves the CTA turnaround out of the dependency
    term (the launch rewritten to run in one wave, a grid-stride loop). ``barriers``: True keeps
    the barrier steps in a ``peak_dram`` floor's pipe term, for a change that leaves the work
    between the barriers as it is (a launch's shape: GA102's tail). None without SM count or
    clock."""
    hz = sm_cycles_per_s(device)
    bw = dram_bytes_per_s(device)
    if hz is None or bw is None:
        return None
    pipes = pipes or pipe_rates(device)
    dram_bw = bw if peak_dram else rates.dram_sustained_gbps * 1e9
    work = traffic.work
    spread = 1.0  # the busiest SM's share of the per-SM work over the average SM's
    if work is not None and device.sm_count:
        ctas = max(work.ctas, 1)
        spread = -(-ctas // device.sm_count) * device.sm_count / ctas
    l1_s = (traffic.l1_cycles + traffic.shared_wavefronts) * spread / hz
    g = 1e9
    l2_s = (
        traffic.l2_load_sectors / (rates.l2_load_gsectors * g)
        + traffic.l2_store_sectors / (rates.l2_store_gsectors * g)
        + traffic.l2_partial_store_sectors
        / (rates.l2_partial_store_gsectors * (PARTIAL_STORE_PEAK_FACTOR if peak_dram else 1.0) * g)
        + traffic.l2_scattered_store_sectors / (rates.l2_scattered_store_gsectors * g)
    )
    dram_s = traffic.dram_bytes / dram_bw
    in_flight = traffic.resident_warps * traffic.bytes_in_flight_per_warp
    latency_s = 0.0
    if in_flight > 0:
        # Little's law: bandwidth = bytes in flight / latency, at most the DRAM's; the bytes
        # the warps wait for are the loads' (stores are posted: no warp waits for them), when
        # the traffic says which they are
        waited = traffic.dram_load_bytes if traffic.dram_load_bytes > 0 else traffic.dram_bytes
        latency_s = waited * rates.latency_ns * 1e-9 / in_flight
    # the upper bounds' after side: misses on as few waits as can hold them (the requests'
    # fraction a wait), and none for the waits on another warp's miss in flight
    mix = traffic.load_mix(in_flight=not peak_dram)
    if peak_dram:
        mix = replace(mix, missing_per_warp=0.0)
    terms = compute_terms(work, device, pipes, mix) if work is not None else None
    if terms is None:
        issue_s = traffic.instructions / (hz * ISSUE_PER_SM_PER_CLOCK)
        per_sched = traffic.resident_warps / ((device.sm_count or 1) * ISSUE_PER_SM_PER_CLOCK)
        hidden = 1.0 if peak_dram else overlap(per_sched)
        return LaunchTimes(
            l1_s,
            l2_s,
            dram_s,
            issue_s,
            latency_s,
            floor_s=pipes.launch_floor_s,
            hidden=hidden,
            norm=math.inf if peak_dram else SIDES_NORM,
        )
    return LaunchTimes(
        l1_s,
        l2_s,
        dram_s,
        terms.issue_s,
        latency_s,
        pipe_s=terms.other_pipes_s
        if peak_dram and not barriers and terms.other_pipes_s is not None
        else terms.pipe_s,
        dependency_s=terms.dependency_s
        - (terms.turnaround_s if peak_dram or not turnaround else 0.0)
        - (terms.ramp_s if peak_dram else 0.0),
        cta_s=terms.cta_s,
        floor_s=pipes.launch_floor_s,
        hidden=1.0 if peak_dram else phase_overlap(terms.warps_per_scheduler, terms.phases),
        compute=terms,
        norm=math.inf if peak_dram else SIDES_NORM,
        ramp_s=0.0 if peak_dram else terms.ramp_s,
    )


# The most the launch model's time of a launch is taken to be short by, for the before side of
# an upper bound: its 90th-percentile error on the 44 calibration launches was 11.3% (docs/
# execution-model.md), and the five bounds that measurements on the corpus broke were 5-16%
# short (docs/accuracy.md, 2026-11-29).
BOUND_MARGIN = 0.15


def ceiling_s(times: LaunchTimes) -> float:
    """The longest a launch of ``times`` is taken to need, for the before side of an upper
    bound: its time with :data:`BOUND_MARGIN` on its work (the floor is measured, not
    modelled)."""
    return times.floor_s + times.work_s * (1.0 + BOUND_MARGIN)


# The time no launch goes below: an empty kernel's launch-to-completion on the GPU, which every
# timed launch pays on top of its work. Measured 2.8 us on an H200 (issue 29's measurement: a
# one-CTA kernel of 12.0 us against 2.8 us empty); 3.2-4.6 us per stream launch of a tiny kernel
# on an H100 (docs/data/launch_overhead_2026-11-22.txt). The lower figure: the bound it gives
# (before / floor) is then the larger, so an upper bound that uses it holds.
LAUNCH_FLOOR_S = 2.8e-6


def with_floor(times: LaunchTimes) -> float:
    """A launch's time with the launch floor under its work (the work's terms overlap the
    floor's set-up only in part: added, as the measurement sees them). :func:`launch_times`
    puts the device's floor in ``time_s`` already; a :class:`LaunchTimes` made without one
    gets :data:`LAUNCH_FLOOR_S`."""
    if times.floor_s > 0:
        return times.time_s
    return LAUNCH_FLOOR_S + times.time_s


@dataclass(frozen=True)
class LaunchEstimate:
    """A change's estimate on the launch model.

    ``before`` and ``after`` at sustained rates; ``after_floor`` with DRAM at its peak.
    ``point = before / after`` is the prediction; ``bound = before / after_floor`` the upper
    bound (the change cannot make the launch faster than its roofline at peak bandwidth)."""

    before: LaunchTimes
    after: LaunchTimes
    after_floor: LaunchTimes
    before_floor: LaunchTimes | None = None  # the launch as it is, at peak rates and overlap

    @property
    def point(self) -> float:
        return self.before.time_s / self.after.time_s

    @property
    def peak(self) -> float | None:
        """The change at peak rates and full overlap on both sides: with :attr:`point` (both
        at sustained rates) a like-for-like comparison, where :attr:`bound` mixes the two (the
        sustained launch before against the peak one after, which credits any change with the
        model's sustained-to-peak margin). None without :attr:`before_floor`."""
        if self.before_floor is None:
            return None
        return self.before_floor.time_s / self.after_floor.time_s

    @property
    def bound(self) -> float:
        """The launch as it is at its :func:`ceiling_s` over the change at its floor: the
        model's time of the launch is a prediction, which a bound allows its error (issue 29:
        five bounds on strangers' kernels broke by 5-16%, where the GPU overlapped less than
        the model)."""
        return max(ceiling_s(self.before) / self.after_floor.time_s, self.point)

    def method(self, what: str, rates: MemoryRates) -> str:
        b, a = self.before, self.after
        if b.compute is not None:
            kind = (
                "execution model of the launch (L1/shared data path, L2 sectors, DRAM bytes, "
                "latency by Little's law; issue and the slowest pipe from the emulator's "
                + (
                    "counts of the SASS's instructions (mapped onto the PTX by source line); "
                    if b.compute.counts_from == "sass"
                    else "instruction counts (the PTX's, no SASS to read); "
                )
                + "the critical path of dependent instructions; CTA launches; the launch floor)"
            )
            left = (
                "L2 reuse across CTAs and capacity misses, DRAM read-fills of partial sectors, "
                "the instruction cache and register-bank conflicts"
            )
        else:
            kind = (
                "roofline of the launch (L1/shared data path, L2 sectors, DRAM bytes, issue, "
                "latency; the launch floor)"
            )
            left = (
                "L2 reuse across CTAs and capacity misses, DRAM read-fills of partial sectors, "
                "ALU instructions (no instruction counts: issue counts memory instructions only)"
            )
        text = (
            f"{kind}: before {b.describe()}, bound by {b.bound_by}; after {what}: "
            f"{a.describe()}, bound by {a.bound_by}. Point {self.point:.2f}x (sustained rates, "
            f"{rates.source}; memory and compute overlapping but for 1/warps-per-scheduler of "
            f"the smaller: {1 - b.hidden:.0%} of it before, {1 - a.hidden:.0%} after; the "
            f"latency side and the throughput side added as a {b.norm:g}-norm); upper "
            f"bound {self.bound:.2f}x (before with {BOUND_MARGIN:.0%} on its work, the model's "
            "error; after at peak DRAM bandwidth, the L2's best partial-store rate, full "
            "overlap, the largest term alone, no CTA turnaround, the L1 misses of a chain's "
            "waits at the requests' fraction). "
        )
        if b.compute is not None:
            text += f"Before: {b.compute.describe()}. "
        return text + f"Left out: {left}"


def launch_estimate(
    before: Traffic,
    after: Traffic,
    device: DeviceSpec,
    rates: MemoryRates,
    pipes: PipeRates | None = None,
) -> LaunchEstimate | None:
    """:class:`LaunchEstimate` of a change from ``before`` to ``after``; None without the
    device's SM count or clock."""
    b = launch_times(before, device, rates, pipes=pipes)
    a = launch_times(after, device, rates, pipes=pipes)
    f = launch_times(after, device, rates, peak_dram=True, pipes=pipes)
    bf = launch_times(before, device, rates, peak_dram=True, pipes=pipes)
    if b is None or a is None or f is None:
        return None
    return LaunchEstimate(b, a, f, bf)


# ---------------------------------------------------------------------------------------------
# A launch change (block size, registers): more warps in flight, and the work CTAs repeat


def occupancy_ratio(
    warps_before: float, warps_after: float, saturation_warps: float, latency_bound: bool
) -> float:
    """The most a change of resident warps per SM can speed a launch up, by Little's law: the
    bytes in flight, and so the bandwidth a latency-bound launch reaches, grow in proportion to
    the warps (``warps_after / warps_before``). A launch the roofline does not find
    latency-bound is held to the warps up to ``saturation_warps`` (past them latency is taken
    as hidden). 1 when no warps are resident before."""
    if warps_before <= 0:
        return 1.0
    if latency_bound:
        return max(warps_after / warps_before, 1.0)
    return max(min(warps_after, saturation_warps) / min(warps_before, saturation_warps), 1.0)


def amortised_ratio(
    repeated: float, partitioned: float, ctas_before: float, ctas_after: float
) -> float:
    """Work before over after when each CTA repeats ``repeated`` units (a table every block
    stages in shared memory) and shares out ``partitioned`` units of the launch's work per CTA:
    ``C_b (R + P) / (C_a R + C_b P)``, the launch's partitioned work unchanged by a new CTA
    count ``ctas_after``. 1 without repeated work or CTAs."""
    if ctas_before <= 0 or ctas_after <= 0 or repeated + partitioned <= 0:
        return 1.0
    before = ctas_before * (repeated + partitioned)
    return before / (ctas_after * repeated + ctas_before * partitioned)
