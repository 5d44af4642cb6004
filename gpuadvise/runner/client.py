"""Start the worker process, wait for it under a timeout, and bring its result back.

A kernel that hangs is killed with its whole process group when the timeout passes; a worker that
dies (a segfault in the driver, an abort) is reported with its exit status and the tail of its output.
Device-side printf output and assertion messages are in ``log``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gpuadvise.errors import RunnerError
from gpuadvise.runner.job import Job, Result
from gpuadvise.runner.presence import pycuda_missing as pycuda_missing  # its callers' name


class _Outcome(Protocol):
    ok: bool
    cuda_error: str | None


@dataclass
class WorkerRun:
    result: Result
    log: str  # what the worker printed (device printf, assertion messages)
    timed_out: bool = False


@dataclass
class ProcessRun:
    """What an isolated worker process left: its unpickled result (None if it reported nothing),
    the tail of its output, whether it was killed at the timeout, its exit status, its run time."""

    result: Any
    log: str
    timed_out: bool
    code: int
    elapsed_s: float

    def death(self) -> str:
        how = f"signal {-self.code}" if self.code < 0 else f"exit status {self.code}"
        return f"the GPU worker died ({how}) before reporting"


WAIT_FLAG = "--wait"
"""A worker started as ``python -m MODULE --wait FOLDER`` starts its CUDA backend, then waits for
``FOLDER/job.pkl`` and writes ``FOLDER/result.pkl`` (:func:`prewarm_worker`)."""
PREWARM_MAX_WAIT_S = 3600.0

_prewarmed: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
_busy: dict[int, subprocess.Popen[bytes]] = {}  # prewarmed workers running a job, by pid


def prewarm_worker(module: str = "gpuadvise.runner.worker") -> None:
    """Start the next worker of ``module`` now, to wait for its job: its imports and its CUDA
    context (about 1 s on the H100 machine, 0.4 s of it numpy and PyCUDA, 0.3 s the context)
    are made while the analysis traces and models the kernel. :func:`run_worker_module` hands
    it the first job of ``module``; a worker no job reaches is killed when this process exits
    (and exits by itself when this process dies)."""
    if module in _prewarmed:
        return
    import atexit

    folder = Path(tempfile.mkdtemp(prefix="gpuadvise-run-"))
    proc = _start(module, [WAIT_FLAG, str(folder)], folder / "worker.log")
    if not _prewarmed:
        atexit.register(discard_prewarmed, wait=False)
    _prewarmed[module] = (proc, folder)


def discard_prewarmed(wait: bool = True) -> None:
    """Kill the workers no job reached and those still running one (a job a thread of this
    process sent ahead, whose result nobody waits for now), and remove their folders. ``wait``
    False (at exit): their end is not waited for (a worker that kept an analysis's buffers
    frees gigabytes of host and device memory as it dies; the analysis need not wait for it)."""
    import shutil

    for proc in list(_busy.values()):
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
    while _prewarmed:
        _, (proc, folder) = _prewarmed.popitem()
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            if wait:
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _run_prewarmed(module: str, job: Any, timeout_s: float) -> ProcessRun | None:
    """The job run by the worker :func:`prewarm_worker` started for ``module``; None when there
    is none, or it died while waiting (the caller then starts one). A worker whose job succeeded
    waits for the next job of ``module`` (its imports and CUDA context shared: about 1 s a job
    on the H100 machine); one whose job failed (a CUDA error may have broken its context), timed
    out or died is gone, and the next job starts afresh."""
    import shutil

    got = _prewarmed.pop(module, None)
    if got is None:
        return None
    proc, folder = got
    if proc.poll() is not None:  # it died waiting (no GPU after all): start afresh
        shutil.rmtree(folder, ignore_errors=True)
        return None
    keep = False
    try:
        from gpuadvise.fileio import write_atomic

        log_path = folder / "worker.log"
        start = log_path.stat().st_size if log_path.exists() else 0
        t0 = time.monotonic()
        _busy[proc.pid] = proc
        write_atomic(folder / "job.pkl", pickle.dumps(job, protocol=5))  # whole, or not there
        run = _await_result(proc, folder / "result.pkl", log_path, timeout_s, t0, start)
        keep = proc.poll() is None and bool(getattr(run.result, "ok", False))
        return run
    finally:
        _busy.pop(proc.pid, None)
        if keep:
            (folder / "result.pkl").unlink(missing_ok=True)
            _prewarmed[module] = (proc, folder)
        else:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            shutil.rmtree(folder, ignore_errors=True)


def _await_result(
    proc: subprocess.Popen[bytes],
    res_path: Path,
    log_path: Path,
    timeout_s: float,
    t0: float,
    log_start: int,
) -> ProcessRun:
    """Wait for a waiting worker's result of one job (it stays, waiting for the next: its
    ``code`` is 0 then), its death, or ``timeout_s`` (its process group killed); its output
    since ``log_start``."""
    timed_out = False
    try:
        while not res_path.exists() and proc.poll() is None:
            if time.monotonic() - t0 > timeout_s:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.002)
    except BaseException:  # Ctrl-C, SIGTERM: the worker is in a session of its own, end it too
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    with open(log_path, "rb") as f:
        f.seek(log_start)
        text = f.read().decode(errors="replace")[-8000:]
    result = None
    if not timed_out and res_path.exists():
        result = pickle.loads(res_path.read_bytes())
    code = proc.poll()
    return ProcessRun(result, text, timed_out, 0 if code is None else code, time.monotonic() - t0)


def run_worker_module(module: str, job: Any, timeout_s: float) -> ProcessRun:
    """``python -m module JOB.pkl RESULT.pkl`` in its own session; its whole process group is
    killed when it outlives ``timeout_s``. The runner's and the GPU tracer's workers use it. A
    worker :func:`prewarm_worker` started for ``module`` takes the job when there is one."""
    pre = _run_prewarmed(module, job, timeout_s)
    if pre is not None:
        return pre
    with tempfile.TemporaryDirectory(prefix="gpuadvise-run-") as tmp:
        job_path = Path(tmp) / "job.pkl"
        res_path = Path(tmp) / "result.pkl"
        log_path = Path(tmp) / "worker.log"
        job_path.write_bytes(pickle.dumps(job, protocol=5))
        t0 = time.monotonic()
        proc = _start(module, [str(job_path), str(res_path)], log_path)
        return _finish(proc, res_path, log_path, timeout_s, t0)


def _start(module: str, args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """``python -m module ARGS`` in its own session (its process group is what a timeout
    kills), its output to ``log_path``."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def _finish(
    proc: subprocess.Popen[bytes], res_path: Path, log_path: Path, timeout_s: float, t0: float
) -> ProcessRun:
    """Wait for the worker ``proc`` (its whole process group killed past ``timeout_s``), then
    read its output's tail and its result (none when it was killed)."""
    timed_out = False
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    except BaseException:  # Ctrl-C, SIGTERM: the worker is in a session of its own, end it too
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    text = log_path.read_text(errors="replace")[-8000:]
    result = None
    if not timed_out and res_path.exists():
        result = pickle.loads(res_path.read_bytes())
    return ProcessRun(result, text, timed_out, code, time.monotonic() - t0)


