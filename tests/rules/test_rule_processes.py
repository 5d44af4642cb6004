"""The rules over two processes (gpuadvise.rules.split, evaluate_rules(processes=2)): the same
RulesRun as one process makes (findings, their order, notes, skipped rules, the rules run), on
kernel cases with findings and variants, a skipped model, an error row, an ignore comment; a
child that dies is made up for by this process; an interrupted parent leaves no child behind;
the switches that keep one process."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_two_processes_make_the_one_process_run(case, fork_at_once):
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
    assert two.child["rules"] and set(two.child["rules"]) < set(two.rules_run)
    assert sorted(two.child["rules"]) == sorted(two.child["share"])  # it ran its whole share
    assert two.child["cpu_s"] > 0 and two.child["peak_rss_mb"] > 0
    # every rule's findings told once, the child's too (from the reader thread)
    key = lambda f: (f.rule, f.line, f.message)  # noqa: E731
    assert Counter(map(key, told[2])) == Counter(map(key, told[1]))


def test_the_childs_findings_are_told_here(fork_at_once, monkeypatch):
    """All but the first rule in the child: their findings are told in this process (the
    variants' compiles start here) as the child sends them."""
    context, cfg = _context(*CASES[0])
    monkeypatch.setattr(
        rule_evaluate, "two_bins", lambda ids, w=None: ([0], list(range(1, len(ids))))
    )
    told: list[Any] = []
    two = rule_evaluate.evaluate_rules(context, cfg, processes=2, on_findings=told.extend)
    assert len(two.child["rules"]) == len(two.rules_run) - 1
    assert told and {f.rule for f in told} <= set(two.child["rules"])
    assert sorted(f.message for f in told) == sorted(f.message for f in two.findings)


def test_a_rule_run_before_the_fork_is_not_run_again(monkeypatch):
    """After FORK_AFTER_CPU_S of rules this process forks; the rules it ran are not split."""
    context, cfg = _context(*CASES[0])
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 1e-9)  # after the first rule
    one, two = _both(context, cfg)
    _same(one, two)
    first = one.rules_run[rule_evaluate.run_order(rule_registry.load_registry().selected(cfg))[0]]
    assert two.child["rules"] and first not in two.child["rules"]


def test_cheap_rules_never_fork(monkeypatch):
    context, cfg = _context(*CASES[0])
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 1e9)
    _, two = _both(context, cfg)
    assert not two.child


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


def _child_share(victim: str) -> Any:
    """two_bins with ``victim`` and every second rule in the child's share, ``victim`` first."""

    def bins(ids: Any, weights: Any = None) -> tuple[list[int], list[int]]:
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
    monkeypatch.setattr(rule_evaluate, "two_bins", _child_share("GA902"))
    context, cfg = _context(*CASES[0])
    one, two = _both(context, cfg, registry)
    _same(one, two)
    assert "GA902" in two.child["share"] and "GA902" not in two.child["rules"]  # run here
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
    monkeypatch.setattr(rule_evaluate, "two_bins", _child_share("GA902"))
    monkeypatch.setattr(rule_evaluate, "CHILD_WAIT_MIN_S", 1.0)
    context, cfg = _context(*CASES[0])
    t0 = time.monotonic()
    one, two = _both(context, cfg, registry)
    assert time.monotonic() - t0 < 100
    _same(one, two)
    assert "GA902" in two.child["share"] and "GA902" not in two.child["rules"]  # run here


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
    monkeypatch.setattr(rule_evaluate, "two_bins", _child_share("GA202"))
    one, two = _both(context, cfg, registry)
    _same(one, two)
    assert "GA202" in two.child["share"] and "GA202" not in two.child["rules"]


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
        f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "else:\n"
        f"    while not os.path.exists({str(pidfile)!r}):\n"
        "        time.sleep(0.01)\n"
        "    raise KeyboardInterrupt",
    )
    registry = rule_registry.load_registry([d])
    # GA903 in both shares: the child sleeps in it, this process raises in it
    monkeypatch.setattr(rule_evaluate, "two_bins", lambda ids, w=None: ([ids.index("GA903")],) * 2)
    context, cfg = _context(*CASES[0])
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


def test_two_bins_balance_the_weights_in_order():
    ids = ["GA309", "GA301", "GA305", "GA102", "GA303", "GA106", "GA999", "GA101"]
    first, second = split.two_bins(ids)
    assert sorted(first + second) == list(range(len(ids)))
    assert first == sorted(first) and second == sorted(second)
    load = [
        sum(split.RULE_CPU_S.get(ids[i], split.UNKNOWN_RULE_CPU_S) for i in b)
        for b in (first, second)
    ]
    assert abs(load[0] - load[1]) <= max(split.RULE_CPU_S.values())
    assert 0 in first and 1 in second  # the two heaviest apart


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
