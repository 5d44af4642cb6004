"""The raw recording: what the recorder writes from inside the program, one folder per process
(``OUT/raw/<pid>/``), and reads back to make the cases. Plain files, written as the program
runs, so that a program that crashes leaves what was recorded until then:

- ``process.json``: the process (pid, argv, start time) and its ``status``: ``running`` until
  the recorder's exit hook rewrites it ``finished`` with the overhead; a crash leaves
  ``running``;
- ``modules/<seq>-<module id>.cubin``: each module the program loaded, as CUDA saw it;
- ``launches.jsonl``: one :class:`LaunchRecord` a line for every snapshotted launch;
- ``snapshots/<seq>-<k>.bin``: the allocations those launches' pointers lead to;
- ``shapes.json``: every launch counted, by kernel and shape (rewritten as the run goes);
- ``activity.jsonl``: CUPTI's kernel activity records (GPU start and end), flushed in batches.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "KernelTiming",
    "LaunchRecord",
    "PointerArg",
    "RawProcess",
    "RawWriter",
    "read_process",
    "shape_key",
]

Shape = tuple[tuple[int, int, int], tuple[int, int, int], int]


def shape_key(symbol: str, grid: tuple[int, ...], block: tuple[int, ...], smem: int) -> str:
    """A kernel and launch shape as one text key: ``sym|gx,gy,gz|bx,by,bz|smem``."""
    return f"{symbol}|{','.join(map(str, grid))}|{','.join(map(str, block))}|{smem}"


@dataclass(frozen=True)
class PointerArg:
    """A pointer parameter resolved to its allocation: ``address`` = ``base`` + ``offset``;
    ``snapshot``: the file (under ``snapshots/``) holding the allocation's ``size_bytes``
    bytes before the launch, or None (over the budget, captured in a graph, or not wanted)."""

    ordinal: int
    address: int
    base: int
    size_bytes: int
    snapshot: str | None = None

    @property
    def offset(self) -> int:
        return self.address - self.base


@dataclass(frozen=True)
class LaunchRecord:
    """One launch, with its parameters (``params_hex``: the device-side parameter buffer;
    ``slots``: each parameter's (offset, size), from ``slot_source``: ``cuFuncGetParamInfo``
    or ``cubin``) and its pointers."""

    seq: int
    launch_number: int  # of this kernel and shape, 1-based
    correlation_id: int
    api: str
    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    stream: int
    slots: tuple[tuple[int, int], ...]
    slot_source: str
    params_hex: str
    pointers: tuple[PointerArg, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pointers"] = [asdict(p) for p in self.pointers]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LaunchRecord:
        return cls(
            seq=int(d["seq"]),
            launch_number=int(d["launch_number"]),
            correlation_id=int(d["correlation_id"]),
            api=str(d["api"]),
            symbol=str(d["symbol"]),
            grid=tuple(int(v) for v in d["grid"]),  # type: ignore[arg-type]
            block=tuple(int(v) for v in d["block"]),  # type: ignore[arg-type]
            dynamic_smem_bytes=int(d["dynamic_smem_bytes"]),
            stream=int(d["stream"]),
            slots=tuple((int(o), int(s)) for o, s in d["slots"]),
            slot_source=str(d["slot_source"]),
            params_hex=str(d["params_hex"]),
            pointers=tuple(PointerArg(**p) for p in d.get("pointers", ())),
            notes=tuple(str(n) for n in d.get("notes", ())),
        )

    @property
    def key(self) -> str:
        return shape_key(self.symbol, self.grid, self.block, self.dynamic_smem_bytes)

    def param_bytes(self, ordinal: int) -> bytes:
        off, size = self.slots[ordinal]
        return bytes.fromhex(self.params_hex)[off : off + size]


@dataclass(frozen=True)
class KernelTiming:
    """A kernel execution from CUPTI's activity API (GPU timestamps, ns)."""

    name: str
    correlation_id: int
    start_ns: int
    end_ns: int
    stream_id: int = 0
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    dynamic_smem_bytes: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KernelTiming:
        return cls(
            str(d["name"]),
            int(d["correlation_id"]),
            int(d["start_ns"]),
            int(d["end_ns"]),
            int(d.get("stream_id", 0)),
            tuple(int(v) for v in d.get("grid", (0, 0, 0))),  # type: ignore[arg-type]
            tuple(int(v) for v in d.get("block", (0, 0, 0))),  # type: ignore[arg-type]
            int(d.get("dynamic_smem_bytes", 0)),
        )

    @property
    def key(self) -> str:
        return shape_key(self.name, self.grid, self.block, self.dynamic_smem_bytes)

    @property
    def time_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 0)


