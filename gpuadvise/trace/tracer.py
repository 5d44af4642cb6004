"""The tracer seam: one :class:`Tracer` protocol, one :class:`TraceResult` from every tracer.

Two tracers record a kernel's warp-level memory accesses as an
:class:`~gpuadvise.trace.access.AccessTrace`: the CPU emulator of its PTX
(:class:`EmulatorTracer`, :func:`gpuadvise.trace.emulate.emulate`) and the instrumented kernel on
the GPU (:class:`GpuTracer`, :func:`gpuadvise.trace.gpu.trace_on_gpu`). Both return a
:class:`TraceResult` with the same fields; what a tracer cannot give is not faked: the field is
None and the tracer's :attr:`Tracer.capabilities` (copied into the result) lacks the
:class:`Capability` that promises it. Consumers check the capability (or the None) before they
read such a field:

- :attr:`Capability.SIMT`: ``simt``, active lanes per executed warp instruction, per line and
  splitting branch (GA104 reads it). The emulator counts them; the GPU tracer records memory
  instructions only, so its ``simt`` is None.
- :attr:`Capability.INSTRUCTION_COUNTS`: ``lane_instructions``, PTX instructions executed summed
  over active lanes (GA501's floor, GA102, the launch-change check). None from the GPU tracer
  (``MemoryAnalysis.lane_instructions`` is then 0, which its readers take as "not counted").
- :attr:`Capability.CHOSEN_CTAS`: ``sample_ctas`` may be a sequence of linear CTA ids, not only a
  count of the first CTAs: the probes of :mod:`gpuadvise.analyze.models` that trace extra CTAs
  (the CTAs that do memory work, the L2 model's interior probe of a 2D grid) run only with a
  tracer that has it. The GPU tracer traces the first CTAs only, so a GPU trace has neither
  probe (its L2 model replays the CTAs traced).

Adding a tracer: docs/architecture.md, "Adding things".
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np

    from gpuadvise.devices import DeviceSpec
    from gpuadvise.spec.kernel_spec import ResolvedLaunch
    from gpuadvise.toolchain import CompiledModule, KernelInfo, Toolchain
    from gpuadvise.trace.access import AccessTrace
    from gpuadvise.trace.emu_cost import CtaCost
    from gpuadvise.trace.simt import SimtProfile

__all__ = [
    "Capability",
    "EmulatorTracer",
    "GpuTracer",
    "TraceResult",
    "Tracer",
    "tracer_for",
]


class Capability(StrEnum):
    """What a tracer gives beyond the trace every tracer gives (module docstring)."""

    SIMT = "simt"
    INSTRUCTION_COUNTS = "instruction_counts"
    CHOSEN_CTAS = "chosen_ctas"


@dataclass(frozen=True)
class TraceResult:
    """One tracer's run, the same fields from every tracer.

    ``trace``: the warp-level accesses of ``ctas_run`` (``complete``: every CTA of the launch);
    ``outputs``: the output buffers after the run (the traced CTAs' part only, unless complete);
    ``notes``: what the tracer has to say (a sample, a cut trace, a slowdown); ``time_s``: the
    tracer's wall time; ``sampled_loops``: the long loops whose iterations were skipped (the
    trace then weighted). ``lane_instructions`` and ``simt``: None unless ``capabilities`` holds
    :attr:`Capability.INSTRUCTION_COUNTS` and :attr:`Capability.SIMT`; ``warp_steps``: the
    emulator's scheduling steps (None from a tracer that does not count them)."""

    tracer: str  # "emu" | "gpu"
    trace: AccessTrace
    outputs: Mapping[str, np.ndarray]
    ctas_run: tuple[int, ...]
    complete: bool
    notes: tuple[str, ...]
    time_s: float
    capabilities: frozenset[Capability]
    lane_instructions: int | None = None
    simt: SimtProfile | None = None
    sampled_loops: tuple[str, ...] = ()
    warp_steps: int | None = None
    # the emulator's default sample's first CTA's cost (gpuadvise.trace.emu_cost.CtaCost; None
    # from another tracer or sample): what bounds the models' extra emulations
    cta_cost: CtaCost | None = None
    # the emulator's cost of the trace (gpuadvise.trace.emulate.Emulation.emu_cost: a count, ns
    # on the calibration machine; 0 from another tracer): what bounds a variant's emulation
    emu_cost: int = 0

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities


