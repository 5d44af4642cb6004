"""The live registers in the HTML report: the chart of live registers along the instructions (the
kernel's, with any variant overlaid: a finding whose details carry ``live_gpr``, or the other
kernels of a batch), the values that hold the peak, and the per-line figures of the source view.

Geometry only, from the documents (``analyze --json``'s ``registers``); the templates draw it
(``_registers.html.j2``). Hover text comes from SVG ``<title>`` elements: one band per pixel
column of the chart names, for every curve, the most general registers live there (with the predicate
and uniform registers live at that instruction) and the source line of the instruction that
holds them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LiveChart", "live_chart", "registers_view", "value_rows"]

# colour-blind-safe (Okabe-Ito): the kernel, then the overlays
_CURVE_CLASSES = ("live0", "live1", "live2", "live3", "live4", "live5")

Source = Callable[[str | None, int | None], str]


@dataclass(frozen=True)
class Tick:
    pos: float
    label: str


@dataclass(frozen=True)
class LiveCurve:
    label: str
    cls: str
    path: str
    peak_x: float
    peak_y: float
    peak_title: str
    alloc_y: float
    alloc_label: str
    legend_x: float = 0.0  # the legend (two curves or more): a row under the axis label


@dataclass(frozen=True)
class Band:
    x: float
    w: float
    title: str


@dataclass(frozen=True)
class LiveChart:
    id: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    curves: tuple[LiveCurve, ...]
    bands: tuple[Band, ...]
    xticks: tuple[Tick, ...]
    yticks: tuple[Tick, ...]
    xlabel: str
    xlabel_y: float = 0.0


def _nice(hi: float, n: int = 5) -> list[int]:
    if hi <= 0:
        return [0]
    raw = hi / n
    mag = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return list(range(0, int(hi) + 1, int(step)))


def _site_text(rp: Mapping[str, Any], index: int) -> tuple[str | None, int | None]:
    table = rp.get("sites_table") or []
    sites = rp.get("sites") or []
    if index >= len(sites) or sites[index] >= len(table):
        return None, None
    file, line = table[sites[index]]
    return file, line


def _shown(source: Source) -> Source:
    """``source`` as the report's source columns show a line: stripped, without a bundled
    kernel's ``// expect:`` marker (the test suite's, not code a user needs to read)."""
    from gpuadvise.report.source_lines import shown_source

    return lambda file, line: shown_source(source(file, line))


def _where(file: str | None, line: int | None) -> str:
    return f"{os.path.basename(file)}:{line}" if file and line else "?"


def live_chart(
    curves: Sequence[tuple[str, Mapping[str, Any]]],
    source: Source,
    chart_id: str = "live-registers",
    width: int = 760,
    height: int = 250,
) -> LiveChart | None:
    """The chart of ``curves`` ((label, a ``registers`` document) each; the first is the kernel
    the page is about) on one scale: x the instruction's position, y live general registers."""
    curves = [(label, rp) for label, rp in curves if rp and rp.get("gpr")]
    if not curves:
        return None
    source = _shown(source)
    left, right, top, bottom = 40, 14, 14, 36 + (16 if len(curves) > 1 else 0)
    pw, ph = width - left - right, height - top - bottom
    n = max(len(rp["gpr"]) for _l, rp in curves)
    hi = max(max(int(rp.get("allocated") or 0), max(rp["gpr"])) for _l, rp in curves) or 1
    cols = min(n, pw)

    def sx(i: float) -> float:
        return round(left + i / max(n - 1, 1) * pw, 2)

    def sy(v: float) -> float:
        return round(top + (1 - v / hi) * ph, 2)

    def bucket(c: int) -> tuple[int, int]:
        return c * n // cols, max((c + 1) * n // cols, c * n // cols + 1)

    out = []
    for k, (label, rp) in enumerate(curves):
        gpr = rp["gpr"]
        # a step for each pixel column: the most live registers among its instructions (a
        # peak is never averaged away)
        path = ""
        for c in range(cols):
            a, b = bucket(c)
            if a >= len(gpr):
                break
            y = sy(max(gpr[a : min(b, len(gpr))]))
            path += f"M{sx(a)},{y}" if not path else f"H{sx(a)}V{y}"
        path += f"H{sx(len(gpr) - 1)}"
        peak, pi = int(rp["peak"]), int(rp["peak_index"])
        pf, pl = rp.get("peak_file"), rp.get("peak_line")
        text = source(pf, pl).strip()
        out.append(
            LiveCurve(
                label=label,
                cls=_CURVE_CLASSES[k % len(_CURVE_CLASSES)],
                path=path,
                peak_x=sx(pi),
                peak_y=sy(peak),
                peak_title=f"{label}: peak {peak} live registers at {_where(pf, pl)}"
                + (f" ({text[:80]})" if text else "")
                + f", instruction {pi} of {len(gpr)}",
                alloc_y=sy(int(rp.get("allocated") or 0)),
                alloc_label=f"{label}: {rp.get('allocated')} allocated",
                legend_x=left + sum(40 + 6.5 * len(lb) for lb, _rp in curves[:k]),
            )
        )
    bands = []
    for c in range(cols):
        a, b = bucket(c)
        parts = []
        for label, rp in curves:
            gpr = rp["gpr"]
            if a >= len(gpr):
                continue
            seg = gpr[a : min(b, len(gpr))]
            at = a + seg.index(max(seg))
            file, line = _site_text(rp, at)
            text = source(file, line).strip()
            counts = {
                name: (rp.get(key) or [])[at] if at < len(rp.get(key) or []) else 0
                for key, name in (("pred", "predicate"), ("ugpr", "uniform"))
            }
            others = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
            parts.append(
                f"{label}: {max(seg)} live at instruction {at}"
                + (f" (and {others})" if others else "")
                + f", {_where(file, line)}"
                + (f": {text[:70]}" if text else "")
            )
        x0 = sx(a)
        x1 = sx(b) if b < n else left + pw
        bands.append(Band(x0, round(max(x1 - x0, 0.5), 2), "\n".join(parts)))
    xt = [v for v in _nice(n - 1) if v <= n - 1]
    return LiveChart(
        id=chart_id,
        width=width,
        height=height,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        curves=tuple(out),
        bands=tuple(bands),
        xticks=tuple(Tick(sx(v), str(v)) for v in xt),
        yticks=tuple(Tick(sy(v), str(v)) for v in _nice(hi, 4)),
        xlabel="SASS instruction (address order)",
        xlabel_y=height - bottom + 30,
    )


