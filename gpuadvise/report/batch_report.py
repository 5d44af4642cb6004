"""``gpuadvise analyze FOLDER``: the machine formats of many cases (JSON, SARIF, JUnit, GitHub,
Markdown, HTML), each covering every case. Cases that failed are listed with their error (JSON,
HTML, Markdown) or as notifications/errors (SARIF, JUnit, GitHub)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

BATCH_SCHEMA_VERSION = 1


def _summary_row(rank: int, r: Any) -> dict[str, Any]:
    return {
        "rank": rank,
        "case": r.case.id,
        "kernel": None if r.result is None else r.result.analysis.kernel.name,
        "error": r.error,
        "findings": len(r.findings),
        "best_rule": r.best_rule,
        "best_line": r.best_line,
        "best_speedup": r.best_speedup,
        "kernel_ms": r.kernel_ms,
        "time_to_win_ms": r.time_to_win_ms,
        "basis": r.basis,
        "wall_s": round(r.wall_s, 3),
    }


def batch_json(results: Sequence[Any]) -> dict[str, Any]:
    from gpuadvise.analyze.batch import ranked
    from gpuadvise.report.json_report import analyze_json

    order = ranked(results)
    return {
        "schema_version": BATCH_SCHEMA_VERSION,
        "summary": [_summary_row(i, r) for i, r in enumerate(order, 1)],
        "cases": [
            {
                "case": r.case.id,
                "error": r.error,
                "analysis": None
                if r.result is None
                else analyze_json(r.result.analysis, r.result.rules),
            }
            for r in results
        ],
    }


def _items(results: Sequence[Any], root: str) -> tuple[list[Any], list[str]]:
    items: list[Any] = []
    notes: list[str] = []
    for r in results:
        if r.error is not None:
            notes.append(f"{r.case.id}: {r.error}")
            continue
        items += [f.to_report_item(root) for f in r.findings]
        notes += [f"{r.case.id}: {n}" for n in r.result.rules.notes]
    return items, notes


def render_batch(fmt: str, results: Sequence[Any], root: str | None = None) -> str:
    """``results``: CaseResults of gpuadvise.analyze.batch, in the cases' order."""
    root = root or os.getcwd()
    if fmt == "json":
        from gpuadvise.report.json_report import dumps

        return dumps(batch_json(results))
    if fmt == "html":
        from gpuadvise.report.html import batch_html

        return batch_html(batch_json(results), results)
    items, notes = _items(results, root)
    title = f"gpuadvise analyze: {len(results)} kernel case{'' if len(results) == 1 else 's'}"
    if fmt == "sarif":
        from gpuadvise.report.sarif import sarif_dumps, sarif_log
        from gpuadvise.rules import load_registry

        rules = [r.report_rule() for r in load_registry()]
        return sarif_dumps(sarif_log(items, rules=rules, notifications=notes))
    if fmt == "junit":
        from gpuadvise.report.junit import junit_xml

        return junit_xml(items, name=title, notes=notes)
    if fmt == "github":
        from gpuadvise.report.github import github_annotations

        return github_annotations(items, log=notes)
    if fmt == "markdown":
        from gpuadvise.report.markdown import items_markdown, md_table

        doc = batch_json(results)
        head = ["#", "case", "kernel", "findings", "top finding", "best", "time to win (ms)"]
        rows = [
            [
                str(s["rank"]),
                s["case"],
                s["kernel"] or "-",
                "error: " + s["error"] if s["error"] else str(s["findings"]),
                f"{s['best_rule']} line {s['best_line']}" if s["best_rule"] else "-",
                "-" if not s["best_speedup"] else f"{s['best_speedup']:.2f}x ({s['basis']})",
                "-" if s["time_to_win_ms"] is None else f"{s['time_to_win_ms']:.4g}",
            ]
            for s in doc["summary"]
        ]
        return md_table(head, rows) + "\n\n" + items_markdown(items, title=title, notes=notes)
    raise ValueError(fmt)
