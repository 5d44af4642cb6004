"""Reconcile PTX-level accesses with the SASS memory instructions of the same source line.

The trace records what the PTX does; the hardware counts what the SASS does, and ptxas changes the
accesses: it merges scalar loads and stores of one thread at consecutive addresses into vector ones
(16 ``ld.shared.f32`` became 4 ``LDS.128``, HARDWARE.md §2) and, more rarely, splits a vector access.
:func:`reconcile` rewrites the records so that the models count SASS-level accesses.

The matching rule, per (source line, space, kind), for the shared and global spaces:

1. Widths. The PTX side is the multiset of widths of the line's static PTX memory instructions of
   that space and kind (``trace.instructions``: a vector access counts whole); the SASS side is
   :func:`gpuadvise.toolchain.sass.memory_summary` of the kernel (``width_bits // 8``, ``count`` times). SASS
   ``generic`` accesses stand in for a space that has no SASS entry of its own at that line.
2. Equal multisets: the line is left alone (``match``). No SASS entry at all: left alone
   (``no-sass``; e.g. SASS without line info).
3. Merge, when the SASS widths differ and the byte totals agree. Instruction B *follows* A
   when, pairing the j-th execution of A by a warp (CTA and warp index) with the j-th execution of
   B by the same warp, every pair has the same active mask and every active lane's address of B is
   A's address plus A's width -- on all executions in the trace (in either program order: ptxas
   merges ``row[1]; row[0]`` too). Each instruction takes as successor, among those that follow
   it and have no predecessor yet, the one nearest to it in program order (instruction index). The
   chains so formed are cut, from their head, into pieces whose widths add up to a SASS width, the
   widest first, while the SASS line still has instructions of that width left and the piece's
   first instruction is aligned to that width on every active lane of every execution; a piece of
   one instruction keeps its width. When every chain is cut so, the widths of the pieces fit
   in the SASS multiset, and the byte totals of the line (unexecuted PTX instructions included)
   agree, each piece becomes one record per execution: the record of its first (lowest-address)
   instruction, with the piece's width; the others' records are dropped (``merged``). Merging is
   a static rewrite by ptxas; requiring the address relation on every execution is the evidence.
4. Split, when every PTX width is a multiple of a single SASS width ``W`` and the SASS line has
   exactly the resulting number of ``W``-wide instructions: every record of width ``w`` becomes
   ``w / W`` records of width ``W`` at ``a, a + W, ...``, in place (``split``).
5. Anything else is left alone and reported (``unresolved``), as are SASS accesses with no PTX
   counterpart (``sass-only``; e.g. the ``LDS.64`` of a compare-and-swap loop).
6. Aggregated atomics. When every SASS instruction of a line's shared atomics (or reductions,
   which ``ATOMS`` executes too) is ``ATOMS.POPC.INC`` -- what ptxas makes of an increment by 1
   whose result is unused, ``atomicAdd(&s, 1)`` -- the hardware updates each distinct word once
   for all the lanes that name it (it adds the population count of those lanes): each record
   keeps one lane per distinct address, its lowest (``aggregated``). When only some of the line's
   SASS atomics are, the line's PTX atomics (program order) and SASS ones (address order) are
   paired one to one, if they are as many and of one width (an inlined ``atomicAdd`` has one
   header line for all its call sites). So 32 lanes on one word are
   one access, 1 wavefront, where an ``ATOMS.ADD`` takes 32 (measured on an H100:
   ``benchmarks/atomics_probe``; :mod:`gpuadvise.model.banks` counts the lanes that remain).
   ptxas also aggregates a warp's atomic on a warp-uniform address into one elected lane
   (``VOTEU``/``REDUX`` then a predicated ``ATOMS.MAX [UR]``: ``atomicMax(&m, v)`` on a
   ``__shared__ int m``); the line summary has no operands, so the caller names those lines
   (``warp_aggregated``, from :func:`gpuadvise.toolchain.sass.warp_aggregated_atomics`) and
   their atomics are aggregated the same way: one lane per distinct address, one per request.

Records keep their ``inst`` (a merged record its lowest-address instruction's), so the per-line
aggregation of the models is unchanged. When nothing is rewritten (every line ``match``,
``no-sass`` or ``unresolved``), :attr:`Reconciliation.records` is the trace's own array, not a
copy: a trace of millions of records is not held twice. Lines are compared by
``os.path.normpath`` of the file; a PTX file that matches no SASS file is matched by base name
when that is unique. Summarize the SASS with the same location convention as the trace
(innermost locations, ``call_site=False``).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.model.banks import active_lanes
from gpuadvise.toolchain.sass import SassMemLine
from gpuadvise.trace.access import AccessTrace, InstrInfo, Kind, Space

__all__ = ["ReconcileNote", "Reconciliation", "reconcile"]

_SPACES = {Space.SHARED: "shared", Space.GLOBAL: "global"}
_KINDS = {
    Kind.LOAD: "load",
    Kind.STORE: "store",
    Kind.ATOMIC: "atomic",
    Kind.REDUCTION: "reduction",
}

Key = tuple[str | None, int | None, str, str]  # (file, line, space, kind)


@dataclass(frozen=True)
class ReconcileNote:
    """What reconciliation did at one (line, space, kind), with the evidence.

    ``action``: ``match``, ``merged``, ``split``, ``aggregated``, ``unresolved``, ``no-sass`` or
    ``sass-only``.
    ``ptx``/``sass``: (width in bytes, static instruction count) pairs; ``opcodes``: the SASS
    opcodes; ``records_before``/``records_after``: records of the line in the trace before and
    after; ``insts``: the PTX instructions involved.
    """

    file: str | None
    line: int | None
    space: str
    kind: str
    action: str
    ptx: tuple[tuple[int, int], ...]
    sass: tuple[tuple[int, int], ...]
    opcodes: tuple[str, ...]
    records_before: int
    records_after: int
    detail: str
    insts: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["ptx"] = [list(x) for x in self.ptx]
        d["sass"] = [list(x) for x in self.sass]
        d["opcodes"] = list(self.opcodes)
        d["insts"] = list(self.insts)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReconcileNote:
        return cls(
            **{
                **data,
                "ptx": tuple((int(w), int(c)) for w, c in data["ptx"]),
                "sass": tuple((int(w), int(c)) for w, c in data["sass"]),
                "opcodes": tuple(data["opcodes"]),
                "insts": tuple(int(i) for i in data.get("insts", ())),
            }
        )


@dataclass(frozen=True)
class Reconciliation:
    """Reconciled records (dtype RECORD, in trace order) and one note per line, space and kind."""

    records: np.ndarray
    notes: tuple[ReconcileNote, ...]

    @property
    def changed(self) -> bool:
        return any(n.action in ("merged", "split", "aggregated") for n in self.notes)

    def apply(self, trace: AccessTrace) -> AccessTrace:
        """``trace`` with the reconciled records."""
        return dataclasses.replace(trace, records=self.records)


# --------------------------------------------------------------------------------------------
# Matching lines


def _norm(file: str | None) -> str | None:
    return os.path.normpath(file) if file else None


def _file_map(
    ptx_files: Iterable[str | None], sass_files: Iterable[str | None]
) -> dict[str | None, str | None]:
    sass_set = {f for f in sass_files if f}
    by_base: dict[str, list[str]] = {}
    for f in sass_set:
        by_base.setdefault(os.path.basename(f), []).append(f)
    out: dict[str | None, str | None] = {}
    for pf in ptx_files:
        if not pf or pf in sass_set:
            out[pf] = pf
            continue
        cands = by_base.get(os.path.basename(pf), [])
        out[pf] = cands[0] if len(cands) == 1 else pf
    return out


def _sass_groups(sass: Sequence[SassMemLine]) -> dict[Key, list[SassMemLine]]:
    groups: dict[Key, list[SassMemLine]] = {}
    for s in sass:
        groups.setdefault((_norm(s.file), s.line, s.space, s.kind), []).append(s)
    return groups


# --------------------------------------------------------------------------------------------
# Per-instruction execution tables


@dataclass
class _Execs:
    """The executions of one PTX instruction, ordered by (cta, warp), then trace order."""

    inst: int
    width: int
    rec: np.ndarray  # record indices
    warp_key: np.ndarray  # (cta, warp) as one sortable key per execution
    mask: np.ndarray
    addr: np.ndarray  # (n, 32) uint64
    act: np.ndarray  # (n, 32) bool


def _execs(records: np.ndarray, rec_idx: np.ndarray, inst: int, width: int) -> _Execs:
    r = records[rec_idx]
    wk = (r["cta"].astype(np.int64) << np.int64(20)) + r["warp"].astype(np.int64)
    order = np.argsort(wk, kind="stable")
    r = r[order]
    return _Execs(
        inst=inst,
        width=width,
        rec=rec_idx[order],
        warp_key=wk[order],
        mask=r["mask"],
        addr=np.ascontiguousarray(r["addr"]),
        act=active_lanes(r["mask"]),
    )


def _follows(a: _Execs, b: _Execs) -> bool:
    """B follows A: same warps, same masks, B's addresses = A's + A's width, every execution."""
    if len(a.rec) != len(b.rec) or len(a.rec) == 0:
        return False
    act0 = a.act[0]
    if a.mask[0] != b.mask[0] or not ((b.addr[0] == a.addr[0] + np.uint64(a.width)) | ~act0).all():
        return False
    if not (np.array_equal(a.warp_key, b.warp_key) and np.array_equal(a.mask, b.mask)):
        return False
    return bool(((b.addr == a.addr + np.uint64(a.width)) | ~a.act).all())


