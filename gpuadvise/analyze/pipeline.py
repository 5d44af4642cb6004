"""Orchestrates ``analyze``: spec -> compile -> resources -> occupancy -> SASS -> models.

Each step is a function of its inputs; only the toolchain touches the outside world here. The result
is a frozen :class:`KernelAnalysis` that the rules read (:mod:`gpuadvise.analyze.evaluate`) and the
report renders (terminal, JSON). The trace-based models are computed in
:mod:`gpuadvise.analyze.models`, for the models asked for (the enabled rules' ``models``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from gpuadvise.analyze.ahead import SassAhead, life_table, read_sass
from gpuadvise.analyze.head import AnalysisHead, CompiledHead, compile_head
from gpuadvise.analyze.models import (
    MemoryAnalysis,
    bind_spec_constants,
    compute_models,
    resolve_launch,
    trace_models,
)
from gpuadvise.analyze.options import compile_options_for
from gpuadvise.devices import DeviceSpec
from gpuadvise.model.occupancy import KernelResources, OccupancyResult, Suggestion
from gpuadvise.model.registers import RegisterPressure
from gpuadvise.model.waves import Waves, waves_of
from gpuadvise.rules.context import TRACE_MODELS, KernelFacts
from gpuadvise.spec.kernel_spec import KernelSpec
from gpuadvise.toolchain import CompiledModule, CompileOptions, KernelInfo, Toolchain
from gpuadvise.toolchain.binary import is_binary
from gpuadvise.toolchain.liveness import LifeRanges
from gpuadvise.toolchain.sass import SassInstruction, SassMemLine
from gpuadvise.trace.sass_arrival import sass_in_flight

__all__ = [
    "AnalysisHead",
    "KernelAnalysis",
    "MemoryAnalysis",
    "Waves",
    "analyze_kernel",
    "compile_options_for",
    "life_table",
    "resolve_launch",
    "waves_of",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelAnalysis:
    """One kernel launch compiled, modelled and (when a model needs it) traced.

    ``sass_lines``: SASS memory instructions per source line at the user's call site;
    ``sass_instructions``: every SASS instruction; ``registers``: the live registers along the
    SASS (:mod:`gpuadvise.model.registers`; None when nvdisasm cannot give them, with a note);
    ``memory``: the trace-based models (None: not
    traced); ``models``: the trace-based models computed; ``options``/``toolchain``: how the
    kernel was built (the rules' services build candidates the same way); ``timings_s``: seconds
    per phase (``compile_s``, ``occupancy_s``, ``sass_s``, ``trace_s``; the run adds
    ``rules_s`` and ``measure_s``; ``sass_s`` is this thread's time in the SASS step: with the
    SASS read in a thread since the compile, the PTX's parse for the emulator and the wait, or,
    the trace run meanwhile, the join after it; ``sass_wait_s`` then the wait for nvdisasm that
    the trace had at its end, for its block costs, within ``trace_s``);
    ``skipped``: what ``--time-budget`` left out or cut short (empty: the analysis is complete).
    """

    spec: KernelSpec
    device: DeviceSpec
    module: CompiledModule
    kernel: KernelInfo
    occupancy_input: KernelResources
    occupancy: OccupancyResult
    next_steps: tuple[Suggestion, ...]
    waves: Waves | None
    sass_lines: tuple[SassMemLine, ...]
    sass_instruction_count: int
    timings_s: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    memory: MemoryAnalysis | None = None
    sass_instructions: tuple[SassInstruction, ...] = ()
    options: CompileOptions | None = None
    toolchain: Toolchain | None = None
    models: frozenset[str] = frozenset()
    skipped: tuple[str, ...] = ()
    registers: RegisterPressure | None = None

    def without_trace_data(self) -> KernelAnalysis:
        """This analysis without what only the rules read: the trace's records and the traced
        outputs (the report and the fixes read neither; the fixes read the traced CTAs' ids).
        ``--diff`` analyses the kernel again for every round of fixes; the first analysis's
        trace (llm.c's softmax: 340 MB of records and the arrays derived from them) is not
        held meanwhile."""
        import dataclasses

        mem = self.memory
        if mem is None or (mem.trace is None and mem.outputs is None):
            return self
        trace = mem.trace
        if trace is not None:  # a copy: a view of no records still holds them all
            trace = dataclasses.replace(trace, records=trace.records[:0].copy())
        return dataclasses.replace(self, memory=dataclasses.replace(mem, trace=trace, outputs=None))

    def facts(self) -> KernelFacts:
        """What the rules read about the launch besides the trace-based models."""
        from gpuadvise.source.text import kernel_file
        from gpuadvise.toolchain import sass

        dirs = self.options.include_dirs if self.options is not None else ()
        defined_in: str | None = str(kernel_file(self.spec.source, self.spec.kernel, dirs))
        if is_binary(self.spec.source):  # a .ptx/.cubin: the file its line info names
            from gpuadvise.analyze.binary_input import located_file

            defined_in = located_file(self.module, self.kernel, self.toolchain)
        return KernelFacts(
            kernel_file=defined_in,
            spec=self.spec,
            device=self.device,
            kernel=self.kernel,
            occupancy_input=self.occupancy_input,
            occupancy=self.occupancy,
            next_steps=self.next_steps,
            waves=self.waves,
            ptx=self.module.ptx,
            compile_flags=tuple(self.module.flags),
            sass_instructions=self.sass_instructions,
            sass_lines=self.sass_lines,
            sass_lines_innermost=tuple(sass.memory_summary(self.sass_instructions)),
            registers=self.registers,
        )


def analyze_kernel(
    spec: KernelSpec,
    device: DeviceSpec,
    options: CompileOptions,
    nvcc: str | None = None,
    notes: tuple[str, ...] = (),
    trace: bool = True,
    sample_ctas: int | str | None = None,
    tracer: str = "emu",
    models: Collection[str] = TRACE_MODELS,
    l2_probe_ctas: int | None = None,
    registers: bool = True,
    head: CompiledHead | None = None,
    line_models: bool = True,
    sass_ahead: SassAhead | None = None,
    keep_outputs: bool = True,
    l2_behind: bool = False,
) -> KernelAnalysis:
    """Compile ``spec``'s kernel for ``device`` and work out everything no GPU is needed for:
    resources, occupancy, waves, SASS, and, when ``trace`` allows it and ``models`` (the
    enabled rules' ``models``) holds a trace-based model, the trace through the models
    (:func:`gpuadvise.analyze.models.compute_models`).

    ``tracer``: ``emu``, ``gpu``, or ``auto`` (a GPU is here: the cheaper of the two for this
    trace, :mod:`gpuadvise.analyze.tracer_choice`). Each phase is a progress step
    (:mod:`gpuadvise.spec.progress`); under a time budget (:func:`gpuadvise.spec.budget.time_budget`)
    that is spent, the trace is skipped. ``registers`` False: the live registers are not read
    (a variant traced for its launch model alone, :mod:`gpuadvise.analyze.variant_trace`);
    ``line_models`` False: nor are the per-line bank and coalescing models run on its trace
    (the launch model reads the trace's view, which finds its records' sectors itself).
    ``head``: the kernel already compiled, with its occupancy and waves
    (:func:`gpuadvise.analyze.head.compile_head`: ``analyze`` prints its header from it before
    it loads the rules); None: compiled here. ``sass_ahead``: the head's SASS and life ranges
    being read in a thread since the compile (:class:`gpuadvise.analyze.ahead.SassAhead`): the
    emulator's trace runs meanwhile (it waits for the SASS at its end, for its block costs:
    :mod:`gpuadvise.trace.sass_arrival`), then the thread is joined and the live registers read;
    with another tracer, or no trace, the PTX is parsed for the emulator meanwhile and the thread
    joined before the trace (None: read here). ``keep_outputs`` False: the traced outputs
    (``memory.outputs``) are not kept, and the emulator's memory is freed once the kernel has
    run, before the models (``analyze``'s own run, which reads them nowhere: issue 31's peak).
    ``l2_behind`` True: the L2 model is computed in a forked child while the analysis goes on
    (``memory.l2_behind``; :meth:`~gpuadvise.analyze.models.MemoryAnalysis.with_l2` waits
    for it)."""
    from gpuadvise.spec.budget import KEEP_FOR_RULES, out_of_time, skip
    from gpuadvise.spec.progress import step
    from gpuadvise.toolchain import sass

    if head is None:
        head = compile_head(spec, device, options, nvcc)
    timings = dict(head.timings_s)
    tc, module, kernel = head.toolchain, head.module, head.head.kernel
    # the spec's __constant__ fills against the module's .const declarations: a wrong name,
    # type or size is an input error now, traced or not
    bind_spec_constants(spec, kernel, module, options, tc)
    launch_notes = list(head.launch_notes)
    k, result = head.head.occupancy_input, head.head.occupancy
    steps, waves = head.head.next_steps, head.head.waves
    wanted = trace_models(models) if trace else frozenset()
    if not line_models:
        wanted -= {"banks", "coalescing"}
    all_notes = list(notes) + launch_notes
    # the emulator's trace starts while the thread reads the SASS (it waits for it only for its
    # block costs, once it has run: gpuadvise.trace.sass_arrival); the SASS and the live
    # registers are read after it
    later = sass_ahead is not None and bool(wanted) and tracer == "emu" and bool(module.ptx)
    read: list[tuple[LifeRanges | str | None, tuple[SassInstruction, ...]]] = []

    def sass_step() -> tuple[SassInstruction, ...]:
        """The SASS, read once: the thread joined (or the SASS read here)."""
        if read:
            return read[0][1]
        t2 = time.perf_counter()
        with step("disassembling the SASS"):
            got = None
            if sass_ahead is not None:
                if wanted and tracer == "emu" and module.ptx and not later:
                    _parse_ahead(module.ptx)  # while nvdisasm runs in the thread
                t_join = time.perf_counter()
                got = sass_ahead.result(module, kernel, registers)
                log.debug(
                    "SASS: the PTX parsed ahead in %.2f s, then %.2f s waited for nvdisasm "
                    "(%.2f s in all, the trace's wait included)",
                    t_join - t2,
                    time.perf_counter() - t_join,
                    sass_ahead.waited_s,
                )
            read.append(got if got is not None else read_sass(module, kernel, tc, registers))
        timings["sass_s"] = time.perf_counter() - t2
        return read[0][1]

    def registers_step() -> RegisterPressure | None:
        t_live = time.perf_counter()
        table, instrs = read[0]
        pressure, why = None, None
        if table is not None:
            with step("reading the live registers"):
                pressure, why = live_registers(module, kernel, instrs, tc, table)
        if why:
            all_notes.append(why)
        timings["registers_s"] = time.perf_counter() - t_live
        return pressure

    if not later:
        sass_step()
        pressure = registers_step()
    memory = None
    if wanted and out_of_time(KEEP_FOR_RULES):  # cut first: the rest is for the rules
        skip("the memory trace and its models (" + ", ".join(sorted(wanted)) + ")")
        wanted = frozenset()
    elif wanted:
        t3, cpu3 = time.perf_counter(), time.thread_time()
        if tracer == "auto":
            from gpuadvise.analyze.tracer_choice import choose_tracer

            with step("choosing the tracer"):
                choice = choose_tracer(
                    module, kernel, resolve_launch(spec, kernel, options, tc), device, sample_ctas
                )
            tracer = choice.tracer
            all_notes.append(choice.note)
        with contextlib.ExitStack() as flight:
            if later and sass_ahead is not None:
                flight.enter_context(sass_in_flight(module.cubin_path, kernel.mangled, sass_ahead))
            with step("tracing and modelling memory (" + ", ".join(sorted(wanted)) + ")"):
                memory = compute_models(
                    spec,
                    device,
                    module,
                    kernel,
                    options,
                    tc,
                    sass_step,
                    sample_ctas,
                    tracer,
                    result.active_blocks_per_sm,
                    wanted,
                    l2_probe_ctas=l2_probe_ctas,
                    keep_outputs=keep_outputs,
                    l2_behind=l2_behind,
                )
        timings["trace_s"] = time.perf_counter() - t3
        # the CPU the trace took on this thread (the emulator's), whatever else the machine runs
        # (what decides whether variants are traced is the trace's cost, memory.trace_cost)
        timings["trace_cpu_s"] = time.thread_time() - cpu3
        if later and sass_ahead is not None:
            timings["sass_wait_s"] = sass_ahead.waited_s  # in the trace, for its block costs
    elif trace:
        all_notes.append(
            "the kernel was not traced: no enabled rule reads a trace-based model "
            "(trace, banks, coalescing, l2)"
        )
    if later:  # the SASS read, or the thread joined, after the trace
        sass_step()
        pressure = registers_step()
    instrs = read[0][1]
    lines = sass.memory_summary(instrs, call_site=True)
    if waves is None:
        all_notes.append(f"{device.name} has no SM count in its model: waves are not computed")
    return KernelAnalysis(
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
        sass_instructions=instrs,
        options=options,
        toolchain=tc,
        models=wanted,
        registers=pressure,
    )


def _parse_ahead(ptx: str) -> None:
    """The kernel's PTX parsed for the emulator now (kept: :func:`~gpuadvise.ptx.parser.
    parse_ptx_cached`, the emulator's own parse); an error is left for the trace, which parses
    it again and reports it."""
    import contextlib

    from gpuadvise.ptx.parser import parse_ptx_cached

    with contextlib.suppress(Exception):
        parse_ptx_cached(ptx)


def live_registers(
    module: CompiledModule,
    kernel: KernelInfo,
    instrs: tuple[SassInstruction, ...],
    tc: Toolchain,
    table: LifeRanges | str | None = None,
) -> tuple[RegisterPressure | None, str | None]:
    """The kernel's live registers along its SASS (nvdisasm's life ranges joined to the SASS
    with lines), or None and why not (no nvdisasm, a table it cannot read). ``table``: the
    :func:`life_table` already read (None: read it now)."""
    from gpuadvise.model.registers import register_pressure

    if table is None:
        table = life_table(module, kernel, tc)
    if isinstance(table, str):
        return None, table
    return register_pressure(table, instrs, kernel.resources.registers), None
