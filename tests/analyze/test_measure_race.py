"""The measurement stage with a fake runner (the real worker loop on a numpy backend with noisy
synthetic timings, no GPU): a finding's candidates race in one job, what failing candidates leave,
parallel builds, the measurement budget, and issue 16's rule that every finding whose variant
exists is measured and ranked by the measurement whatever its estimate."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from suitekit import temp_folders_left

import gpuadvise.rules.evaluate as rule_evaluate
from gpuadvise import rules as R
from gpuadvise.analyze import measure as M
from gpuadvise.analyze import prepare as P
from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import ToolchainError
from gpuadvise.report.rules_text import finding_text
from gpuadvise.runner import job as J
from gpuadvise.runner.client import WorkerRun
from gpuadvise.runner.worker import run_job
from tests.runner.test_worker import KERNELS, FakeBackend


def boom(*args: Any) -> None:
    raise RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered")


SYMBOLS = {"copy": KERNELS["copy"], "copy_half": KERNELS["copy_half"], "boom": boom}
TIMES_MS = {"copy": 1.0, "fast": 0.5, "mid": 0.8, "slow": 1.5, "copy_half": 0.4, "boom": 1.0}
for name in ("fast", "mid", "slow"):
    SYMBOLS[name] = KERNELS["copy"]  # same outputs as the kernel, other times

PARAMS = (
    J.Param("buffer", "P", 0, "in"),
    J.Param("buffer", "P", 0, "out"),
    J.Param("scalar", "i", 64),
)
BUFFERS = (
    J.BufferInit("in", np.float32, 64, "random"),
    J.BufferInit("out", np.float32, 64, "random", is_output=True, poison=True),
)


class NoisyBackend(FakeBackend):
    def __init__(self, seed: int, noise: float = 0.03) -> None:
        super().__init__(dict(SYMBOLS), TIMES_MS)
        self.rng, self.noise = np.random.default_rng(seed), noise

    def timed(self, fn: Any) -> float:
        return super().timed(fn) * float(self.rng.lognormal(0.0, self.noise))


def fake_prepare(opts: KernelOptions, label: str) -> P.Prepared:
    """The variant's kernel is named by its define ``KERNEL=<symbol>`` (the baseline: copy)."""
    symbol = "copy"
    for d in opts.defines:
        if d.startswith("KERNEL="):
            symbol = d.split("=", 1)[1]
    if symbol == "broken":
        raise ToolchainError("nvcc failed: syntax error", "fix the variant")
    launch = J.KernelLaunch(label, "/dev/null", symbol, (1, 1, 1), (64, 1, 1), 0, PARAMS)
    return P.Prepared(None, None, symbol, None, launch, BUFFERS, 1e-5, 1e-8)  # type: ignore[arg-type]


class FakeRunner:
    """Stands in for ``time_prepared``: runs the worker's job in this process."""

    def __init__(self) -> None:
        self.jobs: list[J.Job] = []

    def __call__(
        self,
        prepared: list[P.Prepared],
        timing: J.TimingConfig,
        hot: bool,
        timeout_s: float,
        matching: tuple[float, float] | None = None,
        outputs: bool = True,
    ) -> WorkerRun:
        job = J.Job(
            tuple(p.launch for p in prepared),
            prepared[0].buffers,
            0,
            True,
            timing,
            matching,
            return_outputs=outputs,
        )
        self.jobs.append(job)
        result = run_job(job, NoisyBackend(seed=len(self.jobs)))
        if not outputs and result.ok:  # what the parent gets: names and comparisons
            assert all(not o.outputs and o.output_names for o in result.outcomes)
            assert all(o.comparisons is not None for o in result.outcomes[1:])
        return WorkerRun(result, "")


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    fake = FakeRunner()
    monkeypatch.setattr(P, "prepare", fake_prepare)
    monkeypatch.setattr(P, "time_prepared", fake)
    return fake


