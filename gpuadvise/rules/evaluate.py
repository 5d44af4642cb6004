"""The run of the enabled rules on one analysed kernel launch (:func:`evaluate_rules`).

A rule that raises becomes one error row (a :class:`Finding` with ``error`` set) and the other
rules go on; a rule whose model cannot be computed (the emulator cannot run this kernel, no source
for the kernel) is skipped with a note (:class:`SkippedRule`). Every estimate goes through the
launch model's check (:func:`finding_estimate`) and :func:`no_slowdown`; the findings come out
ranked (:func:`gpuadvise.rules.ranking.rank_findings`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.devices import memory_rates
from gpuadvise.ptx.emulator import malloc_tuned
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.estimates import launch_traffic_alone, model_check
from gpuadvise.rules.findings import Estimate, Finding, Variant
from gpuadvise.rules.ranking import rank_findings
from gpuadvise.rules.registry import Registry, load_registry
from gpuadvise.rules.rule import Rule
from gpuadvise.rules.split import (
    CHILD_WAIT_FACTOR,
    CHILD_WAIT_MIN_S,
    FORK_AFTER_CPU_S,
    RULE_CPU_S,
    UNKNOWN_RULE_CPU_S,
    Claims,
    ForkedShare,
)
from gpuadvise.rules.suppress import suppress

if TYPE_CHECKING:
    from gpuadvise.rules.config import Config

log = logging.getLogger(__name__)

__all__ = [
    "RulesRun",
    "SkippedRule",
    "claim_order",
    "evaluate_rules",
    "finding_estimate",
    "incomplete_line",
    "models_needed",
    "models_of",
    "run_order",
    "no_slowdown",
    "shared_pieces",
    "skip_all",
    "skipped_notes",
]


@dataclass(frozen=True)
class SkippedRule:
    """A selected rule that did not run: a model it needs is unavailable (``reason``, and
    ``why`` in a few words), or the time budget ran out first. ``deliberate``: the user turned
    that model off (``--no-trace``), which leaves the analysis complete."""

    rule: str
    name: str
    reason: str
    why: str
    deliberate: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "reason": self.reason,
            "why": self.why,
            "deliberate": self.deliberate,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SkippedRule:
        return cls(
            str(d["rule"]),
            str(d["name"]),
            str(d["reason"]),
            str(d.get("why") or d["reason"]),
            bool(d.get("deliberate", False)),
        )


@dataclass(frozen=True)
class RulesRun:
    """The result of :func:`evaluate_rules`: ranked findings (error rows included), the rules
    run, notes (one per distinct reason rules were skipped for, naming them), and the rules
    skipped (``skipped``: selected, in ``rules_run``, but not evaluated). ``timings_s``: seconds
    per rule id (detect, estimate and transform of its findings); ``cpu_s``: the analysing
    thread's CPU seconds in them (``time.thread_time``, which a loaded machine does not
    stretch as it stretches the wall: HeCBench nw's GA103, 13-17 CPU-s, took 49 s of wall in
    a corpus run on a 2-CPU machine that other analyses shared, load 6).

    The run is :attr:`incomplete` when a rule was skipped for a reason the user did not choose
    (the trace stopped, the time budget ran out): :attr:`incomplete_text` says so in one line,
    every report format shows it, and ``analyze --fail-on`` fails on it."""

    findings: tuple[Finding, ...]
    rules_run: tuple[str, ...]
    notes: tuple[str, ...] = ()
    timings_s: Mapping[str, float] = field(default_factory=dict)
    skipped: tuple[SkippedRule, ...] = ()
    cpu_s: Mapping[str, float] = field(default_factory=dict)
    # the forked child's part (``processes`` 2): the rules queued after the fork, which both
    # processes took from (``queued``), and those the child ran (``rules``), its CPU seconds
    # (user and system: its copied pages' faults too) and peak RSS in MB (``cpu_s``,
    # ``peak_rss_mb``); empty without one
    child: Mapping[str, Any] = field(default_factory=dict)

    @property
    def incomplete(self) -> tuple[SkippedRule, ...]:
        """The rules skipped for a reason the user did not choose."""
        return tuple(s for s in self.skipped if not s.deliberate)

    @property
    def evaluated(self) -> tuple[str, ...]:
        """The rules that ran (``rules_run`` less those skipped)."""
        gone = {s.rule for s in self.skipped}
        return tuple(r for r in self.rules_run if r not in gone)

    @property
    def incomplete_text(self) -> str | None:
        """``incomplete: N rules skipped (why)``, or None when no rule was skipped but by the
        user's choice."""
        return incomplete_line(self.incomplete)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "rules_run": list(self.rules_run),
            "notes": list(self.notes),
            "skipped_rules": [s.to_dict() for s in self.skipped],
            "incomplete": self.incomplete_text,
        }


