"""Is another launch shape the same computation? The pure half of checking a launch change.

A rule that proposes another grid or block (a block that is a multiple of the warp, a whole
number of waves, more CTAs) must not propose one that breaks the kernel: a kernel hard-wired to
16x16 tiles, a 2-D kernel given a 1-D block, a reduction whose partial sums follow the CTAs.
gpuadvise runs both launches on the emulator (the analyze layer) and this module decides:

- :func:`covering_ctas`: which CTAs of the original launch hold the threads of some CTAs of the
  new launch (by global thread coordinates), so that the two runs cover the same threads when
  the whole launches are too large to run;
- :func:`compare_outputs`: every element either run wrote must hold the same value in both,
  and the new run must write as many elements per thread as the original: a kernel that maps
  its threads to its data through ``blockDim`` computes the same thing; one that hard-wires the
  block or whose outputs follow the CTAs does not.

Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CtaWrites", "LaunchCheck", "compare_outputs", "covering_ctas", "cta_box", "cta_writes"]

MAX_SPLIT_LANES = 1 << 24
"""Active lanes of global accesses :func:`cta_writes` looks at, at most (beyond: not split)."""


@dataclass(frozen=True)
class LaunchCheck:
    """The verdict on a launch change: ``same`` (the outputs agree), and why not, or how it
    was checked (``how``: "whole launch" or "N CTAs against M")."""

    same: bool
    why: str
    how: str = ""


Dim = tuple[int, int, int]


def cta_box(cta: int, grid: Dim, block: Dim) -> tuple[Dim, Dim]:
    """The global thread coordinates CTA ``cta`` (linear id, x fastest) holds: (low, high) with
    high exclusive, per axis."""
    gx, gy, _ = grid
    cx, cy, cz = cta % gx, (cta // gx) % gy, cta // (gx * gy)
    lo = (cx * block[0], cy * block[1], cz * block[2])
    hi = (lo[0] + block[0], lo[1] + block[1], lo[2] + block[2])
    return lo, hi


def covering_ctas(ctas: Sequence[int], new: tuple[Dim, Dim], old: tuple[Dim, Dim]) -> list[int]:
    """The CTAs of the ``old`` (grid, block) launch whose threads overlap those of ``ctas`` of
    the ``new`` launch, sorted."""
    ogrid, oblock = old
    out: set[int] = set()
    for c in ctas:
        lo, hi = cta_box(c, *new)
        ranges = [
            range(lo[a] // oblock[a], min(-(-hi[a] // oblock[a]), ogrid[a])) for a in range(3)
        ]
        for z in ranges[2]:
            for y in ranges[1]:
                for x in ranges[0]:
                    out.add(x + ogrid[0] * (y + ogrid[1] * z))
    return sorted(out)


def threads_in(ctas: Sequence[int], grid: Dim, block: Dim, limit: Dim) -> int:
    """Threads of ``ctas`` inside the launch's thread extent ``limit`` (grid x block of the
    smaller launch on each axis: threads beyond it have no counterpart)."""
    n = 0
    for c in ctas:
        lo, hi = cta_box(c, grid, block)
        k = 1
        for a in range(3):
            k *= max(0, min(hi[a], limit[a]) - lo[a])
        n += k
    return n


@dataclass(frozen=True)
class CtaWrites:
    """Who wrote the global memory a run of several CTAs wrote, when no CTA read or wrote what
    another wrote (:func:`cta_writes`): each CTA's part of the run is then what it computes run
    alone or with any of the others. ``units``: the written ``unit``-byte units (address //
    ``unit``, ascending, distinct); ``writer``: the CTA that wrote each."""

    unit: int
    units: np.ndarray
    writer: np.ndarray

    def _at(self, units: np.ndarray) -> np.ndarray:
        if not len(self.units):
            return np.full(len(units), -1, dtype=np.int64)
        k = np.minimum(np.searchsorted(self.units, units), len(self.units) - 1)
        return np.where(self.units[k] == units, self.writer[k], -1)

    def owners(self, start: np.ndarray, size: int) -> np.ndarray:
        """Per element of ``size`` bytes at the global addresses ``start``: the CTA that wrote
        all its written bytes; -1 where no CTA wrote any, or several CTAs wrote its bytes."""
        first = start // self.unit
        last = (start + (size - 1)) // self.unit
        out = self._at(first)
        several = np.zeros(len(out), dtype=bool)
        for k in range(1, -(-size // self.unit) + 1):  # the element's other units
            more = first + k <= last
            if not more.any():
                break
            w = np.where(more, self._at(first + k), -1)
            several |= (w >= 0) & (out >= 0) & (w != out)
            out = np.where(out < 0, w, out)
        out[several] = -1
        return out


def cta_writes(records: np.ndarray, max_lanes: int = MAX_SPLIT_LANES) -> CtaWrites | None:
    """The global memory ``records`` (a run's access records, every access of it: no loop
    sampled, no record dropped) show written, and by which CTA; None when a CTA read or wrote
    (an atomic too) a byte another CTA wrote, so that what each computed may hang on the
    others (or when the records hold more than ``max_lanes`` active lanes)."""
    from gpuadvise.model.banks import active_lanes
    from gpuadvise.trace.access import Kind, Space

    glob = records["space"] == int(Space.GLOBAL)
    r = records if glob.all() else records[glob]  # (a launch check's: global records alone)
    kind = r["kind"]
    wrote = kind != int(Kind.LOAD)
    empty = np.zeros(0, dtype=np.int64)
    if not wrote.any():
        return CtaWrites(1, empty, empty)
    masks = r["mask"].astype(np.uint32)
    if int(np.bitwise_count(masks).sum(dtype=np.int64)) > max_lanes:
        return None
    on = active_lanes(masks)
    addrs = r["addr"]  # (a view: the records are not copied)

    def lanes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Address, width and CTA of each active lane of records ``rows`` (a mask)."""
        at = np.flatnonzero(rows)
        rec, lane = np.nonzero(on[at])
        rec = at[rec]
        return (
            addrs[rec, lane].astype(np.int64),
            r["width"][rec].astype(np.int64),
            r["cta"][rec].astype(np.int64),
        )

    wa, ww, wc = lanes(wrote)
    if not len(wa):
        return CtaWrites(1, empty, empty)
    lo, hi = int(wa.min()), int((wa + ww).max())  # the written bytes lie in [lo, hi)
    # the loads that reach [lo, hi) (the others cannot touch a written byte), a chunk of
    # records at a time
    near = np.zeros(len(r), dtype=bool)
    far = np.uint64(1 << 63)
    for a in range(0, len(r), 1 << 14):
        b = a + (1 << 14)
        top = addrs[a:b].max(axis=1).astype(np.int64)  # (inactive lanes hold 0)
        least = np.where(on[a:b], addrs[a:b], far).min(axis=1).astype(np.int64)
        near[a:b] = ~wrote[a:b] & (top + 16 > lo) & (least < hi)
    ra, rw, rc = lanes(near)
    # the unit: the largest power of two up to 16 that divides every address and width
    low = 16
    for x in (wa, ww, ra, rw):
        if len(x):
            low |= int(np.bitwise_or.reduce(x))
    unit = low & -low

    def units(a: np.ndarray, w: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = w // unit
        u = np.repeat(a // unit, n)
        if len(u) and int(n.max()) > 1:  # each access's units after its first
            first = np.cumsum(n) - n
            u += np.arange(len(u), dtype=np.int64) - np.repeat(first, n)
        return u, np.repeat(c, n)

    wu, wcu = units(wa, ww, wc)
    order = np.argsort(wu, kind="stable")
    wu, wcu = wu[order], wcu[order]
    same = wu[1:] == wu[:-1]
    # (a unit whose writers are not all one CTA has two neighbours that differ, in any order)
    if (same & (wcu[1:] != wcu[:-1])).any():
        return None  # two CTAs wrote one unit
    keep = np.concatenate([[True], ~same])
    got = CtaWrites(unit, wu[keep], wcu[keep])
    ru, rcu = units(ra, rw, rc)
    by = got._at(ru)
    if ((by >= 0) & (by != rcu)).any():
        return None  # a CTA read what another wrote
    return got


def _bytes(x: np.ndarray) -> np.ndarray:
    """Each element's bytes as a row (an empty array: no rows)."""
    if not len(x):
        return np.zeros((0, 1), dtype=np.uint8)
    return x.view(np.uint8).reshape(len(x), -1)


def _words(x: np.ndarray) -> np.ndarray:
    """Each element as a row of the widest unsigned words that tile it (a float a uint32, a
    12-byte struct three): the same bytes as :func:`_bytes`, compared word by word."""
    size = x.dtype.itemsize
    word = next(w for w in (8, 4, 2, 1) if size % w == 0)
    return x.view(np.dtype(f"u{word}")).reshape(len(x), size // word)


def _changed(out: np.ndarray, init: np.ndarray) -> np.ndarray:
    """Elements whose bytes changed (structs and vectors: any byte of the element). A word
    differs where one of its bytes does: compared by words (one word an element for the
    scalar types: no reduction over a row of bytes, 20 times faster on a 1 GiB buffer)."""
    if not len(out) or out.dtype.itemsize != init.dtype.itemsize or out.ndim != 1:
        return (_bytes(out) != _bytes(init)).any(axis=1)
    a, b = _words(np.ascontiguousarray(out)), _words(np.ascontiguousarray(init))
    if a.shape[1] == 1:
        return a[:, 0] != b[:, 0]
    return (a != b).any(axis=1)


def changed_positions(out: np.ndarray, init: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """The positions of the elements of ``out`` whose bytes differ from ``init``, a chunk at a
    time (a 1 GiB buffer is compared without a mask of its size)."""
    found = [
        np.flatnonzero(_changed(out[a : a + chunk], init[a : a + chunk])) + a
        for a in range(0, len(out), chunk)
    ]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            close = np.isclose(a, b, rtol=1e-5, atol=1e-6)
        return close | (np.isnan(a) & np.isnan(b))
    return (_bytes(a) == _bytes(b)).all(1)


def compare_outputs(
    names: Sequence[str],
    init: Mapping[str, np.ndarray],
    old: Mapping[str, np.ndarray],
    new: Mapping[str, np.ndarray],
    *,
    old_threads: int,
    new_threads: int,
    whole: bool,
    index: Mapping[str, np.ndarray] | None = None,
) -> tuple[bool, str]:
    """Do the two runs agree? ``init``: the outputs' contents before the runs; ``old``/``new``:
    after the original and the changed launch; ``*_threads``: the threads each run covered.
    ``whole``: both ran every CTA, so the change must write every element the original writes,
    the same values, and others only as its extra threads would (a grid rounded up covers a
    few more); otherwise the new run covered a subset of the threads the old one did (its
    threads inside the original's extent): what it wrote must agree, and it must write as
    many elements per thread. ``index``: the arrays hold only these positions of each buffer
    (the elements either run changed), which the messages name."""

    def at(name: str, k: int) -> int:
        return k if index is None else int(index[name][k])

    if not names:
        return False, "the kernel has no output buffer to compare"
    wrote_old = wrote_new = extra = 0
    for name in names:
        a, b, i = old[name], new[name], init[name]
        ca, cb = _changed(a, i), _changed(b, i)
        if not whole and (cb & ~ca).any():
            return False, f"the change writes elements of `{name}` the original threads do not"
        both = ca & cb if whole else cb
        bad = both & ~_equal(a, b)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            return False, (
                f"`{name}`[{at(name, k)}] differs ({_show(a[k])} with the launch as it is, {_show(b[k])} "
                "with the change)"
            )
        if whole and (ca & ~cb).any():
            k = int(np.flatnonzero(ca & ~cb)[0])
            return False, (
                f"the change leaves `{name}`[{at(name, k)}] unwritten, which the launch writes"
            )
        wrote_old += int(ca.sum())
        wrote_new += int(cb.sum())
        extra += int((cb & ~ca).sum())
    if wrote_old == 0:
        return False, "the original launch wrote no output element to compare"
    per_old = wrote_old / max(old_threads, 1)
    if whole:
        # the change's extra threads (its grid covers a few more) may write their own elements
        allowed = max(new_threads - old_threads, 0) * per_old + 1
        if extra > allowed:
            return False, (
                f"the change writes {extra} output elements the launch as it is does not "
                f"(its {max(new_threads - old_threads, 0)} extra threads would write about "
                f"{allowed - 1:.0f})"
            )
        return True, ""
    per_new = wrote_new / max(new_threads, 1)
    if per_new < 0.9 * per_old:
        return False, (
            f"the change writes {per_new:.3g} output elements per thread where the launch as it "
            f"is writes {per_old:.3g}"
        )
    return True, ""


def _show(x: np.ndarray) -> str:
    v = x.tolist() if hasattr(x, "tolist") else x
    text = str(v)
    return text if len(text) <= 40 else text[:37] + "..."
