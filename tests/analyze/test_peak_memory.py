"""What an analysis holds on to (issue 31: at most 1 GB per kernel): a finished emulation is freed
when it is dropped, not at the next full garbage collection, and ``--diff``'s rounds of fixes do
not hold the first analysis's trace."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np

from gpuadvise.analyze.models import MemoryAnalysis
from gpuadvise.analyze.pipeline import KernelAnalysis
from gpuadvise.analyze.report import memory_json
from gpuadvise.trace.access import RECORD, AccessTrace

ROOT = Path(__file__).resolve().parents[2]


def test_a_dropped_emulation_leaves_no_cycle_holding_its_memory() -> None:
    from gpuadvise.analyze.models import resolve_launch
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel
    from gpuadvise.trace.emulate import emulate

    case = ROOT / "kernels" / "accumulate"
    opts = KernelOptions(source=case / "accumulate.cu", spec=case / "row_sums.toml", gpu="H100")
    spec, choice, options = build(opts)
    tc = find_toolchain(None)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    kernel = select_compiled_kernel(module, spec.kernel)
    launch = resolve_launch(spec, kernel, options, tc)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        e = emulate(module, kernel, launch, choice.device, sample_ctas=4, sample_loops=False)
        assert len(e.outputs["out"]) == 4224
        del e
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    # the batch's ops close over the batch: released, nothing of it waits for the collector
    assert not kinds & {"GlobalMemory", "Batch", "KernelImage"}


def test_an_analysis_without_its_trace_data_reports_the_same() -> None:
    records = np.zeros(10, dtype=RECORD)
    trace = AccessTrace(records, (), (0, 1), 4, (4, 1, 1), (32, 1, 1), "emulator")
    mem = MemoryAnalysis(ctas_run=2, total_ctas=4, trace=trace, outputs={"y": np.zeros(3)})
    a = KernelAnalysis(None, None, None, None, None, None, (), None, (), 0, memory=mem)  # type: ignore[arg-type]
    b = a.without_trace_data()
    assert b.memory is not None and b.memory.trace is not None
    assert len(b.memory.trace.records) == 0 and b.memory.trace.records.base is None
    assert b.memory.trace.ctas == (0, 1) and b.memory.outputs is None
    assert a.memory is mem and len(mem.trace.records) == 10  # the analysis itself is unchanged
    assert memory_json(b.memory) == memory_json(a.memory)
    bare = KernelAnalysis(None, None, None, None, None, None, (), None, (), 0)  # type: ignore[arg-type]
    assert bare.without_trace_data() is bare


def test_analyze_lets_the_emulators_memory_go_once_the_kernel_has_run() -> None:
    """``analyze`` keeps no traced outputs (``keep_outputs=False``): nothing reads them after the
    trace, and they held the emulator's global memory (a heap of every buffer: thomas 512 MB)
    through the models and the rules. Kept (the default), they hold it."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.ptx.memory import GlobalMemory

    case = ROOT / "kernels" / "accumulate"
    opts = KernelOptions(source=case / "accumulate.cu", spec=case / "row_sums.toml", gpu="H100")
    spec, choice, options = build(opts)

    def heaps() -> int:
        gc.collect()
        return sum(isinstance(o, GlobalMemory) for o in gc.get_objects())

    gc.collect()
    before = heaps()
    kept = analyze_kernel(spec, choice.device, options, sample_ctas=4, models=("coalescing",))
    assert kept.memory is not None and kept.memory.outputs is not None
    assert len(kept.memory.outputs["out"]) == 4224
    assert heaps() == before + 1
    del kept
    assert heaps() == before
    a = analyze_kernel(
        spec, choice.device, options, sample_ctas=4, models=("coalescing",), keep_outputs=False
    )
    assert a.memory is not None and a.memory.trace is not None and a.memory.outputs is None
    assert len(a.memory.trace.records) > 0
    assert heaps() == before
