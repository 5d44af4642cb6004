"""``--tracer auto``: the CPU emulator when the trace is cheap, the GPU tracer when it is long.

The GPU tracer has a fixed cost (a context, the instrumented build, copying the buffers and the
records back: 5-8 s on an H100 or H200 for an 8192^2 transpose) and then runs at GPU speed, but
its trace has no SIMT counts and the L2 model gets no probe of the grid's middle with it (GA304
then traces its own: 10 s more for an 8K gather). The emulator has almost no fixed cost; its time
goes by steps (a basic block run by a batch of CTAs in lockstep), each a few numpy calls over the
batch's lanes, so a batch of 256 CTAs costs a few times one CTA, not 256 times. One CTA is
emulated first (untraced, lazy buffers); the trace is expected to take that CTA's time
(``run_s``: its steps only; the set-up around them took 1.9 s for cuda-samples' reduce2, whose
CTA runs in 4 ms, and sent it to the GPU tracer, which has no barrier epochs for GA204/GA205)
once for itself and :data:`BATCH_COST` times for each batch of
:data:`~gpuadvise.trace.emulate.DEFAULT_BATCH_LANES` lanes. Measured on the 2-core CPU machine
(one CTA, then the first wave's trace): an 8K gather 0.047 s, 5 batches 0.60 s; an 8192^2
transpose 0.029 s, 5 batches 0.22 s; llm.c layernorm1 0.18 s, 25 CTAs 0.95 s; matmul1 0.071 s,
77 CTAs 0.54 s: at most 6.6 times the CTA per batch. Up to :data:`EMULATOR_SECONDS` expected
goes to the emulator. The first rule (at most 50 M lane-instructions, ~25 M a second) sent the
8K gather's 298 M to the GPU, which took 7 s where the emulator takes 0.6 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuadvise.devices import DeviceSpec
    from gpuadvise.spec.kernel_spec import ResolvedLaunch
    from gpuadvise.toolchain import CompiledModule, KernelInfo

__all__ = [
    "BATCH_COST",
    "EMULATOR_SECONDS",
    "PER_CTA_COST",
    "TracerChoice",
    "choose_tracer",
    "expected_seconds",
    "traced_cta_count",
]

EMULATOR_SECONDS = 8.0
"""The most expected emulation time ``auto`` leaves to the CPU emulator: the GPU tracer's fixed
cost (5-8 s), which also buys no SIMT counts and no L2 probe (on the H100 machine the 8K gather's
GPU trace took 7 s and GA304's own probe 9 s more; its emulation was expected at 4.5 s there)."""
BATCH_COST = 8.0
"""A batch's emulation time in units of one CTA's, at most (6.6 at most measured; see above)."""
PER_CTA_COST = 0.15
"""What each CTA of a batch beyond the first adds, in units of one CTA's time (layernorm1's 24
CTAs: 4.3 measured; a naive SGEMM's batch of 2 CTAs of 1,024 threads: about 1.15, where a flat
8 sent its 3-CTA sample to the GPU tracer, whose buffer then lost 99.7% of the records)."""


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


def expected_seconds(cta_s: float, ctas: int, ctas_per_batch: int) -> float:
    """The emulation time of a trace of ``ctas`` CTAs, batched ``ctas_per_batch`` at a time
    after the first CTA (which runs alone), from one CTA's (``cta_s``): each batch costs one
    CTA's time plus :data:`PER_CTA_COST` of it for each further CTA, at most
    :data:`BATCH_COST` times it."""
    rest = max(ctas - 1, 0)
    full, part = divmod(rest, max(ctas_per_batch, 1))
    sizes = [ctas_per_batch] * full + ([part] if part else [])
    return cta_s * (1.0 + sum(min(BATCH_COST, 1.0 + PER_CTA_COST * (k - 1)) for k in sizes))


def pick(cta_s: float, ctas: int, ctas_per_batch: int) -> TracerChoice:
    """The choice for a trace of ``ctas`` CTAs when one takes ``cta_s`` to emulate."""
    expected = expected_seconds(cta_s, ctas, ctas_per_batch)
    size = f"{expected:.1f} s of emulation expected for {ctas} CTAs"
    if expected <= EMULATOR_SECONDS:
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
    from gpuadvise.trace.access import RECORD
    from gpuadvise.trace.emulate import (
        DEFAULT_BATCH_LANES,
        DEFAULT_SAMPLE_COST,
        DEFAULT_SAMPLE_TRACE_BYTES,
        WHOLE_WAVE,
        affordable_ctas,
    )

    if sample_ctas in (None, WHOLE_WAVE) and probe.warp_accesses:
        # the default sample is cut to the CTAs whose trace fits its budget (either tracer)
        fit = DEFAULT_SAMPLE_TRACE_BYTES // (probe.warp_accesses * RECORD.itemsize)
        ctas = max(1, min(ctas, int(fit)))
    if sample_ctas is None:  # and to the CTAs its cost affords (spread_runs)
        cost = probe.warp_accesses + probe.warp_steps
        ctas = min(ctas, affordable_ctas(DEFAULT_SAMPLE_COST, cost, 1))
    lanes_per_cta = -(-launch.launch.block.count // 32) * 32  # whole warps
    per_batch = max(1, DEFAULT_BATCH_LANES // lanes_per_cta)
    return pick(probe.run_s, ctas, per_batch)
