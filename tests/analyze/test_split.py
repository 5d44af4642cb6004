"""Jobs on two CPUs, a share in a forked child (gpuadvise.analyze.split, issue 31), and the
variant traces run so (gpuadvise.analyze.variant_trace.traced_in_two): every result the one a
single process makes, in the same order; a child that dies, raises or sends what does not pickle
leaves its jobs to the parent; ``GPUADVISE_RULE_PROCESSES=1`` keeps one process."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
from pathlib import Path

import pytest

from gpuadvise.analyze import split as S

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")


@pytest.fixture
def two(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes allowed, whatever this machine's CPUs."""
    monkeypatch.setattr(S, "processes", lambda: 2)


def _pid(tag: int):  # type: ignore[no-untyped-def]
    return lambda: (tag, os.getpid())


@pytest.mark.usefixtures("two")
def test_the_childs_share_runs_in_another_process_and_lands_in_order() -> None:
    got = S.in_two([_pid(k) for k in range(5)], [1, 3])
    assert [g[0] for g in got] == [0, 1, 2, 3, 4]
    here = os.getpid()
    assert [g[1] == here for g in got] == [True, False, True, False, True]
    assert got[1][1] == got[3][1]  # one child


@pytest.mark.usefixtures("two")
def test_a_child_that_dies_leaves_its_jobs_to_the_parent() -> None:
    parent = os.getpid()

    def dies() -> int:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return 7

    got = S.in_two([lambda: 1, dies, lambda: (3, os.getpid())], [1, 2])
    assert got[0] == 1 and got[1] == 7
    assert got[2] == (3, parent)  # after the death: run here


@pytest.mark.usefixtures("two")
def test_a_child_that_outlives_its_wait_is_killed_and_its_jobs_run_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from gpuadvise.rules import split as R

    monkeypatch.setattr(R, "CHILD_WAIT_MIN_S", 0.5)
    parent = os.getpid()

    def stuck() -> int:
        if os.getpid() != parent:
            time.sleep(120)
        return os.getpid()

    t0 = time.monotonic()
    assert S.in_two([lambda: 0, stuck], [1]) == [0, parent]
    assert time.monotonic() - t0 < 60


@pytest.mark.usefixtures("two")
def test_a_fork_that_fails_runs_every_job_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    assert {g[1] for g in S.in_two([_pid(0), _pid(1)], [1])} == {os.getpid()}


@pytest.mark.usefixtures("two")
def test_an_interrupted_parent_leaves_no_child(tmp_path: Path) -> None:
    import time

    pidfile = tmp_path / "child"

    def slow() -> int:
        pidfile.write_text(str(os.getpid()))
        time.sleep(60)
        return 1

    def interrupted() -> int:
        deadline = time.monotonic() + 30
        # (the file written whole: exists() alone can see it before its text)
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        S.in_two([interrupted, slow], [1])
    assert time.monotonic() - t0 < 30
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pidfile.read_text()), 0)


@pytest.mark.usefixtures("two")
def test_what_raises_or_does_not_pickle_in_the_child_runs_here_and_raises_here() -> None:
    parent = os.getpid()

    def unpicklable() -> object:
        return threading.Lock() if os.getpid() != parent else "lock"

    assert S.in_two([lambda: 0, unpicklable], [1]) == [0, "lock"]

    def fails() -> int:
        raise ValueError(f"in {'the parent' if os.getpid() == parent else 'the child'}")

    with pytest.raises(ValueError, match="in the parent"):
        S.in_two([lambda: 0, fails], [1])


