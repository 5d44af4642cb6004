"""The AccessTrace: one record per warp-level memory instruction executed.

Both tracers fill it, the CPU emulator of the kernel's PTX (gpuadvise/ptx/) and, on a GPU, the
instrumented kernel; the models (banks, coalescing, L2) read it. Records are a numpy structured array,
never Python objects, so a trace of millions of warp accesses stays compact and the models vectorize.

Addresses: global accesses carry the virtual address the tracer gave the buffer (buffers are aligned
to 256 bytes, as cudaMalloc's are, so sector and bank arithmetic matches the GPU's); shared accesses
carry the byte offset in the CTA's shared window; local accesses the byte offset in the thread's
local frame; constant accesses the offset in the bank. Inactive lanes hold 0 and are off in ``mask``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuadvise.model.execution import KernelWork
from gpuadvise.ptx.access import RECORD, WARP, Kind, Space, empty_records, record_weights

__all__ = [
    "RECORD",
    "WARP",
    "AccessTrace",
    "distinct_records",
    "InstrInfo",
    "Kind",
    "Space",
    "empty_records",
    "record_weights",
]


@dataclass(frozen=True)
class InstrInfo:
    """A memory instruction of the kernel as the tracer saw it (a PTX instruction).

    ``file``/``line``: its innermost source location (a CUDA header's for ``atomicAdd``);
    ``site_file``/``site_line``: the user's line it is reported at when that differs (the call
    site of an inlined toolkit function, :mod:`gpuadvise.trace.sites`), else None.
    """

    inst: int
    file: str | None
    line: int | None
    opcode: str  # e.g. "ld.global.nc.v4.f32"
    space: Space
    kind: Kind
    width: int  # bytes per lane
    site_file: str | None = None
    site_line: int | None = None
    call_file: str | None = None
    call_line: int | None = None
    # its address comes from a value the kernel loaded (a gather by data: ``x[idx[i]]``),
    # :func:`gpuadvise.ptx.dataflow.data_addressed`; False when unknown
    data_address: bool = False


@dataclass(frozen=True)
class AccessTrace:
    """Warp-level memory accesses of some CTAs of one launch.

    ``ctas``: the linear ids of the traced CTAs; ``total_ctas``: the launch's. ``complete`` is True
    when every CTA was traced: whole-launch totals are then exact, else extrapolated by
    ``total_ctas / len(ctas)``. ``buffers`` maps buffer names to (base address, size in bytes).
    ``launch_working_ctas``: when some traced CTAs do no memory work, the estimated CTAs of the
    launch that do (:func:`gpuadvise.model.waves.working_ctas`), and ``traced_working_ctas``
    those traced: totals are then extrapolated by their ratio instead. ``sampled_iterations``:
    the emulator skipped iterations of long loops; a record then stands for ``1 + extra``
    executions (:func:`record_weights`), which the models count.
    """

    records: np.ndarray  # dtype RECORD
    instructions: tuple[InstrInfo, ...]
    ctas: tuple[int, ...]
    total_ctas: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    source: str  # "emulator" | "gpu"
    buffers: dict[str, tuple[int, int]] = field(default_factory=dict)
    launch_working_ctas: float | None = None
    traced_working_ctas: int = 0
    # the emulator sampled long loops: records weigh 1 + extra (record_weights), and totals
    # drawn from the trace are estimates even when every CTA was traced
    sampled_iterations: bool = False
    work: KernelWork | None = None  # what the CTAs execute (the emulator's counts), per CTA

    @property
    def complete(self) -> bool:
        return len(self.ctas) == self.total_ctas

    @property
    def scale(self) -> float:
        """Factor from the traced CTAs to the whole launch (from the traced CTAs that do memory
        work to the launch's, when ``launch_working_ctas`` is set)."""
        if self.launch_working_ctas is not None:
            return self.launch_working_ctas / max(self.traced_working_ctas, 1)
        return self.total_ctas / max(len(self.ctas), 1)

    def select(self, space: Space | None = None, kind: Kind | None = None) -> np.ndarray:
        r = self.records
        keep = np.ones(len(r), dtype=bool)
        if space is not None:
            keep &= r["space"] == space
        if kind is not None:
            keep &= r["kind"] == kind
        return r[keep]

    def line_of(self, inst: int) -> tuple[str | None, int | None]:
        """The user's source line of an instruction (its call site in the kernel's source when
        it comes from a toolkit header), where the models report it."""
        info = self.instructions[inst]
        if info.site_line is not None:
            return info.site_file, info.site_line
        return info.file, info.line

    def call_site_of(self, inst: int) -> tuple[str | None, int | None]:
        """The line of the kernel's body an instruction comes from: the call site of the helper
        function it is inlined from (``call_line``), else :meth:`line_of` (a call line of 0 is
        no line: ptxas writes it for code it inlines from nowhere in particular)."""
        info = self.instructions[inst]
        if info.call_line:
            return info.call_file, info.call_line
        return self.line_of(inst)

    def save(self, path: Any) -> None:
        """An .npz file that :meth:`load` reads back."""
        import json

        meta = {
            "instructions": [
                [i.inst, i.file, i.line, i.opcode, int(i.space), int(i.kind), i.width]
                + (
                    [i.site_file, i.site_line, i.call_file, i.call_line]
                    if i.site_line is not None or i.call_line is not None
                    else []
                )
                for i in self.instructions
            ],
            "data_addressed": [i.inst for i in self.instructions if i.data_address],
            "ctas": list(self.ctas),
            "total_ctas": self.total_ctas,
            "grid": list(self.grid),
            "block": list(self.block),
            "source": self.source,
            "buffers": {k: list(v) for k, v in self.buffers.items()},
            "launch_working_ctas": self.launch_working_ctas,
            "traced_working_ctas": self.traced_working_ctas,
            "sampled_iterations": self.sampled_iterations,
            "work": None if self.work is None else self.work.to_dict(),
        }
        np.savez_compressed(path, records=self.records, meta=np.array(json.dumps(meta)))

    @classmethod
    def load(cls, path: Any) -> AccessTrace:
        import json

        with np.load(path, allow_pickle=False) as z:
            records = z["records"]
            meta = json.loads(str(z["meta"]))
        if records.dtype != RECORD:  # saved before a field was added (``extra``): zeros there
            full = np.zeros(len(records), RECORD)
            for name in records.dtype.names or ():
                if name in (RECORD.names or ()):
                    full[name] = records[name]
            records = full
        data = set(meta.get("data_addressed", ()))
        return cls(
            records=records,
            instructions=tuple(
                dataclasses.replace(
                    InstrInfo(a, f, ln, op, Space(s), Kind(k), w, *site), data_address=a in data
                )
                for a, f, ln, op, s, k, w, *site in meta["instructions"]
            ),
            ctas=tuple(meta["ctas"]),
            total_ctas=meta["total_ctas"],
            grid=tuple(meta["grid"]),
            block=tuple(meta["block"]),
            source=meta["source"],
            buffers={k: (v[0], v[1]) for k, v in meta["buffers"].items()},
            launch_working_ctas=meta.get("launch_working_ctas"),
            traced_working_ctas=int(meta.get("traced_working_ctas", 0)),
            sampled_iterations=bool(meta.get("sampled_iterations", False)),
            work=None if meta.get("work") is None else KernelWork.from_dict(meta["work"]),
        )


_LANE_MIX = (np.arange(1, WARP + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
_DEDUP_CHUNK = 1 << 16


def distinct_records(
    records: np.ndarray, fields: tuple[str, ...] = ("inst", "mask", "width", "kind", "space")
) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct records, how many times each occurs): records equal in ``addr`` and
    ``fields`` counted once, in the order of their first occurrence. A sum over the records of
    anything those fields decide (a record's bank wavefronts, its sectors) is the sum over the
    distinct ones times their counts: the CTAs of a wave repeat each other's shared accesses.

    Rows are grouped by a 64-bit hash and every record is then compared with its group's first
    record; on a collision the records come back as they are, each counted once (exact always).
    """
    n = len(records)
    if n < 2:
        return records, np.ones(n, dtype=np.int64)
    h = np.empty(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for s in range(0, n, _DEDUP_CHUNK):
            part = records[s : s + _DEDUP_CHUNK]
            a = part["addr"]
            hh = ((a ^ (a >> np.uint64(29))) * _LANE_MIX).sum(axis=1, dtype=np.uint64)
            for k, f in enumerate(fields):
                hh = hh * np.uint64(0x100000001B3) + part[f].astype(np.uint64) + np.uint64(k)
            h[s : s + _DEDUP_CHUNK] = hh
    order = np.argsort(h, kind="stable")
    hs = h[order]
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(hs[1:], hs[:-1], out=start[1:])
    group = np.cumsum(start) - 1
    first = order[start]  # stable: each group's first record in trace order
    rep = np.empty(n, dtype=np.int64)
    rep[order] = first[group]
    later = np.flatnonzero(rep != np.arange(n))  # the records that repeat an earlier one
    addr = records["addr"]
    for s in range(0, len(later), _DEDUP_CHUNK):
        mine, theirs = later[s : s + _DEDUP_CHUNK], rep[later[s : s + _DEDUP_CHUNK]]
        same = bool((addr[mine] == addr[theirs]).all())
        for f in fields:
            same = same and bool((records[f][mine] == records[f][theirs]).all())
        if not same:  # a hash collision
            return records, np.ones(n, dtype=np.int64)
    counts = np.diff(np.append(np.flatnonzero(start), n))
    by_first = np.argsort(first)
    return records[first[by_first]], counts[by_first]
