"""The report as one object: what ``analyze`` hands to every output format.

An :class:`AnalysisReport` is built once, by ``gpuadvise.analyze.report.build_report`` (from a
live analysis) or ``report_from_document`` (from a saved ``analyze --json`` file), and holds
everything a format shows: the ``analyze --json`` document (schema_version 1, the one users
parse), the occupancy sweeps, the source lines the pages quote, the kernel's line range, the
findings as CI items and the rules SARIF lists. The renderers in :mod:`gpuadvise.report` read
only this object (``render(report) -> str``), so they never redo domain work (compute a model,
read or parse the user's source, load the rules), and a saved report re-renders
(``gpuadvise render``), like a profiler session.

It round-trips through JSON (:meth:`AnalysisReport.to_dict`, :meth:`AnalysisReport.from_dict`,
strict: anything that is not such a report is a ``ValueError``). This module sits low in the
layers and imports nothing of the domain, so that both the builders (analyze) and the renderers
(report) may import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuadvise.items import ReportItem, ReportRule

__all__ = [
    "BATCH_REPORT_KIND",
    "REPORT_KIND",
    "REPORT_VERSION",
    "SCHEMA_VERSION",
    "AnalysisReport",
    "BatchCase",
    "BatchReport",
    "GATE_REPORT_KIND",
    "GateReport",
    "GateTableRow",
    "NewerReportError",
    "ReportHeader",
    "RuleDoc",
    "relative_items",
]

SCHEMA_VERSION = 1
"""The JSON documents' ``schema_version`` (``analyze --json``, ``bench --json`` ...)."""

REPORT_VERSION = 1
"""The saved report's version (``report_version``): bumped when its shape changes."""

REPORT_KIND = "gpuadvise-analysis-report"
"""``kind`` of a saved report: what tells it from any other JSON file."""

BATCH_REPORT_KIND = "gpuadvise-batch-report"
"""``kind`` of a saved ``analyze FOLDER`` report (``--format report``)."""

GATE_REPORT_KIND = "gpuadvise-gate-report"
"""``kind`` of a saved ``gate`` report (``gate --format report``)."""


class NewerReportError(ValueError):
    """A saved report or document of a version newer than this gpuadvise reads (``gpuadvise
    render`` says to use a newer gpuadvise, rather than that it is no report)."""


@dataclass(frozen=True)
class ReportHeader:
    """What an analysis knows before its trace: the kernel and its launch (``kernel``), the
    device, the resources ptxas gave, the occupancy and the waves, as the ``analyze --json``
    document has them (its sections of those names; ``waves`` None: the device has no SM
    count). The terminal prints it first, as soon as it is known (``analyze`` streams it before
    the trace); :attr:`AnalysisReport.header` is the same object read back from the finished
    report's document, so that the two print the same bytes."""

    kernel: Mapping[str, Any]
    device: Mapping[str, Any]
    resources: Mapping[str, Any]
    occupancy: Mapping[str, Any]
    waves: Mapping[str, Any] | None = None

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ReportHeader:
        """The header sections of an ``analyze --json`` document (a KeyError when one of
        kernel, device, resources, occupancy is missing)."""
        return cls(
            kernel=document["kernel"],
            device=document["device"],
            resources=document["resources"],
            occupancy=document["occupancy"],
            waves=document.get("waves"),
        )


