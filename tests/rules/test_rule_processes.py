"""The rules over two processes (gpuadvise.rules.split, evaluate_rules(processes=2)): the same
RulesRun as one process makes (findings, their order, notes, skipped rules, the rules run), on
kernel cases with findings and variants, a skipped model, an error row, an ignore comment; a
child that dies is made up for by this process; an interrupted parent leaves no child behind;
the switches that keep one process."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rulekit
from rulekit import KERNELS

import gpuadvise.rules.evaluate as rule_evaluate
import gpuadvise.rules.registry as rule_registry
import gpuadvise.rules.split as split
from gpuadvise.analyze.evaluate import rule_context
from gpuadvise.rules.config import Config
from gpuadvise.spec.environment import RULE_PROCESSES

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

TRACE_CTAS = 8
CASES = [
    ("reduction/reduce.cu", "reduce2"),
    ("accumulate/accumulate.cu", "row_sums"),
    ("bank1d/scan.cu", "scan_helper"),
]

RULE_DOC = '''"""A test rule.

    What it detects
    ---------------
    None.

    Why it is slow
    --------------
    None.

    Example
    -------
    kernels/x/x.cu

    Fix
    ---
    None.

    How the estimate is made
    ------------------------
    None.

    Fix safety
    ----------
    Display-only.
    """'''


def _user_rule(tmp: Path, rule_id: str, name: str, detect: str) -> Path:
    """A folder of one user rule ``rule_id`` whose ``detect`` body is ``detect`` (indented)."""
    d = tmp / f"rules_{rule_id.lower()}"
    d.mkdir(parents=True, exist_ok=True)
    body = "\n".join("        " + line for line in detect.splitlines())
    (d / f"{rule_id.lower()}_{name.replace('-', '_')}.py").write_text(
        "import os, signal, time\nfrom gpuadvise.rules import Rule\n\n\n"
        f"class R(Rule):\n    {RULE_DOC}\n\n"
        f'    id = "{rule_id}"\n    name = "{name}"\n    title = "Test"\n'
        '    models = ("occupancy",)\n\n'
        f"    def detect(self, ctx):\n{body}\n        return []\n"
    )
    k = tmp / "kernels" / name
    k.mkdir(parents=True, exist_ok=True)
    (k / "x.cu").write_text(f"__global__ void x() {{}}  // expect: {rule_id}\n")
    return d


def _context(rel: str, kernel: str, trace: bool = True) -> Any:
    cfg = Config(trace_ctas=TRACE_CTAS)
    a = rulekit.analyze(KERNELS / rel, kernel, TRACE_CTAS, trace=trace, registers=True)
    return rule_context(a, cfg, lazy_models=trace), cfg


def _same(one: rule_evaluate.RulesRun, two: rule_evaluate.RulesRun) -> None:
    assert two.findings == one.findings
    assert [f.to_dict() for f in two.findings] == [f.to_dict() for f in one.findings]
    assert two.rules_run == one.rules_run
    assert two.notes == one.notes
    assert two.skipped == one.skipped
    assert list(two.timings_s) == list(one.timings_s) == list(one.rules_run)
    assert list(two.cpu_s) == list(one.cpu_s) == list(one.rules_run)
    assert two.to_dict() == one.to_dict()


def _both(context: Any, cfg: Config, registry: Any = None, **kw: Any) -> Any:
    registry = registry or rule_registry.load_registry()
    one = rule_evaluate.evaluate_rules(context, cfg, registry=registry, processes=1, **kw)
    two = rule_evaluate.evaluate_rules(context, cfg, registry=registry, processes=2, **kw)
    return one, two


@pytest.fixture
def fork_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules split from the first one (no rule run before the fork)."""
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 0.0)


