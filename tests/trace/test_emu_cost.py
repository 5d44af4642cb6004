"""The emulator's CPU cost from counts (gpuadvise.trace.emu_cost): the default sample's plan
within its bound and the L2 probe's CTAs within its share."""

from __future__ import annotations

import pytest

from gpuadvise.trace import emu_cost
from gpuadvise.trace.emu_cost import CtaCost, cpu_plan, probe_ctas_by_cpu, sample_batches


@pytest.fixture
def weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """Round weights: an instruction 10, a lane of one 1, a record 2, a step 3."""
    for name, ns in (("NS_PER_OP", 10), ("NS_PER_LANE_OP", 1), ("NS_PER_RECORD", 2)):
        monkeypatch.setattr(emu_cost, name, ns)
    monkeypatch.setattr(emu_cost, "NS_PER_STEP", 3)


def test_a_batch_costs_its_steps_once_and_its_lanes_and_records_per_cta(weights: None) -> None:
    unit = CtaCost(ops=100, lanes=64, records=50, steps=20, per_batch=16)
    assert emu_cost.emulator_cost(100, 6400, 50, 20) == 1000 + 6400 + 100 + 60
    assert unit.batch_ns(1) == 7560
    # 4 CTAs stepping together: the instructions and steps once, lanes and records 4 times
    assert unit.batch_ns(4) == 1000 + 4 * 6400 + 4 * 100 + 60


def test_the_sample_runs_its_first_cta_alone_then_batches() -> None:
    assert sample_batches(1, 8) == [1]
    assert sample_batches(10, 4) == [1, 4, 4, 1]
    assert sample_batches(9, 4) == [1, 4, 4]
    assert sample_batches(0, 4) == []


def test_a_sample_within_the_bound_is_left_as_planned(weights: None) -> None:
    unit = CtaCost(ops=1000, lanes=32, records=0, steps=0, per_batch=64)
    ten = emu_cost.sample_ns(unit, 10, 3)
    assert cpu_plan(unit, ten, 10, 3, 1) is None  # within: nothing changes
    assert cpu_plan(unit, 0, 10, 3, 1) is None  # no bound
    assert cpu_plan(unit, 1, 1, 3, 1) is None  # the first CTA runs anyway


def test_an_instruction_bound_sample_keeps_more_ctas_in_fewer_batches(weights: None) -> None:
    """Where each instruction's own price dominates (binomialOptions: a CTA alone costs what
    5 do), the plan runs the CTAs after the first in batches as large as a quarter of the
    sample's bytes allows, not a quarter of the CTAs: more CTAs within the same bound."""
    unit = CtaCost(ops=10_000, lanes=1, records=0, steps=0, per_batch=64)
    one = unit.batch_ns(1)
    assert one == 110_000 and unit.batch_ns(16) == 260_000
    # 20 CTAs in batches of 5: 5 batches, 700,000, over a bound of 4 CTAs' cost
    assert emu_cost.sample_ns(unit, 20, 5) == 700_000
    # batches of up to 16 (a quarter of the bytes): the first, then one batch of 16 (a 17th
    # CTA would take a third batch)
    plan = cpu_plan(unit, 4 * one, 20, 5, 16)
    assert plan == (17, 16)
    assert emu_cost.sample_ns(unit, *plan) == 370_000
    # without room for a second batch, the first CTA alone
    assert cpu_plan(unit, int(1.5 * one), 20, 5, 16) == (1, 16)


def test_a_lane_bound_sample_keeps_the_ctas_it_affords(weights: None) -> None:
    unit = CtaCost(ops=10, lanes=1024, records=0, steps=0, per_batch=64)
    # a CTA costs 10 + 10,240: 8 CTAs' worth of bound keeps 8 or fewer
    ctas, size = cpu_plan(unit, 8 * unit.batch_ns(1), 100, 25, 1) or (0, 0)
    assert ctas in (7, 8) and size == 2
    assert emu_cost.sample_ns(unit, ctas, size) <= 8 * unit.batch_ns(1)


def test_the_probe_traces_the_ctas_its_share_affords(weights: None) -> None:
    unit = CtaCost(ops=10, lanes=1024, records=0, steps=0, per_batch=4)
    per = unit.batch_ns(1)
    assert probe_ctas_by_cpu(unit, 100 * per, 64) == 64
    # batches of 4: two whole (8 CTAs), then 2 of the third
    assert probe_ctas_by_cpu(unit, unit.batch_ns(4) * 2 + unit.batch_ns(2), 64) == 10
    assert probe_ctas_by_cpu(unit, per - 1, 64) == 0


def test_below_the_least_ctas_the_bound_stretches(weights: None) -> None:
    """Fewer than ``least`` CTAs may cost up to its stretch times the bound, to keep up to that
    many (clenergy's 32), never more than planned."""
    unit = CtaCost(ops=10_000, lanes=1, records=0, steps=0, per_batch=64)
    one = unit.batch_ns(1)
    assert cpu_plan(unit, int(1.5 * one), 20, 5, 16) == (1, 16)
    # 4 x 1.5 CTAs' cost (660,000): the first, a batch of 16, one of 3 (500,000)
    assert cpu_plan(unit, int(1.5 * one), 20, 5, 16, (32, 4)) == (20, 16)
    assert cpu_plan(unit, int(1.5 * one), 12, 3, 16, (32, 4)) == (12, 16)
    # a larger sample is cut to ``least`` CTAs by the stretched bound, not below
    assert cpu_plan(unit, int(1.5 * one), 40, 10, 16, (8, 4)) == (8, 16)
    assert cpu_plan(unit, int(1.5 * one), 40, 10, 16) == (1, 16)


def test_a_whole_wave_keeps_its_batches_when_they_are_larger(weights: None) -> None:
    """A wave kept whole runs in batches of per_batch: the plan never splits the planned CTAs
    into smaller batches (HeCBench chemv: 12 CTAs, the first then 11 at once, not 6 and 5)."""
    unit = CtaCost(ops=10_000, lanes=1, records=0, steps=0, per_batch=2048)
    one = unit.batch_ns(1)
    assert emu_cost.sample_ns(unit, 12, 2048) == one + unit.batch_ns(11)
    assert cpu_plan(unit, int(1.5 * one), 12, 2048, 6, (32, 4)) == (12, 2048)
