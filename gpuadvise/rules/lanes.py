"""What the lanes of a warp do alike, from the trace: GA105's duplicate work across the lanes (a
kernel that reads ``threadIdx.x`` only to guard its work, each thread then doing the whole of it),
which GA102 also reads so as not to offer more CTAs to a kernel whose threads are copies; and
whether the warps of a CTA, and the CTAs along x, are copies of each other too (GA105's launch
with one thread where the copies were).

Pure: the trace's records, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuadvise.memo import IdentityMemo
from gpuadvise.model.banks import active_lanes, one_address
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = ["UniformLanes", "copies_of", "uniform_lanes"]


@dataclass(frozen=True)
class UniformLanes:
    """The global requests with at least two active lanes, and the shares of them (loads,
    stores) whose active lanes all name one address; the mean active lanes of those; the first
    such store instruction."""

    load_requests: int
    store_requests: int
    load_share: float
    store_share: float
    lanes: float
    first_store_inst: int

    def duplicated(self, min_share: float = 0.95) -> bool:
        """Every lane does the same work: the stores (some) and the loads (if any) have one
        address for all their lanes, at least ``min_share`` of them."""
        return (
            self.store_requests > 0
            and self.store_share >= min_share
            and (self.load_requests == 0 or self.load_share >= min_share)
        )


_MEMO: IdentityMemo[AccessTrace, UniformLanes | None] = IdentityMemo()


def uniform_lanes(trace: AccessTrace) -> UniformLanes | None:
    """The :class:`UniformLanes` of the trace's global loads and stores; None without a store of
    two or more active lanes. Computed once per trace (GA105, GA102 and GA106 ask)."""
    return _MEMO(trace, _uniform_lanes)


_GATHER_RECORDS = 1 << 14
"""Records gathered at a time by :func:`_one_address_at` (one_address's own chunk)."""


def _one_address_at(records: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~gpuadvise.model.banks.one_address` of ``records[idx]``, the records gathered a
    chunk at a time: no copy of every global record's lanes (the wide record) at once."""
    if len(idx) == len(records):
        return one_address(records)
    lanes = np.empty(len(idx), np.int64)
    one = np.empty(len(idx), bool)
    for a in range(0, len(idx), _GATHER_RECORDS):
        b = a + _GATHER_RECORDS
        lanes[a:b], one[a:b] = one_address(records[idx[a:b]])
    return lanes, one


def _uniform_lanes(trace: AccessTrace) -> UniformLanes | None:
    r = trace.records
    gidx = np.flatnonzero(r["space"] == int(Space.GLOBAL))
    if not len(gidx):
        return None
    lanes, single = _one_address_at(r, gidx)
    many = lanes >= 2
    one = many & single
    kind = r["kind"][gidx]
    store = kind == int(Kind.STORE)
    load = kind == int(Kind.LOAD)
    n_store, n_load = int((many & store).sum()), int((many & load).sum())
    if n_store == 0:
        return None
    uni_store = np.flatnonzero(one & store)
    both = one & (store | load)
    return UniformLanes(
        load_requests=n_load,
        store_requests=n_store,
        load_share=float((one & load).sum()) / n_load if n_load else 0.0,
        store_share=len(uni_store) / n_store,
        lanes=float(lanes[both].mean()) if both.any() else 0.0,
        first_store_inst=int(r["inst"][gidx[uni_store[0]]]) if len(uni_store) else -1,
    )


def _signature(records: np.ndarray) -> bytes:
    """The distinct (instruction, kind, address) of the active lanes of ``records``."""
    lanes = active_lanes(records["mask"])
    inst = np.broadcast_to(records["inst"][:, None], lanes.shape)[lanes].astype(np.uint64)
    kind = np.broadcast_to(records["kind"][:, None], lanes.shape)[lanes].astype(np.uint64)
    addr = records["addr"][lanes].astype(np.uint64)
    # the rows of np.unique(rows, axis=0), in its order (by instruction, then kind, then
    # address), from a lexsort of the columns: np.unique compares the rows as structured
    # records, many times slower on the millions of lane accesses of a large trace
    rows = np.stack([inst, kind, addr], axis=1)[np.lexsort((addr, kind, inst))]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    return np.ascontiguousarray(rows[first]).tobytes()


def copies_of(
    trace: AccessTrace, grid: tuple[int, int, int], max_ctas: int = 8
) -> tuple[bool, bool]:
    """(the warps of each traced CTA that access global memory access the same addresses at the
    same instructions, the traced CTAs that share a ``blockIdx.y``/``z`` do too: the CTAs along
    x are copies), over the first ``max_ctas`` traced CTAs; the second is False unless two of
    them share a row."""
    r = trace.records
    # no copy of every global record (the wide rows): each CTA's, when its turn comes
    is_glob = r["space"] == int(Space.GLOBAL)
    if not is_glob.any():
        return False, False
    ctas = np.unique(r["cta"][is_glob])[:max_ctas].tolist()
    warps_alike = True
    rows: dict[int, set[bytes]] = {}
    for c in ctas:
        mine = r[is_glob & (r["cta"] == c)]
        sig = None
        if warps_alike:  # once two warps differ, only the CTAs' signatures are asked for
            # each warp's records in their order (a stable sort by warp, split where it
            # changes), not one mask over the CTA's records per warp
            order = np.argsort(mine["warp"], kind="stable")
            w_sorted = mine["warp"][order]
            cuts = np.flatnonzero(w_sorted[1:] != w_sorted[:-1]) + 1
            sigs = {_signature(mine[part]) for part in np.split(order, cuts)}
            warps_alike = len(sigs) == 1
            if warps_alike:  # the CTA's distinct rows are its warps' own: the same bytes
                sig = next(iter(sigs))
        rows.setdefault(int(c) // max(grid[0], 1), set()).add(
            _signature(mine) if sig is None else sig
        )
    shared_row = any(len([c for c in ctas if int(c) // max(grid[0], 1) == y]) > 1 for y in rows)
    return warps_alike, shared_row and all(len(s) == 1 for s in rows.values())
