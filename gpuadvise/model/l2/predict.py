"""The L2 model's entry points: a launch under each order (:func:`l2_model`), or under several
efficiencies at once (:func:`l2_models`, one replay). See :mod:`gpuadvise.model.l2`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import UsageError
from gpuadvise.model.coalescing import SECTOR_BYTES
from gpuadvise.model.l2.footprint import bytes_per_cta, footprint_totals
from gpuadvise.model.l2.orders import DEFAULT_ORDERS, OrderSpec, order_permutation
from gpuadvise.model.l2.replay import (
    capacities,
    default_fetch_bytes,
    default_partitions,
    prepare,
    replay_order,
)
from gpuadvise.model.l2.results import L2OrderResult, L2Result
from gpuadvise.model.l2.synthesis import build_footprint
from gpuadvise.trace.access import AccessTrace, Space

__all__ = [
    "l2_model",
    "l2_models",
]

_BEST_TOLERANCE = 0.01  # an order within 1% of the lowest DRAM reads counts as tied

REPLAY_THREADS = 8
"""Launch orders replayed at once, at most one per core. Each replay holds its own sort keys: on
the 8K gather of kernels/tile_gather (five orders), two threads on the 2-core CPU machine took
the run from 12.0 to 10.6 s and raised the peak RSS from 1.32 to 1.42 GB."""


REPLAY_BYTES_PER_CTA = 160
"""Memory one order's replay holds per CTA of the grid, whatever the trace (its permutation,
sort keys, window counts: 250 MB on reduce2's 1.56 million CTAs, 4.8 GB with the synthesis on
15.6 million)."""
_MEMORY_SHARE = 0.25  # of the memory budget, for the replays (the trace is still held)

REPLAY_MAX_BYTES = 1 << 30
"""The most memory the replays may hold, whatever the machine: a share of the memory budget alone
let HeCBench epistasis's 15.4 million CTAs (490 x 31,360) take 6 GB on a 64 GB machine (killed by
the corpus run; issue 31 wants 1 GB a kernel). A grid whose one-order replay does not fit gets no
L2 model, with the reason (:func:`gpuadvise.analyze.models.l2_for` checks it first); below it,
fewer orders are replayed at once."""


def replay_allowance() -> tuple[int, str]:
    """(bytes the replays may hold, what set it): the smaller of the replays' share of the memory
    budget and :data:`REPLAY_MAX_BYTES`."""
    from gpuadvise.spec.budget import format_bytes, memory_budget

    budget = memory_budget()
    share = int(budget.bytes * _MEMORY_SHARE)
    if share <= REPLAY_MAX_BYTES:
        return share, f"{format_bytes(share)}, a quarter of {budget.describe()}"
    return REPLAY_MAX_BYTES, f"{format_bytes(REPLAY_MAX_BYTES)}, the most the L2 model takes"


def _replays_that_fit(ctas: int, orders: int) -> int:
    """How many orders to replay at once (threads) within the replays' share of the memory
    budget; a GpuAdviseError (the L2 model is then unavailable, with this reason) when not even
    one fits."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.spec.budget import format_bytes

    workers = min(orders, os.cpu_count() or 1, REPLAY_THREADS)
    one = ctas * REPLAY_BYTES_PER_CTA + orders * ctas * 8  # the permutations are all held
    allowed, limit = replay_allowance()
    fit = (allowed - orders * ctas * 8) // max(1, ctas * REPLAY_BYTES_PER_CTA)
    if fit < 1:
        raise GpuAdviseError(
            f"replaying the {ctas} CTAs of the grid would take about {format_bytes(one)} of "
            f"memory, more than {limit}",
            "a smaller grid models the same access pattern",
        )
    return max(1, min(workers, fit))


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
    """The L2 under each launch order of ``orders`` (:mod:`gpuadvise.model.l2` describes the model).

    ``blocks_per_sm``: active CTAs per SM (the occupancy model's answer). ``efficiency``: the share
    of ``device.l2_bytes`` the cache holds in effect (default :func:`default_efficiency`).
    ``fetch_bytes``: the granule a miss fills (32, 64 or 128; default
    :func:`default_fetch_bytes`). ``boundary``: how untraced CTAs at the image edge touch memory:
    ``"auto"`` (as the traced edge CTAs do), ``"clamp"``, ``"drop"``. ``records``: use these
    instead of ``trace.records`` (reconciled records). ``partitions``: 2 counts the lookups of
    two L2 partitions in the hit rates, 1 does not (default :func:`default_partitions`).
    """
    res = l2_models(
        trace, device, blocks_per_sm, orders, efficiency, fetch_bytes, boundary, records, partitions
    )
    return res[0]


def l2_models(
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
        raise UsageError("fetch_bytes must be 32, 64 or 128", "give one of those, or None")
    if partitions is None:
        partitions = default_partitions(device)
    if partitions not in (1, 2):
        raise UsageError("partitions must be 1 or 2", "give one of those, or None")
    split = partitions == 2
    if boundary not in ("auto", "clamp", "drop"):
        raise UsageError("boundary must be 'auto', 'clamp' or 'drop'", "give one of those")
    if blocks_per_sm < 1:
        raise UsageError(
            "blocks_per_sm must be at least 1 (the kernel cannot launch otherwise)",
            "pass the occupancy model's active blocks per SM",
        )
    caps = capacities(device, efficiency)
    effs = [c / float(device.l2_bytes or 1) for c in caps]
    gx, gy, gz = (int(v) for v in trace.grid)
    gy_f = gy * gz  # z folds into y: the linear CTA id x + y*gx + z*gx*gy is x + (y + z*gy)*gx
    P = gx * gy_f
    if P != trace.total_ctas:
        raise UsageError(
            f"the trace's grid {trace.grid} does not hold {trace.total_ctas} CTAs",
            "model a trace as the emulator made it",
        )
    C = blocks_per_sm * (device.sm_count or 1)
    recs = trace.records if records is None else records
    glob = recs["space"] == int(Space.GLOBAL)
    if not glob.all():  # a trace of global accesses only is not copied
        recs = recs[glob]
    model, mode, traced_mask = build_footprint(trace, recs, fetch_bytes, boundary, gx, gy_f)
    load_req, store_req, dirty, foot = footprint_totals(model)
    scale = 1.0
    if mode == "traced-only":
        scale = trace.scale
    cta_bytes = None if traced_mask is not None else bytes_per_cta(model, P)
    specs = list(orders)
    if not specs:
        raise UsageError("no launch order to model", "give at least one order, e.g. row-major")
    workers = _replays_that_fit(P, len(specs))
    resolved = [order_permutation(s, gx, gy_f) for s in specs]
    # with two partitions, a store from an SM on the far side (half of them) is looked up in its
    # near partition and again in the home one: both hits
    store_look = store_req * (1.5 if split else 1.0)
    per_cap: list[list[L2OrderResult]] = [[] for _ in caps]
    prep = prepare(model)  # what every order reads alike, made once

    def replay(perm: np.ndarray) -> tuple[list[Any], float]:
        return replay_order(model, perm, P, caps, C, cta_bytes, traced_mask, split, prep)

    if workers > 1:
        # the orders' replays are independent and mostly numpy over large arrays (sorts,
        # gathers, cumulative sums), which run outside the GIL: one thread per order
        with ThreadPoolExecutor(max_workers=workers) as pool:
            replays = list(pool.map(replay, [perm for _, _, perm in resolved]))
    else:
        replays = [replay(perm) for _, _, perm in resolved]
    for (name, n, _perm), (counts, ws) in zip(resolved, replays, strict=True):
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