@pytest.mark.usefixtures("two")
def test_the_childs_log_lines_are_handled_by_the_parent(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("gpuadvise.test_split")

    def says(word: str):  # type: ignore[no-untyped-def]
        def job() -> str:
            log.warning("%s from %s", word, "a job")
            return word

        return job

    with caplog.at_level(logging.DEBUG, logger="gpuadvise.test_split"):
        assert S.in_two([says("first"), says("second")], [1]) == ["first", "second"]
    said = [r.getMessage() for r in caplog.records if r.name == "gpuadvise.test_split"]
    assert said == ["first from a job", "second from a job"]


def test_one_process_when_the_environment_or_the_cpus_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GPUADVISE_RULE_PROCESSES", "1")
    assert S.processes() == 1
    got = S.in_two([_pid(0), _pid(1)], [1])
    assert {g[1] for g in got} == {os.getpid()}
    monkeypatch.delenv("GPUADVISE_RULE_PROCESSES")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert S.processes() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert S.processes() == 2


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_two_variants_traced_at_once_give_the_points_of_one_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two findings with different variants (GA308's register accumulation, and the same diff
    with half the block's threads): the second, once compiled with its SASS read, traced in a
    forked child, each point the one a single process makes; still compiling, traced here."""
    import gpuadvise.analyze.run as run_mod
    import gpuadvise.analyze.variant_trace as VT
    from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
    from gpuadvise.rules.evaluate import RulesRun

    k = ROOT / "kernels" / "accumulate"
    opts = KernelOptions(str(k / "accumulate.cu"), spec=str(k / "case.toml"), gpu="H100")
    monkeypatch.setattr(run_mod, "_trace_points", lambda result, checked, *a: (checked, 0.0))
    res = run_mod.run_analysis(opts, AnalyzeSettings(measure=False, select=("GA308",)))
    monkeypatch.undo()
    (f,) = [f for f in res.rules.findings if f.rule == "GA308"]
    assert f.variant is not None and f.variant.diff
    other = dataclasses.replace(f.variant, launch={"grid": [264, 1, 1], "block": [16, 1, 1]})
    g = dataclasses.replace(f, rule="GA309", line=(f.line or 0) + 1, variant=other)
    pids = tmp_path / "pids"
    real_side = VT.traced_side

    def side(*a, **kw):  # type: ignore[no-untyped-def]
        with pids.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return real_side(*a, **kw)

    monkeypatch.setattr(VT, "traced_side", side)
    run = RulesRun((f, g), ("GA308", "GA309"))
    rules = ["GA308", "GA309"]
    real_processes, real_ready = S.processes, VT._ready
    monkeypatch.setattr(S, "processes", lambda: 2)
    # not compiled yet (with_trace_points compiles them in a thread): no child, none waited for
    monkeypatch.setattr(VT, "_ready", lambda compiled: False)
    late = VT.with_trace_points(res.analysis, run, opts, None, rules)
    assert set(pids.read_text().split()) == {str(os.getpid())}
    pids.unlink()

    def ready(compiled):  # type: ignore[no-untyped-def]
        built = compiled.result()  # here: compiled and read before the fork
        built.sass.wait()
        assert real_ready(compiled)
        return True

    monkeypatch.setattr(VT, "_ready", ready)
    both = VT.with_trace_points(res.analysis, run, opts, None, rules)
    assert len(set(pids.read_text().split())) == 2  # one in a child
    pids.unlink()
    monkeypatch.setenv("GPUADVISE_RULE_PROCESSES", "1")
    monkeypatch.setattr(S, "processes", real_processes)
    one = VT.with_trace_points(res.analysis, run, opts, None, rules)
    assert set(pids.read_text().split()) == {str(os.getpid())}
    assert both.findings == one.findings == late.findings
    points = [x.estimated_speedup.inputs[VT.TRACE_POINT] for x in both.findings]  # type: ignore[union-attr]
    assert len(points) == 2 and points[0] != points[1]


@pytest.mark.usefixtures("two")
def test_a_claimed_share_goes_to_whichever_process_is_free() -> None:
    """Jobs 1-3 queued (claimed): this process runs job 0, long, while the child takes the
    queue's jobs one after another, all three; results in order; then this process runs job 4,
    not queued, after the queue (a variant still compiling at the fork). A fixed share of
    every other job (1 and 3) left job 2 to this process, after job 0."""
    import time

    def slow() -> tuple[int, int]:
        time.sleep(1.5)
        return 0, os.getpid()

    got = S.in_two([slow, _pid(1), _pid(2), _pid(3), _pid(4)], [1, 2, 3], claimed=True)
    assert [g[0] for g in got] == [0, 1, 2, 3, 4]
    here = os.getpid()
    assert [g[1] == here for g in got] == [True, False, False, False, True]


@pytest.mark.usefixtures("two")
def test_a_claimed_share_left_by_a_dead_child_runs_here() -> None:
    parent = os.getpid()

    def dies() -> int:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return 7

    got = S.in_two([_pid(0), dies, _pid(2), _pid(3)], [1, 2, 3], claimed=True)
    assert [g if isinstance(g, int) else g[0] for g in got] == [0, 7, 2, 3]
    assert all(g[1] == parent for g in got if not isinstance(g, int))