def variant(symbol: str, label: str | None = None, **kw: Any) -> R.Variant:
    return R.Variant(
        "automatic-and-verified", f"use {symbol}", defines=(f"KERNEL={symbol}",), label=label, **kw
    )


def finding(
    rule: str, v: R.Variant | None, estimate: float | None = None, line: int = 1
) -> R.Finding:
    est = None if estimate is None else R.Estimate(estimate, "upper-bound", "test")
    return R.Finding(
        rule, "n", "t", "warning", "m", "k.cu", line, "k", estimated_speedup=est, variant=v
    )


def tiles(*symbols: str) -> R.Variant:
    first, *rest = symbols
    alts = tuple(variant(s, f"N={s}") for s in rest)
    return variant(first, f"N={first}", alternatives=alts)


@pytest.fixture(autouse=True)
def no_folder_left(tmp_path: Path) -> Iterator[None]:
    """The candidates' folders (``gpuadvise-variants-*``) are removed when a stage closes: none
    is left in the temporary folder after a test."""
    with temp_folders_left(tmp_path / "tmp", "gpuadvise-"):
        yield


@pytest.fixture
def stage() -> Iterator[Any]:
    """Makes a stage of ``k.cu`` (``max_time_s`` 2 s unless given); each closed after the
    test, as ``measure_findings`` closes its own (its folder of candidates removed)."""
    made: list[M._Stage] = []

    def make(**kw: Any) -> M._Stage:
        s = M._Stage(KernelOptions(source="k.cu"), 60.0, kw.pop("max_time_s", 2.0), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_a_findings_candidates_race_in_one_job(runner: FakeRunner, stage: Any):
    f = finding("GA304", tiles("mid", "fast", "slow", "copy_half"), estimate=1.3)
    g, notes = M.measure_finding(stage(), f)
    assert len(runner.jobs) == 1  # one worker: one context, one buffer fill for all four
    (job,) = runner.jobs
    assert [x.label for x in job.launches] == ["A", "B1", "B2", "B3", "B4"]
    assert job.timing is not None and job.timing.race is not None
    assert job.time_matching == (1e-5, 1e-8)
    m = g.measured_speedup
    assert m is not None and m.label == "N=fast" and m.speedup == pytest.approx(2.0, rel=0.05)
    assert m.stop_reason == "faster" and m.samples is not None and m.samples >= 10
    trials = {t.label: t for t in g.trials}
    assert trials["N=mid"].measurement is not None
    assert trials["N=mid"].measurement.stop_reason in ("eliminated", "max-time")
    slow = trials["N=slow"].measurement
    assert slow is not None and slow.stop_reason in ("eliminated", "slower")
    assert trials["N=copy_half"].measurement is None
    assert trials["N=copy_half"].note is not None
    assert trials["N=copy_half"].note.startswith("outputs differ")
    assert notes == [f"GA304: variant N=copy_half {trials['N=copy_half'].note}; not ranked"]
    # the outputs were compared in the worker, once: none came back (issue 31)
    assert job.return_outputs is False
    text = "\n".join(finding_text(g.to_dict(), speedup=g.speedup_label()))
    assert f"timing: {m.samples} samples each, stopped: faster beyond doubt" in text
    assert "N=slow" in text and "samples, " in text
    assert R.Finding.from_dict(g.to_dict()).measured_speedup == m


def test_a_variant_that_crashes_fails_alone_and_the_others_race_again(
    runner: FakeRunner, stage: Any
):
    f = finding("GA304", tiles("boom", "fast", "broken"))
    g, notes = M.measure_finding(stage(), f)
    assert len(runner.jobs) == 2  # the crash took the first job's context with it
    assert [x.label for x in runner.jobs[1].launches] == ["A", "B1"]
    trials = {t.label: t for t in g.trials}
    assert trials["N=boom"].note == "failed on the GPU: CUDA_ERROR_ILLEGAL_ADDRESS"
    assert trials["N=broken"].note is not None
    assert trials["N=broken"].note.startswith("could not be built: nvcc failed")
    assert g.measured_speedup is not None and g.measured_speedup.label == "N=fast"
    assert len(notes) == 2


def test_a_finding_estimated_at_most_1x_is_measured_and_ranked_by_it(runner: FakeRunner):
    """Issue 16 item 6: the estimate does not decide whether a variant is measured."""
    low = finding("GA301", variant("fast"), estimate=0.95, line=3)  # "<= 0.95x", worth 2x
    high = finding("GA304", variant("slow"), estimate=1.6, line=5)  # "<= 1.6x", measures 0.67x
    advice = finding("GA201", None, estimate=1.4, line=7)  # no variant: its estimate stays
    run = rule_evaluate.RulesRun((advice, high, low), ("GA201", "GA301", "GA304"))
    out, _ = M.measure_findings(KernelOptions(source="k.cu"), run, max_time_s=2.0)
    assert len(runner.jobs) == 2
    assert [f.rule for f in out.findings] == ["GA301", "GA304", "GA201"]
    first, second, third = out.findings
    assert first.rank_basis == "measured" and first.measured_speedup is not None
    assert first.measured_speedup.speedup == pytest.approx(2.0, rel=0.05)
    assert second.measured_speedup is not None and second.measured_speedup.speedup < 0.8
    assert second.measured_speedup.stop_reason == "slower"
    assert third.rank_basis == "estimated" and third.measured_speedup is None
    from gpuadvise.analyze.evaluate import is_minor

    assert not is_minor(first, 1.05)  # the measurement, not the estimate, keeps it a warning


def test_candidates_are_built_in_parallel_once(monkeypatch: pytest.MonkeyPatch):
    lock, now, peak, built = threading.Lock(), [0], [0], []

    def slow_prepare(opts: KernelOptions, label: str) -> P.Prepared:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.2)
        with lock:
            now[0] -= 1
            built.append(opts.defines)
        return fake_prepare(opts, label)

    monkeypatch.setattr(P, "prepare", slow_prepare)
    monkeypatch.setattr(P, "time_prepared", FakeRunner())
    f1 = finding("GA304", tiles("mid", "fast", "slow"))
    f2 = finding("GA101", variant("fast"), line=9)
    run = rule_evaluate.RulesRun((f1, f2), ("GA101", "GA304"))
    t0 = time.perf_counter()
    M.measure_findings(KernelOptions(source="k.cu"), run, max_time_s=1.0)
    assert peak[0] >= 2  # nvcc runs overlapped
    assert len(built) == 5  # the kernel and four candidates, each built once
    assert time.perf_counter() - t0 < 5 * 0.2 + 2 * 1.5  # well below the serial builds + races


