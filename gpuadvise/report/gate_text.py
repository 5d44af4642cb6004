"""The gate's terminal table, drawn with rich into a string (printed through console.raw), with
the console's safety for user text (case names are a pull request's to choose). It reads the
:class:`~gpuadvise.report_types.GateReport` only."""

from __future__ import annotations

import io

from rich.table import Table
from rich.text import Text

from gpuadvise.report.console import SafeConsole
from gpuadvise.report.safe_text import one_line
from gpuadvise.report_types import GateReport

__all__ = ["render_gate_text"]

_STYLE = {
    "regression": "bold red",
    "error": "bold red",
    "ambiguous": "yellow",
    "skipped": "dim",
    "improvement": "green",
    "same": "",
}


def render_gate_text(
    report: GateReport, *, color: bool = False, width: int = 160, show_changed_only: bool = True
) -> str:
    """The table of the metrics that changed, were skipped or failed (the unchanged ones
    counted on one line; ``show_changed_only=False`` lists them too), the warnings and the
    summary line; ANSI colours when ``color``."""
    buf = io.StringIO()
    con = SafeConsole(  # no markup nor emoji: case names are user text
        file=buf,
        width=width,
        force_terminal=color,
        no_color=not color,
        soft_wrap=False,
    )
    t = Table(box=None, padding=(0, 2), header_style="bold", show_edge=False)
    for header, align in zip(report.headers, report.align, strict=True):
        t.add_column(
            header,
            justify="right" if align == "r" else "left",
            overflow="fold",
            ratio=3 if header == "why" else None,
            no_wrap=header != "why",
        )
    # unchanged rows are folded into one line: the rows that need a look stay in sight
    shown = [r for r in report.rows if r.verdict != "same" or not show_changed_only]
    for row in shown:
        cells = [Text(one_line(c)) for c in row.cells]  # one line each, whatever the names
        cells[-2].stylize(_STYLE.get(row.verdict, ""))
        cells[-1].stylize("dim")
        t.add_row(*cells)
    if shown:
        con.print(t)
    same = len(report.rows) - len(shown)
    if same:
        cases = len({r.case for r in report.rows if r.verdict == "same"})
        con.print(
            Text(
                f"{same} unchanged metric{'s' if same != 1 else ''} in {cases} "
                f"case{'s' if cases != 1 else ''} not listed (--format json or markdown lists "
                "every row)",
                style="dim",
            )
        )
    for warning in report.warnings:
        con.print(Text("warning: ", style="yellow") + Text(one_line(warning)))
    line = one_line(report.summary)
    head_style = "bold green" if line.startswith("PASSED") else "bold red"
    con.print(Text(line, style=head_style))
    return buf.getvalue()
