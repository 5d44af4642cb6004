"""``gpuadvise gate`` end to end with a fake provider: files, git worktrees, formats, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from gate_fakes import CPU_ENV, SourceProvider

from gpuadvise.cli import gate as gate_cmd
from gpuadvise.cli.gate import gate_command, parse_format_targets
from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError
from gpuadvise.gate import run as gate_run
from gpuadvise.gate.baseline import BaselineError
from gpuadvise.gate.git import baseline_worktree

KERNEL = """\
#include <cuda_runtime.h>
// gate: registers={regs} spill_bytes=0 occupancy=0.5 time_ms={time}

__global__ void scale(float* out, const float* in, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}}
"""

CONFIG = """\
[gate]
baseline = "ci/gate-baseline.json"

[[gate.cases]]
name = "scale"
source = "kernels/scale.cu"
kernel = "scale"
grid = 64
block = 256
args = {{ n = 16384 }}
metrics = {metrics}
"""

METRICS = '["registers", "spill_bytes", "occupancy", "time"]'


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
    }
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def write_kernel(repo: Path, regs: int = 32, time: float = 1.0, name: str = "scale.cu") -> Path:
    path = repo / "kernels" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(KERNEL.format(regs=regs, time=time))
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "gpuadvise.toml").write_text(CONFIG.format(metrics=METRICS))
    write_kernel(root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "base")
    return root


def worktrees(repo: Path) -> list[str]:
    return [
        line.split(" ", 1)[1]
        for line in git(repo, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def test_baseline_ref_worktree(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    write_kernel(repo, regs=40, time=1.10)  # the pull request: more registers, 10 % slower
    prov = SourceProvider()
    code = gate_command(baseline_ref="main", provider=prov, cwd=repo / "kernels")
    assert code == 1
    out = capsys.readouterr().out
    assert "FAILED: 2 regressions, 2 same (against main)" in out
    # the provider compiled the same case from both trees: the working tree and a checkout of main
    current = (repo / "kernels" / "scale.cu").resolve()
    others = {p for p in prov.seen if p != current}
    assert current in prov.seen and len(others) == 1
    (old,) = others
    assert old.name == "scale.cu" and repo.resolve() not in old.parents
    # ... and both are gone afterwards
    assert not old.exists() and not old.parent.parent.parent.exists()
    assert worktrees(repo) == [str(repo.resolve())]


def test_baseline_ref_new_case_and_clean_tree(repo: Path, capsys: pytest.CaptureFixture[str]):
    assert gate_command(baseline_ref="HEAD", provider=SourceProvider(), cwd=repo) == 0
    assert "PASSED: 4 same" in capsys.readouterr().out
    write_kernel(repo, name="fresh.cu")
    with (repo / "gpuadvise.toml").open("a") as fh:
        fh.write(
            '\n[[gate.cases]]\nsource = "kernels/fresh.cu"\ngrid = 64\nblock = 256\n'
            'args = { n = 16384 }\nmetrics = ["registers"]\n'
        )
    code = gate_command(baseline_ref="HEAD", provider=SourceProvider(), cwd=repo, formats=["json"])
    doc = json.loads(capsys.readouterr().out)
    fresh = [c for c in doc["comparisons"] if c["case"] == "fresh"]
    assert code == 0 and fresh[0]["verdict"] == "skipped"
    assert "do not exist at HEAD" in fresh[0]["reason"]


def test_baseline_ref_errors(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="git does not know the revision 'nope'") as e:
        gate_command(baseline_ref="nope", provider=SourceProvider(), cwd=repo)
    assert "fetch-depth: 0" in e.value.one_line()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "gpuadvise.toml").write_text(CONFIG.format(metrics=METRICS))
    write_kernel(plain)
    with pytest.raises(UsageError, match="is not inside a git repository"):
        gate_command(baseline_ref="main", provider=SourceProvider(), cwd=plain)
    with pytest.raises(UsageError, match="do not go together"):
        gate_command(baseline_ref="main", update_baseline=True, provider=SourceProvider())
    with pytest.raises(UsageError, match="--baseline and --baseline-ref"):
        gate_command(baseline_ref="main", baseline="b.json", provider=SourceProvider())


def test_baseline_worktree_cleans_up_on_error(repo: Path) -> None:
    seen: list[Path] = []
    with pytest.raises(RuntimeError), baseline_worktree("main", repo) as (tree, top):
        seen.append(tree)
        assert (tree / "kernels" / "scale.cu").is_file() and top == repo.resolve()
        raise RuntimeError("boom")
    assert not seen[0].exists() and worktrees(repo) == [str(repo.resolve())]


def test_update_then_compare(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline = repo / "ci" / "gate-baseline.json"
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0
    assert (
        "recorded the gate baseline of 1 case in ci/gate-baseline.json" in capsys.readouterr().out
    )
    doc = json.loads(baseline.read_text())
    assert doc["cases"]["scale"]["metrics"]["registers"] == 32
    assert doc["cases"]["scale"]["timing"]["n"] == 30
    assert doc["source_rev"] == git(repo, "rev-parse", "HEAD")
    assert gate_command(provider=SourceProvider(), cwd=repo) == 0
    capsys.readouterr()

    write_kernel(repo, regs=64, time=1.0)
    assert gate_command(provider=SourceProvider(), cwd=repo) == 1
    assert gate_command(provider=SourceProvider(), cwd=repo, exit_zero=True) == 0
    out = capsys.readouterr().out
    assert "regression" in out and "32 → 64" in out
    # only the timing changed: on a CPU machine the time gate is skipped and reported
    write_kernel(repo, regs=32, time=2.0)
    assert gate_command(provider=SourceProvider(env=CPU_ENV), cwd=repo) == 0
    assert "no GPU on this machine" in capsys.readouterr().out
    assert gate_command(provider=SourceProvider(), cwd=repo) == 1


def test_update_baseline_on_cpu_keeps_timings(repo: Path) -> None:
    baseline = repo / "ci" / "gate-baseline.json"
    gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo)
    before = json.loads(baseline.read_text())
    write_kernel(repo, regs=48)
    gate_command(update_baseline=True, provider=SourceProvider(env=CPU_ENV), cwd=repo)
    after = json.loads(baseline.read_text())
    assert after["cases"]["scale"]["metrics"]["registers"] == 48
    assert after["cases"]["scale"]["timing"] == before["cases"]["scale"]["timing"]
    assert after["timing_environment"] == before["timing_environment"]


def test_corrupt_baseline_is_exit_2(repo: Path) -> None:
    baseline = repo / "ci" / "gate-baseline.json"
    baseline.parent.mkdir()
    baseline.write_text('{"schema_version": 1, "kind": "gpuadvise-gate-ba')
    with pytest.raises(BaselineError) as e:
        gate_command(provider=SourceProvider(), cwd=repo)
    assert e.value.exit_code == 2 and "is corrupt (not JSON" in e.value.one_line()
    baseline.write_text('{"schema_version": 2, "kind": "gpuadvise-gate-baseline", "cases": {}}')
    with pytest.raises(BaselineError, match="schema_version 2"):
        gate_command(provider=SourceProvider(), cwd=repo)
    # --update-baseline repairs it
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=repo) == 0
    assert gate_command(provider=SourceProvider(), cwd=repo) == 0


def test_missing_case_file_and_explicit_config(repo: Path, tmp_path: Path) -> None:
    (repo / "kernels" / "scale.cu").unlink()
    with pytest.raises(ConfigError, match="scale.cu does not exist"):
        gate_command(provider=SourceProvider(), cwd=repo)
    other = tmp_path / "other.toml"
    other.write_text("[gate]\n[[gate.cases]]\nsource = 'x.cu'\n")
    with pytest.raises(ConfigError, match="x.cu does not exist"):
        gate_command(config=str(other), provider=SourceProvider(), cwd=repo)


def test_formats_to_files(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_kernel(repo, regs=40, time=1.0)
    out = repo / "out"
    code = gate_command(
        baseline_ref="main",
        provider=SourceProvider(),
        cwd=repo,
        formats=[
            f"sarif={out / 'gate.sarif'}",
            f"junit={out / 'junit.xml'}",
            f"markdown={out / 'summary.md'}",
            "github",
        ],
    )
    assert code == 1
    stdout = capsys.readouterr().out
    # the table and the annotations share stdout; the kernel's __global__ is on line 4
    assert "FAILED" in stdout
    assert "::error file=kernels/scale.cu,line=4,title=scale%3A registers per thread " in stdout
    sarif = json.loads((out / "gate.sarif").read_text())
    (res,) = sarif["runs"][0]["results"]
    assert res["ruleId"] == "GATE-registers" and res["level"] == "error"
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "kernels/scale.cu" and loc["region"]["startLine"] == 4
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    assert "❌ **FAILED**" in (out / "summary.md").read_text()


def test_json_to_stdout_is_pure(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gate_command(baseline_ref="main", provider=SourceProvider(), cwd=repo, formats=["json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "gpuadvise-gate-result" and doc["summary"]["same"] == 4


def test_output_option_and_step_summary(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = tmp_path / "r.xml"
    gate_command(
        baseline_ref="main",
        provider=SourceProvider(),
        cwd=repo,
        formats=["junit", f"markdown={summary}"],
        output=str(out),
    )
    ET.parse(out)
    text = summary.read_text()
    assert text.startswith("earlier step\n") and "## gpuadvise gate" in text  # appended


def test_parse_format_targets() -> None:
    assert parse_format_targets([], None) == [("text", None)]
    assert parse_format_targets(["SARIF=a.sarif", "github"], "x") == [
        ("sarif", Path("a.sarif")),
        ("github", Path("x")),
    ]
    with pytest.raises(UsageError, match="unknown --format 'xml'"):
        parse_format_targets(["xml"], None)
    with pytest.raises(UsageError, match="more than one --format would go to stdout"):
        parse_format_targets(["json", "sarif"], None)
    with pytest.raises(UsageError, match="names no file"):
        parse_format_targets(["json="], None)
    with pytest.raises(UsageError, match="--output has no format"):
        parse_format_targets(["json=a"], "b")


def test_default_provider_missing(monkeypatch: pytest.MonkeyPatch, repo: Path) -> None:
    import importlib

    real = importlib.import_module

    def fake(name: str, *a: object) -> object:
        if name == "gpuadvise.gate.metrics":
            raise ModuleNotFoundError(name=name)
        return real(name)

    monkeypatch.setattr(gate_run.importlib, "import_module", fake)
    with pytest.raises(GpuAdviseError, match="no gate metrics provider"):
        gate_command(cwd=repo, baseline_ref="main")


def test_click_options(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The options as the CLI will wire them: names line up with gate_command's keywords."""
    monkeypatch.setattr(gate_run, "default_provider", lambda config: SourceProvider())

    @click.command()
    @gate_cmd.gate_options
    def gate(**options: object) -> None:
        raise SystemExit(gate_command(**options))  # type: ignore[arg-type]

    runner = CliRunner()
    helptext = runner.invoke(gate, ["--help"]).output
    for opt in ("--config", "--baseline-ref", "--update-baseline", "--gates", "--format"):
        assert opt in helptext
    monkeypatch.chdir(repo)
    write_kernel(repo, regs=40)
    r = runner.invoke(gate, ["--baseline-ref", "main", "--gates", "static", "--case", "scale"])
    assert r.exit_code == 1, r.output
    assert "time" not in r.output.split("FAILED")[0].split()
    r = runner.invoke(gate, ["--baseline-ref", "main", "--gates", "static", "--exit-zero"])
    assert r.exit_code == 0
    r = runner.invoke(gate, ["--gates", "sometimes"])
    assert r.exit_code == 2


def test_help_text_mentions_formats() -> None:
    @click.command()
    @gate_cmd.gate_options
    def gate(**options: object) -> None:
        pass

    text = CliRunner().invoke(gate, ["--help"]).output
    assert all(fmt in text for fmt in gate_cmd.FORMATS)
    assert textwrap.dedent(text)
