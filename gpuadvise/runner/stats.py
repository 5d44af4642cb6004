"""Timing statistics: robust summaries, an adaptive stopping rule, speedup intervals, a rank test.

GPU kernel timings are right-skewed with occasional outliers (clock changes, a context switch, an
interrupt on the host that launched them), so everything here is built on the median and the
interquartile range rather than on the mean and the standard deviation:

- :func:`summarize` gives the median, IQR and friends of a run (:class:`TimingStats`).
- :func:`rel_noise` estimates the relative standard error of that median.
- :class:`AdaptivePolicy` decides when the worker has timed a kernel long enough.
- :func:`speedup_ci` bootstraps a confidence interval of the ratio of two medians.
- :func:`mann_whitney_u` tests whether two runs come from one distribution (performance gating).
- :class:`RacePolicy`, :class:`Race` and :func:`run_race` time a baseline against one or more
  variants in interleaved rounds and stop each variant as soon as its speedup interval decides the
  question (faster, slower, practically equivalent) or it is out of the race for the best.

Pure numpy and :mod:`math`; no scipy, no I/O (the timing itself is a callback).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from gpuadvise.errors import UsageError

__all__ = [
    "STOP_REASONS",
    "AdaptivePolicy",
    "Race",
    "RacePolicy",
    "RaceResult",
    "SpeedupCI",
    "StopReason",
    "TimingStats",
    "decide",
    "mann_whitney_u",
    "rel_noise",
    "run_race",
    "speedup_ci",
    "summarize",
]

# sqrt(pi / 2): the asymptotic standard error of the median of a normal sample is this times
# sigma / sqrt(n) (the mean's is sigma / sqrt(n)).
_MEDIAN_SE_FACTOR = 1.2533
# The IQR of a normal distribution is 1.349 sigma, so IQR / 1.349 estimates sigma robustly.
_IQR_PER_SIGMA = 1.349

ArrayLike = Sequence[float] | npt.NDArray[Any]


def _as_samples(samples: ArrayLike, what: str = "samples") -> npt.NDArray[np.float64]:
    arr = np.asarray(samples, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise ValueError(f"{what}: no samples")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: samples must be finite")
    return arr


def _iqr(arr: npt.NDArray[np.float64]) -> float:
    q1, q3 = np.percentile(arr, [25.0, 75.0])
    return float(q3 - q1)


@dataclass(frozen=True)
class TimingStats:
    """A summary of one kernel's timings, in milliseconds.

    ``rel_noise`` is :func:`rel_noise` of the samples. ``throttled`` counts the samples flagged by
    the monitor (thermal or power throttling, clocks below the locked value) while they ran; they
    are kept in the statistics, the count is there so that a report can warn about them.
    """

    n: int
    median_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    rel_noise: float
    samples_ms: tuple[float, ...]
    throttled: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "median_ms": self.median_ms,
            "iqr_ms": self.iqr_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "mean_ms": self.mean_ms,
            "rel_noise": self.rel_noise,
            "samples_ms": list(self.samples_ms),
            "throttled": self.throttled,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TimingStats:
        return cls(
            n=int(d["n"]),
            median_ms=float(d["median_ms"]),
            iqr_ms=float(d["iqr_ms"]),
            min_ms=float(d["min_ms"]),
            max_ms=float(d["max_ms"]),
            mean_ms=float(d["mean_ms"]),
            rel_noise=float(d["rel_noise"]),
            samples_ms=tuple(float(x) for x in d["samples_ms"]),
            throttled=int(d.get("throttled", 0)),
        )


def rel_noise(samples: ArrayLike) -> float:
    """The relative standard error of the median of ``samples``, estimated robustly.

    ``1.2533 * (IQR / 1.349) / sqrt(n) / median``. Why: the median of ``n`` draws has an asymptotic
    standard error of ``1 / (2 f(m) sqrt(n))``, where ``f(m)`` is the density at the median; for a
    normal distribution that is ``sqrt(pi/2) * sigma / sqrt(n) = 1.2533 sigma / sqrt(n)``. Sigma is
    estimated as ``IQR / 1.349`` (the IQR of a normal distribution) rather than by the standard
    deviation, so that a few outliers (a preempted launch, a clock change) neither inflate the
    noise estimate nor keep the adaptive loop running: centre and spread are both order statistics.
    Dividing by the median makes it relative: 0.005 means the median is known to about 0.5 %.

    Returns ``inf`` for fewer than two samples or a non-positive median (no estimate possible).
    """
    arr = np.asarray(samples, dtype=np.float64).reshape(-1)
    n = arr.size
    if n < 2:
        return math.inf
    median = float(np.median(arr))
    if not math.isfinite(median) or median <= 0.0:
        return math.inf
    sigma = _iqr(arr) / _IQR_PER_SIGMA
    return _MEDIAN_SE_FACTOR * sigma / math.sqrt(n) / median


def summarize(
    samples_ms: ArrayLike, throttled_mask: Sequence[bool] | npt.NDArray[np.bool_] | None = None
) -> TimingStats:
    """Summarize timings in milliseconds; ``throttled_mask`` (one flag per sample) is counted."""
    arr = _as_samples(samples_ms, "samples_ms")
    throttled = 0
    if throttled_mask is not None:
        mask = np.asarray(throttled_mask, dtype=bool).reshape(-1)
        if mask.size != arr.size:
            raise ValueError(
                f"throttled_mask has {mask.size} flags for {arr.size} samples; give one per sample"
            )
        throttled = int(np.count_nonzero(mask))
    return TimingStats(
        n=int(arr.size),
        median_ms=float(np.median(arr)),
        iqr_ms=_iqr(arr),
        min_ms=float(arr.min()),
        max_ms=float(arr.max()),
        mean_ms=float(arr.mean()),
        rel_noise=rel_noise(arr),
        samples_ms=tuple(float(x) for x in arr),
        throttled=throttled,
    )


def _check_caps(
    min_samples: int, max_samples: int, min_time_s: float, max_time_s: float, hint: str
) -> None:
    """The sample and time caps every timing policy shares: at least 2 samples, the maxima not
    below the minima."""
    if min_samples < 2:
        raise UsageError(f"min_samples must be at least 2 (got {min_samples})", hint)
    if max_samples < min_samples:
        raise UsageError(f"max_samples ({max_samples}) is below min_samples ({min_samples})", hint)
    if not (math.isfinite(min_time_s) and min_time_s >= 0.0):
        raise UsageError(f"min_time_s must be >= 0 (got {min_time_s})", hint)
    if not (max_time_s > 0.0 and max_time_s >= min_time_s):
        raise UsageError(
            f"max_time_s ({max_time_s}) must be positive and at least min_time_s ({min_time_s})",
            hint,
        )


@dataclass(frozen=True)
class AdaptivePolicy:
    """When to stop timing a kernel.

    Stop when the median is known well enough (at least ``min_samples`` samples, at least
    ``min_time_s`` spent, and :func:`rel_noise` below ``target_rel_noise``), or when the budget is
    spent (``max_time_s`` elapsed, or ``max_samples`` taken). ``min_time_s`` keeps a fast kernel
    running long enough for clocks to settle and for slow periodic disturbances to show up.

    :meth:`should_stop` costs O(n) (a partial sort), so for kernels of a few microseconds the worker
    should call it once per batch of launches rather than after every launch.
    """

    min_samples: int = 10
    min_time_s: float = 0.5
    max_time_s: float = 15.0
    target_rel_noise: float = 0.005
    max_samples: int = 100_000

    def __post_init__(self) -> None:
        hint = "adjust the timing options"
        _check_caps(self.min_samples, self.max_samples, self.min_time_s, self.max_time_s, hint)
        if not (self.target_rel_noise > 0.0):
            raise UsageError(
                f"target_rel_noise must be positive (got {self.target_rel_noise})", hint
            )

    def should_stop(self, samples_ms: ArrayLike, elapsed_s: float) -> bool:
        n = len(samples_ms)
        if elapsed_s >= self.max_time_s or n >= self.max_samples:
            return True
        if n < self.min_samples or elapsed_s < self.min_time_s:
            return False
        return rel_noise(samples_ms) < self.target_rel_noise


@dataclass(frozen=True)
class SpeedupCI:
    """``speedup = median(a) / median(b)`` with a bootstrap interval ``[low, high]``.

    ``a`` is the baseline, ``b`` the candidate: a speedup above 1 means ``b`` is faster.
    """

    speedup: float
    low: float
    high: float
    n_a: int
    n_b: int
    confidence: float = 0.95

    @property
    def significant(self) -> bool:
        """Whether the interval excludes 1 (a real speedup or slowdown at this confidence)."""
        return self.low > 1.0 or self.high < 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "speedup": self.speedup,
            "low": self.low,
            "high": self.high,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "confidence": self.confidence,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SpeedupCI:
        return cls(
            speedup=float(d["speedup"]),
            low=float(d["low"]),
            high=float(d["high"]),
            n_a=int(d["n_a"]),
            n_b=int(d["n_b"]),
            confidence=float(d.get("confidence", 0.95)),
        )


def _boot_medians(
    arr: npt.NDArray[np.float64], n_boot: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Medians of ``n_boot`` bootstrap resamples of ``arr``, drawn exactly and in O(n_boot).

    A resample is ``n`` indices ``floor(n * U_i)`` into the sorted samples, with ``U_i`` uniform on
    [0, 1). ``floor`` is monotone, so the resample's k-th smallest value is at ``floor(n * U_(k))``,
    and the k-th order statistic of ``n`` uniforms is ``Beta(k, n + 1 - k)``. The (k+1)-th, needed
    for even ``n``, is ``U_(k) + (1 - U_(k)) * Beta(1, n - k)`` (the smallest of the ``n - k``
    uniforms above it). This draws from exactly the distribution that resampling the whole array
    and taking its median would, without materializing ``n_boot x n`` indices: 100,000 samples
    cost as little as 10.
    """
    srt = np.sort(arr)
    n = srt.size
    k = (n - 1) // 2 + 1  # 1-based rank of the (lower) median
    u_lo = rng.beta(k, n + 1 - k, size=n_boot)
    lo = np.minimum((u_lo * n).astype(np.int64), n - 1)
    if n % 2 == 1:
        return srt[lo]
    u_hi = u_lo + (1.0 - u_lo) * rng.beta(1, n - k, size=n_boot)
    hi = np.minimum((u_hi * n).astype(np.int64), n - 1)
    return 0.5 * (srt[lo] + srt[hi])


