"""Fake metrics providers for the gate tests (no compiler, no GPU). No tests in here."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.gate.config import GateCase
from gpuadvise.gate.provider import Environment, MetricValue, TimingSamples
from gpuadvise.gate.thresholds import STATIC_METRICS

H100_ENV = Environment(
    toolchain="13.2", static_model="H100 (sm_90)", device="NVIDIA H100 80GB HBM3", driver="570.1"
)
CPU_ENV = Environment(toolchain="13.2", static_model="H100 (sm_90)")

ALL_STATIC = {
    "registers": 32.0,
    "spill_bytes": 0.0,
    "occupancy": 0.5,
    "smem_excess_wavefronts": 1000.0,
    "global_excess_sectors": 2000.0,
    "l2_hit_rate": 0.8,
}
# every static metric the gate knows, no other: a metric added to the gate must get a value here
# (else the fakes would silently never report it, and no test would compare it)
assert set(ALL_STATIC) == set(STATIC_METRICS), sorted(set(ALL_STATIC) ^ set(STATIC_METRICS))


def samples(median: float, noise: float, n: int, seed: int = 0) -> tuple[float, ...]:
    """``n`` synthetic kernel times around ``median`` ms with relative sigma ``noise``."""
    rng = np.random.default_rng(seed)
    return tuple(float(x) for x in median * (1.0 + noise * rng.standard_normal(n)))


@dataclass
class FakeProvider:
    """Answers from tables keyed by case name (a callable gets the case)."""

    static: Mapping[str, Any] = field(default_factory=dict)
    timing: Mapping[str, Any] = field(default_factory=dict)
    env: Environment = H100_ENV
    calls: list[tuple[str, GateCase, GateCase | None]] = field(default_factory=list)

    def environment(self) -> Environment:
        return self.env

    def static_metrics(self, case: GateCase) -> Mapping[str, MetricValue]:
        self.calls.append(("static", case, None))
        v = self.static[case.name]
        if isinstance(v, BaseException):
            raise v
        return v(case) if callable(v) else v

    def timings(
        self, case: GateCase, baseline: GateCase | None = None, *, min_samples: int = 10
    ) -> TimingSamples:
        self.calls.append(("timings", case, baseline))
        v = self.timing[case.name]
        if isinstance(v, BaseException):
            raise v
        if callable(v):
            result: TimingSamples = v(case, baseline)
            return result
        return v  # type: ignore[no-any-return]


_GATE_LINE = re.compile(r"//\s*gate:(.*)")
_SOURCE_KEYS = frozenset(STATIC_METRICS) | {"time_ms", "noise"}


def source_values(path: Path) -> dict[str, float]:
    """``// gate: registers=40 time_ms=1.1`` comments of a kernel source, merged. A key that is
    neither a static metric nor ``time_ms``/``noise`` (a typo) raises ValueError."""
    out: dict[str, float] = {}
    for m in _GATE_LINE.finditer(path.read_text()):
        for pair in m.group(1).split():
            k, eq, v = pair.partition("=")
            if not eq or k not in _SOURCE_KEYS:
                raise ValueError(
                    f"{path}: `// gate:` entry {pair!r} is not one of {sorted(_SOURCE_KEYS)}"
                )
            out[k] = float(v)
    return out


@dataclass
class SourceProvider:
    """Reads the metrics from ``// gate:`` comments in the case's own source file, so tests can
    tell which tree (the working tree or the baseline worktree) a case was compiled from."""

    env: Environment = H100_ENV
    seen: list[Path] = field(default_factory=list)
    n: int = 30
    on_static: Callable[[GateCase], None] | None = None

    def environment(self) -> Environment:
        return self.env

    def _source(self, case: GateCase) -> Path:
        assert case.source is not None
        self.seen.append(case.source)
        return case.source

    def static_metrics(self, case: GateCase) -> Mapping[str, MetricValue]:
        if self.on_static:
            self.on_static(case)
        values = source_values(self._source(case))
        return {k: values.get(k) for k in ALL_STATIC}

    def timings(
        self, case: GateCase, baseline: GateCase | None = None, *, min_samples: int = 10
    ) -> TimingSamples:
        def draw(c: GateCase) -> tuple[float, ...]:
            src = self._source(c)
            v = source_values(src)
            seed = zlib.crc32(src.read_bytes())
            return samples(v["time_ms"], v.get("noise", 0.01), max(self.n, min_samples), seed)

        return TimingSamples(draw(case), None if baseline is None else draw(baseline))