class _SlowHere(split.Claims):
    """The real queue, this process a little slower to take from it than the child (which
    then surely takes some rules, on a loaded machine too)."""

    def __init__(self, positions: Any) -> None:
        super().__init__(positions)
        self._parent = os.getpid()

    def take(self) -> int | None:
        if os.getpid() == self._parent:
            time.sleep(0.02)
        return super().take()


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_two_processes_make_the_one_process_run(case, fork_at_once, monkeypatch):
    monkeypatch.setattr(rule_evaluate, "Claims", _SlowHere)
    context, cfg = _context(*case)
    told: dict[int, list[Any]] = {1: [], 2: []}
    one = rule_evaluate.evaluate_rules(
        context, cfg, processes=1, on_findings=lambda fs: told[1].extend(fs)
    )
    two = rule_evaluate.evaluate_rules(
        context, cfg, processes=2, on_findings=lambda fs: told[2].extend(fs)
    )
    _same(one, two)
    assert one.findings and not one.child
    # the child took its rules from the queue (every rule: FORK_AFTER_CPU_S 0), this process
    # the others: the same run
    assert two.child["rules"] and set(two.child["rules"]) <= set(two.child["queued"])
    assert set(two.child["queued"]) == set(two.rules_run)
    assert two.child["cpu_s"] > 0 and two.child["peak_rss_mb"] > 0
    # every rule's findings told once, the child's too (from the reader thread)
    key = lambda f: (f.rule, f.line, f.message)  # noqa: E731
    assert Counter(map(key, told[2])) == Counter(map(key, told[1]))


def test_the_childs_findings_are_told_here(fork_at_once, monkeypatch):
    """All but the first rule in the child: their findings are told in this process (the
    variants' compiles start here) as the child sends them."""
    context, cfg = _context(*CASES[0])
    _fixed(monkeypatch, rule_registry.load_registry(), cfg, lambda ids: ([0], range(1, len(ids))))
    told: list[Any] = []
    two = rule_evaluate.evaluate_rules(context, cfg, processes=2, on_findings=told.extend)
    assert len(two.child["rules"]) == len(two.rules_run) - 1
    assert told and {f.rule for f in told} <= set(two.child["rules"])
    assert sorted(f.message for f in told) == sorted(f.message for f in two.findings)


def test_a_rule_run_before_the_fork_is_not_run_again(monkeypatch):
    """After FORK_AFTER_CPU_S of rules this process forks; the rules it ran are not split."""
    context, cfg = _context(*CASES[0])
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 0.02)  # after a few rules
    # a CPU clock that moves 2 ms at each reading as well: the fork comes after a few rules
    # however fast this machine runs them (on the real clock alone, a fast one ran every rule
    # within 0.02 s and never forked)
    ticks = itertools.count()
    clock = types.SimpleNamespace(
        perf_counter=time.perf_counter,
        thread_time=lambda: time.thread_time() + 0.002 * next(ticks),
    )
    monkeypatch.setattr(rule_evaluate, "time", clock)
    one, two = _both(context, cfg)
    _same(one, two)
    order = rule_evaluate.run_order(rule_registry.load_registry().selected(cfg))
    before = [one.rules_run[i] for i in order][: len(one.rules_run) - len(two.child["queued"])]
    assert before and set(two.child["queued"]) == set(two.rules_run) - set(before)
    assert not set(before) & set(two.child["rules"])


def test_the_view_is_built_once_before_the_fork(fork_at_once, monkeypatch, tmp_path):
    """The trace's view, which nearly every rule reads, is built in this process before the
    fork (shared copy-on-write), not by both processes after it; the run is the same."""
    import gpuadvise.trace.view as trace_view

    real = trace_view.trace_view
    pids = tmp_path / "pids"

    def built(*a: Any, **kw: Any) -> Any:
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*a, **kw)

    monkeypatch.setattr(trace_view, "trace_view", built)
    monkeypatch.setattr(rule_evaluate, "Claims", _SlowHere)  # the child surely runs rules
    context, cfg = _context(*CASES[0])
    one = rule_evaluate.evaluate_rules(context, cfg, processes=1)
    context, cfg = _context(*CASES[0])  # (a new context: its view not built yet)
    pids.unlink()
    two = rule_evaluate.evaluate_rules(context, cfg, processes=2)
    _same(one, two)
    assert two.child["rules"]
    assert pids.read_text().split() == [str(os.getpid())]


