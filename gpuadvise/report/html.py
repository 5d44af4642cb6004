"""The HTML report: one self-contained page (inline CSS, inline SVG, no script, nothing fetched)
that a reviewer opens from a CI artifact or a mail attachment.

The page is rendered from data, not from live objects, so that a saved report renders the same
page:

- :func:`render_analysis` takes the :class:`~gpuadvise.report_types.AnalysisReport` (its
  ``analyze --json`` document, sweeps and source lines: nothing is computed or read here);
- :func:`render_gate` takes the :class:`~gpuadvise.report_types.GateReport` (its ``gate --format
  json`` document, table and summary line).

The templates (jinja2, autoescaped) live in ``gpuadvise/report/templates``; this module turns the
documents into plain view models: numbers formatted, chart geometry computed, heat colours picked
(a viridis ramp: readable for colour-blind readers, and every cell prints its number too).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.report.registers_view import Tick  # one tick type for every chart
from gpuadvise.report.safe_text import controls, guard
from gpuadvise.report.source_lines import fix_kind, without_marker

if TYPE_CHECKING:
    import jinja2

    from gpuadvise.report_types import AnalysisReport, BatchReport, GateReport

__all__ = [
    "analysis_html",
    "gate_html",
    "heat_colour",
    "render_analysis",
    "render_gate",
]

# The viridis colour map at five stops (matplotlib's values): perceptually uniform and readable
# with the common colour-vision deficiencies. Heat runs from its light end (little) to its dark
# end (most).
_VIRIDIS = ((0x44, 0x01, 0x54), (0x3B, 0x52, 0x8B), (0x21, 0x91, 0x8C), (0x5E, 0xC9, 0x62),
            (0xFD, 0xE7, 0x25))  # fmt: skip


def heat_colour(t: float) -> tuple[str, str]:
    """Background and text colour for a heat of ``t`` in [0, 1] (0: the light end)."""
    t = min(max(t, 0.0), 1.0)
    x = (1.0 - t) * (len(_VIRIDIS) - 1)
    i = min(int(x), len(_VIRIDIS) - 2)
    f = x - i
    rgb = tuple(round(a + (b - a) * f) for a, b in zip(_VIRIDIS[i], _VIRIDIS[i + 1], strict=True))
    luminance = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    return "#{:02x}{:02x}{:02x}".format(*rgb), "#111111" if luminance > 110 else "#ffffff"


# ---------------------------------------------------------------------------------------------
# The pages.


def analysis_html(report: AnalysisReport) -> str:
    """``analyze --format html``: the page of one analysis."""
    return render_analysis(report)


def gate_html(report: GateReport) -> str:
    """``gate --format html``: the gate's result across cases as one page."""
    return render_gate(report)


# ---------------------------------------------------------------------------------------------
# Formatting.


