"""Per-source-line results of the trace models: the base of the bank and coalescing results.

Both models measure every warp-level record of one memory space (wavefronts, or sectors), sum the
measures per PTX instruction, group the instructions by source line and kind, and total the lines
by kind over the traced CTAs and, scaled by the trace's ``scale``, over the launch. This module holds
what they share: :class:`Counts` (the measures, added and scaled), :class:`Totals` (counts by kind:
loads, stores, atomics with reductions), :class:`Line` (one line and kind), :class:`LineResult`
(a model's result), :func:`per_instruction` and :func:`lines_of` (the aggregation). Each model
subclasses them with its own fields; the JSON of each (``to_dict``) lists the fields in their order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from gpuadvise.trace.access import AccessTrace, Kind, Space, record_weights

__all__ = [
    "ATOMIC_KINDS",
    "KINDS",
    "Counts",
    "Line",
    "LineResult",
    "PerInstruction",
    "Totals",
    "chunks",
    "kind_bucket",
    "lines_of",
    "per_instruction",
]

KINDS = ("load", "store", "atomic")
"""The buckets of :class:`Totals`: atomics and reductions count together."""

ATOMIC_KINDS = (int(Kind.ATOMIC), int(Kind.REDUCTION))


def kind_bucket(kind: Kind) -> str:
    """The :data:`KINDS` bucket of a record kind."""
    return "atomic" if int(kind) in ATOMIC_KINDS else kind.name.lower()


def chunks(n: int, size: int) -> Iterator[slice]:
    """Slices of ``size`` covering ``range(n)``."""
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


C = TypeVar("C", bound="Counts")
L = TypeVar("L", bound="Line")
T = TypeVar("T", bound="Totals[Any]")


@dataclass(frozen=True)
class Counts:
    """Measures summed over records; subclasses name them (dataclass fields, all numbers, one
    of them ``ideal``).

    ``COST``: the field whose excess over ``ideal`` is the model's waste (wavefronts, sectors).
    """

    COST: ClassVar[str]
    if TYPE_CHECKING:  # a field of every subclass, in its place
        ideal: float

    @property
    def excess(self) -> float:
        """The cost beyond the ideal."""
        return getattr(self, self.COST) - self.ideal  # type: ignore[no-any-return]

    @property
    def excess_pct(self) -> float:
        """The excess in % of the cost (as Nsight Compute words it); 0 when there is no cost."""
        cost = getattr(self, self.COST)
        return 100.0 * self.excess / cost if cost else 0.0

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    def scaled(self: C, factor: float) -> C:
        return type(self)(*(v * factor for v in self._values()))

    def __add__(self: C, other: C) -> C:
        return type(self)(*(a + b for a, b in zip(self._values(), other._values(), strict=True)))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any]) -> C:
        return cls(*(data[f.name] for f in dataclasses.fields(cls)))

    @classmethod
    def zero(cls: type[C]) -> C:
        return cls(*(0 for _ in dataclasses.fields(cls)))


@dataclass(frozen=True)
class Totals(Generic[C]):
    """Counts by kind (:data:`KINDS`), zero where not given; subclasses set ``COUNTS``."""

    COUNTS: ClassVar[type[Counts]]

    load: C = None  # type: ignore[assignment]
    store: C = None  # type: ignore[assignment]
    atomic: C = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for k in KINDS:
            if getattr(self, k) is None:
                object.__setattr__(self, k, self.COUNTS.zero())

    @property
    def all(self) -> C:
        return self.load + self.store + self.atomic

    def scaled(self: T, factor: float) -> T:
        return type(self)(*(getattr(self, k).scaled(factor) for k in KINDS))

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k).to_dict() for k in KINDS}

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        return cls(**{k: cls.COUNTS.from_dict(v) for k, v in data.items()})

    @classmethod
    def of_lines(cls: type[T], lines: Sequence[Line]) -> T:
        """The totals of some lines, by kind."""
        sums: dict[str, Any] = {k: cls.COUNTS.zero() for k in KINDS}
        for ln in lines:
            bucket = kind_bucket(ln.kind)
            sums[bucket] = sums[bucket] + ln.counts
        return cls(**sums)


@dataclass(frozen=True)
class Line:
    """Accesses of one kind at one source line, over the traced CTAs.

    Subclasses add, between ``kind`` and ``insts``, the fields of their :class:`Counts` (same
    names, ints) and a worst case. ``insts``: the PTX instructions (trace indices) involved.
    """

    COUNTS: ClassVar[type[Counts]]

    file: str | None
    line: int | None
    kind: Kind
    if TYPE_CHECKING:  # fields of every subclass, in their place
        ideal: int

    @property
    def counts(self) -> Counts:
        return self.COUNTS(*(getattr(self, f.name) for f in dataclasses.fields(self.COUNTS)))

    @property
    def excess(self) -> int:
        return getattr(self, self.COUNTS.COST) - self.ideal  # type: ignore[no-any-return]

    @property
    def excess_pct(self) -> float:
        return self.counts.excess_pct

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "kind":
                value = value.name.lower()
            elif f.name == "insts":
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls: type[L], data: dict[str, Any]) -> L:
        args: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in ("file", "line"):
                args[f.name] = data[f.name]
            elif f.name == "kind":
                args[f.name] = Kind[data["kind"].upper()]
            elif f.name == "insts":
                args[f.name] = tuple(int(i) for i in data.get("insts", ()))
            else:
                cast = float if f.type in (float, "float") else int
                args[f.name] = cast(data[f.name])
        return cls(**args)


@dataclass(frozen=True)
class LineResult(Generic[L, T]):
    """A trace model's result for one launch.

    ``lines``: per source line and kind, in source order, over the traced CTAs. ``traced``: totals
    over the traced CTAs; ``launch``: those totals times ``scale`` (the trace's
    ``total_ctas / traced CTAs``), an extrapolation when ``extrapolated`` (not every CTA traced).
    """

    LINE: ClassVar[type[Line]]
    TOTALS: ClassVar[type[Totals[Any]]]

    lines: tuple[L, ...]
    traced: T
    launch: T
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
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return cls(
            lines=tuple(cls.LINE.from_dict(x) for x in data["lines"]),  # type: ignore[misc]
            traced=cls.TOTALS.from_dict(data["traced"]),  # type: ignore[arg-type]
            launch=cls.TOTALS.from_dict(data["launch"]),  # type: ignore[arg-type]
            scale=float(data["scale"]),
            extrapolated=bool(data["extrapolated"]),
        )

    @classmethod
    def of_lines(cls, lines: Sequence[L], trace: AccessTrace) -> Any:
        """The result of ``lines`` of ``trace``: totals over them, scaled to the launch."""
        traced = cls.TOTALS.of_lines(lines)
        return cls(
            lines=tuple(lines),
            traced=traced,  # type: ignore[arg-type]
            launch=traced.scaled(trace.scale),  # type: ignore[arg-type]
            scale=trace.scale,
            extrapolated=not trace.complete or trace.sampled_iterations,
        )


# --------------------------------------------------------------------------------------------
# Aggregation

# measures of some records: (named per-record values to sum, per-record value whose maximum is
# the worst case)
Measure = Callable[[np.ndarray], tuple[dict[str, np.ndarray], np.ndarray]]


@dataclass(frozen=True)
class PerInstruction:
    """Per PTX instruction of a trace: records (``count``), summed measures, worst measure, and
    the kind of its records (-1 where it has none)."""

    count: np.ndarray
    sums: dict[str, np.ndarray]
    worst: np.ndarray
    kind: np.ndarray


def per_instruction(
    trace: AccessTrace,
    records: np.ndarray | None,
    space: Space,
    names: Sequence[str],
    measure: Measure,
    worst_dtype: type,
    chunk_records: int,
    by_row: bool = False,
) -> PerInstruction:
    """Sum ``measure`` over the records of ``space`` per PTX instruction (``chunk_records`` at a
    time), each record counted for the executions it stands for
    (:func:`~gpuadvise.trace.access.record_weights`: 1, but for a sampled loop's last
    iteration). ``records``: use these instead of ``trace.records``; they must index
    ``trace.instructions``. ``by_row``: ``measure`` takes the indices (into the records) of the
    records to measure instead of the records (values it made for all of them at once)."""
    recs = trace.records if records is None else records
    ninst = len(trace.instructions)
    count = np.zeros(ninst, dtype=np.int64)
    sums = {name: np.zeros(ninst, dtype=np.int64) for name in names}
    worst: np.ndarray = np.zeros(ninst, dtype=worst_dtype)
    # per PTX instruction and record kind (a PTX instruction has one kind; keep the record's)
    kind_of = np.full(ninst, -1, dtype=np.int16)
    for sl in chunks(len(recs), chunk_records):  # its fields are read while they are cached
        part = recs[sl]
        sel = part["space"] == int(space)
        if not sel.any():
            continue
        sub = part if sel.all() else part[sel]
        if by_row:
            rows = np.arange(sl.start, sl.stop) if sel.all() else sl.start + np.flatnonzero(sel)
            values, worst_values = measure(rows)
        else:
            values, worst_values = measure(sub)
        inst = sub["inst"].astype(np.intp)
        if len(inst) and (inst.min() < 0 or inst.max() >= ninst):
            raise ValueError("a record's inst is not an index into trace.instructions")
        # a record of a sampled loop's last iteration stands for the iterations skipped
        weight = record_weights(sub)
        if weight is None:
            count += np.bincount(inst, minlength=ninst)
        else:
            count += np.rint(np.bincount(inst, weights=weight, minlength=ninst)).astype(np.int64)
        for name in names:
            v = values[name] if weight is None else values[name] * weight
            sums[name] += np.rint(np.bincount(inst, weights=v, minlength=ninst)).astype(np.int64)
        # (the values in the result's own type, as the ufunc would cast them: ufunc.at casting
        # each value on the way is 10-40x slower, the coalescing model's int32 sectors)
        wv = np.asarray(worst_values)
        if np.result_type(worst, wv) == worst.dtype:
            wv = wv.astype(worst.dtype, copy=False)
        np.maximum.at(worst, inst, wv)
        kind_of[inst] = sub["kind"].astype(np.int16)
    return PerInstruction(count, sums, worst, kind_of)


def lines_of(
    trace: AccessTrace, per: PerInstruction
) -> list[tuple[str | None, int | None, Kind, list[int]]]:
    """(file, line, kind, PTX instructions) of every source line and kind with records, in source
    order (:meth:`AccessTrace.line_of` gives an instruction's line)."""
    groups: dict[tuple[str | None, int | None, int], list[int]] = {}
    for i in np.flatnonzero(per.count):
        file, line = trace.line_of(int(i))
        groups.setdefault((file, line, int(per.kind[i])), []).append(int(i))

    def order(key: tuple[str | None, int | None, int]) -> tuple[str, int, int]:
        return (key[0] or "", key[1] or 0, key[2])

    return [(k[0], k[1], Kind(k[2]), groups[k]) for k in sorted(groups, key=order)]
