"""``gpuadvise analyze FOLDER``: the machine formats of many cases (JSON, SARIF, JUnit, GitHub,
Markdown, HTML), each covering every case, from the
:class:`~gpuadvise.report_types.BatchReport`. Cases that failed are listed with their error
(JSON, HTML, Markdown) or as notifications/errors (SARIF, JUnit, GitHub)."""

from __future__ import annotations

from typing import Any

from gpuadvise.items import ReportItem
from gpuadvise.report_types import BatchReport, relative_items

BATCH_SCHEMA_VERSION = 1


def batch_json(batch: BatchReport) -> dict[str, Any]:
    return {
        "schema_version": BATCH_SCHEMA_VERSION,
        "summary": [dict(s) for s in batch.summary],
        "cases": [
            {
                "case": c.case,
                "error": c.error,
                "analysis": None if c.report is None else dict(c.report.document),
            }
            for c in batch.cases
        ],
    }


def _items(batch: BatchReport, root: str | None) -> tuple[list[ReportItem], list[str]]:
    items: list[ReportItem] = []
    notes: list[str] = []
    for c in batch.cases:
        if c.error is not None or c.report is None:
            notes.append(f"{c.case}: {c.error}")
            continue
        report = c.report
        items += relative_items(report.items, root)
        lines = [report.incomplete] if report.incomplete else []
        notes += [f"{c.case}: {n}" for n in dict.fromkeys([*lines, *report.run_notes])]
    return items, notes


def render_batch(fmt: str, batch: BatchReport, root: str | None = None) -> str:
    """``batch`` in ``fmt``; ``root``: paths are made relative to it (default: cwd)."""
    if fmt == "text":
        from gpuadvise.report.console import batch_text

        return batch_text(batch)
    if fmt == "json":
        from gpuadvise.report.json_report import dumps

        return dumps(batch_json(batch))
    if fmt == "report":  # the whole report, which gpuadvise render reads back
        from gpuadvise.report.json_report import dumps

        return dumps(batch.to_dict())
    if fmt == "html":
        from gpuadvise.report.html import batch_html

        return batch_html(batch)
    items, notes = _items(batch, root)
    n = len(batch.cases)
    title = f"gpuadvise analyze: {n} kernel case{'' if n == 1 else 's'}"
    if fmt == "sarif":
        from gpuadvise.report.sarif import sarif_dumps, sarif_log

        return sarif_dumps(sarif_log(items, rules=list(batch.rules), notifications=notes))
    if fmt == "junit":
        from gpuadvise.report.junit import junit_xml

        return junit_xml(items, name=title, notes=notes)
    if fmt == "github":
        from gpuadvise.report.github import github_annotations

        return github_annotations(items, log=notes)
    if fmt == "markdown":
        from gpuadvise.report.markdown import items_markdown, md_table

        head = ["#", "case", "kernel", "findings", "top finding", "best", "time to win (ms)"]
        rows = [
            [
                str(s["rank"]),
                s["case"],
                s["kernel"] or "-",
                "error: " + s["error"]
                if s["error"]
                else str(s["findings"]) + (f" ({s['incomplete']})" if s["incomplete"] else ""),
                f"{s['best_rule']} line {s['best_line']}" if s["best_rule"] else "-",
                "-" if not s["best_speedup"] else f"{s['best_speedup']:.2f}x ({s['basis']})",
                "-" if s["time_to_win_ms"] is None else f"{s['time_to_win_ms']:.4g}",
            ]
            for s in batch.summary
        ]
        return md_table(head, rows) + "\n\n" + items_markdown(items, title=title, notes=notes)
    raise ValueError(fmt)