def incomplete_line(skipped: Sequence[SkippedRule]) -> str | None:
    """``incomplete: 8 rules skipped (the trace stopped: an out-of-bounds access)`` for the
    rules ``skipped`` (each distinct reason once), or None when there are none."""
    if not skipped:
        return None
    whys = list(dict.fromkeys(s.why for s in skipped))
    n = len(skipped)
    return f"incomplete: {n} rule{'' if n == 1 else 's'} skipped ({'; '.join(whys)})"


def skipped_notes(skipped: Sequence[SkippedRule]) -> tuple[str, ...]:
    """One note per distinct reason rules were skipped for, naming the rules: a reason shared
    by eight rules (the trace stopped) is said once, not eight times."""
    by_reason: dict[str, list[SkippedRule]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s)
    return tuple(
        f"{', '.join(f'{s.rule} ({s.name})' for s in rules)} not evaluated: {reason}"
        for reason, rules in by_reason.items()
    )


def skip_all(rules: Sequence[Rule], reason: str, why: str, notes: Sequence[str] = ()) -> RulesRun:
    """A run in which none of ``rules`` was evaluated, for ``reason`` (the time budget ran out
    before the rules ran)."""
    skipped = tuple(SkippedRule(r.id, r.name, reason, why) for r in rules)
    return RulesRun((), tuple(r.id for r in rules), (*notes, reason), skipped=skipped)


def models_needed(
    config: Config | None = None, registry: Registry | None = None, variant_points: bool = False
) -> set[str]:
    """The models the enabled rules read (their ``models``): the pipeline computes those
    (``gpuadvise.analyze.models``), and traces the kernel only when one is in
    :data:`TRACE_MODELS`. ``variant_points``: the trace too where an enabled rule's point comes
    from its variant's own trace (``point_from_variant_trace``: the kernel's trace is the other
    side of that point; GA103 reads the occupancy alone), as ``gpuadvise analyze`` makes them."""
    if registry is None:
        registry = load_registry(config.rules_dirs if config is not None else ())
    rules = registry.selected(config)
    out = models_of(rules)
    if variant_points and any(r.point_from_variant_trace for r in rules):
        out.add("trace")
    return out


def models_of(rules: Iterable[Rule]) -> set[str]:
    """The models ``rules`` declare."""
    return {m for r in rules for m in r.models}


