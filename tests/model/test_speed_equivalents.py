"""The faster forms of the rules' shared views give what the forms they replaced gave (issue 31):
random records and lanes, compared with the slower computation written out here."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.atomic_units import hot_unit, lane_pairs, runs
from gpuadvise.model.banks import atomic_contention, one_address
from gpuadvise.model.coalescing import touched_lines
from gpuadvise.ptx.access import RECORD
from gpuadvise.rules.scalar_runs import _distinct_values, _lane_sectors


def _records(seed: int, n: int = 3000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = np.zeros(n, RECORD)
    r["mask"] = rng.choice([0, 1, 3, 0xFFFF, 0x0F0F0F0F, 0x80000001, 0xFFFFFFFF], n)
    r["width"] = rng.choice([1, 2, 4, 8, 16], n)
    same = rng.random(n) < 0.4  # some records name one address on every lane
    base = rng.integers(0, 1 << 36, n).astype(np.uint64)
    step = rng.integers(0, 3, (n, 32)).astype(np.uint64) * np.uint64(4)
    r["addr"] = base[:, None] + np.where(same[:, None], np.uint64(0), step)
    return r


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_address_is_atomic_contentions_one(seed: int) -> None:
    r = _records(seed)
    lanes, addrs = atomic_contention(r)
    lanes2, one = one_address(r)
    assert np.array_equal(lanes, lanes2)
    assert np.array_equal(one, addrs == 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lane_sectors_are_touched_lines_sectors(seed: int) -> None:
    r = _records(seed)
    r["addr"] //= np.random.default_rng(seed).choice([1, 3, 7], (len(r), 1)).astype(np.uint64)
    want = np.unique(touched_lines(r, 32)[1])
    assert np.array_equal(_distinct_values(_lane_sectors(r)), want)


def test_runs_of_sorted_pairs_are_numpys_unique_rows() -> None:
    rng = np.random.default_rng(5)
    req = rng.integers(0, 50, 4000).astype(np.uint64)
    addr = rng.integers(0, 4096, 4000).astype(np.uint64)
    pairs, lanes = lane_pairs(req, addr)
    want, counts = np.unique(np.stack([req, addr], axis=1), axis=0, return_counts=True)
    assert np.array_equal(pairs.T, want) and np.array_equal(lanes, counts)
    # a coarser pair (request, sector) as runs of the sorted (request, address) pairs
    rows, n = runs(pairs[0], pairs[1] >> np.uint64(5))
    want2, counts2 = np.unique(
        np.stack([want[:, 0], want[:, 1] >> np.uint64(5)], axis=1), axis=0, return_counts=True
    )
    assert np.array_equal(rows, want2) and np.array_equal(n, counts2)


def test_hot_unit_with_pairs_given_is_the_same() -> None:
    rng = np.random.default_rng(9)
    req = np.sort(rng.integers(0, 300, 5000))
    addr = (rng.integers(0, 8192, 5000) // 4 * 4).astype(np.uint64)
    w = rng.random(300) + 0.5
    a = hot_unit(req, addr, w)
    b = hot_unit(req, addr, w, lane_pairs(req, addr)[0])
    assert (a.ns, a.pairs, a.sectors, a.lines, a.words, a.lanes) == (
        b.ns, b.pairs, b.sectors, b.lines, b.words, b.lanes,
    )  # fmt: skip
    assert np.array_equal(a.on, b.on)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lanes_by_cta_from_the_records_is_the_stable_sort_of_the_lanes(seed: int) -> None:
    """same_thread_reloads' lanes by CTA (issue 31): from one stable sort of the records, each
    record's lanes contiguous, the same order and positions as the stable sort of the lanes'
    CTAs; records without lanes included; None where the lanes are not by record."""
    from gpuadvise.rules.repeats import _lanes_by_cta

    rng = np.random.default_rng(seed)
    n_rec = 400
    rec_cta = rng.integers(0, 9, n_rec).astype(np.uint32)
    per_rec = rng.choice([0, 1, 5, 32], n_rec)
    rec = np.repeat(np.arange(n_rec), per_rec)
    got = _lanes_by_cta(rec, np.bincount(rec, minlength=n_rec), rec_cta)
    assert got is not None
    want = np.argsort(rec_cta[rec].astype(np.int64), kind="stable")
    pos = np.empty(len(rec), np.int64)
    pos[want] = np.arange(len(rec))
    assert np.array_equal(got[0], want) and np.array_equal(got[1], pos)
    assert _lanes_by_cta(rec[::-1].copy(), np.bincount(rec, minlength=n_rec), rec_cta) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("top", [300, 40_000, 2**36])
def test_cta_distinct_sectors_by_marks_or_sort_are_np_uniques(seed: int, top: int) -> None:
    """same_thread_reloads' distinct (buffer, sector) per CTA (issue 31): marked where the
    CTAs' buffers' sectors are few (the first two spans of offsets), else by the keys' sort; the
    count of np.unique's (CTA, buffer, sector) rows either way, CTAs without lanes 0."""
    from gpuadvise.rules.repeats import _cta_distinct_sectors

    rng = np.random.default_rng(seed)
    n, ctas = 5000, 12
    cta = rng.integers(0, ctas - 1, n).astype(np.int32)  # (the last CTA has no lanes)
    buf = rng.integers(0, 5, n).astype(np.int32)
    off = rng.integers(0, top, n).astype(np.int64)
    off[:200] = off[0] + np.arange(200) * 4  # (a coalesced run: neighbours of one sector)
    got = _cta_distinct_sectors(cta, buf, off, ctas)
    rows = np.unique(np.stack([cta.astype(np.int64), buf, off // 32]), axis=1)
    want = np.bincount(rows[0], minlength=ctas).astype(np.float64)
    assert got.dtype == np.float64 and np.array_equal(got, want)
    assert got[-1] == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_first_lane_per_address_by_sort_is_the_pairwise_one(seed: int) -> None:
    """Reconcile's aggregated atomics: the lowest active lane of each address, from one sort a
    record, against every pair of lanes compared (the form it replaced)."""
    from gpuadvise.model.banks import active_lanes
    from gpuadvise.model.reconcile import _Edits, _first_lane_per_address, _first_lanes_pairwise

    rng = np.random.default_rng(seed)
    r = _records(seed, 9000)
    if seed % 2:  # few distinct addresses a record (a histogram's bins), shared offsets from 0
        r["addr"] = rng.integers(0, 8, (len(r), 32)).astype(np.uint64) * np.uint64(4)
    act = active_lanes(r["mask"])
    r["addr"][~act] = 0
    idx = np.sort(rng.choice(len(r), 7000, replace=False))
    edits = _Edits(
        np.zeros(len(r), bool), r["width"].copy(), np.ones(len(r), np.int64), r["mask"].copy()
    )
    dropped = _first_lane_per_address(r, idx, edits)
    keep = _first_lanes_pairwise(r["addr"][idx], act[idx])
    weights = np.uint64(1) << np.arange(32, dtype=np.uint64)
    want = r["mask"].copy()
    want[idx] = (keep.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
    assert dropped == int(act[idx].sum() - keep.sum())
    assert np.array_equal(edits.mask, want)


def _writes_between_by_cumsum(
    addr: np.ndarray, writes: np.ndarray, cur: np.ndarray, prev: np.ndarray
) -> np.ndarray:
    """The form same_thread_reloads had: every access stably sorted by address, the writes
    counted in that order, a pair kept where none lies between its two."""
    by_addr = np.argsort(addr, kind="stable")
    pos = np.empty(len(addr), np.int64)
    pos[by_addr] = np.arange(len(addr))
    before = np.cumsum(writes[by_addr])
    return (before[pos[cur] - 1] - before[pos[prev]]) == 0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("wide", [False, True])
def test_no_write_between_by_the_writes_alone_is_the_sort_of_every_access(
    seed: int, wide: bool
) -> None:
    """same_thread_reloads' check of another thread's write between a thread's two accesses
    (issue 31): the writes alone sorted and searched, and the fallback for addresses too wide
    for one key, against every access sorted by address (the form it replaced)."""
    from gpuadvise.rules.repeats import _no_write_between

    rng = np.random.default_rng(seed)
    n = 5000
    addr = rng.integers(0, 40, n).astype(np.int64)
    if wide:
        addr *= np.int64(1 << 50)  # (largest address + 1) x accesses past 2**62
    writes = rng.random(n) < (0.02, 0.2, 0.5, 0.0)[seed]
    # pairs of one address's accesses, each cur after its prev (some adjacent in its address)
    order = np.argsort(addr, kind="stable")
    same = np.flatnonzero(addr[order][1:] == addr[order][:-1])
    pick = rng.choice(same, 1500, replace=False)
    prev, cur = order[pick], order[pick + 1 + (pick + 2 < n) * (pick % 3 == 0)]
    ok = (addr[cur] == addr[prev]) & (cur > prev)
    cur, prev = cur[ok], prev[ok]
    want = _writes_between_by_cumsum(addr, writes, cur, prev)
    got_cur, got_prev = _no_write_between(addr, writes, cur, prev)
    assert np.array_equal(got_cur, cur[want]) and np.array_equal(got_prev, prev[want])
    assert 0 < len(got_cur) <= len(cur)


@pytest.mark.parametrize("band", [(10, 25), (0, 3), (37, 39), (50, 60)])
def test_no_write_between_outside_the_written_range_is_not_searched(
    band: tuple[int, int],
) -> None:
    """Pairs whose address lies outside the written addresses' range keep without a search
    (issue 31: a kernel's reloads of a buffer it never writes); the pairs inside it are checked
    as before: the same pairs as every access sorted by address."""
    from gpuadvise.rules.repeats import _no_write_between

    rng = np.random.default_rng(7)
    n = 5000
    addr = rng.integers(0, 40, n).astype(np.int64)
    lo, hi = band
    writes = (rng.random(n) < 0.3) & (addr >= lo) & (addr <= hi)
    order = np.argsort(addr, kind="stable")
    sa = addr[order]
    same = np.flatnonzero(sa[3:] == sa[:-3])  # pairs three accesses apart: two between
    pick = rng.choice(same, 1500, replace=False)
    prev, cur = order[pick], order[pick + 3]
    want = _writes_between_by_cumsum(addr, writes, cur, prev)
    got_cur, got_prev = _no_write_between(addr, writes, cur, prev)
    assert np.array_equal(got_cur, cur[want]) and np.array_equal(got_prev, prev[want])
    if hi < 40 and writes.any():
        assert len(got_cur) < len(cur)  # some pairs inside the band had a write between
    assert np.all(np.isin(cur[~want], np.flatnonzero((addr >= lo) & (addr <= hi))))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_write_between_only_searches_addresses_another_thread_accesses(seed: int) -> None:
    """same_thread_reloads' pairs (a thread's consecutive accesses of one address, by a sort of
    (address, thread)) whose address no other thread accesses have no write between without a
    search (issue 31: a thread per address, most kernels); _shared_addresses flags the others,
    and the pairs kept are those of the search over every pair."""
    from gpuadvise.arrays import stable_argsort_equal_major
    from gpuadvise.rules.repeats import _no_write_between, _shared_addresses

    rng = np.random.default_rng(seed)
    n = 6000
    addr = rng.integers(0, 300, n).astype(np.int64)
    # a thread per address for most, two or three threads for some (seed 2: none shared)
    thread = addr % 97
    if seed < 2:
        many = (addr % (5, 2)[seed]) == 0
        thread[many] = rng.integers(0, 3, int(many.sum())) + 100
    writes = rng.random(n) < 0.3
    tbits = 8
    order, same, same_addr = stable_argsort_equal_major((addr << tbits) | thread, tbits)
    at = np.flatnonzero(same)
    cur, prev = order[at + 1], order[at]
    shared = _shared_addresses(same, same_addr, at)
    threads_of = {int(a): len(set(thread[addr == a].tolist())) for a in np.unique(addr)}
    assert shared.tolist() == [threads_of[int(a)] > 1 for a in addr[cur]]
    assert shared.any() == (seed < 2)
    want_cur, want_prev = _no_write_between(addr, writes, cur, prev)
    got_cur, got_prev = _no_write_between(addr, writes, cur, prev, shared)
    assert np.array_equal(got_cur, want_cur) and np.array_equal(got_prev, want_prev)
    if seed < 2:
        assert len(want_cur) < len(cur)  # some shared pairs had another thread's write between


def test_ascending_by_scatter_is_the_argsort_of_distinct_values() -> None:
    """same_thread_reloads' reloads put in execution order: distinct values, no sort."""
    from gpuadvise.rules.repeats import _ascending

    rng = np.random.default_rng(5)
    values = rng.choice(10_000, 3000, replace=False)
    assert np.array_equal(_ascending(values, 10_000), np.argsort(values))
    assert len(_ascending(np.zeros(0, np.int64), 4)) == 0


@pytest.mark.parametrize("span", [3, 5000, 1 << 40])
def test_distinct_consumed_counts_as_np_unique(span: int) -> None:
    """infer_pattern's count of a row length's distinct offsets (issue 31: no sorted copy of
    millions of lanes, by a mask where their range is narrow, else sorted in place): the count
    of np.unique, negative offsets too."""
    from gpuadvise.trace.view import _distinct_consumed

    rng = np.random.default_rng(span % 97)
    for n in (0, 1, 2, 7000):
        a = rng.integers(-span, span, n, dtype=np.int64)
        want = len(np.unique(a))
        assert _distinct_consumed(a.copy()) == want


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_values_of_runs_and_sorted_chunks_are_np_unique(seed: int) -> None:
    """GA303's distinct sectors (issue 31): a run's repeats left out before the sort, and the
    chunks' sorted values joined and merged: np.unique's values either way."""
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 5000):
        # runs of a coalesced request's lanes (8 a sector) and scattered values
        a = rng.integers(0, 1 << 40, n).astype(np.uint64)
        runs = np.repeat(a, rng.integers(1, 9, n))[: 3 * n]
        for x in (a, runs):
            assert np.array_equal(_distinct_values(x), np.unique(x))
        chunks = [_distinct_values(runs[i : i + 700]) for i in range(0, len(runs), 700)]
        joined = np.concatenate(chunks) if chunks else np.zeros(0, np.uint64)
        assert np.array_equal(_distinct_values(joined), np.unique(runs))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_whole_records_of_ordered_lanes_is_the_per_record_count(seed: int) -> None:
    """GA308's records all of whose lanes go (issue 31): from the runs of the lanes' records in
    execution order, as from np.unique's inverse of them in any order."""
    from gpuadvise.rules.repeats import whole_records

    rng = np.random.default_rng(seed)
    recs = np.sort(rng.integers(0, 400, 3000)).astype(np.int32)
    removable = rng.random(3000) < 0.9
    rs, inv = np.unique(recs, return_inverse=True)
    left = np.bincount(inv, weights=(~removable).astype(np.float64), minlength=len(rs))
    want = tuple(int(r) for r in rs[left == 0])
    assert whole_records(recs, removable) == want
    assert len(want) > 0
    perm = rng.permutation(3000)  # out of order: np.unique's path, the same records
    assert whole_records(recs[perm], removable[perm]) == want
    assert whole_records(recs[:1], removable[:1]) == ((int(recs[0]),) if removable[0] else ())


@pytest.mark.parametrize("ctas", [4, 1 << 20])
def test_distinct_thread_keys_are_np_uniques_first(ctas: int) -> None:
    """GA308's accumulated addresses (issue 31): thread keys too wide to pack with their
    positions (CTAs far apart) by two stable sorts, np.unique's values and first positions."""
    from gpuadvise.rules.repeats import distinct_thread_keys, thread_keys
    from gpuadvise.trace.view import Lanes

    rng = np.random.default_rng(ctas % 11)
    n = 6000
    pick = rng.integers(0, 300, n)  # 300 threads: each address stored several times
    cta = rng.integers(0, ctas, 300).astype(np.int32)[pick]
    tid = rng.integers(0, 1024, 300).astype(np.int32)[pick]
    off = (rng.integers(0, 40, n) * 4 + rng.choice([0, 1 << 31], n)).astype(np.int64)
    z = np.zeros(n, np.int32)
    lanes = Lanes(z, z, cta, tid, off, z)
    keys = thread_keys(lanes)
    want, first = np.unique(keys, return_index=True)
    got, got_first = distinct_thread_keys(lanes, keys)
    assert np.array_equal(got, want) and np.array_equal(got_first, first)
    assert len(want) < n  # repeats, whose first position is the least


@pytest.mark.parametrize("ctas", [4, 1 << 20])
def test_repeated_loads_are_the_isin_and_unique_form(ctas: int) -> None:
    """GA308's reloads of accumulated addresses (issue 31): the keys looked up by a binary
    search and their first lanes by distinct_thread_keys, as np.isin and np.unique gave."""
    from gpuadvise.rules.repeats import repeated_loads, thread_keys, whole_records
    from gpuadvise.trace.view import Lanes

    rng = np.random.default_rng(ctas % 13)
    n = 5000
    pick = rng.integers(0, 200, n)
    cta = rng.integers(0, ctas, 200).astype(np.int32)[pick]
    tid = rng.integers(0, 256, 200).astype(np.int32)[pick]
    off = (rng.integers(0, 30, n) * 4).astype(np.int64)
    rec = np.repeat(np.arange(n // 4), 4).astype(np.int32)  # 4 lanes a record, in order
    z = np.zeros(n, np.int32)
    ld = Lanes(rec, z, cta, tid, off, z)
    keys = thread_keys(ld)
    uniq = np.unique(keys[rng.random(n) < 0.5])
    sel = ld.take(np.isin(keys, uniq))
    k = thread_keys(sel)
    _, first = np.unique(k, return_index=True)
    later = np.ones(len(k), bool)
    later[first] = False
    want = (whole_records(sel.rec, later), int(max(len(sel) - len(np.unique(k)), 0)))
    assert repeated_loads(ld, uniq) == want
    assert want[1] > 0
