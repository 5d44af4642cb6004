"""The trace-based models of one launch, computed in one place, once, on demand.

The enabled rules declare the models they read (``Rule.models``); :func:`compute_models` traces the
kernel when one of them needs the trace (:data:`~gpuadvise.rules.context.TRACE_MODELS`), reconciles the trace
with the SASS and runs the per-line models the ``analyze`` report shows with it (shared-memory banks,
global-memory coalescing), and the L2 model (which traces CTAs in the middle of the grid as well)
only when asked for. :func:`model_results` hands the results to the rules' context, with the
reason for each model that is missing: the context only reads them.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import DataFileError, GpuAdviseError
from gpuadvise.model.l2_orders import l2_for as _l2_orders
from gpuadvise.rules.context import TRACE_MODELS, EmulationStats, ModelResults
from gpuadvise.spec.kernel_spec import KernelSpec, ResolvedLaunch
from gpuadvise.toolchain import CompiledModule, CompileOptions, KernelInfo, Toolchain
from gpuadvise.toolchain.binary import is_binary
from gpuadvise.toolchain.sass import SassInstruction

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

    from gpuadvise.analyze.l2_behind import L2Behind
    from gpuadvise.model.banks import BankResult
    from gpuadvise.model.coalescing import CoalescingResult
    from gpuadvise.model.l2 import L2Result
    from gpuadvise.model.reconcile import ReconcileNote
    from gpuadvise.ptx.constants import BoundConstant
    from gpuadvise.trace.access import AccessTrace, Space
    from gpuadvise.trace.emu_cost import CtaCost
    from gpuadvise.trace.simt import SimtProfile
    from gpuadvise.trace.tracer import Tracer, TraceResult

__all__ = [
    "INTERIOR_CTAS",
    "TRACE_STOPS",
    "bind_spec_constants",
    "MemoryAnalysis",
    "compute_models",
    "l2_probe_size",
    "model_results",
    "resolve_launch",
    "trace_models",
]

TRACE_STOPS = {
    "out_of_bounds": "an out-of-bounds access",
    "unsupported": "an instruction the emulator does not run",
    "budget": "the instruction budget ran out",
    "no_ptx": "a cubin holds no PTX to emulate",
}
"""Why a trace stopped (``MemoryAnalysis.error_kind``), in a few words: the reason the one
line that says the analysis is incomplete gives."""

INTERIOR_CTAS = 64
"""CTAs the L2 model traces in the middle of a large 2D grid (two rows of up to 32), besides the
sampled ones, by default: see :func:`_with_interior` and :func:`l2_probe_size`."""


L2_PROBE_TRACE_BYTES = 160 << 20
"""The trace of the L2 model's interior probe takes at most about this much with the default
sample (a quarter of :data:`~gpuadvise.trace.emulate.DEFAULT_SAMPLE_TRACE_BYTES`): the probe's
CTAs are counted from the sampled CTAs' records per CTA, and a kernel whose CTAs each make many
accesses (a naive SGEMM's 1,024-thread CTAs: 65,536 warp accesses, 18 MB of trace each) gets
fewer than :data:`INTERIOR_CTAS`, with a note. ``--sample-ctas N`` lifts the bound (the probe
then traces ``--l2-probe-ctas``, at most N, CTAs whatever their trace takes)."""


def _probe_within_budget(ran: int, trace_bytes: int, probe: int) -> tuple[int, tuple[str, ...]]:
    """``probe`` bounded by :data:`L2_PROBE_TRACE_BYTES` at the sampled CTAs' trace bytes per
    CTA (``ran`` CTAs traced, ``trace_bytes`` of records), and the note that says so when it is
    cut (nothing when it is not)."""
    if probe <= 0 or ran == 0:
        return probe, ()
    per_cta = trace_bytes / ran
    if per_cta <= 0:
        return probe, ()
    fit = int(L2_PROBE_TRACE_BYTES // per_cta)
    if fit >= probe:
        return probe, ()
    note = (
        f"the L2 model's probe of the middle of the grid traced at most {fit} of {probe} CTAs: "
        f"their trace ({per_cta / 2**20:.1f} MiB per CTA) would outgrow the probe's budget of "
        f"{L2_PROBE_TRACE_BYTES / 2**20:.1f} MiB (--sample-ctas N lifts it)"
    )
    return fit, (note,)


def _probe_within_cpu(unit: CtaCost | None, probe: int) -> tuple[int, tuple[str, ...]]:
    """``probe`` bounded by its share of the trace stage's CPU
    (:data:`~gpuadvise.trace.emu_cost.L2_PROBE_EMU_NS`) at the default sample's first CTA's cost
    (``unit``; None: no bound, the sample was asked for), and the note that says so when it is
    cut (nothing when it is not)."""
    from gpuadvise.trace.emu_cost import L2_PROBE_EMU_NS, probe_ctas_by_cpu

    if unit is None or probe <= 0:
        return probe, ()
    fit = probe_ctas_by_cpu(unit, L2_PROBE_EMU_NS, probe)
    if fit >= probe:
        return probe, ()
    note = (
        f"the L2 model's probe of the middle of the grid traced at most {fit} of {probe} CTAs: "
        f"a CTA runs {unit.ops:,} instructions in {unit.steps:,} steps, more than the probe's "
        f"share of the emulator's work, about {L2_PROBE_EMU_NS / 1e9:.1f} CPU-s, affords "
        "(--sample-ctas N lifts it)"
    )
    return fit, (note,)


def _probe_size(
    asked: int | None, sample_ctas: int | str | None, complete: bool, ran: int, trace_bytes: int
) -> tuple[int, tuple[str, ...]]:
    """The L2 probe's CTAs: ``asked`` (``--l2-probe-ctas``; None: :data:`INTERIOR_CTAS`), cut by
    :func:`_probe_within_budget` for the default sample of an incomplete trace, with its note."""
    probe = INTERIOR_CTAS if asked is None else max(0, asked)
    if sample_ctas in (None, "wave") and not complete:  # the default sample, or the whole wave
        return _probe_within_budget(ran, trace_bytes, probe)
    return probe, ()


def l2_probe_size(sample_ctas: int | str | None, l2_probe_ctas: int | None) -> int:
    """How many CTAs the L2 model's probe of the middle of the grid traces: ``l2_probe_ctas``
    when given (``--l2-probe-ctas``), else :data:`INTERIOR_CTAS`, at most ``sample_ctas`` when
    that is a count (``--sample-ctas N`` bounds every model: the probe traces at most as many
    CTAs again)."""
    if l2_probe_ctas is not None:
        return max(0, int(l2_probe_ctas))
    if isinstance(sample_ctas, int):
        return min(INTERIOR_CTAS, max(0, sample_ctas))
    return INTERIOR_CTAS


def trace_models(requested: Collection[str]) -> frozenset[str]:
    """The trace-based models to compute for ``requested`` (rules' ``models``): the trace and
    its per-line models when any trace model is asked for, the L2 model only when it is."""
    want = set(requested) & TRACE_MODELS
    if not want:
        return frozenset()
    return frozenset({"trace", "banks", "coalescing"} | (want & {"l2"}))


@dataclass(frozen=True)
class MemoryAnalysis:
    """The trace-based models of one launch: the emulator's trace, reconciled with the SASS, fed to
    the bank and coalescing models (and the L2 model when asked for). ``error``: why there is no
    trace (the static part still holds); ``l2_unavailable``: why there is no L2 model."""

    ctas_run: int = 0
    total_ctas: int = 0
    complete: bool = False
    lane_instructions: int = 0  # 0: not counted (a tracer without INSTRUCTION_COUNTS)
    time_s: float = 0.0
    banks: BankResult | None = None
    coalescing: CoalescingResult | None = None
    reconcile_notes: tuple[ReconcileNote, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None
    error_kind: str | None = None  # out_of_bounds | unsupported | budget | other
    trace: AccessTrace | None = None  # reconciled with the SASS (not serialized)
    tracer: str = "emu"  # emu | gpu
    l2: L2Result | None = None
    l2_unavailable: str | None = None  # why l2 is None
    outputs: Mapping[str, np.ndarray] | None = None  # after the traced CTAs ran (not serialized)
    # the long loops whose iterations the emulator skipped (a note each): counts are weighted
    sampled_loops: tuple[str, ...] = ()
    # the tracer's SIMT counts, None without Capability.SIMT (the GPU's) (not serialized)
    simt: SimtProfile | None = None
    l2_probe_ctas: int | None = None  # the most CTAs an L2 probe may trace (None: no bound)
    # what the trace cost, the same on every machine: its warp accesses plus the emulator's warp
    # steps (trace.emulate.trace_cost, the default sample's unit; the GPU tracer's accesses
    # alone). analyze traces the variants' points only below a bound of it
    # (analyze.variant_trace.MAX_TRACE_COST)
    trace_cost: int = 0
    # what the emulator's trace cost it (trace.emulate.Emulation.emu_cost: its batches' work
    # costed, ns on the calibration machine, the same on every machine; 0 from the GPU tracer):
    # a kernel's variants' emulations are kept to about twice it together
    # (analyze.variant_trace.variant_budget_emu)
    emu_cost: int = 0
    # the L2 model still being computed in a forked child (compute_models' l2_behind): l2,
    # l2_unavailable and the L2 model's notes are those of with_l2() (not serialized)
    l2_behind: L2Behind | None = None

    def with_l2(self) -> MemoryAnalysis:
        """This analysis with the L2 model computed behind it (waited for: :meth:`~gpuadvise.
        analyze.l2_behind.L2Behind.result`) in place, its notes last as they were when it was
        computed in line; itself when there is none."""
        if self.l2_behind is None:
            return self
        l2, notes, why = self.l2_behind.result()
        return replace(self, l2=l2, l2_unavailable=why, notes=self.notes + notes, l2_behind=None)


# The L2 model replays the whole grid, every CTA (model/l2/replay.py): about this many bytes per
# CTA for each launch order replayed at once, plus the footprint shared by the orders (measured:
# 140-170 B a CTA for the one order of a 1D grid, 290 for the orders of a 2D grid on two cores).
_L2_BYTES_PER_CTA_ORDER = 192
_L2_BYTES_PER_CTA_SHARED = 64


def l2_for(
    trace: AccessTrace, device: DeviceSpec, blocks_per_sm: int
) -> tuple[Any, tuple[str, ...]]:
    """The L2 model (:func:`gpuadvise.model.l2_orders.l2_for`) when its replay of the grid fits
    half the memory budget, else None and why: ``--grid 2147483647`` once took 6 GB in 15 s,
    and would have taken hundreds, for a model that the rest of the analysis does not need."""
    import os

    from gpuadvise.model.l2 import DEFAULT_ORDERS
    from gpuadvise.model.l2.predict import REPLAY_MAX_BYTES, REPLAY_THREADS
    from gpuadvise.spec.budget import TooLargeError, check_fits, format_bytes

    orders = len(DEFAULT_ORDERS) if trace.grid[1] > 1 else 1  # as model.l2_orders.l2_for
    at_once = min(orders, os.cpu_count() or 1, REPLAY_THREADS)
    need = trace.total_ctas * (_L2_BYTES_PER_CTA_SHARED + _L2_BYTES_PER_CTA_ORDER * at_once)
    try:
        check_fits(
            need,
            f"the L2 model's replay of {trace.total_ctas} CTAs",
            "",
            share=0.5,
            use="the L2 model",
        )
    except TooLargeError as exc:
        return None, (f"no L2 model: {exc.message}; a smaller grid gets one",)
    # whatever the machine, the replays hold at most REPLAY_MAX_BYTES (one order at a time when
    # several do not fit: model/l2/predict.py lowers the threads)
    one = trace.total_ctas * (_L2_BYTES_PER_CTA_SHARED + _L2_BYTES_PER_CTA_ORDER)
    if one > REPLAY_MAX_BYTES:
        return None, (
            f"no L2 model: its replay of {trace.total_ctas} CTAs needs {format_bytes(one)} of "
            f"memory, more than the {format_bytes(REPLAY_MAX_BYTES)} the L2 model takes on any "
            "machine; a smaller grid gets one",
        )
    from gpuadvise.ptx.emulator import malloc_tuned

    # the memory each array frees kept for the next (the emulator's setting): after the trace's
    # emulator restored glibc's defaults, every array of 128 KB and more was a fresh mmap whose
    # pages faulted in anew (the forked child inherits that): 650,000 faults and half of
    # hecbench softMax's 2.9 CPU-s of the model were system time, 50,000 and 0.2 s kept
    with malloc_tuned():
        return _l2_orders(trace, device, blocks_per_sm)


def _struct_layout(
    spec: KernelSpec, kernel: KernelInfo, options: CompileOptions, tc: Toolchain
) -> Callable[[str], tuple[int, int]]:
    """Sizes user structs with the compiler, looked up in the kernel's namespaces."""
    from gpuadvise.toolchain import struct_layouts

    namespaces = kernel.name.split("<")[0].split("::")[:-1]
    ns = ["::".join(namespaces[: i + 1]) for i in range(len(namespaces))]

    def layout(name: str) -> tuple[int, int]:
        return struct_layouts(spec.source, [name], options, tc, ns)[name]

    return layout


def resolve_launch(
    spec: KernelSpec, kernel: KernelInfo, options: CompileOptions, tc: Toolchain
) -> ResolvedLaunch:
    """Bind the spec to the kernel's parameters; user structs are sized by the compiler, looked up
    in the kernel's namespaces."""
    from gpuadvise.source.signature import parse_signature, with_compiled_types
    from gpuadvise.source.text import kernel_file
    from gpuadvise.spec.cuda_types import lookup
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.toolchain.names import split_params

    if is_binary(spec.source):  # a .ptx/.cubin: its parameters from the module
        from gpuadvise.analyze.binary_input import resolve_binary_launch

        return resolve_binary_launch(spec, kernel, options, tc)
    defined_in = kernel_file(spec.source, spec.kernel, options.include_dirs)
    code = defined_in.read_text(errors="replace")
    declared = parse_signature(code, spec.kernel)
    # a scalar typed by a macro, typedef or enum: the type the compiler gave it
    compiled = split_params(kernel.signature) or []
    params = with_compiled_types(declared, compiled, lambda t: lookup(t) is not None, code)
    return resolve(spec, params, _struct_layout(spec, kernel, options, tc))


def bind_spec_constants(
    spec: KernelSpec,
    kernel: KernelInfo,
    module: CompiledModule,
    options: CompileOptions,
    tc: Toolchain,
) -> tuple[BoundConstant, ...]:
    """The spec's ``__constant__`` fills (``[constants]``, ``--constant``) bound to the module's
    ``.const`` variables (:func:`gpuadvise.ptx.constants.bind_constants`); raises UsageError on
    a name, type or size the module does not declare."""
    if not spec.constants:
        return ()
    from gpuadvise.ptx.constants import bind_constants
    from gpuadvise.spec.kernel_spec import resolve_constants

    layout = _struct_layout(spec, kernel, options, tc)
    return bind_constants(module.ptx, resolve_constants(spec, layout))


def compute_models(
    spec: KernelSpec,
    device: DeviceSpec,
    module: CompiledModule,
    kernel: KernelInfo,
    options: CompileOptions,
    tc: Toolchain,
    instrs: tuple[SassInstruction, ...] | Callable[[], tuple[SassInstruction, ...]],
    sample_ctas: int | str | None,
    tracer: str = "emu",
    blocks_per_sm: int = 0,
    models: Collection[str] = TRACE_MODELS,
    l2_probe_ctas: int | None = None,
    keep_outputs: bool = True,
    l2_behind: bool = False,
) -> MemoryAnalysis:
    """Trace the sampled CTAs (the CPU emulator, or with ``tracer="gpu"`` the instrumented kernel
    on the GPU), reconcile the trace with the SASS, run the bank and coalescing models, and the L2
    model when ``models`` holds ``l2`` (with up to ``l2_probe_ctas`` more CTAs in the middle of a
    2D grid, None: :data:`INTERIOR_CTAS`; ``analyze`` passes :func:`l2_probe_size`). A kernel
    that cannot be traced gives a MemoryAnalysis with ``error`` set. ``instrs``: the kernel's
    SASS, or what gives it when first needed (the GPU tracer's start, the emulator's trace's
    reconcile: ``analyze`` traces while it is being read). ``keep_outputs`` False: no
    ``outputs`` (None), and the tracer's are let go of as soon as the kernel has run: the
    emulator's global memory (thomas: its 512 MB heap, the written part resident) is not held
    through the models and the rules. ``l2_behind`` True (``analyze``'s own run, without a time
    budget): the L2 model is computed in a forked child from the trace while this process goes
    on (the other models, the rules): ``l2_behind`` of the result, :meth:`MemoryAnalysis.with_l2`
    waits for it (:mod:`gpuadvise.analyze.l2_behind`)."""
    from gpuadvise.model.banks import analyze_banks
    from gpuadvise.model.coalescing import analyze_coalescing
    from gpuadvise.model.reconcile import reconcile
    from gpuadvise.ptx.errors import (
        InstructionBudgetError,
        MemoryAccessError,
        UnsupportedInstructionError,
    )
    from gpuadvise.spec.budget import KEEP_FOR_RULES, TooLargeError, out_of_time, skip, time_left_s
    from gpuadvise.toolchain import sass
    from gpuadvise.trace.emulate import trace_cost
    from gpuadvise.trace.tracer import EmulatorTracer

    want_l2 = "l2" in models
    total = spec.launch.grid.count
    if not module.ptx:  # a cubin given without source (toolchain.binary): SASS only
        return MemoryAnalysis(
            total_ctas=total,
            error=f"{spec.source.name} holds SASS and no PTX, and the emulator runs PTX "
            "(give the PTX, nvcc -ptx -lineinfo, or a fatbin that embeds it)",
            error_kind="no_ptx",
        )
    try:
        launch = resolve_launch(spec, kernel, options, tc)
        fallback: tuple[str, ...] = ()
        if tracer == "gpu":
            try:
                instrs = _sass_of(instrs)
                gm = _gpu_memory(spec, device, module, kernel, launch, tc, instrs, sample_ctas)
                if gm.trace is not None:
                    # the rules' probes (GA304's) under the same budget as the emulator path's
                    probe, _ = _probe_size(
                        l2_probe_ctas,
                        sample_ctas,
                        gm.complete,
                        len(gm.trace.ctas),
                        gm.trace.records.nbytes,
                    )
                    gm = replace(gm, l2_probe_ctas=probe)
                if not keep_outputs:
                    gm = replace(gm, outputs=None)
                if not want_l2 or gm.trace is None:
                    return gm
                if l2_behind and time_left_s() is None:  # in a forked child, meanwhile
                    trace = gm.trace
                    later = _start_behind(lambda: _gpu_l2(trace, device, blocks_per_sm))
                    return replace(gm, l2_behind=later)
                l2, l2_notes, why = _gpu_l2(gm.trace, device, blocks_per_sm)
                return replace(gm, l2=l2, l2_unavailable=why, notes=gm.notes + l2_notes)
            except GpuAdviseError as exc:
                fallback = (f"the GPU tracer failed ({exc.one_line()}); traced on the CPU",)
        emulator = EmulatorTracer()
        emu = emulator.run(module, kernel, launch, device, sample_ctas=sample_ctas)
        if not keep_outputs:  # (the emulator's memory, which they read lazily, freed now)
            emu = replace(emu, outputs={})
    except MemoryAccessError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="out_of_bounds")
    except UnsupportedInstructionError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="unsupported")
    except InstructionBudgetError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="budget")
    except (TooLargeError, DataFileError):
        raise  # the input asks for more memory than there is, or a data file is bad: exit 2
    except GpuAdviseError as exc:
        return MemoryAnalysis(total_ctas=total, error=exc.one_line(), error_kind="other")
    working_trace, work_notes = _with_working_ctas(emu, emulator, module, kernel, launch, device)
    emu = replace(emu, trace=working_trace)
    instrs = _sass_of(instrs)
    l2, l2_notes, l2_unavailable = None, (), None
    # one probe size for the L2 model's interior probe and the rules' (GA304 traces its own)
    probe_ctas, cut_note = _probe_size(
        l2_probe_ctas, sample_ctas, emu.complete, len(emu.ctas_run), emu.trace.records.nbytes
    )
    probe_ctas, cpu_note = _probe_within_cpu(emu.cta_cost, probe_ctas)
    cut_note += cpu_note
    behind: L2Behind | None = None
    if want_l2 and l2_behind and time_left_s() is None:
        # in a forked child, from the trace as it is now, while this process goes on
        behind = _start_behind(
            lambda: _l2_model(
                emu, emulator, module, kernel, launch, device, blocks_per_sm, probe_ctas, cut_note
            )
        )
        want_l2 = False
    inner = sass.memory_summary(instrs)
    rec = reconcile(emu.trace, inner, sass.warp_aggregated_atomics(instrs))
    # the per-line models, unless the caller reads the trace alone (a variant's launch model)
    banks = analyze_banks(emu.trace, rec.records) if "banks" in models else None
    coal = analyze_coalescing(emu.trace, rec.records) if "coalescing" in models else None
    if want_l2 and out_of_time(KEEP_FOR_RULES):  # the rest of the time budget is the rules'
        want_l2 = False
        l2_unavailable = "the L2 model was skipped: the time budget ran out (kept for the rules)"
        skip("the L2 model (the rules that read it were not evaluated)")
    if want_l2:
        l2, l2_notes, l2_unavailable = _l2_model(
            emu, emulator, module, kernel, launch, device, blocks_per_sm, probe_ctas, cut_note
        )
    elif l2_unavailable is None and behind is None:
        l2_unavailable = "the L2 model was not computed (no enabled rule reads it)"
    return MemoryAnalysis(
        ctas_run=len(emu.ctas_run),
        total_ctas=total,
        complete=emu.complete,
        lane_instructions=emu.lane_instructions or 0,
        time_s=emu.time_s,
        banks=banks,
        coalescing=coal,
        reconcile_notes=tuple(n for n in rec.notes if n.action in ("merged", "split")),
        notes=fallback + tuple(emu.notes) + tuple(launch.notes) + work_notes + l2_notes,
        l2=l2,
        l2_unavailable=l2_unavailable,
        trace=rec.apply(emu.trace),
        outputs=emu.outputs if keep_outputs else None,
        simt=emu.simt,
        l2_probe_ctas=probe_ctas,
        sampled_loops=emu.sampled_loops,
        trace_cost=trace_cost(len(emu.trace.records), emu.warp_steps or 0),
        emu_cost=emu.emu_cost,
        l2_behind=behind,
    )


