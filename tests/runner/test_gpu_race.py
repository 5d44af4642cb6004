"""Adaptive A/B timing on the real path: the candidates of a finding built by nvcc in parallel
(marker ``toolkit``), then raced on a GPU in one worker job (marker ``gpu``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuadvise import rules as R
from gpuadvise.analyze import measure as M
from gpuadvise.analyze.options import KernelOptions
from gpuadvise.runner.client import pycuda_missing

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "tests" / "cuda" / "runner" / "race.cu"
OPTS = KernelOptions(
    source=str(SRC),
    kernel="copy_extra",
    grid="ceil_div(n,256)",
    block="256",
    args=("n=16777216",),
    buffers=("in=float[n]", "out=float[n]"),
)


def _variant(define: str) -> R.Variant:
    return R.Variant("automatic-and-verified", define, defines=(define,), label=define)


VARIANTS = [_variant("EXTRA=0"), _variant("EXTRA=8"), _variant("WRONG")]


@pytest.mark.toolkit
def test_candidates_are_compiled_in_parallel(compile_cache: Path):
    stage = M._Stage(OPTS, 60.0, 2.0)
    try:
        stage.build_all(VARIANTS)
        pairs = [stage._pair(v) for v in VARIANTS]
    finally:
        stage.close()
    assert stage.baseline is not None
    cubins = {stage.baseline.launch.cubin_path, *(b.launch.cubin_path for _, b in pairs)}
    assert len(cubins) == 4  # the kernel and three variants, each its own module
    assert all(a is stage.baseline for a, _ in pairs)


@pytest.mark.gpu
@pytest.mark.skipif(pycuda_missing() is not None, reason=pycuda_missing() or "")
def test_a_findings_candidates_race_on_the_gpu():
    from gpuadvise.analyze.prepare import live_options

    stage = M._Stage(live_options(OPTS), 60.0, 3.0)
    t0 = time.perf_counter()
    try:
        fast, slow, wrong = stage.run_all(VARIANTS)
    finally:
        stage.close()
    wall_s = time.perf_counter() - t0
    # decided faster beyond doubt (1.19x on an H100, 1.2x+ on an H200: the margin is the GPU's)
    assert fast.measurement is not None and fast.measurement.ci_low > 1.05
    assert fast.measurement.stop_reason == "faster"
    assert slow.measurement is not None and slow.measurement.speedup < 0.9
    assert slow.measurement.stop_reason in ("eliminated", "slower")
    assert slow.measurement.samples is not None and slow.measurement.samples >= 10
    assert wrong.measurement is None and wrong.verified is False
    assert wrong.note is not None and wrong.note.startswith("outputs differ")
    assert wall_s < 30, wall_s  # one worker, clear answers: far below 3 x the 3 s cap + builds
