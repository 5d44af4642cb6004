"""Timing statistics: robust summaries, an adaptive stopping rule, speedup intervals, a rank test.

GPU kernel timings are right-skewed with occasional outliers (clock changes, a context switch, an
interrupt on the host that launched them), so everything here is built on the median and the
interquartile range rather than on the mean and the standard deviation:

- :func:`summarize` gives the median, IQR and friends of a run (:class:`TimingStats`).
- :func:`rel_noise` estimates the relative standard error of that median.
- :class:`AdaptivePolicy` decides when the worker has timed a kernel long enough.
- :func:`speedup_ci` bootstraps a confidence interval of the ratio of two medians.
- :func:`mann_whitney_u` tests whether two runs come from one distribution (performance gating).

Pure numpy and :mod:`math`; no scipy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuadvise.errors import UsageError

__all__ = [
    "AdaptivePolicy",
    "SpeedupCI",
    "TimingStats",
    "mann_whitney_u",
    "rel_noise",
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
        if self.min_samples < 2:
            raise UsageError(f"min_samples must be at least 2 (got {self.min_samples})", hint)
        if self.max_samples < self.min_samples:
            raise UsageError(
                f"max_samples ({self.max_samples}) is below min_samples ({self.min_samples})", hint
            )
        if not (math.isfinite(self.min_time_s) and self.min_time_s >= 0.0):
            raise UsageError(f"min_time_s must be >= 0 (got {self.min_time_s})", hint)
        if not (self.max_time_s > 0.0 and self.max_time_s >= self.min_time_s):
            raise UsageError(
                f"max_time_s ({self.max_time_s}) must be positive and at least min_time_s "
                f"({self.min_time_s})",
                hint,
            )
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
