"""gpuadvise.model.reduction: trees from hand-made lane events (exact phases) and from the
emulator's trace of seed 003's reductions and kernels in other spellings."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.reduction import reduction_trees, trees_from_events
from gpuadvise.trace.access import Kind


def _events(threads: int, interleaved: bool, tail_from: int = 0):
    """A block of ``threads`` 4-byte words: every thread fills its word (epoch 0), then each
    step combines in an epoch of its own (steps at distance < ``tail_from`` share one)."""
    ev = []  # thread, kind, byte, epoch, inst
    for t in range(threads):
        ev.append((t, Kind.STORE, 4 * t, 0, 0))
    epoch = 1
    if interleaved:
        ds = [1 << k for k in range(threads.bit_length() - 1)]
    else:
        ds = [threads >> k for k in range(1, threads.bit_length())]
    for d in ds:
        for t in range(threads):
            a = 2 * d * t if interleaved else t
            if (a + d < threads) if interleaved else (t < d or (d < tail_from and t < 32)):
                ev += [(t, Kind.LOAD, 4 * a, epoch, 1), (t, Kind.LOAD, 4 * (a + d), epoch, 1)]
                ev.append((t, Kind.STORE, 4 * a, epoch, 2))
        if not (d <= tail_from // 2):
            epoch += 1
    cols = list(zip(*ev, strict=True))
    return [np.array(c, dtype=np.int64) for c in cols]


def _trees(threads: int, interleaved: bool, tail_from: int = 0):
    t, k, a, e, i = _events(threads, interleaved, tail_from)
    lines = {0: ("k.cu", 10), 1: ("k.cu", 12), 2: ("k.cu", 12)}
    return trees_from_events(
        t, k, a, np.full(len(t), 4), e, i, cta=0, threads=threads, lines=lines,
        global_load_bytes={0: 4 * threads},
    )  # fmt: skip


def test_sequential_tree_exact_phases():
    (tree,) = _trees(256, interleaved=False)
    assert tree.direction == "halving" and tree.pattern == "sequential"
    assert [p.distance for p in tree.phases] == [128, 64, 32, 16, 8, 4, 2, 1]
    assert [p.active_threads for p in tree.phases] == [128, 64, 32, 16, 8, 4, 2, 1]
    assert [p.warps for p in tree.phases] == [4, 2, 1, 1, 1, 1, 1, 1]
    assert all(p.contiguous and not p.scattered for p in tree.phases)
    assert tree.fill_threads == 256 and tree.idle_first_phase == 128
    assert tree.first_phase_utilisation == 0.5 and tree.fill_elements_per_thread == 1.0
    assert tree.warp_synchronous_tail == () and tree.last_distance == 1
    assert tree.lines == (("k.cu", 12),) and tree.fill_lines == (("k.cu", 10),)


def test_interleaved_tree_is_doubling_with_strided_words():
    (tree,) = _trees(256, interleaved=True)
    assert tree.direction == "doubling" and tree.pattern == "interleaved"
    assert [p.distance for p in tree.phases] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert [p.active_threads for p in tree.phases] == [128, 64, 32, 16, 8, 4, 2, 1]
    # thread t combines word 2*d*t: packed threads, words 2d apart
    assert tree.phases[0].contiguous and tree.phases[0].pattern == "interleaved"


def test_warp_synchronous_tail_is_the_steps_after_the_last_barrier():
    (tree,) = _trees(256, interleaved=False, tail_from=64)
    tail = tree.warp_synchronous_tail
    assert [p.distance for p in tail] == [32, 16, 8, 4, 2, 1]
    assert [p.active_threads for p in tail] == [32] * 6
    assert tail[0].barrier_before and not any(p.barrier_before for p in tail[1:])
    assert all(p.pattern == "sequential" for p in tail)


def test_a_scan_and_single_steps_are_not_trees():
    # Hillis-Steele: s[t] += s[t - d] (the second word below the first): no combine
    ev = [(t, Kind.STORE, 4 * t, 0, 0) for t in range(64)]
    for e, d in enumerate((1, 2, 4, 8), start=1):
        for t in range(d, 64):
            ev += [(t, Kind.LOAD, 4 * (t - d), e, 1), (t, Kind.STORE, 4 * t, e, 2)]
    t, k, a, ep, i = (np.array(c, dtype=np.int64) for c in zip(*ev, strict=True))
    assert trees_from_events(t, k, a, np.full(len(t), 4), ep, i, cta=0, threads=64, lines={}) == ()


def test_fill_lines_are_the_stores_the_tree_reads():
    """``s[t] = 0;`` (inst 3, line 9) then ``s[t] = in[i];`` (inst 0, line 10): the tree reads
    the second store of each word, so the fill is line 10 alone."""
    t, k, a, e, i = _events(64, interleaved=False)
    zero = (
        np.arange(64),
        np.full(64, int(Kind.STORE)),
        4 * np.arange(64),
        np.zeros(64),
        np.full(64, 3),
    )
    cols = [
        np.concatenate([z.astype(np.int64), c]) for z, c in zip(zero, (t, k, a, e, i), strict=True)
    ]
    lines = {0: ("k.cu", 10), 1: ("k.cu", 12), 2: ("k.cu", 12), 3: ("k.cu", 9)}
    (tree,) = trees_from_events(
        *cols[:3], np.full(len(cols[0]), 4), *cols[3:], cta=0, threads=64, lines=lines
    )
    assert tree.fill_threads == 64 and tree.fill_lines == (("k.cu", 10),)


def test_call_sites_name_the_kernel_line_a_helper_is_called_from():
    t, k, a, e, i = _events(64, interleaved=False, tail_from=64)
    lines = {0: ("k.cu", 10), 1: ("k.cu", 3), 2: ("k.cu", 3)}
    (tree,) = trees_from_events(
        t, k, a, np.full(len(t), 4), e, i, cta=0, threads=64, lines=lines,
        call_sites={1: ("k.cu", 20), 2: ("k.cu", 20)},
    )  # fmt: skip
    assert all(p.lines == (("k.cu", 3),) for p in tree.phases)
    assert all(p.call_sites == (("k.cu", 20),) for p in tree.phases)
    (plain,) = _trees(64, interleaved=False)  # no call sites: each store's own line
    assert all(p.call_sites == p.lines for p in plain.phases)


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize(
    ("kernel", "pattern", "first", "per_thread", "tail", "last"),
    [
        ("reduce1", "interleaved", 1, 1.0, 0, 128),
        ("reduce2", "interleaved", 1, 1.0, 0, 128),
        ("reduce3", "sequential", 128, 1.0, 0, 1),
        ("reduce4", "sequential", 128, 2.0, 0, 1),
        ("reduce5", "sequential", 128, 2.0, 6, 1),
        ("reduce6<256>", "sequential", 128, 2.0, 0, 64),  # the rest in shuffles
    ],
)
def test_emulated_seed_reductions(kernel, pattern, first, per_thread, tail, last):
    from rulekit import KERNELS, analyze

    a = analyze(KERNELS / "reduction" / "reduce.cu", kernel, sample_ctas=1)
    (tree,) = reduction_trees(a.memory.trace)
    assert tree.pattern == pattern and tree.phases[0].distance == first
    assert tree.fill_elements_per_thread == per_thread and tree.fill_threads == 256
    assert len(tree.warp_synchronous_tail) == tail and tree.last_distance == last
    if kernel == "reduce1":  # tid % (2*s): the active threads scattered over all 8 warps
        assert [p.warps for p in tree.phases[:3]] == [8, 8, 8] and tree.phases[0].scattered


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_gpu_traces_give_no_trees():
    import dataclasses

    from rulekit import KERNELS, analyze

    a = analyze(KERNELS / "reduction" / "reduce.cu", "reduce3", sample_ctas=1)
    assert reduction_trees(dataclasses.replace(a.memory.trace, source="gpu")) == ()


def _run(ev, threads):
    t, k, a, e, i = (np.array(c, dtype=np.int64) for c in zip(*ev, strict=True))
    return trees_from_events(
        t, k, a, np.full(len(t), 4), e, i, cta=0, threads=threads, lines={}
    )  # fmt: skip


def test_an_exchange_is_not_a_combine():
    """A sort's compare-and-swap loads words A and A + d and stores both: no tree, even where
    the steps nest as a reduction's do; the same steps storing only A are a tree."""
    tree_ev = [(t, Kind.STORE, 4 * t, 0, 0) for t in range(64)]
    swap_ev = list(tree_ev)
    for epoch, d in enumerate((32, 16, 8, 4, 2, 1), start=1):
        for t in range(d):
            step = [(t, Kind.LOAD, 4 * t, epoch, 1), (t, Kind.LOAD, 4 * (t + d), epoch, 1),
                    (t, Kind.STORE, 4 * t, epoch, 2)]  # fmt: skip
            tree_ev += step
            swap_ev += [*step, (t, Kind.STORE, 4 * (t + d), epoch, 3)]
    assert len(_run(tree_ev, 64)) == 1
    assert _run(swap_ev, 64) == ()


