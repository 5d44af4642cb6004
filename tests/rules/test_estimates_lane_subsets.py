"""The estimates' shared views computed over fewer lanes give what the whole view gave (issue 31):
a per-line proxy's traffic (``view_traffic(only=...)``) and a change's (``changed``) from the lanes
of those records alone, and the distinct keys of the lanes found by sorting only the first lane of
each run of equal neighbours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import analyze

from gpuadvise import arrays
from gpuadvise.arrays import distinct, distinct_first, distinct_inverse, distinct_rows
from gpuadvise.rules import estimates
from gpuadvise.rules.estimates import (
    _distinct_ascending,
    _L2Keys,
    _packed,
    _pairs_by_record,
    _SectorSet,
    _sorted_in_records,
)


def _with_runs(rng: np.random.Generator, n: int, values: int, longest: int) -> np.ndarray:
    """``n`` integers in runs of 1 .. ``longest`` equal neighbours."""
    lengths = rng.integers(1, longest + 1, n)
    vals = rng.integers(0, values, n)
    return np.repeat(vals, lengths)[:n].astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("longest", [1, 2, 8, 40])
def test_distinct_by_runs_is_arrays_distinct(seed: int, longest: int) -> None:
    rng = np.random.default_rng(seed)
    for n, values in ((1, 5), (2, 1), (500, 7), (20_000, 3_000), (20_000, 1 << 40)):
        a = _with_runs(rng, n, values, longest)
        want = distinct_inverse(a, return_index=True)
        got = arrays.inverse_by_runs(a)
        for w, g in zip(want, got, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)
        want_f = distinct_first(a)
        got_f = arrays.first_by_runs(a)
        for w, g in zip(want_f, got_f, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("seed", range(4))
def test_pairs_by_record_are_distinct_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rec = np.sort(rng.integers(0, 300, 6000)).astype(np.int32)
    # a record's lanes in address order (coalesced: no sort), in any order (a gather), repeated
    ordered = (rec.astype(np.int64) * 50 + np.arange(len(rec)) % 37) // 3
    gathered = rng.integers(0, 1 << 20, len(rec)).astype(np.int64)
    repeated = np.repeat(gathered[::4], 4)[: len(rec)]
    for key in (ordered, gathered, repeated):
        want = distinct_rows([rec, key])
        got_rec, got_key = _pairs_by_record(rec, key)
        assert got_rec.dtype == got_key.dtype == want.dtype
        assert np.array_equal(got_rec, want[0]) and np.array_equal(got_key, want[1])


@pytest.mark.parametrize("seed", range(6))
def test_pairs_sorted_in_their_records_are_distinct_rows(seed: int) -> None:
    """_sorted_in_records (each record's keys sorted as a row of a matrix) gives
    distinct_rows' two rows, dtype and all: warps of 32 lanes in any order, records of one
    lane, negative and repeated keys, int32 and int64 keys; None (distinct_rows then) for a
    record of more than 64 lanes or a matrix four times the keys."""
    rng = np.random.default_rng(100 + seed)
    lanes = rng.choice([1, 8, 32], 400) if seed % 2 else np.full(400, 32)
    rec = np.repeat(np.arange(400, dtype=np.int32) * 3, lanes)
    for key in (
        rng.integers(-(1 << 40), 1 << 40, len(rec)),
        rng.integers(0, 40, len(rec)).astype(np.int32),
        np.repeat(rng.integers(0, 1 << 20, len(rec) // 4 + 1), 4)[: len(rec)],
    ):
        want = distinct_rows([rec, key])
        got = _sorted_in_records(rec, key)
        assert got is not None
        assert got[0].dtype == got[1].dtype == want.dtype
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    long = np.repeat(np.arange(3, dtype=np.int32), [10, 70, 5])
    assert _sorted_in_records(long, rng.integers(0, 9, len(long))) is None
    sparse = np.repeat(np.arange(40, dtype=np.int32), [40] + [1] * 39)
    assert _sorted_in_records(sparse, rng.integers(0, 9, len(sparse))) is None


def test_distinct_ascending_is_distinct() -> None:
    rng = np.random.default_rng(3)
    for a in (
        np.sort(rng.integers(0, 50, 1000)),
        rng.integers(0, 50, 1000),
        np.zeros(0, np.int64),
        np.array([4]),
    ):
        want = distinct(a)
        got = _distinct_ascending(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("weighted", [False, True])
def test_alone_from_the_selected_lanes_is_the_masks(weighted: bool) -> None:
    """The keys only the selected lanes touch, as the set's mask form counted them:
    ``bincount(group[sel]) > 0 & bincount(group[~sel]) == 0``."""
    rng = np.random.default_rng(7)
    n_lanes = 5000
    lanes = np.flatnonzero(rng.random(n_lanes) < 0.6).astype(np.int32)
    # (every key a lane of the set, as a set's keys are: the distinct keys of its lanes)
    group = np.unique(rng.integers(0, 400, len(lanes)), return_inverse=True)[1].astype(np.int32)
    n = int(group.max()) + 1
    kw = rng.random(n) * 3 if weighted else None
    s = _SectorSet(lanes, group, float(n if kw is None else kw.sum()), kw)
    for p in (0.0, 0.05, 0.5, 0.97, 1.0):
        mask = rng.random(n_lanes) < p
        sel = mask[lanes]
        hit = np.bincount(group[sel], minlength=n) > 0
        hit &= np.bincount(group[~sel], minlength=n) == 0
        want = float(kw[hit].sum()) if kw is not None else float(np.count_nonzero(hit))
        assert s.alone(np.flatnonzero(mask)) == want
        # the lanes picked once, for two sets of one lanes array (the L2's and the DRAM load's)
        picked = s.picked(np.flatnonzero(mask))
        assert (picked is None) == (np.count_nonzero(mask) * 8 <= len(lanes))
        if picked is not None:
            assert np.array_equal(picked, sel)
            assert s.alone(np.flatnonzero(mask), picked) == want


@pytest.mark.parametrize("seed", range(6))
def test_line_firsts_from_the_sector_keys_are_first_by_runs(seed: int) -> None:
    """The first lane of each distinct (CTA, buffer, 128-byte line) from the L2 set's distinct
    (CTA, buffer, sector) keys is ``first_by_runs`` of the line keys over the lanes, in the same
    order; lanes other than the set's get None."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    cta = np.sort(rng.integers(0, 1 + seed * 3, n))
    lb = rng.integers(0, 3, n)
    off = np.where(rng.random(n) < 0.5, rng.integers(0, 4096, n), np.arange(n) * 4 % 2048)
    sector = off // 32
    uniq, first, _ = arrays.inverse_by_runs(_packed([cta, lb, sector]))
    lanes = np.flatnonzero(rng.random(n + 50) < 0.9)[:n].astype(np.int32)
    if len(lanes) < n:
        lanes = np.arange(n, dtype=np.int32)
    keys = _L2Keys(lanes, uniq, first, int(sector.max()) + 1)
    got = keys.line_firsts(lanes.astype(np.int64))
    _, want = arrays.first_by_runs(_packed([cta, lb, off // 128]))
    assert got is not None and np.array_equal(got, want)
    assert keys.line_firsts(lanes[1:]) is None
    if n > 1:
        other = lanes.copy()
        other[-1] += 1
        assert keys.line_firsts(other) is None


# 4 CTAs of 128 threads: coalesced loads and full stores, a reload of what the CTA stored, a
# gather, a strided load and a partial store
SRC = """
__global__ void mix(float* out, const float* inp, float* tmp, int n) {
    int row = blockIdx.x, t = threadIdx.x;
    for (int i = t; i < n; i += blockDim.x) tmp[row * n + i] = inp[row * n + i] * 2.0f;
    __syncthreads();
    float s = 0.0f;
    for (int i = t; i < n; i += blockDim.x) s += tmp[row * n + i];
    for (int k = 0; k < 4; ++k) s += inp[((t * 97 + k * 131) * 33) % (4 * n)];
    s += inp[t * 8];
    out[(row * blockDim.x + t) * 2] = s;
}
"""

SPEC = """source = "k.cu"
kernel = "mix"
grid = 4
block = 128

[args]
n = 1024

[buffers]
inp = { type = "float", count = 4096, fill = "random(-1,1)" }
tmp = { type = "float", count = 4096, fill = "zeros" }
out = { type = "float", count = 1024, fill = "zeros" }
"""


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory, compile_cache: Path) -> Any:
    d: Path = tmp_path_factory.mktemp("mix")
    (d / "k.cu").write_text(SRC)
    (d / "case.toml").write_text(SPEC)
    return analyze(d / "k.cu", "mix", 4, spec=str(d / "case.toml"))


def _view(a: Any) -> Any:
    from gpuadvise.trace.view import TraceView, buffer_infos

    trace = a.memory.trace
    return TraceView(trace, buffer_infos(trace, a.spec))


def _subsets(view: Any) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
    """(changed, only) record subsets: each instruction's records (a per-line proxy) with and
    without all or half of them changed, a random third, and none."""
    rng = np.random.default_rng(11)
    inst = view.records["inst"]
    out: list[tuple[np.ndarray | None, np.ndarray | None]] = []
    for i in np.unique(inst):
        recs = np.flatnonzero(inst == i)
        out += [(None, recs), (recs, recs), (recs[::2], recs), (recs, None)]
    third = np.flatnonzero(rng.random(len(inst)) < 0.33)
    out += [(None, third), (third[::3], third), (third, None), (None, np.zeros(0, np.int64))]
    return out


@pytest.mark.toolkit
def test_record_lanes_are_the_lanes_of_the_records(launch: Any) -> None:
    view = _view(launch)
    rng = np.random.default_rng(2)
    for p in (0.0, 0.1, 0.5, 1.0):
        mask = rng.random(len(view.records)) < p
        got = estimates._record_lanes(view, mask)
        assert np.array_equal(got, np.flatnonzero(mask[view.lanes.rec]))


@pytest.mark.toolkit
def test_traffic_of_some_records_from_their_lanes_is_from_every_lane(
    launch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each (changed, only) of ``view_traffic``, its own-stored lanes and its refetches: from
    the lanes of the records alone (the fast form) and from every lane of the view, gated by the
    records' masks (the form it replaced), the same to the last bit."""
    device = launch.device
    fast, whole = _view(launch), _view(launch)
    assert estimates.own_stored_lanes(fast).any()  # the reload of what the CTA stored
    every = lambda view, mask, narrow=False: np.arange(len(view.lanes), dtype=np.int64)  # noqa: E731
    for changed, only in _subsets(fast):
        keep = None
        if only is not None:
            keep = np.zeros(len(fast.records), bool)
            keep[only] = True
        got = (
            estimates.view_traffic(device, fast, changed, only),
            estimates.own_stored_lanes(fast, keep),
            estimates.l1_refetch(device, fast, keep),
        )
        with monkeypatch.context() as m:
            m.setattr(estimates, "_record_lanes", every)
            want = (
                estimates.view_traffic(device, whole, changed, only),
                estimates.own_stored_lanes(whole, keep),
                estimates.l1_refetch(device, whole, keep),
            )
        assert got[0] == want[0], (changed, only)
        assert np.array_equal(got[1], want[1])
        assert np.array_equal(got[2], want[2])
    assert estimates.view_traffic(device, fast).l2_load_sectors > 0


@pytest.mark.toolkit
def test_refetches_from_the_l2_sets_keys_are_from_the_lanes(
    launch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``l1_refetch``'s lines per CTA from the L2 set's sector keys (where its lanes are the
    set's) and from a pass over the lanes: the same refetches to the last bit, for the whole
    view and each proxy's records; the keys are used for some of them."""
    device = launch.device
    fast, slow = _view(launch), _view(launch)
    used = []
    line_firsts = _L2Keys.line_firsts

    def counted(self: _L2Keys, lanes: np.ndarray) -> np.ndarray | None:
        got = line_firsts(self, lanes)
        used.append(got is not None)
        return got

    monkeypatch.setattr(_L2Keys, "line_firsts", counted)
    for changed, only in _subsets(fast):
        keep = None
        if only is not None:
            keep = np.zeros(len(fast.records), bool)
            keep[only] = True
        estimates.view_traffic(device, fast, changed, only)
        got = estimates.l1_refetch(device, fast, keep)
        with monkeypatch.context() as m:
            m.setattr(_L2Keys, "line_firsts", lambda self, lanes: None)
            estimates.view_traffic(device, slow, changed, only)
            want = estimates.l1_refetch(device, slow, keep)
        assert np.array_equal(got, want), (changed, only)
    assert any(used)


@pytest.mark.toolkit
def test_a_proxys_records_are_found_once_for_before_and_after(launch: Any) -> None:
    """The estimate asks for a proxy's records before and after the change: their own-stored
    lanes, sector sets and refetches are found once (the last mask's kept), and again for
    another mask."""
    view = _view(launch)
    device = launch.device
    inst = view.records["inst"]
    a = inst == inst[0]
    b = ~a
    first = estimates.l1_refetch(device, view, a)
    sets = estimates._sector_sets(view, a)
    assert estimates.l1_refetch(device, view, a.copy()) is first
    assert estimates._sector_sets(view, a.copy()) is sets
    other = estimates.l1_refetch(device, view, b)
    assert other is not first
    again = estimates.l1_refetch(device, view, a)
    assert again is not first and np.array_equal(again, first)
