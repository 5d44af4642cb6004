"""GA305's launch-wide reuse (gpuadvise.rules.launch_reuse.launch_reuse) counted by hand: each
lane's sectors (its first, and the next where its bytes cross into it) per CTA and over the
sample, with the key array sorted in place (issue 31's peak)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from gpuadvise.rules.launch_reuse import launch_reuse
from gpuadvise.trace.view import Lanes


def _lanes(cta: list[int], off: list[int], width: list[int], ix: type) -> Lanes:
    z = np.zeros(len(cta), ix)
    return Lanes(z, z, np.array(cta, ix), z, np.array(off, np.int64), np.array(width, ix))


@pytest.mark.parametrize("ix", [np.int32, np.int64])
def test_sectors_per_cta_and_over_the_sample(ix: type) -> None:
    # CTA 0: sector 0 twice, a lane of 8 bytes at 28 (sectors 0 and 1); CTA 1: sector 0 and a
    # 16-byte lane at 120 (sectors 3 and 4); CTA 2: a 4-byte lane at 64 (sector 2)
    lanes = _lanes([0, 0, 0, 1, 1, 2], [0, 4, 28, 8, 120, 64], [4, 4, 8, 4, 16, 4], ix)
    got = launch_reuse(SimpleNamespace(scale=3.0), lanes, 10**6)
    assert got.l2_sectors == 2 + 3 + 1  # CTA 0: {0, 1}; CTA 1: {0, 3, 4}; CTA 2: {2}
    assert got.sample_sectors == 5  # {0, 1, 2, 3, 4}
    assert got.footprint == 15.0  # 5 sectors x 3, below the buffer's
    assert got.factor == pytest.approx(6 * 3.0 / 15.0)


def test_the_footprint_is_at_most_the_buffer() -> None:
    lanes = _lanes([0, 1], [0, 32], [4, 4], np.int32)
    got = launch_reuse(SimpleNamespace(scale=100.0), lanes, 64)
    assert (got.l2_sectors, got.sample_sectors, got.footprint) == (2, 2, 2.0)


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_random_lanes_against_the_sets_of_their_sectors(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many CTAs re-reading their sectors, lanes crossing into the next sector, offsets far
    apart: the per-CTA and sample counts are those of the (CTA, sector) and sector sets (the
    sample's distinct sectors come from the distinct (CTA, sector) keys)."""
    # the keys made in steps (the module, not the function gpuadvise.rules exports by its name)
    monkeypatch.setattr(sys.modules["gpuadvise.rules.launch_reuse"], "_KEY_CHUNK", chunk)
    rng = np.random.default_rng(7)
    n = 5000
    cta = rng.integers(0, 40, n)
    off = rng.integers(0, 1 << 12, n) * 4 + rng.choice([0, 1 << 30], n)
    width = rng.choice([4, 8, 16, 64], n)  # (64: two sectors past the first)
    lanes = _lanes(cta.tolist(), off.tolist(), width.tolist(), np.int32)
    rows = zip(cta, off, width, strict=True)
    pairs = {(int(c), int(o + k) // 32) for c, o, w in rows for k in (0, w - 1)}
    got = launch_reuse(SimpleNamespace(scale=1.0), lanes, 1 << 40)
    assert got.l2_sectors == len(pairs)
    assert got.sample_sectors == len({s for _, s in pairs})


@pytest.mark.parametrize("chunk", [1 << 20, 7, 1])
def test_taken_lanes_count_as_their_columns_and_keep_none(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line's taken lanes (Lanes.take, as the view's accesses give them) read a chunk at a
    time (Lanes.column_slice, issue 31): the counts of the same lanes holding their columns, and
    no column gathered whole and kept; a column read before is sliced as it is."""
    monkeypatch.setattr(sys.modules["gpuadvise.rules.launch_reuse"], "_KEY_CHUNK", chunk)
    rng = np.random.default_rng(3)
    n = 3000
    source = _lanes(
        rng.integers(0, 25, n).tolist(),
        (rng.integers(0, 1 << 10, n) * 4 + rng.choice([0, 2, 1 << 33], n)).tolist(),
        rng.choice([1, 4, 8, 16, 64], n).tolist(),
        np.int32,
    )
    keep = np.flatnonzero(rng.random(n) < 0.6)
    taken = source.take(keep)
    plain = Lanes(*(c[keep] for c in source.columns()))
    want = launch_reuse(SimpleNamespace(scale=2.0), plain, 1 << 40)
    assert want.l2_sectors > want.sample_sectors > 0
    assert launch_reuse(SimpleNamespace(scale=2.0), taken, 1 << 40) == want
    assert taken.__dict__["_got"] == {}
    assert np.array_equal(taken.off, plain.off)  # (the offsets gathered and kept now)
    assert launch_reuse(SimpleNamespace(scale=2.0), taken, 1 << 40) == want
    for name in ("rec", "cta", "off", "width"):
        assert np.array_equal(taken.column_slice(name, 5, 900), getattr(plain, name)[5:900])
        assert np.array_equal(plain.column_slice(name, 5, 900), getattr(plain, name)[5:900])
