"""The L2 model computed beside the rest of an analysis, in a forked child (issue 31's GPU goal).

Of the models, only the L2 model's reader (GA304) and the report need the L2 model, yet it was
the longest part of gather_rowmajor's trace stage (its interior probe, the synthesis and five
launch orders' replays: about 4 CPU-s on the 2-core machine, 3 s on the H200), and everything
after it waited. :class:`L2Behind` forks a child once the trace is made (it inherits the trace
copy-on-write, nothing is traced or imported again) that computes the L2 model and sends it
back pickled; meanwhile this process reconciles the trace, runs the other models and the rules
(those that read the L2 model last, here: :func:`gpuadvise.rules.evaluate.evaluate_rules`).
:meth:`L2Behind.result` waits for it. The child runs the same function on the same inputs as
this process would: the result is the same.

A child that cannot be made, that dies (killed, out of memory) or whose computation raised
leaves the model to this process: :meth:`L2Behind.result` then computes it here, as before
(and an exception is raised here, as it was). Asked in another process than the one that
started it (a forked rules child), the result is computed in that process.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuadvise.rules.split import ForkedShare

__all__ = ["CHILD_WAIT_S", "L2Behind"]

log = logging.getLogger(__name__)

CHILD_WAIT_S = 600.0
"""How long :meth:`L2Behind.result` waits for the child before it kills it and computes the
model itself (a child stuck on a lock another thread held at the fork costs time, never a
result)."""

_RAISED = "raised"  # the child's outcome when the computation raised (computed again here)


class L2Behind:
    """``compute()`` (the L2 model and its notes) run in a forked child from :meth:`start`;
    :meth:`result` its value. ``waited_s``: how long :meth:`result` waited for the child;
    ``child_cpu_s``: the child's CPU seconds (user and system) once reaped; ``computed_here``:
    whether this process computed it after all."""

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute
        self._share: ForkedShare | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._done = False
        self._value: Any = None
        self.waited_s = 0.0
        self.child_cpu_s = 0.0
        self.computed_here = False

    def start(self) -> L2Behind:
        """The child forked (or, where it cannot be, nothing: :meth:`result` computes)."""
        share = ForkedShare([0], self._in_child, lambda i, out: None)
        try:
            share.__enter__()
        except OSError:  # no pipe or no fork (out of processes, of memory)
            log.debug("the L2 model's child could not start", exc_info=True)
            return self
        share.wait_s = CHILD_WAIT_S
        self._share = share
        return self

    def _in_child(self, i: int) -> Any:
        _one_malloc_arena()
        try:
            return ("ok", self._compute())
        except MemoryError:
            raise  # the child ends: computed again here
        except Exception:  # noqa: BLE001 - raised again here, by the same computation
            return (_RAISED, None)

    def result(self) -> Any:
        """``compute()``'s value: the child's, waited for, or computed here."""
        if os.getpid() != self._pid:  # a forked rules child: the reader thread is not here
            return self._compute()
        with self._lock:
            if not self._done:
                self._value = self._wait()
                self._done = True
                self._compute = _spent
            return self._value

    def _wait(self) -> Any:
        share, self._share = self._share, None
        got: Any = None
        if share is not None:
            t0 = time.perf_counter()
            try:
                share.__exit__(None, None, None)
            finally:
                self.waited_s = time.perf_counter() - t0
                self.child_cpu_s = share.usage.get("cpu_s", 0.0)
            got = share.done.get(0)
        if isinstance(got, tuple) and len(got) == 2 and got[0] == "ok":
            return got[1]
        self.computed_here = True
        return self._compute()

    def close(self) -> None:
        """The child killed and reaped when no result was asked for (an interrupted
        analysis)."""
        share, self._share = self._share, None
        if share is not None:
            with contextlib.suppress(Exception):
                share.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)


_M_ARENA_MAX = -8  # glibc's mallopt parameter


def _one_malloc_arena() -> None:
    """In the child: the replays' threads allocate from one glibc arena (where the libc has
    ``mallopt``; elsewhere nothing). The L2 model keeps the memory its arrays free for the next
    ones (:func:`gpuadvise.ptx.emulator.malloc_tuned`), and each thread's own arena kept its
    own: the 8K gather's child peaked at 1.2 GB against 0.75 GB without the kept memory, and
    0.92-0.96 GB with one arena (the parent's threads' arenas, inherited, still serve some).
    The child ends with the model: nothing to restore."""
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        pass


def _spent() -> Any:  # pragma: no cover - never called: the value is kept once made
    raise RuntimeError("the L2 model was computed already")
