"""The tracer seam (gpuadvise/trace/tracer.py): both tracers return one TraceResult with the same
fields; what the GPU tracer cannot give (SIMT and instruction counts, chosen CTAs) is None and
missing from its capabilities, which the L2 model's interior probe and the working-CTA probe
check (gpuadvise/analyze/models.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuadvise.devices import preset
from gpuadvise.trace.gpu import compare_traces
from gpuadvise.trace.tracer import (
    Capability,
    EmulatorTracer,
    GpuTracer,
    Tracer,
    TraceResult,
    tracer_for,
)
from tests.ptx.test_instrument import BASIC, _have_nvcc, _launch, module_of

pytestmark = pytest.mark.usefixtures("sass_read_whole")  # the emulated cubins read whole


@pytest.fixture(scope="module")
def cache(compile_cache: Path) -> Path:
    """The run's compile cache (test_instrument.py compiles the same kernels in it)."""
    return compile_cache


def test_the_tracers_by_name_and_their_capabilities() -> None:
    emu, gpu = tracer_for("emu"), tracer_for("gpu")
    assert isinstance(emu, EmulatorTracer) and isinstance(gpu, GpuTracer)
    assert emu.capabilities == frozenset(Capability)
    assert gpu.capabilities == frozenset()  # no SIMT nor instruction counts, first CTAs only
    with pytest.raises(ValueError, match="unknown tracer"):
        tracer_for("auto")


@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_both_tracers_return_one_result_with_the_same_fields(cache: Path) -> None:
    module = module_of(BASIC, cache)
    info = module.kernel("reconverge")
    launch = _launch(BASIC, "reconverge", 3, 256, ["in=int[768]", "out=int[768]"])
    tracers: list[Tracer] = [EmulatorTracer(), GpuTracer(emulate_device=True)]
    emu, gpu = (t.run(module, info, launch, preset("H100"), sample_ctas=2) for t in tracers)
    fields = {f.name for f in dataclasses.fields(TraceResult)}
    assert isinstance(emu, TraceResult) and isinstance(gpu, TraceResult)
    assert (emu.tracer, gpu.tracer) == ("emu", "gpu")
    assert compare_traces(emu.trace, gpu.trace).identical
    assert emu.ctas_run == gpu.ctas_run == (0, 1) and not emu.complete and not gpu.complete
    assert set(emu.outputs) == set(gpu.outputs) and "out" in emu.outputs
    # what only the emulator counts: present there, None (and not promised) from the GPU
    assert emu.has(Capability.SIMT) and emu.simt is not None
    assert emu.has(Capability.INSTRUCTION_COUNTS) and emu.lane_instructions
    assert not gpu.has(Capability.SIMT) and gpu.simt is None
    assert not gpu.has(Capability.INSTRUCTION_COUNTS) and gpu.lane_instructions is None
    assert any("instrumentation slowdown" in n for n in gpu.notes)
    assert fields == set(vars(emu)) == set(vars(gpu))
    with pytest.raises(ValueError, match="first CTAs only"):
        tracers[1].run(module, info, launch, preset("H100"), sample_ctas=[1, 2])