def speedup_ci(
    a_ms: ArrayLike,
    b_ms: ArrayLike,
    confidence: float = 0.95,
    n_boot: int = 4000,
    seed: int = 0,
) -> SpeedupCI:
    """Speedup of ``b`` over ``a`` (``median(a) / median(b)``) with a percentile-bootstrap interval.

    Each resample draws ``len(a)`` values from ``a`` and ``len(b)`` from ``b`` with replacement, and
    takes the ratio of their medians; the interval is the central ``confidence`` fraction of those
    ratios. The resample medians are drawn from their exact distribution (see ``_boot_medians``),
    so the cost does not grow with the sample counts. Deterministic for a given ``seed``.
    """
    if not (0.0 < confidence < 1.0):
        raise UsageError(f"confidence must be between 0 and 1 (got {confidence})", "e.g. 0.95")
    if n_boot < 1:
        raise UsageError(f"n_boot must be at least 1 (got {n_boot})", "e.g. 4000")
    a = _as_samples(a_ms, "a_ms")
    b = _as_samples(b_ms, "b_ms")
    med_a, med_b = float(np.median(a)), float(np.median(b))
    if med_a <= 0.0 or med_b <= 0.0:
        raise ValueError("speedup_ci: medians must be positive")
    rng = np.random.default_rng(seed)
    boot_a = _boot_medians(a, n_boot, rng)
    boot_b = _boot_medians(b, n_boot, rng)
    with np.errstate(divide="ignore"):
        ratios = boot_a / boot_b
    tail = 50.0 * (1.0 - confidence)
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return SpeedupCI(
        speedup=med_a / med_b,
        low=float(low),
        high=float(high),
        n_a=int(a.size),
        n_b=int(b.size),
        confidence=confidence,
    )


