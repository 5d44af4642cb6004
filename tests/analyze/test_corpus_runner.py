"""The corpus runner's pinning (benchmarks/corpus/run.py ``--cpus-per-job``): each analysis on
CPUs of its own, as on the 2-core machine of issue 31's goals."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import suitekit

# by path under a name of its own: benchmarks/public/ has a run.py too (suitekit.load_script)
run = suitekit.load_script(
    Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "run.py", "corpus_run"
)


def test_cpu_sets_are_disjoint_and_lowest_first() -> None:
    assert run.cpu_sets(list(range(16)), 2, 8) == [(2 * i, 2 * i + 1) for i in range(8)]
    assert run.cpu_sets([7, 3, 5, 3, 1], 2, 2) == [(1, 3), (5, 7)]
    assert run.cpu_sets([4, 9], 1, 1) == [(4,)]


@pytest.mark.parametrize(
    ("per_job", "jobs", "needle"), [(2, 9, "needs 18 CPUs"), (0, 1, "1 or more")]
)
def test_cpu_sets_refuse_what_does_not_fit(per_job: int, jobs: int, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        run.cpu_sets(list(range(16)), per_job, jobs)


def test_too_many_pinned_jobs_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    code = run.main(["--jobs", str(n + 1), "--cpus-per-job", "1", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"needs {n + 1} CPUs" in err[0]
    assert not (tmp_path / "results.json").exists()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux's CPU affinity")
def test_a_pinned_threads_child_runs_on_its_cpus() -> None:
    """What the runner relies on: the CPUs a thread sets for itself are its children's."""
    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    got: list[str] = []

    def start() -> None:
        os.sched_setaffinity(0, {cpu})
        code = "import os; print(sorted(os.sched_getaffinity(0)))"
        got.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  check=True).stdout.strip())  # fmt: skip

    t = threading.Thread(target=start)
    t.start()
    t.join()
    assert got == [f"[{cpu}]"]
    assert os.sched_getaffinity(0) == before  # the main thread's own are untouched


def test_command_for_options_built_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """benchmarks/accuracy.py, corpus_speed.py and speed_golden.py build the runner's options
    themselves, without ``profile`` (analyze_vs_ncu.py failed on it, 2026-12-01); ``--profile``
    puts the analysis under cProfile."""
    import argparse

    c = run.corpus.load()
    k = c.kernels[0]
    monkeypatch.setattr(run.corpus, "SRC", tmp_path)
    monkeypatch.setattr(run, "SPECS", tmp_path / "_specs")
    monkeypatch.setitem(run.c_repos, k.repo, c.repos[k.repo])
    src = tmp_path / k.repo / k.path
    src.parent.mkdir(parents=True)
    src.write_text("__global__ void f() {}\n")
    opts = argparse.Namespace(gpu="H100", check=False, measure=False, fixes=False, extra=[])
    cmd = run.command_for(k, opts)
    assert cmd[1:4] == ["-m", "gpuadvise", "analyze"] and str(src) in cmd
    opts.profile = tmp_path / "prof"
    cmd = run.command_for(k, opts)
    assert cmd[1:5] == [
        "-m",
        "cProfile",
        "-o",
        str(tmp_path / "prof" / (k.name.replace("/", "__") + ".prof")),
    ]