class RawWriter:
    """Writes one process's raw recording under ``folder`` (created). Every write goes to a
    file of that folder: nothing is written elsewhere."""

    def __init__(self, folder: Path, argv: list[str]) -> None:
        self.folder = folder
        (folder / "modules").mkdir(parents=True, exist_ok=True)
        (folder / "snapshots").mkdir(exist_ok=True)
        self._launches = open(folder / "launches.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._activity = open(folder / "activity.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.process = {"pid": os.getpid(), "argv": argv, "status": "running"}
        self._json("process.json", self.process)

    def _json(self, name: str, doc: Any) -> None:
        tmp = self.folder / f".{name}.tmp"
        tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        os.replace(tmp, self.folder / name)

    def module(self, seq: int, module_id: int, image: bytes) -> str:
        name = f"{seq:06d}-{module_id}.cubin"
        (self.folder / "modules" / name).write_bytes(image)
        return name

    def snapshot(self, name: str, data: bytes) -> None:
        (self.folder / "snapshots" / name).write_bytes(data)

    def launch(self, record: LaunchRecord) -> None:
        if self._launches.closed:
            return
        self._launches.write(json.dumps(record.to_dict()) + "\n")
        self._launches.flush()

    def shapes(self, counts: Mapping[str, int]) -> None:
        self._json("shapes.json", dict(counts))

    def activity(self, timings: list[KernelTiming]) -> None:
        if self._activity.closed:  # a buffer CUPTI hands back after the recording finished
            return
        for t in timings:
            self._activity.write(json.dumps(asdict(t)) + "\n")
        self._activity.flush()

    def finish(self, overhead: Mapping[str, Any]) -> None:
        self._launches.close()
        self._activity.close()
        self.process.update(status="finished", overhead=dict(overhead))
        self._json("process.json", self.process)


@dataclass
class RawProcess:
    """One process's raw recording, read back."""

    folder: Path
    pid: int
    argv: list[str]
    finished: bool
    overhead: dict[str, Any]
    modules: list[tuple[int, Path]]  # (load sequence number, cubin file), in load order
    launches: list[LaunchRecord]
    shapes: dict[str, int]
    timings: list[KernelTiming] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # lines that did not parse (a crash cut them)


def _json_lines(path: Path, damaged: list[str]) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        return
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            damaged.append(f"{path.name}:{n + 1}")


def read_process(folder: Path) -> RawProcess:
    """The raw recording in ``folder`` (``OUT/raw/<pid>``). A file a crash cut short is read up
    to its last whole line (the others are listed in ``damaged``)."""
    damaged: list[str] = []
    try:
        proc = json.loads((folder / "process.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        proc = {"pid": int(folder.name) if folder.name.isdigit() else 0, "argv": []}
        damaged.append("process.json")
    modules = []
    for f in sorted((folder / "modules").glob("*.cubin")):
        seq = f.name.split("-", 1)[0]
        if seq.isdigit():
            modules.append((int(seq), f))
    launches = [LaunchRecord.from_dict(d) for d in _json_lines(folder / "launches.jsonl", damaged)]
    timings = [KernelTiming.from_dict(d) for d in _json_lines(folder / "activity.jsonl", damaged)]
    try:
        shapes = json.loads((folder / "shapes.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        shapes = {}
    return RawProcess(
        folder=folder,
        pid=int(proc.get("pid", 0)),
        argv=list(proc.get("argv", [])),
        finished=proc.get("status") == "finished",
        overhead=dict(proc.get("overhead", {})),
        modules=modules,
        launches=launches,
        shapes={str(k): int(v) for k, v in shapes.items()},
        timings=timings,
        damaged=damaged,
    )