def serve_job(
    argv: Sequence[str],
    run: Callable[[Any, Any], _Outcome],
    failure: Callable[[str, str], _Outcome],
) -> int:
    """The worker's side of :func:`run_worker_module`: ``argv`` is ``[prog, JOB.pkl, RESULT.pkl]``,
    or ``[prog, --wait, FOLDER]`` for a worker :func:`prewarm_worker` started: the backend first,
    then the job from ``FOLDER/job.pkl`` once it is there, its result to ``FOLDER/result.pkl``,
    and, while its jobs succeed, the next job under the same name (the client removes the result
    it read first); it exits with status 0 and no result when none comes within an hour, or its
    parent is gone.

    Starts the CUDA backend, runs ``run(job, backend)`` and writes its result; a backend that does
    not start gives ``failure("setup", message)`` (with the CUDA error's name) and exit status 3,
    an exception in ``run`` gives ``failure("worker", traceback)``. The backend is closed after
    a successful run only (a failed context may hang on close; the process exit frees it).
    """
    from gpuadvise.fileio import write_atomic
    from gpuadvise.runner.backend import cuda_error_name

    waiting = argv[1] == WAIT_FLAG
    parent = os.getppid()
    if waiting:
        folder = Path(argv[2])
        job_path, result_path = folder / "job.pkl", folder / "result.pkl"
    else:
        job_path, result_path = Path(argv[1]), Path(argv[2])
    backend: Any = None
    setup_error: Exception | None = None
    try:
        from gpuadvise.runner.pycuda_backend import PyCudaBackend

        backend = PyCudaBackend()
    except Exception as exc:
        setup_error = exc
    while True:
        if waiting and not _next_job(job_path, parent):
            return 0
        job = pickle.loads(job_path.read_bytes())
        if waiting:
            job_path.unlink()  # taken: the next job may come under the same name
        if setup_error is not None:
            res = failure("setup", f"cannot start the CUDA backend: {setup_error}")
            res.cuda_error = cuda_error_name(str(setup_error))
            write_atomic(result_path, pickle.dumps(res, protocol=5))
            return 3
        try:
            res = run(job, backend)
        except Exception:
            res = failure("worker", "worker failure:\n" + traceback.format_exc())
        write_atomic(result_path, pickle.dumps(res, protocol=5))
        if not (waiting and res.ok):
            break
    if res.ok:
        backend.close()
    return 0


def _next_job(job_path: Path, parent: int) -> bool:
    """Wait for ``job_path``; False when none comes within ``PREWARM_MAX_WAIT_S`` or the parent
    is gone."""
    t0 = time.monotonic()
    while not job_path.exists():
        if os.getppid() != parent or time.monotonic() - t0 > PREWARM_MAX_WAIT_S:
            return False
        time.sleep(0.002)
    return True


def run_in_worker(job: Job, timeout_s: float = 60.0) -> WorkerRun:
    run = run_worker_module("gpuadvise.runner.worker", job, timeout_s)
    if run.timed_out:
        return WorkerRun(
            Result(
                ok=False,
                error=f"the kernel did not finish within {timeout_s:g} s and was "
                "killed (an endless loop or a deadlock?); raise --timeout if it is just slow",
            ),
            run.log,
            timed_out=True,
        )
    if run.result is None:
        return WorkerRun(Result(ok=False, error=run.death()), run.log)
    return WorkerRun(run.result, run.log)


def require_gpu() -> None:
    why = pycuda_missing()
    if why is not None:
        raise RunnerError(
            f"cannot run kernels here: {why}",
            "`gpuadvise analyze` works without a GPU",
        )