def _l2_model(
    emu: TraceResult,
    emulator: Tracer,
    module: CompiledModule,
    kernel: KernelInfo,
    launch: ResolvedLaunch,
    device: DeviceSpec,
    blocks_per_sm: int,
    probe_ctas: int,
    cut_note: tuple[str, ...],
) -> tuple[L2Result | None, tuple[str, ...], str | None]:
    """The L2 model of ``emu``'s trace (with the probe of the middle of the grid, up to
    ``probe_ctas`` CTAs, ``cut_note`` saying what bounded it), its notes, and why there is
    none (None: there is one)."""
    l2_notes: tuple[str, ...] = ()
    l2_trace = emu.trace
    if not emu.complete and device.l2_bytes and device.sm_count and blocks_per_sm > 0:
        l2_trace, l2_notes = _with_interior(
            emu, emulator, module, kernel, launch, device, probe_ctas
        )
        # what bounded the probe, where there is one (a grid of one row has no middle)
        if _has_interior(emu):
            l2_notes = cut_note + l2_notes
    l2, more = l2_for(l2_trace, device, blocks_per_sm)
    l2_notes += more
    if l2 is not None and l2_trace.sampled_iterations:
        l2_notes += (
            "the L2 model replays the accesses the sampled loops ran (their skipped "
            "iterations' addresses are not in the trace): its footprint is a lower bound",
        )
    return l2, l2_notes, (None if l2 is not None else more[0] if more else "no L2 model")


