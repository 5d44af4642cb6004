"""The live registers in the reports (issue 33 items 2-3): the terminal's sparkline and values,
the HTML page's chart (one step per pixel column, the peak marked, hover text naming the source
line, a variant overlaid) with the values table and the source view's live-regs column, the
batch page's chart, and --json's registers section, on the hand-written function of
tests/livekit.py."""

from __future__ import annotations

import copy
import re

import livekit
import pytest
from test_html import FILE, SOURCE, Dom, make_doc, render_analysis

from gpuadvise.model.registers import RegisterPressure, register_pressure
from gpuadvise.report import console
from gpuadvise.report import html as H
from gpuadvise.report.registers_view import live_chart
from gpuadvise.toolchain.liveness import parse_life_ranges


@pytest.fixture(scope="module")
def rp() -> RegisterPressure:
    table = parse_life_ranges(livekit.table_text())["k"]
    return register_pressure(table, livekit.instructions(FILE), allocated=10)


def test_sparkline_keeps_the_peak():
    assert console.sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    # 1000 values in 10 cells: each the most of its 100, a lone peak is never averaged away
    values = [1] * 1000
    values[537] = 8
    line = console.sparkline(values, width=10, top=8)
    assert len(line) == 10 and line[5] == "█" and set(line[:5] + line[6:]) == {"▂"}
    assert console.sparkline([]) == ""


def test_the_terminal_shows_the_peak_and_its_values(rp):
    with console.captured() as c:
        console.live_registers(rp.to_dict())
    out = c.get()
    # counts in words, as everywhere in the reports (issue 32): "5 instructions", no "(s)"
    assert "peak 7 of 10 allocated at k.cu:5 (5 instructions); ptxas reserves 2, 1 more" in out
    assert console.sparkline(rp.gpr, top=10) in out
    # the values, longest first, without the stack pointer: R2,R3 the address first
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith("R")]
    assert [r[0] for r in rows] == ["R2,R3", "R4", "R5", "R7", "R6"]
    assert rows[1][:4] == ["R4", "loaded", "value", "(idle)"]


def _doc(rp: RegisterPressure, variant: RegisterPressure | None = None) -> dict:
    doc = make_doc()
    doc["registers"] = rp.to_dict()
    if variant is not None:
        doc["findings"][0]["details"] = {
            "type": "PressurePeak",
            "fields": {"live_gpr": variant.to_dict()},
        }
    return doc


def test_the_page_draws_the_live_registers(rp):
    page = render_analysis(_doc(rp), sources={FILE: SOURCE})
    dom = Dom(page).root
    (svg,) = [n for n in Dom.find(dom, "svg") if n["attrs"].get("id") == "live-registers"]
    paths = Dom.find(svg, "path", "livepath")
    assert len(paths) == 1
    # 16 instructions: a step per instruction, the peak of 7 (of 10) where instruction 7 is
    d = paths[0]["attrs"]["d"]
    steps = re.findall(r"[MV]([\d.]+)", d)
    assert len(steps) == 16
    (peak,) = Dom.find(svg, "circle", "peak")
    assert "peak 7 live registers at k.cu:5" in Dom.text(peak)
    assert "instruction 7 of 16" in Dom.text(peak)
    # hover: each column names its count and source line, with the line's text
    bands = Dom.find(svg, "rect", "band")
    assert len(bands) == 16
    assert Dom.text(bands[1]) == f"k: 2 live at instruction 1, k.cu:3: {SOURCE[2].strip()}"
    # the predicate live at the loop's compare and branch is named beside the general ones
    assert Dom.text(bands[10]).startswith("k: 7 live at instruction 10 (and 1 predicate), k.cu:6")
    # the values table and the summary
    section = next(n for n in Dom.find(dom, "section") if n["attrs"].get("id") == "registers")
    text = Dom.text(section)
    assert "Peak: 7 general registers live at k.cu:5" in text
    assert "ptxas allocates 10: the peak, the 2 it reserves for itself, and 1 free" in text
    assert "agrees on 16 of 16 instructions" in text
    rows = Dom.find(Dom.find(section, "table", "values")[0], "tr")[1:]
    assert [Dom.text(r).split()[0] for r in rows] == ["R1", "R2,", "R4", "R5", "R7", "R6"]
    assert "idle at the peak" in Dom.text(rows[2])
    # the source view: the most (and the mean) live registers per line, at the call site
    line5 = next(n for n in Dom.find(dom, "tr") if n["attrs"].get("id") == "L0-5")
    assert "7 6.0" in Dom.text(line5)


