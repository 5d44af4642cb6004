"""gpuadvise.arrays: the sort-based set operations equal numpy's."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.arrays import (
    count_distinct_sorting,
    distinct,
    distinct_rows,
    equal_rows,
    lexsort_pair,
    member,
    most_common,
)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.int16, np.uint8])
@pytest.mark.parametrize("wide", [False, True])
def test_distinct_rows_is_numpys_unique_by_columns(dtype: type, wide: bool) -> None:
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    hi = int(info.max) if wide else min(int(info.max), 40)
    lo = int(info.min) if wide else max(int(info.min), -40)
    for k in (1, 2, 3):
        for n in (1, 2, 17, 500):
            rows = rng.integers(lo, hi, (k, n), dtype=dtype, endpoint=True)
            assert np.array_equal(distinct_rows(rows), np.unique(rows, axis=1))
            got, counts = distinct_rows(rows, return_counts=True)
            want, want_counts = np.unique(rows, axis=1, return_counts=True)
            assert got.dtype == want.dtype
            assert np.array_equal(got, want) and np.array_equal(counts, want_counts)


@pytest.mark.parametrize(
    "dtypes",
    [(np.int64, np.int64), (np.int32, np.int64), (np.uint8, np.uint64), (np.int16, np.uint32)],
)
@pytest.mark.parametrize("wide", [False, True])
def test_distinct_rows_of_a_list_of_rows_as_of_their_stack(dtypes: tuple, wide: bool) -> None:
    """A list of rows (no stacked copy made when they pack) gives what their stack gives:
    values, dtype and counts."""
    rng = np.random.default_rng(3)
    for k in (1, 2, 3):
        for n in (1, 7, 500):
            rows = []
            for i in range(k):
                dt = np.dtype(dtypes[i % 2])
                hi = np.iinfo(dt).max if wide else 5
                lo = np.iinfo(dt).min if wide else 0
                rows.append(rng.integers(lo, hi, n, dtype=dt, endpoint=True))
            want, want_counts = distinct_rows(np.stack(rows), return_counts=True)
            got, counts = distinct_rows(rows, return_counts=True)
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert np.array_equal(counts, want_counts)
            assert np.array_equal(distinct_rows(tuple(rows)), want)
    assert distinct_rows([np.zeros(0, np.int64), np.zeros(0, np.int64)]).shape == (2, 0)


@pytest.mark.parametrize("wide", [False, True])
def test_distinct_rows_releasing_its_rows_gives_the_same(wide: bool) -> None:
    """``release=True``: the list of rows is emptied (the rows not held through the sort when
    they pack; kept to the end when they do not), the result the same as without."""
    rng = np.random.default_rng(11)
    hi = 2**40 if wide else 9
    for n in (1, 7, 500):
        rows = [rng.integers(-hi, hi, n, dtype=np.int64), rng.integers(0, hi, n, dtype=np.int64)]
        want, want_counts = distinct_rows(rows, return_counts=True)
        given = list(rows)
        got, counts = distinct_rows(given, return_counts=True, release=True)
        assert given == []
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert np.array_equal(counts, want_counts)
        given = list(rows)
        assert np.array_equal(distinct_rows(given, release=True), want) and given == []
    assert len(rows) == 2  # without release, the caller's list is left alone


def test_distinct_rows_of_nothing() -> None:
    rows = np.zeros((2, 0), np.int64)
    assert distinct_rows(rows).shape == (2, 0)


def test_distinct_and_member() -> None:
    a = np.array([5, -3, 5, 9, -3, 0], np.int64)
    d = distinct(a)
    assert np.array_equal(d, np.unique(a))
    assert np.array_equal(member(np.array([9, 1, -3]), d), [True, False, True])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16, np.float64])
def test_distinct_of_non_decreasing_values_sorts_nothing(dtype: type, monkeypatch) -> None:
    """A non-decreasing array (a view's lanes' records) gives np.unique's values without a sort,
    in a new array; any other is sorted first."""
    import gpuadvise.arrays as arrays

    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 3, 1000):
        up = np.sort(rng.integers(0, 50, n).astype(dtype))
        want = np.unique(up)
        if n > 1:
            with monkeypatch.context() as m:
                m.setattr(arrays.np, "sort", lambda *a, **k: pytest.fail("sorted"))
                got = arrays.distinct(up)
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert not np.shares_memory(got, up)
        got = distinct(up)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        down = up[::-1].copy()
        assert np.array_equal(distinct(down), want)
        assert np.array_equal(distinct(down.reshape(-1, 1)), want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64])
def test_distinct_of_values_spanning_at_most_their_count_marks_them(
    dtype: type, monkeypatch
) -> None:
    """Unordered values spanning no more than their count (a view's (instruction, buffer)
    pairs) are marked, not sorted: np.unique's values and dtype, at either end of the type's
    range; wider spans (and uint64 past int64) are sorted, with the same result."""
    import gpuadvise.arrays as arrays

    rng = np.random.default_rng(23)
    info = np.iinfo(dtype)
    for n, span in ((2, 1), (50, 50), (1000, 300), (3000, 3000)):
        if span > int(info.max) - int(info.min) + 1:
            continue
        for lo in (int(info.min), int(info.max) - span + 1):
            a = rng.integers(lo, lo + span - 1, n, dtype=dtype, endpoint=True)
            a[:2] = [lo + span - 1, lo]  # (unordered, the whole span)
            want = np.unique(a)
            with monkeypatch.context() as m:
                m.setattr(arrays, "_POSITIONS_CHUNK", 7)  # (marked a chunk at a time)
                if lo + span - 1 <= np.iinfo(np.intp).max:  # (past it: sorted)
                    m.setattr(arrays, "sort_in_place", lambda *x, **k: pytest.fail("sorted"))
                got = arrays.distinct(a)
            assert got.dtype == want.dtype and np.array_equal(got, want)
    wide = rng.integers(0, min(int(info.max), 10**6), 200, dtype=dtype)
    wide[:2] = [int(wide.max()), 0]
    got = arrays.distinct(wide)
    assert got.dtype == wide.dtype and np.array_equal(got, np.unique(wide))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
def test_first_by_runs_overwriting_its_temporary_is_numpys(dtype: type) -> None:
    """first_by_runs and distinct_first given the caller's temporary (``overwrite``): np.unique's
    values and first positions, runs of equal neighbours or not, wide values or narrow."""
    from gpuadvise.arrays import distinct_first, first_by_runs

    rng = np.random.default_rng(17)
    for runs in (1, 8):
        for hi in (70000, 2**40, 2**62):
            if hi > np.iinfo(dtype).max:
                continue
            a = np.repeat(rng.integers(0, hi, 5000, dtype=dtype), runs)
            want, first = np.unique(a, return_index=True)
            for f in (first_by_runs, distinct_first):
                got, got_first = f(a.copy(), overwrite=True)
                assert got.dtype == want.dtype and np.array_equal(got, want)
                assert np.array_equal(got_first, first)
                assert np.array_equal(f(a)[1], first)


def test_distinct_records_counts_repeats_exactly() -> None:
    from gpuadvise.trace.access import distinct_records, empty_records

    rng = np.random.default_rng(5)
    base = empty_records(50)
    base["addr"] = rng.integers(0, 1 << 12, (50, 32)).astype(np.uint64)
    base["mask"] = rng.integers(0, 1 << 32, 50, dtype=np.uint64).astype(np.uint32)
    base["inst"] = rng.integers(0, 4, 50)
    pick = rng.integers(0, 50, 400)
    records = base[pick]
    records["cta"] = np.arange(400)  # not a field of the key: CTAs repeat each other
    uniq, counts = distinct_records(records)
    assert len(uniq) == len(np.unique(pick)) and counts.sum() == 400
    firsts = sorted(int(np.flatnonzero(pick == p)[0]) for p in np.unique(pick))
    assert np.array_equal(uniq["cta"], firsts)  # first occurrences, in trace order
    for u, c in zip(uniq, counts, strict=True):
        same = (records["addr"] == u["addr"]).all(axis=1) & (records["mask"] == u["mask"])
        assert int((same & (records["inst"] == u["inst"])).sum()) == c


def test_distinct_records_on_a_hash_collision_keeps_every_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuadvise.trace import access

    records = access.empty_records(3)
    records["addr"][:, 0] = [0, 4, 0]
    monkeypatch.setattr(access, "_LANE_MIX", np.zeros(32, np.uint64))  # every address collides
    uniq, counts = access.distinct_records(records)
    assert len(uniq) == 3 and counts.tolist() == [1, 1, 1]


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.int16, np.uint8])
@pytest.mark.parametrize("wide", [False, True])
def test_distinct_inverse_is_numpys_unique(dtype: type, wide: bool) -> None:
    from gpuadvise.arrays import distinct_inverse

    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    lo, hi = (int(info.min), int(info.max)) if wide else (max(int(info.min), -30), 30)
    for n in (1, 2, 50, 3000):
        a = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
        want, want_first, want_inv = np.unique(a, return_index=True, return_inverse=True)
        got, first, inv = distinct_inverse(a, return_index=True)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert np.array_equal(first, want_first) and np.array_equal(inv, want_inv.reshape(-1))
        got, inv = distinct_inverse(a)
        assert np.array_equal(got, want) and np.array_equal(inv, want_inv.reshape(-1))


def test_stable_argsort_and_the_wide_inverse_as_numpy() -> None:
    """stable_argsort is numpy's stable argsort (packed or not); distinct_inverse on values too
    wide to pack (its argsort fallback) is np.unique's values, first positions and inverse."""
    import numpy as np

    from gpuadvise.arrays import distinct_inverse, stable_argsort

    rng = np.random.default_rng(5)
    for dt in (np.int64, np.int32, np.uint8, np.uint64):
        for hi in (3, 1000, 1 << 61):
            top = min(hi, int(np.iinfo(dt).max))
            a = rng.integers(0, top, 20000, dtype=np.int64).astype(dt)
            assert np.array_equal(stable_argsort(a), np.argsort(a, kind="stable"))
            for ri in (True, False):
                got = distinct_inverse(a, return_index=ri)
                ref = np.unique(a, return_index=ri, return_inverse=True)
                for x, y in zip(ref, got, strict=True):
                    assert np.array_equal(x.reshape(-1), y)
    assert stable_argsort(np.zeros(0, np.int64)).tolist() == []


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint8])
@pytest.mark.parametrize("wide", [False, True])
def test_distinct_first_is_numpys_unique_with_first_positions(dtype: type, wide: bool) -> None:
    """distinct_first (packed or, too wide to pack, by distinct_inverse) is np.unique's values
    and first positions, runs of equal values (a record's lanes) included."""
    from gpuadvise.arrays import distinct_first

    rng = np.random.default_rng(13)
    info = np.iinfo(dtype)
    lo, hi = (int(info.min), int(info.max)) if wide else (max(int(info.min), -30), 30)
    for n in (1, 2, 50, 3000):
        a = np.repeat(rng.integers(lo, hi, n, dtype=dtype, endpoint=True), rng.integers(1, 4, n))
        want, want_first = np.unique(a, return_index=True)
        got, first = distinct_first(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert np.array_equal(first, want_first)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_count_distinct_sorting_counts_and_sorts_in_place(dtype: type) -> None:
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 5, 1000):
        a = rng.integers(0, 50, n).astype(dtype)
        want = len(np.unique(a))
        assert count_distinct_sorting(a) == want
        if n >= 2:  # the caller's array itself is sorted (no copy made)
            assert (a[1:] >= a[:-1]).all()


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether labels ``a`` and ``b`` group the same positions (a bijection between them)."""
    pairs = np.unique(np.stack([a, b]), axis=1)
    return len(pairs[0]) == len(np.unique(a)) == len(np.unique(b))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.int8])
@pytest.mark.parametrize("wide", [False, True])
def test_equal_rows_groups_as_numpys_unique_by_rows(dtype: type, wide: bool) -> None:
    """Equal rows share a label and different rows do not: the partition np.unique(axis=0)'s
    inverse makes, labels numbered from 0 (rows repeated, wide values, negatives, -1 and 0
    whose bytes differ in every position)."""
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    hi = int(info.max) if wide else min(int(info.max), 2)
    lo = int(info.min) if wide else max(int(info.min), -2)
    for k in (1, 3, 30):
        for n in (1, 2, 40, 600):
            distinct_ones = rng.integers(lo, hi, (max(1, n // 5), k), dtype=dtype, endpoint=True)
            rows = distinct_ones[rng.integers(0, len(distinct_ones), n)]
            got = equal_rows(rows)
            _, want = np.unique(rows, axis=0, return_inverse=True)
            assert got.shape == (n,)
            assert _same_partition(got, want.reshape(-1))
            assert set(got.tolist()) == set(range(int(got.max()) + 1))
    # a row's -1 against another's 0 in one column only: different rows
    two = np.array([[5, -1, 7], [5, 0, 7], [5, -1, 7]], dtype=np.int64)
    assert equal_rows(two).tolist() in ([0, 1, 0], [1, 0, 1])


def test_equal_rows_of_nothing_and_of_a_view() -> None:
    assert equal_rows(np.zeros((0, 4), np.int64)).shape == (0,)
    wide = np.arange(24, dtype=np.int64).reshape(4, 6) % 2
    view = wide[:, ::2]  # not contiguous
    assert _same_partition(equal_rows(view), np.unique(view, axis=0, return_inverse=True)[1])
    with pytest.raises(ValueError):
        equal_rows(np.zeros((2, 2)))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32])
def test_lexsort_pair_is_numpys_lexsort(dtype: type) -> None:
    """By ``major``, then ``minor``, then position: numpy's lexsort, whether ``minor`` is
    non-decreasing (the one stable sort) or not (numpy's own), ties of both included."""
    rng = np.random.default_rng(11)
    for n in (0, 1, 2, 9, 700):
        major = rng.integers(0, 6, n).astype(dtype)
        rising = np.sort(rng.integers(0, 40, n)).astype(dtype)  # repeats: ties of both keys
        shuffled = rng.integers(0, 40, n).astype(dtype)
        for minor in (rising, shuffled):
            want = np.lexsort((minor, major))
            got = lexsort_pair(minor, major)
            assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint64])
