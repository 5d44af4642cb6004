"""The pre-merge performance gate: configuration, baselines, comparisons and verdicts.

Pure logic plus the atomic baseline file I/O. Metric collection is not done here: a
:class:`MetricsProvider` (compile + models + the GPU runner) is passed in, so everything in this
module is testable with fakes. The CLI side (config discovery, ``git worktree``, output files,
exit codes) is :mod:`gpuadvise.cli.gate`.

Two kinds of gate
-----------------
*Static* gates run anywhere, GPU or not: registers per thread, local-memory spill bytes,
theoretical occupancy, shared-memory excess wavefronts (bank conflicts), global-memory excess
sectors (uncoalesced accesses) and the predicted L2 hit rate. They are deterministic, so a change
is real: each is compared with its baseline value against a threshold.

*Timed* gates (metric ``time``, the median kernel time) need a GPU. With ``--baseline-ref`` both
revisions are compiled and timed A/B, interleaved, in one job; otherwise the current samples are
compared with the samples stored in the baseline file. See :func:`compare_timed` for the rule.

Thresholds
----------
A threshold has an absolute bound (in the metric's unit; occupancy and hit rate are fractions, so
``abs = 0.05`` is 5 percentage points), a relative bound (``rel = 0.1`` or ``"10%"``), or both.
A change counts (as a regression when it is worse, as an improvement when it is better) only
when it exceeds **every** bound given: "more than 4 registers *and* more than 10 %" keeps one
extra register on a 16-register kernel from failing a build, and keeps ``rel`` alone from
misfiring near zero. "Worse" is direction-aware: more registers, spills, wavefronts, sectors or
time is worse; lower occupancy or hit rate is worse.

Verdicts
--------
``regression`` (fails the gate), ``improvement``, ``same``, ``ambiguous`` (a change that cannot be
called either way: too few samples, within the noise, not significant, or measured on another
device; reported, never a silent pass; fails with ``--strict``), ``skipped`` (not evaluated: the
model is not available for this kernel, no GPU, no baseline value; reported with the reason) and
``error`` (the kernel could not be compiled or measured; exit code 2).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from gpuadvise import __version__
from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError
from gpuadvise.fileio import write_atomic
from gpuadvise.runner.stats import TimingStats, mann_whitney_u, speedup_ci, summarize

if TYPE_CHECKING:
    from gpuadvise.items import Level, Outcome, ReportItem, ReportRule
    from gpuadvise.spec.kernel_spec import KernelSpec

__all__ = [
    "BASELINE_KIND",
    "BASELINE_SCHEMA_VERSION",
    "DEFAULT_BASELINE",
    "METRICS",
    "RESULT_KIND",
    "Baseline",
    "BaselineError",
    "CaseBaseline",
    "Comparison",
    "Environment",
    "GateCase",
    "GateConfig",
    "GateError",
    "GateResult",
    "GateRow",
    "GateTable",
    "Gates",
    "MetricDef",
    "MetricsProvider",
    "Threshold",
    "TimingSamples",
    "TimingSettings",
    "Unavailable",
    "Verdict",
    "baseline_from_json",
    "compare_static",
    "compare_timed",
    "dump_baseline",
    "evaluate_gate",
    "find_gate_config",
    "format_value",
    "gate_table",
    "load_baseline",
    "load_gate_config",
    "measure_baseline",
    "merge_baseline",
    "parse_gate_config",
    "rebase_case",
    "report_items",
    "report_rules",
    "summary_line",
    "write_baseline",
    "write_text_atomic",
]

BASELINE_SCHEMA_VERSION = 1
BASELINE_KIND = "gpuadvise-gate-baseline"
RESULT_SCHEMA_VERSION = 1
RESULT_KIND = "gpuadvise-gate-result"
DEFAULT_BASELINE = ".gpuadvise/gate-baseline.json"

Gates = Literal["all", "static", "timed"]


class GateError(GpuAdviseError):
    """The gate could not run (a case failed to compile while recording a baseline ...)."""


class BaselineError(ConfigError):
    """A baseline file that is missing, corrupt, or of another schema version."""


# ---------------------------------------------------------------------------------------------
# Metrics and thresholds.


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
            parts.append(f"{_num(self.rel * 100)}%")
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


def _num(x: float) -> str:
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
            return f"{sign}{_num(round(delta * 100, 2))} pp"
        if self.unit == "bytes":
            return f"{sign}{_num(delta)} B"
        if self.unit == "ms":
            return sign + _ms(delta)
        return f"{sign}{_num(delta)}"


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


def _ms(v: float) -> str:
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
        return f"{_num(value)} B"
    if unit == "ms":
        return _ms(value)
    return _num(value)


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


# ---------------------------------------------------------------------------------------------
# Configuration.


@dataclass(frozen=True)
class TimingSettings:
    """The statistics of timed gates: significance level and the minimum samples per side."""

    alpha: float = 0.01
    min_samples: int = 10


@dataclass(frozen=True)
class GateCase:
    """One kernel run to gate. Paths are absolute. ``args``/``buffers`` are in the CLI's
    ``name=value`` form (:func:`gpuadvise.spec.kernel_spec.parse_arg`, :func:`~gpuadvise.spec.kernel_spec.parse_buffer`)."""

    name: str
    source: Path | None = None
    kernel: str | None = None
    spec: Path | None = None
    grid: str | None = None
    block: str | None = None
    dynamic_smem: str | None = None
    args: tuple[str, ...] = ()
    buffers: tuple[str, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    metrics: tuple[str, ...] = tuple(METRICS)
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    gpu: str | None = None
    arch: str | None = None

    def threshold(self, metric: str) -> Threshold:
        return self.thresholds.get(metric) or METRICS[metric].default

    def kernel_spec(self) -> KernelSpec:
        """The :class:`~gpuadvise.spec.kernel_spec.KernelSpec` of this case (reads the spec and source)."""
        from gpuadvise.spec.kernel_spec import build_kernel_spec

        return build_kernel_spec(
            self.source,
            self.kernel,
            spec=self.spec,
            grid=self.grid,
            block=self.block,
            dynamic_smem=self.dynamic_smem,
            args=self.args,
            buffers=self.buffers,
            nvcc_flags=self.nvcc_flags,
        )

    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.source, self.spec) if p is not None)


@dataclass(frozen=True)
class GateConfig:
    """The ``[gate]`` table: where it came from, the baseline file and the cases."""

    path: Path
    root: Path
    cases: tuple[GateCase, ...]
    baseline: Path
    metrics: tuple[str, ...] = tuple(METRICS)
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    timing: TimingSettings = TimingSettings()
    gpu: str | None = None
    arch: str | None = None

    def select(self, names: Sequence[str]) -> GateConfig:
        """Only the cases named (``--case``); an unknown name is a UsageError."""
        if not names:
            return self
        known = {c.name: c for c in self.cases}
        for n in names:
            if n not in known:
                raise UsageError(
                    f"no gate case named {n!r} in {self.path}",
                    _did_you_mean(n, known) or "cases: " + ", ".join(known),
                )
        return replace(self, cases=tuple(c for c in self.cases if c.name in set(names)))

    def with_device(self, gpu: str | None, arch: str | None) -> GateConfig:
        """``--gpu``/``--arch`` from the command line override the file's (for every case)."""
        if gpu is None and arch is None:
            return self
        cases = tuple(replace(c, gpu=gpu, arch=arch) for c in self.cases)
        return replace(self, gpu=gpu, arch=arch, cases=cases)


