"""The execution model of one launch: what the SMs' pipes, the warps' dependent chains, the CTA
launches and the launch itself add to the memory roofline (:mod:`gpuadvise.model.roofline`).

Input: :class:`KernelWork`, what the launch's CTAs execute, from the emulator's dynamic counts
(per CTA: warp instructions by pipe, the chain of dependent instructions of its critical warp by
latency class, its shared-memory accesses; :mod:`gpuadvise.ptx.chains`), and the device's
:class:`~gpuadvise.devices.PipeRates`. Output: :class:`ComputeTerms`, four times over the whole
launch, which :func:`gpuadvise.model.roofline.launch_times` combines with the memory terms:

- **issue**: the busiest scheduler's warp instructions at one per clock. CTAs are spread over the
  SMs (the busiest SM runs ``ceil(CTAs / SMs)``), a CTA's warps over its SM's four schedulers
  (the busiest holds ``ceil(W / 4)`` of the ``W`` warps resident), so one CTA of one warp issues
  from one scheduler of one SM, not from all of them;
- **pipe**: the same share of each pipe's instructions at the pipe's rate per scheduler (a
  quarter of its lanes per clock per SM: FP32 one warp instruction a clock, FP64 on an H100 one
  every two, MUFU one every eight), the slowest pipe;
- **dependency**: rounds of resident CTAs on the busiest SM times a CTA's critical path plus the
  CTA turnaround: the larger of its critical warp's chain at the device's latencies and that
  warp's instruction count (one issue a clock), and ``cta_turnaround_ns`` for each round after
  the first (the CTAs of a round retiring, the next ones launched and running their first
  instructions before their first load leaves: about 280 ns a round on an H200, fitted on
  benchmarks/loaded_latency; the first round's are in the launch floor, an empty kernel's launch
  to completion). A global load's latency is weighed by where the launch's loads are served
  (``l1`` for the sectors the L1 keeps, ``l2`` for the L2's hits, ``dram`` for the sectors DRAM
  fills: the memory model's counts), per wait rather than per request (a warp that waits for
  several loads at once waits for the slowest: :meth:`LoadMix.per_wait`); a shared access's
  by its wavefronts (each past the first adds ``shared_wavefront_cycles``: bank conflicts
  lengthen a serial chain); a barrier costs ``barrier`` cycles on the chain and
  ``barrier_arrive_cycles`` more for each warp of the CTA (:func:`barrier_latency`). This is
  the term of serial phases: a single CTA, a ``tid == 0`` section, a loop of dependent steps, and of
  streaming launches below saturation (one round of loads after another);
- **cta**: the block scheduler's CTA launches on the busiest SM, ``cta_launch_ns`` each after the
  first :data:`FLOOR_CTAS` (whose launches are in the floor): the rate at which an SM takes CTAs,
  a cap on any launch of many short CTAs. The first round's CTAs are launched one after another
  too, so the last of them starts ``cta_launch_ns`` x (its CTAs - 2) after the first two: this
  **ramp** adds to the dependency term, the critical path of the round's last CTA
  (:func:`cta_ramp_s`). Both measured on an H200 with empty and one-store kernels of 16 to 1,024
  threads, 1 CTA to 64 waves: ``floor + 79.4 ns x (CTAs an SM - 2)`` (docs/execution-model.md).
  A change of the CTAs' code leaves both as they are
  (:meth:`~gpuadvise.model.roofline.LaunchTimes.shortened`).

How the terms make a time (:func:`combine_sides`): the launch takes its floor (an empty kernel's
launch to completion, measured) plus its work, which has two sides:

- the **latency side** L: the largest of the dependency term, the memory roofline's Little's-law
  latency term (bytes the warps wait for x latency / bytes in flight) and the CTA term: how long
  the launch takes when nothing queues;
- the **throughput side** T: the memory time M (the largest of L1, L2 and DRAM) and the compute
  time K (the larger of issue and pipe) together, overlapping except for a fraction ``1 / w`` of
  the smaller, ``w`` the warps per scheduler (:func:`combine`): with one warp per scheduler
  nothing hides the memory time behind the arithmetic (M + K); with 16 warps all but a
  sixteenth of the smaller does. Other warps hide a warp's memory behind their arithmetic only
  where they are in another phase: ``w`` is at most the phases, the memory waits the busiest
  SM's warps take one after another (rounds x the global waits on a CTA's critical warp's
  chain, :func:`phase_overlap`). A launch of one round whose threads load, wait once, compute
  and store (kernels/fp64 norm) is one phase: its warps wait together while the memory streams,
  then compute together, M + K.

The two sides do not take turns (their maximum) but add in part: as the load on the memory
system grows, each request waits longer in its queues (loaded latency), so the latency side
stretches before the throughput side is reached. The work is their p-norm
``(L^p + T^p)^(1/p)`` with ``p =`` :data:`SIDES_NORM` (2.5, fitted with the turnaround on 44
streaming launches measured on an H200 from 0.5 to 128 KB in flight per SM: median error 6%,
against 35% for the maximum without the turnaround; benchmarks/loaded_latency). The work is
also at least the Little's-law latency and the compute together, overlapping but for ``1 / w``
of the smaller, as a warp's waits and its own instructions take turns unless other warps fill
them (what the model did before the p-norm, so no launch is predicted faster than it was).

The upper bounds take the after side optimistic: full overlap, the maximum of every term (no
p-norm, ``norm = inf``), no turnaround (the next CTA's start hidden behind the others'
work) nor ramp (the first round's CTA launches), and the L1 misses of a chain's waits at the
requests' fraction (:meth:`LoadMix.per_wait` not applied), which is the model as it was before
the p-norm, the turnaround, the ramp and the per-wait misses: a bound's after side is never
longer than it was, and its before side never shorter. This assumption is stated in every
estimate's method.

The issue and pipe terms' counts are the SASS's where the kernel's SASS can be read
(:mod:`gpuadvise.trace.sass_counts`: its instructions by source line and pipe, spread over the
PTX blocks the emulator counts, over the copies ptxas made of unrolled loops; ``counts_from``),
else the PTX's expansion table (:mod:`gpuadvise.ptx.pipes`); the dependency term's chains are the
PTX's either way.

What it leaves out: the instruction cache, register-bank conflicts, the scoreboard's limit on
loads in flight per warp beyond Little's law, dual issue (none since Volta), and, in the chains,
PTX-to-SASS differences beyond the expansion table of :mod:`gpuadvise.ptx.pipes` and the double
divisions' slow paths the traced values take (:mod:`gpuadvise.ptx.slow_paths`, in
``KernelWork``'s counts).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuadvise.devices import DeviceSpec, PipeRates

__all__ = [
    "FLOOR_CTAS",
    "ComputeTerms",
    "KernelWork",
    "LoadMix",
    "SIDES_NORM",
    "amdahl_with_floor",
    "barrier_cycles",
    "barrier_latency",
    "combine",
    "combine_sides",
    "compute_terms",
    "cta_launches_s",
    "cta_ramp_s",
    "overlap",
    "phase_overlap",
    "LocalTraffic",
    "local_traffic",
]

SCHEDULERS_PER_SM = 4
WARP = 32
_THROUGHPUT_PIPES = ("fp32", "fp16", "fp64", "int", "imad", "mufu", "xu", "shuffle", "tensor")

SIDES_NORM = 2.5
"""The p of the p-norm that adds a launch's latency side and throughput side (:func:`combine_sides`):
fitted with ``cta_turnaround_ns`` on benchmarks/loaded_latency's 44 streaming launches of an H200
(``calibrate.py --fit``). 1 would add them, infinity take their maximum."""


@dataclass(frozen=True)
class KernelWork:
    """What the launch's CTAs execute, per CTA (the mean over the traced CTAs).

    ``pipes``: warp instructions by pipe (:data:`gpuadvise.ptx.pipes.PIPES`); ``chain``: the
    links of the critical warp's chain of dependent instructions by latency class
    (:data:`gpuadvise.ptx.pipes.LATENCY_CLASSES`); ``critical_instructions``: the most
    instructions one warp of a CTA executes; ``shared_requests`` and ``shared_wavefronts``:
    shared-memory warp accesses and the wavefronts they take without bank conflicts (64-bit
    lanes take two, 128-bit four); ``ctas``: the launch's CTAs; ``warps_per_cta``;
    ``ctas_per_sm``: CTAs resident on an SM at once (the occupancy; 0: unknown, the warp and CTA
    limits then decide); ``ctas_traced``: how many CTAs the means are over; ``reads_grid_size``:
    the kernel reads ``gridDim`` (``%nctaid``), as a grid-stride loop does to share its work
    among however many CTAs run: more CTAs then shorten each one's loop, its critical path
    too. ``chain_unordered``: the same warp's chain were no store to keep the loads after it
    waiting (:mod:`gpuadvise.ptx.chains`' memory order): what ``__restrict__`` pointers or a
    value kept in a register instead of stored each iteration leave of the chain (None:
    unknown, take ``chain``). ``slow_paths`` and ``slow_chain``: the part of ``pipes`` and of
    ``chain`` (and ``chain_unordered``) that is ptxas's slow path of IEEE double divisions,
    taken where the traced operands send a warp's lane there (:mod:`gpuadvise.ptx.slow_paths`:
    a zero numerator): work that the same division in float does not have. ``counts_from``:
    ``"sass"`` when ``pipes`` (and ``critical_instructions``) are the kernel's SASS mapped onto
    the emulator's PTX blocks (:mod:`gpuadvise.trace.sass_counts`), ``"ptx"`` when they are the
    PTX's expansion table (:func:`gpuadvise.ptx.pipes.pipe_work`: no SASS to read).
    ``local_requests``, ``local_wavefronts`` and ``local_store_wavefronts``: the SASS's
    local-memory warp instructions (``LDL``/``STL``), their L1 wavefronts (a warp's 32-bit
    access one 128-byte line) and the stores' part of those, per CTA: in ``pipes["lsu"]``
    (issued) but in no memory term of the launch model, whose memory traffic is the trace's
    global accesses (:func:`local_traffic` weighs them); ``spill_*``: the same of those beyond
    the PTX's own local accesses, ptxas's register spills. For a PTX with local accesses (a
    local array): ``local_links``, the ``ld.local`` links of ``chain`` (counted in its
    ``global`` class: an ``ld.local`` that hits the L1 still waits behind the warps' global
    misses, measured, docs/accuracy.md s14-local), and ``chain_in_registers``, the critical
    warp's chain were its local accesses register moves (None: not known). ``cta_critical``: per
    traced CTA (in the trace's order of its CTAs), the most instructions one of its warps issued
    (empty: not counted), what an idle CTA's cost is told from a working one's by."""

    pipes: Mapping[str, float]
    chain: Mapping[str, float]
    critical_instructions: float
    ctas: int
    warps_per_cta: int
    ctas_per_sm: int = 0
    ctas_traced: int = 1
    shared_requests: float = 0.0
    shared_wavefronts: float = 0.0
    reads_grid_size: bool = False
    chain_unordered: Mapping[str, float] | None = None
    slow_paths: Mapping[str, float] = field(default_factory=dict)
    slow_chain: Mapping[str, float] = field(default_factory=dict)
    counts_from: str = "ptx"
    local_requests: float = 0.0
    spill_requests: float = 0.0
    local_wavefronts: float = 0.0
    spill_wavefronts: float = 0.0
    local_store_wavefronts: float = 0.0
    spill_store_wavefronts: float = 0.0
    local_links: float = 0.0
    chain_in_registers: Mapping[str, float] | None = None
    cta_critical: tuple[float, ...] = ()

    @property
    def instructions(self) -> float:
        """Warp instructions per CTA, every pipe."""
        return float(sum(self.pipes.values()))

    def per_cta_scaled(self, factor: float) -> KernelWork:
        """The same kernel doing ``factor`` times the work in each CTA (its loops that much
        longer or shorter): every count scaled."""
        return replace(
            self,
            pipes={k: v * factor for k, v in self.pipes.items()},
            chain={k: v * factor for k, v in self.chain.items()},
            chain_unordered=None
            if self.chain_unordered is None
            else {k: v * factor for k, v in self.chain_unordered.items()},
            critical_instructions=self.critical_instructions * factor,
            shared_requests=self.shared_requests * factor,
            shared_wavefronts=self.shared_wavefronts * factor,
            local_requests=self.local_requests * factor,
            spill_requests=self.spill_requests * factor,
            local_wavefronts=self.local_wavefronts * factor,
            spill_wavefronts=self.spill_wavefronts * factor,
            local_store_wavefronts=self.local_store_wavefronts * factor,
            spill_store_wavefronts=self.spill_store_wavefronts * factor,
            local_links=self.local_links * factor,
            chain_in_registers=None
            if self.chain_in_registers is None
            else {k: v * factor for k, v in self.chain_in_registers.items()},
            slow_paths={k: v * factor for k, v in self.slow_paths.items()},
            slow_chain={k: v * factor for k, v in self.slow_chain.items()},
        )

    def without_slow_paths(self) -> KernelWork:
        """The same work without its double divisions' slow paths (``slow_paths``,
        ``slow_chain``): what the divisions leave in float."""
        if not self.slow_paths and not self.slow_chain:
            return self

        def less(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
            out = {k: v - b.get(k, 0.0) for k, v in a.items()}
            return {k: v for k, v in out.items() if v > 1e-12}

        slow_issued = float(sum(self.slow_paths.values()))
        per_warp = slow_issued / max(self.warps_per_cta, 1)
        return replace(
            self,
            pipes=less(self.pipes, self.slow_paths),
            chain=less(self.chain, self.slow_chain),
            chain_unordered=None
            if self.chain_unordered is None
            else less(self.chain_unordered, self.slow_chain),
            chain_in_registers=None
            if self.chain_in_registers is None
            else less(self.chain_in_registers, self.slow_chain),
            critical_instructions=max(self.critical_instructions - per_warp, 0.0),
            slow_paths={},
            slow_chain={},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipes": dict(self.pipes),
            "chain": dict(self.chain),
            "critical_instructions": self.critical_instructions,
            "ctas": self.ctas,
            "warps_per_cta": self.warps_per_cta,
            "ctas_per_sm": self.ctas_per_sm,
            "ctas_traced": self.ctas_traced,
            "shared_requests": self.shared_requests,
            "shared_wavefronts": self.shared_wavefronts,
            "reads_grid_size": self.reads_grid_size,
            "chain_unordered": None if self.chain_unordered is None else dict(self.chain_unordered),
            "slow_paths": dict(self.slow_paths),
            "slow_chain": dict(self.slow_chain),
            "counts_from": self.counts_from,
            "local_requests": self.local_requests,
            "spill_requests": self.spill_requests,
            "local_wavefronts": self.local_wavefronts,
            "spill_wavefronts": self.spill_wavefronts,
            "local_store_wavefronts": self.local_store_wavefronts,
            "spill_store_wavefronts": self.spill_store_wavefronts,
            "local_links": self.local_links,
            "chain_in_registers": None
            if self.chain_in_registers is None
            else dict(self.chain_in_registers),
            **({"cta_critical": list(self.cta_critical)} if self.cta_critical else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelWork:
        return cls(
            pipes={str(k): float(v) for k, v in d["pipes"].items()},
            chain={str(k): float(v) for k, v in d["chain"].items()},
            critical_instructions=float(d["critical_instructions"]),
            ctas=int(d["ctas"]),
            warps_per_cta=int(d["warps_per_cta"]),
            ctas_per_sm=int(d.get("ctas_per_sm", 0)),
            ctas_traced=int(d.get("ctas_traced", 1)),
            shared_requests=float(d.get("shared_requests", 0.0)),
            shared_wavefronts=float(d.get("shared_wavefronts", 0.0)),
            reads_grid_size=bool(d.get("reads_grid_size", False)),
            chain_unordered=None
            if d.get("chain_unordered") is None
            else {str(k): float(v) for k, v in d["chain_unordered"].items()},
            slow_paths={str(k): float(v) for k, v in d.get("slow_paths", {}).items()},
            slow_chain={str(k): float(v) for k, v in d.get("slow_chain", {}).items()},
            counts_from=str(d.get("counts_from", "ptx")),
            local_requests=float(d.get("local_requests", 0.0)),
            spill_requests=float(d.get("spill_requests", 0.0)),
            local_wavefronts=float(d.get("local_wavefronts", 0.0)),
            spill_wavefronts=float(d.get("spill_wavefronts", 0.0)),
            local_store_wavefronts=float(d.get("local_store_wavefronts", 0.0)),
            spill_store_wavefronts=float(d.get("spill_store_wavefronts", 0.0)),
            local_links=float(d.get("local_links", 0.0)),
            chain_in_registers=None
            if d.get("chain_in_registers") is None
            else {str(k): float(v) for k, v in d["chain_in_registers"].items()},
            cta_critical=tuple(float(v) for v in d.get("cta_critical", ())),
        )


@dataclass(frozen=True)
class LoadMix:
    """Where a launch's global loads are served, as fractions of their sectors (from the memory
    model: L2 sectors over requested sectors, DRAM-filled over L2 sectors), and the shared
    accesses' wavefronts per request (1: no bank conflicts). ``missing_per_warp``: the launch's
    load requests per warp that bring a sector into the L1 (0: not known), which
    :meth:`per_wait` spreads over a warp's waits."""

    l1_miss: float = 1.0
    l2_miss: float = 0.0
    shared_ways: float = 1.0
    missing_per_warp: float = 0.0

    def global_cycles(self, lat: Mapping[str, float]) -> float:
        """A global load's expected latency: L1 hit, else L2 hit, else DRAM."""
        return lat["l1"] + self.l1_miss * (
            lat["l2"] - lat["l1"] + self.l2_miss * (lat["dram"] - lat["l2"])
        )

    def per_wait(self, waits_per_warp: float) -> LoadMix:
        """The mix of a warp's *waits* for global loads (the ``global`` links of its chain,
        ``waits_per_warp`` of them) rather than of its requests: a warp that issues several
        independent loads and then waits for them all (an iteration's loads of several arrays,
        an unrolled loop's) waits for the slowest, so the wait misses the L1 when any of them
        does. The missing requests are taken to fall on distinct waits, the most waits they
        can reach: ``min(1, missing requests / waits)``, never below the requests' fraction;
        the fewest, the requests' fraction itself (every miss in a wait of missing loads), is
        what the upper bounds' after side takes (``missing_per_warp`` 0). With one load a wait
        the request's fraction is kept."""
        if self.missing_per_warp <= 0 or waits_per_warp <= 0:
            return self
        per_wait = max(self.l1_miss, self.missing_per_warp / waits_per_warp)
        return replace(self, l1_miss=min(per_wait, 1.0))


