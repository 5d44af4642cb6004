"""The L2's serial time for one source line's global atomics over a launch (GA208's terms), and
how it joins the launch model's time. Pure: numbers in, numbers out; no I/O.

Four serial terms, the largest of which the L2 cannot shorten however many SMs issue them:

- one address's updates, applied one at a time (an H200 measured 1.76 ns an update for a float
  add on one word, 0.73 ns for an integer add: ``benchmarks/global_atomics_probe``);
- the warp-level requests reaching the 128-byte lines of one 512-byte region, about 1 ns each
  (:data:`REQUEST_NS`, :data:`ONE_LINE_NS`);
- that region's steps: each request counted as its most lanes on one word (lanes on one word
  applied one after another, distinct words together);
- the requests of one 1 KB unit, by the lines and sectors each updates there
  (:mod:`gpuadvise.model.atomic_units`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuadvise.model.roofline import LaunchTimes

__all__ = [
    "AFTER_LOOP_SHARE",
    "ONE_LINE_NS",
    "REGION_BYTES",
    "REQUEST_NS",
    "UPDATE_NS",
    "SerialAtomics",
    "update_ns",
    "after_loops_s",
    "with_serial_s",
]

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


AFTER_LOOP_SHARE = 0.45
"""The share of a one-wave launch's serial flushes that adds to its loops where every CTA
flushes after its loop (the rest hides under the CTAs still looping): an H200 (s11-hist probe,
``loop_flush``, 2026-11-30), 1,056 CTAs streaming 2^24 floats then each adding 768 bins: loop
33.8 us, flushes alone 16.3, both 41.4 (47% of the flushes added); 3,072 bins: 32.8, 25.1, 43.5
(43%)."""


def update_ns(opcode: str) -> float:
    """The L2's time per update of one address for a PTX atomic ``opcode``."""
    mods = opcode.split(".")[1:]
    for m in reversed(mods):
        if m in UPDATE_NS:
            return UPDATE_NS[m]
    return UPDATE_NS["int"]


@dataclass(frozen=True)
class SerialAtomics:
    """A source line's atomics as the L2 takes them in turn over the launch: the hot address's
    updates (``lanes`` of a warp-level request on it), the hot region's requests
    (:data:`REGION_BYTES`), the same with one update per CTA of one wave (one request per line
    and CTA), the L2's time per update and per request, the hot region's steps (after a CTA
    reduction one per request), and the hot 1 KB unit's serial time before (``unit_s``) and
    after (``cta_unit_s``: the CTAs' flushes, or one update per CTA)."""

    updates: float
    lanes: float
    line_requests: float
    cta_updates: float
    cta_line_requests: float
    update_s: float
    line_s: float
    line_scaled: bool
    steps: float = 0.0
    unit_s: float = 0.0
    cta_unit_s: float = 0.0

    def time_s(
        self, updates: float, line_requests: float, steps: float = 0.0, unit_s: float = 0.0
    ) -> float:
        """The largest of the address's, the region's, its steps' and the unit's serial times."""
        return max(
            updates * self.update_s, line_requests * self.line_s, steps * self.update_s, unit_s
        )

    @property
    def serial_s(self) -> float:
        return self.time_s(self.updates, self.line_requests, self.steps, self.unit_s)

    @property
    def cta_serial_s(self) -> float:
        return self.time_s(
            self.cta_updates, self.cta_line_requests, self.cta_line_requests, self.cta_unit_s
        )

    @property
    def by_unit(self) -> bool:
        """The hot unit's requests take the L2 longer than every other term."""
        return self.unit_s > self.time_s(self.updates, self.line_requests, self.steps)

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


def after_loops_s(times: LaunchTimes, serial_s: float) -> float:
    """A one-wave launch's time whose serial atomics follow every CTA's loop: its time plus
    :data:`AFTER_LOOP_SHARE` of them, at least :func:`with_serial_s`."""
    return max(times.time_s + AFTER_LOOP_SHARE * serial_s, with_serial_s(times, serial_s))
