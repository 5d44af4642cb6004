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

With ``claimed``, the child's share is a queue rather than a list
(:class:`gpuadvise.rules.split.Claims`, as the rules take theirs): each process takes the next
of those jobs when it is done with its last, so that a long job in one leaves the others to the
other (llm.c layernorm_backward's three variants, 12.5, 6.1 and 12.5 CPU-s: a fixed split of
every other one gave this process 25 s and the child 6).

The child is the rules' (:class:`gpuadvise.rules.split.ForkedShare`: no terminal output, dies
with this process, ``os._exit`` at its end); its log records are handled here, in order, after
this process's own. One process where the rules would run in one
(:func:`gpuadvise.rules.split.rule_processes`: ``GPUADVISE_RULE_PROCESSES=1``, a batch whose
workers fill the CPUs, no ``os.fork``, one CPU for this process).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["in_two", "processes"]

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


def in_two(
    jobs: Sequence[Callable[[], T]], theirs: Sequence[int], claimed: bool = False
) -> list[T]:
    """Every job's result, by index: those at ``theirs`` run in a forked child while this
    process runs the others (all here when :func:`processes` is 1, ``theirs`` is empty or the
    fork fails). ``claimed``: those at ``theirs`` are taken, in that order, by whichever
    process is free (:class:`~gpuadvise.rules.split.Claims`): this process runs its own jobs
    before the first of them, then takes from the queue until it is empty, then runs the rest
    of its own."""
    from gpuadvise.rules.split import CHILD_WAIT_FACTOR, CHILD_WAIT_MIN_S, Claims, ForkedShare

    share = list(dict.fromkeys(theirs)) if claimed else sorted(set(theirs))
    if not share or processes() < 2:
        return [job() for job in jobs]
    mine = [i for i in range(len(jobs)) if i not in set(share)]
    out: dict[int, T] = {}
    try:
        queue = Claims(share) if claimed else None
    except OSError:  # (no pipe, or more positions than it holds: one process)
        return [job() for job in jobs]
    child = ForkedShare(
        share if queue is None else queue,
        lambda i: _attempt(jobs[i]),
        lambda i, o: None,
        forward_logs=True,
    )
    try:
        child.__enter__()
    except OSError:  # no pipe or no fork: one process
        if queue is not None:
            queue.close()
        return [job() for job in jobs]
    with contextlib.ExitStack() as stack:
        stack.push(child.__exit__)  # (waits for the child; kills it on an exception)
        t0 = time.perf_counter()
        if queue is None:
            for i in mine:
                out[i] = jobs[i]()
        else:
            stack.callback(queue.close)
            lead = [i for i in mine if i < share[0]]
            for i in lead:
                out[i] = jobs[i]()
            for i in queue:
                out[i] = jobs[i]()
            queue.close()
            for i in mine[len(lead) :]:
                out[i] = jobs[i]()
        child.wait_s = max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * (time.perf_counter() - t0))
    for record in child.records:  # the child's log lines, after the parent's own
        logging.getLogger(record.name).handle(record)
    for i, (ok, value) in child.done.items():
        if ok and i not in out:
            out[i] = value
    for i in range(len(jobs)):
        if i not in out:  # the child did not return it: as one process would have
            out[i] = jobs[i]()
    return [out[i] for i in range(len(jobs))]
