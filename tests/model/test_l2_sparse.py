"""The L2 model's sparse toucher tables (units that few of their ``K`` relative CTAs touch, as
hecbench scan's 262,144 units of 125 columns with one toucher each): the replay and the footprint
totals read their touches alone, with the same numbers as the full tables."""

from __future__ import annotations

import numpy as np
import pytest

from gpuadvise.model.l2 import replay
from gpuadvise.model.l2.footprint import Footprint, Matrix, footprint_totals
from gpuadvise.model.l2.replay import (
    MatrixPrep,
    _exact_sums,
    _quantum,
    _sorted_touchers,
    _widened,
    prepare,
    replay_order,
)


def _sparse_matrix(seed: int, scale: np.ndarray | None = None, n_u: int = 3000, K: int = 40):
    """Units touched by 1 to 8 of K columns, CTAs of a 600-CTA grid, counts of a few sectors."""
    rng = np.random.default_rng(seed)
    P = 600
    touchers = np.full((n_u, K), -1, dtype=np.int32)
    nvalid = rng.integers(1, 9, n_u)
    for i in range(n_u):
        cols = rng.choice(K, nvalid[i], replace=False)
        touchers[i, cols] = rng.choice(P, nvalid[i], replace=False)
    if scale is None:
        scale = np.where(rng.random(n_u) < 0.1, 0.5, 1.0)
    cnt = rng.integers(0, 3, (4, K)).astype(np.float64)
    cnt[3] = (cnt[0] > 0).astype(np.float64)
    mat = Matrix(
        touchers=touchers,
        nvalid=nvalid.astype(np.int64),
        w_bytes=scale * 64.0,
        scale=scale,
        cnt=cnt,
        gbytes=64,
    )
    return mat, P