_GATE_KEYS = ("baseline", "metrics", "thresholds", "timing", "gpu", "arch", "cases")
_CASE_KEYS = (
    "name",
    "source",
    "kernel",
    "spec",
    "grid",
    "block",
    "dynamic_smem",
    "args",
    "buffers",
    "nvcc_flags",
    "metrics",
    "thresholds",
)
_TIMING_KEYS = ("alpha", "min_samples")
_THRESHOLD_KEYS = ("abs", "rel")
_PCT_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*")


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _check_keys(table: Mapping[str, Any], allowed: Sequence[str], where: str, file: Path) -> None:
    for key in table:
        if key not in allowed:
            hint = _did_you_mean(key, allowed)
            raise ConfigError(
                f"{file}: unknown key {where}.{key} in the gate configuration",
                (hint + " " if hint else "") + "known keys: " + ", ".join(allowed),
            )


def _str(value: Any, where: str, file: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{file}: {where} must be a non-empty string (got {value!r})", None)
    return value


def _launch_text(value: Any, where: str, file: Path) -> str:
    """grid/block/dynamic_smem: a string, an integer, or a list of integers (as in specs)."""
    if isinstance(value, bool):
        raise ConfigError(f"{file}: {where} must be a string or a number", 'e.g. "256"')
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list) and value and all(isinstance(v, int | str) for v in value):
        return ",".join(str(v) for v in value)
    return _str(value, where, file)


def _str_list(value: Any, where: str, file: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{file}: {where} must be a list of strings (got {value!r})", None)
    return tuple(value)


def _metric_list(value: Any, where: str, file: Path) -> tuple[str, ...]:
    names = _str_list(value, where, file)
    if not names:
        raise ConfigError(f"{file}: {where} is empty", "list at least one metric")
    for n in names:
        if n not in METRICS:
            hint = _did_you_mean(n, METRICS)
            raise ConfigError(
                f"{file}: {where} names an unknown metric {n!r}",
                (hint + " " if hint else "") + "metrics: " + ", ".join(METRICS),
            )
    return tuple(dict.fromkeys(names))


def _bound(value: Any, where: str, file: Path, *, allow_pct: bool) -> float:
    if isinstance(value, str) and allow_pct:
        m = _PCT_RE.fullmatch(value)
        if m:
            return float(m.group(1)) / 100.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"{file}: {where} must be a number" + (' or a percentage ("5%")' if allow_pct else ""),
            f"got {value!r}",
        )
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{file}: {where} must be finite and >= 0 (got {value})", None)
    return float(value)


def _threshold(value: Any, where: str, file: Path) -> Threshold:
    """``8`` (abs), ``"10%"`` (rel) or ``{abs = 8, rel = 0.1}`` / ``{rel = "10%"}``."""
    if isinstance(value, str):
        return Threshold(rel=_bound(value, where, file, allow_pct=True))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Threshold(abs=_bound(value, where, file, allow_pct=False))
    if isinstance(value, dict):
        _check_keys(value, _THRESHOLD_KEYS, where, file)
        if not value:
            raise ConfigError(f"{file}: {where} is empty", "give abs, rel or both")
        a = value.get("abs")
        r = value.get("rel")
        return Threshold(
            None if a is None else _bound(a, f"{where}.abs", file, allow_pct=False),
            None if r is None else _bound(r, f"{where}.rel", file, allow_pct=True),
        )
    raise ConfigError(
        f"{file}: {where} must be a number (absolute), a percentage or a table {{abs, rel}}",
        f"got {value!r}",
    )


def _thresholds(value: Any, where: str, file: Path) -> dict[str, Threshold]:
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: {where} must be a table", "e.g. registers = { rel = 0.1 }")
    _check_keys(value, tuple(METRICS), where, file)
    return {k: _threshold(v, f"{where}.{k}", file) for k, v in value.items()}


def _kv_list(value: Any, where: str, file: Path) -> tuple[str, ...]:
    """``[args]``/``[buffers]`` tables as the CLI's ``name=value`` strings."""
    if not isinstance(value, dict):
        raise ConfigError(f"{file}: {where} must be a table", "e.g. { n = 4194304 }")
    out = []
    for k, v in value.items():
        if isinstance(v, bool):
            text = "true" if v else "false"
        elif isinstance(v, int | float | str):
            text = str(v)
        else:
            raise ConfigError(
                f"{file}: {where}.{k} must be a number, true/false or a string", f"got {v!r}"
            )
        out.append(f"{k}={text}")
    return tuple(out)


