"""Set operations on large numpy integer arrays by sorting.

numpy 2.3+ makes ``np.unique`` (without flags) and ``np.isin`` hash tables, 20-60 times slower
than a sort on the millions of distinct keys of a traced wave (8 M int64: 8 s against 0.15 s).
``np.unique(..., axis=1)`` of a few integer rows (pairs of keys) sorts a structured view: 70 times
slower than one sort of the rows packed into one integer (4 M pairs: 9.7 s against 0.14 s).
The trace view, the L2 model, the staging analysis and the rules use these instead; same results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

__all__ = [
    "count_distinct_sorting",
    "distinct",
    "distinct_first",
    "distinct_inverse",
    "distinct_rows",
    "equal_rows",
    "first_by_runs",
    "inverse_by_runs",
    "lexsort_pair",
    "member",
    "most_common",
    "run_heads",
    "sort_in_place",
    "stable_argsort",
    "stable_argsort_equal",
    "stable_argsort_equal_major",
]


def _small_offsets(a: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The offsets of a 1-D integer array's values from the least (uint16) and the number of
    values between its least and greatest, where that span is at most 2**16 and at most
    ``4 * len(a)`` (a count per value is then cheaper than a sort); else None."""
    n = len(a)
    if n < 2 or a.ndim != 1 or a.dtype.kind not in "iu":
        return None
    lo = a.min()
    span = int(a.max()) - int(lo) + 1
    if span > 1 << 16 or span > 4 * n:
        return None
    # (a narrow signed type's difference may wrap: modulo 2**16 it is the offset)
    return (a - lo).astype(np.uint16), span


