"""A CTA's reload of what it stored (gpuadvise.rules.estimates: own_stored_lanes through
view_traffic): the L1 keeps the sectors a store wrote in full (an H200, s10-launch's probe: 45.5
cycles a reload, the L1 hit's), so such a reload is no L2 load, no DRAM fill and no missing
request; a sector stored in part stays the L2's. Counted by hand on kernels/fuse's shape (a
thread's second loop reading back what its first stored), 4 CTAs of 128 threads, rows of 2048
floats (16 a thread)."""

from __future__ import annotations

from pathlib import Path

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


def _traffic(tmp_path: Path, stride: int):
    from gpuadvise.rules.estimates import view_traffic
    from gpuadvise.trace.view import trace_view

    (tmp_path / "k.cu").write_text(SRC)
    (tmp_path / "case.toml").write_text(SPEC.format(stride=stride))
    a = analyze(tmp_path / "k.cu", "exp_sum", 4, spec=str(tmp_path / "case.toml"))
    return view_traffic(a.device, trace_view(a.memory.trace, a.spec))


def test_a_reload_of_full_sectors_stored_is_the_l1s(tmp_path: Path) -> None:
    t = _traffic(tmp_path, 1)
    # 4 rows of 2048 floats: inp's 1024 sectors from DRAM; out's reloads (1024 sectors, 256
    # requests a CTA) are the L1's: no L2 load, no fill
    assert t.load_requests == 2 * 4 * 4 * 16  # 4 CTAs x 4 warps x 16 iterations, two loops
    assert t.l2_load_sectors == 1024
    assert t.dram_load_bytes == 1024 * 32
    assert t.l2_missing_load_requests == 4 * 4 * 16  # inp's requests alone
    # a request in two misses the L1 (inp's)
    assert t.load_mix().l1_miss == pytest.approx(0.5)


def test_a_reload_of_half_sectors_stored_is_the_l2s(tmp_path: Path) -> None:
    # every other float stored: out's sectors half written; the L1 is not taken to hold them
    t = _traffic(tmp_path, 2)
    assert t.l2_load_sectors == 1024 + 2048
    assert t.dram_load_bytes == (1024 + 2048) * 32
    assert t.load_mix().l1_miss == 1.0


def test_the_sector_sets_held_in_int32_count_as_in_int64(tmp_path: Path, monkeypatch) -> None:
    """The view's sector sets (held while it lives) keep their lane indices and key numbers in
    int32 where they fit (issue 31's peak memory); the int64 path (a view of 2**31 lanes or
    more) counts the same traffic."""
    import numpy as np

    from gpuadvise.rules import estimates
    from gpuadvise.trace.view import TraceView, buffer_infos

    (tmp_path / "k.cu").write_text(SRC)
    (tmp_path / "case.toml").write_text(SPEC.format(stride=2))
    a = analyze(tmp_path / "k.cu", "exp_sum", 4, spec=str(tmp_path / "case.toml"))
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
