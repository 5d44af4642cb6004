"""``gpuadvise analyze FOLDER...``: every case under the folders, in parallel (``--jobs``), split
for CI (``--shard``), ranked by the time to win, in every format; and ``gate --shard``.

The runs of one job at a time are in this process (``main(argv)``); those of several jobs, whose
workers are processes of their own (``spawn``), run ``python -m gpuadvise``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import cli_run

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]
FOLDERS = ("kernels/tail", "kernels/blocksize")
# --no-trace: the launch rules (GA102, GA103) are enough for the ranking and the formats
QUICK = ("--no-measure", "--no-trace")


@pytest.fixture(scope="module", autouse=True)
def _in_root() -> Iterator[None]:
    """The repository as the working folder (the cases are named relative to it)."""
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(old)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """``gpuadvise analyze ARGS`` in this process."""
    return cli_run("analyze", *args, *QUICK)


def _process(*args: str) -> subprocess.CompletedProcess[str]:
    """``gpuadvise analyze ARGS`` as a process of its own (for several jobs)."""
    return subprocess.run(
        [sys.executable, "-m", "gpuadvise", "analyze", *args, *QUICK],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def _stable(doc: dict[str, Any]) -> Any:
    """What must not depend on the number of jobs: the ranking and each case's findings."""
    summary = [{k: v for k, v in s.items() if k != "wall_s"} for s in doc["summary"]]
    cases = []
    for c in doc["cases"]:
        found = (c["analysis"] or {}).get("findings", [])
        cases.append((c["case"], c["error"], [(f["rule"], f["line"], f["message"]) for f in found]))
    return summary, cases


