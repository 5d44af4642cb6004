"""What a rule reads: a typed, read-only view of one analysed kernel launch.

A :class:`RuleContext` holds three things, all computed before the rules run:

- :class:`KernelFacts`: the launch spec, the device, the compiled kernel (resources, PTX, compile
  flags), occupancy and its next steps, waves, the SASS (every instruction, and the memory
  instructions per source line);
- :class:`ModelResults`: the trace-based models the pipeline computed for the enabled rules
  (``gpuadvise.analyze.models``: the trace, the bank, coalescing and L2 models), or why each
  could not be computed; a rule that reads an unavailable model gets :class:`ModelUnavailable`
  and is skipped with a note;
- :class:`RuleServices`: what a rule may ask the toolchain and the emulator for (a candidate
  compiled, a candidate traced, the launch bound to the kernel's parameters, the shared-memory
  layout), implemented by the analyze layer (``gpuadvise.analyze.services``).

The rule's ``options`` (defaults merged with the configuration) and its configured ``severity``
come with :meth:`RuleContext.for_rule`. Nothing here computes a model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gpuadvise.errors import GpuAdviseError
from gpuadvise.source.text import KernelSource, find_kernel_source

if TYPE_CHECKING:
    from gpuadvise.devices import DeviceSpec
    from gpuadvise.model.banks import BankResult
    from gpuadvise.model.coalescing import CoalescingResult
    from gpuadvise.model.l2 import L2Result
    from gpuadvise.model.launch_change import LaunchCheck
    from gpuadvise.model.occupancy import KernelResources, OccupancyResult, Suggestion
    from gpuadvise.model.reduction import Phase, ReductionTree
    from gpuadvise.model.registers import RegisterPressure
    from gpuadvise.model.waves import Waves
    from gpuadvise.spec.kernel_spec import KernelSpec, LaunchConfig, ResolvedLaunch
    from gpuadvise.toolchain import KernelInfo
    from gpuadvise.toolchain.sass import SassInstruction, SassMemLine
    from gpuadvise.trace.access import AccessTrace
    from gpuadvise.trace.simt import SimtProfile
    from gpuadvise.trace.view import TraceView

__all__ = [
    "EmulationStats",
    "KernelFacts",
    "ModelResults",
    "ModelUnavailable",
    "RuleContext",
    "RuleServices",
    "Severity",
    "SharedLayout",
    "SharedVariable",
    "TRACE_MODELS",
]

Severity = Literal["error", "warning", "note"]

TRACE_MODELS: frozenset[str] = frozenset({"trace", "banks", "coalescing", "l2"})
"""The models computed from the access trace (the others come with the compile)."""


class ModelUnavailable(GpuAdviseError):
    """A model a rule needs cannot be computed for this kernel: the rule is skipped, with a note.

    ``why``: the reason in a few words, for the one line that says the analysis is incomplete
    (default: the message); ``deliberate``: the user turned the model off (``--no-trace``), so
    the rule was not run by choice and the analysis is not incomplete for it."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        why: str | None = None,
        deliberate: bool = False,
    ) -> None:
        super().__init__(message, hint)
        self.why = why or message
        self.deliberate = deliberate


@dataclass(frozen=True)
class KernelFacts:
    """What the pipeline knows about the launch without tracing it.

    ``sass_lines``: the SASS memory instructions per source line, at the user's call site
    (inlined code attributed to the line that called it); ``sass_lines_innermost``: the same at
    the innermost line (as the trace has them); ``sass_instructions``: every instruction.
    ``kernel_file``: the file that defines the kernel (a header the compiled source includes);
    None: the compiled source. ``registers``: the live registers along the SASS (None when
    nvdisasm could not give them).
    """

    spec: KernelSpec
    device: DeviceSpec
    kernel: KernelInfo
    occupancy_input: KernelResources
    occupancy: OccupancyResult
    next_steps: tuple[Suggestion, ...] = ()
    waves: Waves | None = None
    ptx: str = ""
    compile_flags: tuple[str, ...] = ()
    sass_instructions: tuple[SassInstruction, ...] = ()
    sass_lines: tuple[SassMemLine, ...] = ()
    sass_lines_innermost: tuple[SassMemLine, ...] = ()
    kernel_file: str | None = None  # the file defining the kernel, when not spec.source
    registers: RegisterPressure | None = None


