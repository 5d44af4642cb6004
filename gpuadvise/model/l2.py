"""L2 model: hit rate and DRAM traffic of a launch under a CTA launch order, and which order is best.

Seed 002 (thread-group ID tiling) gained 47% on an RTX 2080 with 4 MB of L2; on an H100 with 50 MB the
same remap is 2.5% slower when the working set fits anyway and up to 16% faster when it does not
(HARDWARE.md section 4). This model tells which case a kernel is in before anything is measured: it
replays the global-memory footprint of every CTA in a given launch order and predicts, per order, the
working set of the CTAs in flight, whether it fits, the L2 sector hit rate and the DRAM bytes.

Orders: ``"row-major"`` (the hardware's: blockIdx.x fastest), ``("tile-x", N)`` / ``("tile-y", N)``
(seed 002's remap, partial last tile included: :func:`tiled_order`), ``"column-major"``, or any
permutation a rule proposes (an array: launch position -> CTA (x, y), or -> linear CTA id).

The model (its assumptions are also in :data:`ASSUMPTIONS`, which the result carries):

- CTAs start in launch order and retire roughly in order; ``C = blocks_per_sm * sm_count`` run at once.
- L1 absorbs the repeats of one CTA: each CTA sends one L2 request per distinct 32-byte sector it
  touches. There is no L1 reuse across CTAs.
- L2: one fully associative LRU cache of ``efficiency * l2_bytes`` bytes, filled in ``fetch_bytes``
  granules (64 bytes, a sector pair, on the GPUs with two partitions below, else 32-byte sectors).
  A CTA's access to a granule hits when the distinct bytes touched by the CTAs launched from the
  granule's previous toucher up to this CTA fit in that capacity: an LRU stack distance measured at
  CTA granularity (a sliding window, not discrete waves). The first touch of a granule misses, and
  so does the first touch after the window stops fitting: each miss starts a *residency* of the
  granule, which lasts until the next miss.
- Two partitions (A100, H100, H200, B200: compute capabilities 8.0, 9.0, 10.x). The L2 is split in
  two; every granule has a home partition (the one by its memory controller, by address), and
  each SM is wired to one partition: half of the SMs to each. A request from an SM on the home side
  is looked up at home; one from the other side is looked up in the SM's near partition, which
  keeps copies of the far granules its SMs read, and when that misses it is forwarded over the
  L2 fabric and looked up again at home (``fetch_bytes / 32`` sectors, a granule). So data read
  from both sides is held twice (the default efficiency is 0.5 there; 0.85 on GPUs with one L2:
  set associativity, address hashing and a replacement policy that is not exactly LRU), and
  Nsight Compute's ``lts__t_sector_hit_rate`` counts more lookups and more misses than one cache
  would, DRAM traffic unchanged: per residency of ``k`` CTAs, whose missing CTA requests ``a``
  sectors of a granule of ``g``, with each CTA on either side with probability 1/2 (CTAs go to
  SMs regardless of their tile), the expected extra misses are ``g/2 + a/2 (1 - 2**(1 - k))``
  (the first toucher is on the far side: it misses near and at home; else the first far-side
  toucher misses its near copy, about ``a`` sectors) and the extra lookups, the forwarded
  sectors (``lts__t_sectors_srcunit_ltcfabric``), ``g (1 - 2**-k)``. Both partitions are
  assumed to keep a granule for the same residencies (each sees the same mix of requests). A store
  from the far side is looked up in both partitions: stores count 1.5 lookups, all hits. The
  near and home partition lookups of a residency share its LRU decision; no other parameter is
  added. Validated on an H100 (``benchmarks/l2_gather``, docs/validation.md): the one-cache model
  overestimated the hit rate by up to 13 points where the working set does not fit (DRAM bytes
  right); with the partitions, 70 of 70 launches within 5 points (mean 0.6) and the predicted
  forwarded sectors within 25% of the measured ones. The 64-byte fill was chosen on those data:
  with 8x8 blocks, whose warps request one sector of a granule, Nsight counts about half the misses
  per DRAM sector of 16x16 blocks, whose warps request both (a pair-sized fill makes the request
  for the other sector of a pair hit); with 32-byte fills one launch (4K, 8x8, R=1024) was 8
  points off. ``partitions=1`` gives the one-cache model.
- Stores allocate without reading DRAM and every stored sector counts as an L2 hit (as Nsight
  Compute's ``lts__t_sector_hit_rate`` counts them); stored data takes cache space; DRAM writes are
  the distinct stored sectors, each written back once (an upper bound on what a kernel writes back
  before it ends). Atomics and reductions are read requests (they can miss) that dirty the sector.
- The L2 is cold at kernel start (Nsight Compute flushes it before each replay).
- Not modelled: L1 reuse between CTAs that share an SM (Nsight counts 5-30% fewer L2 requests than
  the model on the validation gathers, so the measured hit rate is lower by up to 4 points where
  many requests miss), requests that wait for a fill already under way (counted as hits), and a
  near copy evicted before the home one.

``hit_rate`` counts loads and stores (comparable to ``lts__t_sector_hit_rate.pct`` / 100, the
forwarded lookups of two partitions included); ``read_hit_rate`` loads only
(``lts__t_sector_op_read_hit_rate``). ``dram_bytes`` is DRAM reads (``dram__bytes_read.sum``):
missed granules times ``fetch_bytes``. ``fabric_sectors``: the sectors forwarded between the two
partitions (``lts__t_sectors_srcunit_ltcfabric``).

Untraced CTAs. A trace usually covers some CTAs (sampled waves). For a 2D grid whose CTAs touch
translated copies of one footprint (image kernels), the model infers the per-CTA translation of
every buffer (byte steps per CTA in x and y: the most common difference between corresponding lane
addresses of neighbouring traced CTAs), the row pitch (the y step over ``block.y`` rows), a
footprint template relative to the CTA origin (taken from a traced CTA whose accesses stay clear
of the buffer's edges, so not clamped; one template per phase when a CTA step is not a whole number
of granules), checks that the traced CTAs whose translated template stays inside the buffer touch
exactly the template (all of them, or runs of consecutive CTAs spread over a large trace), and
synthesizes every CTA of the grid. Accesses of edge CTAs that fall outside the buffer are clamped
to its edge, or dropped: whichever reproduces the traced edge CTAs better (a note says how well
when it is not exact). A buffer read identically by every CTA (a filter, a table) is synthesized
as such. When any of this fails (no constant step, a CTA that is not a translate of its
neighbours, no traced CTA clear of the edges: a first-wave trace of a kernel whose footprint
reaches further than the first CTA rows) the model falls back to the traced CTAs only (their
footprints replayed at their launch positions, windows scaled by the sampled fraction, DRAM bytes
extrapolated) and says why in ``notes``. A complete trace is replayed as it is.

Speed. Granules touched by exactly the same set of CTAs (by translation symmetry, all granules of
one residue class modulo the CTA steps with the same pattern of touchers) are merged into units:
an image kernel's footprint then has one unit per neighbouring CTA tile it reads, not one per
sector. Units on the edge that receive clamped accesses are split by which CTAs land on which of
their granules, so edge CTAs touch exactly what they read. Per order, each unit's touchers are
sorted by launch position (a row sort of a fixed-width matrix, no global sort), the previous
toucher gives each touch its reuse gap, and the distinct bytes of every window ``[p - k, p)`` come
from difference arrays over the gaps longer than ``k``, for a geometric grid of ``k`` starting
where a window surely fits (linear interpolation in between). On the traces of
``tests/test_l2.py`` this agrees with an exact LRU replay of the same footprints to within a
fraction of a point of hit rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import UsageError
from gpuadvise.model.banks import active_lanes
from gpuadvise.model.coalescing import SECTOR_BYTES, touched_lines
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = [
    "ASSUMPTIONS",
    "DEFAULT_ORDERS",
    "L2OrderResult",
    "L2Result",
    "OrderSpec",
    "default_efficiency",
    "default_fetch_bytes",
    "default_partitions",
    "l2_model",
    "order_permutation",
    "tiled_block_index_cuda",
    "tiled_order",
]

ASSUMPTIONS = (
    "CTAs start in launch order (blockIdx.x fastest) and retire roughly in order, "
    "blocks_per_sm * sm_count at a time; "
    "L1 absorbs a CTA's repeated accesses (one L2 request per distinct 32-byte sector per CTA), "
    "no L1 reuse across CTAs; "
    "L2 = one fully associative LRU of efficiency * l2_bytes, filled in fetch_bytes granules: an "
    "access hits when the distinct bytes touched by the CTAs launched since the granule's previous "
    "toucher fit (CTA-granularity LRU stack distance over a sliding window); "
    "partitioned L2 (A100, H100, H200, B200): each granule has a home partition, SMs (half on "
    "each side, CTAs placed at random) look up their near partition, which keeps copies of far "
    "granules; a near miss is forwarded and looked up at home: data read from both halves is held "
    "twice (default efficiency 0.5, 64-byte fills) and the hit rate counts the forwarded lookups "
    "and near misses (expected per residency of a granule); one L2 elsewhere: efficiency 0.85, "
    "32-byte fills (calibrate with benchmarks/l2_gather); "
    "stores allocate without a DRAM read and count as hits (1.5 lookups each with two partitions), "
    "take cache space, and are written back once (DRAM writes = distinct stored sectors); atomics "
    "are reads that dirty the sector; "
    "cold L2 at kernel start; global memory only."
)

# Compute capabilities whose L2 is split into two partitions that each cache for their own SMs.
_PARTITIONED_CCS = {(8, 0), (9, 0), (10, 0), (10, 3)}
PARTITIONED_EFFICIENCY = 0.5
UNIFIED_EFFICIENCY = 0.85
PARTITIONED_FETCH_BYTES = 64

# A launch order: "row-major" | "column-major" | ("tile-x" | "tile-y", N) | an array | (name, array)
OrderSpec = str | tuple[str, Any] | np.ndarray

DEFAULT_ORDERS: tuple[OrderSpec, ...] = (
    "row-major",
    ("tile-x", 4),
    ("tile-x", 8),
    ("tile-x", 16),
    ("tile-x", 32),
)

_NLOAD, _NSTORE, _NDIRTY, _NLGRAN = range(4)  # rows of the per-touch count arrays
_BEST_TOLERANCE = 0.01  # an order within 1% of the lowest DRAM reads counts as tied
_GRID_RATIO = 1.25  # geometric grid of window lengths
_MAX_PAIRS = 48  # neighbouring traced CTA pairs used to infer the per-CTA steps
_MAX_EDGE_CHECKS = 96  # traced edge CTAs compared against the clamp / drop synthesis
_SUBSET_RUNS, _SUBSET_RUN, _SUBSET_EDGE = 16, 32, 64  # traced CTAs the synthesis reads
_SUBSET_CENTRE = 128  # and the traced CTAs farthest from the grid's border
_MIN_EDGE_MATCH = 0.5  # traced edge CTAs' granules the clamp or drop synthesis must reproduce
# the most (unit, CTA) touches a synthesis may build: about 45 bytes each at the peak (an 8K frame
# of 8x8 blocks with 81 reuses per sector: 50 M touches, 2.3 GB)
_MAX_SYNTH_TOUCHES = 64_000_000


# --------------------------------------------------------------------------------------------
# Launch orders


def tiled_order(grid_x: int, grid_y: int, n: int, axis: str = "x") -> np.ndarray:
    """Seed 002's thread-group tiling: ``(P, 2)`` int64, launch position -> remapped CTA ``(x, y)``.

    ``axis="x"``: the grid is cut into tiles of ``n`` CTAs by ``grid_y`` (the last one ``grid_x % n``
    wide); tiles are launched left to right and each tile row-major. This is the corrected HLSL
    snippet of the seed (L. Bavoil, A. Ukarande): launch position ``L = y * grid_x + x``, tile
    ``L // (n * grid_y)``, local index ``L % (n * grid_y)`` split by the tile width (``n``, or
    ``grid_x % n`` in the last, partial tile). ``axis="y"`` is the transposed scheme: tiles of
    ``grid_x`` by ``n`` rows launched top to bottom, each column-major (``n`` CTAs down, then the
    next column). ``n >= grid_x`` (x) and ``n == 1`` (y) give row-major; ``n == 1`` (x) gives
    column-major.
    """
    if n < 1:
        raise ValueError("the tile size must be at least 1")
    if grid_x < 1 or grid_y < 1:
        raise ValueError("the grid must have at least one CTA in x and y")
    if axis not in ("x", "y"):
        raise ValueError("axis must be 'x' or 'y'")
    gx, gy = int(grid_x), int(grid_y)
    flat = np.arange(gx * gy, dtype=np.int64)
    if axis == "x":
        per_tile = n * gy
        full = (gx // n) * per_tile
        width = np.where(flat >= full, gx % n, n)  # gx % n > 0 wherever flat >= full
        tile, local = flat // per_tile, flat % per_tile
        x = tile * n + local % width
        y = local // width
    else:
        per_tile = n * gx
        full = (gy // n) * per_tile
        height = np.where(flat >= full, gy % n, n)
        tile, local = flat // per_tile, flat % per_tile
        x = local // height
        y = tile * n + local % height
    return np.stack([x, y], axis=1)


def tiled_block_index_cuda(
    n: int, axis: str = "x", name: str = "gpuadvise_tiled_block_index"
) -> str:
    """CUDA C source of a device function returning the remapped ``(x, y)`` block index (uint2).

    The automatic transform of seed 002: define this function and use its result wherever the
    kernel used ``blockIdx.x`` / ``blockIdx.y``; it computes exactly :func:`tiled_order`'s remap
    of the CTA at launch position ``blockIdx.y * gridDim.x + blockIdx.x`` (2D grids; z untouched).
    """
    if n < 1:
        raise ValueError("the tile size must be at least 1")
    if axis == "x":
        body = (
            f"    const unsigned int n = {n}u;\n"
            "    const unsigned int gx = gridDim.x, gy = gridDim.y;\n"
            "    const unsigned int flat = blockIdx.y * gx + blockIdx.x;\n"
            "    const unsigned int per_tile = n * gy;\n"
            "    const unsigned int tile = flat / per_tile;\n"
            "    const unsigned int local = flat % per_tile;\n"
            "    // the last tile is gx % n wide when n does not divide gx\n"
            "    const unsigned int w = flat >= (gx / n) * per_tile ? gx % n : n;\n"
            "    return make_uint2(tile * n + local % w, local / w);\n"
        )
    elif axis == "y":
        body = (
            f"    const unsigned int n = {n}u;\n"
            "    const unsigned int gx = gridDim.x, gy = gridDim.y;\n"
            "    const unsigned int flat = blockIdx.y * gx + blockIdx.x;\n"
            "    const unsigned int per_tile = n * gx;\n"
            "    const unsigned int tile = flat / per_tile;\n"
            "    const unsigned int local = flat % per_tile;\n"
            "    // the last tile is gy % n high when n does not divide gy\n"
            "    const unsigned int h = flat >= (gy / n) * per_tile ? gy % n : n;\n"
            "    return make_uint2(local / h, tile * n + local % h);\n"
        )
    else:
        raise ValueError("axis must be 'x' or 'y'")
    return (
        f"// Thread-group tiling along {axis.upper()}, N = {n} (gpuadvise; seed 002, NVIDIA)\n"
        f"__device__ __forceinline__ uint2 {name}()\n{{\n{body}}}\n"
    )


def _perm_from_array(arr: Any, gx: int, gy: int) -> np.ndarray:
    a = np.asarray(arr)
    total = gx * gy
    if a.ndim == 2 and a.shape[1] == 2:
        x, y = a[:, 0].astype(np.int64), a[:, 1].astype(np.int64)
        if (x < 0).any() or (x >= gx).any() or (y < 0).any() or (y >= gy).any():
            raise UsageError("a launch order names a CTA outside the grid")
        lin = x + y * gx
    elif a.ndim == 1:
        lin = a.astype(np.int64)
    else:
        raise UsageError("a launch order is an array of CTA (x, y) pairs or of linear CTA ids")
    if len(lin) != total or (lin < 0).any() or (lin >= total).any():
        raise UsageError(f"a launch order must list each of the {total} CTAs once")
    seen = np.zeros(total, dtype=bool)
    seen[lin] = True
    if not seen.all():
        raise UsageError(f"a launch order must list each of the {total} CTAs once")
    return lin


def order_permutation(
    spec: OrderSpec, grid_x: int, grid_y: int
) -> tuple[str, int | None, np.ndarray]:
    """(name, n, launch position -> linear CTA id) of an order on a ``grid_x`` by ``grid_y`` grid."""
    gx, gy = int(grid_x), int(grid_y)
    if isinstance(spec, str):
        if spec == "row-major":
            return "row-major", None, np.arange(gx * gy, dtype=np.int64)
        if spec == "column-major":
            xy = tiled_order(gx, gy, 1, "x")
            return "column-major", None, xy[:, 0] + xy[:, 1] * gx
        raise UsageError(
            f"unknown launch order {spec!r}",
            "use 'row-major', 'column-major', ('tile-x', N), ('tile-y', N) or an array",
        )
    if isinstance(spec, np.ndarray):
        return "custom", None, _perm_from_array(spec, gx, gy)
    if isinstance(spec, tuple) and len(spec) == 2:
        name, arg = spec
        if name in ("tile-x", "tile-y"):
            n = int(arg)
            if n < 1:
                raise UsageError(f"tile size {arg} must be at least 1")
            xy = tiled_order(gx, gy, n, name[-1])
            return str(name), n, xy[:, 0] + xy[:, 1] * gx
        return str(name), None, _perm_from_array(arg, gx, gy)
    raise UsageError(f"cannot read launch order {spec!r}")


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class L2OrderResult:
    """The L2 under one launch order.

    ``working_set_bytes``: distinct bytes touched by ``C`` consecutively launched CTAs (the ones in
    flight together), averaged over the launch once ``C`` CTAs have started; ``fits``: it is at
    most the effective capacity. ``hit_rate``: L2 sector hits / lookups, loads and stores (stores
    count as hits), in [0, 1], as Nsight Compute's ``lts__t_sector_hit_rate`` counts them (with
    two partitions, the lookups of requests forwarded to the far partition included);
    ``read_hit_rate``: loads only (``lts__t_sector_op_read_hit_rate``). ``dram_bytes``: DRAM reads;
    ``dram_write_bytes``: write-backs (order-independent). ``sectors``: L2 sector requests from
    the SMs. ``fabric_sectors``: sectors forwarded between the two partitions
    (``lts__t_sectors_srcunit_ltcfabric``; 0 with one L2).
    """

    order: str
    n: int | None
    working_set_bytes: float
    fits: bool
    hit_rate: float
    read_hit_rate: float
    dram_bytes: float
    dram_write_bytes: float
    sectors: float
    fabric_sectors: float = 0.0

    @property
    def label(self) -> str:
        return self.order if self.n is None else f"{self.order}:{self.n}"

    def to_json(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "n": self.n,
            "hit_rate": self.hit_rate,
            "dram_bytes": self.dram_bytes,
            "read_hit_rate": self.read_hit_rate,
            "dram_write_bytes": self.dram_write_bytes,
            "working_set_bytes": self.working_set_bytes,
            "fits": self.fits,
            "sectors": self.sectors,
            "fabric_sectors": self.fabric_sectors,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> L2OrderResult:
        return cls(
            order=str(data["order"]),
            n=None if data.get("n") is None else int(data["n"]),
            working_set_bytes=float(data.get("working_set_bytes", 0.0)),
            fits=bool(data.get("fits", False)),
            hit_rate=float(data["hit_rate"]),
            read_hit_rate=float(data.get("read_hit_rate", data["hit_rate"])),
            dram_bytes=float(data["dram_bytes"]),
            dram_write_bytes=float(data.get("dram_write_bytes", 0.0)),
            sectors=float(data.get("sectors", 0.0)),
            fabric_sectors=float(data.get("fabric_sectors", 0.0)),
        )


@dataclass(frozen=True)
class L2Result:
    """The L2 model of one launch under several orders.

    ``best``: the first order (in the order given) whose DRAM reads are within 1% of the lowest.
    ``fits``: the whole launch's distinct footprint (``footprint_bytes``) fits the effective
    capacity (``capacity_bytes = efficiency * l2_bytes``): then no order can do better than the
    compulsory misses. ``mode``: ``complete`` (every CTA traced, replayed as is), ``synthesized``
    (untraced CTAs synthesized from the traced ones) or ``traced-only`` (the fallback; ``notes``
    says why). ``concurrent_ctas``: ``C``. ``partitions``: 2 when the hit rates count the two
    L2 partitions' lookups (A100/H100 class), else 1.
    """

    orders: tuple[L2OrderResult, ...]
    best: L2OrderResult
    fits: bool
    footprint_bytes: float
    capacity_bytes: float
    l2_bytes: int
    efficiency: float
    fetch_bytes: int
    concurrent_ctas: int
    mode: str
    notes: tuple[str, ...] = ()
    assumptions: str = ASSUMPTIONS
    partitions: int = 1

    def order(self, label: str) -> L2OrderResult:
        """The result of the order labelled ``label`` ("row-major", "tile-x:16")."""
        for o in self.orders:
            if o.label == label:
                return o
        raise KeyError(label)

    def to_json(self) -> dict[str, Any]:
        return {
            "orders": [o.to_json() for o in self.orders],
            "best": {"order": self.best.order, "n": self.best.n},
            "fits": self.fits,
            "footprint_bytes": self.footprint_bytes,
            "capacity_bytes": self.capacity_bytes,
            "l2_bytes": self.l2_bytes,
            "efficiency": self.efficiency,
            "fetch_bytes": self.fetch_bytes,
            "concurrent_ctas": self.concurrent_ctas,
            "mode": self.mode,
            "notes": list(self.notes),
            "assumptions": self.assumptions,
            "partitions": self.partitions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> L2Result:
        orders = tuple(L2OrderResult.from_json(o) for o in data["orders"])
        best_key = (data["best"]["order"], data["best"]["n"])
        best = next(o for o in orders if (o.order, o.n) == best_key)
        return cls(
            orders=orders,
            best=best,
            fits=bool(data["fits"]),
            footprint_bytes=float(data.get("footprint_bytes", 0.0)),
            capacity_bytes=float(data.get("capacity_bytes", 0.0)),
            l2_bytes=int(data.get("l2_bytes", 0)),
            efficiency=float(data.get("efficiency", 0.0)),
            fetch_bytes=int(data.get("fetch_bytes", SECTOR_BYTES)),
            concurrent_ctas=int(data.get("concurrent_ctas", 0)),
            mode=str(data.get("mode", "")),
            notes=tuple(data.get("notes", ())),
            assumptions=str(data.get("assumptions", ASSUMPTIONS)),
            partitions=int(data.get("partitions", 1)),
        )


def default_partitions(device: DeviceSpec) -> int:
    """2 on the GPUs whose L2 is split into two partitions (A100, H100, H200, B200), else 1."""
    return 2 if (device.cc_major, device.cc_minor) in _PARTITIONED_CCS else 1


def default_efficiency(device: DeviceSpec) -> float:
    """The share of the L2 the model assumes usable: 0.5 with two partitions, else 0.85."""
    if default_partitions(device) == 2:
        return PARTITIONED_EFFICIENCY
    return UNIFIED_EFFICIENCY


def default_fetch_bytes(device: DeviceSpec) -> int:
    """The granule a miss fills: 64 bytes (a sector pair) with two partitions, else 32."""
    return PARTITIONED_FETCH_BYTES if default_partitions(device) == 2 else SECTOR_BYTES


# --------------------------------------------------------------------------------------------
# Footprints: distinct (CTA, granule) pairs of the trace


@dataclass(frozen=True)
class _Touches:
    """Distinct (CTA, granule) pairs with per-pair counts (rows: _NLOAD, _NSTORE, _NDIRTY,
    _NLGRAN: load sectors, store sectors, dirtied sectors, 1 when the CTA reads the granule)."""

    cta: np.ndarray  # int64
    gran: np.ndarray  # int64, address // fetch_bytes
    cnt: np.ndarray  # (4, n) int64


def _segments(sorted_keys: np.ndarray) -> np.ndarray:
    """Start indices of the runs of equal values in a sorted array (empty for an empty array)."""
    if len(sorted_keys) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.empty(len(sorted_keys), dtype=bool)
    change[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=change[1:])
    return np.flatnonzero(change)


def _sort_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Permutation sorting by (a, b), both non-negative int64; one combined key when it fits."""
    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    amax, bmax = int(a.max()), int(b.max())
    if (amax + 1) * (bmax + 1) < 2**62:
        return np.argsort(a * (bmax + 1) + b, kind="stable")
    return np.lexsort((b, a))


