"""The gate's report (issue 30): built once from the GateResult, it holds what every gate
format shows; it round-trips through JSON and renders the same bytes again."""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize("saved_as", ["report", "json"])
def test_gpuadvise_render_draws_a_saved_gate_report_as_gate_did(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    saved_as: str,
) -> None:
    from clikit import cli

    monkeypatch.chdir(tmp_path)
    result = every_verdict()
    Path(f"gate.{saved_as}").write_text(render(result, saved_as))
    for fmt in FORMATS:
        code, out, err = cli(capsys, "render", f"gate.{saved_as}", "--format", f"{fmt}=out.{fmt}")
        assert code == 0, err
        expected = render(result, fmt)
        assert Path(f"out.{fmt}").read_text() == expected + (
            "" if expected.endswith("\n") else "\n"
        )
    code, out, _ = cli(capsys, "render", f"gate.{saved_as}", "--format", "text")
    assert code == 0 and out == render(result, "text")


def test_a_damaged_gate_report_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clikit import cli, one_error

    monkeypatch.chdir(tmp_path)
    doc = build_gate_report(every_verdict()).to_dict()
    for damaged, words in (
        ({**doc, "rows": "x"}, "is not a gpuadvise gate report"),
        ({**doc, "report_version": 99}, "report version 99 is newer"),
        ({"kind": "gpuadvise-gate-result", "schema_version": 7}, "not a gpuadvise gate report"),
        ({**json.loads(render_gate("json", GateReport.from_dict(doc))), "comparisons": [{}]},
         "not a gpuadvise gate report"),
    ):  # fmt: skip
        Path("g.json").write_text(json.dumps(damaged))
        code, out, err = cli(capsys, "render", "g.json", "--format", "html")
        assert code == 2 and out == ""
        assert words in one_error(err)