@dataclass(frozen=True)
class EmulationStats:
    """How much of the launch the tracer ran: CTAs and lane-instructions (PTX; 0 from a tracer
    without :attr:`~gpuadvise.trace.tracer.Capability.INSTRUCTION_COUNTS`, the GPU's);
    ``simt``: active lanes per executed warp instruction, per line and splitting branch (None
    from a tracer without :attr:`~gpuadvise.trace.tracer.Capability.SIMT`, the GPU's)."""

    ctas_run: int
    lane_instructions: int
    simt: SimtProfile | None = None


@dataclass(frozen=True)
class ModelResults:
    """The trace-based models of one launch, as the pipeline computed them.

    ``trace`` is the access trace reconciled with the SASS (ptxas's merged vector accesses);
    ``unavailable`` maps a model that was not computed to why (the emulator failed, no enabled
    rule asked for it, the trace was turned off), ``unavailable_why`` to the same in a few words
    (the trace stopped: an out-of-bounds access), and ``deliberate`` names the models the user
    turned off (``--no-trace``). ``emulation``: the tracer's counts, when the
    kernel was traced. ``l2_probe_ctas``: the most CTAs a rule's own L2 probe may trace
    (``--l2-probe-ctas``, at most ``--sample-ctas N``; None: no bound).
    """

    trace: AccessTrace | None = None
    banks: BankResult | None = None
    coalescing: CoalescingResult | None = None
    l2: L2Result | None = None
    emulation: EmulationStats | None = None
    unavailable: Mapping[str, str] = field(default_factory=dict)
    l2_probe_ctas: int | None = None
    unavailable_why: Mapping[str, str] = field(default_factory=dict)
    deliberate: frozenset[str] = frozenset()
    # models still being computed (the L2 model in a forked child, gpuadvise.analyze.l2_behind):
    # what waits for each and gives it (None when there is none) and why it is missing
    later: Mapping[str, Callable[[], tuple[Any, str | None]]] = field(default_factory=dict)

    def require(self, name: str) -> Any:
        """Model ``name`` (:data:`TRACE_MODELS`); ModelUnavailable with the reason otherwise.
        A model still being computed (``later``) is waited for."""
        value = getattr(self, name)
        reason = None
        if value is None and name in self.later:
            value, reason = self.later[name]()
        if value is None:
            reason = reason or self.unavailable.get(name) or f"the {name} model was not computed"
            raise ModelUnavailable(
                reason, why=self.unavailable_why.get(name), deliberate=name in self.deliberate
            )
        return value

    @cached_property
    def _views(self) -> dict[int, TraceView]:
        return {}

    @cached_property
    def reduction_trees(self) -> tuple[ReductionTree, ...]:
        """The shared-memory tree reductions of the trace's first CTA
        (:func:`gpuadvise.model.reduction.reduction_trees`), found once for the rules of a run
        (GA202-GA205); none without an emulator trace."""
        from gpuadvise.model.reduction import reduction_trees

        return () if self.trace is None else reduction_trees(self.trace)

    def trace_view(self, spec: KernelSpec) -> TraceView:
        """The lane-level :class:`~gpuadvise.trace.view.TraceView` of the trace, built once and
        shared by the rules of a run."""
        from gpuadvise.trace.view import trace_view

        trace = self.require("trace")
        views = self._views
        if id(spec) not in views:
            views[id(spec)] = trace_view(trace, spec)
        return views[id(spec)]


@dataclass(frozen=True)
class SharedVariable:
    """A ``.shared`` variable of the kernel's PTX where the tracer placed it (``extern``: the
    dynamic area, which starts at :attr:`SharedLayout.dynamic_offset`)."""

    name: str
    offset: int
    size_bytes: int
    align: int
    extern: bool = False


@dataclass(frozen=True)
class SharedLayout:
    """The kernel's shared variables in the traced addresses, and where dynamic memory starts."""

    variables: tuple[SharedVariable, ...]
    dynamic_offset: int


