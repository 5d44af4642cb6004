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


@pytest.mark.parametrize("entry", KERNELS, ids=[k["name"] for k in KERNELS])
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
