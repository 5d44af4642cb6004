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
    # all eight words 0.28 ns, any fewer 0.33 (the probe: 1 to 6 words alike)
    got = sector_ns(np.array([1, 2, 4, 7, 8]))
    assert list(got) == pytest.approx([WORD_SECTOR_NS] * 4 + [FULL_SECTOR_NS])


def _shape(w: int, s: int, ln: int) -> list[tuple[int, int, int]]:
    """(line, sector, word) of the probe's request shape: w words of s sectors of ln lines."""
    return [(a, b, c) for a in range(ln) for b in range(s) for c in range(w)]


# the s11-hist probe's requests on one 1 KB unit (H200, 270,336 a shape): (words, sectors,
# lines), measured ns a request
_PROBE = [
    ((8, 4, 1), 1.196),
    ((4, 4, 1), 1.396),
    ((1, 4, 1), 1.394),
    ((6, 4, 1), 1.397),
    ((8, 1, 1), 0.360),
    ((4, 1, 1), 0.403),
    ((1, 1, 1), 0.399),
    ((1, 1, 2), 0.781),
    ((1, 1, 4), 1.541),
    ((1, 1, 8), 3.057),
    ((8, 1, 4), 1.370),
    ((1, 4, 8), 10.999),
    ((2, 2, 8), 5.838),
    ((1, 2, 8), 5.825),
    ((4, 1, 8), 3.056),
    ((2, 4, 4), 5.519),
]


@pytest.mark.parametrize(("shape", "measured"), _PROBE)
def test_probe_requests_within_five_percent(shape: tuple[int, int, int], measured: float) -> None:
    words = _shape(*shape)
    n = 64
    req = np.repeat(np.arange(n), len(words))
    addr = np.array([128 * ln + 32 * s + 4 * w for _ in range(n) for ln, s, w in words])
    u = hot_unit(req, addr.astype(np.uint64), np.ones(n))
    assert u.ns / n == pytest.approx(measured, rel=0.05)


def test_bincount_flush() -> None:
    # HeCBench bincount's flush: 39,063 CTAs of 256 threads add 768 int bins (6 regions, 3
    # units), a request per line; a unit's 8 lines a CTA x 1.19 ns = 372 us (an H200 measured
    # 0.373 ms for the flush alone, 0.379 ms for the kernel)
    assert unit_serial_s(39063 * flush_ns(32, 8, 1.0)) == pytest.approx(371.9e-6, rel=1e-3)


@pytest.mark.parametrize(("full", "measured_ms"), [(1.0, 0.6263), (0.0, 0.7306)])
def test_a_flush_of_full_or_partial_sectors(full: float, measured_ms: float) -> None:
    # every CTA of 65,536 adds a unit's 256 bins: 8 x 0.07 + 32 x 0.28 (all 8 words of each
    # sector) or 32 x 0.33 (1-4 of them): 0.624 and 0.729 ms (the probe: 0.626, 0.731)
    assert unit_serial_s(65536 * flush_ns(32, 8, full)) * 1e3 == pytest.approx(
        measured_ms, rel=0.01
    )


def test_empty() -> None:
    u = hot_unit(np.zeros(0), np.zeros(0, dtype=np.uint64), np.zeros(0))
    assert u.pairs == 0.0 and u.ns == 0.0 and len(u.on) == 0
