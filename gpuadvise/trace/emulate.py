"""Run a kernel's PTX on the CPU and get its warp-level memory trace: :func:`emulate` (behind
the tracer seam: :class:`gpuadvise.trace.tracer.EmulatorTracer`).

The emulator (:mod:`gpuadvise.ptx`) executes the PTX that the compile step produced for a sample of
CTAs, all their lanes at once with numpy, reconverging diverged warps at immediate post-dominators
(:mod:`gpuadvise.ptx.emulator` says how), and records one :data:`~gpuadvise.trace.access.RECORD` per
warp-level memory instruction executed. It starts from the data the GPU runner would use: every
buffer made by :func:`gpuadvise.runner.data.make_host_buffer` (same dtype, count, fill, seed and
name, see :func:`buffer_dtype`), and outputs that the runner poisons (non-const pointers the user gave
no fill, see :func:`runner_poisons`) poisoned the same way; an explicit fill (``random``, ``zeros``,
a data file ...) is honoured on every buffer. When the kernel reads a poisoned buffer before writing
it (an in/out buffer whose start values matter), a note says so and how to give it a fill
(:func:`poisoned_reads`). So on the CTAs it runs it
computes what the GPU computes: exactly for integer kernels, up to float rounding for float ones
(:mod:`gpuadvise.ptx.ops` lists the approximations). Shared and local memory start zeroed (on the
GPU they start undefined).

Which CTAs: ``sample_ctas=None`` runs the first wave, the CTAs that are resident at once at the
kernel's occupancy (``active_blocks_per_sm * sm_count`` from
:func:`gpuadvise.model.occupancy.max_active_blocks`, the lowest linear CTA ids, as the hardware
dispatches them), bounded by its cost (:data:`DEFAULT_SAMPLE_COST`: runs of consecutive CTAs
spread over the wave when the whole wave would cost more); ``"wave"`` runs the whole first
wave; an int runs the first that many; ``"all"`` runs every CTA; a sequence of linear
CTA ids runs those (:func:`interior_ctas` picks CTA rows away from the grid's border, which the L2
model needs when the first wave only covers CTAs whose footprint reaches it). Whole-launch totals
drawn from the trace are exact when every CTA ran (``complete``) and otherwise extrapolated by
``trace.scale``. ``outputs`` hold the final contents of the output buffers; they equal the GPU's only
when every CTA ran (a note says so otherwise). CTAs run in batches of up to ``batch_lanes`` lanes.

The trace: ``instructions`` lists every memory instruction of the kernel that names its state space
(executed or not: :mod:`gpuadvise.model.reconcile` compares them with the SASS), and the generic
``ld``/``st``/``atom`` with each space their addresses turned out to be in (one that reached two
spaces appears twice, and a warp access that mixed spaces gives one record per space), in program
order; file and line are the innermost source location, the
convention of nvdisasm's line table that :mod:`gpuadvise.model.reconcile` matches against (for code
inlined from a CUDA header, the header's line, with the user's call site beside it, where the
models report it: :mod:`gpuadvise.trace.sites`; error messages give the user's call site first).
Addresses: global ones are the buffer's fake virtual address (buffer ``i``
at ``0x7000_0000_0000 + i * 2**36``, see :mod:`gpuadvise.ptx.memory`), shared ones the offset in the
CTA's shared window as ptxas lays it out (static variables in declaration order at their alignment,
from 0x400 on sm_90 and later, then the dynamic area at a 16-byte boundary), local ones the offset
in the thread's frame, constant ones the offset in the user bank. ``ld.param``/``st.param`` are not
memory accesses here (they are registers or constant bank 0 in SASS) and are not recorded.

Errors: an out-of-bounds or misaligned access stops the emulation with a
:class:`~gpuadvise.ptx.errors.MemoryAccessError` naming the source line, the buffer, the offset, and
the CTA and thread of the first offending lane (the first error only: a memory checker that stops,
like the GPU's own fault); so does an unsupported instruction when it executes
(:class:`~gpuadvise.ptx.errors.UnsupportedInstructionError`, naming the opcode and the line), a
device-side assert, and a warp running past ``max_instructions``
(:class:`~gpuadvise.ptx.errors.InstructionBudgetError`).

Memory: the buffers and the sampled CTAs are checked against the memory budget
(:mod:`gpuadvise.spec.budget`) before anything is allocated, and the trace may take a quarter of
it. A trace that outgrows its share, or running out of memory all the same, is a
:class:`~gpuadvise.spec.budget.TooLargeError` that says what to lower when the sample was asked
for (an int or ``"all"``), else an :class:`~gpuadvise.ptx.errors.EmulationError`; never a
traceback.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuadvise.errors import GpuAdviseError, UsageError
from gpuadvise.ptx.errors import EmulationError
from gpuadvise.spec.budget import (
    KEEP_FOR_RULES,
    TooLargeError,
    check_fits,
    format_bytes,
    memory_budget,
    out_of_time,
    skip,
)
from gpuadvise.spec.kernel_spec import ResolvedArg, ResolvedBuffer, ResolvedLaunch
from gpuadvise.spec.progress import step
from gpuadvise.trace.access import RECORD, AccessTrace, Kind, Space
from gpuadvise.trace.changes import OutputChanges
from gpuadvise.trace.emu_cost import (
    DEFAULT_SAMPLE_EMU_NS,
    CtaCost,
    cpu_plan,
    emulator_cost,
    sample_ns,
)
from gpuadvise.trace.sass_arrival import InFlight, in_flight
from gpuadvise.trace.simt import SimtCounts, SimtProfile, kernel_work, simt_profile

if TYPE_CHECKING:
    from gpuadvise.devices import DeviceSpec
    from gpuadvise.runner.data import BufferFiller
    from gpuadvise.toolchain import CompiledModule, KernelInfo

__all__ = [
    "DEFAULT_BATCH_LANES",
    "DEFAULT_MAX_INSTRUCTIONS",
    "Emulation",
    "buffer_dtype",
    "constant_bytes",
    "emulate",
    "emulate_ptx",
    "interior_ctas",
    "poisoned_reads",
    "runner_poisons",
]

DEFAULT_MAX_INSTRUCTIONS = 2_000_000
"""The most PTX instructions one warp may execute before the emulation stops."""

DEFAULT_BATCH_LANES = 65536
"""Lanes (threads, warps padded to 32) executed together in one batch."""

ASSUMED_SM_COUNT = 132
_REG_BUDGET_BYTES = 768 << 20

# Memory per sampled CTA besides its trace: its id (int64) and the two tuples of ids handed back
# (Emulation.ctas_run, AccessTrace.ctas: a pointer and an int object each).
_BYTES_PER_SAMPLED_CTA = 8 + 2 * (8 + 32)
# The emulator's global memory maps every buffer once (zero pages the system commits only when
# written); the pages the traced CTAs touch are made from the fill as they run and take at most a
# quarter of the budget (_DATA_SHARE_DIVISOR); whole inputs and outputs are made only when read.
_BUFFER_COPIES = 1
_DATA_SHARE_DIVISOR = 4
# The trace takes at most a quarter of the memory budget (the models copy it, and reconcile
# rewrites it), and never more than 8 GiB.
_TRACE_SHARE_DIVISOR = 4
_MAX_TRACE_BYTES = 8 << 30
DEFAULT_SAMPLE_TRACE_BYTES = 256 << 20
"""The trace of the default sample (the first wave) takes at most this much (~950,000 warp
accesses of :data:`~gpuadvise.trace.access.RECORD`): a first wave whose CTAs loop over long rows
(its matmul, 1,056 CTAs of 21,000 warp accesses each) is cut to the CTAs that fit, with a note,
instead of outgrowing memory. The first CTA runs alone and its records tell how many fit; it is
kept even when it alone is over this (llm.c's softmax: 1.2 million warp accesses, 340 MB), within
the trace's share of the memory budget; a later batch that overflows all the same is dropped
whole. A sample the user asks for (``--sample-ctas N`` or ``all``) is not cut: it fails when it
outgrows the trace's share of the memory budget.

256 MiB, not the 640 MiB of the first version: every model and layout rule reads each record
once or more, so the trace's size sets the run's time and peak memory (a naive SGEMM's first
wave: 36 CTAs traced, 41 s and 4.6 GB; at 256 MiB 14 CTAs, 24 s and 1.6 GB), while the models
extrapolate from the sampled CTAs either way (docs/performance.md, third round)."""
WHOLE_WAVE = "wave"
"""``sample_ctas`` (``--sample-ctas wave``): the whole first wave, as the default sample before
:data:`DEFAULT_SAMPLE_COST` (cut only by :data:`DEFAULT_SAMPLE_TRACE_BYTES`)."""

DEFAULT_SAMPLE_COST = 1 << 17
"""The default sample (the first wave) costs at most about this many warp accesses plus warp
steps, counted on its first CTA (which runs alone) times the CTAs kept: a wave that would cost
more is cut to the CTAs it affords (at least one), in runs of :data:`SAMPLE_RUN_CTAS`
consecutive CTAs spread over the wave (:func:`spread_runs`), with a note. Deterministic: the
counts are the kernel's, not the machine's time.

Why a cost and not a CTA count: a first wave is often 1,000+ CTAs (active blocks per SM x SMs),
and the trace's size sets both the trace's time (per warp step) and the rules' (every model
reads each warp access once or more), while the models extrapolate from the sampled CTAs
(``trace.scale``) either way. Why 2**17 (~36 MiB of trace): on the corpus (docs/performance.md,
fifteenth session) HeCBench softMax's 391 CTAs of 25,000 warp accesses each took 26 CPU-s at
:data:`DEFAULT_SAMPLE_TRACE_BYTES` (37 CTAs), 16 CPU-s at 9 CTAs and 10 CPU-s at 4; the
findings of the corpus kernels whose sample this cuts are listed there. ``--sample-ctas wave``
(:data:`WHOLE_WAVE`) traces the whole first wave (cut only by the trace bytes), as before.

