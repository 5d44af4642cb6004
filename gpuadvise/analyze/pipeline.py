"""Orchestrates ``analyze``: spec -> compile -> resources -> occupancy -> SASS -> (models, rules).

Each step is a function of its inputs; only the toolchain touches the outside world here. The result
is a frozen :class:`StaticAnalysis` that the report renders (terminal, JSON).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import GpuAdviseError
from gpuadvise.model import occupancy as occ
from gpuadvise.model.l2_orders import l2_for
from gpuadvise.spec.kernel_spec import KernelSpec
from gpuadvise.toolchain import CompiledModule, CompileOptions, KernelInfo

log = logging.getLogger(__name__)

INTERIOR_CTAS = 64
"""CTAs the L2 model traces in the middle of a large 2D grid (two rows of up to 32), besides the
sampled ones: see :func:`_with_interior`."""


@dataclass(frozen=True)
class Waves:
    """How the grid fills the GPU: ``ctas_per_wave`` CTAs run at once (blocks per SM x SMs)."""

    total_ctas: int
    ctas_per_wave: int
    waves: float  # total_ctas / ctas_per_wave
    full_waves: int
    last_wave_ctas: int  # CTAs in the last, partial wave (0 when the grid fills whole waves)

    @property
    def last_wave_fill(self) -> float:
        """How full the last wave is (1.0 when the grid is a whole number of waves)."""
        if self.last_wave_ctas == 0:
            return 1.0
        return self.last_wave_ctas / self.ctas_per_wave

    @property
    def tail_idle(self) -> float:
        """The fraction of the whole run's SM time left idle by the partial last wave."""
        if self.last_wave_ctas == 0 or self.ctas_per_wave == 0:
            return 0.0
        slots = (self.full_waves + 1) * self.ctas_per_wave
        return (slots - self.total_ctas) / slots


def waves_of(total_ctas: int, blocks_per_sm: int, sm_count: int | None) -> Waves | None:
    if not sm_count or blocks_per_sm <= 0:
        return None
    per_wave = blocks_per_sm * sm_count
    full, rest = divmod(total_ctas, per_wave)
    return Waves(total_ctas, per_wave, total_ctas / per_wave, full, rest)