def _full_sort(
    mat: Matrix, pos_ext: np.ndarray, sparse: object = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """The replay's sort of every column (what it did before the sparse tables; ``sparse``, the
    prepared layout, unread)."""
    T = mat.touchers
    K = T.shape[1]
    bits = max(1, (K - 1).bit_length())
    key = (pos_ext[T] << bits) | np.arange(K, dtype=np.int64)
    key.sort(axis=1)
    return (key >> bits).astype(np.int32), (key & ((1 << bits) - 1)).astype(np.int32), K


def test_sorted_touchers_keep_the_full_sorts_first_columns() -> None:
    mat, P = _sparse_matrix(1)
    pos_ext = np.append(np.random.default_rng(2).permutation(P), P)
    r, kk, kept = _sorted_touchers(mat, pos_ext)
    fr, fk, K = _full_sort(mat, pos_ext)
    assert kept == int(mat.nvalid.max()) < K
    np.testing.assert_array_equal(r, fr[:, :kept])
    valid = r < P
    np.testing.assert_array_equal(kk[valid], fk[:, :kept][valid])
    assert (fr[:, kept:] == P).all()  # nothing past them
    rw, kw = _widened(r, kk, K, P)
    np.testing.assert_array_equal(rw, fr)
    np.testing.assert_array_equal(kw[rw < P], fk[fr < P])


@pytest.mark.parametrize(
    ("scale_kind", "exact"),
    [("dyadic", True), ("thirds", True), ("tiny", True), ("wide", False)],
)
@pytest.mark.parametrize("perm_seed", [0, 5])
def test_replay_of_sparse_tables_matches_the_full_one(
    monkeypatch: pytest.MonkeyPatch, scale_kind: str, exact: bool, perm_seed: int
) -> None:
    rng = np.random.default_rng(7)
    n_u = 3000
    scale = {
        "dyadic": np.where(rng.random(n_u) < 0.1, 0.25, 1.0),
        "thirds": rng.integers(1, 4, n_u) / 3.0,  # exact all the same: few terms of 24 bits
        "tiny": rng.integers(1, 4, n_u) * 1e-30 / 3.0,  # the bound is relative
        # ones beside thirds of 1e-9: 24-bit terms 2**31 apart, past what float64 holds
        "wide": np.where(rng.random(n_u) < 0.5, 1.0, rng.integers(1, 4, n_u) * 1e-9 / 3.0),
    }[scale_kind]
    mat, P = _sparse_matrix(3, scale, n_u)
    assert _exact_sums(mat) is exact
    model = Footprint(mats=[mat])
    perm = np.random.default_rng(perm_seed).permutation(P)
    caps = [64.0 * 200, 64.0 * 2000]
    args = (model, perm, P, caps, 40, None, None, True)
    got = replay_order(*args)
    # the layout and the exactness made once for every order (as l2_models does) change nothing
    assert replay_order(*args, prepare(model)) == got
    monkeypatch.setattr(replay, "_sorted_touchers", _full_sort)
    assert replay_order(*args) == got


def test_prepared_layout_gives_the_same_sort() -> None:
    """The sparse layout made once (:func:`prepare`) and the one made per call sort alike."""
    mat, P = _sparse_matrix(5)
    (mp,) = prepare(Footprint(mats=[mat]))
    assert mp.sparse is not None and mp.exact is _exact_sums(mat)
    for seed in (0, 1):
        pos_ext = np.append(np.random.default_rng(seed).permutation(P), P)
        got = _sorted_touchers(mat, pos_ext, mp.sparse)
        want = _sorted_touchers(mat, pos_ext)
        for a, b in zip(got[:2], want[:2], strict=True):
            np.testing.assert_array_equal(a, b)
        assert got[2] == want[2]
    dense, _ = _sparse_matrix(6, n_u=50, K=8)  # up to 8 of 8 columns: sorted whole
    assert prepare(Footprint(mats=[dense]))[0] == MatrixPrep(None, None)


def test_footprint_totals_of_sparse_tables() -> None:
    mat, _ = _sparse_matrix(4, np.random.default_rng(9).random(3000))
    valid = mat.touchers >= 0
    assert 4 * valid.sum() <= valid.size  # the touches-only sums
    per_k = (valid * mat.scale[:, None]).sum(axis=0)
    dk = np.where(valid, mat.cnt[2][None, :], 0.0).max(axis=1, initial=0.0)
    want = (
        float(per_k @ mat.cnt[0]),
        float(per_k @ mat.cnt[1]),
        float((dk * mat.scale).sum()),
        float(mat.w_bytes.sum()),
    )
    assert footprint_totals(Footprint(mats=[mat])) == want


def _quantum_by_frexp(v: np.ndarray) -> int | None:
    """:func:`_quantum` as it was written first (a float64 frexp and a logarithm)."""
    if not bool(np.isfinite(v).all()) or bool((v < 0).any()):
        return None
    nz = v[v != 0]
    if not len(nz):
        return 0
    m, ex = np.frexp(nz.astype(np.float64))
    mi = (m * 2.0**24).astype(np.int64)
    low = mi & -mi
    return int((ex.astype(np.int64) - 24 + np.log2(low).round().astype(np.int64)).min())


def test_quantum_from_the_bits_matches_frexp() -> None:
    """The float32 bits' quantum is frexp's on every exponent and lowest bit (subnormals, zeros of
    either sign, infinities, NaNs, negatives) and on random bit patterns."""
    cases = []
    for e in range(256):
        for t in range(24):
            bits = (e << 23) | ((1 << t) if t < 23 else 0)
            cases += [[bits], [bits | 0x80000000], [bits, 0x80000000], [bits, (e << 23) | 3]]
    for c in cases:
        v = np.array(c, dtype=np.uint32).view(np.float32)
        assert _quantum(v) == _quantum_by_frexp(v), c
    rng = np.random.default_rng(3)
    for _ in range(2000):
        n = int(rng.integers(1, 9))
        v = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        assert _quantum(v) == _quantum_by_frexp(v)
        w = (rng.integers(0, 1000, (2, n)) * 2.0 ** int(rng.integers(-140, 100))).astype(np.float32)
        assert _quantum(w) == _quantum_by_frexp(w)
    assert _quantum(np.zeros(3, np.float32)) == 0 == _quantum(np.zeros(0, np.float32))
    assert _quantum(np.array([-0.0, 0.5], np.float32)) == -1
    assert _quantum(np.array([1.0, -(2.0**-20)], np.float32)) is None