@dataclass(frozen=True)
class ComputeTerms:
    """The execution model's terms of one launch (seconds over the whole launch) and what they
    were made of: ``pipe`` names the slowest pipe; ``chain_cycles``: a CTA's critical path;
    ``rounds``: CTAs one after another on the busiest SM; ``busiest_sm_ctas``;
    ``warps_per_scheduler`` (of the busiest SM); ``turnaround_s``: the part of ``dependency_s``
    that is the CTA turnaround (``cta_turnaround_ns`` for each round after the first); ``ramp_s``:
    the part that is the first round's CTA launches after the first (:func:`cta_ramp_s`)."""

    issue_s: float
    pipe_s: float
    dependency_s: float
    cta_s: float
    pipe: str
    chain_cycles: float
    rounds: int
    busiest_sm_ctas: int
    warps_per_scheduler: float
    chain_detail: Mapping[str, float] = field(default_factory=dict)
    turnaround_s: float = 0.0
    barrier_s: float = 0.0
    ramp_s: float = 0.0
    #: the memory waits of the busiest SM's warps one after another: the rounds times the
    #: global waits on a CTA's critical warp's chain (at least one a round): how many times
    #: its warps' memory and compute can take turns (:func:`phase_overlap`)
    phases: float = 1.0
    #: the slowest pipe's time without the barrier steps: an upper bound's optimistic after side
    #: takes it (the barrier rate is measured with shared work between the barriers, and a padded
    #: scan on the H200 ran faster than it allows: kernels/bank1d, 1.67x measured for a 1.27x
    #: bound with it, 1.91x without)
    other_pipes_s: float | None = None
    #: where the issue and pipe terms' instruction counts come from (``KernelWork.counts_from``)
    counts_from: str = "ptx"

    def describe(self) -> str:
        top = sorted(self.chain_detail.items(), key=lambda kv: -kv[1])[:3]
        parts = ", ".join(f"{k} {v:.0f}" for k, v in top if v > 0)
        return (
            f"critical path {self.chain_cycles:.0f} cycles a CTA"
            + (f" ({parts})" if parts else "")
            + (
                f" + {self.turnaround_s / max(self.rounds - 1, 1) * 1e9:.0f} ns CTA turnaround"
                if self.turnaround_s > 0
                else ""
            )
            + f" x {self.rounds} round{'s' if self.rounds != 1 else ''}"
            + (f" + {self.ramp_s * 1e9:.0f} ns first-round CTA launches" if self.ramp_s > 0 else "")
            + ", "
            f"{self.busiest_sm_ctas} CTA{'s' if self.busiest_sm_ctas != 1 else ''} on the "
            f"busiest SM, {self.warps_per_scheduler:.1f} warps a scheduler, slowest pipe "
            f"{self.pipe}"
        )


