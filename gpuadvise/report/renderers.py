"""The output formats of an analysis: one registry, each format ``render(report) -> str``
(:class:`~gpuadvise.report_types.AnalysisReport`), registered once here. The CLI's ``--format``
choices (``analyze``, ``render``) come from it.

``text`` is the terminal report (:mod:`gpuadvise.report.console`, as this terminal draws it);
each renderer is imported when used (a JSON run never imports jinja2 or rich)."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from gpuadvise.report_types import AnalysisReport, BatchReport

__all__ = ["ANALYSIS_FORMATS", "BATCH_FORMATS", "RENDERERS", "Renderer", "render"]

Renderer = Callable[[AnalysisReport], str]

# format -> "module:function" of its renderer, in the order the help and errors list them
RENDERERS: dict[str, str] = {
    "text": "gpuadvise.report.console:analysis_text",
    "json": "gpuadvise.report.json_report:analysis_json",
    "html": "gpuadvise.report.html:analysis_html",
    "sarif": "gpuadvise.report.findings_formats:sarif",
    "junit": "gpuadvise.report.findings_formats:junit",
    "github": "gpuadvise.report.findings_formats:github",
    "markdown": "gpuadvise.report.findings_formats:markdown",
    "report": "gpuadvise.report.json_report:saved_report",
}

ANALYSIS_FORMATS: tuple[str, ...] = tuple(RENDERERS)
"""``analyze --format`` choices: every registered renderer, the terminal's text first."""

BATCH_FORMATS: tuple[str, ...] = ANALYSIS_FORMATS
"""``analyze FOLDER --format`` choices (:func:`gpuadvise.report.batch_report.render_batch`):
the same formats, each covering every case (``report``: the whole BatchReport)."""


def renderer(fmt: str) -> Renderer:
    """The renderer of ``fmt`` (a KeyError for a format not registered)."""
    module, _, name = RENDERERS[fmt].partition(":")
    fn: Renderer = getattr(importlib.import_module(module), name)
    return fn


def render(fmt: str, report: AnalysisReport | BatchReport) -> str:
    """``report`` in format ``fmt`` (one of :data:`RENDERERS`): one analysis's, or a folder's
    (:func:`gpuadvise.report.batch_report.render_batch`)."""
    if isinstance(report, BatchReport):
        from gpuadvise.report.batch_report import render_batch

        return render_batch(fmt, report)
    return renderer(fmt)(report)
