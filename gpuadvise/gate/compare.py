"""Comparing one metric of one case with its baseline: the verdicts.

*Static* metrics are deterministic, so a change is real: it is compared with the threshold
(:func:`compare_static`). *Timed* metrics are samples: see :func:`compare_timed` for the rule.

``regression`` (fails the gate), ``improvement``, ``same``, ``ambiguous`` (a change that cannot be
called either way: too few samples, within the noise, not significant, or measured on another
device; reported, never a silent pass; fails with ``--strict``), ``skipped`` (not evaluated: the
model is not available for this kernel, no GPU, no baseline value; reported with the reason) and
``error`` (the kernel could not be compiled or measured; exit code 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from gpuadvise.gate.config import TimingSettings
from gpuadvise.gate.thresholds import METRICS, Threshold, ms_text, pct_text
from gpuadvise.runner.stats import mann_whitney_u, speedup_ci

__all__ = ["VERDICT_ORDER", "Comparison", "Verdict", "compare_static", "compare_timed"]


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    SAME = "same"
    AMBIGUOUS = "ambiguous"
    SKIPPED = "skipped"
    ERROR = "error"


# Most serious first (sorting, summaries).
VERDICT_ORDER = (
    Verdict.ERROR,
    Verdict.REGRESSION,
    Verdict.AMBIGUOUS,
    Verdict.SKIPPED,
    Verdict.IMPROVEMENT,
    Verdict.SAME,
)


@dataclass(frozen=True)
class Comparison:
    """The verdict of one case x metric, with the numbers behind it.

    ``change_abs`` is ``current - baseline`` (for time: of the medians, in ms); ``change_rel``
    is ``change_abs / |baseline|`` (None from a zero baseline). For timed gates ``p_value`` is
    the Mann-Whitney U test's, ``noise_rel`` the mean relative IQR of the two runs, and
    ``ci_low``/``ci_high`` bound the relative change (bootstrap, ``1 - 2 alpha``). ``mode`` is
    ``static``, ``a/b`` (both revisions timed in this job) or ``stored`` (against stored
    samples). ``file``/``line`` locate the kernel (relative to the repository root).
    """

    case: str
    metric: str
    verdict: Verdict
    reason: str
    baseline: float | None = None
    current: float | None = None
    change_abs: float | None = None
    change_rel: float | None = None
    threshold: Threshold | None = None
    mode: str = "static"
    p_value: float | None = None
    noise_rel: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n_baseline: int | None = None
    n_current: int | None = None
    kernel: str | None = None
    file: str | None = None
    line: int | None = None

    @property
    def rule_id(self) -> str:
        return METRICS[self.metric].rule_id if self.metric in METRICS else "GATE-" + self.metric

    def to_dict(self) -> dict[str, Any]:
        def f(x: float | None) -> float | None:
            return x if x is None or math.isfinite(x) else None

        return {
            "case": self.case,
            "metric": self.metric,
            "rule_id": self.rule_id,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "baseline": f(self.baseline),
            "current": f(self.current),
            "change_abs": f(self.change_abs),
            "change_rel": f(self.change_rel),
            "threshold": None if self.threshold is None else self.threshold.to_dict(),
            "mode": self.mode,
            "p_value": f(self.p_value),
            "noise_rel": f(self.noise_rel),
            "ci_low": f(self.ci_low),
            "ci_high": f(self.ci_high),
            "n_baseline": self.n_baseline,
            "n_current": self.n_current,
            "kernel": self.kernel,
            "file": self.file,
            "line": self.line,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Comparison:
        t = d.get("threshold")
        return cls(
            case=str(d["case"]),
            metric=str(d["metric"]),
            verdict=Verdict(d["verdict"]),
            reason=str(d["reason"]),
            baseline=d.get("baseline"),
            current=d.get("current"),
            change_abs=d.get("change_abs"),
            change_rel=d.get("change_rel"),
            threshold=None if t is None else Threshold.from_dict(t),
            mode=str(d.get("mode", "static")),
            p_value=d.get("p_value"),
            noise_rel=d.get("noise_rel"),
            ci_low=d.get("ci_low"),
            ci_high=d.get("ci_high"),
            n_baseline=d.get("n_baseline"),
            n_current=d.get("n_current"),
            kernel=d.get("kernel"),
            file=d.get("file"),
            line=d.get("line"),
        )


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


def compare_static(
    case: str,
    metric: str,
    baseline: float | None,
    current: float | None,
    threshold: Threshold | None = None,
    *,
    env_reason: str | None = None,
) -> Comparison:
    """The verdict of a static metric: direction-aware, every threshold bound must be exceeded.

    ``env_reason`` (the baseline was modelled for another device) turns a would-be regression
    or improvement into ``ambiguous``: the numbers are not comparable.
    """
    m = METRICS[metric]
    thr = threshold or m.default
    base = Comparison(case, metric, Verdict.SAME, "", baseline, current, threshold=thr)
    if baseline is None:
        return replace(base, verdict=Verdict.SKIPPED, reason="no baseline value for this metric")
    if current is None:
        return replace(base, verdict=Verdict.SKIPPED, reason="not available")
    delta = 0.0 if _close(current, baseline) else current - baseline
    rel = delta / abs(baseline) if baseline else (0.0 if delta == 0 else math.inf)
    base = replace(base, change_abs=delta, change_rel=rel if math.isfinite(rel) else None)
    worse = delta if m.lower_is_better else -delta
    worse_rel = rel if m.lower_is_better else -rel
    shown = f"{m.format(baseline)} → {m.format(current)}"
    if delta:
        shown += f" ({m.format_delta(delta)}" + (
            f", {pct_text(rel)})" if math.isfinite(rel) else ")"
        )
    if worse > 0 and thr.exceeded(worse, worse_rel):
        verdict, why = Verdict.REGRESSION, f"{shown}: worse by more than {thr.bounds(m)}"
    elif worse < 0 and thr.exceeded(-worse, -worse_rel):
        verdict, why = Verdict.IMPROVEMENT, f"{shown}: better by more than {thr.bounds(m)}"
    else:
        return replace(base, verdict=Verdict.SAME, reason=f"{shown}: within {thr.bounds(m)}")
    if env_reason:
        return replace(base, verdict=Verdict.AMBIGUOUS, reason=f"{shown}, but {env_reason}")
    return replace(base, verdict=verdict, reason=why)


def compare_timed(
    case: str,
    baseline_ms: Sequence[float],
    current_ms: Sequence[float],
    threshold: Threshold | None = None,
    settings: TimingSettings | None = None,
    *,
    mode: str = "a/b",
    env_reason: str | None = None,
) -> Comparison:
    """The verdict of a timed gate from two sets of samples (``baseline_ms``: the old code).

    With ``change = median(current) / median(baseline) - 1``, ``thr`` the threshold as a
    fraction (default 5 %), ``noise`` the mean relative IQR of the two runs (the change must
    exceed it: the middle halves of the two distributions do not overlap) and ``p`` the
    two-sided Mann-Whitney U p-value:

    - fewer than ``min_samples`` on either side, or stored samples from another device
      (``env_reason``): **ambiguous**;
    - ``|change| > thr``: **regression** (slower) or **improvement** (faster) when
      ``p < alpha`` and ``|change| > noise``, else **ambiguous**, saying which test failed;
    - ``|change| <= thr``: **same** when the whole ``1 - 2 alpha`` bootstrap interval of the
      change lies within ``±thr`` (an equivalence test at level ``alpha``), else **ambiguous**
      (the change may be larger than it looks: take more samples).
    """
    thr = threshold or METRICS["time"].default
    settings = settings or TimingSettings()
    a = np.asarray(baseline_ms, dtype=np.float64).reshape(-1)
    b = np.asarray(current_ms, dtype=np.float64).reshape(-1)
    out = Comparison(
        case,
        "time",
        Verdict.AMBIGUOUS,
        "",
        threshold=thr,
        mode=mode,
        n_baseline=int(a.size),
        n_current=int(b.size),
    )
    if a.size == 0 or b.size == 0:
        return replace(out, reason="no samples")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b)) and a.min() > 0 and b.min() > 0):
        return replace(out, verdict=Verdict.ERROR, reason="invalid samples (not positive finite)")
    med_a, med_b = float(np.median(a)), float(np.median(b))
    change = med_b / med_a - 1.0
    out = replace(out, baseline=med_a, current=med_b, change_abs=med_b - med_a, change_rel=change)
    shown = f"median {ms_text(med_a)} → {ms_text(med_b)} ({pct_text(change)})"
    n_min = settings.min_samples
    if a.size < n_min or b.size < n_min:
        return replace(
            out,
            reason=f"{shown}; too few samples ({a.size} baseline, {b.size} current; "
            f"need {n_min} each)",
        )
    if env_reason:
        return replace(out, reason=f"{shown}; {env_reason}")

    def rel_iqr(x: np.ndarray[Any, Any], med: float) -> float:
        q1, q3 = np.percentile(x, [25.0, 75.0])
        return float(q3 - q1) / med

    noise = 0.5 * (rel_iqr(a, med_a) + rel_iqr(b, med_b))
    _, p = mann_whitney_u(a, b)
    ci = speedup_ci(a, b, confidence=1.0 - 2.0 * settings.alpha, seed=0)
    lo, hi = 1.0 / ci.high - 1.0, 1.0 / ci.low - 1.0
    limit = thr.effective_rel(med_a)
    out = replace(out, p_value=p, noise_rel=noise, ci_low=lo, ci_high=hi)
    stats_text = f"p = {p:.2g}, noise ±{noise * 100:.1f}%, n = {a.size}/{b.size}"
    if abs(change) > limit:
        word = "slower" if change > 0 else "faster"
        if p >= settings.alpha:
            return replace(
                out,
                reason=f"{shown}: {word} by more than {limit * 100:.3g}% but not significant "
                f"(p = {p:.2g} >= {settings.alpha:g}; {stats_text})",
            )
        if abs(change) <= noise:
            return replace(
                out,
                reason=f"{shown}: {word} by more than {limit * 100:.3g}% but within the "
                f"measured noise (±{noise * 100:.1f}%; {stats_text})",
            )
        verdict = Verdict.REGRESSION if change > 0 else Verdict.IMPROVEMENT
        return replace(
            out,
            verdict=verdict,
            reason=f"{shown}: {word} by more than {limit * 100:.3g}% ({stats_text})",
        )
    if -limit <= lo and hi <= limit:
        return replace(
            out,
            verdict=Verdict.SAME,
            reason=f"{shown}: within ±{limit * 100:.3g}% (interval {pct_text(lo)} to {pct_text(hi)}; "
            f"{stats_text})",
        )
    return replace(
        out,
        reason=f"{shown}, but the interval {pct_text(lo)} to {pct_text(hi)} reaches beyond "
        f"±{limit * 100:.3g}% ({stats_text}): take more samples or reduce the noise",
    )
