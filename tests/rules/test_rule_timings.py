"""The rules phase timed rule by rule (issue 17): ``RulesRun.timings_s`` has one entry per rule
run, and ``analyze``'s ``timings_s`` carries them as ``rule_<ID>_s`` beside ``rules_s``; the
analysing thread's CPU seconds in each (``RulesRun.cpu_s``) as ``cpu_<ID>_s`` (issue 31: wall
seconds on a loaded machine say little). Needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

from typing import Any

import pytest
import rulekit
from rulekit import KERNELS, needs_toolkit

from gpuadvise.analyze.evaluate import run_rules_report
from gpuadvise.rules.config import Config

pytestmark = needs_toolkit

REDUCE = KERNELS / "reduction" / "reduce.cu"


@pytest.fixture(scope="module")
def reduce2() -> Any:
    """The analysis of reduce2 (n = 65536, 4 CTAs traced), made once for the tests that run
    rules on it (the rules' runs are each test's own)."""
    return rulekit.analyze(REDUCE, "reduce2", 4, ("n=65536",))


def test_every_rule_run_is_timed(reduce2):
    a = reduce2
    run = run_rules_report(a, Config(trace_ctas=4, select=("GA1", "GA2", "GA305")))
    assert set(run.timings_s) == set(run.rules_run) and "GA305" in run.timings_s
    assert all(t >= 0.0 for t in run.timings_s.values())
    assert set(run.cpu_s) == set(run.rules_run)
    assert all(0.0 <= run.cpu_s[r] <= run.timings_s[r] + 0.05 for r in run.rules_run)


def test_a_rule_cpu_is_its_thread_time(reduce2, monkeypatch):
    """A rule's CPU seconds are the thread's CPU clock across it, not the wall clock: a rule
    that waits (a subprocess, a loaded machine) spends wall without CPU."""
    import time as _time

    from gpuadvise.rules import evaluate

    clock = iter(range(0, 1000, 3))  # each read 3 s later: every rule 3 CPU-s
    fake = type("T", (), {"perf_counter": staticmethod(_time.perf_counter)})
    fake.thread_time = staticmethod(lambda: float(next(clock)))  # type: ignore[attr-defined]
    monkeypatch.setattr(evaluate, "time", fake)
    a = reduce2
    run = run_rules_report(a, Config(trace_ctas=4, select=("GA102", "GA305")))
    assert run.cpu_s == {"GA102": 3.0, "GA305": 3.0}
    assert all(run.timings_s[r] < 3.0 for r in run.rules_run)


def test_analyze_reports_them_in_timings_s():
    from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
    from gpuadvise.analyze.run import run_analysis

    opts = KernelOptions(source=str(REDUCE), kernel="reduce2", args=("n=65536",), gpu="H100")
    done = run_analysis(
        opts, AnalyzeSettings(sample_ctas="4", select=("GA102", "GA305"), measure=False)
    )
    t = done.analysis.timings_s
    assert {"rule_GA102_s", "rule_GA305_s", "cpu_GA102_s", "cpu_GA305_s"} <= set(t)
    assert sum(t[f"rule_{r}_s"] for r in done.rules.rules_run) <= t["rules_s"] + 1e-6
