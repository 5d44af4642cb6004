"""gpuadvise.model.reduction's combines and fills computed with numpy over every event at once
(issue 31: the loop over one CTA's lane events took 14 s of CPU (48 s profiled) on HeCBench
scan_bcao's 1.3 M events) give what the loop over the events gave: on random event streams
(mixed widths, misaligned words, loads after a thread's last store, exchanges), on reduction
trees with noise, and on the kernels/ reductions emulated (the trees found, phase by phase)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from rulekit import KERNELS, analyze

from gpuadvise.model import reduction as R
from gpuadvise.trace.access import Kind

Fill = tuple[int, int, int, int, int, int]


def reference_combines_and_fills(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
) -> tuple[list[R._Combine], list[Fill]]:
    """The loop the model ran before (gpuadvise 7f47cdb), each thread's events in turn."""
    combines: list[R._Combine] = []
    fills: list[Fill] = []  # thread, epoch, byte, width, order, inst
    order = np.lexsort((np.arange(len(thread)), thread))
    pending: dict[int, list[tuple[int, int]]] = defaultdict(list)  # thread -> [(byte, width)]
    stored: set[tuple[int, int, int]] = set()  # (thread, epoch, byte) of every store
    for i in order.tolist():
        t = int(thread[i])
        if kind[i] == Kind.LOAD:
            pending[t].append((int(byte_addr[i]), int(width[i])))
            continue
        a, w = int(byte_addr[i]), int(width[i])
        stored.add((t, int(epoch[i]), a))
        loads = pending.pop(t, [])
        others = {b for b, lw in loads if lw == w and b != a}
        if not loads:
            fills.append((t, int(epoch[i]), a, w, i, int(inst[i])))
        if len(others) == 1:
            (b,) = others
            if b > a and (b - a) % w == 0 and a % w == 0:
                combines.append(
                    R._Combine(t, int(epoch[i]), a // w, (b - a) // w, int(inst[i]), i, w)
                )
    combines = [
        c for c in combines if (c.thread, c.epoch, (c.word + c.distance) * c.width) not in stored
    ]
    return combines, fills


def random_events(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    threads = rng.integers(0, 24, n)
    kind = np.where(rng.random(n) < 0.6, int(Kind.LOAD), int(Kind.STORE))
    width = rng.choice([4, 4, 4, 8, 16, 2], n)
    addr = rng.integers(0, 24, n) * rng.choice([4, 4, 4, 2, 8], n)
    epoch = np.sort(rng.integers(0, 6, n))  # program order: epochs grow
    inst = rng.integers(0, 5, n)
    return threads, kind, addr, width, epoch, inst


def tree_events(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A block's reduction (halving or doubling, a warp-synchronous tail or not, some threads'
    steps exchanges instead), with random loads and stores of noise, and the events of the
    threads interleaved as warps would run them."""
    threads = int(rng.choice([32, 64, 128, 256]))
    halving = bool(rng.random() < 0.5)
    swap = rng.random(threads) < rng.choice([0.0, 0.0, 0.1])
    tail_from = int(rng.choice([0, 64]))
    ev: list[tuple[int, int, int, int, int, int]] = []  # thread, kind, byte, width, epoch, inst
    for t in range(threads):
        if rng.random() < 0.2:  # s[t] = 0 first
            ev.append((t, int(Kind.STORE), 4 * t, 4, 0, 7))
        if rng.random() < 0.9:
            ev.append((t, int(Kind.STORE), 4 * t, 4, 0, 0))
    epoch = 1
    ds = [threads >> k for k in range(1, threads.bit_length())]
    for d in ds if halving else ds[::-1]:
        for t in range(threads):
            a = t if halving else 2 * d * t
            if (t < d or (d < tail_from and t < 32)) if halving else a + d < threads:
                ev += [(t, int(Kind.LOAD), 4 * a, 4, epoch, 1),
                       (t, int(Kind.LOAD), 4 * (a + d), 4, epoch, 1),
                       (t, int(Kind.STORE), 4 * a, 4, epoch, 2)]  # fmt: skip
                if swap[t]:
                    ev.append((t, int(Kind.STORE), 4 * (a + d), 4, epoch, 3))
            if rng.random() < 0.02:  # noise
                ev.append((t, int(rng.choice([Kind.LOAD, Kind.STORE])),
                           int(rng.integers(0, 4 * threads)), int(rng.choice([2, 4, 8])), epoch,
                           int(rng.integers(4, 7))))  # fmt: skip
        if not d <= tail_from // 2:
            epoch += 1
    a = np.array(ev, np.int64)
    # warps run in turn: a stable sort by epoch then warp keeps each thread's program order
    a = a[np.lexsort((a[:, 0] // 32, a[:, 4]))]
    return a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5]


def trees(ev: tuple[np.ndarray, ...], threads: int) -> tuple[R.ReductionTree, ...]:
    lines = {i: ("k.cu", 10 + i) for i in range(8)}
    return R.trees_from_events(*ev, cta=0, threads=threads, lines=lines,
                               global_load_bytes={0: 4 * threads, 2: 64})  # fmt: skip


def same_trees(ev: tuple[np.ndarray, ...], threads: int, monkeypatch: pytest.MonkeyPatch) -> int:
    got = trees(ev, threads)
    with monkeypatch.context() as m:
        m.setattr(R, "_combines_and_fills", reference_combines_and_fills)
        assert trees(ev, threads) == got
    return len(got)


@pytest.mark.parametrize("seed", range(60))
def test_random_streams_give_the_loops_combines_and_fills(seed):
    rng = np.random.default_rng(seed)
    ev = random_events(rng, int(rng.integers(1, 400)))
    assert R._combines_and_fills(*ev) == reference_combines_and_fills(*ev)


def test_empty_and_load_only_streams():
    empty = tuple(np.zeros(0, np.int64) for _ in range(6))
    assert R._combines_and_fills(*empty) == ([], [])
    loads = (np.arange(4), np.full(4, int(Kind.LOAD)), np.arange(4) * 4, np.full(4, 4),
             np.zeros(4, np.int64), np.zeros(4, np.int64))  # fmt: skip
    assert R._combines_and_fills(*loads) == ([], [])


@pytest.mark.parametrize("seed", range(40))
def test_reduction_streams_give_the_loops_trees(seed, monkeypatch):
    rng = np.random.default_rng(1000 + seed)
    ev = tree_events(rng)
    assert R._combines_and_fills(*ev) == reference_combines_and_fills(*ev)
    same_trees(ev, int(ev[0].max()) + 1, monkeypatch)


def test_tree_streams_find_trees(monkeypatch):
    """The generated reductions are trees (the comparison above is not of empty results)."""
    found = [same_trees(tree_events(np.random.default_rng(1000 + s)), 256, monkeypatch)
             for s in range(40)]  # fmt: skip
    assert sum(n > 0 for n in found) >= 20


CASES = [
    ("reduction/reduce.cu", "reduce1"),
    ("reduction/reduce.cu", "reduce3"),
    ("reduction/reduce.cu", "reduce5"),
    ("reduction/reduce.cu", "reduce6<256>"),
    ("tree_tails/trees.cu", "top_barrier_signed"),
    ("tree_tails/trees.cu", "per_row_tmpl<256>"),
    ("tree_tails/trees.cu", "per_vector_cg"),
    ("styles/reductions/reductions.cu", "tail_helper"),
    ("bank1d/scan.cu", "scan_macro"),
]


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize(("source", "kernel"), CASES)
def test_kernels_trees_as_the_loop_found_them(source, kernel, monkeypatch):
    trace = analyze(KERNELS / source, kernel, 2).memory.trace
    got = {c: R.reduction_trees(trace, c) for c in sorted(trace.ctas)}
    with monkeypatch.context() as m:
        m.setattr(R, "_combines_and_fills", reference_combines_and_fills)
        assert {c: R.reduction_trees(trace, c) for c in sorted(trace.ctas)} == got
    assert all(got.values()) == (kernel != "scan_macro")  # a scan has no tree
