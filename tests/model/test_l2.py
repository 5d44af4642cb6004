"""The L2 model (gpuadvise/model/l2/) on synthetic traces with hand-computable answers.

Oracles: hand counts (streaming, a tile every CTA reads, compulsory misses), an exact LRU replay of
the same footprints in the same CTA order (an OrderedDict, small cases only), the complete trace
against a sampled one (synthesis of the untraced CTAs), and the CUDA snippet of the tiled remap
compiled with g++ against :func:`tiled_order`. Two L2 partitions: hand counts, and a replay of the
near/home protocol over every assignment of the CTAs to the two sides. The pipeline: the CTAs
the emulator samples for the L2 model, on the bundled gather.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from suitekit import whole_cubin_sass

from gpuadvise.devices import preset
from gpuadvise.errors import UsageError
from gpuadvise.model import l2 as L
from gpuadvise.model.l2 import (
    L2Result,
    default_efficiency,
    default_fetch_bytes,
    default_partitions,
    l2_model,
    order_permutation,
    synthesis,
    tiled_order,
)
from gpuadvise.model.l2.footprint import extract
from gpuadvise.model.l2.replay import residencies
from gpuadvise.model.l2.synthesis import traced_subset
from gpuadvise.source.patch import tiled_block_index_cuda
from gpuadvise.trace.access import AccessTrace, InstrInfo, Kind, Space, empty_records

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
    t = extract(trace.records, granule)
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


_GATHERS: dict[tuple[int, ...], tuple[AccessTrace, AccessTrace, list[int]]] = {}


def _gathers(W: int, H: int, B: int, R: int, S: int) -> tuple[AccessTrace, AccessTrace]:
    """The complete and the sampled gather, built once for both partition counts and dropped
    after the second (hundreds of MB: not kept for the rest of the run); read-only, so a model
    writing into a trace fails here instead of changing the next test's input."""
    key = (W, H, B, R, S)
    if key not in _GATHERS:
        full, part = gather_trace(W, H, B, B, R, S), sampled(W, H, B, R, S)
        for t in (full, part):
            t.records.flags.writeable = False
        _GATHERS[key] = (full, part, [0])
    full, part, uses = _GATHERS[key]
    uses[0] += 1
    if uses[0] == 2:  # one test per partition count
        del _GATHERS[key]
    return full, part


GATHERS = [
    (1024, 512, 16, 64, 32, 256 * 1024, 32),  # 5 x 5 offsets, two CTA rows apart
    (1000, 504, 16, 64, 32, 256 * 1024, 32),  # partial CTAs at the right and bottom
    (520, 264, 8, 40, 16, 128 * 1024, 32),
    (1024, 512, 8, 64, 32, 256 * 1024, 64),  # 64-byte fills: two phases of CTAs
    (1000, 504, 16, 3, 1, 64 * 1024, 32),  # dense 7 x 7 stencil
]