def _normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney_u(a: ArrayLike, b: ArrayLike) -> tuple[float, float]:
    """The Mann-Whitney U test of ``a`` against ``b``: ``(U, p_two_sided)``.

    ``U`` is the statistic of ``a``: the number of pairs ``(x in a, y in b)`` with ``x > y``, ties
    counting one half (as ``scipy.stats.mannwhitneyu`` returns it). The p-value uses the normal
    approximation with the tie correction of the variance and a continuity correction of 0.5, as
    ``scipy.stats.mannwhitneyu(a, b, method="asymptotic")`` does; it is accurate for the sample
    sizes of timing runs (tens and more). All values tied gives ``p = 1``.
    """
    x = _as_samples(a, "a")
    y = _as_samples(b, "b")
    n1, n2 = x.size, y.size
    both = np.concatenate([x, y])
    _, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    # Average 1-based rank of each distinct value: last rank of its group minus (count - 1) / 2.
    avg_rank = np.cumsum(counts) - (counts - 1) / 2.0
    ranks = avg_rank[inverse.reshape(-1)]
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    n = n1 + n2
    mu = n1 * n2 / 2.0
    t = counts.astype(np.float64)
    tie_term = float(np.sum(t**3 - t)) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0.0:
        return u1, 1.0
    u = max(u1, n1 * n2 - u1)
    z = (u - mu - 0.5) / math.sqrt(var)
    p = min(1.0, 2.0 * _normal_sf(z))
    return u1, max(0.0, p)