def _aligned(e: _Execs, width: int) -> bool:
    return bool((((e.addr % np.uint64(width)) == 0) | ~e.act).all())


def _chains(execs: list[_Execs]) -> list[list[_Execs]]:
    """Successor chains; each instruction's successor the nearest (in program order) that follows."""
    order = sorted(execs, key=lambda e: e.inst)
    succ: dict[int, _Execs] = {}
    has_pred: set[int] = set()
    for i, a in enumerate(order):
        # candidates by distance in program order, after then before (ties: the later one)
        cands = sorted(
            (b for j, b in enumerate(order) if j != i),
            key=lambda b: (abs(b.inst - a.inst), -b.inst),
        )
        for b in cands:
            if b.inst not in has_pred and _follows(a, b):
                succ[a.inst] = b
                has_pred.add(b.inst)
                break
    chains = []
    for e in order:
        if e.inst in has_pred:
            continue
        chain = [e]
        while chain[-1].inst in succ:
            chain.append(succ[chain[-1].inst])
        chains.append(chain)
    return chains


def _cut(chains: list[list[_Execs]], budget: Counter[int]) -> list[list[_Execs]] | None:
    """Cut the chains into pieces of SASS widths (widest first, aligned); None if impossible."""
    left = Counter(budget)
    widths = sorted(left, reverse=True)
    pieces: list[list[_Execs]] = []
    for chain in chains:
        i = 0
        while i < len(chain):
            taken = None
            for w in widths:
                if left[w] <= 0:
                    continue
                total, j = 0, i
                while j < len(chain) and total < w:
                    total += chain[j].width
                    j += 1
                if total == w and (j - i == 1 or _aligned(chain[i], w)):
                    taken = (w, j)
                    break
            if taken is None:
                return None
            w, j = taken
            left[w] -= 1
            pieces.append(chain[i:j])
            i = j
    return pieces


