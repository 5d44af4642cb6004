"""From a raw recording to a folder of cases (``gpuadvise record``'s output).

One case per distinct kernel and launch shape (grid, block, dynamic shared memory) of each
process: ``cases/NN-<kernel>/`` with

- ``case.toml``: a launch spec in gpuadvise's own format (README "Launch specs") for the first
  launch of that shape whose buffers were copied: its scalars as ``[args]``, each pointer's data
  from the launch (from the pointer to the end of its allocation) as ``<param>.npy`` of the
  pointee's type, and a ``[recorded]`` table (launches, GPU time, the API, the process) that
  the spec reader ignores and the folder analysis ranks by;
- ``<kernel>.cubin``: the module's binary as the program loaded it;
- the kernel's source is the file its line information names (built with ``-lineinfo``), the
  source CuPy compiled it from (its kernel cache, kept in the recording), or one of the
  ``--source`` files that defines it; the spec points at it where it lies. A kernel whose
  source is not found gets a spec on its cubin (``source = "<kernel>.cubin"``, its parameters
  ``arg0``, ``arg1`` ...): ``gpuadvise analyze`` reads the binary (resources, occupancy, the
  SASS-based rules), and its fixes that rewrite the source say they need ``--source``.

A struct or vector passed by value is written as its bytes (``p = { bytes = "..." }``). A launch
gpuadvise cannot replay (no source and no cubin found, an unknown parameter layout) gets
``launch.json`` and no ``case.toml``, and the summary says why, so that ``gpuadvise analyze OUT``
analyzes the others. ``summary.json`` holds the run: the command, its exit status, the
overhead, every kernel by GPU time and launches, the cases.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuadvise.record.cubin import elf_images, read_cubin
from gpuadvise.record.params import ParamType, TypedParam, decode_params, demangled_types
from gpuadvise.record.raw import LaunchRecord, RawProcess, read_process

__all__ = ["CaseSummary", "KernelSummary", "write_cases"]

_CUPY_HEADER = "#include <cupy/"  # CuPy's generated kernels (elementwise, reductions) start so
_SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cuhpp", ".inl")
_MAX_SOURCE_FILES = 2000


@dataclass
class KernelSummary:
    symbol: str
    name: str
    launches: int = 0
    gpu_time_ns: int = 0
    timed_launches: int = 0
    cases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "name": self.name,
            "launches": self.launches,
            "timed_launches": self.timed_launches,
            "gpu_time_ms": self.gpu_time_ns / 1e6,
            "cases": self.cases,
        }


@dataclass
class CaseSummary:
    id: str
    folder: str
    symbol: str
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int
    launches: int
    gpu_time_ns: int
    replayable: bool
    source: str | None
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "folder": self.folder,
            "symbol": self.symbol,
            "name": self.name,
            "grid": list(self.grid),
            "block": list(self.block),
            "dynamic_smem_bytes": self.dynamic_smem_bytes,
            "launches": self.launches,
            "gpu_time_ms": self.gpu_time_ns / 1e6,
            "replayable": self.replayable,
            "source": self.source,
            "notes": self.notes,
        }


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return _toml_str(str(v))


def _safe_name(text: str, limit: int = 40) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    return (name or "kernel")[:limit]


class _Names:
    """Mangled -> demangled signature, one demangler run for all names (toolchain's
    ``demangle``: cu++filt, c++filt, or a small built-in one)."""

    def __init__(self, symbols: Sequence[str]) -> None:
        from gpuadvise.toolchain.names import demangle

        try:
            from gpuadvise.toolchain import find_toolchain

            tc = find_toolchain()
        except Exception:
            tc = None
        self.signatures = demangle(sorted(set(symbols)), tc)
        self.toolchain = tc

    def signature(self, symbol: str) -> str:
        return self.signatures.get(symbol, symbol)

    def display(self, symbol: str) -> str:
        from gpuadvise.toolchain.names import display_name

        return display_name(self.signature(symbol))


def _module_for(proc: RawProcess, record: LaunchRecord) -> bytes | None:
    """The cubin that holds ``record``'s kernel: from the last module loaded before the launch
    that has it (a fat binary's uncompressed cubins searched too)."""
    best = None
    for seq, path in proc.modules:
        if seq > record.seq:
            break
        try:
            images = elf_images(path.read_bytes())
        except OSError:
            continue
        for elf in images:
            try:
                if record.symbol in read_cubin(elf).kernels:
                    best = elf
            except ValueError:
                continue
    return best


def _base(display: str) -> str:
    name = display.split("<", 1)[0]
    return name.rsplit("::", 1)[-1].strip()


def _defines(path: Path, display: str) -> bool:
    from gpuadvise.source.signature import list_kernels

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        if _base(display) not in text:
            return False
        return any(_base(k) == _base(display) for k in list_kernels(text))
    except Exception:
        return False


def _line_files(cubin: Path, symbol: str, toolchain: Any) -> list[Path]:
    """The source files the kernel's line information names (nvdisasm), most used first."""
    if toolchain is None:
        return []
    from gpuadvise.toolchain import sass

    try:
        instrs = sass.disassemble(cubin, symbol, toolchain)
    except Exception:
        return []
    count: dict[str, int] = defaultdict(int)
    for i in instrs:
        for f, _ in (*i.inlined_at, (i.file, i.line)):
            if f:
                count[f] += 1
    return [Path(f) for f, _ in sorted(count.items(), key=lambda kv: -kv[1])]


def _source_candidates(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.suffix in _SOURCE_SUFFIXES and f.is_file():
                    out.append(f)
                    if len(out) >= _MAX_SOURCE_FILES:
                        return out
    return out


def _cupy_source(out: Path, image: bytes, display: str, symbol: str) -> Path | None:
    """The source CuPy compiled ``image`` from: its kernel cache (moved into the recording by
    the launcher) holds each cubin (after a hash) beside its source ``<cubin>.cu``. The image
    the driver was given is not always the cached file's bytes (seen on an H200 with CuPy 14:
    none of four cached cubins held it), so when none holds it, the cached sources that define
    the kernel and whose cubin names its symbol are taken if they are one text."""
    from gpuadvise.record.launcher import CUPY_CACHE

    cache = out / "raw" / CUPY_CACHE
    if not cache.is_dir():
        return None
    named: dict[str, Path] = {}
    for cubin in sorted(cache.rglob("*.cubin")):
        source = cubin.with_name(cubin.name + ".cu")
        try:
            if not source.is_file():
                continue
            data = cubin.read_bytes()
            if image in data:
                return source
            if symbol.encode() in data and _defines(source, display):
                named.setdefault(source.read_text(encoding="utf-8", errors="replace"), source)
        except OSError:
            continue
    return next(iter(named.values())) if len(named) == 1 else None


def _declared(source: Path | None, display: str, symbol: str, names: _Names) -> list[ParamType]:
    if source is not None:
        from gpuadvise.source.signature import parse_signature

        try:
            params = parse_signature(source.read_text(encoding="utf-8", errors="replace"), display)
            return [
                ParamType(p.name, p.type_text, p.is_pointer, p.pointee, p.is_const) for p in params
            ]
        except Exception:
            pass
    return demangled_types(names.signature(symbol)) or []


def _npy(path: Path, data: bytes, pointee: str | None) -> str:
    """Write ``data`` as ``path`` (.npy) of the pointee's type when gpuadvise knows it (the
    bytes that do not fill a whole element are dropped), else of bytes (uint8)."""
    import numpy as np

    from gpuadvise.spec.cuda_types import lookup

    ctype = lookup(pointee) if pointee else None
    if ctype is not None and ctype.lanes == 1 and ctype.kind in ("float", "int", "uint", "bool"):
        dtype = np.dtype(ctype.numpy_format)
        usable = len(data) - len(data) % dtype.itemsize
        np.save(path, np.frombuffer(data[:usable], dtype=dtype), allow_pickle=False)
        return ctype.name
    np.save(path, np.frombuffer(data, dtype=np.uint8), allow_pickle=False)
    return "uint8"


def _spec_text(
    record: LaunchRecord,
    kernel: str,
    source: str,
    params: list[TypedParam],
    buffers: dict[str, str],
    recorded: dict[str, Any],
) -> str:
    lines = [
        "# Recorded by `gpuadvise record`: one launch of this kernel and shape, with its data.",
        f"source = {_toml_str(source)}",
        f"kernel = {_toml_str(kernel)}",
        f"grid = {_toml_value(list(record.grid))}",
        f"block = {_toml_value(list(record.block))}",
        f"dynamic_smem = {record.dynamic_smem_bytes}",
        "",
        "[args]",
    ]
    for p in params:
        if p.kind == "scalar":
            lines.append(f"{p.name} = {_toml_value(p.value)}")
        elif p.kind == "bytes":  # a struct or vector by value: its bytes, as the launch had them
            lines.append(f"{p.name} = {{ bytes = {_toml_str(str(p.value))} }}")
    lines += ["", "[buffers]"]
    lines += [f"{name} = {_toml_str(text)}" for name, text in buffers.items()]
    lines += ["", "[recorded]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in recorded.items()]
    return "\n".join(lines) + "\n"


def _shape_time(proc: RawProcess, key: str) -> int:
    """GPU ns of every launch of one kernel and shape (CUPTI's kernel activity records)."""
    return sum(t.time_ns for t in proc.timings if t.key == key)


def write_cases(
    out: Path, sources: Sequence[Path] = (), kernel_filter: str | None = None
) -> tuple[list[KernelSummary], list[CaseSummary], list[RawProcess]]:
    """Read ``out/raw/*`` and write ``out/cases/``; returns the kernels (by GPU time, then
    launches), the cases and the processes read."""
    procs = sorted(
        (read_process(f) for f in (out / "raw").iterdir() if f.is_dir()),
        key=lambda p: p.pid,
    ) if (out / "raw").is_dir() else []  # fmt: skip
    symbols = [r.symbol for p in procs for r in p.launches]
    symbols += [k.split("|", 1)[0] for p in procs for k in p.shapes]
    symbols += [t.name for p in procs for t in p.timings]
    names = _Names(symbols)
    filt = re.compile(kernel_filter) if kernel_filter else None
    kernels: dict[str, KernelSummary] = {}
    for p in procs:
        for key, n in p.shapes.items():
            sym = key.split("|", 1)[0]
            kernels.setdefault(sym, KernelSummary(sym, names.display(sym))).launches += n
        for t in p.timings:
            k = kernels.setdefault(t.name, KernelSummary(t.name, names.display(t.name)))
            k.gpu_time_ns += t.time_ns
            k.timed_launches += 1
    for p in procs:  # a process that crashed may not have counted its last launches
        seen: dict[str, int] = defaultdict(int)
        for r in p.launches:
            seen[r.symbol] += 1
        for sym, n in seen.items():
            k = kernels.setdefault(sym, KernelSummary(sym, names.display(sym)))
            k.launches = max(k.launches, n)
    for k in kernels.values():
        k.launches = max(k.launches, k.timed_launches)
    candidates = _source_candidates(list(sources))
    cases: list[CaseSummary] = []
    case_root = out / "cases"
    for p in procs:
        by_key: dict[str, list[LaunchRecord]] = defaultdict(list)
        for r in p.launches:
            by_key[r.key].append(r)
        for records in sorted(by_key.values(), key=lambda rs: rs[0].seq):
            sym = records[0].symbol
            if filt and not (filt.search(sym) or filt.search(names.signature(sym))):
                continue
            case = _write_case(out, case_root, len(cases) + 1, p, records, names, candidates)
            cases.append(case)
            if case.symbol in kernels:
                kernels[case.symbol].cases.append(case.id)
    ranked = sorted(kernels.values(), key=lambda k: (-k.gpu_time_ns, -k.launches, k.name))
    return ranked, cases, procs


def _write_case(
    out: Path,
    case_root: Path,
    number: int,
    proc: RawProcess,
    records: list[LaunchRecord],
    names: _Names,
    candidates: list[Path],
) -> CaseSummary:
    rec = next((r for r in records if all(pt.snapshot for pt in r.pointers)), records[0])
    display = names.display(rec.symbol)
    folder = case_root / f"{number:02d}-{_safe_name(_base(display))}"
    folder.mkdir(parents=True, exist_ok=True)
    notes = list(rec.notes)
    launches = proc.shapes.get(rec.key, len(records))
    gpu_ns = _shape_time(proc, rec.key)
    module = _module_for(proc, rec)
    source: Path | None = None
    cubin: Path | None = None
    generated = False
    if module is not None:
        cubin = folder / f"{_safe_name(_base(display))}.cubin"
        cubin.write_bytes(module)
        for f in _line_files(cubin, rec.symbol, names.toolchain):
            if f.is_file() and _defines(f, display):
                source = f.resolve()
                break
        if source is None:
            found = _cupy_source(out, module, display, rec.symbol)
            source = found.resolve() if found is not None and _defines(found, display) else None
            if source is not None and _CUPY_HEADER in source.read_text(errors="replace"):
                generated = True
    else:
        notes.append("no module of the program holds this kernel's binary")
    if source is None:
        source = next((c.resolve() for c in candidates if _defines(c, display)), None)
    pointers = {pt.ordinal: pt for pt in rec.pointers}
    declared = _declared(source, display, rec.symbol, names)
    typed = decode_params(rec.slots, bytes.fromhex(rec.params_hex), declared or None, set(pointers))
    reasons = []
    if generated:
        reasons.append(
            "CuPy generated it (its source includes CuPy's own headers): leave it out with "
            "--kernel, or fuse the operations that launch it"
        )
    if rec.slot_source == "none":
        reasons.append("its parameter layout is unknown")
    binary_only = source is None and cubin is not None
    if source is None and cubin is None:
        reasons.append(
            "its source was not found (build with -lineinfo, or give the file with --source)"
        )
    unknown = [t.name for t in typed if t.kind == "bytes" and t.declared is None]
    if unknown and source is not None:
        reasons.append(f"the types of {', '.join(unknown)} are unknown")
    buffers: dict[str, str] = {}
    for t in typed:
        if t.kind != "pointer":
            continue
        pt = pointers.get(t.ordinal)
        pointee = t.declared.pointee if t.declared else None
        if pt is None:
            notes.append(f"{t.name} = {int(t.value or 0):#x} is in no device allocation")
            continue
        if pt.snapshot is None:
            notes.append(f"{t.name}: its allocation was not copied; random data instead")
            continue
        data = (proc.folder / "snapshots" / pt.snapshot).read_bytes()[pt.offset :]
        elem = _npy(folder / f"{t.name}.npy", data, pointee)
        buffers[t.name] = f"{t.name}.npy"
        if pt.offset:
            notes.append(f"{t.name} points {pt.offset} bytes into its allocation")
        if pointee and elem == "uint8" and pointee not in ("char", "unsigned char", "uint8_t"):
            notes.append(f"{t.name}: {pointee} data kept as bytes")
    for t in typed:
        if t.kind == "pointer" and t.name not in buffers and t.ordinal in pointers:
            pt = pointers[t.ordinal]
            buffers[t.name] = f"uint8[{pt.size_bytes - pt.offset}]"
    recorded = {
        "pid": proc.pid,
        "api": rec.api,
        "symbol": rec.symbol,
        "launch_number": rec.launch_number,
        "launches": launches,
        "gpu_time_ms": gpu_ns / 1e6,
        "stream": rec.stream,
        "parameter_layout": rec.slot_source,
    }
    replayable = not reasons
    kernel = display if source is not None else rec.symbol
    if replayable and binary_only:
        assert cubin is not None
        notes.append(
            "its source was not found: the case is analyzed from its cubin (resources, occupancy, "
            "the SASS-based rules; no trace without PTX); fixes that rewrite the source need it "
            "(gpuadvise analyze --spec case.toml --source FILE; build with -lineinfo, or give "
            "the file to record with --source)"
        )
    launch_doc = {
        "kernel": kernel,
        "grid": list(rec.grid),
        "block": list(rec.block),
        "dynamic_smem": rec.dynamic_smem_bytes,
        "params": [
            {
                "ordinal": t.ordinal,
                "name": t.name,
                "kind": t.kind,
                "value": t.value,
                "type": t.declared.type_text if t.declared else None,
            }  # fmt: skip
            for t in typed
        ],
        "recorded": recorded,
        "not_replayable": reasons,
    }
    (folder / "launch.json").write_text(json.dumps(launch_doc, indent=1), encoding="utf-8")
    if replayable:
        named = cubin.name if source is None and cubin is not None else str(source)
        text = _spec_text(rec, kernel, named, typed, buffers, recorded)
        (folder / "case.toml").write_text(text, encoding="utf-8")
    else:
        notes += [f"not replayable: {r}" for r in reasons]
    return CaseSummary(
        id=folder.name,
        folder=str(folder.relative_to(out)),
        symbol=rec.symbol,
        name=display,
        grid=rec.grid,
        block=rec.block,
        dynamic_smem_bytes=rec.dynamic_smem_bytes,
        launches=launches,
        gpu_time_ns=gpu_ns,
        replayable=replayable,
        source=None if source is None else str(source),
        notes=notes,
    )
