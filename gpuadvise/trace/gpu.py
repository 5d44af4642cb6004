"""The GPU tracer: the kernel's real memory accesses, recorded on the GPU: :func:`trace_on_gpu`
(behind the tracer seam: :class:`gpuadvise.trace.tracer.GpuTracer`, which has no SIMT nor
instruction counts and traces the first CTAs only).

The kernel's PTX is rewritten (:mod:`gpuadvise.ptx.instrument`) so that each memory instruction
also appends a warp record (instruction, CTA, warp, active mask, 32 addresses) to a trace buffer,
assembled with the toolkit's ptxas (the same ptxas that built the original cubin, so the driver
that loads one loads the other), and run in an isolated worker process
(:mod:`gpuadvise.runner.trace_job`) on the same data the runner and the CPU emulator use: the
launch's buffers from :func:`gpuadvise.runner.data.make_host_buffer`, outputs poisoned where the
runner poisons them. The worker first runs the original kernel; the instrumented run's outputs
must match its outputs (``outputs_match``: the instrumentation did not change what the kernel
computes), and both are timed (``slowdown``).

The trace is an :class:`~gpuadvise.trace.access.AccessTrace` in the emulator's convention, comparable
record for record with :func:`gpuadvise.trace.emulate.emulate`'s for the same CTAs:

- instruction ids: the emulator's (its program order with calls inlined, every memory instruction
  with a state space listed even when it never runs, generic ones per space reached);
- CTAs: the emulator's choice (``sample_ctas``: None the first wave, an int the first that many,
  ``"all"`` every CTA): a CTA filter in the instrumentation, so the other CTAs run but do not record;
- masks: the lanes that executed the instruction (``activemask``) and whose guard held;
- addresses: global ones mapped from device pointers to the emulator's virtual addresses (buffer
  ``i`` at ``0x7000_0000_0000 + i * 2**36``, module ``__device__`` variables after the buffers,
  offsets kept), shared ones the offset in the CTA's shared window as the GPU laid it out (a note
  says where the GPU's layout of a variable differs from the emulator's), local ones the offset in
  the thread's frame, constant ones the offset in the constant bank (both mapped through the
  kernel's variables, whose device addresses the kernel reports);
- the records are in the order the GPU reserved their slots (an approximation of time order).

When the trace buffer overflows, the worker runs again with a buffer of the size the counter
reached, if the device memory allowed (``max_trace_bytes``); records beyond the capacity are never
written, and ``records_lost`` says how many were dropped. :func:`select_tracer` implements
``--tracer auto|gpu|emu``.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuadvise.errors import RunnerError, UsageError
from gpuadvise.trace.access import RECORD, WARP, AccessTrace, Space
from gpuadvise.trace.sites import instr_info

if TYPE_CHECKING:
    from gpuadvise.devices import DeviceSpec
    from gpuadvise.ptx.instrument import Instrumented
    from gpuadvise.spec.kernel_spec import ResolvedLaunch
    from gpuadvise.toolchain import CompiledModule, KernelInfo, Toolchain

__all__ = [
    "TRACERS",
    "AddressMap",
    "GpuTrace",
    "GpuTraceError",
    "TraceDiff",
    "address_map",
    "compare_traces",
    "emulator_buffers",
    "records_to_trace",
    "select_tracer",
    "trace_on_gpu",
]

TRACERS = ("auto", "gpu", "emu")
DEFAULT_MAX_TRACE_BYTES = 16 << 30
_CHUNK_RECORDS = 1 << 18


class GpuTraceError(RunnerError):
    """The GPU tracer could not trace the kernel (a CUDA error, a timeout, a crash)."""


@dataclass(frozen=True)
class GpuTrace:
    """The result of :func:`trace_on_gpu`.

    ``outputs``: the instrumented run's output buffers (every CTA ran); ``outputs_match``: they
    equal the uninstrumented run's (``comparisons`` per buffer); ``slowdown``: median instrumented
    time over median original time (``time_ms``, ``instrumented_time_ms``; NaN when not timed);
    ``records_lost``: warp records that did not fit in the trace buffer (the trace lacks them);
    ``trace_bytes``: bytes of device records kept.
    """

    trace: AccessTrace
    outputs: dict[str, np.ndarray]
    outputs_match: bool
    slowdown: float
    records_lost: int
    notes: tuple[str, ...]
    time_ms: float = float("nan")
    instrumented_time_ms: float = float("nan")
    trace_bytes: int = 0
    comparisons: tuple[Any, ...] = ()
    reference: dict[str, np.ndarray] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    attempts: int = 1


def select_tracer(tracer: str | None) -> str:
    """``gpu`` or ``emu`` for ``--tracer auto|gpu|emu``: auto takes the GPU when one is usable
    (PyCUDA and a driver), else the emulator; ``gpu`` without a GPU is a usage error."""
    choice = (tracer or "auto").strip().lower()
    if choice not in TRACERS:
        raise UsageError(f"unknown tracer {tracer!r}", "choose auto, gpu or emu")
    if choice == "emu":
        return "emu"
    from gpuadvise.runner.client import pycuda_missing

    why = pycuda_missing()
    if choice == "gpu" and why is not None:
        raise UsageError(f"--tracer gpu needs a GPU: {why}", "use --tracer emu (or auto)")
    return "gpu" if why is None else "emu"


# ---------------------------------------------------------------------------------------------
# Device addresses back to the emulator's convention


@dataclass(frozen=True)
class AddressMap:
    """Ranges (device start, size, emulator start, name) per space; shared addresses are kept as
    the GPU gives them."""

    global_ranges: tuple[tuple[int, int, int, str], ...]
    local_ranges: tuple[tuple[int, int, int, str], ...] = ()
    const_ranges: tuple[tuple[int, int, int, str], ...] = ()

    def ranges(self, space: Space) -> tuple[tuple[int, int, int, str], ...]:
        if space == Space.GLOBAL:
            return self.global_ranges
        if space == Space.LOCAL:
            return self.local_ranges
        if space == Space.CONST:
            return self.const_ranges
        return ()


def emulator_buffers(buffers: list[tuple[str, int]], image: Any) -> dict[str, tuple[int, int]]:
    """The emulator's virtual address and size of every buffer (name, bytes; parameter order)
    and of the module's ``.global`` variables after them, as :func:`gpuadvise.trace.emulate.emulate`
    lays them out."""
    from gpuadvise.ptx.memory import GLOBAL_BASE, GLOBAL_STRIDE_BITS

    names = list(buffers) + [(v.name, v.size_bytes) for v in image.global_vars]
    return {
        name: (GLOBAL_BASE + (i << GLOBAL_STRIDE_BITS), size)
        for i, (name, size) in enumerate(names)
    }


def address_map(
    inst: Instrumented,
    image: Any,
    buffers: list[tuple[str, int, int]],
    table_values: list[int],
) -> tuple[AddressMap, list[str]]:
    """The map for a run: ``image`` the emulator's :class:`~gpuadvise.ptx.emulator.KernelImage`
    of the original PTX, ``buffers`` (name, device address, bytes) of the launch's buffers in
    parameter order, ``table_values`` the device addresses the kernel wrote for ``inst.table``."""
    notes: list[str] = []
    emu = {k: v[0] for k, v in emulator_buffers([(b[0], b[2]) for b in buffers], image).items()}
    glob = [(dev, size, emu[name], name) for name, dev, size in buffers]
    local = []
    const = []
    for var, dev in zip(inst.table, table_values, strict=False):
        if var.space == "global" and var.name in emu:
            glob.append((dev, var.size, emu[var.name], var.name))
        elif var.space == "local" and var.name in image.local_offsets:
            local.append((dev, var.size, image.local_offsets[var.name], var.name))
        elif var.space == "const" and var.name in image.const_offsets:
            const.append((dev, var.size, image.const_offsets[var.name], var.name))
        elif var.space == "shared" and var.name in image.shared_offsets:
            emu_off = image.shared_offsets[var.name]
            if emu_off != dev:
                notes.append(
                    f"shared variable {var.name} lies at {dev:#x} of the shared window on the GPU, "
                    f"at {emu_off:#x} in the emulator's layout (shared addresses are the GPU's)"
                )
    if len(table_values) < len(inst.table):
        notes.append("the kernel did not report every variable's address")
    return AddressMap(tuple(glob), tuple(local), tuple(const)), notes


_FULL = np.uint32(0xFFFFFFFF)
_LANES = np.arange(WARP, dtype=np.uint32)
_NOWHERE = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _lanes_on(mask: np.ndarray) -> np.ndarray:
    return ((mask[:, None] >> _LANES[None, :]) & 1).astype(bool)


def _map_rows(
    addr: np.ndarray, mask: np.ndarray, ranges: tuple[tuple[int, int, int, str], ...]
) -> int:
    """Map the active lanes of ``addr`` (records x 32, off-mask lanes 0) through ``ranges`` in
    place; returns the number of active lanes in no range (kept as they are). A record whose
    lanes all lie in one range (nearly all) moves as a whole; the others lane by lane."""
    order = sorted(ranges)
    starts = np.array([r[0] for r in order], np.uint64)
    ends = np.array([r[0] + r[1] for r in order], np.uint64)
    delta = np.array([r[2] - r[0] for r in order], np.int64)
    full = mask == _FULL
    hi = addr.max(axis=1)
    lo = addr.min(axis=1)
    part = np.flatnonzero(~full)
    if part.size:
        lo[part] = np.where(_lanes_on(mask[part]), addr[part], _NOWHERE).min(axis=1)
    j = np.searchsorted(starts, hi, side="right").astype(np.int64) - 1
    jc = np.maximum(j, 0)
    ok = (j >= 0) & (lo >= starts[jc]) & (hi < ends[jc])
    d = np.where(ok, delta[jc], 0)
    view = addr.view(np.int64)
    view += d[:, None]
    if part.size:
        addr[part] *= _lanes_on(mask[part])
    missed = 0
    for row in np.flatnonzero(~ok):  # records that span ranges or leave them: lane by lane
        on = _lanes_on(mask[row : row + 1])[0]
        a = addr[row]
        k = np.searchsorted(starts, a, side="right").astype(np.int64) - 1
        kc = np.maximum(k, 0)
        inside = on & (k >= 0) & (a < ends[kc])
        a[inside] = (a[inside].view(np.int64) + delta[kc[inside]]).view(np.uint64)
        missed += int(np.count_nonzero(on & ~inside))
    return missed


def records_to_trace(
    raw: np.ndarray,
    inst: Instrumented,
    program: Any,
    files: dict[int, str],
    amap: AddressMap,
    ctas: tuple[int, ...],
    total_ctas: int,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    buffers: dict[str, tuple[int, int]],
) -> tuple[AccessTrace, list[str]]:
    """Device records (:data:`~gpuadvise.ptx.instrument.DEVICE_RECORD`, in slot order) to an
    AccessTrace numbered as the emulator numbers it (``program``: the emulator's program of the
    original PTX; ``files``: the PTX's ``.file`` table)."""
    raw = np.ascontiguousarray(raw)
    sites = inst.sites
    nsites = len(sites)
    n = len(raw)
    seen = np.zeros(max(nsites, 1), bool)
    for s in range(0, n, _CHUNK_RECORDS):
        ids = np.asarray(raw["site"][s : s + _CHUNK_RECORDS])
        if ids.size and int(ids.max()) >= nsites:
            raise GpuTraceError(
                f"the trace holds a record of unknown site {int(ids.max())} (of {nsites})",
                "the trace buffer was corrupted; report this with the kernel",
            )
        seen[np.unique(ids)] = True
    keys = {(index, int(space)): (kind, width) for index, space, kind, width in inst.declared}
    for st in sites:
        if seen[st.site]:
            keys.setdefault(st.key, (st.kind, st.width))
    ordered = sorted(keys)
    new_id = {k: i for i, k in enumerate(ordered)}
    from gpuadvise.ptx.dataflow import data_addressed

    gathers = data_addressed(program.instrs)
    infos = []
    for i, key in enumerate(ordered):
        index, space = key
        kind, width = keys[key]
        ins = program.instrs[index]
        infos.append(instr_info(i, ins, files, space, kind, width, index in gathers))
    site_inst = np.array([new_id.get(s.key, -1) for s in sites] or [0], np.int32)
    site_space = np.array([int(s.space) for s in sites] or [0], np.uint8)
    site_kind = np.array([int(s.kind) for s in sites] or [0], np.uint8)
    site_width = np.array([s.width for s in sites] or [0], np.uint8)
    out = np.empty(n, RECORD)
    # the addresses move as bytes: a structured field copy of 32 lanes is several times slower
    out_bytes = out.view(np.uint8).reshape(n, RECORD.itemsize)
    addr_at = RECORD.fields["addr"][1] if RECORD.fields else 0
    raw_words = raw.view(np.uint64).reshape(n, raw.dtype.itemsize // 8) if n else None
    raw_at = raw.dtype.fields["addr"][1] // 8 if raw.dtype.fields else 0
    unmapped = {Space.GLOBAL: 0, Space.LOCAL: 0, Space.CONST: 0}
    for s in range(0, n, _CHUNK_RECORDS):
        r = raw[s : s + _CHUNK_RECORDS]
        o = out[s : s + _CHUNK_RECORDS]
        k = len(r)
        site = r["site"].astype(np.int64)
        o["inst"] = site_inst[site]
        o["cta"] = r["cta"]
        o["warp"] = r["warp"]
        o["mask"] = r["mask"]
        o["epoch"] = 0  # barriers are not counted on the GPU
        o["extra"] = 0  # every access runs on the GPU: no loop is sampled
        sp = site_space[site]
        o["space"] = sp
        o["kind"] = site_kind[site]
        o["width"] = site_width[site]
        assert raw_words is not None
        addr = np.array(raw_words[s : s + k, raw_at : raw_at + WARP])
        mask = np.array(r["mask"])
        part = np.flatnonzero(mask != _FULL)
        if part.size:  # slots of lanes off the mask were never written
            addr[part] *= _lanes_on(mask[part])
        for space in unmapped:
            ranges = amap.ranges(space)
            if not ranges:
                continue
            rows = sp == int(space)
            if rows.all():
                unmapped[space] += _map_rows(addr, mask, ranges)
            elif rows.any():
                sel = np.flatnonzero(rows)
                sub = addr[sel]
                unmapped[space] += _map_rows(sub, mask[sel], ranges)
                addr[sel] = sub
        out_bytes[s : s + k, addr_at : addr_at + 8 * WARP] = addr.view(np.uint8).reshape(k, -1)
    notes = [
        f"{count} {space.name.lower()} lane accesses lie outside every known "
        f"{'buffer' if space == Space.GLOBAL else 'variable'}: their device addresses are kept"
        for space, count in unmapped.items()
        if count
    ]
    trace = AccessTrace(
        records=out,
        instructions=tuple(infos),
        ctas=ctas,
        total_ctas=total_ctas,
        grid=grid,
        block=block,
        source="gpu",
        buffers=buffers,
    )
    return trace, notes


# ---------------------------------------------------------------------------------------------
# The entry point


def _ptxas_flags(nvcc_flags: tuple[str, ...], block: tuple[int, int, int]) -> list[str]:
    """The original compile's ptxas options, with a register cap that keeps the launch possible:
    the probes need registers, and a block of ``block`` threads must still fit the 64K register
    file (the instrumented kernel may spill instead; only its speed suffers)."""
    from gpuadvise.ptx.instrument import ptxas_options

    opts = ptxas_options(nvcc_flags)
    threads = max(block[0] * block[1] * block[2], 1)
    cap = min(255, (65536 // threads) // 8 * 8)
    given = [int(o.split("=", 1)[1]) for o in opts if o.startswith("-maxrregcount=")]
    opts = [o for o in opts if not o.startswith("-maxrregcount=")]
    return [*opts, f"-maxrregcount={min([cap, *given])}"]


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else float("nan")


def _within_sample_budget(
    raw: np.ndarray, count: int, cost_budget: int
) -> tuple[np.ndarray, tuple[int, ...], list[str]]:
    """The default sample's records cut as the emulator's are: to runs of consecutive CTAs
    spread over the first wave (:func:`~gpuadvise.trace.emulate.spread_runs`) when the wave
    would cost more than ``cost_budget`` at the first CTA's cost (the default sample's
    :data:`~gpuadvise.trace.emulate.DEFAULT_SAMPLE_COST`, 0 for ``--sample-ctas wave``; the GPU
    counts no warp steps: its first CTA's cost is its warp records, so it may keep more CTAs
    than the emulator), and to the first of those CTAs whose trace fits
    :data:`~gpuadvise.trace.emulate.DEFAULT_SAMPLE_TRACE_BYTES` (at least one CTA): the GPU
    traces the whole first wave at once, and a naive SGEMM's 264 CTAs of 65,536 warp records
    (4.6 GB of device records, 4.9 GB as a trace) took the GPU machine's analyze past 7 GB.
    ``raw`` may be a memory map of the records file: only the kept records are read. Returns
    the kept records, the kept CTAs and the note."""
    from gpuadvise.trace.access import RECORD
    from gpuadvise.trace.emulate import (
        DEFAULT_SAMPLE_TRACE_BYTES,
        _cost_note,
        _cut_note,
        affordable_ctas,
        spread_runs,
    )

    every = tuple(range(count))
    if len(raw) == 0:
        return np.array(raw), every, []
    cta = np.asarray(raw["cta"], dtype=np.int64)
    per_cta = np.bincount(np.minimum(cta, count), minlength=count + 1)[:count]
    afford = affordable_ctas(cost_budget, int(per_cta[0]), 1)
    kept = spread_runs(np.arange(count, dtype=np.int64), afford)
    fit = int(
        np.searchsorted(
            np.cumsum(per_cta[kept]) * RECORD.itemsize, DEFAULT_SAMPLE_TRACE_BYTES, "right"
        )
    )
    fit = max(1, fit)
    if fit >= count:
        return np.array(raw), every, []
    note = (
        _cost_note(len(kept), count, cost_budget)
        if fit >= len(kept)
        else _cut_note(fit, count, DEFAULT_SAMPLE_TRACE_BYTES)
    )
    kept = kept[:fit]
    keep = np.zeros(count + 1, bool)
    keep[kept] = True
    return np.array(raw[keep[np.minimum(cta, count)]]), tuple(int(c) for c in kept), [note]


def trace_on_gpu(
    module: CompiledModule,
    kernel: KernelInfo,
    resolved_launch: ResolvedLaunch,
    device: DeviceSpec,
    sample_ctas: int | str | None = None,
    *,
    timeout_s: float = 300.0,
    capacity: int | None = None,
    max_trace_bytes: int = DEFAULT_MAX_TRACE_BYTES,
    timing_samples: int = 5,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    toolchain: Toolchain | None = None,
    work_dir: str | Path | None = None,
    emulate_device: bool = False,
) -> GpuTrace:
    """Trace ``kernel`` of ``module`` on the GPU for ``resolved_launch`` (module docstring).

    ``device``: the model that picks the first wave (as the emulator does); ``capacity``: records
    of the first attempt's buffer (default: an estimate); ``work_dir``: where the instrumented PTX
    and cubin are kept (default: a temporary directory, removed); ``emulate_device``: run both
    kernels' PTX in the CPU emulator instead of on a GPU (in this process, every CTA: a test of
    the whole path without a GPU, see :class:`~gpuadvise.runner.trace_job.EmulatedBackend`). Raises
    :class:`GpuTraceError` when a run fails (naming the stage and the CUDA error),
    :class:`~gpuadvise.ptx.instrument.InstrumentError` when the PTX cannot be instrumented, and
    :class:`~gpuadvise.errors.RunnerError` when there is no GPU.
    """
    from gpuadvise.ptx.emulator import KernelImage
    from gpuadvise.ptx.instrument import (
        DEVICE_RECORD,
        HEADER_BYTES,
        MAGIC,
        RECORD_BYTES,
        TABLE_OFFSET,
        assemble,
        instrument_ptx,
    )
    from gpuadvise.runner.client import require_gpu
    from gpuadvise.runner.job import Param
    from gpuadvise.runner.params import buffer_init, constant_inits, scalar_param
    from gpuadvise.runner.trace_job import (
        EmulatedBackend,
        TraceJob,
        TraceRun,
        run_trace,
        run_trace_in_worker,
    )
    from gpuadvise.runner.verify import compare
    from gpuadvise.spec.kernel_spec import ResolvedArg
    from gpuadvise.toolchain import find_toolchain
    from gpuadvise.trace.emulate import (
        DEFAULT_SAMPLE_COST,
        WHOLE_WAVE,
        _parse,
        _sample_count,
        first_wave_ctas,
    )

    t0 = time.perf_counter()
    if not emulate_device:
        require_gpu()
    launch = resolved_launch
    grid = launch.launch.grid.as_tuple()
    block = launch.launch.block.as_tuple()
    total = grid[0] * grid[1] * grid[2]
    count, notes = _sample_count(
        sample_ctas, total, lambda: first_wave_ctas(kernel, launch, device)
    )
    inst = instrument_ptx(module.ptx, kernel.mangled)
    notes += list(inst.notes)
    tc = toolchain or find_toolchain()
    ptx_module = _parse(module.ptx, kernel.mangled)
    image = KernelImage.build(
        ptx_module, kernel.mangled, module.arch, launch.launch.dynamic_smem_bytes
    )
    params = tuple(
        scalar_param(p) if isinstance(p, ResolvedArg) else Param("buffer", "P", 0, p.name)
        for p in launch.params
    )
    buffers = tuple(buffer_init(b) for b in launch.buffers)
    warps = (block[0] * block[1] * block[2] + WARP - 1) // WARP
    if capacity is None:
        per_warp = max(len({s.index for s in inst.sites}), 1) * 2
        capacity = min(max(count * warps * per_warp + 4096, 1 << 16), 1 << 26)

    with tempfile.TemporaryDirectory(prefix="gpuadvise-gputrace-") as tmp:
        work = Path(work_dir) if work_dir is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cubin = assemble(
            inst.ptx,
            module.arch,
            tc.ptxas,
            out=work / "instrumented.cubin",
            options=_ptxas_flags(module.flags, block),
        )
        original, instrumented = str(module.cubin_path), str(cubin)
        if emulate_device:
            original, instrumented = str(work / "original.ptx"), str(work / "instrumented.ptx")
            Path(original).write_text(module.ptx)
        records_path = Path(tmp) / "records.bin"
        job = TraceJob(
            symbol=kernel.mangled,
            original=original,
            instrumented=instrumented,
            grid=grid,
            block=block,
            dynamic_smem_bytes=launch.launch.dynamic_smem_bytes,
            params=params,
            buffers=buffers,
            records_path=str(records_path),
            seed=launch.seed,
            cta_lo=0,
            cta_hi=count,
            capacity=capacity,
            max_trace_bytes=max_trace_bytes,
            timing_samples=timing_samples,
            header_bytes=HEADER_BYTES,
            record_bytes=RECORD_BYTES,
            constants=constant_inits(module.ptx, launch.constants),
        )
        if emulate_device:
            run = TraceRun(run_trace(job, EmulatedBackend()), "")
        else:
            run = run_trace_in_worker(job, timeout_s)
        res = run.result
        if not res.ok:
            what = {
                "reference": "the kernel itself failed on the GPU (uninstrumented run)",
                "instrumented": "the instrumented kernel failed on the GPU",
                "load": "the driver refused a kernel image",
            }.get(res.stage, f"the GPU tracer failed ({res.stage})")
            hint = (
                "the uninstrumented kernel works: report this with the kernel, or use --tracer emu"
                if res.stage == "instrumented"
                else "check the launch (buffer sizes, grid), or run `gpuadvise bench` on it"
            )
            detail = (res.error or "").strip().splitlines()
            raise GpuTraceError(f"{what}: {detail[-1] if detail else 'unknown error'}", hint)
        header = res.header
        if len(header) > 4 and header[4] != MAGIC:
            notes.append("the instrumented kernel did not report its start (no CTA 0 ran?)")
        nvars = len(inst.table)
        first = TABLE_OFFSET // 8
        table_values = [int(v) for v in header[first : first + nvars]]
        raw = (
            np.memmap(records_path, DEVICE_RECORD, mode="r")
            if res.records_written
            else np.zeros(0, DEVICE_RECORD)
        )
        kept = tuple(range(count))
        if (sample_ctas is None or sample_ctas == WHOLE_WAVE) and count > 1:
            cost = DEFAULT_SAMPLE_COST if sample_ctas is None else 0
            raw, kept, cut = _within_sample_budget(raw, count, cost)
            notes += cut
        else:
            raw = np.array(raw)
    amap, map_notes = address_map(
        inst,
        image,
        [(b.name, res.allocations[b.name][0], b.nbytes) for b in buffers],
        table_values,
    )
    notes += map_notes
    emu_buffers = emulator_buffers([(b.name, b.nbytes) for b in buffers], image)
    trace, conv_notes = records_to_trace(
        raw,
        inst,
        image.program,
        ptx_module.files,
        amap,
        kept,
        total,
        grid,
        block,
        emu_buffers,
    )
    notes += conv_notes
    lost = max(0, res.counter - res.capacity)
    if lost:
        notes.append(
            f"the trace buffer held {res.capacity} of {res.counter} warp records: "
            f"{lost} were lost; trace fewer CTAs or raise max_trace_bytes"
        )
    elif res.attempts > 1:
        notes.append(f"the first trace buffer was too small: ran again with {res.capacity} records")
    notes += list(res.notes)
    comparisons = tuple(
        compare(name, res.reference[name], res.outputs[name], rtol=rtol, atol=atol)
        for name in res.reference
        if name in res.outputs
    )
    match = all(c.ok for c in comparisons)
    if not match:
        bad = [c.message for c in comparisons if not c.ok]
        notes.append("the instrumented run's outputs differ: " + "; ".join(bad))
    t_ref, t_inst = _median(res.times_ms), _median(res.instrumented_times_ms)
    slowdown = t_inst / t_ref if t_ref > 0 else float("nan")
    return GpuTrace(
        trace=trace,
        outputs=res.outputs,
        outputs_match=match,
        slowdown=slowdown,
        records_lost=lost,
        notes=tuple(notes),
        time_ms=t_ref,
        instrumented_time_ms=t_inst,
        trace_bytes=res.records_written * RECORD_BYTES,
        comparisons=comparisons,
        reference=res.reference,
        device=res.device,
        wall_s=time.perf_counter() - t0,
        attempts=res.attempts,
    )


# ---------------------------------------------------------------------------------------------
# Comparing two traces


@dataclass(frozen=True)
class TraceDiff:
    """Two traces of the same CTAs, record for record (as multisets of (inst, cta, warp, mask,
    32 addresses)). ``same_instructions``: the instruction lists agree (ids, lines, opcodes,
    spaces, kinds, widths); ``matched``: records found in both (with multiplicity)."""

    same_instructions: bool
    records_a: int
    records_b: int
    matched: int
    first_difference: str | None = None

    @property
    def identical(self) -> bool:
        return self.same_instructions and self.matched == self.records_a == self.records_b


_KEY = np.dtype(
    [("inst", "<i4"), ("cta", "<i8"), ("warp", "<i4"), ("mask", "<u4"), ("addr", "<u8", (WARP,))]
)


def _record_keys(records: np.ndarray) -> np.ndarray:
    key = np.zeros(len(records), dtype=_KEY)
    for name in ("inst", "cta", "warp", "mask", "addr"):
        key[name] = records[name]
    return key.view(np.dtype((np.void, _KEY.itemsize)))


def compare_traces(a: AccessTrace, b: AccessTrace) -> TraceDiff:
    """Compare two traces of the same CTAs (the emulator's and the GPU's, say)."""
    ia = [(i.inst, i.line, i.opcode, int(i.space), int(i.kind), i.width) for i in a.instructions]
    ib = [(i.inst, i.line, i.opcode, int(i.space), int(i.kind), i.width) for i in b.instructions]
    same = ia == ib
    ka, kb = _record_keys(a.records), _record_keys(b.records)
    matched = 0
    first = None
    if len(ka) + len(kb):
        uniq, inv = np.unique(np.concatenate([ka, kb]), return_inverse=True)
        inv = inv.reshape(-1)
        ca = np.bincount(inv[: len(ka)], minlength=len(uniq))
        cb = np.bincount(inv[len(ka) :], minlength=len(uniq))
        matched = int(np.minimum(ca, cb).sum())
        diff = np.flatnonzero(ca != cb)
        if diff.size:
            k = int(diff[0])
            first = _describe(uniq[k], int(ca[k]), int(cb[k]))
    if not same:
        first = "the instruction lists differ" + (f"; {first}" if first else "")
    return TraceDiff(same, len(ka), len(kb), matched, first)


def _describe(key: Any, count_a: int, count_b: int) -> str:
    r = np.frombuffer(key.tobytes(), _KEY)[0]
    lanes = [i for i in range(WARP) if (int(r["mask"]) >> i) & 1]
    addrs = ", ".join(f"{int(r['addr'][i]):#x}" for i in lanes[:4])
    return (
        f"inst {int(r['inst'])} cta {int(r['cta'])} warp {int(r['warp'])} mask "
        f"{int(r['mask']):#010x} (lanes {lanes[:4]}: {addrs} ...) appears {count_a}x in the "
        f"first trace, {count_b}x in the second"
    )
