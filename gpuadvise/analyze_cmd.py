"""``gpuadvise analyze`` and the launch/compile options it shares with ``bench``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpuadvise.devices import DeviceChoice, resolve_device
from gpuadvise.spec import KernelSpec, build_kernel_spec


@dataclass(frozen=True)
class KernelOptions:
    """What the user said on the command line about the kernel, its launch and its compile."""

    source: str | None
    kernel: str | None = None
    grid: str | None = None
    block: str | None = None
    dynamic_smem: str | None = None
    spec: str | None = None
    args: tuple[str, ...] = ()
    buffers: tuple[str, ...] = ()
    seed: int | None = None
    gpu: str | None = None
    arch: str | None = None
    include: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    std: str | None = None
    use_fast_math: bool = False
    xptxas: tuple[str, ...] = ()
    nvcc_flags: tuple[str, ...] = ()
    maxrregcount: int | None = None
    nvcc: str | None = None
    no_cache: bool = False


def build(opts: KernelOptions) -> tuple[KernelSpec, DeviceChoice, Any]:
    """The kernel spec, the device and the compile options the command line asks for."""
    from gpuadvise.pipeline import compile_options_for

    spec = build_kernel_spec(
        opts.source,
        opts.kernel,
        spec=opts.spec,
        grid=opts.grid,
        block=opts.block,
        dynamic_smem=opts.dynamic_smem,
        args=opts.args,
        buffers=opts.buffers,
        seed=opts.seed,
    )
    choice = resolve_device(opts.gpu, opts.arch)
    options = compile_options_for(
        choice.device,
        spec_flags=tuple(spec.nvcc_flags),
        include_dirs=opts.include,
        defines=opts.defines,
        std=opts.std,
        use_fast_math=opts.use_fast_math,
        xptxas=opts.xptxas,
        extra_flags=opts.nvcc_flags,
        maxrregcount=opts.maxrregcount,
        use_cache=not opts.no_cache,
    )
    return spec, choice, options


def parse_sample_ctas(text: str | None) -> int | str | None:
    """``--sample-ctas``: a positive count, ``all``, or None (the first wave)."""
    from gpuadvise.errors import UsageError

    if text is None:
        return None
    if text.strip().lower() == "all":
        return "all"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise UsageError(f"--sample-ctas {text!r} is not a count", "give a positive number or all")
    return n


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
    """``fmt``: text or json (the whole analysis), sarif, junit, github or markdown (the findings,
    for CI systems); ``output``: write it to this file instead of stdout."""
    from gpuadvise.gputrace import select_tracer
    from gpuadvise.pipeline import analyze_static
    from gpuadvise.rules_cmd import rules_config, run_rules_report

    chosen = select_tracer(tracer) if trace else "emu"
    if chosen == "gpu":
        from gpuadvise.bench_cmd import live_options

        opts = live_options(opts)  # the instrumented kernel runs on this GPU: compile for it
    spec, choice, options = build(opts)
    config = rules_config(spec.source, select, ignore, rules_dirs)  # bad selectors fail here
    notes = (choice.note,) if choice.note else ()
    if spec.spec_path is not None:
        notes = (*notes, f"launch spec read from {spec.spec_path}")
    result = analyze_static(
        spec,
        choice.device,
        options,
        nvcc=opts.nvcc,
        notes=notes,
        trace=trace,
        sample_ctas=parse_sample_ctas(sample_ctas) if sample_ctas else config.trace_ctas,
        tracer=chosen,
    )
    checked = run_rules_report(result, config, lazy_models=trace)
    checked = _measure(opts, checked, measure)
    if write_variants:
        from gpuadvise.measure import write_variants as write_all

        folders = write_all(checked, opts, write_variants)
        checked = dataclasses.replace(
            checked,
            notes=(*checked.notes, f"{len(folders)} variant(s) written to {write_variants}"),
        )
    if as_json:
        fmt = "json"
    if fmt != "text" or output:
        from gpuadvise.report.json_report import analyze_json, dumps

        if fmt == "json":
            text = dumps(analyze_json(result, checked))
        elif fmt == "text":
            from gpuadvise.errors import UsageError

            raise UsageError("--output needs a machine format", "add --format json|sarif|junit|...")
        else:
            from gpuadvise.report.findings_formats import render_findings

            text = render_findings(fmt, checked, result.kernel.name)
        _write(text, output)
    else:
        from gpuadvise.report import console

        console.analysis(result)
        console.findings(checked)
    return 0


def _write(text: str, output: str | None) -> None:
    """stdout, or ``output`` written atomically (appended for $GITHUB_STEP_SUMMARY)."""
    import os
    import sys

    if not text.endswith("\n"):
        text += "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if output == os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(output, "a") as f:
            f.write(text)
        return
    tmp = f"{output}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, output)


def _measure(opts: KernelOptions, checked: Any, measure: bool | None) -> Any:
    """Measure the findings' variants on the GPU: ``measure`` True (required), False (never) or
    None (when a GPU and PyCUDA are present)."""

    from gpuadvise.runner.client import pycuda_missing

    if measure is False or not checked.findings:
        return checked
    why = pycuda_missing()
    if why is not None:
        if measure:
            from gpuadvise.errors import RunnerError

            raise RunnerError(f"cannot measure: {why}", "drop --measure: analysis needs no GPU")
        return dataclasses.replace(
            checked, notes=(*checked.notes, f"estimates only, nothing measured: {why}")
        )
    from gpuadvise.measure import measure_findings

    measured, notes = measure_findings(opts, checked)
    return dataclasses.replace(measured, notes=(*measured.notes, *notes))
