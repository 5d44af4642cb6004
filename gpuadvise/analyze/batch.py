"""Many kernel cases analyzed in parallel (``gpuadvise analyze FOLDER... --jobs N``).

Each case runs :func:`gpuadvise.analyze.run.run_analysis` in a worker process (``jobs`` 1: in
this process). The GPU is one: when a case measures its findings, it holds a lock shared by the
workers, so measurements never overlap (the compile, the trace and the rules do). With more than
one job and ``--tracer auto``, the CPU emulator traces (the GPU tracer would share the GPU).

A case that fails (a spec that does not parse, a kernel that does not compile) is a row with its
one-line error, not the end of the run. The results come back in the cases' order whatever the
number of jobs, and do not depend on it.

Ranking: by the time to win, the kernel's time x (1 - 1/best speedup): measured (the baseline's
median time and the best verified speedup) when the findings were measured, else estimated (the
time of the launch's DRAM traffic, each buffer byte once at the device's bandwidth, a lower
bound, and the best estimated speedup). A case ``gpuadvise record`` wrote counts the GPU time
the program spent in that kernel and launch shape (its spec's ``[recorded] gpu_time_ms``, from
CUPTI), so the ranking is by what each fix saves in the program's run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from gpuadvise.analyze.cases import Case, time_to_win_ms
from gpuadvise.analyze.options import AnalyzeSettings
from gpuadvise.errors import GpuAdviseError, Interrupted

Basis = Literal["measured", "estimated"]


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome. ``result``: the AnalyzeResult (None when ``error``); ``kernel_ms``:
    the kernel's time, measured or estimated (``basis``); ``best_speedup``: its best finding's;
    ``time_to_win_ms``: what that finding saves per launch."""

    case: Case
    result: Any = None
    error: str | None = None
    wall_s: float = 0.0
    kernel_ms: float | None = None
    best_speedup: float | None = None
    best_rule: str | None = None
    best_line: int | None = None
    basis: Basis | None = None
    time_to_win_ms: float | None = None
    # where ``kernel_ms`` comes from: the measured baseline, the program's recorded GPU time
    # (CUPTI), or the lower bound of the buffers at DRAM bandwidth
    kernel_basis: Literal["measured", "recorded", "estimated"] | None = None

    @property
    def findings(self) -> tuple[Any, ...]:
        return () if self.result is None else tuple(self.result.rules.findings)


_GPU_LOCK: Any = None
_IN_CASE = False  # a worker is analyzing a case (a SIGTERM then unwinds it, cleaning up)


def _init_worker(lock: Any, tmp: str, workers: int = 1) -> None:
    """A worker's setup: the GPU lock; its temporary files under ``tmp`` (the run's folder,
    removed by the parent even when it has to kill the worker); SIGTERM ends it cleanly. The
    worker starts with SIGINT blocked (:func:`_sigint_blocked`): a Ctrl-C is the parent's to
    handle, which then stops every worker. Its rules run in one process when the ``workers``
    would leave no CPU free for a second each (:func:`gpuadvise.rules.split.rule_processes`)."""
    import signal
    import tempfile

    from gpuadvise.analyze.cases import jobs_default
    from gpuadvise.rules.split import limit_rule_processes

    if 2 * workers > jobs_default():
        limit_rule_processes(1)
    global _GPU_LOCK
    _GPU_LOCK = lock
    os.environ["TMPDIR"] = tmp  # nvcc and the host compiler too
    tempfile.tempdir = None
    signal.signal(signal.SIGTERM, _worker_terminated)
    sys.unraisablehook = _interrupt_again(sys.unraisablehook)


def _worker_terminated(signum: int, frame: Any) -> None:
    if _IN_CASE:  # unwind the case: its folders removed, its compiler killed
        raise Interrupted(signum)
    _end_worker(signum)


def _interrupt_again(hook: Callable[[Any], Any]) -> Callable[[Any], None]:
    """``sys.unraisablehook`` for a worker: the SIGTERM's :class:`Interrupted` raised where it
    cannot unwind the case (a weakref's callback, a ``__del__``: the module locks' callback of
    an import the case makes), which Python prints as ignored and goes on from (a traceback in
    the run's stderr, the case analysed on), is delivered to the main thread again a moment
    later, from another thread, so that it unwinds the case from where it is then. Anything
    else goes to ``hook``."""
    import _thread
    import threading

    def unraisable(info: Any) -> None:
        stop = info.exc_value
        if not isinstance(stop, Interrupted):
            hook(info)
            return
        again = threading.Timer(0.01, _thread.interrupt_main, (stop.signum,))
        again.daemon = True
        again.start()

    return unraisable


