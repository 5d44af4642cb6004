"""The gate's report (issue 30): built once from the GateResult, it holds what every gate
format shows; it round-trips through JSON and renders the same bytes again."""

from __future__ import annotations

import json

import pytest
from test_report_formats import every_verdict

from gpuadvise.cli.gate import FORMATS, render
from gpuadvise.gate.report import build_gate_report, gate_report_from_data
from gpuadvise.report.renderers import GATE_RENDERERS, render_gate
from gpuadvise.report_types import GateReport


def test_the_gate_formats_are_the_registry_s() -> None:
    assert FORMATS == tuple(GATE_RENDERERS)
    assert FORMATS[0] == "text" and "report" in FORMATS


@pytest.mark.parametrize("strict", [False, True])
def test_every_format_renders_the_report_as_the_result(strict: bool) -> None:
    result = every_verdict(strict)
    report = build_gate_report(result)
    assert report.exit_code == result.exit_code() == 2
    assert [r.verdict for r in report.rows] == [c.verdict.value for c in result.comparisons]
    for fmt in FORMATS:
        for color in (False, True):
            assert render_gate(fmt, report, color=color) == render(result, fmt, color=color)


def test_the_report_round_trips_through_json() -> None:
    report = build_gate_report(every_verdict())
    again = GateReport.from_dict(json.loads(render_gate("report", report)))
    assert again == report
    for fmt in FORMATS:
        assert render_gate(fmt, again, color=fmt == "text") == render_gate(
            fmt, report, color=fmt == "text"
        )
    # a saved gate --format json document gives the same report
    assert gate_report_from_data(json.loads(render_gate("json", report))) == report


def test_what_is_not_a_gate_report_is_a_value_error() -> None:
    doc = build_gate_report(every_verdict()).to_dict()
    assert gate_report_from_data({"kind": "something else"}) is None
    with pytest.raises(ValueError):
        GateReport.from_dict({**doc, "exit_code": 7})
    with pytest.raises(ValueError):
        GateReport.from_dict({**doc, "rows": [{"case": "k", "cells": ["x"], "verdict": "same"}]})
    with pytest.raises(ValueError):
        GateReport.from_dict({k: v for k, v in doc.items() if k != "summary"})