# --------------------------------------------------------------------------------------------


def _pairs(c: Counter[int]) -> tuple[tuple[int, int], ...]:
    return tuple(sorted(c.items()))


def _fmt(c: Counter[int]) -> str:
    return ", ".join(f"{n} x {w} B" for w, n in sorted(c.items())) or "none"


@dataclass
class _Edits:
    """Pending rewrites of the records: dropped, new widths, copies per record (splits), masks
    (aggregated atomics)."""

    drop: np.ndarray
    width: np.ndarray
    repeat: np.ndarray
    mask: np.ndarray


_POPC_INC = "ATOMS.POPC.INC"
_AGG_CHUNK = 4096  # records compared lane by lane at a time


def _first_lane_per_address(records: np.ndarray, idx: np.ndarray, edits: _Edits) -> int:
    """Reduce the masks of records ``idx`` to the lowest active lane of each distinct address;
    returns how many lanes were dropped."""
    lane = np.arange(32, dtype=np.uint64)
    top = np.uint64(1) << np.uint64(63)
    dropped = 0
    for start in range(0, len(idx), _AGG_CHUNK):
        sel = idx[start : start + _AGG_CHUNK]
        addr = records["addr"][sel]
        act = active_lanes(records["mask"][sel])
        if not len(sel) or int(addr.max()) >= 1 << 58:  # (no address is that high)
            keep = _first_lanes_pairwise(addr, act)
        else:
            # one sort a row of (inactive, address, lane) packed in 64 bits: each address's
            # lowest active lane comes first among its lanes, the inactive lanes last
            key = (addr << np.uint64(5)) | lane
            key[~act] |= top
            key.sort(axis=1)
            first = key < top
            a = key >> np.uint64(5)
            first[:, 1:] &= a[:, 1:] != a[:, :-1]
            keep = np.zeros_like(act)
            rows = np.broadcast_to(np.arange(len(sel))[:, None], key.shape)
            keep[rows[first], (key[first] & np.uint64(31)).astype(np.int64)] = True
        dropped += int(act.sum() - keep.sum())
        edits.mask[sel] = np.packbits(keep, axis=1, bitorder="little").view(np.uint32)[:, 0]
    return dropped


