"""The real gate provider on compiled kernels (no GPU): static gates catch a bank-conflict regression."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from clikit import cli_run

ROOT = Path(__file__).resolve().parents[2]

try:
    from gpuadvise.toolchain import find_toolchain

    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

pytestmark = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit")


def gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``gpuadvise gate ARGS`` in this process, in ``cwd`` (the run's compile cache)."""
    with contextlib.chdir(cwd):
        return cli_run("gate", *args)


def test_static_gates_from_the_real_models(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "kernels" / "reduction", tmp_path / "reduction")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    cfg = tmp_path / "gpuadvise.toml"
    cfg.write_text(
        '[gate]\ngpu = "H100"\n[[gate.cases]]\nname = "r"\n'
        'source = "reduction/reduce.cu"\nkernel = "reduce3"\n'
    )
    r = gate(tmp_path, "--update-baseline")
    assert r.returncode == 0, r.stderr
    same = gate(tmp_path, "--gates", "static", "--format", "json")
    assert same.returncode == 0, same.stderr
    verdicts = {c["metric"]: c["verdict"] for c in json.loads(same.stdout)["comparisons"]}
    assert verdicts["registers"] == "same" and verdicts["smem_excess_wavefronts"] == "same"
    assert verdicts["l2_hit_rate"] == "same"
    cfg.write_text(cfg.read_text().replace('"reduce3"', '"reduce2"'))  # strided shared index
    worse = gate(tmp_path, "--gates", "static", "--format", "json")
    assert worse.returncode == 1, worse.stderr
    verdicts = {c["metric"]: c["verdict"] for c in json.loads(worse.stdout)["comparisons"]}
    assert verdicts["smem_excess_wavefronts"] == "regression"
    assert verdicts["global_excess_sectors"] == "same"