@pytest.mark.parametrize("case", CASES[:2], ids=[f"{c[0]}:{c[1]}" for c in CASES[:2]])
def test_the_launchs_traffic_is_built_once_before_the_fork(
    case, fork_at_once, monkeypatch, tmp_path
):
    """The launch's traffic (every estimate's "before", read by model_check for each finding),
    built in this process before the fork, not again by either process after it; the run is
    the same. Its sector sets are not kept (a changed traffic makes them again)."""
    import gpuadvise.rules.estimates as estimates

    real = estimates._view_traffic
    pids = tmp_path / "pids"

    def built(device: Any, view: Any, changed: Any, only: Any) -> Any:
        if changed is None and only is None:
            with pids.open("a") as f:
                f.write(f"{os.getpid()}\n")
        return real(device, view, changed, only)

    monkeypatch.setattr(estimates, "_view_traffic", built)
    monkeypatch.setattr(rule_evaluate, "Claims", _SlowHere)  # the child surely runs rules
    context, cfg = _context(*case)
    one = rule_evaluate.evaluate_rules(context, cfg, processes=1)
    assert pids.read_text().split() == [str(os.getpid())]  # (the case's findings read it)
    context, cfg = _context(*case)  # (a new context: its view and traffic not built yet)
    pids.unlink()
    two = rule_evaluate.evaluate_rules(context, cfg, processes=2)
    _same(one, two)
    assert two.child["rules"]
    assert pids.read_text().split() == [str(os.getpid())]


@pytest.mark.parametrize("case", CASES[:2], ids=[f"{c[0]}:{c[1]}" for c in CASES[:2]])
def test_the_views_indexes_are_built_once_before_the_fork(
    case, fork_at_once, monkeypatch, tmp_path
):
    """The view's lanes by instruction (lanes_of's, access's) and (instruction, buffer) pairs
    (buffers_at's), which the layout rules of both processes read, built in this process before
    the fork, not again by either process after it; the run is the same."""
    import gpuadvise.trace.view as trace_view

    real = trace_view.TraceView._inst_index
    pids = tmp_path / "pids"

    def built(self: Any) -> Any:
        if self._by_inst is None:
            with pids.open("a") as f:
                f.write(f"{os.getpid()}\n")
        return real(self)

    monkeypatch.setattr(trace_view.TraceView, "_inst_index", built)
    monkeypatch.setattr(rule_evaluate, "Claims", _SlowHere)  # the child surely runs rules
    context, cfg = _context(*case)
    one = rule_evaluate.evaluate_rules(context, cfg, processes=1)
    assert pids.read_text().split() == [str(os.getpid())]  # (the case's rules read it)
    context, cfg = _context(*case)  # (a new context: its view not built yet)
    pids.unlink()
    two = rule_evaluate.evaluate_rules(context, cfg, processes=2)
    _same(one, two)
    assert two.child["rules"]
    assert pids.read_text().split() == [str(os.getpid())]
    assert context.trace_view._inst_buffers is not None


def test_the_launchs_traffic_alone_keeps_no_sector_sets():
    """launch_traffic_alone: view_traffic's traffic; the sector sets it made dropped (those a
    rule made before kept), and a changed traffic after it the same as with them kept."""
    import gpuadvise.rules.estimates as estimates

    context, _ = _context(*CASES[1])
    view, device = context.trace_view, context.device
    alone = estimates.launch_traffic_alone(device, view)
    assert view not in estimates._SETS and view not in estimates._L2_KEYS
    assert estimates.view_traffic(device, view) is alone  # (kept per view and device)
    changed = np.arange(0, len(view.records), 3)
    after = estimates.view_traffic(device, view, changed)
    assert view in estimates._SETS
    sets = estimates._SETS[view]
    fresh, _ = _context(*CASES[1])
    v2 = fresh.trace_view
    assert estimates._view_traffic(device, v2, None, None) == alone
    assert estimates.view_traffic(device, v2, changed) == after
    # sets a rule made before are left
    estimates._PLAIN.pop(view, None)
    assert estimates.launch_traffic_alone(device, view) == alone
    assert estimates._SETS[view] is sets


