"""The HTML report of a real analysis, loaded in a real headless browser (Chromium).

The page of ``gpuadvise analyze kernels/reduction/reduce.cu --kernel reduce2 --gpu H100 --format
html`` must load with no console message, show every finding at its line, draw every point of its
charts, fetch nothing (Chromium's network log lists every request the page makes; every host name
resolves to nothing, so a fetch would also fail), fit a narrow window and print.

Needs a CUDA toolkit (nvcc, from the toolkit wheels) and Chromium: Debian's ``chromium`` package
(``apt-get install chromium``), or any Chrome/Chromium named by ``$GPUADVISE_CHROMIUM``. Skipped,
with the reason, where either is missing. Control pages check that the checks can fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_html import Dom, external_references

from gpuadvise.toolchain import find_toolchain

ROOT = Path(__file__).resolve().parents[2]
REDUCE = "kernels/reduction/reduce.cu"


def _browser() -> str | None:
    named = os.environ.get("GPUADVISE_CHROMIUM")
    if named:
        return shutil.which(named) or (named if os.access(named, os.X_OK) else None)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _have_nvcc() -> bool:
    try:
        find_toolchain()
    except Exception:
        return False
    return True


BROWSER = _browser()
pytestmark = [
    pytest.mark.skipif(
        BROWSER is None,
        reason="no headless Chromium: apt-get install chromium (or set GPUADVISE_CHROMIUM)",
    ),
    pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolkit (pip install .[toolkit])"),
]


@dataclass
class Loaded:
    dom: str
    console: list[str]
    requests: list[str]
    stderr: str


def _page_requests(netlog: Path) -> list[str]:
    """The URLs the page asked for: the network log's URL requests started on behalf of a
    document from disk (the browser's own background requests have no such initiator)."""
    text = netlog.read_text(encoding="utf-8", errors="replace").rstrip().rstrip(",")
    if not text.endswith("}"):  # a log cut short: close the events list
        text += "]}"
    log = json.loads(text)
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = []
    for event in log.get("events", []):
        if names.get(event.get("type")) != "URL_REQUEST_START_JOB":
            continue
        params = event.get("params") or {}
        url = params.get("url")
        if not url:
            continue
        from_page = params.get("initiator") not in (None, "not an origin") or "file://" in str(
            params.get("network_isolation_key", "")
        )
        if from_page:
            urls.append(url)
    return urls


def load(
    page: Path, tmp: Path, *, size: tuple[int, int] = (1200, 900), mode: str = "dom"
) -> Loaded:
    """Open ``page`` from disk in headless Chromium; ``mode``: ``dom`` (the DOM after load),
    ``pdf`` (print it to ``<page>.pdf``) or ``png`` (a screenshot to ``<page>.png``)."""
    assert BROWSER is not None
    profile = tmp / f"profile-{page.stem}-{mode}"
    netlog = tmp / f"netlog-{page.stem}-{mode}.json"
    args = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--no-first-run",
        "--no-default-browser-check",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--log-net-log={netlog}",
        "--net-log-capture-mode=Everything",
        f"--window-size={size[0]},{size[1]}",
        "--virtual-time-budget=3000",
    ]
    if mode == "dom":
        args.append("--dump-dom")
    elif mode == "pdf":
        args += ["--no-pdf-header-footer", f"--print-to-pdf={page.with_suffix('.pdf')}"]
    else:
        args += ["--hide-scrollbars", f"--screenshot={page.with_suffix('.png')}"]
    args.append(page.resolve().as_uri())
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return Loaded(proc.stdout, console, _page_requests(netlog), proc.stderr)


MEASURE = """<script>
addEventListener("load", () => {
  const d = document.documentElement;
  d.setAttribute("data-overflow", String(d.scrollWidth - window.innerWidth));
  d.setAttribute("data-width", String(window.innerWidth));
});
</script>"""


def with_script(page: Path, script: str, dest: Path) -> Path:
    """A copy of ``page`` with ``script`` before ``</body>`` (the page itself has none)."""
    dest.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"))
    return dest


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The page and the JSON of the same real analysis."""
    tmp = tmp_path_factory.mktemp("html-report")
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(tmp / "cache")}
    page = tmp / "reduce2.html"
    base = [sys.executable, "-m", "gpuadvise", "analyze", REDUCE, "--kernel", "reduce2"]
    base += ["--gpu", "H100", "--no-measure"]
    for args in (["--format", "html", "-o", str(page)], ["--json"]):
        proc = subprocess.run(
            base + args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
        )
        assert proc.returncode == 0, proc.stderr
    return page, json.loads(proc.stdout)


def test_the_checks_catch_console_errors_and_requests(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>x</title></head><body>'
        '<img src="http://gpuadvise.invalid/a.png">'
        '<script>console.error("deliberate"); throw new Error("thrown");</script></body></html>'
    )
    got = load(bad, tmp_path)
    assert any("deliberate" in c for c in got.console), got.stderr[-2000:]
    assert any("thrown" in c for c in got.console)
    assert "http://gpuadvise.invalid/a.png" in got.requests
    assert external_references(bad.read_text())


def test_the_page_loads_clean_and_fetches_nothing(
    report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, _ = report
    text = page.read_text(encoding="utf-8")
    assert external_references(text) == []
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*https?:""", text, flags=re.I)
    got = load(page, tmp_path)
    assert got.console == [], "\n".join(got.console)
    assert got.requests == [], got.requests
    assert "<title>gpuadvise: reduce2</title>" in got.dom


