"""``gpuadvise analyze``: run the analysis (gpuadvise.analyze.run) and render it.

Exit codes: 0 the analysis ran (findings or not), 1 findings at or above ``--fail-on``, 2 bad
input, a kernel that does not compile, or a tool error (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpuadvise.analyze.options import KernelOptions

# --fail-on: a finding fails the run when its severity ranks at or above the level given.
_SEVERITY_RANK = {"error": 0, "warning": 1, "note": 2}
FAIL_ON_LEVELS = ("warning", "error")


def failing_findings(findings: Iterable[Any], fail_on: str | None) -> list[Any]:
    """The findings that fail the run under ``--fail-on`` (none when it is not given). A rule
    that failed is an error row (severity ``error``): it fails the run too, since the analysis is
    incomplete."""
    if fail_on is None:
        return []
    limit = _SEVERITY_RANK[fail_on]
    return [f for f in findings if _SEVERITY_RANK.get(f.severity, 2) <= limit]


def run_analyze(
    opts: KernelOptions,
    as_json: bool,
    trace: bool = True,
    sample_ctas: str | None = None,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    rules_dirs: tuple[str, ...] = (),
    fmt: str = "text",
    output: str | None = None,
    measure: bool | None = None,
    tracer: str = "auto",
    write_variants: str | None = None,
    fail_on: str | None = None,
    l2_probe_ctas: str | None = None,
) -> int:
    """``fmt``: text, json or html (the whole analysis), sarif, junit, github or markdown (the findings,
    for CI systems); ``output``: write it to this file instead of stdout. Returns the exit code
    (1 when ``fail_on`` is ``warning`` or ``error`` and findings of that severity or worse exist).

    ``output`` and ``write_variants`` are checked before the analysis: neither may replace an
    input, and both must be writable, so that a long analysis never ends in a write error."""
    from gpuadvise.analyze.measure import analysis_inputs, check_variants_folder
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.errors import UsageError

    if as_json:
        fmt = "json"
    if fmt == "text" and output:
        raise UsageError("--output needs a machine format", "add --format json|sarif|junit|...")
    if fail_on is not None and fail_on not in FAIL_ON_LEVELS:
        raise UsageError(f"unknown --fail-on {fail_on!r}", "use warning or error")
    if output is not None:
        from gpuadvise.report.output import check_output_target

        check_output_target(output, analysis_inputs(opts))
    if write_variants is not None:
        check_variants_folder(write_variants)
    done = run_analysis(
        opts,
        trace=trace,
        sample_ctas=sample_ctas,
        l2_probe_ctas=l2_probe_ctas,
        select=select,
        ignore=ignore,
        rules_dirs=rules_dirs,
        measure=measure,
        tracer=tracer,
        write_variants=write_variants,
    )
    result, checked = done.analysis, done.rules
    if fmt != "text":
        from gpuadvise.report.output import write_output

        if fmt == "json":
            from gpuadvise.report.json_report import analyze_json, dumps

            text = dumps(analyze_json(result, checked))
        elif fmt == "html":
            from gpuadvise.report.html import analysis_html

            text = analysis_html(result, checked)
        else:
            from gpuadvise.report.findings_formats import render_findings

            text = render_findings(fmt, checked, result.kernel.name)
        write_output(text, output)
    else:
        from gpuadvise.report import console

        console.analysis(result)
        console.findings(checked)
    return 1 if failing_findings(checked.findings, fail_on) else 0