def test_the_sector_sets_made_again_read_the_spans_kept(monkeypatch):
    """The sector sets made again after launch_traffic_alone dropped them (a rule's changed
    traffic after the fork) take their keys' spans from the first build (no pass over the lanes
    for them) and are the same sets, key for key, as those of a view that never had them."""
    import gpuadvise.rules.estimates as estimates

    context, _ = _context(*CASES[1])
    view, device = context.trace_view, context.device
    estimates.launch_traffic_alone(device, view)
    assert view not in estimates._SETS
    kept = {k: list(v) for k, v in estimates._SET_SPANS[view].items()}
    assert set(kept) == {"l2", "store"} or set(kept) == {"l2"}
    given: list[Any] = []
    real = estimates._packed_at_spans

    def spans_given(cols: Any, at: Any, last_div: int = 1, spans: Any = None) -> Any:
        given.append(None if spans is None else list(spans))
        return real(cols, at, last_div, spans)

    monkeypatch.setattr(estimates, "_packed_at_spans", spans_given)
    again = estimates._sector_sets(view)
    assert given == [kept[k] for k in ("l2", "store") if k in kept]
    monkeypatch.setattr(estimates, "_packed_at_spans", real)
    fresh, _ = _context(*CASES[1])
    want = estimates._sector_sets(fresh.trace_view)
    assert set(again) == set(want)
    for name, s in want.items():
        got = again[name]
        assert np.array_equal(got.lanes, s.lanes) and got.lanes.dtype == s.lanes.dtype
        assert np.array_equal(got.group, s.group) and got.count == s.count
        assert (got.key_weight is None) == (s.key_weight is None)
        if s.key_weight is not None:
            assert np.array_equal(got.key_weight, s.key_weight)


def test_cheap_rules_never_fork(monkeypatch):
    context, cfg = _context(*CASES[0])
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 1e9)
    _, two = _both(context, cfg)
    assert not two.child


@pytest.mark.parametrize("case", CASES[:2], ids=[f"{c[0]}:{c[1]}" for c in CASES[:2]])
def test_a_variant_to_compile_forks_at_once(case, monkeypatch):
    """A rule run before the fork whose finding's variant is compiled once told (GA206 on
    reduce2, GA308 on row_sums: traced after the rules) forks at once, however little CPU the
    rules took (the fork's threshold out of reach here), and its findings are told then (the
    variant's nvcc starts) rather than after the next rules; the run is the same. Without an
    ``on_findings`` (nothing to tell), cheap rules still never fork."""
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 1e9)
    context, cfg = _context(*case)
    registry = rule_registry.load_registry()
    rules = registry.selected(cfg)
    order = [rules[i].id for i in rule_evaluate.run_order(rules)]
    events: list[str] = []
    real_run = rule_evaluate._run_rule

    def run_rule(rule: Any, *a: Any, **kw: Any) -> Any:
        if os.getpid() == me:
            events.append(rule.id)
        return real_run(rule, *a, **kw)

    me = os.getpid()
    monkeypatch.setattr(rule_evaluate, "_run_rule", run_rule)
    told: dict[int, list[Any]] = {1: [], 2: []}
    one = rule_evaluate.evaluate_rules(
        context, cfg, registry=registry, processes=1, on_findings=told[1].extend
    )
    events.clear()

    def tell(fs: Any) -> None:
        told[2].extend(fs)
        events.append("told " + ",".join(sorted({f.rule for f in fs})))

    two = rule_evaluate.evaluate_rules(
        context, cfg, registry=registry, processes=2, on_findings=tell
    )
    _same(one, two)
    first = next(
        f.rule
        for r in order
        for f in one.findings
        if f.rule == r and f.variant is not None and registry.find(r).point_from_variant_trace
    )
    before = order[: order.index(first) + 1]
    assert two.child and set(two.child["queued"]) == set(order) - set(before)
    # this process ran the rules up to that one, then told it first, before any other rule
    assert events[: len(before)] == before
    assert events[len(before)].startswith("told ") and first in events[len(before)]
    key = lambda f: (f.rule, f.line, f.message)  # noqa: E731
    assert Counter(map(key, told[2])) == Counter(map(key, told[1]))
    _, quiet = _both(context, cfg, registry)  # nothing told: no fork
    assert not quiet.child


def test_skipped_rules_and_their_notes_are_the_same(fork_at_once):
    context, cfg = _context(*CASES[0], trace=False)  # the trace-based models unavailable
    one, two = _both(context, cfg)
    _same(one, two)
    assert one.skipped and one.notes


def test_an_error_row_is_the_same(tmp_path, fork_at_once):
    d = _user_rule(tmp_path, "GA901", "always-raises", "raise RuntimeError('boom')")
    registry = rule_registry.load_registry([d])
    context, cfg = _context(*CASES[0])
    one, two = _both(context, cfg, registry)
    _same(one, two)
    errors = [f for f in two.findings if f.is_error]
    assert len(errors) == 1 and "RuntimeError: boom" in errors[0].message
    assert "Traceback" in (errors[0].error or "")