class RuleServices(Protocol):
    """What a rule may ask of the toolchain and the emulator (implemented by the analyze layer).

    Each raises :class:`~gpuadvise.errors.GpuAdviseError` (ModelUnavailable, a compile error ...)
    when it cannot do what is asked.
    """

    def compile_candidate(
        self, source_text: str | None = None, nvcc_flags: Sequence[str] = ()
    ) -> KernelInfo:
        """The analysed kernel built as the analysis built it, from ``source_text`` (the kernel's
        file rewritten; None: the file as it is) with ``nvcc_flags`` added: its resources."""
        ...

    def trace_candidate(
        self, source_text: str | None, sample_ctas: int | Sequence[int]
    ) -> AccessTrace:
        """The access trace of the first ``sample_ctas`` CTAs of the launch (or of those linear
        CTA ids), with the kernel built from ``source_text`` (the kernel's file rewritten; None:
        the analysed file) as the analysis built it."""
        ...

    def resolved_launch(self) -> ResolvedLaunch:
        """The launch bound to the kernel's parameters (user structs sized by the compiler)."""
        ...

    def compare_launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        source_text: str | None = None,
        then: Sequence[tuple[tuple[int, int, int], tuple[int, int, int]]] = (),
    ) -> LaunchCheck:
        """Whether the kernel (or the candidate ``source_text``, the kernel's file rewritten)
        launched with ``grid`` and ``block`` computes what the analysed launch computes, without
        moving more global sectors per thread (both run on the emulator): a launch change is
        proposed only when ``same``. ``then``: the (grid, block) shapes the rule may check
        next (their runs of the launch as it is made with this one's; the verdicts are the
        same)."""
        ...

    def shared_layout(self) -> SharedLayout:
        """Where the tracer placed the kernel's shared variables."""
        ...

    def check_candidate(self, source_text: str, sample_ctas: int = 4) -> LaunchCheck:
        """Whether the candidate (the kernel's file rewritten) computes what the kernel computes:
        both emulated for the launch's first ``sample_ctas`` CTAs and their outputs compared
        (``same``; ``why`` not; ``how``)."""
        ...

    def candidate_registers(
        self, source_text: str | None = None, nvcc_flags: Sequence[str] = ()
    ) -> tuple[KernelInfo, RegisterPressure]:
        """The candidate built as :meth:`compile_candidate` builds it, with its live registers
        along its SASS."""
        ...


