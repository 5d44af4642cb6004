"""Counter-based buffer fills and the emulator's lazy global memory: any slice of a buffer made on
its own equals the same slice of the whole buffer, and only the pages accessed are made."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuadvise.ptx.memory import GLOBAL_BASE, READ_AHEAD_MAX, GlobalMemory
from gpuadvise.runner.data import buffer_filler, make_host_buffer

DTYPES = [
    np.dtype(np.float32),
    np.dtype(np.float64),
    np.dtype(np.int32),
    np.dtype(np.uint8),
    np.dtype((np.float32, 4)),
    np.dtype([("a", "<f4"), ("b", "<i2", (3,))]),
    np.dtype((np.void, 12)),
]


CASES = [
    (dt, fill)
    for dt in DTYPES
    for fill in ("random", "random(3,9)", "iota", "ones")
    if dt.names or dt.kind != "V" or fill == "random"  # raw bytes take random or zeros only
]


@pytest.mark.parametrize(("dt", "fill"), CASES, ids=str)
def test_slices_equal_the_whole_buffer(dt: np.dtype, fill: str) -> None:
    whole = make_host_buffer(dt, 5000, fill, 7, "x")
    f = buffer_filler(dt, 5000, fill, 7, "x")
    assert f.elements(1234, 4321).tobytes() == whole[1234:4321].tobytes()
    raw = whole.tobytes()
    for lo, hi in ((0, 1), (3, 4099), (777, f.nbytes)):
        assert f.bytes_at(lo, hi).tobytes() == raw[lo:hi]


def test_random_values_span_their_ranges_and_depend_on_seed_and_name() -> None:
    a = make_host_buffer(np.dtype(np.float32), 1 << 16, "random", 0, "in")
    assert -1.0 <= a.min() < -0.99 and 0.99 < a.max() < 1.0
    i = make_host_buffer(np.dtype(np.int32), 1 << 16, "random", 0, "in")
    assert i.min() == 0 and i.max() == 63
    r = make_host_buffer(np.dtype(np.int16), 1 << 16, "random(-5,5)", 0, "in")
    assert r.min() == -5 and r.max() == 5
    assert not np.array_equal(a, make_host_buffer(np.dtype(np.float32), 1 << 16, "random", 1, "in"))
    assert not np.array_equal(a, make_host_buffer(np.dtype(np.float32), 1 << 16, "random", 0, "b"))


def test_lazy_memory_makes_only_the_pages_touched() -> None:
    n = 1 << 20  # 4 MiB of float32: 1024 pages
    f = buffer_filler(np.dtype(np.float32), n, "random", 3, "in")
    out = buffer_filler(np.dtype(np.float32), n, "random", 3, "out", poisoned=True)
    mem = GlobalMemory([("in", f), ("out", out)])
    assert mem.pages_made == 0
    addr = np.int64(GLOBAL_BASE) + np.arange(0, 64, 4, dtype=np.int64) + 4096 * 10
    offs, bad = mem.translate(addr, 4)
    assert bad is None and mem.pages_made == 1
    got = mem.views[4][offs >> 2].view(np.float32)
    assert np.array_equal(got, f.elements(10 * 1024, 10 * 1024 + 16))
    # a store into the poisoned output, then the whole output read back
    b = mem.by_name["out"]
    o, _ = mem.translate(np.array([b.base + 8], dtype=np.int64), 4)
    mem.views[4][o >> 2] = np.float32(2.5).view(np.uint32)
    back = mem.read("out").view(np.float32)
    assert back[2] == 2.5 and np.isnan(back[0]) and np.isnan(back[-1])
    assert mem.pages_made == 1 + 1024  # the read made the rest of the output, not the input


def test_lazy_memory_fills_both_pages_an_access_spans() -> None:
    """An access whose bytes span two pages (unaligned for its width, or wider than its
    alignment) makes both; aligned accesses make exactly their own pages, once."""
    n = 1 << 16  # 64 KiB of bytes: 16 pages
    f = buffer_filler(np.dtype(np.uint8), n, "random", 1, "in")
    mem = GlobalMemory([("in", f)])
    base = np.int64(GLOBAL_BASE)
    mem.translate(np.array([base + 4094], dtype=np.int64), 4)  # bytes 4094..4097: pages 0 and 1
    assert mem.pages_made == 2
    mem.translate(base + np.array([3 * 4096 + 8, 5 * 4096, 3 * 4096 + 16], np.int64), 8)
    assert mem.pages_made == 4  # pages 3 and 5
    mem.translate(base + np.array([5 * 4096 + 1, 9 * 4096 + 4095], np.int64), 1)
    assert mem.pages_made == 5  # page 9 (5 is made)
    offs, _ = mem.translate(np.array([base + 7 * 4096 - 2], dtype=np.int64), 4)
    # pages 6 and 7 (after page 5: the first fill of a walk reads none ahead)
    assert mem.pages_made == 7
    mem.translate(np.array([base + 8 * 4096], dtype=np.int64), 4)
    assert mem.pages_made == 8  # page 8 continues the walk, but 9 is made: nothing read ahead
    whole = f.elements(0, n)
    got = mem.views[1][int(offs[0]) : int(offs[0]) + 4]
    assert np.array_equal(got, whole[7 * 4096 - 2 : 7 * 4096 + 2])


def test_a_walk_forward_reads_ahead_and_keeps_what_was_written() -> None:
    """A fill that continues a walk forward (it starts where the last fill after a filled page
    ended) reads pages ahead, the window doubling while the walk consumes it, never past a filled
    page; a page after an unfilled one fills itself alone. Pages read ahead hold the buffer's
    data, and a page the kernel wrote is never filled again."""
    n = 1 << 18  # 256 KiB of bytes: 64 pages
    f = buffer_filler(np.dtype(np.uint8), n, "random", 2, "in")
    mem = GlobalMemory([("in", f)])
    base = np.int64(GLOBAL_BASE)

    def touch(page: int) -> np.ndarray:
        return mem.translate(np.array([base + 4096 * page], dtype=np.int64), 1)[0]

    touch(20)
    assert mem.pages_made == 1  # page 20, after an unfilled page: no read-ahead
    o = touch(26)
    mem.views[1][int(o[0])] = 7  # the kernel writes page 26
    assert mem.pages_made == 2
    touch(21)
    assert mem.pages_made == 3  # 21, after 20: the walk's first step, nothing read ahead
    touch(22)
    assert mem.pages_made == 5  # 22 continues it: 23 read ahead
    touch(23)
    assert mem.pages_made == 5  # read ahead: no fill
    touch(24)
    assert mem.pages_made == 7  # 24, and a window of 2 cut at 26 (the kernel wrote it): 25
    assert mem.views[1][int(o[0])] == 7
    touch(27)
    assert mem.pages_made == 8  # after 26, not where a window ended: the walk starts again
    touch(28)
    assert mem.pages_made == 10  # 28 and 29
    touch(30)
    assert mem.pages_made == 13  # 30 and a window of 2
    touch(33)
    assert mem.pages_made == 18  # 33 and a window of 4: 34..37
    whole = f.elements(0, n)
    lo, hi = 20 * 4096, 38 * 4096
    got = mem.views[1][lo:hi].copy()
    want = whole[lo:hi].copy()
    want[26 * 4096 - lo] = 7
    assert np.array_equal(got, want)
    assert not mem._filled[38]


def test_a_long_walk_reads_ahead_at_most_read_ahead_max_pages() -> None:
    """A walk a page at a time through a buffer: the fills' windows double up to
    READ_AHEAD_MAX, so the fills are few (not one per page) and never more than the window
    past the page the walk reached."""
    pages = 4 * READ_AHEAD_MAX + 8
    f = buffer_filler(np.dtype(np.uint8), pages * 4096, "random", 2, "in")
    mem = GlobalMemory([("in", f)])
    base = np.int64(GLOBAL_BASE)
    fills = 0
    for p in range(pages):
        before = mem.pages_made
        mem.translate(np.array([base + 4096 * p], dtype=np.int64), 1)
        if mem.pages_made != before:
            fills += 1
            assert mem.pages_made - before <= 1 + READ_AHEAD_MAX
            assert mem.pages_made <= p + 1 + READ_AHEAD_MAX
    assert mem.pages_made == pages
    assert fills <= 12  # 1, 1, 2, 3, 5, 9, 17, 33, 65, 65, ... pages a fill


def test_pages_of_a_poisoned_output_are_filled_at_once() -> None:
    """Scattered pages of a uniform source (a poisoned output) are filled in one assignment:
    0xFF bytes, the pages marked made, the other buffer's pages from their own source."""
    n = 1 << 16  # 64 KiB of float32 each: 64 pages
    f = buffer_filler(np.dtype(np.float32), n, "random", 3, "in")
    out = buffer_filler(np.dtype(np.float32), n, "random", 3, "out", poisoned=True)
    assert out.uniform_byte == 0xFF and f.uniform_byte is None
    mem = GlobalMemory([("in", f), ("out", out)])
    o = mem.by_name["out"]
    i = mem.by_name["in"]
    addr = np.array(
        [o.base + 4096 * k + 8 for k in (1, 5, 9, 40)] + [i.base + 4096 * 3], dtype=np.int64
    )
    offs, bad = mem.translate(addr, 4)
    assert bad is None and mem.pages_made == 5
    heap = mem.views[1]
    for k in (1, 5, 9, 40):
        start = o.start + 4096 * k
        assert (heap[start : start + 4096] == 0xFF).all()
    assert (heap[o.start + 4096 * 2 : o.start + 4096 * 3] == 0).all()  # not made
    got = mem.views[4][int(offs[-1]) >> 2]
    assert got == f.elements(3 * 1024, 3 * 1024 + 1).view(np.uint32)[0]


