"""The kernel's SASS read in a thread while the analysis goes on (issue 31: nvdisasm, a child
process, ran while this process only waited for it; :class:`gpuadvise.analyze.ahead.SassAhead`).

The thread reads exactly what the pipeline read itself (the life ranges, then the SASS from their
output); a thread that failed, or read another kernel, leaves the reading to the pipeline, which
then raises what there is to raise. A variant compiled ahead of its trace
(:class:`gpuadvise.analyze.ahead.Ahead`) has its SASS read in that thread too.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuadvise.analyze import ahead as A
from gpuadvise.analyze.head import CompiledHead, compile_head
from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions, build
from gpuadvise.analyze.pipeline import analyze_kernel
from gpuadvise.analyze.run import run_analysis

ROOT = Path(__file__).resolve().parents[2]
R = ROOT / "kernels" / "reduction"
OPTS = KernelOptions(source=str(R / "reduce.cu"), spec=str(R / "reduce7.toml"), gpu="H100")
pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]


@pytest.fixture(scope="module")
def compiled(compile_cache: Path) -> tuple[Any, Any, CompiledHead]:
    spec, choice, options = build(OPTS)
    return spec, options, compile_head(spec, choice.device, options)


def _sass_read_after_the_trace_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[str], Callable[..., Any]]:
    """The SASS read by a thread other than the main one lasts until the emulator's first batch
    has run (at most 30 s): the events in order ("run", "trace started", "sass read", or "read
    alone" when no trace started meanwhile), and the emulator's own ``Batch.run``."""
    from gpuadvise.ptx.emulator import Batch

    real_read, real_run = A.read_sass, Batch.run
    events: list[str] = []
    started = threading.Event()

    def slow(*args: Any, **kw: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            events.append("trace started" if started.wait(30) else "read alone")
        got = real_read(*args, **kw)
        events.append("sass read")
        return got

    def run(self: Batch) -> tuple[int, int]:
        if not started.is_set():
            events.append("run")
            started.set()
        return real_run(self)

    monkeypatch.setattr(A, "read_sass", slow)
    monkeypatch.setattr(Batch, "run", run)
    return events, real_run


def test_the_thread_reads_what_the_pipeline_read_itself(compiled) -> None:
    _, _, head = compiled
    module, kernel, tc = head.module, head.head.kernel, head.toolchain
    ahead = A.SassAhead(module, kernel, tc)
    got = ahead.result(module, kernel, True)
    assert got is not None
    table, instrs = got
    own_table, own_instrs = A.read_sass(module, kernel, tc)
    assert instrs == own_instrs and len(instrs) > 0
    assert not isinstance(table, str) and table is not None
    assert table == own_table
    # read for another kernel, or without the life ranges: not this read's, the caller reads
    other = dataclasses.replace(kernel, mangled=kernel.mangled + "_other")
    assert A.SassAhead(module, kernel, tc).result(module, other, True) is None
    assert A.SassAhead(module, kernel, tc, registers=False).result(module, kernel, True) is None


def test_a_failed_thread_leaves_the_reading_to_the_pipeline(
    compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, options, head = compiled
    module, kernel, tc = head.module, head.head.kernel, head.toolchain
    real = A.read_sass
    threads: list[str] = []

    def flaky(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("nvdisasm died")
        return real(*args, **kw)

    monkeypatch.setattr(A, "read_sass", flaky)
    monkeypatch.setattr("gpuadvise.analyze.pipeline.read_sass", flaky)
    ahead = A.SassAhead(module, kernel, tc)
    assert ahead.result(module, kernel, True) is None
    a = analyze_kernel(
        spec,
        head.head.device,
        options,
        trace=False,
        head=head,
        sass_ahead=A.SassAhead(module, kernel, tc),
    )
    b = analyze_kernel(spec, head.head.device, options, trace=False, head=head)
    assert a.sass_instructions == b.sass_instructions and a.sass_instruction_count > 0
    assert a.registers == b.registers and a.registers is not None
    assert threads.count(threading.main_thread().name) == 2  # a's own read after the failure, b's


def test_analyze_reads_the_sass_in_a_thread_and_finds_the_same(
    compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = A.read_sass
    threads: list[bool] = []

    def spy(*args: Any, **kw: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args, **kw)

    monkeypatch.setattr(A, "read_sass", spy)
    settings = AnalyzeSettings(measure=False, trace=False)
    done = run_analysis(OPTS, settings)
    assert threads == [False]  # read once, in the thread
    monkeypatch.setattr("gpuadvise.analyze.pipeline.read_sass", spy)
    spec, choice, options = build(OPTS)
    alone = analyze_kernel(spec, choice.device, options, trace=False)
    assert threads == [False, True]
    assert done.analysis.sass_instructions == alone.sass_instructions
    assert done.analysis.sass_lines == alone.sass_lines
    assert done.analysis.registers == alone.registers


def test_a_variant_compiled_ahead_has_its_sass_read_in_that_thread(
    compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuadvise.toolchain import sass

    real = sass.disassemble
    where: list[str] = []

    def spy(*args: Any, **kw: Any) -> Any:
        where.append(threading.current_thread().name)
        return real(*args, **kw)

    monkeypatch.setattr(sass, "disassemble", spy)
    spec, choice, _ = build(OPTS)
    with A.Ahead() as ahead:
        built = ahead.submit(OPTS, choice.device).result()
        assert built.sass is not None
        built.sass.wait()  # read after the compile was handed over
    assert len(where) == 1 and where[0].startswith("gpuadvise-variant")
    head = built.head
    module, kernel = head.module, head.head.kernel
    got = built.sass.result(module, kernel, False)
    assert got is not None and got[0] is None  # a variant's live registers are not read
    assert got[1] == tuple(real(module.cubin_path, kernel.mangled, head.toolchain))


def test_a_variant_is_traced_before_its_sass_is_read_and_finds_the_same(
    compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant compiled ahead (:class:`gpuadvise.analyze.ahead.Ahead`) is handed over once
    compiled: its trace starts while the compiling thread reads its SASS (here that read lasts
    until the trace has started: a trace that waited for it first would wait 30 s), and its
    trace and launch traffic are bit for bit those of the variant compiled and read first."""
    import pickle

    from gpuadvise.analyze.variant_trace import launch_traffic, trace_alone
    from gpuadvise.ptx.emulator import Batch

    events, real_run = _sass_read_after_the_trace_starts(monkeypatch)
    _, choice, _ = build(OPTS)
    budget = 16 << 20
    with A.Ahead() as ahead:
        built = ahead.submit(OPTS, choice.device).result()
        a = trace_alone(OPTS, choice.device, None, budget, built=built)
    assert events == ["run", "trace started", "sass read"]
    assert "sass_wait_s" in a.timings_s
    monkeypatch.setattr(Batch, "run", real_run)
    b = trace_alone(OPTS, choice.device, None, budget)
    assert a.memory is not None and b.memory is not None and a.memory.error is None
    assert a.memory.trace is not None and b.memory.trace is not None
    assert a.memory.trace.records.tobytes() == b.memory.trace.records.tobytes()
    assert pickle.dumps(a.memory.trace.work) == pickle.dumps(b.memory.trace.work)
    assert pickle.dumps(a.memory.simt) == pickle.dumps(b.memory.simt)
    assert a.sass_instructions == b.sass_instructions and a.registers is None
    assert pickle.dumps(launch_traffic(a)) == pickle.dumps(launch_traffic(b))


def test_a_variant_is_compiled_when_its_rule_is_done_and_traced_the_same(
    compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GA308's variant compiled while the rules after it run (``VariantsAhead``), taken by the
    variant traces: the same point as when the traces compile it themselves."""
    from gpuadvise.analyze import run as R

    k = ROOT / "kernels" / "accumulate"
    opts = KernelOptions(str(k / "accumulate.cu"), spec=str(k / "case.toml"), gpu="H100")
    settings = AnalyzeSettings(measure=False, select=("GA308", "GA309"))
    events: list[tuple[str, str]] = []
    real_told, real_take = A.VariantsAhead.told, A.VariantsAhead.take

    rule_of: dict[Any, str] = {}  # a variant's key -> the rule that offered it

    def told(self: A.VariantsAhead, findings: Any) -> None:
        events.extend(("told", f.rule) for f in findings)
        for f in findings:
            if f.variant is not None:
                rule_of[A.variant_key(f.variant.candidates()[0])] = f.rule
        real_told(self, findings)

    def take(self: A.VariantsAhead, v: Any) -> Any:
        got = real_take(self, v)
        events.append(("taken" if got is not None else "missed", rule_of[A.variant_key(v)]))
        return got

    monkeypatch.setattr(A.VariantsAhead, "told", told)
    monkeypatch.setattr(A.VariantsAhead, "take", take)
    early = run_analysis(opts, settings)
    assert ("told", "GA308") in events and ("taken", "GA308") in events
    assert ("missed", "GA308") not in events
    monkeypatch.setattr(R, "_variants_ahead", lambda *a: None)
    events.clear()
    late = run_analysis(opts, settings)
    assert events == []
    (a,) = [f for f in early.rules.findings if f.rule == "GA308"]
    (b,) = [f for f in late.rules.findings if f.rule == "GA308"]
    assert a.estimated_speedup is not None and a.estimated_speedup.kind == "point"
    assert a.estimated_speedup == b.estimated_speedup
    assert early.rules.findings == late.rules.findings


def test_the_trace_starts_before_the_sass_is_read_and_finds_the_same(
    compiled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the SASS read in the thread, the emulator's trace does not wait for it: it runs its
    CTAs first (the block costs are added up once the SASS comes), and the live registers are
    read after it; the analysis is the one made with the SASS read first, bit for bit. Here the
    thread's nvdisasm lasts until the trace has started (a pipeline that waited for it first
    would wait 30 s, and find the order wrong)."""
    import pickle

    from gpuadvise.ptx.emulator import Batch

    spec, options, head = compiled
    module, kernel, tc = head.module, head.head.kernel, head.toolchain
    events, real_run = _sass_read_after_the_trace_starts(monkeypatch)
    a = analyze_kernel(
        spec, head.head.device, options, head=head, sass_ahead=A.SassAhead(module, kernel, tc)
    )
    assert events == ["run", "trace started", "sass read"]
    assert "sass_wait_s" in a.timings_s
    monkeypatch.setattr(Batch, "run", real_run)
    b = analyze_kernel(spec, head.head.device, options, head=head)
    assert a.memory is not None and b.memory is not None and a.memory.error is None
    assert a.memory.simt is not None and a.memory.trace is not None
    for x, y in [
        (a.memory.simt, b.memory.simt),
        (a.memory.trace.work, b.memory.trace.work),
        (a.memory.banks, b.memory.banks),
        (a.memory.coalescing, b.memory.coalescing),
        (a.memory.l2, b.memory.l2),
        (a.registers, b.registers),
    ]:
        assert pickle.dumps(x) == pickle.dumps(y)
    assert a.memory.trace.records.tobytes() == b.memory.trace.records.tobytes()
    assert a.notes == b.notes and a.memory.notes == b.memory.notes
    assert a.sass_instructions == b.sass_instructions and a.sass_lines == b.sass_lines


def test_a_told_variant_is_waited_for_until_its_nvcc_starts(
    compile_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``Ahead.submit(until_nvcc=True)`` returns once the compile's nvcc has started, not
    before (the thread's spec and cache lookup then run alone) and not after it returned (the
    compile goes on beside the caller); with a job already queued it does not wait; on a
    compile cache hit it returns once the variant is built."""
    import time

    import gpuadvise.toolchain.compile as compile_mod

    real = compile_mod.run_tool
    started: list[float] = []

    def slow_nvcc(cmd: Any, name: str, **kw: Any) -> Any:
        if name == "nvcc":
            started.append(time.perf_counter())
            time.sleep(0.5)
        return real(cmd, name, **kw)

    monkeypatch.setattr(compile_mod, "run_tool", slow_nvcc)
    src = tmp_path / "reduce.cu"  # a source of its own: the compile cache misses
    src.write_text((R / "reduce.cu").read_text() + "\n// until_nvcc\n")
    opts = dataclasses.replace(OPTS, source=str(src))
    _, choice, _ = build(OPTS)
    with A.Ahead() as ahead:
        first = ahead.submit(opts, choice.device, until_nvcc=True)
        back = time.perf_counter()
        assert len(started) == 1 and started[0] <= back and not first.done()
        queued = ahead.submit(OPTS, choice.device, until_nvcc=True)  # behind the first
        assert not queued.done() and len(started) == 1
        assert first.result().head.module.cubin_path
        assert queued.result().head.module.cubin_path
    runs = len(started)
    with A.Ahead() as ahead:  # compiled above: a hit, no nvcc
        hit = ahead.submit(opts, choice.device, until_nvcc=True)
        assert hit.done() and len(started) == runs
