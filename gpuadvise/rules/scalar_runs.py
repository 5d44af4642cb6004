"""GA303's trace and SASS side: the scalar global accesses of one thread at consecutive addresses
that one aligned vector access would make (:func:`scalar_pieces`), whether ptxas merged them
already (:func:`sass_at`), and their requests, sectors and L1 clocks as they are and vectorized
(:func:`global_totals`, :func:`piece_numbers`).

The trace's records are read in place, ``_CHUNK`` records at a time: the addresses of every
global access are never copied at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.arrays import sort_in_place, stable_argsort
from gpuadvise.model.banks import active_lanes
from gpuadvise.model.coalescing import global_sectors, record_sectors
from gpuadvise.model.roofline import dram_bytes_per_s, roofline, sm_cycles_per_s, work_ratio
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.estimates import launch_change_estimate, view_traffic
from gpuadvise.rules.findings import Estimate
from gpuadvise.toolchain.sass import same_source_file
from gpuadvise.trace.access import Kind, Space
from gpuadvise.words import counted

__all__ = [
    "L1_SECTORS_PER_CLOCK",
    "SCALAR_NOTE_BELOW",
    "PieceGroup",
    "SassAt",
    "ScalarPiece",
    "global_totals",
    "piece_buffer",
    "piece_numbers",
    "piece_site",
    "sass_at",
    "scalar_pieces",
    "scalar_run_estimate",
    "warp_uniform",
]

L1_SECTORS_PER_CLOCK = 4
"""L1TEX data-stage throughput per SM: 128 bytes (4 sectors) per clock from Volta to Hopper; a
warp-level request takes at least one clock whatever it touches."""

SCALAR_NOTE_BELOW = 1.02
"""Findings whose estimated bound is below this (a DRAM-bound kernel) are notes, not warnings."""
_VECTORS = (16, 8)  # vector widths tried, widest first
_CHUNK = 1 << 16
"""Records whose addresses are compared at once (a few MB): GA303 reads the trace's records in
place, chunk by chunk, instead of copying the addresses of every global access."""


# ---------------------------------------------------------------------------------------------
# The trace side: which scalar accesses of one thread are consecutive


@dataclass
class _Execs:
    """The executions of one PTX global access, ordered by (CTA, warp), then trace order."""

    inst: int
    file: str | None
    line: int | None
    kind: int
    width: int
    rec: np.ndarray  # record indices
    warp_key: np.ndarray
    mask: np.ndarray
    records: np.ndarray  # the trace's records (not a copy): addresses are read chunk by chunk

    def addr_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(addresses, active lanes) of the executions, ``_CHUNK`` records at a time: the
        addresses of every execution are never copied at once."""
        addr = self.records["addr"]
        for i in range(0, len(self.rec), _CHUNK):
            yield addr[self.rec[i : i + _CHUNK]], active_lanes(self.mask[i : i + _CHUNK])


@dataclass(frozen=True)
class ScalarPiece:
    """Consecutive scalar accesses (address order) that one aligned vector access would make."""

    execs: tuple[_Execs, ...]
    vector: int  # bytes

    @property
    def width(self) -> int:
        return self.execs[0].width

    @property
    def executions(self) -> int:
        return len(self.execs[0].rec)

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({e.line for e in self.execs if e.line is not None}))


def _exec_tables(trace: Any, widths: Sequence[int]) -> list[_Execs]:

    records = trace.records
    rec_inst = records["inst"].astype(np.int64)
    order = stable_argsort(rec_inst)
    bounds = np.searchsorted(rec_inst[order], np.arange(len(trace.instructions) + 1))
    out = []
    for info in trace.instructions:
        if info.space != Space.GLOBAL or info.kind not in (Kind.LOAD, Kind.STORE):
            continue
        if info.width not in widths:
            continue
        idx = order[bounds[info.inst] : bounds[info.inst + 1]]
        # the reconciled trace may have widened the records of an instruction ptxas merged
        # (the fields are read one by one: no copy of the records and their addresses)
        keep = (records["width"][idx] == info.width) & (records["space"][idx] == int(Space.GLOBAL))
        idx = idx[keep]
        if not len(idx):
            continue
        wk = (records["cta"][idx].astype(np.int64) << np.int64(20)) + records["warp"][idx].astype(
            np.int64
        )
        o = stable_argsort(wk)
        out.append(
            _Execs(
                inst=info.inst,
                file=os.path.normpath(info.file) if info.file else None,
                line=info.line,
                kind=int(info.kind),
                width=info.width,
                rec=idx[o],
                warp_key=wk[o],
                mask=records["mask"][idx[o]],
                records=records,
            )
        )
    return out