def _path(value: Any, where: str, file: Path, base: Path) -> Path:
    p = Path(_str(value, where, file)).expanduser()
    return (p if p.is_absolute() else base / p).resolve()


def _kernel_base(kernel: str) -> str:
    return kernel.split("<", 1)[0].strip().rsplit("::", 1)[-1]


def parse_gate_config(table: Mapping[str, Any], *, path: Path, prefix: str = "gate") -> GateConfig:
    """Check and normalise a ``[gate]`` table read from ``path`` (paths relative to its folder).

    ``prefix`` (``gate`` or ``tool.gpuadvise.gate``) names the table in error messages.
    """
    file = path
    base = path.parent.resolve()
    if not isinstance(table, Mapping):
        raise ConfigError(f"{file}: {prefix} must be a table", None)
    _check_keys(table, _GATE_KEYS, prefix, file)
    metrics = (
        _metric_list(table["metrics"], f"{prefix}.metrics", file)
        if "metrics" in table
        else tuple(METRICS)
    )
    thresholds = (
        _thresholds(table["thresholds"], f"{prefix}.thresholds", file)
        if "thresholds" in table
        else {}
    )
    timing = TimingSettings()
    if "timing" in table:
        t = table["timing"]
        if not isinstance(t, dict):
            raise ConfigError(f"{file}: {prefix}.timing must be a table", "e.g. alpha = 0.01")
        _check_keys(t, _TIMING_KEYS, f"{prefix}.timing", file)
        alpha = t.get("alpha", timing.alpha)
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5:
            raise ConfigError(
                f"{file}: {prefix}.timing.alpha must be between 0 and 0.5 (got {alpha!r})",
                "e.g. 0.01",
            )
        n = t.get("min_samples", timing.min_samples)
        if isinstance(n, bool) or not isinstance(n, int) or n < 3:
            raise ConfigError(
                f"{file}: {prefix}.timing.min_samples must be an integer >= 3 (got {n!r})",
                "e.g. 10",
            )
        timing = TimingSettings(float(alpha), n)
    gpu = _str(table["gpu"], f"{prefix}.gpu", file) if "gpu" in table else None
    arch = _str(table["arch"], f"{prefix}.arch", file) if "arch" in table else None
    baseline = _path(table.get("baseline", DEFAULT_BASELINE), f"{prefix}.baseline", file, base)

    raw_cases = table.get("cases")
    if raw_cases is None:
        raise ConfigError(
            f"{file}: {prefix} has no cases",
            f"add [[{prefix}.cases]] tables with source, kernel and launch (or spec)",
        )
    if not isinstance(raw_cases, list) or not all(isinstance(c, dict) for c in raw_cases):
        raise ConfigError(
            f"{file}: {prefix}.cases must be an array of tables", f"write [[{prefix}.cases]]"
        )
    cases: list[GateCase] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_cases):
        where = f"{prefix}.cases[{i}]"
        _check_keys(raw, _CASE_KEYS, where, file)
        source = _path(raw["source"], f"{where}.source", file, base) if "source" in raw else None
        spec = _path(raw["spec"], f"{where}.spec", file, base) if "spec" in raw else None
        if source is None and spec is None:
            raise ConfigError(
                f"{file}: {where} has neither source nor spec",
                'give source = "path/to/kernel.cu" (and kernel, grid, block) or spec',
            )
        kernel = _str(raw["kernel"], f"{where}.kernel", file) if "kernel" in raw else None
        if "name" in raw:
            name = _str(raw["name"], f"{where}.name", file)
        elif kernel:
            name = _kernel_base(kernel)
        elif source is not None:
            name = source.stem
        else:  # a spec: kernels/transpose/case.toml is "transpose"
            assert spec is not None
            name = spec.parent.name if spec.stem == "case" else spec.stem
        if name in seen:
            raise ConfigError(
                f"{file}: two gate cases are named {name!r}",
                'give each case a distinct name = "..."',
            )
        seen.add(name)
        case_thresholds = dict(thresholds)
        if "thresholds" in raw:
            case_thresholds.update(_thresholds(raw["thresholds"], f"{where}.thresholds", file))
        cases.append(
            GateCase(
                name=name,
                source=source,
                kernel=kernel,
                spec=spec,
                grid=_launch_text(raw["grid"], f"{where}.grid", file) if "grid" in raw else None,
                block=(
                    _launch_text(raw["block"], f"{where}.block", file) if "block" in raw else None
                ),
                dynamic_smem=(
                    _launch_text(raw["dynamic_smem"], f"{where}.dynamic_smem", file)
                    if "dynamic_smem" in raw
                    else None
                ),
                args=_kv_list(raw["args"], f"{where}.args", file) if "args" in raw else (),
                buffers=(
                    _kv_list(raw["buffers"], f"{where}.buffers", file) if "buffers" in raw else ()
                ),
                nvcc_flags=(
                    _str_list(raw["nvcc_flags"], f"{where}.nvcc_flags", file)
                    if "nvcc_flags" in raw
                    else ()
                ),
                metrics=(
                    _metric_list(raw["metrics"], f"{where}.metrics", file)
                    if "metrics" in raw
                    else metrics
                ),
                thresholds=case_thresholds,
                gpu=gpu,
                arch=arch,
            )
        )
    if not cases:
        raise ConfigError(f"{file}: {prefix}.cases is empty", "add at least one case")
    return GateConfig(
        path=path,
        root=base,
        cases=tuple(cases),
        baseline=baseline,
        metrics=metrics,
        thresholds=thresholds,
        timing=timing,
        gpu=gpu,
        arch=arch,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist", "check the --config path") from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read ({err.strerror})", None) from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text", "save it as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path} is not valid TOML ({err})", "fix it") from None