def _gpu_l2(
    trace: AccessTrace, device: DeviceSpec, blocks_per_sm: int
) -> tuple[L2Result | None, tuple[str, ...], str | None]:
    """:func:`l2_for` of the GPU tracer's trace, as :func:`_l2_model` returns it."""
    l2, notes = l2_for(trace, device, blocks_per_sm)
    return l2, notes, (notes[0] if l2 is None and notes else None)


def _start_behind(compute: Callable[[], Any]) -> L2Behind:
    """:class:`~gpuadvise.analyze.l2_behind.L2Behind` of ``compute`` started, the L2 model's
    modules imported here first (the child then imports nothing: no import lock another thread
    may hold at the fork)."""
    import gpuadvise.model.l2.predict  # noqa: F401
    import gpuadvise.model.l2.replay  # noqa: F401
    import gpuadvise.model.l2.synthesis  # noqa: F401
    import gpuadvise.ptx.emulator  # noqa: F401  (l2_for's malloc_tuned)
    import gpuadvise.trace.emulate  # noqa: F401
    from gpuadvise.analyze.l2_behind import L2Behind

    return L2Behind(compute).start()


def _sass_of(
    instrs: tuple[SassInstruction, ...] | Callable[[], tuple[SassInstruction, ...]],
) -> tuple[SassInstruction, ...]:
    """The SASS itself (``compute_models``' ``instrs``)."""
    return instrs() if callable(instrs) else instrs


