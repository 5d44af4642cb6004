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
    time_budget_s: float | None = None,
    quiet: bool = False,
) -> int:
    """``fmt``: text, json or html (the whole analysis), sarif, junit, github or markdown (the findings,
    for CI systems); ``output``: write it to this file instead of stdout. Returns the exit code
    (1 when ``fail_on`` is ``warning`` or ``error`` and findings of that severity or worse exist).

    ``output`` and ``write_variants`` are checked before the analysis: neither may replace an
    input, and both must be writable, so that a long analysis never ends in a write error.

    ``time_budget_s``: a partial result after that many seconds (what was skipped is reported);
    ``quiet``: no progress display (there is none either when stderr is not a terminal, or when
    a machine format goes to stdout). An unchanged re-run prints the stored output
    (:mod:`gpuadvise.analyze.result_cache`; ``--no-cache`` bypasses it)."""
    from gpuadvise.analyze import result_cache
    from gpuadvise.analyze.measure import analysis_inputs, check_variants_folder
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
    if time_budget_s is not None and not time_budget_s > 0:
        raise UsageError(
            f"--time-budget {time_budget_s:g} is not a positive number of seconds", "e.g. 30"
        )
    key = None
    if _cacheable_run(opts, write_variants, tracer, time_budget_s, measure):
        params = {
            "trace": trace,
            "sample_ctas": sample_ctas,
            "select": list(select),
            "ignore": list(ignore),
            "rules_dirs": list(rules_dirs),
            "measure": measure,
            "tracer": tracer,
            "fail_on": fail_on,
        }
        key = result_cache.analysis_key(opts, params, _render_key(fmt))
        hit = result_cache.load(key)
        if hit is not None:
            _emit(hit.text, fmt, output)
            return hit.exit_code
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.report.progress import progress_for

    progress = progress_for(not quiet and (fmt == "text" or output is not None))
    try:
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
            time_budget_s=time_budget_s,
            progress=progress,
        )
    finally:
        if progress is not None:
            progress.close()
    result, checked = done.analysis, done.rules
    text = _render(fmt, result, checked)
    code = 1 if failing_findings(checked.findings, fail_on) else 0
    _emit(text, fmt, output)
    if key is not None and not result.skipped and _nothing_measured(measure):
        result_cache.store(key, result_cache.CachedOutput(text, code))
    return code


def _cacheable_run(
    opts: KernelOptions,
    write_variants: str | None,
    tracer: str,
    time_budget_s: float | None,
    measure: bool | None,
) -> bool:
    """Whether this run may use the analysis-result cache: not with --no-cache, variants written,
    the GPU tracer, a time budget, or measurement asked for."""
    return (
        not opts.no_cache
        and write_variants is None
        and tracer != "gpu"
        and time_budget_s is None
        and measure is not True
    )


def _nothing_measured(measure: bool | None) -> bool:
    """No variant was measured: --no-measure, or no GPU here (then the default measures none)."""
    if measure is False:
        return True
    from gpuadvise.runner.client import pycuda_missing

    return pycuda_missing() is not None


def _render_key(fmt: str) -> dict[str, Any]:
    """What the rendering of ``fmt`` depends on besides the analysis (text: the terminal)."""
    if fmt != "text":
        return {"format": fmt}
    from gpuadvise.report import console

    return {"format": fmt, **console.output_settings()}


def _render(fmt: str, result: Any, checked: Any) -> str:
    """The analysis as ``fmt`` (text: what the terminal report prints, captured)."""
    if fmt == "json":
        from gpuadvise.report.json_report import analyze_json, dumps

        return dumps(analyze_json(result, checked))
    if fmt == "html":
        from gpuadvise.report.html import analysis_html

        return analysis_html(result, checked)
    if fmt != "text":
        from gpuadvise.report.findings_formats import render_findings

        return render_findings(fmt, checked, result.kernel.name)
    from gpuadvise.report import console

    with console.captured() as cap:
        console.analysis(result)
        console.findings(checked)
    return cap.get()


def _emit(text: str, fmt: str, output: str | None) -> None:
    import sys

    if fmt == "text":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from gpuadvise.report.output import write_output

    write_output(text, output)
