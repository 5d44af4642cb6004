"""Kernels defined in headers (tests/cuda/headers: rows.cu includes rows.cuh, whose functor in
pick.cuh calls __ldg): the kernel is found in the header, emulated (warpSize included) and its
accesses reported at the kernel's call site; GA301 names the thread-per-row walk; a .cuh is
analysed directly; quiet by default. Needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from rulekit import ev, needs_toolkit, run_rule

from gpuadvise.analyze.evaluate import quiet_minor
from gpuadvise.rules.config import Config
from gpuadvise.rules.evaluate import RulesRun
from gpuadvise.rules.findings import Estimate
from gpuadvise.source.text import kernel_file

pytestmark = [needs_toolkit, pytest.mark.usefixtures("compile_cache")]

HEADERS = Path(__file__).parents[1] / "cuda" / "headers"


def _analyze(source: Path, kernel: str, spec: str) -> Any:
    """The launch of ``spec`` (rows x cols floats), given on the command line's options so that
    the .cu and the .cuh take the same one."""
    import rulekit

    per_thread = kernel == "row_mean_thread"
    return rulekit.analyze(
        source,
        kernel,
        4,
        ("rows=256", "cols=64"),
        grid="4" if per_thread else "128",
        block="64",
        buffers=("in=float[rows*cols]", "out=float[rows]:zeros"),
    )


def test_the_kernel_file_is_found_through_the_includes():
    assert kernel_file(HEADERS / "rows.cu", "row_mean_thread") == HEADERS / "rows.cuh"
    assert kernel_file(HEADERS / "rows.cuh", "row_mean_warp") == HEADERS / "rows.cuh"
    assert kernel_file(HEADERS / "rows.cu", "absent") == HEADERS / "rows.cu"


@pytest.mark.parametrize("source", ["rows.cu", "rows.cuh"])
def test_thread_per_row_in_a_header_is_reported_at_the_call_site(source):
    a = _analyze(HEADERS / source, "row_mean_thread", "row_mean_thread.toml")
    lines = {(Path(c.file).name, c.line) for c in a.memory.coalescing.lines}
    # __ldg (sm_32_intrinsics.hpp) inside Pick (pick.cuh) lands on the kernel's loop line
    assert ("rows.cuh", 13) in lines and not any(f != "rows.cuh" for f, _ in lines)
    (f,) = run_rule(a, "GA301", 4)
    e = ev(f)
    assert Path(f.file).name == "rows.cuh" and f.line == 13
    # 64 floats a row: consecutive threads 256 bytes apart, each its own sector
    assert e["pattern"] == "thread-per-row" and e["stride_bytes"] == 256
    assert e["sectors_per_request"] == 32.0 and e["warp_footprint_used_pct"] == 100.0
    assert "give each row a warp" in f.message and "__shfl_down_sync" in f.variant.description
    (g,) = run_rule(a, "GA303", 4)
    assert Path(g.file).name == "rows.cuh" and g.line == 13


def test_warp_per_row_with_warpsize_is_emulated_and_silent():
    a = _analyze(HEADERS / "rows.cu", "row_mean_warp", "row_mean_warp.toml")
    assert a.memory is not None and a.memory.error is None
    assert run_rule(a, "GA301", 4) == []


def test_minor_findings_become_notes_or_are_dropped():
    a = _analyze(HEADERS / "rows.cu", "row_mean_thread", "row_mean_thread.toml")
    (f,) = run_rule(a, "GA301", 4)
    small = dataclasses.replace(f, estimated_speedup=Estimate(1.03, "upper-bound", "test"))
    big = dataclasses.replace(f, estimated_speedup=Estimate(1.5, "upper-bound", "test"))
    run = RulesRun((small, big), ("GA301",))
    noted = quiet_minor(run, Config())
    assert [x.severity for x in noted.findings] == ["note", "warning"]
    dropped = quiet_minor(run, Config(minor_findings="drop"))
    # counts in words (issue 32): "1 finding", no "(s)"
    assert dropped.findings == (big,) and "1 finding worth" in dropped.notes[-1]
    assert quiet_minor(run, Config(minor_findings="keep")) is run
    assert quiet_minor(run, Config(minor_speedup=1.6)).findings[1].severity == "note"
    # an upper bound on the launch model of a DRAM-bound launch is judged by the model's
    # prediction: 1.2x at peak DRAM bandwidth over a launch predicted at 1.00x is minor; one
    # predicted at 1.3x is not; a latency-bound one keeps its bound (a small grid's point keeps
    # each CTA's critical path)
    dram = {"bound_by_before": "dram", "bound_by_after": "dram"}
    flat = dataclasses.replace(
        f, estimated_speedup=Estimate(1.2, "upper-bound", "test", {"point_speedup": 1.0, **dram})
    )
    real = dataclasses.replace(
        f, estimated_speedup=Estimate(1.4, "upper-bound", "test", {"point_speedup": 1.3, **dram})
    )
    chain = {"point_speedup": 1.0, "bound_by_before": "dependency", "bound_by_after": "dram"}
    split = dataclasses.replace(f, estimated_speedup=Estimate(2.0, "upper-bound", "test", chain))
    judged = quiet_minor(RulesRun((flat, real, split), ("GA301",)), Config())
    assert [x.severity for x in judged.findings] == ["note", "warning", "warning"]