def test_each_race_gets_its_share_of_the_budget(stage: Any):
    s = stage(max_time_s=5.0, budget_s=8.0)
    assert s.set_share(4) == pytest.approx(2.0, abs=0.05)
    assert s.timing().race.max_time_s == s.cap_s and s.timing().max_time_s == s.cap_s
    assert s.set_share(1) == 5.0  # never above the per-finding cap
    s.started -= 100.0  # the stage's budget spent: the floor, not zero
    assert s.set_share(3) == M.MIN_RACE_S
    from gpuadvise.spec.budget import time_budget

    with time_budget(0.3):  # --time-budget leaves less than the share
        assert s.set_share(1) <= 0.3


def test_findings_left_when_the_time_budget_runs_out_are_not_measured(runner: FakeRunner):
    from gpuadvise.spec.budget import time_budget

    run = rule_evaluate.RulesRun((finding("GA301", variant("fast")),), ("GA301",))
    with time_budget(0.01) as budget:
        time.sleep(0.02)
        out, notes = M.measure_findings(KernelOptions(source="k.cu"), run)
    assert budget is not None
    assert budget.skipped == ["measuring the findings' variants on the GPU"]
    assert out.findings[0].measured_speedup is None and runner.jobs == []
    assert notes == ["GA301: not measured, the time budget ran out"]
