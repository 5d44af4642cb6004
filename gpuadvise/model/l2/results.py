"""The L2 model's results: one launch order (:class:`L2OrderResult`) and a launch under several
orders (:class:`L2Result`), with the model's assumptions (:data:`ASSUMPTIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuadvise.model.coalescing import SECTOR_BYTES

__all__ = [
    "ASSUMPTIONS",
    "L2OrderResult",
    "L2Result",
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