WORK_BOUND_CTAS = 64
"""Traced working CTAs whose global accesses bound the working CTAs by the buffers' sizes."""


def _with_working_ctas(
    emu: TraceResult,
    tracer: Tracer,
    module: CompiledModule,
    kernel: KernelInfo,
    launch: ResolvedLaunch,
    device: DeviceSpec,
) -> tuple[AccessTrace, tuple[str, ...]]:
    """The trace, extrapolated over the CTAs that do memory work when some traced ones do none.

    A kernel that returns early for most of a huge grid (``if (i >= n) return;`` under a
    65535x65535 launch) has a first wave of idle CTAs: scaling its traced totals by all the
    launch's CTAs over the traced ones reported a million times too many sectors. When some
    traced CTAs make no memory access, :data:`~gpuadvise.model.waves.WORK_PROBE_CTAS` CTAs spread
    over the rest of the grid are traced (an idle CTA costs next to nothing) to estimate how many
    of the launch's CTAs work, bounded by the buffers' sizes
    (:func:`~gpuadvise.model.waves.working_ctas`), and the trace says so (its
    ``launch_working_ctas``). Returns the trace unchanged, with no note, when every traced CTA
    works or the trace is complete, or when ``tracer`` cannot trace chosen CTAs
    (:attr:`~gpuadvise.trace.tracer.Capability.CHOSEN_CTAS`)."""
    import numpy as np

    from gpuadvise.model.banks import active_lanes
    from gpuadvise.model.waves import buffer_bound, probe_ctas, working_ctas
    from gpuadvise.trace.access import Space
    from gpuadvise.trace.tracer import Capability

    trace = emu.trace
    if emu.complete or Capability.CHOSEN_CTAS not in tracer.capabilities:
        return trace, ()
    working = np.unique(trace.records["cta"])
    if len(working) >= len(emu.ctas_run):
        return trace, ()
    probe = probe_ctas(trace.total_ctas, emu.ctas_run)
    try:
        more = tracer.run(module, kernel, launch, device, sample_ctas=probe) if probe else None
    except GpuAdviseError as exc:
        return trace, (
            f"{len(emu.ctas_run) - len(working)} of {len(emu.ctas_run)} traced CTAs do no memory "
            f"work; the CTAs to tell how many of the launch do could not be traced "
            f"({exc.one_line()}): totals extrapolated over all CTAs",
        )
    probed_working: np.ndarray | list[int] = (
        np.unique(more.trace.records["cta"]) if more is not None else []
    )
    recs = trace.records[trace.records["space"] == int(Space.GLOBAL)]
    recs = recs[np.isin(recs["cta"], working[:WORK_BOUND_CTAS])]
    rows, lanes = np.nonzero(active_lanes(recs["mask"]))
    bound = buffer_bound(
        recs["cta"][rows].astype(np.int64),
        recs["addr"][rows, lanes].astype(np.int64),
        recs["width"][rows].astype(np.int64),
        [(int(b), int(s)) for b, s in trace.buffers.values()],
    )
    w = working_ctas(
        trace.total_ctas,
        emu.ctas_run,
        [int(c) for c in working],
        probe,
        [int(c) for c in probed_working],
        bound,
    )
    out = replace(trace, launch_working_ctas=w.launch_working, traced_working_ctas=w.traced_working)
    return out, (w.note(),)


