"""A value computed once per object while the object lives (a trace, a records array).

The models and the rules share facts derived from one trace (the per-record sectors, the lanes
that work alike) without a place to keep them on the trace itself: this keeps them by the
object's identity, checks that the identity was not reused by a later object, and drops the
value when the object is freed.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["IdentityMemo"]

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """``memo(obj, compute)``: ``compute(obj)`` the first time for ``obj``, the same value after
    (while ``obj`` lives); ``memo.peek(obj)``: the value if already made, else None."""

    def __init__(self) -> None:
        self._values: dict[int, tuple[weakref.ref[K], V]] = {}  # type: ignore[type-var]

    def __call__(self, obj: K, compute: Callable[[K], V]) -> V:
        got = self._values.get(id(obj))
        if got is not None and got[0]() is obj:
            return got[1]
        value = compute(obj)
        self._values[id(obj)] = (weakref.ref(obj), value)  # type: ignore[type-var]
        weakref.finalize(obj, self._values.pop, id(obj), None)
        return value

    def peek(self, obj: K) -> V | None:
        got = self._values.get(id(obj))
        return got[1] if got is not None and got[0]() is obj else None
