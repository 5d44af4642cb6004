"""gpuadvise.model.reduction: trees that fold towards their highest word (``s[t] += s[t - d]``,
the result in ``s[N - 1]``) from hand-made lane events: read mirrored, kept when interleaved and
no exchange follows them (a Blelloch up-sweep followed by its down-sweep is a scan, GA209's; a
Hillis-Steele scan's steps fold downwards too but are no tree)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.reduction import trees_from_events
from gpuadvise.trace.access import Kind

N = 256


def _fill(ev: list[tuple[int, int, int, int, int, int]]) -> None:
    for t in range(N):
        ev.append((t, Kind.STORE, 4 * t, 4, 0, 0))


def _trees(ev: list[tuple[int, int, int, int, int, int]]):
    t, k, a, w, e, i = (np.array(c, dtype=np.int64) for c in zip(*ev, strict=True))
    lines = {0: ("k.cu", 10), 1: ("k.cu", 12), 2: ("k.cu", 12), 3: ("k.cu", 20)}
    return trees_from_events(t, k, a, w, e, i, cta=0, threads=N, lines=lines,
                             global_load_bytes={0: 4 * N})  # fmt: skip


def _upward(ev, strided: bool, wide_first: bool = False) -> int:
    """Rodinia's ``(t+1) % (2d) == 0`` (scattered threads) or the packed threads of a strided
    index ``bi = (2t+2)d - 1``; each step in an epoch of its own. ``wide_first``: the first
    step loads its two words with one 8-byte load. The last epoch."""
    epoch, d = 1, 1
    while d < N:
        for t in range(N):
            a = (2 * t + 2) * d - 1 if strided else t
            if (a < N) if strided else ((t + 1) % (2 * d) == 0):
                if wide_first and d == 1:
                    ev.append((t, Kind.LOAD, 4 * (a - 1), 8, epoch, 1))
                else:
                    ev += [
                        (t, Kind.LOAD, 4 * a, 4, epoch, 1),
                        (t, Kind.LOAD, 4 * (a - d), 4, epoch, 1),
                    ]
                ev.append((t, Kind.STORE, 4 * a, 4, epoch, 2))
        epoch, d = epoch + 1, 2 * d
    return epoch - 1


def test_rodinia_tree_is_a_mirrored_interleaved_tree():
    ev: list = []
    _fill(ev)
    _upward(ev, strided=False)
    (tree,) = _trees(ev)
    assert tree.mirrored and tree.direction == "doubling" and tree.pattern == "interleaved"
    assert [p.distance for p in tree.phases] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert [p.active_threads for p in tree.phases] == [128, 64, 32, 16, 8, 4, 2, 1]
    assert [p.warps for p in tree.phases] == [8, 8, 8, 8, 8, 4, 2, 1]  # scattered
    assert tree.phases[0].scattered and tree.base == 0
    assert tree.fill_threads == N and tree.fill_lines == (("k.cu", 10),)
    assert tree.warp_iterations() == 47


def test_strided_up_sweep_with_a_wide_first_load_is_packed():
    ev: list = []
    _fill(ev)
    _upward(ev, strided=True, wide_first=True)
    (tree,) = _trees(ev)
    assert tree.mirrored and tree.pattern == "interleaved"
    assert [p.distance for p in tree.phases][:2] == [1, 2]  # the 8-byte load read as two words
    assert [p.warps for p in tree.phases][:3] == [4, 2, 1]
    assert not any(p.scattered for p in tree.phases)


@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_up_sweep_followed_by_a_down_sweep_is_a_scan_not_a_tree(padded):
    """Padded (word ``i`` at ``i + i // 32``, as GPU Gems' bank-conflict avoidance), the
    up-sweep's distances run 1..16 and then 33, 66: the doubling part alone is no tree either."""
    ev: list = []
    _fill(ev)
    epoch = _upward(ev, strided=True) + 1
    d = N // 2
    while d >= 1:  # t = s[ai]; s[ai] = s[bi]; s[bi] += t
        for t in range(N // (2 * d)):
            ai, bi = (2 * t + 1) * d - 1, (2 * t + 2) * d - 1
            ev += [(t, Kind.LOAD, 4 * ai, 4, epoch, 3), (t, Kind.LOAD, 4 * bi, 4, epoch, 3)]
            ev += [(t, Kind.STORE, 4 * ai, 4, epoch, 3), (t, Kind.STORE, 4 * bi, 4, epoch, 3)]
        epoch, d = epoch + 1, d // 2
    if padded:
        ev = [(t, k, b + 4 * (b // 128), w, e, i) for t, k, b, w, e, i in ev]
    assert _trees(ev) == ()


def test_hillis_steele_scan_is_no_tree():
    ev: list = []
    _fill(ev)
    epoch, d = 1, 1
    while d < N:
        for t in range(d, N):
            ev += [(t, Kind.LOAD, 4 * t, 4, epoch, 1), (t, Kind.LOAD, 4 * (t - d), 4, epoch, 1)]
            ev.append((t, Kind.STORE, 4 * t, 4, epoch + 1, 2))
        epoch, d = epoch + 2, 2 * d
    assert _trees(ev) == ()


def test_top_sequential_fold_is_left_alone():
    """The top d threads add the d words below them (sequential, packed): not interleaved."""
    ev: list = []
    _fill(ev)
    epoch, d = 1, N // 2
    while d >= 1:
        for t in range(N - d, N):
            ev += [(t, Kind.LOAD, 4 * t, 4, epoch, 1), (t, Kind.LOAD, 4 * (t - d), 4, epoch, 1)]
            ev.append((t, Kind.STORE, 4 * t, 4, epoch, 2))
        epoch, d = epoch + 1, d // 2
    assert _trees(ev) == ()