def _extract(records: np.ndarray, fetch_bytes: int) -> _Touches:
    """Distinct (CTA, granule) pairs of ``records``, sorted by CTA then granule."""
    rec, sec_u = touched_lines(records, SECTOR_BYTES)
    if len(rec) == 0:
        z = np.zeros(0, dtype=np.int64)
        return _Touches(z, z.copy(), np.zeros((4, 0), dtype=np.int64))
    kind = records["kind"][rec]
    flag = np.where(kind == int(Kind.LOAD), 1, np.where(kind == int(Kind.STORE), 2, 1 | 4))
    cta = records["cta"][rec].astype(np.int64)
    sec = sec_u.astype(np.int64)
    s0 = int(sec.min())
    span = int(sec.max()) - s0 + 1
    c0 = int(cta.min())
    if (int(cta.max()) - c0 + 1) * span * 8 < 2**62:
        # one sort of (cta, sector, kind) packed into an int64
        key = ((cta - c0) * span + (sec - s0)) * 8 + flag
        key.sort()
        flag = (key & 7).astype(np.uint8)
        pair = key >> 3
        cta, sec = pair // span + c0, pair % span + s0
    else:
        order = np.lexsort((sec, cta))
        cta, sec, flag = cta[order], sec[order], flag[order].astype(np.uint8)
    key_change = np.empty(len(sec), dtype=bool)
    key_change[0] = True
    key_change[1:] = (cta[1:] != cta[:-1]) | (sec[1:] != sec[:-1])
    starts = np.flatnonzero(key_change)
    flags = np.bitwise_or.reduceat(flag, starts)
    cta, sec = cta[starts], sec[starts]
    spg = fetch_bytes // SECTOR_BYTES
    gran = sec // spg
    g_change = np.empty(len(gran), dtype=bool)
    g_change[0] = True
    g_change[1:] = (cta[1:] != cta[:-1]) | (gran[1:] != gran[:-1])
    gs = np.flatnonzero(g_change)
    nload = np.add.reduceat((flags & 1).astype(np.int64), gs)
    nstore = np.add.reduceat(((flags & 2) > 0).astype(np.int64), gs)
    ndirty = np.add.reduceat(((flags & 6) > 0).astype(np.int64), gs)
    cnt = np.stack([nload, nstore, ndirty, (nload > 0).astype(np.int64)])
    return _Touches(cta[gs], gran[gs], cnt)


