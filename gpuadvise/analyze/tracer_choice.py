"""``--tracer auto``: the CPU emulator when the trace is cheap, the GPU tracer when it is long.

The GPU tracer has a fixed cost (a context, the instrumented build, copying the buffers and the
records back: 5-8 s on an H200 for an 8192^2 transpose) and then runs at GPU speed; the emulator
has almost none and runs about 25 million lane-instructions a second on one core. One CTA is
emulated first (untraced, with lazy buffers: milliseconds) to count its lane-instructions; times
the CTAs the trace takes, that is the trace's expected size. At most
:data:`EMULATOR_LANE_INSTRUCTIONS` (about 2 s of emulation) goes to the emulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuadvise.devices import DeviceSpec
    from gpuadvise.spec.kernel_spec import ResolvedLaunch
    from gpuadvise.toolchain import CompiledModule, KernelInfo

__all__ = ["EMULATOR_LANE_INSTRUCTIONS", "TracerChoice", "choose_tracer", "traced_cta_count"]

EMULATOR_LANE_INSTRUCTIONS = 50_000_000
"""The most lane-instructions ``auto`` leaves to the CPU emulator (about 2 s of emulation)."""


@dataclass(frozen=True)
class TracerChoice:
    """``tracer``: gpu or emu; ``note``: why, for the report."""

    tracer: str
    note: str


def traced_cta_count(
    sample_ctas: int | str | None, kernel: KernelInfo, launch: ResolvedLaunch, device: DeviceSpec
) -> int:
    """The CTAs a trace with ``--sample-ctas`` takes (None: the first wave)."""
    from gpuadvise.trace.emulate import first_wave_ctas

    total = launch.launch.grid.count
    if sample_ctas == "all":
        return total
    if isinstance(sample_ctas, int):
        return min(sample_ctas, total)
    return min(first_wave_ctas(kernel, launch, device)[0], total)


def pick(lane_instructions_per_cta: int, ctas: int) -> TracerChoice:
    """The choice for a trace of ``ctas`` CTAs of ``lane_instructions_per_cta`` each."""
    expected = lane_instructions_per_cta * ctas
    size = f"{expected / 1e6:.1f}M lane-instructions expected for {ctas} CTAs"
    if expected <= EMULATOR_LANE_INSTRUCTIONS:
        return TracerChoice("emu", f"--tracer auto chose the CPU emulator ({size})")
    return TracerChoice("gpu", f"--tracer auto chose the GPU tracer ({size})")


def choose_tracer(
    module: CompiledModule,
    kernel: KernelInfo,
    launch: ResolvedLaunch,
    device: DeviceSpec,
    sample_ctas: int | str | None,
) -> TracerChoice:
    """Emulate CTA 0 untraced and :func:`pick` from its lane-instructions. A CTA the emulator
    cannot run (an unsupported instruction, a fault, the instruction budget) goes to the GPU."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.trace.emulate import emulate

    ctas = traced_cta_count(sample_ctas, kernel, launch, device)
    try:
        probe = emulate(module, kernel, launch, device, sample_ctas=[0], trace=False)
    except GpuAdviseError as exc:
        return TracerChoice(
            "gpu", f"--tracer auto chose the GPU tracer (the emulator: {exc.one_line()})"
        )
    return pick(probe.lane_instructions, ctas)