def _gate_table(path: Path, data: Mapping[str, Any]) -> tuple[Any, str] | None:
    """The gate table of a parsed file and its dotted name, or None when it has none."""
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        gpa = tool.get("gpuadvise") if isinstance(tool, dict) else None
        if isinstance(gpa, dict) and "gate" in gpa:
            return gpa["gate"], "tool.gpuadvise.gate"
        return None
    if "gate" in data:
        return data["gate"], "gate"
    return None


def find_gate_config(start: Path) -> Path | None:
    """Walk up from ``start``: in each folder ``gpuadvise.toml`` with ``[gate]``, then
    ``pyproject.toml`` with ``[tool.gpuadvise.gate]``. The first match wins; None if none.

    The walk stops at the root of the git repository holding ``start`` (a folder with
    ``.git``), so that a configuration above the repository (in a home folder) is never used.
    """
    here = start.resolve()
    for folder in (here, *here.parents):
        for name in ("gpuadvise.toml", "pyproject.toml"):
            candidate = folder / name
            if candidate.is_file() and _gate_table(candidate, _read_toml(candidate)) is not None:
                return candidate
        if (folder / ".git").exists():
            break
    return None


def load_gate_config(path: Path | None = None, *, start: Path | None = None) -> GateConfig:
    """Read the gate configuration: ``path`` (``--config``), else the one found from ``start``
    (default: the current directory) upwards."""
    if path is None:
        found = find_gate_config(start or Path.cwd())
        if found is None:
            raise ConfigError(
                f"no gate configuration found in {start or Path.cwd()} or above "
                "(looked for [gate] in gpuadvise.toml and [tool.gpuadvise.gate] in pyproject.toml)",
                "add one (see docs/ci-example.md) or pass --config FILE",
            )
        path = found
    path = Path(path)
    data = _read_toml(path)
    got = _gate_table(path, data)
    if got is None:
        wanted = "[tool.gpuadvise.gate]" if path.name == "pyproject.toml" else "[gate]"
        raise ConfigError(f"{path} has no {wanted} table", "add one (see docs/ci-example.md)")
    table, prefix = got
    return parse_gate_config(table, path=path.resolve(), prefix=prefix)


def rebase_case(case: GateCase, old_root: Path, new_root: Path) -> GateCase:
    """``case`` with its paths under ``old_root`` moved under ``new_root`` (a checkout of the
    baseline revision). Paths outside ``old_root`` are kept: they are not versioned with it."""
    old = old_root.resolve()

    def move(p: Path | None) -> Path | None:
        if p is None:
            return None
        try:
            return new_root / p.resolve().relative_to(old)
        except ValueError:
            return p

    return replace(case, source=move(case.source), spec=move(case.spec))


# ---------------------------------------------------------------------------------------------
# The provider (metric collection, supplied from outside) and environments.


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


# ---------------------------------------------------------------------------------------------
# Comparisons.


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
        shown += f" ({m.format_delta(delta)}" + (f", {_pct(rel)})" if math.isfinite(rel) else ")")
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
    settings: TimingSettings = TimingSettings(),
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
    shown = f"median {_ms(med_a)} → {_ms(med_b)} ({_pct(change)})"
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
            reason=f"{shown}: within ±{limit * 100:.3g}% (interval {_pct(lo)} to {_pct(hi)}; "
            f"{stats_text})",
        )
    return replace(
        out,
        reason=f"{shown}, but the interval {_pct(lo)} to {_pct(hi)} reaches beyond "
        f"±{limit * 100:.3g}% ({stats_text}): take more samples or reduce the noise",
    )


# ---------------------------------------------------------------------------------------------
# Baselines.


@dataclass(frozen=True)
class CaseBaseline:
    """One case's recorded numbers: static values (None: unavailable) and timing samples."""

    metrics: Mapping[str, float | None] = field(default_factory=dict)
    timing: TimingStats | None = None
    kernel: str | None = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "source": self.source,
            "metrics": dict(self.metrics),
            "timing": None if self.timing is None else self.timing.to_dict(),
        }


@dataclass(frozen=True)
class Baseline:
    """A baseline file: per-case numbers and what they were produced with.

    ``environment`` is that of the static metrics (toolchain, static device model),
    ``timing_environment`` that of the stored timings (the GPU, its driver); either is None when
    no such numbers were recorded.
    """

    cases: Mapping[str, CaseBaseline]
    environment: Environment | None = None
    timing_environment: Environment | None = None
    created: str = ""
    source_rev: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": BASELINE_SCHEMA_VERSION,
            "kind": BASELINE_KIND,
            "created": self.created,
            "source_rev": self.source_rev,
            "environment": None if self.environment is None else self.environment.to_dict(),
            "timing_environment": (
                None if self.timing_environment is None else self.timing_environment.to_dict()
            ),
            "cases": {name: c.to_dict() for name, c in self.cases.items()},
        }


_REGEN = "re-create it with `gpuadvise gate --update-baseline`, or restore it from git"