def _follows(a: _Execs, b: _Execs) -> bool:
    """B follows A: executed by the same warps with the same lanes, and every active lane of
    every execution accesses B's element right after A's (address + width)."""
    if len(a.rec) != len(b.rec) or a.width != b.width:
        return False
    if not (np.array_equal(a.warp_key, b.warp_key) and np.array_equal(a.mask, b.mask)):
        return False
    step = np.uint64(a.width)
    b_addr = b.records["addr"]
    # the first execution alone first: most candidate pairs fail there (no copy of the rest)
    act0 = active_lanes(a.mask[:1])[0]
    if not bool(((b_addr[b.rec[0]] == a.records["addr"][a.rec[0]] + step) | ~act0).all()):
        return False
    for i, (addr, act) in enumerate(a.addr_chunks()):
        nxt = b_addr[b.rec[i * _CHUNK : (i + 1) * _CHUNK]]
        if not bool(((nxt == addr + step) | ~act).all()):
            return False
    return True


def _aligned(e: _Execs, nbytes: int) -> bool:
    n = np.uint64(nbytes)
    return all(bool((((addr % n) == 0) | ~act).all()) for addr, act in e.addr_chunks())


def _chains(execs: list[_Execs], max_gap: int) -> list[list[_Execs]]:
    """Chains of accesses at consecutive addresses (same file and kind, lines at most
    ``max_gap`` apart); each access takes as successor the nearest one (program order)."""
    chains: list[list[_Execs]] = []
    groups: dict[tuple[str | None, int, int], list[_Execs]] = {}
    for e in execs:
        groups.setdefault((e.file, e.kind, e.width), []).append(e)
    for group in groups.values():
        order = sorted(group, key=lambda e: e.inst)
        succ: dict[int, _Execs] = {}
        has_pred: set[int] = set()
        for a in order:
            cands = sorted(
                (
                    b
                    for b in order
                    if b is not a
                    and a.line is not None
                    and b.line is not None
                    and abs(a.line - b.line) <= max_gap
                ),
                key=lambda b: (abs(b.inst - a.inst), -b.inst),
            )
            for b in cands:
                if b.inst not in has_pred and _follows(a, b):
                    succ[a.inst] = b
                    has_pred.add(b.inst)
                    break
        for e in order:
            if e.inst in has_pred or e.inst not in succ:
                continue
            chain = [e]
            while chain[-1].inst in succ and len(chain) <= len(order):
                chain.append(succ[chain[-1].inst])
            chains.append(chain)
    return chains


def _pieces(chain: list[_Execs]) -> list[ScalarPiece]:
    """The chain cut, from its head, into the widest aligned vectors (16, then 8 bytes)."""
    out: list[ScalarPiece] = []
    w = chain[0].width
    i = 0
    while i < len(chain):
        for v in _VECTORS:
            n = v // w
            if n >= 2 and i + n <= len(chain) and _aligned(chain[i], v):
                out.append(ScalarPiece(tuple(chain[i : i + n]), v))
                i += n
                break
        else:
            i += 1
    return out


def piece_buffer(trace: Any, piece: ScalarPiece) -> str | None:
    e = piece.execs[0]
    lows = [int(addr[act].min()) for addr, act in e.addr_chunks() if act.any()]
    if not lows:
        return None
    a = min(lows)
    for name, (base, size) in trace.buffers.items():
        if int(base) <= a < int(base) + int(size):
            return str(name)
    return None


# ---------------------------------------------------------------------------------------------
# The SASS side: did ptxas merge them already?


@dataclass(frozen=True)
class SassAt:
    scalar: int  # SASS global instructions of this kind at the lines, of the element's width
    wider: int  # ... wider than the element
    opcodes: tuple[str, ...]
    ptx_scalar: int  # PTX instructions of this kind and width at the lines

    @property
    def known(self) -> bool:
        return self.scalar + self.wider > 0

    @property
    def merged(self) -> bool:
        """ptxas turned some of the scalar PTX accesses into wider SASS ones."""
        return self.known and self.scalar < self.ptx_scalar and self.wider > 0

    def text(self, width: int) -> str:
        if not self.known:
            return "no SASS line information at these lines"
        return (
            f"{self.scalar} x {8 * width}-bit"
            + (f" and {self.wider} wider" if self.wider else "")
            + f" ({', '.join(self.opcodes)})"
        )