@pytest.mark.parametrize("span", [1, 255, 256, 65535, 65536])
def test_stable_argsort_of_a_small_span_is_numpys(dtype: type, span: int) -> None:
    """Values spanning fewer than 2**16 (the radix sort of their uint8 or uint16 offsets) at
    either end of the type's range: a narrow signed type's offsets wrap and still sort right."""
    from gpuadvise.arrays import stable_argsort

    rng = np.random.default_rng(9)
    info = np.iinfo(dtype)
    for lo in (int(info.min), max(int(info.max) - span, int(info.min))):
        hi = min(int(info.max), lo + span)
        for n in (2, 3, 40, 3000):
            a = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
            assert np.array_equal(stable_argsort(a), np.argsort(a, kind="stable"))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint64])
@pytest.mark.parametrize("span", [0, 255, 256, 65535, 65536])
def test_distinct_of_a_small_span_is_numpys_unique(dtype: type, span: int) -> None:
    """distinct, distinct_inverse and distinct_first of values spanning few (a count per value
    and the radix argsort, no comparison sort) at either end of the type's range: np.unique's
    values (their dtype), first positions and inverse."""
    from gpuadvise.arrays import distinct_first, distinct_inverse

    rng = np.random.default_rng(13)
    info = np.iinfo(dtype)
    for lo in (int(info.min), max(int(info.max) - span, int(info.min))):
        hi = min(int(info.max), lo + span)
        for n in (2, 3, 40, 70000):
            a = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
            want, first, inverse = np.unique(a, return_index=True, return_inverse=True)
            got = distinct(a)
            assert got.dtype == want.dtype and np.array_equal(got, want)
            got, got_first, got_inverse = distinct_inverse(a, return_index=True)
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert np.array_equal(got_first, first) and np.array_equal(got_inverse, inverse)
            got, got_first = distinct_first(a)
            assert np.array_equal(got, want) and np.array_equal(got_first, first)