@dataclass(frozen=True)
class MemoryAnalysis:
    """The trace-based models of one launch: the emulator's trace, reconciled with the SASS, fed to
    the bank and coalescing models. ``error``: why there is no trace (the static part still holds)."""

    ctas_run: int = 0
    total_ctas: int = 0
    complete: bool = False
    lane_instructions: int = 0
    time_s: float = 0.0
    banks: Any = None  # model.banks.BankResult
    coalescing: Any = None  # model.coalescing.CoalescingResult
    reconcile_notes: tuple[Any, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None
    error_kind: str | None = None  # out_of_bounds | unsupported | budget | other
    trace: Any = None  # trace.AccessTrace (not serialized)
    tracer: str = "emu"  # emu | gpu
    l2: Any = None  # model.l2.L2Result (None: no L2 size in the device model, or it failed)
    outputs: Any = None  # {buffer name: array} after the traced CTAs ran (not serialized)


@dataclass(frozen=True)
class StaticAnalysis:
    spec: KernelSpec
    device: DeviceSpec
    module: CompiledModule
    kernel: KernelInfo
    occupancy_input: occ.KernelResources
    occupancy: occ.OccupancyResult
    next_steps: tuple[occ.Suggestion, ...]
    waves: Waves | None
    sass_lines: tuple  # tuple[sass.SassMemLine, ...]
    sass_instruction_count: int
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    memory: MemoryAnalysis | None = None


def compile_options_for(
    device: DeviceSpec,
    spec_flags: tuple[str, ...] = (),
    include_dirs: tuple[str, ...] = (),
    defines: tuple[str, ...] = (),
    std: str | None = None,
    use_fast_math: bool = False,
    xptxas: tuple[str, ...] = (),
    extra_flags: tuple[str, ...] = (),
    maxrregcount: int | None = None,
    use_cache: bool = True,
) -> CompileOptions:
    """The compile options for ``device``: ``spec_flags`` (from a spec file) come before the
    command line's. ``-I``/``-D``/``-std=`` among raw flags are split out into their fields."""
    inc, defs, extra = list(include_dirs), list(defines), []
    for flag in (*spec_flags, *extra_flags):
        if flag.startswith("-I") and len(flag) > 2:
            inc.append(flag[2:])
        elif flag.startswith("-D") and len(flag) > 2:
            defs.append(flag[2:])
        elif flag.startswith(("-std=", "--std=")):
            std = flag.split("=", 1)[1]
        else:
            extra.append(flag)
    return CompileOptions(
        arch=device.arch,
        include_dirs=tuple(inc),
        defines=tuple(defs),
        std=std,
        use_fast_math=use_fast_math,
        xptxas=xptxas,
        extra_flags=tuple(extra),
        maxrregcount=maxrregcount,
        use_cache=use_cache,
    )


def resolve_launch(spec: KernelSpec, kernel: KernelInfo, options: CompileOptions, tc: Any) -> Any:
    """Bind the spec to the kernel's parameters (spec.ResolvedLaunch); user structs are sized by
    the compiler, looked up in the kernel's namespaces."""
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.toolchain import struct_layouts

    params = parse_signature(Path(spec.source).read_text(errors="replace"), spec.kernel)
    namespaces = kernel.name.split("<")[0].split("::")[:-1]
    ns = ["::".join(namespaces[: i + 1]) for i in range(len(namespaces))]

    def layout(name: str) -> tuple[int, int]:
        return struct_layouts(spec.source, [name], options, tc, ns)[name]

    return resolve(spec, params, layout)


def analyze_memory(
    spec: KernelSpec,
    device: DeviceSpec,
    module: CompiledModule,
    kernel: KernelInfo,
    options: CompileOptions,
    tc: Any,
    instrs: tuple[Any, ...],
    sample_ctas: int | str | None,
    tracer: str = "emu",
    blocks_per_sm: int = 0,
) -> MemoryAnalysis:
    """Trace the sampled CTAs (the CPU emulator, or with ``tracer="gpu"`` the instrumented kernel
    on the GPU), reconcile the trace with the SASS, run the bank and coalescing models. A kernel
    that cannot be traced gives a MemoryAnalysis with ``error`` set."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.model.banks import analyze_banks
    from gpuadvise.model.coalescing import analyze_coalescing
    from gpuadvise.model.reconcile import reconcile
    from gpuadvise.ptx.errors import (
        InstructionBudgetError,
        MemoryAccessError,
        UnsupportedInstructionError,
    )
    from gpuadvise.spec.budget import TooLargeError
    from gpuadvise.toolchain import sass
    from gpuadvise.trace.emulate import emulate

    total = spec.launch.grid.count
    try:
        launch = resolve_launch(spec, kernel, options, tc)
        fallback: tuple[str, ...] = ()
        if tracer == "gpu":
            try:
                gm = _gpu_memory(spec, device, module, kernel, launch, tc, instrs, sample_ctas)
                l2, l2_notes = l2_for(gm.trace, device, blocks_per_sm)
                return replace(gm, l2=l2, notes=gm.notes + l2_notes)
            except GpuAdviseError as exc:
                fallback = (f"the GPU tracer failed ({exc.one_line()}); traced on the CPU",)
        emu = emulate(module, kernel, launch, device, sample_ctas=sample_ctas)
    except MemoryAccessError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="out_of_bounds")
    except UnsupportedInstructionError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="unsupported")
    except InstructionBudgetError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="budget")
    except TooLargeError:
        raise  # the input asks for more memory than there is: a usage error (exit 2)
    except GpuAdviseError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="other")
    inner = sass.memory_summary(instrs)
    rec = reconcile(emu.trace, inner)
    banks = analyze_banks(emu.trace, rec.records)
    coal = analyze_coalescing(emu.trace, rec.records)
    l2_trace, l2_notes = emu.trace, ()
    if not emu.complete and device.l2_bytes and device.sm_count and blocks_per_sm > 0:
        l2_trace, l2_notes = _with_interior(emu, module, kernel, launch, device)
    l2, more = l2_for(l2_trace, device, blocks_per_sm)
    l2_notes += more
    return MemoryAnalysis(
        ctas_run=len(emu.ctas_run),
        total_ctas=total,
        complete=emu.complete,
        lane_instructions=emu.lane_instructions,
        time_s=emu.time_s,
        banks=banks,
        coalescing=coal,
        reconcile_notes=tuple(n for n in rec.notes if n.action in ("merged", "split")),
        notes=fallback + tuple(emu.notes) + tuple(launch.notes) + l2_notes,
        l2=l2,
        trace=rec.apply(emu.trace),
        outputs=emu.outputs,
    )




def _with_interior(
    emu: Any, module: CompiledModule, kernel: KernelInfo, launch: Any, device: DeviceSpec
) -> tuple[Any, tuple[str, ...]]:
    """The L2 model's trace: the sampled CTAs plus a patch of CTAs in the middle of the grid.

    The first wave of a large 2D grid covers its top CTA rows only; when an image kernel reads
    further than its own tile, their footprints are all clamped at the border, and the L2 model
    cannot synthesize the other CTAs from them (it would fall back to the traced CTAs, row-major
    only). Two CTA rows in the middle of the grid, up to :data:`INTERIOR_CTAS` CTAs around its
    centre (:func:`gpuadvise.trace.emulate.interior_ctas`), give it CTAs clear of the border and
    neighbours in x and y. Returns the trace unchanged when they are traced already (a grid the
    sample covers) or cannot be traced (with a note)."""
    from gpuadvise.trace.emulate import emulate, interior_ctas

    grid = tuple(int(v) for v in emu.trace.grid)
    extra = interior_ctas((grid[0], grid[1], grid[2]), exclude=emu.ctas_run, limit=INTERIOR_CTAS)
    if not extra:
        return emu.trace, ()
    t0 = time.perf_counter()
    try:
        more = emulate(module, kernel, launch, device, sample_ctas=extra)
    except GpuAdviseError as exc:
        return emu.trace, (f"the L2 model's interior CTAs could not be traced: {exc.one_line()}",)
    gx = grid[0]
    ys = sorted({c // gx for c in extra})
    xs = sorted({c % gx for c in extra})
    rows = f"row {ys[0]}" if len(ys) == 1 else f"rows {ys[0]}-{ys[-1]}"
    cols = f"column {xs[0]}" if len(xs) == 1 else f"columns {xs[0]}-{xs[-1]}"
    note = (
        f"the L2 model also traced {len(extra)} CTAs in the middle of the grid (CTA {rows}, "
        f"{cols}), away from its border, in {time.perf_counter() - t0:.1f} s"
    )
    return _merge_traces(emu.trace, more.trace), (note,)


def _merge_traces(a: Any, b: Any) -> Any:
    """One AccessTrace of the CTAs of two emulations of the same launch. Both list the same
    instructions unless a generic access reached another state space in one of them: then
    ``b``'s instruction ids are mapped to ``a``'s by source location, opcode, space, kind and
    width (the first of ``a``'s with that key)."""
    import numpy as np

    from gpuadvise.trace.access import InstrInfo

    rb = b.records
    instrs = list(a.instructions)
    if tuple(b.instructions) != tuple(a.instructions):

        def key(i: InstrInfo) -> tuple:
            return (i.file, i.line, i.opcode, int(i.space), int(i.kind), i.width)

        index: dict[tuple, int] = {}
        for i in a.instructions:
            index.setdefault(key(i), i.inst)
        remap = np.arange(max((i.inst for i in b.instructions), default=-1) + 1, dtype=np.int64)
        for i in b.instructions:
            k = key(i)
            if k not in index:
                index[k] = len(instrs)
                instrs.append(replace(i, inst=len(instrs)))
            remap[i.inst] = index[k]
        rb = rb.copy()
        if len(rb):
            rb["inst"] = remap[rb["inst"].astype(np.int64)]
    records = np.concatenate([a.records, rb])
    ctas = tuple(sorted(set(a.ctas) | set(b.ctas)))
    return replace(
        a,
        records=records,
        instructions=tuple(instrs),
        ctas=ctas,
    )


def _gpu_memory(
    spec: KernelSpec,
    device: DeviceSpec,
    module: CompiledModule,
    kernel: KernelInfo,
    launch: Any,
    tc: Any,
    instrs: tuple[Any, ...],
    sample_ctas: int | str | None,
) -> MemoryAnalysis:
    from gpuadvise.model.banks import analyze_banks
    from gpuadvise.model.coalescing import analyze_coalescing
    from gpuadvise.model.reconcile import reconcile
    from gpuadvise.toolchain import sass
    from gpuadvise.trace.gpu import trace_on_gpu

    t0 = time.perf_counter()
    g = trace_on_gpu(module, kernel, launch, device, sample_ctas, toolchain=tc)
    trace = g.trace
    rec = reconcile(trace, sass.memory_summary(instrs))
    notes = [*g.notes, f"traced on the GPU: instrumentation slowdown {g.slowdown:.1f}x"]
    if g.records_lost:
        notes.append(f"{g.records_lost} records did not fit the trace buffer")
    if not g.outputs_match:
        notes.append("the instrumented kernel's outputs differ from the original's: do not trust")
    return MemoryAnalysis(
        ctas_run=len(trace.ctas),
        total_ctas=trace.total_ctas,
        complete=trace.complete,
        time_s=time.perf_counter() - t0,
        banks=analyze_banks(trace, rec.records),
        coalescing=analyze_coalescing(trace, rec.records),
        reconcile_notes=tuple(n for n in rec.notes if n.action in ("merged", "split")),
        notes=tuple(notes),
        trace=rec.apply(trace),
        outputs=g.outputs,
        tracer="gpu",
    )


def analyze_static(
    spec: KernelSpec,
    device: DeviceSpec,
    options: CompileOptions,
    nvcc: str | None = None,
    notes: tuple[str, ...] = (),
    trace: bool = True,
    sample_ctas: int | str | None = None,
    tracer: str = "emu",
) -> StaticAnalysis:
    """Compile ``spec``'s kernel for ``device`` and work out everything no GPU is needed for:
    resources, occupancy, waves, SASS, and (``trace``) the emulator's trace through the models."""
    from gpuadvise.runner.checks import check_launch
    from gpuadvise.toolchain import compile_source, find_toolchain, sass, select_compiled_kernel

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    tc = find_toolchain(nvcc)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    timings["compile_s"] = time.perf_counter() - t0
    kernel = select_compiled_kernel(module, spec.kernel)
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
    k = occ.KernelResources(
        threads_per_block=launch.block.count,
        regs_per_thread=res.registers,
        static_smem_bytes=res.static_smem_bytes,
        dynamic_smem_bytes=launch.dynamic_smem_bytes,
        barriers=max(res.barriers, 1) if device.cc_major >= 9 else res.barriers,
    )
    result = occ.max_active_blocks(device, k)
    steps = tuple(occ.next_steps(device, k))
    waves = waves_of(launch.grid.count, result.active_blocks_per_sm, device.sm_count)
    timings["occupancy_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    instrs = sass.disassemble(module.cubin_path, kernel.mangled, tc)
    lines = sass.memory_summary(instrs, call_site=True)
    timings["sass_s"] = time.perf_counter() - t2
    memory = None
    if trace:
        t3 = time.perf_counter()
        memory = analyze_memory(
            spec,
            device,
            module,
            kernel,
            options,
            tc,
            instrs,
            sample_ctas,
            tracer,
            result.active_blocks_per_sm,
        )
        timings["trace_s"] = time.perf_counter() - t3
    all_notes = list(notes) + launch_notes
    if waves is None:
        all_notes.append(f"{device.name} has no SM count in its model: waves are not computed")
    return StaticAnalysis(
        spec=spec,
        device=device,
        module=module,
        kernel=kernel,
        occupancy_input=k,
        occupancy=result,
        next_steps=steps,
        waves=waves,
        sass_lines=lines,
        sass_instruction_count=len(instrs),
        timings_s=timings,
        notes=tuple(all_notes),
        memory=memory,
    )