# --------------------------------------------------------------------------------------------
# Touch sets the engine replays


@dataclass
class _Matrix:
    """Units touched by a fixed pattern of CTAs: row u lists the CTAs touching unit u (-1: none),
    column k is one relative toucher, whose counts for the whole unit are ``cnt[:, k]``."""

    touchers: np.ndarray  # (n_u, K) int32 CTA ids
    nvalid: np.ndarray  # (n_u,) int64, touchers >= 0 per row
    w_bytes: np.ndarray  # (n_u,) float64 capacity the unit takes
    scale: np.ndarray  # (n_u,) float64 share of the unit inside the buffer (counts scale)
    cnt: np.ndarray  # (4, K) float64
    gbytes: int  # the granule (bytes a miss fills)


@dataclass
class _List:
    """Units with explicit touch lists: touch i is (unit[i], cta[i], cnt[:, i]), pairs distinct."""

    unit: np.ndarray  # (n,) int64 in 0 .. len(w_bytes) - 1
    cta: np.ndarray  # (n,) int64
    cnt: np.ndarray  # (4, n) float64
    w_bytes: np.ndarray  # (n_u,) float64
    gbytes: int  # the granule (bytes a miss fills)


@dataclass
class _Model:
    mats: list[_Matrix] = field(default_factory=list)
    lists: list[_List] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Fallback(Exception):
    """The footprint cannot be synthesized for the untraced CTAs; the message says why."""


def _list_from_touches(t: _Touches, fetch_bytes: int) -> _List:
    units, inv = np.unique(t.gran, return_inverse=True)
    return _List(
        unit=inv.astype(np.int64).reshape(-1),
        cta=t.cta.copy(),
        cnt=t.cnt.astype(np.float64),
        w_bytes=np.full(len(units), float(fetch_bytes)),
        gbytes=fetch_bytes,
    )


# --------------------------------------------------------------------------------------------
# Synthesis of the untraced CTAs


def _buffer_table(trace: AccessTrace, touches: _Touches, fetch_bytes: int) -> list[tuple[int, int]]:
    """(base, size) of the buffers, sorted by base; addresses outside every buffer form one more
    pseudo-buffer spanning them (base aligned to the granule)."""
    bufs = sorted((int(b), int(s)) for b, s in trace.buffers.values() if s > 0)
    table = list(bufs)
    if len(touches.gran):
        addr = touches.gran * fetch_bytes
        idx = _buffer_of(addr, table)
        outside = addr[idx < 0]
        if len(outside):
            lo = int(outside.min()) // fetch_bytes * fetch_bytes
            hi = int(outside.max()) + fetch_bytes
            table.append((lo, hi - lo))
            table.sort()
    return table


def _buffer_of(addr: np.ndarray, table: Sequence[tuple[int, int]]) -> np.ndarray:
    if not table:
        return np.full(len(addr), -1, dtype=np.int64)
    bases = np.array([b for b, _ in table], dtype=np.int64)
    ends = np.array([b + s for b, s in table], dtype=np.int64)
    i = np.searchsorted(bases, addr, side="right") - 1
    ok = (i >= 0) & (addr < ends[np.clip(i, 0, None)])
    return np.where(ok, i, -1).astype(np.int64)


def _mode(values: np.ndarray) -> int | None:
    if len(values) == 0:
        return None
    u, c = np.unique(values, return_counts=True)
    return int(u[int(np.argmax(c))])


