"""The cache simulation: a footprint replayed in one launch order against an LRU of some capacity
(CTA-granularity stack distances over a sliding window), with the expected extra misses and
lookups of two L2 partitions, and the device parameters of the cache. See
:mod:`gpuadvise.model.l2` for the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.arrays import distinct_inverse
from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import UsageError
from gpuadvise.model.coalescing import SECTOR_BYTES
from gpuadvise.model.l2.footprint import NLGRAN, NLOAD, Footprint, Matrix, sort_pairs

__all__ = [
    "PARTITIONED_EFFICIENCY",
    "PARTITIONED_FETCH_BYTES",
    "UNIFIED_EFFICIENCY",
    "MatrixPrep",
    "OrderCounts",
    "capacities",
    "default_efficiency",
    "default_fetch_bytes",
    "default_partitions",
    "prepare",
    "replay_order",
    "residencies",
]

# Compute capabilities whose L2 is split into two partitions that each cache for their own SMs.
_PARTITIONED_CCS = {(8, 0), (9, 0), (10, 0), (10, 3)}
PARTITIONED_EFFICIENCY = 0.5
UNIFIED_EFFICIENCY = 0.85
PARTITIONED_FETCH_BYTES = 64

_GRID_RATIO = 1.25  # geometric grid of window lengths


def default_partitions(device: DeviceSpec) -> int:
    """2 on the GPUs whose L2 is split into two partitions (A100, H100, H200, B200), else 1."""
    return 2 if (device.cc_major, device.cc_minor) in _PARTITIONED_CCS else 1


def default_efficiency(device: DeviceSpec) -> float:
    """The share of the L2 the model assumes usable: 0.5 with two partitions, else 0.85."""
    if default_partitions(device) == 2:
        return PARTITIONED_EFFICIENCY
    return UNIFIED_EFFICIENCY


def default_fetch_bytes(device: DeviceSpec) -> int:
    """The granule a miss fills: 64 bytes (a sector pair) with two partitions, else 32."""
    return PARTITIONED_FETCH_BYTES if default_partitions(device) == 2 else SECTOR_BYTES


def capacities(device: DeviceSpec, efficiency: float | Sequence[float] | None) -> list[float]:
    """The effective L2 capacities in bytes, one per efficiency (default :func:`default_efficiency`)."""
    if device.l2_bytes is None:
        raise UsageError(
            f"the L2 size of {device.name} is not known", "name a GPU preset with --gpu"
        )
    if efficiency is None:
        effs = [default_efficiency(device)]
    elif isinstance(efficiency, (int, float)):
        effs = [float(efficiency)]
    else:
        effs = [float(e) for e in efficiency]
    if not effs or any(not (0 < e <= 4) for e in effs):
        raise UsageError(
            "the L2 efficiency must be a positive fraction of the L2 size", "e.g. 0.5, or None"
        )
    return [e * device.l2_bytes for e in effs]


@dataclass
class OrderCounts:
    """Per capacity: load sectors that hit (one cache), DRAM bytes read; with two partitions,
    the expected extra misses (``near_miss``, sectors) and extra lookups (``fabric``, sectors
    forwarded to the home partition) that the near-partition copies add (:func:`residencies`)."""

    load_hits: float
    dram_read: float
    near_miss: float = 0.0
    fabric: float = 0.0


def residencies(k: np.ndarray, a: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """Expected extra misses and extra lookups (sectors) of two L2 partitions, summed over
    residencies: one per miss of the one-cache model (a fill of the home partition), ``k`` CTAs
    touching the granule during it (the missing one included), ``a`` load sectors the missing CTA
    requests, ``g`` sectors of the granule.

    Each CTA runs on an SM on either side with probability 1/2. The first toucher is on the far
    side with probability 1/2: its request misses the near partition too and is forwarded (``g``
    sectors looked up at home, missing): ``g`` more misses and lookups. Otherwise it misses at
    home only, and the first far-side toucher among the ``k - 1`` others (probability
    ``1 - 2**(1 - k)``) misses its near copy (about ``a`` sectors: it hit in the one-cache model)
    and is forwarded (``g`` sectors looked up at home, hitting). So per residency:
    misses ``g/2 + a/2 (1 - 2**(1 - k))``, lookups ``g (1 - 2**-k)``.
    """
    if len(k) == 0:
        return 0.0, 0.0
    # in place, two arrays of the residencies' length (a split replay has tens of millions):
    # the same operations on the same values as ``0.5 * (g + a * (1 - 2**(1 - k)))`` and
    # ``g * (1 - 2**-k)``
    kf = k.astype(np.float64)
    t = np.subtract(1.0, kf)
    np.exp2(t, out=t)
    np.subtract(1.0, t, out=t)  # p_far_later
    np.multiply(a, t, out=t)
    np.add(g, t, out=t)
    t *= 0.5
    miss = float(t.sum())
    del t
    np.negative(kf, out=kf)
    np.exp2(kf, out=kf)
    np.subtract(1.0, kf, out=kf)
    np.multiply(g, kf, out=kf)
    return miss, float(kf.sum())


class _WindowFit:
    """Distinct bytes touched by the positions [p - k, p), for p = 0 .. P-1, per window length k
    (shifted slices, no gathers: the grid of window lengths asks for a few dozen k per order).
    The P-long work arrays are allocated once and reused: fresh ones for every k cost a page
    fault per 4 KiB (a third of the L2 model's time on the 8192^2 transpose's 65,536 CTAs)."""

    def __init__(
        self,
        A_lt: np.ndarray,
        L_incl: np.ndarray,
        gs: np.ndarray,
        ge: np.ndarray,
        gw: np.ndarray,
        glen_desc: np.ndarray,
        P: int,
        density: np.ndarray | None,
    ) -> None:
        self.A_lt, self.L_incl, self.P, self.density = A_lt, L_incl, P, density
        self.gs, self.ge, self.gw, self.neg_glen = gs, ge, gw, -glen_desc
        self.add = np.zeros(P, dtype=np.float64)
        self.sub = np.zeros(P, dtype=np.float64)
        if density is not None:
            self.positions = np.arange(P, dtype=np.float64)
            self.n_tr = np.empty(P, dtype=np.float64)
            self.tmp = np.empty(P, dtype=np.float64)

    def __call__(self, k: int, out: np.ndarray | None = None) -> np.ndarray:
        """The distinct bytes of every position's window of ``k`` CTAs (into ``out`` if given)."""
        P = self.P
        n = int(np.searchsorted(self.neg_glen, -k, side="left"))  # gaps longer than k
        s = min(k + 1, P)  # positions p < k + 1 have no L_incl[p - k - 1]
        D = np.empty(P, dtype=np.float64) if out is None else out
        np.copyto(D, self.A_lt)
        D[s:] -= self.L_incl[: P - s]
        if n:
            # +w at gs + k + 1, -w at ge + 1 (summed apart, in gap order, as bincount does)
            self.add.fill(0.0)
            self.sub.fill(0.0)
            at = self.gs[:n] + (k + 1)
            keep = at < P
            np.add.at(self.add, at[keep], self.gw[:n][keep])
            at = self.ge[:n] + 1
            keep = at < P
            np.add.at(self.sub, at[keep], self.gw[:n][keep])
            self.add -= self.sub
            D -= np.cumsum(self.add, out=self.add)
        if self.density is not None:
            density = self.density
            m = min(k, P)  # positions p < k start their window at 0
            n_tr = self.n_tr
            n_tr[:] = density[:P]
            n_tr[:m] -= density[0]
            n_tr[m:] -= density[: P - m]
            span = np.minimum(self.positions, float(k), out=self.tmp)
            scaled = np.multiply(D, span, out=span)
            scaled /= np.maximum(n_tr, 1, out=self.sub)
            np.copyto(D, scaled, where=n_tr > 0)
        return D


