"""GA201's view of shared memory as the trace saw it, and as a padding would lay it out.

- :func:`shared_layout`: the kernel's static ``.shared`` variables where the tracer placed them,
  and where the dynamic area starts; :func:`source_name`: the source name of a PTX variable;
- :class:`Padded` and :func:`remap`: the traced addresses moved to the layout in which an array
  has ``pad`` spare elements after every ``cols`` (a 2-D tile's rows padded, or a 1-D array's
  index padded: element ``e`` at ``e + (e // cols) * pad``), the variables after it shifted;
- :func:`cost`, :func:`chunked_cost`: the bank model's (wavefronts, ideal) of shared records,
  each counted as often as it occurs; :func:`widest_access`: the widest access of a variable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpuadvise.model.banks import active_lanes, record_wavefronts
from gpuadvise.trace.access import Space

if TYPE_CHECKING:
    from gpuadvise.rules.context import RuleContext

__all__ = [
    "CHUNK",
    "Layout",
    "Padded",
    "SharedVar",
    "chunked_cost",
    "cost",
    "in_var",
    "remap",
    "shared_layout",
    "source_name",
    "widest_access",
]

CHUNK = 1 << 15  # records at a time over the whole trace (a first wave holds millions)


@dataclass(frozen=True)
class SharedVar:
    """A static ``.shared`` variable of the PTX, where the tracer placed it."""

    ptx_name: str
    offset: int
    size: int
    align: int


@dataclass(frozen=True)
class Layout:
    """The static shared variables in address order, where the dynamic area starts and the
    alignment it keeps."""

    vars: tuple[SharedVar, ...]
    dynamic_offset: int
    dynamic_align: int


def shared_layout(ctx: RuleContext) -> Layout:
    """The kernel's shared variables as the tracer lays them out (the rules' shared-layout
    service: the emulator's placement; the GPU tracer agrees on the kernels suite)."""
    placed = ctx.services.shared_layout()
    out = []
    dyn_align = 16
    for v in placed.variables:
        if v.extern:
            dyn_align = max(dyn_align, v.align)
            continue
        out.append(SharedVar(v.name, v.offset, v.size_bytes, max(v.align, 1)))
    return Layout(tuple(sorted(out, key=lambda v: v.offset)), placed.dynamic_offset, dyn_align)


def source_name(ptx_name: str) -> str | None:
    """The source name of a PTX shared variable: a function-local static
    ``_ZZ<len><kernel>E<len><name>[_<n>]``, or a plain (``extern "C"``-style) file-scope name."""
    if not ptx_name.startswith("_Z"):
        return ptx_name
    if not ptx_name.startswith("_ZZ"):
        return None
    k = ptx_name.find("E")
    while k >= 0:  # each ``E<digits>``, left to right: the name's length, then the name
        j = k + 1
        while j < len(ptx_name) and ptx_name[j] in "0123456789":
            j += 1
        if j > k + 1:
            n = int(ptx_name[k + 1 : j])
            rest = ptx_name[j:]
            tail = rest[n:]
            numbered = tail[:1] == "_" and tail[1:].isascii() and tail[1:].isdigit()
            if len(rest) >= n and (not tail or numbered):
                return rest[:n]
        k = ptx_name.find("E", k + 1)
    return None


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