def _resident(device: DeviceSpec, work: KernelWork) -> int:
    """CTAs resident on an SM at once: the occupancy when known, else the warp and CTA limits."""
    if work.ctas_per_sm > 0:
        return work.ctas_per_sm
    w = max(work.warps_per_cta, 1)
    return max(1, min(device.blocks_per_sm, device.max_warps_per_sm // w))


FLOOR_CTAS = 2
"""CTAs an SM whose launches the launch floor holds: on an H200 an empty kernel of one or two CTAs
an SM takes the same 2.75 us, and every launch of more takes 79.4 ns more a CTA an SM after those
two, in the first wave and over 64 waves alike (docs/data/cta_launch_h200_2026-11-30.txt)."""


def cta_launches_s(busiest_sm_ctas: int, rates: PipeRates) -> float:
    """The cta term: the busiest SM's CTA launches after the :data:`FLOOR_CTAS` the floor holds,
    ``cta_launch_ns`` each (an empty kernel's time over its floor)."""
    return max(busiest_sm_ctas - FLOOR_CTAS, 0) * rates.cta_launch_ns * 1e-9


def cta_ramp_s(first_round_ctas: int, rates: PipeRates) -> float:
    """The first round's CTA launches on an SM after the second: ``cta_launch_ns`` each (the
    block scheduler hands an SM its CTAs one after another). The launch floor, an empty
    one-CTA kernel's time, holds the first two: on an H200 an empty kernel of one or two CTAs
    an SM takes the same 2.75 us, of 4, 8, 16, 32 CTAs an SM 0.16, 0.49, 1.15, 2.50 us more
    (2, 6, 14, 30 launches of 79.4 ns: 0.16, 0.48, 1.11, 2.38; docs/data/
    cta_launch_h200_2026-11-30.txt). What the round's last CTA waits before it starts, added to
    its critical path."""
    return max(first_round_ctas - FLOOR_CTAS, 0) * rates.cta_launch_ns * 1e-9


def compute_terms(
    work: KernelWork, device: DeviceSpec, rates: PipeRates, mix: LoadMix | None = None
) -> ComputeTerms | None:
    """The :class:`ComputeTerms` of ``work`` on ``device`` (see the module doc); None without
    the device's SM count or clock."""
    if not (device.sm_count and device.sm_clock_mhz):
        return None
    mix = mix or LoadMix()
    hz = device.sm_clock_mhz * 1e6
    ctas = max(int(work.ctas), 1)
    busiest = -(-ctas // device.sm_count)
    resident = min(_resident(device, work), busiest)
    rounds = -(-busiest // resident)
    warps = resident * max(work.warps_per_cta, 1)
    per_sched = -(-warps // SCHEDULERS_PER_SM)
    share = busiest * per_sched / warps  # of one CTA's instructions, on the busiest scheduler
    issue_cycles = share * work.instructions
    pipe_cycles, slowest = 0.0, "fp32"
    for p in _THROUGHPUT_PIPES:
        n = work.pipes.get(p, 0.0)
        rate = rates.lanes_per_clock.get(p, 0.0) / SCHEDULERS_PER_SM  # lanes a clock, a scheduler
        if n <= 0 or rate <= 0:
            continue
        cyc = share * n * WARP / rate
        if cyc > pipe_cycles:
            pipe_cycles, slowest = cyc, p
    other_pipes_cycles = pipe_cycles
    barriers = barrier_cycles(work, busiest, rates)
    if barriers > pipe_cycles:
        pipe_cycles, slowest = barriers, "barrier"
    lat = dict(rates.latency_cycles)
    lat["global"] = mix.per_wait(work.chain.get("global", 0.0)).global_cycles(lat)
    lat["shared"] = lat["shared"] + max(mix.shared_ways - 1.0, 0.0) * rates.shared_wavefront_cycles
    lat["barrier"] = barrier_latency(work, rates)
    detail = {c: n * lat.get(c, 0.0) for c, n in work.chain.items() if n > 0}
    chain_cycles = max(sum(detail.values()), work.critical_instructions)
    # the first round's CTA launch and retirement are in the launch floor (an empty kernel's)
    turnaround_s = (rounds - 1) * rates.cta_turnaround_ns * 1e-9
    ramp_s = cta_ramp_s(min(resident, busiest), rates)
    return ComputeTerms(
        issue_s=issue_cycles / hz,
        pipe_s=pipe_cycles / hz,
        dependency_s=rounds * chain_cycles / hz + turnaround_s + ramp_s,
        cta_s=cta_launches_s(busiest, rates),
        pipe=slowest,
        chain_cycles=chain_cycles,
        rounds=rounds,
        busiest_sm_ctas=busiest,
        warps_per_scheduler=warps / min(warps, SCHEDULERS_PER_SM),
        chain_detail=detail,
        turnaround_s=turnaround_s,
        barrier_s=barriers / hz,
        ramp_s=ramp_s,
        other_pipes_s=other_pipes_cycles / hz,
        phases=rounds * max(work.chain.get("global", 0.0), 1.0),
        counts_from=work.counts_from,
    )


def barrier_latency(work: KernelWork, rates: PipeRates) -> float:
    """A CTA barrier's cycles on the CTA's critical path: the device's barrier latency and
    ``rates.barrier_arrive_cycles`` for each of the CTA's warps, whose passes take their turn
    before it releases (measured on an H200: 24 + 2.2 W fits one CTA's bare barriers within 3
    cycles for W = 4 to 32 warps; data/pipes.toml)."""
    return rates.latency_cycles.get("barrier", 0.0) + rates.barrier_arrive_cycles * max(
        work.warps_per_cta, 1
    )


def barrier_cycles(work: KernelWork, busiest_sm_ctas: int, rates: PipeRates) -> float:
    """The busiest SM's cycles of barrier throughput: every warp's pass through a barrier
    (``pipes["barrier"]``, warp instructions a CTA) takes ``rates.barrier_warp_cycles`` of a
    resource the SM's resident CTAs share, whichever CTA it belongs to: ``busiest_sm_ctas``
    CTAs' passes one after another. 0 without a measured rate."""
    return busiest_sm_ctas * work.pipes.get("barrier", 0.0) * rates.barrier_warp_cycles


def overlap(warps_per_scheduler: float) -> float:
    """The fraction of the smaller of the memory and compute times that other warps hide:
    ``1 - 1 / w`` (none with one warp per scheduler)."""
    return 1.0 - 1.0 / max(warps_per_scheduler, 1.0)


def phase_overlap(warps_per_scheduler: float, phases: float) -> float:
    """:func:`overlap` of a launch whose warps wait for memory ``phases`` times one after
    another (:attr:`ComputeTerms.phases`): ``1 - 1 / min(w, phases)``. A warp computes on what
    its loads bring only once they are all back, so its own memory and compute take turns;
    other warps hide one behind the other only where they are in another phase. The warps of
    a round start together and issue their loads together: with one wait each (a launch of
    one round whose threads load, then compute, then store) every warp waits while the
    memory streams and then computes with the others, nothing hidden (M + K); each wait more,
    or each round more (its CTAs start as the last round's retire, while those compute), lets
    the phases drift apart, a two-stage pipeline of ``phases`` steps, ``1 - 1 / phases`` of the
    smaller hidden, and never more than the warps allow (:func:`overlap`)."""
    return overlap(min(max(warps_per_scheduler, 1.0), max(phases, 1.0)))


def combine(memory_s: float, compute_s: float, floors_s: float, hidden: float) -> float:
    """At least ``floors_s``, and at least the memory and compute times together, overlapping by
    ``hidden`` (:func:`overlap`) of the smaller: the throughput side of a launch's work (with no
    floor), and its whole work at peak, full overlap and the latency side as the floor."""
    both = memory_s + compute_s - hidden * min(memory_s, compute_s)
    return max(both, floors_s, memory_s, compute_s)


def combine_sides(
    latency_side_s: float,
    throughput_side_s: float,
    norm: float = SIDES_NORM,
    latency_s: float = 0.0,
    compute_s: float = 0.0,
    hidden: float = 1.0,
) -> float:
    """A launch's work from its two sides (see the module doc): their ``norm``-norm
    ``(L^p + T^p)^(1/p)`` (``norm`` infinite: their maximum), and at least the Little's-law
    latency ``latency_s`` and the compute ``compute_s`` together, overlapping by ``hidden`` of
    the smaller (a warp's waits and its own instructions in turn)."""
    a, b = max(latency_side_s, 0.0), max(throughput_side_s, 0.0)
    if math.isinf(norm) or a <= 0 or b <= 0:
        both = max(a, b)
    else:
        top = max(a, b)  # scaled, so that tiny times do not underflow
        both = top * ((a / top) ** norm + (b / top) ** norm) ** (1.0 / norm)
    return max(both, combine(latency_s, compute_s, 0.0, hidden))


def amdahl_with_floor(time_s: float, floor_s: float, speedup: float) -> float:
    """What a speedup of a launch's work (``time_s - floor_s``) by ``speedup`` makes of the
    launch: the floor stays. 1 when the work is nothing."""
    work = max(time_s - floor_s, 0.0)
    if work <= 0 or speedup <= 0:
        return 1.0
    if not math.isfinite(speedup):
        return time_s / floor_s if floor_s > 0 else speedup
    return time_s / (floor_s + work / speedup)


LOCAL_LOAD_CYCLES = 1.0
"""The L1's cycles per 128-byte line of a local load (``LDL``) that hits: one, as a global load's
line (:data:`~gpuadvise.model.roofline.L1_CYCLES_PER_LINE`). On an H200 (s14-spill's probe,
benchmarks/local_memory_probe, 2026-11-30, ncu ``--clock-control none``;
docs/data/s14_spill_local_*_h200_2026-11-30.txt) a warp's scattered ``LDL`` of 16 lines
(32 sectors, 99.9% L1 hits) took 4.0 SM cycles: loads are not the local accesses' limit."""

LOCAL_STORE_CYCLES = 5.0
"""The L1's cycles per 128-byte line of a local store (``STL``), measured on an H200 (the same
probe): read-modify-write loops of a local array in the L1 (64 B frames, 99.8% hits for loads
and stores) at 4 and 8 CTAs of 256 threads an SM, their loads' time (the read-only loop's)
taken out, spent 4.87 and 5.07 SM cycles for each line their stores wrote (16 lines a warp
store); per sector (2.45, 2.54) they would make kernels/spills moments_capped's 35,400 spill
stores an SM (one full line each) 347,000 cycles, more than the 278,000 its launch took
(ncu ``sm__cycles_active.avg``); per line, 177,000 + 37,800 for its loads: what it took over
its variant without spills (71,000)."""


@dataclass(frozen=True)
class LocalTraffic:
    """What a launch's local-memory accesses move (:func:`local_traffic`), over the whole
    launch: ``l1_cycles``, the L1 data path's cycles; ``l2_sectors``, the sectors the L2 serves
    for the part of the frames the L1 cannot hold; ``dram_bytes``, what the L2 cannot hold of
    that; ``miss``, the L1's share missed; ``footprint_bytes``, the frames of an SM's resident
    threads."""

    l1_cycles: float
    l2_sectors: float
    dram_bytes: float
    miss: float
    footprint_bytes: float


def local_traffic(
    work: KernelWork,
    device: DeviceSpec,
    frame_bytes: int,
    l1_bytes: float,
    wavefronts: float,
    store_wavefronts: float = 0.0,
) -> LocalTraffic:
    """The traffic of ``wavefronts`` local-memory wavefronts a CTA (``store_wavefronts`` of them
    stores; ``KernelWork.local_wavefronts`` for all of the SASS's, ``spill_wavefronts`` for
    ptxas's spills) of ``work``'s launch. Assumptions:

    - a warp's local access is spread over its lanes word by word (local memory is interleaved
      per 4-byte word across a warp's 32 lanes), so a 32-bit ``LDL``/``STL`` of a warp is one
      128-byte line, one L1 wavefront, a 64-bit one two, a 128-bit one four (the SASS's
      widths), each :data:`LOCAL_LOAD_CYCLES` (a load) or :data:`LOCAL_STORE_CYCLES` (a store)
      of the L1 data path, the path global and shared accesses share (the roofline's ``l1``
      term);
    - the L1 holds the frames as a write-back cache of ``l1_bytes`` (what the unified L1/shared
      array leaves to cached lines beside the resident CTAs' shared memory): the frames of an
      SM's resident threads, ``frame_bytes x`` threads (the stack frame ptxas reports, all of
      it live), fit, or the L1 misses ``1 - l1_bytes / footprint`` of the accesses, each a
      line's four sectors from (or written back to) the L2; of those the L2 misses alike
      against ``device.l2_bytes`` for every SM's frames, which DRAM serves;
    - their latency is not on the chains (the PTX's local accesses are, its spills are not):
      enough warps hide it, which a launch of few warps would not.
    """
    ctas = max(int(work.ctas), 1)
    total = max(wavefronts, 0.0) * ctas
    stores = min(max(store_wavefronts, 0.0) * ctas, total)
    if total <= 0 or frame_bytes <= 0:
        return LocalTraffic(0.0, 0.0, 0.0, 0.0, 0.0)
    sms = max(int(device.sm_count or 1), 1)
    busiest = -(-ctas // sms)
    resident = min(_resident(device, work), busiest)
    threads = resident * max(work.warps_per_cta, 1) * WARP
    footprint = float(frame_bytes) * threads
    miss = max(0.0, 1.0 - max(l1_bytes, 0.0) / footprint)
    sectors = total * 4.0 * miss
    l2_miss = 0.0
    if device.l2_bytes and footprint * sms > device.l2_bytes:
        l2_miss = 1.0 - device.l2_bytes / (footprint * sms)
    cycles = (total - stores) * LOCAL_LOAD_CYCLES + stores * LOCAL_STORE_CYCLES
    return LocalTraffic(cycles, sectors, sectors * 32.0 * l2_miss, miss, footprint)
