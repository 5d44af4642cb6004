"""The changed lanes' used bytes (estimates._used_bytes, _used_bytes_per_cta), keyed from the
view's own columns and the lanes ``at`` (s19-mem: no lane-sized gathers held beside the keys),
against ``np.unique`` of the gathered rows; and the by-instruction order the view holds."""

from __future__ import annotations

import numpy as np

from gpuadvise.rules.estimates import _used_bytes, _used_bytes_by_cta, _used_bytes_per_cta
from gpuadvise.trace.view import Lanes, TraceView


def _columns(n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    cta = rng.integers(0, 12, n).astype(np.int32)
    lb = rng.integers(0, 3, n).astype(np.int32)
    off = (rng.integers(0, 300, n) * 4).astype(np.int64)
    width = rng.choice(np.array([4, 8, 16], np.int32), n)
    return cta, lb, off, width


def _first_rows(*cols: np.ndarray) -> np.ndarray:
    """Each distinct row's first position, in the rows' lexicographic order."""
    _, first = np.unique(np.stack([c.astype(np.int64) for c in cols], axis=1), axis=0,
                         return_index=True)  # fmt: skip
    return first


def test_used_bytes_per_cta_is_the_distinct_rows_widths_per_cta():
    cta, lb, off, width = _columns(5000, 3)
    at = np.sort(np.random.default_rng(4).choice(5000, 3000, replace=False))
    weight = np.random.default_rng(5).uniform(1, 3, len(at))
    c, b, o = cta[at], lb[at], off[at]
    first = _first_rows(c, b, o)
    for w in (None, weight):
        per = width[at][first] if w is None else width[at][first] * w[first]
        want = np.bincount(c[first], weights=per)
        got = _used_bytes_per_cta(cta, lb, off, width, at, w)
        assert np.array_equal(got, want)  # the same sums in the same order: bit-identical


def test_used_bytes_is_the_distinct_rows_widths():
    cta, lb, off, width = _columns(4000, 6)
    at = np.flatnonzero(cta % 2 == 0)
    weight = np.random.default_rng(7).uniform(1, 3, len(at))
    first = _first_rows(lb[at], off[at])
    assert _used_bytes(lb, off, width, at, None) == float(width[at][first].sum())
    want = float((width[at][first] * weight[first]).sum())
    assert _used_bytes(lb, off, width, at, weight) == want
    assert _used_bytes_per_cta(cta, lb, off, width, at[:0], None).size == 0


def test_the_used_bytes_over_all_ctas_come_from_the_per_cta_distinct_rows():
    """_used_bytes_by_cta: the per-CTA sums and, from the distinct (CTA, buffer, offset) rows,
    _used_bytes of the same lanes, bit-identical (each address's first lane the least of its
    CTAs' first lanes; the same widths summed in the same order), with weights and without,
    CTAs re-reading their addresses and addresses read by several CTAs."""
    for seed in (11, 12, 13):
        cta, lb, off, width = _columns(6000, seed)
        rng = np.random.default_rng(seed)
        at = np.sort(rng.choice(6000, 4500, replace=False))
        weight = rng.uniform(1, 3, len(at))
        for w in (None, weight):
            per, total = _used_bytes_by_cta(cta, lb, off, width, at, w)
            assert np.array_equal(per, _used_bytes_per_cta(cta, lb, off, width, at, w))
            assert total == _used_bytes(lb, off, width, at, w)
            assert _used_bytes_by_cta(cta, lb, off, width, at, w, whole=False)[1] == 0.0
    assert _used_bytes_by_cta(cta, lb, off, width, at[:0], None)[1] == 0.0


def test_the_view_holds_its_by_instruction_order_in_int32():
    inst = np.random.default_rng(8).integers(0, 9, 700)
    n = len(inst)
    view = object.__new__(TraceView)
    z = np.zeros(n, np.int32)
    view.lanes = Lanes(z, inst.astype(np.int32), z, z, np.zeros(n, np.int64), z + 4)
    view.inst_line = [(None, 0)] * 9
    view._by_inst = None
    order, _ = view._inst_index()
    assert order.dtype == np.int32
    assert np.array_equal(order, np.argsort(inst, kind="stable"))
    got = view.lanes_of(np.array([2, 7]))
    assert np.array_equal(got, np.flatnonzero((inst == 2) | (inst == 7)))


def test_the_used_bytes_of_a_partitioned_walk():
    """A partitioned walk (each CTA's addresses past the CTA's before, as AoSKernel's, its
    lanes' CTAs interleaved): _used_bytes_by_cta's per-CTA sums and total are
    _used_bytes_per_cta's and _used_bytes', bit-identical, also where neighbouring CTAs share
    their edge address (one address, two CTAs' first lanes)."""
    rng = np.random.default_rng(21)
    for shared_edge in (False, True):
        n = 5000
        cta = np.sort(rng.integers(0, 10, n)).astype(np.int32)
        rng.shuffle(cta[: n // 2])  # lanes of the CTAs interleaved, as a view's records run
        lb = np.zeros(n, np.int32)
        # CTA c: offsets in [c * 1000, c * 1000 + 1000) (with the edge: through c * 1000 + 1000)
        top = 251 if shared_edge else 250
        off = (cta.astype(np.int64) * 250 + rng.integers(0, top, n)) * 4
        width = rng.choice(np.array([4, 8], np.int32), n)
        at = np.sort(rng.choice(n, 4000, replace=False))
        weight = rng.uniform(1, 3, len(at))
        for w in (None, weight):
            per, total = _used_bytes_by_cta(cta, lb, off, width, at, w)
            assert np.array_equal(per, _used_bytes_per_cta(cta, lb, off, width, at, w))
            assert total == _used_bytes(lb, off, width, at, w)


def test_the_used_bytes_by_cta_sort_once():
    """_used_bytes_by_cta sorts its keys once (the address-major key gives the per-CTA sums
    and the addresses' runs); the per-CTA sums are np.unique's (CTA, buffer, offset) rows'
    widths added in their order, bit for bit."""
    import gpuadvise.arrays as A

    cta, lb, off, width = _columns(6000, 31)
    rng = np.random.default_rng(32)
    off = off * 1000 + rng.integers(0, 2, 6000) * 4  # (addresses past 2**16: no radix sort)
    at = np.sort(rng.choice(6000, 5000, replace=False))
    weight = rng.uniform(1, 3, len(at))
    calls = []
    orig = A._sorted_packed

    def counted(*a, **k):
        calls.append(1)
        return orig(*a, **k)

    A._sorted_packed = counted
    try:
        per, total = _used_bytes_by_cta(cta, lb, off, width, at, weight)
    finally:
        A._sorted_packed = orig
    assert len(calls) == 1
    c, b, o = cta[at], lb[at], off[at]
    first = _first_rows(c, b, o)
    assert np.array_equal(per, np.bincount(c[first], weights=width[at][first] * weight[first]))
    assert total == _used_bytes(lb, off, width, at, weight)


def test_the_used_key_made_in_chunks_is_the_packed_key(monkeypatch) -> None:
    """_used_key builds the (buffer, offset) key a chunk of lanes at a time (issue 31: no
    lane-sized gather beside it): the key _packed makes of the two gathers, for int32 and int64
    lane indices, a chunk that does not divide the lanes, and offsets too wide to pack."""
    import gpuadvise.rules.estimates as est

    cta, lb, off, width = _columns(5000, 8)
    at = np.sort(np.random.default_rng(9).choice(5000, 3001, replace=False))
    wide = off.copy()
    wide[7] = 1 << 61  # span of offsets times buffers over 2**62: the ranks instead
    for chunk in (1 << 20, 7, 1000):
        monkeypatch.setattr(est, "_KEY_CHUNK", chunk)
        for ix in (np.int64, np.int32):
            for o in (off, wide):
                got = est._used_key(lb, o, at.astype(ix))
                want = est._packed([lb[at], o[at]])
                assert got.dtype == want.dtype and np.array_equal(got, want)
        assert len(est._used_key(lb, off, at[:0])) == 0


def test_narrow_record_lanes_are_the_same_indices(monkeypatch) -> None:
    """_record_lanes' int32 indices (narrow) hold the int64 ones' values, by the records'
    ranges of lanes and by a pass over the lanes alike."""
    import gpuadvise.rules.estimates as est

    rng = np.random.default_rng(11)
    rec = np.sort(rng.integers(0, 40, 700)).astype(np.int32)
    z = np.zeros(len(rec), np.int32)
    view = type("V", (), {})()
    view.lanes = Lanes(rec, z, z, z, z.astype(np.int64), z)
    for starts in (np.searchsorted(rec, np.arange(41)), None):
        side = type("S", (), {"starts": starts})()
        monkeypatch.setattr(est, "_record_side", lambda v, side=side: side)
        for mask in (rng.random(40) < 0.5, np.zeros(40, bool), np.ones(40, bool)):
            wide = est._record_lanes(view, mask)
            narrow = est._record_lanes(view, mask, narrow=True)
            assert wide.dtype == np.int64 and narrow.dtype == np.int32
            assert np.array_equal(wide, narrow)
            assert np.array_equal(wide, np.flatnonzero(mask[rec]))


def test_the_packed_key_at_lanes_is_the_packed_key_of_the_gathers(monkeypatch) -> None:
    """_packed_at_spans builds _packed's key of columns gathered at lanes (the last one
    floor-divided: a sector) a chunk of lanes at a time (issue 31: no lane-sized gathers
    beside it): the same key and the spans _packed and _span read from the gathers, for a
    chunk that does not divide the lanes, int32 and int64 lanes, and offsets too wide to pack
    (the ranks)."""
    import gpuadvise.rules.estimates as est

    cta, lb, off, _ = _columns(5000, 8)
    at = np.sort(np.random.default_rng(3).choice(5000, 2999, replace=False))
    wide = off.copy()
    wide[at[5]] = 1 << 62
    for chunk in (1 << 20, 7, 1000):
        monkeypatch.setattr(est, "_KEY_CHUNK", chunk)
        for ix in (np.int64, np.int32):
            for o in (off, wide):
                cols = [cta[at], lb[at], o[at] // 32]
                got, spans = est._packed_at_spans([cta, lb, o], at.astype(ix), 32)
                want = est._packed(cols)
                assert got.dtype == want.dtype and np.array_equal(got, want)
                assert spans == [int(c.max()) + 1 for c in cols]
                two = est._packed_at([lb, o], at.astype(ix), 32)
                assert np.array_equal(two, est._packed(cols[1:]))
    assert len(est._packed_at([cta, lb, off], at[:0], 32)) == 0


def test_the_nonzero_lanes_in_int32_are_flatnonzeros(monkeypatch) -> None:
    """_nonzero_index32 finds the true positions a chunk at a time into int32 (issue 31): the
    same indices as flatnonzero, with and without a subset of lanes."""
    import gpuadvise.rules.estimates as est

    rng = np.random.default_rng(4)
    mask = rng.random(5003) < 0.3
    sub = np.sort(rng.choice(20000, 5003, replace=False))
    for chunk in (1 << 20, 7, 1000):
        monkeypatch.setattr(est, "_KEY_CHUNK", chunk)
        got = est._nonzero_index32(mask, None, 5003)
        assert got.dtype == np.int32 and np.array_equal(got, np.flatnonzero(mask))
        got = est._nonzero_index32(mask, sub, 20000)
        assert np.array_equal(got, sub[np.flatnonzero(mask)])
        assert len(est._nonzero_index32(np.zeros(9, bool), None, 9)) == 0