class Tracer(Protocol):
    """A way to trace one launch of a compiled kernel. ``sample_ctas``: None (the tracer's
    default sample: the first wave within its cost, :data:`~gpuadvise.trace.emulate.DEFAULT_SAMPLE_COST`),
    ``"wave"`` (the whole first wave), a count of the first CTAs, ``"all"``, or, with
    :attr:`Capability.CHOSEN_CTAS`, a sequence of linear CTA ids."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[Capability]]

    def run(
        self,
        module: CompiledModule,
        kernel: KernelInfo,
        launch: ResolvedLaunch,
        device: DeviceSpec,
        sample_ctas: int | str | Sequence[int] | None = None,
    ) -> TraceResult: ...


class EmulatorTracer:
    """The CPU emulator of the kernel's PTX (:func:`gpuadvise.trace.emulate.emulate`): every
    capability; ``sample_loops`` (default True) lets it sample long loops."""

    name: ClassVar[str] = "emu"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(Capability)

    def __init__(self, sample_loops: bool = True) -> None:
        self.sample_loops = sample_loops

    def run(
        self,
        module: CompiledModule,
        kernel: KernelInfo,
        launch: ResolvedLaunch,
        device: DeviceSpec,
        sample_ctas: int | str | Sequence[int] | None = None,
        *,
        models: bool = True,
    ) -> TraceResult:
        """The emulation's trace (``models`` False: the global records alone, no SASS read, no
        block costs or SIMT profile: :func:`gpuadvise.trace.emulate.emulate`'s)."""
        from gpuadvise.trace import emulate as emulate_mod

        emu = emulate_mod.emulate(
            module,
            kernel,
            launch,
            device,
            sample_ctas=sample_ctas,
            sample_loops=self.sample_loops,
            models=models,
        )
        return TraceResult(
            tracer=self.name,
            trace=emu.trace,
            outputs=emu.outputs,
            ctas_run=emu.ctas_run,
            complete=emu.complete,
            notes=tuple(emu.notes),
            time_s=emu.time_s,
            capabilities=self.capabilities,
            lane_instructions=emu.lane_instructions,
            simt=emu.simt,
            sampled_loops=emu.sampled_loops,
            warp_steps=emu.warp_steps,
            cta_cost=emu.cta_cost,
            emu_cost=emu.emu_cost,
        )


class GpuTracer:
    """The instrumented kernel on this GPU (:func:`gpuadvise.trace.gpu.trace_on_gpu`): the
    first CTAs only, no SIMT nor instruction counts (module docstring). Its notes add the
    instrumentation's slowdown, the records lost, and whether the instrumented run's outputs
    matched the original's. Raises what ``trace_on_gpu`` raises. ``emulate_device``: both
    kernels run in the CPU emulator instead (a test of the whole path without a GPU)."""

    name: ClassVar[str] = "gpu"
    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def __init__(self, toolchain: Toolchain | None = None, emulate_device: bool = False) -> None:
        self.toolchain = toolchain
        self.emulate_device = emulate_device

    def run(
        self,
        module: CompiledModule,
        kernel: KernelInfo,
        launch: ResolvedLaunch,
        device: DeviceSpec,
        sample_ctas: int | str | Sequence[int] | None = None,
    ) -> TraceResult:
        from gpuadvise.trace.gpu import trace_on_gpu

        if sample_ctas is not None and not isinstance(sample_ctas, int | str):
            raise ValueError("the GPU tracer traces the first CTAs only (no chosen CTA ids)")
        t0 = time.perf_counter()
        g = trace_on_gpu(
            module,
            kernel,
            launch,
            device,
            sample_ctas,
            toolchain=self.toolchain,
            emulate_device=self.emulate_device,
        )
        notes = [*g.notes, f"traced on the GPU: instrumentation slowdown {g.slowdown:.1f}x"]
        if g.records_lost:
            notes.append(f"{g.records_lost} records did not fit the trace buffer")
        if not g.outputs_match:
            notes.append(
                "the instrumented kernel's outputs differ from the original's: do not trust"
            )
        return TraceResult(
            tracer=self.name,
            trace=g.trace,
            outputs=g.outputs,
            ctas_run=g.trace.ctas,
            complete=g.trace.complete,
            notes=tuple(notes),
            time_s=time.perf_counter() - t0,
            capabilities=self.capabilities,
        )


def tracer_for(name: str, toolchain: Toolchain | None = None, **options: Any) -> Tracer:
    """The tracer ``name`` (``emu`` or ``gpu``, as :func:`gpuadvise.trace.gpu.select_tracer`
    chose it); ``options`` go to the emulator (``sample_loops``)."""
    if name == "gpu":
        return GpuTracer(toolchain)
    if name == "emu":
        return EmulatorTracer(**options)
    raise ValueError(f"unknown tracer {name!r} (emu or gpu)")