The warp accesses and steps do not see a step's length (HeCBench binomialOptions: 76,215
instructions in 8,327 steps a CTA, 20 CTAs in 9.4 CPU-s within this bound), so the sample is
also bounded by the emulator's CPU (:data:`gpuadvise.trace.emu_cost.DEFAULT_SAMPLE_EMU_NS`,
costed from the first CTA's counts by :func:`gpuadvise.trace.emu_cost.cpu_plan`): over it, the
CTAs after the first run in fewer, larger batches, then fewer CTAs are kept, with a note."""
MIN_SAMPLE_CTAS = 32
MIN_SAMPLE_STRETCH = 4
"""A default sample of fewer than :data:`MIN_SAMPLE_CTAS` CTAs may cost up to
:data:`MIN_SAMPLE_STRETCH` times :data:`DEFAULT_SAMPLE_COST`, to keep up to that many CTAs
(HeCBench softMax: 20 CTAs instead of 5): HeCBench clenergy (1,152 CTAs of
~10,900 warp accesses and steps) kept 12 CTAs at the cost alone, and the execution model then
called it latency-bound (GA106, wrong) where 32, 64 or the old 116 CTAs say compute-bound
(GA405, right)."""

SAMPLE_RUN_CTAS = 4
"""The default sample's runs of consecutive CTAs (:func:`spread_runs`)."""


def trace_cost(accesses: int, steps: int) -> int:
    """A trace's cost in :data:`DEFAULT_SAMPLE_COST`'s unit: its warp accesses plus its warp
    steps, counts of what the emulator did, the same on every machine and at every load."""
    return int(accesses) + int(steps)


# a lower budget for the default sample, set by sample_trace_bytes (None: DEFAULT_SAMPLE_TRACE_BYTES)
_SAMPLE_BYTES: ContextVar[int | None] = ContextVar("sample_trace_bytes", default=None)
# a lower bound on the default sample's cost, set by sample_trace_cost (None: DEFAULT_SAMPLE_COST)
_SAMPLE_COST: ContextVar[int | None] = ContextVar("sample_trace_cost", default=None)
# a lower bound on the default sample's emulator cost, set by sample_emu_cost (None: no bound but
# the default sample's own, DEFAULT_SAMPLE_EMU_NS)
_SAMPLE_EMU: ContextVar[int | None] = ContextVar("sample_emu_cost", default=None)


# the emulations inside parse only the kernel's entry and its callees (entry_only_parse)
_ENTRY_ONLY: ContextVar[bool] = ContextVar("entry_only_parse", default=False)


@contextmanager
def entry_only_parse() -> Iterator[None]:
    """For the emulations inside, the PTX module is parsed for the traced kernel alone
    (:func:`gpuadvise.ptx.parser.parse_ptx_entry`: its entry's and callees' bodies, the other
    functions' skipped) and not kept: a variant's module, emulated once, of which no rule reads
    the other kernels (the kernel's own emulation parses the whole module, which the rules read
    again from the parser's cache)."""
    token = _ENTRY_ONLY.set(True)
    try:
        yield
    finally:
        _ENTRY_ONLY.reset(token)


@contextmanager
def sample_trace_bytes(limit_bytes: int) -> Iterator[None]:
    """For the emulations inside, a first wave that the default sample's budget
    (:data:`DEFAULT_SAMPLE_TRACE_BYTES`) cuts is cut further, to about the CTAs whose trace fits
    in ``limit_bytes`` (never more than the default allows): every k-th of the CTAs the default
    keeps, so that their mix is the default's (a grid-stride loop's first CTAs carry one
    iteration more than its last: a shorter prefix would hold only those). A variant's trace is
    so kept to about the kernel's own cost (:mod:`gpuadvise.analyze.variant_trace`). A wave the
    default budget traces whole is traced whole; a sample asked for (a count, ``all``, a list of
    CTAs) is never cut."""
    now = _SAMPLE_BYTES.get()
    token = _SAMPLE_BYTES.set(
        max(1, int(limit_bytes) if now is None else min(int(limit_bytes), now))
    )
    try:
        yield
    finally:
        _SAMPLE_BYTES.reset(token)


@contextmanager
def sample_trace_cost(limit: int) -> Iterator[None]:
    """For the emulations inside, a first wave that the default sample cuts anyway is cut
    further, as :func:`sample_trace_bytes` cuts it, to about the CTAs whose cost
    (:func:`trace_cost`, counted on the first CTA) fits in ``limit`` (never more than an
    enclosing bound allows): the steps count where the bytes do not. A wave the default traces
    whole is traced whole, and the first CTA always runs; a sample asked for is never cut."""
    now = _SAMPLE_COST.get()
    token = _SAMPLE_COST.set(max(1, int(limit) if now is None else min(int(limit), now)))
    try:
        yield
    finally:
        _SAMPLE_COST.reset(token)


@contextmanager
def sample_emu_cost(limit_ns: int) -> Iterator[None]:
    """For the emulations inside, a first wave that the default sample cuts anyway is cut
    further, as :func:`sample_trace_cost` cuts it (every k-th of the CTAs it keeps), to about the
    CTAs whose emulation fits in ``limit_ns`` of the emulator's cost
    (:func:`gpuadvise.trace.emu_cost.sample_ns` of the first CTA's counts, in its batches: a
    count, the same on every machine; never more than an enclosing bound allows): a step's
    length counts where the warp accesses and steps do not (a grid-stride variant's CTA loops
    over many elements, each step a long block). A wave the default traces whole is traced
    whole, and the first CTA always runs; a sample asked for is never cut. A first CTA that
    alone passes ``limit_ns`` (under the default sample's own :data:`DEFAULT_SAMPLE_EMU_NS`) has
    its long loops whose results steer nothing sampled from there, as the default sample's
    first CTA has past that (:func:`_over_sample_cost`): the sample ends with it."""
    now = _SAMPLE_EMU.get()
    token = _SAMPLE_EMU.set(max(1, int(limit_ns) if now is None else min(int(limit_ns), now)))
    try:
        yield
    finally:
        _SAMPLE_EMU.reset(token)


_SAMPLE_HINT = (
    "trace fewer CTAs: --sample-ctas 1024, or leave --sample-ctas out to trace the first wave "
    "(or --no-trace: the static analysis needs no trace)"
)


@dataclass(frozen=True)
class Emulation:
    """The result of :func:`emulate`.

    ``outputs``: final contents of the output buffers (meaningful as results only when
    ``complete``: CTAs that did not run left their part as it was, poisoned or filled).
    ``inputs``: the initial contents of every buffer (poisoned outputs included).
    Both are made when first read (:class:`LazyArrays`): a trace that no one asks the outputs of
    never makes the whole buffers.
    ``lane_instructions``: PTX instructions executed, summed over active lanes;
    ``warp_steps``: scheduling steps (a basic block run for a group of warps);
    ``simt``: active lanes per executed warp instruction, per kernel, line and splitting branch
    (:mod:`gpuadvise.trace.simt`).
    """

    trace: AccessTrace
    outputs: Mapping[str, np.ndarray]
    inputs: Mapping[str, np.ndarray]
    ctas_run: tuple[int, ...]
    complete: bool
    lane_instructions: int
    time_s: float
    notes: tuple[str, ...]
    warp_steps: int = 0
    # warp-level memory accesses executed (param-space loads aside), traced or not: what a trace
    # of these CTAs holds (``--tracer auto`` reads it from an untraced CTA)
    warp_accesses: int = 0
    # seconds in the batches' runs, without the set-up (the image, the buffers, the first call's
    # imports): what ``--tracer auto`` scales from one CTA
    run_s: float = 0.0
    simt: SimtProfile | None = None
    # the long loops whose iterations were skipped (a note each; empty: every iteration ran):
    # the trace and the counts are weighted, the outputs are not the kernel's
    sampled_loops: tuple[str, ...] = ()
    # the output buffers' changed elements, found without making the whole buffers
    # (:mod:`gpuadvise.trace.changes`; None: not known, compare ``outputs`` with ``inputs``)
    changes: OutputChanges | None = None
    # the default sample's first CTA's cost, run alone (None: no default sample, or one CTA):
    # what the models' extra emulations are bounded by (gpuadvise.trace.emu_cost)
    cta_cost: CtaCost | None = None
    # what the kept batches made the emulator do, costed (gpuadvise.trace.emu_cost.emulator_cost
    # of each batch's instructions, lanes, warp accesses and steps, summed; ns of CPU on the
    # calibration machine): a count, the same on every machine and at every load, that bounds
    # a variant's emulation (gpuadvise.analyze.variant_trace)
    emu_cost: int = 0

    @property
    def lane_instructions_per_s(self) -> float:
        return self.lane_instructions / self.time_s if self.time_s > 0 else 0.0