@dataclass(frozen=True)
class AnalysisReport:
    """One analysis, as every output format shows it.

    ``document``: the ``analyze --json`` document (with ``fix`` when ``--fix``/``--diff`` made
    one). ``sweeps``: the occupancy calculator's sweeps (block size, registers, shared memory),
    each ``{resource, values, occupancy, current}``; empty when they could not be computed (a
    saved document of a device that is no preset). ``sources``: each source file the pages quote
    -> its lines, or None when it was not readable. ``kernel_lines``: the first and last line of
    the kernel's definition in its file (None: not found). ``items``: the findings and the rules
    skipped, for the CI formats, with the files as the analysis named them (the renderers make
    them relative). ``rules``: the rules as SARIF describes them. ``run_notes``: the rules'
    run's notes (the CI formats' notes; the document's ``notes`` add the analysis's);
    ``analysis_notes``: the analysis's own (the terminal shows them below the details).
    ``speedups``: each finding's speedup in the reports' words (``~1.40x (estimated)``), in the
    order of the document's ``findings``. ``command``: the command line that made the report
    (the terminal's summary names it with ``--diff`` added), None when not known."""

    document: Mapping[str, Any]
    sweeps: tuple[Mapping[str, Any], ...] = ()
    sources: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    kernel_lines: tuple[int, int] | None = None
    items: tuple[ReportItem, ...] = ()
    rules: tuple[ReportRule, ...] = ()
    run_notes: tuple[str, ...] = ()
    analysis_notes: tuple[str, ...] = ()
    speedups: tuple[str, ...] = ()
    command: str | None = None

    @property
    def findings(self) -> list[Mapping[str, Any]]:
        """The findings, ranked, as the document has them (``Finding.to_dict``'s shape)."""
        return list(self.document.get("findings") or ())

    def speedup(self, index: int) -> str:
        """The speedup of finding ``index`` (0-based) in the reports' words."""
        return self.speedups[index] if index < len(self.speedups) else "no estimate"

    def source_line(self, file: str | None, line: int | None) -> str | None:
        """Line ``line`` (1-based) of ``file`` as the report holds it; None when not held."""
        if not file or not line or line < 1:
            return None
        lines = self.sources.get(file)
        if lines is None or line > len(lines):
            return None
        return lines[line - 1]

    @property
    def header(self) -> ReportHeader:
        """The document's header sections (:class:`ReportHeader`): what the terminal prints
        first."""
        return ReportHeader.from_document(self.document)

    @property
    def kernel(self) -> str:
        """The kernel's name."""
        return str(self.document["kernel"]["name"])

    @property
    def incomplete(self) -> str | None:
        """The line saying some rules were skipped for a reason the user did not choose."""
        value = self.document.get("incomplete")
        return None if value is None else str(value)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-safe data (:meth:`from_dict` reads it back)."""
        return {
            "kind": REPORT_KIND,
            "report_version": REPORT_VERSION,
            "document": self.document,
            "sweeps": [dict(s) for s in self.sweeps],
            "sources": {k: None if v is None else list(v) for k, v in self.sources.items()},
            "kernel_lines": None if self.kernel_lines is None else list(self.kernel_lines),
            "items": [_item_to_dict(i) for i in self.items],
            "rules": [_rule_to_dict(r) for r in self.rules],
            "run_notes": list(self.run_notes),
            "analysis_notes": list(self.analysis_notes),
            "speedups": list(self.speedups),
            "command": self.command,
        }

    @classmethod
    def from_dict(cls, data: Any) -> AnalysisReport:
        """The report :meth:`to_dict` wrote; ``ValueError`` for anything else (another kind, a
        newer version, a field missing or of the wrong type)."""
        doc = _obj(data, "report")
        if doc.get("kind") != REPORT_KIND:
            raise ValueError("not a gpuadvise analysis report")
        _check_version(doc)
        try:
            document = _obj(doc["document"], "document")
            _obj(document.get("kernel"), "document.kernel")
            for f in _list(document.get("findings", []), "document.findings"):
                _obj(f, "document.findings[]")
            lines = doc["kernel_lines"]
            if lines is not None:
                lines = _list(lines, "kernel_lines")
                if len(lines) != 2 or not all(_is_int(n) for n in lines):
                    raise ValueError("kernel_lines is not two line numbers")
            return cls(
                document=document,
                sweeps=tuple(_obj(s, "sweeps[]") for s in _list(doc["sweeps"], "sweeps")),
                sources={
                    _str(k, "sources"): None
                    if v is None
                    else tuple(_str(x, "sources[]") for x in _list(v, "sources[]"))
                    for k, v in _obj(doc["sources"], "sources").items()
                },
                kernel_lines=None if lines is None else (lines[0], lines[1]),
                items=tuple(_item_from_dict(i) for i in _list(doc["items"], "items")),
                rules=tuple(_rule_from_dict(r) for r in _list(doc["rules"], "rules")),
                run_notes=tuple(_str(n, "run_notes[]") for n in _list(doc["run_notes"], "notes")),
                analysis_notes=tuple(
                    _str(n, "analysis_notes[]")
                    for n in _list(doc.get("analysis_notes", []), "analysis_notes")
                ),
                speedups=tuple(
                    _str(n, "speedups[]") for n in _list(doc.get("speedups", []), "speedups")
                ),
                command=None if doc.get("command") is None else _str(doc["command"], "command"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a gpuadvise analysis report: {exc!r}") from None


@dataclass(frozen=True)
class BatchCase:
    """One case of ``analyze FOLDER``: its report, or the error that stopped it."""

    case: str
    error: str | None = None
    report: AnalysisReport | None = None


@dataclass(frozen=True)
class BatchReport:
    """``analyze FOLDER``'s report: ``summary``, the cases ranked by the time to win (one row
    each: ``rank``, ``case``, ``kernel``, ``error``, ``findings``, ``best_rule`` ...; the JSON
    report's ``summary``); ``cases`` in their order; ``rules`` as SARIF describes them. It
    round-trips through JSON like :class:`AnalysisReport` (``analyze FOLDER --format report``,
    ``gpuadvise render``)."""

    summary: tuple[Mapping[str, Any], ...] = ()
    cases: tuple[BatchCase, ...] = ()
    rules: tuple[ReportRule, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-safe data (:meth:`from_dict` reads it back)."""
        return {
            "kind": BATCH_REPORT_KIND,
            "report_version": REPORT_VERSION,
            "summary": [dict(s) for s in self.summary],
            "cases": [
                {
                    "case": c.case,
                    "error": c.error,
                    "report": None if c.report is None else c.report.to_dict(),
                }
                for c in self.cases
            ],
            "rules": [_rule_to_dict(r) for r in self.rules],
        }

    @classmethod
    def from_dict(cls, data: Any) -> BatchReport:
        """The report :meth:`to_dict` wrote; ``ValueError`` for anything else."""
        doc = _obj(data, "report")
        if doc.get("kind") != BATCH_REPORT_KIND:
            raise ValueError("not a gpuadvise batch report")
        _check_version(doc)
        try:
            cases = []
            for c in _list(doc["cases"], "cases"):
                case = _obj(c, "cases[]")
                error = case["error"]
                cases.append(
                    BatchCase(
                        _str(case["case"], "cases[].case"),
                        None if error is None else _str(error, "cases[].error"),
                        None
                        if case["report"] is None
                        else AnalysisReport.from_dict(case["report"]),
                    )
                )
            summary = [_obj(s, "summary[]") for s in _list(doc["summary"], "summary")]
            for s in summary:  # reports saved before the field: the speedup's basis
                s.setdefault("kernel_basis", None if s.get("kernel_ms") is None else s.get("basis"))
            return cls(
                summary=tuple(summary),
                cases=tuple(cases),
                rules=tuple(_rule_from_dict(r) for r in _list(doc["rules"], "rules")),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a gpuadvise batch report: {exc!r}") from None


@dataclass(frozen=True)
class GateTableRow:
    """One row of the gate's table: its case, its cells as text (in the order of
    :attr:`GateReport.headers`) and its verdict (``regression``, ``same`` ...)."""

    case: str
    cells: tuple[str, ...]
    verdict: str


@dataclass(frozen=True)
class GateReport:
    """One ``gpuadvise gate`` run, as every gate format shows it, built once by
    ``gpuadvise.gate.report.build_gate_report``.

    ``document``: the ``gate --format json`` document (``GateResult.to_dict()``). ``headers``,
    ``align`` (``l``/``r`` per column) and ``rows``: the table, a row per comparison in the
    document's order. ``summary``: the summary line (``FAILED: 2 regressions, 10 same
    (against ...)``). ``warnings``: the run's warnings. ``items``: a CI item per comparison;
    ``rules``: the gate's metrics as SARIF describes them. ``exit_code``: 2 a case could not be
    evaluated, 1 the gate failed, else 0. ``facts``: what the Markdown footer states (the
    gpuadvise version, the static model, the GPU, CUDA). ``verdict_order``: the verdicts, most
    serious first. It round-trips through JSON like :class:`AnalysisReport`
    (``gate --format report``, ``gpuadvise render``)."""

    document: Mapping[str, Any]
    headers: tuple[str, ...] = ()
    align: tuple[str, ...] = ()
    rows: tuple[GateTableRow, ...] = ()
    summary: str = ""
    warnings: tuple[str, ...] = ()
    items: tuple[ReportItem, ...] = ()
    rules: tuple[ReportRule, ...] = ()
    exit_code: int = 0
    facts: tuple[str, ...] = ()
    verdict_order: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-safe data (:meth:`from_dict` reads it back)."""
        return {
            "kind": GATE_REPORT_KIND,
            "report_version": REPORT_VERSION,
            "document": self.document,
            "headers": list(self.headers),
            "align": list(self.align),
            "rows": [
                {"case": r.case, "cells": list(r.cells), "verdict": r.verdict} for r in self.rows
            ],
            "summary": self.summary,
            "warnings": list(self.warnings),
            "items": [_item_to_dict(i) for i in self.items],
            "rules": [_rule_to_dict(r) for r in self.rules],
            "exit_code": self.exit_code,
            "facts": list(self.facts),
            "verdict_order": list(self.verdict_order),
        }

    @classmethod
    def from_dict(cls, data: Any) -> GateReport:
        """The report :meth:`to_dict` wrote; ``ValueError`` for anything else."""
        doc = _obj(data, "report")
        if doc.get("kind") != GATE_REPORT_KIND:
            raise ValueError("not a gpuadvise gate report")
        _check_version(doc)
        try:
            headers = _strs(doc["headers"], "headers")
            rows = []
            for r in _list(doc["rows"], "rows"):
                row = _obj(r, "rows[]")
                cells = _strs(row["cells"], "rows[].cells")
                if len(cells) != len(headers):
                    raise ValueError("a row's cells are not one a column")
                rows.append(
                    GateTableRow(
                        _str(row["case"], "rows[].case"), cells, _str(row["verdict"], "verdict")
                    )
                )
            align = _strs(doc["align"], "align")
            if len(align) != len(headers) or not set(align) <= {"l", "r"}:
                raise ValueError("align is not l or r a column")
            if not _is_int(doc["exit_code"]) or doc["exit_code"] not in (0, 1, 2):
                raise ValueError("exit_code is not 0, 1 or 2")
            return cls(
                document=_obj(doc["document"], "document"),
                headers=headers,
                align=align,
                rows=tuple(rows),
                summary=_str(doc["summary"], "summary"),
                warnings=_strs(doc["warnings"], "warnings"),
                items=tuple(_item_from_dict(i) for i in _list(doc["items"], "items")),
                rules=tuple(_rule_from_dict(r) for r in _list(doc["rules"], "rules")),
                exit_code=doc["exit_code"],
                facts=_strs(doc["facts"], "facts"),
                verdict_order=_strs(doc["verdict_order"], "verdict_order"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a gpuadvise gate report: {exc!r}") from None


def _check_version(doc: Mapping[str, Any]) -> None:
    version = doc.get("report_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError("the report has no version")
    if version > REPORT_VERSION:
        raise NewerReportError(
            f"report version {version} is newer than this gpuadvise reads ({REPORT_VERSION})"
        )


@dataclass(frozen=True)
class RuleDoc:
    """A rule as ``gpuadvise rules`` lists it and ``gpuadvise explain`` prints it, built by the
    rule API (``Registry.rule_doc``), so that the rules' text is drawn without importing it.

    ``models``: each model the rule reads, with what it is; ``options``: each option with its
    default; ``cases``: the bundled kernel cases that expect it; ``origin``: the file that
    defines it; ``doc``: its docstring (reStructuredText, as the rule writes it)."""

    id: str
    name: str
    title: str
    severity: str
    models: tuple[tuple[str, str], ...] = ()
    options: tuple[tuple[str, Any], ...] = ()
    cases: tuple[str, ...] = ()
    origin: str | None = None
    doc: str = ""


def relative_items(items: tuple[ReportItem, ...], root: str | None = None) -> list[ReportItem]:
    """``items`` with their files relative to ``root`` (default: the working folder), ``/``
    separated, as SARIF wants them (what ``Finding.to_report_item(root)`` writes)."""
    from dataclasses import replace

    base = os.path.abspath(root or os.getcwd())
    out = []
    for item in items:
        file = item.file
        if file:
            try:
                file = os.path.relpath(os.path.abspath(file), base)
            except ValueError:  # another drive (Windows)
                pass
            file = file.replace(os.sep, "/")
        out.append(item if file == item.file else replace(item, file=file))
    return out


# ---------------------------------------------------------------------------------------------
# The items and rules as data.

_ITEM_FIELDS = ("rule_id", "level", "message", "file", "line", "title", "group", "name", "outcome")
_RULE_FIELDS = ("id", "name", "short_description", "full_description", "help_text",
                "default_level", "help_uri")  # fmt: skip


def _item_to_dict(item: ReportItem) -> dict[str, Any]:
    return {
        **{name: getattr(item, name) for name in _ITEM_FIELDS},
        "properties": dict(item.properties),
    }


def _item_from_dict(data: Any) -> ReportItem:
    doc = _obj(data, "items[]")
    if set(doc) != {*_ITEM_FIELDS, "properties"}:
        raise ValueError("an item's fields are not those of a report item")
    for name in ("rule_id", "level", "message"):
        _str(doc[name], f"items[].{name}")
    for name in ("file", "title", "group", "name", "outcome"):
        if doc[name] is not None:
            _str(doc[name], f"items[].{name}")
    if doc["line"] is not None and not _is_int(doc["line"]):
        raise ValueError("an item's line is not a number")
    return ReportItem(
        **{name: doc[name] for name in _ITEM_FIELDS},
        properties=_obj(doc["properties"], "items[].properties"),
    )


def _rule_to_dict(rule: ReportRule) -> dict[str, Any]:
    return {**{name: getattr(rule, name) for name in _RULE_FIELDS}, "tags": list(rule.tags)}


def _rule_from_dict(data: Any) -> ReportRule:
    doc = _obj(data, "rules[]")
    if set(doc) != {*_RULE_FIELDS, "tags"}:
        raise ValueError("a rule's fields are not those of a report rule")
    for name in _RULE_FIELDS:
        if name != "help_uri" or doc[name] is not None:
            _str(doc[name], f"rules[].{name}")
    if doc["default_level"] not in ("error", "warning", "note", "none"):
        raise ValueError(f"a rule's level is {doc['default_level']!r}")
    return ReportRule(
        **{name: doc[name] for name in _RULE_FIELDS},
        tags=tuple(_str(t, "rules[].tags[]") for t in _list(doc["tags"], "rules[].tags")),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{where}: not a list")
    return list(value)


def _strs(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{where}[]") for v in _list(value, where))


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: not text")
    return value
