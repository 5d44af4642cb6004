"""Extrapolation over the CTAs that do memory work (issue 17): a 65535x65535 grid whose kernel
returns early for all but 1,024 threads reported ~1,000,000x too many sectors per launch when the
traced totals were scaled by all the launch's CTAs. The estimate (:mod:`gpuadvise.model.waves`)
and, with nvcc (the toolkit wheels; no GPU), the launch totals of such a kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rulekit import needs_toolkit

from gpuadvise.model.waves import WORK_PROBE_CTAS, buffer_bound, probe_ctas, working_ctas


def test_probe_spread_over_the_untraced_grid():
    got = probe_ctas(1000, range(100), 4)
    assert got == [200, 400, 599, 799]  # linspace(0, 999, 6), ends dropped
    assert probe_ctas(10, range(10)) == []  # all traced
    assert len(probe_ctas(10**9, range(4224))) == WORK_PROBE_CTAS
    # traced ids are skipped
    assert 2 not in probe_ctas(5, [2], 1) and probe_ctas(5, [2], 1) == [3]


def test_estimate_from_the_sample_and_the_bound():
    w = working_ctas(10**6, range(100), range(10), [10**5 * k for k in range(1, 9)], [], None)
    assert w.launch_working == 10 and w.scale == 1.0  # none of the probe works
    assert "90 of 100 traced CTAs do no memory work" in w.note()
    # half the probe works: half of the rest of the grid
    probe = list(range(200, 1000, 100))
    w = working_ctas(1000, range(100), range(50), probe, probe[:4], None)
    assert w.launch_working == 54 + (1000 - 108) * 4 / 8
    # the buffers hold no more: bounded (never below what was seen working)
    w = working_ctas(1000, range(100), range(50), probe, probe[:4], 60.0)
    assert w.launch_working == 60.0 and "at most 60 by the buffers" in w.note()
    assert working_ctas(1000, range(100), range(50), probe, probe[:4], 3.0).launch_working == 54
    # traced CTAs spread over the first 1056 (the default sample's runs: 0-3, 352-355, 704-707)
    # stand for those 1056 in their share: 4 of 12 working, a third of them
    runs = [c for s0 in (0, 352, 704) for c in range(s0, s0 + 4)]
    w = working_ctas(10**5, runs, runs[:4], [], [], None)
    assert w.launch_working == pytest.approx(1056 / 3) and w.traced_working == 4


def test_buffer_bound_needs_disjoint_bytes():
    cta = np.repeat(np.arange(4), 32)
    addr = 4096 + 4 * np.arange(128)
    width = np.full(128, 4)
    # 4 CTAs each touch their own 128 bytes of a 4096-byte buffer: 32 CTAs at most
    assert buffer_bound(cta, addr, width, [(4096, 4096)]) == 32.0
    # every CTA reads the same bytes (a table): no bound from that buffer
    shared = 4096 + 4 * (np.arange(128) % 32)
    assert buffer_bound(cta, shared, width, [(4096, 4096)]) is None
    assert buffer_bound(cta, addr, width, [(1 << 20, 64)]) is None  # untouched


def _buffer_bound_by_columns(cta, addr, nbytes, buffers):
    """buffer_bound as it was first written (np.unique over (CTA, address, bytes) columns)."""
    best = None
    for base, size in buffers:
        inside = (addr >= base) & (addr < base + size)
        if not inside.any():
            continue
        c, a, w = cta[inside], addr[inside], nbytes[inside]
        pairs = np.unique(np.stack([c, a, w]), axis=1)
        by_addr = np.unique(pairs[1:], axis=1)
        if by_addr.shape[1] != pairs.shape[1]:
            continue
        per_cta = float(by_addr[1].sum()) / len(np.unique(c))
        if per_cta > 0:
            best = size / per_cta if best is None else min(best, size / per_cta)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_buffer_bound_by_sorted_keys_is_the_columns_one(seed: int) -> None:
    """The sorted-key buffer_bound gives what np.unique over the columns gave: disjoint
    buffers (a CTA touching its bytes twice, mixed widths), shared ones, widths past 8 bits."""
    rng = np.random.default_rng(seed)
    base, other = 0x7000_0000_0000, 0x7010_0000_0000
    n = 4000
    cta = rng.integers(0, 40, n).astype(np.int64)
    own = base + cta * 4096 + 4 * rng.integers(0, 64, n)  # each CTA its own 4 KiB, repeats
    common = other + 4 * rng.integers(0, 300, n)  # every CTA reads one table
    addr = np.where(rng.random(n) < 0.5, own, common).astype(np.int64)
    width = rng.choice([1, 2, 4, 8, 16] if seed % 3 else [4, 512], n).astype(np.int64)
    buffers = [(base, 1 << 20), (other, 1 << 16), (1 << 50, 64)]
    assert buffer_bound(cta, addr, width, buffers) == _buffer_bound_by_columns(
        cta, addr, width, buffers
    )
    assert buffer_bound(cta, addr, width, buffers) is not None


EARLY = """
__global__ void early(const float* x, float* y, int n) {
    size_t i = ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= (size_t)n) return;
    y[i] = 2.0f * x[i];
}
"""


@needs_toolkit
@pytest.mark.parametrize("grid", ["65535x65535", "100000"])
def test_launch_totals_over_the_working_ctas(tmp_path: Path, grid: str):
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build

    src = tmp_path / "early.cu"
    src.write_text(EARLY)
    opts = KernelOptions(
        source=str(src),
        grid=grid,
        block="32",
        args=("n=1024",),
        buffers=("x=float[n]", "y=float[n]"),
        gpu="H100",
    )
    spec, choice, options = build(opts)
    a = analyze_lazily(spec, choice.device, options, models=("coalescing",))
    m = a.memory
    assert m is not None and m.error is None and not m.complete
    launch = m.coalescing.launch
    # 1,024 floats read and written once: 128 sectors each way (not x total / traced CTAs)
    assert (launch.load.sectors, launch.store.sectors) == (128, 128)
    assert m.trace is not None and m.trace.scale == 1.0
    (note,) = [n for n in m.notes if "do no memory work" in n]
    assert f"of {WORK_PROBE_CTAS} more CTAs traced across the grid, 0 do" in note
    assert "an estimated 32 working CTAs" in note
