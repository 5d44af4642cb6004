"""The footprint of every CTA of a launch from a sampled trace: synthesis of the untraced CTAs.

For a 2D grid whose CTAs touch translated copies of one footprint, the per-CTA steps of every
buffer, a footprint template and the edge policy (clamp or drop) are inferred from the traced
CTAs, and every CTA's units are built (:func:`synthesize`); :func:`build_footprint` falls back to
the traced CTAs when that fails, saying why. See :mod:`gpuadvise.model.l2` for the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.arrays import equal_rows
from gpuadvise.model.banks import active_lanes
from gpuadvise.model.coalescing import SECTOR_BYTES
from gpuadvise.model.l2.footprint import (
    NDIRTY,
    NLGRAN,
    NLOAD,
    NSTORE,
    Footprint,
    Matrix,
    SectorTriples,
    Touches,
    TouchList,
    distinct,
    extract,
    member,
    sector_touches,
    segments,
    sort_pairs,
    touch_list,
)
from gpuadvise.trace.access import AccessTrace

__all__ = [
    "SynthesisFailed",
    "build_footprint",
    "synthesize",
    "traced_subset",
]

_MAX_PAIRS = 48  # neighbouring traced CTA pairs used to infer the per-CTA steps
# records of a pair whose lane differences are taken, evenly spread over the CTA's warps and
# instructions (the mode of the differences needs a sample, not a loop's every iteration: a
# naive matmul's pairs held 12K records each, 18 M differences per direction)
_MAX_PAIR_RECORDS = 1024
_MAX_EDGE_CHECKS = 96  # traced edge CTAs compared against the clamp / drop synthesis
_SUBSET_RUNS, _SUBSET_RUN, _SUBSET_EDGE = 16, 32, 64  # traced CTAs the synthesis reads
_SUBSET_CENTRE = 128  # and the traced CTAs farthest from the grid's border
_MIN_EDGE_MATCH = 0.5  # traced edge CTAs' granules the clamp or drop synthesis must reproduce

# the most (unit, CTA) touches a synthesis may build: about 45 bytes each at the peak (an 8K frame
# of 8x8 blocks with 81 reuses per sector: 50 M touches, 2.3 GB)
_MAX_SYNTH_TOUCHES = 64_000_000


class SynthesisFailed(Exception):
    """The footprint cannot be synthesized for the untraced CTAs; the message says why."""


# the memory a synthesis may take: this share of what gpuadvise may use (the trace and the
# buffer data the traced CTAs touched are still held)
_MEMORY_SHARE = 0.25


def _check_memory(
    touches: int,
    boxes: Sequence[tuple[int, int, int, int, int]],
    residues: Sequence[Any],
    name: str,
) -> None:
    """SynthesisFailed when building every CTA's units would take more than its share of the
    memory budget: about 45 bytes a (unit, CTA) touch, and 25 bytes a (CTA row or column,
    residue) for the granule lattices (a 1D grid of 15 million CTAs reading 1 KiB each took
    4.8 GB). The fallback replays the traced CTAs only."""
    from gpuadvise.spec.budget import format_bytes, memory_budget

    lattice = sum((b[2] + b[3]) * len(r) for b, r in zip(boxes, residues, strict=True))
    need = 45 * touches + 25 * lattice
    budget = memory_budget()
    allowed = int(budget.bytes * _MEMORY_SHARE)
    if need > allowed:
        raise SynthesisFailed(
            f"buffer {name}: synthesizing every CTA would take about {format_bytes(need)} of "
            f"memory, more than {format_bytes(allowed)}, a quarter of {budget.describe()}"
        )


def _buffer_table(trace: AccessTrace, touches: Touches, fetch_bytes: int) -> list[tuple[int, int]]:
    """(base, size) of the buffers, sorted by base; addresses outside every buffer form one more
    pseudo-buffer spanning them (base aligned to the granule)."""
    bufs = sorted((int(b), int(s)) for b, s in trace.buffers.values() if s > 0)
    table = list(bufs)
    if len(touches.gran):
        addr = touches.gran * fetch_bytes
        idx = _buffer_of(addr, table)
        outside = addr[idx < 0]
        if len(outside):
            lo = int(outside.min()) // fetch_bytes * fetch_bytes
            hi = int(outside.max()) + fetch_bytes
            table.append((lo, hi - lo))
            table.sort()
    return table


def _buffer_of(addr: np.ndarray, table: Sequence[tuple[int, int]]) -> np.ndarray:
    if not table:
        return np.full(len(addr), -1, dtype=np.int64)
    bases = np.array([b for b, _ in table], dtype=np.int64)
    ends = np.array([b + s for b, s in table], dtype=np.int64)
    i = np.searchsorted(bases, addr, side="right") - 1
    ok = (i >= 0) & (addr < ends[np.clip(i, 0, None)])
    return np.where(ok, i, -1).astype(np.int64)


def _mode(values: np.ndarray) -> int | None:
    if len(values) == 0:
        return None
    u, c = np.unique(values, return_counts=True)
    return int(u[int(np.argmax(c))])


def _infer_steps(
    recs: np.ndarray, gx: int, gy: int, table: Sequence[tuple[int, int]]
) -> tuple[dict[int, int], dict[int, int]]:
    """Per buffer index: the byte step of a CTA move in x and in y (the most common difference of
    corresponding lane addresses of traced neighbours; corresponding = same warp, instruction and
    occurrence, in CTAs whose record sequences match)."""
    if len(recs) == 0:
        return {}, {}
    cta_all = recs["cta"].astype(np.int64)
    traced = set(distinct(cta_all).tolist())

    def pairs(dx: int, dy: int) -> list[int]:
        cands = [
            c
            for c in sorted(traced)
            if c % gx + dx < gx and c // gx + dy < gy and c + dx + dy * gx in traced
        ]
        if len(cands) > _MAX_PAIRS:
            pick = np.linspace(0, len(cands) - 1, _MAX_PAIRS).round().astype(int)
            cands = [cands[i] for i in pick]
        return cands

    px = pairs(1, 0) if gx > 1 else []
    py = pairs(0, 1) if gy > 1 else []
    need = np.array(sorted({*px, *(c + 1 for c in px), *py, *(c + gx for c in py)}), dtype=np.int64)
    sub = np.flatnonzero(member(cta_all, need))  # record indices: no copy of the records
    n = len(sub)
    if n == 0:
        return {}, {}
    cta_sub = cta_all[sub]
    warp = recs["warp"][sub].astype(np.int64)
    inst = recs["inst"][sub].astype(np.int64)
    # one stable sort by (CTA, warp, instruction): a dense combined key (need holds <= 4 *
    # _MAX_PAIRS CTAs), record order kept within
    cta_rank = np.searchsorted(need, cta_sub)
    nw, ni = int(warp.max()) + 1, int(inst.max()) + 1
    order = np.argsort((cta_rank * nw + warp) * ni + inst, kind="stable")
    cs = cta_sub[order]
    starts = segments(cs)
    ends = np.r_[starts[1:], n]
    seg = dict(
        zip(cs[starts].tolist(), zip(starts.tolist(), ends.tolist(), strict=True), strict=True)
    )
    wi = warp[order] * ni + inst[order]

    def rows(s0: int, e0: int) -> np.ndarray:
        """The records of a CTA whose differences are taken: all, or evenly spaced ones of each
        (warp, instruction), every one represented (a bias read once per thread keeps its step
        beside a loop's thousands of loads)."""
        if e0 - s0 <= _MAX_PAIR_RECORDS:
            return sub[order[s0:e0]]
        g = segments(wi[s0:e0])
        gl = np.diff(np.r_[g, e0 - s0])
        take = np.minimum(gl, max(1, _MAX_PAIR_RECORDS // len(g)))
        grp = np.repeat(np.arange(len(g)), take)
        j = np.arange(len(grp)) - np.repeat(np.cumsum(take) - take, take)
        return sub[order[s0 + g[grp] + (j * gl[grp]) // take[grp]]]

    def collect(cands: list[int], step: int) -> dict[int, int]:
        diffs: list[np.ndarray] = []
        bufs: list[np.ndarray] = []
        for c in cands:
            s0, e0 = seg[c]
            s1, e1 = seg[c + step]
            if e0 - s0 != e1 - s1 or not np.array_equal(wi[s0:e0], wi[s1:e1]):
                continue
            r0, r1 = recs[rows(s0, e0)], recs[rows(s1, e1)]
            act = active_lanes(r0["mask"]) & active_lanes(r1["mask"])
            a0 = r0["addr"][act].astype(np.int64)
            a1 = r1["addr"][act].astype(np.int64)
            diffs.append(a1 - a0)
            bufs.append(_buffer_of(a0, table))
        if not diffs:
            return {}
        d = np.concatenate(diffs)
        b = np.concatenate(bufs)
        out: dict[int, int] = {}
        for bi in distinct(b):
            m = _mode(d[b == bi])
            if m is not None and bi >= 0:
                out[int(bi)] = m
        return out

    return collect(px, 1), collect(py, gx)


@dataclass
class _Layout:
    ry: int  # rows per CTA step in y
    pg: int  # row pitch in granules
    m: int  # phases: CTAs per whole-granule step in x
    sx: int  # granules per super step (m CTAs) in x
    rows: tuple[int, int]  # in-buffer row bounds (inclusive)
    cols: tuple[int, int]  # in-buffer column bounds (inclusive), granules


def _residue_units(
    tr: np.ndarray, tc: np.ndarray, ph: np.ndarray, cnt: np.ndarray, lay: _Layout
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Group the template granules of all phases into unit shapes.

    Returns per shape: its toucher offsets ``(K, 3)`` (cell dy, cell dx, phase), its residues
    ``(w, 4)`` (residue row, residue col, cell offset y, cell offset x of the residue's first
    toucher), its counts ``(4, K)``; and per residue, ``(R, 4)``: residue id, shape, cell offset
    y, cell offset x. Shapes are numbered in the order of their first residue (by id); a shape's
    residues are in that order, and its counts summed in it (one bincount, the additions in the
    order a loop over the residues makes them: the same float sums).
    """
    ry_, rx_ = tr % lay.ry, tc % lay.sx
    ky, kx = tr // lay.ry, tc // lay.sx
    rho = ry_ * lay.sx + rx_
    o = np.lexsort((ph, kx, ky, rho))
    rho_s = rho[o].astype(np.int64)
    ky_s, kx_s, ph_s = ky[o].astype(np.int64), kx[o].astype(np.int64), ph[o].astype(np.int64)
    cnt_s = cnt[:, o]
    if len(rho_s) == 0:
        return [], [], [], np.zeros((0, 4), dtype=np.int64)
    starts = segments(rho_s)
    lens = np.diff(np.r_[starts, len(rho_s)])
    nseg = len(starts)
    seg_of = np.repeat(np.arange(nseg), lens)
    k0y, k0x = ky_s[starts], kx_s[starts]
    # every granule's toucher offset relative to its residue's first toucher: (N, 3)
    rel = np.stack([ky_s - k0y[seg_of], kx_s - k0x[seg_of], ph_s], axis=1)
    # residues of one shape: the same length and the same rows, found per length by a sort
    group_first: list[np.ndarray] = []  # per group (all lengths): its first residue
    group_of_seg = np.empty(nseg, dtype=np.int64)
    ngroups = 0
    for length in distinct(lens).tolist():
        segs = np.flatnonzero(lens == length)
        rows = rel[starts[segs][:, None] + np.arange(length)].reshape(len(segs), 3 * length)
        # which residues share their rows: the shapes are numbered below by their first
        # residue, so the labels' own order does not matter
        inv = equal_rows(rows)
        first = np.full(int(inv.max()) + 1, nseg, dtype=np.int64)
        np.minimum.at(first, inv, segs)
        group_of_seg[segs] = inv + ngroups
        group_first.append(first)
        ngroups += len(first)
    firsts = np.concatenate(group_first)
    order = np.argsort(firsts, kind="stable")  # shapes numbered by their first residue
    sid_of_group = np.empty(ngroups, dtype=np.int64)
    sid_of_group[order] = np.arange(ngroups)
    sid = sid_of_group[group_of_seg]
    first_seg = firsts[order]
    shapes = [
        rel[s : s + lens[s_i]].copy()
        for s_i, s in zip(first_seg.tolist(), starts[first_seg].tolist(), strict=True)
    ]
    sizes = lens[first_seg]
    base = np.r_[0, np.cumsum(sizes)[:-1]]
    # counts: each granule onto its shape's toucher slot, in the residues' order
    slot = base[sid][seg_of] + (np.arange(len(rho_s)) - starts[seg_of])
    total = int(sizes.sum())
    flat = np.stack(
        [np.bincount(slot, weights=cnt_s[i], minlength=total) for i in range(cnt_s.shape[0])]
    )
    counts = [flat[:, b : b + k] for b, k in zip(base.tolist(), sizes.tolist(), strict=True)]
    r = rho_s[starts]
    table = np.stack([r // lay.sx, r % lay.sx, k0y, k0x], axis=1)
    by_shape = np.argsort(sid, kind="stable")
    cuts = np.flatnonzero(np.diff(sid[by_shape])) + 1
    residues = np.split(table[by_shape], cuts)
    of_residue = np.stack([r, sid, k0y, k0x], axis=1)
    return shapes, residues, counts, of_residue


def _synthesize_buffer(
    base: int,
    size: int,
    touches_at: Callable[[int], Touches],
    traced: np.ndarray,
    ax: int | None,
    ay: int | None,
    gx: int,
    gy: int,
    block_y: int,
    fetch_bytes: int,
    boundary: str,
    model: Footprint,
    name: str,
) -> None:
    """Add the units of one buffer to ``model`` for every CTA of the grid; SynthesisFailed otherwise."""
    ctas_all = gx * gy
    if (gx == 1 or ax == 0) and (gy == 1 or ay == 0):
        _shared_buffer(touches_at(fetch_bytes), traced, ctas_all, fetch_bytes, model, name)
        return
    if gx > 1 and (ax is None or ax <= 0):
        raise SynthesisFailed(
            f"buffer {name}: no constant step between CTAs in x (not a translation)"
        )
    if gy > 1 and (ay is None or ay <= 0):
        raise SynthesisFailed(
            f"buffer {name}: no constant step between CTAs in y (not a translation)"
        )
    # layouts to try: (rows per CTA step, granule); the row pitch must be a whole number of
    # granules, else the granule shrinks to what divides it (sectors at least)
    cands: list[tuple[int, int]] = []
    if gy > 1:
        assert ay is not None
        for ry in dict.fromkeys((block_y, 1, 2 * block_y, 4 * block_y)):
            if ry < 1 or ay % ry:
                continue
            pitch = ay // ry
            if pitch % SECTOR_BYTES:
                continue
            if gx > 1 and ax is not None and (gx - 1) * ax >= pitch:
                continue  # a row must hold a whole row of CTAs
            cands.append((ry, math.gcd(pitch, fetch_bytes)))
        if not cands:
            raise SynthesisFailed(
                f"buffer {name}: the y step {ay} B is not a whole number of 32-byte rows"
            )
    else:
        cands.append((0, fetch_bytes))
    reason = ""
    for ry, g in cands:
        t = touches_at(g)
        q = t.gran - base // g
        nq = -(-size // g)
        if gy > 1:
            assert ay is not None
            pg = ay // ry // g
            nrows = -(-nq // pg)
            lay_ry = ry
        else:
            pg = max(nq, int(q.max(initial=0)) + 1)
            nrows = 1
            lay_ry = 1
        if gx > 1:
            assert ax is not None
            m = g // math.gcd(ax, g)
            sx = m * ax // g
        else:
            m, sx = 1, pg
        lay = _Layout(lay_ry, pg, m, sx, (0, nrows - 1), (0, pg - 1))
        try:
            _lattice_buffer(t, q, traced, lay, gx, gy, g, boundary, model, name)
        except SynthesisFailed as exc:
            reason = str(exc)
            continue
        if g != fetch_bytes:
            model.notes.append(
                f"buffer {name}: its row pitch ({pg * g} B) is not a multiple of "
                f"{fetch_bytes} B; modelled with {g}-byte fills"
            )
        return
    raise SynthesisFailed(reason)


def _shared_buffer(
    t: Touches, traced: np.ndarray, ctas_all: int, g: int, model: Footprint, name: str
) -> None:
    """A buffer every CTA touches identically: one unit touched by every CTA."""
    o = sort_pairs(t.cta - t.cta.min(initial=0), t.gran - t.gran.min(initial=0))
    cta, gran, cnt = t.cta[o], t.gran[o], t.cnt[:, o]
    starts = segments(cta)
    ends = np.r_[starts[1:], len(cta)]
    if len(starts) != len(traced):
        raise SynthesisFailed(f"buffer {name}: some traced CTAs do not touch it although others do")
    ref_g, ref_c = gran[starts[0] : ends[0]], cnt[:, starts[0] : ends[0]]
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if not (np.array_equal(gran[s:e], ref_g) and np.array_equal(cnt[:, s:e], ref_c)):
            raise SynthesisFailed(
                f"buffer {name}: the traced CTAs touch different data with no constant step"
            )
    tot = ref_c.sum(axis=1).astype(np.float64)
    model.lists.append(
        TouchList(
            unit=np.zeros(ctas_all, dtype=np.int64),
            cta=np.arange(ctas_all, dtype=np.int64),
            cnt=np.repeat(tot[:, None], ctas_all, axis=1),
            w_bytes=np.array([float(len(ref_g) * g)]),
            gbytes=g,
        )
    )


def _lattice_buffer(
    t: Touches,
    q: np.ndarray,
    traced: np.ndarray,
    lay: _Layout,
    gx: int,
    gy: int,
    g: int,
    boundary: str,
    model: Footprint,
    name: str,
) -> None:
    row, col = q // lay.pg, q % lay.pg
    bx, by = t.cta % gx, t.cta // gx
    rows_lo, rows_hi = lay.rows
    cols_lo, cols_hi = lay.cols
    tbx, tby = traced % gx, traced // gx
    # tighten the bounds to what the traced edge CTAs reach (a kernel clamps to the image, which
    # may be narrower than the pitch)
    if len(row):
        if (tbx == 0).any():
            cols_lo = int(col.min())
        if (tbx == gx - 1).any():
            cols_hi = int(col.max())
        if (tby == 0).any():
            rows_lo = int(row.min())
        if (tby == gy - 1).any():
            rows_hi = int(row.max())
    lay = _Layout(lay.ry, lay.pg, lay.m, lay.sx, (rows_lo, rows_hi), (cols_lo, cols_hi))
    oy = by * lay.ry
    ox = (bx // lay.m) * lay.sx
    tr, tc = row - oy, col - ox
    # per traced CTA: its granules as (tr, tc, counts) keys, sorted
    rmin, cmin = int(tr.min(initial=0)), int(tc.min(initial=0))
    width = int(tc.max(initial=0)) - cmin + 1
    pkey = (tr - rmin) * width + (tc - cmin)
    code = t.cnt[0] | (t.cnt[1] << 4) | (t.cnt[2] << 8) | (t.cnt[3] << 12)
    key = pkey * 65536 + code
    # entries come sorted by CTA then granule, which also sorts each CTA's keys (rows first)
    same = t.cta[1:] == t.cta[:-1]
    if (t.cta[1:] < t.cta[:-1]).any() or (same & (key[1:] <= key[:-1])).any():
        o = sort_pairs(t.cta - t.cta.min(initial=0), key - key.min(initial=0))
    else:
        o = np.arange(len(key))
    c_s, k_s = t.cta[o], key[o]
    starts = segments(c_s)
    ends = np.r_[starts[1:], len(c_s)]
    seg = dict(
        zip(c_s[starts].tolist(), zip(starts.tolist(), ends.tolist(), strict=True), strict=True)
    )
    row_s, col_s = row[o], col[o]

    def strictly_inside(s: int, e: int) -> bool:
        """Clear of the edges (so not clamped) along each grid dimension with several CTAs."""
        rows_ok = gy == 1 or (row_s[s:e].min() > lay.rows[0] and row_s[s:e].max() < lay.rows[1])
        cols_ok = gx == 1 or (col_s[s:e].min() > lay.cols[0] and col_s[s:e].max() < lay.cols[1])
        return bool(rows_ok and cols_ok)

    templates: dict[int, np.ndarray] = {}
    for phase in range(lay.m):
        best: tuple[int, int, int] | None = None
        for c in traced.tolist():
            if c % gx % lay.m != phase or c not in seg:
                continue
            s, e = seg[c]
            if not strictly_inside(s, e):
                continue
            x, y = c % gx, c // gx
            score = (e - s, min(x, gx - 1 - x, y, gy - 1 - y), -c)
            if best is None or score > best:
                best = score
        if best is None:
            raise SynthesisFailed(
                f"buffer {name}: no traced CTA (of phase {phase} of {lay.m}) whose accesses stay "
                "clear of the buffer's edges; trace CTAs away from the image border"
            )
        ref = -best[2]
        s, e = seg[ref]
        templates[phase] = k_s[s:e]
    # the template of each phase, decoded
    t_tr, t_tc, t_ph, t_cnt = [], [], [], []
    for phase, keys in templates.items():
        pk, cd = keys // 65536, keys % 65536
        t_tr.append(pk // width + rmin)
        t_tc.append(pk % width + cmin)
        t_ph.append(np.full(len(keys), phase, dtype=np.int64))
        t_cnt.append(np.stack([cd & 15, (cd >> 4) & 15, (cd >> 8) & 15, (cd >> 12) & 15]))
    T_tr, T_tc, T_ph = np.concatenate(t_tr), np.concatenate(t_tc), np.concatenate(t_ph)
    T_cnt = np.concatenate(t_cnt, axis=1)
    # check every traced CTA: inside -> exactly the template; at the edge -> clamp or drop
    tx, ty = traced % gx, traced // gx
    cta_ph = tx % lay.m
    inside = np.zeros(len(traced), dtype=bool)
    for phase in range(lay.m):
        sel = T_ph == phase
        on = cta_ph == phase
        oy_, ox_ = ty[on] * lay.ry, (tx[on] // lay.m) * lay.sx
        inside[on] = (
            (T_tr[sel].min() + oy_ >= lay.rows[0])
            & (T_tr[sel].max() + oy_ <= lay.rows[1])
            & (T_tc[sel].min() + ox_ >= lay.cols[0])
            & (T_tc[sel].max() + ox_ <= lay.cols[1])
        )
        tmpl = templates[phase]
        ins = traced[on & inside]
        if len(ins) == 0:
            continue
        se = np.array([seg.get(c, (0, 0)) for c in ins.tolist()], dtype=np.int64).reshape(-1, 2)
        bad = se[:, 1] - se[:, 0] != len(tmpl)
        if not bad.any():
            got = k_s[se[:, :1] + np.arange(len(tmpl))[None, :]]
            bad = ~(got == tmpl[None, :]).all(axis=1)
        if bad.any():
            c = int(ins[int(np.argmax(bad))])
            raise SynthesisFailed(
                f"buffer {name}: CTA ({c % gx}, {c // gx}) does not touch a translated copy of "
                "its neighbours' footprint (not translation-invariant)"
            )
    scores: dict[str, list[float]] = {"clamp": [], "drop": []}
    edges = traced[~inside]
    if len(edges) > _MAX_EDGE_CHECKS:
        edges = edges[np.linspace(0, len(edges) - 1, _MAX_EDGE_CHECKS).round().astype(int)]
    for c in edges.tolist():
        x, y = c % gx, c // gx
        sel = T_ph == x % lay.m
        syn_r = T_tr[sel] + y * lay.ry
        syn_c = T_tc[sel] + (x // lay.m) * lay.sx
        s, e = seg.get(c, (0, 0))
        real = distinct(row_s[s:e] * lay.pg + col_s[s:e])
        clamp = distinct(np.clip(syn_r, *lay.rows) * lay.pg + np.clip(syn_c, *lay.cols))
        ok = (syn_r >= lay.rows[0]) & (syn_r <= lay.rows[1])
        ok &= (syn_c >= lay.cols[0]) & (syn_c <= lay.cols[1])
        drop = distinct(syn_r[ok] * lay.pg + syn_c[ok])
        for pol, syn in (("clamp", clamp), ("drop", drop)):
            common = len(np.intersect1d(real, syn, assume_unique=True))
            union = len(real) + len(syn) - common
            scores[pol].append(common / union if union else 1.0)
    nX = -(-gx // lay.m)
    reaches_out = bool(
        T_tr.min() < lay.rows[0]
        or T_tr.max() + (gy - 1) * lay.ry > lay.rows[1]
        or T_tc.min() < lay.cols[0]
        or T_tc.max() + (nX - 1) * lay.sx > lay.cols[1]
    )
    if not reaches_out:
        policy = "drop"  # nothing is ever outside: no policy needed
    elif boundary == "auto":
        if scores["clamp"]:
            mc, md = float(np.mean(scores["clamp"])), float(np.mean(scores["drop"]))
            policy = "clamp" if mc >= md else "drop"
            match = max(mc, md)
            if match < _MIN_EDGE_MATCH:
                # the edge CTAs are no clamped or cut translates of the template: the steps
                # (or the template) are wrong, e.g. a kernel that remaps its blocks itself
                raise SynthesisFailed(
                    f"buffer {name}: the traced CTAs at the edge are not translates of the "
                    f"others, clamped or cut at the buffer's edges (at best {100 * match:.0f}% "
                    "of their granules)"
                )
            if match < 0.99:
                model.notes.append(
                    f"buffer {name}: edge CTAs approximated ({policy} to the buffer's edges "
                    f"reproduces {100 * match:.0f}% of the traced edge CTAs' granules)"
                )
        else:
            policy = "clamp"
            model.notes.append(
                f"buffer {name}: no traced CTA at the edge; accesses beyond it assumed clamped"
            )
    else:
        policy = boundary
    _build_units(T_tr, T_tc, T_ph, T_cnt.astype(np.float64), lay, gx, gy, g, policy, model, name)


def _build_units(
    T_tr: np.ndarray,
    T_tc: np.ndarray,
    T_ph: np.ndarray,
    T_cnt: np.ndarray,
    lay: _Layout,
    gx: int,
    gy: int,
    g: int,
    policy: str,
    model: Footprint,
    name: str = "",
) -> None:
    shapes, residues, counts, of_residue = _residue_units(T_tr, T_tc, T_ph, T_cnt, lay)
    nX = -(-gx // lay.m)
    spg = g // SECTOR_BYTES
    # residue id -> shape, first-toucher cell offset (for mapping clamped granules to units)
    n_res = lay.ry * lay.sx
    res_shape = np.full(n_res, -1, dtype=np.int64)
    res_k0 = np.zeros((n_res, 2), dtype=np.int64)
    res_shape[of_residue[:, 0]] = of_residue[:, 1]
    res_k0[of_residue[:, 0]] = of_residue[:, 2:]
    boxes = []  # per shape: (ay0, ax0, Ny, Nx, offset)
    total = 0
    for shp in shapes:
        ay0 = int(shp[:, 0].min())
        ax0 = int(shp[:, 1].min())
        ny = gy - 1 + int(shp[:, 0].max()) - ay0 + 1
        nx = nX - 1 + int(shp[:, 1].max()) - ax0 + 1
        boxes.append((ay0, ax0, ny, nx, total))
        total += ny * nx
    touches = sum(b[2] * b[3] * len(shp) for b, shp in zip(boxes, shapes, strict=True))
    _check_memory(touches, boxes, residues, name)
    if touches > _MAX_SYNTH_TOUCHES:
        # a footprint that large, or one translated by the wrong steps (a kernel that remaps its
        # blocks itself: its launch order is not its tile order) spanning far more units than
        # the grid has CTAs
        raise SynthesisFailed(
            f"buffer {name}: synthesizing every CTA would take {touches:,} (unit, CTA) touches, "
            f"more than the {_MAX_SYNTH_TOUCHES:,} allowed (a very large footprint, or CTAs "
            "whose footprints are not translates of each other in launch order)"
        )
    orphan_base = total
    per_shape: list[tuple[Any, ...]] = []  # (rows, columns, masks None but for clamping)
    for sid, shp in enumerate(shapes):
        ay0, ax0, ny, nx, off = boxes[sid]
        ay = ay0 + np.arange(ny, dtype=np.int64)
        ax = ax0 + np.arange(nx, dtype=np.int64)
        tby = ay[:, None] - shp[None, :, 0]  # (ny, K)
        vy = (tby >= 0) & (tby < gy)
        # touchers[y, x, k] = tby[y, k] * gx + tbx[x, k], -1 where either is off the grid: in
        # int32, an off-grid term a large negative that keeps the sum negative (one add and one
        # clip over the (units, K) array; the 8K gather's is 242,000 x 81)
        if gx * gy < 1 << 30 and lay.m >= 1:
            off_grid = np.int32(-(1 << 30))
            row = np.where(vy, tby * gx, off_grid).astype(np.int32)
            col = _column_ctas(ax0, nx, shp[:, 1], shp[:, 2], lay.m, gx, off_grid)
            cube = np.empty((ny, nx, len(shp)), dtype=np.int32)
            np.add(row[:, None, :], col[None, :, :], out=cube)
            del row, col
            np.maximum(cube, -1, out=cube)
            touchers = cube.reshape(ny * nx, -1)
        else:  # CTA ids past 2**30 (int32 all the same, as every toucher table)
            # (nx, K): in int32 when the cells and CTA columns fit
            reach = max(abs(ax0), abs(ax0 + nx), int(np.abs(shp).max(initial=0)))
            ix = np.int32 if (2 * reach + 1) * (lay.m + 1) < 1 << 30 else np.int64
            tX = np.subtract(ax.astype(ix)[:, None], shp[None, :, 1].astype(ix), dtype=ix)
            tbx = tX * ix(lay.m)
            tbx += shp[None, :, 2].astype(ix)
            vx = (tX >= 0) & (tbx < gx)
            del tX
            valid = vy[:, None, :] & vx[None, :, :]
            big = tby[:, None, :] * gx + tbx[None, :, :]
            touchers = np.where(valid, big, -1).reshape(ny * nx, -1).astype(np.int32)
        res = residues[sid]
        # (ny, w) and (nx, w), each made in place (sobol's lattice buffer: 1,000 x 62,500, a
        # 477 MB int64 array each temporary, issue 31's peak), held only where clamping reads
        # them below
        rows = ay[:, None] + res[None, :, 2]
        rows *= lay.ry
        rows += res[None, :, 0]
        rin = (rows >= lay.rows[0]) & (rows <= lay.rows[1])
        w = rows.shape[1]
        if policy != "clamp":
            del rows
        cols = ax[:, None] + res[None, :, 3]
        cols *= lay.sx
        cols += res[None, :, 1]
        cin = (cols >= lay.cols[0]) & (cols <= lay.cols[1])
        if policy != "clamp":
            del cols
        # a count of ones: below 2**24, float32 products and sums are exact, the same float64
        # values as float64 ones, in half the memory
        fd = np.float32 if w < 1 << 24 else np.float64
        w_in = (rin.astype(fd) @ cin.astype(fd).T).reshape(-1).astype(np.float64)
        # valid touchers per unit: the k where both terms are on the grid (those >= 0: the
        # count of vy @ vx.T, without its (nx, K) float64 copy of vx)
        nvalid = np.count_nonzero(touchers >= 0, axis=1).astype(np.int64)
        if policy == "clamp":
            per_shape.append((touchers, nvalid, w_in, rows, cols, rin, cin))
        else:  # (rows, columns and their masks: read by clamping alone)
            del rin, cin
            per_shape.append((touchers, nvalid, w_in, None, None, None, None))
    # clamped granules of partly outside units become extra touches of the units they land in
    offsets = np.array([b[4] for b in boxes] + [orphan_base], dtype=np.int64)
    # clamping: the out-of-buffer granules of a unit land on edge granules. Each edge unit that
    # receives some is split into sub-units: its granules grouped by the set of source units that
    # land on them (plus the rest, untouched by clamping), so a clamped CTA touches exactly the
    # granules it reads there. Units of no template shape (orphans) are single granules.
    src_l, gid_l, tgt_l = [], [], []
    if policy == "clamp":
        for sid in range(len(shapes)):
            touchers, nvalid, w_in, rows, cols, rin, cin = per_shape[sid]
            w = len(residues[sid])
            src = np.flatnonzero((nvalid > 0) & (w_in < w))
            if len(src) == 0:
                continue
            nx = cols.shape[0]
            iy, ix = src // nx, src % nx
            js, ri = np.nonzero(~(rin[iy] & cin[ix]))
            gr = np.clip(rows[iy[js], ri], *lay.rows)
            gc = np.clip(cols[ix[js], ri], *lay.cols)
            src_l.append(offsets[sid] + src[js])
            gid_l.append(gr * lay.pg + gc)
            tgt_l.append(_unit_of(gr, gc, lay, res_shape, res_k0, boxes, orphan_base))
    lu: list[np.ndarray] = []
    lc: list[np.ndarray] = []
    ln: list[np.ndarray] = []
    listed = np.zeros(0, dtype=np.int64)
    sub_w = np.zeros(0)
    if src_l:
        src_a, gid_a, tgt_a = np.concatenate(src_l), np.concatenate(gid_l), np.concatenate(tgt_l)
        # distinct (source, granule): a CTA requests each clamped granule once
        o = sort_pairs(gid_a - gid_a.min(), src_a)
        src_a, gid_a, tgt_a = src_a[o], gid_a[o], tgt_a[o]
        keep_ = np.ones(len(o), dtype=bool)
        keep_[1:] = (src_a[1:] != src_a[:-1]) | (gid_a[1:] != gid_a[:-1])
        src_a, gid_a, tgt_a = src_a[keep_], gid_a[keep_], tgt_a[keep_]
        # per granule: a signature of its set of sources (sum of 64-bit hashes)
        gs = segments(gid_a)
        sig = np.add.reduceat(_mix64(src_a), gs)
        g_tgt = tgt_a[gs]
        # sub-units: (target unit, signature)
        o2 = np.lexsort((sig, g_tgt))
        t2, s2 = g_tgt[o2], sig[o2]
        ch = np.ones(len(o2), dtype=bool)
        ch[1:] = (t2[1:] != t2[:-1]) | (s2[1:] != s2[:-1])
        sub_sorted = np.cumsum(ch) - 1
        sub_of_g = np.empty(len(gs), dtype=np.int64)
        sub_of_g[o2] = sub_sorted
        n_sub = np.bincount(sub_sorted).astype(np.float64)
        sub_tgt = t2[ch]
        # the rest of each regular target unit is one more sub-unit
        listed = distinct(sub_tgt[sub_tgt < orphan_base])
        in_units = np.bincount(
            np.searchsorted(listed, sub_tgt[sub_tgt < orphan_base]),
            weights=n_sub[sub_tgt < orphan_base],
            minlength=len(listed),
        )
        l_sid = np.searchsorted(offsets, listed, side="right") - 1
        l_loc = listed - offsets[l_sid]
        l_win = np.array([per_shape[int(a)][2][int(b)] for a, b in zip(l_sid, l_loc, strict=True)])
        rest = l_win - in_units
        has_rest = rest > 0.5
        sub_w = np.concatenate([n_sub, rest[has_rest]])
        sub_unit = np.concatenate([sub_tgt, listed[has_rest]])
        # extra touches: the touchers of each source touch the sub-units its granules land in
        sub_per_pair = sub_of_g[np.repeat(np.arange(len(gs)), np.diff(np.r_[gs, len(src_a)]))]
        pk = distinct(src_a * (len(sub_w) + 1) + sub_per_pair)
        p_src, p_sub = pk // (len(sub_w) + 1), pk % (len(sub_w) + 1)
        p_sid = np.searchsorted(offsets, p_src, side="right") - 1
        for sid in distinct(p_sid).tolist():
            sel = p_sid == sid
            pi, kk, who = _valid_touches(per_shape[sid][0][p_src[sel] - offsets[sid]])
            frac = sub_w[p_sub[sel][pi]] / len(residues[sid])
            lu.append(p_sub[sel][pi])
            lc.append(who)
            ln.append(_scaled_counts(counts[sid], kk, frac))
        # regular touches of the split units reach every sub-unit of theirs
        is_reg = sub_unit < orphan_base
        r_sub = np.flatnonzero(is_reg)
        r_sid = np.searchsorted(offsets, sub_unit[r_sub], side="right") - 1
        for sid in distinct(r_sid).tolist():
            sel = r_sub[r_sid == sid]
            pi, kk, who = _valid_touches(per_shape[sid][0][sub_unit[sel] - offsets[sid]])
            frac = sub_w[sel[pi]] / len(residues[sid])
            lu.append(sel[pi])
            lc.append(who)
            ln.append(_scaled_counts(counts[sid], kk, frac))
    for sid in range(len(shapes)):
        touchers, nvalid, w_in, *_ = per_shape[sid]
        w = len(residues[sid])
        ids = offsets[sid] + np.arange(len(nvalid), dtype=np.int64)
        keep = (nvalid > 0) & (w_in > 0) & ~member(ids, listed)
        if keep.any():
            # every unit kept: the touchers' (units, K) table itself, not a copy
            sel = slice(None) if keep.all() else keep
            model.mats.append(
                Matrix(
                    touchers=touchers[sel],
                    nvalid=nvalid[sel].astype(np.int64),
                    w_bytes=w_in[sel] * g,
                    scale=w_in[sel] / w,
                    cnt=counts[sid],
                    gbytes=g,
                )
            )
    if not lu:
        return
    all_u = np.concatenate(lu)
    all_c = np.concatenate(lc)
    all_n = np.concatenate(ln, axis=1)
    # merge (sub-unit, cta) duplicates; cap the requests at the sub-unit's sectors
    o = sort_pairs(all_u, all_c)
    all_u, all_c, all_n = all_u[o], all_c[o], np.take(all_n, o, axis=1)
    pair_change = np.empty(len(all_u), dtype=bool)
    pair_change[0] = True
    pair_change[1:] = (all_u[1:] != all_u[:-1]) | (all_c[1:] != all_c[:-1])
    ps = np.flatnonzero(pair_change)
    merged = np.add.reduceat(all_n, ps, axis=1)
    lim = sub_w[all_u[ps]]
    for counter in (NLOAD, NSTORE, NDIRTY):
        merged[counter] = np.minimum(merged[counter], lim * spg)
    merged[NLGRAN] = np.minimum(merged[NLGRAN], lim)
    model.lists.append(
        TouchList(unit=all_u[ps], cta=all_c[ps], cnt=merged, w_bytes=sub_w * g, gbytes=g)
    )


def _column_ctas(
    ax0: int,
    nx: int,
    sx: np.ndarray,
    sph: np.ndarray,
    m: int,
    gx: int,
    off_grid: np.integer,
) -> np.ndarray:
    """The CTA column of every (unit column, relative toucher) of a shape, int32 ``(nx, K)``:
    ``tbx = (ax0 + i - sx[k]) * m + sph[k]`` where that CTA is on the grid (``ax0 + i - sx[k]
    >= 0`` and ``tbx < gx``), else ``off_grid``. On the grid is one run of ``i`` per column
    (``tbx`` grows with ``i``), so each column is written there alone, not computed, compared
    and selected over the whole table (hecbench scan's is 262,143 x 125, one CTA a unit)."""
    K = len(sx)
    col = np.full((nx, K), off_grid, dtype=np.int32)
    for k in range(K):
        s1, s2 = int(sx[k]), int(sph[k])
        t_hi = (gx - 1 - s2) // m  # the largest tX whose tbx is on the grid
        lo = max(0, s1 - ax0)  # tX = ax0 + i - s1 >= 0
        hi = min(nx, s1 - ax0 + t_hi + 1)
        if lo < hi:
            t = np.arange(ax0 + lo - s1, ax0 + hi - s1, dtype=np.int64)
            t *= m
            t += s2
            col[lo:hi, k] = t
    return col


def _valid_touches(tch: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.nonzero(tch >= 0)`` of a (units, K) toucher table (rows, columns) and the touchers
    there, int64, from the flat indices: the same arrays in the same order, without the 2-D
    gathers (a million touches of the 8K gather's edge units)."""
    flat = np.flatnonzero(tch >= 0)
    k = tch.shape[1]
    return flat // k, flat % k, np.take(tch.reshape(-1), flat).astype(np.int64)


def _scaled_counts(counts: np.ndarray, kk: np.ndarray, frac: np.ndarray) -> np.ndarray:
    """``counts[:, kk] * frac[None, :]``: the counts of the columns ``kk``, each scaled by its
    ``frac`` (the same products), gathered by ``np.take`` (twice as fast as the fancy index)."""
    out = np.take(counts, kk, axis=1)
    out *= frac[None, :]
    return out


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 of int64 values: well-spread 64-bit hashes (sums of them identify sets)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _unit_of(
    gr: np.ndarray,
    gc: np.ndarray,
    lay: _Layout,
    res_shape: np.ndarray,
    res_k0: np.ndarray,
    boxes: list[tuple[int, int, int, int, int]],
    orphan_base: int,
) -> np.ndarray:
    """Unit ids of in-buffer granules (row, col); granules of no template unit get orphan ids."""
    rho = (gr % lay.ry) * lay.sx + gc % lay.sx
    sid = res_shape[rho]
    ky, kx = gr // lay.ry - res_k0[rho, 0], gc // lay.sx - res_k0[rho, 1]
    out = orphan_base + gr * lay.pg + gc
    for s, (ay0, ax0, ny, nx, off) in enumerate(boxes):
        sel = sid == s
        iy, ix = ky[sel] - ay0, kx[sel] - ax0
        ok = (iy >= 0) & (iy < ny) & (ix >= 0) & (ix < nx)
        vals = np.where(ok, off + iy * nx + ix, out[sel])
        out[sel] = vals
    return out


def synthesize(
    trace: AccessTrace,
    recs: np.ndarray,
    srecs: np.ndarray,
    traced: np.ndarray,
    gx: int,
    gy: int,
    fetch_bytes: int,
    boundary: str,
    triples: SectorTriples | None = None,
    touches: Touches | None = None,
) -> Footprint:
    """Units of every CTA of the grid, from the footprints of the ``traced`` CTAs (their records:
    ``srecs``, and their :func:`sector_touches` and granules of ``fetch_bytes`` when already
    taken; ``recs``: all records, for the CTA steps)."""
    if triples is None:  # granule-free: one expansion for every granule below
        triples = sector_touches(srecs)
    t = extract(srecs, fetch_bytes, triples) if touches is None else touches
    table = _buffer_table(trace, t, fetch_bytes)
    names = {int(b): k for k, (b, _) in trace.buffers.items()}
    sx, sy = _infer_steps(recs, gx, gy, table)
    cache: dict[int, tuple[Touches, np.ndarray]] = {}

    def split(g: int) -> tuple[Touches, np.ndarray]:
        tt = cache[g][0] if g in cache else (t if g == fetch_bytes else extract(srecs, g, triples))
        bidx = _buffer_of(tt.gran * g, table)
        cache[g] = (tt, bidx)
        return cache[g]

    model = Footprint()
    for bi, (base, size) in enumerate(table):
        tt, bidx = split(fetch_bytes)
        if not (bidx == bi).any():
            continue

        def touches_at(g: int, bi: int = bi) -> Touches:
            tg, bg = split(g)
            sel = bg == bi
            return Touches(tg.cta[sel], tg.gran[sel], tg.cnt[:, sel])

        _synthesize_buffer(
            base,
            size,
            touches_at,
            traced,
            sx.get(bi),
            sy.get(bi),
            gx,
            gy,
            int(trace.block[1]),
            fetch_bytes,
            boundary,
            model,
            names.get(base, f"@{base:#x}"),
        )
    return model


def traced_subset(traced: np.ndarray, gx: int, gy: int | None = None) -> np.ndarray:
    """The traced CTAs the synthesis reads: runs of consecutive CTAs (every phase of the CTA
    steps) spread over the traced set, its first and last CTAs, the CTAs on the grid's left
    and right edges (they bound the buffer), thinned out where the trace is large, and the
    :data:`_SUBSET_CENTRE` CTAs farthest from the grid's border (``gy`` rows: the ones whose
    footprints are not clamped, which check the translation best)."""
    n = len(traced)
    if n <= _SUBSET_RUNS * _SUBSET_RUN + 2 * _SUBSET_EDGE:
        return traced
    keep = np.zeros(n, dtype=bool)
    for s in np.linspace(0, n - _SUBSET_RUN, _SUBSET_RUNS).round().astype(int).tolist():
        keep[s : s + _SUBSET_RUN] = True
    bx = traced % gx
    for sel in (bx == 0, bx == gx - 1):
        idx = np.flatnonzero(sel)
        if len(idx) > _SUBSET_EDGE:
            idx = idx[np.linspace(0, len(idx) - 1, _SUBSET_EDGE).round().astype(int)]
        keep[idx] = True
    if gy is not None and gy > 1:
        by = traced // gx
        depth = np.minimum(np.minimum(bx, gx - 1 - bx), np.minimum(by, gy - 1 - by))
        keep[np.argsort(-depth, kind="stable")[:_SUBSET_CENTRE]] = True
    return traced[keep]


def build_footprint(
    trace: AccessTrace, recs: np.ndarray, fetch_bytes: int, boundary: str, gx: int, gy: int
) -> tuple[Footprint, str, np.ndarray | None]:
    traced = distinct(np.asarray(trace.ctas, dtype=np.int64))
    if trace.complete:
        t = extract(recs, fetch_bytes)
        model = Footprint(lists=[touch_list(t, fetch_bytes)] if len(t.cta) else [])
        return model, "complete", None
    sub = traced_subset(traced, gx, gy)
    whole = len(sub) == len(traced)
    srecs = recs if whole else recs[member(recs["cta"], sub)]
    triples = sector_touches(srecs)
    t = extract(srecs, fetch_bytes, triples)
    try:
        model = synthesize(trace, recs, srecs, sub, gx, gy, fetch_bytes, boundary, triples, t)
        return model, "synthesized", None
    except SynthesisFailed as exc:
        if not whole:  # every traced CTA's granules (the synthesis read a subset's)
            t = extract(recs, fetch_bytes)
        model = Footprint(lists=[touch_list(t, fetch_bytes)] if len(t.cta) else [])
        model.notes.append(
            f"only the {len(traced)} traced CTAs of {gx * gy} are replayed ({exc}); "
            "windows are scaled by the traced fraction and DRAM bytes extrapolated"
        )
        mask = np.zeros(gx * gy, dtype=np.float64)
        mask[traced[(traced >= 0) & (traced < gx * gy)]] = 1.0
        return model, "traced-only", mask
