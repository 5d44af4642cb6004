"""Shared-memory bank model: wavefronts per warp-level shared access, measured on an H100.

A wavefront is one pass of the shared-memory pipeline (Nsight Compute's
``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st,atom}``). 32 banks of 4 bytes,
``bank = (byte_address // 4) % 32``. The rule below reproduced all 311 single-warp measurements
taken with Nsight Compute on an H100 (2026-11-22; loads and stores of 1, 2, 4, 8 and 16 bytes per
lane and 32-bit atomic adds: the documented strides, broadcasts, lane pairings, partial warps,
sub-word accesses, and 186 random patterns with random masks), both the wavefronts and the
bank-conflict counter (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_*``, which equalled
wavefronts minus :func:`ideal`); ``tests/test_banks.py`` replays them:

1. Groups. The active lanes are split by width: one group of 32 lanes for 1-, 2- and 4-byte
   accesses, two half-warps (lanes 0-15, 16-31) for 8 bytes, four quarter-warps for 16 bytes.
   Each lane touches the 4-byte words ``addr // 4 .. (addr + width - 1) // 4`` (one for sub-word
   accesses: an 8- or 16-bit access costs the word it lies in).
2. Loads and stores: per group, wavefronts = max over banks of the number of *distinct* words of
   that bank the group touches (lanes reading one word share it, multicast; for stores to one word
   one write wins, and byte stores to one word are one word too). Groups with no active lane cost
   nothing. The access costs the sum over its groups.
3. Merging, loads only. An 8- or 16-byte *load* whose lanes pair up -- every pair of lanes
   (n, n^1) that are both active read the same address, or every pair (n, n^2) that are both active
   does -- has its groups merged two by two: the whole warp is one group for 8 bytes, two half-warps
   for 16 bytes. (The return path carries 128 bytes a cycle; paired lanes need half the registers,
   so two groups fit one pass: NVIDIA's Nsight team describes exactly these two pairings for
   uniform loads.) So a 64-bit broadcast takes 1 wavefront and a uniform 128-bit load 2; a pairing
   by n^4 or any other lane relation (the lane%16 and lane%8 patterns) does not merge, and a pair
   whose partner lane is inactive does not prevent merging (measured). Stores never merge: a
   uniform 64-bit store takes 2 wavefronts, a uniform 128-bit store 4 (measured).
4. Atomics and reductions (``ATOMS``): no multicast; every active lane's word is its own update, so
   per group wavefronts = max over banks of the number of active lane-words in that bank (32 lanes
   adding to one word: 32 wavefronts; two words of different banks, 16 lanes each: 16). Measured
   for 32-bit ``atom.shared.add``. ptxas emits 64-bit shared atomic adds as a compare-and-swap
   loop (``LDS.64`` + ``ATOMS.CAST.SPIN.64``, repeated while lanes collide), which this model does
   not follow: it treats them as native 8-byte atomics (half-warps), which undercounts (measured:
   2 to 3 times as many atomic wavefronts, plus the loop's loads).

The ideal of an access is what the same data would cost with no two distinct words in one bank:
per group ``ceil(distinct words / 32)`` (active lane-words for atomics), summed over the same
(merged) groups; so 1 for any 32-bit load or store, 1 for a 64-bit broadcast, 2 for a full-warp
64-bit stride-1 load. This is exactly Nsight Compute's ideal (its conflict counter equalled
wavefronts minus this ideal in all measurements), and wavefronts >= ideal >= 1 for every access with
an active lane. Nsight's counter also counts some arbitration conflicts unrelated to addresses
(about 1 % of the wavefronts of conflict-free kernels, HARDWARE.md §2): compare wavefronts.

The model reads PTX-level accesses; reconcile them with the SASS first (:mod:`gpuadvise.model.reconcile`):
ptxas merges scalar loads into ``LDS.64``/``LDS.128``.

Vectorized over records in chunks of a few thousand (no Python loop over records); see
``benchmarks/bank_model_speed.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.trace import WARP, AccessTrace, Kind, Space

__all__ = [
    "BANKS",
    "BankCounts",
    "BankLine",
    "BankResult",
    "BankTotals",
    "active_lanes",
    "analyze_banks",
    "ideal",
    "record_wavefronts",
    "wavefronts",
]

BANKS = 32
CHUNK_RECORDS = 4096  # records per vectorized chunk: keeps the working arrays in cache

_SENT = np.uint32(0xFFFFFFFF)  # the word of an inactive lane; sorts last, its bank is 31
_LOW32_LIMIT = 0xFFFFFF00  # addresses from here on are rebased per record
_ATOMIC_KINDS = (int(Kind.ATOMIC), int(Kind.REDUCTION))


def active_lanes(mask: np.ndarray) -> np.ndarray:
    """(n, 32) bool, lane i of row r active when bit i of ``mask[r]`` is set."""
    m = np.ascontiguousarray(mask, dtype="<u4").reshape(-1)
    bits = np.unpackbits(m.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    return bits.view(bool)


def _low32(addr: np.ndarray, act: np.ndarray | None) -> np.ndarray:
    """Per-lane addresses as uint32, rebased per record (by a multiple of 128) when they do not fit.

    Rebasing by a multiple of 128 bytes keeps banks (and 32-/128-byte sectors and lines) unchanged.
    """
    a = np.asarray(addr)
    hi = a.max(initial=0) if a.size else 0
    if hi < _LOW32_LIMIT:
        return a.astype(np.uint32)
    if act is None:
        act = np.ones(a.shape, dtype=bool)
    masked = np.where(act, a, np.uint64(np.iinfo(np.uint64).max))
    base = masked.min(axis=1, keepdims=True)
    base = np.where(act.any(axis=1, keepdims=True), base, 0) & np.uint64(~127 & (2**64 - 1))
    rel = np.where(act, a - base, 0)
    if rel.max(initial=0) >= _LOW32_LIMIT:
        raise ValueError("the active lanes of one warp access span more than 4 GB")
    return rel.astype(np.uint32)


_ONES8 = np.uint64(0x0101010101010101)


def _rows_all(b: np.ndarray) -> np.ndarray:
    """(n,) bool: all of each row of a C-contiguous (n, 8*j) bool array (no per-row reduce)."""
    words = np.ascontiguousarray(b).view(np.uint64)
    out = words[:, 0] == _ONES8
    for j in range(1, words.shape[1]):
        out &= words[:, j] == _ONES8
    return out


_LOW_HALF = np.uint64(0xFFFFFFFF)


def _pairs_equal(a32: np.ndarray, act: np.ndarray | None, x: int) -> np.ndarray:
    """(n,) bool: every lane pair (l, l^x), x in (1, 2), with both lanes active has one address.

    ``act`` None: every lane is active (then the pairs are compared as 64-bit words).
    """
    n = len(a32)
    if act is None:
        v = np.ascontiguousarray(a32).view(np.uint64)  # (n, 16): lanes 2i and 2i+1
        if x == 1:
            return _rows_all((v >> np.uint64(32)) == (v & _LOW_HALF))
        pairs = v.reshape(n, 8, 2)
        return _rows_all(pairs[:, :, 0] == pairs[:, :, 1])
    r = a32.reshape(n, 32 // (2 * x), 2, x)
    q = act.reshape(n, 32 // (2 * x), 2, x)
    same = (r[:, :, 0, :] == r[:, :, 1, :]) | ~(q[:, :, 0, :] & q[:, :, 1, :])
    return _rows_all(same.reshape(n, 16))


# Per width in bytes: log2 of the unit a lane accesses (a 4-byte word up to 4 bytes, else the
# aligned access itself) and the number of lane groups; 0 marks an unsupported width.
_SHIFT = np.zeros(256, dtype=np.uint32)
_GROUPS = np.zeros(256, dtype=np.int64)
for _w, _sh, _g in ((1, 2, 1), (2, 2, 1), (4, 2, 1), (8, 3, 2), (16, 4, 4)):
    _SHIFT[_w], _GROUPS[_w] = _sh, _g
_IS_ATOMIC = np.zeros(256, dtype=bool)
_IS_ATOMIC[list(_ATOMIC_KINDS)] = True
_LANE = np.arange(WARP, dtype=np.uint32)
_BINS = BANKS + 1  # per record: up to 32 (group, bank class) bins, and one for the sentinel
_ROWBASE: dict[int, np.ndarray] = {}


def _rowbase(nrows: int) -> np.ndarray:
    base = _ROWBASE.get(nrows)
    if base is None:
        base = (np.arange(nrows, dtype=np.intp) * _BINS)[:, None]
        if len(_ROWBASE) < 64:
            _ROWBASE[nrows] = base
    return base


def _cost(
    units: np.ndarray,
    inactive: np.ndarray | None,
    shift: int,
    groups: int,
    atomic: bool,
    count: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) of m records from their per-lane units (m, 32), modified in place.

    A unit is what one lane accesses: the 4-byte word for accesses of up to 4 bytes, the aligned
    8- or 16-byte block otherwise. An aligned block of ``k`` words covers banks ``k*c .. k*c+k-1``
    of its bank class ``c = unit % (32 / k)``, so the distinct words of each of those banks are
    the distinct units of class ``c``: the model counts units per class instead of words per
    bank. Groups (half- or quarter-warps) are told apart by bits above the unit, so that every
    record stays one row of 32 for sorting and counting. ``count``: count the words of each group
    for the ideal even where a group seems to hold at most 32, and take out the sentinel even
    without ``inactive`` (the misaligned fallback's rows of words carry their own sentinels).
    """
    m = len(units)
    k = 1 << (shift - 2)
    classes = BANKS // k
    gshift = 32 - shift  # the units of a group are below 2**gshift; 2 bits above for the group
    if groups > 1:
        units |= (_LANE // np.uint32(WARP // groups)) << np.uint32(gshift)
    if inactive is not None:
        units |= inactive  # _SENT: sorts last; with groups its bin (127) is clamped to bin 32
    if atomic:  # every active lane is its own update: no sort, no multicast
        repeat = units == _SENT
    else:
        units.sort(axis=1)
        repeat = np.empty(units.shape, dtype=bool)
        repeat[:, 0] = False
        np.equal(units[:, 1:], units[:, :-1], out=repeat[:, 1:])
    if groups > 1:
        b = (units >> np.uint32(gshift)) * np.uint32(classes)
        b += units & np.uint32(classes - 1)
        np.minimum(b, np.uint32(BANKS), out=b)
    else:
        b = units & np.uint32(classes - 1)
    idx = np.add(b, _rowbase(m), dtype=np.intp)
    dump = m * _BINS
    np.putmask(idx, repeat, dump)
    counts = np.bincount(idx.reshape(-1), minlength=dump + 1)[:dump].reshape(m, _BINS)
    if groups == 1 and not atomic and (inactive is not None or count):
        # the first of the sentinels (sorted last) is not a repeat: it was counted in the last
        # bank class; take it out
        counts[:, classes - 1] -= units[:, -1] == _SENT
    used = groups * classes
    # uint8 (counts <= 32), transposed: reductions along contiguous memory, not over short rows
    by_class = np.ascontiguousarray(counts[:, :used].astype(np.uint8).T).reshape(groups, classes, m)
    worst = by_class.max(axis=1)
    cost = worst.sum(axis=0, dtype=np.int32)
    if count or (WARP // groups) * k > WARP:  # a merged group may hold more than 32 words
        counted = by_class.sum(axis=1, dtype=np.int32)
        need = ((counted * k + BANKS - 1) // BANKS).sum(axis=0, dtype=np.int32)
    else:  # at most 32 words per group: ideal 1 per group with an active lane
        need = (worst > 0).sum(axis=0, dtype=np.int32)
    return cost, need


def _chunk_cost(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(recs)
    wf = np.zeros(n, dtype=np.int32)
    need_out = np.zeros(n, dtype=np.int32)
    if n == 0:
        return wf, need_out
    mask = recs["mask"]
    full = bool((mask == np.uint32(0xFFFFFFFF)).all())
    act = None if full else active_lanes(mask)
    a32 = _low32(np.ascontiguousarray(recs["addr"]), act)
    width = recs["width"]
    groups = _GROUPS[width]
    if not groups.all():
        bad = int(width[groups == 0][0])
        raise ValueError(f"shared access width {bad} B is not 1, 2, 4, 8 or 16")
    shift = _SHIFT[width]
    kind = recs["kind"]
    atomic = _IS_ATOMIC[kind]
    wide_idx = np.flatnonzero(groups > 1)
    aligned = np.ones(n, dtype=bool)
    if len(wide_idx):
        every = len(wide_idx) == n
        aw = a32 if every else a32[wide_idx]
        off = (aw & (width[wide_idx].astype(np.uint32)[:, None] - np.uint32(1))) != 0
        if act is not None:
            off &= act[wide_idx]
        aligned[wide_idx] = ~_rows_any(off)
        is_load = kind[wide_idx] == int(Kind.LOAD)
        if is_load.any():
            loads = wide_idx[is_load]
            pa = a32 if every and is_load.all() else a32[loads]
            pact = None if act is None else act[loads]
            merged = _pairs_equal(pa, pact, 1) | _pairs_equal(pa, pact, 2)
            groups = groups.copy()
            groups[loads[merged]] //= 2
    # categories: shift (2..4), groups (1, 2, 4), atomic, aligned
    code = ((shift.astype(np.int64) * 8 + groups) * 2 + atomic) * 2 + aligned
    first = code[0]
    cats = [int(first)] if (code == first).all() else [int(c) for c in np.unique(code)]
    inactive = None if act is None else (~act).view(np.uint8).astype(np.uint32) * _SENT
    for c in cats:
        is_aligned, is_atomic = bool(c & 1), bool((c >> 1) & 1)
        g, sh = (c >> 2) % 8, (c >> 2) // 8
        sel_c = None if len(cats) == 1 else np.flatnonzero(code == c)
        units = a32 if sel_c is None else a32[sel_c]
        ina = inactive if sel_c is None or inactive is None else inactive[sel_c]
        if is_aligned:
            cost, need = _cost(units >> np.uint32(sh), ina, sh, g, is_atomic)
        else:
            cost, need = _misaligned_cost(units, ina, sh, g, is_atomic)
        if sel_c is None:
            wf[:], need_out[:] = cost, need
        else:
            wf[sel_c], need_out[sel_c] = cost, need
    return wf, need_out


def _rows_any(b: np.ndarray) -> np.ndarray:
    """(n,) bool: any of each row of a C-contiguous (n, 8*j) bool array."""
    words = np.ascontiguousarray(b).view(np.uint64)
    out = words[:, 0] != 0
    for j in range(1, words.shape[1]):
        out |= words[:, j] != 0
    return out


def _misaligned_cost(
    a32: np.ndarray, inactive: np.ndarray | None, shift: int, groups: int, atomic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Misaligned 8-/16-byte accesses (PTX forbids them; kept for robustness): every word of
    every lane, one row of words per group, 32 banks."""
    m = len(a32)
    k = 1 << (shift - 2)
    words = a32 >> np.uint32(2)
    if inactive is not None:
        words |= inactive
    exp = words[:, :, None] + np.arange(k, dtype=np.uint32)
    exp[words == _SENT] = _SENT
    rows = exp.reshape(m * groups, WARP * k // groups)
    cost, need = _cost(rows, None, 2, 1, atomic, count=True)
    return cost.reshape(m, groups).sum(axis=1), need.reshape(m, groups).sum(axis=1)


def _chunks(n: int, size: int = CHUNK_RECORDS) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def record_wavefronts(records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wavefronts, ideal) per record, int32 arrays; every record is taken as a shared access.

    Records with no active lane cost 0 and have ideal 0.
    """
    n = len(records)
    wf = np.empty(n, dtype=np.int32)
    ideal_out = np.empty(n, dtype=np.int32)
    for s in _chunks(n):
        wf[s], ideal_out[s] = _chunk_cost(records[s])
    return wf, ideal_out


def _one_record(addresses: Any, width: int, mask: int, kind: Kind) -> np.ndarray:
    from gpuadvise.trace import empty_records

    rec = empty_records(1)
    addr = np.zeros(WARP, dtype=np.uint64)
    given = np.asarray(addresses, dtype=np.uint64).reshape(-1)
    addr[: len(given)] = given
    lanes = active_lanes(np.array([mask], dtype=np.uint32))[0]
    addr[~lanes] = 0
    rec["addr"][0] = addr
    rec["mask"], rec["width"], rec["kind"], rec["space"] = mask, width, int(kind), int(Space.SHARED)
    return rec


def wavefronts(
    addresses: Any, width: int = 4, mask: int = 0xFFFFFFFF, kind: Kind = Kind.LOAD
) -> int:
    """Wavefronts of one warp-level shared access (per-lane byte addresses; a convenience)."""
    return int(record_wavefronts(_one_record(addresses, width, mask, kind))[0][0])


def ideal(addresses: Any, width: int = 4, mask: int = 0xFFFFFFFF, kind: Kind = Kind.LOAD) -> int:
    """The ideal wavefronts of one warp-level shared access (see the module docstring)."""
    return int(record_wavefronts(_one_record(addresses, width, mask, kind))[1][0])


# --------------------------------------------------------------------------------------------
# Results


def _kind_name(kind: Kind) -> str:
    return kind.name.lower()


@dataclass(frozen=True)
class BankCounts:
    """Warp-level shared instructions executed, their wavefronts and the ideal wavefronts."""

    instructions: float
    wavefronts: float
    ideal: float

    @property
    def excess(self) -> float:
        """Wavefronts beyond the ideal (Nsight's bank-conflict count, less its arbitration noise)."""
        return self.wavefronts - self.ideal

    @property
    def excess_pct(self) -> float:
        """Excess wavefronts in % of all wavefronts (as Nsight Compute words it); 0 when none."""
        return 100.0 * self.excess / self.wavefronts if self.wavefronts else 0.0

    @property
    def ways(self) -> float:
        """Average conflict degree: wavefronts / ideal (1.0 = conflict-free)."""
        return self.wavefronts / self.ideal if self.ideal else 1.0

    def scaled(self, factor: float) -> BankCounts:
        return BankCounts(self.instructions * factor, self.wavefronts * factor, self.ideal * factor)

    def __add__(self, other: BankCounts) -> BankCounts:
        return BankCounts(
            self.instructions + other.instructions,
            self.wavefronts + other.wavefronts,
            self.ideal + other.ideal,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instructions": self.instructions,
            "wavefronts": self.wavefronts,
            "ideal": self.ideal,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BankCounts:
        return cls(data["instructions"], data["wavefronts"], data["ideal"])


_ZERO = BankCounts(0, 0, 0)


@dataclass(frozen=True)
class BankTotals:
    """Counts by kind: loads, stores, and atomics (reductions included)."""

    load: BankCounts = _ZERO
    store: BankCounts = _ZERO
    atomic: BankCounts = _ZERO

    @property
    def all(self) -> BankCounts:
        return self.load + self.store + self.atomic

    def scaled(self, factor: float) -> BankTotals:
        return BankTotals(
            self.load.scaled(factor), self.store.scaled(factor), self.atomic.scaled(factor)
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k).to_dict() for k in ("load", "store", "atomic")}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BankTotals:
        return cls(**{k: BankCounts.from_dict(v) for k, v in data.items()})


@dataclass(frozen=True)
class BankLine:
    """Shared accesses of one kind at one source line, over the traced CTAs.

    ``instructions``: warp-level instructions executed (records); ``worst_ways``: the largest
    wavefronts/ideal of any one of them; ``insts``: the PTX instructions (trace indices) involved.
    """

    file: str | None
    line: int | None
    kind: Kind
    instructions: int
    wavefronts: int
    ideal: int
    worst_ways: float
    insts: tuple[int, ...] = ()

    @property
    def counts(self) -> BankCounts:
        return BankCounts(self.instructions, self.wavefronts, self.ideal)

    @property
    def excess(self) -> int:
        return self.wavefronts - self.ideal

    @property
    def excess_pct(self) -> float:
        return self.counts.excess_pct

    @property
    def ways(self) -> float:
        return self.counts.ways

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "kind": _kind_name(self.kind),
            "instructions": self.instructions,
            "wavefronts": self.wavefronts,
            "ideal": self.ideal,
            "worst_ways": self.worst_ways,
            "insts": list(self.insts),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BankLine:
        return cls(
            file=data["file"],
            line=data["line"],
            kind=Kind[data["kind"].upper()],
            instructions=int(data["instructions"]),
            wavefronts=int(data["wavefronts"]),
            ideal=int(data["ideal"]),
            worst_ways=float(data["worst_ways"]),
            insts=tuple(int(i) for i in data.get("insts", ())),
        )


@dataclass(frozen=True)
class BankResult:
    """The bank model of one launch.

    ``lines``: per source line and kind, in source order, over the traced CTAs. ``traced``: totals
    over the traced CTAs; ``launch``: those totals times ``scale`` (the trace's
    ``total_ctas / traced CTAs``), an extrapolation when ``extrapolated`` (not every CTA traced).
    """

    lines: tuple[BankLine, ...]
    traced: BankTotals
    launch: BankTotals
    scale: float
    extrapolated: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "lines": [ln.to_dict() for ln in self.lines],
            "traced": self.traced.to_dict(),
            "launch": self.launch.to_dict(),
            "scale": self.scale,
            "extrapolated": self.extrapolated,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BankResult:
        return cls(
            lines=tuple(BankLine.from_dict(x) for x in data["lines"]),
            traced=BankTotals.from_dict(data["traced"]),
            launch=BankTotals.from_dict(data["launch"]),
            scale=float(data["scale"]),
            extrapolated=bool(data["extrapolated"]),
        )


def analyze_banks(trace: AccessTrace, records: np.ndarray | None = None) -> BankResult:
    """The bank model over the shared accesses of ``trace``.

    ``records``: use these instead of ``trace.records`` (the reconciled records of
    :func:`gpuadvise.model.reconcile.reconcile`); they must index ``trace.instructions``.
    """
    recs = trace.records if records is None else records
    ninst = len(trace.instructions)
    count = np.zeros(ninst, dtype=np.int64)
    wf_sum = np.zeros(ninst, dtype=np.int64)
    ideal_sum = np.zeros(ninst, dtype=np.int64)
    worst = np.zeros(ninst, dtype=np.float64)
    # per PTX instruction and record kind (a PTX instruction has one kind; keep the record's)
    kind_of = np.full(ninst, -1, dtype=np.int16)
    for s in _chunks(len(recs), 8 * CHUNK_RECORDS):
        part = recs[s]
        shared = part["space"] == int(Space.SHARED)
        if not shared.any():
            continue
        sub = part if shared.all() else part[shared]
        wf, need = record_wavefronts(sub)
        inst = sub["inst"].astype(np.intp)
        if len(inst) and (inst.min() < 0 or inst.max() >= ninst):
            raise ValueError("a record's inst is not an index into trace.instructions")
        count += np.bincount(inst, minlength=ninst)
        wf_sum += np.bincount(inst, weights=wf, minlength=ninst).astype(np.int64)
        ideal_sum += np.bincount(inst, weights=need, minlength=ninst).astype(np.int64)
        ratio = np.divide(wf, need, out=np.ones(len(wf)), where=need > 0)
        np.maximum.at(worst, inst, ratio)
        kind_of[inst] = sub["kind"].astype(np.int16)

    groups: dict[tuple[str | None, int | None, int], list[int]] = {}
    for i in np.flatnonzero(count):
        file, line = trace.line_of(int(i))
        groups.setdefault((file, line, int(kind_of[i])), []).append(int(i))

    def order(key: tuple[str | None, int | None, int]) -> tuple[str, int, int]:
        return (key[0] or "", key[1] or 0, key[2])

    lines = []
    totals: dict[str, BankCounts] = {"load": _ZERO, "store": _ZERO, "atomic": _ZERO}
    for key in sorted(groups, key=order):
        idx = groups[key]
        kind = Kind(key[2])
        bl = BankLine(
            file=key[0],
            line=key[1],
            kind=kind,
            instructions=int(count[idx].sum()),
            wavefronts=int(wf_sum[idx].sum()),
            ideal=int(ideal_sum[idx].sum()),
            worst_ways=float(worst[idx].max()),
            insts=tuple(idx),
        )
        lines.append(bl)
        bucket = "atomic" if int(kind) in _ATOMIC_KINDS else _kind_name(kind)
        totals[bucket] = totals[bucket] + bl.counts
    traced = BankTotals(**totals)
    return BankResult(
        lines=tuple(lines),
        traced=traced,
        launch=traced.scaled(trace.scale),
        scale=trace.scale,
        extrapolated=not trace.complete,
    )