def _first_lanes_pairwise(addr: np.ndarray, act: np.ndarray) -> np.ndarray:
    """(n, 32) bool: the active lanes no lower active lane of their row shares an address with
    (every pair of lanes compared)."""
    lower = np.tril(np.ones((32, 32), dtype=bool), -1)  # [j, k]: lane k comes before lane j
    same = addr[:, :, None] == addr[:, None, :]
    same &= act[:, None, :] & lower[None, :, :]
    return act & ~same.any(axis=2)


def _aggregate(
    records: np.ndarray,
    infos: list[InstrInfo],
    recs_idx: list[np.ndarray],
    entries: Sequence[SassMemLine],
    edits: _Edits,
    warp_reduced: bool = False,
) -> str | None:
    """Rule 6 for one line's shared atomics: the detail, or None when it does not apply.

    Every PTX atomic of the line is aggregated when every SASS atomic of the line is
    ``ATOMS.POPC.INC``. When only some are (an inlined ``atomicAdd`` has one header line for all
    its callers, and ptxas's line table does not tell them apart), the line's PTX atomics, in
    program order, are paired with its SASS ones, in address order, when both have one width and
    as many instructions, and those paired with an ``ATOMS.POPC.INC`` are aggregated."""
    opcodes = [op for entry in entries for op in entry.opcodes]
    if warp_reduced and infos:
        idx = np.concatenate([recs_idx[k] for k in range(len(infos))])
        dropped = _first_lane_per_address(records, idx, edits)
        return (
            f"{', '.join(dict.fromkeys(opcodes))} on a warp-uniform address after a REDUX of "
            f"the warp's values: one elected lane updates it ({dropped} lane updates of "
            f"{len(idx)} warp executions folded into others)"
        )
    if not any(op.startswith(_POPC_INC) for op in opcodes):
        return None
    if all(op.startswith(_POPC_INC) for op in opcodes):
        chosen = list(range(len(infos)))
    else:
        seq = entries[0].sequence if len(entries) == 1 else ()
        order = sorted(range(len(infos)), key=lambda k: infos[k].inst)
        if len(seq) != len(infos) or len({i.width for i in infos}) != 1:
            return None
        chosen = [k for k, op in zip(order, seq, strict=True) if op.startswith(_POPC_INC)]
    if not chosen:
        return None
    idx = np.concatenate([recs_idx[k] for k in chosen])
    dropped = _first_lane_per_address(records, idx, edits)
    insts = ", ".join(str(infos[k].inst) for k in chosen)
    return (
        f"ATOMS.POPC.INC (insts {insts}): the lanes that name one word update it once "
        f"({dropped} lane updates of {len(idx)} warp executions folded into others)"
    )


