"""A worker started ahead of its job (:func:`gpuadvise.runner.client.prewarm_worker`) makes its
backend first, takes the first job of its module, is killed at the job's timeout like any
worker, and is killed when no job reaches it. A fake worker module stands in for the CUDA one
(its backend writes a file when it is made)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuadvise.runner import client

ROOT = Path(__file__).resolve().parents[2]

FAKE = """
import os, sys, time, types
from types import SimpleNamespace
from pathlib import Path

from gpuadvise.runner import client


class PyCudaBackend:
    def __init__(self):
        Path(os.environ["FAKE_READY"]).write_text(str(os.getpid()))

    def close(self):
        pass


fake = types.ModuleType("gpuadvise.runner.pycuda_backend")
fake.PyCudaBackend = PyCudaBackend
sys.modules["gpuadvise.runner.pycuda_backend"] = fake


def run(job, backend):
    time.sleep(job.get("sleep", 0))
    print("job", job["x"], flush=True)
    if job.get("fail"):
        return SimpleNamespace(ok=False, cuda_error="CUDA_ERROR_ILLEGAL_ADDRESS", pid=os.getpid())
    return SimpleNamespace(ok=True, cuda_error=None, value=job["x"] * 2, pid=os.getpid())


def failure(stage, error):
    return SimpleNamespace(ok=False, cuda_error=None, error=error)


sys.exit(client.serve_job(sys.argv, run, failure))
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "fake_worker.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{ROOT}")
    ready = tmp_path / "ready"
    monkeypatch.setenv("FAKE_READY", str(ready))
    yield ready
    client.discard_prewarmed()


def _wait_for(path: Path) -> None:
    t0 = time.monotonic()
    while not path.exists():
        assert time.monotonic() - t0 < 30, "the prewarmed worker never made its backend"
        time.sleep(0.02)


def test_a_prewarmed_worker_makes_its_backend_then_takes_the_first_job(fake: Path) -> None:
    client.prewarm_worker("fake_worker")
    proc, folder = client._prewarmed["fake_worker"]
    _wait_for(fake)  # before any job
    assert proc.poll() is None  # waiting
    run = client.run_worker_module("fake_worker", {"x": 21}, timeout_s=30)
    assert run.result.value == 42 and run.result.pid == proc.pid
    assert run.log.strip() == "job 21" and run.code == 0
    # it waits for the next job: its set-up is shared (issue 31)
    assert client._prewarmed["fake_worker"][0] is proc and proc.poll() is None
    again = client.run_worker_module("fake_worker", {"x": 1}, timeout_s=30)
    assert again.result.value == 2 and again.result.pid == proc.pid
    assert again.log.strip() == "job 1"  # this job's output only


def test_a_worker_whose_job_failed_is_not_reused(fake: Path) -> None:
    client.prewarm_worker("fake_worker")
    proc, folder = client._prewarmed["fake_worker"]
    bad = client.run_worker_module("fake_worker", {"x": 3, "fail": True}, timeout_s=30)
    assert bad.result.ok is False and bad.result.pid == proc.pid
    assert "fake_worker" not in client._prewarmed and not folder.exists()
    assert proc.poll() is not None  # gone: a CUDA error may have broken its context
    # the next job starts a worker of its own
    again = client.run_worker_module("fake_worker", {"x": 1}, timeout_s=30)
    assert again.result.value == 2 and again.result.pid != proc.pid


def test_a_prewarmed_worker_is_killed_at_its_jobs_timeout(fake: Path) -> None:
    client.prewarm_worker("fake_worker")
    _wait_for(fake)
    proc, _ = client._prewarmed["fake_worker"]
    run = client.run_worker_module("fake_worker", {"x": 1, "sleep": 60}, timeout_s=1)
    assert run.timed_out and run.result is None and run.elapsed_s < 20
    assert proc.poll() is not None and "fake_worker" not in client._prewarmed


def test_a_prewarmed_worker_no_job_reaches_is_killed(fake: Path) -> None:
    client.prewarm_worker("fake_worker")
    client.prewarm_worker("fake_worker")  # one per module
    proc, folder = client._prewarmed["fake_worker"]
    client.discard_prewarmed()
    assert proc.poll() is not None and not folder.exists() and not client._prewarmed


def test_a_prewarmed_worker_running_a_job_nobody_waits_for_is_killed(fake: Path) -> None:
    """A job a thread sent ahead (``analyze.measure.start_early``) may still run when the
    analysis ends: the worker running it is killed too; at exit (``wait=False``) its end is not
    waited for, and it dies all the same."""
    import threading

    client.prewarm_worker("fake_worker")
    _wait_for(fake)
    proc, folder = client._prewarmed["fake_worker"]
    got: list[client.ProcessRun] = []
    t = threading.Thread(
        target=lambda: got.append(
            client.run_worker_module("fake_worker", {"x": 1, "sleep": 60}, timeout_s=120)
        )
    )
    t.start()
    t0 = time.monotonic()
    while proc.pid not in client._busy:
        assert time.monotonic() - t0 < 30
        time.sleep(0.01)
    client.discard_prewarmed(wait=False)
    t.join(timeout=30)
    assert not t.is_alive() and got[0].result is None and got[0].elapsed_s < 30
    assert proc.poll() is not None and not folder.exists() and not client._busy