def test_an_ignore_comment_is_the_same(tmp_path, fork_at_once):
    src = KERNELS / "reduction" / "reduce.cu"
    lines = src.read_text().splitlines()
    assert "sdata[index] += sdata[index + s]" in lines[33]
    lines[33] += "  // gpuadvise: ignore[GA201]"
    (tmp_path / "reduce.cu").write_text("\n".join(lines) + "\n")
    (tmp_path / "case.toml").write_text((src.parent / "case.toml").read_text())
    cfg = Config(trace_ctas=TRACE_CTAS)
    a = rulekit.analyze(tmp_path / "reduce.cu", "reduce2", TRACE_CTAS, registers=True)
    one, two = _both(rule_context(a, cfg), cfg)
    _same(one, two)
    assert any("ignored by `gpuadvise: ignore` comments" in n for n in two.notes)


class _FixedClaims(split.Claims):
    """A queue that hands each process fixed positions (the tests that need a rule in the
    child, or in both): ``pick(ids)``, of the queued rules' ids in the queue's order, gives
    (this process's indices, the child's)."""

    def __init__(self, positions: Any, ids: list[str], pick: Any) -> None:
        super().__init__(positions)
        mine, theirs = pick([ids[i] for i in self.positions])
        self._parent = os.getpid()
        self._mine = iter([self.positions[j] for j in mine])
        self._theirs = iter([self.positions[j] for j in theirs])

    def take(self) -> int | None:
        return next(self._mine if os.getpid() == self._parent else self._theirs, None)


def _fixed(monkeypatch: pytest.MonkeyPatch, registry: Any, cfg: Config, pick: Any) -> None:
    """evaluate_rules's queue made a :class:`_FixedClaims` of ``pick``."""
    ids = [r.id for r in registry.selected(cfg)]
    monkeypatch.setattr(rule_evaluate, "Claims", lambda ps: _FixedClaims(ps, ids, pick))


def _child_share(victim: str) -> Any:
    """``victim`` and every second rule to the child, the others to this process."""

    def bins(ids: Any) -> tuple[list[int], list[int]]:
        theirs = [i for i, r in enumerate(ids) if r == victim or i % 2]
        return [i for i in range(len(ids)) if i not in theirs], theirs

    return bins


def test_a_killed_child_leaves_its_rules_to_this_process(tmp_path, fork_at_once, monkeypatch):
    me = os.getpid()
    d = _user_rule(
        tmp_path,
        "GA902",
        "dies-in-child",
        f"if os.getpid() != {me}:\n    os.kill(os.getpid(), signal.SIGKILL)",
    )
    registry = rule_registry.load_registry([d])
    context, cfg = _context(*CASES[0])
    _fixed(monkeypatch, registry, cfg, _child_share("GA902"))
    one, two = _both(context, cfg, registry)
    _same(one, two)
    assert "GA902" in two.child["queued"] and "GA902" not in two.child["rules"]  # run here
    assert two.child["cpu_s"] >= 0


def test_a_stuck_child_is_killed_after_its_wait_and_its_rules_run_here(
    tmp_path, fork_at_once, monkeypatch
):
    """A child that outlives ``CHILD_WAIT_MIN_S`` (and its factor of this process's share): a
    lock another thread held at the fork, say. It is killed, its rules run here: the run is the
    one process's, in time."""
    me = os.getpid()
    d = _user_rule(
        tmp_path,
        "GA902",
        "stuck-in-child",
        f"if os.getpid() != {me}:\n    import time\n    time.sleep(120)",
    )
    registry = rule_registry.load_registry([d])
    monkeypatch.setattr(rule_evaluate, "CHILD_WAIT_MIN_S", 1.0)
    context, cfg = _context(*CASES[0])
    _fixed(monkeypatch, registry, cfg, _child_share("GA902"))
    t0 = time.monotonic()
    one, two = _both(context, cfg, registry)
    assert time.monotonic() - t0 < 100
    _same(one, two)
    assert "GA902" in two.child["queued"] and "GA902" not in two.child["rules"]  # run here


def test_a_fork_that_fails_leaves_every_rule_to_this_process(fork_at_once, monkeypatch):
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    context, cfg = _context(*CASES[0])
    one, two = _both(context, cfg)
    _same(one, two)
    assert not two.child


