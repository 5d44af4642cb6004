"""The rules run in forked children (gpuadvise.analyze.forked_rules, issue 31): the same run as
in one process, whatever the children do."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest

import gpuadvise.analyze.forked_rules as FR
from gpuadvise.analyze.evaluate import run_rules_report
from gpuadvise.rules.config import Config
from gpuadvise.rules.evaluate import RulesRun

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork here"
)


@pytest.fixture(scope="module")
def analysis() -> Any:
    """reduce2 on the H100 model, traced for every rule: three findings of three rules."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.rules.evaluate import models_needed

    opts = KernelOptions(
        source=str(ROOT / "kernels/reduction/reduce.cu"), kernel="reduce2", gpu="H100"
    )
    spec, choice, options = build(opts)
    return analyze_kernel(
        spec, choice.device, options, sample_ctas=16, models=models_needed(Config())
    )


def _same(a: RulesRun, b: RulesRun) -> None:
    assert [f.to_dict() for f in a.findings] == [f.to_dict() for f in b.findings]
    assert (a.rules_run, a.notes, a.skipped) == (b.rules_run, b.notes, b.skipped)
    assert set(a.timings_s) == set(b.timings_s)


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_the_rules_in_forked_children_give_the_same_run(analysis: Any) -> None:
    told_here: list[str] = []
    told_forked: list[str] = []
    here = run_rules_report(
        analysis,
        Config(),
        lazy_models=False,
        on_findings=lambda fs: told_here.extend(f"{f.rule}:{f.line}" for f in fs),
    )
    forked = run_rules_report(
        analysis,
        Config(),
        lazy_models=False,
        workers=3,
        on_findings=lambda fs: told_forked.extend(f"{f.rule}:{f.line}" for f in fs),
    )
    assert len(here.findings) >= 2
    _same(forked, here)
    assert sorted(told_forked) == sorted(told_here) and told_here  # each rule's, as they came


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_rules_no_child_ran_are_run_here(analysis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that dies before its outcome is sent (here: every child, at once): its rules
    are run in this process, and the run is the same."""
    here = run_rules_report(analysis, Config(), lazy_models=False)

    def dies(*args: Any) -> None:
        os._exit(3)

    monkeypatch.setattr(FR, "_child", dies)
    forked = run_rules_report(analysis, Config(), lazy_models=False, workers=2)
    _same(forked, here)


def test_forked_only_where_there_are_many_cpus() -> None:
    assert FR.fork_workers(2) == 0
    assert FR.fork_workers(FR.FORK_CPUS - 1) == 0
    assert 1 <= FR.fork_workers(16) <= FR.WORKERS
