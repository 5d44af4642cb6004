"""``analyze`` measures the findings' variants on the GPU while it traces them on the CPU (issue
31): the measurement runs in a thread started after the rules, and its trials land on the findings
as the variant traces left them (their trace points kept). The GPU's half is faked here."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpuadvise.analyze import measure as M
from gpuadvise.analyze import run as run_mod
from gpuadvise.analyze import variant_trace as VT
from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
from gpuadvise.errors import RunnerError
from gpuadvise.rules.evaluate import RulesRun
from gpuadvise.rules.findings import Finding, Measurement, Trial, Variant

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def _trial(v: Variant, speedup: float) -> Trial:
    m = Measurement(
        speedup=speedup,
        baseline_ms=1.0,
        variant_ms=1.0 / speedup,
        device="fake GPU",
        ci_low=speedup * 0.98,
        ci_high=speedup * 1.02,
        outputs_match=True,
        samples=20,
        kind="variant",
        label=v.label,
    )
    return Trial(v.label, v.description, m, True, None)


def test_variants_are_measured_while_they_are_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    events: dict[str, Any] = {}
    traced = threading.Event()

    def fake_trials(opts: KernelOptions, run: RulesRun, *args: Any, **kw: Any) -> dict:
        events["thread"] = threading.current_thread()
        events["before_traces_ended"] = not traced.is_set()
        out = {}
        for f in run.findings:
            cands = M._candidates(f)
            if cands:
                out[M.findings_key(f, cands)] = [_trial(c, 1.5) for c in cands]
        return out

    real = VT.with_trace_points

    def traces(*args: Any, **kw: Any) -> RulesRun:
        time.sleep(0.2)  # the measurement's thread starts meanwhile
        try:
            return real(*args, **kw)
        finally:
            traced.set()

    def early(opts: KernelOptions) -> None:  # the kernel set up on the GPU ahead
        events["early"] = (opts, "thread" in events)

    monkeypatch.setattr("gpuadvise.runner.client.pycuda_missing", lambda: None)
    monkeypatch.setattr(run_mod, "_prewarm_measurement", lambda: True)
    monkeypatch.setattr(M, "start_early", early)
    monkeypatch.setattr(M, "measure_trials", fake_trials)
    monkeypatch.setattr(VT, "with_trace_points", traces)
    opts = KernelOptions(source=str(ROOT / "kernels/reduction/reduce.cu"), kernel="reduce2")
    done = run_mod.run_analysis(opts, AnalyzeSettings(measure=True, tracer="emu"))
    assert events["thread"] is not threading.main_thread()
    assert events["before_traces_ended"]
    assert events["early"] == (opts, False)  # before the rules ran and the measurement began
    ga206 = [f for f in done.rules.findings if f.rule == "GA206"]
    assert ga206, [f.rule for f in done.rules.findings]
    f = ga206[0]
    # the estimate is the variant trace's, the measurement the GPU's
    assert f.estimated_speedup is not None and VT.TRACE_POINT in f.estimated_speedup.inputs
    assert f.measured_speedup is not None and f.measured_speedup.speedup == 1.5
    assert f.verified is True and len(f.trials) == len(M._candidates(f))
    assert "measure_s" in done.analysis.timings_s


def _finding(v: Variant, **kw: Any) -> Finding:
    return Finding(
        rule="GA206",
        name="n",
        title="t",
        severity="warning",
        message="m",
        kernel="k",
        line=3,
        variant=v,
        **kw,
    )


def test_trials_apply_to_the_findings_after_their_estimates_changed() -> None:
    v = Variant("automatic-and-verified", "unroll", defines=("UNROLL=4",))
    before = _finding(v)
    done = {M.findings_key(before, [v]): [_trial(v, 1.2)]}
    # the variant trace marks the variant needs_measurement: the same build, the same trials
    after = _finding(
        Variant("automatic-and-verified", "unroll", defines=("UNROLL=4",), needs_measurement=True)
    )
    out, notes = M.apply_trials(RulesRun((after,), ("GA206",)), done)
    assert out.findings[0].measured_speedup is not None
    assert out.findings[0].measured_speedup.speedup == 1.2
    assert notes == []
    # left out by the time budget: said so; never measured at all: nothing said
    out, notes = M.apply_trials(RulesRun((after,), ("GA206",)), {M.findings_key(before, [v]): None})
    assert out.findings[0].measured_speedup is None
    assert notes == ["GA206: not measured, the time budget ran out"]
    out, notes = M.apply_trials(RulesRun((after,), ("GA206",)), {})
    assert out.findings[0].measured_speedup is None and notes == []


def test_measure_required_without_a_gpu_fails_before_the_variants_are_traced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gpuadvise.runner.client.pycuda_missing", lambda: "no GPU here")
    f = _finding(Variant("automatic-and-verified", "unroll", defines=("UNROLL=4",)))
    with pytest.raises(RunnerError):
        run_mod._Measuring(
            KernelOptions(source="k.cu"), RulesRun((f,), ("GA206",)), True, threading.Lock()
        )
    m = run_mod._Measuring(
        KernelOptions(source="k.cu"), RulesRun((f,), ("GA206",)), None, threading.Lock()
    )
    out = m.finish(RulesRun((f,), ("GA206",)))
    assert out.notes[-1] == "estimates only, nothing measured: no GPU here"


def test_the_timing_kernels_are_built_once_by_whichever_asks_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gpuadvise.analyze.prepare as P
    import gpuadvise.toolchain as T

    calls: list[str] = []

    def fake_compile(src: Path, opts: Any) -> Any:
        time.sleep(0.1)
        calls.append(Path(src).name)
        cubin = tmp_path / f"{Path(src).stem}.cubin"
        cubin.write_bytes(b"")
        return type("Module", (), {"cubin_path": cubin})()

    monkeypatch.setattr(T, "compile_source", fake_compile)
    monkeypatch.setattr(P, "_TIMING_KERNELS", {})
    # the analysis's early thread and the measurement's baseline ask at once
    threads = [threading.Thread(target=P.timing_kernels, args=("sm_90",)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == ["flush.cu", "spin.cu"]
    spin, flush = P.timing_kernels("sm_90")  # from memory
    assert len(calls) == 2 and spin.cubin_path.name == "spin.cubin"
    spin.cubin_path.unlink()  # removed meanwhile (the cache trimmed): built again
    P.timing_kernels("sm_90")
    assert len(calls) == 4


def test_the_kernel_set_up_ahead_is_what_the_measurement_races(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``start_early`` builds the kernel for the live GPU and sends the worker one job with its
    buffers and seed (the races' own: the worker keeps their data); ``compile_ahead``'s callback
    (the rules' ``on_findings``) compiles each finding's candidates as its rule is done; the
    measurement's stage takes those builds instead of building them again."""
    from types import SimpleNamespace

    import gpuadvise.analyze.prepare as P
    import gpuadvise.runner.client as C
    from gpuadvise.runner.job import Result

    jobs: list[Any] = []
    base = SimpleNamespace(
        device=SimpleNamespace(arch=None), launch="L", buffers=("b",), spec=SimpleNamespace(seed=7)
    )
    monkeypatch.setattr(P, "prepare", lambda opts, label: base)
    monkeypatch.setattr(
        C,
        "run_in_worker",
        lambda job, timeout_s: jobs.append(job) or SimpleNamespace(result=Result(ok=True)),
    )
    monkeypatch.setattr(M, "_EARLY", {})
    opts = KernelOptions(source="k.cu", kernel="k")
    assert M.compile_ahead(opts) is None  # nothing set up: the rules are told nothing
    M.start_early(opts)
    v = Variant("automatic-and-verified", "unroll", defines=("UNROLL=4",))
    told = M.compile_ahead(opts)
    assert told is not None
    told([_finding(v)])
    stage = M._Stage(opts, 60.0, 5.0)

    def again(v: Any, folder: Path) -> Any:
        raise AssertionError("built again")

    monkeypatch.setattr(stage, "_build", again)
    stage.build_all([v])
    try:
        assert stage.baseline is base and M._EARLY == {}
        assert stage._built[M._key(v)].value is base  # built ahead (by the fake prepare)
        (job,) = jobs
        assert job.launches == ("L",) and job.buffers == ("b",) and job.seed == 7
        assert job.verify and job.timing is None and not job.return_outputs
    finally:
        stage.close()
    # nothing took it (no finding measured): forgotten
    M.start_early(opts)
    fut = M._EARLY[repr(opts)].base
    M.forget_early(opts)
    assert M._EARLY == {} and fut.result().value is base and len(jobs) == 2


