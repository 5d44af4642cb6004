"""The launch model's L2 store term for a thread that walks its own row (HeCBench page-rank's
``map``, perplexity's ``sigmas_kernel``): each warp store puts its 32 lanes in 32 lines, one
4-byte word per sector. Lanes a power-of-two stride apart (the naive transpose's 32 KB, whose
measured 64 G sectors/s is the scattered rate) meet in the same L2 slices; a row of 20,000 floats
(80,000 bytes) does not, and its stores count at the partial-store rate. Counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuadvise.devices import memory_rates, preset
from gpuadvise.model.roofline import launch_times
from gpuadvise.rules.estimates import view_traffic
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
from gpuadvise.toolchain import CompileOptions, compile_source
from gpuadvise.trace.emulate import emulate
from gpuadvise.trace.view import TraceView, buffer_infos

WALK = """
__global__ void walk(float* out, int C, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int j = 0; j < steps; ++j) out[(long)i * C + j] = 1.0f + j;
}
"""
THREADS, STEPS = 128, 16  # 2 CTAs of 64 threads: 4 warps, 16 stores each


def _view(tmp_path: Path, c: int) -> TraceView:
    src = tmp_path / "walk.cu"
    src.write_text(WALK)
    module = compile_source(src, CompileOptions(arch="sm_90", cache_dir=tmp_path / "c"))
    spec = build_kernel_spec(
        src,
        "walk",
        grid=THREADS // 64,
        block=64,
        args=[f"C={c}", f"steps={STEPS}"],
        buffers=[f"out=float[{THREADS * c}]"],
        discover=False,
    )
    launch = resolve(spec, parse_signature(WALK, "walk"))
    e = emulate(module, module.kernel("walk"), launch, preset("H100"), sample_ctas="all")
    return TraceView(e.trace, buffer_infos(e.trace, spec))


@pytest.mark.toolkit
@pytest.mark.parametrize(("c", "camped"), [(20000, False), (200, False), (8192, True)])
def test_a_row_walk_stores_at_the_rate_its_stride_gets(tmp_path: Path, c: int, camped: bool):
    dev = preset("H100")
    t = view_traffic(dev, _view(tmp_path, c))
    # by hand: 128 threads x 16 stores, each lane's word in a sector (and a line) of its own
    sectors = THREADS * STEPS
    assert t.l2_store_sectors == 0
    if camped:  # 32 KB apart: the scattered rate
        assert (t.l2_scattered_store_sectors, t.l2_partial_store_sectors) == (sectors, 0)
    else:  # 80,000 or 800 bytes apart: the partial-store rate
        assert (t.l2_scattered_store_sectors, t.l2_partial_store_sectors) == (0, sectors)
    rates = memory_rates(dev)
    assert rates is not None
    times = launch_times(t, dev, rates)
    assert times is not None
    rate = rates.l2_scattered_store_gsectors if camped else rates.l2_partial_store_gsectors
    assert times.l2_s == pytest.approx(sectors / (rate * 1e9))
