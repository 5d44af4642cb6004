"""The runner on a real GPU (marker `gpu`; skipped without PyCUDA and a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuadvise.runner.client import pycuda_missing

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "tests" / "cuda" / "runner"
WHY = pycuda_missing()

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(WHY is not None, reason=WHY or "")]
FAST = ["--min-samples", "10", "--min-time", "0.1", "--max-time", "2"]


def bench(*args: str) -> tuple[int, dict, str]:
    r = subprocess.run(
        [sys.executable, "-m", "gpuadvise", "bench", *args, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=300,
    )
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return r.returncode, doc, r.stderr


COPY = ["--grid", "ceil_div(n,256)", "--block", "256", "--arg", "n=1048576"]


def test_copy_runs_verified_and_timed():
    code, doc, err = bench(f"{RUN}/copy.cu:copy", *COPY, *FAST)
    assert code == 0, err
    k = doc["kernels"][0]
    assert k["timing"]["n"] >= 10 and k["timing"]["median_ms"] > 0
    assert doc["ceiling_gbps"] > 100 and doc["unwritten"] == {}


def test_ab_of_a_kernel_against_itself_contains_one():
    code, doc, err = bench(f"{RUN}/copy.cu:copy", f"{RUN}/copy.cu:copy", *COPY, *FAST)
    assert code == 0, err
    s = doc["speedup"]
    assert s["low"] <= 1.0 <= s["high"] and doc["outputs_agree"] is True


def test_different_outputs_are_caught():
    code, doc, _ = bench(f"{RUN}/copy.cu:copy", f"{RUN}/copy.cu:copy_wrong", *COPY, *FAST)
    assert code == 1 and doc["outputs_agree"] is False
    assert doc["comparisons"][0]["worst_index"] == 77


def test_unwritten_output_is_flagged():
    code, doc, _ = bench(f"{RUN}/copy.cu:copy_half", *COPY, *FAST)
    assert code == 0 and doc["unwritten"] == {"A:out": 1048576 // 2}


# An address 1 GB past a 4 KB buffer: the H100 driver names it INVALID_ADDRESS_SPACE (seen
# 2026-11-22); nearer misses are ILLEGAL_ADDRESS. Either is the kernel's fault, reported by name.
@pytest.mark.parametrize(
    "kernel,errors",
    [
        ("oob", {"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE"}),
        ("fails_assert", {"CUDA_ERROR_ASSERT"}),
    ],
)
def test_faulting_kernel_is_reported_not_fatal(kernel, errors):
    code, doc, err = bench(
        f"{RUN}/faults.cu:{kernel}", "--grid", "4", "--block", "256", "--arg", "n=1024", *FAST
    )
    assert code == 1, err
    assert doc["cuda_error"] in errors and "Traceback" not in err


def test_endless_kernel_is_killed_at_the_timeout():
    code, doc, err = bench(
        f"{RUN}/faults.cu:spin",
        "--grid",
        "1",
        "--block",
        "32",
        "--arg",
        "n=1",
        "--buffer",
        "flag=int[1]:zeros",
        "--timeout",
        "5",
        "--max-time",
        "1",
    )
    assert code == 1, err
    assert "did not finish" in doc["error"]


def test_struct_buffer_big_dynamic_smem_and_template_run():
    base = ["--grid", "4", "--block", "256", "--arg", "n=1024", *FAST]
    code, _, err = bench(
        f"{RUN}/kinds.cu:age_cells", *base, "--buffer", "in=Cell[n]", "--buffer", "out=Cell[n]"
    )
    assert code == 0, err
    code, _, err = bench(f"{RUN}/kinds.cu:big_smem", *base, "--dynamic-smem", "100k")
    assert code == 0, err
    code, _, err = bench(f"{RUN}/kinds.cu:scale<3>", *base)
    assert code == 0, err


def test_analyze_measures_a_findings_variant_and_verifies_it():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuadvise",
            "analyze",
            str(ROOT / "kernels/reduction/reduce.cu"),
            "-k",
            "reduce2",
            "--measure",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    found = {f["rule"]: f for f in json.loads(r.stdout)["findings"]}
    ga202 = found["GA202"]  # sequential addressing, its diff applied to a copy and measured
    m = ga202["measured_speedup"]
    assert ga202["verified"] is True and m["outputs_match"] is True
    assert m["ci_low"] <= m["speedup"] <= m["ci_high"] and m["speedup"] > 1.0
