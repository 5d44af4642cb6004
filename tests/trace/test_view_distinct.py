"""The trace view's distinct counts by one sort (numpy 2.3+'s hash ``np.unique`` is many times
slower on millions of values) give exactly what ``np.unique`` gives."""

from __future__ import annotations

import numpy as np

from gpuadvise.trace.view import Lanes, unique_int, warp_footprint


def _reference_footprint(lanes: Lanes) -> tuple[int, int]:
    """warp_footprint as it was written with np.unique (per warp: distinct sectors, and the
    distinct 4-byte or 1-byte units rounded up to sectors)."""
    group = lanes.cta * 64 + lanes.tid // 32
    sectors: set[tuple[int, int]] = set()
    units: dict[int, set[int]] = {}
    unit = 1 if ((lanes.width < 4).any() or (lanes.off % 4 != 0).any()) else 4
    for g, off, w in zip(group.tolist(), lanes.off.tolist(), lanes.width.tolist(), strict=True):
        for s in range(off // 32, (off + w - 1) // 32 + 1):
            sectors.add((g, s))
        for k in range(max(w // unit, 1)):
            units.setdefault(g, set()).add(off // unit + k)
    ideal = sum(-(-len(u) * unit // 32) for u in units.values())
    return len(sectors), ideal


def _lanes(rng: np.random.Generator, n: int, width: int, spread: int) -> Lanes:
    off = rng.integers(0, spread, n) * (4 if width >= 4 else 1)
    return Lanes(
        rec=np.arange(n) // 32,
        inst=np.zeros(n, np.int64),
        cta=rng.integers(0, 3, n),
        tid=rng.integers(0, 256, n),
        off=off.astype(np.int64),
        width=np.full(n, width, np.int64),
    )


def test_unique_int_is_np_unique():
    rng = np.random.default_rng(1)
    for a in (
        rng.integers(0, 50, 1000),
        rng.integers(-(1 << 40), 1 << 40, 5000),
        np.zeros(0, np.int64),
        np.array([7]),
        np.array([3, 3, 3]),
    ):
        assert np.array_equal(unique_int(a), np.unique(a))


def test_warp_footprint_matches_the_reference():
    rng = np.random.default_rng(2)
    for width, spread in ((4, 64), (4, 4096), (16, 300), (2, 500), (8, 1 << 20)):
        lanes = _lanes(rng, 3000, width, spread)
        assert warp_footprint(lanes) == _reference_footprint(lanes)
    # unaligned 4-byte accesses count bytes, and may cross a sector
    lanes = _lanes(rng, 500, 4, 1000)
    lanes = Lanes(lanes.rec, lanes.inst, lanes.cta, lanes.tid, lanes.off + 2, lanes.width)
    assert warp_footprint(lanes) == _reference_footprint(lanes)
