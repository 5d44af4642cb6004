"""Running the gate with an injected provider (no I/O here): every case of a configuration
compared with its baseline (:func:`evaluate_gate`), or measured for a new baseline
(:func:`measure_baseline`).

*Static* gates run anywhere, GPU or not: registers per thread, local-memory spill bytes,
theoretical occupancy, shared-memory excess wavefronts (bank conflicts), global-memory excess
sectors (uncoalesced accesses) and the predicted L2 hit rate. *Timed* gates (metric ``time``, the
median kernel time) need a GPU. With ``--baseline-ref`` both revisions are compiled and timed A/B,
interleaved, in one job; otherwise the current samples are compared with the samples stored in
the baseline file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from gpuadvise.errors import GpuAdviseError, UsageError
from gpuadvise.gate.baseline import Baseline, CaseBaseline, merge_baseline
from gpuadvise.gate.compare import Comparison, Verdict, compare_static, compare_timed
from gpuadvise.gate.config import GateCase, GateConfig, TimingSettings
from gpuadvise.gate.provider import Environment, MetricsProvider, MetricValue, Unavailable
from gpuadvise.gate.results import GateResult
from gpuadvise.gate.thresholds import METRICS
from gpuadvise.runner.stats import TimingStats, summarize

__all__ = ["GateError", "Gates", "evaluate_gate", "measure_baseline"]

Gates = Literal["all", "static", "timed"]


class GateError(GpuAdviseError):
    """The gate could not run (a case failed to compile while recording a baseline ...)."""


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