class LazyArrays(Mapping[str, np.ndarray]):
    """Named arrays made on first access (and kept): ``makers`` maps each name to a function."""

    def __init__(self, makers: dict[str, Callable[[], np.ndarray]]) -> None:
        self._makers = makers
        self._made: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._made:
            self._made[name] = self._makers[name]()
        return self._made[name]

    def __contains__(self, name: object) -> bool:  # Mapping's would make the array
        return name in self._makers

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


def buffer_dtype(buf: ResolvedBuffer) -> tuple[np.dtype[Any], str | None]:
    """(numpy dtype, float kind) of a buffer's elements, as the runner builds them.

    Struct elements are raw bytes of the struct's size; bfloat16 and fp8 are their raw bits with
    the float kind beside (see :func:`gpuadvise.runner.data.make_host_buffer`).
    """
    from gpuadvise.spec.cuda_types import CudaType

    elem = buf.elem
    if isinstance(elem, CudaType):
        kind = elem.kind if elem.kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2") else None
        return elem.dtype, kind
    return np.dtype((np.void, buf.elem_size_bytes)), None


def runner_poisons(buf: ResolvedBuffer) -> bool:
    """Whether the runner poisons this buffer before a verification run: an output the user gave
    no fill; any explicit fill (``random``, ``zeros``, a data file ...) is kept."""
    return buf.poisoned


def check_buffer_memory(launch: ResolvedLaunch) -> None:
    """Raise :class:`~gpuadvise.spec.budget.TooLargeError` before making buffers that cannot fit
    (the default one-element-per-thread buffers of a huge launch included)."""
    if not launch.buffers:
        return
    total = launch.total_buffer_bytes
    big = max(launch.buffers, key=lambda b: b.size_bytes)
    shape = f"{big.elem.name}[{big.count}]"
    if big.assumed:
        shape += ", assumed: one element per thread of the launch"
        hint = (
            f"give the buffers their real sizes (--buffer {big.name}=TYPE[COUNT]), or --no-trace "
            "for the static analysis only"
        )
    else:
        hint = (
            f"give buffer {big.name} fewer elements (or smaller args in its count), or --no-trace "
            "for the static analysis only"
        )
    check_fits(
        total * _BUFFER_COPIES,
        f"tracing with {format_bytes(total)} of buffers ({big.name} = {shape}; "
        f"{_BUFFER_COPIES} copies)",
        hint,
    )


def _parse(text: str, entry: str) -> Any:
    from gpuadvise.ptx.parser import parse_ptx_cached, parse_ptx_entry

    if _ENTRY_ONLY.get():
        return parse_ptx_entry(text, entry)
    return parse_ptx_cached(text)


def first_wave_ctas(
    kernel: KernelInfo, launch: ResolvedLaunch, device: DeviceSpec
) -> tuple[int, list[str]]:
    """The number of CTAs resident at once at the kernel's occupancy (and notes)."""
    from gpuadvise.model.occupancy import KernelResources, OccupancyInputError, max_active_blocks

    notes = []
    sm = device.sm_count
    if sm is None:
        sm = ASSUMED_SM_COUNT
        notes.append(
            f"{device.name} has no SM count: the first wave assumes {ASSUMED_SM_COUNT} SMs"
        )
    res = kernel.resources
    try:
        occ = max_active_blocks(
            device,
            KernelResources(
                threads_per_block=launch.launch.block.count,
                regs_per_thread=res.registers,
                static_smem_bytes=res.static_smem_bytes,
                dynamic_smem_bytes=launch.launch.dynamic_smem_bytes,
            ),
        )
        per_sm = occ.active_blocks_per_sm
    except OccupancyInputError:
        per_sm = 0
    if per_sm <= 0:
        notes.append("the kernel cannot be resident at this launch configuration; one CTA per SM")
        per_sm = 1
    return per_sm * sm, notes


def _encode_params(image: Any, values: list[Any], addresses: dict[str, int]) -> bytes:
    """The kernel's parameter block: ``values`` in parameter order, each a buffer name
    (``("buffer", name)``) or a numpy scalar."""
    params = image.program.entry.params
    if len(params) != len(values):
        raise EmulationError(
            f"the kernel's PTX has {len(params)} parameters but the launch gives {len(values)}",
            "check that the spec matches the kernel's signature",
        )
    out = bytearray(max(image.param_bytes, 1))
    for decl, value in zip(params, values, strict=True):
        off, size = image.kernel_params[decl.name]
        if isinstance(value, tuple):
            raw = addresses[value[1]].to_bytes(8, "little")
        else:
            raw = np.asarray(value).tobytes()
        out[off : off + min(size, len(raw))] = raw[:size]
    return bytes(out)


def _launch_values(launch: ResolvedLaunch) -> list[Any]:
    values: list[Any] = []
    for p in launch.params:
        if isinstance(p, ResolvedBuffer):
            values.append(("buffer", p.name))
        else:
            assert isinstance(p, ResolvedArg)
            ct = p.ctype
            if isinstance(p.value, bytes):  # a struct or vector given by its bytes
                values.append(np.frombuffer(p.value, np.uint8))
                continue
            if ct.lanes > 1:
                raise UsageError(
                    f"parameter {p.name} of type {ct.name} cannot be passed by value yet",
                    "pass it through a pointer",
                )
            if ct.kind in ("bfloat16", "fp8_e4m3", "fp8_e5m2"):  # raw bits, as the runner does
                from gpuadvise.spec.cuda_types import encode_bfloat16, encode_fp8

                f = np.array([p.value], np.float32)
                bits = encode_bfloat16(f) if ct.kind == "bfloat16" else encode_fp8(f, ct.kind)
                values.append(bits[0])
                continue
            dt = np.dtype(ct.numpy_format)
            values.append(np.array(p.value).astype(dt) if dt.kind != "b" else np.bool_(p.value))
    return values


def _sample_count(sample_ctas: int | str | None, total: int, wave: Any) -> tuple[int, list[str]]:
    notes: list[str] = []
    if sample_ctas is None or sample_ctas == WHOLE_WAVE:
        count, wave_notes = wave()
        notes += wave_notes
        count = min(count, total)
        if count < total:
            notes.append(f"traced the first wave: {count} of {total} CTAs")
        return count, notes
    if sample_ctas == "all":
        return total, notes
    if isinstance(sample_ctas, int) and not isinstance(sample_ctas, bool) and sample_ctas > 0:
        return min(sample_ctas, total), notes
    raise UsageError(
        f"sample_ctas must be a positive integer, 'all' or '{WHOLE_WAVE}', not {sample_ctas!r}",
        f"e.g. sample_ctas=64, sample_ctas='all' or sample_ctas='{WHOLE_WAVE}'",
    )


def _sample_ids(ids: Sequence[int] | np.ndarray, total: int) -> tuple[np.ndarray, list[str]]:
    """The given linear CTA ids, checked, sorted and deduplicated."""
    try:
        arr = np.asarray(ids)
        ok = arr.ndim == 1 and (arr.size == 0 or np.issubdtype(arr.dtype, np.integer))
    except (TypeError, ValueError):
        ok = False
    if not ok or arr.size == 0:
        raise UsageError(
            "sample_ctas as a list must hold linear CTA ids (integers)", "e.g. sample_ctas=[0, 7]"
        )
    ctas = np.unique(arr.astype(np.int64))
    if ctas[0] < 0 or ctas[-1] >= total:
        raise UsageError(
            f"CTA id {int(ctas[0] if ctas[0] < 0 else ctas[-1])} is outside the grid of {total}",
            f"use ids 0 to {total - 1}",
        )
    notes = [] if len(ctas) == total else [f"traced {len(ctas)} chosen CTAs of {total}"]
    return ctas, notes