def _decide(
    records: np.ndarray,
    infos: list[InstrInfo],
    recs_idx: list[np.ndarray],
    ptx_w: Counter[int],
    sass_w: Counter[int],
    ops: str,
    edits: _Edits,
) -> tuple[str, int, str]:
    """(action, records after, detail) for one line, space and kind; records edits in ``edits``."""
    before = int(sum(len(r) for r in recs_idx))
    if not infos:
        return "sass-only", 0, f"SASS {_fmt(sass_w)} ({ops}) has no PTX access"
    if not sass_w:
        return "no-sass", before, "no SASS memory instruction of this kind at this line"
    if ptx_w == sass_w:
        return "match", before, f"PTX and SASS agree: {_fmt(ptx_w)}"
    ptx_bytes = sum(w * c for w, c in ptx_w.items())
    sass_bytes = sum(w * c for w, c in sass_w.items())
    if ptx_bytes != sass_bytes:
        return (
            "unresolved",
            before,
            f"PTX {_fmt(ptx_w)} ({ptx_bytes} B per thread) and SASS {_fmt(sass_w)} "
            f"({sass_bytes} B) do not move the same bytes",
        )

    # split: one SASS width dividing every PTX width (byte totals agree, so counts do too)
    if len(sass_w) == 1:
        (sw,) = sass_w
        if all(w % sw == 0 for w in ptx_w) and max(ptx_w) > sw:
            after = 0
            for info, idx in zip(infos, recs_idx, strict=True):
                k = info.width // sw
                if k > 1:
                    edits.repeat[idx] = k
                    edits.width[idx] = sw
                after += k * len(idx)
            return "split", after, f"PTX {_fmt(ptx_w)} split into SASS {_fmt(sass_w)} ({ops})"

    # merge
    executed = [
        _execs(records, idx, info.inst, info.width)
        for info, idx in zip(infos, recs_idx, strict=True)
        if len(idx)
    ]
    pieces = _cut(_chains(executed), sass_w) if executed else None
    if pieces is None:
        return (
            "unresolved",
            before,
            f"PTX {_fmt(ptx_w)} vs SASS {_fmt(sass_w)} ({ops}): no chains of instructions at "
            "consecutive, aligned addresses make up the SASS widths",
        )
    merged = [p for p in pieces if len(p) > 1]
    after = before
    for piece in merged:
        edits.width[piece[0].rec] = sum(x.width for x in piece)
        for x in piece[1:]:
            edits.drop[x.rec] = True
            after -= len(x.rec)
    got: Counter[int] = Counter(sum(x.width for x in p) for p in pieces)
    desc = "; ".join(
        f"insts {'+'.join(str(x.inst) for x in p)} -> {sum(x.width for x in p)} B" for p in merged
    )
    return (
        "merged",
        after,
        f"PTX {_fmt(ptx_w)} -> SASS {_fmt(sass_w)} ({ops}): {len(merged)} merged accesses "
        f"(executed instructions now {_fmt(got)}): {desc}",
    )


