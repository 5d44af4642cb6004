"""What the gate asks of a metrics provider, and the values it answers with.

Metric collection is not done by the gate's logic: a :class:`MetricsProvider` (compile + models +
the GPU runner: :mod:`gpuadvise.gate.metrics`) is passed in, so the comparisons are testable with
fakes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpuadvise import __version__
from gpuadvise.gate.config import GateCase

__all__ = ["Environment", "MetricValue", "MetricsProvider", "TimingSamples", "Unavailable"]


@dataclass(frozen=True)
class Unavailable:
    """A static metric the models cannot give for this case, and why (reported as skipped)."""

    reason: str


MetricValue = float | int | None | Unavailable


@dataclass(frozen=True)
class TimingSamples:
    """Kernel times in milliseconds. ``baseline_ms`` is set for A/B runs (both revisions timed
    interleaved in one job); ``throttled`` counts samples the monitor flagged."""

    candidate_ms: tuple[float, ...]
    baseline_ms: tuple[float, ...] | None = None
    throttled: int = 0


@dataclass(frozen=True)
class Environment:
    """What the numbers were produced with. ``device`` is the live GPU (None: no GPU);
    ``static_model`` the device model of the static metrics (``H100 (sm_90)``)."""

    gpuadvise: str = __version__
    toolchain: str | None = None
    static_model: str | None = None
    device: str | None = None
    driver: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {
            "gpuadvise": self.gpuadvise,
            "toolchain": self.toolchain,
            "static_model": self.static_model,
            "device": self.device,
            "driver": self.driver,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Environment:
        def s(key: str) -> str | None:
            v = d.get(key)
            if v is not None and not isinstance(v, str):
                raise TypeError(f"{key} must be a string or null")
            return v

        return cls(
            s("gpuadvise") or "", s("toolchain"), s("static_model"), s("device"), s("driver")
        )


class MetricsProvider(Protocol):
    """Collects the numbers; the gate only compares them.

    - ``environment()``: the toolchain, the static device model and the live GPU (``device``
      None: no GPU here, timed gates are skipped).
    - ``static_metrics(case)``: a value per static metric name (``registers``, ``spill_bytes``,
      ``occupancy`` (fraction), ``smem_excess_wavefronts``, ``global_excess_sectors``,
      ``l2_hit_rate`` (fraction)); None or :class:`Unavailable` where the model cannot say
      (reported as skipped, never as a pass). A metric left out is skipped too.
    - ``timings(case, baseline, min_samples=)``: the current kernel's samples, and when
      ``baseline`` (the same case in a checkout of the baseline revision) is given, its samples
      too, timed interleaved A/B in one job; at least ``min_samples`` each where possible.

    Both may raise :class:`~gpuadvise.errors.GpuAdviseError` (compile error, CUDA error): the
    case's verdict is then ``error``.
    """

    def environment(self) -> Environment: ...

    def static_metrics(self, case: GateCase) -> Mapping[str, MetricValue]: ...

    def timings(
        self, case: GateCase, baseline: GateCase | None = None, *, min_samples: int = 10
    ) -> TimingSamples: ...