def test_an_unpicklable_outcome_leaves_the_rest_to_this_process(fork_at_once, monkeypatch):
    context, cfg = _context(*CASES[0])
    registry = rule_registry.load_registry()
    real = rule_evaluate._run_rule
    me = os.getpid()

    def unpicklable(rule: Any, *a: Any, **kw: Any) -> Any:
        out = real(rule, *a, **kw)
        if os.getpid() != me and rule.id == "GA202":
            return lambda: out  # a lambda does not pickle
        return out

    monkeypatch.setattr(rule_evaluate, "_run_rule", unpicklable)
    _fixed(monkeypatch, registry, cfg, _child_share("GA202"))
    one, two = _both(context, cfg, registry)
    _same(one, two)
    assert "GA202" in two.child["queued"] and "GA202" not in two.child["rules"]


def test_an_interrupted_parent_leaves_no_child(tmp_path, fork_at_once, monkeypatch):
    """Ctrl-C (or the CLI's SIGTERM, raised as Interrupted) in this process while the child
    runs: the child is killed and reaped before the exception goes on."""
    me = os.getpid()
    pidfile = tmp_path / "child.pid"
    d = _user_rule(
        tmp_path,
        "GA903",
        "slow-in-child",
        f"if os.getpid() != {me}:\n"
        # written whole, then renamed: this process waits for the name, and a pid file it saw
        # created but not yet written was read empty (a suite run, session 22)
        f"    open({str(pidfile) + '.part'!r}, 'w').write(str(os.getpid()))\n"
        f"    os.replace({str(pidfile) + '.part'!r}, {str(pidfile)!r})\n"
        "    time.sleep(60)\n"
        "else:\n"
        f"    while not os.path.exists({str(pidfile)!r}):\n"
        "        time.sleep(0.01)\n"
        "    raise KeyboardInterrupt",
    )
    registry = rule_registry.load_registry([d])
    context, cfg = _context(*CASES[0])
    # GA903 to both: the child sleeps in it, this process raises in it
    _fixed(monkeypatch, registry, cfg, lambda ids: ([ids.index("GA903")],) * 2)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        rule_evaluate.evaluate_rules(context, cfg, registry=registry, processes=2)
    assert time.monotonic() - t0 < 30
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process
        os.kill(pid, 0)


def test_rule_processes_switches(monkeypatch):
    monkeypatch.delenv(RULE_PROCESSES, raising=False)
    monkeypatch.setattr(split, "_limit", None)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert split.rule_processes() == 2
    monkeypatch.setenv(RULE_PROCESSES, "2")
    assert split.rule_processes() == 2
    monkeypatch.setenv(RULE_PROCESSES, "1")
    assert split.rule_processes() == 1
    monkeypatch.delenv(RULE_PROCESSES)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert split.rule_processes() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    split.limit_rule_processes(1)
    assert split.rule_processes() == 1
    split.limit_rule_processes(None)
    assert split.rule_processes() == 2
    monkeypatch.delattr(os, "fork")
    assert split.rule_processes() == 1


def test_the_queue_hands_each_position_to_one_process_in_order():
    """Both processes take from one Claims until it is empty: every position taken once, by
    one of them, each process's in the queue's order; the one that is busy longer takes
    fewer."""
    positions = [7, 3, 11, *range(20, 120)]
    claims = split.Claims(positions)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            taken = []
            for i in claims:
                taken.append(i)
                time.sleep(0.002)
            os.write(w, repr(taken).encode())
        finally:
            os._exit(0)
    os.close(w)
    mine = []
    for i in claims:
        mine.append(i)
        time.sleep(0.006)  # three times as busy per position as the child
    with os.fdopen(r) as f:
        theirs = eval(f.read())  # noqa: S307 - a list of ints the child wrote
    os.waitpid(pid, 0)
    claims.close()
    assert sorted(mine + theirs) == sorted(positions)
    assert not set(mine) & set(theirs)
    order = {p: k for k, p in enumerate(positions)}
    for got in (mine, theirs):
        assert got == sorted(got, key=order.__getitem__)
    assert mine and len(theirs) > len(mine)
    assert split.Claims([]).take() is None


def test_a_queue_too_long_for_a_pipe_is_an_oserror():
    with pytest.raises(OSError):
        split.Claims(range(100_000))


