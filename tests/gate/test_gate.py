"""The gate's pure logic: config, thresholds, static and timed verdicts, baselines, evaluation."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gate_fakes import ALL_STATIC, CPU_ENV, H100_ENV, FakeProvider, samples

from gpuadvise import __version__
from gpuadvise.errors import CompileError, ConfigError, UsageError
from gpuadvise.gate.baseline import (
    Baseline,
    BaselineError,
    CaseBaseline,
    load_baseline,
    merge_baseline,
    write_baseline,
)
from gpuadvise.gate.compare import Comparison, Verdict, compare_static, compare_timed
from gpuadvise.gate.config import (
    GateCase,
    GateConfig,
    TimingSettings,
    find_gate_config,
    load_gate_config,
    rebase_case,
)
from gpuadvise.gate.evaluate import GateError, evaluate_gate, measure_baseline
from gpuadvise.gate.provider import Environment, TimingSamples, Unavailable
from gpuadvise.gate.results import GateResult, gate_table, summary_line
from gpuadvise.gate.thresholds import METRICS, Threshold, format_value
from gpuadvise.runner.stats import summarize

# --- configuration ---------------------------------------------------------------------------

GATE_TOML = """
[gate]
baseline = "ci/baseline.json"
gpu = "H100"
metrics = ["registers", "spill_bytes", "occupancy", "time"]

[gate.thresholds]
registers = { abs = 4, rel = "10%" }
time = "3%"
spill_bytes = 0

[gate.timing]
alpha = 0.05
min_samples = 20

[[gate.cases]]
name = "reduce256"
source = "kernels/reduce.cu"
kernel = "reduce<256>"
grid = "ceil_div(n, 256)"
block = 256
dynamic_smem = "1k"
nvcc_flags = ["-DTILE=16"]
args = { n = 4194304, flag = true }
buffers = { in = "float32[n]" }

[[gate.cases]]
spec = "kernels/case.toml"
kernel = "ns::scan"
metrics = ["registers"]
thresholds = { registers = 8 }
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_parse_gpuadvise_toml(tmp_path: Path) -> None:
    cfg = load_gate_config(write(tmp_path / "gpuadvise.toml", GATE_TOML))
    assert cfg.baseline == (tmp_path / "ci/baseline.json").resolve()
    assert cfg.gpu == "H100" and cfg.timing == TimingSettings(0.05, 20)
    a, b = cfg.cases
    assert a.name == "reduce256" and a.source == (tmp_path / "kernels/reduce.cu").resolve()
    assert a.kernel == "reduce<256>" and a.grid == "ceil_div(n, 256)" and a.block == "256"
    assert a.dynamic_smem == "1k" and a.nvcc_flags == ("-DTILE=16",)
    assert a.args == ("n=4194304", "flag=true") and a.buffers == ("in=float32[n]",)
    assert a.metrics == ("registers", "spill_bytes", "occupancy", "time")
    assert a.threshold("registers") == Threshold(abs=4, rel=0.10)
    assert a.threshold("time") == Threshold(rel=0.03)
    assert a.threshold("spill_bytes") == Threshold(abs=0)
    assert a.threshold("occupancy") == METRICS["occupancy"].default
    assert a.gpu == "H100"
    # second case: name from the kernel's base name, its own metrics and threshold override
    assert b.name == "scan" and b.source is None and b.spec == (tmp_path / "kernels/case.toml")
    assert b.metrics == ("registers",) and b.threshold("registers") == Threshold(abs=8)


def test_parse_pyproject(tmp_path: Path) -> None:
    text = GATE_TOML.replace("[gate", "[tool.gpuadvise.gate")
    cfg = load_gate_config(write(tmp_path / "pyproject.toml", text))
    assert [c.name for c in cfg.cases] == ["reduce256", "scan"]


