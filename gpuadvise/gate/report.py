"""The gate's report, built once: a :class:`~gpuadvise.report_types.GateReport` of a
:class:`~gpuadvise.gate.results.GateResult` (its JSON document, the table as text, the summary
line, the CI items and rules, the exit code, the Markdown footer's facts), which every gate
format renders (:mod:`gpuadvise.report.renderers`) without importing the gate."""

from __future__ import annotations

from typing import Any

from gpuadvise import __version__
from gpuadvise.errors import ConfigError
from gpuadvise.gate.compare import VERDICT_ORDER
from gpuadvise.gate.results import (
    RESULT_KIND,
    GateResult,
    gate_table,
    report_items,
    report_rules,
    summary_line,
)
from gpuadvise.report_types import (
    GATE_REPORT_KIND,
    AnalysisReport,
    BatchReport,
    GateReport,
    GateTableRow,
    NewerReportError,
)

__all__ = ["build_gate_report", "gate_report_from_data", "load_saved_report"]


def build_gate_report(result: GateResult) -> GateReport:
    """The report of ``result``, holding everything a gate format shows."""
    table = gate_table(result)
    env = result.environment
    facts = [f"gpuadvise {__version__}"]
    if env.static_model:
        facts.append(f"static model {env.static_model}")
    if env.device:
        facts.append(f"GPU {env.device}" + (f" (driver {env.driver})" if env.driver else ""))
    if env.toolchain:
        facts.append(f"CUDA {env.toolchain}")
    return GateReport(
        document=result.to_dict(),
        headers=table.headers,
        align=table.align,
        rows=tuple(GateTableRow(r.case, r.cells(), r.verdict.value) for r in table.rows),
        summary=summary_line(result),
        warnings=result.warnings,
        items=tuple(report_items(result)),
        rules=tuple(report_rules()),
        exit_code=result.exit_code(),
        facts=tuple(facts),
        verdict_order=tuple(v.value for v in VERDICT_ORDER),
    )


def gate_report_from_data(doc: Any) -> GateReport | None:
    """The gate report in parsed JSON ``doc``: a saved report (``gate --format report``) or a
    ``gate --format json`` document (its report built again); None when ``doc`` is neither
    (``ValueError``, or the gate's ``ConfigError``, for one of those kinds that does not read)."""
    if not isinstance(doc, dict):
        return None
    if doc.get("kind") == GATE_REPORT_KIND:
        return GateReport.from_dict(doc)
    if doc.get("kind") == RESULT_KIND:
        try:
            return build_gate_report(GateResult.from_dict(doc))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a gpuadvise gate result: {exc!r}") from None
    return None


def load_saved_report(path: str) -> AnalysisReport | BatchReport | GateReport:
    """The report in ``path`` for ``gpuadvise render``: the gate's (``gate --format report`` or
    ``--format json``), or an analysis's (:func:`gpuadvise.analyze.report.load_report`); a
    one-line :class:`ConfigError` for anything else."""
    from gpuadvise.analyze.report import read_report_json, report_from_data

    doc = read_report_json(path)
    try:
        gate = gate_report_from_data(doc)
    except NewerReportError as exc:
        raise ConfigError(f"report {path}: {exc}", "render it with a newer gpuadvise") from None
    except (ValueError, ConfigError) as exc:
        raise ConfigError(
            f"report {path} is not a gpuadvise gate report ({exc})",
            "give a file written by `gpuadvise gate --format json` (or --format report)",
        ) from None
    return gate if gate is not None else report_from_data(doc, path)