def test_the_source_lines_shown_hide_expect_markers(rp):
    """A bundled kernel's ``// expect: GA403`` marks a line for the test suite: the chart's
    hover text, the peak and the values table show the code without it."""
    marked = [ln + "  // expect: GA403" if ln.strip() else ln for ln in SOURCE]
    page = render_analysis(_doc(rp), sources={FILE: marked})
    dom = Dom(page).root
    (svg,) = [n for n in Dom.find(dom, "svg") if n["attrs"].get("id") == "live-registers"]
    section = next(n for n in Dom.find(dom, "section") if n["attrs"].get("id") == "registers")
    for shown in (Dom.text(svg), Dom.text(section)):
        assert SOURCE[2].strip() in shown and "expect:" not in shown


def test_a_variant_is_overlaid(rp):
    lower = copy.deepcopy(rp.to_dict())
    lower["gpr"] = [max(g - 2, 0) for g in lower["gpr"]]
    lower["peak"] = 5
    doc = _doc(rp, RegisterPressure.from_dict(lower))
    page = render_analysis(doc, sources={FILE: SOURCE})
    label = f"{doc['findings'][0]['rule']} variant"
    dom = Dom(page).root
    (svg,) = [n for n in Dom.find(dom, "svg") if n["attrs"].get("id") == "live-registers"]
    classes = [p["attrs"]["class"] for p in Dom.find(svg, "path", "livepath")]
    assert classes == ["livepath live0", "livepath live1"]
    legend = Dom.text(Dom.find(Dom(page).root, "figcaption", "legend")[0])
    assert legend.startswith(f"k{label}dashed")
    band = Dom.text(Dom.find(svg, "rect", "band")[7])
    assert band.startswith("k: 7 live at instruction 7") and f"{label}: 5 live at" in band


def test_a_document_without_registers_has_no_section():
    page = render_analysis(make_doc(), sources={FILE: SOURCE})
    assert 'id="registers"' not in page and "live regs" not in page


def test_one_scale_for_kernels_of_different_lengths(rp):
    short = rp.to_dict()
    long = copy.deepcopy(short)
    long["gpr"] = short["gpr"] * 3
    long["sites"] = short["sites"] * 3
    chart = live_chart([("a", short), ("b", long)], lambda f, n: "")
    assert chart is not None
    a, b = chart.curves
    # the shorter curve ends a third of the way along the common axis
    end = lambda path: float(re.findall(r"H([\d.]+)$", path)[0])  # noqa: E731
    assert end(b.path) == chart.width - chart.right
    span = chart.width - chart.right - chart.left
    assert abs((end(a.path) - chart.left) - span * 15 / 47) < 0.01


class _Result:
    """What the batch renderers read of a case's result."""

    def __init__(self, name: str, rp: RegisterPressure) -> None:
        class A:
            pass

        self.analysis = A()
        self.rules = None
        self.analysis.registers = rp
        self.analysis.kernel = A()
        self.analysis.kernel.name = name


class _Case:
    def __init__(self, case: str, name: str, rp: RegisterPressure) -> None:
        class C:
            id = case

        self.case = C()
        self.result = _Result(name, rp)


def test_a_batch_draws_every_kernel_on_one_chart(rp, monkeypatch):
    lower = copy.deepcopy(rp.to_dict())
    lower["gpr"] = [max(g - 2, 0) for g in lower["gpr"]]
    results = [
        _Case("a/case.toml", "moments_split", rp),
        _Case("a/f32.toml", "moments_f32", RegisterPressure.from_dict(lower)),
    ]
    from gpuadvise.report_types import AnalysisReport, BatchCase, BatchReport

    monkeypatch.setattr(H, "analysis_html", lambda *_a: "<p>case</p>")
    batch = BatchReport(
        cases=tuple(
            BatchCase(
                r.case.id,
                report=AnalysisReport(
                    {
                        "kernel": {"name": r.result.analysis.kernel.name},
                        "registers": r.result.analysis.registers.to_dict(),
                    }
                ),
            )
            for r in results
        )
    )
    page = H.batch_html(batch)
    (svg,) = [n for n in Dom.find(Dom(page).root, "svg")
              if n["attrs"].get("id") == "live-registers-cases"]  # fmt: skip
    assert len(Dom.find(svg, "path", "livepath")) == 2
    labels = [Dom.text(t) for t in Dom.find(svg, "text", "legendtext")]
    assert labels == ["moments_split", "moments_f32"]
    # the terminal: one sparkline per kernel
    with console.captured() as c:
        console.batch_registers(batch)
    out = c.get()
    assert "a/case.toml" in out and "7/10" in out and console.sparkline(rp.gpr, 48, 10) in out
