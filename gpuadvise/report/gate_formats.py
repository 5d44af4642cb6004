"""The gate's machine formats, each ``render(report) -> str`` of a
:class:`~gpuadvise.report_types.GateReport` (registered in :mod:`gpuadvise.report.renderers`):
its JSON document, the whole report (``gate --format report``, which ``gpuadvise render`` reads
back), SARIF, JUnit, GitHub annotations and the Markdown summary."""

from __future__ import annotations

from gpuadvise.report_types import GateReport

__all__ = ["gate_github", "gate_json", "gate_junit", "gate_markdown", "gate_sarif", "saved_gate"]

_ICONS = {
    "regression": "❌ regression",
    "error": "💥 error",
    "ambiguous": "⚠️ ambiguous",
    "skipped": "⏭️ skipped",
    "improvement": "🚀 improvement",
    "same": "✅ same",
}


def gate_json(report: GateReport) -> str:
    """``gate --format json``: the gate's document (``kind`` gpuadvise-gate-result)."""
    from gpuadvise.report.json_report import dumps

    return dumps(dict(report.document), ensure_ascii=False) + "\n"


def saved_gate(report: GateReport) -> str:
    """``gate --format report``: the whole report (``gpuadvise render`` reads it back)."""
    from gpuadvise.report.json_report import dumps

    return dumps(report.to_dict())


def gate_markdown(report: GateReport) -> str:
    """The Markdown summary: status, warnings, the rows that matter, the unchanged ones folded."""
    from gpuadvise.report.markdown import md_summary

    head, _, rest = report.summary.partition(": ")
    icon = {"PASSED": "✅", "FAILED": "❌"}.get(head, "💥")
    rows: list[list[str]] = []
    folded: list[list[str]] = []
    verdict_column = report.headers.index("verdict")
    for row in report.rows:
        cells = list(row.cells)
        cells[verdict_column] = _ICONS.get(row.verdict, row.verdict)
        (folded if row.verdict == "same" else rows).append(cells)
    return md_summary(
        "gpuadvise gate",
        f"{icon} **{head}**: {rest}",
        notes=report.warnings,
        headers=report.headers,
        rows=rows,
        folded_rows=folded,
        folded_label=f"{len(folded)} unchanged",
        align=report.align,
        footer="<sub>" + ", ".join(report.facts) + "</sub>",
    )


def gate_sarif(report: GateReport) -> str:
    """``gate --format sarif``: a result per comparison, the metrics as rules."""
    from gpuadvise.report.sarif import sarif_dumps, sarif_log

    return sarif_dumps(
        sarif_log(
            report.items,
            rules=report.rules,
            notifications=report.warnings,
            automation_id="gpuadvise/gate/",
            execution_successful=report.exit_code != 2,
        )
    )


def gate_junit(report: GateReport) -> str:
    """``gate --format junit``: a test suite per case, a test per metric."""
    from gpuadvise.report.junit import junit_xml

    return junit_xml(report.items, name="gpuadvise gate", notes=report.warnings)


def gate_github(report: GateReport) -> str:
    """``gate --format github``: workflow annotations."""
    from gpuadvise.report.github import github_annotations

    return github_annotations(report.items, notes=report.warnings)
