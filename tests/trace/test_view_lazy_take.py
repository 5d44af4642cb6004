"""Lanes.take gathers each column when it is first read (issue 31: most readers of a line's lanes
read two to four of the six): the same values as the eager gather, for indices, masks and a take
of a take, a column not read is never gathered, and a pickle carries the columns, not the
source."""

from __future__ import annotations

import pickle

import numpy as np

from gpuadvise.trace.view import Lanes

COLS = ("rec", "inst", "cta", "tid", "off", "width")


def _lanes(n: int = 500, seed: int = 5) -> Lanes:
    rng = np.random.default_rng(seed)
    ix = (np.int32, np.int32, np.int32, np.int32, np.int64, np.int32)
    return Lanes(*(rng.integers(0, 1 << 20, n).astype(t) for t in ix))


def _eager(lanes: Lanes, keep: np.ndarray) -> dict[str, np.ndarray]:
    return {c: getattr(lanes, c)[keep] for c in COLS}


def _same(got: Lanes, want: dict[str, np.ndarray]) -> bool:
    return all(
        getattr(got, c).dtype == want[c].dtype and np.array_equal(getattr(got, c), want[c])
        for c in COLS
    )


def test_the_taken_columns_are_the_eager_gathers() -> None:
    lanes = _lanes()
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(lanes), 120)
    mask = rng.random(len(lanes)) < 0.3
    for keep in (idx, idx.astype(np.int32), mask, np.zeros(0, np.int64)):
        got = lanes.take(keep)
        assert len(got) == len(_eager(lanes, keep)["rec"])
        assert _same(got, _eager(lanes, keep))
    inner = np.array([3, 0, 7, 7, 50])
    assert _same(lanes.take(idx).take(inner), _eager(lanes, idx[inner]))


def test_a_column_not_read_is_not_gathered() -> None:
    lanes = _lanes()
    got = lanes.take(np.arange(0, 400, 3))
    assert len(got) == 134
    assert got.__dict__["_got"] == {}
    first = got.off
    assert list(got.__dict__["_got"]) == ["off"]
    assert got.off is first  # gathered once


def test_a_pickle_carries_the_columns() -> None:
    lanes = _lanes()
    keep = np.arange(10, 60)
    back = pickle.loads(pickle.dumps(lanes.take(keep)))
    assert type(back) is Lanes
    assert _same(back, _eager(lanes, keep))
    assert len(pickle.dumps(lanes.take(keep))) < len(pickle.dumps(lanes)) // 4


def test_lean_lanes_drop_the_read_columns_and_read_the_same() -> None:
    lanes = _lanes()
    rng = np.random.default_rng(2)
    idx = rng.integers(0, len(lanes), 200).astype(np.int32)
    taken = lanes.take(idx)
    _ = taken.off, taken.cta  # columns read: the lean copy holds none of them
    lean = taken.lean()
    assert lean.__dict__["_got"] == {}
    assert lean.__dict__["_source"] is lanes
    assert _same(lean, _eager(lanes, idx))
    # a take of a take: the indices over the first source, composed
    inner = rng.random(len(idx)) < 0.5
    twice = lanes.take(idx).take(inner).lean()
    assert twice.__dict__["_source"] is lanes
    assert _same(twice, _eager(lanes, idx[inner]))
    assert lanes.lean() is lanes  # lanes that hold their columns


def test_joined_lanes_are_the_columns_concatenated() -> None:
    lanes = _lanes()
    rng = np.random.default_rng(3)
    parts = [lanes.take(rng.integers(0, len(lanes), k)) for k in (40, 0, 90)]
    _ = parts[0].off  # (a read column makes no difference)
    want = {c: np.concatenate([getattr(p, c) for p in parts]) for c in COLS}
    got = Lanes.joined(parts)
    assert got.__dict__["_got"] == {}  # taken from the one source: nothing gathered yet
    assert _same(got, want)
    # parts of different sources, or plain lanes: each column concatenated
    other = _lanes(seed=9)
    mixed = [parts[0], other.take(np.arange(5)), other]
    want = {c: np.concatenate([getattr(p, c) for p in mixed]) for c in COLS}
    assert type(Lanes.joined(mixed)) is Lanes
    assert _same(Lanes.joined(mixed), want)
