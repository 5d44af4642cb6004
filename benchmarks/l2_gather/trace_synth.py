"""An AccessTrace of gather.cu's kernel, in pure Python: the same address arithmetic, no emulator.

One load record per warp and (dy, dx) offset, in the kernel's loop order (dy outer, dx inner), then
one store record per warp; lanes are threads ``32 w .. 32 w + 31`` of the block's linear thread id
``tx + ty * bx`` (as the hardware forms warps); a lane is active when its pixel is in the image
(the kernel returns early otherwise). Addresses: ``in + (clamp(y + dy) * W + clamp(x + dx)) * 4``
and ``out + (y * W + x) * 4``. The trace is of the row-major kernel: the model applies the orders.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gpuadvise.trace.access import AccessTrace, InstrInfo, Kind, Space, empty_records

IN_BASE = 1 << 32
_BITS = np.uint64(1) << np.arange(32, dtype=np.uint64)
_INSTR = (
    InstrInfo(0, "gather.cu", 29, "ld.global.nc.f32", Space.GLOBAL, Kind.LOAD, 4),
    InstrInfo(1, "gather.cu", 32, "st.global.f32", Space.GLOBAL, Kind.STORE, 4),
)


def grid_of(W: int, H: int, bx: int, by: int) -> tuple[int, int]:
    return -(-W // bx), -(-H // by)


def sample_ctas(gx: int, gy: int) -> np.ndarray:
    """The CTAs to trace: the first, two middle and the last CTA rows (edges and interior)."""
    rows = sorted({0, gy // 2, min(gy // 2 + 1, gy - 1), gy - 1})
    return np.concatenate([np.arange(r * gx, (r + 1) * gx) for r in rows]).astype(np.int64)


def _records(W, H, bx, by, R, S, ctas, out_base) -> np.ndarray:
    gx, _ = grid_of(W, H, bx, by)
    nthr = bx * by
    nw = -(-nthr // 32)
    offs = np.arange(-R, R + 1, S)
    dy, dx = (a.ravel() for a in np.meshgrid(offs, offs, indexing="ij"))
    no = len(dy)
    t = np.arange(nw * 32).reshape(nw, 32)
    cbx, cby = ctas % gx, ctas // gx
    x = cbx[:, None, None] * bx + (t % bx)[None]
    y = cby[:, None, None] * by + (t // bx)[None]
    act = (t[None] < nthr) & (x < W) & (y < H)
    xx = np.clip(x[:, :, None, :] + dx[None, None, :, None], 0, W - 1)
    yy = np.clip(y[:, :, None, :] + dy[None, None, :, None], 0, H - 1)
    mask = (act.astype(np.uint64) * _BITS).sum(axis=-1).astype(np.uint32)
    rec = empty_records(len(ctas) * nw * (no + 1)).reshape(len(ctas), nw, no + 1)
    rec["cta"] = ctas[:, None, None]
    rec["warp"] = np.arange(nw)[None, :, None]
    rec["inst"][:, :, no] = 1
    rec["width"] = 4
    rec["space"] = int(Space.GLOBAL)
    rec["kind"][:, :, :no] = int(Kind.LOAD)
    rec["kind"][:, :, no] = int(Kind.STORE)
    rec["mask"] = mask[:, :, None]
    act4 = act[:, :, None, :]
    rec["addr"][:, :, :no, :] = np.where(act4, IN_BASE + (yy * W + xx) * 4, 0)
    rec["addr"][:, :, no, :] = np.where(act, out_base + (y * W + x) * 4, 0)
    flat = rec.reshape(-1)
    return flat[flat["mask"] != 0]


def gather_trace(
    W: int, H: int, bx: int, by: int, R: int, S: int, ctas: Iterable[int] | None = None
) -> AccessTrace:
    """The trace of gather.cu's ``gather_rm`` on a W x H image with bx x by blocks, for ``ctas``
    (linear ids; default :func:`sample_ctas`)."""
    gx, gy = grid_of(W, H, bx, by)
    sel = sample_ctas(gx, gy) if ctas is None else np.unique(np.fromiter(ctas, dtype=np.int64))
    out_base = IN_BASE + (W * H * 4 + 255) // 256 * 256
    chunk = max(1, 4_000_000 // (bx * by * ((2 * R) // S + 1) ** 2))
    parts = [
        _records(W, H, bx, by, R, S, sel[i : i + chunk], out_base)
        for i in range(0, len(sel), chunk)
    ]
    return AccessTrace(
        records=np.concatenate(parts) if parts else empty_records(0),
        instructions=_INSTR,
        ctas=tuple(int(c) for c in sel),
        total_ctas=gx * gy,
        grid=(gx, gy, 1),
        block=(bx, by, 1),
        source="synthesized",
        buffers={"in": (IN_BASE, W * H * 4), "out": (out_base, W * H * 4)},
    )
