"""compare_launch's runs of the launch as it is for several shapes at once (``then``): one
emulation of all the CTAs the shapes need, split by CTA where no CTA reads or writes what
another wrote; the verdicts and each shape's run of the launch as it is are the same as when
each shape's CTAs run alone (cuda-samples FDTD3d's GA101: its x check, then its y check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bundlekit import write_bundle
from rulekit import analyze

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

# a tile 32 columns wide (a block of other x is wrong), any rows: each thread one element,
# its row's neighbours read from the input (independent CTAs)
TILE = """
__global__ void tile(const float* in, float* out, int w) {
    __shared__ float t[16][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    t[threadIdx.y][threadIdx.x] = in[y * w + x % w];
    __syncthreads();
    float v = t[threadIdx.y][threadIdx.x];
    for (int k = 1; k < 4; k++) v += 0.5f * in[y * w + (x + k) % w];
    if (x < w) out[y * w + x] = v;
}
"""

# each CTA reads what the CTA before it wrote (the first element of its row): not split
CHAINED = """
__global__ void chained(float* out, int w) {
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    out[y * w + x] = (float)(x + y);
    __syncthreads();
    if (threadIdx.x == 0 && blockIdx.x > 0) out[y * w + x] += out[y * w + x - 1];
}
"""

CASES = {
    "tile": (TILE, 'in = "float[w*w]"\nout = "float[w*w]"'),
    "chained": (CHAINED, 'out = "float[w*w]"'),
}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    launch = 'grid = "64x256"\nblock = "32x8"\n\n[args]\nw = 2048\n\n[buffers]\n{}\n'
    return write_bundle(
        tmp_path_factory.mktemp("launch-split"),
        {k: code for k, (code, _) in CASES.items()},
        {k: launch.format(bufs) for k, (_, bufs) in CASES.items()},
    )


def _checks(a: Any, shapes: list[Any], then: bool, monkeypatch: Any) -> tuple[list[Any], Any, int]:
    import gpuadvise.trace.emulate as emulate_module
    from gpuadvise.analyze.services import AnalysisServices

    runs = []
    real = emulate_module.emulate

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(kwargs.get("sample_ctas"))
        return real(*args, **kwargs)

    monkeypatch.setattr(emulate_module, "emulate", counted)
    s = AnalysisServices(a)
    got = [
        s.compare_launch(shape[0], shape[1], then=shapes[k + 1 :] if then else ())
        for k, shape in enumerate(shapes)
    ]
    monkeypatch.setattr(emulate_module, "emulate", real)
    return got, s._base_runs, len(runs)


def _same_runs(x: Any, y: Any) -> None:
    assert sorted(x) == sorted(y)
    for key in x:
        (ran0, pos0, val0, s0), (ran1, pos1, val1, s1) = x[key], y[key]
        assert ran0 == ran1 and s0 == s1 and sorted(pos0) == sorted(pos1)
        for n in pos0:
            assert np.array_equal(pos0[n], pos1[n]) and val0[n].tobytes() == val1[n].tobytes()


@pytest.mark.parametrize(("kernel", "runs"), [("tile", 4), ("chained", 6)])
def test_shapes_checked_together_are_checked_as_alone(kernels, kernel, runs, monkeypatch):
    a = analyze(kernels, kernel, trace=False)
    # x resized (the tile's 32 columns broken), then y (rows: the same), then both again
    shapes = [((86, 256, 1), (24, 8, 1)), ((64, 128, 1), (32, 16, 1)), ((64, 512, 1), (32, 4, 1))]
    alone, base_alone, n_alone = _checks(a, shapes, False, monkeypatch)
    together, base_together, n_together = _checks(a, shapes, True, monkeypatch)
    assert together == alone
    assert [c.same for c in alone] == [False, True, True]
    _same_runs(base_together, base_alone)
    # alone: a run of the launch as it is and of the change per shape; tile: one run of the
    # launch as it is for the three shapes' CTAs (the y check's 10 hold the others), split;
    # chained: that run is not split, kept as the y check's own (the same CTAs), the others
    # run alone: as many runs as alone
    assert n_alone == 6 and n_together == runs