def _infer_steps(
    recs: np.ndarray, gx: int, gy: int, table: Sequence[tuple[int, int]]
) -> tuple[dict[int, int], dict[int, int]]:
    """Per buffer index: the byte step of a CTA move in x and in y (the most common difference of
    corresponding lane addresses of traced neighbours; corresponding = same warp, instruction and
    occurrence, in CTAs whose record sequences match)."""
    if len(recs) == 0:
        return {}, {}
    cta_all = recs["cta"].astype(np.int64)
    traced = set(np.unique(cta_all).tolist())

    def pairs(dx: int, dy: int) -> list[int]:
        cands = [
            c
            for c in sorted(traced)
            if c % gx + dx < gx and c // gx + dy < gy and c + dx + dy * gx in traced
        ]
        if len(cands) > _MAX_PAIRS:
            pick = np.linspace(0, len(cands) - 1, _MAX_PAIRS).round().astype(int)
            cands = [cands[i] for i in pick]
        return cands

    px = pairs(1, 0) if gx > 1 else []
    py = pairs(0, 1) if gy > 1 else []
    need = np.array(sorted({*px, *(c + 1 for c in px), *py, *(c + gx for c in py)}), dtype=np.int64)
    sub = recs[np.isin(cta_all, need)]
    n = len(sub)
    if n == 0:
        return {}, {}
    cta_sub = sub["cta"].astype(np.int64)
    order = np.lexsort((np.arange(n), sub["inst"], sub["warp"], cta_sub))
    cs = cta_sub[order]
    starts = _segments(cs)
    ends = np.r_[starts[1:], n]
    seg = dict(
        zip(cs[starts].tolist(), zip(starts.tolist(), ends.tolist(), strict=True), strict=True)
    )
    wi = (sub["warp"][order].astype(np.int64) << 32) | sub["inst"][order].astype(np.int64)
    addr = sub["addr"][order]
    mask = sub["mask"][order]

    def collect(cands: list[int], step: int) -> dict[int, int]:
        diffs: list[np.ndarray] = []
        bufs: list[np.ndarray] = []
        for c in cands:
            s0, e0 = seg[c]
            s1, e1 = seg[c + step]
            if e0 - s0 != e1 - s1 or not np.array_equal(wi[s0:e0], wi[s1:e1]):
                continue
            act = active_lanes(mask[s0:e0]) & active_lanes(mask[s1:e1])
            a0 = addr[s0:e0][act].astype(np.int64)
            a1 = addr[s1:e1][act].astype(np.int64)
            diffs.append(a1 - a0)
            bufs.append(_buffer_of(a0, table))
        if not diffs:
            return {}
        d = np.concatenate(diffs)
        b = np.concatenate(bufs)
        out: dict[int, int] = {}
        for bi in np.unique(b):
            m = _mode(d[b == bi])
            if m is not None and bi >= 0:
                out[int(bi)] = m
        return out

    return collect(px, 1), collect(py, gx)


@dataclass
class _Layout:
    ry: int  # rows per CTA step in y
    pg: int  # row pitch in granules
    m: int  # phases: CTAs per whole-granule step in x
    sx: int  # granules per super step (m CTAs) in x
    rows: tuple[int, int]  # in-buffer row bounds (inclusive)
    cols: tuple[int, int]  # in-buffer column bounds (inclusive), granules


