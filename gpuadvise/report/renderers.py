"""The output formats: one registry, each format ``render(report) -> str``, registered once
here: an analysis's (:class:`~gpuadvise.report_types.AnalysisReport`; a folder's
:class:`~gpuadvise.report_types.BatchReport` in the same formats) and the gate's
(:class:`~gpuadvise.report_types.GateReport`). The CLI's ``--format`` choices (``analyze``,
``gate``, ``render``) come from it.

``text`` is the terminal report (:mod:`gpuadvise.report.console`, as this terminal draws it);
each renderer is imported when used (a JSON run never imports jinja2 or rich). The gate's
``text`` takes a ``color`` option (ANSI colours on a terminal)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the registry is read before the analysis (the CLI's --format checks):
    # the report types are imported when a report is rendered (issue 31: before nvcc starts)
    from gpuadvise.report_types import AnalysisReport, BatchReport, GateReport, ReportHeader

__all__ = [
    "ANALYSIS_FORMATS",
    "BATCH_FORMATS",
    "GATE_FORMATS",
    "GATE_RENDERERS",
    "HEADER_RENDERERS",
    "RENDERERS",
    "Renderer",
    "render",
    "render_gate",
    "render_header",
]

Renderer = Callable[["AnalysisReport"], str]
GateRenderer = Callable[..., str]

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


# format -> "module:function" of the renderer of its header (``render(header: ReportHeader) ->
# str``), for the formats whose output begins with it: ``analyze`` prints it before the trace
# and, at the end, the format's rendering of the report without it (they begin alike)
HEADER_RENDERERS: dict[str, str] = {
    "text": "gpuadvise.report.console:header_text",
}


def render_header(fmt: str, header: ReportHeader) -> str | None:
    """The beginning of ``fmt``'s rendering of any report with ``header`` (:data:`RENDERERS`),
    or None when ``fmt`` has none to print early (a machine format: printed whole, at the end)."""
    if fmt not in HEADER_RENDERERS:
        return None
    module, _, name = HEADER_RENDERERS[fmt].partition(":")
    fn: Callable[[ReportHeader], str] = getattr(importlib.import_module(module), name)
    return fn(header)


# gate format -> "module:function" of its renderer (``render(report: GateReport) -> str``)
GATE_RENDERERS: dict[str, str] = {
    "text": "gpuadvise.report.gate_text:render_gate_text",
    "json": "gpuadvise.report.gate_formats:gate_json",
    "sarif": "gpuadvise.report.gate_formats:gate_sarif",
    "junit": "gpuadvise.report.gate_formats:gate_junit",
    "github": "gpuadvise.report.gate_formats:gate_github",
    "markdown": "gpuadvise.report.gate_formats:gate_markdown",
    "html": "gpuadvise.report.html:gate_html",
    "report": "gpuadvise.report.gate_formats:saved_gate",
}

GATE_FORMATS: tuple[str, ...] = tuple(GATE_RENDERERS)
"""``gate --format`` choices."""

_COLOURED = frozenset({"text"})  # the gate formats that take ``color``


def renderer(fmt: str) -> Renderer:
    """The renderer of ``fmt`` (a KeyError for a format not registered)."""
    module, _, name = RENDERERS[fmt].partition(":")
    fn: Renderer = getattr(importlib.import_module(module), name)
    return fn


def render_gate(fmt: str, report: GateReport, *, color: bool = False) -> str:
    """The gate's ``report`` in format ``fmt`` (one of :data:`GATE_RENDERERS`; a KeyError for
    another); ``color``: ANSI colours, for the formats that have them (text)."""
    module, _, name = GATE_RENDERERS[fmt].partition(":")
    fn: GateRenderer = getattr(importlib.import_module(module), name)
    return fn(report, color=color) if fmt in _COLOURED else fn(report)


def render(fmt: str, report: AnalysisReport | BatchReport | GateReport) -> str:
    """``report`` in format ``fmt`` (one of :data:`RENDERERS`): one analysis's, a folder's
    (:func:`gpuadvise.report.batch_report.render_batch`) or the gate's (:func:`render_gate`)."""
    from gpuadvise.report_types import BatchReport, GateReport

    if isinstance(report, GateReport):
        return render_gate(fmt, report)
    if isinstance(report, BatchReport):
        from gpuadvise.report.batch_report import render_batch

        return render_batch(fmt, report)
    return renderer(fmt)(report)
