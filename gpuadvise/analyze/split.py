"""Independent jobs run on two CPUs: a share of them in a forked child (issue 31: the variant
traces of a kernel with several variants, one after another in one Python thread, while the
2-core machine's second CPU idled).

:func:`in_two` runs the jobs it is given, each a call without arguments that returns something
picklable: those at the indices ``theirs`` in a child made by ``os.fork`` (copy-on-write: nothing
imported, compiled or traced again) while this process runs the others, then takes the child's
results through a pipe. Every result lands at its job's index, so the caller merges them in the
same order as one process would: a job's result is the same wherever it ran (the callers' jobs
read only what the parent had made before the fork). A job the child does not return (it died,
it raised, its result does not pickle, it outlived :data:`CHILD_WAIT_FACTOR` times the parent's
own share) runs here afterwards, as it would have in one process; its exception, if any, is then
raised here.

One process (:func:`processes`) where the environment says so (``GPUADVISE_RULE_PROCESSES=1``,
the switch of the rules' split), where fork is missing, or where this process may run on one CPU
only. The child writes nothing to the terminal (no progress; its log records are sent back and
handled here, in order, after the parent's own), dies with the parent (``PR_SET_PDEATHSIG`` on
Linux; the parent kills it when it is interrupted), and ends with ``os._exit`` (no atexit hook,
no temporary folder of the parent's removed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import struct
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["CHILD_WAIT_FACTOR", "in_two", "processes"]

T = TypeVar("T")

ENV = "GPUADVISE_RULE_PROCESSES"

# how long the parent waits for the child's share once its own is done: this many times its own
# share's wall, at least CHILD_WAIT_MIN_S; past that the child is killed and its jobs run here (a
# child stuck on a lock another thread held at the fork costs time, never a result)
CHILD_WAIT_FACTOR = 4.0
CHILD_WAIT_MIN_S = 60.0

_HEADER = struct.Struct("<Q")


def processes() -> int:
    """2 where jobs may be split over two processes, else 1 (``GPUADVISE_RULE_PROCESSES=1``,
    no ``os.fork``, one CPU for this process)."""
    if os.environ.get(ENV, "").strip() == "1" or not hasattr(os, "fork"):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 else 1


def in_two(jobs: Sequence[Callable[[], T]], theirs: Sequence[int]) -> list[T]:
    """Every job's result, by index: those at ``theirs`` run in a forked child while this
    process runs the others (all here when :func:`processes` is 1, ``theirs`` is empty or the
    fork fails)."""
    mine = [i for i in range(len(jobs)) if i not in set(theirs)]
    child = _Child.start(jobs, sorted(set(theirs))) if theirs and processes() > 1 else None
    if child is None:
        return [job() for job in jobs]
    out: dict[int, T] = {}
    try:
        t0 = time.perf_counter()
        for i in mine:
            out[i] = jobs[i]()
        got, records = child.collect(
            max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * (time.perf_counter() - t0))
        )
    finally:
        child.end()
    for record in records:  # the child's log lines, after the parent's own
        logging.getLogger(record.name).handle(record)
    out.update(got)
    for i in range(len(jobs)):
        if i not in out:  # the child did not return it: as one process would have
            out[i] = jobs[i]()
    return [out[i] for i in range(len(jobs))]


class _Capture(logging.Handler):
    """The child's log records, kept to be sent to the parent (message formatted, no
    arguments or traceback objects: they need not pickle)."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            record.msg, record.args = record.getMessage(), None
            if record.exc_info:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            self.records.append(record)


class _Child:
    """A forked child running its jobs, sending ``(index, result)`` for each that returned and
    then its log records, each a pickle behind its length."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self.pid, self.fd = pid, read_fd

    @classmethod
    def start(cls, jobs: Sequence[Callable[[], Any]], theirs: Sequence[int]) -> _Child | None:
        try:
            r, w = os.pipe()
        except OSError:
            return None
        parent = os.getpid()
        try:
            # Python 3.12 warns on a fork with other threads alive: the callers fork once the
            # threads they started (the variants' compiles and SASS reads) are idle or done, and
            # the child touches none of them (it runs jobs on what they made)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # the child: never returns
            os.close(r)
            _child_main(jobs, theirs, w, parent)
        os.close(w)
        return cls(pid, r)

    def collect(self, wait_s: float) -> tuple[dict[int, Any], list[logging.LogRecord]]:
        """The results the child sent and its log records, read until it closes the pipe or
        ``wait_s`` has passed."""
        deadline = time.monotonic() + wait_s
        data = bytearray()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                break
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                break
            data += chunk
        got: dict[int, Any] = {}
        records: list[logging.LogRecord] = []
        at = 0
        while at + _HEADER.size <= len(data):
            (n,) = _HEADER.unpack_from(data, at)
            body = bytes(data[at + _HEADER.size : at + _HEADER.size + n])
            if len(body) < n:
                break  # cut short: the child died while writing it
            at += _HEADER.size + n
            try:
                kind, index, value = pickle.loads(body)
            except Exception:
                break
            if kind == "result":
                got[index] = value
            elif kind == "log":
                records = value
        return got, records

    def end(self) -> None:
        """The pipe closed, the child killed if still running, and reaped (no zombie)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(OSError):
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done == 0:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)


def _child_main(
    jobs: Sequence[Callable[[], Any]], theirs: Sequence[int], w: int, parent: int
) -> None:
    """The child's life: its jobs run, each result sent as it is done, then its log records;
    ``os._exit`` at the end, whatever happens (at once where ``parent`` died before the child
    asked to die with it)."""
    code = 0
    try:
        _die_with_parent()
        if os.getppid() != parent:
            raise SystemExit(1)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        root = logging.getLogger()
        capture = _Capture()
        for h in list(root.handlers):
            root.removeHandler(h)
        root.addHandler(capture)
        from gpuadvise.spec.progress import reporting

        with reporting(None), os.fdopen(w, "wb") as pipe:
            for i in theirs:
                try:
                    value = jobs[i]()
                    body = pickle.dumps(("result", i, value), pickle.HIGHEST_PROTOCOL)
                except BaseException:  # left for the parent, which runs it again
                    continue
                pipe.write(_HEADER.pack(len(body)) + body)
                pipe.flush()
            body = pickle.dumps(("log", -1, capture.records), pickle.HIGHEST_PROTOCOL)
            pipe.write(_HEADER.pack(len(body)) + body)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _die_with_parent() -> None:
    """The child killed when the parent dies (Linux's ``PR_SET_PDEATHSIG``; elsewhere the
    parent's :meth:`_Child.end` alone)."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
