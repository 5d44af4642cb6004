"""What ``analyze`` knows before the SASS and the trace: the kernel compiled, its resources, the
occupancy and the waves (:class:`AnalysisHead`), by :func:`compile_head`.

Light to import (no rules, no trace, no emulator): ``analyze`` prints the terminal report's
header from the head before it loads the rules (:mod:`gpuadvise.analyze.run`), and
:func:`gpuadvise.analyze.pipeline.analyze_kernel` continues from it (the SASS, the live
registers, the trace and its models)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from gpuadvise.devices import DeviceSpec
from gpuadvise.model.occupancy import (
    KernelResources,
    OccupancyResult,
    Suggestion,
    max_active_blocks,
    next_steps,
)
from gpuadvise.model.waves import Waves, waves_of
from gpuadvise.spec.kernel_spec import KernelSpec
from gpuadvise.toolchain import CompiledModule, CompileOptions, KernelInfo, Toolchain

__all__ = ["AnalysisHead", "CompiledHead", "compile_head"]


@dataclass(frozen=True)
class AnalysisHead:
    """The launch, the device, the kernel's resources, the occupancy and the waves (the fields of
    :class:`~gpuadvise.analyze.pipeline.KernelAnalysis` of those names): what the terminal prints
    first (:func:`gpuadvise.analyze.report.report_header`)."""

    spec: KernelSpec
    device: DeviceSpec
    kernel: KernelInfo
    occupancy_input: KernelResources
    occupancy: OccupancyResult
    next_steps: tuple[Suggestion, ...]
    waves: Waves | None


@dataclass(frozen=True)
class CompiledHead:
    """:func:`compile_head`'s result: the head, and what the rest of the analysis continues
    from (the toolchain, the module, the launch's notes, ``compile_s`` and ``occupancy_s``)."""

    head: AnalysisHead
    toolchain: Toolchain
    module: CompiledModule
    launch_notes: tuple[str, ...] = ()
    timings_s: dict[str, float] = field(default_factory=dict)


def compile_head(
    spec: KernelSpec, device: DeviceSpec, options: CompileOptions, nvcc: str | None = None
) -> CompiledHead:
    """Compile ``spec``'s kernel for ``device`` (a progress step) and work out its resources, the
    occupancy and the waves; a launch the device cannot run is a UsageError here."""
    from gpuadvise.runner.checks import check_launch
    from gpuadvise.spec.progress import step
    from gpuadvise.toolchain import (
        as_written,
        compile_source,
        find_toolchain,
        select_compiled_kernel,
    )

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    tc = find_toolchain(nvcc)
    with step(f"compiling {Path(spec.source).name}"):
        module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    timings["compile_s"] = time.perf_counter() - t0
    kernel = as_written(module, spec.kernel, select_compiled_kernel(module, spec.kernel))
    res = kernel.resources
    launch = spec.launch
    launch_notes = check_launch(
        device,
        launch.grid,
        launch.block,
        res.registers,
        res.static_smem_bytes,
        launch.dynamic_smem_bytes,
    )
    t1 = time.perf_counter()
    k = KernelResources(
        threads_per_block=launch.block.count,
        regs_per_thread=res.registers,
        static_smem_bytes=res.static_smem_bytes,
        dynamic_smem_bytes=launch.dynamic_smem_bytes,
        barriers=max(res.barriers, 1) if device.cc_major >= 9 else res.barriers,
    )
    result = max_active_blocks(device, k)
    steps = tuple(next_steps(device, k))
    waves = waves_of(launch.grid.count, result.active_blocks_per_sm, device.sm_count)
    timings["occupancy_s"] = time.perf_counter() - t1
    head = AnalysisHead(spec, device, kernel, k, result, steps, waves)
    return CompiledHead(head, tc, module, tuple(launch_notes), timings)