def test_a_buffer_made_in_threads_is_the_stream_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """make_host_buffer fills its chunks in threads: the bytes are the stream's, in order, as a
    single call of the filler gives them (here 10 chunks and a partial one, 4 threads)."""
    from gpuadvise.runner import data

    monkeypatch.setattr(data, "_CHUNK_ELEMENTS", 1000)
    monkeypatch.setattr(data, "_FILL_THREADS", 4)
    monkeypatch.setattr(data.os, "cpu_count", lambda: 4)
    f = buffer_filler(np.dtype(np.float32), 10_500, "random", 5, "in")
    got = make_host_buffer(np.dtype(np.float32), 10_500, "random", 5, "in")
    assert np.array_equal(got, f.elements(0, 10_500))


def test_a_buffer_is_made_in_as_many_threads_as_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """One thread per CPU (up to ``_FILL_THREADS``) when their chunks' temporaries fit in the
    memory budget, fewer down to one when not (never refused where four threads, the old
    count, fitted); the bytes are the same with any count."""
    from gpuadvise.runner import data
    from gpuadvise.spec.budget import TooLargeError

    monkeypatch.setattr(data, "_CHUNK_ELEMENTS", 1000)
    monkeypatch.setattr(data.os, "cpu_count", lambda: 16)
    per_chunk = 1000 * 8 * data._PEAK_FACTOR
    asked: list[int] = []

    def fits(need: int, what: str, hint: str) -> None:
        chunks = (need - 10_500 * 4) // per_chunk
        asked.append(chunks)
        if chunks > 4:
            raise TooLargeError("too much", hint)

    monkeypatch.setattr(data, "check_fits", fits)
    used: list[int | None] = []
    real = data.BufferFiller.array

    def array(self: Any, threads: int | None = None) -> np.ndarray:
        used.append(threads)
        return real(self, threads)

    monkeypatch.setattr(data.BufferFiller, "array", array)
    got = make_host_buffer(np.dtype(np.float32), 10_500, "random", 5, "in")
    assert asked == [11, 8, 4] and used == [4]
    f = buffer_filler(np.dtype(np.float32), 10_500, "random", 5, "in")
    assert np.array_equal(got, f.elements(0, 10_500))