def test_stable_argsort_overwriting_its_temporary_is_numpys() -> None:
    """``overwrite=True``: the packed sort keys made in the caller's int64 temporary (issue 31),
    the order numpy's stable argsort gives; a range too wide to pack leaves it as it was."""
    from gpuadvise.arrays import stable_argsort

    rng = np.random.default_rng(4)
    for n in (2, 9, 3000):
        for hi in (1 << 20, 1 << 40):
            a = rng.integers(-hi, hi, n, dtype=np.int64)
            given = a.copy()
            assert np.array_equal(
                stable_argsort(given, overwrite=True), np.argsort(a, kind="stable")
            )
    wide = np.array([-(1 << 62), 5, 1 << 62, 5], np.int64)
    given = wide.copy()
    assert np.array_equal(stable_argsort(given, overwrite=True), np.argsort(wide, kind="stable"))
    assert np.array_equal(given, wide)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.uint16])
def test_stable_argsort_equal_is_the_stable_order_and_its_equal_neighbours(dtype: type) -> None:
    """stable_argsort_equal: numpy's stable argsort and ``s[1:] == s[:-1]`` of the sorted values,
    for spans that pack (the flags from the sorted keys), that do not (too wide: the gather) and
    the radix sort's narrow ones, with many repeats and none."""
    from gpuadvise.arrays import stable_argsort_equal

    rng = np.random.default_rng(11)
    top = int(np.iinfo(dtype).max)
    for hi in (2, 300, 1 << 17, 1 << 40, top):
        for n in (2, 5, 5000):
            a = rng.integers(0, min(hi, top), n, dtype=np.uint64, endpoint=True).astype(dtype)
            want = np.argsort(a, kind="stable")
            for overwrite in (False, True):  # (True: the keys may be sorted in the copy)
                order, equal = stable_argsort_equal(a.copy(), overwrite=overwrite)
                assert np.array_equal(order, want)
                assert np.array_equal(equal, a[want][1:] == a[want][:-1])
    order, equal = stable_argsort_equal(np.zeros(0, np.int64))
    assert len(order) == 0 and len(equal) == 0


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.uint16])
def test_stable_argsort_equal_major_flags_equal_major_parts(dtype: type) -> None:
    """stable_argsort_equal_major: stable_argsort_equal's order and flags, and per neighbour
    whether ``value >> shift`` is equal, for spans that pack, that do not and narrow ones; its
    flags differ from the values' own (equal major parts of different values)."""
    from gpuadvise.arrays import stable_argsort_equal_major

    rng = np.random.default_rng(12)
    top = int(np.iinfo(dtype).max)
    for hi in (2, 300, 1 << 17, 1 << 40, top):
        for n in (2, 5, 5000):
            a = rng.integers(0, min(hi, top), n, dtype=np.uint64, endpoint=True).astype(dtype)
            want = np.argsort(a, kind="stable")
            s = a[want]
            for shift in (0, 3, 9):
                for overwrite in (False, True):
                    order, equal, major = stable_argsort_equal_major(
                        a.copy(), shift, overwrite=overwrite
                    )
                    assert np.array_equal(order, want)
                    assert np.array_equal(equal, s[1:] == s[:-1])
                    assert np.array_equal(major, (s[1:] >> shift) == (s[:-1] >> shift))
    a = np.array([1 << 20, (1 << 20) + 1, 7, (2 << 20) + 3, 6], np.int64)
    order, equal, major = stable_argsort_equal_major(a, 9)
    assert order.tolist() == [4, 2, 0, 1, 3]
    assert equal.tolist() == [False, False, False, False]
    assert major.tolist() == [True, False, True, False]