def test_discovery_walks_up(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    write(tmp_path / "a" / "pyproject.toml", GATE_TOML.replace("[gate", "[tool.gpuadvise.gate"))
    write(tmp_path / "a" / "b" / "pyproject.toml", "[project]\nname = 'x'\n")  # no gate table
    write(tmp_path / "a" / "b" / "gpuadvise.toml", "[analyze]\nx = 1\n")  # no [gate]
    assert find_gate_config(deep) == tmp_path / "a" / "pyproject.toml"
    assert load_gate_config(start=deep).path == (tmp_path / "a" / "pyproject.toml").resolve()
    # gpuadvise.toml wins over pyproject.toml in the same folder
    write(tmp_path / "a" / "gpuadvise.toml", GATE_TOML)
    assert find_gate_config(deep) == tmp_path / "a" / "gpuadvise.toml"


def test_discovery_none(tmp_path: Path) -> None:
    if find_gate_config(tmp_path) is not None:
        pytest.skip("a gate config exists above the temporary folder")
    with pytest.raises(ConfigError, match="no gate configuration found") as e:
        load_gate_config(start=tmp_path)
    assert "--config" in e.value.one_line()


def test_explicit_config_without_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no \[tool.gpuadvise.gate\] table"):
        load_gate_config(write(tmp_path / "pyproject.toml", "[project]\nname='x'\n"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_gate_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_gate_config(write(tmp_path / "bad.toml", "[gate\n"))


@pytest.mark.parametrize(
    ("snippet", "key", "hint"),
    [
        ("[gate]\nbaselin = 'x'\n", "gate.baselin", "did you mean 'baseline'?"),
        ("[gate]\n[[gate.cases]]\nsource='k.cu'\nkernal='k'\n", "gate.cases[0].kernal", "kernel"),
        ("[gate]\n[gate.thresholds]\nregister = 1\n", "gate.thresholds.register", "registers"),
        ("[gate]\n[gate.thresholds]\ntime = {absolute = 1}\n", "gate.thresholds.time.absolute", ""),
        ("[gate]\n[gate.timing]\nalpah = 0.1\n", "gate.timing.alpah", "alpha"),
    ],
)
def test_unknown_keys_are_named(tmp_path: Path, snippet: str, key: str, hint: str) -> None:
    path = write(tmp_path / "gpuadvise.toml", snippet)
    with pytest.raises(ConfigError) as e:
        load_gate_config(path)
    line = e.value.one_line()
    assert f"unknown key {key}" in line and hint in line and "\n" not in line


@pytest.mark.parametrize(
    ("snippet", "match"),
    [
        ("[gate]\nmetrics = ['registrs']\n", "unknown metric 'registrs'"),
        ("[gate]\n", "has no cases"),
        ("[gate]\ncases = []\n", "cases is empty"),
        ("[gate]\n[[gate.cases]]\nkernel = 'k'\n", "neither source nor spec"),
        ("[gate]\n[[gate.cases]]\nsource='a.cu'\n[[gate.cases]]\nsource='b/a.cu'\n", "two gate"),
        ("[gate]\n[gate.thresholds]\ntime = -1\n", "must be finite and >= 0"),
        ("[gate]\n[gate.thresholds]\ntime = 'five'\n", "must be a number"),
        ("[gate]\n[gate.timing]\nalpha = 0.7\n", "alpha must be between"),
        ("[gate]\n[gate.timing]\nmin_samples = 1\n", "min_samples must be an integer"),
    ],
)
def test_bad_config_values(tmp_path: Path, snippet: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_gate_config(write(tmp_path / "gpuadvise.toml", snippet))


def test_select_and_device(tmp_path: Path) -> None:
    cfg = load_gate_config(write(tmp_path / "gpuadvise.toml", GATE_TOML))
    assert [c.name for c in cfg.select(["scan"]).cases] == ["scan"]
    with pytest.raises(UsageError, match="no gate case named 'sacn'") as e:
        cfg.select(["sacn"])
    assert "did you mean 'scan'?" in e.value.one_line()
    moved = cfg.with_device("A100", None)
    assert all(c.gpu == "A100" and c.arch is None for c in moved.cases)


def test_rebase_case(tmp_path: Path) -> None:
    case = GateCase("k", source=tmp_path / "repo/k/a.cu", spec=tmp_path / "repo/k/a.toml")
    outside = GateCase("o", source=tmp_path / "elsewhere/a.cu")
    moved = rebase_case(case, tmp_path / "repo", tmp_path / "wt")
    assert moved.source == tmp_path / "wt/k/a.cu" and moved.spec == tmp_path / "wt/k/a.toml"
    assert rebase_case(outside, tmp_path / "repo", tmp_path / "wt").source == outside.source


# --- static verdicts ----------------------------------------------------------------------------

# metric: (baseline, worse, better, within-threshold)
STATIC_CASES = {
    "registers": (32, 40, 24, 33),
    "spill_bytes": (16, 24, 0, 16),
    "occupancy": (0.5, 0.375, 0.75, 0.5),
    "smem_excess_wavefronts": (1000, 1200, 500, 1020),
    "global_excess_sectors": (2000, 2400, 1000, 1960),
    "l2_hit_rate": (0.80, 0.70, 0.90, 0.79),
}


@pytest.mark.parametrize("metric", list(STATIC_CASES))
def test_static_metric_regressing_improving_staying(metric: str) -> None:
    base, worse, better, same = STATIC_CASES[metric]
    r = compare_static("k", metric, base, worse)
    assert r.verdict is Verdict.REGRESSION, r.reason
    assert "worse by more than" in r.reason
    r = compare_static("k", metric, base, better)
    assert r.verdict is Verdict.IMPROVEMENT, r.reason
    r = compare_static("k", metric, base, same)
    assert r.verdict is Verdict.SAME, r.reason
    assert compare_static("k", metric, base, base).verdict is Verdict.SAME


def test_direction_awareness() -> None:
    # more registers is worse; lower occupancy and lower hit rate are worse
    assert compare_static("k", "registers", 32, 64).verdict is Verdict.REGRESSION
    assert compare_static("k", "occupancy", 0.5, 1.0).verdict is Verdict.IMPROVEMENT
    assert compare_static("k", "occupancy", 1.0, 0.5).verdict is Verdict.REGRESSION
    assert compare_static("k", "l2_hit_rate", 0.5, 0.9).verdict is Verdict.IMPROVEMENT
    assert compare_static("k", "l2_hit_rate", 0.9, 0.5).verdict is Verdict.REGRESSION


def test_threshold_every_bound_must_be_exceeded() -> None:
    thr = Threshold(abs=4, rel=0.10)
    assert compare_static("k", "registers", 16, 18, thr).verdict is Verdict.SAME  # +2, 12.5 %
    assert compare_static("k", "registers", 64, 69, thr).verdict is Verdict.SAME  # +5, 7.8 %
    assert compare_static("k", "registers", 64, 72, thr).verdict is Verdict.REGRESSION  # +8, 12.5%
    assert compare_static("k", "registers", 64, 56, thr).verdict is Verdict.IMPROVEMENT
    only_abs = Threshold(abs=4)
    assert compare_static("k", "registers", 200, 205, only_abs).verdict is Verdict.REGRESSION
    assert compare_static("k", "registers", 200, 204, only_abs).verdict is Verdict.SAME


def test_static_from_zero_and_numbers() -> None:
    r = compare_static("k", "spill_bytes", 0, 8)
    assert r.verdict is Verdict.REGRESSION and r.change_abs == 8 and r.change_rel is None
    assert "0 B → 8 B (+8 B)" in r.reason
    r = compare_static("k", "registers", 32, 40)
    assert r.change_abs == 8 and r.change_rel == pytest.approx(0.25)
    assert r.reason.startswith("32 → 40 (+8, +25.0%)")
    r = compare_static("k", "occupancy", 0.5, 0.375)
    assert "50.0% → 37.5% (-12.5 pp" in r.reason


def test_static_skipped_and_device_mismatch() -> None:
    assert compare_static("k", "registers", None, 3).verdict is Verdict.SKIPPED
    assert compare_static("k", "registers", 3, None).verdict is Verdict.SKIPPED
    why = "the baseline was modelled for A100 and this run for H100"
    r = compare_static("k", "registers", 32, 64, env_reason=why)
    assert r.verdict is Verdict.AMBIGUOUS and why in r.reason
    assert compare_static("k", "registers", 32, 32, env_reason=why).verdict is Verdict.SAME


# --- timed verdicts -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_planted_10pct_slowdown_with_1pct_noise_is_caught(seed: int) -> None:
    a = samples(1.0, 0.01, 30, seed)
    b = samples(1.10, 0.01, 30, seed + 1000)
    r = compare_timed("k", a, b)
    assert r.verdict is Verdict.REGRESSION, r.reason
    assert r.p_value is not None and r.p_value < 0.01
    assert r.change_rel == pytest.approx(0.10, abs=0.01)
    assert r.noise_rel is not None and r.noise_rel < 0.03


@pytest.mark.parametrize("seed", range(20))
def test_2pct_change_is_same_or_ambiguous(seed: int) -> None:
    a = samples(1.0, 0.01, 30, seed)
    b = samples(1.02, 0.01, 30, seed + 1000)
    r = compare_timed("k", a, b)
    assert r.verdict in (Verdict.SAME, Verdict.AMBIGUOUS), r.reason
    noisy = compare_timed("k", samples(1.0, 0.05, 10, seed), samples(1.02, 0.05, 10, seed + 7))
    assert noisy.verdict in (Verdict.SAME, Verdict.AMBIGUOUS), noisy.reason


def test_2pct_change_well_measured_is_same() -> None:
    r = compare_timed("k", samples(1.0, 0.01, 200, 1), samples(1.02, 0.01, 200, 2))
    assert r.verdict is Verdict.SAME, r.reason
    assert r.ci_low is not None and r.ci_high is not None
    assert -0.05 <= r.ci_low < 0.02 < r.ci_high <= 0.05


def test_improvement() -> None:
    r = compare_timed("k", samples(1.0, 0.01, 30, 1), samples(0.8, 0.01, 30, 2))
    assert r.verdict is Verdict.IMPROVEMENT and "faster" in r.reason


def test_too_few_samples_is_ambiguous() -> None:
    r = compare_timed("k", samples(1.0, 0.01, 5, 1), samples(1.5, 0.01, 5, 2))
    assert r.verdict is Verdict.AMBIGUOUS and "too few samples" in r.reason
    assert r.n_baseline == 5 and r.n_current == 5
    r = compare_timed("k", samples(1.0, 0.01, 30, 1), samples(1.5, 0.01, 9, 2))
    assert r.verdict is Verdict.AMBIGUOUS and "need 10 each" in r.reason
    assert compare_timed("k", [], [1.0]).verdict is Verdict.AMBIGUOUS


@pytest.mark.parametrize("seed", range(10))
def test_overlapping_noise_is_ambiguous(seed: int) -> None:
    # a 10 % slowdown buried in 30 % noise: never a regression, never a silent pass
    r = compare_timed("k", samples(1.0, 0.3, 40, seed), samples(1.1, 0.3, 40, seed + 99))
    assert r.verdict is Verdict.AMBIGUOUS, r.reason


def test_within_noise_reason() -> None:
    # bimodal runs: the medians differ by 10 % (significant with many samples), but the middle
    # halves of the two runs overlap widely
    a = [0.8] * 100 + [1.0] * 101 + [1.2] * 100
    b = [0.9] * 100 + [1.1] * 101 + [1.3] * 100
    r = compare_timed("k", a, b)
    assert r.verdict is Verdict.AMBIGUOUS
    assert r.p_value is not None and r.p_value < 0.01
    assert "within the measured noise" in r.reason


def test_not_significant_reason() -> None:
    a = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0]
    b = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    r = compare_timed("k", a, b)
    assert r.verdict is Verdict.AMBIGUOUS and "not significant" in r.reason


def test_identical_and_invalid_samples() -> None:
    a = samples(1.0, 0.01, 20, 3)
    r = compare_timed("k", a, a)
    assert r.verdict is Verdict.SAME and r.change_rel == 0
    assert compare_timed("k", a, [1.0] * 10 + [math.nan]).verdict is Verdict.ERROR
    assert compare_timed("k", a, [1.0] * 10 + [-1.0]).verdict is Verdict.ERROR


def test_timed_threshold_and_env_reason() -> None:
    a, b = samples(1.0, 0.01, 30, 1), samples(1.04, 0.01, 30, 2)
    assert compare_timed("k", a, b, Threshold(rel=0.02)).verdict is Verdict.REGRESSION
    assert compare_timed("k", a, b).verdict is Verdict.SAME
    # an absolute bound in ms: 0.1 ms on a 1 ms kernel is 10 %
    assert compare_timed("k", a, b, Threshold(abs=0.1, rel=0.02)).verdict is Verdict.SAME
    why = "the stored samples were timed on A100 and this run is on H100"
    r = compare_timed("k", a, samples(2.0, 0.01, 30, 2), env_reason=why, mode="stored")
    assert r.verdict is Verdict.AMBIGUOUS and why in r.reason and r.mode == "stored"


def test_custom_alpha_and_min_samples() -> None:
    a, b = samples(1.0, 0.01, 8, 1), samples(1.1, 0.01, 8, 2)
    assert compare_timed("k", a, b).verdict is Verdict.AMBIGUOUS
    r = compare_timed("k", a, b, settings=TimingSettings(alpha=0.05, min_samples=5))
    assert r.verdict is Verdict.REGRESSION, r.reason


# --- baselines ------------------------------------------------------------------------------


def a_baseline(**metrics: float | None) -> Baseline:
    values = {**ALL_STATIC, **metrics}
    return Baseline(
        cases={
            "k": CaseBaseline(values, summarize(samples(1.0, 0.01, 30, 5)), "k", "k.cu"),
            "other": CaseBaseline({"registers": 10.0}, None),
        },
        environment=replace_env(CPU_ENV),
        timing_environment=H100_ENV,
        created="2024-01-01T00:00:00Z",
        source_rev="abc",
    )


def replace_env(env: Environment) -> Environment:
    return Environment(env.gpuadvise, env.toolchain, env.static_model, None, None)


def test_baseline_roundtrip(tmp_path: Path) -> None:
    b = a_baseline(l2_hit_rate=None)
    path = tmp_path / "sub" / "baseline.json"
    write_baseline(path, b)
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 1 and doc["kind"] == "gpuadvise-gate-baseline"
    assert doc["environment"]["gpuadvise"] == __version__
    assert doc["timing_environment"]["device"] == "NVIDIA H100 80GB HBM3"
    assert doc["cases"]["k"]["metrics"]["l2_hit_rate"] is None
    back = load_baseline(path)
    assert back == b


CORRUPT = [
    ("", "not JSON"),
    ('{"schema_version": 1, "kind": "gpuadvise-gate-baseline", "cas', "not JSON"),
    ("[1, 2]", "is not a gpuadvise gate baseline"),
    ('{"schema_version": 1, "kind": "something-else", "cases": {}}', "not a gpuadvise gate"),
    ('{"schema_version": 99, "kind": "gpuadvise-gate-baseline", "cases": {}}', "schema_version 99"),
    ('{"kind": "gpuadvise-gate-baseline", "cases": {}}', "schema_version None"),
    ('{"schema_version": 1, "kind": "gpuadvise-gate-baseline"}', "corrupt at cases"),
    (
        '{"schema_version": 1, "kind": "gpuadvise-gate-baseline", '
        '"cases": {"k": {"metrics": {"registers": "many"}}}}',
        "corrupt at cases.k.metrics.registers",
    ),
    (
        '{"schema_version": 1, "kind": "gpuadvise-gate-baseline", '
        '"cases": {"k": {"metrics": {}, "timing": {"n": 3}}}}',
        "corrupt at cases.k.timing",
    ),
]


@pytest.mark.parametrize(("text", "match"), CORRUPT)
def test_corrupt_or_mismatched_baseline_is_one_clear_line(
    tmp_path: Path, text: str, match: str
) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as e:
        load_baseline(path)
    line = e.value.one_line()
    assert match in line and str(path) in line and "\n" not in line
    assert e.value.exit_code == 2 and isinstance(e.value, ConfigError)


def test_missing_baseline(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="no baseline at") as e:
        load_baseline(tmp_path / "none.json")
    assert "--update-baseline" in e.value.one_line() and "--baseline-ref" in e.value.one_line()


def test_atomic_write_failure_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "baseline.json"
    old = a_baseline()
    write_baseline(path, old)
    before = path.read_bytes()

    def crash(fd: int) -> None:  # the data is written to the temp file, then the "disk" fails
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(UsageError, match=r"cannot write the baseline .* \(I/O error\)"):
        write_baseline(path, a_baseline(registers=99.0))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_baseline(path) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.json"]  # no temp left


def test_atomic_write_survives_a_killed_process(tmp_path: Path) -> None:
    """A process killed (SIGKILL) in the middle of writing leaves the old baseline readable."""
    if not hasattr(signal, "SIGKILL"):
        pytest.skip("needs SIGKILL")
    path = tmp_path / "baseline.json"
    old = a_baseline()
    write_baseline(path, old)
    child = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from gpuadvise.gate.baseline import load_baseline, write_baseline
        real_write = os.write

        def dying(fd, data):
            # writes half of the bytes, then the process dies
            real_write(fd, bytes(data[: len(data) // 2]))
            os.kill(os.getpid(), signal.SIGKILL)

        os.write = dying
        b = load_baseline(Path({str(path)!r}))
        big = {{f"case{{i}}": b.cases["k"] for i in range(200)}}
        from dataclasses import replace
        write_baseline(Path({str(path)!r}), replace(b, cases=big))
        """
    )
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert load_baseline(path) == old  # the old baseline survives, whole
    leftovers = [p for p in tmp_path.iterdir() if p.name != "baseline.json"]
    assert all(p.name.startswith(".baseline.json.") for p in leftovers)  # only a hidden temp


def test_merge_baseline_keeps_what_was_not_measured() -> None:
    prev = a_baseline()
    static_only = Baseline(
        {"k": CaseBaseline({"registers": 40.0}, None), "new": CaseBaseline({"registers": 1.0})},
        environment=replace_env(CPU_ENV),
        created="2024-02-02T00:00:00Z",
    )
    merged = merge_baseline(prev, static_only, static=True, timed=False)
    assert merged.cases["k"].metrics == {"registers": 40.0}
    assert merged.cases["k"].timing == prev.cases["k"].timing
    assert merged.timing_environment == prev.timing_environment
    assert merged.cases["new"].timing is None and "other" not in merged.cases
    timed_only = Baseline({"k": CaseBaseline({}, summarize([2.0] * 10))}, None, H100_ENV)
    merged = merge_baseline(prev, timed_only, static=False, timed=True)
    assert merged.cases["k"].metrics == prev.cases["k"].metrics
    assert merged.environment == prev.environment
    assert merged.cases["k"].timing is not None and merged.cases["k"].timing.median_ms == 2.0


# --- evaluation with a fake provider -----------------------------------------------------------


def config_for(tmp_path: Path, *cases: GateCase, **kw: object) -> GateConfig:
    return GateConfig(
        path=tmp_path / "gpuadvise.toml",
        root=tmp_path,
        cases=cases,
        baseline=tmp_path / "b.json",
        **kw,  # type: ignore[arg-type]
    )


def by_metric(result: GateResult) -> dict[tuple[str, str], Comparison]:
    return {(c.case, c.metric): c for c in result.comparisons}


def test_evaluate_stored(tmp_path: Path) -> None:
    cfg = config_for(tmp_path, GateCase("k", source=tmp_path / "k.cu", kernel="k"))
    now = {**ALL_STATIC, "registers": 40.0, "l2_hit_rate": None, "occupancy": Unavailable("why")}
    del now["global_excess_sectors"]
    prov = FakeProvider(static={"k": now}, timing={"k": TimingSamples(samples(1.0, 0.01, 30, 77))})
    result = evaluate_gate(
        cfg, prov, baseline=a_baseline(), locate=lambda c: ("k.cu", 7), baseline_path="b.json"
    )
    got = by_metric(result)
    assert got[("k", "registers")].verdict is Verdict.REGRESSION
    assert got[("k", "spill_bytes")].verdict is Verdict.SAME
    assert got[("k", "occupancy")].verdict is Verdict.SKIPPED
    assert got[("k", "occupancy")].reason == "not available (why)"
    assert got[("k", "l2_hit_rate")].verdict is Verdict.SKIPPED
    assert "not available" in got[("k", "l2_hit_rate")].reason
    assert got[("k", "global_excess_sectors")].verdict is Verdict.SKIPPED
    assert got[("k", "time")].verdict is Verdict.SAME and got[("k", "time")].mode == "stored"
    assert all(c.file == "k.cu" and c.line == 7 and c.kernel == "k" for c in result.comparisons)
    assert result.exit_code() == 1 and result.failed()
    assert result.warnings == ()
    # the provider timed only the current case (stored mode)
    assert [(k, b) for k, _, b in prov.calls if k == "timings"] == [("timings", None)]


def test_evaluate_missing_baseline_case_and_metric(tmp_path: Path) -> None:
    cfg = config_for(
        tmp_path,
        GateCase("new", source=tmp_path / "n.cu"),
        GateCase("other", source=tmp_path / "o.cu", metrics=("registers", "spill_bytes", "time")),
    )
    prov = FakeProvider(static={"new": ALL_STATIC, "other": ALL_STATIC}, timing={})
    got = by_metric(evaluate_gate(cfg, prov, baseline=a_baseline()))
    assert all(c.verdict is Verdict.SKIPPED for (case, _), c in got.items() if case == "new")
    assert "--update-baseline" in got[("new", "registers")].reason
    assert got[("other", "spill_bytes")].reason == "not in the baseline"
    assert got[("other", "registers")].verdict is Verdict.REGRESSION  # 10 -> 32
    assert "no timings" in got[("other", "time")].reason


def test_evaluate_provider_error_is_exit_2(tmp_path: Path) -> None:
    cfg = config_for(tmp_path, GateCase("k", source=tmp_path / "k.cu"))
    err = CompileError("k.cu(3): error: expected a ';'", "fix the source")
    prov = FakeProvider(static={"k": err}, timing={"k": err})
    result = evaluate_gate(cfg, prov, baseline=a_baseline())
    assert {c.verdict for c in result.comparisons} == {Verdict.ERROR}
    assert "expected a ';'" in result.comparisons[0].reason
    assert result.exit_code() == 2


def test_no_gpu_skips_timed_gates(tmp_path: Path) -> None:
    cfg = config_for(tmp_path, GateCase("k", source=tmp_path / "k.cu"))
    prov = FakeProvider(static={"k": ALL_STATIC}, env=CPU_ENV)
    result = evaluate_gate(cfg, prov, baseline=a_baseline())
    t = by_metric(result)[("k", "time")]
    assert t.verdict is Verdict.SKIPPED and "no GPU" in t.reason
    assert result.exit_code() == 0
    with pytest.raises(UsageError, match="timed gates need a GPU"):
        evaluate_gate(cfg, prov, baseline=a_baseline(), gates="timed")
    static_only = evaluate_gate(cfg, prov, baseline=a_baseline(), gates="static")
    assert all(c.metric != "time" for c in static_only.comparisons)


def test_environment_mismatches(tmp_path: Path) -> None:
    cfg = config_for(tmp_path, GateCase("k", source=tmp_path / "k.cu"))
    env = Environment(
        toolchain="12.4", static_model="A100 (sm_80)", device="NVIDIA A100", driver="550"
    )
    now = {**ALL_STATIC, "registers": 64.0}
    prov = FakeProvider(
        static={"k": now}, timing={"k": TimingSamples(samples(2.0, 0.01, 30, 1))}, env=env
    )
    result = evaluate_gate(cfg, prov, baseline=a_baseline())
    got = by_metric(result)
    assert got[("k", "registers")].verdict is Verdict.AMBIGUOUS
    assert "modelled for H100 (sm_90)" in got[("k", "registers")].reason
    assert got[("k", "spill_bytes")].verdict is Verdict.SAME
    assert got[("k", "time")].verdict is Verdict.AMBIGUOUS
    assert "timed on NVIDIA H100 80GB HBM3" in got[("k", "time")].reason
    text = "\n".join(result.warnings)
    assert "device model H100 (sm_90)" in text and "toolchain 13.2" in text
    assert "driver 570.1" in text and "device NVIDIA H100 80GB HBM3" in text
    assert result.exit_code() == 0
    assert GateResult(result.comparisons, strict=True).exit_code() == 1
    # a driver update alone: a warning line, the comparison still counts
    env2 = Environment(
        toolchain="13.2",
        static_model="H100 (sm_90)",
        device="NVIDIA H100 80GB HBM3",
        driver="580.0",
    )
    prov2 = FakeProvider(
        static={"k": ALL_STATIC}, timing={"k": TimingSamples(samples(2.0, 0.01, 30, 1))}, env=env2
    )
    r2 = evaluate_gate(cfg, prov2, baseline=a_baseline())
    assert by_metric(r2)[("k", "time")].verdict is Verdict.REGRESSION
    assert r2.warnings == ("stored timings were recorded with driver 570.1; this run uses 580.0",)


def test_evaluate_ref_mode(tmp_path: Path) -> None:
    case = GateCase("k", source=tmp_path / "k.cu")
    fresh = GateCase("fresh", source=tmp_path / "f.cu")
    base_case = GateCase("k", source=tmp_path / "wt/k.cu")
    cfg = config_for(tmp_path, case, fresh)

    def static(c: GateCase) -> dict[str, float]:
        return {**ALL_STATIC, "registers": 32.0 if "wt" in str(c.source) else 48.0}

    def timing(c: GateCase, b: GateCase | None) -> TimingSamples:
        assert b == base_case
        return TimingSamples(samples(1.1, 0.01, 30, 1), samples(1.0, 0.01, 30, 2))

    prov = FakeProvider(static={"k": static, "fresh": ALL_STATIC}, timing={"k": timing})
    result = evaluate_gate(
        cfg, prov, baseline_cases={"k": base_case, "fresh": None}, baseline_ref="origin/main"
    )
    got = by_metric(result)
    assert got[("k", "registers")].verdict is Verdict.REGRESSION
    assert got[("k", "time")].verdict is Verdict.REGRESSION and got[("k", "time")].mode == "a/b"
    assert got[("fresh", "registers")].verdict is Verdict.SKIPPED
    assert "do not exist at origin/main" in got[("fresh", "registers")].reason
    assert result.mode == "ref" and "against origin/main" in summary_line(result)
    with pytest.raises(ValueError):
        evaluate_gate(cfg, prov)


def test_ref_mode_provider_without_baseline_samples(tmp_path: Path) -> None:
    case = GateCase("k", source=tmp_path / "k.cu", metrics=("time",))
    prov = FakeProvider(timing={"k": TimingSamples(samples(1.0, 0.01, 30))})
    result = evaluate_gate(config_for(tmp_path, case), prov, baseline_cases={"k": case})
    assert result.comparisons[0].verdict is Verdict.ERROR


def test_measure_baseline(tmp_path: Path) -> None:
    cfg = config_for(
        tmp_path, GateCase("k", source=tmp_path / "k.cu", kernel="k<1>"), GateCase("j")
    )
    prov = FakeProvider(
        static={"k": {**ALL_STATIC, "l2_hit_rate": None}, "j": ALL_STATIC},
        timing={"k": TimingSamples(samples(1.0, 0.01, 30)), "j": TimingSamples((1.0,) * 4)},
    )
    b, notes = measure_baseline(cfg, prov, source_rev="deadbeef", created="now")
    assert b.cases["k"].metrics["l2_hit_rate"] is None and b.cases["k"].source == "k.cu"
    assert b.cases["k"].timing is not None and b.cases["k"].timing.n == 30
    assert b.environment is not None and b.environment.device is None
    assert b.timing_environment == H100_ENV and b.source_rev == "deadbeef"
    assert any("l2_hit_rate not available" in n for n in notes)
    assert any("only 4 timing samples" in n for n in notes)
    # no GPU: static recorded, the previous timings kept
    cpu = FakeProvider(static={"k": ALL_STATIC, "j": ALL_STATIC}, env=CPU_ENV)
    b2, notes2 = measure_baseline(cfg, cpu, previous=b)
    assert b2.cases["k"].timing == b.cases["k"].timing and b2.timing_environment == H100_ENV
    assert any("no GPU" in n for n in notes2)
    with pytest.raises(UsageError):
        measure_baseline(cfg, cpu, gates="timed")
    bad = FakeProvider(static={"k": CompileError("boom", None), "j": ALL_STATIC})
    with pytest.raises(GateError, match="cannot record the baseline of case 'k': boom"):
        measure_baseline(cfg, bad, gates="static")


def test_result_json_roundtrip(tmp_path: Path) -> None:
    cfg = config_for(tmp_path, GateCase("k", source=tmp_path / "k.cu"))
    prov = FakeProvider(
        static={"k": {**ALL_STATIC, "spill_bytes": 8.0}},
        timing={"k": TimingSamples(samples(1.3, 0.01, 30, 4))},
    )
    result = evaluate_gate(cfg, prov, baseline=a_baseline(spill_bytes=0.0), strict=True)
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert doc["summary"]["regression"] == 2 and doc["exit_code"] == 1
    assert GateResult.from_dict(doc) == result


def test_gate_table_and_summary() -> None:
    comps = (
        compare_static("k", "registers", 32, 40),
        compare_static("k", "occupancy", 0.5, 0.5),
        compare_timed("k", samples(1.0, 0.01, 30, 1), samples(1.2, 0.01, 30, 2)),
    )
    result = GateResult(comps, baseline_path="b.json")
    table = gate_table(result)
    assert table.headers[:3] == ("case", "metric", "baseline")
    reg, occ, t = (r.cells() for r in table.rows)
    assert reg[:7] == ("k", "registers", "32", "40", "+8 (+25.0%)", "> 10%", "regression")
    assert occ[2:5] == ("50.0%", "50.0%", "0")
    assert t[2].endswith("ms") and t[4].startswith("+") and t[6] == "regression"
    assert summary_line(result) == "FAILED: 2 regressions, 1 same (against b.json)"
    assert format_value("time", 0.0123) == "12.30 µs"
    assert format_value("spill_bytes", 8) == "8 B"
    assert format_value("registers", None) == "—"


def test_discovery_stops_at_the_repository_root(tmp_path: Path) -> None:
    write(tmp_path / "gpuadvise.toml", GATE_TOML)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    assert find_gate_config(repo / "src") is None
    assert find_gate_config(tmp_path) == tmp_path / "gpuadvise.toml"


def test_docs_config_example_parses(tmp_path: Path) -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "ci-example.md"
    block = doc.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    cfg = load_gate_config(write(tmp_path / "gpuadvise.toml", block))
    assert [c.name for c in cfg.cases] == ["reduce256", "transpose"]
    assert cfg.cases[1].threshold("time") == Threshold(rel=0.03)
    assert cfg.cases[0].buffers[1] == "out=float32[ceil_div(n, 256)]:zeros"
    py = block.replace("[gate", "[tool.gpuadvise.gate")
    assert load_gate_config(write(tmp_path / "pyproject.toml", py)).cases == cfg.cases
