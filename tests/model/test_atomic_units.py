"""Hand-derived cases for the L2's serial atomics per 1 KB unit (gpuadvise.model.atomic_units)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.atomic_units import SECTOR_NS, UNIT_BYTES, hot_unit_sectors, unit_serial_s


def _flush(regions: int, requests: int, lanes: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """``requests`` warp-level requests on each of ``regions`` consecutive 512-byte regions, each
    request ``lanes`` consecutive int words of one line (the line cycling over the region's 4)."""
    req, addr = [], []
    r = 0
    for g in range(regions):
        for i in range(requests):
            base = g * 512 + (i % 4) * 128
            req += [r] * lanes
            addr += [base + 4 * k for k in range(lanes)]
            r += 1
    return np.array(req), np.array(addr, dtype=np.uint64)


@pytest.mark.parametrize(("regions", "per_unit"), [(1, 1), (2, 2), (6, 2), (24, 2)])
def test_two_regions_share_a_unit(regions: int, per_unit: int) -> None:
    # n full-line requests (4 sectors each) on each region; a 1 KB unit holds two regions:
    # one region 4n pairs, two or more (pairs balanced) 8n pairs on the hottest unit
    n = 400
    req, addr = _flush(regions, n)
    count, on = hot_unit_sectors(req, addr, np.ones(regions * n))
    assert count == per_unit * n * 4
    assert len(on) == per_unit * n
    # the time: pairs one after another at SECTOR_NS
    assert unit_serial_s(count) == pytest.approx(per_unit * n * 4 * SECTOR_NS * 1e-9)


def test_one_sector_requests_and_weights() -> None:
    # 8 lanes on one sector of each of two units' first line, requests weighted 3 (a sampled
    # loop): 1 pair a request, 3 x 10 on either unit
    req = np.repeat(np.arange(20), 8)
    addr = np.array([(i // 10) * UNIT_BYTES + 4 * k for i in range(20) for k in range(8)])
    count, _ = hot_unit_sectors(req, addr.astype(np.uint64), np.full(20, 3.0))
    assert count == 30.0


def test_bincount_flush() -> None:
    # HeCBench bincount's flush: 39,063 CTAs of 256 threads add 768 int bins (6 regions),
    # a request per line; a unit's 8 lines a CTA x 4 sectors x 0.30 ns = 375 us (an H200
    # measured 0.373 ms for the flush alone, 0.379 ms for the kernel)
    assert unit_serial_s(39063 * 8 * 4) == pytest.approx(375.0e-6, rel=1e-3)


def test_empty() -> None:
    count, on = hot_unit_sectors(np.zeros(0), np.zeros(0, dtype=np.uint64), np.zeros(0))
    assert count == 0.0 and len(on) == 0