@pytest.mark.parametrize("run", [1, 16, 4096])
def test_sort_in_place_is_np_sort_by_either_algorithm(run: int) -> None:
    """sort_in_place (issue 31): the merge sort on long runs, the default on short ones, the
    values of np.sort either way (integers of several types, repeats, and floats by the
    default)."""
    from gpuadvise.arrays import RUNS_FOR_MERGE, sort_in_place

    rng = np.random.default_rng(run)
    for dtype in (np.int64, np.int32, np.uint64, np.uint16):
        a = rng.integers(0, 50_000, 20_480).astype(dtype)  # runs of `run` sorted values
        a = np.sort(a.reshape(-1, run), axis=1).reshape(-1)
        got = a.copy()
        sort_in_place(got)
        assert np.array_equal(got, np.sort(a))
        descents = int(np.count_nonzero(a[1:] < a[:-1]))
        assert (descents * RUNS_FOR_MERGE < len(a)) == (run >= 4096)
    f = rng.random(1000)
    f[::7] = -0.0
    got = np.sort(f)  # (a float array: numpy's default sort, as before)
    sort_in_place(f)
    assert np.array_equal(f.view(np.int64), got.view(np.int64))
    for n in (0, 1, 2):
        x = np.arange(n, 0, -1)
        sort_in_place(x)
        assert np.array_equal(x, np.arange(1, n + 1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16, np.int8])