def interior_ctas(
    grid: tuple[int, int, int], exclude: Sequence[int] = (), rows: int = 2, limit: int = 128
) -> tuple[int, ...]:
    """Linear ids of ``rows`` consecutive CTA rows in the middle of a 2D grid (z folds into y,
    as CTA ids do), the ones farthest from the top and bottom edges; at most ``limit`` CTAs (a
    centred run of columns per row when the rows are longer), without those in ``exclude``.

    An image kernel's footprint reaches further than its own tile; the first wave of a large
    grid covers only the top CTA rows, whose footprints are clamped at the border. The L2 model
    (:mod:`gpuadvise.model.l2`) needs CTAs clear of the border and neighbours in x and in y to
    synthesize the whole grid: these rows provide both. Empty for grids of one row.
    """
    gx = int(grid[0])
    gy = int(grid[1]) * int(grid[2])
    if gy < 2 or gx < 1 or rows < 1 or limit < 1:
        return ()
    rows = min(rows, gy)
    y0 = max(0, (gy - rows) // 2)
    width = max(1, min(gx, limit // rows))
    x0 = (gx - width) // 2
    xs = np.arange(x0, x0 + width, dtype=np.int64)
    ids = (np.arange(y0, y0 + rows, dtype=np.int64)[:, None] * gx + xs[None, :]).reshape(-1)
    if len(exclude):
        ids = ids[~np.isin(ids, np.asarray(list(exclude), dtype=np.int64))]
    return tuple(int(c) for c in ids)


def emulate(
    module: CompiledModule,
    kernel: KernelInfo,
    launch: ResolvedLaunch,
    device: DeviceSpec,
    sample_ctas: int | str | Sequence[int] | None = None,
    max_instructions: int | None = None,
    batch_lanes: int = DEFAULT_BATCH_LANES,
    trace: bool = True,
    sample_loops: bool = True,
    models: bool = True,
) -> Emulation:
    """Emulate ``kernel`` of ``module`` for ``launch`` and trace its memory accesses.

    See the module docstring for the CTAs run, the data used and the errors raised.
    ``max_instructions``: the budget per warp (None: the launch's, ``--max-instructions``, else
    :data:`DEFAULT_MAX_INSTRUCTIONS`). ``batch_lanes``: lanes executed together (fewer when the
    kernel's registers need it). ``trace=False`` runs without recording (the trace comes back
    empty): for outputs only. ``sample_loops``: long loops may be sampled (the trace weighted,
    the outputs then not the kernel's); False where the outputs are compared. ``models=False``:
    a run whose outputs and global traffic alone are read (a launch check): the trace holds the
    global accesses' records only (every memory instruction listed), no SASS is read, no block
    costs are made or summed (``simt`` None, the trace without ``work``) and no note looks at a
    poisoned output's reads.
    """
    from gpuadvise.runner.data import buffer_filler

    check_buffer_memory(launch)
    buffers: list[tuple[str, np.ndarray | BufferFiller, bool]] = []
    poisoned: list[str] = []
    for buf in launch.buffers:
        dt, float_kind = buffer_dtype(buf)
        filler = buffer_filler(
            dt, buf.count, buf.fill, launch.seed, buf.name, float_kind, runner_poisons(buf)
        )
        if filler.poisoned:
            poisoned.append(buf.name)
        buffers.append((buf.name, filler, buf.is_output))
    static = kernel.resources.static_smem_bytes
    # the SASS being read in a thread (analyze's): the run starts without it
    flight = in_flight(module.cubin_path, kernel.mangled) if trace and models else None
    emu = _emulate(
        # the SASS feeds the timing models (block costs, loop schedules) read from a trace;
        # a run for its outputs alone (trace=False) needs no disassembly (an nvdisasm run)
        sass=_sass(module, kernel) if trace and models and flight is None else ((), {}),
        sass_later=None if flight is None else _sass_when(flight, module, kernel),
        constants=constant_bytes(module.ptx, launch),
        ptx=module.ptx,
        entry=kernel.mangled,
        arch=module.arch,
        grid=launch.launch.grid.as_tuple(),
        block=launch.launch.block.as_tuple(),
        dynamic_smem_bytes=launch.launch.dynamic_smem_bytes,
        buffers=buffers,
        values=_launch_values(launch),
        sm_count=device.sm_count or ASSUMED_SM_COUNT,
        sample_ctas=sample_ctas,
        wave=lambda: first_wave_ctas(kernel, launch, device),
        max_instructions=max_instructions or launch.max_instructions or DEFAULT_MAX_INSTRUCTIONS,
        batch_lanes=batch_lanes,
        static_smem_ptxas=static,
        record=trace,
        sample_loops=sample_loops,
        models=models,
    )
    if not trace or not poisoned or not models:
        return emu
    notes = list(emu.notes)
    for b in launch.buffers:
        reads = poisoned_reads(emu.trace, b.name) if b.name in poisoned else 0
        if reads:
            notes.append(
                f"buffer {b.name} is an output with no fill, so it starts poisoned (every byte "
                f"0xFF: NaN in floats, all ones in integers), and the kernel read it before "
                f"writing it (in the traced CTAs): if its "
                f"start values matter, give it a fill, e.g. --buffer '{b.name}="
                f"{_type_word(b.elem)}[{b.count_expr}]:random' (or zeros, or a data file)"
            )
    return dataclasses.replace(emu, notes=tuple(notes))


def _sass(module: CompiledModule, kernel: KernelInfo) -> tuple[Any, Any]:
    """The kernel's SASS (the disassembly is cached with the cubin), for its instruction counts
    (:mod:`gpuadvise.trace.sass_counts`), and its control bits, for the loops' schedules
    (:mod:`gpuadvise.trace.sass_schedule`); each empty when it cannot be read."""
    from gpuadvise.toolchain.sass import disassemble
    from gpuadvise.trace.sass_schedule import control_words

    try:
        sass = disassemble(module.cubin_path, kernel.mangled)
    except (GpuAdviseError, OSError):
        return (), {}
    try:
        ctl = control_words(module.cubin_path.read_bytes(), kernel.mangled)
    except (GpuAdviseError, OSError):
        ctl = {}
    return sass, ctl


def _sass_when(
    flight: InFlight, module: CompiledModule, kernel: KernelInfo
) -> Callable[[bool], tuple[Any, Any] | None]:
    """:func:`_sass` once ``flight`` (the thread reading it) is done: given False, None if it is
    not yet; given True, after waiting for it."""

    def later(wait: bool) -> tuple[Any, Any] | None:
        if not wait and not flight.done():
            return None
        flight.wait()
        return _sass(module, kernel)

    return later


def _type_word(elem: Any) -> str:
    """A spelling of ``elem`` without spaces, for a command line (``unsigned int`` -> uint32)."""
    name = str(elem.name)
    if " " not in name:
        return name
    kind = getattr(elem, "kind", "")
    if kind in ("int", "uint") and getattr(elem, "lanes", 1) == 1:
        return f"{'u' if kind == 'uint' else ''}int{8 * int(elem.size_bytes)}"
    return name.replace(" ", "_")


def poisoned_reads(trace: AccessTrace, name: str, chunk_records: int = 1 << 16) -> int:
    """Whether the kernel read buffer ``name`` before writing it, in the trace's execution order:
    the number of lane reads (loads and atomics) of data not written yet in the first stretch of
    ``chunk_records`` global records reaching the buffer that has any, or 0 when none does.
    Writes are stores and atomics; memory is tracked in 4-byte words (a write to any byte of a
    word counts as writing it), so it errs towards 0, never the other way."""
    span = trace.buffers.get(name)
    r = trace.records
    if span is None or len(r) == 0:
        return 0
    base, size = int(span[0]), int(span[1])
    # columns, gathered a stretch at a time (never whole records); an address is in the buffer
    # when its offset from the base, wrapping below it, is under the size
    addr_col, mask_col, kind_col, width_col = r["addr"], r["mask"], r["kind"], r["width"]
    ubase, usize = np.uint64(base), np.uint64(size)

    def offsets(rows: np.ndarray) -> np.ndarray:
        """Byte offsets from the buffer's base (uint64, wrapped) of records ``rows``."""
        a = addr_col[rows]
        a -= ubase
        return a

    def inside(rows: np.ndarray, off: np.ndarray) -> np.ndarray:
        # the active lanes: each mask's 32 bits, lane j's in column j (the little-endian
        # bytes' bits, least first), one unpacking where a shift and compare per lane cost ~3x
        bits = mask_col[rows].astype("<u4", copy=False).view(np.uint8).reshape(-1, 4)
        active = np.unpackbits(bits, axis=1, bitorder="little").view(np.bool_)
        active &= off < usize
        return active

    glob = np.flatnonzero(r["space"] == int(Space.GLOBAL))
    # only the records with some lane's address in the buffer (active or not: a superset of
    # those that reach it) matter, found on the address column alone, a stretch at a time
    touching = []
    for i in range(0, len(glob), chunk_records):
        part = glob[i : i + chunk_records]
        touching.append(part[(offsets(part) < usize).any(axis=1)])
    glob = np.concatenate(touching) if touching else glob
    reads = glob[kind_col[glob] != int(Kind.STORE)]
    if not any(
        inside(rows, offsets(rows)).any()
        for rows in (reads[i : i + chunk_records] for i in range(0, len(reads), chunk_records))
    ):
        return 0  # the kernel never reads the buffer (an output it only writes)
    words = max(1, (size + 3) // 4)
    written = np.zeros(words, dtype=bool)
    for start in range(0, len(glob), chunk_records):
        rows = glob[start : start + chunk_records]
        off = offsets(rows)
        hit = inside(rows, off)
        if not hit.any():
            continue
        addr = off.view(np.int64)  # (each hit's offset under the size: not negative)
        kind = kind_col[rows]
        writes = kind != int(Kind.LOAD)
        is_write = hit & writes[:, None]
        is_read = hit & (kind != int(Kind.STORE))[:, None]
        # the words each write covers (k: the word after the first it reaches); one each where
        # every write is of at most 4 bytes from a word's start, or of at most a byte
        w_addr = addr[is_write]
        w_max = int(width_col[rows][writes].max()) if len(w_addr) else 0
        if w_max <= 1 or (w_max <= 4 and not int(np.bitwise_or.reduce(w_addr)) & 3):
            spans = range(1)
            w_word = w_addr >> 2  # (under the word count: the offsets are under the size)
        else:
            w_width = np.broadcast_to(width_col[rows].astype(np.int64)[:, None], addr.shape)
            covered = (w_addr % 4 + np.maximum(w_width[is_write], 1) + 3) // 4
            spans = range(9) if int(covered.max()) > 1 else range(1)
            w_word = np.minimum(
                np.concatenate([w_addr[covered > k] // 4 + k for k in spans]), words - 1
            )
        r_word = addr[is_read] >> 2
        unwritten = ~written[r_word]
        if not unwritten.any():  # every word read was written in an earlier stretch
            written[w_word] = True
            continue
        # the reads of words the earlier stretches did not write: written before in this one?
        order = np.broadcast_to(np.arange(len(rows), dtype=np.int64)[:, None], addr.shape)
        w_ord = order[is_write]
        w_first = w_ord if len(spans) == 1 else np.concatenate([w_ord[covered > k] for k in spans])
        r_ord = order[is_read]
        if len(w_word) and len(r_word):
            o = np.lexsort((w_first, w_word))
            ws, fs = w_word[o], w_first[o]
            first = np.ones(len(ws), dtype=bool)
            first[1:] = ws[1:] != ws[:-1]
            uw, uf = ws[first], fs[first]
            pos = np.minimum(np.searchsorted(uw, r_word), len(uw) - 1)
            unwritten &= ~((uw[pos] == r_word) & (uf[pos] < r_ord))
        found = int(np.count_nonzero(unwritten))
        if found:
            return found
        written[w_word] = True
    return 0


def emulate_ptx(
    ptx: str,
    entry: str,
    grid: int | tuple[int, ...],
    block: int | tuple[int, ...],
    args: list[Any],
    dynamic_smem_bytes: int = 0,
    arch: str = "sm_90",
    sample_ctas: int | str = "all",
    max_instructions: int = DEFAULT_MAX_INSTRUCTIONS,
    batch_lanes: int = DEFAULT_BATCH_LANES,
    trace: bool = True,
    constants: Sequence[tuple[str, bytes]] = (),
    models: bool = True,
) -> Emulation:
    """Emulate PTX text directly (no compile step; handy for tests and hand-written PTX).

    ``args`` in parameter order: a numpy array is a buffer (named ``arg<i>``, copied, and
    returned in ``outputs`` like every buffer), anything else a scalar given as a numpy scalar of
    the parameter's type (``np.int32(5)``, ``np.float32(0.5)``). ``constants``: (PTX symbol,
    bytes) written into ``__constant__`` variables before the run. ``models``: as
    :func:`emulate`'s.
    """
    buffers: list[tuple[str, np.ndarray, bool]] = []
    values: list[Any] = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.ndim > 0:
            buffers.append((f"arg{i}", np.array(a), True))
            values.append(("buffer", f"arg{i}"))
        else:
            values.append(np.asarray(a))

    def dims(x: int | tuple[int, ...]) -> tuple[int, int, int]:
        t = (x,) if isinstance(x, int) else tuple(x)
        t = t + (1,) * (3 - len(t))
        return (int(t[0]), int(t[1]), int(t[2]))

    emu = _emulate(
        ptx=ptx,
        entry=entry,
        arch=arch,
        grid=dims(grid),
        block=dims(block),
        dynamic_smem_bytes=dynamic_smem_bytes,
        buffers=buffers,
        values=values,
        sm_count=ASSUMED_SM_COUNT,
        sample_ctas=sample_ctas,
        wave=lambda: (ASSUMED_SM_COUNT, []),
        max_instructions=max_instructions,
        batch_lanes=batch_lanes,
        static_smem_ptxas=0,
        record=trace,
        constants=constants,
        models=models,
    )
    work = emu.trace.work
    if work is None:
        return emu
    # no compile, so no registers: the occupancy is not known (the warp limits decide)
    work = dataclasses.replace(work, ctas_per_sm=0)
    return dataclasses.replace(emu, trace=dataclasses.replace(emu.trace, work=work))


# the SASS whose control bits and branch targets gpuadvise.trace.sass_schedule reads (sm_70 to sm_90)
_SCHEDULED_ARCH = re.compile(r"sm_(7\d|8\d|90)a?")


def _emulate(
    *,
    ptx: str,
    entry: str,
    arch: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    dynamic_smem_bytes: int,
    buffers: Sequence[tuple[str, np.ndarray | BufferFiller, bool]],
    values: list[Any],
    sm_count: int,
    sample_ctas: int | str | Sequence[int] | None,
    wave: Any,
    max_instructions: int,
    batch_lanes: int,
    static_smem_ptxas: int,
    record: bool,
    constants: Sequence[tuple[str, bytes]] = (),
    sample_loops: bool = False,
    sass: tuple[Any, Any] = ((), {}),
    sass_later: Callable[[bool], tuple[Any, Any] | None] | None = None,
    models: bool = True,
) -> Emulation:
    """The emulation (see :func:`emulate`; ``models`` as there). ``sass``: the kernel's SASS
    and control words (:func:`_sass`); ``sass_later``: they are being read, and this gives them
    once they are (:func:`_sass_when`): the CTAs run meanwhile, their block costs recorded
    (:meth:`gpuadvise.ptx.emulator.KernelImage.warp_chains`) and added up once they come."""
    import warnings

    from gpuadvise.ptx.emulator import (
        Batch,
        KernelImage,
        Launch,
        RecordSink,
        malloc_tuned,
        static_accesses,
    )
    from gpuadvise.ptx.memory import GLOBAL_BASE, GLOBAL_STRIDE_BITS, GlobalMemory

    t0 = time.perf_counter()
    if max_instructions <= 0:
        raise UsageError("max_instructions must be positive", "e.g. 2000000")
    from gpuadvise.ptx.emulator import SAMPLE_DIVISOR

    sample_above = max_instructions // SAMPLE_DIVISOR if sample_loops else 0
    loop_report: dict[int, Any] = {}
    if batch_lanes <= 0:
        raise UsageError("batch_lanes must be positive", "e.g. 65536")
    ptx_module = _parse(ptx, entry)
    image = KernelImage.build(ptx_module, entry, arch, dynamic_smem_bytes)
    image.costs = models

    def take_sass(sass: tuple[Any, Any]) -> None:
        if sass[0] and sass[1] and _SCHEDULED_ARCH.fullmatch(arch):
            from gpuadvise.trace.sass_schedule import loop_schedules

            image.schedule = loop_schedules(image.program, image.program_loops(), *sass)
        if sass[0]:
            from gpuadvise.trace.sass_counts import sass_block_counts

            image.sass_pipes, image.sass_local = sass_block_counts(
                image.program, sass[0], image.program_loops()
            )

    if sass_later is None:
        take_sass(sass)
    else:
        later = sass_later

        def arrived(wait: bool) -> bool:
            got = later(wait)
            if got is not None:
                take_sass(got)
            return got is not None

        image.sass_later = arrived
    notes: list[str] = list(image.notes) + list(image.program.notes)
    geo = Launch(grid, block, sm_count)
    total = geo.total_ctas

    def resident_per_sm() -> int:
        """CTAs resident on an SM at once: the first wave over the SMs (the occupancy)."""
        try:
            return max(1, int(wave()[0]) // max(sm_count, 1))
        except Exception:  # the occupancy model's own errors: the warp limits decide instead
            return 0

    if sample_ctas is None or isinstance(sample_ctas, (int, str)):
        count, sample_notes = _sample_count(sample_ctas, total, wave)
        check_fits(
            count * _BYTES_PER_SAMPLED_CTA,
            f"tracing {count} CTAs"
            + (" (every CTA of the grid)" if count == total and count > 1 else ""),
            _SAMPLE_HINT,
        )
        ctas = np.arange(count, dtype=np.int64)
    else:
        ctas, sample_notes = _sample_ids(sample_ctas, total)
        count = len(ctas)
    notes += sample_notes

    inputs = LazyArrays({name: _maker(data) for name, data, _ in buffers})
    contents: list[tuple[str, Any]] = [(name, data) for name, data, _ in buffers]
    names = [c[0] for c in contents] + [v.name for v in image.global_vars]
    vaddr = {name: GLOBAL_BASE + (i << GLOBAL_STRIDE_BITS) for i, name in enumerate(names)}

    def address_of(name: str, generic: bool) -> int:
        if name in vaddr:
            return vaddr[name]
        if name in image.const_offsets:
            return image.const_offsets[name] + (0x3 << 44 if generic else 0)
        if name in image.shared_offsets:
            return image.shared_offsets[name] + (0x1 << 44 if generic else 0)
        raise EmulationError(f"an initializer refers to the unknown symbol {name!r}", None)

    for var in image.global_vars:
        contents.append((var.name, image.init_bytes(var, address_of)))
    for name, off in image.const_offsets.items():
        raw = image.init_bytes(ptx_module.variables[name], address_of)
        image.const_bank[off : off + len(raw)] = np.frombuffer(raw, np.uint8)
    for symbol, raw in constants:  # the spec's fills, as cudaMemcpyToSymbol would write them
        at = image.const_offsets.get(symbol)
        if at is None:
            raise EmulationError(
                f"the PTX declares no __constant__ variable {symbol}",
                "name a .const variable of the module",
            )
        image.const_bank[at : at + len(raw)] = np.frombuffer(raw, np.uint8)
    if image.const_used:
        notes += _unfilled_notes(image, ptx_module, {symbol for symbol, _ in constants})
    try:
        gmem = GlobalMemory(contents)
    except MemoryError:
        mapped = sum(len(d) if isinstance(d, bytes) else int(d.nbytes) for _, d in contents)
        raise TooLargeError(
            f"out of memory mapping the buffers ({format_bytes(mapped)})",
            "give smaller counts or args, or --no-trace for the static analysis only",
        ) from None
    params = _encode_params(image, values, vaddr)

    if static_smem_ptxas and static_smem_ptxas != image.static_shared_bytes:
        notes.append(
            f"static shared memory laid out as {image.static_shared_bytes} bytes; ptxas reports "
            f"{static_smem_ptxas}"
        )
    if any(
        ins.base == "call" and any(getattr(o, "name", "") == "vprintf" for o in ins.operands)
        for ins in image.program.instrs
    ):
        notes.append("printf calls are ignored")

    lanes_per_cta = geo.warps_per_cta * 32
    reg_bytes = sum(_size(t) for t in image.program.regs.values())
    per_lane = reg_bytes + image.local_bytes + sum(image.call_params.values()) + 64
    cap = max(1, _REG_BUDGET_BYTES // per_lane)
    per_batch = max(1, min(batch_lanes, cap) // lanes_per_cta)
    budget = memory_budget()
    trace_limit = min(_MAX_TRACE_BYTES, budget.bytes // _TRACE_SHARE_DIVISOR)
    # the default sample is cut to what fits in its budget (DEFAULT_SAMPLE_TRACE_BYTES)
    # (the first CTA is kept within the memory share even when it alone is over the sample's
    # budget: llm.c's softmax traces one CTA of 1.2 million warp accesses, 340 MB)
    default_wave = sample_ctas is None or sample_ctas == WHOLE_WAVE
    cut_to_budget = record and default_wave and count > 1
    # the default sample (not --sample-ctas wave) keeps every k-th CTA of the wave within its cost
    cost_budget = DEFAULT_SAMPLE_COST if sample_ctas is None else 0
    sample_bytes = min(trace_limit, DEFAULT_SAMPLE_TRACE_BYTES)
    lowered = _SAMPLE_BYTES.get()  # sample_trace_bytes: for a wave the default cuts anyway
    lowered_bytes = sample_bytes if lowered is None else min(sample_bytes, lowered)
    lowered_cost = _SAMPLE_COST.get()  # sample_trace_cost: idem, by the cost
    lowered_emu = _SAMPLE_EMU.get()  # sample_emu_cost: idem, by the emulator's cost
    # the first CTA's own bound, past which its long loops are sampled (_over_sample_cost)
    first_bound = (
        DEFAULT_SAMPLE_EMU_NS if lowered_emu is None else min(DEFAULT_SAMPLE_EMU_NS, lowered_emu)
    )

    class _BudgetSink(RecordSink):
        """A RecordSink that stops at the budget's share for the trace with :class:`_TraceFull`
        (the models copy the trace after it: it may take only part of the memory)."""

        def _over(self, need: int) -> None:
            raise _TraceFull(need)

    sink = _BudgetSink(limit_bytes=max(trace_limit, 1 << 20))
    sink.global_only = not models
    # the pages of the buffers the traced CTAs touch, made as they run (GlobalMemory)
    data_limit = max(budget.bytes // _DATA_SHARE_DIVISOR, 1 << 20)
    if record:
        sink.declare(static_accesses(image.program))
    cache: dict[int, dict[str, Any]] = {}
    lane_instr = 0
    run_s = 0.0
    steps = 0
    emu_ns = 0  # the kept batches' emulator cost (emu_cost.emulator_cost), summed
    start = 0
    simt_counts = SimtCounts.empty(len(image.program.blocks) + 1)
    # the batches' block-cost sums (and CTAs, warps a CTA) not yet added to simt_counts, in
    # their order: all of them once the costs are known (the SASS may be still being read)
    chains_due: list[tuple[Any, int, int]] = []
    unit: CtaCost | None = None  # the default sample's first CTA's cost, once it has run

    def add_chains(wait: bool) -> None:
        from gpuadvise.ptx.chains import critical_paths

        if chains_due and image.costs_known(wait):
            for sums, ncta, wpc in chains_due:
                simt_counts.add_chains(*critical_paths(sums.total(), ncta, wpc))
            chains_due.clear()

    # A sample the user asked for (--sample-ctas N or all) that does not fit is a usage error
    # (exit 2); the default sample (the first wave) or a list of CTAs just leaves no trace.
    too_large = (
        TooLargeError if isinstance(sample_ctas, int | str) and not default_wave else EmulationError
    )
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings(), malloc_tuned():
            warnings.simplefilter("ignore", RuntimeWarning)
            with step(f"emulating {count} CTA{'s' if count != 1 else ''}", count) as advance:
                # the default sample's first CTA runs alone: its records say how many CTAs fit
                size = 1 if cut_to_budget else per_batch
                wave_ctas = count
                start = 0
                while start < count:
                    end = min(count, start + size)
                    # the default sample's first CTA alone: its long loops sampled once it has
                    # cost the sample's bound, or a lowered one (sample_emu_cost: a variant's
                    # share), whichever is less (no fewer CTAs can bring it within)
                    first_cap = (
                        partial(_over_sample_cost, bound=first_bound)
                        if cost_budget and record and sample_above and start == 0 and end == 1
                        else None
                    )
                    batch = Batch(
                        image,
                        geo,
                        ctas[start:end],
                        gmem,
                        params,
                        sink if record else None,
                        max_instructions,
                        cache,
                        sample_above,
                        loop_report,
                        first_cap,
                    )
                    mark = sink.count
                    try:
                        t_run = time.perf_counter()
                        li, st = batch.run()
                        run_s += time.perf_counter() - t_run
                    except _TraceFull:
                        batch.release()
                        if not cut_to_budget or start == 0:
                            raise
                        sink.count = mark  # the batch that overflowed is dropped whole
                        notes[:] = [
                            n
                            for n in notes
                            if "default sample's budget" not in n and _COST_NOTE not in n
                        ]
                        notes.append(_cut_note(start, wave_ctas, sample_bytes))
                        ctas, count = ctas[:start], start
                        break
                    lane_instr += li
                    steps += st
                    emu_ns += emulator_cost(
                        batch.step_ops,
                        batch.step_ops * lanes_per_cta * (end - start),
                        sink.count - mark,
                        st,
                    )
                    if start == 0 and size == 1 and cut_to_budget:
                        unit = CtaCost(batch.step_ops, lanes_per_cta, sink.count, st, per_batch)
                    simt_counts.add(
                        batch.block_warps,
                        batch.block_lanes,
                        batch.block_splits,
                        batch.split_ctas,
                        front_splits=batch.block_front_splits,
                        cta_warps=batch.block_cta_warps(),
                        slow_div=batch.slow_div,
                    )
                    if models:
                        chains_due.append((batch.chain_sums, batch.ncta, batch.wpc))
                    capped = batch.cost_capped
                    batch.release()  # freed now, not at the next full garbage collection
                    add_chains(wait=False)
                    if gmem.pages_made << 12 > data_limit:
                        raise _DataFull(gmem.pages_made << 12)
                    done = end
                    start = end
                    advance(done)
                    if capped:
                        # its loops sampled, the first CTA alone has cost the bound: the sample
                        # ends with it (another CTA would run its loops in full); where no loop
                        # could be sampled so (their results steer the kernel) it goes on as
                        # planned
                        if done < count:
                            notes.append(_capped_note(wave_ctas, first_bound))
                        ctas, count = ctas[:done], done
                        break
                    if cut_to_budget and size == 1 and done < count:
                        size = per_batch
                        cap = max(1, sample_bytes // RECORD.itemsize)
                        fit = max(done, int(cap * done // sink.count)) if sink.count else count
                        every = 1
                        # the cost bound: runs of consecutive CTAs spread over the wave
                        afford = affordable_ctas(cost_budget, trace_cost(sink.count, steps), done)
                        # and the emulator's CPU bound (its steps' instructions, not only their
                        # count): fewer CTAs only where this one binds
                        plan = None
                        if cost_budget and unit is not None:
                            # the CTAs and batches the access cost plans (its runs of 4)
                            planned = min(afford, fit, count)
                            if afford < min(fit, count):
                                planned = len(spread_runs(ctas[:count], afford))
                            planned_size = per_batch if planned >= count else -(-planned // 4)
                            plan = cpu_plan(
                                unit,
                                DEFAULT_SAMPLE_EMU_NS,
                                planned,
                                planned_size,
                                max(1, sample_bytes // 4 // max(1, sink.count * RECORD.itemsize)),
                                (MIN_SAMPLE_CTAS, MIN_SAMPLE_STRETCH),
                            )
                            if plan == (planned, planned_size):
                                plan = None  # within the bound as planned: nothing changes
                        by_cpu = plan is not None and plan[0] < planned
                        if plan is not None and by_cpu:
                            afford = plan[0]
                        by_cost = afford < min(fit, count)
                        if by_cost:
                            ctas = spread_runs(ctas[:count], afford)
                            fit = len(ctas)
                        if fit < count and lowered_bytes < sample_bytes:
                            # cut anyway: every k-th of the CTAs the default keeps, its mix of
                            # CTAs (a grid-stride loop's first CTAs carry one more iteration)
                            small = max(
                                done, int(lowered_bytes // RECORD.itemsize) * done // sink.count
                            )
                            every = max(1, -(-fit // small))
                            sample_bytes = lowered_bytes
                            cap = max(1, sample_bytes // RECORD.itemsize)
                        by_lowered_cost = False
                        if fit < count and lowered_cost is not None:
                            # and to the CTAs the lowered cost affords, the same way
                            while every < fit and (
                                batched_cost(-(-fit // every), sink.count, steps, per_batch)
                                > lowered_cost
                            ):
                                every += 1
                                by_lowered_cost = True
                        by_lowered_emu = False
                        if fit < count and lowered_emu is not None and unit is not None:
                            # and to the CTAs whose emulation the lowered emulator cost
                            # affords, in the batches they will run in (below)
                            while every < fit:
                                kept = -(-fit // every)
                                kept_size = (
                                    plan[1]
                                    if plan is not None
                                    else max(1, min(per_batch, -(-kept // 4)))
                                )
                                if sample_ns(unit, kept, kept_size) <= lowered_emu:
                                    break
                                every += 1
                                by_lowered_emu = True
                        # later batches stop at the sample's budget (the first may be over it)
                        sink.capacity = max(sink.count, min(sink.capacity, cap))
                        if fit < count:
                            ctas = ctas[:fit][::every]
                            fit = count = len(ctas)
                            notes.append(
                                _variant_emu_note(fit, wave_ctas, lowered_emu)
                                if by_lowered_emu and lowered_emu is not None
                                else _variant_cost_note(fit, wave_ctas, lowered_cost)
                                if by_lowered_cost and lowered_cost is not None
                                else _cpu_note(fit, wave_ctas, unit)
                                if by_cpu and unit is not None
                                else _cost_note(fit, wave_ctas, cost_budget)
                                if by_cost
                                else _cut_note(fit, wave_ctas, sample_bytes)
                            )
                            # CTAs differ in size (llm.c's causal attention: later rows are
                            # longer): batches of a quarter of what fits, so that the one that
                            # overflows all the same, dropped whole, costs a quarter at most (a
                            # batch of 109 CTAs was, leaving 1 of 110 CTAs traced)
                            size = max(1, min(per_batch, -(-fit // 4)))
                        if plan is not None:  # the CPU bound's batches, fewer and larger
                            size = plan[1]
                    if done < count and out_of_time(KEEP_FOR_RULES):
                        what = (
                            f"the emulator traced {done} of {count} CTAs: the time budget ran "
                            "out (its part for the trace: the rest is for the rules)"
                        )
                        notes.append(what)
                        skip(what)
                        ctas, count = ctas[:done], done
                        break
            trace = _build_trace(sink, image, ptx_module, ctas, geo, gmem, bool(loop_report))
            if models:
                add_chains(wait=True)  # the block costs, waited for if the SASS is being read
                trace = dataclasses.replace(
                    trace,
                    work=kernel_work(
                        image.program,
                        image.block_costs,
                        simt_counts,
                        total_ctas=total,
                        warps_per_cta=geo.warps_per_cta,
                        ctas_per_sm=resident_per_sm(),
                    ),
                )
    except _TraceFull as full:
        raise too_large(
            f"the memory trace of {count} CTAs outgrew {format_bytes(sink.limit_bytes)} (the "
            f"trace's share of {budget.describe()}) after {start} CTAs ({full.records} "
            "warp-level accesses)",
            _fewer_ctas_hint(start),
        ) from None
    except _DataFull as full:
        raise too_large(
            f"the buffer data the traced CTAs touch outgrew {format_bytes(data_limit)} (the "
            f"data's share of {budget.describe()}: {format_bytes(full.nbytes)} after {start} "
            "CTAs)",
            _fewer_ctas_hint(start),
        ) from None
    except MemoryError:
        raise too_large(
            f"out of memory tracing {count} CTAs (after {start} of them; memory available: "
            f"{budget.describe()})",
            _fewer_ctas_hint(start),
        ) from None
    outputs = LazyArrays(
        {name: _reader(gmem, name, data) for name, data, is_out in buffers if is_out}
    )
    complete = count == total
    sampled = tuple(_sampled_note(r) for r in loop_report.values())
    notes += sampled
    if sampled:
        notes.append(
            "outputs are not the kernel's: loop iterations were skipped (the traced iterations "
            "and the counts are weighted; --max-instructions N with a larger N traces more of "
            "them)"
        )
    elif not complete:
        notes.append("outputs are partial: only the traced CTAs ran")
    return Emulation(
        trace=trace,
        outputs=outputs,
        inputs=inputs,
        changes=OutputChanges(
            gmem, {name: data for name, data, is_out in buffers if is_out}, inputs, outputs
        ),
        ctas_run=tuple(int(c) for c in ctas),
        complete=complete,
        lane_instructions=lane_instr,
        time_s=time.perf_counter() - t0,
        notes=tuple(notes),
        warp_steps=steps,
        warp_accesses=_warp_accesses(image.program, simt_counts),
        run_s=run_s,
        simt=simt_profile(
            image.program,
            simt_counts,
            grid=grid,
            threads_per_cta=geo.threads,
            costs=image.block_costs,
        )
        if models
        else None,
        sampled_loops=sampled,
        cta_cost=unit,
        emu_cost=emu_ns,
    )


def constant_bytes(ptx: str, launch: ResolvedLaunch) -> list[tuple[str, bytes]]:
    """(PTX symbol, bytes) of each ``__constant__`` variable the launch's spec fills, bound to
    the module's ``.const`` declarations (:func:`gpuadvise.ptx.constants.bind_constants`: a
    wrong name, type or size is a UsageError) and made as the GPU runner makes them (a buffer's
    fill, seeded by the launch's seed and the constant's name)."""
    if not launch.constants:
        return []
    from gpuadvise.ptx.constants import bind_constants
    from gpuadvise.runner.data import buffer_filler

    out = []
    for b in bind_constants(ptx, launch.constants):
        dt, kind = buffer_dtype(b.fill)
        filler = buffer_filler(dt, b.fill.count, b.fill.fill, launch.seed, b.fill.name, kind)
        out.append((b.variable.symbol, filler.array().tobytes()))
    return out


def _unfilled_notes(image: Any, ptx_module: Any, filled: set[str]) -> list[str]:
    """A note per ``__constant__`` variable the kernel reads that has no PTX initializer and no
    fill: it holds zeros (the host's ``cudaMemcpyToSymbol`` is not run), so outputs computed
    from it say little and the output check of a fix is weak there."""
    from gpuadvise.ptx.cfg import symbols_used
    from gpuadvise.ptx.constants import const_variables, fill_example, unfilled_constants

    program = image.program
    return [
        f"the kernel reads __constant__ {v.name}, which has no initializer and no fill: it "
        "holds zeros (the host code's cudaMemcpyToSymbol does not run here), so the outputs "
        "computed from it say little and an output check on them is weak; give it data as the "
        f"host code does: --constant '{fill_example(v, program.instrs)}' (or [constants] in the "
        "spec)"
        for v in unfilled_constants(const_variables(ptx_module), symbols_used(program), filled)
    ]


def _warp_accesses(program: Any, counts: SimtCounts) -> int:
    """Warp-level memory accesses executed: each block's warp executions times its memory
    instructions (param-space loads are not traced)."""
    from gpuadvise.ptx.emulator import space_of

    total = 0
    for b in program.blocks:
        n_mem = sum(
            1
            for i in range(b.start, b.end)
            if program.instrs[i].base in ("ld", "ldu", "st", "atom", "red", "cp")
            and space_of(program.instrs[i]) != "param"
        )
        if n_mem and b.index < len(counts.warps):
            total += int(counts.warps[b.index]) * n_mem
    return total


def _maker(data: np.ndarray | BufferFiller) -> Callable[[], np.ndarray]:
    if isinstance(data, np.ndarray):
        return lambda: data
    return data.array


def _reader(gmem: Any, name: str, data: np.ndarray | BufferFiller) -> Callable[[], np.ndarray]:
    def read() -> np.ndarray:
        raw = gmem.read(name)
        return (
            raw.view(data.dtype).reshape(data.shape)
            if isinstance(data, np.ndarray)
            else raw.view(data.dtype)
        )

    return read


class _DataFull(Exception):
    def __init__(self, nbytes: int) -> None:
        super().__init__(nbytes)
        self.nbytes = nbytes


class _TraceFull(Exception):
    def __init__(self, records: int) -> None:
        super().__init__(records)
        self.records = records


_COST_NOTE = "default sample's cost"


def _cost_note(kept: int, wave: int, cost: int) -> str:
    return (
        f"traced {kept} of the first wave's {wave} CTAs, in runs of consecutive CTAs spread over "
        f"it: the whole wave would outgrow the {_COST_NOTE} of {cost:,} warp accesses and warp "
        f"steps (--sample-ctas {WHOLE_WAVE} traces the whole first wave, --sample-ctas N the "
        "first N CTAs)"
    )


def _cpu_note(kept: int, wave: int, unit: CtaCost) -> str:
    return (
        f"traced {kept} of the first wave's {wave} CTAs, in runs of consecutive CTAs spread over "
        f"it: the whole wave would outgrow the {_COST_NOTE} in the emulator's work, about "
        f"{DEFAULT_SAMPLE_EMU_NS / 1e9:.1f} CPU-s (a CTA runs {unit.ops:,} instructions in "
        f"{unit.steps:,} steps; --sample-ctas {WHOLE_WAVE} traces the whole first wave, "
        "--sample-ctas N the first N CTAs)"
    )


def batched_cost(ctas: int, records: int, steps: int, per_batch: int) -> int:
    """What tracing ``ctas`` CTAs costs (:func:`trace_cost`) when the default sample runs them
    as it does once it cuts the wave (the first CTA alone, then batches of a quarter of them,
    at most ``per_batch``), from the first CTA's ``records`` and ``steps``: the records of each
    CTA, the steps of each batch, whose warps step together (HeCBench haversine's grid-stride
    variant: 32 CTAs of 5,700 accesses each, 8,475 steps in all over its 5 batches, a cost of
    190,875 where 32 times its first CTA's accesses and steps would say about 236,600)."""
    size = max(1, min(per_batch, -(-ctas // 4)))
    batches = 1 + -(-(ctas - 1) // size)
    return trace_cost(ctas * records, batches * steps)


def _variant_cost_note(kept: int, wave: int, cost: int) -> str:
    return (
        f"traced {kept} of the first wave's {wave} CTAs, every k-th of those the default sample "
        f"keeps: their trace would cost more than the bound of {cost:,} warp accesses and warp "
        "steps (a variant's trace, kept to about the kernel's)"
    )


def _variant_emu_note(kept: int, wave: int, limit_ns: int) -> str:
    return (
        f"traced {kept} of the first wave's {wave} CTAs, every k-th of those the default sample "
        f"keeps: their emulation would cost more than the bound of about {limit_ns / 1e9:.2f} "
        "CPU-s of the emulator's work (a variant's emulation, kept to about the kernel's)"
    )


def spread_runs(ctas: np.ndarray, afford: int) -> np.ndarray:
    """At most ``afford`` of ``ctas`` (the first wave, in launch order), never fewer than one:
    runs of :data:`SAMPLE_RUN_CTAS` consecutive CTAs (or one run of ``afford``), one at the
    start of each of as many equal stretches of the wave (systematic sampling: every CTA's
    chance to be kept is the same), so that the sample keeps the wave's mix (a grid-stride
    loop's first CTAs carry one iteration more than its last; no CTA parity is skipped, as
    every k-th CTA would for an even k; a partial last CTA weighs what it weighs in the wave)
    and neighbours in launch order (the L2 model infers a CTA's step from traced neighbours,
    :mod:`gpuadvise.model.l2.synthesis`)."""
    n = len(ctas)
    afford = max(1, afford)
    if afford >= n:
        return ctas
    run = min(afford, SAMPLE_RUN_CTAS)
    runs = afford // run
    starts = (np.arange(runs, dtype=np.int64) * n) // runs
    at = np.unique((starts[:, None] + np.arange(run, dtype=np.int64)[None, :]).reshape(-1))
    return ctas[at[at < n]]


def affordable_ctas(cost_budget: int, cost: int, ctas: int) -> int:
    """How many CTAs the default sample's ``cost_budget`` (:data:`DEFAULT_SAMPLE_COST`; 0: no
    bound) affords when ``ctas`` CTAs cost ``cost`` (warp accesses plus warp steps): at least
    ``ctas``; below :data:`MIN_SAMPLE_CTAS`, what :data:`MIN_SAMPLE_STRETCH` times the budget
    affords, up to that many (a large number when there is no bound or no cost)."""
    if cost_budget <= 0 or cost <= 0:
        return 1 << 62
    afford = max(ctas, cost_budget * ctas // cost)
    if afford < MIN_SAMPLE_CTAS:
        stretched = cost_budget * MIN_SAMPLE_STRETCH * ctas // cost
        afford = max(afford, min(MIN_SAMPLE_CTAS, stretched))
    return afford


def _over_sample_cost(ops: int, records: int, steps: int, bound: int | None = None) -> bool:
    """Whether a batch that ran ``ops`` instructions in ``steps`` steps and recorded
    ``records`` warp accesses has cost the default sample's bound (:data:`DEFAULT_SAMPLE_EMU_NS`,
    :func:`~gpuadvise.trace.emu_cost.emulator_cost`: counts, the same on every machine), or
    ``bound`` (ns) where given: a variant's share of its kernel's emulator cost
    (:func:`sample_emu_cost`) under the default's."""
    limit = DEFAULT_SAMPLE_EMU_NS if bound is None else bound
    return emulator_cost(ops, 0, records, steps) > limit


def _capped_note(wave: int, bound: int | None = None) -> str:
    limit = DEFAULT_SAMPLE_EMU_NS if bound is None else bound
    what = _COST_NOTE if limit >= DEFAULT_SAMPLE_EMU_NS else "emulator cost it was given"
    return (
        f"traced 1 of the first wave's {wave} CTAs: the first alone passed the {what} in "
        f"the emulator's work, about {limit / 1e9:.2g} CPU-s, and its long loops "
        "whose results reach no branch were sampled from there (--sample-ctas N traces the first "
        "N CTAs, their loops sampled only past the instruction budget's share)"
    )


def _cut_note(kept: int, wave: int, limit_bytes: int) -> str:
    return (
        f"traced {kept} of the first wave's {wave} CTAs: their memory trace would outgrow the "
        f"default sample's budget of {format_bytes(limit_bytes)} (--sample-ctas N traces N CTAs "
        "whatever their trace takes, within the memory budget)"
    )


def _fewer_ctas_hint(fitted: int) -> str:
    if fitted >= 1:
        return (
            f"trace fewer CTAs: --sample-ctas {fitted} or less, or leave --sample-ctas out to "
            "trace the first wave (or a smaller problem size, or --no-trace)"
        )
    return "trace fewer CTAs (--sample-ctas 1), a smaller problem size, or use --no-trace"


def _size(t: str) -> int:
    from gpuadvise.ptx.parser import TYPE_SIZES

    return TYPE_SIZES.get(t, 4)


def _sampled_note(r: Any) -> str:
    """A note on one sampled loop (:class:`gpuadvise.ptx.sampling.SampledLoop`)."""
    return (
        f"the loop at {r.where} (its exit test compares with {r.bound}) was sampled in "
        f"{r.warps} warp instance{'s' if r.warps != 1 else ''}: {r.ran:,} iterations run for "
        f"{r.stood_for:,}, the iterations run after a skip weighted for those skipped"
    )


def _build_trace(
    sink: Any,
    image: Any,
    ptx_module: Any,
    ctas: np.ndarray,
    geo: Any,
    gmem: Any,
    sampled: bool = False,
) -> AccessTrace:
    from gpuadvise.ptx.dataflow import data_addressed
    from gpuadvise.trace.sites import instr_info

    gathers = data_addressed(image.program.instrs)
    infos = []
    for new, key in enumerate(sink.ordered_keys()):
        index, space = key
        kind, width = sink.key_kind[key]
        ins = image.program.instrs[index]
        infos.append(instr_info(new, ins, ptx_module.files, space, kind, width, index in gathers))
    return AccessTrace(
        records=sink.records(),
        instructions=tuple(infos),
        ctas=tuple(int(c) for c in ctas),
        total_ctas=geo.total_ctas,
        grid=geo.grid,
        block=geo.block,
        source="emulator",
        buffers={b.name: (b.base, b.size) for b in gmem.buffers},
        sampled_iterations=sampled,
    )