def _error_row(rule: Rule, ctx: RuleContext, stage: str, exc: BaseException) -> Finding:
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(tb):
        if rule.origin is not None and Path(frame.filename) == rule.origin:
            where = f" at {Path(frame.filename).name}:{frame.lineno}"
            break
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Finding(
        rule=rule.id,
        name=rule.name,
        title=rule.title,
        severity="error",
        message=f"rule {rule.id} ({rule.name}) failed in {stage}{where}: {text}",
        file=None,
        line=None,
        kernel=ctx.kernel_name,
        error="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


def finding_estimate(rule: Rule, ctx: RuleContext, finding: Finding) -> Estimate | None:
    """The estimate :func:`evaluate_rules` gives ``finding`` before :func:`no_slowdown`: the
    rule's ``estimate``, run through the launch model's check
    (:func:`gpuadvise.rules.estimates.model_check`: a speedup of the kernel's work made a speedup
    of the launch, whose floor stays). The one path to it: a finding read back from JSON gets the
    same from its details."""
    est = rule.estimate(ctx, finding)
    if est is not None:
        est = model_check(ctx, est)
    return est


def no_slowdown(f: Finding) -> Finding:
    """A finding whose estimate is below 1: the model predicts the change makes the launch
    slower, which is a reason not to recommend it, never a speedup. The estimate becomes
    ``none`` (its method says what the model predicted) and a warning becomes a note."""
    est = f.estimated_speedup
    if est is None or est.speedup is None or est.speedup >= 1.0:
        return f
    slower = 1.0 / est.speedup if est.speedup > 0 else float("inf")
    bound = "at best" if est.kind == "upper-bound" else "about"
    est = Estimate(
        None,
        "none",
        f"no speedup: the model predicts the change makes the launch {bound} {slower:.2f}x "
        f"slower ({est.speedup:.3g}x), so it is not recommended. {est.method}",
        {**est.inputs, "predicted_ratio": est.speedup, "predicted_kind": est.kind},
    )
    return replace(
        f, estimated_speedup=est, severity="note" if f.severity == "warning" else f.severity
    )


@dataclass(frozen=True)
class _Outcome:
    """One rule's part of a run: its findings (after estimate, transform and
    :func:`no_slowdown`; or its one error row), or why it was skipped; its wall and the CPU of
    the thread that ran it. ``told``: ``on_findings`` hears of the findings (not of an error
    row). Pickled from the rules' child process (:mod:`gpuadvise.rules.split`)."""

    findings: tuple[Finding, ...] = ()
    skipped: SkippedRule | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    told: bool = False


def _run_rule(
    rule: Rule,
    context: RuleContext,
    registry: Registry,
    config: Config | None,
    fatal: tuple[type[BaseException], ...] = (),
) -> _Outcome:
    """``rule`` on ``context``: detect, then estimate and transform each finding. A rule that
    raises is one error row, unless it raised one of ``fatal`` (raised on)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    ctx = context.for_rule(registry.options_for(rule, config), registry.severity_for(rule, config))
    stage = "detect"
    found: tuple[Finding, ...] = ()
    skipped = None
    told = False
    try:
        detected = list(rule.detect(ctx))
        done = []
        for f in detected:
            stage = "estimate"
            est = finding_estimate(rule, ctx, f)
            stage = "transform"
            var = rule.transform(ctx, f)
            done.append(no_slowdown(replace(f, estimated_speedup=est, variant=var)))
        found, told = tuple(done), True
    except ModelUnavailable as exc:
        skipped = SkippedRule(rule.id, rule.name, exc.message, exc.why, exc.deliberate)
    except fatal:
        raise
    except Exception as exc:
        log.debug("rule %s failed", rule.id, exc_info=True)
        found = (_error_row(rule, ctx, stage, exc),)
    return _Outcome(found, skipped, time.perf_counter() - t0, time.thread_time() - c0, told)


def _traced_after(rule: Rule) -> bool:
    """Whether ``rule``'s findings' variants (or proxies) are traced after the rules: its
    findings start their compiles (``on_findings``), so it runs first."""
    return bool(
        getattr(rule, "point_from_variant_trace", False)
        or getattr(rule, "proxy_point_from_trace", False)
    )


def _compiles_once_told(rule: Rule, outcome: _Outcome) -> bool:
    """Whether telling ``outcome`` (``rule``'s, run before the fork) starts a compile that the
    analysis waits for: a finding with a variant of a rule whose variants are traced after the
    rules, or with a proxy (and an estimate) of one whose proxies are (:func:`_traced_after`:
    ``analyze`` compiles them from ``on_findings``,
    :meth:`gpuadvise.analyze.ahead.VariantsAhead.told`)."""
    if not outcome.told:
        return False
    for f in outcome.findings:
        if f.variant is None or f.is_error:
            continue
        if getattr(rule, "point_from_variant_trace", False):
            return True
        if getattr(rule, "proxy_point_from_trace", False) and f.variant.proxy is not None:
            if f.estimated_speedup is not None:
                return True
    return False


def run_order(rules: Sequence[Rule]) -> list[int]:
    """The positions of ``rules`` in the order they run: those whose variants are traced after
    the rules first (:func:`_traced_after`: their nvcc starts as early as it can), then the
    others; each group the cheapest first (:data:`~gpuadvise.rules.split.RULE_CPU_S`, then
    the registry's order), so that the rules run before a fork
    (:data:`~gpuadvise.rules.split.FORK_AFTER_CPU_S`) are the cheap ones, and the costly
    ones are split. The results do not depend on it: they are merged in the registry's
    order."""
    return sorted(
        range(len(rules)),
        key=lambda i: (
            not _traced_after(rules[i]),
            RULE_CPU_S.get(rules[i].id, UNKNOWN_RULE_CPU_S),
            i,
        ),
    )


def claim_order(rules: Sequence[Rule], positions: Sequence[int]) -> list[int]:
    """``positions`` in the order the two processes take them after a fork (:class:`~gpuadvise.
    rules.split.Claims`): those whose variants are traced after the rules first, as in
    :func:`run_order`, then the others; each group the heaviest first by
    :data:`~gpuadvise.rules.split.RULE_CPU_S` (the longest first, so that the last rules
    taken, which one process may run while the other is done, are the short ones), then the
    registry's order."""
    return sorted(
        positions,
        key=lambda i: (
            not _traced_after(rules[i]),
            -RULE_CPU_S.get(rules[i].id, UNKNOWN_RULE_CPU_S),
            i,
        ),
    )


def shared_pieces(context: RuleContext, rules: Sequence[Rule]) -> None:
    """What both processes of a split would build after the fork, built once before it (their
    pages then shared, copy-on-write), where one of ``rules`` reads the trace: the trace's view
    (:meth:`RuleContext.trace_view`, made by the first rule that asks for it; nearly every rule
    that reads the trace does), its indexes of the lanes by instruction and of the
    (instruction, buffer) pairs (:meth:`~gpuadvise.trace.view.TraceView.build_indexes`, after
    the traffic: the layout rules' ``access`` and ``buffers_at`` read them in both processes)
    and, where the device has memory rates, the launch's traffic
    (:func:`~gpuadvise.rules.estimates.launch_traffic_alone`: every estimate's "before", which
    :func:`model_check` reads for each finding with a speedup, so that each process with a
    finding built it after the fork, 0.4-1.2 CPU-s on the slowest kernels; its lane-sized
    sector sets not kept). Nothing when the trace is unavailable; a piece that fails to build
    is left to the rules (each then fails as in one process)."""
    if not any("trace" in r.models for r in rules):
        return
    try:
        view = context.trace_view
    except ModelUnavailable:
        return
    except Exception:  # the rules that ask for it again fail as they would in one process
        log.debug("the trace's view did not build before the fork", exc_info=True)
        return
    device = context.device
    if memory_rates(device) is not None:  # (model_check reads no traffic otherwise)
        try:
            launch_traffic_alone(device, view)  # kept per view and device
        except Exception:
            log.debug("the launch's traffic did not build before the fork", exc_info=True)
    try:
        # (after the traffic, whose temporaries are the parent's peak before the fork: the
        # index's int32 a lane not held through them)
        view.build_indexes()
    except Exception:
        log.debug("the view's indexes did not build before the fork", exc_info=True)


def _variants_ahead(
    rules: Sequence[Rule], context: RuleContext, registry: Registry, config: Config | None
) -> Iterator[Sequence[Variant]]:
    """Each of ``rules``' candidates named ahead of its findings (:meth:`Rule.variants_ahead`),
    where it names any; a rule that raises names none (its own run reports what failed)."""
    for rule in rules:
        ctx = context.for_rule(
            registry.options_for(rule, config), registry.severity_for(rule, config)
        )
        try:
            variants = tuple(rule.variants_ahead(ctx))
        except Exception:
            log.debug("rule %s named no variants ahead", rule.id, exc_info=True)
            continue
        if variants:
            log.debug("rule %s: %d variants named ahead of its models", rule.id, len(variants))
            yield variants


def _run_split(
    rules: Sequence[Rule],
    order: Sequence[int],
    run: Callable[..., _Outcome],
    outcome: Callable[..., _Outcome],
    outcomes: dict[int, _Outcome],
    tell: Callable[[_Outcome], None],
    prepare: Callable[[Sequence[int]], None] = lambda rest: None,
    last: Sequence[int] = (),
    ahead: Callable[[], None] = lambda: None,
    fork_when_told: bool = False,
) -> dict[str, Any]:
    """The rules at positions ``order`` over this process and a forked child
    (:mod:`gpuadvise.rules.split`); the child's usage (empty when none was forked). ``run``:
    a rule run here, its outcome kept (and told unless ``told=False``); ``outcome``: a rule's
    outcome alone (in the child); ``prepare(rest)``: what the rules ``rest`` left after the
    first ones share, built before the fork (:func:`shared_pieces`).

    This process runs them in ``order`` until they took :data:`~gpuadvise.rules.split.
    FORK_AFTER_CPU_S` of its CPU (the lazily built pieces of the trace's view they asked for
    are then the child's too); the rest, if two or more, are queued (:func:`claim_order`,
    :class:`~gpuadvise.rules.split.Claims`), ``prepare`` builds what they share, and a child
    is forked: each process takes the next
    rule from the queue when it is done with its last, until none is left. The findings of the
    rules before the fork are told after it: the variants' compile thread then starts after the
    fork, so it holds no lock the child could need. ``last``: rules this process runs after
    all the others it runs, never the child (those that read a model still being computed
    here: :attr:`~gpuadvise.rules.context.ModelResults.later`); ``ahead``: called once, where
    the findings of the rules before the fork are told (after the fork, when there is one).
    ``fork_when_told``: the fork comes as soon as a rule run before it has a finding whose
    variant is compiled once told (:func:`_compiles_once_told`), however little CPU the rules
    took so far: that compile (nvcc, then nvdisasm: about a second, on the other CPU) starts
    then, not once the next rules have run up to :data:`~gpuadvise.rules.split.
    FORK_AFTER_CPU_S` (or all of them, where they never take that much), and the rest is split
    as before."""
    c0 = time.thread_time()
    before: list[_Outcome] = []
    k = 0
    while k < len(order) and time.thread_time() - c0 < FORK_AFTER_CPU_S:
        before.append(run(order[k], told=False))
        k += 1
        if fork_when_told and _compiles_once_told(rules[order[k - 1]], before[-1]):
            break  # its variant's compile waits for the tell, which waits for the fork
    rest = list(order[k:])
    if len(rest) < 2:
        ahead()
        for out in before:
            tell(out)
        for i in [*rest, *last]:
            run(i)
        return {}
    prepare(rest)
    with contextlib.ExitStack() as stack:
        try:
            claims = Claims(claim_order(rules, rest))
        except OSError:  # no pipe (out of descriptors): all of them here
            log.debug("the rules' queue could not be made", exc_info=True)
            claims = None
        child = None
        if claims is not None:
            stack.callback(claims.close)
            child = ForkedShare(
                claims,
                # MemoryError ends the child (its rule left to this process), not the rule
                lambda i: outcome(i, (MemoryError,)),
                lambda i, out: tell(out),
            )
            try:
                child.__enter__()
            except OSError:  # no pipe or no fork (out of processes, of memory): all of them here
                log.debug("the rules' child could not start", exc_info=True)
                child = None
        ahead()
        for out in before:
            tell(out)
        if child is None or claims is None:
            for i in [*rest, *last]:
                run(i)
            return {}
        with contextlib.ExitStack() as waits:
            waits.push(child.__exit__)  # (waits for the child; kills it on an exception)
            t0 = time.perf_counter()
            for i in claims:
                run(i)
            for i in last:
                run(i)
            # a child stuck on a lock another thread held at the fork costs time, never a
            # result
            child.wait_s = max(CHILD_WAIT_MIN_S, CHILD_WAIT_FACTOR * (time.perf_counter() - t0))
    outcomes.update(child.done)
    usage: dict[str, Any] = {
        "queued": tuple(rules[i].id for i in rest),  # the rules both processes took from
        "rules": tuple(rules[i].id for i in sorted(child.done)),  # those the child ran
        **child.usage,
    }
    for i in child.missing(outcomes):  # the child died first: this process runs them
        run(i)
    return usage


def evaluate_rules(
    context: RuleContext,
    config: Config | None = None,
    *,
    registry: Registry | None = None,
    on_findings: Callable[[Sequence[Finding]], None] | None = None,
    processes: int = 1,
    on_variants_ahead: Callable[[Sequence[Variant]], None] | None = None,
) -> RulesRun:
    """Run the enabled rules on one analysed kernel launch (``context``: its facts, the models
    the pipeline computed, the services; ``gpuadvise.analyze.evaluate`` builds it).
    ``on_findings``: told of each rule's findings as soon as that rule is done (``analyze``
    compiles their variants for the GPU meanwhile); it must not raise.

    Each rule's ``detect`` runs, then ``estimate`` and ``transform`` for each of its findings.
    A rule that raises becomes one error row (its findings dropped); the others go on. A rule
    that reads a model that is unavailable is skipped with a note. A finding whose line has a
    ``// gpuadvise: ignore[GA201]`` comment is dropped, and a note counts it
    (:mod:`gpuadvise.rules.suppress`).

    ``processes`` 2: the rules run over this process and a forked child
    (:mod:`gpuadvise.rules.split`), each taking the next from one queue
    (:func:`claim_order`); the result is the one process's, whichever ran each rule (timings
    and CPU per rule from the process that ran it). The rules whose variants are traced
    afterwards run first in either (:func:`run_order`). Those that read a model still being
    computed (:attr:`~gpuadvise.rules.context.ModelResults.later`: the L2 model in a forked
    child) run last, in this process; ``on_variants_ahead`` is told the candidates they name
    before that model is read (:meth:`Rule.variants_ahead`: ``analyze`` compiles them
    meanwhile): once the rules' child is forked (no compile thread runs at the fork), before
    the findings of the rules run here before it are told. It must not raise.
    """
    if registry is None:
        registry = load_registry(config.rules_dirs if config is not None else ())
    if config is not None:
        registry.check_config(config)
    rules = registry.selected(config)
    outcomes: dict[int, _Outcome] = {}
    child_usage: dict[str, Any] = {}
    told_lock = threading.Lock()  # the child's outcomes are told from the reader thread

    def tell(outcome: _Outcome) -> None:
        if on_findings is not None and outcome.told and outcome.findings:
            with told_lock:
                on_findings(outcome.findings)

    def outcome(i: int, fatal: tuple[type[BaseException], ...] = ()) -> _Outcome:
        return _run_rule(rules[i], context, registry, config, fatal)

    def run(i: int, told: bool = True) -> _Outcome:
        outcomes[i] = out = outcome(i)
        if told:
            tell(out)
        return out

    order = run_order(rules)
    # the rules that read a model still being computed (the L2 model in a forked child) last,
    # in this process: the others run meanwhile
    later = set(context.models.later)
    last = [i for i in order if later & set(rules[i].models)]
    order = [i for i in order if i not in last]

    def ahead() -> None:
        if on_variants_ahead is not None:
            for variants in _variants_ahead([rules[i] for i in last], context, registry, config):
                with told_lock:
                    on_variants_ahead(variants)

    # the memory the rules free kept for their next arrays (no fresh pages to fault in)
    with malloc_tuned():
        if processes >= 2:
            child_usage = _run_split(
                rules,
                order,
                run,
                outcome,
                outcomes,
                tell,
                lambda rest: shared_pieces(context, [rules[i] for i in rest]),
                last,
                ahead,
                fork_when_told=on_findings is not None,
            )
        else:
            ahead()
            for i in [*order, *last]:
                run(i)
    findings: list[Finding] = []
    skipped: list[SkippedRule] = []
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for i, rule in enumerate(rules):
        out = outcomes[i]
        findings.extend(out.findings)
        if out.skipped is not None:
            skipped.append(out.skipped)
        timings[rule.id] = out.wall_s
        cpu[rule.id] = out.cpu_s
    findings, ignored = suppress(findings)
    notes = list(skipped_notes(skipped))
    if ignored:
        where = ", ".join(dict.fromkeys(f"{f.rule} at line {f.line}" for f in ignored))
        notes.append(
            f"{len(ignored)} finding{'s' if len(ignored) != 1 else ''} ignored by "
            f"`gpuadvise: ignore` comments ({where})"
        )
    return RulesRun(
        tuple(rank_findings(findings)),
        tuple(r.id for r in rules),
        tuple(notes),
        timings,
        tuple(skipped),
        cpu,
        child_usage,
    )
