"""What an emulation changed in its output buffers, without making the whole buffers.

Comparing two launches element by element (:func:`gpuadvise.model.launch_change.compare_outputs`)
needs only the elements either run wrote. Reading a whole output and its start data for that
(:attr:`Emulation.outputs` and :attr:`Emulation.inputs`) makes two copies of the buffer and
fills every page of its heap: HeCBench nw's 1 GiB score matrix took 3 GB per emulation, and the
analysis 6 GB. :class:`OutputChanges` finds the changed elements where they can be: a lazy
buffer's page that no access reached was never filled, so never written, and holds its start
data (:meth:`gpuadvise.ptx.memory.GlobalMemory.reached_runs`); only the reached pages are read
and compared with the start data made again for them, a chunk at a time. A buffer that is not
lazy (its data given whole) is compared whole, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from gpuadvise.ptx.memory import GlobalMemory

__all__ = ["BufferChanges", "OutputChanges", "as_elements"]

CHUNK_ELEMENTS = 1 << 22
"""Elements compared at a time (changed_positions' chunk)."""

GROUP_ELEMENTS = 1 << 18
"""Elements of the reached runs' chunks compared at once (a larger chunk alone): the scattered
pages of a column walk (HeCBench nw: 30,000 runs of a page) in hundreds of calls, not thousands,
their temporaries a few MB."""

_GAP_BYTES = 1 << 12
"""Start values at scattered positions are made per cluster of positions less than this apart
(a page): one call to the fill per cluster, not one per element, nor the span between far ones."""


@dataclass(frozen=True)
class BufferChanges:
    """The elements of one buffer whose bytes differ from its start data: ``positions``
    (ascending element indices), ``after`` (their final values)."""

    positions: np.ndarray
    after: np.ndarray


class OutputChanges:
    """The output buffers' changes of one emulation (``changes(name)``, made once per name) and
    the start values at any elements (``start_values(name, positions)``).

    ``gmem``: the emulation's global memory; ``data``: each buffer's start data (an array, or a
    lazy source with ``bytes_at`` and ``dtype``); ``inputs``/``outputs``: the whole buffers,
    read for a buffer that is not lazy."""

    def __init__(
        self,
        gmem: GlobalMemory,
        data: Mapping[str, Any],
        inputs: Mapping[str, np.ndarray],
        outputs: Mapping[str, np.ndarray],
    ) -> None:
        self._gmem = gmem
        self._data = data
        self._inputs = inputs
        self._outputs = outputs
        self._made: dict[str, BufferChanges] = {}

    def _lazy(self, name: str) -> bool:
        return not isinstance(self._data[name], np.ndarray) and self._gmem.is_lazy(name)

    def changes(self, name: str) -> BufferChanges:
        if name not in self._made:
            self._made[name] = self._changes(name)
        return self._made[name]

    def _changes(self, name: str) -> BufferChanges:
        from gpuadvise.model.launch_change import changed_positions

        if not self._lazy(name):
            out = self._outputs[name]
            pos = changed_positions(out, self._inputs[name])
            return BufferChanges(pos, out[pos])
        src = self._data[name]
        dt = src.dtype
        size = dt.itemsize
        pos_parts: list[np.ndarray] = []
        val_parts: list[np.ndarray] = []
        chunks = [
            (a, min(e1, a + CHUNK_ELEMENTS))
            for lo, hi in self._gmem.reached_runs(name)
            for e0, e1 in [(lo // size, -(-hi // size))]
            for a in range(e0, e1, CHUNK_ELEMENTS)
        ]
        for group in _groups(chunks):
            # the chunks of a group compared at once (nw's scattered pages: 30,000 chunks of a
            # page), element by element as each alone
            now = as_elements(
                _joined([self._gmem.read_range(name, a * size, b * size) for a, b in group]), dt
            )
            start = as_elements(_start_runs(src, group, size), dt)
            found = changed_positions(now, start)
            if len(found):
                pos_parts.append(found + _offsets(group, found))
                val_parts.append(now[found])
        if not pos_parts:
            empty = as_elements(self._gmem.read_range(name, 0, 0), dt)
            return BufferChanges(np.zeros(0, dtype=np.int64), empty)
        return BufferChanges(np.concatenate(pos_parts), np.concatenate(val_parts))

    def start_values(self, name: str, positions: np.ndarray) -> np.ndarray:
        """The start data of buffer ``name`` at the elements ``positions`` (ascending)."""
        if not self._lazy(name):
            return self._inputs[name][positions]
        src = self._data[name]
        dt = src.dtype
        size = dt.itemsize
        if not len(positions):
            return as_elements(self._gmem.read_range(name, 0, 0), dt)
        pos = positions.astype(np.int64)
        breaks = np.flatnonzero(np.diff(pos * size) > _GAP_BYTES) + 1
        firsts = pos[np.concatenate([[0], breaks])].tolist()
        lasts = (pos[np.concatenate([breaks - 1, [len(pos) - 1]])] + 1).tolist()
        # the clusters' spans made a group at a time, each position read at its place in them
        parts = []
        done = 0
        for group in _groups(list(zip(firsts, lasts, strict=True))):
            spans = as_elements(_start_runs(src, group, size), dt)
            upto = int(np.searchsorted(pos, group[-1][1]))
            at = pos[done:upto]
            parts.append(spans[_places(group, at)])
            done = upto
        return _joined(parts)


def as_elements(raw: np.ndarray, dt: np.dtype[Any]) -> np.ndarray:
    """Contiguous bytes as elements of ``dt`` (a sub-array type, float4's, gives rows)."""
    if dt.shape:
        return raw.view(dt.base).reshape(-1, *dt.shape)
    return raw.view(dt)


def _groups(chunks: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Consecutive element ranges ``[a, b)`` in groups of at most ``GROUP_ELEMENTS`` elements
    (a longer range alone)."""
    groups: list[list[tuple[int, int]]] = []
    held = GROUP_ELEMENTS
    for a, b in chunks:
        if held + (b - a) > GROUP_ELEMENTS:
            groups.append([])
            held = 0
        groups[-1].append((a, b))
        held += b - a
    return groups


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _offsets(group: list[tuple[int, int]], at: np.ndarray) -> np.ndarray:
    """For places ``at`` in a group's ranges laid end to end, the element index in the buffer
    minus the place."""
    bounds = np.array(group, dtype=np.int64)
    n = bounds[:, 1] - bounds[:, 0]
    ends = np.cumsum(n)
    return (bounds[:, 0] - (ends - n))[np.searchsorted(ends, at, side="right")]


def _places(group: list[tuple[int, int]], elements: np.ndarray) -> np.ndarray:
    """The places of ``elements`` (each inside one of a group's ranges, ascending) in the
    ranges laid end to end."""
    bounds = np.array(group, dtype=np.int64)
    n = bounds[:, 1] - bounds[:, 0]
    shift = bounds[:, 0] - (np.cumsum(n) - n)
    return elements - shift[np.searchsorted(bounds[:, 0], elements, side="right") - 1]


def _start_runs(src: Any, group: list[tuple[int, int]], size: int) -> np.ndarray:
    """The start bytes of a group's element ranges, laid end to end."""
    many = getattr(src, "bytes_runs", None)
    if many is None or len(group) < 2:
        return _joined([_start_bytes(src, a * size, b * size) for a, b in group])
    bounds = np.array(group, dtype=np.int64) * size
    return np.ascontiguousarray(many(bounds[:, 0], bounds[:, 1]))


def _start_bytes(src: Any, lo: int, hi: int) -> np.ndarray:
    """Bytes ``[lo, hi)`` of a lazy buffer's start data, contiguous (a view of them may be taken
    as the element type)."""
    return np.ascontiguousarray(src.bytes_at(lo, hi))