# ---------------------------------------------------------------------------------------------
# Adaptive A/B timing: stop as soon as the interval decides the question (issue 17)

StopReason = Literal[
    "faster", "slower", "equivalent", "eliminated", "tied", "max-samples", "max-time", "unverified"
]
STOP_REASONS: tuple[StopReason, ...] = (
    "faster",  # the speedup's interval lies above 1 + margin
    "slower",  # ... below 1 - margin
    "equivalent",  # ... inside the practical-equivalence band 1 +- equivalence
    "eliminated",  # another variant of the same finding is faster, beyond doubt
    "tied",  # as fast as the best variant, within the equivalence band
    "max-samples",  # the sample cap was hit before a decision
    "max-time",  # the time cap (or the analysis's measurement budget) was hit first
    "unverified",  # not timed: its outputs differ from the baseline's
)


@dataclass(frozen=True)
class RacePolicy:
    """When to stop timing variants against a baseline (:class:`Race`).

    A variant's question is "faster, slower, or no different?": its speedup's ``look_confidence``
    interval (:func:`speedup_ci`, baseline over variant) decides it when the interval lies inside
    ``1 +- equivalence`` (practically equivalent: checked first), above ``1 + margin`` (faster) or
    below ``1 - margin`` (slower). With ``margin`` 0 every true speedup is decided eventually:
    one outside the band moves the interval off 1, one inside it lands in the band.

    The interval is looked at after ``min_samples`` rounds and ``min_time_s`` seconds (clocks
    settle), then whenever the rounds have grown by ``look_growth`` (geometric looks: about
    ``log(n) / log(growth)`` looks, so repeated testing inflates the error rate far less than a
    look per round would). ``max_samples`` rounds or ``max_time_s`` seconds end the race whatever
    the intervals say.

    ``look_confidence`` is 0.99 rather than 0.95 because the intervals are looked at repeatedly:
    stopping at the first of ~10 looks whose 95% interval excludes 1 decided "faster" or
    "slower" in 12% of simulated A/A races (two identical kernels, 3% log-normal noise, 2%
    outliers); with 99% per look, 4.5% (tests/runner/test_race.py), near the 5% a single 95%
    interval promises. The speedup reported is the 95% interval of all the samples taken.
    """

    look_confidence: float = 0.99
    margin: float = 0.0
    equivalence: float = 0.02
    min_samples: int = 10
    min_time_s: float = 0.2
    max_samples: int = 100_000
    max_time_s: float = 5.0
    look_growth: float = 1.25
    n_boot: int = 2000

    def __post_init__(self) -> None:
        hint = "adjust the timing options"
        if not (0.0 < self.look_confidence < 1.0):
            raise UsageError(
                f"look_confidence must be between 0 and 1 (got {self.look_confidence})", hint
            )
        if not (0.0 <= self.margin < 1.0):
            raise UsageError(f"margin must be in [0, 1) (got {self.margin})", hint)
        if not (0.0 < self.equivalence < 1.0):
            raise UsageError(f"equivalence must be in (0, 1) (got {self.equivalence})", hint)
        _check_caps(self.min_samples, self.max_samples, self.min_time_s, self.max_time_s, hint)
        if not (self.look_growth > 1.0):
            raise UsageError(f"look_growth must be above 1 (got {self.look_growth})", hint)
        if self.n_boot < 100:
            raise UsageError(f"n_boot must be at least 100 (got {self.n_boot})", hint)