# the two partition counts of a gather one after the other (ids "partitions-W-H-..."), on one
# worker: each pair of traces is built once and dropped after its second test
@pytest.mark.parametrize(
    "partitions,W,H,B,R,S,l2,fetch", [(p, *g) for g in GATHERS for p in (1, 2)]
)
@pytest.mark.xdist_group("test_l2 complete and sampled gathers")
def test_sampled_trace_predicts_the_complete_one(W, H, B, R, S, l2, fetch, partitions):
    # complete: explicit touch lists; sampled: synthesized unit matrices (and lists at the edges)
    orders = ("row-major", ("tile-x", 3), ("tile-x", 8), ("tile-y", 4), "column-major")
    kw = {"efficiency": 1.0, "fetch_bytes": fetch, "partitions": partitions}
    complete, sampled_ = _gathers(W, H, B, R, S)
    full = l2_model(complete, device(l2), 2, orders, **kw)
    part = l2_model(sampled_, device(l2), 2, orders, **kw)
    assert full.mode == "complete" and part.mode == "synthesized"
    assert full.partitions == part.partitions == partitions
    assert part.footprint_bytes == full.footprint_bytes
    for a, b in zip(full.orders, part.orders, strict=True):
        assert b.hit_rate == pytest.approx(a.hit_rate, abs=0.01)
        assert b.read_hit_rate == pytest.approx(a.read_hit_rate, abs=0.01)
        assert b.dram_bytes == pytest.approx(a.dram_bytes, rel=0.03)
        assert b.working_set_bytes == pytest.approx(a.working_set_bytes, rel=0.05)
        if partitions == 1:
            assert a.fabric_sectors == b.fabric_sectors == 0.0
        else:
            assert b.fabric_sectors == pytest.approx(a.fabric_sectors, rel=0.03)
            assert a.fabric_sectors > 0


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
    for name, parts, fetch in (("H100", 2, 64), ("A100-80GB", 2, 64), ("B200", 2, 64),
                               ("RTX2080", 1, 32), ("RTX4090", 1, 32), ("L40S", 1, 32)):  # fmt: skip
        assert (default_partitions(preset(name)), default_fetch_bytes(preset(name))) == (
            parts,
            fetch,
        ), name
    res = l2_model(streaming_trace(64), preset("H100"), 8)
    assert res.capacity_bytes == 0.5 * preset("H100").l2_bytes
    assert res.concurrent_ctas == 8 * 132
    assert (res.partitions, res.fetch_bytes) == (2, 64)
    one = l2_model(streaming_trace(64), preset("RTX2080"), 8)
    assert (one.partitions, one.fetch_bytes) == (1, 32)


def test_several_efficiencies_share_one_replay():
    trace = gather_trace(1024, 128, 8, 8, 16, 16)
    effs = [0.25, 0.5, 1.0]
    many = L.l2_models(trace, device(128 * 1024), 2, ("row-major",), effs, 32, "auto", None)
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
    with pytest.raises(UsageError):
        l2_model(trace, device(1 << 20), 2, partitions=3)