def value_rows(rp: Mapping[str, Any], source: Source, limit: int = 24) -> list[dict[str, Any]]:
    """The values live across the peak, longest first, for the table under the chart."""
    source = _shown(source)
    rows = []
    for v in (rp.get("values") or [])[:limit]:
        df, dl = v.get("def_file"), v.get("def_line")
        lf, ll = v.get("last_use_file"), v.get("last_use_line")
        rows.append(
            {
                "registers": ", ".join(v["registers"]),
                "width": len(v["registers"]),
                "kind": v["kind"],
                "defined": _where(df, dl) if v.get("def_index") is not None else "entry",
                "defined_source": source(df, dl).strip(),
                "def_opcode": v.get("def_opcode") or "",
                "last": _where(lf, ll) if v.get("last_use_index") is not None else "–",
                "last_source": source(lf, ll).strip(),
                "distance": v["distance"],
                "idle": bool(v.get("idle_at_peak")) and v["kind"] == "loaded value",
            }
        )
    return rows


def registers_view(
    doc: Mapping[str, Any], findings: Sequence[Mapping[str, Any]], source: Source
) -> dict[str, Any] | None:
    """The registers section of one analysis page: the chart (the kernel, and each finding's
    variant whose details carry its live registers), the peak, the values that hold it."""
    rp = doc.get("registers")
    if not rp or not rp.get("gpr"):
        return None
    curves: list[tuple[str, Mapping[str, Any]]] = [(doc["kernel"]["name"], rp)]
    for f in findings:
        fields = ((f.get("details") or {}).get("fields")) or {}
        live = fields.get("live_gpr")
        if live and live.get("gpr"):
            curves.append((f"{f['rule']} variant", live))
    source = _shown(source)
    chart = live_chart(curves, source)
    pf, pl = rp.get("peak_file"), rp.get("peak_line")
    return {
        "chart": chart,
        "peak": rp["peak"],
        "allocated": rp["allocated"],
        "reserved": rp["reserved"],
        "slack": rp.get("slack", rp["highest"] - rp["peak"]),
        "holes": rp.get("holes") or [],
        "peak_where": _where(pf, pl),
        "peak_source": source(pf, pl).strip(),
        "peak_instructions": rp["peak_instructions"],
        "instructions": len(rp["gpr"]),
        "agreement": rp.get("agreement") or [0, 0],
        "value_rows": value_rows(rp, source),
        "more_values": max(len(rp.get("values") or []) - 24, 0),
        "overlays": [label for label, _rp in curves[1:]],
    }


def line_figures(rp: Mapping[str, Any] | None) -> dict[tuple[str, int], tuple[int, float]]:
    """(file, line) -> (max, mean) live general registers, for the source view's column."""
    if not rp:
        return {}
    return {
        (os.path.normpath(os.path.abspath(x["file"])), int(x["line"])): (
            int(x["max"]),
            float(x["mean"]),
        )
        for x in rp.get("lines") or []
        if x.get("file") and x.get("line")
    }
