"""``bench``: time a kernel on the GPU (or compare two), with verified outputs; the CLI renders the
:class:`BenchReport`.

Exit codes (:meth:`BenchReport.exit_code`): 0 measured; 1 the kernel failed on the GPU (a CUDA
error, a timeout) or two compared kernels disagree in their outputs; 2 a usage or tool error (no
GPU, no PyCUDA, bad input) raised as an exception."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.analyze.prepare import (
    Prepared,
    bandwidth_ceiling,
    live_options,
    prepare,
    split_source,
    time_prepared,
)
from gpuadvise.errors import UsageError
from gpuadvise.runner.job import TimingConfig


@dataclass
class BenchReport:
    """What ``bench`` found; rendered by the report package."""

    prepared: list[Prepared]
    device_info: dict[str, Any]
    stats: list[Any]  # TimingStats per kernel
    bytes_moved: int
    ceiling_gbps: float | None
    ceiling_source: str
    flops: int | None
    hot: bool
    clocks: dict[str, Any]
    comparisons: list[Any] = field(default_factory=list)  # verify.Comparison (B vs A outputs)
    speedup: Any = None  # stats.SpeedupCI (A / B)
    unwritten: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    cuda_error: str | None = None
    worker_log: str = ""

    def exit_code(self) -> int:
        if self.error is not None or any(not c.ok for c in self.comparisons):
            return 1
        return 0


def run_bench(
    sources: tuple[str, ...],
    opts: KernelOptions,
    hot: bool,
    timeout_s: float,
    flops_expr: str | None,
    timing: TimingConfig,
    totals: Mapping[str, str] | None = None,
) -> BenchReport:
    """Time ``sources`` (one kernel, or A and B compared). ``totals``: outputs of per-block
    partials compared as totals (output name -> combine op; see
    :func:`gpuadvise.runner.verify.compare_totals`): the first A.gridDim.x against the first
    B.gridDim.x, when B's grid writes another number of partials."""
    from gpuadvise.runner.client import require_gpu
    from gpuadvise.runner.stats import speedup_ci, summarize
    from gpuadvise.runner.verify import compare_outputs, unwritten

    if not sources:
        raise UsageError("no CUDA source given", "gpuadvise bench kernel.cu --grid ... --block ...")
    if len(sources) > 2:
        raise UsageError("bench compares at most two kernels", "give one or two sources")
    opts = live_options(opts)
    prepared = []
    for label, text in zip("AB", sources, strict=False):
        src, kname = split_source(text)
        prepared.append(prepare(replace(opts, source=src, kernel=kname or opts.kernel), label))
    require_gpu()
    if len(prepared) == 2:
        a, b = prepared
        if [x.name for x in a.buffers] != [x.name for x in b.buffers] or [
            x.nbytes for x in a.buffers
        ] != [x.nbytes for x in b.buffers]:
            raise UsageError(
                "the two kernels do not take the same buffers",
                "compare kernels with the same parameters (same names, types and sizes)",
            )
    run = time_prepared(prepared, timing, hot, timeout_s)
    res = run.result
    env = dict(prepared[0].resolved.env)
    flops = None
    if flops_expr:
        from gpuadvise.spec.expr import evaluate

        flops = evaluate(flops_expr, env)
    report = BenchReport(
        prepared=prepared,
        device_info=res.device,
        stats=[],
        bytes_moved=prepared[0].resolved.total_buffer_bytes,
        ceiling_gbps=None,
        ceiling_source="",
        flops=flops,
        hot=hot,
        clocks=res.clocks,
        notes=[n for p in prepared for n in p.notes],
        worker_log=run.log,
    )
    if not res.ok:
        report.error = res.error
        report.cuda_error = res.cuda_error
        if res.failed_label and len(prepared) > 1:
            report.error = f"kernel {res.failed_label}: {res.error}"
        return report
    for p, o in zip(prepared, res.outcomes, strict=True):
        report.stats.append(summarize(o.samples_ms, o.throttled))
        for buf in p.buffers:
            if buf.poison and buf.name in o.outputs:
                n = unwritten(o.outputs[buf.name])
                if n:
                    report.unwritten[f"{p.launch.label}:{buf.name}"] = n
    if len(prepared) == 2:
        oa, ob = res.outcomes
        a, b = prepared
        names = [buf.name for buf in a.buffers if buf.is_output]
        grids = (int(a.launch.grid[0]), int(b.launch.grid[0]))
        report.comparisons += compare_outputs(
            oa.outputs, ob.outputs, names, a.rtol, a.atol, totals, grids
        )
        if totals:
            report.notes.append(
                f"{', '.join(sorted(totals))} compared as totals of the partials each grid "
                f"writes (A: {grids[0]}, B: {grids[1]})"
            )
        report.speedup = speedup_ci(oa.samples_ms, ob.samples_ms)
    report.ceiling_gbps, report.ceiling_source = bandwidth_ceiling(res.device, timeout_s)
    return report
