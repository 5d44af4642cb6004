"""The trace side of issue 16's second round of bounds, on a kernel small enough to count by
hand: the requests every CTA repeats (a table staged per block) and the traffic of some records
alone (what a per-line proxy reproduces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import analyze, isolated_cache

from gpuadvise.devices import preset
from gpuadvise.rules.estimates import repeated_requests, view_traffic
from gpuadvise.trace.access import Kind

pytestmark = pytest.mark.toolkit
_cache = isolated_cache("estimates_bounds")

# 4 CTAs of 256 threads: each CTA stages in[0..255] (8 warp loads, the same 1 KB in every CTA)
# and stores its own 256 elements of out (8 warp stores, 4 sectors each)
CODE = """
extern "C" __global__ void lut(const int* in, int* out, unsigned n) {
    __shared__ int t[256];
    t[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[(i * 7u) & 255u];
}
"""


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from gpuadvise.trace.view import trace_view

    d: Path = tmp_path_factory.mktemp("lut")
    (d / "k.cu").write_text(CODE)
    (d / "case.toml").write_text(
        'source = "k.cu"\nkernel = "lut"\ngrid = 4\nblock = 256\nseed = 1\n\n'
        '[args]\nn = 1024\n\n[buffers]\nin = "int[n]"\nout = "int[n]"\n'
    )
    a = analyze(d / "k.cu", "lut", "all")
    return trace_view(a.memory.trace, a.spec)


def test_repeated_requests_per_cta(view: Any) -> None:
    # per CTA: 8 loads of in[0..255], which every CTA makes; 8 stores of its own out
    assert view.scale == 1
    assert repeated_requests(view) == (8.0, 8.0)


def test_traffic_of_some_records_alone(view: Any) -> None:
    device = preset("H200")
    kind = view.records["kind"]
    stores = np.flatnonzero(kind != int(Kind.LOAD))
    assert len(stores) == 32
    whole = view_traffic(device, view)
    # loads: 32 sectors of in per CTA (L1 serves nothing across CTAs): 128; stores: 32
    # requests of 4 full sectors; DRAM: in's 32 distinct sectors and out's 128
    assert whole.l2_load_sectors == 128
    assert whole.l2_store_sectors == 128
    assert whole.dram_bytes == (32 + 128) * 32
    assert whole.instructions == 64
    alone = view_traffic(device, view, only=stores)
    assert alone.l2_load_sectors == 0
    assert alone.l2_store_sectors == 128
    assert alone.dram_bytes == 128 * 32
    assert alone.instructions == 32
    assert alone.bytes_in_flight_per_warp == 0  # no loads among them
