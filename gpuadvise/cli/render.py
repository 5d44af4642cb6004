"""``gpuadvise render FILE --format FMT``: a saved report (``analyze --format json`` or
``--format report``, of one kernel or of a folder; ``gate --format json`` or ``--format report``)
rendered again in another format, as ``analyze`` (or ``gate``) would have rendered it.

Exit codes: 0 rendered, 2 a missing file, one that is not a gpuadvise analysis report, one a
newer gpuadvise wrote, or an unknown format (one line on stderr)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def run_render(path: str, formats: Sequence[str], output: str | None = None) -> int:
    """Render the report in ``path`` in each of ``formats`` (``FMT`` or ``FMT=FILE``; at most
    one to stdout, or to ``output``)."""
    from gpuadvise.errors import UsageError
    from gpuadvise.gate.report import load_saved_report
    from gpuadvise.report.output import check_output_target, parse_format_targets, write_output
    from gpuadvise.report.renderers import GATE_RENDERERS, RENDERERS, render
    from gpuadvise.report_types import GateReport

    choices = tuple(dict.fromkeys((*RENDERERS, *GATE_RENDERERS)))
    if not formats:
        raise UsageError("render needs a --format", "use one of " + ", ".join(choices))
    targets = parse_format_targets(formats, output, choices)
    for _, dest in targets:
        if dest is not None:
            check_output_target(str(dest), (Path(path).resolve(),))
    report = load_saved_report(path)
    known = tuple(GATE_RENDERERS) if isinstance(report, GateReport) else tuple(RENDERERS)
    for fmt, _ in targets:
        if fmt not in known:
            what = "a gate report" if isinstance(report, GateReport) else "an analysis report"
            raise UsageError(f"{what} has no {fmt} format", "use one of " + ", ".join(known))
    for fmt, dest in targets:
        write_output(render(fmt, report), None if dest is None else str(dest))
    return 0