@dataclass(frozen=True)
class Padded:
    """One array to pad: its PTX variable, ``pad`` spare elements after every ``cols`` elements
    (a 2-D tile's row length, or the group of a 1-D array's index padding), element bytes.
    ``swizzle`` (a 1-D array, ``pad`` 0): no spare, the index swizzled instead, element ``e`` of
    every odd group of ``cols`` stored at ``e ^ (cols - 1)`` (its group read backwards)."""

    var: SharedVar
    cols: int
    elem: int
    pad: int
    swizzle: bool = False

    @property
    def size(self) -> int:
        """The padded array's bytes: ``n + (n // cols) * pad`` elements."""
        n = self.var.size // self.elem
        return (n + n // self.cols * self.pad) * self.elem


def in_var(records: np.ndarray, v: SharedVar) -> np.ndarray:
    """Per record and lane: an active lane whose address lies in ``v``."""
    a = records["addr"]
    inside = active_lanes(records["mask"]) & (a >= np.uint64(v.offset))
    return inside & (a < np.uint64(v.offset + v.size))


def remap(records: np.ndarray, layout: Layout, pads: Sequence[Padded]) -> np.ndarray:
    """``records`` with their shared addresses moved to the layout in which each array of
    ``pads`` has ``pad`` more elements after every ``cols`` (the variables after it shift as the
    emulator would lay them out, each at its alignment; so does the dynamic area), or, swizzled,
    its odd groups of ``cols`` elements read backwards. Records of other spaces are left
    alone."""
    by_name = {p.var.ptx_name: p for p in pads}
    new_off: list[int] = []
    off = layout.vars[0].offset if layout.vars else layout.dynamic_offset
    for v in layout.vars:
        off = _align_up(off, v.align)
        new_off.append(off)
        p = by_name.get(v.ptx_name)
        off += v.size if p is None else p.size
    new_dyn = _align_up(off, layout.dynamic_align) if layout.vars else layout.dynamic_offset
    out = records.copy()
    shared = np.flatnonzero(out["space"] == int(Space.SHARED))
    if len(shared) == 0:
        return out
    addr = out["addr"][shared]
    lanes = active_lanes(out["mask"][shared])
    new = addr.copy()
    for v, start in zip(layout.vars, new_off, strict=True):
        inside = lanes & (addr >= np.uint64(v.offset)) & (addr < np.uint64(v.offset + v.size))
        rel = addr[inside] - np.uint64(v.offset)
        p = by_name.get(v.ptx_name)
        if p is not None and p.swizzle:
            k, within = rel // np.uint64(p.elem), rel % np.uint64(p.elem)
            odd = (k // np.uint64(p.cols)) & np.uint64(1)
            rel = (k ^ (odd * np.uint64(p.cols - 1))) * np.uint64(p.elem) + within
        elif p is not None:
            row_bytes = np.uint64(p.cols * p.elem)
            rel = rel // row_bytes * np.uint64((p.cols + p.pad) * p.elem) + rel % row_bytes
        new[inside] = rel + np.uint64(start)
    beyond = lanes & (addr >= np.uint64(layout.dynamic_offset))
    new[beyond] = addr[beyond] - np.uint64(layout.dynamic_offset) + np.uint64(new_dyn)
    out["addr"][shared] = new
    return out


def cost(records: np.ndarray, times: np.ndarray | None = None) -> tuple[int, int]:
    """(wavefronts, ideal) of shared ``records`` under the bank model, each record counted
    ``times`` times (None: once)."""
    if len(records) == 0:
        return 0, 0
    wf, need = record_wavefronts(records)
    if times is None:
        return int(wf.sum()), int(need.sum())
    return int(wf.astype(np.int64) @ times), int(need.astype(np.int64) @ times)


def widest_access(shared: np.ndarray, v: SharedVar) -> int:
    """The widest access (bytes per lane) of any record with a lane inside ``v``."""
    widest = 1
    for k in range(0, len(shared), CHUNK):
        part = shared[k : k + CHUNK]
        hit = in_var(part, v).any(axis=1)
        if hit.any():
            widest = max(widest, int(part["width"][hit].max()))
    return widest


def chunked_cost(
    shared: np.ndarray, layout: Layout, pads: Sequence[Padded], times: np.ndarray
) -> tuple[int, int]:
    """:func:`cost` of every record under ``pads``, each ``times`` times, a chunk at a time."""
    wf = ideal = 0
    for k in range(0, len(shared), CHUNK):
        part = shared[k : k + CHUNK]
        w, i = cost(remap(part, layout, pads) if pads else part, times[k : k + CHUNK])
        wf, ideal = wf + w, ideal + i
    return wf, ideal