def _merge_gaps(
    gs: np.ndarray, ge: np.ndarray, gw: np.ndarray, P: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reuse gaps with equal (start, end) launch positions merged, their bytes summed: every
    window length's distinct bytes (:class:`_WindowFit`, asked for each length of the grid)
    then sums one weight per distinct gap, not one per unit that has it (an image kernel's
    units mostly share their gaps: the same CTAs touch them in the same order)."""
    if len(gs) < 2:
        return gs, ge, gw
    key = gs * np.int64(P + 1) + ge
    uniq, inv = distinct_inverse(key)  # np.unique's, sorted packed with the positions
    if len(uniq) == len(key):
        return gs, ge, gw
    w = np.bincount(inv.reshape(-1), weights=gw, minlength=len(uniq))
    return uniq // np.int64(P + 1), uniq % np.int64(P + 1), w


def _trivial_window(cta_bytes: np.ndarray, perm: np.ndarray, cap: float) -> int:
    """The longest window length k whose CTAs' summed bytes fit ``cap`` wherever it starts."""
    s = np.concatenate([[0.0], np.cumsum(cta_bytes[perm])])
    P = len(perm)
    lo, hi = 0, P
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if float((s[mid:] - s[:-mid]).max()) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return max(lo, 1)


_TAKE_CHUNK = 1 << 20
"""Entries a chunked gather (:func:`_take`) reads at a time: numpy converts an int32 index array
to a platform one first, 8 bytes an entry for the whole table at once otherwise."""


def _take(table: np.ndarray, idx: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``table[idx]`` into ``out`` (a 2D ``idx``), a chunk of rows at a time: the same values,
    without the whole index converted at once."""
    step = max(1, _TAKE_CHUNK // max(1, idx.shape[1]))
    for lo in range(0, len(idx), step):
        np.take(table, idx[lo : lo + step], out=out[lo : lo + step], mode="wrap")
    return out


def _hits(r: np.ndarray, valid: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """Per later touch of a block's units (``r``: their positions, a row a unit), whether it
    hits: valid and its gap since the unit's previous touch within ``thr`` at its position
    (``valid & (gap <= thr[r[:, 1:]])``), a chunk of rows at a time: the same mask, without the
    whole gaps and thresholds made (two int32 arrays of every touch: 240 MB of histogram256's
    block, issue 31's peak)."""
    hit = np.empty(valid.shape, dtype=bool)
    step = max(1, _TAKE_CHUNK // max(1, valid.shape[1]))
    lim = np.empty((min(step, len(valid)), valid.shape[1]), dtype=np.int32)
    for lo in range(0, len(valid), step):
        rows = r[lo : lo + step]
        gap = rows[:, 1:] - rows[:, :-1]
        np.less_equal(gap, _take(thr, rows[:, 1:], lim[: len(rows)]), out=hit[lo : lo + step])
        hit[lo : lo + step] &= valid[lo : lo + step]
    return hit


def _longest_hit(kst: np.ndarray, P: int) -> np.ndarray:
    """Per position, the longest reuse gap that hits (``gap <= k*(p)``: a gap is a whole number
    of positions, so ``gap <= floor(k*(p))``), int32, with one more entry for the sentinel
    position ``P`` (never read as a hit: those touches are not valid). An int32 gathered per
    touch, not a float64."""
    t = np.full(P + 1, -1, dtype=np.int32)
    f = np.floor(np.clip(kst, -1.0, float(P + 1)))
    ok = ~np.isnan(f)  # a NaN k*(p) compares False: -1 is below every gap
    t[:P][ok] = f[ok].astype(np.int32)
    return t


@dataclass
class _Sparse:
    """Where a sparse toucher table's touches go in :func:`_sorted_touchers`' key table, which
    no launch order changes: each touch's flat entry there (``rows * width + rank``), its
    column, and its toucher (``T[rows, cols]``), in ``np.nonzero``'s order."""

    width: int
    dest: np.ndarray  # (touches,) int64
    cols: np.ndarray  # (touches,) int64
    who: np.ndarray  # (touches,) int32


@dataclass
class MatrixPrep:
    """What the replay reads of a matrix block whatever the launch order, made once for all
    the orders (:func:`prepare`): its sparse layout (None: the table is sorted whole) and
    whether its sums are exact over the kept columns (:func:`_exact_sums`, None: all ``K``
    columns are kept, so it is not asked)."""

    sparse: _Sparse | None
    exact: bool | None


def _sparse_layout(mat: Matrix) -> _Sparse | None:
    """The order-free part of :func:`_sorted_touchers`' sparse path, or None where the table
    is sorted whole (some unit has more than half of its ``K`` columns' touchers)."""
    T = mat.touchers
    n_u, K = T.shape
    kmax = int(mat.nvalid.max(initial=0))
    if not (K >= 2 and 0 < kmax and 2 * kmax <= K):
        return None
    rows, cols = np.nonzero(T >= 0)  # row-major: a unit's touchers in column order
    per_row = np.bincount(rows, minlength=n_u)  # nvalid, counted on the table itself
    width = int(per_row.max(initial=0))
    start = np.cumsum(per_row) - per_row
    dest = rows * np.int64(width)
    dest -= start[rows]
    dest += np.arange(len(rows), dtype=np.int64)  # + the touch's rank in its row
    who = T[rows, cols]
    del rows, start, per_row
    return _Sparse(width, dest, cols.astype(np.int64, copy=False), who)


def prepare(model: Footprint) -> list[MatrixPrep]:
    """Per matrix block of ``model``, what every order's replay (:func:`replay_order`) reads
    of it alike: computed once before the orders are replayed (five orders of a 2D grid, each
    redoing the sparse table's layout and the sums' exactness check: 0.2 of an order's CPU on
    hecbench dct8x8's million units)."""
    out = []
    for mat in model.mats:
        sparse = _sparse_layout(mat)
        exact = None
        if sparse is not None and sparse.width < mat.touchers.shape[1]:
            exact = _exact_sums(mat)
        out.append(MatrixPrep(sparse, exact))
    return out


def _sorted_touchers(
    mat: Matrix, pos_ext: np.ndarray, sparse: _Sparse | None | bool = True
) -> tuple[np.ndarray, np.ndarray, int]:
    """Per unit of ``mat``: its touchers' launch positions sorted (``P``, none, last) and their
    columns, int32, and how many columns are kept: all ``K``, or, when every unit has at most
    half as many touchers as ``K`` (a footprint whose units each few of the ``K`` relative CTAs
    touch: hecbench scan's 262,144 units of 125 have one each), the first ``max(nvalid)``: the
    columns past them hold no toucher in any unit, and a unit's touchers are the same, in the
    same order, as the full sort's first columns (the positions of the others, ``P``, sort last).
    Those columns are then sorted alone (the valid entries of each unit gathered first).
    ``sparse``: the table's :func:`_sparse_layout` when made already (None: sorted whole), True:
    made here."""
    T = mat.touchers
    n_u, K = T.shape
    bits = max(1, (K - 1).bit_length())
    if sparse is True:
        sparse = _sparse_layout(mat)
    if isinstance(sparse, _Sparse):
        width = sparse.width
        key = np.full((n_u, width), np.int64(len(pos_ext) - 1) << bits, dtype=np.int64)
        vals = np.take(pos_ext, sparse.who)
        vals <<= bits
        vals |= sparse.cols
        key.reshape(-1)[sparse.dest] = vals
        del vals
    else:
        key = _take(pos_ext, T, np.empty(T.shape, dtype=np.int64))
        key <<= bits
        key |= np.arange(K, dtype=np.int64)
        width = K
    key.sort(axis=1)
    # the positions and the columns, each written as int32 once (no int64 temporaries)
    r = np.right_shift(key, bits, out=np.empty(key.shape, np.int32), casting="unsafe")
    kk = np.bitwise_and(key, (1 << bits) - 1, out=np.empty(key.shape, np.int32), casting="unsafe")
    return r, kk, width


def _long_gaps(r: np.ndarray, P: int, kf: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reuse gaps longer than ``kf`` between a unit's consecutive touchers (``r``: their
    launch positions, sorted, a row a unit, ``P`` past the last): their start and end
    positions (int64) and rows, in row-major order. The same arrays as ``rows, cols =
    np.nonzero(sel)``, ``r[rows, cols]`` and ``r[rows, cols + 1]``, from the flat indices: the
    touch ``(row, col)`` of the gaps' table is ``r``'s entry ``row * width + col + row`` and
    the next toucher the entry after it (no 2-D gathers: 0.9-4.5 million gaps an order on the
    8K gather)."""
    sel = r[:, 1:] - r[:, :-1] > kf
    sel &= r[:, 1:] < P
    flat = np.flatnonzero(sel)
    del sel
    rows = flat // max(1, r.shape[1] - 1)
    flat += rows
    rf = r.reshape(-1)
    start = np.take(rf, flat).astype(np.int64)
    flat += 1
    return start, np.take(rf, flat).astype(np.int64), rows


def _widened(r: np.ndarray, kk: np.ndarray, K: int, P: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``K`` columns of the full sort from its first ones (:func:`_sorted_touchers`): the
    rest hold no toucher (position ``P``; their column any, here 0: their weights are only ever
    multiplied by a miss-free, hit-free 0)."""
    n_u, w = r.shape
    rw = np.full((n_u, K), P, dtype=np.int32)
    rw[:, :w] = r
    kw = np.zeros((n_u, K), dtype=np.int32)
    kw[:, :w] = kk
    return rw, kw


_F32_EXP_ONE = 0x800000  # a float32's lowest exponent bit (its implicit significand bit)
_F32_FRAC = _F32_EXP_ONE - 1  # its 23 stored significand bits
_F32_MAG = 0x7FFFFFFF  # all but the sign bit
_F32_INF = 0x7F800000  # the magnitude bits of infinity: this or above is not finite


def _quantum(v: np.ndarray) -> int | None:
    """The exponent ``e`` of the largest power of two ``2**e`` that every float32 of ``v``
    (finite, non-negative) is a multiple of (None: one is not finite or negative).

    Read from the float32 bits (int32 passes over the array, no float64 copy or logarithm: a
    million-unit block's scales took 0.5 CPU-s): a nonzero value is ``sig * 2**(E - 150)`` with
    ``E`` its biased exponent (1 for a subnormal, whose ``sig`` has no implicit bit), so ``e``
    is the least ``max(E, 1) - 150 + t`` with ``2**t`` the lowest set bit of ``sig``."""
    bits = np.ascontiguousarray(v, dtype=np.float32).reshape(-1).view(np.int32)
    mag = bits & np.int32(_F32_MAG)
    if bool((mag >= _F32_INF).any()):  # an infinity or a NaN
        return None
    zero = mag == 0
    if bool((bits < 0).any()) and bool(((bits < 0) & ~zero).any()):  # (-0.0 is not negative)
        return None
    if bool(zero.any()):
        mag = mag[~zero]
    del zero
    if not len(mag):
        return 0
    biased = mag >> 23  # 0 for a subnormal
    sig = mag & np.int32(_F32_FRAC)
    sig |= np.where(biased > 0, np.int32(_F32_EXP_ONE), np.int32(0))
    low = sig & -sig  # its lowest set bit, 2**t with t <= 23: exact as a float32
    t = (low.astype(np.float32).view(np.int32) >> 23) - 127
    np.maximum(biased, 1, out=biased)
    t += biased
    return int(t.min()) - 150


def _exact_sums(mat: Matrix) -> bool:
    """Whether the block's load and granule sums (float32 products of a column's counts and a
    unit's scale, hit or not, summed in float64) are exact whatever the order and however many
    zero terms lie between: every term a multiple of one power of two ``q`` (a product of
    float32 multiples of ``qc`` and ``qs`` is a multiple of ``qc qs``, rounded to float32 or not)
    and their sum, bounded by terms times the largest, under ``2**53 q``. Then the sums over the
    kept columns of :func:`_sorted_touchers` are those over all ``K`` (the others add zeros)."""
    s32 = mat.scale.astype(np.float32)
    c32 = mat.cnt[[NLOAD, NLGRAN]].astype(np.float32)
    qs, qc = _quantum(s32), _quantum(c32)
    if qs is None or qc is None or not len(s32):
        return False
    most = float(c32.max(initial=0.0)) * float(s32.max(initial=0.0)) * mat.touchers.size
    return most < 2.0 ** (52 + qs + qc)


def replay_order(
    model: Footprint,
    perm: np.ndarray,
    P: int,
    caps: Sequence[float],
    C: int,
    cta_bytes: np.ndarray | None,
    traced_mask: np.ndarray | None,
    split: bool = False,
    prep: Sequence[MatrixPrep] | None = None,
) -> tuple[list[OrderCounts], float]:
    """Load hits and DRAM reads per capacity, and the working set of the CTAs in flight;
    ``split``: also the extra misses and lookups of two L2 partitions (:func:`residencies`).
    ``prep``: :func:`prepare` of ``model`` (made here when not given)."""
    if prep is None:
        prep = prepare(model)
    pos = np.empty(P, dtype=np.int64)
    pos[perm] = np.arange(P, dtype=np.int64)
    density = None
    if traced_mask is not None:
        density = np.concatenate([[0], np.cumsum(traced_mask[perm])]).astype(np.float64)
    cap_min = min(caps)
    if cta_bytes is not None:
        k0 = _trivial_window(cta_bytes, perm, cap_min)
    else:
        k0 = 1
    kf = max(1, min(k0, C))
    firsts, lasts, fw = [], [], []
    g_s, g_e, g_w = [], [], []
    saved: list[Any] = []  # per block, what the second pass reuses
    pos_ext = np.append(pos, P)  # a toucher id of -1 (none) reads the sentinel P
    for mat, mp in zip(model.mats, prep, strict=True):
        r, kk, kept = _sorted_touchers(mat, pos_ext, mp.sparse)
        n_u = len(r)
        firsts.append(r[:, 0])
        lasts.append(r[np.arange(n_u), mat.nvalid - 1])
        fw.append(mat.w_bytes)
        s_, e_, rows = _long_gaps(r, P, kf)
        g_s.append(s_)
        g_e.append(e_)
        g_w.append(mat.w_bytes[rows])
        del s_, e_, rows
        saved.append((r, kk, kept))  # the gaps made again when read (one subtraction)
    for lst in model.lists:
        pr = pos[lst.cta]
        o = sort_pairs(lst.unit, pr)
        u, r = lst.unit[o], pr[o]
        first = np.empty(len(u), dtype=bool)
        if len(u):
            first[0] = True
            np.not_equal(u[1:], u[:-1], out=first[1:])
        last = np.empty(len(u), dtype=bool)
        if len(u):
            last[-1] = True
            np.not_equal(u[1:], u[:-1], out=last[:-1])
        firsts.append(r[first])
        lasts.append(r[last])
        fw.append(lst.w_bytes[u[first]])
        gap = np.empty(len(r), dtype=np.int64)
        if len(r):
            gap[0] = -1
            gap[1:] = r[1:] - r[:-1]
        gap[first] = -1
        sel = np.flatnonzero(gap > kf)
        g_s.append(r[sel - 1])
        g_e.append(r[sel])
        g_w.append(lst.w_bytes[u[sel]])
        saved.append((o, r, gap))
    del pos, pos_ext  # (each P-sized array freed once read: issue 31's peak is in the replay)
    f_all = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
    l_all = np.concatenate(lasts) if lasts else np.zeros(0, dtype=np.int64)
    w_all = np.concatenate(fw) if fw else np.zeros(0)
    A_incl = np.cumsum(np.bincount(f_all, weights=w_all, minlength=P + 1)[: P + 1])
    A_lt = np.concatenate([[0.0], A_incl[: P - 1]])
    L_incl = np.cumsum(np.bincount(l_all, weights=w_all, minlength=P + 1)[: P + 1])
    del f_all, l_all, w_all, A_incl, firsts, lasts, fw
    gs = np.concatenate(g_s) if g_s else np.zeros(0, dtype=np.int64)
    ge = np.concatenate(g_e) if g_e else np.zeros(0, dtype=np.int64)
    gw = np.concatenate(g_w) if g_w else np.zeros(0)
    del g_s, g_e, g_w
    gs, ge, gw = _merge_gaps(gs, ge, gw, P)
    glen = ge - gs
    o = np.argsort(-glen, kind="stable")
    gs, ge, gw, glen = gs[o], ge[o], gw[o], glen[o]

    window = _WindowFit(A_lt, L_incl, gs, ge, gw, glen, P, density)

    # working set of the CTAs in flight
    c_eff = max(1, min(C, P))
    D_C = window(c_eff)
    steady = D_C[min(c_eff, P - 1) :]
    working_set = float(steady.mean()) if len(steady) else float(D_C.max(initial=0.0))
    del D_C, steady
    # k*(p): the longest window ending at p that fits, per capacity
    ks = [k0]
    while ks[-1] < P:
        ks.append(min(P, max(ks[-1] + 1, int(ks[-1] * _GRID_RATIO))))
    kstars = []
    prevs = []
    done = []
    D0 = window(ks[0])
    for cap in caps:
        ks_arr = np.full(P, np.inf)
        over = D0 > cap
        # a window of k0 CTAs that does not fit (only with sampled traces): scale down
        ks_arr[over] = ks[0] * cap / D0[over]
        kstars.append(ks_arr)
        prevs.append(D0.copy())
        done.append(over.copy())
    del D0
    # a position p's window of k >= p CTAs is the whole launch before it, the same for every
    # longer k: what still fits there fits for good (k*(p) stays infinite), so the grid stops
    # once every position has either overflowed or reached its prefix
    settled = [d.copy() for d in done]
    for d in settled:
        d[: min(ks[0], P - 1) + 1] = True
    D_buf = np.empty(P, dtype=np.float64)
    for i in range(1, len(ks)):
        if all(d.all() for d in settled):
            break
        D = window(ks[i], D_buf)
        for j, cap in enumerate(caps):
            newly = ~done[j] & (D > cap)
            if newly.any():
                d0 = prevs[j][newly]
                d1 = D[newly]
                frac = np.where(d1 > d0, (cap - d0) / np.maximum(d1 - d0, 1e-300), 0.0)
                kstars[j][newly] = ks[i - 1] + frac * (ks[i] - ks[i - 1])
                done[j] |= newly
                settled[j] |= newly
            settled[j][: min(ks[i], P - 1) + 1] = True
            np.copyto(prevs[j], D, where=~done[j])
    thresholds = [_longest_hit(kst, P) for kst in kstars]
    del kstars, window, prevs, done, settled, D_buf
    hits = [0.0] * len(caps)
    dram = [0.0] * len(caps)
    near = [0.0] * len(caps)
    fabric = [0.0] * len(caps)
    for m, mat in enumerate(model.mats):
        r, kk, kept = saved[m]
        saved[m] = None  # each block's arrays freed once read, not at the end of the replay
        if kept < mat.touchers.shape[1] and not prep[m].exact:
            r, kk = _widened(r, kk, mat.touchers.shape[1], P)
        valid = r[:, 1:] < P
        shape = valid.shape
        # per touch (after the first of each unit): its load requests and loaded granules
        wl = _take(mat.cnt[NLOAD].astype(np.float32), kk[:, 1:], np.empty(shape, np.float32))
        wl *= mat.scale[:, None].astype(np.float32)
        wg = _take(mat.cnt[NLGRAN].astype(np.float32), kk[:, 1:], np.empty(shape, np.float32))
        wg *= mat.scale[:, None].astype(np.float32)
        wg *= valid
        g_all = float(wg.sum(dtype=np.float64))
        g_first = float((mat.cnt[NLGRAN][kk[:, 0]] * mat.scale).sum())  # first touches miss
        for j, thr in enumerate(thresholds):
            hit = _hits(r, valid, thr)
            hits[j] += float(np.einsum("ij,ij->", hit, wl, dtype=np.float64))
            g_hit = float(np.einsum("ij,ij->", hit, wg, dtype=np.float64))
            dram[j] += (g_first + g_all - g_hit) * mat.gbytes
            if split:
                # the misses (first touches, and later touches past the window), row by row:
                # each starts a residency that lasts until the row's next miss
                miss = np.empty(r.shape, dtype=bool)
                miss[:, 0] = True
                np.logical_and(valid, ~hit, out=miss[:, 1:])
                # np.nonzero's rows and columns, made int32 (half the memory a miss)
                flat = np.flatnonzero(miss)
                width = r.shape[1]
                del miss
                rows = np.floor_divide(
                    flat, width, out=np.empty(len(flat), np.int32), casting="unsafe"
                )
                cols = np.remainder(
                    flat, width, out=np.empty(len(flat), np.int32), casting="unsafe"
                )
                kc = np.take(kk.reshape(-1), flat)  # kk[rows, cols]
                del flat
                nxt = mat.nvalid[rows]
                same = rows[1:] == rows[:-1]
                nxt[:-1] = np.where(same, cols[1:], nxt[:-1])
                a = mat.cnt[NLOAD][kc] * mat.scale[rows]
                g = mat.cnt[NLGRAN][kc] * mat.scale[rows] * (mat.gbytes / SECTOR_BYTES)
                m_, f_ = residencies(nxt - cols, a, g)
                near[j] += m_
                fabric[j] += f_
    for lst, (o_, r, gap) in zip(model.lists, saved[len(model.mats) :], strict=True):
        cnt = np.take(lst.cnt, o_, axis=1)
        rc = np.clip(r, 0, P - 1)
        split_l = split and len(gap) > 0
        if split_l:
            # per touch: the end of its unit's run of touches (units are sorted, first ones
            # have gap -1)
            starts = np.flatnonzero(gap < 0)
            ends = np.r_[starts[1:], len(gap)]
            end_of = np.repeat(ends, np.diff(np.r_[starts, len(gap)]))
        for j, thr in enumerate(thresholds):
            hit = (gap >= 0) & (gap <= thr[rc])
            hits[j] += float(cnt[NLOAD][hit].sum())
            dram[j] += float(cnt[NLGRAN][~hit].sum()) * lst.gbytes
            if split_l:
                idx = np.flatnonzero(~hit)
                nxt = end_of[idx]
                if len(idx) > 1:
                    nxt[:-1] = np.minimum(nxt[:-1], idx[1:])  # the next miss, if in the unit
                a = cnt[NLOAD][idx]
                g = cnt[NLGRAN][idx] * (lst.gbytes / SECTOR_BYTES)
                m_, f_ = residencies(nxt - idx, a, g)
                near[j] += m_
                fabric[j] += f_
    out = [OrderCounts(*v) for v in zip(hits, dram, near, fabric, strict=True)]
    return out, working_set