def _residue_units(
    tr: np.ndarray, tc: np.ndarray, ph: np.ndarray, cnt: np.ndarray, lay: _Layout
) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], dict[int, tuple[int, int, int]]]:
    """Group the template granules of all phases into unit shapes.

    Returns per shape: its toucher offsets ``(K, 3)`` (cell dy, cell dx, phase), its residues
    ``(w, 4)`` (residue row, residue col, cell offset y, cell offset x of the residue's first
    toucher), its counts ``(4, K)``; and residue id -> (shape, cell offset y, cell offset x).
    """
    ry_, rx_ = tr % lay.ry, tc % lay.sx
    ky, kx = tr // lay.ry, tc // lay.sx
    rho = ry_ * lay.sx + rx_
    o = np.lexsort((ph, kx, ky, rho))
    rho_s, ky_s, kx_s, ph_s = rho[o], ky[o], kx[o], ph[o]
    cnt_s = cnt[:, o]
    starts = _segments(rho_s)
    ends = np.r_[starts[1:], len(rho_s)]
    shape_id: dict[bytes, int] = {}
    shapes: list[np.ndarray] = []
    residues: list[list[tuple[int, int, int, int]]] = []
    counts: list[np.ndarray] = []
    of_residue: dict[int, tuple[int, int, int]] = {}
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        k0y, k0x = int(ky_s[s]), int(kx_s[s])
        shp = np.stack([ky_s[s:e] - k0y, kx_s[s:e] - k0x, ph_s[s:e]], axis=1).astype(np.int64)
        key = shp.tobytes()
        sid = shape_id.get(key)
        if sid is None:
            sid = len(shapes)
            shape_id[key] = sid
            shapes.append(shp)
            residues.append([])
            counts.append(np.zeros((4, len(shp)), dtype=np.float64))
        r = int(rho_s[s])
        residues[sid].append((r // lay.sx, r % lay.sx, k0y, k0x))
        counts[sid] += cnt_s[:, s:e]
        of_residue[r] = (sid, k0y, k0x)
    return shapes, [np.array(r, dtype=np.int64) for r in residues], counts, of_residue


def _synthesize_buffer(
    base: int,
    size: int,
    touches_at: Callable[[int], _Touches],
    traced: np.ndarray,
    ax: int | None,
    ay: int | None,
    gx: int,
    gy: int,
    block_y: int,
    fetch_bytes: int,
    boundary: str,
    model: _Model,
    name: str,
) -> None:
    """Add the units of one buffer to ``model`` for every CTA of the grid; _Fallback otherwise."""
    ctas_all = gx * gy
    if (gx == 1 or ax == 0) and (gy == 1 or ay == 0):
        _shared_buffer(touches_at(fetch_bytes), traced, ctas_all, fetch_bytes, model, name)
        return
    if gx > 1 and (ax is None or ax <= 0):
        raise _Fallback(f"buffer {name}: no constant step between CTAs in x (not a translation)")
    if gy > 1 and (ay is None or ay <= 0):
        raise _Fallback(f"buffer {name}: no constant step between CTAs in y (not a translation)")
    # layouts to try: (rows per CTA step, granule); the row pitch must be a whole number of
    # granules, else the granule shrinks to what divides it (sectors at least)
    cands: list[tuple[int, int]] = []
    if gy > 1:
        assert ay is not None
        for ry in dict.fromkeys((block_y, 1, 2 * block_y, 4 * block_y)):
            if ry < 1 or ay % ry:
                continue
            pitch = ay // ry
            if pitch % SECTOR_BYTES:
                continue
            if gx > 1 and ax is not None and (gx - 1) * ax >= pitch:
                continue  # a row must hold a whole row of CTAs
            cands.append((ry, math.gcd(pitch, fetch_bytes)))
        if not cands:
            raise _Fallback(
                f"buffer {name}: the y step {ay} B is not a whole number of 32-byte rows"
            )
    else:
        cands.append((0, fetch_bytes))
    reason = ""
    for ry, g in cands:
        t = touches_at(g)
        q = t.gran - base // g
        nq = -(-size // g)
        if gy > 1:
            assert ay is not None
            pg = ay // ry // g
            nrows = -(-nq // pg)
            lay_ry = ry
        else:
            pg = max(nq, int(q.max(initial=0)) + 1)
            nrows = 1
            lay_ry = 1
        if gx > 1:
            assert ax is not None
            m = g // math.gcd(ax, g)
            sx = m * ax // g
        else:
            m, sx = 1, pg
        lay = _Layout(lay_ry, pg, m, sx, (0, nrows - 1), (0, pg - 1))
        try:
            _lattice_buffer(t, q, traced, lay, gx, gy, g, boundary, model, name)
        except _Fallback as exc:
            reason = str(exc)
            continue
        if g != fetch_bytes:
            model.notes.append(
                f"buffer {name}: its row pitch ({pg * g} B) is not a multiple of "
                f"{fetch_bytes} B; modelled with {g}-byte fills"
            )
        return
    raise _Fallback(reason)


def _shared_buffer(
    t: _Touches, traced: np.ndarray, ctas_all: int, g: int, model: _Model, name: str
) -> None:
    """A buffer every CTA touches identically: one unit touched by every CTA."""
    o = _sort_pairs(t.cta - t.cta.min(initial=0), t.gran - t.gran.min(initial=0))
    cta, gran, cnt = t.cta[o], t.gran[o], t.cnt[:, o]
    starts = _segments(cta)
    ends = np.r_[starts[1:], len(cta)]
    if len(starts) != len(traced):
        raise _Fallback(f"buffer {name}: some traced CTAs do not touch it although others do")
    ref_g, ref_c = gran[starts[0] : ends[0]], cnt[:, starts[0] : ends[0]]
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if not (np.array_equal(gran[s:e], ref_g) and np.array_equal(cnt[:, s:e], ref_c)):
            raise _Fallback(
                f"buffer {name}: the traced CTAs touch different data with no constant step"
            )
    tot = ref_c.sum(axis=1).astype(np.float64)
    model.lists.append(
        _List(
            unit=np.zeros(ctas_all, dtype=np.int64),
            cta=np.arange(ctas_all, dtype=np.int64),
            cnt=np.repeat(tot[:, None], ctas_all, axis=1),
            w_bytes=np.array([float(len(ref_g) * g)]),
            gbytes=g,
        )
    )


def _lattice_buffer(
    t: _Touches,
    q: np.ndarray,
    traced: np.ndarray,
    lay: _Layout,
    gx: int,
    gy: int,
    g: int,
    boundary: str,
    model: _Model,
    name: str,
) -> None:
    row, col = q // lay.pg, q % lay.pg
    bx, by = t.cta % gx, t.cta // gx
    rows_lo, rows_hi = lay.rows
    cols_lo, cols_hi = lay.cols
    tbx, tby = traced % gx, traced // gx
    # tighten the bounds to what the traced edge CTAs reach (a kernel clamps to the image, which
    # may be narrower than the pitch)
    if len(row):
        if (tbx == 0).any():
            cols_lo = int(col.min())
        if (tbx == gx - 1).any():
            cols_hi = int(col.max())
        if (tby == 0).any():
            rows_lo = int(row.min())
        if (tby == gy - 1).any():
            rows_hi = int(row.max())
    lay = _Layout(lay.ry, lay.pg, lay.m, lay.sx, (rows_lo, rows_hi), (cols_lo, cols_hi))
    oy = by * lay.ry
    ox = (bx // lay.m) * lay.sx
    tr, tc = row - oy, col - ox
    # per traced CTA: its granules as (tr, tc, counts) keys, sorted
    rmin, cmin = int(tr.min(initial=0)), int(tc.min(initial=0))
    width = int(tc.max(initial=0)) - cmin + 1
    pkey = (tr - rmin) * width + (tc - cmin)
    code = t.cnt[0] | (t.cnt[1] << 4) | (t.cnt[2] << 8) | (t.cnt[3] << 12)
    key = pkey * 65536 + code
    # entries come sorted by CTA then granule, which also sorts each CTA's keys (rows first)
    same = t.cta[1:] == t.cta[:-1]
    if (t.cta[1:] < t.cta[:-1]).any() or (same & (key[1:] <= key[:-1])).any():
        o = _sort_pairs(t.cta - t.cta.min(initial=0), key - key.min(initial=0))
    else:
        o = np.arange(len(key))
    c_s, k_s = t.cta[o], key[o]
    starts = _segments(c_s)
    ends = np.r_[starts[1:], len(c_s)]
    seg = dict(
        zip(c_s[starts].tolist(), zip(starts.tolist(), ends.tolist(), strict=True), strict=True)
    )
    row_s, col_s = row[o], col[o]

    def strictly_inside(s: int, e: int) -> bool:
        """Clear of the edges (so not clamped) along each grid dimension with several CTAs."""
        rows_ok = gy == 1 or (row_s[s:e].min() > lay.rows[0] and row_s[s:e].max() < lay.rows[1])
        cols_ok = gx == 1 or (col_s[s:e].min() > lay.cols[0] and col_s[s:e].max() < lay.cols[1])
        return bool(rows_ok and cols_ok)

    templates: dict[int, np.ndarray] = {}
    for phase in range(lay.m):
        best: tuple[int, int, int] | None = None
        for c in traced.tolist():
            if c % gx % lay.m != phase or c not in seg:
                continue
            s, e = seg[c]
            if not strictly_inside(s, e):
                continue
            x, y = c % gx, c // gx
            score = (e - s, min(x, gx - 1 - x, y, gy - 1 - y), -c)
            if best is None or score > best:
                best = score
        if best is None:
            raise _Fallback(
                f"buffer {name}: no traced CTA (of phase {phase} of {lay.m}) whose accesses stay "
                "clear of the buffer's edges; trace CTAs away from the image border"
            )
        ref = -best[2]
        s, e = seg[ref]
        templates[phase] = k_s[s:e]
    # the template of each phase, decoded
    t_tr, t_tc, t_ph, t_cnt = [], [], [], []
    for phase, keys in templates.items():
        pk, cd = keys // 65536, keys % 65536
        t_tr.append(pk // width + rmin)
        t_tc.append(pk % width + cmin)
        t_ph.append(np.full(len(keys), phase, dtype=np.int64))
        t_cnt.append(np.stack([cd & 15, (cd >> 4) & 15, (cd >> 8) & 15, (cd >> 12) & 15]))
    T_tr, T_tc, T_ph = np.concatenate(t_tr), np.concatenate(t_tc), np.concatenate(t_ph)
    T_cnt = np.concatenate(t_cnt, axis=1)
    # check every traced CTA: inside -> exactly the template; at the edge -> clamp or drop
    tx, ty = traced % gx, traced // gx
    cta_ph = tx % lay.m
    inside = np.zeros(len(traced), dtype=bool)
    for phase in range(lay.m):
        sel = T_ph == phase
        on = cta_ph == phase
        oy_, ox_ = ty[on] * lay.ry, (tx[on] // lay.m) * lay.sx
        inside[on] = (
            (T_tr[sel].min() + oy_ >= lay.rows[0])
            & (T_tr[sel].max() + oy_ <= lay.rows[1])
            & (T_tc[sel].min() + ox_ >= lay.cols[0])
            & (T_tc[sel].max() + ox_ <= lay.cols[1])
        )
        tmpl = templates[phase]
        ins = traced[on & inside]
        if len(ins) == 0:
            continue
        se = np.array([seg.get(c, (0, 0)) for c in ins.tolist()], dtype=np.int64).reshape(-1, 2)
        bad = se[:, 1] - se[:, 0] != len(tmpl)
        if not bad.any():
            got = k_s[se[:, :1] + np.arange(len(tmpl))[None, :]]
            bad = ~(got == tmpl[None, :]).all(axis=1)
        if bad.any():
            c = int(ins[int(np.argmax(bad))])
            raise _Fallback(
                f"buffer {name}: CTA ({c % gx}, {c // gx}) does not touch a translated copy of "
                "its neighbours' footprint (not translation-invariant)"
            )
    scores: dict[str, list[float]] = {"clamp": [], "drop": []}
    edges = traced[~inside]
    if len(edges) > _MAX_EDGE_CHECKS:
        edges = edges[np.linspace(0, len(edges) - 1, _MAX_EDGE_CHECKS).round().astype(int)]
    for c in edges.tolist():
        x, y = c % gx, c // gx
        sel = T_ph == x % lay.m
        syn_r = T_tr[sel] + y * lay.ry
        syn_c = T_tc[sel] + (x // lay.m) * lay.sx
        s, e = seg.get(c, (0, 0))
        real = np.unique(row_s[s:e] * lay.pg + col_s[s:e])
        clamp = np.unique(np.clip(syn_r, *lay.rows) * lay.pg + np.clip(syn_c, *lay.cols))
        ok = (syn_r >= lay.rows[0]) & (syn_r <= lay.rows[1])
        ok &= (syn_c >= lay.cols[0]) & (syn_c <= lay.cols[1])
        drop = np.unique(syn_r[ok] * lay.pg + syn_c[ok])
        for pol, syn in (("clamp", clamp), ("drop", drop)):
            common = len(np.intersect1d(real, syn, assume_unique=True))
            union = len(real) + len(syn) - common
            scores[pol].append(common / union if union else 1.0)
    nX = -(-gx // lay.m)
    reaches_out = bool(
        T_tr.min() < lay.rows[0]
        or T_tr.max() + (gy - 1) * lay.ry > lay.rows[1]
        or T_tc.min() < lay.cols[0]
        or T_tc.max() + (nX - 1) * lay.sx > lay.cols[1]
    )
    if not reaches_out:
        policy = "drop"  # nothing is ever outside: no policy needed
    elif boundary == "auto":
        if scores["clamp"]:
            mc, md = float(np.mean(scores["clamp"])), float(np.mean(scores["drop"]))
            policy = "clamp" if mc >= md else "drop"
            match = max(mc, md)
            if match < _MIN_EDGE_MATCH:
                # the edge CTAs are no clamped or cut translates of the template: the steps
                # (or the template) are wrong, e.g. a kernel that remaps its blocks itself
                raise _Fallback(
                    f"buffer {name}: the traced CTAs at the edge are not translates of the "
                    f"others, clamped or cut at the buffer's edges (at best {100 * match:.0f}% "
                    "of their granules)"
                )
            if match < 0.99:
                model.notes.append(
                    f"buffer {name}: edge CTAs approximated ({policy} to the buffer's edges "
                    f"reproduces {100 * match:.0f}% of the traced edge CTAs' granules)"
                )
        else:
            policy = "clamp"
            model.notes.append(
                f"buffer {name}: no traced CTA at the edge; accesses beyond it assumed clamped"
            )
    else:
        policy = boundary
    _build_units(T_tr, T_tc, T_ph, T_cnt.astype(np.float64), lay, gx, gy, g, policy, model, name)


def _build_units(
    T_tr: np.ndarray,
    T_tc: np.ndarray,
    T_ph: np.ndarray,
    T_cnt: np.ndarray,
    lay: _Layout,
    gx: int,
    gy: int,
    g: int,
    policy: str,
    model: _Model,
    name: str = "",
) -> None:
    shapes, residues, counts, of_residue = _residue_units(T_tr, T_tc, T_ph, T_cnt, lay)
    nX = -(-gx // lay.m)
    spg = g // SECTOR_BYTES
    # residue id -> shape, first-toucher cell offset (for mapping clamped granules to units)
    n_res = lay.ry * lay.sx
    res_shape = np.full(n_res, -1, dtype=np.int64)
    res_k0 = np.zeros((n_res, 2), dtype=np.int64)
    for r, (sid, k0y, k0x) in of_residue.items():
        res_shape[r] = sid
        res_k0[r] = (k0y, k0x)
    boxes = []  # per shape: (ay0, ax0, Ny, Nx, offset)
    total = 0
    for shp in shapes:
        ay0 = int(shp[:, 0].min())
        ax0 = int(shp[:, 1].min())
        ny = gy - 1 + int(shp[:, 0].max()) - ay0 + 1
        nx = nX - 1 + int(shp[:, 1].max()) - ax0 + 1
        boxes.append((ay0, ax0, ny, nx, total))
        total += ny * nx
    touches = sum(b[2] * b[3] * len(shp) for b, shp in zip(boxes, shapes, strict=True))
    if touches > _MAX_SYNTH_TOUCHES:
        # a footprint that large, or one translated by the wrong steps (a kernel that remaps its
        # blocks itself: its launch order is not its tile order) spanning far more units than
        # the grid has CTAs
        raise _Fallback(
            f"buffer {name}: synthesizing every CTA would take {touches:,} (unit, CTA) touches, "
            f"more than the {_MAX_SYNTH_TOUCHES:,} allowed (a very large footprint, or CTAs "
            "whose footprints are not translates of each other in launch order)"
        )
    orphan_base = total
    per_shape = []
    for sid, shp in enumerate(shapes):
        ay0, ax0, ny, nx, off = boxes[sid]
        ay = ay0 + np.arange(ny, dtype=np.int64)
        ax = ax0 + np.arange(nx, dtype=np.int64)
        tby = ay[:, None] - shp[None, :, 0]  # (ny, K)
        tX = ax[:, None] - shp[None, :, 1]  # (nx, K)
        tbx = tX * lay.m + shp[None, :, 2]
        vy = (tby >= 0) & (tby < gy)
        vx = (tX >= 0) & (tbx < gx)
        touchers = tby[:, None, :] * gx + tbx[None, :, :]
        valid = vy[:, None, :] & vx[None, :, :]
        touchers = np.where(valid, touchers, -1).reshape(ny * nx, -1).astype(np.int32)
        res = residues[sid]
        rows = (ay[:, None] + res[None, :, 2]) * lay.ry + res[None, :, 0]  # (ny, w)
        cols = (ax[:, None] + res[None, :, 3]) * lay.sx + res[None, :, 1]  # (nx, w)
        rin = (rows >= lay.rows[0]) & (rows <= lay.rows[1])
        cin = (cols >= lay.cols[0]) & (cols <= lay.cols[1])
        w_in = (rin.astype(np.float64) @ cin.astype(np.float64).T).reshape(-1)
        nvalid = (touchers >= 0).sum(axis=1)
        per_shape.append((touchers, nvalid, w_in, rows, cols, rin, cin))
    # clamped granules of partly outside units become extra touches of the units they land in
    offsets = np.array([b[4] for b in boxes] + [orphan_base], dtype=np.int64)
    # clamping: the out-of-buffer granules of a unit land on edge granules. Each edge unit that
    # receives some is split into sub-units: its granules grouped by the set of source units that
    # land on them (plus the rest, untouched by clamping), so a clamped CTA touches exactly the
    # granules it reads there. Units of no template shape (orphans) are single granules.
    src_l, gid_l, tgt_l = [], [], []
    if policy == "clamp":
        for sid in range(len(shapes)):
            touchers, nvalid, w_in, rows, cols, rin, cin = per_shape[sid]
            w = len(residues[sid])
            src = np.flatnonzero((nvalid > 0) & (w_in < w))
            if len(src) == 0:
                continue
            nx = cols.shape[0]
            iy, ix = src // nx, src % nx
            js, ri = np.nonzero(~(rin[iy] & cin[ix]))
            gr = np.clip(rows[iy[js], ri], *lay.rows)
            gc = np.clip(cols[ix[js], ri], *lay.cols)
            src_l.append(offsets[sid] + src[js])
            gid_l.append(gr * lay.pg + gc)
            tgt_l.append(_unit_of(gr, gc, lay, res_shape, res_k0, boxes, orphan_base))
    lu: list[np.ndarray] = []
    lc: list[np.ndarray] = []
    ln: list[np.ndarray] = []
    listed = np.zeros(0, dtype=np.int64)
    sub_w = np.zeros(0)
    if src_l:
        src_a, gid_a, tgt_a = np.concatenate(src_l), np.concatenate(gid_l), np.concatenate(tgt_l)
        # distinct (source, granule): a CTA requests each clamped granule once
        o = _sort_pairs(gid_a - gid_a.min(), src_a)
        src_a, gid_a, tgt_a = src_a[o], gid_a[o], tgt_a[o]
        keep_ = np.ones(len(o), dtype=bool)
        keep_[1:] = (src_a[1:] != src_a[:-1]) | (gid_a[1:] != gid_a[:-1])
        src_a, gid_a, tgt_a = src_a[keep_], gid_a[keep_], tgt_a[keep_]
        # per granule: a signature of its set of sources (sum of 64-bit hashes)
        gs = _segments(gid_a)
        sig = np.add.reduceat(_mix64(src_a), gs)
        g_tgt = tgt_a[gs]
        # sub-units: (target unit, signature)
        o2 = np.lexsort((sig, g_tgt))
        t2, s2 = g_tgt[o2], sig[o2]
        ch = np.ones(len(o2), dtype=bool)
        ch[1:] = (t2[1:] != t2[:-1]) | (s2[1:] != s2[:-1])
        sub_sorted = np.cumsum(ch) - 1
        sub_of_g = np.empty(len(gs), dtype=np.int64)
        sub_of_g[o2] = sub_sorted
        n_sub = np.bincount(sub_sorted).astype(np.float64)
        sub_tgt = t2[ch]
        # the rest of each regular target unit is one more sub-unit
        listed = np.unique(sub_tgt[sub_tgt < orphan_base])
        in_units = np.bincount(
            np.searchsorted(listed, sub_tgt[sub_tgt < orphan_base]),
            weights=n_sub[sub_tgt < orphan_base],
            minlength=len(listed),
        )
        l_sid = np.searchsorted(offsets, listed, side="right") - 1
        l_loc = listed - offsets[l_sid]
        l_win = np.array([per_shape[int(a)][2][int(b)] for a, b in zip(l_sid, l_loc, strict=True)])
        rest = l_win - in_units
        has_rest = rest > 0.5
        sub_w = np.concatenate([n_sub, rest[has_rest]])
        sub_unit = np.concatenate([sub_tgt, listed[has_rest]])
        # extra touches: the touchers of each source touch the sub-units its granules land in
        sub_per_pair = sub_of_g[np.repeat(np.arange(len(gs)), np.diff(np.r_[gs, len(src_a)]))]
        pk = np.unique(src_a * (len(sub_w) + 1) + sub_per_pair)
        p_src, p_sub = pk // (len(sub_w) + 1), pk % (len(sub_w) + 1)
        p_sid = np.searchsorted(offsets, p_src, side="right") - 1
        for sid in np.unique(p_sid).tolist():
            sel = p_sid == sid
            tch = per_shape[sid][0][p_src[sel] - offsets[sid]]
            pi, kk = np.nonzero(tch >= 0)
            frac = sub_w[p_sub[sel][pi]] / len(residues[sid])
            lu.append(p_sub[sel][pi])
            lc.append(tch[pi, kk].astype(np.int64))
            ln.append(counts[sid][:, kk] * frac[None, :])
        # regular touches of the split units reach every sub-unit of theirs
        is_reg = sub_unit < orphan_base
        r_sub = np.flatnonzero(is_reg)
        r_sid = np.searchsorted(offsets, sub_unit[r_sub], side="right") - 1
        for sid in np.unique(r_sid).tolist():
            sel = r_sub[r_sid == sid]
            tch = per_shape[sid][0][sub_unit[sel] - offsets[sid]]
            pi, kk = np.nonzero(tch >= 0)
            frac = sub_w[sel[pi]] / len(residues[sid])
            lu.append(sel[pi])
            lc.append(tch[pi, kk].astype(np.int64))
            ln.append(counts[sid][:, kk] * frac[None, :])
    for sid in range(len(shapes)):
        touchers, nvalid, w_in, *_ = per_shape[sid]
        w = len(residues[sid])
        ids = offsets[sid] + np.arange(len(nvalid), dtype=np.int64)
        keep = (nvalid > 0) & (w_in > 0) & ~np.isin(ids, listed)
        if keep.any():
            model.mats.append(
                _Matrix(
                    touchers=touchers[keep],
                    nvalid=nvalid[keep].astype(np.int64),
                    w_bytes=w_in[keep] * g,
                    scale=w_in[keep] / w,
                    cnt=counts[sid],
                    gbytes=g,
                )
            )
    if not lu:
        return
    all_u = np.concatenate(lu)
    all_c = np.concatenate(lc)
    all_n = np.concatenate(ln, axis=1)
    # merge (sub-unit, cta) duplicates; cap the requests at the sub-unit's sectors
    o = _sort_pairs(all_u, all_c)
    all_u, all_c, all_n = all_u[o], all_c[o], all_n[:, o]
    pair_change = np.empty(len(all_u), dtype=bool)
    pair_change[0] = True
    pair_change[1:] = (all_u[1:] != all_u[:-1]) | (all_c[1:] != all_c[:-1])
    ps = np.flatnonzero(pair_change)
    merged = np.add.reduceat(all_n, ps, axis=1)
    lim = sub_w[all_u[ps]]
    for row in (_NLOAD, _NSTORE, _NDIRTY):
        merged[row] = np.minimum(merged[row], lim * spg)
    merged[_NLGRAN] = np.minimum(merged[_NLGRAN], lim)
    model.lists.append(
        _List(unit=all_u[ps], cta=all_c[ps], cnt=merged, w_bytes=sub_w * g, gbytes=g)
    )


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 of int64 values: well-spread 64-bit hashes (sums of them identify sets)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _unit_of(
    gr: np.ndarray,
    gc: np.ndarray,
    lay: _Layout,
    res_shape: np.ndarray,
    res_k0: np.ndarray,
    boxes: list[tuple[int, int, int, int, int]],
    orphan_base: int,
) -> np.ndarray:
    """Unit ids of in-buffer granules (row, col); granules of no template unit get orphan ids."""
    rho = (gr % lay.ry) * lay.sx + gc % lay.sx
    sid = res_shape[rho]
    ky, kx = gr // lay.ry - res_k0[rho, 0], gc // lay.sx - res_k0[rho, 1]
    out = orphan_base + gr * lay.pg + gc
    for s, (ay0, ax0, ny, nx, off) in enumerate(boxes):
        sel = sid == s
        iy, ix = ky[sel] - ay0, kx[sel] - ax0
        ok = (iy >= 0) & (iy < ny) & (ix >= 0) & (ix < nx)
        vals = np.where(ok, off + iy * nx + ix, out[sel])
        out[sel] = vals
    return out


def _synthesize(
    trace: AccessTrace,
    recs: np.ndarray,
    srecs: np.ndarray,
    traced: np.ndarray,
    gx: int,
    gy: int,
    fetch_bytes: int,
    boundary: str,
) -> _Model:
    """Units of every CTA of the grid, from the footprints of the ``traced`` CTAs (their records:
    ``srecs``; ``recs``: all records, for the CTA steps)."""
    t = _extract(srecs, fetch_bytes)
    table = _buffer_table(trace, t, fetch_bytes)
    names = {int(b): k for k, (b, _) in trace.buffers.items()}
    sx, sy = _infer_steps(recs, gx, gy, table)
    cache: dict[int, tuple[_Touches, np.ndarray]] = {}

    def split(g: int) -> tuple[_Touches, np.ndarray]:
        tt = cache[g][0] if g in cache else (t if g == fetch_bytes else _extract(srecs, g))
        bidx = _buffer_of(tt.gran * g, table)
        cache[g] = (tt, bidx)
        return cache[g]

    model = _Model()
    for bi, (base, size) in enumerate(table):
        tt, bidx = split(fetch_bytes)
        if not (bidx == bi).any():
            continue

        def touches_at(g: int, bi: int = bi) -> _Touches:
            tg, bg = split(g)
            sel = bg == bi
            return _Touches(tg.cta[sel], tg.gran[sel], tg.cnt[:, sel])

        _synthesize_buffer(
            base,
            size,
            touches_at,
            traced,
            sx.get(bi),
            sy.get(bi),
            gx,
            gy,
            int(trace.block[1]),
            fetch_bytes,
            boundary,
            model,
            names.get(base, f"@{base:#x}"),
        )
    return model


# --------------------------------------------------------------------------------------------
# The engine: one launch order


@dataclass
class _OrderCounts:
    """Per capacity: load sectors that hit (one cache), DRAM bytes read; with two partitions,
    the expected extra misses (``near_miss``, sectors) and extra lookups (``fabric``, sectors
    forwarded to the home partition) that the near-partition copies add (:func:`_residencies`)."""

    load_hits: float
    dram_read: float
    near_miss: float = 0.0
    fabric: float = 0.0


def _residencies(k: np.ndarray, a: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    """Expected extra misses and extra lookups (sectors) of two L2 partitions, summed over
    residencies: one per miss of the one-cache model (a fill of the home partition), ``k`` CTAs
    touching the granule during it (the missing one included), ``a`` load sectors the missing CTA
    requests, ``g`` sectors of the granule.

    Each CTA runs on an SM on either side with probability 1/2. The first toucher is on the far
    side with probability 1/2: its request misses the near partition too and is forwarded (``g``
    sectors looked up at home, missing): ``g`` more misses and lookups. Otherwise it misses at
    home only, and the first far-side toucher among the ``k - 1`` others (probability
    ``1 - 2**(1 - k)``) misses its near copy (about ``a`` sectors: it hit in the one-cache model)
    and is forwarded (``g`` sectors looked up at home, hitting). So per residency:
    misses ``g/2 + a/2 (1 - 2**(1 - k))``, lookups ``g (1 - 2**-k)``.
    """
    if len(k) == 0:
        return 0.0, 0.0
    kf = k.astype(np.float64)
    p_far_later = 1.0 - np.exp2(1.0 - kf)
    miss = 0.5 * (g + a * p_far_later)
    look = g * (1.0 - np.exp2(-kf))
    return float(miss.sum()), float(look.sum())


def _window_fit(
    A_lt: np.ndarray,
    L_incl: np.ndarray,
    gs: np.ndarray,
    ge: np.ndarray,
    gw: np.ndarray,
    glen_desc: np.ndarray,
    k: int,
    P: int,
    density: np.ndarray | None,
) -> np.ndarray:
    """Distinct bytes touched by the positions [p - k, p), for p = 0 .. P-1."""
    n = int(np.searchsorted(-glen_desc, -k, side="left"))  # gaps longer than k
    p = np.arange(P, dtype=np.int64)
    idx = p - k - 1
    B = np.where(idx >= 0, L_incl[np.clip(idx, 0, None)], 0.0)
    if n:
        diff = np.bincount(gs[:n] + k + 1, weights=gw[:n], minlength=P + 2)[: P + 2]
        diff -= np.bincount(ge[:n] + 1, weights=gw[:n], minlength=P + 2)[: P + 2]
        D = A_lt - B - np.cumsum(diff)[:P]
    else:
        D = A_lt - B
    if density is not None:
        lo = np.clip(p - k, 0, None)
        n_tr = density[p] - density[lo]
        span = (p - lo).astype(np.float64)
        D = np.where(n_tr > 0, D * span / np.maximum(n_tr, 1), D)
    return np.asarray(D, dtype=np.float64)


def _trivial_window(cta_bytes: np.ndarray, perm: np.ndarray, cap: float) -> int:
    """The longest window length k whose CTAs' summed bytes fit ``cap`` wherever it starts."""
    s = np.concatenate([[0.0], np.cumsum(cta_bytes[perm])])
    P = len(perm)
    lo, hi = 0, P
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if float((s[mid:] - s[:-mid]).max()) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return max(lo, 1)


def _run_order(
    model: _Model,
    perm: np.ndarray,
    P: int,
    caps: Sequence[float],
    C: int,
    cta_bytes: np.ndarray | None,
    traced_mask: np.ndarray | None,
    split: bool = False,
) -> tuple[list[_OrderCounts], float]:
    """Load hits and DRAM reads per capacity, and the working set of the CTAs in flight;
    ``split``: also the extra misses and lookups of two L2 partitions (:func:`_residencies`)."""
    pos = np.empty(P, dtype=np.int64)
    pos[perm] = np.arange(P, dtype=np.int64)
    density = None
    if traced_mask is not None:
        density = np.concatenate([[0], np.cumsum(traced_mask[perm])]).astype(np.float64)
    cap_min = min(caps)
    if cta_bytes is not None:
        k0 = _trivial_window(cta_bytes, perm, cap_min)
    else:
        k0 = 1
    kf = max(1, min(k0, C))
    firsts, lasts, fw = [], [], []
    g_s, g_e, g_w = [], [], []
    saved: list[Any] = []  # per block, what the second pass reuses
    pos_ext = np.append(pos, P)  # a toucher id of -1 (none) reads the sentinel P
    for mat in model.mats:
        T = mat.touchers
        K = T.shape[1]
        bits = max(1, (K - 1).bit_length())
        key = pos_ext[T] << bits
        key |= np.arange(K, dtype=np.int64)
        key.sort(axis=1)
        r = (key >> bits).astype(np.int32)
        kk = (key & ((1 << bits) - 1)).astype(np.int32)
        del key
        n_u = len(r)
        firsts.append(r[:, 0])
        lasts.append(r[np.arange(n_u), mat.nvalid - 1])
        fw.append(mat.w_bytes)
        gap = r[:, 1:] - r[:, :-1]
        sel = (r[:, 1:] < P) & (gap > kf)
        rows, cols = np.nonzero(sel)
        g_s.append(r[rows, cols].astype(np.int64))
        g_e.append(r[rows, cols + 1].astype(np.int64))
        g_w.append(mat.w_bytes[rows])
        saved.append((r, kk, gap))
    for lst in model.lists:
        pr = pos[lst.cta]
        o = _sort_pairs(lst.unit, pr)
        u, r = lst.unit[o], pr[o]
        first = np.empty(len(u), dtype=bool)
        if len(u):
            first[0] = True
            np.not_equal(u[1:], u[:-1], out=first[1:])
        last = np.empty(len(u), dtype=bool)
        if len(u):
            last[-1] = True
            np.not_equal(u[1:], u[:-1], out=last[:-1])
        firsts.append(r[first])
        lasts.append(r[last])
        fw.append(lst.w_bytes[u[first]])
        gap = np.empty(len(r), dtype=np.int64)
        if len(r):
            gap[0] = -1
            gap[1:] = r[1:] - r[:-1]
        gap[first] = -1
        sel = np.flatnonzero(gap > kf)
        g_s.append(r[sel - 1])
        g_e.append(r[sel])
        g_w.append(lst.w_bytes[u[sel]])
        saved.append((o, r, gap))
    f_all = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
    l_all = np.concatenate(lasts) if lasts else np.zeros(0, dtype=np.int64)
    w_all = np.concatenate(fw) if fw else np.zeros(0)
    A_incl = np.cumsum(np.bincount(f_all, weights=w_all, minlength=P + 1)[: P + 1])
    A_lt = np.concatenate([[0.0], A_incl[: P - 1]])
    L_incl = np.cumsum(np.bincount(l_all, weights=w_all, minlength=P + 1)[: P + 1])
    gs = np.concatenate(g_s) if g_s else np.zeros(0, dtype=np.int64)
    ge = np.concatenate(g_e) if g_e else np.zeros(0, dtype=np.int64)
    gw = np.concatenate(g_w) if g_w else np.zeros(0)
    glen = ge - gs
    o = np.argsort(-glen, kind="stable")
    gs, ge, gw, glen = gs[o], ge[o], gw[o], glen[o]

    def window(k: int) -> np.ndarray:
        return _window_fit(A_lt, L_incl, gs, ge, gw, glen, k, P, density)

    # working set of the CTAs in flight
    c_eff = max(1, min(C, P))
    D_C = window(c_eff)
    steady = D_C[min(c_eff, P - 1) :]
    working_set = float(steady.mean()) if len(steady) else float(D_C.max(initial=0.0))
    # k*(p): the longest window ending at p that fits, per capacity
    ks = [k0]
    while ks[-1] < P:
        ks.append(min(P, max(ks[-1] + 1, int(ks[-1] * _GRID_RATIO))))
    kstars = []
    prevs = []
    done = []
    D0 = window(ks[0])
    for cap in caps:
        ks_arr = np.full(P, np.inf)
        over = D0 > cap
        # a window of k0 CTAs that does not fit (only with sampled traces): scale down
        ks_arr[over] = ks[0] * cap / D0[over]
        kstars.append(ks_arr)
        prevs.append(D0.copy())
        done.append(over.copy())
    for i in range(1, len(ks)):
        if all(d.all() for d in done):
            break
        D = window(ks[i])
        for j, cap in enumerate(caps):
            newly = ~done[j] & (D > cap)
            if newly.any():
                d0 = prevs[j][newly]
                d1 = D[newly]
                frac = np.where(d1 > d0, (cap - d0) / np.maximum(d1 - d0, 1e-300), 0.0)
                kstars[j][newly] = ks[i - 1] + frac * (ks[i] - ks[i - 1])
                done[j] |= newly
            prevs[j] = np.where(done[j], prevs[j], D)
    hits = [0.0] * len(caps)
    dram = [0.0] * len(caps)
    near = [0.0] * len(caps)
    fabric = [0.0] * len(caps)
    for mat, (r, kk, gap) in zip(model.mats, saved[: len(model.mats)], strict=True):
        valid = r[:, 1:] < P
        r1 = np.minimum(r[:, 1:], P - 1)
        # per touch (after the first of each unit): its load requests and loaded granules
        wl = (mat.cnt[_NLOAD].astype(np.float32)[kk[:, 1:]]) * mat.scale[:, None].astype(np.float32)
        wg = (mat.cnt[_NLGRAN].astype(np.float32)[kk[:, 1:]]) * mat.scale[:, None].astype(
            np.float32
        )
        wg *= valid
        g_all = float(wg.sum(dtype=np.float64))
        g_first = float((mat.cnt[_NLGRAN][kk[:, 0]] * mat.scale).sum())  # first touches miss
        for j, kst in enumerate(kstars):
            hit = valid & (gap <= kst[r1])
            hits[j] += float(np.einsum("ij,ij->", hit, wl, dtype=np.float64))
            g_hit = float(np.einsum("ij,ij->", hit, wg, dtype=np.float64))
            dram[j] += (g_first + g_all - g_hit) * mat.gbytes
            if split:
                # the misses (first touches, and later touches past the window), row by row:
                # each starts a residency that lasts until the row's next miss
                miss = np.empty(r.shape, dtype=bool)
                miss[:, 0] = True
                np.logical_and(valid, ~hit, out=miss[:, 1:])
                rows, cols = np.nonzero(miss)
                nxt = mat.nvalid[rows]
                same = rows[1:] == rows[:-1]
                nxt[:-1] = np.where(same, cols[1:], nxt[:-1])
                kc = kk[rows, cols]
                a = mat.cnt[_NLOAD][kc] * mat.scale[rows]
                g = mat.cnt[_NLGRAN][kc] * mat.scale[rows] * (mat.gbytes / SECTOR_BYTES)
                m_, f_ = _residencies(nxt - cols, a, g)
                near[j] += m_
                fabric[j] += f_
    for lst, (o_, r, gap) in zip(model.lists, saved[len(model.mats) :], strict=True):
        cnt = lst.cnt[:, o_]
        rc = np.clip(r, 0, P - 1)
        split_l = split and len(gap) > 0
        if split_l:
            # per touch: the end of its unit's run of touches (units are sorted, first ones
            # have gap -1)
            starts = np.flatnonzero(gap < 0)
            ends = np.r_[starts[1:], len(gap)]
            end_of = np.repeat(ends, np.diff(np.r_[starts, len(gap)]))
        for j, kst in enumerate(kstars):
            hit = (gap >= 0) & (gap <= kst[rc])
            hits[j] += float(cnt[_NLOAD][hit].sum())
            dram[j] += float(cnt[_NLGRAN][~hit].sum()) * lst.gbytes
            if split_l:
                idx = np.flatnonzero(~hit)
                nxt = end_of[idx]
                if len(idx) > 1:
                    nxt[:-1] = np.minimum(nxt[:-1], idx[1:])  # the next miss, if in the unit
                a = cnt[_NLOAD][idx]
                g = cnt[_NLGRAN][idx] * (lst.gbytes / SECTOR_BYTES)
                m_, f_ = _residencies(nxt - idx, a, g)
                near[j] += m_
                fabric[j] += f_
    out = [_OrderCounts(*v) for v in zip(hits, dram, near, fabric, strict=True)]
    return out, working_set


def _totals(model: _Model) -> tuple[float, float, float, float]:
    """(load requests, store requests, dirty sectors (write-backs), footprint bytes)."""
    load = store = dirty = foot = 0.0
    for mat in model.mats:
        valid = mat.touchers >= 0
        per_k = (valid * mat.scale[:, None]).sum(axis=0)
        load += float(per_k @ mat.cnt[_NLOAD])
        store += float(per_k @ mat.cnt[_NSTORE])
        # each unit's stored sectors are written back once: its largest toucher's share
        dk = np.where(valid, mat.cnt[_NDIRTY][None, :], 0.0).max(axis=1, initial=0.0)
        dirty += float((dk * mat.scale).sum())
        foot += float(mat.w_bytes.sum())
    for lst in model.lists:
        load += float(lst.cnt[_NLOAD].sum())
        store += float(lst.cnt[_NSTORE].sum())
        if len(lst.unit):
            mx = np.zeros(len(lst.w_bytes))
            np.maximum.at(mx, lst.unit, lst.cnt[_NDIRTY])
            dirty += float(mx.sum())
        foot += float(lst.w_bytes.sum())
    return load, store, dirty, foot


def _cta_bytes(model: _Model, P: int) -> np.ndarray:
    out = np.zeros(P)
    for mat in model.mats:
        valid = mat.touchers >= 0
        w = np.broadcast_to(mat.w_bytes[:, None], valid.shape)[valid]
        out += np.bincount(mat.touchers[valid], weights=w, minlength=P)[:P]
    for lst in model.lists:
        out += np.bincount(lst.cta, weights=lst.w_bytes[lst.unit], minlength=P)[:P]
    return out


# --------------------------------------------------------------------------------------------
# Public entry point


def _capacities(device: DeviceSpec, efficiency: float | Sequence[float] | None) -> list[float]:
    if device.l2_bytes is None:
        raise UsageError(
            f"the L2 size of {device.name} is not known", "name a GPU preset with --gpu"
        )
    if efficiency is None:
        effs = [default_efficiency(device)]
    elif isinstance(efficiency, (int, float)):
        effs = [float(efficiency)]
    else:
        effs = [float(e) for e in efficiency]
    if not effs or any(not (0 < e <= 4) for e in effs):
        raise UsageError("the L2 efficiency must be a positive fraction of the L2 size")
    return [e * device.l2_bytes for e in effs]


def _subset(traced: np.ndarray, gx: int, gy: int | None = None) -> np.ndarray:
    """The traced CTAs the synthesis reads: runs of consecutive CTAs (every phase of the CTA
    steps) spread over the traced set, its first and last CTAs, the CTAs on the grid's left
    and right edges (they bound the buffer), thinned out where the trace is large, and the
    :data:`_SUBSET_CENTRE` CTAs farthest from the grid's border (``gy`` rows: the ones whose
    footprints are not clamped, which check the translation best)."""
    n = len(traced)
    if n <= _SUBSET_RUNS * _SUBSET_RUN + 2 * _SUBSET_EDGE:
        return traced
    keep = np.zeros(n, dtype=bool)
    for s in np.linspace(0, n - _SUBSET_RUN, _SUBSET_RUNS).round().astype(int).tolist():
        keep[s : s + _SUBSET_RUN] = True
    bx = traced % gx
    for sel in (bx == 0, bx == gx - 1):
        idx = np.flatnonzero(sel)
        if len(idx) > _SUBSET_EDGE:
            idx = idx[np.linspace(0, len(idx) - 1, _SUBSET_EDGE).round().astype(int)]
        keep[idx] = True
    if gy is not None and gy > 1:
        by = traced // gx
        depth = np.minimum(np.minimum(bx, gx - 1 - bx), np.minimum(by, gy - 1 - by))
        keep[np.argsort(-depth, kind="stable")[:_SUBSET_CENTRE]] = True
    return traced[keep]


def _build(
    trace: AccessTrace, recs: np.ndarray, fetch_bytes: int, boundary: str, gx: int, gy: int
) -> tuple[_Model, str, np.ndarray | None]:
    traced = np.unique(np.asarray(trace.ctas, dtype=np.int64))
    if trace.complete:
        t = _extract(recs, fetch_bytes)
        model = _Model(lists=[_list_from_touches(t, fetch_bytes)] if len(t.cta) else [])
        return model, "complete", None
    sub = _subset(traced, gx, gy)
    srecs = recs if len(sub) == len(traced) else recs[np.isin(recs["cta"], sub)]
    try:
        model = _synthesize(trace, recs, srecs, sub, gx, gy, fetch_bytes, boundary)
        return model, "synthesized", None
    except _Fallback as exc:
        t = _extract(recs, fetch_bytes)
        model = _Model(lists=[_list_from_touches(t, fetch_bytes)] if len(t.cta) else [])
        model.notes.append(
            f"only the {len(traced)} traced CTAs of {gx * gy} are replayed ({exc}); "
            "windows are scaled by the traced fraction and DRAM bytes extrapolated"
        )
        mask = np.zeros(gx * gy, dtype=np.float64)
        mask[traced[(traced >= 0) & (traced < gx * gy)]] = 1.0
        return model, "traced-only", mask


def l2_model(
    trace: AccessTrace,
    device: DeviceSpec,
    blocks_per_sm: int,
    orders: Iterable[OrderSpec] = DEFAULT_ORDERS,
    *,
    efficiency: float | None = None,
    fetch_bytes: int | None = None,
    boundary: str = "auto",
    records: np.ndarray | None = None,
    partitions: int | None = None,
) -> L2Result:
    """The L2 under each launch order of ``orders`` (see the module docstring for the model).

    ``blocks_per_sm``: active CTAs per SM (the occupancy model's answer). ``efficiency``: the share
    of ``device.l2_bytes`` the cache holds in effect (default :func:`default_efficiency`).
    ``fetch_bytes``: the granule a miss fills (32, 64 or 128; default
    :func:`default_fetch_bytes`). ``boundary``: how untraced CTAs at the image edge touch memory:
    ``"auto"`` (as the traced edge CTAs do), ``"clamp"``, ``"drop"``. ``records``: use these
    instead of ``trace.records`` (reconciled records). ``partitions``: 2 counts the lookups of
    two L2 partitions in the hit rates, 1 does not (default :func:`default_partitions`).
    """
    res = _l2_model(
        trace, device, blocks_per_sm, orders, efficiency, fetch_bytes, boundary, records, partitions
    )
    return res[0]


def _l2_model(
    trace: AccessTrace,
    device: DeviceSpec,
    blocks_per_sm: int,
    orders: Iterable[OrderSpec],
    efficiency: float | Sequence[float] | None,
    fetch_bytes: int | None,
    boundary: str,
    records: np.ndarray | None,
    partitions: int | None = None,
) -> list[L2Result]:
    """:func:`l2_model` for several efficiencies at once (one result each; the replay is shared)."""
    if fetch_bytes is None:
        fetch_bytes = default_fetch_bytes(device)
    if fetch_bytes not in (32, 64, 128):
        raise UsageError("fetch_bytes must be 32, 64 or 128")
    if partitions is None:
        partitions = default_partitions(device)
    if partitions not in (1, 2):
        raise UsageError("partitions must be 1 or 2")
    split = partitions == 2
    if boundary not in ("auto", "clamp", "drop"):
        raise UsageError("boundary must be 'auto', 'clamp' or 'drop'")
    if blocks_per_sm < 1:
        raise UsageError("blocks_per_sm must be at least 1 (the kernel cannot launch otherwise)")
    caps = _capacities(device, efficiency)
    effs = [c / float(device.l2_bytes or 1) for c in caps]
    gx, gy, gz = (int(v) for v in trace.grid)
    gy_f = gy * gz  # z folds into y: the linear CTA id x + y*gx + z*gx*gy is x + (y + z*gy)*gx
    P = gx * gy_f
    if P != trace.total_ctas:
        raise UsageError(f"the trace's grid {trace.grid} does not hold {trace.total_ctas} CTAs")
    C = blocks_per_sm * (device.sm_count or 1)
    recs = trace.records if records is None else records
    recs = recs[recs["space"] == int(Space.GLOBAL)]
    model, mode, traced_mask = _build(trace, recs, fetch_bytes, boundary, gx, gy_f)
    load_req, store_req, dirty, foot = _totals(model)
    scale = 1.0
    if mode == "traced-only":
        scale = trace.scale
    cta_bytes = None if traced_mask is not None else _cta_bytes(model, P)
    specs = list(orders)
    if not specs:
        raise UsageError("no launch order to model")
    resolved = [order_permutation(s, gx, gy_f) for s in specs]
    # with two partitions, a store from an SM on the far side (half of them) is looked up in its
    # near partition and again in the home one: both hits
    store_look = store_req * (1.5 if split else 1.0)
    per_cap: list[list[L2OrderResult]] = [[] for _ in caps]
    for name, n, perm in resolved:
        counts, ws = _run_order(model, perm, P, caps, C, cta_bytes, traced_mask, split)
        for j, cnt in enumerate(counts):
            load_look = load_req + cnt.fabric
            load_hit = cnt.load_hits + cnt.fabric - cnt.near_miss
            look = load_look + store_look
            per_cap[j].append(
                L2OrderResult(
                    order=name,
                    n=n,
                    working_set_bytes=ws,
                    fits=ws <= caps[j],
                    hit_rate=(load_hit + store_look) / look if look else 0.0,
                    read_hit_rate=load_hit / load_look if load_look else 0.0,
                    dram_bytes=cnt.dram_read * scale,
                    dram_write_bytes=dirty * SECTOR_BYTES * scale,
                    sectors=(load_req + store_req) * scale,
                    fabric_sectors=(cnt.fabric + (store_look - store_req)) * scale,
                )
            )
    results = []
    for j, cap in enumerate(caps):
        rs = tuple(per_cap[j])
        low = min(r.dram_bytes for r in rs)
        best = next(r for r in rs if r.dram_bytes <= low * (1 + _BEST_TOLERANCE) + fetch_bytes)
        results.append(
            L2Result(
                orders=rs,
                best=best,
                fits=foot * scale <= cap,
                footprint_bytes=foot * scale,
                capacity_bytes=cap,
                l2_bytes=int(device.l2_bytes or 0),
                efficiency=effs[j],
                fetch_bytes=fetch_bytes,
                concurrent_ctas=C,
                mode=mode,
                notes=tuple(model.notes),
                partitions=partitions,
            )
        )
    return results