def baseline_from_json(text: str, where: str = "baseline") -> Baseline:
    """Parse and check a baseline document; any problem is a one-line :class:`BaselineError`."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise BaselineError(f"baseline {where} is corrupt (not JSON: {err})", _REGEN) from None
    if not isinstance(doc, dict) or doc.get("kind") != BASELINE_KIND:
        raise BaselineError(f"{where} is not a gpuadvise gate baseline", _REGEN)
    version = doc.get("schema_version")
    if version != BASELINE_SCHEMA_VERSION:
        raise BaselineError(
            f"baseline {where} has schema_version {version!r}; gpuadvise {__version__} reads "
            f"schema_version {BASELINE_SCHEMA_VERSION}",
            "re-create it with `gpuadvise gate --update-baseline` (or use the gpuadvise "
            "version that wrote it)",
        )
    at = "cases"
    try:
        cases: dict[str, CaseBaseline] = {}
        raw_cases = doc["cases"]
        if not isinstance(raw_cases, dict):
            raise TypeError("cases must be an object")
        for name, c in raw_cases.items():
            at = f"cases.{name}"
            if not isinstance(c, dict):
                raise TypeError("must be an object")
            values: dict[str, float | None] = {}
            raw_metrics = c.get("metrics", {})
            if not isinstance(raw_metrics, dict):
                raise TypeError("metrics must be an object")
            for metric, v in raw_metrics.items():
                at = f"cases.{name}.metrics.{metric}"
                if v is not None and (
                    isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
                ):
                    raise TypeError(f"{v!r} is not a number")
                values[metric] = None if v is None else float(v)
            at = f"cases.{name}.timing"
            t = c.get("timing")
            timing = None if t is None else TimingStats.from_dict(t)
            if timing is not None and len(timing.samples_ms) != timing.n:
                raise ValueError("n does not match the samples")
            cases[name] = CaseBaseline(values, timing, c.get("kernel"), c.get("source"))
        at = "environment"
        env = doc.get("environment")
        environment = None if env is None else Environment.from_dict(env)
        at = "timing_environment"
        tenv = doc.get("timing_environment")
        timing_environment = None if tenv is None else Environment.from_dict(tenv)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        detail = f"missing {err}" if isinstance(err, KeyError) else str(err)
        raise BaselineError(f"baseline {where} is corrupt at {at} ({detail})", _REGEN) from None
    return Baseline(
        cases=cases,
        environment=environment,
        timing_environment=timing_environment,
        created=str(doc.get("created", "")),
        source_rev=doc.get("source_rev"),
    )


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file (:class:`BaselineError` when missing, unreadable or corrupt)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(
            f"no baseline at {path}",
            "record one with `gpuadvise gate --update-baseline` (on the main branch), or "
            "compare with the base revision: --baseline-ref REV",
        ) from None
    except OSError as err:
        raise BaselineError(f"baseline {path} cannot be read ({err.strerror})", None) from None
    except UnicodeDecodeError:
        raise BaselineError(f"baseline {path} is corrupt (not UTF-8 text)", _REGEN) from None
    return baseline_from_json(text, str(path))


def dump_baseline(baseline: Baseline) -> str:
    return json.dumps(baseline.to_dict(), indent=2, allow_nan=False) + "\n"


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically and durably (:func:`gpuadvise.fileio.write_atomic`)."""
    write_atomic(path, text, durable=True)


def write_baseline(path: Path, baseline: Baseline) -> None:
    """Write ``baseline`` to ``path`` atomically (:func:`write_text_atomic`)."""
    write_text_atomic(path, dump_baseline(baseline))


def merge_baseline(
    previous: Baseline | None, new: Baseline, *, static: bool, timed: bool
) -> Baseline:
    """``new`` with the parts it did not measure taken from ``previous``.

    A CPU job that records only static metrics keeps the timings a GPU job recorded, and the
    other way round. Cases not in ``new`` (no longer configured) are dropped.
    """
    if previous is None or (static and timed):
        return new
    cases = {}
    for name, c in new.cases.items():
        old = previous.cases.get(name)
        metrics = c.metrics if static else (old.metrics if old else {})
        timing = c.timing if timed else (old.timing if old else None)
        cases[name] = replace(c, metrics=dict(metrics), timing=timing)
    return replace(
        new,
        cases=cases,
        environment=new.environment if static else previous.environment,
        timing_environment=new.timing_environment if timed else previous.timing_environment,
    )


# ---------------------------------------------------------------------------------------------
# Running the gate (with an injected provider; no I/O here).


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _static_values(
    values: Mapping[str, MetricValue], metric: str
) -> tuple[float | None, str | None]:
    """(value, why it is missing) of one metric in a provider's answer."""
    if metric not in values:
        return None, "not reported by the metrics provider"
    v = values[metric]
    if v is None:
        return None, "not available (the model cannot evaluate this kernel)"
    if isinstance(v, Unavailable):
        return None, f"not available ({v.reason})"
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise GateError(f"the metrics provider returned {v!r} for {metric}", "a bug: report it")
    return float(v), None


def _want(gates: Gates) -> tuple[bool, bool]:
    if gates not in ("all", "static", "timed"):
        raise UsageError(f"unknown gates {gates!r}", "use all, static or timed")
    return gates in ("all", "static"), gates in ("all", "timed")


def _no_gpu(gates: Gates) -> str:
    if gates == "timed":
        raise UsageError(
            "timed gates need a GPU, and none was found",
            "run on a GPU runner, or gate with --gates static",
        )
    return "no GPU on this machine: timed gates need one (static gates ran)"


def _env_notes(
    old: Environment | None, new: Environment, what: str, keys: Sequence[str]
) -> list[str]:
    if old is None:
        return []
    notes = []
    for key in keys:
        a, b = getattr(old, key), getattr(new, key)
        if a and b and a != b:
            label = {"static_model": "device model", "gpuadvise": "gpuadvise"}.get(key, key)
            notes.append(f"{what} were recorded with {label} {a}; this run uses {b}")
    return notes


