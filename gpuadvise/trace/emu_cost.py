"""What an emulation costs in the emulator's CPU, from counts (issue 31: the trace stage's time
bounded by what it costs).

The emulator (:mod:`gpuadvise.ptx.emulator`) runs a batch of CTAs a step at a time: a step runs
one basic block's instructions for the warps at it, each instruction a few numpy calls over the
batch's lanes. So a batch's CPU is a fixed price per instruction a step runs (the numpy calls'
own overhead, whatever the lanes), a price per lane those instructions touch, one per warp access
recorded and one per step (:func:`emulator_cost`). The default sample's bound in warp accesses
plus warp steps (:data:`gpuadvise.trace.emulate.DEFAULT_SAMPLE_COST`) does not see a step's
length: HeCBench binomialOptions' CTA runs 76,215 instructions in its 8,327 steps, 1.9 CPU-s
alone, and its 20 CTAs took 9.4 CPU-s within that bound. The weights are fitted to the batches
of the corpus's costliest traces (docs/data/s21-s21-cost.md shows the fit); the counts are the
kernel's, so the bound that reads them is deterministic: the same CTAs on every machine and at
every load.

A pure model: counts in, costs out (:class:`CtaCost` is the default sample's first CTA, which
runs alone).
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_OP = 11_000
"""The emulator's cost of one instruction a step runs, whatever its lanes (ns of CPU)."""
NS_PER_LANE_OP = 0
"""... of each lane an instruction runs over (the batch's lanes)."""
NS_PER_RECORD = 4_500
"""... of each warp access recorded."""
NS_PER_STEP = 136_000
"""... of each step (a block run for a group of warps: its scheduling)."""

DEFAULT_SAMPLE_EMU_NS = 2_500_000_000
"""The default sample's emulation (its first CTA alone, then its batches) costs at most about
this much (:func:`emulator_cost`, ns of CPU on the calibration machine): a first wave that would
cost more keeps the CTAs it affords (:func:`cpu_plan`), at least the first."""

L2_PROBE_EMU_NS = 500_000_000
"""The L2 model's probe of the middle of the grid (:func:`gpuadvise.analyze.models._with_interior`)
costs at most about this much: its share of the trace stage's bound, beside
:data:`DEFAULT_SAMPLE_EMU_NS`."""


@dataclass(frozen=True)
class CtaCost:
    """What the default sample's first CTA, run alone, made the emulator do: ``ops`` the
    instructions its steps ran (a block's length a step), ``lanes`` its lanes (its warps times
    32), ``records`` its warp accesses, ``steps`` its steps; ``per_batch`` the most CTAs a batch
    of this kernel holds (the registers' memory)."""

    ops: int
    lanes: int
    records: int
    steps: int
    per_batch: int

    def batch_ns(self, ctas: int) -> int:
        """A batch of ``ctas`` such CTAs, stepping together (the first CTA's steps and
        instructions, its lanes and records times ``ctas``)."""
        return emulator_cost(
            self.ops, self.ops * self.lanes * ctas, self.records * ctas, self.steps
        )


def emulator_cost(ops: int, lane_ops: int, records: int, steps: int) -> int:
    """The emulator's CPU (ns on the calibration machine) for ``ops`` instructions run by its
    steps over ``lane_ops`` lanes in all, ``records`` warp accesses and ``steps`` steps."""
    return (
        NS_PER_OP * int(ops)
        + NS_PER_LANE_OP * int(lane_ops)
        + NS_PER_RECORD * int(records)
        + NS_PER_STEP * int(steps)
    )


def sample_batches(ctas: int, size: int) -> list[int]:
    """The batches the default sample runs ``ctas`` CTAs in: the first CTA alone, then batches
    of ``size``."""
    if ctas <= 0:
        return []
    rest = ctas - 1
    size = max(1, size)
    return [1] + [size] * (rest // size) + ([rest % size] if rest % size else [])


def sample_ns(unit: CtaCost, ctas: int, size: int) -> int:
    """The default sample's emulation of ``ctas`` CTAs, the first alone, then batches of
    ``size``."""
    return sum(unit.batch_ns(k) for k in sample_batches(ctas, size))


def cpu_plan(
    unit: CtaCost,
    limit_ns: int,
    planned: int,
    size: int,
    quarter: int,
    least: tuple[int, int] = (0, 1),
) -> tuple[int, int] | None:
    """The default sample within ``limit_ns``: None when its ``planned`` CTAs in batches of
    ``size`` fit (nothing changes), else (CTAs, batch size): the most CTAs (at least the first)
    that batches of a quarter of them, or of ``quarter`` CTAs when more (the CTAs whose trace
    fills a quarter of the sample's bytes: fewer, larger batches, each instruction run over
    more lanes at once), run within it. ``least`` (CTAs, stretch): fewer than that many CTAs
    may cost up to ``stretch`` times the limit, to keep up to that many (the access cost's own
    :data:`~gpuadvise.trace.emulate.MIN_SAMPLE_CTAS` rule: HeCBench clenergy's execution model
    needs 32 CTAs)."""
    if limit_ns <= 0 or planned <= 1 or sample_ns(unit, planned, size) <= limit_ns:
        return None

    def size_of(f: int) -> int:
        larger = max(1, min(unit.per_batch, max(-(-f // 4), quarter)))
        # the planned CTAs never in smaller batches than planned (a whole wave's: per_batch)
        return max(larger, size) if f == planned else larger

    def most(top: int, limit: int) -> int:
        # the most (batches of at least a quarter: a handful each, the wave a few thousand CTAs)
        for f in range(top, 1, -1):
            if sample_ns(unit, f, size_of(f)) <= limit:
                return f
        return 1  # the first CTA, run anyway

    f = most(planned, limit_ns)
    ctas, stretch = least
    if f < min(planned, ctas):
        f = max(f, most(min(planned, ctas), stretch * limit_ns))
    return f, size_of(f)


def probe_ctas_by_cpu(unit: CtaCost, limit_ns: int, most: int) -> int:
    """How many of ``most`` chosen CTAs (run in batches of ``per_batch``) fit in ``limit_ns``:
    0 when not one does."""
    n = 0
    spent = 0
    while n < most:
        k = min(unit.per_batch, most - n)
        cost = unit.batch_ns(k)
        if spent + cost > limit_ns:
            # the last batch in part: the CTAs its share affords
            lo = 0
            for j in range(k, 0, -1):
                if spent + unit.batch_ns(j) <= limit_ns:
                    lo = j
                    break
            return n + lo
        spent += cost
        n += k
    return n
