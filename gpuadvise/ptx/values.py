"""Lane arrays: PTX types as numpy dtypes, active-lane masks, and masked register writes.

Registers are numpy arrays with one element per lane of the batch, stored by size as unsigned
integers (``uint8``/``uint16``/``uint32``/``uint64``; predicates as ``bool``). An instruction reads
a register through a zero-copy view in its own type (``s32``, ``f32`` ...) and writes its result
back under a :class:`Mask` of the lanes that execute it.

Masked writes cost about as much as the arithmetic, so :func:`write` picks one of four ways by the
shape of the mask, measured once per mask: every lane (plain copy); few lanes (index scatter); long
runs of active lanes, as when whole warps or half-warps diverge (``np.copyto(where=)``); scattered
lanes such as every other lane (a branch-free bit blend, ``d ^ ((d ^ v) & m)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # numpy's own C function: np.count_nonzero wraps it in ~1 us of Python dispatch a call
    from numpy._core.multiarray import count_nonzero as _count_nonzero
except ImportError:  # pragma: no cover - another numpy's layout
    _count_nonzero = np.count_nonzero

count_true = _count_nonzero
"""``np.count_nonzero(a)`` of a whole array (the same numpy integer), without numpy's dispatch
wrapper: the emulator counts small per-warp arrays hundreds of thousands of times a kernel."""

__all__ = [
    "NP_TYPES",
    "Mask",
    "bits_dtype",
    "count_true",
    "is_float_type",
    "is_signed_type",
    "storage_dtype",
    "to_storage",
    "write",
]

NP_TYPES: dict[str, np.dtype[Any]] = {
    "pred": np.dtype(bool),
    "b8": np.dtype(np.uint8),
    "u8": np.dtype(np.uint8),
    "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16),
    "u16": np.dtype(np.uint16),
    "s16": np.dtype(np.int16),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
    "b32": np.dtype(np.uint32),
    "u32": np.dtype(np.uint32),
    "s32": np.dtype(np.int32),
    "f32": np.dtype(np.float32),
    "f16x2": np.dtype(np.uint32),
    "bf16x2": np.dtype(np.uint32),
    "tf32": np.dtype(np.uint32),
    "b64": np.dtype(np.uint64),
    "u64": np.dtype(np.uint64),
    "s64": np.dtype(np.int64),
    "f64": np.dtype(np.float64),
}

_UNSIGNED: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
}
_SIGNED: dict[int, np.dtype[Any]] = {
    1: np.dtype(np.int8),
    2: np.dtype(np.int16),
    4: np.dtype(np.int32),
    8: np.dtype(np.int64),
}


def is_signed_type(t: str) -> bool:
    return t.startswith("s")


def is_float_type(t: str) -> bool:
    return t in ("f16", "f32", "f64", "bf16", "f16x2", "bf16x2", "tf32")


def bits_dtype(size: int) -> np.dtype[Any]:
    """The unsigned dtype of ``size`` bytes."""
    return _UNSIGNED[size]


def signed_dtype(size: int) -> np.dtype[Any]:
    return _SIGNED[size]


def storage_dtype(ptx_type: str) -> np.dtype[Any]:
    """How a register declared with ``ptx_type`` is stored."""
    if ptx_type == "pred":
        return np.dtype(bool)
    size = NP_TYPES[ptx_type].itemsize if ptx_type in NP_TYPES else 4
    return _UNSIGNED[size]


def to_storage(val: Any, t: str, store_dtype: np.dtype[Any]) -> Any:
    """``val`` (values of PTX type ``t``) as the bits of a register stored as ``store_dtype``.

    A narrower value is extended (sign-extended for signed types, zero-extended otherwise, as a
    load of ``.s8`` into a 32-bit register does); a wider one is truncated.
    """
    if store_dtype == np.bool_:
        return np.asarray(val, dtype=bool)
    dt = NP_TYPES[t]
    arr = np.asarray(val)
    if arr.dtype != dt:
        arr = arr.astype(dt)
    if dt.itemsize == store_dtype.itemsize:
        return arr.view(store_dtype)
    if dt.itemsize < store_dtype.itemsize:
        if is_signed_type(t):
            return arr.astype(_SIGNED[store_dtype.itemsize]).view(store_dtype)
        return arr.view(_UNSIGNED[dt.itemsize]).astype(store_dtype)
    return arr.view(_UNSIGNED[dt.itemsize]).astype(store_dtype)


def operand_constant(value: int, dtype: Any = np.int64) -> np.ndarray:
    """``value`` as a read-only 0-d array of ``dtype``, for a constant operand of the emulator's
    small per-access array operations: numpy converts a scalar operand (a Python or numpy
    scalar) on every call, ~0.4-0.6 us of a ~1 us ufunc on a few lanes; a 0-d array is used as
    it is. The same result and dtype as the ``dtype`` scalar gives (neither is a "weak" Python
    scalar); read-only, so that no in-place operation can change the constant."""
    a = np.array(value, dtype=dtype)
    a.flags.writeable = False
    return a


FULL, SPARSE, RUNS, SCATTER = 0, 1, 2, 3

_BOOL = np.dtype(np.bool_)  # (a dtype instance: a comparison with a scalar type converts it)


class Mask:
    """The lanes an instruction executes for: ``b`` a bool array over the batch, or None for all.

    Derived forms (the index array, all-ones integer masks, the write mode) are computed on first
    use and kept, since every instruction of a basic block shares the block's mask.
    """

    __slots__ = ("_count", "_ints", "_idx", "_mode", "b", "n")

    def __init__(self, b: np.ndarray | None, n: int) -> None:
        self.b = b
        self.n = n
        self._idx: np.ndarray | None = None
        self._ints: dict[np.dtype[Any], np.ndarray] = {}
        self._mode = FULL if b is None else -1
        self._count = n if b is None else -1

    @property
    def full(self) -> bool:
        return self.b is None

    def count(self) -> int:
        if self._count < 0:
            assert self.b is not None
            self._count = int(_count_nonzero(self.b))
        return self._count

    def idx(self) -> np.ndarray | None:
        """Indices of the active lanes, or None when every lane is active."""
        if self.b is None:
            return None
        if self._idx is None:
            self._idx = self.b.nonzero()[0]  # np.flatnonzero's own result, without its wrappers
        return self._idx

    def mode(self) -> int:
        if self._mode < 0:
            assert self.b is not None
            count = self.count()
            if count <= self.n // 16:
                self._mode = SPARSE
            else:
                b = self.b
                transitions = int(_count_nonzero(b[1:] != b[:-1]))
                self._mode = RUNS if transitions * 32 <= self.n else SCATTER
        return self._mode

    def ints(self, dtype: np.dtype[Any]) -> np.ndarray:
        m = self._ints.get(dtype)
        if m is None:
            assert self.b is not None
            m = np.negative(self.b.astype(dtype))
            self._ints[dtype] = m
        return m

    def with_pred(self, p: np.ndarray, negate: bool = False) -> Mask:
        """This mask and a predicate (``@%p``/``@!%p``)."""
        if self.b is None:
            b = ~p if negate else p.copy()
        else:
            b = self.b & ~p if negate else self.b & p
        return Mask(b, self.n)

    def any(self) -> bool:
        return self.b is None or self.count() > 0


def write(store: np.ndarray, val: Any, m: Mask) -> None:
    """Write ``val`` (already in ``store``'s dtype, or a scalar) into the lanes of ``m``."""
    if m.b is None:
        store[...] = val
        return
    mode = m._mode  # (the mask's kept mode read as it is once made: the method call costs more)
    if mode < 0:
        mode = m.mode()
    if mode == SPARSE:
        idx = m.idx()
        # (an array's ndim read directly: np.ndim costs ~1 us a call)
        if (val.ndim if type(val) is np.ndarray else np.ndim(val)) == 0:
            store[idx] = val
        else:
            store[idx] = val[idx]
    elif mode == RUNS or store.dtype == _BOOL:
        if mode == SCATTER:  # bool: blend with logic ops
            np.bitwise_xor(store, np.bitwise_and(np.bitwise_xor(store, val), m.b), out=store)
        else:
            np.copyto(store, val, where=m.b, casting="unsafe")
    else:
        v = np.asarray(val)
        if v.dtype != store.dtype:
            v = v.astype(store.dtype)
        np.bitwise_xor(
            store, np.bitwise_and(np.bitwise_xor(store, v), m.ints(store.dtype)), out=store
        )