def _end_worker(signum: int) -> None:
    from gpuadvise.toolchain.scratch import release_all

    release_all()
    os._exit(128 + signum)  # not back to the pool's loop, which would take the next case


def _analyze_in_worker(case: Case, settings: AnalyzeSettings) -> CaseResult:
    global _IN_CASE
    _IN_CASE = True
    try:
        return analyze_case(case, settings, parallel=True)
    except Interrupted as stop:
        _end_worker(stop.signum)
        raise  # pragma: no cover - _end_worker does not return
    finally:
        _IN_CASE = False


def _slim(result: Any) -> Any:
    """The result without what cannot or need not cross a process boundary (the raw trace, the
    emulated outputs, the toolchain handle)."""
    a = result.analysis
    mem = a.memory
    if mem is not None:
        mem = dataclasses.replace(mem, trace=None, outputs=None)
    a = dataclasses.replace(a, memory=mem, toolchain=None)
    # a rule's details class lives in a rule file loaded by path, which another process cannot
    # import: the details travel as their JSON ({type, fields}), as --json writes them
    findings = tuple(
        dataclasses.replace(f, details=f.to_dict()["details"]) for f in result.rules.findings
    )
    return dataclasses.replace(
        result, analysis=a, rules=dataclasses.replace(result.rules, findings=findings)
    )


def analyze_case(case: Case, settings: AnalyzeSettings, parallel: bool = False) -> CaseResult:
    """Analyze one case (in a worker or here); never raises for the case's own problems."""
    from gpuadvise.analyze.run import run_analysis

    t0 = time.perf_counter()
    if case.error is not None:
        return CaseResult(case, error=case.error)
    if parallel and settings.tracer == "auto":
        settings = dataclasses.replace(settings, tracer="emu")
    lock = _GPU_LOCK if _GPU_LOCK is not None else contextlib.nullcontext()
    try:
        done = run_analysis(case.options, settings, measure_lock=lock)
    except GpuAdviseError as exc:
        return CaseResult(case, error=exc.one_line(), wall_s=time.perf_counter() - t0)
    except MemoryError:
        return CaseResult(
            case,
            error="out of memory; trace fewer CTAs (--sample-ctas)",
            wall_s=time.perf_counter() - t0,
        )
    ranked_case = rank_case(case, done, time.perf_counter() - t0)
    return dataclasses.replace(ranked_case, result=_slim(done)) if parallel else ranked_case


def rank_case(case: Case, done: Any, wall_s: float) -> CaseResult:
    """The case's kernel time, best speedup and time to win (see the module docstring). A
    recorded case (``case.recorded_ms``) counts the program's GPU time in it instead: the time
    to win is then what the fix saves in the program's run."""
    result = _rank_case(case, done, wall_s)
    if case.recorded_ms is None:
        kernel_basis = None if result.kernel_ms is None else result.basis
        return dataclasses.replace(result, kernel_basis=kernel_basis)
    return dataclasses.replace(
        result,
        kernel_ms=case.recorded_ms,
        time_to_win_ms=time_to_win_ms(case.recorded_ms, result.best_speedup),
        kernel_basis="recorded",
    )


def _rank_case(case: Case, done: Any, wall_s: float) -> CaseResult:
    measured = [f for f in done.rules.findings if f.measured_speedup is not None and f.verified]
    if measured:
        best = max(measured, key=lambda f: f.measured_speedup.speedup)
        m = best.measured_speedup
        kernel_ms = m.baseline_ms if m.kind == "variant" else _kernel_ms_measured(done)
        return CaseResult(
            case,
            done,
            wall_s=wall_s,
            kernel_ms=kernel_ms,
            best_speedup=m.speedup,
            best_rule=best.rule,
            best_line=best.line,
            basis="measured",
            time_to_win_ms=time_to_win_ms(kernel_ms, m.speedup),
        )
    est = [
        f
        for f in done.rules.findings
        if not f.is_error and f.estimated_speedup is not None and f.estimated_speedup.speedup
    ]
    kernel_ms = estimated_kernel_ms(done.analysis)
    if not est:
        return CaseResult(case, done, wall_s=wall_s, kernel_ms=kernel_ms, basis="estimated")
    best = max(est, key=lambda f: f.estimated_speedup.speedup)
    s = best.estimated_speedup.speedup
    return CaseResult(
        case,
        done,
        wall_s=wall_s,
        kernel_ms=kernel_ms,
        best_speedup=s,
        best_rule=best.rule,
        best_line=best.line,
        basis="estimated",
        time_to_win_ms=time_to_win_ms(kernel_ms, s),
    )


