"""The L1's capacity (gpuadvise.model.l1): re-reads within the L1's lines stay hits, those beyond
go back to the L2. Hand-derived cases: one CTA reading a line, then k other lines, then the line
again (a window of k lines), against the L1's lines."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.l1 import (
    capacity_miss_shares,
    capacity_misses,
    misses_in_flight,
    misses_in_flight_by_record,
    range_min,
    written_before_read,
)


def _reread(k: int, capacity: float, concurrency: float = 1.0, weight: float = 1.0):
    """One CTA: record 0 reads sector 7, records 1..k read a line each (other sectors), record
    k + 1 reads sector 7 again."""
    n = k + 2
    group = np.zeros(n, np.int64)
    lines = np.ones(n)
    w = np.full(n, weight)
    acc_rec = np.array([0, *range(1, k + 1), n - 1])
    acc_key = np.array([7, *range(100, 100 + k), 7])
    return capacity_misses(group, lines, w, acc_rec, acc_key, capacity, np.array([concurrency]))


def test_range_min() -> None:
    v = np.array([5, 3, 8, 1, 9, 2, 7])
    lo = np.array([0, 1, 2, 4, 0, 6])
    hi = np.array([0, 3, 4, 6, 6, 6])
    assert range_min(v, lo, hi).tolist() == [5, 1, 1, 2, 1, 7]
    rng = np.random.default_rng(0)
    v = rng.integers(0, 1000, 300)
    lo = rng.integers(0, 300, 200)
    hi = np.minimum(lo + rng.integers(0, 300, 200), 299)
    assert range_min(v, lo, hi).tolist() == [
        int(v[a : b + 1].min()) for a, b in zip(lo, hi, strict=True)
    ]
    # every level of a longer table, ranges of one element and of all of it, in int32
    v = rng.random(5000)
    lo = rng.integers(0, 5000, 3000).astype(np.int32)
    hi = np.minimum(lo + rng.integers(0, 1 << rng.integers(0, 13, 3000)), 4999).astype(np.int32)
    lo[:2], hi[:2] = (0, 7), (4999, 7)
    assert range_min(v, lo, hi).tolist() == [
        float(v[a : b + 1].min()) for a, b in zip(lo, hi, strict=True)
    ]


def test_reread_within_the_l1_is_a_hit() -> None:
    # 256 KB of L1 = 2048 lines; 1000 lines between the two reads
    r = _reread(1000, 2048)
    assert r.window_lines[-1] == 1000
    assert not r.miss.any()


def test_reread_beyond_the_l1_misses() -> None:
    # 3000 lines in between: past the L1's 2048, a share 1 - 2048 / 3000 of such re-reads is the
    # L2's; 100,000 lines: nearly all
    r = _reread(3000, 2048)
    assert r.window_lines[-1] == 3000
    assert r.miss[:-1].tolist() == [0.0] * 3001
    assert r.miss[-1] == pytest.approx(1 - 2048 / 3000)
    assert _reread(100_000, 2048).miss[-1] == pytest.approx(0.97952)


def test_the_sms_other_warps_share_the_l1() -> None:
    # 1000 lines of this CTA's warps, the SM's resident warps 4x the CTA's: 4000 lines
    r = _reread(1000, 2048, concurrency=4.0)
    assert r.window_lines[-1] == 4000
    assert r.miss[-1] == pytest.approx(0.488)


def test_a_shared_loop_multiplier_is_one_iteration() -> None:
    # every record of the window stands for 50 executions (a sampled outer loop): the two
    # reads are one iteration of it apart, 1000 lines, not 50,000
    r = _reread(1000, 2048, weight=50.0)
    assert r.window_lines[-1] == pytest.approx(1000)
    assert not r.miss[-1]


def test_a_sampled_inner_loop_counts_its_skipped_iterations() -> None:
    # the reads at weight 1 around an inner loop whose 8 kept iterations stand for 400 lines
    # each: 3200 lines in between
    group = np.zeros(10, np.int64)
    lines = np.ones(10)
    w = np.array([1.0, *[400.0] * 8, 1.0])
    acc_rec = np.array([0, *range(1, 9), 9])
    acc_key = np.array([7, *range(100, 108), 7])
    r = capacity_misses(group, lines, w, acc_rec, acc_key, 2048, np.array([1.0]))
    assert r.window_lines[-1] == pytest.approx(3200)
    assert r.miss[-1] == pytest.approx(0.36)


def test_the_ctas_distinct_lines_cap_the_window() -> None:
    # a stencil: 3000 loads between the two reads, but the CTA only ever touches 40 lines
    group = np.zeros(3002, np.int64)
    lines = np.ones(3002)
    w = np.ones(3002)
    acc_rec = np.arange(3002)
    acc_key = np.array([7, *(100 + np.arange(3000) % 39), 7])
    r = capacity_misses(
        group, lines, w, acc_rec, acc_key, 2048, np.array([8.0]), group_lines=np.array([40.0])
    )
    assert r.window_lines[-1] == 320  # 40 lines x 8 (the SM's warps over the CTA's)
    assert not r.miss.any()


def test_first_reads_and_other_ctas() -> None:
    # two CTAs read sector 7 once each: no re-read (the L2 serves each CTA's first read)
    group = np.array([0, 1])
    r = capacity_misses(
        group, np.ones(2), np.ones(2), np.array([0, 1]), np.array([7, 7]), 1, np.ones(2)
    )
    assert not r.miss.any()
    assert np.isinf(r.window_lines).all()


def test_the_packed_sort_orders_as_the_lexsort() -> None:
    """Accesses by record (the caller's distinct (record, sector) pairs), interleaved CTAs,
    weights that vary and that do not: the packed sort (and the one weight) give what the
    lexsort over (CTA, sector, execution position) and the range minimum give."""
    from gpuadvise.model import l1

    rng = np.random.default_rng(3)
    for constant in (True, False):
        n_rec = 400
        group = rng.integers(0, 5, n_rec)
        lines = rng.integers(0, 3, n_rec).astype(float)
        w = np.ones(n_rec) if constant else rng.integers(1, 4, n_rec).astype(float)
        rec = np.sort(rng.integers(0, n_rec, 3000))
        key = rng.integers(0, 40, 3000)
        pair = np.unique(np.stack([rec, key]), axis=1)
        conc = rng.uniform(1, 3, 5)
        got = capacity_misses(group, lines, w, pair[0], pair[1], 20.0, conc)
        order = np.argsort(group, kind="stable")
        pos = np.empty(n_rec, np.int64)
        pos[order] = np.arange(n_rec)
        by, same = l1._by_cta_sector(group[pair[0]], pair[1], pair[0], pos)
        g = group[pair[0]]
        ref = np.lexsort((pos[pair[0]], pair[1], g))
        assert by.tolist() == ref.tolist()
        assert (
            same.tolist()
            == ((g[ref][1:] == g[ref][:-1]) & (pair[1][ref][1:] == pair[1][ref][:-1])).tolist()
        )
        # shuffled accesses take the lexsort: the same answer
        perm = rng.permutation(pair.shape[1])
        again = capacity_misses(group, lines, w, pair[0][perm], pair[1][perm], 20.0, conc)
        assert np.array_equal(again.miss, got.miss[perm])
        assert np.array_equal(again.window_lines, got.window_lines[perm])


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("capped", [True, False])
def test_the_miss_shares_alone_are_the_misses(constant: bool, capped: bool) -> None:
    """capacity_miss_shares (no windows: the L1 refetches') gives capacity_misses' miss, bit for
    bit: random CTAs, lines, weights (one, or a sampled loop's), windows capped or not, and
    no access at all."""
    rng = np.random.default_rng(11)
    n_rec = 500
    group = rng.integers(0, 6, n_rec)
    lines = rng.integers(0, 4, n_rec).astype(float)
    w = np.ones(n_rec) if constant else rng.integers(1, 5, n_rec).astype(float)
    pair = np.unique(
        np.stack([np.sort(rng.integers(0, n_rec, 4000)), rng.integers(0, 60, 4000)]), axis=1
    )
    conc = rng.uniform(1, 4, 6)
    cap = rng.uniform(5, 40, 6) if capped else None
    for capacity in (3.0, 25.0, 1e9):
        want = capacity_misses(group, lines, w, pair[0], pair[1], capacity, conc, cap).miss
        got = capacity_miss_shares(group, lines, w, pair[0], pair[1], capacity, conc, cap)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert got.any() if capacity == 3.0 else capacity < 1e9 or not got.any()
    assert len(capacity_miss_shares(group, lines, w, pair[0][:0], pair[1][:0], 3.0, conc)) == 0


def test_sector_keys_near_the_int64_limit_order_as_small_ones() -> None:
    """The packed key is built in place (the CTA's span, then the key, then less its least):
    keys near the int64 limit, where the intermediate sum wraps, give the misses and windows
    that the same keys shifted down to 0 give (issue 31's in-place packing)."""
    rng = np.random.default_rng(7)
    n_rec = 300
    group = rng.integers(0, 6, n_rec)
    lines = rng.integers(0, 3, n_rec).astype(float)
    w = rng.integers(1, 4, n_rec).astype(float)
    rec = np.sort(rng.integers(0, n_rec, 2000))
    key = rng.integers(0, 50, 2000)
    pair = np.unique(np.stack([rec, key]), axis=1)
    conc = rng.uniform(1, 3, 6)
    small = capacity_misses(group, lines, w, pair[0], pair[1], 15.0, conc)
    high = pair[1] + np.int64(2**63 - 60)  # the largest key is near 2**63 - 10
    big = capacity_misses(group, lines, w, pair[0], high, 15.0, conc)
    assert small.miss.any()
    assert np.array_equal(big.miss, small.miss)
    assert np.array_equal(big.window_lines, small.window_lines)


# ---------------------------------------------------------------------------------------------
# A CTA's reload of what it stored (written_before_read): the L1 keeps the sectors a store wrote
# in full (an H200, s10-launch's probe: a chain of reloads of 64 lines just stored, 45.5 cycles a
# load, the L1 hit's; the L2's 297)


def _sector(*accesses: tuple[int, bool, int, int], key: int = 5) -> np.ndarray:
    """One CTA's accesses of one sector, in order: (record, is_load, offset, width)."""
    rec = np.array([a[0] for a in accesses])
    is_load = np.array([a[1] for a in accesses])
    off = np.array([a[2] for a in accesses])
    width = np.array([a[3] for a in accesses])
    return written_before_read(np.full(len(rec), key), rec, is_load, off, width)


def test_a_sector_stored_in_full_then_loaded_is_the_l1s() -> None:
    # eight lanes store the sector's eight words (record 0), a lane loads one (record 1)
    stores = [(0, False, 4 * k, 4) for k in range(8)]
    assert _sector(*stores, (1, True, 12, 4)).tolist() == [True] * 9
    # as two stores, the even words and then the odd ones (a sector filled by two instructions)
    two = [(0, False, 8 * k, 4) for k in range(4)] + [(1, False, 8 * k + 4, 4) for k in range(4)]
    assert _sector(*two, (2, True, 0, 4)).all()
    # one 16-byte store and two 8-byte ones
    assert _sector((0, False, 0, 16), (0, False, 16, 8), (1, False, 24, 8), (2, True, 0, 4)).all()


def test_a_sector_stored_in_part_or_loaded_first_is_not() -> None:
    # half the sector's words stored: the L1 has not got the other half (not measured: a miss)
    half = [(0, False, 8 * k, 4) for k in range(4)]
    assert not _sector(*half, (1, True, 0, 4)).any()
    # the same word stored twice is 4 bytes, not 8
    assert not _sector(*[(r, False, 0, 4) for r in range(8)], (9, True, 0, 4)).any()
    # loaded first (the L2's), stored after: nothing of it; the stores after the first load
    # do not count for it
    full = [(1, False, 4 * k, 4) for k in range(8)]
    assert not _sector((0, True, 0, 4), *full, (2, True, 0, 4)).any()
    # stored in full and never loaded: no load to serve, the stores are not marked
    assert not _sector(*full).any()


def test_each_cta_and_sector_on_its_own() -> None:
    # CTA-sector key 1 stored in full by record 0, loaded by record 2; key 2 loaded by record 2
    # without a store: only key 1's accesses
    key = np.array([1] * 8 + [1, 2])
    rec = np.array([0] * 8 + [2, 2])
    is_load = np.array([False] * 8 + [True, True])
    off = np.array([4 * k for k in range(8)] + [0, 0])
    width = np.full(10, 4)
    assert written_before_read(key, rec, is_load, off, width).tolist() == [True] * 9 + [False]


def _written_before_read_by_hand(key, rec, is_load, off, width, sector=32):
    """written_before_read one sector at a time, byte by byte (the module doc's definition)."""
    out = np.zeros(len(key), bool)
    for k in set(key.tolist()):
        mine = np.flatnonzero(key == k)
        loads = [i for i in mine if is_load[i]]
        if not loads:
            continue
        first = min(int(rec[i]) for i in loads)
        stores = [i for i in mine if not is_load[i] and int(rec[i]) < first]
        cells = {b for i in stores for b in range(off[i], min(off[i] + width[i], sector))}
        if len(cells) >= sector:
            out[loads] = True
            out[stores] = True
    return out


def test_written_before_read_any_record_type() -> None:
    # records as int32 (a view's lanes), int64, uint32 and int16: the same answer, the one by
    # hand (the first load per sector is found in the records' own type where it can be:
    # ufunc.at casting each value is 40x slower)
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = 400
        key = rng.integers(0, 12, n)
        rec = np.sort(rng.integers(0, 120, n))
        is_load = rng.random(n) < 0.3
        off = 4 * rng.integers(0, 8, n)
        width = rng.choice([4, 8, 16], n)
        want = _written_before_read_by_hand(key, rec, is_load, off, width)
        for dt in (np.int32, np.int64, np.uint32, np.int16):
            got = written_before_read(key, rec.astype(dt), is_load, off, width)
            assert got.tolist() == want.tolist(), dt
        # the key the caller's temporary, its sectors numbered in it (issue 31): the same
        for k in (key, np.sort(key)):
            want = _written_before_read_by_hand(k, rec, is_load, off, width)
            got = written_before_read(k.copy(), rec, is_load, off, width, overwrite=True)
            assert got.tolist() == want.tolist()


def test_bytes_written_by_masks_as_byte_by_byte() -> None:
    # the stores' bytes or'ed as bit masks per sector (sectors under 64 bytes) count what a row
    # per byte counts (the path of wider sectors), with overlaps, repeats, empty and edge stores
    from gpuadvise.arrays import distinct
    from gpuadvise.model.l1 import _bytes_written

    rng = np.random.default_rng(3)
    for sector in (32, 48, 63):
        g = rng.integers(0, 40, 3000)
        o = rng.integers(0, sector + 1, 3000)
        w = np.minimum(rng.choice([0, 1, 2, 4, 8, 16, 32], 3000), sector - o)
        span = sector + 1
        packed = distinct((g * span + o) * span + w)
        g, o, w = packed // (span * span), packed // span % span, packed % span
        bits = _bytes_written(g, o, w, 45, sector)
        rows = np.zeros(45, np.int64)
        cells: dict[int, set[int]] = {}
        for gi, oi, wi in zip(g.tolist(), o.tolist(), w.tolist(), strict=True):
            cells.setdefault(gi, set()).update(range(oi, oi + wi))
        for gi, c in cells.items():
            rows[gi] = len(c)
        assert bits.tolist() == rows.tolist()
        assert (bits == sector).any() or sector > 32
    # a store ahead of a load, its sector of 64 bytes (the row-per-byte path) and of 32
    for sector in (32, 64):
        stores = [(0, False, 4 * k, 4) for k in range(sector // 4)]
        rec = np.array([a[0] for a in stores] + [1])
        is_load = np.array([False] * len(stores) + [True])
        off = np.array([a[2] for a in stores] + [0])
        width = np.array([4] * len(stores) + [4])
        key = np.zeros(len(rec), np.int64)
        assert written_before_read(key, rec, is_load, off, width, sector).all()


def _written_before_read_by_sets(
    key: np.ndarray, rec: np.ndarray, is_load: np.ndarray, off: np.ndarray, width: np.ndarray,
    sector_bytes: int,
) -> list[bool]:  # fmt: skip
    """written_before_read spelled with a set of bytes per key (the reference)."""
    first: dict[int, int] = {}
    for k, r, ld in zip(key.tolist(), rec.tolist(), is_load.tolist(), strict=True):
        if ld:
            first[k] = min(first.get(k, r), r)
    written: dict[int, set[int]] = {}
    before = []
    for k, r, ld, o, w in zip(
        key.tolist(), rec.tolist(), is_load.tolist(), off.tolist(), width.tolist(), strict=True
    ):
        b = not ld and k in first and r < first[k]
        before.append(b)
        if b:
            o = min(max(o, 0), sector_bytes)
            written.setdefault(k, set()).update(range(o, min(o + max(w, 0), sector_bytes)))
    full = {k for k, s in written.items() if len(s) >= sector_bytes}
    return [
        k in full and (ld or b)
        for k, ld, b in zip(key.tolist(), is_load.tolist(), before, strict=True)
    ]


@pytest.mark.parametrize("sector_bytes", [32, 8, 62, 64])
@pytest.mark.parametrize("seed", range(6))
def test_written_before_read_is_the_bytes_sets(sector_bytes: int, seed: int) -> None:
    # random CTA-sector keys in runs (a request's lanes share a sector), stores and loads of
    # overlapping, out-of-sector and empty byte ranges, the keys numbered from their runs' first
    # accesses: the bit masks (sectors to 63 bytes) and the byte count (wider) give the sets'
    # answer
    rng = np.random.default_rng(seed)
    n = 3000
    key = np.repeat(rng.integers(0, 40, n), rng.integers(1, 9, n))[:n]
    rec = np.sort(rng.integers(0, 400, n))
    is_load = rng.random(n) < 0.3
    step = max(sector_bytes // 8, 1)
    off = rng.integers(-1, 9, n) * step
    width = rng.choice([0, step, 2 * step, sector_bytes, sector_bytes + 4], n)
    got = written_before_read(key, rec, is_load, off, width, sector_bytes)
    want = _written_before_read_by_sets(key, rec, is_load, off, width, sector_bytes)
    assert got.tolist() == want
    assert any(want)  # (the case exercises full sectors)


# ---------------------------------------------------------------------------------------------
# A miss in flight (misses_in_flight): the CTA's warps that load a sector at the same step of
# their own work as the access that brings it wait for its fill; later loads are the L1's hits


def test_the_copies_at_the_same_step_wait_for_the_miss() -> None:
    # one CTA, key 0 (a sector): warp 0's record at step 3 brings it (2 lanes), warp 1's record
    # at step 3 (same instruction 9) finds the miss in flight, warp 2's at step 3 too; warp 1
    # re-reads it at step 4 (after the fill: a hit), warp 3 at step 3 by another instruction
    # (not the same work: a hit); key 1, brought by warp 1 at step 4, alone
    group = np.array([0, 0, 0, 0, 0, 0, 1])
    step = np.array([3, 3, 3, 3, 4, 3, 4])
    inst = np.array([9, 9, 9, 9, 9, 8, 9])
    got = misses_in_flight(group, step, inst)
    assert got.tolist() == [True, True, True, True, False, False, True]
    # the keys' first accesses given (the caller's): the same
    assert np.array_equal(misses_in_flight(group, step, inst, np.array([0, 6])), got)
    # the key's first access in the trace's order is the one that brings it: reversed, key 0's
    # is warp 3's (instruction 8), which no other access shares
    assert misses_in_flight(group[::-1], step[::-1], inst[::-1]).tolist() == [
        True, True, False, False, False, False, False,
    ]  # fmt: skip
    assert misses_in_flight(np.zeros(0), np.zeros(0), np.zeros(0)).tolist() == []


@pytest.mark.parametrize("seed", range(3))
def test_misses_in_flight_by_record_is_the_per_access_test(seed: int) -> None:
    # the accesses given by their records (the step and instruction a record's): the same as
    # each access's own step and instruction, and as the definition, access by access
    rng = np.random.default_rng(seed)
    n_rec, n = 40, 400
    rec_step = rng.integers(0, 5, n_rec)
    rec_inst = rng.integers(0, 7, n_rec)
    rec = np.sort(rng.integers(0, n_rec, n)).astype(np.int32)
    group = rng.integers(0, 30, n)
    got = misses_in_flight_by_record(group, rec, rec_step, rec_inst)
    assert np.array_equal(got, misses_in_flight(group, rec_step[rec], rec_inst[rec]))
    first = {int(g): i for i, g in reversed(list(enumerate(group)))}
    want = [
        rec_step[r] == rec_step[rec[first[int(g)]]] and rec_inst[r] == rec_inst[rec[first[int(g)]]]
        for r, g in zip(rec, group, strict=True)
    ]
    assert got.tolist() == want
    keys = np.zeros(int(group.max()) + 1, np.int64)
    for g, i in first.items():
        keys[g] = i
    assert np.array_equal(misses_in_flight_by_record(group, rec, rec_step, rec_inst, keys), got)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_misses_in_flight_by_record_in_chunks_is_the_whole_comparison(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the accesses compared a few at a time (chunks of 7 across 400, the last one short), with
    # the keys in their own integer type (or made integers): the one comparison of them all
    from gpuadvise.model import l1

    rng = np.random.default_rng(5)
    n_rec, n = 40, 400
    rec_step = rng.integers(0, 5, n_rec)
    rec_inst = rng.integers(0, 7, n_rec)
    rec = np.sort(rng.integers(0, n_rec, n)).astype(np.int32)
    group = rng.integers(0, 30, n).astype(dtype)
    whole = misses_in_flight_by_record(group, rec, rec_step, rec_inst)
    g = group.astype(np.int64)
    first = {int(k): i for i, k in reversed(list(enumerate(g)))}
    key = rec_step * 7 + rec_inst
    want = key[rec] == np.array([key[rec[first[int(k)]]] for k in g])
    assert np.array_equal(whole, want)
    monkeypatch.setattr(l1, "_CHUNK", 7)
    assert np.array_equal(misses_in_flight_by_record(group, rec, rec_step, rec_inst), want)
    keys = np.zeros(int(g.max()) + 1, np.int64)
    for k, i in first.items():
        keys[k] = i
    assert np.array_equal(misses_in_flight_by_record(group, rec, rec_step, rec_inst, keys), want)


def test_a_warp_alone_waits_for_its_own_misses_only() -> None:
    # one warp: a record a step, key 0 brought at step 0 and re-read at steps 1..7 (the same
    # sector, later iterations: after the fill), key 1 brought at step 8
    group = np.array([0] * 8 + [1])
    step = np.arange(9)
    got = misses_in_flight(group, step, np.zeros(9))
    assert got.tolist() == [True] + [False] * 7 + [True]


def test_the_packed_sort_in_slices_orders_as_the_lexsort(monkeypatch: pytest.MonkeyPatch) -> None:
    """The packed sort's index added and remainder taken a slice at a time (slices of 7 here,
    of a million in use): the lexsort's order and the same equal neighbours, the order in
    int32, and the same misses as in one slice."""
    from gpuadvise.model import l1

    rng = np.random.default_rng(8)
    n_rec = 300
    group = rng.integers(0, 4, n_rec)
    rec = np.sort(rng.integers(0, n_rec, 2000))
    key = rng.integers(0, 30, 2000)
    pair = np.unique(np.stack([rec, key]), axis=1)
    order = np.argsort(group, kind="stable")
    pos = np.empty(n_rec, np.int64)
    pos[order] = np.arange(n_rec)
    lines = rng.integers(0, 3, n_rec).astype(float)
    conc = rng.uniform(1, 3, 4)
    whole = capacity_misses(group, lines, np.ones(n_rec), pair[0], pair[1], 15.0, conc)
    monkeypatch.setattr(l1, "_CHUNK", 7)
    by, same = l1._by_cta_sector(group[pair[0]], pair[1], pair[0], pos)
    g = group[pair[0]]
    ref = np.lexsort((pos[pair[0]], pair[1], g))
    assert by.dtype == np.int32 and by.tolist() == ref.tolist()
    assert (
        same.tolist()
        == ((g[ref][1:] == g[ref][:-1]) & (pair[1][ref][1:] == pair[1][ref][:-1])).tolist()
    )
    sliced = capacity_misses(group, lines, np.ones(n_rec), pair[0], pair[1], 15.0, conc)
    assert np.array_equal(sliced.miss, whole.miss)
    assert np.array_equal(sliced.window_lines, whole.window_lines)


@pytest.mark.parametrize("capped", [True, False])
@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_the_shares_of_int32_accesses_are_those_of_int64(
    capped: bool, constant: bool, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The accesses' records and keys in int32 (the L1 refetches' pairs where they fit, issue 31)
    give the shares and windows of the same integers in int64, bit for bit, in the packed sort's
    order and in the lexsort's (shuffled accesses); and so do the re-reads' lines, caps and
    concurrency taken a slice at a time (slices of 7 here, of a million in use)."""
    from gpuadvise.model import l1

    rng = np.random.default_rng(5)
    n_rec = 700
    group = rng.integers(0, 9, n_rec)
    lines = rng.integers(0, 4, n_rec).astype(float)
    w = np.ones(n_rec) if constant else rng.integers(1, 4, n_rec).astype(float)
    pair = np.unique(
        np.stack([np.sort(rng.integers(0, n_rec, 5000)), rng.integers(0, 90, 5000)]), axis=1
    )
    conc = rng.uniform(1, 4, 9)
    cap = rng.uniform(5, 40, 9) if capped else None
    narrow = pair.astype(np.int32)
    perms = (np.arange(pair.shape[1]), rng.permutation(pair.shape[1]))
    wants = [
        capacity_misses(group, lines, w, pair[0][p], pair[1][p], capacity, conc, cap)
        for p in perms
        for capacity in (3.0, 25.0)
    ]
    monkeypatch.setattr(l1, "_CHUNK", chunk)
    got_all = [(p, capacity) for p in perms for capacity in (3.0, 25.0)]
    for (p, capacity), want in zip(got_all, wants, strict=True):
        got = capacity_misses(group, lines, w, narrow[0][p], narrow[1][p], capacity, conc, cap)
        assert np.array_equal(got.miss, want.miss)
        assert np.array_equal(got.window_lines, want.window_lines)
        shares = capacity_miss_shares(
            group, lines, w, narrow[0][p], narrow[1][p], capacity, conc, cap
        )
        assert np.array_equal(shares, want.miss)
        assert want.miss.any()