def test_every_finding_is_there_at_its_line(
    report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, doc = report
    dom = Dom(load(page, tmp_path).dom)
    findings = doc["findings"]
    assert {f["rule"] for f in findings} >= {"GA201", "GA202"}  # what reduce2 is known for
    items = Dom.find(dom.by_id("findings"), "li", "finding")
    assert [n["attrs"]["data-rule"] for n in items] == [f["rule"] for f in findings]
    for i, f in enumerate(findings, 1):
        item = dom.by_id(f"finding-{i}")
        text = Dom.text(item)
        assert f["rule"] in text and re.sub(r"\s+", " ", f["message"]) in text
        assert f"reduce.cu:{f['line']}" in text
        row = dom.by_id(f"L0-{f['line']}")  # the source view's row of that line ...
        badges = [a for a in Dom.find(row, "a", "badge") if a["attrs"]["href"] == f"#finding-{i}"]
        assert [Dom.text(a) for a in badges] == [f["rule"]]  # ... carries the finding's mark
        code = Dom.text(Dom.find(row, "td", "code")[0])
        source = (ROOT / REDUCE).read_text().splitlines()[f["line"] - 1]
        source = re.sub(r"\s*// expect: GA\d{3}(, GA\d{3})*$", "", source)  # markers not shown
        assert code == re.sub(r"\s+", " ", source).strip()
        link = [a for a in Dom.find(item, "a") if a["attrs"]["href"] == f"#L0-{f['line']}"]
        assert link, "the finding links to its line"
    # the GA201 line carries the bank-conflict numbers of the JSON
    shared = [ln for ln in doc["shared_memory"]["lines"] if ln["line"] == 34]
    cell = Dom.text(Dom.find(dom.by_id("L0-34"), "td", "m")[1])
    wavefronts = sum(ln["wavefronts"] for ln in shared)
    ideal = sum(ln["ideal_wavefronts"] for ln in shared)
    assert cell.startswith(f"{wavefronts:,} / {ideal:,}")


def test_the_charts_have_their_points(report: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    from gpuadvise.devices import preset
    from gpuadvise.model.occupancy import KernelResources, sweeps

    page, doc = report
    dom = Dom(load(page, tmp_path).dom)
    inp = doc["occupancy"]["input"]
    k = KernelResources(
        inp["threads_per_block"],
        inp["registers_per_thread"],
        inp["static_smem_bytes"],
        inp["dynamic_smem_bytes"],
    )
    for s in sweeps(preset("H100"), k):
        svg = dom.by_id(f"sweep-{s.resource}")
        circles = Dom.find(svg, "circle", "pt")
        assert len(circles) == len(s.values), s.resource
        now = Dom.find(svg, "circle", "now")
        assert len(now) == 1 and f"{s.current}" in Dom.text(now[0])
        ys = [float(c["attrs"]["cy"]) for c in circles]
        # higher occupancy is drawn higher: the y order is the reverse of the occupancy order
        for i in range(len(ys) - 1):
            o1, o2, y1, y2 = s.occupancy[i], s.occupancy[i + 1], ys[i], ys[i + 1]
            assert (o1 < o2) == (y1 > y2) and (o1 == o2) == (y1 == y2)
        assert Dom.find(svg, "path", "series")[0]["attrs"]["d"].count("H") == len(s.values) - 1
    l2 = dom.by_id("l2-orders")
    assert len(Dom.find(l2, "rect", "l2bar")) == len(doc["l2"]["orders"])
    waves = Dom.find(dom.by_id("waves"), "rect", "wave")
    w = doc["waves"]
    assert len(waves) == w["total_ctas"] // w["ctas_per_wave"] + (1 if w["last_wave_ctas"] else 0)
    bars = Dom.find(dom.by_id("ranking"), "svg", "speedup")
    estimated = [f for f in doc["findings"] if (f["estimated_speedup"] or {}).get("speedup")]
    assert len(bars) == len(estimated)


def test_the_page_fits_a_narrow_window_and_prints(
    report: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    page, _ = report
    probe = with_script(page, MEASURE, tmp_path / "probe.html")
    for width in (1200, 500):  # headless Chromium's narrowest window: 500 px
        dom = Dom(load(probe, tmp_path, size=(width, 900)).dom)
        html = [n for n in dom.all if n["tag"] == "html"][0]
        assert int(html["attrs"]["data-width"]) == width
        assert int(html["attrs"]["data-overflow"]) <= 0, f"the page scrolls sideways at {width}px"
    control = with_script(
        page, '<div style="width:2000px">wide</div>' + MEASURE, tmp_path / "wide.html"
    )
    dom = Dom(load(control, tmp_path, size=(500, 900)).dom)
    assert int([n for n in dom.all if n["tag"] == "html"][0]["attrs"]["data-overflow"]) > 0
    got = load(page, tmp_path, mode="pdf")
    pdf = page.with_suffix(".pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b", pdf)) >= 2
    assert got.console == [] and got.requests == []