def _with_interior(
    emu: TraceResult,
    tracer: Tracer,
    module: CompiledModule,
    kernel: KernelInfo,
    launch: ResolvedLaunch,
    device: DeviceSpec,
    limit: int = INTERIOR_CTAS,
) -> tuple[AccessTrace, tuple[str, ...]]:
    """The L2 model's trace: the sampled CTAs plus a patch of up to ``limit`` CTAs in the middle
    of the grid.

    The first wave of a large 2D grid covers its top CTA rows only; when an image kernel reads
    further than its own tile, their footprints are all clamped at the border, and the L2 model
    cannot synthesize the other CTAs from them (it would fall back to the traced CTAs, row-major
    only). Two CTA rows in the middle of the grid (one when ``limit`` is 1), up to ``limit``
    CTAs around its centre (:func:`gpuadvise.trace.emulate.interior_ctas`), give it CTAs clear
    of the border and neighbours in x and y. Returns the trace unchanged when they are traced
    already (a grid the sample covers), ``limit`` is 0, ``tracer`` cannot trace chosen CTAs
    (:attr:`~gpuadvise.trace.tracer.Capability.CHOSEN_CTAS`), or they cannot be traced (with a
    note)."""
    from gpuadvise.trace.access import Space
    from gpuadvise.trace.emulate import interior_ctas
    from gpuadvise.trace.tracer import Capability, EmulatorTracer

    grid = tuple(int(v) for v in emu.trace.grid)
    if limit <= 0 or Capability.CHOSEN_CTAS not in tracer.capabilities:
        return emu.trace, ()
    extra = interior_ctas(
        (grid[0], grid[1], grid[2]), exclude=emu.ctas_run, rows=min(2, limit), limit=limit
    )
    if not extra:
        return emu.trace, ()
    t0 = time.perf_counter()
    try:
        if isinstance(tracer, EmulatorTracer):
            # the L2 model reads their global records alone: emulated without the models (no
            # SASS, block costs, SIMT profile or shared records; the same global records and
            # instruction list, tests/trace/test_emulate_models.py)
            more = tracer.run(module, kernel, launch, device, sample_ctas=extra, models=False)
        else:
            more = tracer.run(module, kernel, launch, device, sample_ctas=extra)
    except GpuAdviseError as exc:
        return emu.trace, (f"the L2 model's interior CTAs could not be traced: {exc.one_line()}",)
    gx = grid[0]
    ys = sorted({c // gx for c in extra})
    xs = sorted({c % gx for c in extra})
    rows = f"row {ys[0]}" if len(ys) == 1 else f"rows {ys[0]}-{ys[-1]}"
    cols = f"column {xs[0]}" if len(xs) == 1 else f"columns {xs[0]}-{xs[-1]}"
    note = (
        f"the L2 model also traced {len(extra)} CTA{'' if len(extra) == 1 else 's'} in the "
        f"middle of the grid (CTA {rows}, "
        f"{cols}), away from its border, in {time.perf_counter() - t0:.1f} s "
        "(--l2-probe-ctas sets how many)"
    )
    # the L2 model reads the global records alone: only they are copied (one copy, not the
    # whole trace's and then its global records')
    return _merge_traces(emu.trace, more.trace, Space.GLOBAL), (note,)


def _has_interior(emu: TraceResult) -> bool:
    """Whether ``emu``'s grid has a middle for the L2 model's probe: two CTA rows or more
    (:func:`gpuadvise.trace.emulate.interior_ctas` finds none in a grid of one row)."""
    g = emu.trace.grid
    return int(g[1]) * int(g[2]) >= 2


def _merge_traces(a: AccessTrace, b: AccessTrace, space: Space | None = None) -> AccessTrace:
    """One AccessTrace of the CTAs of two emulations of the same launch. Both list the same
    instructions unless a generic access reached another state space in one of them: then
    ``b``'s instruction ids are mapped to ``a``'s by source location, opcode, space, kind and
    width (the first of ``a``'s with that key). ``space``: only the records of that state space
    (``a``'s, then ``b``'s, in their order), copied once."""
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
        rb = rb.copy() if space is None else rb[rb["space"] == int(space)]
        if len(rb):
            rb["inst"] = remap[rb["inst"].astype(np.int64)]
    if space is None:
        records = np.concatenate([a.records, rb])
    else:
        masks = [r["space"] == int(space) for r in (a.records, rb)]
        sizes = [int(m.sum()) for m in masks]
        records = np.empty(sum(sizes), dtype=a.records.dtype)
        at = 0
        for r, m, n in zip((a.records, rb), masks, sizes, strict=True):
            if n == len(r):
                records[at : at + n] = r
            else:  # into its place, no temporary copy
                np.compress(m, r, axis=0, out=records[at : at + n])
            at += n
    ctas = tuple(sorted(set(a.ctas) | set(b.ctas)))
    return replace(
        a,
        records=records,
        instructions=tuple(instrs),
        ctas=ctas,
        sampled_iterations=a.sampled_iterations or b.sampled_iterations,
    )


def _gpu_memory(
    spec: KernelSpec,
    device: DeviceSpec,
    module: CompiledModule,
    kernel: KernelInfo,
    launch: ResolvedLaunch,
    tc: Toolchain,
    instrs: tuple[SassInstruction, ...],
    sample_ctas: int | str | None,
) -> MemoryAnalysis:
    from gpuadvise.model.banks import analyze_banks
    from gpuadvise.model.coalescing import analyze_coalescing
    from gpuadvise.model.reconcile import reconcile
    from gpuadvise.toolchain import sass
    from gpuadvise.trace.emulate import trace_cost
    from gpuadvise.trace.tracer import GpuTracer

    t0 = time.perf_counter()
    g = GpuTracer(tc).run(module, kernel, launch, device, sample_ctas)
    trace = g.trace
    rec = reconcile(trace, sass.memory_summary(instrs), sass.warp_aggregated_atomics(instrs))
    return MemoryAnalysis(
        ctas_run=len(trace.ctas),
        total_ctas=trace.total_ctas,
        complete=trace.complete,
        time_s=time.perf_counter() - t0,
        banks=analyze_banks(trace, rec.records),
        coalescing=analyze_coalescing(trace, rec.records),
        reconcile_notes=tuple(n for n in rec.notes if n.action in ("merged", "split")),
        notes=g.notes,
        trace=rec.apply(trace),
        outputs=g.outputs,
        tracer=g.tracer,
        trace_cost=trace_cost(len(trace.records), 0),
    )


def model_results(memory: MemoryAnalysis | None, traced: bool = True) -> ModelResults:
    """The models of ``memory`` as the rules' context reads them, and why each model of
    :data:`~gpuadvise.rules.context.TRACE_MODELS` that is not there is missing (``traced``: whether
    tracing was allowed at all)."""
    unavailable: dict[str, str] = {}
    if memory is None:
        for name in TRACE_MODELS:
            unavailable[name] = (
                f"the {name} model was not computed (the trace was turned off)"
                if not traced
                else f"the {name} model was not computed (no enabled rule reads it)"
            )
        return ModelResults(
            unavailable=unavailable,
            unavailable_why=dict.fromkeys(
                TRACE_MODELS, "--no-trace" if not traced else "not computed"
            ),
            deliberate=frozenset() if traced else TRACE_MODELS,
        )
    if memory.error:
        why = f"the emulator could not trace this kernel: {memory.error}"
        short = (
            f"the trace stopped: {TRACE_STOPS.get(memory.error_kind or '', 'an emulation error')}"
        )
        return ModelResults(
            unavailable=dict.fromkeys(TRACE_MODELS, why),
            unavailable_why=dict.fromkeys(TRACE_MODELS, short),
        )
    later: dict[str, Callable[[], tuple[Any, str | None]]] = {}
    if memory.l2_behind is not None:  # waited for when a rule asks for it
        behind = memory.l2_behind

        def l2_later() -> tuple[Any, str | None]:
            l2, _, why = behind.result()
            return l2, why or "no L2 model"

        later["l2"] = l2_later
    elif memory.l2 is None:
        unavailable["l2"] = memory.l2_unavailable or "no L2 model"
    for name in ("trace", "banks", "coalescing"):
        if getattr(memory, name) is None:
            unavailable[name] = f"the {name} model was not computed"
    emulation = EmulationStats(memory.ctas_run, memory.lane_instructions, memory.simt)
    return ModelResults(
        trace=memory.trace,
        banks=memory.banks,
        coalescing=memory.coalescing,
        l2=memory.l2,
        emulation=emulation,
        unavailable=unavailable,
        l2_probe_ctas=memory.l2_probe_ctas,
        later=later,
    )