def evaluate_gate(
    config: GateConfig,
    provider: MetricsProvider,
    *,
    baseline: Baseline | None = None,
    baseline_cases: Mapping[str, GateCase | None] | None = None,
    baseline_ref: str | None = None,
    baseline_path: str | None = None,
    gates: Gates = "all",
    strict: bool = False,
    locate: Callable[[GateCase], tuple[str | None, int | None]] | None = None,
) -> GateResult:
    """Compare every case of ``config`` with its baseline; one :class:`Comparison` per metric.

    Give either ``baseline`` (a stored file) or ``baseline_cases`` (each case as it is in a
    checkout of ``baseline_ref``, None where it does not exist there). ``locate`` gives a case's
    kernel file (repository-relative) and line, for the reports.
    """
    if (baseline is None) == (baseline_cases is None):
        raise ValueError("give exactly one of baseline and baseline_cases")
    want_static, want_timed = _want(gates)
    env = provider.environment()
    warnings: list[str] = []
    timed_skip: str | None = None
    if want_timed and env.device is None and any("time" in c.metrics for c in config.cases):
        timed_skip = _no_gpu(gates)
    static_env: str | None = None
    timed_env: str | None = None
    if baseline is not None:
        if baseline.environment is not None and want_static:
            old_model, new_model = baseline.environment.static_model, env.static_model
            if old_model and new_model and old_model != new_model:
                static_env = (
                    f"the baseline was modelled for {old_model} and this run for {new_model}"
                )
            warnings += _env_notes(
                baseline.environment, env, "static baselines", ("static_model", "toolchain")
            )
        if baseline.timing_environment is not None and want_timed and env.device is not None:
            old_dev = baseline.timing_environment.device
            if old_dev and old_dev != env.device:
                timed_env = (
                    f"the stored samples were timed on {old_dev} and this run is on {env.device}"
                )
            warnings += _env_notes(
                baseline.timing_environment,
                env,
                "stored timings",
                ("device", "driver", "toolchain", "gpuadvise"),
            )
    comparisons: list[Comparison] = []
    for case in config.cases:
        file, line = locate(case) if locate else (None, None)
        found: list[Comparison] = []
        static_metrics = [m for m in case.metrics if METRICS[m].kind == "static"]
        if want_static and static_metrics:
            found += _static_case(
                case, static_metrics, provider, baseline, baseline_cases, baseline_ref, static_env
            )
        if want_timed and "time" in case.metrics:
            found += _timed_case(
                case,
                provider,
                baseline,
                baseline_cases,
                baseline_ref,
                config.timing,
                timed_skip,
                timed_env,
            )
        comparisons += [
            replace(c, kernel=case.kernel, file=file, line=line, threshold=case.threshold(c.metric))
            for c in found
        ]
    return GateResult(
        comparisons=tuple(comparisons),
        environment=env,
        baseline_environment=None if baseline is None else baseline.environment,
        timing_baseline_environment=None if baseline is None else baseline.timing_environment,
        warnings=tuple(dict.fromkeys(warnings)),
        mode="stored" if baseline is not None else "ref",
        baseline_ref=baseline_ref,
        baseline_path=baseline_path,
        strict=strict,
        gates=gates,
    )


def _missing_from_ref(ref: str | None) -> str:
    return f"new case: its files do not exist at {ref or 'the baseline revision'}"


def _static_case(
    case: GateCase,
    metrics: Sequence[str],
    provider: MetricsProvider,
    baseline: Baseline | None,
    baseline_cases: Mapping[str, GateCase | None] | None,
    ref: str | None,
    env_reason: str | None,
) -> list[Comparison]:
    def all_as(verdict: Verdict, reason: str) -> list[Comparison]:
        return [Comparison(case.name, m, verdict, reason) for m in metrics]

    base_values: Mapping[str, MetricValue]
    if baseline is not None:
        stored = baseline.cases.get(case.name)
        if stored is None:
            return all_as(
                Verdict.SKIPPED,
                "no baseline for this case: record one with `gpuadvise gate --update-baseline`",
            )
        base_values = stored.metrics
    else:
        assert baseline_cases is not None
        base_case = baseline_cases.get(case.name)
        if base_case is None:
            return all_as(Verdict.SKIPPED, _missing_from_ref(ref))
        try:
            base_values = provider.static_metrics(base_case)
        except GpuAdviseError as exc:
            return all_as(Verdict.ERROR, f"at {ref or 'the baseline revision'}: {exc.one_line()}")
    try:
        current = provider.static_metrics(case)
    except GpuAdviseError as exc:
        return all_as(Verdict.ERROR, exc.one_line())
    out = []
    for m in metrics:
        try:
            b, b_why = _static_values(base_values, m)
            c, c_why = _static_values(current, m)
        except GateError as exc:
            out.append(Comparison(case.name, m, Verdict.ERROR, exc.one_line()))
            continue
        if b is None and baseline is not None and m not in base_values:
            out.append(Comparison(case.name, m, Verdict.SKIPPED, "not in the baseline", None, c))
            continue
        if b is None or c is None:
            why = c_why if c is None else f"baseline {b_why}"
            out.append(Comparison(case.name, m, Verdict.SKIPPED, why or "not available", b, c))
            continue
        out.append(compare_static(case.name, m, b, c, case.threshold(m), env_reason=env_reason))
    return out


def _timed_case(
    case: GateCase,
    provider: MetricsProvider,
    baseline: Baseline | None,
    baseline_cases: Mapping[str, GateCase | None] | None,
    ref: str | None,
    settings: TimingSettings,
    skip: str | None,
    env_reason: str | None,
) -> list[Comparison]:
    if skip:
        return [Comparison(case.name, "time", Verdict.SKIPPED, skip, mode="skipped")]
    thr = case.threshold("time")
    if baseline is not None:
        stored = baseline.cases.get(case.name)
        if stored is None or stored.timing is None:
            why = (
                "no baseline for this case"
                if stored is None
                else "the baseline has no timings (recorded without a GPU?)"
            )
            return [
                Comparison(
                    case.name,
                    "time",
                    Verdict.SKIPPED,
                    f"{why}: record them with `gpuadvise gate --update-baseline` on a GPU, "
                    "or compare with --baseline-ref REV",
                    mode="stored",
                )
            ]
        try:
            samples = provider.timings(case, None, min_samples=settings.min_samples)
        except GpuAdviseError as exc:
            return [Comparison(case.name, "time", Verdict.ERROR, exc.one_line(), mode="stored")]
        return [
            compare_timed(
                case.name,
                stored.timing.samples_ms,
                samples.candidate_ms,
                thr,
                settings,
                mode="stored",
                env_reason=env_reason,
            )
        ]
    assert baseline_cases is not None
    base_case = baseline_cases.get(case.name)
    if base_case is None:
        return [Comparison(case.name, "time", Verdict.SKIPPED, _missing_from_ref(ref), mode="a/b")]
    try:
        samples = provider.timings(case, base_case, min_samples=settings.min_samples)
    except GpuAdviseError as exc:
        return [Comparison(case.name, "time", Verdict.ERROR, exc.one_line(), mode="a/b")]
    if samples.baseline_ms is None:
        return [
            Comparison(
                case.name,
                "time",
                Verdict.ERROR,
                "the metrics provider returned no samples of the baseline revision",
                mode="a/b",
            )
        ]
    return [
        compare_timed(
            case.name, samples.baseline_ms, samples.candidate_ms, thr, settings, mode="a/b"
        )
    ]


