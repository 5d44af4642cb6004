"""Adaptive A/B timing (stats.Race / run_race) on synthetic timing sequences: early stops when the
answer is clear, no stop while it is not, caps never exceeded, elimination keeps the best."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import pytest

from gpuadvise.errors import UsageError
from gpuadvise.runner.stats import (
    STOP_REASONS,
    Race,
    RacePolicy,
    RaceResult,
    SpeedupCI,
    decide,
    run_race,
)

FAST = RacePolicy(min_time_s=0.0)


def simulate(
    means_ms: Mapping[str, float],
    noise: float = 0.03,
    seed: int = 0,
    policy: RacePolicy = FAST,
    outliers: float = 0.02,
) -> RaceResult:
    """A race on synthetic timings: arm ``label`` takes ``means_ms[label]`` times a log-normal
    factor, with a 1.5x outlier now and then; the fake clock advances by each sample's time."""
    rng = np.random.default_rng(seed + 1000)
    now = [0.0]

    def one(label: str) -> float:
        ms = means_ms[label] * float(rng.lognormal(0.0, noise))
        if rng.random() < outliers:
            ms *= 1.5
        now[0] += ms * 1e-3
        return ms

    variants = [k for k in means_ms if k != "A"]
    return run_race(policy, "A", variants, one, clock=lambda: now[0], seed=seed)


def _ci(low: float, high: float) -> SpeedupCI:
    return SpeedupCI((low + high) / 2, low, high, 10, 10)


def test_decide_by_hand():
    p = RacePolicy()
    assert decide(_ci(1.05, 1.2), p) == "faster"
    assert decide(_ci(0.5, 0.9), p) == "slower"
    assert decide(_ci(0.99, 1.015), p) == "equivalent"
    assert decide(_ci(1.005, 1.015), p) == "equivalent"  # inside the band: no practical gain
    assert decide(_ci(0.95, 1.1), p) is None  # straddles 1 and leaves the band
    assert decide(_ci(1.01, 1.2), RacePolicy(margin=0.05)) is None  # above 1, not above 1.05
    assert decide(_ci(1.06, 1.2), RacePolicy(margin=0.05)) == "faster"


def test_a_clearly_faster_variant_stops_at_the_first_look():
    r = simulate({"A": 1.0, "B": 0.5})
    assert r.reasons == {"B": "faster"}
    assert r.rounds == FAST.min_samples and r.looks == 1
    assert len(r.samples_ms["A"]) == len(r.samples_ms["B"]) == r.rounds


def test_a_clearly_slower_variant_stops_early():
    r = simulate({"A": 1.0, "B": 1.6})
    assert r.reasons == {"B": "slower"} and r.rounds <= 13


def test_an_equal_variant_is_called_equivalent():
    r = simulate({"A": 1.0, "B": 1.0}, noise=0.01, outliers=0.0)
    assert r.reasons == {"B": "equivalent"}
    assert r.rounds < 100


def test_an_ambiguous_variant_keeps_going_until_the_sample_cap():
    # 2.5% faster with 10% noise: neither inside the +-2% band nor clear of 1 at 60 samples
    p = RacePolicy(min_time_s=0.0, max_samples=60)
    r = simulate({"A": 1.0, "B": 1 / 1.025}, noise=0.10, policy=p)
    assert r.reasons == {"B": "max-samples"}
    assert r.rounds == 60 and len(r.samples_ms["B"]) == 60  # never past the cap
    # with more samples allowed the same race decides: the cap, not the rule, stopped it
    r = simulate({"A": 1.0, "B": 1 / 1.025}, noise=0.10, policy=RacePolicy(min_time_s=0.0))
    assert r.reasons["B"] in ("faster", "max-samples") and r.rounds > 60


def test_the_time_cap_is_never_exceeded_by_more_than_one_round():
    p = RacePolicy(min_time_s=0.0, max_time_s=0.5)
    for means in ({"A": 10.0, "B": 10.0 / 1.025}, {"A": 10.0, "B": 9.9, "C": 9.8}):
        r = simulate(means, noise=0.10, policy=p)
        one_round_s = sum(means.values()) * 1.5e-3 * 1.2  # worst sample: an outlier
        assert r.elapsed_s <= p.max_time_s + one_round_s
        assert set(r.reasons.values()) == {"max-time"}


def test_min_samples_and_min_time_come_before_any_decision():
    p = RacePolicy(min_samples=25, min_time_s=0.2)
    r = simulate({"A": 1.0, "B": 0.5}, policy=p)  # 1.5 ms of fake time a round
    assert r.reasons == {"B": "faster"}
    assert r.rounds >= 25 and r.elapsed_s >= 0.2


def test_a_null_variant_is_rarely_called_faster_or_slower():
    """A against itself: the repeated looks keep false decisions near the nominal 5%."""
    got = Counter(simulate({"A": 1.0, "B": 1.0}, seed=s).reasons["B"] for s in range(120))
    assert got["faster"] + got["slower"] <= 12  # 10%: a loose bound of the ~5% simulated
    assert got["equivalent"] >= 100


def test_elimination_keeps_the_true_best_over_seeds():
    means = {"A": 1.0, "N=4": 0.80, "N=8": 0.84, "N=16": 0.95, "N=32": 1.10}
    kept, rounds, timed = 0, [], Counter()
    for seed in range(60):
        r = simulate(means, noise=0.05, seed=seed)
        medians = {k: float(np.median(v)) for k, v in r.samples_ms.items() if k != "A"}
        kept += min(medians, key=lambda k: medians[k]) == "N=4"
        assert r.reasons["N=4"] in ("faster", "tied", "max-samples")
        assert r.reasons["N=32"] in ("slower", "eliminated")
        rounds.append(r.rounds)
        timed.update({k: len(v) for k, v in r.samples_ms.items()})
    assert kept >= 58
    # the losers stop early: far fewer samples than the baseline and the winner
    assert timed["N=32"] < timed["N=4"] / 2 and timed["N=16"] < timed["N=4"]
    assert float(np.median(rounds)) <= 40


def test_two_equally_good_variants_stop_as_tied():
    r = simulate({"A": 1.0, "B": 0.7, "C": 0.7}, noise=0.01, outliers=0.0)
    assert sorted(r.reasons.values()) in (["faster", "tied"], ["eliminated", "faster"])
    assert r.rounds < 200


def test_race_accounting():
    race = Race(FAST, "A", ["B", "C"])
    assert race.to_time() == ["A", "B", "C"] and race.active == ["B", "C"]
    race.stop("B", "eliminated")
    race.stop("B", "faster")  # the first reason stays
    assert race.reasons == {"B": "eliminated"} and race.to_time() == ["A", "C"]
    race.stop("C", "max-time")
    assert race.done and race.to_time() == []
    with pytest.raises(ValueError):
        race.record("Z", 1.0)
    with pytest.raises(ValueError):
        race.record("A", float("nan"))
    with pytest.raises(ValueError):
        Race(FAST, "A", [])
    with pytest.raises(ValueError):
        Race(FAST, "A", ["B", "A"])
    assert set(STOP_REASONS) >= {"faster", "slower", "equivalent", "eliminated", "tied"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"look_confidence": 1.0},
        {"margin": -0.1},
        {"equivalence": 0.0},
        {"min_samples": 1},
        {"max_samples": 5},
        {"max_time_s": 0.0},
        {"min_time_s": 2.0, "max_time_s": 1.0},
        {"look_growth": 1.0},
        {"n_boot": 10},
    ],
)
def test_policy_rejects_bad_settings(kwargs):
    with pytest.raises(UsageError):
        RacePolicy(**kwargs)
