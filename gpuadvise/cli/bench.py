"""``gpuadvise bench``: time a kernel on the GPU (or compare two) and render the report."""

from __future__ import annotations

from gpuadvise.analyze.bench import BenchReport
from gpuadvise.analyze.options import KernelOptions
from gpuadvise.runner.job import TimingConfig


def run_bench(
    sources: tuple[str, ...],
    opts: KernelOptions,
    hot: bool,
    timeout_s: float,
    flops_expr: str | None,
    timing: TimingConfig,
    as_json: bool,
) -> int:
    """Time, render, and return the exit code (:meth:`BenchReport.exit_code`)."""
    from gpuadvise.analyze.bench import run_bench as bench

    report = bench(sources, opts, hot, timeout_s, flops_expr, timing)
    _render(report, as_json)
    return report.exit_code()


def _render(report: BenchReport, as_json: bool) -> None:
    if as_json:
        from gpuadvise.report.json_report import bench_json, emit

        emit(bench_json(report))
    else:
        from gpuadvise.report import console

        console.bench(report)