def test_synthesis_reads_a_subset_of_a_large_trace(monkeypatch):
    # 1024 traced CTAs: the synthesis reads runs of them (and the edge columns), same answer
    W, H, B, R, S = 4096, 256, 16, 32, 16
    trace = sampled(W, H, B, R, S)
    orders = ("row-major", ("tile-x", 8))
    sub = traced_subset(np.unique(np.asarray(trace.ctas)), W // B)
    assert len(sub) < 0.6 * len(trace.ctas)
    a = l2_model(trace, device(512 * 1024), 2, orders, efficiency=1.0)
    monkeypatch.setattr(synthesis, "_SUBSET_RUNS", 10**6)
    b = l2_model(trace, device(512 * 1024), 2, orders, efficiency=1.0)
    assert a.mode == b.mode == "synthesized"
    assert a == b


# --------------------------------------------------------------------------------------------
# Two L2 partitions (A100/H100): the near partition's copies and the lookups Nsight counts


def h100_like(l2_bytes: int, sms: int = 4):
    """An H100 (two partitions, 64-byte fills by default) with a small L2."""
    return replace(preset("H100"), l2_bytes=l2_bytes, sm_count=sms)


def sector_reads_trace(reads: list[list[int]]) -> AccessTrace:
    """A 1D grid: CTA ``c`` reads the first 32-byte sector of each 64-byte granule listed in
    ``reads[c]``, 8 lanes per granule, 4 granules per warp (no stores)."""
    recs = []
    for c, grans in enumerate(reads):
        for w in range(0, len(grans), 4):
            chunk = np.asarray(grans[w : w + 4])
            lanes = np.arange(8 * len(chunk))
            r = empty_records(1)
            r["cta"] = c
            r["warp"] = w // 4
            r["mask"] = _masks(np.arange(32) < len(lanes))
            addr = np.zeros(32, dtype=np.uint64)
            addr[: len(lanes)] = IN_BASE + np.repeat(chunk, 8) * 64 + (lanes % 8) * 4
            r["addr"] = addr
            recs.append(r)
    rec = np.concatenate(recs)
    rec["width"] = 4
    rec["space"] = int(Space.GLOBAL)
    rec["kind"] = int(Kind.LOAD)
    P = len(reads)
    top = max(max(r) for r in reads) + 1
    return AccessTrace(
        records=rec,
        instructions=INSTR[:1],
        ctas=tuple(range(P)),
        total_ctas=P,
        grid=(P, 1, 1),
        block=(32 * max(1, -(-max(len(r) for r in reads) // 4)), 1, 1),
        source="emulator",
        buffers={"in": (IN_BASE, top * 64)},
    )


def expected_per_residency(residencies: list[list[int]], g: int) -> tuple[float, float]:
    """Expected (lookups, misses), in sectors, of the near/home protocol, summed over residencies
    (each: the sectors its touching CTAs request, in launch order; the granule is not in L2
    before the first, stays in both partitions until the last), averaged over the assignments
    of the CTAs to the home side (0) or the other side (1), all equally likely. A request from
    the home side is looked up at home (a miss fills it); one from the other side is looked up
    in its near partition, and when that misses, forwarded: ``g`` sectors looked up at home,
    after which both partitions hold the granule."""
    look = miss = 0.0
    for req in residencies:
        combos = list(itertools.product((0, 1), repeat=len(req)))
        lo = mi = 0.0
        for sides in combos:
            home_has = near_has = False
            for a, side in zip(req, sides, strict=True):
                lo += a
                if side == 0:
                    mi += 0 if home_has else a
                    home_has = True
                elif not near_has:
                    mi += a + (0 if home_has else g)
                    lo += g
                    home_has = near_has = True
        look += lo / len(combos)
        miss += mi / len(combos)
    return look, miss


def test_residency_formula_against_the_protocol():
    # a residency of k CTAs, each requesting a sectors of a granule of g sectors
    for k in range(1, 7):
        for a, g in ((1, 1), (1, 2), (2, 2), (1, 4), (4, 4)):
            look, miss = expected_per_residency([[a] * k], g)
            m, f = residencies(np.array([k]), np.array([float(a)]), np.array([float(g)]))
            # one cache: k * a lookups, a misses (the first)
            assert f == pytest.approx(look - k * a, abs=1e-12), (k, a, g)
            assert m == pytest.approx(miss - a, abs=1e-12), (k, a, g)
    # by hand: one reader (streaming): half of the time from the far side, then forwarded
    assert residencies(np.array([1]), np.array([2.0]), np.array([2.0])) == (1.0, 1.0)
    # two readers, a = 1, g = 2: 1 + 0.5 * (1 - 1/2) more misses, 2 * (1 - 1/4) more lookups
    assert residencies(np.array([2]), np.array([1.0]), np.array([2.0])) == (1.25, 1.5)
    assert residencies(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)) == (0.0, 0.0)


def test_streaming_kernel_with_two_partitions():
    # every 64-byte granule read once by one CTA: half of the reads come from the far side, miss
    # there too and are forwarded; half of the stores are looked up twice (near, then home)
    P = 500
    res = l2_model(streaming_trace(P), h100_like(1 << 20), 2, ("row-major",))
    assert (res.partitions, res.fetch_bytes) == (2, 64)
    o = res.orders[0]
    per_cta_granules = 512 // 64
    # reads: 16 sectors, + 8 x (2 sectors x 1/2) forwarded, all missing
    assert o.read_hit_rate == 0.0
    # lookups: 16 + 8 loads, 16 + 8 stores (hits)
    assert o.hit_rate == pytest.approx(24 / 48)
    assert o.fabric_sectors == pytest.approx(P * (per_cta_granules * 1 + 16 / 2))
    assert o.sectors == 2 * 16 * P  # requests from the SMs, as before
    assert o.dram_bytes == P * 512
    one = l2_model(streaming_trace(P), h100_like(1 << 20), 2, ("row-major",), partitions=1)
    assert one.orders[0].hit_rate == pytest.approx(0.5) and one.orders[0].fabric_sectors == 0.0


@pytest.mark.parametrize("traced", [None, [0, 1, 2, 9, 17, 30]])
def test_tile_read_by_every_cta_with_two_partitions(traced):
    # 48 CTAs read the same 64 KB (1024 granules of 64 B, 2 sectors each): per granule the first
    # reader misses (2 sectors); the first reader on the far side misses its near partition (2)
    # and is forwarded (2 lookups at home): 47 of 49 lookups hit (up to 2^-47)
    gx, gy = 8, 6
    res = l2_model(shared_tile_trace(gx, gy, traced), h100_like(1 << 20), 2, ("row-major",))
    o = res.orders[0]
    assert o.read_hit_rate == pytest.approx(47 / 49, rel=1e-12)
    assert o.hit_rate == o.read_hit_rate  # no stores
    assert o.fabric_sectors == pytest.approx(2048, rel=1e-12)
    assert o.dram_bytes == 65536


def test_evicted_and_refetched_granule_with_two_partitions():
    # 12 CTAs, each reads the first sector of 8 private 64-byte granules; CTAs 0, 1, 3, 4, 6, 7,
    # 9, 10 also read granule 0. L2 of 1 KB (16 granules): the reuse 1 CTA later fits (9
    # granules), the one 2 CTAs later does not (17): granule 0 lives 4 times, 2 readers each.
    reads = [([0] if c % 3 != 2 else []) + [1 + 8 * c + i for i in range(8)] for c in range(12)]
    res = l2_model(sector_reads_trace(reads), h100_like(1024), 1, ("row-major",), efficiency=1.0)
    o = res.orders[0]
    # one cache: 104 sector reads, 4 hits (CTAs 1, 4, 7, 10); 100 granules fetched
    assert o.sectors == 104
    assert o.dram_bytes == 100 * 64
    # private granules (k = 1, a = 1, g = 2): +1 miss, +1 lookup each (96 of them);
    # granule 0 (4 residencies, k = 2): +1.25 misses, +1.5 lookups each
    look = 104 + 96 + 4 * 1.5
    miss = 100 + 96 + 4 * 1.25
    assert o.fabric_sectors == pytest.approx(look - 104)
    assert o.read_hit_rate == pytest.approx((look - miss) / look)
    # the protocol replayed over every side assignment agrees
    want_look, want_miss = expected_per_residency([[1]] * 96 + [[1, 1]] * 4, 2)
    assert look == pytest.approx(want_look) and miss == pytest.approx(want_miss)


def test_overlapping_reads_follow_the_protocol():
    # CTA c reads granules c .. c + 3 (one sector each): granule j is read by up to 4 CTAs,
    # all in L2 (a large cache): one residency each, of 1 to 4 readers
    P = 9
    trace = sector_reads_trace([[c + i for i in range(4)] for c in range(P)])
    res = l2_model(trace, h100_like(1 << 20), 1, ("row-major", "column-major"))
    readers = [sum(1 for c in range(P) if c <= j <= c + 3) for j in range(P + 3)]
    look, miss = expected_per_residency([[1] * k for k in readers], 2)
    for o in res.orders:
        lookups = o.sectors + o.fabric_sectors
        assert o.sectors == 4 * P
        assert lookups == pytest.approx(look)
        assert lookups * (1 - o.read_hit_rate) == pytest.approx(miss)
    # the same with 32-byte fills (a = g = 1)
    res32 = l2_model(trace, h100_like(1 << 20), 1, ("row-major",), fetch_bytes=32)
    look32, miss32 = expected_per_residency([[1] * k for k in readers], 1)
    o = res32.orders[0]
    assert o.sectors + o.fabric_sectors == pytest.approx(look32)
    assert (o.sectors + o.fabric_sectors) * (1 - o.read_hit_rate) == pytest.approx(miss32)


def test_json_carries_the_partitions():
    res = l2_model(gather_trace(256, 128, 16, 16, 16, 16), h100_like(1 << 20), 2)
    data = res.to_json()
    assert data["partitions"] == 2 and data["fetch_bytes"] == 64
    assert all("fabric_sectors" in o for o in data["orders"])
    assert L2Result.from_json(data) == res
    assert [o.label for o in res.orders] == [
        "row-major", "tile-x:4", "tile-x:8", "tile-x:16", "tile-x:32"
    ]  # fmt: skip


def remapped_gather(W, H, B, R, S, n, launch_positions):
    """The gather of a kernel that remaps its own blocks (seed 002's tiling with ``n`` in the
    kernel): the CTA launched at position p computes tile ``tiled_order(...)[p]``."""
    gx, gy = W // B, H // B
    xy = tiled_order(gx, gy, n, "x")
    tiles = xy[launch_positions, 0] + xy[launch_positions, 1] * gx
    t = gather_trace(W, H, B, B, R, S, ctas=tiles)
    launched_at = np.empty(gx * gy, dtype=np.int64)
    launched_at[xy[:, 0] + xy[:, 1] * gx] = np.arange(gx * gy)
    rec = t.records.copy()
    rec["cta"] = launched_at[rec["cta"].astype(np.int64)]
    return replace(t, records=rec, ctas=tuple(sorted(int(c) for c in launched_at[tiles])))


@pytest.mark.parametrize("n", [8, 16])
def test_a_kernel_remapping_its_blocks_is_not_synthesized(n):
    # its first two launch rows: neighbours in launch order look like translates (a constant
    # step in x and in y), but the CTAs at the border are not clamped copies of the template:
    # the synthesis would be wrong, the model replays the traced CTAs instead
    W, H, B, R, S = 1024, 512, 16, 64, 32
    res = l2_model(remapped_gather(W, H, B, R, S, n, np.arange(2 * W // B)), device(1 << 20), 2)
    assert res.mode == "traced-only"
    assert any("edge are not translates" in x for x in res.notes), res.notes
    # with two interior launch rows too, a CTA past a strip's end contradicts the steps
    rows = np.r_[np.arange(2 * W // B), np.arange(15 * W // B, 17 * W // B)]
    res = l2_model(remapped_gather(W, H, B, R, S, n, rows), device(1 << 20), 2)
    assert res.mode == "traced-only"
    assert any("translated copy" in x for x in res.notes), res.notes


def test_synthesis_larger_than_the_budget_falls_back(monkeypatch):
    W, H, B, R, S = 1024, 512, 16, 64, 32
    trace = sampled(W, H, B, R, S)
    assert l2_model(trace, device(1 << 20), 2).mode == "synthesized"
    # a budget below what 2048 CTAs reading 5 x 5 offsets need
    monkeypatch.setattr(synthesis, "_MAX_SYNTH_TOUCHES", 2048 * 25 - 1)
    res = l2_model(trace, device(1 << 20), 2)
    assert res.mode == "traced-only"
    assert any("(unit, CTA) touches, more than the 51,199 allowed" in x for x in res.notes)


# --------------------------------------------------------------------------------------------
# The CTAs the emulator traces for the L2 model (compiled kernels: needs the CUDA toolkit)

ROOT = Path(__file__).resolve().parents[2]
GATHER = ROOT / "kernels" / "tile_gather" / "gather.cu"


def _have_nvcc() -> bool:
    from gpuadvise.toolchain import find_toolchain

    try:
        find_toolchain()
        return True
    except Exception:
        return False


needs_nvcc = pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolkit (pip install .[toolkit])")


def test_interior_ctas():
    from gpuadvise.trace.emulate import interior_ctas

    # 10 x 6 grid: rows 2 and 3 (the middle two), 4 columns around the centre (3 .. 6)
    assert interior_ctas((10, 6, 1), limit=8) == (23, 24, 25, 26, 33, 34, 35, 36)
    assert interior_ctas((10, 6, 1), exclude=(24, 35, 99), limit=8) == (23, 25, 26, 33, 34, 36)
    assert interior_ctas((10, 7, 1), limit=8) == (23, 24, 25, 26, 33, 34, 35, 36)  # rows 2, 3
    assert interior_ctas((4, 2, 3), limit=128) == tuple(range(8, 16))  # z folds into y: 6 rows
    assert interior_ctas((5, 1, 1)) == ()  # one row: no interior
    assert interior_ctas((3, 2, 1), rows=4) == tuple(range(6))  # fewer rows than asked
    assert interior_ctas((10, 6, 1), exclude=range(60), limit=8) == ()


@needs_nvcc
def test_emulator_runs_the_ctas_it_is_given(compile_cache):
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
    from gpuadvise.toolchain import CompileOptions, compile_source
    from gpuadvise.trace.emulate import emulate

    src = ROOT / "tests" / "cuda" / "emu" / "basic.cu"
    mod = compile_source(src, CompileOptions(arch="sm_90", cache_dir=compile_cache))
    spec = build_kernel_spec(src, "vec_add", grid=8, block=256, args=["n=2048"],
                             buffers=["a=float[2048]", "b=float[2048]", "c=float[2048]"],
                             discover=False)  # fmt: skip
    launch = resolve(spec, parse_signature(src.read_text(), "vec_add"))
    # one nvdisasm run for basic.cu, its SASS read whole (shared with tests/ptx and tests/trace)
    with whole_cubin_sass():
        e = emulate(mod, mod.kernel("vec_add"), launch, preset("H100"), sample_ctas=[6, 1, 5, 5])
        assert e.ctas_run == (1, 5, 6) and e.trace.ctas == (1, 5, 6) and not e.complete
        assert set(np.unique(e.trace.records["cta"]).tolist()) == {1, 5, 6}
        a, b, c = e.inputs["a"], e.inputs["b"], e.outputs["c"]
        for cta in range(8):
            part = slice(256 * cta, 256 * (cta + 1))
            if cta in (1, 5, 6):
                np.testing.assert_array_equal(c[part], a[part] + b[part])
            else:
                assert np.isnan(c[part]).all()  # poisoned, never written
        assert any("3 chosen CTAs of 8" in n for n in e.notes)
        every = emulate(mod, mod.kernel("vec_add"), launch, preset("H100"), sample_ctas=range(8))
        assert every.complete and every.trace.complete
        for bad in ([8], [], [1.5], [-1]):
            with pytest.raises(UsageError):
                emulate(mod, mod.kernel("vec_add"), launch, preset("H100"), sample_ctas=bad)


def _analysis(spec_file: Path | None, args: tuple[str, ...] = (), sample: str | None = None):
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build

    kernel = None if spec_file else "gather_rowmajor"
    opts = KernelOptions(source=str(GATHER), kernel=kernel, gpu="H100", args=args,
                         spec=str(spec_file) if spec_file else None)  # fmt: skip
    spec, choice, options = build(opts)
    return analyze_lazily(spec, choice.device, options, trace=True, sample_ctas=sample)


@needs_nvcc
def test_pipeline_traces_interior_ctas_for_the_l2_model():
    # 2048 x 1024 frame, 128 x 64 CTAs of 16 x 16, footprint +-256 px (16 CTA rows): the first
    # wave (1056 CTAs, 8 rows) is clamped at the top border; 64 CTAs in the middle rows let the
    # model synthesize the grid, as the trace of 4 CTA rows (first, middle, last) does
    from gpuadvise.model.l2_orders import l2_for

    # (the whole first wave, ``wave``: the default sample keeps runs of it within its cost)
    W, H, R, S = 2048, 1024, 256, 64
    a = _analysis(None, (f"w={W}", f"h={H}", f"r={R}", f"step={S}"), "wave")
    m = a.memory
    assert m.error is None and m.ctas_run == 1056
    assert any("CTA rows 31-32, columns 48-79" in n for n in m.notes), m.notes
    first_wave_only, _ = l2_for(m.trace, a.device, 8)
    assert first_wave_only.mode == "traced-only"
    l2 = m.l2
    assert l2.mode == "synthesized" and l2.partitions == 2
    assert [o.label for o in l2.orders] == [
        "row-major", "tile-x:4", "tile-x:8", "tile-x:16", "tile-x:32"
    ]  # fmt: skip
    want = l2_model(sampled(W, H, 16, R, S), preset("H100"), 8)
    for got, ref in zip(l2.orders, want.orders, strict=True):
        assert got.hit_rate == pytest.approx(ref.hit_rate, abs=1e-6)
        assert got.dram_bytes == pytest.approx(ref.dram_bytes, rel=1e-6)
        assert got.fabric_sectors == pytest.approx(ref.fabric_sectors, rel=1e-6)
    assert l2.best.label == want.best.label
    # the default sample (168 CTAs of the wave in runs of 4, within its cost) synthesizes the
    # same grid: its runs give the neighbours in x, the probe's rows those in y
    d = _analysis(None, (f"w={W}", f"h={H}", f"r={R}", f"step={S}")).memory
    assert d.ctas_run == 168 and d.l2.mode == "synthesized"
    for got, ref in zip(d.l2.orders, want.orders, strict=True):
        assert got.hit_rate == pytest.approx(ref.hit_rate, abs=1e-6)
        assert got.dram_bytes == pytest.approx(ref.dram_bytes, rel=1e-6)


@needs_nvcc
def test_1440p_gather_fits_and_keeps_row_major():
    # gather_1440p.toml: 2560 x 1440, footprint +-64 px; the working set fits the L2, every
    # order reads the image once from DRAM and row-major (the first) is the best
    a = _analysis(GATHER.parent / "gather_1440p.toml")
    l2 = a.memory.l2
    assert l2.mode == "synthesized" and len(l2.orders) == 5
    assert l2.best.order == "row-major"
    rates = [o.hit_rate for o in l2.orders]
    assert max(rates) - min(rates) < 0.001 and 0.96 < rates[0] < 0.99
    assert all(o.dram_bytes == 2560 * 1440 * 4 for o in l2.orders)


def test_merged_trace_maps_instructions_by_source_location():
    from gpuadvise.analyze.models import _merge_traces

    a = streaming_trace(8, traced=[0, 1])
    b = streaming_trace(8, traced=[5])
    ld20 = InstrInfo(2, "k.cu", 20, "ld.global.f32", Space.GLOBAL, Kind.LOAD, 4)
    # b found its instructions in another order, and one more
    b_instrs = (replace(INSTR[1], inst=0), replace(INSTR[0], inst=1), ld20)
    rb = b.records.copy()
    rb["inst"] = 1 - rb["inst"]  # b's load is its instruction 1, its store 0
    extra = rb[:1].copy()
    extra["inst"] = 2
    b = replace(b, records=np.concatenate([rb, extra]), instructions=b_instrs)
    m = _merge_traces(a, b)
    assert m.ctas == (0, 1, 5) and m.total_ctas == 8 and not m.complete
    assert m.instructions == (*INSTR, ld20)
    got = m.records[m.records["cta"] == 5]  # 4 warps x (load, store), then the new load
    assert got["inst"].tolist() == [0] * 4 + [1] * 4 + [2]
    assert got["kind"].tolist() == [int(Kind.LOAD)] * 4 + [int(Kind.STORE)] * 4 + [int(Kind.LOAD)]
    assert np.array_equal(m.records[: len(a.records)], a.records)
    same = _merge_traces(a, streaming_trace(8, traced=[5]))  # identical lists: kept as they are
    assert same.instructions == INSTR and len(same.records) == 3 * 8
    # the L2 model's merge: the global records alone, in the same order, the same fields
    a = replace(a, records=np.concatenate([a.records[:3], a.records[:1], a.records[3:]]))
    a.records["space"][3] = int(Space.SHARED)
    b = replace(b, records=np.concatenate([b.records, b.records[:2]]))
    b.records["space"][-2:] = int(Space.SHARED)
    full = _merge_traces(a, b)
    glob = _merge_traces(a, b, Space.GLOBAL)
    assert glob.instructions == full.instructions and glob.ctas == full.ctas
    assert np.array_equal(glob.records, full.records[full.records["space"] == int(Space.GLOBAL)])
    assert len(glob.records) == len(full.records) - 3


def _reference_touches(records: np.ndarray, g: int) -> dict[tuple[int, int], list[int]]:
    """Per (CTA, granule): [load sectors, store sectors, dirtied sectors, reads], lane by lane."""
    flags: dict[tuple[int, int], int] = {}
    for r in records:
        for lane in range(32):
            if not (int(r["mask"]) >> lane) & 1:
                continue
            a = int(r["addr"][lane])
            f = {int(Kind.LOAD): 1, int(Kind.STORE): 2}.get(int(r["kind"]), 5)
            for sec in range(a >> 5, ((a + int(r["width"]) - 1) >> 5) + 1):
                flags[(int(r["cta"]), sec)] = flags.get((int(r["cta"]), sec), 0) | f
    out: dict[tuple[int, int], list[int]] = {}
    for (cta, sec), f in flags.items():
        c = out.setdefault((cta, sec * 32 // g), [0, 0, 0, 0])
        c[0] += f & 1
        c[1] += int(f & 2 > 0)
        c[2] += int(f & 6 > 0)
        c[3] = int(c[0] > 0)
    return out


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_extract_matches_lane_by_lane_reference_with_repeated_records(
    seed: int, aligned: bool
) -> None:
    """extract drops records that repeat the sectors of the one before them (same CTA, warp and
    instruction): loops walking 4 bytes at a time, strided rows, partial masks, vector widths and
    line-crossing accesses interleaved over CTAs and warps give the lane-by-lane answer.
    ``aligned``: every address a multiple of its width, as the GPU requires (no lane's bytes
    cross a sector: the repeat test reads the first byte's sector alone)."""
    rng = np.random.default_rng(seed)
    streams = [
        (cta, warp, inst, kind, width)
        for cta in (3, 7)
        for warp in range(2)
        for inst, kind, width in ((0, Kind.LOAD, 4), (1, Kind.STORE, 8), (2, Kind.LOAD, 16))
    ]
    # per stream: a lane pitch, a step per iteration (0: the same addresses again; 1 and 3 bytes
    # for the 16-byte loads: a lane's last byte moves to the next sector before its first does)
    pitch = {s: int(rng.choice([4, 200, 4096])) for s in streams}
    step = {
        s: int(rng.choice([0, 1, 3, 4, 32] if s[2] == 2 else [0, s[4], 3 * s[4]])) for s in streams
    }
    lanes = np.arange(32, dtype=np.uint64)
    rows = []
    for it in range(40):
        for s in streams:
            cta, warp, inst, kind, width = s
            r = empty_records(1)[0]
            r["cta"], r["warp"], r["inst"], r["kind"], r["width"] = cta, warp, inst, kind, width
            base = IN_BASE + ((cta * 64 + warp * 8 + inst) << 20)
            addr = base + lanes * np.uint64(pitch[s]) + np.uint64(it * step[s])
            if inst != 2 or aligned:
                addr -= addr % np.uint64(width)
            # the mask changes every 4 iterations; inactive lanes hold arbitrary addresses
            mask = (
                0xFFFFFFFF
                if (it // 4) % 3
                else int(np.random.default_rng(it // 4).integers(1, 2**32))
            )
            on = ((mask >> lanes.astype(np.int64)) & 1).astype(bool)
            junk = rng.integers(0, 2**40, 32).astype(np.uint64)
            if aligned:
                junk -= junk % np.uint64(width)
            r["addr"] = np.where(on, addr, junk)
            r["mask"] = mask
            rows.append(r)
    recs = np.array(rows, dtype=empty_records(0).dtype)
    for g in (32, 64, 128):
        t = extract(recs, g)
        got = {
            (int(c), int(u)): [int(x) for x in t.cnt[:, i]]
            for i, (c, u) in enumerate(zip(t.cta, t.gran, strict=True))
        }
        assert got == _reference_touches(recs, g)


def test_a_record_is_a_repeat_of_its_own_instruction_only() -> None:
    """A store of the sectors a load of the same warp read just before it is not a repeat (its
    own instruction's previous record is what it is compared with): the store's touches stay."""
    recs = empty_records(3)  # the load, then the store twice (the second one a repeat)
    recs["mask"] = 0xFFFFFFFF
    recs["width"] = 4
    recs["inst"] = [0, 1, 1]
    recs["kind"] = [int(Kind.LOAD), int(Kind.STORE), int(Kind.STORE)]
    recs["addr"] = (IN_BASE + 4 * np.arange(32, dtype=np.uint64))[None, :]
    t = extract(recs, 32)
    # 4 sectors, each loaded, stored and dirty
    assert len(t.gran) == 4 and t.cnt.sum(axis=1).tolist() == [4, 4, 4, 4]
