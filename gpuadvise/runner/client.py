"""Start the worker process, wait for it under a timeout, and bring its result back.

A kernel that hangs is killed with its whole process group when the timeout passes; a worker that
dies (a segfault in the driver, an abort) is reported with its exit status and the tail of its output.
Device-side printf output and assertion messages are in ``log``.
"""

from __future__ import annotations

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


class _Outcome(Protocol):
    ok: bool
    cuda_error: str | None


@dataclass
class WorkerRun:
    result: Result
    log: str  # what the worker printed (device printf, assertion messages)
    timed_out: bool = False


def pycuda_missing() -> str | None:
    """Why no kernel can run here, or None when PyCUDA and a GPU driver look present."""
    import importlib.util

    if importlib.util.find_spec("pycuda") is None:
        return 'PyCUDA is not installed: pip install "gpuadvise[gpu]" (needs a CUDA toolkit)'
    from gpuadvise.devices import live_device

    if live_device() is None:
        return "no NVIDIA GPU or driver found (NVML sees none)"
    return None


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


def run_worker_module(module: str, job: Any, timeout_s: float) -> ProcessRun:
    """``python -m module JOB.pkl RESULT.pkl`` in its own session; its whole process group is
    killed when it outlives ``timeout_s``. The runner's and the GPU tracer's workers use it."""
    with tempfile.TemporaryDirectory(prefix="gpuadvise-run-") as tmp:
        job_path = Path(tmp) / "job.pkl"
        res_path = Path(tmp) / "result.pkl"
        log_path = Path(tmp) / "worker.log"
        job_path.write_bytes(pickle.dumps(job, protocol=5))
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, str(job_path), str(res_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            timed_out = False
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
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
    """The worker's side of :func:`run_worker_module`: ``argv`` is ``[prog, JOB.pkl, RESULT.pkl]``.

    Starts the CUDA backend, runs ``run(job, backend)`` and writes its result; a backend that does
    not start gives ``failure("setup", message)`` (with the CUDA error's name) and exit status 3,
    an exception in ``run`` gives ``failure("worker", traceback)``. The backend is closed after
    a successful run only (a failed context may hang on close; the process exit frees it).
    """
    from gpuadvise.fileio import write_atomic
    from gpuadvise.runner.backend import cuda_error_name

    job_path, result_path = Path(argv[1]), Path(argv[2])
    job = pickle.loads(job_path.read_bytes())
    try:
        from gpuadvise.runner.pycuda_backend import PyCudaBackend

        backend = PyCudaBackend()
    except Exception as exc:
        res = failure("setup", f"cannot start the CUDA backend: {exc}")
        res.cuda_error = cuda_error_name(str(exc))
        write_atomic(result_path, pickle.dumps(res, protocol=5))
        return 3
    try:
        res = run(job, backend)
    except Exception:
        res = failure("worker", "worker failure:\n" + traceback.format_exc())
    write_atomic(result_path, pickle.dumps(res, protocol=5))
    if res.ok:
        backend.close()
    return 0


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
