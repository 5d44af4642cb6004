"""gpuadvise.model.scan on synthetic shared-memory events (no compiler, no emulator): the scans
it finds (Hillis-Steele in place and double-buffered, Blelloch's up-sweep with its down-sweep, a
warp's scan with no barrier) and what it must not take for one (a tree reduction, a bitonic
sort's compare-and-swap, a two-point stencil)."""

from __future__ import annotations

import numpy as np

from gpuadvise.model.scan import scans_from_events
from gpuadvise.trace.access import Kind

W = 4  # bytes a word


class Events:
    """Each thread's shared accesses in program order: (thread, kind, word, epoch, inst)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, int]] = []

    def load(self, t: int, word: int, epoch: int, inst: int = 1) -> None:
        self.rows.append((t, int(Kind.LOAD), word, epoch, inst))

    def store(self, t: int, word: int, epoch: int, inst: int = 2) -> None:
        self.rows.append((t, int(Kind.STORE), word, epoch, inst))

    def scans(self, threads: int):  # type: ignore[no-untyped-def]
        a = np.array(self.rows, dtype=np.int64)
        return scans_from_events(
            a[:, 0], a[:, 1], a[:, 2] * W, np.full(len(a), W), a[:, 3], a[:, 4],
            cta=0, threads=threads, lines={1: ("k.cu", 10), 2: ("k.cu", 11), 3: ("k.cu", 12)},
        )  # fmt: skip


def hillis_padded(n: int) -> Events:
    """cuda-samples' scan1Inclusive: word n + t, a zero below, two barriers a step."""
    ev = Events()
    for t in range(n):
        ev.store(t, t, 0)
        ev.store(t, n + t, 0)
    e, d = 1, 1
    while d < n:
        for t in range(n):
            ev.load(t, n + t, e)
            ev.load(t, n + t - d, e)
            ev.store(t, n + t, e + 1)
        e, d = e + 2, 2 * d
    return ev


def test_hillis_steele_in_place_two_barriers_a_step():
    (s,) = hillis_padded(256).scans(256)
    assert s.kind == "hillis-steele" and s.runs == 1 and s.segments == 1
    assert [p.distance for p in s.steps] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert s.barriers == 16 and not s.warp_synchronous
    assert [p.distance for p in s.warp_steps] == [1, 2, 4, 8, 16]
    assert s.steps[0].lines == (("k.cu", 11),)


def test_hillis_steele_double_buffered_with_copies_in_between():
    ev = Events()
    n, src, dst = 64, 0, 64
    for t in range(n):
        ev.store(t, t, 0)
    e, d = 1, 1
    while d < n:
        for t in range(n):
            ev.load(t, src + t, e)
            if t >= d:
                ev.load(t, src + t - d, e)
            ev.store(t, dst + t, e)  # the copies (t < d) are look-backs of distance 64 or none
        src, dst, e, d = dst, src, e + 1, 2 * d
    (s,) = ev.scans(n)
    assert [p.distance for p in s.steps] == [1, 2, 4, 8, 16, 32]
    assert [p.active_threads for p in s.steps] == [63, 62, 60, 56, 48, 32]
    assert s.barriers == 6


def test_blelloch_up_and_down_sweep():
    ev = Events()
    n = 16  # threads; 32 words
    for t in range(n):
        ev.store(t, 2 * t, 0)
        ev.store(t, 2 * t + 1, 0)
    e, off, d = 1, 1, n
    while d > 0:
        for t in range(d):
            ai, bi = off * (2 * t + 1) - 1, off * (2 * t + 2) - 1
            ev.load(t, bi, e)
            ev.load(t, ai, e)
            ev.store(t, bi, e)
        e, off, d = e + 1, off * 2, d // 2
    d = 1
    while d < 2 * n:
        off //= 2
        for t in range(d):
            ai, bi = off * (2 * t + 1) - 1, off * (2 * t + 2) - 1
            ev.load(t, ai, e)
            ev.load(t, bi, e)
            ev.store(t, ai, e)
            ev.load(t, bi, e)
            ev.store(t, bi, e)
        e, d = e + 1, d * 2
    (s,) = ev.scans(n)
    assert s.kind == "work-efficient"
    assert [p.distance for p in s.steps] == [1, 2, 4, 8, 16]
    assert [p.active_threads for p in s.steps] == [16, 8, 4, 2, 1]
    assert s.down_steps == 5 and s.barriers == 10


def test_a_warps_scan_without_barriers_repeated():
    ev = Events()
    for run in range(3):
        e = 2 * run
        for t in range(64):  # two warps, each over its own 64-word window
            idx = 2 * t - (t & 31) + 32
            ev.store(t, idx - 32, e)
            ev.store(t, idx, e)
            for k, d in enumerate((1, 2, 4, 8, 16)):
                ev.load(t, idx, e)
                ev.load(t, idx - d, e)
                ev.store(t, idx, e, inst=10 + k)
    (s,) = ev.scans(64)
    assert s.warp_synchronous and s.segments == 2 and s.runs == 3 and s.barriers == 0


def test_a_tree_reduction_a_sort_and_a_stencil_are_no_scans():
    ev = Events()
    for t in range(64):
        ev.store(t, t, 0)
    e, s = 1, 32
    while s > 0:  # s[t] += s[t + s]: the word read lies above
        for t in range(s):
            ev.load(t, t, e)
            ev.load(t, t + s, e)
            ev.store(t, t, e)
        e, s = e + 1, s // 2
    assert ev.scans(64) == ()
    ev = Events()
    for t in range(32):
        ev.store(t, t, 0)
    e = 1
    for j in (1, 2, 4, 8, 16):  # compare-and-swap: the higher word stored first
        for t in range(32):
            p = t ^ j
            if p > t:
                ev.load(t, t, e)
                ev.load(t, p, e)
                ev.store(t, p, e)
                ev.store(t, t, e)
        e += 1
    assert ev.scans(32) == ()
    ev = Events()
    for t in range(32):
        ev.store(t, t, 0)
    for t in range(1, 32):  # out[t] = s[t] + s[t - 1], once
        ev.load(t, t, 1)
        ev.load(t, t - 1, 1)
        ev.store(t, 64 + t, 1)
    assert ev.scans(32) == ()
