"""The data a launch's buffers start with. Pure numpy: the GPU runner and the CPU emulator both call
:func:`make_host_buffer`, so they see the same bytes for the same seed.

Fills (their text is parsed by :func:`gpuadvise.spec.fills.parse_fill`, which documents them):

- ``random``: floats uniformly from [-1, 1), signed and unsigned integers from [0, 64) (small, so
  that data used as an index or a count stays in range), and raw bytes for structs. This is the
  default data, of a buffer the user gave no fill; an explicit ``random`` on an integer type
  arrives here as ``random(LOW,HIGH)`` of the type's full range
  (:func:`gpuadvise.spec.kernel_spec.resolve` does that).
- ``random(LOW,HIGH)``: integers uniformly from [LOW, HIGH] (both included), floats from
  [LOW, HIGH).
- ``zeros``; ``ones`` (1 in every element or field); ``iota`` (0, 1, 2 ... in every element or
  field).
- a data file (``PATH.npy`` or ``PATH.bin``): its bytes, which must be exactly ``count`` elements.

Each buffer's random stream is seeded by the launch seed and the buffer's name, so adding a buffer does
not change the data of the others. The size is checked against the memory budget
(:mod:`gpuadvise.spec.budget`) before anything is allocated.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from gpuadvise.errors import UsageError
from gpuadvise.spec.budget import check_fits
from gpuadvise.spec.fills import Fill, parse_fill

FILLS = ("random", "zeros", "ones", "iota")

# Making a buffer holds it about three times at its peak (float64 draws cast to float32, and the
# caller's working copy).
_PEAK_FACTOR = 3


def _rng(seed: int, name: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _fill_plain(dt: np.dtype, count: int, fill: Fill, rng: np.random.Generator) -> np.ndarray:
    if fill.kind == "zeros":
        return np.zeros(count, dt)
    if fill.kind == "ones":
        return np.ones(count, dt)
    if fill.kind == "iota":
        return np.arange(count).astype(dt)
    if fill.has_range:
        assert fill.low is not None and fill.high is not None
        if dt.kind in "iu":
            return rng.integers(int(fill.low), int(fill.high), count, dtype=dt, endpoint=True)
        if dt.kind == "b":
            return rng.integers(int(fill.low), int(fill.high), count, endpoint=True).astype(dt)
        if dt.kind == "f":
            return rng.uniform(float(fill.low), float(fill.high), count).astype(dt)
    if dt.kind == "f":
        return rng.uniform(-1.0, 1.0, count).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 64, count).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, count).astype(dt)
    return rng.integers(0, 256, count * dt.itemsize, dtype=np.uint8).view(dt)


def _from_file(dt: np.dtype, count: int, path: Path, name: str) -> np.ndarray:
    want = count * dt.itemsize
    try:
        if path.suffix.lower() == ".npy":
            raw = np.ascontiguousarray(np.load(path, allow_pickle=False)).reshape(-1)
            data = raw.view(np.uint8)
        else:
            data = np.fromfile(path, dtype=np.uint8)
    except (OSError, ValueError) as err:
        raise UsageError(f"buffer {name}: cannot read {path} ({err})", "check the file") from None
    if data.size != want:
        raise UsageError(
            f"buffer {name}: {path.name} has {data.size} bytes of data, the buffer {want} "
            f"({count} elements of {dt.itemsize} bytes)",
            "check the count and the type against the file",
        )
    out = data.view(dt) if not dt.shape else data.view(dt.base).reshape((count, *dt.shape))
    return out if out.flags.writeable else out.copy()


def make_host_buffer(
    dtype: np.dtype, count: int, fill: str, seed: int, name: str, float_kind: str | None = None
) -> np.ndarray:
    """``count`` elements of ``dtype`` (plain, sub-array such as float4, or structured).

    ``float_kind`` (``bfloat16``, ``fp8_e4m3``, ``fp8_e5m2``): ``dtype`` holds the raw bits of that
    float type, which numpy lacks; the values are drawn as floats and encoded.
    Raises :class:`~gpuadvise.spec.budget.TooLargeError` when the buffer does not fit in memory.
    """
    try:
        spec = parse_fill(fill, None, f"buffer {name}")
    except UsageError:
        raise ValueError(f"unknown fill {fill!r}") from None
    dt = np.dtype(dtype)
    check_fits(
        count * dt.itemsize * _PEAK_FACTOR,
        f"buffer {name} ({count} elements of {dt.itemsize} bytes, made with a working copy)",
        "give it fewer elements (--buffer NAME=TYPE[COUNT]), or a smaller problem size",
    )
    if spec.kind == "file":
        assert spec.path is not None
        return _from_file(dt, count, spec.path, name)
    rng = _rng(seed, name)
    if float_kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2") and not dt.names:
        from gpuadvise.spec.cuda_types import encode_bfloat16, encode_fp8

        n = count * (int(np.prod(dt.shape)) if dt.shape else 1)
        vals = _fill_plain(np.dtype(np.float32), n, spec, rng)
        bits = encode_bfloat16(vals) if float_kind == "bfloat16" else encode_fp8(vals, float_kind)
        return bits.view(dt.base).reshape((count, *dt.shape)) if dt.shape else bits.view(dt)
    fields = dt.fields
    if dt.names and fields is not None:
        out = np.zeros(count, dt)
        if spec.kind == "random" and any(fields[f][0].kind not in "fiub" for f in dt.names):
            raw = _fill_plain(np.dtype((np.void, dt.itemsize)), count, Fill("random"), rng)
            return raw.view(dt)
        for field in dt.names:
            sub = fields[field][0]
            n = int(np.prod(sub.shape)) if sub.shape else 1
            base = sub.base if sub.shape else sub
            vals = _fill_plain(base, count * n, spec, rng)
            out[field] = vals.reshape((count, *sub.shape)) if sub.shape else vals
        return out
    if dt.shape:  # float4 and friends: a sub-array dtype
        base, n = dt.base, int(np.prod(dt.shape))
        return _fill_plain(base, count * n, spec, rng).reshape((count, *dt.shape))
    return _fill_plain(dt, count, spec, rng)
