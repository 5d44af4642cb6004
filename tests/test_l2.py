"""The L2 model (gpuadvise/model/l2.py) on synthetic traces with hand-computable answers.

Oracles: hand counts (streaming, a tile every CTA reads, compulsory misses), an exact LRU replay of
the same footprints in the same CTA order (an OrderedDict, small cases only), the complete trace
against a sampled one (synthesis of the untraced CTAs), and the CUDA snippet of the tiled remap
compiled with g++ against :func:`tiled_order`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpuadvise.devices import preset
from gpuadvise.errors import UsageError
from gpuadvise.model import l2 as L
from gpuadvise.model.l2 import (
    L2Result,
    default_efficiency,
    l2_model,
    order_permutation,
    tiled_block_index_cuda,
    tiled_order,
)
from gpuadvise.trace import AccessTrace, InstrInfo, Kind, Space, empty_records

IN_BASE = 1 << 32
BITS = np.uint64(1) << np.arange(32, dtype=np.uint64)
INSTR = (
    InstrInfo(0, "k.cu", 10, "ld.global.f32", Space.GLOBAL, Kind.LOAD, 4),
    InstrInfo(1, "k.cu", 12, "st.global.f32", Space.GLOBAL, Kind.STORE, 4),
)


def device(l2_bytes: int, sms: int = 4):
    return replace(preset("RTX2080"), l2_bytes=l2_bytes, sm_count=sms)


def _masks(active: np.ndarray) -> np.ndarray:
    return (active.astype(np.uint64) * BITS).sum(axis=-1).astype(np.uint32)


def gather_trace(W, H, BX, BY, R, S, ctas=None, clamp=True):
    """out[y][x] = sum of in[clamp(y+dy)][clamp(x+dx)], dy, dx in -R..R step S (4-byte pixels):
    one load record per warp and offset, then one store record per warp."""
    gx, gy = -(-W // BX), -(-H // BY)
    ctas = np.arange(gx * gy) if ctas is None else np.unique(np.asarray(ctas))
    out_base = IN_BASE + (W * H * 4 + 255) // 256 * 256 + 4096
    nthr = BX * BY
    nw = -(-nthr // 32)
    offs = np.arange(-R, R + 1, S)
    dy, dx = (a.ravel() for a in np.meshgrid(offs, offs, indexing="ij"))
    no = len(dy)
    t = np.arange(nw * 32).reshape(nw, 32)
    cbx, cby = ctas % gx, ctas // gx
    x = cbx[:, None, None] * BX + (t % BX)[None]
    y = cby[:, None, None] * BY + (t // BX)[None]
    act = (t[None] < nthr) & (x < W) & (y < H)
    xx = x[:, :, None, :] + dx[None, None, :, None]
    yy = y[:, :, None, :] + dy[None, None, :, None]
    if clamp:
        xx, yy = np.clip(xx, 0, W - 1), np.clip(yy, 0, H - 1)
        live = np.broadcast_to(act[:, :, None, :], xx.shape)
    else:
        live = act[:, :, None, :] & (xx >= 0) & (xx < W) & (yy >= 0) & (yy < H)
    rec = empty_records(len(ctas) * nw * (no + 1)).reshape(len(ctas), nw, no + 1)
    rec["cta"] = ctas[:, None, None]
    rec["warp"] = np.arange(nw)[None, :, None]
    rec["inst"][:, :, no] = 1
    rec["width"] = 4
    rec["space"] = int(Space.GLOBAL)
    rec["kind"][:, :, :no] = int(Kind.LOAD)
    rec["kind"][:, :, no] = int(Kind.STORE)
    rec["mask"][:, :, :no] = _masks(live)
    rec["mask"][:, :, no] = _masks(act)
    rec["addr"][:, :, :no, :] = np.where(live, IN_BASE + (yy * W + xx) * 4, 0)
    rec["addr"][:, :, no, :] = np.where(act, out_base + (y * W + x) * 4, 0)
    rec = rec.reshape(-1)
    rec = rec[rec["mask"] != 0]
    return AccessTrace(
        records=rec,
        instructions=INSTR,
        ctas=tuple(int(c) for c in ctas),
        total_ctas=gx * gy,
        grid=(gx, gy, 1),
        block=(BX, BY, 1),
        source="emulator",
        buffers={"in": (IN_BASE, W * H * 4), "out": (out_base, W * H * 4)},
    )


def lru_replay(trace: AccessTrace, perm: np.ndarray, cap_bytes: int, granule: int = 32):
    """Exact LRU over granules, CTAs in launch order, each CTA's distinct granules in address
    order: (read hit rate, DRAM read bytes)."""
    t = L._extract(trace.records, granule)
    o = np.lexsort((t.gran, t.cta))
    cta, gran, nload = t.cta[o], t.gran[o], t.cnt[0, o]
    lo = np.searchsorted(cta, np.arange(trace.total_ctas))
    hi = np.searchsorted(cta, np.arange(trace.total_ctas), side="right")
    lru: OrderedDict[int, None] = OrderedDict()
    n = cap_bytes // granule
    hits = req = dram = 0
    for c in perm.tolist():
        for g, nl in zip(gran[lo[c] : hi[c]].tolist(), nload[lo[c] : hi[c]].tolist(), strict=True):
            if g in lru:
                lru.move_to_end(g)
                hits += nl
            else:
                dram += granule if nl else 0
                lru[g] = None
                if len(lru) > n:
                    lru.popitem(last=False)
            req += nl
    return hits / req, dram


def sampled(W, H, B, R, S, **kw):
    """The same gather traced on its first, middle two and last CTA rows only."""
    gx, gy = -(-W // B), -(-H // B)
    rows = {0, gy // 2, gy // 2 + 1, gy - 1}
    return gather_trace(W, H, B, B, R, S, [c for c in range(gx * gy) if c // gx in rows], **kw)


# --------------------------------------------------------------------------------------------
# Launch orders


@pytest.mark.parametrize("gx,gy", [(10, 3), (7, 5), (16, 4), (1, 6), (5, 1), (33, 17)])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("axis", ["x", "y"])
def test_tiled_order_is_a_bijection(gx, gy, n, axis):
    xy = tiled_order(gx, gy, n, axis)
    assert xy.shape == (gx * gy, 2)
    assert (xy[:, 0] >= 0).all() and (xy[:, 0] < gx).all()
    assert (xy[:, 1] >= 0).all() and (xy[:, 1] < gy).all()
    assert len(np.unique(xy[:, 0] + xy[:, 1] * gx)) == gx * gy


def test_tiled_order_partial_last_tile():
    # 10 x 3 grid, N = 4: tiles of 4, 4 and 2 columns, each launched row-major
    xy = tiled_order(10, 3, 4, "x")
    first = [tuple(p) for p in xy[:12].tolist()]
    assert first == [(x, y) for y in range(3) for x in range(4)]
    second = [tuple(p) for p in xy[12:24].tolist()]
    assert second == [(x, y) for y in range(3) for x in range(4, 8)]
    last = [tuple(p) for p in xy[24:].tolist()]
    assert last == [(8, 0), (9, 0), (8, 1), (9, 1), (8, 2), (9, 2)]
    # the transposed scheme: 3 x 10 grid, tiles of 4 rows, each column-major
    xy = tiled_order(3, 10, 4, "y")
    assert [tuple(p) for p in xy[:12].tolist()] == [(x, y) for x in range(3) for y in range(4)]
    assert [tuple(p) for p in xy[24:].tolist()] == [(0, 8), (0, 9), (1, 8), (1, 9), (2, 8), (2, 9)]


def test_tiled_order_degenerate_sizes():
    rm = np.stack([np.arange(35) % 7, np.arange(35) // 7], axis=1)
    assert np.array_equal(tiled_order(7, 5, 7, "x"), rm)  # one tile as wide as the grid
    assert np.array_equal(tiled_order(7, 5, 64, "x"), rm)
    assert np.array_equal(tiled_order(7, 5, 1, "y"), rm)  # tiles one row high
    cm = np.stack([np.arange(35) // 5, np.arange(35) % 5], axis=1)
    assert np.array_equal(tiled_order(7, 5, 1, "x"), cm)  # tiles one column wide
    assert np.array_equal(order_permutation("column-major", 7, 5)[2], cm[:, 0] + cm[:, 1] * 7)
    with pytest.raises(ValueError):
        tiled_order(7, 5, 0)


def test_order_permutation_specs():
    assert order_permutation("row-major", 4, 3)[:2] == ("row-major", None)
    name, n, perm = order_permutation(("tile-x", 2), 4, 3)
    assert (name, n) == ("tile-x", 2)
    assert perm.tolist() == [0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11]
    xy = tiled_order(4, 3, 2, "y")
    assert np.array_equal(order_permutation(xy, 4, 3)[2], xy[:, 0] + xy[:, 1] * 4)
    assert order_permutation(("morton", np.arange(12)), 4, 3)[0] == "morton"
    with pytest.raises(UsageError):
        order_permutation(np.zeros(12, dtype=int), 4, 3)
    with pytest.raises(UsageError):
        order_permutation("diagonal", 4, 3)


_HARNESS = r"""
#include <cstdio>
struct uint2 { unsigned int x, y; };
static inline uint2 make_uint2(unsigned int x, unsigned int y) { uint2 r = {x, y}; return r; }
struct dim3_ { unsigned int x, y, z; };
static dim3_ gridDim, blockIdx;
#define __device__
#define __forceinline__ inline
%s
int main() {
    unsigned int gx, gy;
    while (std::scanf("%%u %%u", &gx, &gy) == 2) {
        gridDim.x = gx; gridDim.y = gy; gridDim.z = 1;
        for (unsigned int y = 0; y < gy; ++y)
            for (unsigned int x = 0; x < gx; ++x) {
                blockIdx.x = x; blockIdx.y = y; blockIdx.z = 0;
                uint2 b = remap();
                std::printf("%%u %%u\n", b.x, b.y);
            }
    }
    return 0;
}
"""

GRIDS = [(10, 3), (7, 5), (16, 4), (1, 6), (5, 1), (33, 17), (480, 270), (13, 64)]


@pytest.mark.parametrize("axis", ["x", "y"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16, 32, 64])
def test_cuda_snippet_matches_tiled_order(tmp_path: Path, n: int, axis: str):
    gxx = shutil.which("g++") or shutil.which("c++")
    if gxx is None:
        pytest.skip("no host C++ compiler")
    src = tmp_path / "remap.cpp"
    src.write_text(_HARNESS % tiled_block_index_cuda(n, axis, name="remap"))
    exe = tmp_path / "remap"
    subprocess.run([gxx, "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    stdin = "".join(f"{gx} {gy}\n" for gx, gy in GRIDS)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True)
    got = np.array(out.stdout.split(), dtype=np.int64).reshape(-1, 2)
    want = np.concatenate([tiled_order(gx, gy, n, axis) for gx, gy in GRIDS])
    assert np.array_equal(got, want)


# --------------------------------------------------------------------------------------------
# Hand-computable traces


def streaming_trace(ctas_total: int, traced=None) -> AccessTrace:
    """128 threads per CTA, each reads in[i] and writes out[i] (4 bytes, coalesced)."""
    traced = np.arange(ctas_total) if traced is None else np.asarray(traced)
    out_base = IN_BASE + ctas_total * 512 + 256
    rec = empty_records(len(traced) * 8).reshape(len(traced), 2, 4)
    lane = np.arange(32)
    warp = np.arange(4)
    idx = traced[:, None, None] * 128 + warp[None, :, None] * 32 + lane
    rec["cta"] = traced[:, None, None]
    rec["warp"] = warp[None, None, :]
    rec["mask"] = 0xFFFFFFFF
    rec["width"] = 4
    rec["space"] = int(Space.GLOBAL)
    rec["inst"][:, 1] = 1
    rec["kind"][:, 0] = int(Kind.LOAD)
    rec["kind"][:, 1] = int(Kind.STORE)
    rec["addr"][:, 0] = IN_BASE + idx * 4
    rec["addr"][:, 1] = out_base + idx * 4
    return AccessTrace(
        records=rec.reshape(-1),
        instructions=INSTR,
        ctas=tuple(int(c) for c in traced),
        total_ctas=ctas_total,
        grid=(ctas_total, 1, 1),
        block=(128, 1, 1),
        source="emulator",
        buffers={"in": (IN_BASE, ctas_total * 512), "out": (out_base, ctas_total * 512)},
    )


@pytest.mark.parametrize("traced", [None, range(0, 40)])
def test_streaming_kernel_never_hits(traced):
    P = 500
    res = l2_model(streaming_trace(P, traced), device(1 << 20), 2, ("row-major", ("tile-x", 8)))
    assert res.mode == ("complete" if traced is None else "synthesized")
    for o in res.orders:
        assert o.read_hit_rate == 0.0  # every 32-byte sector read once, by one CTA
        assert o.hit_rate == pytest.approx(0.5)  # as many store sectors, all hits
        assert o.dram_bytes == P * 512
        assert o.dram_write_bytes == P * 512
        assert o.sectors == 2 * 16 * P
    assert res.footprint_bytes == 2 * P * 512
    assert res.best.order == "row-major"


def shared_tile_trace(gx: int, gy: int, traced=None) -> AccessTrace:
    """Every CTA of a gx x gy grid reads the same 64 KB: 256 threads x 64 coalesced 4-byte loads."""
    traced = np.arange(gx * gy) if traced is None else np.asarray(traced)
    rec = empty_records(len(traced) * 8 * 64).reshape(len(traced), 8, 64)
    t = np.arange(8)[:, None, None] * 32 + np.arange(32)[None, None, :]
    it = np.arange(64)[None, :, None]
    rec["cta"] = traced[:, None, None]
    rec["warp"] = np.arange(8)[None, :, None]
    rec["mask"] = 0xFFFFFFFF
    rec["width"] = 4
    rec["space"] = int(Space.GLOBAL)
    rec["kind"] = int(Kind.LOAD)
    rec["addr"] = (IN_BASE + (it * 256 + t) * 4)[None]
    return AccessTrace(
        records=rec.reshape(-1),
        instructions=INSTR[:1],
        ctas=tuple(int(c) for c in traced),
        total_ctas=gx * gy,
        grid=(gx, gy, 1),
        block=(256, 1, 1),
        source="emulator",
        buffers={"table": (IN_BASE, 65536)},
    )


@pytest.mark.parametrize("traced", [None, [0, 1, 2, 9, 17, 30]])
def test_tile_read_by_every_cta_hits_after_the_first(traced):
    gx, gy = 8, 6
    res = l2_model(
        shared_tile_trace(gx, gy, traced), device(1 << 20), 2, ("row-major", ("tile-y", 2))
    )
    assert res.mode == ("complete" if traced is None else "synthesized")
    P = gx * gy
    for o in res.orders:
        assert o.read_hit_rate == pytest.approx((P - 1) / P)
        assert o.hit_rate == pytest.approx((P - 1) / P)  # no stores
        assert o.dram_bytes == 65536
        assert o.sectors == P * 2048
        assert o.working_set_bytes == 65536
    assert res.fits and res.footprint_bytes == 65536


def test_gather_that_fits_hits_for_every_order():
    W, H = 1024, 128
    trace = gather_trace(W, H, 8, 8, 16, 16)
    orders = ("row-major", ("tile-x", 4), ("tile-x", 8), ("tile-y", 2), "column-major")
    res = l2_model(trace, device(2 << 20), 2, orders, efficiency=1.0)
    assert res.fits
    # every 32-byte sector of the image is read by 9 CTAs (3 x 3 offsets, 16 px = 2 CTAs apart,
    # clamped at the edges): only first touches miss, for every order
    for o in res.orders:
        assert o.dram_bytes == W * H * 4
        assert o.read_hit_rate == res.orders[0].read_hit_rate
        assert o.read_hit_rate > 0.87
    assert res.best.order == "row-major"


def test_gather_that_fits_only_when_tiled():
    W, H = 1024, 128
    trace = gather_trace(W, H, 8, 8, 16, 16)
    orders = ("row-major", ("tile-x", 4), ("tile-x", 8))
    l2 = 64 * 1024
    res = l2_model(trace, device(l2), 2, orders, efficiency=1.0)
    assert not res.fits
    rm, x4, x8 = res.orders
    # row-major: the CTA two rows down reuses a band, 256 CTAs later: evicted by then
    assert rm.dram_bytes > 2.5 * W * H * 4
    assert x4.dram_bytes == W * H * 4  # tiles of 4 columns keep it: compulsory misses only
    assert x8.dram_bytes < 0.6 * rm.dram_bytes
    assert res.best.label == "tile-x:4"
    for o in res.orders:  # an exact LRU replay of the same footprints agrees
        perm = order_permutation((o.order, o.n) if o.n else o.order, 128, 16)[2]
        hit, dram = lru_replay(trace, perm, l2)
        assert o.read_hit_rate == pytest.approx(hit, abs=0.005)
        assert o.dram_bytes == pytest.approx(dram, rel=0.02)


@pytest.mark.parametrize(
    "W,H,B,R,S,l2,fetch",
    [
        (1024, 512, 16, 64, 32, 256 * 1024, 32),  # 5 x 5 offsets, two CTA rows apart
        (1000, 504, 16, 64, 32, 256 * 1024, 32),  # partial CTAs at the right and bottom
        (520, 264, 8, 40, 16, 128 * 1024, 32),
        (1024, 512, 8, 64, 32, 256 * 1024, 64),  # 64-byte fills: two phases of CTAs
        (1000, 504, 16, 3, 1, 64 * 1024, 32),  # dense 7 x 7 stencil
    ],
)
def test_sampled_trace_predicts_the_complete_one(W, H, B, R, S, l2, fetch):
    orders = ("row-major", ("tile-x", 3), ("tile-x", 8), ("tile-y", 4), "column-major")
    full = l2_model(
        gather_trace(W, H, B, B, R, S), device(l2), 2, orders, efficiency=1.0, fetch_bytes=fetch
    )
    part = l2_model(
        sampled(W, H, B, R, S), device(l2), 2, orders, efficiency=1.0, fetch_bytes=fetch
    )
    assert full.mode == "complete" and part.mode == "synthesized"
    assert part.footprint_bytes == full.footprint_bytes
    for a, b in zip(full.orders, part.orders, strict=True):
        assert b.read_hit_rate == pytest.approx(a.read_hit_rate, abs=0.01)
        assert b.dram_bytes == pytest.approx(a.dram_bytes, rel=0.03)
        assert b.working_set_bytes == pytest.approx(a.working_set_bytes, rel=0.05)


def test_model_follows_an_exact_lru_replay():
    W, H, B, R, S, l2 = 512, 256, 16, 32, 16, 128 * 1024
    trace = gather_trace(W, H, B, B, R, S)
    orders = ("row-major", ("tile-x", 2), ("tile-y", 3), "column-major")
    res = l2_model(trace, device(l2), 2, orders, efficiency=1.0)
    for o in res.orders:
        perm = order_permutation((o.order, o.n) if o.n else o.order, 32, 16)[2]
        hit, dram = lru_replay(trace, perm, l2)
        assert o.read_hit_rate == pytest.approx(hit, abs=0.01)
        assert o.dram_bytes == pytest.approx(dram, rel=0.03)


def test_untranslatable_footprint_falls_back_to_the_traced_ctas():
    # a data-dependent gather: every CTA reads random sectors
    trace = gather_trace(256, 128, 16, 16, 16, 16, ctas=range(0, 128, 3))
    rng = np.random.default_rng(1)
    rec = trace.records.copy()
    loads = rec["kind"] == int(Kind.LOAD)
    rec["addr"][loads] = IN_BASE + rng.integers(0, 256 * 128, (int(loads.sum()), 32)) * 4
    rec["addr"][loads] *= rec["mask"][loads, None] != 0
    bad = replace(trace, records=rec)
    res = l2_model(bad, device(1 << 20), 2)
    assert res.mode == "traced-only"
    assert any("traced" in n and "translat" in n for n in res.notes)


def test_clamped_edges_only_traced_cannot_be_synthesized():
    # every traced CTA's footprint reaches the image border: no interior template
    gx = 1024 // 16
    trace = gather_trace(1024, 512, 16, 16, 64, 32, ctas=range(2 * gx))
    res = l2_model(trace, device(1 << 20), 2)
    assert res.mode == "traced-only"
    assert any("edges" in n for n in res.notes)


# --------------------------------------------------------------------------------------------
# Results, parameters


def test_json_round_trip_and_shape():
    res = l2_model(gather_trace(256, 128, 16, 16, 16, 16), device(1 << 20), 2)
    data = res.to_json()
    assert {"orders", "best", "fits"} <= set(data)
    assert {"order", "n", "hit_rate", "dram_bytes"} <= set(data["orders"][0])
    assert data["best"] == {"order": res.best.order, "n": res.best.n}
    assert L2Result.from_json(data) == res
    assert res.order("tile-x:16").n == 16
    assert "LRU" in res.assumptions


def test_default_efficiency_and_capacity():
    assert default_efficiency(preset("H100")) == 0.5
    assert default_efficiency(preset("A100-80GB")) == 0.5
    assert default_efficiency(preset("RTX2080")) == 0.85
    res = l2_model(streaming_trace(64), preset("H100"), 8)
    assert res.capacity_bytes == 0.5 * preset("H100").l2_bytes
    assert res.concurrent_ctas == 8 * 132


def test_several_efficiencies_share_one_replay():
    trace = gather_trace(1024, 128, 8, 8, 16, 16)
    effs = [0.25, 0.5, 1.0]
    many = L._l2_model(trace, device(128 * 1024), 2, ("row-major",), effs, 32, "auto", None)
    for eff, res in zip(effs, many, strict=True):
        one = l2_model(trace, device(128 * 1024), 2, ("row-major",), efficiency=eff)
        assert res == one
    assert many[0].orders[0].dram_bytes >= many[2].orders[0].dram_bytes


def test_bad_arguments():
    trace = streaming_trace(16)
    with pytest.raises(UsageError):
        l2_model(trace, device(1 << 20), 0)
    with pytest.raises(UsageError):
        l2_model(trace, device(1 << 20), 2, fetch_bytes=48)
    with pytest.raises(UsageError):
        l2_model(trace, replace(device(1 << 20), l2_bytes=None), 2)


def test_synthesis_reads_a_subset_of_a_large_trace(monkeypatch):
    # 1024 traced CTAs: the synthesis reads runs of them (and the edge columns), same answer
    W, H, B, R, S = 4096, 256, 16, 32, 16
    trace = sampled(W, H, B, R, S)
    orders = ("row-major", ("tile-x", 8))
    sub = L._subset(np.unique(np.asarray(trace.ctas)), W // B)
    assert len(sub) < 0.6 * len(trace.ctas)
    a = l2_model(trace, device(512 * 1024), 2, orders, efficiency=1.0)
    monkeypatch.setattr(L, "_SUBSET_RUNS", 10**6)
    b = l2_model(trace, device(512 * 1024), 2, orders, efficiency=1.0)
    assert a.mode == b.mode == "synthesized"
    assert a == b
