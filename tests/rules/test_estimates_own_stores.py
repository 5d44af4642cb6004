"""A CTA's reload of what it stored (gpuadvise.rules.estimates: own_stored_lanes through
view_traffic): the L1 keeps the sectors a store wrote in full (an H200, s10-launch's probe: 45.5
cycles a reload, the L1 hit's), so such a reload is no L2 load, no DRAM fill and no missing
request; a sector stored in part stays the L2's. Counted by hand on kernels/fuse's shape (a
thread's second loop reading back what its first stored), 4 CTAs of 128 threads, rows of 2048
floats (16 a thread)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rulekit import analyze

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = """
__global__ void exp_sum(float* out, const float* inp, float* sums, int n, int stride) {
    int row = blockIdx.x;
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[(row * n + i) * stride] = expf(inp[row * n + i]);
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += out[(row * n + i) * stride];
    sums[row * blockDim.x + threadIdx.x] = s;
}
"""

SPEC = """source = "k.cu"
kernel = "exp_sum"
grid = 4
block = 128

[args]
n = 2048
stride = {stride}

[buffers]
inp = {{ type = "float", count = 8192, fill = "random(-1,1)" }}
out = {{ type = "float", count = 16384, fill = "zeros" }}
sums = {{ type = "float", count = 512, fill = "zeros" }}
"""


@pytest.fixture(scope="module")
def exp_sum(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SRC as ``k.cu`` and its launch for each stride (``s1.toml``, ``s2.toml``) in one folder
    for the module: one compile for its tests (a kernel written to a new folder compiles again:
    the path is in the compile cache's key)."""
    folder = tmp_path_factory.mktemp("own-stores")
    (folder / "k.cu").write_text(SRC)
    for stride in (1, 2):
        (folder / f"s{stride}.toml").write_text(SPEC.format(stride=stride))
    return folder / "k.cu"


_ANALYSES: dict[tuple[Path, int], Any] = {}


def _analysis(src: Path, stride: int) -> Any:
    """The analysis of exp_sum (``src``) with ``stride``, its 4 CTAs traced: made once for the
    module (stride 2's serves two tests), which read it and never change it."""
    if (src, stride) not in _ANALYSES:
        spec = src.parent / f"s{stride}.toml"
        _ANALYSES[src, stride] = analyze(src, "exp_sum", 4, spec=str(spec))
    return _ANALYSES[src, stride]


def _traffic(src: Path, stride: int):
    from gpuadvise.rules.estimates import view_traffic
    from gpuadvise.trace.view import trace_view

    a = _analysis(src, stride)
    return view_traffic(a.device, trace_view(a.memory.trace, a.spec))


def test_a_reload_of_full_sectors_stored_is_the_l1s(exp_sum: Path) -> None:
    t = _traffic(exp_sum, 1)
    # 4 rows of 2048 floats: inp's 1024 sectors from DRAM; out's reloads (1024 sectors, 256
    # requests a CTA) are the L1's: no L2 load, no fill
    assert t.load_requests == 2 * 4 * 4 * 16  # 4 CTAs x 4 warps x 16 iterations, two loops
    assert t.l2_load_sectors == 1024
    assert t.dram_load_bytes == 1024 * 32
    assert t.l2_missing_load_requests == 4 * 4 * 16  # inp's requests alone
    # a request in two misses the L1 (inp's)
    assert t.load_mix().l1_miss == pytest.approx(0.5)


def test_a_reload_of_half_sectors_stored_is_the_l2s(exp_sum: Path) -> None:
    # every other float stored: out's sectors half written; the L1 is not taken to hold them
    t = _traffic(exp_sum, 2)
    assert t.l2_load_sectors == 1024 + 2048
    assert t.dram_load_bytes == (1024 + 2048) * 32
    assert t.load_mix().l1_miss == 1.0


def test_the_sector_sets_held_in_int32_count_as_in_int64(exp_sum: Path, monkeypatch) -> None:
    """The view's sector sets (held while it lives) keep their lane indices and key numbers in
    int32 where they fit (issue 31's peak memory); the int64 path (a view of 2**31 lanes or
    more) counts the same traffic."""
    import numpy as np

    from gpuadvise.rules import estimates
    from gpuadvise.trace.view import TraceView, buffer_infos

    a = _analysis(exp_sum, 2)
    trace = a.memory.trace
    narrow_view = TraceView(trace, buffer_infos(trace, a.spec))
    narrow = estimates.view_traffic(a.device, narrow_view)
    sets = estimates._sector_sets(narrow_view)
    assert {s.lanes.dtype for s in sets.values()} == {np.dtype(np.int32)}
    assert {s.group.dtype for s in sets.values()} == {np.dtype(np.int32)}
    monkeypatch.setattr(estimates, "_index32", lambda x, bound: x)
    wide_view = TraceView(trace, buffer_infos(trace, a.spec))
    wide = estimates.view_traffic(a.device, wide_view)
    assert estimates._sector_sets(wide_view)["l2"].lanes.dtype == np.int64
    assert wide == narrow
    assert narrow.l2_load_sectors > 0 and narrow.dram_bytes > 0
