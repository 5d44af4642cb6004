"""Hand-derived cases for the L2's serial atomics per 1 KB unit (gpuadvise.model.atomic_units)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.atomic_units import (
    FULL_SECTOR_NS,
    LINE_NS,
    UNIT_BYTES,
    WORD_SECTOR_NS,
    flush_ns,
    hot_unit,
    sector_ns,
    unit_serial_s,
)

FULL_LINE_NS = LINE_NS + 4 * FULL_SECTOR_NS  # 0.07 + 4 x 0.28 = 1.19 ns


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
    # n full-line requests (4 full sectors each) on each region; a 1 KB unit holds two regions:
    # one region 4n pairs, two or more (balanced) 8n pairs on the hottest unit, each request
    # 0.07 ns for its line and 4 x 0.28 for its sectors
    n = 400
    req, addr = _flush(regions, n)
    u = hot_unit(req, addr, np.ones(regions * n))
    assert u.pairs == per_unit * n * 4
    assert len(u.on) == per_unit * n
    assert u.ns == pytest.approx(per_unit * n * FULL_LINE_NS)
    assert unit_serial_s(u.ns) == pytest.approx(per_unit * n * FULL_LINE_NS * 1e-9)
    assert (u.sectors, u.lines, u.words) == (16 * per_unit, 4 * per_unit, 128 * per_unit)
    assert u.lanes == per_unit * n * 32


def test_one_sector_requests_and_weights() -> None:
    # 8 lanes on one sector of each of two units' first line, requests weighted 3 (a sampled
    # loop): 1 pair a request, 3 x 10 on either unit, each a line and a full sector
    req = np.repeat(np.arange(20), 8)
    addr = np.array([(i // 10) * UNIT_BYTES + 4 * k for i in range(20) for k in range(8)])
    u = hot_unit(req, addr.astype(np.uint64), np.full(20, 3.0))
    assert u.pairs == 30.0
    assert u.ns == pytest.approx(30 * (LINE_NS + FULL_SECTOR_NS))


def test_words_of_a_sector() -> None:
    # one word, eight, and between (linear): 0.36, 0.28; four words 0.36 - 3/7 x 0.08
    assert sector_ns(1) == pytest.approx(WORD_SECTOR_NS)
    assert sector_ns(8) == pytest.approx(FULL_SECTOR_NS)
    assert sector_ns(4) == pytest.approx(0.36 - 3 / 7 * 0.08)
    assert sector_ns(0.5) == pytest.approx(WORD_SECTOR_NS)  # at least one word


# s9-est's requests on one 512-byte region (H200, 270,336 requests each): (lanes' words as
# (line, sector, word) triples, measured ns a request)
_S9 = [
    ([(0, s, w) for s in range(4) for w in range(8)], 1.194),  # 1 line, 4 full sectors
    ([(0, 0, w) for w in range(8)], 0.368),  # 1 full sector
    ([(0, s, w) for s in range(2) for w in range(8)], 0.613),  # 2 full sectors
    ([(ln, 0, w) for ln in range(4) for w in range(8)], 1.406),  # 4 lines, a full sector each
    ([(ln, s, 2 * w) for ln in range(4) for s in range(4) for w in range(2)], 5.973),
    ([(ln, 0, 0) for ln in range(4)], 1.739),  # 4 lines, one word each
    ([(0, 0, 0)], 0.452),  # one word
    ([(0, s, 0) for s in range(4)], 1.514),  # one line's 4 sectors, one word each
]


@pytest.mark.parametrize(("words", "measured"), _S9)
def test_s9_requests_within_six_percent(words: list[tuple[int, int, int]], measured: float) -> None:
    n = 64
    req = np.repeat(np.arange(n), len(words))
    addr = np.array([128 * ln + 32 * s + 4 * w for _ in range(n) for ln, s, w in words])
    u = hot_unit(req, addr.astype(np.uint64), np.ones(n))
    assert u.ns / n == pytest.approx(measured, rel=0.06)


def test_bincount_flush() -> None:
    # HeCBench bincount's flush: 39,063 CTAs of 256 threads add 768 int bins (6 regions, 3
    # units), a request per line; a unit's 8 lines a CTA x 1.19 ns = 372 us (an H200 measured
    # 0.373 ms for the flush alone, 0.379 ms for the kernel)
    assert unit_serial_s(39063 * flush_ns(32, 8, 8)) == pytest.approx(371.9e-6, rel=1e-3)


def test_partial_flush() -> None:
    # a unit's 8 lines with 3 of each sector's 8 words non-zero: 8 x 0.07 + 32 x (0.36 -
    # 2/7 x 0.08)
    assert flush_ns(32, 8, 3) == pytest.approx(8 * 0.07 + 32 * (0.36 - 2 / 7 * 0.08))


def test_empty() -> None:
    u = hot_unit(np.zeros(0), np.zeros(0, dtype=np.uint64), np.zeros(0))
    assert u.pairs == 0.0 and u.ns == 0.0 and len(u.on) == 0
