"""``gpuadvise record``, without printing: run the program under the recorder, then turn the
raw recording into cases (:mod:`gpuadvise.record.cases`) and ``summary.json``.

Everything is written under ``out``: the raw recording (``raw/<pid>/``, the injection library
built for the run under ``raw/`` and removed after it), the cases and the summary. The program
runs with the terminal's stdin, stdout and stderr, its own working folder and environment
(plus the recorder's variables). Its exit status is reported, not turned into ours: a program
that fails or crashes (a signal) still gives the cases recorded until then.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuadvise.errors import Interrupted, UsageError
from gpuadvise.record import launcher
from gpuadvise.record.cases import CaseSummary, KernelSummary, write_cases

__all__ = ["DEFAULT_OUT", "RecordResult", "choose_out", "record", "recorder_missing"]

DEFAULT_OUT = "gpuadvise-record"


@dataclass
class RecordResult:
    command: list[str]
    out: Path
    exit_code: int
    signal: int | None
    wall_s: float
    callback_s: float
    launches: int
    snapshots: int
    snapshot_bytes: int
    processes: int
    unfinished: int  # processes that ended without the recorder's exit hook (a crash, os._exit)
    kernels: list[KernelSummary]
    cases: list[CaseSummary]
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def overhead_fraction(self) -> float:
        return self.callback_s / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "command": self.command,
            "out": str(self.out),
            "exit_code": self.exit_code,
            "signal": self.signal,
            "wall_s": self.wall_s,
            "overhead": {
                "callback_s": self.callback_s,
                "fraction_of_wall": self.overhead_fraction,
            },
            "launches": self.launches,
            "snapshots": self.snapshots,
            "snapshot_bytes": self.snapshot_bytes,
            "processes": self.processes,
            "unfinished_processes": self.unfinished,
            "kernels": [k.to_dict() for k in self.kernels],
            "cases": [c.to_dict() for c in self.cases],
            "errors": self.errors,
            "notes": self.notes,
        }


def recorder_missing() -> str | None:
    """Why this Python cannot record (None: CUPTI's bindings and the driver's are here)."""
    for module, what in (("cupti", "cupti-python"), ("cuda.bindings", "cuda-bindings")):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{what} is not installed"
    return None


def choose_out(out: str | None) -> Path:
    """The output folder: ``out`` when given (it must be new or empty), else the first of
    ``gpuadvise-record``, ``gpuadvise-record-2`` ... that does not exist."""
    if out is not None:
        path = Path(out)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise UsageError(
                f"--out {out} already exists and is not an empty folder",
                "give a new folder (nothing is written outside it)",
            )
        return path
    n = 1
    while True:
        path = Path(DEFAULT_OUT if n == 1 else f"{DEFAULT_OUT}-{n}")
        if not path.exists():
            return path
        n += 1


def record(
    command: Sequence[str],
    out: Path,
    kernel: str | None = None,
    max_per_kernel: int = 2,
    max_snapshot_bytes: int = 1 << 30,
    sources: Sequence[Path] = (),
) -> RecordResult:
    """Run ``command`` under the recorder and write the cases under ``out``."""
    import re

    if kernel is not None:
        try:
            re.compile(kernel)
        except re.error as exc:
            raise UsageError(f"--kernel {kernel!r} is not a regular expression: {exc}",
                             "e.g. --kernel 'gemm|reduce'") from None  # fmt: skip
    if max_per_kernel < 0:
        raise UsageError(f"--max-per-kernel {max_per_kernel} is negative", "give 0 or more")
    why = recorder_missing()
    if why is not None:
        raise UsageError(
            f"the recorder needs NVIDIA's CUPTI Python bindings: {why}",
            "pip install 'gpuadvise[record]'",
        )
    for s in sources:
        if not s.exists():
            raise UsageError(f"--source {s}: no such file or folder", "check the path")
    plan = launcher.plan_launch(list(command))
    if not plan.python and shutil.which(plan.argv[0]) is None and not Path(plan.argv[0]).is_file():
        raise UsageError(f"{plan.argv[0]}: command not found", "check the command after --")
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "raw"
    raw.mkdir(exist_ok=True)
    notes: list[str] = []
    build = raw / "inject"
    build.mkdir(exist_ok=True)
    libpython = launcher.find_libpython()
    try:
        injection: Path | None = launcher.build_injection(build)
    except UsageError as exc:
        if not plan.python:
            raise
        injection = None
        notes.append(f"child processes that are not Python are not recorded: {exc.one_line()}")
    if not plan.python and libpython is None:
        raise UsageError(
            "recording a program that is not Python embeds this Python in it, and its shared "
            "library (libpython) was not found",
            "install it (Debian: apt-get install libpython3-dev) or run gpuadvise from a Python "
            "built with --enable-shared",
        )
    env = launcher.environment(
        dict(os.environ),
        out.resolve(),
        kernel,
        max_per_kernel,
        max_snapshot_bytes,
        injection,
        libpython,
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(plan.argv, env=env)
    try:
        rc = proc.wait()
    except (Interrupted, KeyboardInterrupt):
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    finally:
        shutil.rmtree(build, ignore_errors=True)
    wall = time.perf_counter() - t0
    kernels, cases, procs = write_cases(out, sources, kernel)
    over = [p.overhead for p in procs]
    result = RecordResult(
        command=list(command),
        out=out,
        exit_code=rc if rc >= 0 else 128 - rc,
        signal=-rc if rc < 0 else None,
        wall_s=wall,
        callback_s=sum(o.get("callback_ns", 0) for o in over) / 1e9,
        launches=sum(max(sum(p.shapes.values()), len(p.launches)) for p in procs),
        snapshots=sum(int(o.get("snapshots", 0)) for o in over),
        snapshot_bytes=sum(int(o.get("snapshot_bytes", 0)) for o in over),
        processes=len(procs),
        unfinished=sum(1 for p in procs if not p.finished),
        kernels=kernels,
        cases=cases,
        errors=[e for o in over for e in o.get("errors", [])],
        notes=notes,
    )
    if not procs:
        result.notes.append(
            "no process of the program initialised CUDA under the recorder: nothing was recorded"
        )
    (out / "summary.json").write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
    return result
