"""Address spaces of the emulator: where buffers live and how an address maps back to bytes.

Generic addresses are split into windows by their top bits (``address >> 44``), so that a generic
pointer maps back to its space with no bookkeeping of where it came from:

==========  =====================  ==============================================================
window      generic address        what the space-specific address is
==========  =====================  ==============================================================
shared      ``0x1000_0000_0000+o`` ``o``: the offset in the CTA's shared window (static variables
                                   from 0x400 on sm_90 and later, after the 1 KB the driver
                                   reserves there; from 0 on older GPUs)
local       ``0x2000_0000_0000+o`` ``o``: the offset in the thread's local frame
const       ``0x3000_0000_0000+o`` ``o``: the offset in the user constant bank
param       ``0x4000_0000_0000+o`` ``o``: the offset in the kernel's parameter block
global      ``0x7000_0000_0000+``  the same (global addresses are generic addresses, and
            ``i * 2**36 + o``      ``cvta.to.global`` is the identity, as on the GPU)
==========  =====================  ==============================================================

Buffer ``i`` (the kernel's pointer arguments in parameter order, then the module's ``.global``
variables) starts at ``0x7000_0000_0000 + i * 2**36``: aligned far beyond cudaMalloc's 256 bytes,
and 64 GiB apart, so an access past a buffer's end never lands in another buffer.

A buffer may be *lazy*: a :class:`ByteSource` (its size, and any byte range of its start data on
demand) instead of its bytes. The heap is then zero pages the system does not commit until written,
and a 4 KiB page of a lazy buffer is filled from its source the first time an access reaches it
(:meth:`GlobalMemory.translate`, which every global load, store and atomic goes through): a trace of
the first wave of a 256 MB buffer makes only the pages those CTAs touch.
"""

from __future__ import annotations

import mmap
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from gpuadvise.ptx.values import operand_constant

__all__ = [
    "CONST_WINDOW",
    "GLOBAL_BASE",
    "GLOBAL_STRIDE_BITS",
    "LOCAL_WINDOW",
    "PARAM_WINDOW",
    "SHARED_WINDOW",
    "WINDOW_SHIFT",
    "BufferInfo",
    "ByteSource",
    "GlobalMemory",
    "align_up",
    "anonymous_mapping",
    "array_huge_pages",
    "heap_views",
    "huge_pages_returned_to_host",
]

WINDOW_SHIFT = 44
SHARED_WINDOW = 0x1 << WINDOW_SHIFT
LOCAL_WINDOW = 0x2 << WINDOW_SHIFT
CONST_WINDOW = 0x3 << WINDOW_SHIFT
PARAM_WINDOW = 0x4 << WINDOW_SHIFT
GLOBAL_BASE = 0x7 << WINDOW_SHIFT
GLOBAL_STRIDE_BITS = 36
MAX_BUFFERS = 1 << (WINDOW_SHIFT - GLOBAL_STRIDE_BITS)
WINDOW_IDS = {"shared": 1, "local": 2, "const": 3, "param": 4, "global": 7}
PAGE_SHIFT = 12  # lazy buffers are filled 4 KiB at a time
READ_AHEAD_MAX = 64
"""The most pages filled past a run at once. A fill reads ahead only when it continues a walk
forward through a buffer, i.e. starts at the page where the last fill after a filled page ended:
the first fill after a filled page reads none ahead, the next that continues it one page, then the
window doubles while the walk consumes it, up to this many pages, never over a filled page. A run
after an unfilled page (scattered reads) fills its own pages only. llm.c's softmax walks rows a
page at a time (its corpus trace: 1,921 fills with no read-ahead, 294 so); HeCBench nw's tiles
often find a page's predecessor filled but never walk on (its whole-launch check: 49,153 fills,
which a fixed window of 7 pages made 163,841 pages instead of 49,153)."""