def test_counter_words_equal_a_fresh_generator_in_any_thread() -> None:
    """``counter_words`` sets one generator per thread to each slice's state: the words of a
    Philox generator made for that slice, in any order of keys and counters, in several threads
    at once."""
    import random
    import threading

    from gpuadvise.runner.data import counter_words

    def fresh(start: int, stop: int, key: int) -> np.ndarray:
        block = start >> 2
        gen = np.random.Philox(key=key, counter=block)
        return gen.random_raw(stop - start + start - 4 * block)[start - 4 * block :]

    errors: list[tuple[int, int, int]] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            key = rng.choice([0, 1, (1 << 64) - 1, rng.getrandbits(64)])
            start = rng.choice(
                [0, 3, rng.randrange(1 << 20), rng.getrandbits(62), (1 << 66) - 8, (1 << 66) + 4]
            )
            n = rng.choice([0, 1, 5, 1024, rng.randrange(3000)])
            if not np.array_equal(
                counter_words(start, start + n, key), fresh(start, start + n, key)
            ):
                errors.append((key, start, n))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work(99)
    assert not errors


def test_pages_known_filled_change_no_access() -> None:
    """GlobalMemory's range of pages an access found filled (``_known``, kept across accesses:
    a page once filled stays so) gives the offsets, the fills and the bytes that checking the
    pages at every access gives, on a walk that comes back to the pages it filled."""
    n = 1 << 18  # 1 MiB of float32: 256 pages
    mems = [
        GlobalMemory([("in", buffer_filler(np.dtype(np.float32), n, "random", 3, "in"))])
        for _ in range(2)
    ]
    rng = np.random.default_rng(11)
    start, hits = n // 2, 0
    for _ in range(3000):
        start = int(np.clip(start + rng.integers(-3000, 3000), 0, n - 1))
        lanes = np.arange(int(rng.integers(1, 33))) * int(rng.choice([1, 2, 64, 1024]))
        addr = np.int64(GLOBAL_BASE) + np.minimum(start + lanes, n - 1).astype(np.int64) * 4
        known = mems[0]._known
        mems[1]._known = (1, 0)  # forgotten: every access checks its pages again
        got = [
            m.in_one_buffer(addr, int(addr.min()), int(addr.max()), 4, aligned=True) for m in mems
        ]
        assert got[0] is not None and got[1] is not None
        assert np.array_equal(got[0], got[1])
        p0, p1 = (got[0].min() >> 12, got[0].max() >> 12)
        hits += known[0] <= p0 and p1 <= known[1]
    assert mems[0].pages_made == mems[1].pages_made
    assert np.array_equal(mems[0]._filled, mems[1]._filled)
    assert mems[0].heap.tobytes() == mems[1].heap.tobytes()
    assert hits > 100  # the known range answered many accesses