def _num(v: Any, digits: int = 3) -> str:
    """A number for people: integers with thousands separators, floats to ``digits``
    significant digits."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def _bytes(n: float | int | None) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _mib(n: int | None) -> str:
    if n is None:
        return "–"
    return f"{n / 2**20:.3g} MiB"


def _kib(n: int | None) -> str:
    if n is None:
        return "–"
    if n >= 1024 and n % 1024 == 0:
        return f"{n:,} B ({n // 1024} KiB)"
    if n >= 1024:
        return f"{n:,} B ({n / 1024:.1f} KiB)"
    return f"{n:,} B"


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x * 100:.{digits}f}%"


def _dims(v: Sequence[int]) -> str:
    dims = list(v)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return "×".join(str(x) for x in dims)


def _rel(path: str | None) -> str:
    if not path:
        return ""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _key(path: str | None) -> str:
    return os.path.normpath(os.path.abspath(path)) if path else ""


_LIMIT_LABELS = {
    "warps": "warps (block size)",
    "registers": "registers",
    "shared_memory": "shared memory",
    "blocks": "blocks per SM",
    "barriers": "barriers",
    "virtual_resources": "virtual resources",
}

_SWEEP_TITLES = {
    "block_size": ("Threads per block", "threads"),
    "registers": ("Registers per thread", "registers"),
    "shared_memory": ("Shared memory per block", "bytes (K = 1024)"),
}


# ---------------------------------------------------------------------------------------------
# Charts: geometry for the templates' inline SVG.


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str
    current: bool = False


@dataclass(frozen=True)
class LineChart:
    """A line chart of one occupancy sweep: every sample a circle, the current one marked."""

    id: str
    title: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    points: tuple[Point, ...]
    path: str
    xticks: tuple[Tick, ...]
    yticks: tuple[Tick, ...]
    xlabel: str
    current_label: str
    current: Point | None


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out = []
    v = first
    while v <= hi + 1e-9:
        out.append(v)
        v += step
    return out


def _tick_label(v: float, resource: str) -> str:
    if resource == "shared_memory":
        return f"{v / 1024:g}K" if v else "0"
    return f"{v:g}"


def _sweep_ticks(lo: float, hi: float, resource: str) -> list[float]:
    if resource == "shared_memory":  # whole KiB
        return [v * 1024 for v in _nice_ticks(lo / 1024, hi / 1024) if v == int(v)]
    return _nice_ticks(lo, hi)


def sweep_chart(sweep: Mapping[str, Any], max_warps: int | None) -> LineChart:
    """The SVG geometry of one sweep (``{"resource", "values", "occupancy", "current"}``)."""
    resource = str(sweep["resource"])
    values = [float(v) for v in sweep["values"]]
    occ = [float(o) for o in sweep["occupancy"]]
    current = sweep.get("current")
    width, height, left, right, top, bottom = 340, 190, 44, 12, 14, 40
    pw, ph = width - left - right, height - top - bottom
    lo, hi = min(values), max(values)
    span = hi - lo or 1.0

    def sx(v: float) -> float:
        return round(left + (v - lo) / span * pw, 2)

    def sy(o: float) -> float:
        return round(top + (1.0 - o) * ph, 2)

    title, unit = _SWEEP_TITLES.get(resource, (resource, ""))
    points = []
    cur_point = None
    for v, o in zip(values, occ, strict=True):
        warps = f" ({round(o * max_warps)} warps/SM)" if max_warps else ""
        label = f"{_tick_label(v, resource) if resource == 'shared_memory' else f'{v:g}'}"
        p = Point(
            sx(v),
            sy(o),
            f"{label} {unit}: occupancy {o * 100:.1f}%{warps}",
            current is not None and v == float(current),
        )
        points.append(p)
        if p.current:
            cur_point = p
    # Occupancy only changes at the samples: draw steps, not slopes.
    path = ""
    for i, p in enumerate(points):
        path += f"M{p.x},{p.y}" if i == 0 else f"H{p.x}V{p.y}"
    xticks = tuple(
        Tick(sx(v), _tick_label(v, resource))
        for v in _sweep_ticks(lo, hi, resource)
        if lo <= v <= hi
    )
    yticks = tuple(Tick(sy(f), f"{f * 100:.0f}%") for f in (0, 0.25, 0.5, 0.75, 1.0))
    cur_label = ""
    if cur_point is not None and current is not None:
        o = occ[[i for i, p in enumerate(points) if p.current][0]]
        cur_label = f"now: {_num(current)} {unit} → {o * 100:.1f}%"
    return LineChart(
        id=f"sweep-{resource}",
        title=title,
        width=width,
        height=height,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        points=tuple(points),
        path=path,
        xticks=xticks,
        yticks=yticks,
        xlabel=unit,
        current_label=cur_label,
        current=cur_point,
    )


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    label: str
    value: str
    title: str
    best: bool = False
    extra: str = ""


@dataclass(frozen=True)
class BarChart:
    id: str
    width: int
    height: int
    bars: tuple[Bar, ...]
    axis_x: float
    axis_top: float
    axis_bottom: float
    ticks: tuple[Tick, ...]


def l2_chart(l2: Mapping[str, Any]) -> BarChart:
    """Horizontal bars: the predicted L2 hit rate of each CTA launch order."""
    orders = list(l2.get("orders") or [])
    best = l2.get("best") or {}
    label_w, bar_w, row_h, top = 120, 260, 26, 8
    width = label_w + bar_w + 200
    bars = []
    for i, o in enumerate(orders):
        name = str(o["order"]) + ("" if o.get("n") is None else f" N={o['n']}")
        is_best = o.get("order") == best.get("order") and o.get("n") == best.get("n")
        w = max(float(o["hit_rate"]), 0.0) * bar_w
        dram = _bytes(o.get("dram_bytes"))
        bars.append(
            Bar(
                x=label_w,
                y=top + i * row_h,
                w=round(w, 2),
                h=row_h - 8,
                label=name,
                value=f"{o['hit_rate'] * 100:.1f}%",
                title=f"{name}: predicted L2 hit rate {o['hit_rate'] * 100:.1f}%, DRAM reads "
                f"{dram}, working set {_bytes(o.get('working_set_bytes'))}",
                best=is_best and len(orders) > 1,
                extra=f"DRAM {dram}",
            )
        )
    height = top + len(orders) * row_h + 22
    ticks = tuple(Tick(label_w + f * bar_w, f"{f * 100:.0f}%") for f in (0, 0.25, 0.5, 0.75, 1))
    return BarChart("l2-orders", width, height, tuple(bars), label_w, top - 4, height - 20, ticks)


@dataclass(frozen=True)
class WaveChart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    compressed: bool


def waves_chart(w: Mapping[str, Any]) -> WaveChart:
    """One column per wave of CTAs, the last one as full as it is (up to 64 waves drawn)."""
    full = int(w["total_ctas"] // max(int(w["ctas_per_wave"]), 1))
    last = float(w["last_wave_fill"]) if w.get("last_wave_ctas") else 0.0
    fills = [1.0] * full + ([last] if last > 0 else [])
    compressed = len(fills) > 64
    if compressed:
        fills = [1.0] * 63 + [last if last > 0 else 1.0]
    col, gap, h, top = max(10, min(36, 480 // max(len(fills), 1))), 2, 44, 4
    width = max(len(fills) * (col + gap), 60)
    bars = tuple(
        Bar(
            x=i * (col + gap),
            y=top + (1 - f) * h,
            w=col,
            h=round(f * h, 2),
            label="",
            value="",
            title=(
                f"wave {i + 1}: {f * 100:.0f}% of the GPU's CTA slots"
                if not (compressed and i == len(fills) - 2)
                else "…"
            ),
            best=f < 1.0,
        )
        for i, f in enumerate(fills)
    )
    return WaveChart(width, top + h + 2, bars, compressed)


@dataclass(frozen=True)
class SpeedupBar:
    """A finding's speedup on the findings' common scale: the measured bar with its 95%
    interval, or the estimate (a hollow marker)."""

    width: int
    height: int
    one_x: float
    bar_x: float
    bar_w: float
    ci: tuple[float, float] | None
    estimate_x: float | None
    ticks: tuple[Tick, ...]
    measured: bool
    title: str
    label: str
    label_x: float
    label_anchor: str


class _SpeedScale:
    def __init__(self, values: Iterable[float]) -> None:
        vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
        self.lo = min([1.0, *vals]) * 0.95
        self.hi = max([1.0, *vals]) * 1.05
        self.width, self.left, self.right = 300, 8, 52

    def x(self, v: float) -> float:
        pw = self.width - self.left - self.right
        return round(self.left + (v - self.lo) / (self.hi - self.lo) * pw, 2)

    def ticks(self) -> tuple[Tick, ...]:
        return tuple(Tick(self.x(v), f"{v:g}×") for v in _nice_ticks(self.lo, self.hi, 4))


def _speedups(f: Mapping[str, Any]) -> list[float]:
    """Every speedup a finding states (estimate, measurement and its interval)."""
    m = f.get("measured_speedup") or {}
    vals = [(f.get("estimated_speedup") or {}).get("speedup"), m.get("speedup")]
    vals += [m.get("ci_low"), m.get("ci_high")]
    return [float(v) for v in vals if v is not None]


def _speedup_bar(f: Mapping[str, Any], scale: _SpeedScale) -> SpeedupBar | None:
    m = f.get("measured_speedup")
    est = (f.get("estimated_speedup") or {}).get("speedup")
    if m is None and est is None:
        return None
    one = scale.x(1.0)
    if m is not None:
        s = float(m["speedup"])
        ci = None
        if m.get("ci_low") is not None and m.get("ci_high") is not None:
            ci = (scale.x(float(m["ci_low"])), scale.x(float(m["ci_high"])))
        title = f"measured {s:.3f}×" + (
            f", 95% interval {m['ci_low']:.3f}–{m['ci_high']:.3f}" if ci else ""
        )
        if est is not None:
            title += f"; estimated {float(est):.2f}×"
    else:
        s = float(est or 0.0)
        ci = None
        title = f"estimated {s:.2f}× (not measured)"
    x = scale.x(s)
    # the value right of the bar and its interval (the scale keeps a margin for it)
    end = max(x, one, ci[1] if ci else x)
    label = (
        f"{s:.2f}×"
        if m is not None
        else (
            ("≤ " if (f.get("estimated_speedup") or {}).get("kind") == "upper-bound" else "~")
            + f"{s:.2f}×"
        )
    )
    return SpeedupBar(
        label=label,
        label_x=end + 5,
        label_anchor="start",
        width=scale.width,
        height=34,
        one_x=one,
        bar_x=min(one, x),
        bar_w=abs(x - one),
        ci=ci,
        estimate_x=None if est is None else scale.x(float(est)),
        ticks=scale.ticks(),
        measured=m is not None,
        title=title,
    )


# ---------------------------------------------------------------------------------------------
# The source view.


@dataclass
class Cell:
    text: str = ""
    title: str = ""
    bg: str = ""
    fg: str = ""
    sub: str = ""
    heat: float = 0.0


@dataclass
class SourceRow:
    number: int
    anchor: str
    code: str
    sass: Cell = field(default_factory=Cell)
    shared: Cell = field(default_factory=Cell)
    glob: Cell = field(default_factory=Cell)
    live: Cell = field(default_factory=Cell)  # live registers: max (mean) over the line's SASS
    findings: list[tuple[int, str, str]] = field(default_factory=list)  # (index, rule, severity)
    gap_before: int = 0  # lines left out before this row
    has_data: bool = False


@dataclass
class SourceFile:
    path: str
    index: int
    rows: list[SourceRow]
    note: str = ""


def _ratio_cell(done: float, ideal: float, extra: float, top: float, what: str, scope: str) -> Cell:
    ratio = done / ideal if ideal else 0.0
    t = extra / top if top > 0 else 0.0
    bg, fg = heat_colour(t) if extra > 0 else ("", "")
    return Cell(
        text=f"{_num(done)} / {_num(ideal)}",
        sub=f"{ratio:.2f}×" if ideal else "",
        title=f"{_num(done)} {what}, ideal {_num(ideal)} ({_num(extra)} excess){scope}",
        bg=bg,
        fg=fg,
        heat=t,
    )


def source_view(
    doc: Mapping[str, Any],
    findings: Sequence[Mapping[str, Any]],
    sources: Mapping[str, Sequence[str] | None],
    kernel_lines: tuple[int, int] | None = None,
    context: int = 2,
) -> list[SourceFile]:
    """The kernel's source with a row per line: SASS memory instructions, shared-memory
    wavefronts and global sectors against their ideal, and the findings at that line.
    ``sources``: file -> its lines (None or absent: not readable); ``kernel_lines``: the
    kernel's definition in its file, shown whole."""
    kernel = doc.get("kernel") or {}
    main = _key(kernel.get("file"))
    sass: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for m in doc.get("sass_lines") or []:
        if m.get("space") == "constant":  # parameter and constant-bank loads: noise here
            continue
        sass.setdefault((_key(m.get("file")), int(m["line"])), []).append(m)
    shared: dict[tuple[str, int], list[float]] = {}
    for ln in (doc.get("shared_memory") or {}).get("lines") or []:
        acc = shared.setdefault((_key(ln["file"]), int(ln["line"])), [0.0, 0.0, 0.0])
        acc[0] += ln["wavefronts"]
        acc[1] += ln["ideal_wavefronts"]
        acc[2] += ln["instructions"]
    glob: dict[tuple[str, int], list[float]] = {}
    for ln in (doc.get("global_memory") or {}).get("lines") or []:
        acc = glob.setdefault((_key(ln["file"]), int(ln["line"])), [0.0, 0.0, 0.0])
        acc[0] += ln["sectors"]
        acc[1] += ln["ideal_sectors"]
        acc[2] += ln["requests"]
    marks: dict[tuple[str, int], list[tuple[int, str, str]]] = {}
    for i, f in enumerate(findings, 1):
        if f.get("file") and f.get("line"):
            marks.setdefault((_key(f["file"]), int(f["line"])), []).append(
                (i, str(f["rule"]), str(f["severity"]))
            )
    snippets = {
        (_key(m.get("file")), int(m["line"])): str(m.get("source") or "")
        for m in doc.get("sass_lines") or []
    }
    emu = doc.get("emulation") or {}
    scope = f" over {emu['ctas_traced']:,} traced CTAs" if emu.get("ctas_traced") else ""
    from gpuadvise.report.registers_view import line_figures

    live = line_figures(doc.get("registers"))
    live_top = float((doc.get("registers") or {}).get("allocated") or 0)

    sass_top = max((sum(m["count"] for m in v) for v in sass.values()), default=0)
    # the excess is coloured against the busiest line's traffic: a few extra sectors on a busy
    # line stay pale, most of a busy line's sectors being excess is dark
    sh_top = max((v[0] for v in shared.values()), default=0.0)
    gl_top = max((v[0] for v in glob.values()), default=0.0)

    files = sorted(
        {k[0] for k in (*sass, *shared, *glob, *marks)} | ({main} if main else set()),
        key=lambda p: (p != main, p),
    )
    out = []
    for index, path in enumerate(files):
        data_lines = {ln for (p, ln) in (*sass, *shared, *glob, *marks) if p == path}
        text = _lines_of(sources, path)
        note = ""
        shown: set[int] = set()
        if text is None:
            note = "the source file is not readable here: only the lines with data are shown"
            shown = set(data_lines)
            last = max(data_lines, default=0)
        else:
            last = len(text)
            if path == main and kernel.get("name") and kernel_lines is not None:
                shown.update(range(kernel_lines[0], kernel_lines[1] + 1))
            for n in data_lines:
                shown.update(range(max(1, n - context), min(last, n + context) + 1))
        rows: list[SourceRow] = []
        prev = 0
        for n in sorted(x for x in shown if 0 < x <= max(last, 1)):
            code = text[n - 1] if text and n <= len(text) else snippets.get((path, n), "")
            row = SourceRow(number=n, anchor=f"L{index}-{n}", code=without_marker(code))
            row.gap_before = n - prev - 1 if prev else 0
            prev = n
            k = (path, n)
            if k in sass:
                ms = sass[k]
                count = sum(m["count"] for m in ms)
                bg, fg = heat_colour(count / sass_top) if sass_top else ("", "")
                row.sass = Cell(
                    text=str(count),
                    sub=", ".join(sorted({op for m in ms for op in m["opcodes"]})),
                    title="; ".join(
                        f"{m['count']}× {m['space']} {m['kind']} {m['width_bits']}-bit "
                        f"({', '.join(m['opcodes'])})"
                        for m in ms
                    ),
                    bg=bg,
                    fg=fg,
                    heat=count / sass_top if sass_top else 0.0,
                )
            if k in shared:
                wf, ideal, instr = shared[k]
                row.shared = _ratio_cell(wf, ideal, wf - ideal, sh_top, "wavefronts", scope)
                row.shared.title += f"; {_num(instr)} warp-level instructions"
            if k in glob:
                sec, ideal, req = glob[k]
                row.glob = _ratio_cell(sec, ideal, sec - ideal, gl_top, "sectors", scope)
                row.glob.title += f"; {_num(req)} requests"
            if k in live:
                most, mean = live[k]
                bg, fg = heat_colour(most / live_top) if live_top else ("", "")
                row.live = Cell(
                    text=str(most),
                    sub=f"{mean:.1f}",
                    title=f"at most {most} registers live over this line's SASS, {mean:.1f} on "
                    f"average (of {live_top:.0f} allocated)",
                    bg=bg,
                    fg=fg,
                    heat=most / live_top if live_top else 0.0,
                )
            row.findings = marks.get(k, [])
            row.has_data = k in sass or k in shared or k in glob
            rows.append(row)
        out.append(SourceFile(_rel(path), index, rows, note))
    return out


