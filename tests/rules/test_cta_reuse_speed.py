"""``cta_reuse`` (GA305's reuse counts) computed with one sort: the same counts as the plain
definition (``np.unique`` of each key, a sort by (record, offset)) on random lanes -- contiguous
records and not, sector-crossing widths, repeated addresses -- and a sampled view's bound.
No toolkit needed."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.trace.view import SECTOR, Lanes, Reuse, cta_reuse


def reference(lanes: Lanes, sectors_of_records: np.ndarray) -> Reuse:
    """The definition, as the code stood before the one-sort version (issue 17)."""
    addr = (lanes.cta << 44) | lanes.off
    pairs = len(np.unique((lanes.cta << 54) | (lanes.tid << 44) | lanes.off))
    addresses = len(np.unique(addr))
    order = np.lexsort((lanes.off, lanes.rec))
    r, o = lanes.rec[order], lanes.off[order]
    distinct = int(np.count_nonzero(np.r_[True, (r[1:] != r[:-1]) | (o[1:] != o[:-1])]))
    recs = np.unique(lanes.rec)
    sect = np.unique((lanes.cta << 44) | (lanes.off // SECTOR))
    last = (lanes.off + lanes.width - 1) // SECTOR
    cross = last != lanes.off // SECTOR
    if cross.any():
        sect = np.unique(np.concatenate([sect, (lanes.cta[cross] << 44) | last[cross]]))
    return Reuse(
        pairs, addresses, len(recs), len(lanes), distinct / len(lanes),
        int(sectors_of_records.sum()), len(sect),
    )  # fmt: skip


def random_lanes(rng: np.random.Generator, n_recs: int, width: int, spread: int) -> Lanes:
    per = rng.integers(1, 33, n_recs)
    rec = np.repeat(np.arange(n_recs, dtype=np.int64), per)
    lane = np.concatenate([np.sort(rng.choice(32, k, replace=False)) for k in per])
    warp = np.repeat(rng.integers(0, 8, n_recs), per)
    cta = np.repeat(rng.integers(0, 5, n_recs), per)
    off = rng.integers(0, spread, len(rec)).astype(np.int64) * width
    return Lanes(
        rec,
        np.zeros(len(rec), np.int64),
        cta.astype(np.int64),
        (warp * 32 + lane).astype(np.int64),
        off,
        np.full(len(rec), width, np.int64),
    )


@pytest.mark.parametrize("width", [1, 4, 8, 16, 12])
@pytest.mark.parametrize("spread", [4, 64, 100000])
def test_same_counts_as_the_definition(width, spread):
    rng = np.random.default_rng(width * 1000 + spread)
    lanes = random_lanes(rng, 300, width, spread)
    sectors = rng.integers(1, 33, 300)
    assert cta_reuse(lanes, sectors) == reference(lanes, sectors)
    # records not in order (a caller's own Lanes): the general path
    perm = rng.permutation(len(lanes))
    shuffled = lanes.take(perm)
    assert cta_reuse(shuffled, sectors) == reference(shuffled, sectors)


def test_unaligned_offsets_crossing_sectors():
    rng = np.random.default_rng(7)
    lanes = random_lanes(rng, 200, 4, 5000)
    lanes = Lanes(lanes.rec, lanes.inst, lanes.cta, lanes.tid, lanes.off + 30, lanes.width)
    got = cta_reuse(lanes, np.ones(200, np.int64))
    assert got == reference(lanes, np.ones(200, np.int64))
    assert got.unique_sectors > len(np.unique((lanes.cta << 44) | (lanes.off // SECTOR)))


def test_empty():
    e = np.zeros(0, np.int64)
    assert cta_reuse(Lanes(e, e, e, e, e, e), e) == Reuse(0, 0, 0, 0, 0.0, 0, 0)


def test_view_samples_fewer_ctas_when_they_have_many_lanes():
    from gpuadvise.trace.access import AccessTrace, InstrInfo, Kind, Space, empty_records
    from gpuadvise.trace.view import TraceView

    recs = empty_records(10 * 4)
    recs["cta"] = np.repeat(np.arange(10), 4)
    recs["mask"] = 0xFFFFFFFF
    recs["width"] = 4
    recs["space"] = int(Space.GLOBAL)
    recs["kind"] = int(Kind.LOAD)
    recs["addr"] = np.arange(32, dtype=np.uint64) * 4
    info = InstrInfo(0, "k.cu", 1, "ld.global.f32", Space.GLOBAL, Kind.LOAD, 4)
    trace = AccessTrace(recs, (info,), tuple(range(10)), 100, (100, 1, 1), (128, 1, 1), "emulator")
    whole = TraceView(trace, {})
    assert len(whole.ctas) == 10 and whole.scale == 10.0
    thin = TraceView(trace, {}, max_lanes=3 * 4 * 32)  # three CTAs' lanes
    assert list(thin.ctas) == [0, 4, 9] and thin.scale == 100 / 3
    assert len(thin.lanes) == 3 * 4 * 32