def test_trees_side_by_side_per_warp_are_sequential_segments():
    """Eight warps each reduce their own 32 words (distances 16 .. 1): one halving tree of 8
    segments, sequential (not interleaved although its words are 2d-periodic)."""
    ev = [(t, Kind.STORE, 4 * t, 0, 0) for t in range(256)]
    for epoch, d in enumerate((16, 8, 4, 2, 1), start=1):
        for t in range(256):
            if t % 32 < d:
                ev += [(t, Kind.LOAD, 4 * t, epoch, 1), (t, Kind.LOAD, 4 * (t + d), epoch, 1),
                       (t, Kind.STORE, 4 * t, epoch, 2)]  # fmt: skip
    (tree,) = _run(ev, 256)
    assert tree.direction == "halving" and tree.pattern == "sequential"
    assert tree.segments == 8 and tree.per_warp
    assert [p.active_threads for p in tree.phases] == [128, 64, 32, 16, 8]
    assert [tree.segment_threads(p) for p in tree.phases] == [16, 8, 4, 2, 1]


def test_a_step_must_fold_what_the_previous_step_wrote():
    """Two halving steps over words the first did not write are two trees' worth of single
    steps, not one tree: the partial results must flow."""
    ev = [(t, Kind.STORE, 4 * t, 0, 0) for t in range(64)]
    for t in range(16):  # distance 16 over words 0..31: writes 0..15
        ev += [(t, Kind.LOAD, 4 * t, 1, 1), (t, Kind.LOAD, 4 * (t + 16), 1, 1),
               (t, Kind.STORE, 4 * t, 1, 2)]  # fmt: skip
    for t in range(8):  # distance 8 over words 16..31, which the first step did not write
        w = 16 + t
        ev += [(t, Kind.LOAD, 4 * w, 2, 1), (t, Kind.LOAD, 4 * (w + 8), 2, 1),
               (t, Kind.STORE, 4 * w, 2, 2)]  # fmt: skip
    assert _run(ev, 64) == ()
