"""The gated metrics and their thresholds: what each metric is, which direction is worse, its
unit, and how big a change must be to count.

A threshold has an absolute bound (in the metric's unit; occupancy and hit rate are fractions, so
``abs = 0.05`` is 5 percentage points), a relative bound (``rel = 0.1`` or ``"10%"``), or both.
A change counts (as a regression when it is worse, as an improvement when it is better) only
when it exceeds **every** bound given: "more than 4 registers *and* more than 10 %" keeps one
extra register on a 16-register kernel from failing a build, and keeps ``rel`` alone from
misfiring near zero. "Worse" is direction-aware: more registers, spills, wavefronts, sectors or
time is worse; lower occupancy or hit rate is worse.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "METRICS",
    "STATIC_METRICS",
    "MetricDef",
    "Threshold",
    "format_value",
    "ms_text",
    "number_text",
    "pct_text",
]


@dataclass(frozen=True)
class Threshold:
    """How big a change must be to count: ``abs`` (metric units) and/or ``rel`` (a fraction).

    A change counts when it exceeds every bound given (both, when both are given).
    """

    abs: float | None = None
    rel: float | None = None

    def __post_init__(self) -> None:
        if self.abs is None and self.rel is None:
            raise ValueError("a threshold needs abs, rel or both")
        for v in (self.abs, self.rel):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ValueError(f"threshold bounds must be finite and >= 0 (got {v})")

    def exceeded(self, change_abs: float, change_rel: float) -> bool:
        """Whether a change of ``change_abs`` (>= 0) and ``change_rel`` exceeds every bound."""
        if self.abs is not None and not change_abs > self.abs:
            return False
        return not (self.rel is not None and not change_rel > self.rel)

    def effective_rel(self, baseline: float) -> float:
        """The relative size a change must exceed, both bounds folded (for timings)."""
        bounds = []
        if self.rel is not None:
            bounds.append(self.rel)
        if self.abs is not None:
            bounds.append(self.abs / abs(baseline) if baseline else math.inf)
        return max(bounds)

    def bounds(self, metric: MetricDef) -> str:
        """``4 and 10%``: the bounds in the metric's unit."""
        parts = []
        if self.abs is not None:
            parts.append(metric.format_delta(self.abs, signed=False))
        if self.rel is not None:
            parts.append(f"{number_text(self.rel * 100)}%")
        return " and ".join(parts)

    def describe(self, metric: MetricDef) -> str:
        """``> 4 and > 10%`` (the table's threshold column)."""
        return " and ".join("> " + b for b in self.bounds(metric).split(" and "))

    def to_dict(self) -> dict[str, float | None]:
        return {"abs": self.abs, "rel": self.rel}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Threshold:
        a, r = d.get("abs"), d.get("rel")
        return cls(None if a is None else float(a), None if r is None else float(r))


def number_text(x: float) -> str:
    """A number without trailing zeros: 10, 2.5, 0.125."""
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


@dataclass(frozen=True)
class MetricDef:
    """A gated metric: its name, direction, unit and default threshold."""

    name: str
    title: str
    kind: Literal["static", "timed"]
    lower_is_better: bool
    unit: Literal["count", "bytes", "fraction", "ms"]
    default: Threshold
    description: str

    @property
    def rule_id(self) -> str:
        return "GATE-" + self.name.replace("_", "-")

    def format(self, value: float | None) -> str:
        return format_value(self.name, value)

    def format_delta(self, delta: float, *, signed: bool = True) -> str:
        sign = "+" if signed and delta > 0 else ""
        if self.unit == "fraction":
            return f"{sign}{number_text(round(delta * 100, 2))} pp"
        if self.unit == "bytes":
            return f"{sign}{number_text(delta)} B"
        if self.unit == "ms":
            return sign + ms_text(delta)
        return f"{sign}{number_text(delta)}"


METRICS: dict[str, MetricDef] = {
    m.name: m
    for m in (
        MetricDef(
            "registers",
            "registers per thread",
            "static",
            True,
            "count",
            Threshold(rel=0.10),
            "Registers per thread, as ptxas allocated them. More registers can lower occupancy.",
        ),
        MetricDef(
            "spill_bytes",
            "spill bytes",
            "static",
            True,
            "bytes",
            Threshold(abs=0.0),
            "Local-memory spill stores + loads per thread, in bytes (ptxas). Any new spill counts.",
        ),
        MetricDef(
            "occupancy",
            "theoretical occupancy",
            "static",
            False,
            "fraction",
            Threshold(abs=0.0),
            "Theoretical occupancy (active warps / maximum warps per SM), a fraction. Any drop "
            "is a step down.",
        ),
        MetricDef(
            "smem_excess_wavefronts",
            "shared-memory excess wavefronts",
            "static",
            True,
            "count",
            Threshold(rel=0.05),
            "Shared-memory wavefronts beyond the conflict-free minimum (bank conflicts), from "
            "the bank model over the sampled CTAs.",
        ),
        MetricDef(
            "global_excess_sectors",
            "global excess sectors",
            "static",
            True,
            "count",
            Threshold(rel=0.05),
            "Global-memory 32-byte sectors beyond the ideal for the bytes requested "
            "(uncoalesced accesses), from the coalescing model.",
        ),
        MetricDef(
            "l2_hit_rate",
            "predicted L2 hit rate",
            "static",
            False,
            "fraction",
            Threshold(abs=0.02),
            "The L2 model's predicted hit rate, a fraction; a drop of more than 2 points counts.",
        ),
        MetricDef(
            "time",
            "kernel time (median)",
            "timed",
            True,
            "ms",
            Threshold(rel=0.05),
            "The median kernel time on the GPU. A regression needs a slowdown above the "
            "threshold, beyond the measured noise, and significant (Mann-Whitney U).",
        ),
    )
}
STATIC_METRICS = tuple(m for m, d in METRICS.items() if d.kind == "static")


def ms_text(v: float) -> str:
    a = abs(v)
    if a >= 1000:
        return f"{v / 1000:.3f} s"
    if a >= 1:
        return f"{v:.3f} ms"
    return f"{v * 1000:.2f} µs"


def format_value(metric: str, value: float | None) -> str:
    """A metric value as people read it: ``40``, ``128 B``, ``50.0%``, ``1.234 ms``."""
    if value is None or not math.isfinite(value):
        return "—"
    unit = METRICS[metric].unit if metric in METRICS else "count"
    if unit == "fraction":
        return f"{value * 100:.1f}%"
    if unit == "bytes":
        return f"{number_text(value)} B"
    if unit == "ms":
        return ms_text(value)
    return number_text(value)


def pct_text(x: float) -> str:
    return f"{x * 100:+.1f}%"