def sass_at(
    sass_lines: Sequence[Any], trace: Any, file: str | None, lines: Sequence[int], kind: int,
    width: int,
) -> SassAt:  # fmt: skip
    kname = "load" if kind == 0 else "store"
    scalar = wider = 0
    opcodes: list[str] = []
    for s in sass_lines:
        if s.line not in lines or s.kind != kname or s.space not in ("global", "generic"):
            continue
        if not same_source_file(s.file, file):
            continue
        if s.width_bits == 8 * width:
            scalar += s.count
        elif s.width_bits > 8 * width:
            wider += s.count
        opcodes += [op for op in s.opcodes if op not in opcodes]
    ptx = sum(
        1
        for i in trace.instructions
        if i.line in lines
        and int(i.space) == 0
        and int(i.kind) == kind
        and i.width == width
        and same_source_file(i.file, file)
    )
    return SassAt(scalar, wider, tuple(opcodes), ptx)


@dataclass(frozen=True)
class PieceGroup:
    """The pieces of one finding (one source line, one buffer, one kind)."""

    pieces: tuple[ScalarPiece, ...]
    buffer: str | None
    sass: SassAt


def global_totals(records: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """L1 clocks and distinct sectors of every global access of the trace, taken ``_CHUNK``
    records at a time (no copy of the global records), and the sectors of each record (the
    coalescing model's, :func:`global_sectors`, made once per trace; -1 for the records of
    other spaces), for :func:`piece_numbers`."""
    is_global = records["space"] == int(Space.GLOBAL)
    glob = np.flatnonzero(is_global)
    per_record = np.where(is_global, global_sectors(records).sectors, -1).astype(np.int64)
    sectors: list[np.ndarray] = []
    for i in range(0, len(glob), _CHUNK):
        at = glob[i : i + _CHUNK]
        single = per_record[at] == 1
        if single.any():
            # a record within one sector (a broadcast, a lone lane): its first active lane's
            sub = at[single]
            mask = records["mask"][sub]
            lane = np.bitwise_count((mask & (np.uint32(0) - mask)) - np.uint32(1))
            sectors.append(_distinct_values(records["addr"][sub, lane] >> np.uint64(5)))
            at = at[~single]
            if not len(at):
                continue
        # consecutive records are a slice of the trace, not a copy
        part = records[at[0] : at[-1] + 1] if at[-1] - at[0] == len(at) - 1 else records[at]
        sectors.append(_distinct_values(_lane_sectors(part)))
    # (each chunk's values sorted already: a few long runs, merged, issue 31)
    distinct = len(_distinct_values(np.concatenate(sectors))) if sectors else 0
    per_clock = np.maximum(1, np.ceil(per_record[glob] / L1_SECTORS_PER_CLOCK))
    # a sampled loop's records stand for the skipped: record_weights of the global records, from
    # their field alone (no copy of the records)
    extra = records["extra"][glob]
    weight = extra.astype(np.float64) + 1.0 if extra.any() else None
    clocks = float(per_clock.sum() if weight is None else (per_clock * weight).sum())
    return {"l1_clocks_all": clocks, "distinct_sectors_all": int(distinct)}, per_record


def _lane_sectors(records: np.ndarray) -> np.ndarray:
    """The 32-byte sectors the active lanes of ``records`` touch (each lane's first and last
    byte's), with repeats: the set of :func:`gpuadvise.model.coalescing.touched_lines`'s without
    its sort of each record's lanes (the caller wants the distinct sectors of all records)."""
    act = active_lanes(records["mask"])
    addr = records["addr"][act]
    width = np.broadcast_to(records["width"][:, None], act.shape)[act].astype(np.uint64)
    first = addr >> np.uint64(5)
    last = (addr + np.maximum(width, np.uint64(1)) - np.uint64(1)) >> np.uint64(5)
    return np.concatenate([first, last[last != first]])


def _distinct_values(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` by one sort (numpy 2.3+'s ``np.unique`` is a hash
    table, many times slower on millions of values). A value equal to the one before it adds
    nothing to the set: where a quarter or more are (a coalesced request's lanes, 8 to a
    sector), only each run's first is sorted (the same values from fewer, issue 31), by
    :func:`~gpuadvise.arrays.sort_in_place` (sorted chunks joined: merged as they are)."""
    if len(a) < 2:
        return np.sort(a)
    head = np.empty(len(a), bool)
    head[0] = True
    np.not_equal(a[1:], a[:-1], out=head[1:])
    if np.count_nonzero(head) * 4 <= len(a) * 3:
        s = a[head]  # (a copy of its own: sorted in place)
    else:
        s = a.copy()
    del head
    sort_in_place(s)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) > 1 else s


def piece_numbers(trace: Any, g: PieceGroup, per_record: np.ndarray) -> dict[str, Any]:
    """Requests, L1 sectors and clocks of the group's accesses as they are and vectorized
    (over the traced CTAs); ``per_record``: each global record's sectors (:func:`global_totals`)."""
    records = trace.records
    before_req = after_req = 0
    before_sec = after_sec = 0
    before_clk = after_clk = 0.0
    executions = 0
    for p in g.pieces:
        rec = np.concatenate([e.rec for e in p.execs])
        s = per_record[rec]
        if len(s) and int(s.min()) < 0:  # not a global record (never, as the tables are made)
            s = record_sectors(records[rec]).sectors
        # a sampled loop's records stand for the iterations skipped (1 + extra executions each):
        # the counts are the full run's, as the L1 clocks of global_totals are
        w = records["extra"][rec].astype(np.int64) + 1
        before_req += int(w.sum())
        before_sec += int((s * w).sum())
        before_clk += float((np.maximum(1, np.ceil(s / L1_SECTORS_PER_CLOCK)) * w).sum())
        vec = records[p.execs[0].rec].copy()
        vec["width"] = p.vector
        sv = record_sectors(vec).sectors
        wv = vec["extra"].astype(np.int64) + 1
        after_req += int(wv.sum())
        after_sec += int((sv * wv).sum())
        after_clk += float((np.maximum(1, np.ceil(sv / L1_SECTORS_PER_CLOCK)) * wv).sum())
        executions += int(wv.sum())
    return {
        "requests_before": before_req,
        "requests_after": after_req,
        "requests_saved": before_req - after_req,
        "sectors_before": before_sec,
        "sectors_after": after_sec,
        "l1_clocks_saved": before_clk - after_clk,
        "executions": executions,
    }


def piece_site(
    trace: Any, piece: ScalarPiece, file: str | None, line: int
) -> tuple[str | None, int]:
    """(file, line) where a piece is reported: its first access's line in the user's source (the
    call site of code inlined from a header, as the trace reports it), else ``file``/``line``."""
    at_file, at_line = trace.line_of(piece.execs[0].inst)
    return (at_file, at_line) if at_line is not None else (file, line)


def scalar_pieces(trace: Any, max_gap: int) -> list[ScalarPiece]:
    """Every run of consecutive 4- or 8-byte global accesses of one thread (lines at most
    ``max_gap`` apart) cut into the widest aligned vectors."""
    execs = _exec_tables(trace, (4, 8))
    if not execs:
        return []
    return [p for c in _chains(execs, max_gap) for p in _pieces(c)]


def warp_uniform(piece: ScalarPiece) -> bool:
    """Whether the piece's first access reads or writes one address on all the active lanes of
    a warp (two or more) in nine of ten executions: a broadcast, one request of one sector
    whatever its width, as the vector's would be; the vector saves issue slots only, and the
    elements taken apart in registers cost some back: GA303 reports it as a note. cmpfhd's
    shape (``rmu[m]``, ``imu[m]`` the same for every thread, beside ``__cosf``/``__sinf``)
    measured 0.88x with float4 loads on an H200 (.gpu/s8-vec probe, 2026-11-29)."""
    uniform = multi = 0
    for addr, active in piece.execs[0].addr_chunks():
        n = active.sum(axis=1)
        top = np.iinfo(np.uint64).max
        lo = np.where(active, addr, top).min(axis=1)
        hi = np.where(active, addr, 0).max(axis=1)
        many = n >= 2
        multi += int(many.sum())
        uniform += int((many & (lo == hi)).sum())
    return multi > 0 and uniform >= 0.9 * multi


def scalar_run_estimate(
    ctx: RuleContext, w: int, per_thread: int, nums: dict[str, Any]
) -> Estimate:
    """GA303's bound on the launch roofline (its docstring, "How the estimate is made"): ``w``, the
    element's bytes; ``per_thread``, the instructions one thread saves."""
    trace = ctx.trace
    d = ctx.device
    scale = float(trace.scale)
    cyc_before = nums["l1_clocks_all"]
    cyc_after = cyc_before - nums["l1_clocks_saved"]
    inputs: dict[str, Any] = {
        "requests_saved": nums["requests_saved"] * scale,
        "instructions_saved_per_thread": per_thread,
        "l1_clocks": cyc_before * scale,
        "l1_clocks_saved": nums["l1_clocks_saved"] * scale,
        "scale": scale,
    }
    rate, bandwidth = sm_cycles_per_s(d), dram_bytes_per_s(d)
    if rate is None or bandwidth is None:
        sp = work_ratio(cyc_before, nums["l1_clocks_saved"])
        return Estimate(
            round(max(sp, 1.0), 3),
            "upper-bound",
            f"L1-bound kernel: {cyc_before:.0f} -> {cyc_after:.0f} L1 clocks over the traced "
            f"CTAs (no clock or bandwidth for {d.name}: DRAM time ignored)",
            inputs,
        )
    try:
        base = view_traffic(d, ctx.trace_view)
    except ModelUnavailable:
        base = None
    if base is not None:
        # the launch roofline: the same sectors from L2 and DRAM, fewer L1 requests and
        # instructions
        after = replace(
            base,
            l1_cycles=max(base.l1_cycles - nums["l1_clocks_saved"] * scale, 0.0),
            instructions=max(base.instructions - nums["requests_saved"] * scale, 0.0),
        )
        inputs["dram_bytes"] = base.dram_bytes
        est = launch_change_estimate(
            d,
            base,
            after,
            f"{counted(per_thread, f'{w}-byte instruction')} per thread vectorized",
            inputs,
        )
        if est is not None:
            like = est.like_for_like
            if like is not None and like < SCALAR_NOTE_BELOW:
                what = {"dram": "DRAM", "l2": "L2", "latency": "latency"}.get(
                    str(inputs["bound_by_after"]), str(inputs["bound_by_after"])
                )
                return replace(
                    est,
                    method=f"{what}-bound: vectorizing moves the same sectors, so it saves "
                    f"{counted(per_thread, f'{w}-byte instruction')} per thread and L1 work, not time; "
                    + est.method,
                )
            return est
    dram_bytes = nums["distinct_sectors_all"] * 32 * scale
    r = roofline(cyc_before * scale, nums["l1_clocks_saved"] * scale, rate, dram_bytes, bandwidth)
    t_l1, t_saved, t_dram = r.pipe_s, r.saved_s, r.dram_s
    sp = max(r.speedup, 1.0)
    inputs.update(
        {"l1_time_us": t_l1 * 1e6, "l1_saved_us": t_saved * 1e6, "dram_time_us": t_dram * 1e6,
         "dram_bytes": dram_bytes}
    )  # fmt: skip
    bound = (
        f"DRAM-bound: vectorizing fetches the same sectors from DRAM ({dram_bytes / 1e6:.1f} "
        f"MB take {t_dram * 1e6:.2f} us at {d.mem_bandwidth_gbps:.0f} GB/s, the L1 work of all "
        f"global accesses {t_l1 * 1e6:.2f} us), so it saves {per_thread} {w}-byte "
        "instruction(s) per thread and L1 work, not time"
        if r.dram_bound
        else f"L1-bound: {t_l1 * 1e6:.2f} us of L1 work (1 request or 4 sectors per SM clock "
        f"at {d.sm_clock_mhz} MHz), {t_saved * 1e6:.2f} us of it saved; DRAM "
        f"{t_dram * 1e6:.2f} us"
    )
    return Estimate(
        round(sp, 3),
        "upper-bound",
        f"roofline over the launch, max(L1, DRAM) before / after: {bound}. Issue slots and "
        "latency are not modelled",
        inputs,
    )
