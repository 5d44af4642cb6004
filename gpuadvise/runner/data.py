"""The data a launch's buffers start with. Pure numpy: the GPU runner and the CPU emulator both call
:func:`make_host_buffer`, so they see the same bytes for the same seed.

Fills: ``random`` (default) draws floats uniformly from [-1, 1), signed and unsigned integers from
[0, 64) (small, so that data used as an index or a count stays in range), and raw bytes for structs;
``zeros``; ``ones`` (1 in every element or field); ``iota`` (0, 1, 2 ... in every element or field).
Each buffer's random stream is seeded by the launch seed and the buffer's name, so adding a buffer does
not change the data of the others.
"""

from __future__ import annotations

import hashlib

import numpy as np

FILLS = ("random", "zeros", "ones", "iota")


def _rng(seed: int, name: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _fill_plain(dt: np.dtype, count: int, fill: str, rng: np.random.Generator) -> np.ndarray:
    if fill == "zeros":
        return np.zeros(count, dt)
    if fill == "ones":
        return np.ones(count, dt)
    if fill == "iota":
        return np.arange(count).astype(dt)
    if dt.kind == "f":
        return rng.uniform(-1.0, 1.0, count).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 64, count).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, count).astype(dt)
    return rng.integers(0, 256, count * dt.itemsize, dtype=np.uint8).view(dt)


def make_host_buffer(
    dtype: np.dtype, count: int, fill: str, seed: int, name: str, float_kind: str | None = None
) -> np.ndarray:
    """``count`` elements of ``dtype`` (plain, sub-array such as float4, or structured).

    ``float_kind`` (``bfloat16``, ``fp8_e4m3``, ``fp8_e5m2``): ``dtype`` holds the raw bits of that
    float type, which numpy lacks; the values are drawn as floats and encoded.
    """
    if fill not in FILLS:
        raise ValueError(f"unknown fill {fill!r}")
    dt = np.dtype(dtype)
    rng = _rng(seed, name)
    if float_kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2") and not dt.names:
        from gpuadvise.spec.cuda_types import encode_bfloat16, encode_fp8

        n = count * (int(np.prod(dt.shape)) if dt.shape else 1)
        vals = _fill_plain(np.dtype(np.float32), n, fill, rng)
        bits = encode_bfloat16(vals) if float_kind == "bfloat16" else encode_fp8(vals, float_kind)
        return bits.view(dt.base).reshape((count, *dt.shape)) if dt.shape else bits.view(dt)
    fields = dt.fields
    if dt.names and fields is not None:
        out = np.zeros(count, dt)
        if fill == "random" and any(fields[f][0].kind not in "fiub" for f in dt.names):
            return _fill_plain(np.dtype((np.void, dt.itemsize)), count, "random", rng).view(dt)
        for field in dt.names:
            sub = fields[field][0]
            n = int(np.prod(sub.shape)) if sub.shape else 1
            base = sub.base if sub.shape else sub
            vals = _fill_plain(base, count * n, fill, rng)
            out[field] = vals.reshape((count, *sub.shape)) if sub.shape else vals
        return out
    if dt.shape:  # float4 and friends: a sub-array dtype
        base, n = dt.base, int(np.prod(dt.shape))
        return _fill_plain(base, count * n, fill, rng).reshape((count, *dt.shape))
    return _fill_plain(dt, count, fill, rng)
