"""Independent jobs run on two CPUs: a share of them in a forked child (issue 31: the variant
traces of a kernel with several variants, one after another in one Python thread, while the
2-core machine's second CPU idled).

:func:`in_two` runs the jobs it is given, each a call without arguments that returns something
picklable: those at the indices ``theirs`` in a child made by ``os.fork`` (copy-on-write: nothing
imported, compiled or traced again) while this process runs the others, then takes the child's
results. Every result lands at its job's index, so the caller merges them in the same order as
one process would: a job's result is the same wherever it ran (the callers' jobs read only what
the parent had made before the fork). A job the child does not return (it died, it raised, its
result does not pickle, it outlived :data:`~gpuadvise.rules.split.CHILD_WAIT_FACTOR` times the
parent's own share) runs here afterwards, as it would have in one process; its exception, if
any, is then raised here.

The child is the rules' (:class:`gpuadvise.rules.split.ForkedShare`: no terminal output, dies
with this process, ``os._exit`` at its end); its log records are handled here, in order, after
this process's own. One process where the rules would run in one
(:func:`gpuadvise.rules.split.rule_processes`: ``GPUADVISE_RULE_PROCESSES=1``, a batch whose
workers fill the CPUs, no ``os.fork``, one CPU for this process).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["InChild", "in_child", "in_two", "processes"]

T = TypeVar("T")


def processes() -> int:
    """2 where jobs may be split over two processes, else 1 (the rules' switch and limits,
    :func:`gpuadvise.rules.split.rule_processes`)."""
    from gpuadvise.rules.split import rule_processes

    return rule_processes()


def _attempt(job: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, the job's result), or (False, None) when it raised: left to the parent, which
    runs it again (and raises there)."""
    try:
        return True, job()
    except Exception:
        return False, None


class InChild(Generic[T]):
    """``jobs`` running in a forked child from now on (:func:`in_child`) while this process
    goes on; :meth:`results` waits for it and takes what it returned, :meth:`close` (or an
    exception inside ``with``) ends it unwaited for."""

    def __init__(self, jobs: Sequence[Callable[[], T]]) -> None:
        from gpuadvise.rules.split import ForkedShare

        self._jobs = list(jobs)
        self._child = ForkedShare(
            range(len(self._jobs)),
            lambda i: _attempt(self._jobs[i]),
            lambda i, o: None,
            forward_logs=True,
        )
        self.started = time.perf_counter()
        self._child.__enter__()  # (OSError: no pipe or no fork)
        self._open = True

    def results(self, wait_s: float) -> dict[int, T]:
        """The jobs' results the child returned, by position, once it has ended or outlived
        ``wait_s`` (then killed); its log records handled here. A job it did not return (it
        died, raised, sent what does not pickle) is absent: the caller runs it."""
        if self._open:
            self._open = False
            self._child.wait_s = wait_s
            self._child.__exit__(None, None, None)
            for record in self._child.records:  # the child's log lines, after this process's
                logging.getLogger(record.name).handle(record)
        return {i: value for i, (ok, value) in self._child.done.items() if ok}

    def close(self) -> None:
        """The child killed and reaped unless :meth:`results` waited for it."""
        if self._open:
            self._open = False
            self._child.__exit__(None, _Abandoned(), None)

    def __enter__(self) -> InChild[T]:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.close()


class _Abandoned(Exception):
    """What :meth:`InChild.close` tells the child's :class:`~gpuadvise.rules.split.ForkedShare`:
    it is not waited for."""


def in_child(jobs: Sequence[Callable[[], T]]) -> InChild[T] | None:
    """``jobs`` started in a forked child (:class:`InChild`); None where :func:`processes` is
    1, there are none, or the fork fails (the caller runs them itself)."""
    if not jobs or processes() < 2:
        return None
    try:
        return InChild(jobs)
    except OSError:  # no pipe or no fork: one process
        return None


def in_two(jobs: Sequence[Callable[[], T]], theirs: Sequence[int]) -> list[T]:
    """Every job's result, by index: those at ``theirs`` run in a forked child while this
    process runs the others (all here when :func:`processes` is 1, ``theirs`` is empty or the
    fork fails)."""
    from gpuadvise.rules.split import CHILD_WAIT_FACTOR, CHILD_WAIT_MIN_S

    share = sorted(set(theirs))
    child = in_child([jobs[i] for i in share]) if share else None
    if child is None:
        return [job() for job in jobs]
    out: dict[int, T] = {}
    with child:  # (killed on an exception)
        t0 = time.perf_counter()
        for i in range(len(jobs)):
            if i not in set(share):
                out[i] = jobs[i]()
        wait_s = max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * (time.perf_counter() - t0))
        out.update({share[j]: value for j, value in child.results(wait_s).items()})
    for i in range(len(jobs)):
        if i not in out:  # the child did not return it: as one process would have
            out[i] = jobs[i]()
    return [out[i] for i in range(len(jobs))]
