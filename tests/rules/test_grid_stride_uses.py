"""gpuadvise.rules.grid_stride.buffer_uses (GA206's trace facts, no nvcc): each buffer's facts
from its distinct (thread, element) and (CTA, element) pairs, checked against the same facts
computed question by question (``np.unique`` of each column, a ``lexsort`` for the CTAs'
ranges) on views of random and of laid-out lanes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gpuadvise.rules.grid_stride import BufferUse, _cta_step, _disjoint_step, buffer_uses
from gpuadvise.trace.access import Kind
from gpuadvise.trace.view import BufferInfo, Lanes


def _reference(view: SimpleNamespace) -> list[BufferUse]:
    """buffer_uses as it was written before issue 31's cut: a sort per question."""
    lanes, lb = view.lanes, view.lane_buffer
    kinds = view.records["kind"][lanes.rec].astype(np.int64)
    out = []
    for b, name in enumerate(view.buffer_names):
        m = lb == b
        if not m.any():
            continue
        eb = max(int(view.buffers[name].elem_bytes), 1)
        elem = lanes.off[m] // eb
        cta = lanes.cta[m]
        thread = (cta.astype(np.int64) << 20) | lanes.tid[m]
        pairs = np.unique(np.stack([thread, elem]), axis=1)
        _, counts = np.unique(pairs[0], return_counts=True)
        order = np.lexsort((elem, cta))
        c = cta[order]
        first = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
        last = np.r_[first[1:], len(c)] - 1
        e = elem[order].astype(np.int64)
        dense, lo, hi = c[first], e[first], e[last]
        ids = view.ctas[dense].astype(np.int64)
        step = _cta_step(ids, lo, hi)
        if step == 0 and len(dense) >= 2:
            step = _disjoint_step(ids, np.searchsorted(dense, cta), elem, lanes.inst[m])
        writes = kinds[m] != int(Kind.LOAD)
        owners = np.unique(np.stack([elem, cta.astype(np.int64)]), axis=1)
        _, per = np.unique(owners[1], return_counts=True)
        disjoint = len(dense) >= 2 and len(np.unique(owners[0])) == owners.shape[1]
        out.append(
            BufferUse(
                name,
                int(counts.max()),
                step,
                bool(np.any(writes)),
                bool(np.any(writes)) and bool(np.all(kinds[m][writes] >= int(Kind.ATOMIC))),
                int(per.max()) if disjoint else 0,
                int(view.buffers[name].count),
            )
        )
    return out


def _view(cta: np.ndarray, tid: np.ndarray, elem: np.ndarray, buf: np.ndarray, kind: np.ndarray):
    n = len(cta)
    names = ["a", "b", "c"]
    infos = {x: BufferInfo(x, 0, 4 << 20, 4, 1 << 20, "float", False) for x in names}
    records = np.zeros(n, dtype=[("kind", np.uint8)])
    records["kind"] = kind
    lanes = Lanes(
        np.arange(n, dtype=np.int32),
        (buf * 2 + (kind != int(Kind.LOAD))).astype(np.int32),
        cta.astype(np.int32),
        tid.astype(np.int32),
        elem.astype(np.int64) * 4,
        np.full(n, 4, np.int32),
    )
    ctas = np.arange(int(cta.max()) + 1, dtype=np.int64)
    return SimpleNamespace(
        lanes=lanes,
        lane_buffer=buf.astype(np.int32),
        records=records,
        buffer_names=names,
        buffers=infos,
        ctas=ctas,
    )


@pytest.mark.parametrize("seed", range(6))
def test_buffer_uses_as_the_sort_per_question(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ctas, threads, per = 5, 64, 3
    # laid out: CTA c's thread t touches elements (3 c + k) * 64 + t of buffer a (disjoint,
    # one range per CTA a whole step apart), a random element of b (shared), its CTA's slot of
    # c (one element per CTA, written); some of a's middle lanes dropped at random
    cta = np.repeat(np.arange(ctas), threads * per)
    tid = np.tile(np.repeat(np.arange(threads), per), ctas)
    k = np.tile(np.arange(per), ctas * threads)
    a = (cta * per + k) * threads + tid
    keep = (k != 1) | (rng.random(len(cta)) < 0.9)  # (each CTA's first and last kept)
    cols = [
        (cta[keep], tid[keep], a[keep], 0, int(Kind.LOAD)),
        (cta, tid, rng.integers(0, 200 if seed % 2 else 20, len(cta)), 1, int(Kind.LOAD)),
        (cta, tid, cta if seed % 3 else cta // 2, 2, int(Kind.STORE)),
    ]
    if seed >= 4:  # an atomic buffer
        cols[2] = (cta, tid, cta, 2, int(Kind.ATOMIC))
    view = _view(
        np.concatenate([c[0] for c in cols]),
        np.concatenate([c[1] for c in cols]),
        np.concatenate([c[2] for c in cols]),
        np.concatenate([np.full(len(c[0]), c[3]) for c in cols]),
        np.concatenate([np.full(len(c[0]), c[4]) for c in cols]),
    )
    got = buffer_uses(view)  # type: ignore[arg-type]
    assert got == _reference(view)
    assert [u.name for u in got] == ["a", "b", "c"]
    assert got[0].per_thread_max == per and got[0].per_cta == per * threads
    assert 0 < got[0].disjoint <= per * threads  # (its lanes dropped: fewer)
    assert got[1].disjoint == 0 and got[2].per_block == (seed % 3 != 0)


def test_one_cta_and_an_untouched_buffer() -> None:
    rng = np.random.default_rng(7)
    n = 500
    cta = np.zeros(n, np.int64)
    tid = rng.integers(0, 32, n)
    elem = rng.integers(0, 50, n)
    buf = np.where(rng.random(n) < 0.5, 0, 2)
    view = _view(cta, tid, elem, buf, np.full(n, int(Kind.LOAD)))
    got = buffer_uses(view)  # type: ignore[arg-type]
    assert [u.name for u in got] == ["a", "c"]
    assert got == _reference(view)
    assert all(u.disjoint == 0 and u.per_cta == 0 for u in got)
