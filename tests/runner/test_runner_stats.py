"""Timing statistics: hand-computed summaries, the stopping rule, bootstrap intervals, U test."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from gpuadvise.errors import UsageError
from gpuadvise.runner import stats
from gpuadvise.runner.stats import (
    AdaptivePolicy,
    SpeedupCI,
    TimingStats,
    mann_whitney_u,
    rel_noise,
    speedup_ci,
    summarize,
)

# --- summarize / rel_noise -------------------------------------------------------------------


def test_summarize_hand_computed():
    # sorted: 1 2 3 4 100; linear-interpolated quartiles at positions 1 and 3: 2 and 4
    s = summarize([3.0, 1.0, 100.0, 2.0, 4.0])
    assert s.n == 5
    assert s.median_ms == 3.0
    assert s.iqr_ms == 2.0
    assert s.min_ms == 1.0
    assert s.max_ms == 100.0
    assert s.mean_ms == 22.0
    assert s.rel_noise == pytest.approx(1.2533 * (2.0 / 1.349) / math.sqrt(5) / 3.0)
    assert s.samples_ms == (3.0, 1.0, 100.0, 2.0, 4.0)  # in the order they were taken
    assert s.throttled == 0


def test_summarize_even_count_and_quartile_interpolation():
    # 8 samples: median (4+5)/2; quartile positions 1.75 and 5.25 -> 2.75 and 6.25
    s = summarize(np.arange(1.0, 9.0))
    assert s.median_ms == 4.5
    assert s.iqr_ms == pytest.approx(3.5)


def test_summarize_throttled_mask_is_counted():
    s = summarize([1.0, 1.1, 1.2, 5.0], throttled_mask=[False, False, False, True])
    assert s.throttled == 1
    assert s.n == 4  # flagged samples stay in the statistics
    with pytest.raises(ValueError, match="one per sample"):
        summarize([1.0, 2.0], throttled_mask=[True])


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [1.0, float("inf")]])
def test_summarize_rejects_empty_and_non_finite(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_timing_stats_json_round_trip():
    s = summarize([0.5, 0.25, 0.75, 0.5], throttled_mask=[True, False, False, False])
    back = TimingStats.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s


def test_rel_noise_edge_cases():
    assert rel_noise([]) == math.inf
    assert rel_noise([1.0]) == math.inf
    assert rel_noise([0.0, 0.0, 0.0]) == math.inf  # non-positive median
    assert rel_noise([2.0] * 50) == 0.0  # quantized timer, all equal: the median is exact


def test_rel_noise_matches_the_spread_of_medians_for_normal_samples():
    # The formula is the asymptotic standard error of the median; check it against simulation.
    rng = np.random.default_rng(7)
    runs = rng.normal(10.0, 0.2, size=(4000, 201))
    empirical = np.median(runs, axis=1).std() / 10.0
    predicted = np.mean([rel_noise(r) for r in runs[:400]])
    assert predicted == pytest.approx(empirical, rel=0.1)
    assert predicted == pytest.approx(1.2533 * 0.02 / math.sqrt(201), rel=0.1)


def test_rel_noise_is_robust_to_outliers():
    rng = np.random.default_rng(3)
    clean = rng.normal(1.0, 0.01, 1000)
    dirty = clean.copy()
    dirty[::50] = 25.0  # 2 % of launches preempted
    assert rel_noise(dirty) == pytest.approx(rel_noise(clean), rel=0.1)
    # the standard deviation would have exploded by a factor of hundreds
    assert dirty.std() > 100 * clean.std()


# --- AdaptivePolicy ---------------------------------------------------------------------------

QUIET = [1.0, 1.001, 0.999, 1.0005, 0.9995] * 4  # 20 samples, rel_noise ~ 1.5e-4
NOISY = list(np.random.default_rng(0).normal(1.0, 0.3, 20))  # rel_noise ~ 0.08


def test_policy_defaults():
    p = AdaptivePolicy()
    assert (p.min_samples, p.min_time_s, p.max_time_s) == (10, 0.5, 15.0)
    assert (p.target_rel_noise, p.max_samples) == (0.005, 100_000)


def test_policy_stops_when_quiet_enough_and_long_enough():
    p = AdaptivePolicy()
    assert rel_noise(QUIET) < 0.005 < rel_noise(NOISY)
    assert p.should_stop(QUIET, 0.5)
    assert p.should_stop(QUIET[:10], 0.6)


def test_policy_waits_for_min_samples_and_min_time():
    p = AdaptivePolicy()
    assert not p.should_stop(QUIET[:9], 10.0)  # too few samples
    assert not p.should_stop(QUIET, 0.49)  # too little time


def test_policy_keeps_going_while_noisy_then_gives_up_at_the_budget():
    p = AdaptivePolicy()
    assert not p.should_stop(NOISY, 14.99)
    assert p.should_stop(NOISY, 15.0)
    assert p.should_stop(NOISY[:3], 15.0)  # the time budget wins over min_samples
    small = AdaptivePolicy(max_samples=20)
    assert small.should_stop(NOISY, 0.01)  # the sample budget too


def test_policy_accepts_numpy_arrays():
    assert AdaptivePolicy().should_stop(np.asarray(QUIET), 1.0)


def test_policy_simulated_loop_stops_where_the_noise_target_is_met():
    # 1 ms kernel with 20 % noise: the median is known to 0.5 % once
    # 1.2533 * 0.2 / sqrt(n) < 0.005, i.e. n > ~2510, well past min_time (500 samples).
    rng = np.random.default_rng(11)
    p = AdaptivePolicy()
    samples: list[float] = []
    while not p.should_stop(samples, len(samples) * 1e-3):
        samples.append(float(rng.normal(1.0, 0.2)))
    assert 2100 < len(samples) < 3000
    # a quiet kernel stops as soon as min_time_s has passed
    samples = []
    while not p.should_stop(samples, len(samples) * 1e-3):
        samples.append(float(rng.normal(1.0, 0.001)))
    assert len(samples) == 500


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_samples": 1},
        {"max_samples": 5},
        {"min_time_s": -1.0},
        {"max_time_s": 0.1},
        {"target_rel_noise": 0.0},
    ],
)
def test_policy_rejects_bad_settings(kwargs):
    with pytest.raises(UsageError):
        AdaptivePolicy(**kwargs)


# --- speedup_ci -------------------------------------------------------------------------------


def _runs(rng, median_ms, noise, n):
    return rng.normal(median_ms, noise * median_ms, n)


def test_ten_percent_slowdown_with_one_percent_noise_excludes_one():
    rng = np.random.default_rng(1)
    a = _runs(rng, 1.0, 0.01, 200)
    b = _runs(rng, 1.1, 0.01, 200)
    ci = speedup_ci(a, b)
    assert ci.speedup == pytest.approx(1 / 1.1, rel=0.005)
    assert ci.low < ci.speedup < ci.high < 1.0
    assert ci.significant
    assert (ci.n_a, ci.n_b, ci.confidence) == (200, 200, 0.95)
    # and the other way round: a speedup above 1
    ci = speedup_ci(b, a)
    assert 1.0 < ci.low < ci.speedup < ci.high
    assert ci.speedup == pytest.approx(1.1, rel=0.005)


def test_a_against_a_contains_one():
    rng = np.random.default_rng(2)
    a = _runs(rng, 2.0, 0.01, 300)
    ci = speedup_ci(a, a)
    assert ci.speedup == 1.0
    assert ci.low < 1.0 < ci.high
    assert not ci.significant
    ci = speedup_ci(a, _runs(rng, 2.0, 0.01, 300))
    assert ci.low < 1.0 < ci.high


def test_interval_coverage_is_near_nominal():
    # Same distribution on both sides: the 90 % interval should contain 1 about 90 % of the time.
    rng = np.random.default_rng(5)
    contained = 0
    trials = 300
    for _ in range(trials):
        ci = speedup_ci(rng.gamma(20.0, 0.05, 150), rng.gamma(20.0, 0.05, 150), confidence=0.9)
        contained += ci.low <= 1.0 <= ci.high
    assert 0.83 <= contained / trials <= 0.97


def test_speedup_ci_is_deterministic_and_seeded():
    rng = np.random.default_rng(4)
    a, b = _runs(rng, 1.0, 0.05, 50), _runs(rng, 1.0, 0.05, 50)
    assert speedup_ci(a, b) == speedup_ci(a, b)
    assert speedup_ci(a, b, seed=1) != speedup_ci(a, b, seed=2)
    wide = speedup_ci(a, b, confidence=0.99)
    narrow = speedup_ci(a, b, confidence=0.5)
    assert wide.low < narrow.low <= narrow.high < wide.high


def test_speedup_ci_is_fast_for_large_runs():
    rng = np.random.default_rng(6)
    a, b = _runs(rng, 1.0, 0.02, 1000), _runs(rng, 0.9, 0.02, 1000)
    t0 = time.perf_counter()
    speedup_ci(a, b, n_boot=4000)
    big = _runs(rng, 1.0, 0.02, 100_000)
    speedup_ci(big, big, n_boot=4000)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 8, 15])
def test_bootstrap_medians_match_plain_resampling(n):
    # The order-statistic shortcut must draw from the same distribution as resampling.
    rng = np.random.default_rng(n)
    data = np.sort(rng.exponential(1.0, n))
    naive = np.median(data[rng.integers(0, n, size=(100_000, n))], axis=1)
    fast = stats._boot_medians(data, 100_000, np.random.default_rng(99))
    values = np.unique(np.concatenate([naive, fast]))
    p_naive = np.searchsorted(np.sort(naive), values, side="right") / naive.size
    p_fast = np.searchsorted(np.sort(fast), values, side="right") / fast.size
    assert np.max(np.abs(p_naive - p_fast)) < 0.01  # CDFs agree (sampling error ~0.003)


def test_speedup_ci_validation():
    with pytest.raises(UsageError):
        speedup_ci([1.0], [1.0], confidence=1.0)
    with pytest.raises(UsageError):
        speedup_ci([1.0], [1.0], n_boot=0)
    with pytest.raises(ValueError):
        speedup_ci([], [1.0])
    with pytest.raises(ValueError):
        speedup_ci([0.0, 0.0], [1.0])


def test_speedup_ci_json_round_trip():
    ci = speedup_ci([1.0, 1.1, 0.9], [0.5, 0.6, 0.55])
    assert SpeedupCI.from_dict(json.loads(json.dumps(ci.to_dict()))) == ci


# --- mann_whitney_u ---------------------------------------------------------------------------


def test_mann_whitney_u_hand_computed_no_ties():
    # U = 0 (every a below every b); mu = 4.5, var = 3*3/12 * 7 = 5.25;
    # z = (9 - 4.5 - 0.5) / sqrt(5.25) = 1.745743; p = erfc(z / sqrt 2) = 0.0808556
    u, p = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert u == 0.0
    assert p == pytest.approx(0.0808556, abs=1e-6)


def test_mann_whitney_u_hand_computed_with_ties():
    # pooled 1 2 2 2 3 4 5: ranks 1, 3, 3, 3, 5, 6, 7; R_a = 1 + 3 + 3 + 5 = 12; U = 12 - 10 = 2
    # tie term (27 - 3) / (7 * 6) = 4/7; var = 4*3/12 * (8 - 4/7) = 52/7; mu = 6
    # z = (10 - 6 - 0.5) / sqrt(52/7) = 1.284139; p = 0.199090
    u, p = mann_whitney_u([1.0, 2.0, 2.0, 3.0], [2.0, 4.0, 5.0])
    assert u == 2.0
    assert p == pytest.approx(0.199090, abs=1e-6)
    u2, p2 = mann_whitney_u([2.0, 4.0, 5.0], [1.0, 2.0, 2.0, 3.0])
    assert u2 == 4 * 3 - 2.0
    assert p2 == pytest.approx(p)


def test_mann_whitney_u_extremes():
    assert mann_whitney_u([1.0] * 5, [1.0] * 7) == (17.5, 1.0)  # all tied
    rng = np.random.default_rng(8)
    _, p = mann_whitney_u(_runs(rng, 1.0, 0.01, 100), _runs(rng, 1.05, 0.01, 100))
    assert p < 1e-20
    _, p = mann_whitney_u(_runs(rng, 1.0, 0.01, 100), _runs(rng, 1.0, 0.01, 100))
    assert p > 0.01


def test_mann_whitney_u_false_positive_rate():
    rng = np.random.default_rng(9)
    ps = [mann_whitney_u(rng.normal(0, 1, 40), rng.normal(0, 1, 40))[1] for _ in range(1000)]
    assert 0.03 <= np.mean(np.asarray(ps) < 0.05) <= 0.07


def test_mann_whitney_u_against_scipy():
    sps = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(10)
    for n1, n2 in [(5, 7), (30, 30), (200, 150)]:
        a = np.round(rng.normal(1.0, 0.05, n1), 2)  # rounding makes ties
        b = np.round(rng.normal(1.02, 0.05, n2), 2)
        ref = sps.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic")
        u, p = mann_whitney_u(a, b)
        assert u == pytest.approx(ref.statistic)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
