"""``gpuadvise analyze``: run the analysis (gpuadvise.analyze.run) and render it."""

from __future__ import annotations

from gpuadvise.analyze.options import KernelOptions


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
) -> int:
    """``fmt``: text, json or html (the whole analysis), sarif, junit, github or markdown (the
    findings, for CI systems); ``output``: write it to this file instead of stdout."""
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.errors import UsageError

    if as_json:
        fmt = "json"
    if fmt == "text" and output:
        raise UsageError("--output needs a machine format", "add --format json|sarif|junit|...")
    done = run_analysis(
        opts,
        trace=trace,
        sample_ctas=sample_ctas,
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
    return 0
