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

Random data is counter-based: the value at element ``i`` (field ``f``, lane ``k``) is a pure function
of the launch seed, the buffer's name, the field and the index (word ``i`` of a Philox-4x64 stream,
keyed by a SHA-256 of seed, name and field; :class:`BufferFiller`). Adding a buffer does not change the data
of the others, and any slice of a buffer can be made on its own: the CPU emulator makes only the
pages the traced CTAs touch (:class:`gpuadvise.ptx.memory.GlobalMemory`), the GPU runner the whole
buffer in chunks (:func:`make_host_buffer`), and both see the same bytes. The size of a whole buffer
is checked against the memory budget (:mod:`gpuadvise.spec.budget`) before anything is allocated.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.errors import DataFileError, UsageError
from gpuadvise.spec.budget import TooLargeError, check_fits
from gpuadvise.spec.fills import Fill, parse_fill

FILLS = ("random", "zeros", "ones", "iota")

# Elements made at once when a whole buffer is filled: the temporaries of the hash stay small, so
# making a buffer takes little more memory than the buffer itself.
_CHUNK_ELEMENTS = 1 << 22
# The working memory of making a buffer beyond the buffer itself: a chunk's temporaries (hashes,
# float64 values, the cast), counted per element of the chunk as this many 8-byte words.
_PEAK_FACTOR = 4
# Chunks made at once, in threads (the Philox stream and the casts run outside the GIL): a 256 MB
# float buffer took 1.4 s in one thread on the GPU machine's worker, before its first launch; a
# 3 GiB set of half buffers (HeCBench f16max) is ~10^9 elements. At most one thread per CPU, and
# fewer when the chunks' temporaries would not fit (:func:`make_host_buffer`).
_FILL_THREADS = 16