def _small_distinct(
    a: np.ndarray, small: tuple[np.ndarray, int], return_index: bool
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """:func:`distinct_inverse` of ``a`` from its :func:`_small_offsets`: the values present by
    a count of each, the inverse by their ranks, the first positions from the radix argsort of
    the offsets (None unless ``return_index``). No comparison sort."""
    off, span = small
    present = np.bincount(off, minlength=span) > 0
    values = a.min() + np.flatnonzero(present).astype(a.dtype)
    rank = np.cumsum(present, dtype=np.intp)
    rank -= 1
    inverse = rank[off]
    first = _small_first(off)[1] if return_index else None
    return values, first, inverse


def _small_first(off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct uint16 offsets ``off`` and each one's first position, from numpy's stable
    argsort of them (a radix sort: each value's positions in order)."""
    perm = np.argsort(off, kind="stable")
    s = off[perm]
    start = np.empty(len(s), dtype=bool)
    start[0] = True
    np.not_equal(s[1:], s[:-1], out=start[1:])
    return s[start], perm[start]


def sort_in_place(a: np.ndarray) -> None:
    """Sort the 1-D array ``a`` in place, by numpy's stable sort (a merge sort, which takes the
    runs it finds as they are) where ``a`` is long runs already (fewer than one descent in
    :data:`RUNS_FOR_MERGE` neighbours: a view's keys with the CTA or the address as their major
    digit, in execution order: 5-10 times faster there, issue 31) and this host's numpy sorts
    such runs faster that way (:func:`merge_sort_pays`), else by its default sort (faster on
    random values). The same sorted values either way."""
    n = len(a)
    if n >= 2 * RUNS_FOR_MERGE and a.ndim == 1 and a.dtype.kind in "iu":  # (integers: no
        # float whose equal values a stable order would tell apart, -0.0 and 0.0)
        if int(np.count_nonzero(a[1:] < a[:-1])) * RUNS_FOR_MERGE < n and merge_sort_pays():
            a.sort(kind="stable")
            return
    a.sort()


RUNS_FOR_MERGE = 64
"""The mean run length (elements between descents) from which :func:`sort_in_place` takes the
merge sort: measured on runs of random int64 (4 M values), the merge sort was 1.1x slower than
the default on runs of 16, 1.1x faster on 64, 1.2x on 256; 10x on a view's (CTA, thread,
address) keys (runs of 9,000)."""

_MERGE_PAYS: list[bool] = []  # merge_sort_pays's answer, once a process


def merge_sort_pays() -> bool:
    """Whether this host's numpy sorts long runs of int64 faster by its stable sort than by its
    default one, timed once a process on 2^16 values in runs of 1,024 (10-20 ms).

    It depends on the host, not on the data: numpy's default integer sort is a vectorised
    quicksort where the CPU and numpy's build have one (x86-simd-sort: an Intel Xeon with numpy
    2.5, 2026-12-02, sorted 1 M int64 in 10 ms), else an introsort (an AMD EPYC with numpy 2.4:
    54 ms). The stable sort (a timsort on runs) took 27-45 ms on runs of 9,000 on both: 0.45x
    the default on the one, 4.3x on the other. Which one runs changes only the time: sorted
    integers are the same array.

    Timed on this thread's CPU clock, not the wall's: on a loaded machine (the 2-core one at
    load 14, 2026-12-02) a preemption inside one of the 1-3 ms sorts decided it wrong in 10 of
    40 tries by the wall clock (stable over default 0.03x to 12.8x), in none of 40 by the
    thread's CPU (0.45x to 0.55x); a wrong answer sorted the rules' long runs by the default
    sort, GA303's distinct sectors on HeCBench softmax 1.3 CPU-s against 0.35 (issue 31)."""
    if not _MERGE_PAYS:
        import time

        rng = np.random.default_rng(0)
        runs = np.sort(rng.integers(0, 1 << 40, 1 << 16).reshape(-1, 1024), axis=1).reshape(-1)
        took: dict[str, float] = {}
        for kind in ("quicksort", "stable", "quicksort", "stable"):  # the faster of two each
            b = runs.copy()
            t0 = time.thread_time()
            b.sort(kind=kind)  # type: ignore[arg-type]
            took[kind] = min(took.get(kind, 1e9), time.thread_time() - t0)
        _MERGE_PAYS.append(took["stable"] < 0.8 * took["quicksort"])
    return _MERGE_PAYS[0]


def distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` (flattened, sorted distinct values): none sorted where ``a`` is
    non-decreasing already (a view's lanes' records, in lane order: a pass, 0.004 CPU-s on 7 M
    int32 where the sort took 0.1, issue 31); integers spanning no more values than there are
    marked (:func:`_distinct_marked`: 8 M int32 of 500 values 0.02-0.03 CPU-s where the sort
    took 0.22, 8 M int64 spanning 4 M 0.05 against 0.61, 2026-12-02); else one sort."""
    s = np.asarray(a).reshape(-1)
    if len(s) < 2:
        return np.sort(s)
    if not bool((s[1:] >= s[:-1]).all()):
        marked = _distinct_marked(s)
        if marked is not None:
            return marked
        s = s.copy()
        sort_in_place(s)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _distinct_marked(s: np.ndarray) -> np.ndarray | None:
    """:func:`distinct` of a 1-D integer array whose values span no more than its length (a
    view's instructions, CTAs or (instruction, buffer) pairs): each value marked in a byte per
    value of the span, the marked ones read back in order (no copy of ``s`` sorted: issue 31,
    the layout rules' :meth:`~gpuadvise.trace.view.TraceView.buffers_at` sorted every lane's
    pair); None where the span is wider or the values do not fit an ``intp``."""
    if s.dtype.kind not in "iu":
        return None
    lo, hi = int(s.min()), int(s.max())
    span = hi - lo + 1
    if span > len(s) or lo < np.iinfo(np.intp).min or hi > np.iinfo(np.intp).max:
        return None
    mark = np.zeros(span, bool)
    for i in range(0, len(s), _POSITIONS_CHUNK):  # (a chunk's offsets at a time: no
        # lane-sized intp copy beside ``s``, issue 31's peak)
        at = s[i : i + _POSITIONS_CHUNK].astype(np.intp)
        at -= np.intp(lo)
        mark[at] = True
    values = np.flatnonzero(mark)
    values += np.intp(lo)
    return values.astype(s.dtype, copy=False)


def most_common(a: np.ndarray) -> int:
    """The most common value of a non-empty 1-D integer array, the least of those equally
    common: ``vals[argmax(counts)]`` of ``np.unique(a, return_counts=True)``. Where the values
    span at most 2**16 or four times their number (a request's lane strides, a thread's steps),
    a count per value (``np.bincount``'s first greatest count is the least such value), no
    sort (issue 31: GA301's stride of millions of lanes)."""
    a = np.asarray(a).reshape(-1)
    if not len(a):
        raise ValueError("most_common of no values")
    lo, hi = int(a.min()), int(a.max())
    span = hi - lo + 1
    if a.dtype.kind in "iu" and (span <= 1 << 16 or span <= 4 * len(a)):
        off = a.astype(np.int64)
        off -= np.int64(lo)
        return lo + int(np.argmax(np.bincount(off, minlength=span)))
    vals, counts = np.unique(a, return_counts=True)
    return int(vals[np.argmax(counts)])


def count_distinct_sorting(a: np.ndarray) -> int:
    """``len(distinct(a))`` of a 1-D array, sorting ``a`` itself in place (no copy of it: the
    caller's own temporary of millions of keys, issue 31's peak)."""
    if len(a) < 2:
        return len(a)
    sort_in_place(a)
    return int(np.count_nonzero(a[1:] != a[:-1])) + 1


def stable_argsort(a: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """``np.argsort(a, kind="stable")`` of a 1-D integer array (``overwrite``: ``a`` is the
    caller's temporary, which the packed sort may use as its keys: one lane-sized array fewer,
    issue 31). When the values span fewer than
    2**16 (a view's instructions, threads or CTAs), numpy's stable argsort of their offsets from
    the least as uint16 (uint8 below 2**8), which is a radix sort: 1.4-2 times faster than the
    packed sort on 8 million lanes. Else, when the values' range and the positions fit in 63 bits
    together, each position is packed below its value and the keys sorted (one vectorized sort
    of int64, 3-12 times faster than numpy's stable argsort on millions of lanes). The order is
    the same either way (equal values keep their positions' order)."""
    a = np.asarray(a)
    if len(a) >= 2 and a.ndim == 1 and a.dtype.kind in "iu":
        lo = a.min()
        span = int(a.max()) - int(lo)
        if span < 1 << 16:
            # (a narrow signed type's difference may wrap: modulo 2**8 or 2**16, as the cast
            # takes it, it is the offset)
            small = np.uint8 if span < 1 << 8 else np.uint16
            return np.argsort((a - lo).astype(small), kind="stable")
    packed = _sorted_packed(a, overwrite) if len(a) >= 2 else None
    if packed is None:
        return np.argsort(a, kind="stable")
    key, shift, _ = packed
    key &= np.int64((1 << shift) - 1)
    return key.astype(np.intp, copy=False)


def stable_argsort_equal(
    a: np.ndarray, *, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stable_argsort` of a 1-D integer array and, per position of that order after the
    first, whether its value equals the one before it (``s[1:] == s[:-1]`` of ``s =
    a[order]``). Where the positions pack below the values (:func:`_sorted_packed`), both come
    from the sorted keys: no gather of ``a`` by the order (a random read per element, and an
    array of its size). The order is the stable one either way. ``overwrite``: as
    :func:`stable_argsort`'s (the packed keys sorted in ``a``'s memory)."""
    a = np.asarray(a)
    if (
        len(a) >= 2
        and a.ndim == 1
        and a.dtype.kind in "iu"
        and int(a.max()) - int(a.min()) >= 1 << 16
    ):
        # (a narrower span: stable_argsort's radix sort, faster than the packed keys' sort)
        packed = _sorted_packed(a, overwrite)
        if packed is not None:
            key, shift, _ = packed
            value = key >> np.int64(shift)
            equal = value[1:] == value[:-1]
            del value
            key &= np.int64((1 << shift) - 1)
            return key.astype(np.intp, copy=False), equal
    order = stable_argsort(a)
    return order, _neighbours_equal(a, order)[0]


def _neighbours_equal(
    a: np.ndarray, order: np.ndarray, shift: int | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """``s[1:] == s[:-1]`` of ``s = a[order]`` and (``shift`` given) the same of ``s >>
    shift`` (else None), a chunk of :data:`_POSITIONS_CHUNK` positions at a time: no gather of
    ``a`` by the order, nor its shift, the size of ``a`` (issue 31: two int64 arrays of 8
    million lanes at GA309's peak). The same comparisons of the same values."""
    n = len(order)
    equal = np.empty(max(n - 1, 0), bool)
    major = None if shift is None else np.empty(max(n - 1, 0), bool)
    for i in range(0, n - 1, _POSITIONS_CHUNK):
        s = a[order[i : i + _POSITIONS_CHUNK + 1]]  # (one past the chunk: its last pair)
        np.equal(s[1:], s[:-1], out=equal[i : i + len(s) - 1])
        if major is not None:
            s >>= shift
            np.equal(s[1:], s[:-1], out=major[i : i + len(s) - 1])
    return equal, major


def stable_argsort_equal_major(
    a: np.ndarray, shift: int, *, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`stable_argsort_equal` of a 1-D array of non-negative integers, and also, per
    position of that order after the first, whether its value's major part (``value >>
    shift``: a key packed as ``(major << shift) | minor``) equals the one before it. Both from
    the sorted keys where they pack (no gather of ``a`` by the order); the same result either
    way."""
    a = np.asarray(a)
    if (
        len(a) >= 2
        and a.ndim == 1
        and a.dtype.kind in "iu"
        and int(a.max()) - int(a.min()) >= 1 << 16
        and int(a.max()) < 1 << 63  # (the value made again from the key: in int64)
    ):
        packed = _sorted_packed(a, overwrite)
        if packed is not None:
            key, kshift, lo = packed
            value = key >> np.int64(kshift)
            equal = value[1:] == value[:-1]
            value += np.int64(lo)  # (the value itself again, in place)
            value >>= np.int64(shift)
            major = value[1:] == value[:-1]
            del value
            key &= np.int64((1 << kshift) - 1)
            return key.astype(np.intp, copy=False), equal, major
    order = stable_argsort(a)
    equal, major = _neighbours_equal(a, order, shift)
    assert major is not None
    return order, equal, major


def lexsort_pair(minor: np.ndarray, major: np.ndarray) -> np.ndarray:
    """``np.lexsort((minor, major))`` of two 1-D integer arrays: by ``major``, equal ones by
    ``minor``, then by position. Where ``minor`` does not decrease (the records of a view's
    lanes, in execution order), the positions are in ``minor``'s order already, so one
    :func:`stable_argsort` of ``major`` gives it (numpy's lexsort of millions of lanes is
    several times slower)."""
    minor = np.asarray(minor)
    if len(minor) < 2 or bool((minor[1:] >= minor[:-1]).all()):
        return stable_argsort(major)
    return np.lexsort((minor, major))


def _sorted_packed(a: np.ndarray, overwrite: bool = False) -> tuple[np.ndarray, int, int] | None:
    """Each position of the 1-D integer array ``a`` packed below its value less the smallest,
    sorted: ``(keys, shift, smallest)``, the position in each key's low ``shift`` bits; None where
    ``a`` is empty, not a 1-D integer array, or its values' range and its positions do not fit in
    63 bits together (``a`` then left as it was). ``overwrite``: an int64 ``a`` is made the keys
    itself (the caller's temporary, not copied)."""
    n = len(a)
    if n == 0 or a.ndim != 1 or a.dtype.kind not in "iu":
        return None
    lo, hi = int(a.min()), int(a.max())
    shift = max(int(n - 1).bit_length(), 1)
    if (hi - lo).bit_length() + shift > 63:
        return None
    if a.dtype.kind == "u":
        key = (a - a.dtype.type(lo)).astype(np.int64)
    else:
        # a copy even of int64 (shifted in place below), unless the caller gives it up
        own = overwrite and a.dtype == np.int64 and a.flags.c_contiguous and a.flags.writeable
        key = a if own else a.astype(np.int64)
        key -= np.int64(lo)
    key <<= np.int64(shift)
    # the positions or'ed in a chunk at a time: the same keys, no lane-sized arange beside them
    for i in range(0, n, _POSITIONS_CHUNK):
        key[i : i + _POSITIONS_CHUNK] |= np.arange(i, min(i + _POSITIONS_CHUNK, n), dtype=np.int64)
    sort_in_place(key)
    return key, shift, lo


_POSITIONS_CHUNK = 1 << 20


def member(a: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``np.isin(a, values)`` for ``values`` sorted and distinct (:func:`distinct`): a binary
    search per element of ``a``."""
    a = np.asarray(a)
    if len(values) == 0 or a.size == 0:
        return np.zeros(a.shape, dtype=bool)
    at = np.minimum(np.searchsorted(values, a), len(values) - 1)
    return values[at] == a


Rows = np.ndarray | Sequence[np.ndarray]


@overload
def distinct_rows(
    rows: Rows, return_counts: Literal[False] = False, *, release: bool = False
) -> np.ndarray: ...


@overload
def distinct_rows(
    rows: Rows, return_counts: Literal[True], *, release: bool = False
) -> tuple[np.ndarray, np.ndarray]: ...


def distinct_rows(
    rows: Rows, return_counts: bool = False, *, release: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, axis=1[, return_counts=True])`` of a (k, n) integer array: its distinct
    columns in lexicographic order (row 0 first), and how often each occurs. The rows are packed
    into one int64 key when their value ranges allow (one sort), else sorted with ``lexsort``.

    ``rows`` may be a list of the k rows (1-D arrays of one length): the same result as for
    ``np.stack(rows)``, without making that copy when the rows pack (two rows of a lane per
    warp access, 38 million lanes in llm.c's softmax trace: 600 MB). ``release``: ``rows`` is a
    list its caller holds no other reference to the rows of; it is emptied once the rows are
    packed, so that they are not held through the sort (issue 31's peak: GA309's two rows of
    7.6 million lanes, 116 MB)."""
    if isinstance(rows, list | tuple):
        parts = [np.asarray(r) for r in rows]
        if release and isinstance(rows, list):
            rows.clear()
        if not parts:
            raise ValueError("distinct_rows needs at least one row")
        dtype = np.result_type(*parts)
        stacked = None
        k, n = len(parts), len(parts[0])
    else:
        stacked = np.asarray(rows)
        dtype = stacked.dtype
        k, n = stacked.shape
        parts = list(stacked)

    def whole() -> np.ndarray:
        return stacked if stacked is not None else np.stack(parts)

    if n == 0 or k == 0 or dtype.kind not in "iu":
        if return_counts:
            values, counts = np.unique(whole(), axis=1, return_counts=True)
            return values, counts
        return np.unique(whole(), axis=1)
    lo = [dtype.type(p.min()) for p in parts]
    span = [int(p.max()) - int(m) + 1 for p, m in zip(parts, lo, strict=True)]
    total = 1
    for s in span:
        total *= s
    if total < 2**63:
        key = np.zeros(n, dtype=np.int64)
        for i in range(k):
            key *= np.int64(span[i])
            if dtype.kind == "u":
                key += (np.asarray(parts[i], dtype=dtype) - lo[i]).astype(np.int64)
            else:  # in int64: a narrow type's difference may pass its range
                digit = parts[i].astype(np.int64)  # (one temporary, in place below)
                digit -= np.int64(lo[i])
                key += digit
                del digit
        if release and stacked is None:
            parts.clear()  # (the rows are in the key now)
        sort_in_place(key)
        keep = np.empty(n, dtype=bool)
        keep[0] = True
        np.not_equal(key[1:], key[:-1], out=keep[1:])
        first = np.flatnonzero(keep)
        u = key[first]
        del key, keep  # (lane-sized: not held beside the columns made below, issue 31)
        out = np.empty((k, len(u)), dtype=dtype)
        for i in range(k - 1, -1, -1):
            # the quotient in place (u is the key's own copy): one temporary, not two
            digit = u % np.int64(span[i])
            u //= np.int64(span[i])
            if dtype.kind == "i":
                digit += np.int64(lo[i])
                out[i] = digit
            else:  # unsigned: in its own type (the minimum may pass int64)
                out[i] = digit.astype(dtype) + lo[i]
            del digit
        del u
    else:
        rows = whole()
        order = np.lexsort(rows[::-1])
        srt = rows[:, order]
        keep = np.empty(n, dtype=bool)
        keep[0] = True
        np.any(srt[:, 1:] != srt[:, :-1], axis=0, out=keep[1:])
        first = np.flatnonzero(keep)
        out = srt[:, first]
    if not return_counts:
        return out
    return out, np.diff(np.append(first, n))


@overload
def distinct_inverse(
    a: np.ndarray, return_index: Literal[False] = False, *, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray]: ...


@overload
def distinct_inverse(
    a: np.ndarray, return_index: Literal[True], *, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def distinct_inverse(
    a: np.ndarray, return_index: bool = False, *, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` (with ``return_index``: ``(values, first, inverse)``,
    each value's first position) of a 1-D integer array. When the values' range and the positions
    fit in 63 bits together, each position is packed below its value and the pairs sorted by
    value (numpy's ``sort`` of int64 is vectorized, its ``argsort`` 6-7 times slower); else
    numpy's own. ``overwrite``: ``a`` is the caller's temporary, whose memory the packed keys
    may be sorted in (:func:`_sorted_packed`: one array of ``a``'s size fewer at the peak,
    issue 31); ``a`` is not read after."""
    a = np.asarray(a)
    small = _small_offsets(a)
    if small is not None:
        values, first, inverse = _small_distinct(a, small, return_index)
        if first is not None:
            return values, first, inverse
        return values, inverse
    packed = _sorted_packed(a, overwrite)
    if packed is None:
        return _numpy_inverse(a, return_index)
    values, perm, start = _runs(a, packed)
    del packed  # its sorted keys: not held beside the inverse (issue 31's peak)
    rank = np.cumsum(start, dtype=np.intp)
    rank -= 1
    inverse = np.empty(len(a), dtype=np.intp)
    inverse[perm] = rank
    del rank
    if return_index:
        return values, _firsts(perm, start), inverse
    return values, inverse


def equal_rows(rows: np.ndarray) -> np.ndarray:
    """A label per row of the (n, k) integer array ``rows``, the same for equal rows and only for
    them, numbered from 0 in no order that means anything (the inverse of ``np.unique(rows,
    axis=0, return_inverse=True)`` up to a renumbering). Each row is one opaque value of its
    bytes, which are equal exactly when the integers are: one sort of n values, where numpy's
    ``axis=0`` sorts a structured view field by field (8x slower on 200,000 rows of 24)."""
    a = np.ascontiguousarray(rows)
    if a.ndim != 2 or a.dtype.kind not in "iu":
        raise ValueError("equal_rows takes a 2-D integer array")
    n, k = a.shape
    if n == 0 or k == 0:
        return np.zeros(n, dtype=np.intp)
    whole = a.view(np.dtype((np.void, a.dtype.itemsize * k))).reshape(n)
    _, inverse = np.unique(whole, return_inverse=True)
    return inverse.reshape(-1)


def distinct_first(a: np.ndarray, *, overwrite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_index=True)``: the distinct values of a 1-D integer array and each
    one's first position; :func:`distinct_inverse` without the inverse (no scatter of a position
    per element: the callers that want only the first occurrences). ``overwrite``: ``a`` is the
    caller's temporary, which the packed sort may use as its keys (:func:`stable_argsort`)."""
    a = np.asarray(a)
    small = _small_offsets(a)
    if small is not None:
        offsets, first = _small_first(small[0])
        return a.min() + offsets.astype(a.dtype), first
    packed = _sorted_packed(a, overwrite)
    if packed is None:
        values, first, _ = distinct_inverse(a, return_index=True)
        return values, first
    values, perm, start = _runs(a, packed)
    del packed  # (its keys consumed: the values, when every one is distinct)
    return values, _firsts(perm, start)


def run_heads(*cols: np.ndarray) -> np.ndarray:
    """Per row of the columns, whether it differs from the row before (the first: True)."""
    n = len(cols[0])
    head = np.empty(n, bool)
    if n:
        head[0] = True
        np.not_equal(cols[0][1:], cols[0][:-1], out=head[1:])
        for c in cols[1:]:
            head[1:] |= c[1:] != c[:-1]
    return head


def inverse_by_runs(
    a: np.ndarray, *, overwrite: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`distinct_inverse` of the 1-D integer array ``a`` with ``return_index``
    (``values, first, inverse``), sorting only the first element of each run of equal
    neighbours: a value's first position is a run's first (the element before it differs),
    every element's number its run's (the lanes of a coalesced request share their sectors: 8 a
    sector, 32 a line). ``overwrite``: ``a`` is the caller's temporary, which may be written
    over once its runs' first values are read (the runs' numbers made in it: one array of
    ``a``'s size fewer at the peak; issue 31)."""
    head = run_heads(a)
    if np.count_nonzero(head) * 4 > len(a) * 3:
        del head
        return distinct_inverse(a, return_index=True, overwrite=overwrite)
    at = np.flatnonzero(head)
    values, first, inverse = distinct_inverse(a[at], return_index=True)
    own = (
        overwrite
        and a.dtype.itemsize == np.dtype(np.intp).itemsize
        and a.dtype.kind in "iu"
        and a.flags.c_contiguous
        and a.flags.writeable
    )
    run = np.cumsum(head, dtype=np.intp, out=a.view(np.intp) if own else None)
    del head
    run -= 1
    return values, at[first], inverse[run]


def first_by_runs(a: np.ndarray, *, overwrite: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct_first` of ``a``, sorting only the first element of each run of equal
    neighbours (:func:`inverse_by_runs`). ``overwrite``: ``a`` is the caller's temporary, which
    the sort may use as its keys (one array of ``a``'s size fewer; issue 31's peak)."""
    head = run_heads(a)
    if np.count_nonzero(head) * 4 > len(a) * 3:
        del head
        return distinct_first(a, overwrite=overwrite)
    at = np.flatnonzero(head)
    del head
    values, first = distinct_first(a[at], overwrite=True)
    return values, at[first]


def _runs(
    a: np.ndarray, packed: tuple[np.ndarray, int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From :func:`_sorted_packed`'s sorted keys of ``a``: the distinct values, the sorting
    permutation and where each run of equal values starts (``packed``'s key array is consumed)."""
    key, shift, lo = packed
    perm = key & np.int64((1 << shift) - 1)
    key >>= np.int64(shift)
    start = np.empty(len(a), dtype=bool)
    start[0] = True
    np.not_equal(key[1:], key[:-1], out=start[1:])
    if a.dtype.kind == "i" and bool(start.all()):
        # every value distinct (a lane each): the values made in the consumed keys themselves,
        # the same integers, no copy of them (issue 31's peak: GA301's 7.3 M keys on AoSKernel)
        key += np.int64(lo)
        return key.astype(a.dtype, copy=False), perm, start
    values = (
        (key[start] + np.int64(lo)).astype(a.dtype, copy=False)
        if a.dtype.kind == "i"
        else (key[start].astype(a.dtype) + a.dtype.type(lo))
    )
    return values, perm, start


def _firsts(perm: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Each run's first position (``perm[start]``, as intp): ``perm`` itself where every run is
    one value (no copy of a lane-sized array; issue 31)."""
    return (perm if bool(start.all()) else perm[start]).astype(np.intp, copy=False)


def _numpy_inverse(
    a: np.ndarray, return_index: bool
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    if a.ndim == 1 and a.dtype.kind in "iu" and len(a) > 1:
        # one unstable argsort (numpy's unique takes a stable one for the first positions):
        # each value's first position is the least position of its run
        perm = np.argsort(a)
        s = a[perm]
        start = np.empty(len(a), dtype=bool)
        start[0] = True
        np.not_equal(s[1:], s[:-1], out=start[1:])
        inverse = np.empty(len(a), dtype=np.intp)
        inverse[perm] = np.cumsum(start) - 1
        if return_index:
            first = np.minimum.reduceat(perm, np.flatnonzero(start)).astype(np.intp)
            return s[start], first, inverse
        return s[start], inverse
    if return_index:
        values, first, inverse = np.unique(a, return_index=True, return_inverse=True)
        return values, first, inverse.reshape(-1)
    values, inverse = np.unique(a, return_inverse=True)
    return values, inverse.reshape(-1)