def decide(ci: SpeedupCI, policy: RacePolicy) -> StopReason | None:
    """What ``ci`` (baseline over variant) says under ``policy``: ``equivalent``, ``faster``,
    ``slower``, or None while it straddles a boundary."""
    if 1.0 - policy.equivalence <= ci.low and ci.high <= 1.0 + policy.equivalence:
        return "equivalent"
    if ci.low > 1.0 + policy.margin:
        return "faster"
    if ci.high < 1.0 - policy.margin:
        return "slower"
    return None


@dataclass
class RaceResult:
    """What a race did: every arm's samples (ms, in the order taken), why each variant stopped,
    the last interval of each variant looked at, the rounds, looks and seconds it took."""

    samples_ms: dict[str, list[float]]
    reasons: dict[str, StopReason]
    cis: dict[str, SpeedupCI]
    rounds: int
    looks: int
    elapsed_s: float


class Race:
    """A baseline timed against ``variants`` in rounds (each round: the baseline and every active
    variant once, in the caller's order), with successive elimination.

    The caller records one sample per arm of :meth:`to_time` and then calls :meth:`end_round`.
    At each look (see :class:`RacePolicy`), with ``best`` the variant of the highest speedup so
    far, an active variant ``v`` other than ``best`` stops

    - ``eliminated`` when its interval's upper end is below ``best``'s lower end, or when the
      interval of ``median(v) / median(best)`` lies above ``1 + margin`` (best is faster than v,
      compared directly on samples taken in the same rounds);
    - ``slower`` or ``equivalent`` when its own interval says so (it cannot be a worthwhile fix);
    - ``tied`` when ``median(v) / median(best)`` lies inside ``1 +- equivalence`` (either will do).

    ``best`` stops when its interval says ``slower`` or ``equivalent``, or ``faster`` once it is
    the only variant left. A variant with one question (a single candidate) thus stops as soon as
    :func:`decide` answers. Caps stop every active variant (``max-samples``, ``max-time``).
    """

    def __init__(self, policy: RacePolicy, baseline: str, variants: Sequence[str]) -> None:
        if not variants:
            raise ValueError("a race needs at least one variant")
        labels = [baseline, *variants]
        if len(set(labels)) != len(labels):
            raise ValueError(f"race labels must be distinct (got {labels})")
        self.policy = policy
        self.baseline = baseline
        self.variants = tuple(variants)
        self.samples_ms: dict[str, list[float]] = {label: [] for label in labels}
        self.reasons: dict[str, StopReason] = {}
        self.cis: dict[str, SpeedupCI] = {}
        self.rounds = 0
        self.looks = 0
        self._next_look = policy.min_samples

    @property
    def active(self) -> list[str]:
        return [v for v in self.variants if v not in self.reasons]

    @property
    def done(self) -> bool:
        return not self.active

    def to_time(self) -> list[str]:
        """The arms to time this round: the baseline and every active variant (none when done)."""
        active = self.active
        return [self.baseline, *active] if active else []

    def record(self, label: str, ms: float) -> None:
        if label not in self.samples_ms:
            raise ValueError(f"unknown arm {label!r}")
        if not math.isfinite(ms):
            raise ValueError(f"timing of {label!r} is not finite ({ms})")
        self.samples_ms[label].append(float(ms))

    def stop(self, label: str, reason: StopReason) -> None:
        if label in self.variants and label not in self.reasons:
            self.reasons[label] = reason

    def end_round(self, elapsed_s: float) -> None:
        """After each round: the caps every round, the intervals at each look."""
        self.rounds += 1
        if self.done:
            return
        p = self.policy
        if self.rounds >= p.max_samples or elapsed_s >= p.max_time_s:
            why: StopReason = "max-samples" if self.rounds >= p.max_samples else "max-time"
            for v in self.active:
                self.stop(v, why)
            return
        if self.rounds < self._next_look or elapsed_s < p.min_time_s:
            return
        self._next_look = max(self.rounds + 1, math.ceil(self.rounds * p.look_growth))
        self.look()

    def _ci(self, a: str, b: str) -> SpeedupCI:
        p = self.policy
        return speedup_ci(
            self.samples_ms[a], self.samples_ms[b], p.look_confidence, p.n_boot, seed=self.looks
        )

    def look(self) -> None:
        """Update every active variant's interval and stop those the intervals decide."""
        p = self.policy
        self.looks += 1
        for v in self.active:
            if len(self.samples_ms[v]) >= 2:
                self.cis[v] = self._ci(self.baseline, v)
        if not self.cis:
            return
        best = max(self.cis, key=lambda v: self.cis[v].speedup)
        top = self.cis[best]
        for v in self.active:
            if v == best or v not in self.cis:
                continue
            ci = self.cis[v]
            if ci.high < top.low:
                self.stop(v, "eliminated")
                continue
            verdict = decide(ci, p)
            if verdict in ("slower", "equivalent"):
                self.stop(v, verdict)
                continue
            direct = self._ci(v, best)  # median(v) / median(best): above 1, best is faster
            if direct.low > 1.0 + p.margin:
                self.stop(v, "eliminated")
            elif 1.0 - p.equivalence <= direct.low and direct.high <= 1.0 + p.equivalence:
                self.stop(v, "tied")
        if best in self.active:
            verdict = decide(top, p)
            if verdict in ("slower", "equivalent"):
                self.stop(best, verdict)
            elif verdict == "faster" and self.active == [best]:
                self.stop(best, "faster")

    def result(self, elapsed_s: float) -> RaceResult:
        return RaceResult(
            samples_ms={k: list(v) for k, v in self.samples_ms.items()},
            reasons=dict(self.reasons),
            cis=dict(self.cis),
            rounds=self.rounds,
            looks=self.looks,
            elapsed_s=elapsed_s,
        )


def run_race(
    policy: RacePolicy,
    baseline: str,
    variants: Sequence[str],
    time_one: Callable[[str], float],
    clock: Callable[[], float] = time.perf_counter,
    seed: int = 0,
) -> RaceResult:
    """Time ``baseline`` against ``variants`` until the :class:`Race` ends.

    ``time_one(label)``: one timed sample of that arm in milliseconds (the worker flushes the L2
    and launches; tests give synthetic sequences). Each round times the baseline and the active
    variants in a random order (``seed``), so drifts in clocks and temperature hit all alike.
    ``clock``: seconds, for the time cap (tests give a fake one).
    """
    race = Race(policy, baseline, variants)
    rng = np.random.default_rng(seed)
    t0 = clock()
    while not race.done:
        arms = race.to_time()
        for i in rng.permutation(len(arms)):
            race.record(arms[int(i)], time_one(arms[int(i)]))
        race.end_round(clock() - t0)
    return race.result(clock() - t0)