def test_the_queue_takes_the_heaviest_first_after_the_traced_ones():
    rules = rule_registry.load_registry().selected(Config())
    queue = rule_evaluate.claim_order(rules, range(len(rules)))
    assert sorted(queue) == list(range(len(rules)))
    after = [rule_evaluate._traced_after(rules[i]) for i in queue]
    assert after == sorted(after, reverse=True) and any(after) and not all(after)
    for group in (True, False):
        w = [
            split.RULE_CPU_S.get(rules[i].id, split.UNKNOWN_RULE_CPU_S)
            for i, a in zip(queue, after, strict=True)
            if a == group
        ]
        assert w == sorted(w, reverse=True)


def test_the_rules_whose_variants_are_traced_run_first():
    rules = rule_registry.load_registry().selected(Config())
    order = rule_evaluate.run_order(rules)
    after = [rule_evaluate._traced_after(rules[i]) for i in order]
    assert after == sorted(after, reverse=True) and any(after) and not all(after)
    assert sorted(order) == list(range(len(rules)))


CHILD_SCRIPT = """
import os, signal, sys, time
from gpuadvise.rules.split import ForkedShare

pidfile = sys.argv[1]

def terminated(signum, frame):  # as the CLI does: SIGTERM raised into the running code
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, terminated)

def run(i):
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    time.sleep(60)

with ForkedShare([0], run, lambda i, out: None):
    time.sleep(60)
"""


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` ends (or is a zombie no one reaped) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_child_dies_with_its_parent(tmp_path, signum):
    """The analysing process killed (SIGKILL: the child's PR_SET_PDEATHSIG) or terminated
    (SIGTERM raised into it, as the CLI does): its rules' child ends too, no orphan."""
    pidfile = tmp_path / "child.pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", CHILD_SCRIPT, str(pidfile)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists():
            assert parent.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        child = int(pidfile.read_text())
        parent.send_signal(signum)
        parent.wait(30)
        assert _gone(child), f"the child {child} outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_the_cli_with_the_split_gives_the_one_process_report(
    capsys, caplog, fork_at_once, monkeypatch
):
    """End to end (``gpuadvise analyze``, JSON): the default on a 2-CPU machine (the suite sets
    ``GPUADVISE_RULE_PROCESSES=1``, tests/conftest.py) forks, and reports what one process
    reports, but for the timings."""
    import json

    from clikit import cli

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    src = str(Path(__file__).resolve().parents[2] / "kernels" / "reduction" / "reduce.cu")
    args = ("analyze", src, "--kernel", "reduce2", "--gpu", "H100", "--format", "json")
    reports = {}
    for n in ("1", "2"):
        monkeypatch.setenv("GPUADVISE_RULE_PROCESSES", n)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gpuadvise"):
            code, out, err = cli(capsys, *args, "--no-cache", "--no-measure", "--tracer", "emu")
        assert code == 0, err
        reports[n] = json.loads(out)
        forked = [r for r in caplog.records if "in a forked child" in r.getMessage()]
        assert bool(forked) == (n == "2")
    one, two = reports["1"], reports["2"]
    for r in (one, two):
        r.pop("timings_s", None)
        r["emulation"].pop("time_s", None)
    for key in one:
        assert one[key] == two[key], key
    assert reports["1"]["findings"]


def test_a_second_registry_keeps_the_rules_classes(tmp_path, fork_at_once):
    """A registry of other rules folders loads the bundled rule files again; each stays one
    module, so a finding's details the child pickles by module name (GA202's ``Interleaved``)
    come back as the class of the registry that ran them, and the two runs stay equal (the
    suite failed once on this when an earlier test in the worker had loaded a user folder)."""
    first = rule_registry.load_registry()
    user = _user_rule(tmp_path, "GA981", "second-registry", "pass")
    second = rule_registry.load_registry([user], kernels_dirs=[tmp_path / "kernels"])
    assert second is not first and len(second) == len(first) + 1
    for rule in first:
        again = second.find(rule.id)
        assert again is not None and type(again) is type(rule)
    ga202 = next(r for r in first if r.id == "GA202")
    assert vars(sys.modules[type(ga202).__module__]).get("Interleaved") is not None
    context, cfg = _context("reduction/reduce.cu", "reduce2")
    one, two = _both(context, cfg, registry=first)
    assert any(f.rule == "GA202" and f.details is not None for f in one.findings)
    _same(one, two)