def measure_baseline(
    config: GateConfig,
    provider: MetricsProvider,
    *,
    gates: Gates = "all",
    previous: Baseline | None = None,
    source_rev: str | None = None,
    created: str | None = None,
) -> tuple[Baseline, list[str]]:
    """Measure every case for a new baseline (merged with ``previous`` for the parts not
    measured: see :func:`merge_baseline`). Returns the baseline and notes for the user.

    A case that fails to compile or run aborts the update (:class:`GateError`): a baseline with
    holes would silently skip gates later.
    """
    want_static, want_timed = _want(gates)
    env = provider.environment()
    notes: list[str] = []
    wants_time = any("time" in c.metrics for c in config.cases)
    if want_timed and wants_time and env.device is None:
        kept = " (the previous ones are kept)" if previous is not None else ""
        notes.append(_no_gpu(gates) + "; timings not recorded" + kept)
        want_timed = False
    cases: dict[str, CaseBaseline] = {}
    for case in config.cases:
        values: dict[str, float | None] = {}
        timing: TimingStats | None = None
        try:
            statics = [m for m in case.metrics if METRICS[m].kind == "static"]
            if want_static and statics:
                got = provider.static_metrics(case)
                for m in statics:
                    values[m], why = _static_values(got, m)
                    if why:
                        notes.append(f"{case.name}: {m} {why}; recorded as unavailable")
            if want_timed and "time" in case.metrics:
                samples = provider.timings(case, None, min_samples=config.timing.min_samples)
                if len(samples.candidate_ms) < config.timing.min_samples:
                    notes.append(
                        f"{case.name}: only {len(samples.candidate_ms)} timing samples recorded "
                        f"(timed gates need {config.timing.min_samples})"
                    )
                timing = summarize(samples.candidate_ms)
        except GpuAdviseError as exc:
            raise GateError(
                f"cannot record the baseline of case {case.name!r}: {exc.message}", exc.hint
            ) from exc
        cases[case.name] = CaseBaseline(
            values,
            timing,
            case.kernel,
            None if case.source is None else _rel(case.source, config.root),
        )
    new = Baseline(
        cases=cases,
        environment=replace(env, device=None, driver=None) if want_static else None,
        timing_environment=env if want_timed else None,
        created=created or _now(),
        source_rev=source_rev,
    )
    return merge_baseline(previous, new, static=want_static, timed=want_timed), notes


def _rel(p: Path, root: Path) -> str:
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(p)


# ---------------------------------------------------------------------------------------------
# The result and what renderers need from it.


