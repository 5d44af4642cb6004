"""The view's footprint and reuse counts made in place (issue 31's peak memory): the values the
plain array expressions gave."""

from __future__ import annotations

import numpy as np

from gpuadvise.arrays import distinct
from gpuadvise.trace import view as V


def _footprint(lanes: V.Lanes) -> tuple[int, int]:
    """warp_footprint as it was: every key a new array."""
    group = lanes.cta.astype(np.int64) * 64 + lanes.tid // 32
    first = lanes.off // 32
    last = (lanes.off + lanes.width - 1) // 32
    keys = [(group << 44) | first]
    for k in range(1, int((last - first).max()) + 1):
        more = last - first >= k
        keys.append((group[more] << 44) | (first[more] + k))
    sectors = len(distinct(np.concatenate(keys)))
    off, width = lanes.off, lanes.width
    unit = 1 if ((width < 4).any() or (off % 4 != 0).any()) else 4
    n = np.maximum(width // unit, 1)
    idx = np.repeat(np.arange(len(off)), n)
    unit_no = off[idx] // unit + np.arange(len(idx)) - np.repeat(np.cumsum(n) - n, n)
    g = distinct((group[idx] << 44) | unit_no) >> 44
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    per_group = np.diff(np.r_[starts, len(g)]) * unit
    return sectors, int(np.sum(-(-per_group // 32)))


def _lanes(rng: np.random.Generator, n: int, widths: np.ndarray, step: int) -> V.Lanes:
    return V.Lanes(
        np.sort(rng.integers(0, n, n)).astype(np.int32),
        np.zeros(n, np.int32),
        rng.integers(0, 5, n).astype(np.int32),
        rng.integers(0, 256, n).astype(np.int32),
        (rng.integers(0, 5000, n) * step).astype(np.int64),
        widths.astype(np.int32),
    )


def test_warp_footprint_and_cta_reuse_as_the_plain_expressions() -> None:
    rng = np.random.default_rng(1)
    for t in range(120):
        n = int(rng.integers(1, 300))
        widths = rng.choice([1, 2, 4, 8, 16], n) if t % 2 else np.full(n, rng.choice([4, 8]))
        lanes = _lanes(rng, n, widths, 1 if t % 3 else 4)
        assert V.warp_footprint(lanes) == _footprint(lanes), t
        r = V.cta_reuse(lanes, np.ones(n, np.int64))
        key = (lanes.cta.astype(np.int64) << 54) | (lanes.off << 10) | lanes.tid
        assert r.pairs == len(distinct(key)), t
        assert r.addresses == len(distinct(key >> 10)), t


def test_warp_footprint_one_sort_and_sector_keys_agree() -> None:
    """The sectors from the sorted unit keys (one sort) against the sector keys' own sort, on
    widths a unit divides (the one-sort path) and on widths it does not (6 bytes in 4-byte
    units: the sector keys' path), lanes crossing sectors, wide vectors."""
    rng = np.random.default_rng(7)
    for t in range(200):
        n = int(rng.integers(1, 400))
        choice = ([1, 2, 4, 8, 16], [4, 8, 16, 32], [4, 6, 12], [16])[t % 4]
        lanes = _lanes(rng, n, rng.choice(choice, n), (1, 4, 4, 16)[t % 4])
        group = lanes.cta.astype(np.int64) * 64 + lanes.tid // 32
        sectors, ideal = V.warp_footprint(lanes)
        assert sectors == V._sector_keys_count(group, lanes.off, lanes.width), t
        assert (sectors, ideal) == _footprint(lanes), t