class RuleContext:
    """What a rule reads about one analysed kernel launch; read-only.

    Facts are properties of :class:`KernelFacts`; trace-based models come from
    :class:`ModelResults` and raise :class:`ModelUnavailable` when they were not computed;
    ``services`` is the :class:`RuleServices`. ``options`` are the running rule's options.
    """

    def __init__(
        self,
        facts: KernelFacts,
        models: ModelResults | None = None,
        services: RuleServices | None = None,
        *,
        options: Mapping[str, Any] | None = None,
        severity: Severity | None = None,
    ) -> None:
        self._facts = facts
        self._models = models if models is not None else ModelResults()
        self._services = services
        self._options: Mapping[str, Any] = dict(options or {})
        self._severity = severity
        self._source: list[KernelSource | None] = []

    def for_rule(self, options: Mapping[str, Any], severity: Severity | None = None) -> RuleContext:
        """A view of this context for one rule: its options and severity; the rest is shared."""
        ctx = RuleContext(
            self._facts, self._models, self._services, options=options, severity=severity
        )
        ctx._source = self._source
        return ctx

    # the rule's configuration

    @property
    def options(self) -> Mapping[str, Any]:
        return self._options

    def option(self, name: str) -> Any:
        return self._options[name]

    @property
    def severity(self) -> Severity | None:
        """The severity the configuration sets for the running rule (None: its default)."""
        return self._severity

    # facts

    @property
    def facts(self) -> KernelFacts:
        return self._facts

    @property
    def spec(self) -> KernelSpec:
        return self._facts.spec

    @property
    def device(self) -> DeviceSpec:
        return self._facts.device

    @property
    def kernel(self) -> KernelInfo:
        return self._facts.kernel

    @property
    def kernel_name(self) -> str:
        return str(self._facts.kernel.name)

    @property
    def launch(self) -> LaunchConfig:
        return self._facts.spec.launch

    @property
    def occupancy(self) -> OccupancyResult:
        return self._facts.occupancy

    @property
    def occupancy_input(self) -> KernelResources:
        return self._facts.occupancy_input

    @property
    def next_steps(self) -> tuple[Suggestion, ...]:
        return self._facts.next_steps

    @property
    def waves_or_none(self) -> Waves | None:
        """The :class:`~gpuadvise.model.waves.Waves`, None without the device's SM count."""
        return self._facts.waves

    @property
    def waves(self) -> Waves:
        """The :class:`~gpuadvise.model.waves.Waves`; ModelUnavailable without an SM count."""
        w = self._facts.waves
        if w is None:
            raise ModelUnavailable(f"{self.device.name} has no SM count: waves are unknown")
        return w

    @property
    def ptx(self) -> str:
        return self._facts.ptx

    @property
    def kernel_ptx(self) -> str:
        """The PTX of this kernel's ``.entry`` (the whole module's text when not found)."""
        ptx, name = self._facts.ptx, self.kernel.mangled
        at = ptx.find(f".entry {name}(")
        if at < 0:
            return ptx
        end = ptx.find(".entry ", at + 7)
        return ptx[at : end if end >= 0 else len(ptx)]

    @property
    def syncs_warps(self) -> bool:
        """The kernel synchronizes warps (``__syncwarp``, a tile's ``sync()``: ``bar.warp.sync``)."""
        return "bar.warp.sync" in self.kernel_ptx

    @property
    def reads_thread_index(self) -> bool:
        """The kernel (its entry, or a device function of the module) reads ``threadIdx`` or a
        lane id: its threads can tell themselves apart."""
        module = self._facts.ptx
        funcs = [
            module[m.start() :] for m in re.finditer(r"^\s*(?:\.\w+\s+)*\.func\b", module, re.M)
        ]
        ptx = self.kernel_ptx + "".join(f.split(".entry", 1)[0] for f in funcs)
        return any(r in ptx for r in ("%tid.", "%laneid", "%warpid"))

    @staticmethod
    def in_toolkit_header(path: str | None) -> bool:
        """``path`` lies in the CUDA toolkit's include folders (math library code inlined into the
        kernel: its slow paths are not the user's)."""
        from gpuadvise.trace.sites import is_toolkit_header

        return bool(path) and is_toolkit_header(str(path))

    @property
    def unread_block_dims(self) -> tuple[str, ...]:
        """Block dimensions (``"y"``, ``"z"``) of more than one thread that the kernel never
        reads: no ``%tid`` of that axis in the module's PTX, nor a lane or warp id that could
        tell its threads apart. Threads that differ only there run the same instructions on the
        same data: duplicate work (and, where they write, the same addresses)."""
        # the kernel's entry and every device function of the module (one it calls may read
        # the index); other kernels of the file do not count
        module = self._facts.ptx
        funcs = [
            module[m.start() :] for m in re.finditer(r"^\s*(?:\.\w+\s+)*\.func\b", module, re.M)
        ]
        ptx = self.kernel_ptx + "".join(f.split(".entry", 1)[0] for f in funcs)
        if "%laneid" in ptx or "%warpid" in ptx:
            return ()
        block = self.launch.block.as_tuple()
        return tuple(
            axis
            for axis, size in zip("yz", block[1:], strict=True)
            if size > 1 and f"%tid.{axis}" not in ptx
        )

    @property
    def compile_flags(self) -> tuple[str, ...]:
        """The nvcc flags the kernel was compiled with."""
        return self._facts.compile_flags

    @property
    def sass_instructions(self) -> tuple[SassInstruction, ...]:
        """Every SASS instruction of the kernel; ModelUnavailable when there is no SASS."""
        if not self._facts.sass_instructions:
            raise ModelUnavailable("no compiled kernel: its SASS cannot be read")
        return self._facts.sass_instructions

    @property
    def sass_lines(self) -> tuple[SassMemLine, ...]:
        """SASS memory instructions per source line, at the user's call site."""
        return self._facts.sass_lines

    @property
    def sass_lines_innermost(self) -> tuple[SassMemLine, ...]:
        """SASS memory instructions per innermost source line (as the trace has them);
        ModelUnavailable when there is no SASS."""
        if not self._facts.sass_instructions:
            raise ModelUnavailable("no compiled kernel: its SASS cannot be read")
        return self._facts.sass_lines_innermost

    @property
    def live_registers(self) -> RegisterPressure:
        """The live registers along the SASS, the peak and the values that hold it
        (:class:`~gpuadvise.model.registers.RegisterPressure`); ModelUnavailable without them."""
        if self._facts.registers is None:
            raise ModelUnavailable("the live registers of this kernel were not read (nvdisasm)")
        return self._facts.registers

    # the source

    @property
    def source_file(self) -> str:
        """The file that defines the kernel: the compiled source, or the header it includes that
        holds the kernel (its lines are the ones the rules report and rewrite)."""
        return self._facts.kernel_file or str(self._facts.spec.source)

    def _kernel_source(self) -> KernelSource | None:
        if not self._source:
            self._source.append(find_kernel_source(self.source_file, self._facts.spec.kernel))
        return self._source[0]

    @property
    def kernel_source(self) -> KernelSource:
        ks = self._kernel_source()
        if ks is None:
            raise ModelUnavailable(
                f"the definition of {self._facts.spec.kernel} was not found in {self.source_file}"
            )
        return ks

    @property
    def kernel_line(self) -> int | None:
        """The kernel's declaration line (the ``__global__`` line); None if not found."""
        ks = self._kernel_source()
        return None if ks is None else ks.decl_line

    def same_file(self, file: str | None) -> bool:
        if not file:
            return False
        try:
            return os.path.samefile(file, self.source_file)
        except OSError:
            return os.path.normpath(file) == os.path.normpath(self.source_file)

    # trace-based models (computed by the pipeline; read here)

    @property
    def models(self) -> ModelResults:
        return self._models

    def has_model(self, name: str) -> bool:
        """Whether model ``name`` was computed (one still being computed is waited for)."""
        if getattr(self._models, name, None) is not None:
            return True
        later = self._models.later.get(name)
        return later is not None and later()[0] is not None

    @property
    def trace(self) -> AccessTrace:
        """The :class:`~gpuadvise.trace.access.AccessTrace` of the sampled CTAs, reconciled with
        the SASS."""
        return self._models.require("trace")  # type: ignore[no-any-return]

    @property
    def trace_view(self) -> TraceView:
        """The lane-level view of the trace's global accesses (shared by the rules of a run)."""
        return self._models.trace_view(self._facts.spec)

    @property
    def reduction_trees(self) -> tuple[ReductionTree, ...]:
        """The shared-memory tree reductions the trace shows (its first CTA; none without an
        emulator trace), shared by the rules of a run."""
        return self._models.reduction_trees

    def call_site(self, phase: Phase) -> tuple[int | None, int | None]:
        """Where a finding on a reduction ``phase`` goes in the kernel's file: the line of its
        first store, or the kernel body's call of the same-file helper the store lies in (then
        also the helper's line as the second value, else None)."""
        line = next((ln for f, ln in phase.lines if ln and self.same_file(f)), None)
        site = next((ln for f, ln in phase.call_sites if ln and self.same_file(f)), None)
        if site is None or site == line:
            return line, None
        return site, line

    @property
    def banks(self) -> BankResult:
        """The :class:`~gpuadvise.model.banks.BankResult` over the trace."""
        return self._models.require("banks")  # type: ignore[no-any-return]

    @property
    def coalescing(self) -> CoalescingResult:
        """The :class:`~gpuadvise.model.coalescing.CoalescingResult` over the trace."""
        return self._models.require("coalescing")  # type: ignore[no-any-return]

    @property
    def l2(self) -> L2Result:
        """The :class:`~gpuadvise.model.l2.L2Result` of the trace under the hardware order and
        seed 002's tilings (2D grids)."""
        return self._models.require("l2")  # type: ignore[no-any-return]

    @property
    def emulation(self) -> EmulationStats | None:
        """The tracer's counts when the pipeline traced the kernel (never computed for a rule)."""
        return self._models.emulation

    @property
    def simt(self) -> SimtProfile:
        """The SIMT profile of the traced launch (active lanes per line and branch, the serial
        regions, issued work by pipe per line); it comes with the CPU emulator's trace, and is
        unavailable with the GPU tracer's."""
        self.trace  # noqa: B018 - the SIMT counts come with the emulator's trace
        emu = self.emulation
        if emu is None or emu.simt is None:
            raise ModelUnavailable(
                "no SIMT counts: they come from the CPU emulator's trace (the GPU tracer has none)"
            )
        return emu.simt

    # services

    @property
    def services(self) -> RuleServices:
        if self._services is None:
            raise ModelUnavailable("no toolchain services in this context")
        return self._services