def reconcile(
    trace: AccessTrace,
    sass: Sequence[SassMemLine],
    warp_aggregated: Collection[tuple[str | None, int | None]] = (),
) -> Reconciliation:
    """Rewrite ``trace.records`` to the SASS-level accesses of each source line (module doc).
    ``warp_aggregated``: the lines (as ``sass`` names them) whose shared atomics ptxas made one
    elected lane's update after a ``REDUX`` of the warp (rule 6)."""
    aggregated_lines = {(_norm(f), ln) for f, ln in warp_aggregated}
    records = trace.records
    n = len(records)
    insts: Sequence[InstrInfo] = trace.instructions
    sass_by_key = _sass_groups(sass)
    fmap = _file_map({_norm(i.file) for i in insts}, {k[0] for k in sass_by_key})

    ptx_by_key: dict[Key, list[InstrInfo]] = {}
    for info in insts:
        if info.space not in _SPACES:
            continue
        key = (fmap.get(_norm(info.file)), info.line, _SPACES[info.space], _KINDS[info.kind])
        ptx_by_key.setdefault(key, []).append(info)

    rec_inst = records["inst"].astype(np.int64)
    order = np.argsort(rec_inst, kind="stable")
    bounds = np.searchsorted(rec_inst[order], np.arange(len(insts) + 1))
    edits = _Edits(
        drop=np.zeros(n, dtype=bool),
        width=records["width"].copy(),
        repeat=np.ones(n, dtype=np.int64),
        mask=records["mask"].copy(),
    )
    notes: list[ReconcileNote] = []
    keys = sorted(
        set(ptx_by_key) | {k for k in sass_by_key if k[2] in _SPACES.values()},
        key=lambda k: (k[0] or "", k[1] or 0, k[2], k[3]),
    )
    for key in keys:
        infos = ptx_by_key.get(key, [])
        entries = sass_by_key.get(key) or sass_by_key.get((key[0], key[1], "generic", key[3]), [])
        ptx_w: Counter[int] = Counter(i.width for i in infos)
        sass_w: Counter[int] = Counter()
        for entry in entries:
            sass_w[entry.width_bits // 8] += entry.count
        opcodes = tuple(dict.fromkeys(op for entry in entries for op in entry.opcodes))
        recs_idx = [order[bounds[i.inst] : bounds[i.inst + 1]] for i in infos]
        action, after, detail = _decide(
            records, infos, recs_idx, ptx_w, sass_w, ", ".join(opcodes), edits
        )
        if key[2] == "shared" and key[3] in ("atomic", "reduction") and action == "match":
            # PTX red.shared runs as ATOMS: its SASS is under the line's atomics
            atoms = entries or sass_by_key.get((key[0], key[1], "shared", "atomic"), [])
            why = _aggregate(
                records, infos, recs_idx, atoms, edits, (key[0], key[1]) in aggregated_lines
            )
            if why is not None:
                action, detail = "aggregated", why
        notes.append(
            ReconcileNote(
                file=key[0],
                line=key[1],
                space=key[2],
                kind=key[3],
                action=action,
                ptx=_pairs(ptx_w),
                sass=_pairs(sass_w),
                opcodes=opcodes,
                records_before=int(sum(len(r) for r in recs_idx)),
                records_after=after,
                detail=detail,
                insts=tuple(i.inst for i in infos),
            )
        )
    return Reconciliation(_rewrite(records, edits), tuple(notes))


def _rewrite(records: np.ndarray, edits: _Edits) -> np.ndarray:
    """The records with ``edits`` applied: ``records`` itself (no copy) when there are none."""
    if not (
        edits.drop.any()
        or (edits.repeat != 1).any()
        or (edits.width != records["width"]).any()
        or (edits.mask != records["mask"]).any()
    ):
        return records
    keep = np.flatnonzero(~edits.drop)
    reps = edits.repeat[keep]
    src = np.repeat(keep, reps)
    out = records[src]
    out["width"] = edits.width[src]
    mask = edits.mask[src]
    changed = np.flatnonzero(mask != out["mask"])
    if len(changed):  # aggregated atomics: lanes folded into others hold 0, as inactive ones do
        out["mask"][changed] = mask[changed]
        out["addr"][changed] = np.where(
            active_lanes(mask[changed]), out["addr"][changed], np.uint64(0)
        )
    if len(reps) and (reps > 1).any():
        # the j-th copy of a split record moves j * width bytes on every active lane
        starts = np.cumsum(reps) - reps
        j = np.arange(len(src), dtype=np.int64) - np.repeat(starts, reps)
        moved = np.flatnonzero(j > 0)
        sub = out[moved]
        step = (j[moved].astype(np.uint64) * sub["width"].astype(np.uint64))[:, None]
        act = active_lanes(sub["mask"])
        sub["addr"] = np.where(act, sub["addr"] + step, np.uint64(0))
        out[moved] = sub
    return out