@pytest.mark.parametrize(("dt", "fill"), [*CASES, (np.dtype(np.int64), "random(-9,9)")], ids=str)
def test_many_ranges_at_once_equal_one_range_at_a_time(dt: np.dtype, fill: str) -> None:
    """``bytes_runs`` gives each range's bytes as ``bytes_at`` does, laid end to end: ranges
    within elements, across them, overlapping, empty and to the buffer's end."""
    f = buffer_filler(dt, 5000, fill, 7, "x")
    rng = np.random.default_rng(5)
    for _ in range(20):
        los = np.sort(rng.integers(0, f.nbytes, int(rng.integers(0, 12))))
        his = np.minimum(los + rng.integers(0, 9000, len(los)), f.nbytes)
        want = b"".join(f.bytes_at(int(a), int(b)).tobytes() for a, b in zip(los, his, strict=True))
        assert f.bytes_runs(los, his).tobytes() == want
    whole = np.arange(0, f.nbytes, 4096, dtype=np.int64)  # pages: whole elements or not
    ends = np.minimum(whole + 4096, f.nbytes)
    assert f.bytes_runs(whole[::2], ends[::2]).tobytes() == b"".join(
        f.bytes_at(int(a), int(b)).tobytes() for a, b in zip(whole[::2], ends[::2], strict=True)
    )


class _OneRangeAtATime:
    """A lazy source without ``bytes_runs``: the memory asks it one range at a time."""

    def __init__(self, src: Any) -> None:
        self._src = src
        self.nbytes = src.nbytes

    def bytes_at(self, lo: int, hi: int) -> np.ndarray:
        return self._src.bytes_at(lo, hi)


def test_scattered_pages_filled_at_once_equal_the_fills_one_run_at_a_time() -> None:
    """Hundreds of scattered runs of pages in one access (a column walk over rows of 1.5 pages)
    fill the same pages with the same bytes, the read-ahead included, whether the source makes
    their ranges at once (``bytes_runs``) or one at a time."""
    n = 3 << 18  # 3 MiB of int32: 768 pages
    mems = [
        GlobalMemory(
            [
                ("a", src(buffer_filler(np.dtype(np.int32), n, "random(-5,5)", 3, "a"))),
                ("b", src(buffer_filler(np.dtype(np.float32), 1000, "random", 3, "b"))),
            ]
        )
        for src in (lambda s: s, _OneRangeAtATime)
    ]
    base = np.int64(GLOBAL_BASE)
    for step, count in ((1536, 500), (6144, 120), (4, 3000)):
        addr = base + np.arange(count, dtype=np.int64) * step * 4 % (n * 4)
        for m in mems:
            offs, bad = m.translate(addr, 4)
            assert bad is None
    assert mems[0].pages_made == mems[1].pages_made > 500
    assert np.array_equal(mems[0]._filled, mems[1]._filled)
    assert mems[0].heap.tobytes() == mems[1].heap.tobytes()