FILL_BATCH_PAGES = 64
"""Pages of scattered runs made by one call to a lazy buffer's ``bytes_runs``: the per-call cost
of its random stream's set-up and conversions shared by many runs of a page (HeCBench nw's
whole-launch check fills 150,000 of them, one call each: 30 us a page in overhead), the
temporaries of the call kept to a few MB."""

_every = np.logical_and.reduce  # ndarray.all without its Python wrapper (the same answer)


class ByteSource(Protocol):
    """A lazy buffer's start data: ``nbytes`` in all, ``bytes_at(lo, hi)`` the bytes ``[lo, hi)``
    as uint8 (the same bytes whatever the ranges asked). A source may also say that every byte
    is one value (``uniform_byte``, an int; None or absent otherwise): its pages are then filled
    all at once, with no call per run. A source may also make many ranges at once
    (``bytes_runs(los, his)``: the ranges' bytes concatenated, as ``bytes_at`` gives them)."""

    @property
    def nbytes(self) -> int: ...

    def bytes_at(self, lo: int, hi: int) -> np.ndarray: ...


def align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


_SMALL_HEAP_BYTES = 4 << 20


def _zero_heap(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes whose 4 KiB pages the system commits when first written: an
    anonymous mapping, not ``np.zeros``, for large heaps. numpy asks for transparent huge pages
    on arrays of 4 MiB and more (``madvise``), so the first write to each 2 MiB region committed
    and zeroed 2 MiB, after compacting memory when none was free: the scattered output pages of
    the 8192^2 transpose's first wave took 400 MB instead of 40 MB, and 0.1 to 2 s of system
    time."""
    if nbytes < _SMALL_HEAP_BYTES:
        return np.zeros(nbytes, dtype=np.uint8)
    return np.frombuffer(anonymous_mapping(nbytes), dtype=np.uint8)


# MAP_NORESERVE: Python has the name from 3.13 on; its value is 0x4000 on x86 and arm64 Linux.
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0) or (
    0x4000
    if sys.platform.startswith("linux")
    and platform.machine() in ("x86_64", "AMD64", "i686", "aarch64", "arm64")
    else 0
)


def anonymous_mapping(nbytes: int) -> mmap.mmap:
    """``nbytes`` of zero pages, private to this process, that the system backs only where
    written, and does not count against the memory it promised (``MAP_NORESERVE``).

    A reservation counts in the commit charge otherwise, and under Linux's default overcommit
    heuristic a ``fork`` fails with ENOMEM when the parent's charge exceeds the machine's memory:
    the emulator's 8 GiB record reservation and one more such made every ``fork`` of the process
    fail on a 23 GiB machine (a test's ``subprocess`` with ``preexec_fn``, in CI)."""
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    try:
        return mmap.mmap(-1, nbytes, flags=flags | _NORESERVE)
    except OSError:  # a system that refuses the flag: an ordinary reservation
        return mmap.mmap(-1, nbytes, flags=flags)


_VIRTIO_BALLOON = "0x0005"
_BALLOON_F_REPORTING = 5  # VIRTIO_BALLOON_F_REPORTING: the guest reports its free pages


def huge_pages_returned_to_host(sys_root: Path = Path("/sys")) -> bool:
    """Whether this machine is a virtual machine whose kernel hands its free memory back to the
    host (a virtio balloon with free page reporting), where a transparent huge page costs far
    more than it saves.

    The guest reports free blocks of 2 MiB and more to the host, which discards them; a huge page
    is one such block, so nearly every one a process faults in is fresh to the host: 512 host
    faults and 2 MiB zeroed before the first write returns, against 4 KiB pages the guest
    recycles from its own lists. On the 2-core development and CI machine (a Firecracker VM with
    such a balloon) an analysis of hecbench's cmpfhd took 20 s with numpy's huge pages and 10 s
    without (system time 14 -> 2.4 s); on the H200 machine (Firecracker, no balloon) the corpus
    was 0.92x faster with them (session 22, docs/performance.md). Reads a few sysfs files; False
    where they cannot be read."""
    try:
        devices = list((sys_root / "bus" / "virtio" / "devices").iterdir())
    except OSError:
        return False
    for device in devices:
        try:
            if (device / "device").read_text().strip() != _VIRTIO_BALLOON:
                continue
            features = (device / "features").read_text().strip()
        except OSError:
            continue
        if len(features) > _BALLOON_F_REPORTING and features[_BALLOON_F_REPORTING] == "1":
            return True
    return False


def array_huge_pages(
    environ: Mapping[str, str] | None = None, sys_root: Path = Path("/sys")
) -> bool | None:
    """Turn off numpy's request for transparent huge pages on its large arrays in this process
    (numpy ``madvise``s every array of 4 MiB and more by default) where
    :func:`huge_pages_returned_to_host`; elsewhere leave the setting as it is. Never turns them
    on. ``NUMPY_MADVISE_HUGEPAGE`` set in the environment is the user's choice, which numpy has
    already applied: left alone. Returns False where it turned them off, None where it left the
    setting (numpy without the switch included)."""
    env = os.environ if environ is None else environ
    if "NUMPY_MADVISE_HUGEPAGE" in env or not huge_pages_returned_to_host(sys_root):
        return None
    try:
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]
    except ImportError:  # a numpy without the switch: nothing to change
        return None
    _set_madvise_hugepage(False)
    return False


def heap_views(heap: np.ndarray) -> dict[int, np.ndarray]:
    """Views of a byte heap (length a multiple of 16) by element size."""
    return {
        1: heap,
        2: heap.view(np.uint16),
        4: heap.view(np.uint32),
        8: heap.view(np.uint64),
    }


@dataclass(frozen=True)
class BufferInfo:
    name: str
    base: int  # virtual address
    size: int  # bytes
    start: int  # byte offset in the heap


class GlobalMemory:
    """Every global buffer in one byte heap; buffer ``i`` at virtual address
    ``GLOBAL_BASE + i * 2**GLOBAL_STRIDE_BITS``."""

    def __init__(self, contents: list[tuple[str, bytes | np.ndarray | ByteSource]]) -> None:
        if len(contents) > MAX_BUFFERS:
            raise ValueError(f"at most {MAX_BUFFERS} global buffers")
        infos = []
        start = 0
        for i, (name, data) in enumerate(contents):
            size = len(data) if isinstance(data, bytes) else int(data.nbytes)
            infos.append(BufferInfo(name, GLOBAL_BASE + (i << GLOBAL_STRIDE_BITS), size, start))
            start = align_up(start + size, 256)
        # zero pages: only the pages written take memory
        self.heap = _zero_heap(max(start, 16))
        self._lazy: list[tuple[BufferInfo, ByteSource]] = []
        for info, (_, data) in zip(infos, contents, strict=True):
            if isinstance(data, bytes):
                self.heap[info.start : info.start + info.size] = np.frombuffer(data, np.uint8)
            elif isinstance(data, np.ndarray):
                self.heap[info.start : info.start + info.size] = _bytes_of(data)
            elif info.size:
                self._lazy.append((info, data))
        pages = (len(self.heap) + (1 << PAGE_SHIFT) - 1) >> PAGE_SHIFT
        full_pages = len(self.heap) >> PAGE_SHIFT
        self._page_rows = self.heap[: full_pages << PAGE_SHIFT].reshape(full_pages, 1 << PAGE_SHIFT)
        # lazy buffers of one byte value (a poisoned output): (first, end) of the pages wholly
        # inside, and the value
        self._uniform: list[tuple[int, int, int]] = []
        for info, src in self._lazy:
            value = getattr(src, "uniform_byte", None)
            p0 = -(-info.start >> PAGE_SHIFT)
            p1 = min((info.start + info.size) >> PAGE_SHIFT, full_pages)
            if value is not None and p0 < p1:
                self._uniform.append((p0, p1, int(value)))
        self._filled = np.ones(pages, dtype=bool)
        # per page: the read-ahead a fill starting there earns (0: none; set at the end of each
        # fill after a filled page, see READ_AHEAD_MAX)
        self._window = np.zeros(pages, dtype=np.uint8)
        for info, _src in self._lazy:
            self._filled[info.start >> PAGE_SHIFT : _page_end(info.start + info.size)] = False
        self.pages_made = 0  # 4 KiB pages of lazy buffers filled so far
        # pages [k0, k1] an access found all filled (a page once filled stays so: a check of
        # the same pages again, a warp's next access to its rows, is two comparisons)
        self._known = (1, 0)
        self.views = heap_views(self.heap)
        self.buffers = infos
        self.by_name = {b.name: b for b in infos}
        self.sizes = np.array([b.size for b in infos] + [0], dtype=np.int64)
        self.starts = np.array([b.start for b in infos] + [0], dtype=np.int64)
        # virtual minus heap, as 0-d arrays: the subtraction below runs for every access
        self._deltas = [operand_constant(b.base - b.start) for b in infos]

    def _touch(self, offs: np.ndarray, width: int) -> None:
        """Fill the pages of lazy buffers that accesses of ``width`` bytes at heap offsets
        ``offs`` reach, and that are not filled yet."""
        first = offs >> PAGE_SHIFT
        filled = self._filled[first]
        one_page = width == 1 or (
            width <= (1 << PAGE_SHIFT)
            and width & (width - 1) == 0
            and int(np.bitwise_or.reduce(offs)) & (width - 1) == 0
        )
        if one_page:  # aligned accesses of a power of two up to a page: the last byte's page too
            if filled.all():
                return
            pages = first[~filled]
        else:
            last = (offs + (width - 1)) >> PAGE_SHIFT
            need_last = ~self._filled[last]
            if filled.all() and not need_last.any():
                return
            pages = np.concatenate([first[~filled], last[need_last]])
        self._fill_pages(_distinct(pages))

    def _fill_pages(self, pages: np.ndarray) -> None:
        """Fill ``pages`` (sorted, unique, none filled yet) from the lazy buffers' sources: runs
        of consecutive pages with one call per lazy buffer a run overlaps."""
        if len(pages) == 1:
            p = int(pages[0])
            self._fill_run(p, self._ahead(p, p + 1))
            return
        for p0, p1, value in self._uniform:
            # a uniform buffer's pages (the transpose's scattered stores into its poisoned
            # output: 9,700 runs of a page or two) in one assignment
            inside = (pages >= p0) & (pages < p1)
            if inside.any():
                sel = pages[inside]
                self._page_rows[sel] = value
                self._filled[sel] = True
                self.pages_made += len(sel)
                pages = pages[~inside]
                if not len(pages):
                    return
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        firsts = pages[np.concatenate([[0], breaks])].tolist()
        lasts = pages[np.concatenate([breaks - 1, [len(pages) - 1]])].tolist()
        runs = []
        for lo, last in zip(firsts, lasts, strict=True):
            hi = self._ahead(lo, last + 1)
            self.pages_made += hi - lo
            self._filled[lo:hi] = True
            runs.append((lo, hi))
        self._fill_runs(runs)

    def _ahead(self, lo: int, hi: int) -> int:
        """``hi``, or past it when a run ``[lo, hi)`` continues a walk forward (see
        :data:`READ_AHEAD_MAX`): up to the window the fill that ended at ``lo`` left there, never
        over a filled page (it may hold what the kernel wrote)."""
        filled = self._filled
        if lo == 0 or not filled[lo - 1]:
            return hi
        w = int(self._window[lo])
        n = len(filled)
        if w:
            end = min(hi + w, n)
            done = np.flatnonzero(filled[hi:end])
            if len(done):  # cut at a filled page: the walk starts again past it
                return hi + int(done[0])
            nxt = min(2 * w, READ_AHEAD_MAX)
        else:
            end, nxt = hi, 1
        if end < n:
            self._window[end] = nxt
        return end

    def _fill_run(self, page_lo: int, page_hi: int) -> None:
        lo, hi = page_lo << PAGE_SHIFT, min(page_hi << PAGE_SHIFT, len(self.heap))
        for info, src in self._lazy:
            a, b = max(lo, info.start), min(hi, info.start + info.size)
            if a < b:
                self.heap[a:b] = src.bytes_at(a - info.start, b - info.start)
        self.pages_made += page_hi - page_lo
        self._filled[page_lo:page_hi] = True

    def _fill_runs(self, runs: list[tuple[int, int]]) -> None:
        """The bytes of page runs ``[lo, hi)`` (in the order :meth:`_fill_pages` found them, their
        pages already marked filled) from the lazy buffers, :data:`FILL_BATCH_PAGES` pages at a
        time (a longer run alone)."""
        group: list[tuple[int, int]] = []
        pages = 0
        for lo, hi in runs:
            if group and pages + (hi - lo) > FILL_BATCH_PAGES:
                self._fill_group(group)
                group, pages = [], 0
            group.append((lo, hi))
            pages += hi - lo
        if group:
            self._fill_group(group)

    def _fill_group(self, runs: list[tuple[int, int]]) -> None:
        """:meth:`_fill_runs` of a few runs: one call per lazy buffer for all of them that
        overlap it (``bytes_runs``, where the source has it)."""
        bounds = np.array(runs, dtype=np.int64).reshape(-1, 2) << PAGE_SHIFT
        bounds[:, 1] = np.minimum(bounds[:, 1], len(self.heap))
        for info, src in self._lazy:
            a = np.maximum(bounds[:, 0], info.start)
            b = np.minimum(bounds[:, 1], info.start + info.size)
            inside = a < b
            if not inside.any():
                continue
            a, b = a[inside], b[inside]
            many = getattr(src, "bytes_runs", None)
            if many is None or len(a) < 2:
                for x, y in zip(a.tolist(), b.tolist(), strict=True):
                    self.heap[x:y] = src.bytes_at(x - info.start, y - info.start)
                continue
            data = many(a - info.start, b - info.start)
            at = 0
            for x, y in zip(a.tolist(), b.tolist(), strict=True):
                self.heap[x:y] = data[at : at + y - x]
                at += y - x

    def address_of(self, name: str) -> int:
        return self.by_name[name].base

    def read(self, name: str) -> np.ndarray:
        """The bytes of buffer ``name`` now (a copy; a lazy buffer's pages no access reached hold
        their start data)."""
        b = self.by_name[name]
        if b.size and self._lazy:
            p0, p1 = b.start >> PAGE_SHIFT, _page_end(b.start + b.size)
            missing = np.flatnonzero(~self._filled[p0:p1]) + p0
            if len(missing):
                self._fill_pages(missing)
        return self.heap[b.start : b.start + b.size].copy()

    def is_lazy(self, name: str) -> bool:
        """Whether buffer ``name`` is filled from a :class:`ByteSource` page by page."""
        b = self.by_name[name]
        return any(info is b for info, _ in self._lazy)

    def reached_runs(self, name: str) -> list[tuple[int, int]]:
        """Byte ranges ``[lo, hi)`` of buffer ``name`` (offsets in it, ascending) that an access
        may have changed: the whole buffer when it is not lazy, else its filled pages. A lazy
        page no access reached was never filled, so never written: it holds its start data."""
        b = self.by_name[name]
        if not b.size:
            return []
        if not self.is_lazy(name):
            return [(0, b.size)]
        p0, p1 = b.start >> PAGE_SHIFT, _page_end(b.start + b.size)
        filled = np.flatnonzero(self._filled[p0:p1]) + p0
        if not len(filled):
            return []
        breaks = np.flatnonzero(np.diff(filled) != 1) + 1
        runs = []
        for run in np.split(filled, breaks):
            lo = max(int(run[0]) << PAGE_SHIFT, b.start) - b.start
            hi = min((int(run[-1]) + 1) << PAGE_SHIFT, b.start + b.size) - b.start
            runs.append((lo, hi))
        return runs

    def read_range(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Bytes ``[lo, hi)`` of buffer ``name`` now (a copy, as :meth:`read` gives the whole
        buffer: the pages of the range no access reached filled with their start data)."""
        b = self.by_name[name]
        a, z = b.start + lo, b.start + hi
        if z > a and self._lazy:
            p0, p1 = a >> PAGE_SHIFT, _page_end(z)
            missing = np.flatnonzero(~self._filled[p0:p1]) + p0
            if len(missing):
                self._fill_pages(missing)
        return self.heap[a:z].copy()

    def translate(self, addr: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Heap byte offsets of ``addr`` (int64 virtual addresses) for accesses of ``width`` bytes.

        Returns (offsets, None) when every access lies inside a buffer, else (offsets, bad) with
        ``bad`` marking the accesses outside every buffer (their offsets are 0). Alignment is
        checked by the caller.
        """
        if addr.size == 0:
            return np.zeros(0, np.int64), None
        offs = self.in_one_buffer(addr, int(addr.min()), int(addr.max()), width)
        if offs is not None:
            return offs, None
        nbuf = len(self.buffers)
        rel = addr - np.int64(GLOBAL_BASE)
        bi = rel >> GLOBAL_STRIDE_BITS
        valid = (rel >= 0) & (bi < nbuf)
        bi = np.where(valid, bi, nbuf)
        off = rel & ((1 << GLOBAL_STRIDE_BITS) - 1)
        inside = valid & (off + width <= self.sizes[bi])
        heap_off = np.where(inside, self.starts[bi] + off, 0)
        if self._lazy:
            self._touch(heap_off, width)
        return heap_off, (None if bool(inside.all()) else ~inside)

    def in_one_buffer(
        self, addr: np.ndarray, lo: int, hi: int, width: int, aligned: bool = False
    ) -> np.ndarray | None:
        """Heap byte offsets of ``addr`` (``lo``/``hi`` its least and greatest) for accesses of
        ``width`` bytes, their lazy pages filled, when every access lies inside one buffer; None
        when some does not (:meth:`translate` then finds which). ``aligned``: the caller checked
        that every address is a multiple of ``width``."""
        i = (lo - GLOBAL_BASE) >> GLOBAL_STRIDE_BITS
        if lo < GLOBAL_BASE or i >= len(self.buffers):
            return None
        b = self.buffers[i]
        if hi + width > b.base + b.size:
            return None
        offs = np.subtract(addr, self._deltas[i])
        if self._lazy:
            if aligned and width & (width - 1) == 0 and width <= (1 << PAGE_SHIFT):
                # aligned accesses of a power of two up to a page stay in the page of their
                # first byte: what _touch does, its alignment check known; nothing to fill when
                # every page from the least address's to the greatest's is (a slice, read
                # instead of a gather when it is not much longer than the accesses)
                delta = int(self._deltas[i])
                p0, p1 = (lo - delta) >> PAGE_SHIFT, (hi - delta) >> PAGE_SHIFT
                k0, k1 = self._known
                if k0 <= p0 and p1 <= k1:  # inside pages seen filled (they stay so)
                    return offs
                if p1 - p0 < 4 * addr.size and _every(self._filled[p0 : p1 + 1]):
                    # joined to the range known when they meet (both filled), else instead
                    self._known = (
                        (min(p0, k0), max(p1, k1)) if p0 <= k1 + 1 and p1 + 1 >= k0 else (p0, p1)
                    )
                    return offs
                first = offs >> PAGE_SHIFT
                filled = self._filled[first]
                if not _every(filled):
                    self._fill_pages(_distinct(first[~filled]))
            else:
                self._touch(offs, width)
        return offs

    def known_window(self, lo: int, width: int) -> tuple[int, int, np.ndarray] | None:
        """For an access site of ``width`` bytes (a power of two up to a page, aligned, as
        :meth:`in_one_buffer`'s ``aligned`` fast path takes them) whose least address ``lo``
        :meth:`in_one_buffer` just found inside a buffer: (``lo_ok``, ``hi_end``, the buffer's
        virtual-minus-heap 0-d array) such that any aligned accesses of that width whose least
        address is at least ``lo_ok`` and whose greatest is under ``hi_end`` lie in that buffer,
        their pages filled (a page once filled stays so), and their heap offsets are the
        addresses minus the array: what :meth:`in_one_buffer` returns for them, without its
        steps. None where no such range is known (the access's pages not all in the range seen
        filled, or a width of another kind)."""
        if not (width & (width - 1) == 0 and width <= (1 << PAGE_SHIFT)):
            return None
        i = (lo - GLOBAL_BASE) >> GLOBAL_STRIDE_BITS
        if lo < GLOBAL_BASE or i >= len(self.buffers):
            return None
        b = self.buffers[i]
        lo_ok, hi_end = b.base, b.base + b.size - width + 1
        if self._lazy:
            delta = b.base - b.start
            k0, k1 = self._known
            if k0 > k1:
                return None
            lo_ok = max(lo_ok, (k0 << PAGE_SHIFT) + delta)
            hi_end = min(hi_end, ((k1 + 1) << PAGE_SHIFT) + delta)
        if lo_ok >= hi_end:
            return None
        return lo_ok, hi_end, self._deltas[i]

    def describe(self, address: int, width: int) -> tuple[str | None, int | None, str]:
        """(buffer name, offset in it, a phrase) for an address no buffer holds."""
        if 0 < GLOBAL_BASE - address <= 1 << (GLOBAL_STRIDE_BITS - 1) and self.buffers:
            before = GLOBAL_BASE - address
            b0 = self.buffers[0]
            return b0.name, -before, f"{before} bytes before the start of buffer {b0.name!r}"
        if address < GLOBAL_BASE or (address >> 44) != 7:
            if address == 0:
                return None, None, "a null pointer"
            window = {1: "shared", 2: "local", 3: "constant", 4: "parameter"}.get(address >> 44)
            if window:
                return None, None, f"a generic {window}-memory address used as a global one"
            return None, None, "an address in no buffer"
        i = (address - GLOBAL_BASE) >> GLOBAL_STRIDE_BITS
        off = (address - GLOBAL_BASE) & ((1 << GLOBAL_STRIDE_BITS) - 1)
        if off >= 1 << (GLOBAL_STRIDE_BITS - 1) and i + 1 < len(self.buffers):
            b = self.buffers[i + 1]
            before = (1 << GLOBAL_STRIDE_BITS) - off
            return b.name, -before, f"{before} bytes before the start of buffer {b.name!r}"
        if i >= len(self.buffers):
            return None, None, "an address in no buffer"
        b = self.buffers[i]
        return (
            b.name,
            off,
            (f"at byte offset {off} of buffer {b.name!r}, which holds {b.size} bytes"),
        )


def _distinct(pages: np.ndarray) -> np.ndarray:
    """``pages`` sorted, each once: by one sort, since np.unique (a hash table in numpy 2.3+)
    costs ~0.7 ms even on a few hundred values, and this runs for most loads of a CTA that
    streams."""
    if len(pages) < 2:
        return pages
    pages = np.sort(pages)
    keep = np.empty(len(pages), bool)  # (np.r_ costs ~10 us a call)
    keep[0] = True
    np.not_equal(pages[1:], pages[:-1], out=keep[1:])
    return pages[keep]


def _page_end(byte_end: int) -> int:
    return (byte_end + (1 << PAGE_SHIFT) - 1) >> PAGE_SHIFT


def _bytes_of(data: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(data)
    return arr.reshape(-1).view(np.uint8)