def test_candidates_named_ahead_are_the_builds_of_the_findings_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``compile_variants_ahead``'s callback (the rules' ``on_variants_ahead``: GA304's tile
    sizes while the L2 model is computed) compiles candidates before any finding names them;
    the finding's own candidates, which say more (the model's best N), take those builds: one
    compile per build (diff, flags, defines, launch), none again in the stage. Only with CPUs
    to spare (``AHEAD_MIN_CPUS``)."""
    from types import SimpleNamespace

    import gpuadvise.analyze.prepare as P
    import gpuadvise.runner.client as C
    from gpuadvise.runner.job import Result

    built: list[str] = []
    base = SimpleNamespace(
        device=SimpleNamespace(arch=None), launch="L", buffers=("b",), spec=SimpleNamespace(seed=7)
    )

    def prepare(opts: KernelOptions, label: str) -> Any:
        if label == "B":
            built.append(",".join(opts.defines))
            return SimpleNamespace(variant_of=opts.defines)
        return base

    monkeypatch.setattr(P, "prepare", prepare)
    monkeypatch.setattr(
        C, "run_in_worker", lambda job, timeout_s: SimpleNamespace(result=Result(ok=True))
    )
    monkeypatch.setattr(M, "_EARLY", {})
    monkeypatch.setattr(M.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    opts = KernelOptions(source="k.cu", kernel="k")
    assert M.compile_variants_ahead(opts) is None  # nothing set up: nothing compiled ahead
    M.start_early(opts)
    with monkeypatch.context() as two:  # two CPUs: no speculation (a corpus run's job)
        two.setattr(M.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
        assert M.compile_variants_ahead(opts) is None
    ahead = M.compile_variants_ahead(opts)
    assert ahead is not None
    sizes = (4, 8, 16, 32)
    ahead(
        [Variant("automatic-and-verified", f"N = {n}", defines=(f"N={n}",), label=f"N={n}")
         for n in sizes]
        + [Variant("display-only", "by hand")]  # not measurable: not compiled
    )  # fmt: skip
    # the finding, later: the model's best first, its description longer
    best, *rest = [
        Variant("automatic-and-verified", f"N = {n}" + (" (best)" if n == 32 else ""),
                defines=(f"N={n}",), label=f"N={n}")
        for n in (32, 4, 8, 16)
    ]  # fmt: skip
    f = _finding(dataclasses.replace(best, alternatives=tuple(rest)))
    told = M.compile_ahead(opts)
    assert told is not None
    told([f])  # its rule is done: nothing left to compile
    stage = M._Stage(opts, 60.0, 5.0)

    def again(v: Any, folder: Path) -> Any:
        raise AssertionError("built again")

    monkeypatch.setattr(stage, "_build", again)
    cands = M._candidates(f)
    stage.build_all(cands)
    try:
        assert sorted(built) == sorted(f"N={n}" for n in sizes)  # each once
        for c in cands:
            assert stage._built[M._key(c)].value.variant_of == c.defines
    finally:
        stage.close()


def test_analyze_names_ga304s_tile_sizes_for_the_gpu_before_the_l2_model_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the L2 model in a forked child (two processes allowed), ``analyze --measure`` hands
    GA304's tiled candidates to the measurement's compiles (``compile_variants_ahead``) before
    GA304 waits for the model, not after its finding (the GPU's half faked)."""
    import gpuadvise.rules.split as split
    from gpuadvise.analyze.l2_behind import L2Behind

    events: list[tuple[str, Any]] = []
    real_result = L2Behind.result

    def result(self: L2Behind) -> Any:
        events.append(("l2 read", None))
        return real_result(self)

    monkeypatch.setattr(L2Behind, "result", result)
    monkeypatch.setattr(split, "rule_processes", lambda: 2)
    monkeypatch.setattr("gpuadvise.runner.client.pycuda_missing", lambda: None)
    monkeypatch.setattr(run_mod, "_prewarm_measurement", lambda: True)
    monkeypatch.setattr(M, "start_early", lambda opts: None)
    monkeypatch.setattr(M, "measure_trials", lambda opts, run, *a, **k: {})
    monkeypatch.setattr(
        M, "compile_ahead", lambda opts: lambda fs: events.append(("told", [f.rule for f in fs]))
    )
    monkeypatch.setattr(
        M,
        "compile_variants_ahead",
        lambda opts: lambda vs: events.append(("ahead", [v.label for v in vs])),
    )
    opts = KernelOptions(
        source=str(ROOT / "kernels/tile_gather/gather.cu"),
        kernel="gather_rowmajor",
        gpu="H100",
        args=("w=4096", "h=2048", "r=64", "step=64"),  # a quick trace, 64 MB (more than the L2)
    )
    settings = AnalyzeSettings(measure=True, tracer="emu", sample_ctas="2", l2_probe_ctas="4")
    run_mod.run_analysis(opts, settings)
    names = [e[0] for e in events]
    assert ("ahead", ["N=4", "N=8", "N=16", "N=32"]) in events, events
    assert names.count("ahead") == 1 and names.index("ahead") < names.index("l2 read")
