"""The machine-readable writers: SARIF 2.1.0, JUnit XML, GitHub annotations, Markdown, text."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from gate_fakes import H100_ENV, samples

from gpuadvise.cli.gate import gate_markdown, render
from gpuadvise.gate.compare import Comparison, Verdict, compare_static, compare_timed
from gpuadvise.gate.results import GateResult
from gpuadvise.gate.thresholds import METRICS
from gpuadvise.report.github import annotation, escape_data, escape_property, github_annotations
from gpuadvise.report.junit import junit_xml
from gpuadvise.report.markdown import items_markdown, md_escape, md_table
from gpuadvise.report.sarif import ReportItem, ReportRule, sarif_log


def located(c: Comparison, file: str | None = "kernels/reduce.cu", line: int | None = 12):
    return replace(c, file=file, line=line, kernel="reduce<256>")


def every_verdict(strict: bool = False) -> GateResult:
    comps = (
        located(compare_static("reduce<256>", "registers", 32, 40)),  # regression
        located(compare_static("reduce<256>", "occupancy", 0.5, 0.75)),  # improvement
        located(compare_static("reduce<256>", "spill_bytes", 0, 0)),  # same
        located(
            compare_timed("reduce<256>", samples(1.0, 0.01, 5), samples(1.2, 0.01, 5))
        ),  # ambiguous
        located(Comparison("reduce<256>", "l2_hit_rate", Verdict.SKIPPED, "not available")),
        located(Comparison("scan", "registers", Verdict.ERROR, "nvcc: error: x"), line=None),
        located(
            compare_static("nofile", "registers", 32, 64), file=None, line=None
        ),  # regression without a location
    )
    assert [c.verdict for c in comps] == [
        Verdict.REGRESSION,
        Verdict.IMPROVEMENT,
        Verdict.SAME,
        Verdict.AMBIGUOUS,
        Verdict.SKIPPED,
        Verdict.ERROR,
        Verdict.REGRESSION,
    ]
    return GateResult(
        comps,
        environment=H100_ENV,
        warnings=("stored timings were recorded with driver 570.1; this run uses 580.0",),
        mode="ref",
        baseline_ref="origin/main",
        strict=strict,
    )


# --- SARIF ----------------------------------------------------------------------------------


def test_sarif_required_fields() -> None:
    log = json.loads(render(every_verdict(), "sarif"))
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "gpuadvise" and driver["version"]
    rule_ids = [r["id"] for r in driver["rules"]]
    assert len(set(rule_ids)) == len(rule_ids)
    for metric in METRICS:
        assert f"GATE-{metric.replace('_', '-')}" in rule_ids
    assert {"GATE-registers", "GATE-time", "GATE-spill-bytes"} <= set(rule_ids)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note", "none")
    results = run["results"]
    # same and improvement (level none) are not alerts
    assert [r["level"] for r in results] == ["error", "warning", "note", "error", "error"]
    for r in results:
        assert r["ruleId"] in rule_ids and driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        assert isinstance(r["message"]["text"], str) and r["message"]["text"]
        assert isinstance(r["locations"], list)
        assert set(r["partialFingerprints"]) == {"gpuadvise/v1"}
    first = results[0]
    phys = first["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": "kernels/reduce.cu", "uriBaseId": "%SRCROOT%"}
    assert phys["region"] == {"startLine": 12}
    assert first["ruleId"] == "GATE-registers" and "32 → 40" in first["message"]["text"]
    assert first["properties"]["verdict"] == "regression"
    no_line = results[3]["locations"][0]["physicalLocation"]
    assert "region" not in no_line
    assert results[4]["locations"] == []  # no file known
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False  # a case errored
    note = invocation["toolExecutionNotifications"][0]
    assert note["level"] == "warning" and "driver 570.1" in note["message"]["text"]
    json.dumps(log, allow_nan=False)  # strict JSON


def test_sarif_fingerprints_are_stable() -> None:
    a = json.loads(render(every_verdict(), "sarif"))["runs"][0]["results"]
    moved = GateResult(tuple(replace(c, line=99) for c in every_verdict().comparisons))
    b = json.loads(render(moved, "sarif"))["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in a] == [r["partialFingerprints"] for r in b]
    assert len({r["partialFingerprints"]["gpuadvise/v1"] for r in a}) == len(a)


def test_sarif_generic_items() -> None:
    """The writer serves other commands: unknown rule ids get a minimal rule entry."""
    items = [
        ReportItem("GA201", "warning", "4-way bank conflict", "k.cu", 30, title="bank conflict"),
        ReportItem("GA101", "none", "fine"),
    ]
    log = sarif_log(items, rules=[ReportRule("GA101", "LowOccupancy", "Low occupancy")])
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["GA101", "GA201"]
    assert [r["ruleId"] for r in run["results"]] == ["GA201"]
    assert run["results"][0]["ruleIndex"] == 1
    everything = sarif_log(items, include_passing=True)["runs"][0]["results"]
    assert everything[1]["kind"] == "pass" and everything[1]["level"] == "none"
    with pytest.raises(ValueError):
        ReportItem("X", "fatal", "m")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ReportItem("X", "error", "m", line=0)


# --- JUnit ----------------------------------------------------------------------------------


def test_junit_structure() -> None:
    root = ET.fromstring(render(every_verdict(), "junit").encode())
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["reduce<256>", "scan", "nofile"]
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 7  # one per case x metric
    assert root.get("tests") == "7" and root.get("failures") == "2"
    assert root.get("errors") == "1" and root.get("skipped") == "2"
    for s in suites:
        tc = s.findall("testcase")
        assert s.get("tests") == str(len(tc))
        assert s.get("failures") == str(sum(c.find("failure") is not None for c in tc))
        assert s.get("skipped") == str(sum(c.find("skipped") is not None for c in tc))
    by = {(c.get("classname"), c.get("name")): c for c in cases}
    reg = by[("gpuadvise.reduce<256>", "registers")]
    failure = reg.find("failure")
    assert failure is not None and failure.get("type") == "GATE-registers"
    assert reg.get("file") == "kernels/reduce.cu" and reg.get("line") == "12"
    assert "32 → 40" in (failure.text or "")
    amb = by[("gpuadvise.reduce<256>", "time")].find("skipped")
    assert amb is not None and (amb.get("message") or "").startswith("ambiguous:")
    skip = by[("gpuadvise.reduce<256>", "l2_hit_rate")].find("skipped")
    assert skip is not None and (skip.get("message") or "").startswith("skipped:")
    err = by[("gpuadvise.scan", "registers")].find("error")
    assert err is not None and "nvcc" in (err.text or "")
    same = by[("gpuadvise.reduce<256>", "spill_bytes")]
    assert [child.tag for child in same] == ["system-out"]
    props = suites[0].findall("properties/property")
    assert props and props[0].get("name") == "warning"


def test_junit_strict_makes_ambiguous_a_failure() -> None:
    root = ET.fromstring(render(every_verdict(strict=True), "junit").encode())
    assert root.get("failures") == "3" and root.get("skipped") == "1"
    amb = [c for c in root.iter("testcase") if c.get("name") == "time"][0]
    failure = amb.find("failure")
    assert failure is not None and "ambiguous" in (failure.text or "")


def test_junit_cleans_control_characters() -> None:
    xml = junit_xml([ReportItem("R", "error", "bad \x00\x1b byte", group="g")])
    case = ET.fromstring(xml.encode()).find("testsuite/testcase/failure")
    assert case is not None and case.text == "bad \\x00\\x1b byte"  # shown, not lost (issue 21)


# --- GitHub annotations ---------------------------------------------------------------------

ANNOTATION = re.compile(r"^::(error|warning|notice)( [^:]+(?:,[^:]+)*)?::.+$")


def test_github_annotations() -> None:
    text = render(every_verdict(), "github")
    lines = text.splitlines()
    assert all(ANNOTATION.match(line) for line in lines), lines
    assert lines[0].startswith("::warning title=gpuadvise::stored timings were recorded")
    reg = [ln for ln in lines if "GATE" not in ln and ln.startswith("::error file=")]
    assert reg[0].startswith(
        "::error file=kernels/reduce.cu,line=12,title=reduce<256>%3A registers per thread "
        "regression::regression: reduce<256> registers per thread: 32 → 40 (+8, +25.0%25)"
    )
    kinds = [ln.split(" ", 1)[0].split("::")[1] for ln in lines]
    # warning (run note), error, warning (ambiguous), notice (skipped), error, error
    assert kinds == ["warning", "error", "warning", "notice", "error", "error"]
    assert "::error file=kernels/reduce.cu,title=scan%3A" in text  # no line when not known
    assert "::error title=nofile%3A registers per thread regression::" in text
    assert "improvement" not in text and "spill" not in text  # passes give no annotation


def test_github_escaping() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert annotation("error", "m:1,2", file="dir/a,b.cu", line=3, title="t: x") == (
        "::error file=dir/a%2Cb.cu,line=3,title=t%3A x::m:1,2"
    )
    assert annotation("notice", "plain") == "::notice::plain"
    out = github_annotations(
        [ReportItem("R", "none", "pass"), ReportItem("R", "note", "hm\nmore", "a.cu", 1)]
    )
    assert out == "::notice file=a.cu,line=1,title=R::hm%0Amore\n"


# --- Markdown and text ----------------------------------------------------------------------


def test_markdown_summary() -> None:
    md = gate_markdown(every_verdict())
    assert md.startswith("## gpuadvise gate\n")
    assert "**ERROR**: 1 error, 2 regressions, 1 ambiguous, 1 skipped, 1 improvement, 1 same" in md
    assert "> [!WARNING]\n> stored timings were recorded with driver 570.1" in md
    assert (
        "| reduce&lt;256&gt; | registers | 32 | 40 | +8 (+25.0%) | &gt; 10% | ❌ regression |" in md
    )
    assert "<details><summary>1 unchanged</summary>" in md
    main, folded = md.split("<details>")
    assert "spill_bytes" not in main and "spill_bytes" in folded
    assert "GPU NVIDIA H100 80GB HBM3 (driver 570.1)" in md
    passed = gate_markdown(GateResult((compare_static("k", "registers", 1, 1),)))
    assert "✅ **PASSED**: 1 same" in passed


def test_markdown_helpers() -> None:
    assert md_escape("a|b<c>\nd") == "a\\|b&lt;c&gt;<br>d"
    assert md_table(["x", "y"], [["1", "2|3"]], ["l", "r"]) == (
        "| x | y |\n| :-- | --: |\n| 1 | 2\\|3 |\n"
    )
    md = items_markdown(
        [ReportItem("GA201", "warning", "bank conflict", "k.cu", 3, group="k")], title="analyze"
    )
    assert "## analyze" in md and "| ⚠️ | GA201 | k | k.cu:3 | bank conflict |" in md
    # rules an incomplete run skipped are counted as such ("skipped" has no plural)
    skipped = [
        ReportItem(r, "none", f"{r} not evaluated", group="k", outcome="skip")
        for r in ("GA201", "GA301")
    ]
    md = items_markdown(skipped, title="analyze")
    assert "⏭️ 2 skipped\n" in md and "| ⏭️ | GA301 | k |  | GA301 not evaluated |" in md


def test_text_table() -> None:
    text = render(every_verdict(), "text")
    assert "reduce<256>" in text and "regression" in text and "ambiguous" in text
    assert "warning: stored timings were recorded" in text
    assert text.rstrip().splitlines()[-1].startswith("ERROR: 1 error, 2 regression")
    assert "\x1b[" not in text
    assert "\x1b[" in render(every_verdict(), "text", color=True)


def test_json_format_roundtrip() -> None:
    result = every_verdict()
    doc = json.loads(render(result, "json"))
    assert doc["schema_version"] == 1 and doc["exit_code"] == 2
    assert [c["rule_id"] for c in doc["comparisons"]][:2] == ["GATE-registers", "GATE-occupancy"]
    assert GateResult.from_dict(doc) == result


def test_sarif_uri_is_percent_encoded() -> None:
    log = sarif_log([ReportItem("R", "error", "m", "my kernels/a b.cu", 2)])
    loc = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "my%20kernels/a%20b.cu"