# ---------------------------------------------------------------------------------------------
# The findings.


def _evidence_rows(f: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    for e in f.get("evidence") or []:
        v = e.get("value")
        value = _num(v) + (f" {e['unit']}" if e.get("unit") else "")
        limit = ""
        if e.get("threshold") is not None and e.get("op"):
            limit = f"{e['op']} {_num(e['threshold'])}"
        rows.append((str(e.get("metric")), value, limit))
    return rows


def _diff_lines(diff: str | None) -> list[tuple[str, str]]:
    out = []
    for line in (diff or "").rstrip("\n").splitlines():
        if line.startswith(("+++", "---")):
            cls = "meta"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        out.append((cls, line))
    return out


def _estimate_label(est: Mapping[str, Any] | None) -> str:
    if not est or est.get("speedup") is None:
        return "not estimated"
    s = float(est["speedup"])
    if est.get("kind") == "upper-bound":
        p = (est.get("inputs") or {}).get("point_speedup")
        if isinstance(p, int | float) and 1.0 <= p and round(p, 2) < round(s, 2):
            return f"~{p:.2f}×, ≤ {s:.2f}× (point, upper bound)"
        return f"≤ {s:.2f}× (upper bound)"
    return f"~{s:.2f}× ({est.get('kind') or 'estimate'})"


def _measured_label(m: Mapping[str, Any] | None) -> str:
    if not m:
        return ""
    what = "proxy-measured" if m.get("kind") == "proxy" else "measured"
    ci = ""
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        ci = f", 95% interval {m['ci_low']:.3f}–{m['ci_high']:.3f}"
    label = f", {m['label']}" if m.get("label") else ""
    return f"{float(m['speedup']):.3f}× ({what} on {m.get('device')}{label}{ci})"


def _finding_view(f: Mapping[str, Any], index: int, scale: _SpeedScale,
                  anchors: Mapping[tuple[str, int], str]) -> dict[str, Any]:  # fmt: skip
    est = f.get("estimated_speedup")
    m = f.get("measured_speedup")
    var = f.get("variant")
    loc = ""
    if f.get("file"):
        loc = _rel(f["file"]) + (f":{f['line']}" if f.get("line") else "")
    trials = []
    for t in f.get("trials") or []:
        tm = t.get("measured_speedup")
        trials.append(
            {
                "label": t.get("label") or "variant",
                "description": t.get("description") or "",
                "result": _measured_label(tm) if tm else (t.get("note") or "not measured"),
                "verified": t.get("verified"),
                "ms": (
                    f"{tm['baseline_ms']:.4f} → {tm['variant_ms']:.4f} ms"
                    if tm and tm.get("baseline_ms") is not None
                    else ""
                ),
            }
        )
    return {
        "index": index,
        "rule": f.get("rule"),
        "name": f.get("name"),
        "title": f.get("title"),
        "severity": f.get("severity"),
        "message": f.get("message"),
        "location": loc,
        "anchor": anchors.get((_key(f.get("file")), int(f.get("line") or 0)), ""),
        "error": f.get("error"),
        "evidence": _evidence_rows(f),
        "estimate": _estimate_label(est),
        "estimate_method": (est or {}).get("method") or "",
        "estimate_inputs": [(k, _num(v)) for k, v in ((est or {}).get("inputs") or {}).items()],
        "measured": _measured_label(m),
        "speed": (
            f"{float(m['speedup']):.2f}× {'proxy-' if m.get('kind') == 'proxy' else ''}measured"
            if m
            else _estimate_label(est)
        ),
        "measured_ms": (
            f"{m['baseline_ms']:.4f} ms → {m['variant_ms']:.4f} ms"
            + (f", {m['samples']} samples" if m.get("samples") else "")
            if m and m.get("baseline_ms") is not None
            else ""
        ),
        "outputs_match": None if not m else m.get("outputs_match"),
        "verified": f.get("verified"),
        "rank_basis": f.get("rank_basis"),
        "bar": _speedup_bar(f, scale),
        "variant": None
        if not var
        else {
            "safety": var.get("safety"),
            "kind": fix_kind(var.get("safety"), f.get("verified")),
            "label": var.get("label"),
            "description": var.get("description"),
            "diff": _diff_lines(var.get("diff")),
            "nvcc_flags": " ".join(var.get("nvcc_flags") or []),
            "defines": " ".join("-D" + d for d in var.get("defines") or []),
            "launch": ", ".join(
                f"{k} {_dims(v) if isinstance(v, list) else v}"
                for k, v in (var.get("launch") or {}).items()
            ),
            "proxy": var.get("proxy"),
            "alternatives": [a.get("label") or a.get("description") for a in var["alternatives"]]
            if var.get("alternatives")
            else [],
        },
        "trials": trials,
    }


# ---------------------------------------------------------------------------------------------
# The pages.


@cache
def _env() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpuadvise.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.filters["bytes"] = _bytes
    env.filters["kib"] = _kib
    env.filters["mib"] = _mib
    env.filters["dims"] = _dims
    env.filters["rel"] = _rel
    env.filters["basename"] = lambda loc: os.path.basename(loc) if loc else "launch"

    class GuardedTemplate(jinja2.Template):
        """Every page rendered is guarded (:func:`gpuadvise.report.safe_text.guard`)."""

        def render(self, *args: Any, **kwargs: Any) -> str:
            return guard(super().render(*args, **kwargs), "html")

    env.template_class = GuardedTemplate
    return env


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` of the templates, before autoescaping: a string's control
    characters shown as escapes (user text: names, paths, source lines); HTML the templates made
    (Markup) is kept."""
    from markupsafe import Markup

    if isinstance(value, str) and not isinstance(value, Markup):
        return controls(value, keep="\n\t")
    return value


def _version() -> str:
    from gpuadvise import __version__

    return __version__


def render_analysis(report: AnalysisReport) -> str:
    """The page of one analysis: its ``analyze --json`` document, with the sweeps and the
    source lines the report holds."""
    doc: dict[str, Any] = dict(report.document)
    sources = report.sources
    sweeps = [dict(s) for s in report.sweeps]
    sweep_note = (
        ""
        if sweeps
        else "the occupancy sweeps are not in this document (render it from a live analysis)"
    )
    if sweeps:  # the page's document holds them, as a live analysis's always did
        doc["occupancy"] = {**(doc.get("occupancy") or {}), "sweeps": sweeps}
    findings = list(doc.get("findings") or [])
    files = source_view(doc, findings, sources, report.kernel_lines)
    anchors = {(_key(sf.path), row.number): row.anchor for sf in files for row in sf.rows}
    occ = doc.get("occupancy") or {}
    charts = [sweep_chart(s, occ.get("max_warps_per_sm")) for s in sweeps]
    scale = _SpeedScale(v for f in findings for v in _speedups(f))
    views = [_finding_view(f, i, scale, anchors) for i, f in enumerate(findings, 1)]
    limits = [
        (
            _LIMIT_LABELS.get(name, name),
            "no limit" if v is None else _num(v),
            name in occ["limiters"],
        )
        for name, v in (occ.get("limits") or {}).items()
        if not (name == "barriers" and v is None)
    ]
    l2 = doc.get("l2")
    sh, gl = doc.get("shared_memory"), doc.get("global_memory")
    measured = sum(1 for f in findings if f.get("measured_speedup"))
    summary = _summary(doc, findings, measured)
    from gpuadvise.report.registers_view import registers_view

    registers = registers_view(doc, findings, _source_lookup(sources))
    return (
        _env()
        .get_template("analysis.html.j2")
        .render(
            doc=doc,
            title=f"gpuadvise: {doc['kernel']['name']}",
            version=_version(),
            files=files,
            findings=views,
            limits=limits,
            charts=charts,
            sweep_note=sweep_note,
            waves=None if not doc.get("waves") else waves_chart(doc["waves"]),
            l2=l2,
            l2_chart=None if not l2 or not l2.get("orders") else l2_chart(l2),
            shared=sh,
            glob=gl,
            summary=summary,
            rules_count=rules_count(doc),
            measured=measured,
            has_sass=any(r.sass.text for sf in files for r in sf.rows),
            has_shared=sh is not None,
            has_global=gl is not None,
            registers=registers,
            has_live=registers is not None,
            legend=[heat_colour(t / 8)[0] for t in range(9)],
            timings=", ".join(
                f"{name.removesuffix('_s')} {v:.2f} s"
                for name, v in (doc.get("timings_s") or {}).items()
                if isinstance(v, float | int) and not isinstance(v, bool)
            )
            + (
                " (compiled from the cache)"
                if (doc.get("timings_s") or {}).get("compile_cached")
                else ""
            ),
            spills=(doc["resources"]["spill_store_bytes"] or 0)
            + (doc["resources"]["spill_load_bytes"] or 0),
        )
    )


def rules_count(doc: Mapping[str, Any]) -> str:
    """``20 rules run``, or ``12 of 20 rules run`` when the document lists rules skipped."""
    total = len(doc.get("rules_run") or [])
    skipped = {s.get("rule") for s in doc.get("skipped_rules") or []}
    ran = total - len(skipped)
    return f"{total} rules run" if ran == total else f"{ran} of {total} rules run"


def _lines_of(sources: Mapping[str, Sequence[str] | None], path: str) -> list[str] | None:
    """The lines of source file ``path`` in ``sources`` (a report's), None when not there."""
    given = sources.get(path)
    if given is None:
        given = next((v for k, v in sources.items() if v is not None and _key(k) == _key(path)),
                     None)  # fmt: skip
    return None if given is None else list(given)


def _source_lookup(sources: Mapping[str, Sequence[str] | None]) -> Any:
    """(file, line) -> the line's text ("" when unknown), from ``sources`` (a report's)."""
    cache: dict[str, list[str] | None] = {}

    def text(file: str | None, line: int | None) -> str:
        if not file or not line:
            return ""
        if file not in cache:
            cache[file] = _lines_of(sources, file)
        lines = cache[file]
        return str(lines[line - 1]) if lines and 0 < line <= len(lines) else ""

    return text


def _summary(doc: Mapping[str, Any], findings: Sequence[Mapping[str, Any]],
             measured: int) -> list[dict[str, str]]:  # fmt: skip
    """The cards at the top: what to look at first."""
    occ = doc["occupancy"]
    cards = [
        {
            "label": "Occupancy",
            "value": _pct(occ["occupancy"], 0),
            "detail": f"{occ['active_warps_per_sm']} of {occ['max_warps_per_sm']} warps/SM; "
            f"limited by {', '.join(_LIMIT_LABELS.get(x, x) for x in occ['limiters'])}",
            "tone": "good" if occ["occupancy"] >= 0.5 else "warn",
        }
    ]
    w = doc.get("waves")
    if w:
        cards.append(
            {
                "label": "Waves",
                "value": f"{w['waves']:.2f}",
                "detail": f"{w['total_ctas']:,} CTAs, {w['ctas_per_wave']:,} per wave; "
                f"{w['tail_idle'] * 100:.1f}% of SM time idle in the tail",
                "tone": "warn" if w["tail_idle"] > 0.1 else "good",
            }
        )
    sh = doc.get("shared_memory")
    if sh and sh.get("total_wavefronts"):
        excess = 1 - sh["total_ideal_wavefronts"] / sh["total_wavefronts"]
        cards.append(
            {
                "label": "Shared-memory excess",
                "value": _pct(excess, 0),
                "detail": f"of {_num(sh['total_wavefronts'])} wavefronts per launch are bank "
                "conflicts" + (" (extrapolated)" if sh.get("extrapolated") else ""),
                "tone": "warn" if excess > 0.05 else "good",
            }
        )
    gl = doc.get("global_memory")
    if gl:
        t = gl["totals"]
        sectors = t["load"]["sectors"] + t["store"]["sectors"] + t["atomic"]["sectors"]
        ideal = t["load"]["ideal"] + t["store"]["ideal"] + t["atomic"]["ideal"]
        if sectors:
            cards.append(
                {
                    "label": "Global sector efficiency",
                    "value": _pct(ideal / sectors, 0),
                    "detail": f"{_num(ideal)} ideal of {_num(sectors)} sectors per launch"
                    + (" (extrapolated)" if gl.get("extrapolated") else ""),
                    "tone": "warn" if ideal / sectors < 0.95 else "good",
                }
            )
    if findings:
        top = findings[0]
        m = top.get("measured_speedup")
        speed = (
            f"{float(m['speedup']):.2f}× measured"
            if m
            else _estimate_label(top.get("estimated_speedup"))
        )
        cards.append(
            {
                "label": f"{len(findings)} finding{'s' if len(findings) != 1 else ''}",
                "value": str(top["rule"]),
                "detail": f"first: {top['name']}, {speed}",
                "tone": "warn",
            }
        )
    else:
        cards.append(
            {
                "label": "Findings",
                "value": "none",
                "detail": rules_count(doc),
                "tone": "warn" if doc.get("incomplete") else "good",
            }
        )
    cards.append(
        {
            "label": "Speedups",
            "value": "measured" if measured else "estimated",
            "detail": f"{measured} of {len(findings)} findings timed on a GPU"
            if measured
            else "nothing was timed on a GPU (see the notes)",
            "tone": "good" if measured else "info",
        }
    )
    return cards


_VERDICT_MARK = {
    "regression": "✗",
    "error": "!",
    "ambiguous": "?",
    "skipped": "–",
    "improvement": "▲",
    "same": "=",
}


def render_gate(report: GateReport) -> str:
    """The page of one gate run (its report: the ``gate --format json`` document, the table)."""
    doc = report.document
    comps = list(doc.get("comparisons") or [])
    head = report.summary.partition(": ")[0]
    order = {v: i for i, v in enumerate(report.verdict_order)}
    cases: dict[str, list[dict[str, Any]]] = {}
    for row, c in zip(report.rows, comps, strict=True):
        cells = row.cells
        rel = c.get("change_rel")
        bar = None
        if c.get("ci_low") is not None and c.get("ci_high") is not None and rel is not None:
            bar = _change_bar(float(rel), float(c["ci_low"]), float(c["ci_high"]), c)
        cases.setdefault(str(c["case"]), []).append(
            {
                "metric": cells[1],
                "baseline": cells[2],
                "current": cells[3],
                "change": cells[4],
                "threshold": cells[5],
                "verdict": cells[6],
                "mark": _VERDICT_MARK.get(cells[6], ""),
                "why": cells[7],
                "mode": c.get("mode"),
                "bar": bar,
                "stats": _gate_stats(c),
                "location": (
                    (c.get("file") or "") + (f":{c['line']}" if c.get("line") else "")
                    if c.get("file")
                    else ""
                ),
                "kernel": c.get("kernel") or "",
            }
        )
    groups = []
    for name, rows in cases.items():
        worst = min(rows, key=lambda r: order.get(r["verdict"], 99))["verdict"]
        groups.append(
            {
                "name": name,
                "worst": worst,
                "shown": [r for r in rows if r["verdict"] != "same"],
                "same": [r for r in rows if r["verdict"] == "same"],
                "location": next((r["location"] for r in rows if r["location"]), ""),
                "kernel": next((r["kernel"] for r in rows if r["kernel"]), ""),
            }
        )
    groups.sort(key=lambda g: (order.get(g["worst"], 99), g["name"]))
    counts = [(k, n, _VERDICT_MARK.get(k, "")) for k, n in (doc.get("summary") or {}).items() if n]
    envs = [
        (label, doc.get(key))
        for label, key in (
            ("this run", "environment"),
            ("baseline", "baseline_environment"),
            ("timing baseline", "timing_baseline_environment"),
        )
        if doc.get(key)
    ]
    return (
        _env()
        .get_template("gate.html.j2")
        .render(
            doc=doc,
            title=f"gpuadvise gate: {head}",
            version=_version(),
            head=head,
            summary=report.summary,
            counts=counts,
            groups=groups,
            envs=envs,
            headers=report.headers,
        )
    )


def _gate_stats(c: Mapping[str, Any]) -> str:
    parts = []
    if c.get("p_value") is not None:
        parts.append(f"p = {c['p_value']:.3g}")
    if c.get("noise_rel") is not None:
        parts.append(f"noise {c['noise_rel'] * 100:.1f}%")
    if c.get("n_baseline") is not None or c.get("n_current") is not None:
        parts.append(f"n = {c.get('n_baseline') or '–'} / {c.get('n_current') or '–'}")
    if c.get("ci_low") is not None and c.get("ci_high") is not None:
        parts.append(f"change interval {c['ci_low'] * 100:+.1f}%..{c['ci_high'] * 100:+.1f}%")
    return ", ".join(parts)


@dataclass(frozen=True)
class ChangeBar:
    width: int
    height: int
    zero_x: float
    x: float
    lo: float
    hi: float
    threshold_x: tuple[float, ...]
    title: str


def _change_bar(rel: float, lo: float, hi: float, c: Mapping[str, Any]) -> ChangeBar:
    """A timed comparison's relative change with its interval, around 0, thresholds marked."""
    th = c.get("threshold") or {}
    r = th.get("rel")
    marks = [float(r), -float(r)] if isinstance(r, int | float) and r > 0 else []
    span = max(abs(rel), abs(lo), abs(hi), *(abs(m) for m in marks), 0.02) * 1.15
    width, pad = 180, 6

    def x(v: float) -> float:
        return round(pad + (v + span) / (2 * span) * (width - 2 * pad), 2)

    return ChangeBar(
        width=width,
        height=22,
        zero_x=x(0.0),
        x=x(rel),
        lo=x(lo),
        hi=x(hi),
        threshold_x=tuple(x(m) for m in marks),
        title=f"change {rel * 100:+.1f}%, interval {lo * 100:+.1f}%..{hi * 100:+.1f}%",
    )


def template_dir() -> Path:
    """Where the templates are (packaged with the wheel)."""
    return Path(__file__).resolve().parent / "templates"


def _ms(v: float | None) -> str:
    """A kernel time for people: ``12.3 µs`` below a millisecond, else ``1.23 ms`` (never
    scientific notation)."""
    if v is None:
        return "–"
    v = float(v)
    if abs(v) < 1:
        return f"{v * 1e3:.3g} µs"
    return f"{v:.3g} ms" if abs(v) < 1000 else f"{v:,.0f} ms"


_ID = re.compile(r'\b(id|href)="(#?)([^"]*)"')


def _case_body(page: str, prefix: str) -> str:
    """The ``<main>`` of a case's page, for the folder page: its ids and links prefixed (every
    case has a ``#findings``), its title one level down."""
    body = page[page.index("<main>") + len("<main>") : page.rindex("</main>")]

    def rename(m: re.Match[str]) -> str:
        attr, hash_, value = m.groups()
        if attr == "href" and not hash_:
            return m.group(0)
        return f'{attr}="{hash_}{prefix}{value}"'

    body = _ID.sub(rename, body)
    return body.replace("<h1>", '<h2 class="case-title">').replace("</h1>", "</h2>")


def batch_html(batch: BatchReport) -> str:
    """``analyze FOLDER --format html``: one page, the cases ranked by the time to win (the
    summary table links each to its section), then each case's analysis in that order, as its
    own page shows it (one stylesheet, ids prefixed per case; no frames)."""
    by_id = {c.case: c for c in batch.cases}
    rows, cases = [], []
    for s in batch.summary:
        c = by_id.get(s["case"])
        anchor = f"case-{s['rank']}"
        rows.append(
            {
                **s,
                "anchor": anchor,
                "kernel_time": _ms(s["kernel_ms"])
                + {"estimated": " (≥)", "recorded": " (recorded)"}.get(
                    s.get("kernel_basis") or "", ""
                ),
                "win_time": _ms(s["time_to_win_ms"]),
            }
        )
        body = None
        if c is not None and c.report is not None:
            page = analysis_html(c.report)
            body = _case_body(page, f"c{s['rank']}-")
        cases.append({"case": s["case"], "rank": s["rank"], "anchor": anchor, "body": body,
                      "error": s["error"]})  # fmt: skip
    from gpuadvise.report.registers_view import live_chart

    done = [
        (c.case, c.report)
        for c in batch.cases
        if c.report is not None and c.report.document.get("registers") is not None
    ]
    names = [report.kernel for _, report in done]
    curves = [  # each curve named by its kernel, by its case where two kernels share a name
        (n if names.count(n) == 1 else case, report.document["registers"])
        for n, (case, report) in zip(names, done, strict=True)
    ]
    sources = {k: v for _, report in done for k, v in report.sources.items()}
    live = live_chart(curves, _source_lookup(sources), "live-registers-cases") if curves else None
    return (
        _env()
        .get_template("batch.html.j2")
        .render(title="gpuadvise analyze", version=_version(), rows=rows, cases=cases, live=live)
    )
