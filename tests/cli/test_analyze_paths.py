"""``gpuadvise analyze FOLDER...``: every case under the folders, in parallel (``--jobs``), split
for CI (``--shard``), ranked by the time to win, in every format; and ``gate --shard``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]
FOLDERS = ("kernels/tail", "kernels/blocksize")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # --no-trace: the launch rules (GA102, GA103) are enough for the ranking and the formats
    return subprocess.run(
        [sys.executable, "-m", "gpuadvise", "analyze", *args, "--no-measure", "--no-trace"],
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
    p = _run(*FOLDERS, "--jobs", "4", "--format", "json")
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
    p = _run(str(tmp_path), "kernels/tail", "--format", "json", "--jobs", "2", "--fail-on", "error")
    # a case that could not be analyzed is an error once every case is reported (as in gate)
    assert p.returncode == 2 and "1 of 4 cases could not be analyzed" in p.stderr, p.stderr
    doc = json.loads(p.stdout)
    errors = [c for c in doc["cases"] if c["error"]]
    assert len(errors) == 1 and "absent.cu" in errors[0]["error"]
    assert len(doc["cases"]) == 4


def test_gate_shard(tmp_path: Path) -> None:
    cfg = tmp_path / "gpuadvise.toml"
    cases = "".join(
        f'[[gate.cases]]\nname = "c{i}"\nsource = "{ROOT}/kernels/tail/tail.cu"\nkernel = "scale_tail"\n'
        for i in range(3)
    )
    cfg.write_text("[gate]\n" + cases)
    names: list[str] = []
    for k in (1, 2):
        p = subprocess.run(
            [sys.executable, "-m", "gpuadvise", "gate", "--config", str(cfg), "--shard", f"{k}/2",
             "--update-baseline"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert p.returncode == 2 and "--shard and --update-baseline" in p.stderr
    from gpuadvise.gate.run import prepare_gate

    for k in (1, 2):
        plan = prepare_gate(  # trusted: its cases' sources lie outside its folder
            config=cfg, shard=f"{k}/2", cwd=tmp_path, baseline_ref="HEAD", trust_config=True
        )
        names += [c.name for c in plan.config.cases]
    assert sorted(names) == ["c0", "c1", "c2"]
