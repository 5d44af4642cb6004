"""The public-kernel suite (benchmarks/public/manifest.toml): every entry analyzes with exit 0 at
its small size override (`run.py --small`). Skips when the sources were not fetched
(`python benchmarks/public/fetch.py`); their code is never in this repository."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import suitekit

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "benchmarks" / "public"
# by path under names of their own: benchmarks/corpus/ has a run.py and a fetch.py too
fetch = suitekit.load_script(PUBLIC / "fetch.py", "public_fetch")
run = suitekit.load_script(PUBLIC / "run.py", "public_run", fetch=fetch)

pytestmark = pytest.mark.toolkit
REPOS, KERNELS = fetch.load_manifest()


def source_group(entry: dict) -> str:
    """The ``xdist_group`` of an entry: its source file. The entries of one file (cuda-samples'
    seven reductions: one compile of 213 template instances, about 10 CPU-s; the two transposes;
    llm.c's two attention kernels) run on one worker, one after the other, so that the first
    compiles the file into the run's cache and the others find it there, where the two workers
    had started two of them at once and both compiled it."""
    return f"public {entry['repo']}/{entry['path']}"


ENTRIES = [
    pytest.param(k, id=k["name"], marks=pytest.mark.xdist_group(source_group(k))) for k in KERNELS
]


def test_runs_at_once_keep_their_own_output() -> None:
    """Two analyses at once (the suite's two workers) each read their own stdout and stderr: the
    runner wrote both to one file under src/_specs, so one run read the other's JSON, or none."""
    from concurrent.futures import ThreadPoolExecutor

    def one(tag: str) -> tuple[str, str]:
        code = f"import sys, time; print('{tag}' * 5000); time.sleep(0.3); print('{tag}e', file=sys.stderr)"
        status, _, _, out, err = run.run_one([sys.executable, "-c", code], 60.0, 6000.0)
        assert status == "ok"
        return out, err

    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(one, ["a", "b"]))
    assert got == [("a" * 5000 + "\n", "ae\n"), ("b" * 5000 + "\n", "be\n")]


def test_manifest_entries_are_complete() -> None:
    for k in KERNELS:
        for key in ("name", "repo", "path", "kernel", "grid", "block", "args", "expect", "small"):
            assert key in k, (k["name"], key)
        assert set(k["small"]) <= set(k["args"]), k["name"]
    for r in REPOS.values():
        assert len(r.commit) == 40 and r.licence and r.files


def test_the_entries_of_one_source_share_a_group() -> None:
    by_file: dict[str, set[str]] = {}
    for p in ENTRIES:
        k = p.values[0]
        groups = {m.args[0] for m in p.marks if m.name == "xdist_group"}
        by_file.setdefault(f"{k['repo']}/{k['path']}", set()).update(groups)
    assert all(len(g) == 1 for g in by_file.values()), by_file
    assert len({g for gs in by_file.values() for g in gs}) == len(by_file)
    assert max(sum(k["path"] == e["path"] for e in KERNELS) for k in KERNELS) > 1


@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_analyzes(entry: dict, tmp_path: Path) -> None:
    repo = REPOS[entry["repo"]]
    if not (fetch.repo_dir(repo.key) / entry["path"]).is_file():
        pytest.skip("public sources not fetched: python benchmarks/public/fetch.py")
    if repo.cublas and not (fetch.CUBLAS_DIR / "cublas_v2.h").is_file():
        pytest.skip("cuBLAS headers not fetched: fetch.py --cublas-wheel FILE")
    opts = run.argparse.Namespace(
        small=True, measure=False, sample_ctas="4", timeout=600.0, max_rss_mb=6000.0
    )
    r = run.analyze_entry(entry, repo, opts)
    assert r.status == "ok", r.error
    assert not r.error, r.error