@dataclass(frozen=True)
class GateResult:
    """Every comparison of a gate run, and the context the reports state."""

    comparisons: tuple[Comparison, ...]
    environment: Environment = Environment()
    baseline_environment: Environment | None = None
    timing_baseline_environment: Environment | None = None
    warnings: tuple[str, ...] = ()
    mode: str = "stored"  # stored | ref
    baseline_ref: str | None = None
    baseline_path: str | None = None
    strict: bool = False
    gates: str = "all"

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in VERDICT_ORDER}
        for c in self.comparisons:
            out[c.verdict.value] += 1
        return out

    def failed(self) -> bool:
        """Whether the gate fails: a regression, or (``strict``) an ambiguous verdict."""
        counts = self.counts()
        return counts["regression"] > 0 or (self.strict and counts["ambiguous"] > 0)

    def exit_code(self) -> int:
        """2 when a case could not be evaluated (error), 1 when the gate failed, else 0."""
        if self.counts()["error"]:
            return 2
        return 1 if self.failed() else 0

    def to_dict(self) -> dict[str, Any]:
        def env(e: Environment | None) -> dict[str, Any] | None:
            return None if e is None else e.to_dict()

        return {
            "schema_version": RESULT_SCHEMA_VERSION,
            "kind": RESULT_KIND,
            "gpuadvise": __version__,
            "mode": self.mode,
            "gates": self.gates,
            "strict": self.strict,
            "baseline_ref": self.baseline_ref,
            "baseline_path": self.baseline_path,
            "summary": self.counts(),
            "failed": self.failed(),
            "exit_code": self.exit_code(),
            "environment": env(self.environment),
            "baseline_environment": env(self.baseline_environment),
            "timing_baseline_environment": env(self.timing_baseline_environment),
            "warnings": list(self.warnings),
            "comparisons": [c.to_dict() for c in self.comparisons],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GateResult:
        if d.get("kind") != RESULT_KIND or d.get("schema_version") != RESULT_SCHEMA_VERSION:
            raise ConfigError("not a gpuadvise gate result (schema_version 1)", None)

        def env(key: str) -> Environment | None:
            v = d.get(key)
            return None if v is None else Environment.from_dict(v)

        return cls(
            comparisons=tuple(Comparison.from_dict(c) for c in d["comparisons"]),
            environment=env("environment") or Environment(),
            baseline_environment=env("baseline_environment"),
            timing_baseline_environment=env("timing_baseline_environment"),
            warnings=tuple(d.get("warnings", ())),
            mode=str(d.get("mode", "stored")),
            baseline_ref=d.get("baseline_ref"),
            baseline_path=d.get("baseline_path"),
            strict=bool(d.get("strict", False)),
            gates=str(d.get("gates", "all")),
        )


def summary_line(result: GateResult) -> str:
    """``FAILED: 1 regression, 2 ambiguous, 10 same`` (verdicts with a count, most serious
    first)."""
    counts = result.counts()
    parts = [f"{n} {v}" for v, n in counts.items() if n]
    if counts["error"]:
        head = "ERROR"
    elif result.failed():
        head = "FAILED"
    else:
        head = "PASSED"
    against = (
        f"against {result.baseline_ref}"
        if result.mode == "ref"
        else f"against {result.baseline_path or 'the stored baseline'}"
    )
    return f"{head}: {', '.join(parts) or 'nothing gated'} ({against})"


@dataclass(frozen=True)
class GateRow:
    """One row of the gate table, as text cells, with its verdict (for colours and icons)."""

    case: str
    metric: str
    baseline: str
    current: str
    change: str
    threshold: str
    verdict: Verdict
    reason: str

    def cells(self) -> tuple[str, ...]:
        return (
            self.case,
            self.metric,
            self.baseline,
            self.current,
            self.change,
            self.threshold,
            self.verdict.value,
            self.reason,
        )


@dataclass(frozen=True)
class GateTable:
    headers: tuple[str, ...]
    rows: tuple[GateRow, ...]
    align: tuple[str, ...]


def _change_text(c: Comparison) -> str:
    m = METRICS.get(c.metric)
    if m is None or c.change_abs is None:
        return ""
    if c.metric == "time":
        return _pct(c.change_rel) if c.change_rel is not None else ""
    if c.change_abs == 0:
        return "0"
    text = m.format_delta(c.change_abs)
    if c.change_rel is not None and m.unit != "fraction":
        text += f" ({_pct(c.change_rel)})"
    return text


def gate_table(result: GateResult) -> GateTable:
    """The gate table, renderer-free: the terminal and Markdown writers draw it."""
    rows = []
    for c in result.comparisons:
        m = METRICS.get(c.metric)
        rows.append(
            GateRow(
                case=c.case,
                metric=c.metric,
                baseline=format_value(c.metric, c.baseline),
                current=format_value(c.metric, c.current),
                change=_change_text(c),
                threshold=c.threshold.describe(m) if (c.threshold and m) else "",
                verdict=c.verdict,
                reason=c.reason,
            )
        )
    return GateTable(
        headers=("case", "metric", "baseline", "current", "change", "threshold", "verdict", "why"),
        rows=tuple(rows),
        align=("l", "l", "r", "r", "r", "l", "l", "l"),
    )


# Report items (SARIF, JUnit, GitHub): level and test outcome per verdict.
_LEVEL: dict[Verdict, Level] = {
    Verdict.REGRESSION: "error",
    Verdict.ERROR: "error",
    Verdict.AMBIGUOUS: "warning",
    Verdict.SKIPPED: "note",
    Verdict.IMPROVEMENT: "none",
    Verdict.SAME: "none",
}
_OUTCOME: dict[Verdict, Outcome] = {
    Verdict.REGRESSION: "fail",
    Verdict.ERROR: "error",
    Verdict.AMBIGUOUS: "skip",
    Verdict.SKIPPED: "skip",
    Verdict.IMPROVEMENT: "pass",
    Verdict.SAME: "pass",
}


def report_items(result: GateResult) -> list[ReportItem]:
    """One :class:`~gpuadvise.report.sarif.ReportItem` per comparison.

    Levels: regression and error -> ``error``, ambiguous -> ``warning``, skipped -> ``note``,
    improvement and same -> ``none``. JUnit outcomes: regression -> failure, error -> error,
    skipped -> skipped, and ambiguous -> skipped with an ``ambiguous:`` message (visible, but not
    a failure, as the exit code is 0), or -> failure under ``--strict`` (where it fails the gate).
    """
    from gpuadvise.items import ReportItem

    items = []
    for c in result.comparisons:
        outcome: Outcome = _OUTCOME[c.verdict]
        if c.verdict is Verdict.AMBIGUOUS and result.strict:
            outcome = "fail"
        m = METRICS.get(c.metric)
        what = m.title if m else c.metric
        items.append(
            ReportItem(
                rule_id=c.rule_id,
                level=_LEVEL[c.verdict],
                message=f"{c.verdict.value}: {c.case} {what}: {c.reason}",
                file=c.file,
                line=c.line,
                title=f"{c.case}: {what} {c.verdict.value}",
                group=c.case,
                name=c.metric,
                outcome=outcome,
                properties={
                    "verdict": c.verdict.value,
                    "baseline": c.baseline,
                    "current": c.current,
                    "change_rel": c.change_rel,
                    "mode": c.mode,
                    "kernel": c.kernel,
                },
            )
        )
    return items


def report_rules() -> list[ReportRule]:
    """The SARIF rule descriptions of every gate metric (ids ``GATE-<metric>``)."""
    from gpuadvise.items import ReportRule

    return [
        ReportRule(
            id=m.rule_id,
            name="Gate" + "".join(w.capitalize() for w in m.name.split("_")),
            short_description=f"{m.title[:1].upper()}{m.title[1:]} regressed",
            full_description=m.description,
            help_text=(
                f"{m.description} Default threshold: {m.default.describe(m)}. Configure it in "
                f"[gate.thresholds] {m.name} = {{ abs = ..., rel = ... }}."
            ),
            default_level="error",
            tags=("performance", "gpuadvise-gate", m.kind),
        )
        for m in METRICS.values()
    ]
