"""gpuadvise.model.scan's look-backs computed with numpy over every event at once (issue 31: the
loop over one CTA's lane events took 136 s on HeCBench scan_bcao's 1.3 M events, 2.8 s now) give
what the loop over the events gave: on random event streams (vector loads, misaligned words,
double-buffered pairs, exchanges, loads after a thread's last store) and on kernels/scan's scans
emulated (the scans found, step by step)."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
from rulekit import KERNELS, analyze

from gpuadvise.model import scan as S
from gpuadvise.model.reduction import shared_lane_events
from gpuadvise.trace.access import WARP, Kind, Space


def reference_look_backs(
    thread: np.ndarray,
    kind: np.ndarray,
    byte_addr: np.ndarray,
    width: np.ndarray,
    epoch: np.ndarray,
    inst: np.ndarray,
) -> tuple[list[S._Look], dict[int, Counter[int]], dict[int, list[int]]]:
    """The loop the model ran before (gpuadvise 7ad78df), each thread's events in turn."""
    looks: list[S._Look] = []
    exchanges: dict[int, Counter[int]] = defaultdict(Counter)
    order = np.lexsort((np.arange(len(thread)), thread))
    pending: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    stored: set[tuple[int, int, int]] = set()
    store_epochs: dict[int, list[int]] = defaultdict(list)
    forward: list[tuple[int, int, int, int, int]] = []
    for i in order.tolist():
        t = int(thread[i])
        if kind[i] == Kind.LOAD:
            pending[t].append((int(byte_addr[i]), int(width[i]), int(epoch[i])))
            continue
        a, w, e = int(byte_addr[i]), int(width[i]), int(epoch[i])
        stored.add((t, e, a))
        store_epochs[a].append(e)
        loads = pending.pop(t, [])
        words = sorted({b + k for b, lw, _ in loads if lw % w == 0 for k in range(0, lw, w)} - {a})
        if a % w or not words or len(words) > 2 or any(b % w for b in words):
            continue
        le = min(le for _, _, le in loads)
        if len(words) == 2:
            lo, hi = words
            if a in (lo, hi) or hi - lo < w:
                continue
            looks.append(S._Look(t, e, le, a // w, (hi - lo) // w, hi // w, int(inst[i]), i, w))
        elif words[0] < a:
            b = words[0]
            looks.append(S._Look(t, e, le, a // w, (a - b) // w, a // w, int(inst[i]), i, w))
        else:
            forward.append((t, e, a, words[0], w))
    looks = [c for c in looks if (c.thread, c.epoch, (c.src - c.distance) * c.width) not in stored]
    for t, e, a, b, w in forward:
        if (t, e, b) in stored:
            exchanges[e][(b - a) // w] += 1
    return looks, exchanges, {b: sorted(es) for b, es in store_epochs.items()}


def random_events(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    threads = rng.integers(0, 24, n)
    kind = np.where(rng.random(n) < 0.55, int(Kind.LOAD), int(Kind.STORE))
    width = rng.choice([4, 4, 4, 8, 16, 2], n)
    addr = rng.integers(0, 48, n) * rng.choice([4, 4, 4, 2, 8], n)
    epoch = np.sort(rng.integers(0, 6, n))  # program order: epochs grow
    inst = rng.integers(0, 5, n)
    return threads, kind, addr, width, epoch, inst


def same(got: tuple, want: tuple) -> None:  # type: ignore[type-arg]
    looks, exchanges, epochs = got
    assert looks == want[0]
    assert {e: list(c.items()) for e, c in exchanges.items()} == {
        e: list(c.items()) for e, c in want[1].items()
    }
    assert epochs == want[2]


@pytest.mark.parametrize("seed", range(60))
def test_random_streams_give_the_loops_look_backs(seed):
    rng = np.random.default_rng(seed)
    ev = random_events(rng, int(rng.integers(1, 400)))
    same(S._look_backs(*ev), reference_look_backs(*ev))


def test_scan_shaped_streams_and_empty_ones():
    # Hillis-Steele in place over 64 threads, two barriers a step, a vector load's second word
    rows = []
    for t in range(64):
        rows.append((t, int(Kind.STORE), 4 * t, 4, 0, 1))
    e, d = 1, 1
    while d < 64:
        for t in range(64):
            rows.append((t, int(Kind.LOAD), 4 * t, 4, e, 2))
            if t >= d:
                rows.append((t, int(Kind.LOAD), 4 * (t - d), 4, e, 3))
            rows.append((t, int(Kind.STORE), 4 * t, 4, e + 1, 4))
        e, d = e + 2, 2 * d
    rows.append((3, int(Kind.LOAD), 0, 8, e, 5))  # after the thread's last store
    a = np.array(rows, np.int64)
    ev = (a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5])
    same(S._look_backs(*ev), reference_look_backs(*ev))
    empty = tuple(np.zeros(0, np.int64) for _ in range(6))
    assert S._look_backs(*empty) == ([], {}, {})
    loads = (np.arange(4), np.full(4, int(Kind.LOAD)), np.arange(4) * 4, np.full(4, 4),
             np.zeros(4, np.int64), np.zeros(4, np.int64))  # fmt: skip
    same(S._look_backs(*loads), reference_look_backs(*loads))


SCANS = KERNELS / "scan"
CASES = ["hillis_volatile", "hillis_tmpl<256>", "blelloch", "warp_scan_racy", "bitonic"]


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize("kernel", CASES)
def test_kernels_scans_as_the_loop_found_them(kernel, monkeypatch):
    trace = analyze(SCANS / "scans.cu", kernel, 2).memory.trace
    events = shared_lane_events(trace, None)
    assert events is not None
    c, r, sel, rec, lane = events
    # each event: its record's fields, its own lane's address (not the record's 32)
    shared = r[(r["space"] == int(Space.SHARED)) & (r["kind"] <= int(Kind.STORE))]
    assert len(sel) == len(rec) == len(lane) > 0 and sel.dtype.itemsize < 32
    assert (sel["addr"] == shared["addr"][rec, lane]).all()
    for name in ("inst", "warp", "mask", "width", "kind", "epoch"):
        assert (sel[name] == shared[name][rec]).all()
    ev = (
        sel["warp"].astype(np.int64) * WARP + lane,
        sel["kind"].astype(np.int64),
        sel["addr"].astype(np.int64),
        sel["width"].astype(np.int64),
        sel["epoch"].astype(np.int64),
        sel["inst"].astype(np.int64),
    )
    same(S._look_backs(*ev), reference_look_backs(*ev))
    got = S.shared_scans(trace)
    monkeypatch.setattr(S, "_look_backs", reference_look_backs)
    assert S.shared_scans(trace) == got
    assert (len(got) == 0) == (kernel == "bitonic")