def test_most_common_is_numpys_unique_counts_argmax(dtype: type) -> None:
    """most_common: the value numpy's counts pick (ties: the least), by a count per value over
    a narrow span and by numpy's sort over a wide one, negative strides and single values."""
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    for t in range(150):
        n = int(rng.integers(1, 400))
        wide = t % 3 == 0 and info.max > 1 << 20
        top = info.max // 2 if wide else min(int(rng.integers(1, 60)), info.max)
        low = max(info.min // 2, -top) if info.min < 0 else 0
        a = rng.integers(low, top, n).astype(dtype)
        if t % 5 == 0:  # ties everywhere
            a = np.repeat(a[: max(n // 4, 1)], 4)
        vals, counts = np.unique(a, return_counts=True)
        assert most_common(a) == int(vals[np.argmax(counts)]), t
    with pytest.raises(ValueError):
        most_common(np.zeros(0, np.int64))


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.uint16, np.float64])
@pytest.mark.parametrize("run", [1, 8, 32, 700])
def test_packed_sorts_are_numpys_on_runs_whichever_sort_they_take(dtype: type, run: int) -> None:
    """Runs of ``run`` increasing values (random values between them), the L2 model's and the
    view's keys: sort_in_place gives numpy's sorted array whichever algorithm it takes, and the
    functions that sort packed keys with it give numpy's results on such arrays too."""
    from gpuadvise.arrays import distinct_inverse, sort_in_place, stable_argsort

    rng = np.random.default_rng(run)
    n = (1 << 16) + 4 * run + 3
    hi = 1 << 14 if dtype is np.uint16 else 1 << 40
    a: np.ndarray = rng.integers(0, hi, n).astype(dtype)
    for lo in range(0, n, run):
        a[lo : lo + run].sort()
    got = a.copy()
    sort_in_place(got)
    assert np.array_equal(got, np.sort(a))
    if np.dtype(dtype).kind in "iu":
        assert np.array_equal(stable_argsort(a), np.argsort(a, kind="stable"))
        values, inverse = distinct_inverse(a)
        want_values, want_inverse = np.unique(a, return_inverse=True)
        assert np.array_equal(values, want_values) and np.array_equal(inverse, want_inverse)
        assert np.array_equal(distinct(a), want_values)
        b = a.copy()
        assert count_distinct_sorting(b) == len(want_values)
        assert np.array_equal(b, np.sort(a))


@pytest.mark.parametrize("pays", [True, False])
def test_sort_in_place_is_np_sort_whichever_sort_the_host_favours(
    pays: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """merge_sort_pays (issue 31): numpy's stable sort is 0.45x its default on long runs on one
    host and 4.3x on another (x86-simd-sort); sort_in_place takes the faster and gives np.sort's
    values either way (long runs, short runs, unsigned)."""
    import gpuadvise.arrays as arrays

    assert isinstance(arrays.merge_sort_pays(), bool)  # measured once, then kept
    assert arrays.merge_sort_pays() is arrays._MERGE_PAYS[0]
    monkeypatch.setattr(arrays, "_MERGE_PAYS", [pays])
    rng = np.random.default_rng(3)
    for run, dtype in ((4096, np.int64), (1, np.int64), (512, np.uint32)):
        a = rng.integers(0, 1 << 30, 16_384).astype(dtype)
        a = np.sort(a.reshape(-1, run), axis=1).reshape(-1)
        got = a.copy()
        arrays.sort_in_place(got)
        assert np.array_equal(got, np.sort(a))


def test_merge_sort_pays_is_timed_on_the_threads_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """merge_sort_pays times the two sorts on this thread's CPU clock: a preemption between two
    readings of the wall clock (a loaded machine) cannot decide it (issue 31: wrong in 10 of 40
    tries at load 14 by the wall clock)."""
    import time

    import gpuadvise.arrays as arrays

    def wall() -> float:
        raise AssertionError("merge_sort_pays read the wall clock")

    monkeypatch.setattr(arrays, "_MERGE_PAYS", [])
    monkeypatch.setattr(time, "perf_counter", wall)
    got = arrays.merge_sort_pays()
    assert isinstance(got, bool) and arrays._MERGE_PAYS == [got]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
@pytest.mark.parametrize("span", [1, 3, 1 << 40])
def test_every_value_distinct_is_numpys_and_leaves_a_kept_input(dtype: type, span: int) -> None:
    """Every value distinct (a lane each: the values made in the sorted keys themselves, the
    first positions the permutation itself) or runs of them: distinct_first, distinct_inverse,
    first_by_runs and inverse_by_runs (with ``overwrite`` too) give np.unique's values, first
    positions and inverse, and an input the caller keeps is left as it was."""
    from gpuadvise.arrays import distinct_first, distinct_inverse, first_by_runs, inverse_by_runs

    rng = np.random.default_rng(29)
    for n in (2, 3000, 70000):
        if span * n > np.iinfo(dtype).max:
            continue
        base = rng.permutation(n).astype(np.int64) * span + 7
        for a in (base.astype(dtype), np.repeat(base, 3).astype(dtype)):
            kept = a.copy()
            want, want_first, want_inv = np.unique(a, return_index=True, return_inverse=True)
            want_inv = want_inv.reshape(-1)
            for values, first in (
                distinct_first(a),
                first_by_runs(a),
                distinct_first(a.copy(), overwrite=True),
                first_by_runs(a.copy(), overwrite=True),
            ):
                assert values.dtype == want.dtype and np.array_equal(values, want)
                assert first.dtype == np.intp and np.array_equal(first, want_first)
            for values, first, inv in (
                distinct_inverse(a, return_index=True),
                inverse_by_runs(a),
                inverse_by_runs(a.copy(), overwrite=True),
            ):
                assert values.dtype == want.dtype and np.array_equal(values, want)
                assert np.array_equal(first, want_first) and np.array_equal(inv, want_inv)
            assert np.array_equal(a, kept)


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_equal_neighbours_a_chunk_at_a_time_are_the_gathers(chunk: int, monkeypatch) -> None:
    """stable_argsort_equal(_major) where the keys do not pack (issue 31: GA309's pairs): the
    flags made a chunk of positions at a time (no gather of the values by the order beside
    them) equal the gathered values' own, for chunks that do not divide the values."""
    import gpuadvise.arrays as arrays

    monkeypatch.setattr(arrays, "_POSITIONS_CHUNK", chunk)
    rng = np.random.default_rng(13)
    for n in (2, 3, 999, 1000, 1001, 5000):
        a = rng.integers(0, 1 << 62, n, dtype=np.int64)
        a[: n // 2] = a[n // 2 : 2 * (n // 2)]  # (equal values, and equal major parts)
        want = np.argsort(a, kind="stable")
        s = a[want]
        order, equal, major = arrays.stable_argsort_equal_major(a.copy(), 40, overwrite=True)
        assert np.array_equal(order, want)
        assert np.array_equal(equal, s[1:] == s[:-1])
        assert np.array_equal(major, (s[1:] >> 40) == (s[:-1] >> 40))
        order, equal = arrays.stable_argsort_equal(a.copy())
        assert np.array_equal(order, want) and np.array_equal(equal, s[1:] == s[:-1])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
def test_distinct_inverse_overwriting_its_temporary_is_the_same(dtype: type) -> None:
    """distinct_inverse and inverse_by_runs with ``overwrite`` (the caller's temporary sorted
    in place, issue 31): the values, first positions and inverse of the call that keeps it."""
    from gpuadvise.arrays import distinct_inverse, inverse_by_runs

    rng = np.random.default_rng(14)
    for hi in (30, 1 << 20, 1 << 40):
        for n in (1, 2, 3000):
            a = rng.integers(0, min(hi, int(np.iinfo(dtype).max)), n).astype(dtype)
            want = distinct_inverse(a, return_index=True)
            got = distinct_inverse(a.copy(), return_index=True, overwrite=True)
            assert all(np.array_equal(x, y) for x, y in zip(want, got, strict=True))
            for b in (a, np.repeat(a, 4)):
                want = inverse_by_runs(b)
                got = inverse_by_runs(b.copy(), overwrite=True)
                assert all(np.array_equal(x, y) for x, y in zip(want, got, strict=True))