@functools.lru_cache(maxsize=256)
def stream_key(seed: int, name: str, part: str = "") -> int:
    """The 64-bit key of one random stream: buffer ``name`` (field ``part``) of launch ``seed``
    (kept: the emulator's lazy buffers ask for it once per page they fill)."""
    digest = hashlib.sha256(f"{seed}:{name}:{part}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


_GENERATORS = threading.local()
"""One Philox generator per thread, its state set for each slice: making a generator costs ~30 us,
and the emulator's lazy buffers ask for thousands of 4 KiB pages (HeCBench fwt: 19,000 slices)."""


def counter_words(start: int, stop: int, key: int) -> np.ndarray:
    """Words ``[start, stop)`` (uint64) of the Philox-4x64 stream keyed by ``key``.

    Philox is counter-based: counter ``c`` gives words ``4c .. 4c+3``, so any slice is made on its
    own, at C speed, and equals the same slice of the whole stream. The thread's generator is set
    to the state ``np.random.Philox(key=key, counter=start // 4)`` starts in (the same words).
    """
    block = start >> 2
    gen = getattr(_GENERATORS, "gen", None)
    if gen is None or block >= 1 << 64 or key >= 1 << 64 or key < 0:
        gen = np.random.Philox(key=key, counter=block)
        if block < 1 << 64 and 0 <= key < 1 << 64:
            _GENERATORS.gen = gen
            _GENERATORS.state = {
                "bit_generator": "Philox",
                "state": {
                    "counter": np.zeros(4, np.uint64),
                    "key": np.zeros(2, np.uint64),
                },
                "buffer": np.zeros(4, np.uint64),
                "buffer_pos": 4,
                "has_uint32": 0,
                "uinteger": 0,
            }
    else:
        # the thread's one state dict, its counter and key set in place: the setter copies
        # them into the generator (half the cost of a fresh dict and arrays per slice)
        state = _GENERATORS.state
        state["state"]["counter"][0] = block
        state["state"]["key"][0] = key
        gen.state = state
    skip = start - 4 * block
    return gen.random_raw(stop - start + skip)[skip:]


def _unit(z: np.ndarray) -> np.ndarray:
    """Floats uniform in [0, 1) from hashes (53 bits)."""
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _ints(z: np.ndarray, low: int, high: int, dt: np.dtype) -> np.ndarray:
    """Integers uniform in [low, high] (both included) from hashes, as ``dt``."""
    span = high - low + 1
    with np.errstate(over="ignore"):
        if span >= 1 << 64:
            v = z
        else:
            # z % span, as z - (z // span) * span: numpy divides by a scalar without the
            # hardware's 64-bit division (libdivide), 1.8x faster on a page's 1,024 words
            s = np.uint64(span)
            v = z // s
            v *= s
            np.subtract(z, v, out=v)
            v += np.uint64(low % (1 << 64))
    return v.view(np.int64).astype(dt) if low < 0 else v.astype(dt)


def _fill_plain(dt: np.dtype, s0: int, s1: int, lanes: int, fill: Fill, key: int) -> np.ndarray:
    """Values of scalar type ``dt`` at stream positions ``[s0, s1)``; ``lanes`` values per element
    (iota: position // lanes)."""
    count = s1 - s0
    if fill.kind == "zeros":
        return np.zeros(count, dt)
    if fill.kind == "ones":
        return np.ones(count, dt)
    if fill.kind == "iota":
        return (np.arange(s0, s1, dtype=np.int64) // lanes).astype(dt)
    return _from_words(counter_words(s0, s1, key), dt, fill)


def _from_words(z: np.ndarray, dt: np.dtype, fill: Fill) -> np.ndarray:
    """Random values of scalar type ``dt`` from stream words ``z``, element by element (words
    of several slices concatenated give the slices' values concatenated)."""
    if fill.has_range:
        assert fill.low is not None and fill.high is not None
        if dt.kind in "iub":
            lo, hi = int(fill.low), int(fill.high)
            return (
                _ints(z, lo, hi, dt)
                if dt.kind != "b"
                else _ints(z, lo, hi, np.dtype(np.int64)).astype(dt)
            )
        if dt.kind == "f":
            flo, fhi = float(fill.low), float(fill.high)
            return (flo + (fhi - flo) * _unit(z)).astype(dt)
    if dt.kind == "f" and dt.itemsize <= 4:  # 24 bits, exact in float32: k / 2**23 - 1
        f = (z >> np.uint64(40)).astype(np.float32)
        f *= np.float32(2.0**-23)
        f -= np.float32(1.0)
        return f.astype(dt, copy=False)
    if dt.kind == "f":
        return (_unit(z) * 2.0 - 1.0).astype(dt)
    if dt.kind in "iu":
        return (z >> np.uint64(58)).astype(dt)  # [0, 64)
    if dt.kind == "b":
        return (z >> np.uint64(63)).astype(dt)
    raise ValueError(f"no plain fill for dtype {dt}")


def _raw_bytes(byte_lo: int, byte_hi: int, key: int) -> np.ndarray:
    """Random bytes ``[byte_lo, byte_hi)`` of a raw stream (byte b: byte b % 8 of word b // 8)."""
    w0, w1 = byte_lo >> 3, (byte_hi + 7) >> 3
    words = counter_words(w0, w1, key)
    raw = words.astype("<u8", copy=False).view(np.uint8)
    return raw[byte_lo - 8 * w0 : byte_hi - 8 * w0]


@dataclass(frozen=True)
class BufferFiller:
    """The start data of one buffer, made a slice at a time: :meth:`elements` ``[start, stop)``
    and :meth:`bytes_at` any byte range are pure functions of the fill, seed, name and index.

    ``poisoned``: the buffer starts as 0xFF bytes (an output with no fill, see
    :mod:`gpuadvise.runner.verify`); file fills hold the file's data (read once, on first use).
    """

    dtype: np.dtype[Any]
    count: int
    fill: Fill
    seed: int
    name: str
    float_kind: str | None = None
    poisoned: bool = False

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize

    @property
    def uniform_byte(self) -> int | None:
        """The one value of every byte (0xFF poisoned, 0 zeros), None when they differ."""
        if self.poisoned:
            return 0xFF
        return 0 if self.fill.kind == "zeros" else None

    def bytes_at(self, lo: int, hi: int) -> np.ndarray:
        """Bytes ``[lo, hi)`` of the buffer (uint8, ``0 <= lo <= hi <= nbytes``)."""
        if self.poisoned:
            return np.full(hi - lo, 0xFF, np.uint8)
        size = self.dtype.itemsize
        e0, e1 = lo // size, -(-hi // size)
        part = self.elements(e0, e1)
        raw = np.ascontiguousarray(part).reshape(-1).view(np.uint8)
        return raw[lo - e0 * size : hi - e0 * size]

    def bytes_runs(self, los: np.ndarray, his: np.ndarray) -> np.ndarray:
        """Bytes ``[los[i], his[i])`` of the buffer for every ``i``, concatenated (uint8): the
        same bytes as one :meth:`bytes_at` per range, made with one call per range to the random
        stream and one conversion for all (the emulator's lazy pages come in hundreds of
        scattered runs of a page: HeCBench nw's whole-launch check fills 150,000)."""
        size = self.dtype.itemsize
        dt, fill = self.dtype, self.fill
        plain = (
            not self.poisoned
            and fill.kind == "random"
            and self.float_kind not in ("bfloat16", "fp8_e4m3", "fp8_e5m2")
            and not dt.names
            and not dt.shape
            and dt.kind in "fiub"
        )
        if not plain or len(los) < 2:
            parts = [self.bytes_at(int(lo), int(hi)) for lo, hi in zip(los, his, strict=True)]
            return np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        e0 = np.asarray(los, dtype=np.int64) // size
        e1 = -(-np.asarray(his, dtype=np.int64) // size)
        key = self._key()
        words = np.concatenate(
            [counter_words(a, b, key) for a, b in zip(e0.tolist(), e1.tolist(), strict=True)]
        )
        raw = np.ascontiguousarray(_from_words(words, dt, fill)).view(np.uint8)
        # each range's bytes inside its elements' bytes: their places in raw
        starts = np.concatenate([[0], np.cumsum(e1 - e0)[:-1]]) * size
        heads = starts + (np.asarray(los, dtype=np.int64) - e0 * size)
        lengths = np.asarray(his, dtype=np.int64) - np.asarray(los, dtype=np.int64)
        if np.array_equal(lengths, (e1 - e0) * size):
            return raw  # every range whole elements: all bytes kept
        keep = np.repeat(heads, lengths)
        keep += np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return raw[keep]

    def elements(self, start: int, stop: int) -> np.ndarray:
        """Elements ``[start, stop)`` as ``dtype`` (poisoning not applied)."""
        dt, fill = self.dtype, self.fill
        count = stop - start
        if fill.kind == "file":
            assert fill.path is not None
            return np.array(_file_cached(fill.path, dt, self.count, self.name)[start:stop])
        if self.float_kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2") and not dt.names:
            from gpuadvise.spec.cuda_types import encode_bfloat16, encode_fp8

            n = int(np.prod(dt.shape)) if dt.shape else 1
            vals = _fill_plain(np.dtype(np.float32), start * n, stop * n, n, fill, self._key())
            kind = self.float_kind
            bits = encode_bfloat16(vals) if kind == "bfloat16" else encode_fp8(vals, kind)
            return bits.view(dt.base).reshape((count, *dt.shape)) if dt.shape else bits.view(dt)
        fields = dt.fields
        if dt.names and fields is not None:
            if fill.kind == "random" and any(fields[f][0].kind not in "fiub" for f in dt.names):
                return self._raw(start, stop)
            out = np.zeros(count, dt)
            for field in dt.names:
                sub = fields[field][0]
                n = int(np.prod(sub.shape)) if sub.shape else 1
                base = sub.base if sub.shape else sub
                vals = _fill_plain(base, start * n, stop * n, n, fill, self._key(field))
                out[field] = vals.reshape((count, *sub.shape)) if sub.shape else vals
            return out
        if dt.shape:  # float4 and friends: a sub-array dtype
            base, n = dt.base, int(np.prod(dt.shape))
            vals = _fill_plain(base, start * n, stop * n, n, fill, self._key())
            return vals.reshape((count, *dt.shape))
        if dt.kind not in "fiub":
            return self._raw(start, stop)
        return _fill_plain(dt, start, stop, 1, fill, self._key())

    def array(self, threads: int | None = None) -> np.ndarray:
        """The whole buffer as it starts (poisoned when ``poisoned``), made in chunks, in up to
        ``threads`` threads (default: ``_FILL_THREADS``, at most one per CPU)."""
        if self.poisoned:
            return np.full(self.nbytes, 0xFF, np.uint8).view(self.dtype)
        if self.fill.kind == "file":
            assert self.fill.path is not None
            return _from_file(self.dtype, self.count, self.fill.path, self.name)
        if self.count <= _CHUNK_ELEMENTS:
            return self.elements(0, self.count)
        out = np.empty(self.count, self.dtype)  # a sub-array dtype (float4) gives (count, 4)

        def fill(lo: int) -> None:
            hi = min(self.count, lo + _CHUNK_ELEMENTS)
            out[lo:hi] = self.elements(lo, hi)

        starts = range(0, self.count, _CHUNK_ELEMENTS)
        most = _FILL_THREADS if threads is None else threads
        threads = min(most, os.cpu_count() or 1, len(starts))
        if threads > 1:  # each chunk its own slice of the stream: the same bytes in any order
            with ThreadPoolExecutor(max_workers=threads) as pool:
                list(pool.map(fill, starts))
        else:
            for lo in starts:
                fill(lo)
        return out

    def _key(self, part: str = "") -> int:
        return stream_key(self.seed, self.name, part)

    def _raw(self, start: int, stop: int) -> np.ndarray:
        size = self.dtype.itemsize
        return _raw_bytes(start * size, stop * size, self._key("bytes")).view(self.dtype)


def buffer_filler(
    dtype: np.dtype,
    count: int,
    fill: str,
    seed: int,
    name: str,
    float_kind: str | None = None,
    poisoned: bool = False,
) -> BufferFiller:
    """A :class:`BufferFiller` from a fill's text (see :func:`make_host_buffer`)."""
    try:
        spec = parse_fill(fill, None, f"buffer {name}")
    except UsageError:
        raise ValueError(f"unknown fill {fill!r}") from None
    return BufferFiller(np.dtype(dtype), int(count), spec, int(seed), name, float_kind, poisoned)


def _file_bytes(path: Path, want: int, name: str) -> np.ndarray:
    """The data bytes of a data file as a read-only memory map: only the pages read are read (a
    trace touches a few pages of a 6 GB file). Checked first: a regular file, whose data is
    exactly ``want`` bytes (a .npy file's header says where its data starts)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise DataFileError(
                f"buffer {name}: data file {path} is not a regular file", "give a .npy or .bin"
            )
        if path.suffix.lower() == ".npy":
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            if not arr.flags.c_contiguous and arr.ndim > 1:  # Fortran order: read in C order
                check_fits(arr.nbytes, f"buffer {name} ({path.name}, in Fortran order)", _HINT)
                arr = np.ascontiguousarray(arr)
            data = arr.reshape(-1).view(np.uint8) if arr.size else np.empty(0, np.uint8)
        elif st.st_size == 0:
            data = np.empty(0, np.uint8)
        else:
            data = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as err:
        if isinstance(err, OSError) and err.errno == errno.ENOMEM:
            raise TooLargeError(
                f"buffer {name}: mapping {path.name} ({want} bytes) needs more address space "
                "than this process may use",
                "raise ulimit -v, or give the buffer fewer elements",
            ) from None
        raise DataFileError(
            f"buffer {name}: cannot read {path} ({err})", "check the file"
        ) from None
    if data.size != want:
        raise DataFileError(
            f"buffer {name}: {path.name} has {data.size} bytes of data, the buffer {want}",
            "check the count and the type against the file",
        )
    return data


_HINT = "give it fewer elements, or a smaller problem size"


def _typed_view(data: np.ndarray, dt: np.dtype, count: int) -> np.ndarray:
    return data.view(dt) if not dt.shape else data.view(dt.base).reshape((count, *dt.shape))


def _from_file(dt: np.dtype, count: int, path: Path, name: str) -> np.ndarray:
    """The whole buffer from its data file, in memory (checked against the budget first)."""
    want = count * dt.itemsize
    check_fits(want, f"buffer {name} ({path.name}, {want} bytes)", _HINT)
    return np.array(_typed_view(_file_bytes(path, want, name), dt, count))


def _file_cached(path: Path, dt: np.dtype, count: int, name: str) -> np.ndarray:
    """A data file's elements as a read-only memory map, opened once per file (as it is now: a
    file written again, even with the same size and time, is opened again) while the process
    runs."""
    try:
        st = os.stat(path)
        stamp: tuple[int, ...] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    except OSError:
        stamp = ()
    key = (str(path), dt, count, stamp)
    hit = _FILES.get(key)
    if hit is None:
        hit = _typed_view(_file_bytes(path, count * dt.itemsize, name), dt, count)
        if len(_FILES) >= 8:
            _FILES.clear()
        _FILES[key] = hit
    return hit


_FILES: dict[tuple[str, np.dtype, int, tuple[int, ...]], np.ndarray] = {}


def make_host_buffer(
    dtype: np.dtype, count: int, fill: str, seed: int, name: str, float_kind: str | None = None
) -> np.ndarray:
    """``count`` elements of ``dtype`` (plain, sub-array such as float4, or structured).

    ``float_kind`` (``bfloat16``, ``fp8_e4m3``, ``fp8_e5m2``): ``dtype`` holds the raw bits of that
    float type, which numpy lacks; the values are drawn as floats and encoded. The buffer is made
    in chunks by :class:`BufferFiller`: the same bytes as any slice of it made on its own.
    Raises :class:`~gpuadvise.spec.budget.TooLargeError` when the buffer does not fit in memory.
    """
    filler = buffer_filler(dtype, count, fill, seed, name, float_kind)
    dt = filler.dtype
    chunks = min(-(-count // _CHUNK_ELEMENTS), _FILL_THREADS, os.cpu_count() or 1)
    while True:  # as many threads as fit, down to one (the same bytes with any number)
        try:
            check_fits(
                count * dt.itemsize
                + min(count, _CHUNK_ELEMENTS) * max(dt.itemsize, 8) * _PEAK_FACTOR * max(chunks, 1),
                f"buffer {name} ({count} elements of {dt.itemsize} bytes, made in chunks)",
                "give it fewer elements (--buffer NAME=TYPE[COUNT]), or a smaller problem size",
            )
            break
        except TooLargeError:
            if chunks <= 1:
                raise
            chunks = 1 << ((chunks - 1).bit_length() - 1)  # 16, 8, 4 (the old count), 2, 1
    return filler.array(max(1, chunks))
