"""Issue 27 (3): an analysis whose trace stopped is not "No findings" and does not pass CI.

When the trace stops (an out-of-bounds access here), the rules that need it do not run: every
format says ``incomplete: N rules skipped (why)``, ``--fail-on`` exits 1 unless
``--allow-incomplete``, and the reason shared by those rules is one note, not one per rule.
``--no-trace`` is the user's choice: the rules it leaves out do not make the analysis
incomplete.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from clikit import cli

from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
from gpuadvise.analyze.report import build_report
from gpuadvise.analyze.run import run_analysis
from gpuadvise.cli.analyze import _render, fails_run
from gpuadvise.rules.evaluate import RulesRun, SkippedRule

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "cuda" / "runner" / "faults.cu"
OOB = ("-k", "oob", "--grid", "4", "--block", "256", "--arg", "n=1024", "--buffer", "out=float[n]")
OPTS = KernelOptions(
    source=str(FAULTS),
    kernel="oob",
    grid="4",
    block="256",
    args=("n=1024",),
    buffers=("out=float[n]",),
    gpu="H100",
)
TRACE_RULES = {"GA104", "GA201", "GA301", "GA302", "GA303", "GA305", "GA306", "GA307"}


@pytest.fixture(scope="module")
def stopped(compile_cache: Path):
    """The analysis of a kernel whose trace stops at an out-of-bounds store."""
    return run_analysis(OPTS, AnalyzeSettings(measure=False))


@pytest.mark.toolkit
def test_the_rules_the_stopped_trace_skips_are_listed(stopped) -> None:
    run = stopped.rules
    assert {s.rule for s in run.incomplete} >= TRACE_RULES
    assert all(s.why == "the trace stopped: an out-of-bounds access" for s in run.incomplete)
    assert run.incomplete_text == (
        f"incomplete: {len(run.incomplete)} rules skipped "
        "(the trace stopped: an out-of-bounds access)"
    )
    assert set(run.evaluated) == set(run.rules_run) - {s.rule for s in run.skipped}
    # the reason the skipped rules share is one note naming them all, not one note per rule
    skip_notes = [n for n in run.notes if "not evaluated" in n]
    assert len(skip_notes) == 1 and all(r in skip_notes[0] for r in TRACE_RULES)


@pytest.mark.toolkit
@pytest.mark.parametrize("fmt", ["text", "json", "html", "sarif", "junit", "github", "markdown"])
def test_every_format_says_incomplete(stopped, fmt: str) -> None:
    text = _render(fmt, build_report(stopped.analysis, stopped.rules))
    line = stopped.rules.incomplete_text
    assert line.startswith("incomplete: ") and line in text
    # the long reason the skipped rules share is said once (not once per rule), wherever the
    # text format wraps its lines (the list of rules before it grows with every rule)
    assert " ".join(text.split()).count("not evaluated: the emulator could not trace") == 1
    if fmt == "json":
        doc = json.loads(text)
        assert doc["incomplete"] == line
        assert {s["rule"] for s in doc["skipped_rules"]} >= TRACE_RULES
    if fmt == "sarif":
        notes = json.loads(text)["runs"][0]["invocations"][0]["toolExecutionNotifications"]
        assert notes[0]["message"]["text"] == line
    if fmt == "junit":
        root = ET.fromstring(text)
        assert int(root.get("skipped", "0")) == len(stopped.rules.incomplete)
    if fmt == "github":
        assert text.splitlines()[0].startswith("::warning title=gpuadvise::incomplete: ")
    if fmt == "text":
        assert "No findings" not in text or "of" in text


@pytest.mark.toolkit
def test_fail_on_fails_an_incomplete_analysis_unless_allowed(capsys, stopped) -> None:
    assert not stopped.rules.findings or all(f.severity != "error" for f in stopped.rules.findings)
    # no error finding: only the incompleteness can fail --fail-on error
    assert fails_run(stopped.rules, "error")
    assert not fails_run(stopped.rules, "error", allow_incomplete=True)
    assert not fails_run(stopped.rules, None)
    args = ("analyze", str(FAULTS), *OOB, "--gpu", "H100", "--no-measure", "--format", "json")
    code, out, _ = cli(capsys, *args, "--fail-on", "error")
    assert code == 1 and json.loads(out)["incomplete"].startswith("incomplete: ")
    code, _, _ = cli(capsys, *args, "--fail-on", "error", "--allow-incomplete")
    assert code == 0
    code, _, _ = cli(capsys, *args)
    assert code == 0  # without --fail-on nothing fails


@pytest.mark.toolkit
def test_no_trace_is_a_choice_not_incomplete(capsys, compile_cache: Path) -> None:
    args = ("analyze", str(FAULTS), *OOB, "--gpu", "H100", "--no-measure", "--no-trace")
    code, out, _ = cli(capsys, *args, "--format", "json", "--fail-on", "error")
    doc = json.loads(out)
    assert code == 0 and doc["incomplete"] is None
    assert {s["rule"] for s in doc["skipped_rules"] if s["deliberate"]} >= TRACE_RULES


def test_a_complete_run_says_nothing() -> None:
    run = RulesRun((), ("GA101",))
    assert run.incomplete == () and run.incomplete_text is None and not fails_run(run, "error")
    chosen = RulesRun(
        (), ("GA201",), skipped=(SkippedRule("GA201", "bank-conflicts", "off", "--no-trace", True),)
    )
    assert chosen.incomplete_text is None and not fails_run(chosen, "warning")
    assert chosen.evaluated == ()
