"""The HTML report without a browser: rendering from documents, escaping, chart geometry, the source
view, the gate page, and the page's self-containedness. tests/report/test_html_browser.py loads
the page of a real analysis in Chromium."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gpuadvise.report import html as H

ROOT = Path(__file__).resolve().parents[2]

SOURCE = [
    '#include "x.h"',
    'extern "C" __global__ void k(const float* in, float* out, int n) {',
    "    __shared__ float s[256];",
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
    "    s[threadIdx.x * 2 % 256] = in[i * 4];  // a < b && c",
    "    __syncthreads();",
    "    out[i] = s[threadIdx.x];",
    "}",
    "",
    "// the rest of the file",
    "void host() {}",
]
FILE = "/src/k.cu"


def _measured(speedup: float, lo: float, hi: float, label: str | None = None) -> dict[str, Any]:
    return {
        "speedup": speedup,
        "baseline_ms": 1.0,
        "variant_ms": 1.0 / speedup,
        "device": "NVIDIA H100 80GB HBM3",
        "ci_low": lo,
        "ci_high": hi,
        "outputs_match": True,
        "samples": 40,
        "kind": "variant",
        "label": label,
    }


def make_doc() -> dict[str, Any]:
    """An ``analyze --json`` document of the schema json_report.analyze_json writes, with a
    measured finding (trials, a diff) and an estimated one, and five L2 orders."""
    orders = [
        {
            "order": "row-major",
            "n": None,
            "hit_rate": 0.5,
            "dram_bytes": 8e6,
            "working_set_bytes": 2e6,
        },
        *(
            {
                "order": "tile-x",
                "n": n,
                "hit_rate": 0.5 + n / 100,
                "dram_bytes": 6e6,
                "working_set_bytes": 1e6,
            }
            for n in (4, 8, 16, 32)
        ),
    ]
    return {
        "schema_version": 1,
        "kernel": {
            "name": "k",
            "mangled": "k",
            "file": FILE,
            "grid": [4096, 1, 1],
            "block": [256, 1, 1],
            "dynamic_smem_bytes": 0,
        },
        "device": {
            "name": "H100",
            "full_name": "NVIDIA H100 SXM5 80GB HBM3",
            "arch": "sm_90",
            "cc": "9.0",
            "source": "preset",
            "sm_count": 132,
            "l2_bytes": 52428800,
            "mem_bandwidth_gbps": 3350,
        },
        "toolchain": {"version": "13.0.88", "flags": ["-arch=sm_90", "-lineinfo"]},
        "resources": {
            "registers": 16,
            "static_smem_bytes": 1024,
            "local_bytes": 0,
            "spill_store_bytes": 0,
            "spill_load_bytes": 0,
            "const_bytes": 548,
            "barriers": 1,
        },
        "occupancy": {
            "input": {
                "threads_per_block": 256,
                "registers_per_thread": 16,
                "static_smem_bytes": 1024,
                "dynamic_smem_bytes": 0,
                "carveout_pct": -1,
            },
            "active_blocks_per_sm": 8,
            "active_warps_per_sm": 64,
            "active_threads_per_sm": 2048,
            "max_warps_per_sm": 64,
            "occupancy": 1.0,
            "limiters": ["warps"],
            "limits": {
                "warps": 8,
                "registers": 16,
                "shared_memory": 114,
                "blocks": 32,
                "barriers": 64,
            },
            "allocation": {
                "registers_per_block": 4096,
                "smem_per_block_bytes": 2048,
                "smem_per_sm_bytes": 233472,
            },
            "next_steps": [],
            "notes": [],
        },
        "waves": {
            "total_ctas": 4096,
            "ctas_per_wave": 1056,
            "waves": 3.88,
            "last_wave_ctas": 928,
            "last_wave_fill": 0.88,
            "tail_idle": 0.03,
        },
        "sass_lines": [
            {
                "file": FILE,
                "line": 5,
                "space": "global",
                "kind": "load",
                "width_bits": 32,
                "count": 1,
                "opcodes": ["LDG.E"],
                "source": SOURCE[4].strip(),
            },
            {
                "file": FILE,
                "line": 5,
                "space": "shared",
                "kind": "store",
                "width_bits": 32,
                "count": 1,
                "opcodes": ["STS"],
                "source": SOURCE[4].strip(),
            },
            {
                "file": FILE,
                "line": 2,
                "space": "constant",
                "kind": "load",
                "width_bits": 32,
                "count": 3,
                "opcodes": ["LDC"],
                "source": SOURCE[1].strip(),
            },
            {
                "file": FILE,
                "line": 7,
                "space": "global",
                "kind": "store",
                "width_bits": 32,
                "count": 1,
                "opcodes": ["STG.E"],
                "source": SOURCE[6].strip(),
            },
        ],
        "emulation": {
            "tracer": "emu",
            "ctas_traced": 1056,
            "total_ctas": 4096,
            "complete": False,
            "lane_instructions": 1000,
            "time_s": 0.1,
            "error": None,
            "error_kind": None,
            "notes": ["traced the first wave: 1056 of 4096 CTAs"],
            "reconciled": [],
        },
        "shared_memory": {
            "lines": [
                {
                    "file": FILE,
                    "line": 5,
                    "kind": "store",
                    "instructions": 8448,
                    "wavefronts": 16896,
                    "ideal_wavefronts": 8448,
                    "excess_pct": 50.0,
                    "worst_ways": 2.0,
                }
            ],
            "total_wavefronts": 65536.0,
            "total_ideal_wavefronts": 32768.0,
            "totals": {
                "load": {"instructions": 0.0, "wavefronts": 0.0, "ideal": 0.0},
                "store": {"instructions": 32768.0, "wavefronts": 65536.0, "ideal": 32768.0},
                "atomic": {"instructions": 0.0, "wavefronts": 0.0, "ideal": 0.0},
            },
            "extrapolated": True,
        },
        "global_memory": {
            "lines": [
                {
                    "file": FILE,
                    "line": 5,
                    "kind": "load",
                    "requests": 8448,
                    "sectors": 135168,
                    "ideal_sectors": 33792,
                    "excess_pct": 75.0,
                },
                {
                    "file": FILE,
                    "line": 7,
                    "kind": "store",
                    "requests": 8448,
                    "sectors": 33792,
                    "ideal_sectors": 33792,
                    "excess_pct": 0.0,
                },
            ],
            "totals": {
                k: {"requests": 1.0, "sectors": 4.0, "ideal": 2.0, "bytes": 1.0, "lines": 1.0}
                for k in ("load", "store", "atomic")
            },
            "extrapolated": True,
        },
        "l2": {
            "orders": orders,
            "best": {"order": "tile-x", "n": 32},
            "fits": True,
            "footprint_bytes": 1.6e7,
            "capacity_bytes": 2.6e7,
            "l2_bytes": 52428800,
            "efficiency": 0.5,
            "fetch_bytes": 64,
            "concurrent_ctas": 1056,
            "mode": "synthesized",
            "notes": ["an <L2> note"],
            "assumptions": "LRU",
            "partitions": 2,
        },
        "findings": [
            {
                "rule": "GA301",
                "name": "uncoalesced",
                "title": "Uncoalesced <global> access",
                "kernel": "k",
                "file": FILE,
                "line": 5,
                "severity": "warning",
                "message": "4 sectors per request where 1 would do: <script>alert(1)</script>",
                "evidence": [
                    {
                        "metric": "sectors_per_request",
                        "value": 4.0,
                        "threshold": 1.5,
                        "op": ">=",
                        "unit": "sectors",
                    }
                ],
                "estimated_speedup": {
                    "speedup": 1.6,
                    "kind": "upper-bound",
                    "method": "roofline & <friends>",
                    "inputs": {"dram_us": 5.0},
                },
                "measured_speedup": _measured(1.42, 1.38, 1.47, "N=4"),
                "verified": True,
                "variant": {
                    "safety": "automatic-and-verified",
                    "description": "index i, not i*4",
                    "label": "N=4",
                    "diff": "--- a/k.cu\n+++ b/k.cu\n@@ -5,1 +5,1 @@\n-    in[i * 4]\n"
                    "+    in[i]\n     ctx\n",
                    "nvcc_flags": [],
                    "defines": [],
                    "launch": None,
                    "proxy": None,
                    "alternatives": [],
                },
                "rank_basis": "measured",
                "error": None,
                "trials": [
                    {
                        "label": "N=4",
                        "description": "four",
                        "measured_speedup": _measured(1.42, 1.38, 1.47, "N=4"),
                        "verified": True,
                        "note": None,
                    },
                    {
                        "label": "N=8",
                        "description": "eight",
                        "measured_speedup": None,
                        "verified": False,
                        "note": "outputs differ",
                    },
                ],
            },
            {
                "rule": "GA201",
                "name": "bank-conflicts",
                "title": "Bank conflicts",
                "kernel": "k",
                "file": FILE,
                "line": 5,
                "severity": "note",
                "message": "2-way conflicts",
                "evidence": [],
                "measured_speedup": None,
                "verified": None,
                "variant": None,
                "estimated_speedup": {
                    "speedup": 1.1,
                    "kind": "estimate",
                    "method": "m",
                    "inputs": {},
                },
                "rank_basis": "estimated",
                "error": None,
                "trials": [],
            },
            {
                "rule": "GA401",
                "name": "tail",
                "title": "Tail",
                "kernel": "k",
                "file": FILE,
                "line": 2,
                "severity": "error",
                "message": "a tail",
                "evidence": [],
                "estimated_speedup": None,
                "measured_speedup": None,
                "verified": None,
                "variant": None,
                "rank_basis": "none",
                "error": None,
                "trials": [],
            },
        ],
        "rules_run": ["GA201", "GA301", "GA401"],
        "notes": ["measured on <the GPU>"],
        "timings_s": {"compile_s": 0.5, "compile_cached": False},
    }


class Dom(HTMLParser):
    """A minimal DOM of the parts the tests look at: elements with attributes and text."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "source", "area", "col"}

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root: dict[str, Any] = {"tag": "#root", "attrs": {}, "children": [], "text": []}
        self.stack = [self.root]
        self.all: list[dict[str, Any]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = {"tag": tag, "attrs": dict(attrs), "children": [], "text": []}
        self.stack[-1]["children"].append(node)
        self.all.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = {"tag": tag, "attrs": dict(attrs), "children": [], "text": []}
        self.stack[-1]["children"].append(node)
        self.all.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i]["tag"] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1]["children"].append(data)

    @staticmethod
    def text(node: dict[str, Any]) -> str:
        parts: list[str] = []

        def walk(n: Any) -> None:
            if isinstance(n, str):
                parts.append(n)
            else:
                for c in n["children"]:
                    walk(c)

        walk(node)
        return re.sub(r"\s+", " ", "".join(parts)).strip()

    def by_id(self, ident: str) -> dict[str, Any]:
        found = [n for n in self.all if n["attrs"].get("id") == ident]
        assert len(found) == 1, f"{len(found)} elements with id {ident!r}"
        return found[0]

    @staticmethod
    def find(node: dict[str, Any], tag: str, cls: str | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []

        def walk(n: Any) -> None:
            if isinstance(n, str):
                return
            if n["tag"] == tag and (cls is None or cls in (n["attrs"].get("class") or "").split()):
                out.append(n)
            for c in n["children"]:
                walk(c)

        for c in node["children"]:
            walk(c)
        return out


def external_references(page: str) -> list[str]:
    """Everything in ``page`` that would make a browser fetch or run something from outside."""
    bad = re.findall(
        r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]*""",
        page,
        flags=re.I,
    )
    bad += re.findall(r"<\s*(?:script|link|iframe|object|embed|base)\b[^>]*>", page, flags=re.I)
    bad += re.findall(r"@import|url\s*\(", page, flags=re.I)
    return bad


def render_analysis(doc: dict[str, Any], sources: dict[str, list[str]] | None = None) -> str:
    """The page of an ``analyze --json`` document, through its report (the sweeps recomputed
    from the preset, the source files read, or taken from ``sources``)."""
    from gpuadvise.analyze.report import report_from_document

    return H.analysis_html(report_from_document(doc, sources=sources))


def render(doc: dict[str, Any] | None = None) -> str:
    return render_analysis(doc or make_doc(), sources={FILE: SOURCE})


# --- colours and charts ------------------------------------------------------------------------


def test_heat_runs_from_light_to_dark_with_readable_text() -> None:
    def luminance(hex_colour: str) -> float:
        r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    ramp = [H.heat_colour(t / 20) for t in range(21)]
    lum = [luminance(bg) for bg, _ in ramp]
    assert all(a > b for a, b in zip(lum, lum[1:], strict=False)), "heat must darken steadily"
    assert ramp[0][0] == "#fde725" and ramp[-1][0] == "#440154"  # viridis' ends
    for bg, fg in ramp:  # dark text on the light end, white on the dark end
        assert (fg == "#111111") == (luminance(bg) > 110)
    assert H.heat_colour(-1.0) == ramp[0] and H.heat_colour(7.0) == ramp[-1]


def test_sweep_chart_has_a_point_per_sample_and_marks_the_launch() -> None:
    sweep = {
        "resource": "block_size",
        "values": [32, 64, 96, 128],
        "current": 96,
        "occupancy": [0.25, 0.5, 1.0, 0.75],
    }
    c = H.sweep_chart(sweep, 64)
    assert len(c.points) == 4
    assert [p.current for p in c.points] == [False, False, True, False]
    top, bottom = c.top, c.height - c.bottom
    assert c.points[2].y == top and c.points[0].y == pytest.approx(top + 0.75 * (bottom - top))
    assert [p.x for p in c.points] == sorted(p.x for p in c.points)
    assert c.path.count("H") == 3 and c.path.count("V") == 3  # steps, not slopes
    assert "96 threads" in c.current_label and "100.0%" in c.current_label
    assert "48 warps/SM" in c.points[3].title


def test_shared_memory_sweep_ticks_are_whole_kib() -> None:
    values = list(range(0, 232448 + 1, 4096))
    c = H.sweep_chart(
        {
            "resource": "shared_memory",
            "values": values,
            "occupancy": [1.0] * len(values),
            "current": 4096,
        },
        64,
    )
    assert c.xticks and all(re.fullmatch(r"0|\d+K", t.label) for t in c.xticks)


def test_l2_chart_has_a_bar_per_order_and_one_best() -> None:
    c = H.l2_chart(make_doc()["l2"])
    assert [b.label for b in c.bars] == ["row-major", *(f"tile-x N={n}" for n in (4, 8, 16, 32))]
    assert [b.best for b in c.bars] == [False, False, False, False, True]
    assert c.bars[-1].w == pytest.approx(0.82 * c.bars[0].w / 0.5)


def test_waves_chart_draws_the_partial_last_wave() -> None:
    c = H.waves_chart(make_doc()["waves"])
    assert len(c.bars) == 4
    assert [b.best for b in c.bars] == [False, False, False, True]  # "best" marks the partial one
    assert c.bars[-1].h == pytest.approx(0.88 * c.bars[0].h)
    many = H.waves_chart(
        {"total_ctas": 100_000, "ctas_per_wave": 10, "last_wave_ctas": 0, "last_wave_fill": 1.0}
    )
    assert many.compressed and len(many.bars) == 64


# --- the analysis page -------------------------------------------------------------------------


def test_everything_is_escaped() -> None:
    page = render()
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Uncoalesced &lt;global&gt; access" in page
    assert "// a &lt; b &amp;&amp; c" in page  # source code
    assert "roofline &amp; &lt;friends&gt;" in page
    assert "measured on &lt;the GPU&gt;" in page and "an &lt;L2&gt; note" in page


def test_page_is_self_contained() -> None:
    page = render()
    assert external_references(page) == []
    assert "<style>" in page and "@media print" in page and "max-width: 640px" in page
    # the check itself catches what it is for
    for bad in (
        '<img src="https://x.org/a.png">',
        '<a href="//cdn.x/y">',
        "<script>1</script>",
        '<link rel="stylesheet" href="a.css">',
        "@import 'x.css';",
        "background: url(http://x/y.png)",
    ):
        assert external_references(page + bad), bad


def test_findings_are_ranked_with_evidence_estimate_measurement_diff_and_trials() -> None:
    dom = Dom(render())
    items = Dom.find(dom.by_id("findings"), "li", "finding")
    assert [n["attrs"]["data-rule"] for n in items] == ["GA301", "GA201", "GA401"]
    first = Dom.text(items[0])
    assert "1.420× (measured on NVIDIA H100 80GB HBM3, N=4, 95% interval 1.380–1.470)" in first
    assert "estimated: ≤ 1.60× (upper bound)" in first
    assert "How it was estimated: roofline & <friends>" in first
    assert "sectors_per_request" in first and ">= 1.5" in first and "outputs verified" in first
    diff = Dom.find(items[0], "pre", "diff")[0]
    classes = [n["attrs"]["class"] for n in Dom.find(diff, "span")]
    assert classes == ["meta", "meta", "hunk", "del", "add", "ctx"]
    trials = Dom.find(Dom.find(items[0], "table", "trials")[0], "tr")
    assert len(trials) == 3 and "outputs differ" in Dom.text(trials[2])
    assert "not measured" in Dom.text(items[1]) and "~1.10×" in Dom.text(items[1])
    # the ranking at the top: one row per finding, linked to its card and its line
    rows = [dom.by_id(f"rank-{i}") for i in (1, 2, 3)]
    assert [Dom.text(Dom.find(r, "td")[3]) for r in rows] == [
        "1.42× measured",
        "~1.10× (estimate)",
        "not estimated",
    ]
    assert Dom.find(rows[0], "a")[0]["attrs"]["href"] == "#finding-1"
    assert Dom.find(rows[0], "a")[1]["attrs"]["href"] == "#L0-5"
    assert not Dom.find(rows[2], "svg")  # no estimate, no measurement: no bar


def test_the_measured_bar_shows_its_interval_on_the_common_scale() -> None:
    dom = Dom(render())
    svg = Dom.find(dom.by_id("rank-1"), "svg", "speedup")[0]
    bar = Dom.find(svg, "rect", "speedbar")[0]
    assert "estimate" not in bar["attrs"]["class"]
    ci = [n for n in Dom.find(svg, "line", "ci")]
    lo, hi = float(ci[0]["attrs"]["x1"]), float(ci[0]["attrs"]["x2"])
    end = float(bar["attrs"]["x"]) + float(bar["attrs"]["width"])
    assert lo < end < hi
    assert Dom.find(svg, "path", "est")  # the estimate's marker beside the measurement
    one = float(Dom.find(svg, "line", "one")[0]["attrs"]["x1"])
    assert float(bar["attrs"]["x"]) == pytest.approx(one)
    # the second finding's estimate (1.10x) is drawn on the same scale: a shorter, dashed bar
    svg2 = Dom.find(dom.by_id("rank-2"), "svg", "speedup")[0]
    bar2 = Dom.find(svg2, "rect", "speedbar")[0]
    assert "estimate" in bar2["attrs"]["class"]
    assert float(bar2["attrs"]["width"]) < float(bar["attrs"]["width"])
    assert float(Dom.find(svg2, "line", "one")[0]["attrs"]["x1"]) == pytest.approx(one)


def test_source_view_marks_findings_and_colours_the_columns() -> None:
    dom = Dom(render())
    table = dom.by_id("source-0")
    row5 = dom.by_id("L0-5")
    marks = Dom.find(row5, "a", "badge")
    assert [Dom.text(a) for a in marks] == ["GA301", "GA201"]
    assert [a["attrs"]["href"] for a in marks] == ["#finding-1", "#finding-2"]
    assert "has-finding" in row5["attrs"]["class"]
    cells = Dom.find(row5, "td", "m")
    sass, shared, glob = (Dom.text(c) for c in cells)
    assert sass.startswith("2") and "LDG.E" in sass and "STS" in sass
    assert shared == "16,896 / 8,448 2.00×" and glob == "135,168 / 33,792 4.00×"
    assert all("background" in c["attrs"].get("style", "") for c in cells)
    # the excess against the busiest line: 3/4 of line 5's sectors, 1/2 of its wavefronts
    assert f"background:{H.heat_colour(0.75)[0]}" in cells[2]["attrs"]["style"]
    assert f"background:{H.heat_colour(0.5)[0]}" in cells[1]["attrs"]["style"]
    assert f"background:{H.heat_colour(1.0)[0]}" in cells[0]["attrs"]["style"]  # most SASS
    # line 7's stores are ideal: a number, no heat
    glob7 = Dom.find(dom.by_id("L0-7"), "td", "m")[2]
    assert Dom.text(glob7) == "33,792 / 33,792 1.00×" and "style" not in glob7["attrs"]
    # line 2 holds only constant loads (left out) and a finding
    assert Dom.text(Dom.find(dom.by_id("L0-2"), "td", "m")[0]) == ""
    assert [Dom.text(a) for a in Dom.find(dom.by_id("L0-2"), "a", "badge")] == ["GA401"]
    # the kernel's lines (2-8) and the data lines' context are shown, the host code is not
    numbers = [
        int(Dom.text(Dom.find(r, "td")[0])) for r in Dom.find(table, "tr") if r["attrs"].get("id")
    ]
    assert numbers == list(range(1, 10))
    # the finding links back to its line
    assert Dom.find(dom.by_id("finding-1"), "a")[0]["attrs"]["href"] == "#L0-5"


def test_source_view_without_the_file_shows_the_data_lines() -> None:
    doc = make_doc()
    doc["kernel"]["file"] = "/nonexistent/k.cu"
    for m in doc["sass_lines"]:
        m["file"] = "/nonexistent/k.cu"
    for part in ("shared_memory", "global_memory"):
        for ln in doc[part]["lines"]:
            ln["file"] = "/nonexistent/k.cu"
    for f in doc["findings"]:
        f["file"] = "/nonexistent/k.cu"
    page = render_analysis(doc)
    dom = Dom(page)
    assert "not readable here" in page
    assert [n["attrs"]["id"] for n in dom.all if n["attrs"].get("id", "").startswith("L0-")] == [
        "L0-2",
        "L0-5",
        "L0-7",
    ]
    assert "out[i] = s[threadIdx.x];" in Dom.text(dom.by_id("L0-7"))


def test_sweeps_are_recomputed_for_a_saved_document_of_a_preset() -> None:
    from gpuadvise.devices import preset
    from gpuadvise.model.occupancy import KernelResources, sweeps

    dom = Dom(render())
    k = KernelResources(256, 16, 1024, 0)
    for s in sweeps(preset("H100"), k):
        svg = dom.by_id(f"sweep-{s.resource}")
        circles = Dom.find(svg, "circle", "pt")
        assert len(circles) == len(s.values)
        assert len(Dom.find(svg, "circle", "now")) == 1
    live = make_doc()
    live["device"]["name"] = "NVIDIA Some Future GPU"
    page = render_analysis(live, sources={FILE: SOURCE})
    assert "sweep-block_size" not in page and "sweeps are not in this document" in page


def test_notes_say_what_was_sampled_and_extrapolated() -> None:
    text = Dom.text(Dom(render()).by_id("notes"))
    assert "1,056 of 4,096 CTAs traced" in text and "extrapolated" in text
    assert "traced the first wave" in text and "whole grid synthesized" in text


def test_an_emulation_error_is_shown_first() -> None:
    doc = make_doc()
    doc["emulation"]["error"] = "lane 3 read in[4096] past the end"
    doc["emulation"]["error_kind"] = "out_of_bounds"
    doc["shared_memory"] = doc["global_memory"] = doc["l2"] = None
    dom = Dom(render(doc))
    assert "Out-of-bounds access" in Dom.text(dom.by_id("emulation-error"))
    assert "memory" not in [n["attrs"].get("id") for n in dom.all]


# --- the gate page -----------------------------------------------------------------------------


def test_gate_page_shows_every_case_and_verdict() -> None:
    from dataclasses import replace

    from gate_fakes import samples
    from test_report_formats import every_verdict, located

    from gpuadvise.cli.gate import render
    from gpuadvise.gate.compare import compare_timed

    slower = located(compare_timed("scan", samples(1.0, 0.01, 30), samples(1.3, 0.01, 30, 1)))
    assert slower.ci_low is not None and slower.verdict.value == "regression"
    result = every_verdict()
    result = replace(result, comparisons=(*result.comparisons, slower))
    page = render(result, "html")
    assert external_references(page) == []
    dom = Dom(page)
    assert Dom.text(dom.by_id("status")).startswith("ERROR:")
    chips = Dom.text(dom.by_id("counts"))
    for verdict, n in result.counts().items():
        if n:
            assert f"{n} {verdict}" in chips
    cases = {n["attrs"]["data-case"]: n for n in dom.all if "data-case" in n["attrs"]}
    assert set(cases) == {c.case for c in result.comparisons}
    # most serious first
    assert list(cases) == ["scan", "nofile", "reduce<256>"]
    rows = {
        Dom.text(Dom.find(r, "td")[0]).split()[0]: r
        for r in Dom.find(cases["reduce<256>"], "tr")
        if r["attrs"].get("class", "").startswith("row-")
    }
    assert rows["registers"]["attrs"]["class"] == "row-regression"
    assert "✗ regression" in Dom.text(rows["registers"])
    assert rows["time"]["attrs"]["class"] == "row-ambiguous"
    assert not Dom.find(rows["time"], "svg")  # too few samples: no interval to draw
    timed = [r for r in Dom.find(cases["scan"], "tr") if "a/b" in Dom.text(r)][0]
    assert timed["attrs"]["class"] == "row-regression"
    svg = Dom.find(timed, "svg", "change")[0]  # the change with its interval and thresholds
    lines = Dom.find(svg, "line", "ci")
    point = float(Dom.find(svg, "circle", "pt")[0]["attrs"]["cx"])
    zero = float(Dom.find(svg, "line", "one")[0]["attrs"]["x1"])
    assert zero < float(lines[0]["attrs"]["x1"]) < point < float(lines[0]["attrs"]["x2"])
    assert len(Dom.find(svg, "line", "nowline")) == 2  # the threshold either side
    assert rows["spill_bytes"]["attrs"]["class"] == "row-same"  # folded, still there
    assert "stored timings were recorded with driver 570.1" in Dom.text(dom.by_id("warnings"))
    assert "NVIDIA H100 80GB HBM3" in Dom.text(dom.by_id("environment"))


def test_gate_html_format_needs_a_file_or_stdout_alone(tmp_path: Path) -> None:
    from gpuadvise.cli.gate import parse_format_targets
    from gpuadvise.errors import UsageError

    assert parse_format_targets(["html=" + str(tmp_path / "g.html")], None) == [
        ("html", tmp_path / "g.html")
    ]
    with pytest.raises(UsageError):
        parse_format_targets(["html", "json"], None)


def test_a_rerendered_json_document_gives_the_same_page() -> None:
    doc = make_doc()
    again = json.loads(json.dumps(doc))
    assert render_analysis(again, sources={FILE: SOURCE}) == render(copy.deepcopy(doc))


def test_templates_are_package_data() -> None:
    names = {p.name for p in H.template_dir().iterdir()}
    assert {"analysis.html.j2", "gate.html.j2", "_macros.html.j2", "_style.css"} <= names
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^\s*"jinja2>=', text, flags=re.M)


GATE_CONFIG = """\
[gate]
baseline = "ci/gate-baseline.json"

[[gate.cases]]
name = "scale"
source = "kernels/scale.cu"
kernel = "scale"
grid = 64
block = 256
args = { n = 16384 }
metrics = ["registers", "spill_bytes", "occupancy", "time"]
"""

GATE_KERNEL = """\
// gate: registers={regs} spill_bytes=0 occupancy=0.5 time_ms={time}

__global__ void scale(float* out, const float* in, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}}
"""


def test_gate_command_writes_the_page_beside_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gate_fakes import SourceProvider

    from gpuadvise.cli.gate import gate_command

    (tmp_path / "gpuadvise.toml").write_text(GATE_CONFIG)
    kernel = tmp_path / "kernels" / "scale.cu"
    kernel.parent.mkdir()
    kernel.write_text(GATE_KERNEL.format(regs=32, time=1.0))
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=tmp_path) == 0
    kernel.write_text(GATE_KERNEL.format(regs=40, time=1.3))
    capsys.readouterr()
    page = tmp_path / "out" / "gate.html"
    code = gate_command(provider=SourceProvider(), cwd=tmp_path, formats=[f"html={page}"])
    assert code == 1
    assert "FAILED" in capsys.readouterr().out  # the terminal table still goes to stdout
    text = page.read_text(encoding="utf-8")
    assert external_references(text) == []
    dom = Dom(text)
    assert Dom.text(dom.by_id("status")).startswith("FAILED: 2 regression")
    (case,) = [n for n in dom.all if n["attrs"].get("data-case") == "scale"]
    assert "kernels/scale.cu:3" in Dom.text(case)  # the kernel's __global__ line
    rows = {
        Dom.text(Dom.find(r, "td")[0]).split()[0]: r
        for r in Dom.find(case, "tr")
        if r["attrs"].get("class", "").startswith("row-")
    }
    assert rows["registers"]["attrs"]["class"] == "row-regression"
    assert rows["time"]["attrs"]["class"] == "row-regression"
    assert Dom.find(rows["time"], "svg", "change")  # stored samples: the change's interval
    assert rows["spill_bytes"]["attrs"]["class"] == "row-same"