@pytest.fixture(scope="module")
def one_job() -> dict[str, Any]:
    p = _run(*FOLDERS, "--jobs", "1", "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_one_and_several_jobs_agree(one_job: dict[str, Any]) -> None:
    p = _process(*FOLDERS, "--jobs", "4", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert _stable(json.loads(p.stdout)) == _stable(one_job)


def test_folders_are_ranked_by_the_time_to_win(one_job: dict[str, Any]) -> None:
    ids = [c["case"] for c in one_job["cases"]]
    assert ids == sorted(ids) and len(ids) == 5
    assert "kernels/tail/scale_small_grid.toml" in ids
    wins = [s["time_to_win_ms"] for s in one_job["summary"] if s["time_to_win_ms"] is not None]
    assert wins == sorted(wins, reverse=True) and wins and wins[0] > 0
    top = one_job["summary"][0]
    assert top["basis"] == "estimated" and top["best_rule"] in {"GA102", "GA103"}
    # the cases without a finding come last
    assert all(s["best_rule"] is None for s in one_job["summary"][len(wins) :])


def test_shards_cover_every_case_once(one_job: dict[str, Any]) -> None:
    seen: list[str] = []
    for k in (1, 2, 3):
        p = _run(*FOLDERS, "--shard", f"{k}/3", "--format", "json", "--jobs", "1")
        assert p.returncode == 0, p.stderr
        seen += [c["case"] for c in json.loads(p.stdout)["cases"]]
    assert sorted(seen) == sorted(c["case"] for c in one_job["cases"])


def test_every_format_covers_every_case(one_job: dict[str, Any], tmp_path: Path) -> None:
    kernels = {c["analysis"]["kernel"]["name"] for c in one_job["cases"] if c["analysis"]}
    with_findings = {
        c["analysis"]["kernel"]["name"] for c in one_job["cases"] if c["analysis"]["findings"]
    }
    sarif = tmp_path / "out.sarif"
    assert _run(*FOLDERS, "--format", "sarif", "-o", str(sarif), "--jobs", "1").returncode == 0
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"GA102", "GA103"}
    junit = _run(*FOLDERS, "--format", "junit", "--jobs", "1")
    suites = {s.get("name") for s in ET.fromstring(junit.stdout).iter("testsuite")}
    assert with_findings <= suites
    md = _run(*FOLDERS, "--format", "markdown", "--jobs", "1").stdout
    assert all(c["case"] in md for c in one_job["cases"])
    html = tmp_path / "out.html"
    assert _run(*FOLDERS, "--format", "html", "-o", str(html), "--jobs", "1").returncode == 0
    page = html.read_text()
    assert "<iframe" not in page and "time to win" in page  # one page, linked sections
    assert page.count('<article class="case"') == len(kernels)
    # ranked, as the summary table links them: the sections follow the ranking
    ids = re.findall(r'<article class="case" id="case-(\d+)"', page)
    assert ids == [str(i) for i in range(1, len(kernels) + 1)]
    assert "e-0" not in page.split('id="summary"')[1].split("</table>")[0]  # no 1.2e-05 ms


def test_one_kernel_options_are_refused_with_several_cases() -> None:
    p = _run("kernels/tail", "--grid", "4")
    assert p.returncode == 2 and "--grid describes one kernel" in p.stderr
    p = _run("kernels/tail", "--fix")
    assert p.returncode == 2 and "take one kernel" in p.stderr
    p = _run("kernels/tail", "--shard", "4/3")
    assert p.returncode == 2 and "--shard" in p.stderr


def test_a_broken_case_is_a_row_not_the_end(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('source = "absent.cu"\nkernel = "k"\n')
    p = _process(
        str(tmp_path), "kernels/tail", "--format", "json", "--jobs", "2", "--fail-on", "error"
    )
    # a case that could not be analyzed is an error once every case is reported (as in gate)
    assert p.returncode == 2 and "1 of 4 cases could not be analyzed" in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    errors = [c for c in doc["cases"] if c["error"]]
    assert len(errors) == 1 and "absent.cu" in errors[0]["error"]
    assert len(doc["cases"]) == 4


def test_gate_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "gpuadvise.toml"
    cases = "".join(
        f'[[gate.cases]]\nname = "c{i}"\nsource = "{ROOT}/kernels/tail/tail.cu"\nkernel = "scale_tail"\n'
        for i in range(3)
    )
    cfg.write_text("[gate]\n" + cases)
    names: list[str] = []
    for k in (1, 2):
        p = cli_run("gate", "--config", str(cfg), "--shard", f"{k}/2", "--update-baseline")
        assert p.returncode == 2 and "--shard and --update-baseline" in p.stderr
    from gpuadvise.gate.run import prepare_gate

    for k in (1, 2):
        plan = prepare_gate(  # trusted: its cases' sources lie outside its folder
            config=cfg, shard=f"{k}/2", cwd=tmp_path, baseline_ref="HEAD", trust_config=True
        )
        names += [c.name for c in plan.config.cases]
    assert sorted(names) == ["c0", "c1", "c2"]


def test_a_saved_folder_report_renders_every_format_again(tmp_path: Path) -> None:
    """``analyze FOLDER --format report`` saves the BatchReport; ``gpuadvise render`` gives back
    what analyze printed and wrote (the terminal's text included), and a saved ``--format json``
    of a folder renders too."""
    from gpuadvise.report_types import BatchReport

    fmts = ("json", "sarif", "junit", "github", "markdown", "report")
    targets = [f"--format={f}={tmp_path / ('a.' + f)}" for f in fmts]
    r = _run("kernels/tail", "-j", "1", "--format", "text", *targets)
    assert r.returncode == 0, r.stderr
    saved = tmp_path / "a.report"
    batch = BatchReport.from_dict(json.loads(saved.read_text()))
    assert BatchReport.from_dict(json.loads(json.dumps(batch.to_dict()))) == batch
    shown = cli_run("render", str(saved), "--format", "text")
    assert (shown.returncode, shown.stdout) == (0, r.stdout)
    for f in fmts:
        again = cli_run("render", str(saved), f"--format={f}={tmp_path / ('b.' + f)}")
        assert again.returncode == 0, again.stderr
        assert (tmp_path / f"b.{f}").read_text() == (tmp_path / f"a.{f}").read_text(), f
    # a plain --format json of a folder: the same table (its CI notes are the documents')
    plain = cli_run("render", str(tmp_path / "a.json"), "--format", "markdown")
    assert plain.returncode == 0, plain.stderr
    table = (tmp_path / "a.markdown").read_text().split("\n\n")[0]
    assert plain.stdout.split("\n\n")[0] == table
