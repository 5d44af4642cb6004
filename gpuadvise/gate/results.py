"""The result of a gate run, and what renderers need from it: the summary line, the table, and
report items (SARIF, JUnit, GitHub annotations). Formats nothing itself beyond cell text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuadvise import __version__
from gpuadvise.errors import ConfigError
from gpuadvise.gate.compare import VERDICT_ORDER, Comparison, Verdict
from gpuadvise.gate.provider import Environment
from gpuadvise.gate.thresholds import METRICS, format_value, pct_text

if TYPE_CHECKING:
    from gpuadvise.items import Level, Outcome, ReportItem, ReportRule

__all__ = [
    "RESULT_KIND",
    "RESULT_SCHEMA_VERSION",
    "GateResult",
    "GateRow",
    "GateTable",
    "gate_table",
    "report_items",
    "report_rules",
    "summary_line",
]

RESULT_SCHEMA_VERSION = 1
RESULT_KIND = "gpuadvise-gate-result"


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
            raise ConfigError(
                "not a gpuadvise gate result (schema_version 1)",
                "give the JSON that gpuadvise gate --format json wrote",
            )

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


# verdicts that are nouns (``2 regressions``); the others are adjectives (``2 same``)
_COUNTABLE = {"regression", "improvement", "error"}


def summary_line(result: GateResult) -> str:
    """``FAILED: 2 regressions, 2 ambiguous, 10 same`` (verdicts with a count, most serious
    first)."""
    counts = result.counts()
    parts = [f"{n} {v}{'s' if n != 1 and v in _COUNTABLE else ''}" for v, n in counts.items() if n]
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
        return pct_text(c.change_rel) if c.change_rel is not None else ""
    if c.change_abs == 0:
        return "0"
    text = m.format_delta(c.change_abs)
    if c.change_rel is not None and m.unit != "fraction":
        text += f" ({pct_text(c.change_rel)})"
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