def _kernel_ms_measured(done: Any) -> float | None:
    ms = [
        f.measured_speedup.baseline_ms
        for f in done.rules.findings
        if f.measured_speedup is not None and f.measured_speedup.kind == "variant"
    ]
    return min(ms) if ms else estimated_kernel_ms(done.analysis)


def estimated_kernel_ms(analysis: Any) -> float | None:
    """A lower bound of the launch's time without a GPU: its buffers' bytes once at the device's
    DRAM bandwidth (None when the device model has no bandwidth)."""
    from gpuadvise.analyze.services import AnalysisServices
    from gpuadvise.model.roofline import dram_bytes_per_s

    bw = dram_bytes_per_s(analysis.device)
    try:
        nbytes = int(AnalysisServices(analysis).resolved_launch().total_buffer_bytes)
    except (GpuAdviseError, OSError):
        return None
    if not bw or not nbytes:
        return None
    return nbytes / bw * 1e3


def analyze_cases(
    cases: Sequence[Case],
    settings: AnalyzeSettings,
    jobs: int = 1,
    on_done: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every case analyzed, ``jobs`` at a time, in the order of ``cases``.

    Ctrl-C (or SIGTERM, which the CLI raises as :class:`Interrupted`) stops the run at once:
    the cases not started are cancelled, the workers ended (SIGTERM, then SIGKILL after a
    second), their temporary files removed, and :class:`Interrupted` says how many cases were
    done."""
    results: list[CaseResult | None] = [None] * len(cases)

    def done(i: int, r: CaseResult) -> None:
        results[i] = r
        if on_done:
            on_done(r)

    try:
        if jobs <= 1 or len(cases) <= 1:
            for i, c in enumerate(cases):
                done(i, analyze_case(c, settings))
        else:
            _in_workers(cases, settings, min(jobs, len(cases)), done)
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else 2
        finished = sum(r is not None for r in results)
        raise Interrupted(signum, f"{finished}/{len(cases)} cases done") from None
    return [r for r in results if r is not None]


def _in_workers(
    cases: Sequence[Case],
    settings: AnalyzeSettings,
    workers: int,
    done: Callable[[int, CaseResult], None],
) -> None:
    from concurrent.futures import as_completed

    from gpuadvise.toolchain.scratch import keep_until_exit, release

    ctx = multiprocessing.get_context("spawn")
    lock = ctx.Lock()
    tmp = keep_until_exit()
    pool = None
    try:
        with _sigint_blocked():  # the workers start with it blocked, and keep it so
            pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=ctx,
                initializer=_init_worker,
                initargs=(lock, str(tmp), workers),
            )
            futures = {pool.submit(_analyze_in_worker, c, settings): i for i, c in enumerate(cases)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                r = fut.result()
            except Exception as exc:  # a worker that died (killed, out of memory)
                r = CaseResult(cases[i], error=f"the worker analyzing it failed: {exc!r}")
            done(i, r)
    except BaseException:
        if pool is not None:
            _stop(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        release(tmp)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel the cases not started and end the workers now. ``shutdown`` alone waits for the
    cases running (minutes), and a worker whose parent is gone lives on. The executor has no
    public handle on its processes before Python 3.14 (``terminate_workers``)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(OSError, ValueError):
            p.terminate()
    deadline = time.monotonic() + 1.0
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            if p.is_alive():
                p.kill()
                p.join(1.0)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the ``with`` block; one that arrives meanwhile is
    raised when it ends. Processes started inside inherit the blocked signal."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def ranked(results: Sequence[CaseResult]) -> list[CaseResult]:
    """Cases by time to win, largest first (measured before estimated at equal time; cases
    without one last, in their order)."""

    def key(r: CaseResult) -> tuple[int, float]:
        if r.time_to_win_ms is None:
            return (1, 0.0)
        return (0, -r.time_to_win_ms)

    return sorted(results, key=key)
