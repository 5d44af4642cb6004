"""The rules run in forked processes, where a GPU measures and there are many CPUs (issue 31:
``analyze --measure`` at half of ``ncu --set full``'s wall on the GPU machine's 16 CPUs).

Each rule reads the analysis (its facts, models and services) and nothing another rule wrote:
the rules are independent. After the models, this process forks ``workers`` children (the
analysis shared copy-on-write); each takes the next rule not taken (a shared counter), runs it
exactly as :func:`gpuadvise.rules.evaluate.evaluate_rules` does
(:func:`~gpuadvise.rules.evaluate.run_rule`) and sends its outcome back. The outcomes are put
in the rules' order and made one run (:func:`~gpuadvise.rules.evaluate.assemble_run`): the same
findings, ranked the same. ``on_findings`` is told of each rule's findings as they arrive.

A rule whose outcome does not come back (a child that died, an outcome that does not pickle, no
word from any child for :data:`STALL_S`) is run here afterwards, as before: the run is the same
whatever the children do, only its wall changes.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuadvise.rules.config import Config
    from gpuadvise.rules.context import RuleContext
    from gpuadvise.rules.evaluate import RuleOutcome, RulesRun
    from gpuadvise.rules.findings import Finding
    from gpuadvise.rules.registry import Registry
    from gpuadvise.rules.rule import Rule

log = logging.getLogger(__name__)

FORK_CPUS = 8
"""The CPUs from which ``analyze --measure`` runs its rules in forked children."""
WORKERS = 6
"""Children at most (the rules of kernels/' transposes and gathers: a few of 0.2-1 s each)."""
STALL_S = 60.0
"""Seconds without an outcome from any child after which the rules left are run here."""


def fork_workers(cpus: int | None = None) -> int:
    """The children to run the rules in on this machine (0: run them here), where forking is
    possible."""
    import multiprocessing

    cpus = os.cpu_count() if cpus is None else cpus
    if (cpus or 1) < FORK_CPUS or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return min(WORKERS, (cpus or 1) // 2)


def evaluate_rules_forked(
    context: RuleContext,
    config: Config | None,
    registry: Registry,
    workers: int,
    on_findings: Callable[[Sequence[Finding]], None] | None = None,
) -> RulesRun:
    """:func:`gpuadvise.rules.evaluate.evaluate_rules` with the rules run in ``workers`` forked
    children: the same run."""
    import multiprocessing
    from multiprocessing.connection import wait

    from gpuadvise.ptx.emulator import malloc_tuned
    from gpuadvise.rules.evaluate import assemble_run, run_rule

    if config is not None:
        registry.check_config(config)
    rules = registry.selected(config)
    outcomes: dict[int, RuleOutcome | None] = {}
    _shared_first(context)
    mp = multiprocessing.get_context("fork")
    counter = mp.Value("i", 0)
    procs, conns = [], []
    for _ in range(max(1, min(workers, len(rules)))):
        recv, send = mp.Pipe(duplex=False)
        p = mp.Process(
            target=_child, args=(rules, context, registry, config, counter, send), daemon=True
        )
        p.start()
        send.close()
        procs.append(p)
        conns.append(recv)
    try:
        last = time.monotonic()
        live: list[Any] = list(conns)
        while live and len(outcomes) < len(rules):
            ready = wait(live, timeout=max(0.0, last + STALL_S - time.monotonic()))
            if not ready:
                log.debug("rules: no word from the children for %.0f s", STALL_S)
                break
            for ready_one in ready:
                conn: Any = ready_one
                try:
                    got: tuple[int, RuleOutcome | None] = conn.recv()
                except (EOFError, OSError):
                    live.remove(conn)
                    continue
                last = time.monotonic()
                i, outcome = got
                outcomes[i] = outcome
                if outcome is not None and on_findings is not None:
                    if outcome.findings and outcome.found:
                        on_findings(outcome.findings)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join()
        for conn in conns:
            conn.close()
    left = [i for i in range(len(rules)) if outcomes.get(i) is None]
    if left:
        log.debug("rules run here after the children: %s", ", ".join(rules[i].id for i in left))
        with malloc_tuned():
            for i in left:
                here = run_rule(rules[i], context, registry, config)
                outcomes[i] = here
                if on_findings is not None and here.findings and here.found:
                    on_findings(here.findings)
    return assemble_run(rules, [outcomes[i] for i in range(len(rules))])  # type: ignore[misc]


def _shared_first(context: RuleContext) -> None:
    """What the rules of a run share, made before the fork, so that each child has it (copy on
    write) instead of making it again: the trace's lane-level view, the reduction trees. Each is
    what the first rule to read it would make (none is made without a trace)."""
    from gpuadvise.rules.context import ModelUnavailable

    for name in ("trace_view", "reduction_trees"):
        try:
            getattr(context, name)
        except ModelUnavailable:
            pass
        except Exception:  # the rule that reads it reports it
            log.debug("%s not made before the fork", name, exc_info=True)


def _child(
    rules: Sequence[Rule],
    context: RuleContext,
    registry: Registry,
    config: Config | None,
    counter: Any,
    send: Any,
) -> None:
    """A child's loop: the next rule not taken, run, its outcome sent (None when it does not
    pickle: the parent runs that rule itself)."""
    from gpuadvise.ptx.emulator import malloc_tuned
    from gpuadvise.rules.evaluate import run_rule
    from gpuadvise.spec.progress import reporting

    with reporting(None), malloc_tuned():  # no progress drawn from a child
        while True:
            with counter.get_lock():
                i = counter.value
                counter.value += 1
            if i >= len(rules):
                break
            outcome = run_rule(rules[i], context, registry, config)
            try:
                send.send((i, outcome))
            except Exception:
                send.send((i, None))
    send.close()
