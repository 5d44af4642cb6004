"""The CPU emulator: runs a batch of CTAs of a kernel's PTX, all lanes at once, and traces memory.

Execution model
---------------
A batch holds whole CTAs; its lanes are laid out CTA after CTA, each CTA as ``ceil(threads/32)``
warps of 32 consecutive lanes in linear thread order (``x + y*bx + z*bx*by``), the warps the hardware
forms. Every register is a numpy array over all lanes of the batch.

Each warp has a SIMT reconvergence stack (pc, reconvergence pc, 32-bit lane mask), the scheme of
pre-Volta GPUs and of GPGPU-Sim, kept for all warps in arrays. A scheduling step picks the lowest
basic block any runnable warp is at, and runs that whole block once for every warp there, under the
mask of their active lanes, so that a step costs a few numpy operations per instruction whatever the
number of warps. At the block's end each selected warp moves on: all its lanes to one successor, or,
when a conditional branch (or ``brx.idx``) splits it, the stack top becomes the reconvergence entry
at the branch block's immediate post-dominator, computed without the paths that only exit the kernel
(:func:`gpuadvise.ptx.cfg.reconvergence_points`), and the sides are pushed (the fall-through side
runs first; a side that goes straight to the reconvergence point just waits there); an entry is
popped when its pc reaches its reconvergence pc, where its lanes rejoin the others. Two entries
at the top of a warp's stack that come to the same block on their way to the same reconvergence
point run as one from there: the sides of a short-circuit ``if (a || b)`` meet at its then-block
before the branch's post-dominator, where ptxas reconverges them (a BSYNC there, or the condition
made one PLOP3 predicate), so the then-block issues once a warp (a lone ``ret`` is no such block:
ptxas gives each side its EXIT). Lanes that ``exit`` leave every entry of their warp. Warps at a
barrier wait until no warp of the batch can run, then all waiting warps pass it (every CTA's
barrier completes once all its live warps arrived, and those of other CTAs did too, which is one
valid interleaving). Named barriers with a thread count
(``bar.sync 1, 64``) are treated as whole-CTA barriers, ``bar.arrive`` as a no-op; a barrier reached
by some lanes of a diverged warp releases them before the warp's other lanes arrive.

SIMT counts: per basic block, the warp executions, the active lanes summed over them, and the warp
executions its terminator split (with the CTAs they were in): two integer adds per step, so that
:mod:`gpuadvise.trace.simt` gets each instruction's active lanes per executed warp instruction
without slowing the steps down.

Registers and batch layout arrays are kept from one batch to the next of the same size (registers
are not cleared: their initial values are undefined in PTX too). The instruction budget is per
warp: a warp that executed more than ``max_instructions`` instructions stops the emulation.

Independent thread scheduling of Volta and later lets diverged lanes interleave, and ``__syncwarp``
can reconverge them early; the emulator reconverges at the immediate post-dominator and treats
``bar.warp.sync`` as a no-op. For data-race-free kernels the results are the same; the lane groups
are those the compiler's reconvergence points (BSSY/BSYNC at post-dominators) give.

Memory
------
Global buffers live in :class:`~gpuadvise.ptx.memory.GlobalMemory`; shared memory per CTA (static
variables in declaration order, each at its ``.align``, from 0x400 on sm_90+; the dynamic
``extern .shared`` area after them at a 16-byte boundary, or the larger alignment it declares), local
memory per thread, call parameters per thread, the kernel's parameter block and the user constant
bank. Each access is checked: one outside every buffer, past the CTA's shared memory or the thread's
local frame, or misaligned for its width, raises :class:`MemoryAccessError` with its source line, the
buffer and the offset, and the CTA and thread that made it (the first one, in lane order).

Atomics with several lanes on one address are serialised in lane order: add, min, max, and, or, xor by
segmented scans, exch by a shift, cas by repeated first-match rounds, inc/dec one lane per round.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

import numpy as np

from gpuadvise.ptx.access import RECORD, Kind, Space
from gpuadvise.ptx.cfg import Program, build_program, symbols_used
from gpuadvise.ptx.chains import BlockCosts, ChainLog, NoChains, WarpChains, block_costs
from gpuadvise.ptx.errors import (
    EmulationError,
    InstructionBudgetError,
    MemoryAccessError,
    UnsupportedInstructionError,
)
from gpuadvise.ptx.loops import Loop, find_loops, innermost
from gpuadvise.ptx.memory import (
    CONST_WINDOW,
    GLOBAL_BASE,
    LOCAL_WINDOW,
    PARAM_WINDOW,
    SHARED_WINDOW,
    WINDOW_SHIFT,
    GlobalMemory,
    align_up,
    anonymous_mapping,
    heap_views,
)
from gpuadvise.ptx.ops import Op, build_op, getter, type_of
from gpuadvise.ptx.parser import TYPE_SIZES, Addr, Imm, Instr, Module, Reg, Sym, VarDecl, Vec
from gpuadvise.ptx.sampling import LoopSampler, SampledLoop, budget_reason
from gpuadvise.ptx.slow_paths import has_slow_path, slow_lanes
from gpuadvise.ptx.steering import steering_loops
from gpuadvise.ptx.values import (
    NP_TYPES,
    Mask,
    count_true,
    operand_constant,
    storage_dtype,
    to_storage,
    write,
)

__all__ = [
    "Batch",
    "KernelImage",
    "Launch",
    "RecordSink",
    "malloc_tuned",
    "shared_base_for_arch",
    "space_of",
    "static_accesses",
]

U32 = np.uint32
U64 = np.uint64
SAMPLE_DIVISOR = 8
"""Loops whose remaining iterations would take a warp past ``max_instructions / 8`` are sampled
(:mod:`gpuadvise.ptx.sampling`) by the callers that allow it."""
FULL32 = np.uint32(0xFFFFFFFF)
SPACES = ("global", "shared", "local", "const", "param")
SPACE_ENUM = {
    "global": Space.GLOBAL,
    "shared": Space.SHARED,
    "local": Space.LOCAL,
    "const": Space.CONST,
}
EXTERN_NOOPS = ("vprintf",)

_SEEN_LIMIT = 1 << 25
"""The most (block, warp) pairs a batch marks as run (:attr:`Batch.block_seen`, a byte each)."""


# reductions called as ufuncs: ndarray.min/max go through a Python wrapper (the same values)
_least, _most = np.minimum.reduce, np.maximum.reduce

_MASKS_KEPT_WARPS = 8
"""Steps of at most this many warps (not all the batch's) keep their lane masks by their warps
and lanes (:meth:`Batch.run`): HeCBench perplexity's last lanes run 34,000 steps of one or two
warps through two loops, each iteration's mask the last one's; made again it cost a pack, an
index and the records' layout (~25 us) a step."""

_MASKS_KEPT = 64
"""The most masks a batch keeps at once (each a bool a lane of the batch, and its index)."""

_FRESH_TEMPLATE_WARPS = 256
"""Batches of at most this many warps make a record template's stale epochs and weights again
before a partial-mask record copies it (:meth:`Batch._record_lanes`); larger ones set them on
the record."""

_FEW_LANES = 64
"""Accesses by at most this many lanes have their addresses' least, greatest and bitwise or
taken in Python integers (:func:`_bounds`): three numpy reductions cost ~4 us each on a handful
of lanes (HeCBench perplexity: 320,000 accesses of 5-12 lanes), a ``tolist`` and a loop ~1."""


def _lane_span(a: np.ndarray, k: int, mis: int) -> tuple[int, int] | None:
    """The least and greatest of the ``k`` lanes' addresses ``a`` (Python integers, as
    :func:`_bounds` takes them), or None when one of them has a bit of ``mis`` set (misaligned):
    the partial-mask fast paths' check (in Python for at most :data:`_FEW_LANES` lanes)."""
    if k <= _FEW_LANES:
        vals = a.tolist()
        if mis:
            both = 0
            for v in vals:
                both |= v
            if both & mis:
                return None
        return min(vals), max(vals)
    if mis and int(np.bitwise_or.reduce(a)) & mis:
        return None
    return int(_least(a)), int(_most(a))


def _bounds(a: np.ndarray) -> tuple[int, int, int] | None:
    """(least, greatest, bitwise or) of int64 addresses ``a`` when they are few and not none,
    in Python integers (the values numpy's reductions give); None otherwise."""
    if not 0 < a.size <= _FEW_LANES or a.dtype != np.int64:
        return None
    vals = a.tolist()
    both = 0
    for v in vals:
        both |= v
    return min(vals), max(vals), both


_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
"""(dtype instances: a comparison with, or a view as, a scalar type converts it each call)"""


def _as_u64(a: np.ndarray) -> np.ndarray:
    """Addresses ``a`` as the trace's uint64 (int64 viewed: the bits an assignment's cast
    gives)."""
    return a.view(_U64) if a.dtype == _I64 else a


def shared_base_for_arch(arch: str) -> int:
    """Where user shared memory starts in a CTA's shared window: 0x400 from sm_90 on (the 1 KB the
    driver reserves comes first there; ``UMOV UR4, 0x400`` in the SASS), 0 before."""
    digits = "".join(c for c in arch if c.isdigit())
    return 0x400 if digits and int(digits) >= 90 else 0


_malloc_depth = 0
"""How many :func:`malloc_tuned` are open (the outermost one owns the setting)."""


@contextlib.contextmanager
def malloc_tuned() -> Iterator[None]:
    """Keep freed memory in the process while the emulator runs (glibc only).

    Every instruction of a 64K-lane batch makes numpy temporaries of 256-512 KB. glibc's malloc
    serves those with fresh mmaps and unmaps them when freed, so each one page-faults anew:
    that costs more than the arithmetic (3-5x on memory-heavy kernels). Raising the mmap and trim
    thresholds keeps the pages; on exit the defaults (128 KB) are restored and the heap trimmed.
    Nested (the rules, ``gpuadvise.rules.evaluate``, emulate a candidate launch): the outermost
    one sets and restores, so the rules after it still keep their memory.
    """
    global _malloc_depth
    if _malloc_depth:  # an outer one holds the setting and restores it
        _malloc_depth += 1
        try:
            yield
        finally:
            _malloc_depth -= 1
        return
    libc = None
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        yield
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = mallopt(m_mmap_threshold, 1 << 30) == 1 and mallopt(m_trim_threshold, (1 << 31) - 1) == 1
    _malloc_depth += 1
    try:
        yield
    finally:
        _malloc_depth -= 1
        if ok:
            mallopt(m_mmap_threshold, 128 * 1024)
            mallopt(m_trim_threshold, 128 * 1024)
            trim(0)


# ---------------------------------------------------------------------------------------------
# The kernel, laid out


def front_splits(active: np.ndarray, taken: np.ndarray, weights: np.ndarray | None = None) -> int:
    """How many of these split warps (active lanes ``active``, the lanes that branched
    ``taken``, uint32 masks) split at a front: the taken lanes are the active lanes up to some
    lane (a prefix) or from some lane on (a suffix), as ``if (tid < bound)`` and
    ``if (i > tid * k)`` split them: the threads on each side are contiguous. ``weights``: the
    executions each warp's split stands for (a sampled loop's weighted iteration); None: one."""

    if active.size <= 16:  # a few warps: each word's bits as Python integers
        n = 0
        ws = [1] * active.size if weights is None else weights.tolist()
        for a, t, w in zip(active.tolist(), taken.tolist(), ws, strict=True):
            f = a & ~t
            if a & ((1 << t.bit_length()) - 1) == t or a & ((1 << f.bit_length()) - 1) == f:
                n += w
        return n

    def packed(side: np.ndarray) -> np.ndarray:
        # the bits up to the highest set bit of each word: side is a prefix of the active lanes
        # when it holds every active lane below its highest lane
        h = side.copy()
        for sh in (1, 2, 4, 8, 16):
            h |= h >> U32(sh)
        return (active & h) == side

    front = packed(taken) | packed(active & ~taken)
    if weights is None:
        return int(np.count_nonzero(front))
    return int(weights[front].sum())


@dataclass
class KernelImage:
    """A kernel's program and its memory layout; independent of any batch."""

    module: Module
    program: Program
    shared_base: int
    shared_offsets: dict[str, int]
    static_shared_bytes: int
    dynamic_offset: int
    dynamic_smem_bytes: int
    local_offsets: dict[str, int]
    local_bytes: int
    call_params: dict[str, int]
    kernel_params: dict[str, tuple[int, int]]
    param_bytes: int
    const_offsets: dict[str, int]
    const_bank: np.ndarray
    global_vars: list[VarDecl]
    notes: list[str] = field(default_factory=list)
    const_used: bool = False
    loops: tuple[Loop, ...] | None = None  # the program's loops, found when first needed
    # the latches of the loops whose results steer the kernel (gpuadvise.ptx.steering), found
    # when first needed
    steering: frozenset[int] | None = None
    # loops whose iteration ptxas's SASS schedule gives (gpuadvise.trace.sass_schedule): header
    # -> (its blocks, an iteration's links by latency class); set before block_costs is read
    schedule: dict[int, tuple[frozenset[int], dict[str, float]]] = field(default_factory=dict)
    # the blocks' instructions by pipe as the kernel's SASS runs them
    # (gpuadvise.trace.sass_counts), set before block_costs is first read; None: the PTX's
    sass_pipes: np.ndarray | None = None
    # the blocks' local-memory warp instructions and L1 wavefronts that the SASS has beyond the
    # PTX's (ptxas's spills, gpuadvise.trace.sass_counts.sass_block_counts); None: none known
    sass_local: np.ndarray | None = None
    # the SASS still being read (gpuadvise.trace.emulate): called with False, sets schedule,
    # sass_pipes and sass_local if it has come and says whether it has; with True, waits for it
    sass_later: Callable[[bool], bool] | None = None
    # whether the batches sum the block costs (warp_chains); False for a run whose outputs and
    # accesses alone are read (gpuadvise.trace.emulate's models=False): no costs are made
    costs: bool = True

    def program_loops(self) -> tuple[Loop, ...]:
        """The program's natural loops (:func:`gpuadvise.ptx.loops.find_loops`), found once."""
        if self.loops is None:
            self.loops = find_loops(self.program)
        return self.loops

    def steering_latches(self) -> frozenset[int]:
        """The latches of the sampleable loops whose results reach a branch, a guard or an
        address (:func:`gpuadvise.ptx.steering.steering_loops`), found once: they are not
        sampled past the sample's cost bound."""
        if self.steering is None:
            self.steering = steering_loops(self.program, self.program_loops())
        return self.steering

    @property
    def shared_bytes(self) -> int:
        """Bytes of the CTA's shared window that the kernel uses (from the base)."""
        return self.dynamic_offset - self.shared_base + self.dynamic_smem_bytes

    @cached_property
    def block_costs(self) -> BlockCosts:
        """Each block's instructions by pipe and longest dependent chain
        (:mod:`gpuadvise.ptx.chains`), found once for every batch."""
        return block_costs(self.program, self.schedule, self.sass_pipes, self.sass_local)

    def costs_known(self, wait: bool = False) -> bool:
        """Whether :attr:`block_costs` can be read now (no SASS being read: :attr:`sass_later`);
        ``wait``: waits for it (then True)."""
        if self.sass_later is not None and self.sass_later(wait):
            self.sass_later = None
        return self.sass_later is None

    def warp_chains(self, warps: int) -> WarpChains | ChainLog | NoChains:
        """The sums of :attr:`block_costs` rows for ``warps`` warps: added as they run
        (:class:`~gpuadvise.ptx.chains.WarpChains`) when the costs are known, else recorded
        until they are (:class:`~gpuadvise.ptx.chains.ChainLog`, bit-identical); none
        (:class:`~gpuadvise.ptx.chains.NoChains`) without :attr:`costs`."""
        if not self.costs:
            return NoChains()
        if self.costs_known():
            return WarpChains(self.block_costs.per_warp, warps)

        def rows() -> np.ndarray:
            self.costs_known(wait=True)
            return self.block_costs.per_warp

        return ChainLog(rows, warps)

    @classmethod
    def build(cls, module: Module, entry: str, arch: str, dynamic_smem_bytes: int) -> KernelImage:
        program = build_program(module, entry)
        used = symbols_used(program)
        notes: list[str] = []
        base = shared_base_for_arch(arch)

        # shared: module-scope (text order) then function-scope, each at its alignment
        shared_vars = [v for v in module.variables.values() if v.space == "shared" and not v.extern]
        shared_vars = [v for v in shared_vars if v.name in used]
        shared_vars += [v for v in program.vars if v.space == "shared" and not v.extern]
        offsets: dict[str, int] = {}
        off = base
        for v in sorted(shared_vars, key=lambda v: v.order):
            if v.name in offsets:
                continue
            off = align_up(off, max(v.align, 1))
            offsets[v.name] = off
            off += v.size_bytes
        static_bytes = off - base
        externs = [v for v in module.variables.values() if v.space == "shared" and v.extern]
        externs += [v for v in program.vars if v.space == "shared" and v.extern]
        dyn_align = max([16] + [v.align for v in externs])
        dyn_off = align_up(off, dyn_align)
        for v in externs:
            offsets[v.name] = dyn_off

        local_offsets: dict[str, int] = {}
        loff = 0
        for v in program.vars:
            if v.space == "local":
                loff = align_up(loff, max(v.align, 1))
                local_offsets[v.name] = loff
                loff += v.size_bytes
        call_params = {v.name: max(v.size_bytes, 1) for v in program.vars if v.space == "param"}

        kernel_params: dict[str, tuple[int, int]] = {}
        poff = 0
        for p in program.entry.params:
            poff = align_up(poff, max(p.align, 1))
            kernel_params[p.name] = (poff, p.size)
            poff += p.size

        const_vars = [v for v in module.variables.values() if v.space == "const"]
        const_offsets: dict[str, int] = {}
        coff = 0
        for v in const_vars:
            coff = align_up(coff, max(v.align, 1))
            const_offsets[v.name] = coff
            coff += v.size_bytes
        const_bank = np.zeros(align_up(max(coff, 16), 16), np.uint8)

        global_vars = [v for v in module.variables.values() if v.space == "global"]
        image = cls(
            module=module,
            program=program,
            shared_base=base,
            shared_offsets=offsets,
            static_shared_bytes=static_bytes,
            dynamic_offset=dyn_off,
            dynamic_smem_bytes=dynamic_smem_bytes,
            local_offsets=local_offsets,
            local_bytes=align_up(loff, 16),
            call_params=call_params,
            kernel_params=kernel_params,
            param_bytes=poff,
            const_offsets=const_offsets,
            const_bank=const_bank,
            global_vars=global_vars,
            notes=notes,
            const_used=any(name in used for name in const_offsets),
        )
        return image

    def init_bytes(self, var: VarDecl, address_of: Callable[[str, bool], int]) -> bytes:
        """The initial bytes of a variable (zeros when it has no initializer)."""
        size = var.size_bytes
        out = bytearray(size)
        if not var.init:
            return bytes(out)
        es = var.elem_size
        dt = NP_TYPES.get(var.type, np.dtype(np.uint8))
        pos = 0
        for item in var.init:
            if pos + es > size:
                break
            if isinstance(item, tuple):
                _, name, off, generic = item
                value = address_of(str(name), bool(generic)) + int(off)
                out[pos : pos + es] = (value & ((1 << (8 * es)) - 1)).to_bytes(es, "little")
            elif isinstance(item, float) and dt.kind == "f":
                out[pos : pos + es] = np.array(item, dtype=dt).tobytes()
            else:
                v = int(cast(int, item)) & ((1 << (8 * es)) - 1)
                out[pos : pos + es] = v.to_bytes(es, "little")
            pos += es
        return bytes(out)


# generic-address windows other than global: window id -> (space, window base, where, what an
# offset outside it is, hint); a space's own instructions address it from 0
_WINDOWS: dict[int, tuple[str, int, str, str, str]] = {
    1: (
        "shared",
        SHARED_WINDOW,
        "shared memory",
        "outside the CTA's {size} bytes of shared memory (offset {off} from the first variable)",
        "check the index, and the launch's dynamic shared memory size",
    ),
    2: (
        "local",
        LOCAL_WINDOW,
        "local memory",
        "outside the thread's {size}-byte local frame",
        "check the index into the local array",
    ),
    3: (
        "const",
        CONST_WINDOW,
        "constant memory",
        "outside the {size}-byte constant bank",
        "check the index into the __constant__ array",
    ),
    4: (
        "param",
        PARAM_WINDOW,
        "kernel parameters",
        "outside the kernel's parameters",
        "check the pointer to the parameter",
    ),
}


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    sm_count: int = 132

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def warps_per_cta(self) -> int:
        return (self.threads + 31) // 32

    @property
    def total_ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def cta_xyz(self, cta: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return cta % gx, (cta // gx) % gy, cta // (gx * gy)

    def thread_xyz(self, t: int) -> tuple[int, int, int]:
        bx, by, _ = self.block
        return t % bx, (t // bx) % by, t // (bx * by)


def _physical_memory_bytes() -> int:
    """The memory the process may use (gpuadvise.spec.budget: physical memory, cgroup and
    rlimits), not the physical memory alone."""
    from gpuadvise.spec.budget import memory_budget

    return memory_budget().bytes


def space_of(ins: Instr) -> str:
    """The state space an ld/st/atom/red names (``generic`` when none)."""
    for m in ins.mods:
        sp = m.split("::")[0]
        if sp in SPACES:
            return sp
    return "generic"


def static_accesses(program: Program) -> list[tuple[int, Space, Kind, int]]:
    """(instruction, space, kind, width) of every memory instruction of the program whose space is
    explicit, executed or not; generic ones are known only once their addresses are."""
    out: list[tuple[int, Space, Kind, int]] = []
    kinds = {"ld": Kind.LOAD, "ldu": Kind.LOAD, "st": Kind.STORE}
    for i, ins in enumerate(program.instrs):
        base = ins.base
        try:
            if base == "cp" and "async" in ins.mods and len(ins.operands) >= 3:
                size = ins.operands[2]
                if isinstance(size, Imm) and any(m.startswith("shared") for m in ins.mods):
                    out.append((i, Space.GLOBAL, Kind.LOAD, int(size.value)))
                    out.append((i, Space.SHARED, Kind.STORE, int(size.value)))
                continue
            if base not in ("ld", "ldu", "st", "atom", "red"):
                continue
            sp = SPACE_ENUM.get(space_of(ins))
            if sp is None:
                continue
            es = TYPE_SIZES[type_of(ins.mods)]
            if base in kinds:
                vec = next((int(m[1:]) for m in ins.mods if m in ("v2", "v4", "v8")), 1)
                out.append((i, sp, kinds[base], es * vec))
            else:
                out.append((i, sp, Kind.ATOMIC if base == "atom" else Kind.REDUCTION, es))
        except Exception:  # a form the builders reject: it fails when executed, if ever
            continue
    return out


def _reserve_records(size: int) -> tuple[np.ndarray, Any]:
    """An uninitialized RECORD array of ``size`` in its own anonymous mapping (None: plain)."""
    nbytes = size * RECORD.itemsize
    try:
        mm = anonymous_mapping(nbytes)
    except (OSError, ValueError, AttributeError, OverflowError):
        return np.empty(size, RECORD), None
    return np.frombuffer(mm, RECORD, count=size), mm


_RAW_RECORD = np.dtype((np.void, RECORD.itemsize))


class RecordSink:
    """Collects the records of all batches, written once into their final place.

    The records go into one array reserved up front for the largest trace allowed (``limit``:
    half the machine's memory, at most 8 GiB), in an anonymous mapping of its own: the operating
    system backs only the part written, so a small trace costs a small trace's memory, and no
    record is copied when the trace grows. (A plain ``np.empty`` of that size is slower to fill:
    numpy asks for transparent huge pages on large arrays, and on the Firecracker VM used for
    development, faulting those in took 2-3x longer than 4 KB pages; populating ahead with
    ``MADV_POPULATE_WRITE`` was slower still at times.) Instruction ids: the (instruction, space)
    pairs declared (:meth:`declare`) or executed, sorted by position in the program (:meth:`records`
    renumbers the provisional ids given in order of first use).
    """

    def __init__(self, limit_bytes: int | None = None) -> None:
        limit = (
            limit_bytes if limit_bytes is not None else min(8 << 30, _physical_memory_bytes() // 2)
        )
        self.limit_bytes = limit
        self.capacity = max(1, limit // RECORD.itemsize)
        self.buf: np.ndarray | None = None
        self.raw: np.ndarray = np.zeros(0, _RAW_RECORD)
        self.addr: np.ndarray = np.zeros((0, 32), np.uint64)
        # the columns the partial records set (views of buf)
        self.mask: np.ndarray = np.zeros(0, np.uint32)
        self.epoch: np.ndarray = np.zeros(0, np.uint32)
        self.extra: np.ndarray = np.zeros(0, np.uint32)
        self._mm: Any = None
        self.keys: dict[tuple[int, int], int] = {}
        self.key_kind: dict[tuple[int, int], tuple[int, int]] = {}
        self.count = 0
        # only the global accesses' records are written (the other spaces' instructions are
        # declared, their records dropped): for a run whose global traffic alone is read
        self.global_only = False

    def declare(self, accesses: list[tuple[int, Space, Kind, int]]) -> None:
        """List memory instructions in the trace even if they never execute."""
        for index, space, kind, width in accesses:
            self.key(index, space, kind, width)

    def key(self, index: int, space: Space, kind: Kind, width: int) -> int:
        k = (index, int(space))
        got = self.keys.get(k)
        if got is None:
            got = len(self.keys)
            self.keys[k] = got
            self.key_kind[k] = (int(kind), width)
        return got

    def reserve(self, n: int) -> np.ndarray:
        """The next ``n`` records, to be filled by the caller."""
        start = self.reserve_index(n)
        assert self.buf is not None
        return self.buf[start : start + n]

    def reserve_index(self, n: int) -> int:
        """Reserve the next ``n`` records; their first index in :attr:`buf` (and in the column
        views :attr:`raw` and :attr:`addr`)."""
        start = self.count
        need = start + n
        if need > self.capacity:
            self._over(need)
        if self.buf is None or need > len(self.buf):
            self._grow(need)
        self.count = need
        return start

    def _over(self, need: int) -> None:
        """Called with the record count a reservation would reach past the capacity: raises."""
        raise EmulationError(
            f"the memory trace grew past {self.limit_bytes / 2**30:.1f} GiB "
            f"({need} warp-level accesses)",
            "trace fewer CTAs (--sample-ctas), or a smaller problem size",
        )

    def _grow(self, need: int) -> None:
        """Reserve the whole capacity at once (untouched pages cost nothing); where the system
        refuses so large a reservation, take what it gives and copy into a larger one later."""
        size = self.capacity
        while True:
            try:
                new, mm = _reserve_records(size)
                break
            except MemoryError:
                if size <= need:
                    raise EmulationError(
                        f"no memory for a trace of {need} warp-level accesses",
                        "trace fewer CTAs (--sample-ctas), or a smaller problem size",
                    ) from None
                size = max(need, size // 2)
        if self.buf is not None and self.count:
            new[: self.count] = self.buf[: self.count]
        self.buf = new
        self._mm = mm
        # whole records as opaque bytes (a template copied in one memcpy) and the address column
        self.raw = new.view(_RAW_RECORD)
        self.addr = new["addr"]
        self.mask = new["mask"]
        self.epoch = new["epoch"]
        self.extra = new["extra"]

    def ordered_keys(self) -> list[tuple[int, int]]:
        return sorted(self.keys)

    def records(self) -> np.ndarray:
        if self.buf is None or self.count == 0:
            return np.zeros(0, RECORD)
        order = self.ordered_keys()
        remap = np.zeros(len(order), np.int32)
        for new, k in enumerate(order):
            remap[self.keys[k]] = new
        out = self.buf[: self.count]
        out["inst"] = remap[out["inst"]]
        return out


# ---------------------------------------------------------------------------------------------
# A batch


def _zeroed_registers(
    regs: dict[str, str], n: int, cache: dict[int, dict[str, Any]] | None, ncta: int
) -> dict[str, np.ndarray]:
    """A batch's registers (``n`` lanes each, zeros) for the batch-size cache's new entry of
    ``ncta`` CTAs. A larger batch's registers in the cache (the sample's last, shorter batch
    after the full ones) are taken over: their first ``n`` lanes, zeroed, and that entry is
    dropped (a later batch of its size starts from zeros, as a new one does). Zeroing memory the
    process has touched is a memset; fresh zeros are first touches of new pages, which cost
    ~10x as much here (HeCBench haversine's last batch: 1,094 registers of 53,760 lanes, 2.7 of
    its 4.7 CPU-s), and the batch's peak memory is the larger batch's, not both."""
    if cache:
        larger = [k for k in cache if k > ncta]
        if larger:
            donor = cache[min(larger)]["regs"]
            if donor.keys() == regs.keys() and all(
                donor[name].dtype == storage_dtype(t) for name, t in regs.items()
            ):
                del cache[min(larger)]
                got = {name: donor[name][:n] for name in regs}
                for arr in got.values():
                    arr.fill(0)
                return got
    return {name: np.zeros(n, dtype=storage_dtype(t)) for name, t in regs.items()}


class Batch:
    """Whole CTAs executing together; see the module docstring."""

    # steps in lockstep (see run()); off, every step takes the general path (tests compare both)
    lockstep = True

    def __init__(
        self,
        image: KernelImage,
        launch: Launch,
        ctas: np.ndarray,
        gmem: GlobalMemory,
        param_block: bytes,
        sink: RecordSink | None,
        max_instructions: int,
        cache: dict[int, dict[str, Any]] | None = None,
        sample_above: int = 0,
        loop_report: dict[int, SampledLoop] | None = None,
        cost_cap: Callable[[int, int, int], bool] | None = None,
    ) -> None:
        self.image = image
        # whether the batch's emulation so far (its steps' instructions, its warp accesses
        # recorded, its steps) has cost what its sample may: its long loops are sampled from
        # then on (LoopSampler.forced; looked at every 256 steps; None: never)
        self.cost_cap = cost_cap
        self.program = image.program
        self.launch = launch
        self.gmem = gmem
        self.sink = sink
        self.max_instructions = max_instructions
        self.ctas = ctas.astype(np.int64)
        self.ncta = len(ctas)
        wpc = launch.warps_per_cta
        self.wpc = wpc
        lanes_per_cta = wpc * 32
        self.n = n = self.ncta * lanes_per_cta
        self.nwarps = n // 32
        # arrays that depend only on the batch's size are kept for the next batch of that size
        shared = cache.get(self.ncta) if cache is not None else None
        if shared is None:
            lane = np.arange(n, dtype=np.int64)
            shared = {
                "lane": lane,
                "cta_of_lane": lane // lanes_per_cta,
                "tid": lane % lanes_per_cta,
                "lane_in_warp": (lane & 31).astype(U32),
                "warp_base": lane & ~np.int64(31),
                "warp_in_cta": np.tile(np.arange(wpc, dtype=np.int32), self.ncta),
                "regs": _zeroed_registers(self.program.regs, n, cache, self.ncta),
                "specials": {},
                # float64 scratch of the batch's size, for an op's intermediate (ops.py)
                "f64": np.empty(n, np.float64),
            }
            if cache is not None:
                cache[self.ncta] = shared
        self.lane_index = shared["lane"]
        self.cta_of_lane = shared["cta_of_lane"]
        self.tid_linear = shared["tid"]
        self.lane_in_warp = shared["lane_in_warp"]
        self.warp_base = shared["warp_base"]
        self.warp_in_cta = shared["warp_in_cta"]
        self.warp_cta = np.repeat(self.ctas, wpc)
        self.warp_epoch = np.zeros(self.nwarps, np.uint32)  # barriers each warp has passed
        # registers start as they were left (the values of uninitialized registers are undefined)
        self.regs: dict[str, np.ndarray] = shared["regs"]
        self._layout_specials: dict[str, Any] = shared["specials"]
        self.scratch_f64: np.ndarray = shared["f64"]
        self._carry: np.ndarray | None = None
        self.step_counter = 0
        # the instructions run()'s steps ran (a block's length each step, however many lanes)
        self.step_ops = 0
        # SIMT counts per basic block (the last entry: the virtual exit), filled by run():
        # warp executions, active lanes summed over them, and warp executions split at the block's
        # terminator (a conditional branch whose lanes went both ways)
        nb_ = len(self.program.blocks) + 1
        self.block_warps: list[int] = [0] * nb_
        self.block_lanes: list[int] = [0] * nb_
        self.block_splits: list[int] = [0] * nb_
        # of those, the splits whose taken lanes are a prefix or a suffix of the warp's active
        # lanes (``tid < bound``, ``i > tid * k``: a front; :func:`front_splits`)
        self.block_front_splits: list[int] = [0] * nb_
        # block -> the batch's CTAs it split in, by index in the batch (split_ctas: their ids)
        self._split_seen: dict[int, np.ndarray] = {}
        # which warps ran each block at least once (rows: blocks; a row of the lockstep steps'
        # blocks, run by every warp, in ``block_all_warps``): the warps of a CTA that share a
        # block's work (a ``tid == 0`` section runs in one); None past a size (not counted)
        self.block_seen: np.ndarray | None = (
            np.zeros((nb_, self.nwarps), bool) if nb_ * self.nwarps <= _SEEN_LIMIT else None
        )
        self.block_all_warps = np.zeros(nb_, bool)
        # filled by run(): each warp's sum of the block costs of the blocks it ran
        # (gpuadvise.ptx.chains: links by latency class, then issued instructions), recorded
        # while the costs are not known (the SASS being read); per CTA, the chain of its
        # critical warp and its most instructions: chains.critical_paths
        self.chain_sums: WarpChains | ChainLog | NoChains | None = None
        # full-mask records per trace key: (template, epoch generation, its raw view)
        self._record_templates: dict[int, tuple[np.ndarray, int, np.ndarray]] = {}
        self._epoch_gen = 0  # counts the changes of warp_epoch
        # the last lanes array recorded and its layout (_lanes_layout)
        self._layout_of: tuple[np.ndarray, tuple[Any, Any, Any, np.ndarray]] | None = None

        # memory of the batch
        self.shared_bytes = image.shared_bytes
        self.shared_stride = align_up(max(self.shared_bytes, 16), 16)
        self.shared_heap = np.zeros(self.shared_stride * self.ncta, np.uint8)
        self.shared_views = heap_views(self.shared_heap)
        self.shared_lane_base = self.cta_of_lane * self.shared_stride
        self._lane_base_pair: tuple[np.ndarray, np.ndarray] | None = None
        self.local_stride = max(image.local_bytes, 16)
        self.local_heap = np.zeros(self.local_stride * n if image.local_bytes else 16, np.uint8)
        self.local_views = heap_views(self.local_heap)
        self.const_views = heap_views(image.const_bank)
        pb = np.zeros(align_up(max(len(param_block), 16), 16), np.uint8)
        pb[: len(param_block)] = np.frombuffer(param_block, np.uint8)
        self.param_heap = pb
        self.param_views = heap_views(pb)
        self.call_param_store: dict[str, np.ndarray] = {
            name: np.zeros((n, align_up(size, 8)), np.uint8)
            for name, size in image.call_params.items()
        }

        # special registers, computed on first use
        self._specials: dict[str, Any] = {}

        self.ops: list[Op] = [self._build(i, ins) for i, ins in enumerate(self.program.instrs)]
        # long loops: the first iterations run, the rest skipped to the last and weighted
        # (gpuadvise.ptx.sampling); sample_above 0: every iteration runs
        self.sampler = LoopSampler(
            self.program,
            image.program_loops(),
            self.regs,
            self.nwarps,
            sample_above,
            self._loop_where,
            loop_report if loop_report is not None else {},
            # a loop that cannot be sampled but counted ahead stops the run as soon as it is
            # sure to take a warp past the budget
            # (past the budget by more than the 256 steps between two checks of it could add:
            # the stop comes only where the full run is sure to stop too)
            budget=max_instructions
            + 256 * max((len(b.body) + 1 for b in self.program.blocks), default=1),
            stop=self._budget_error,
        )
        # IEEE double divisions: the warps that executed each and those with a lane on ptxas's
        # slow path (gpuadvise.ptx.slow_paths), for the execution model's instruction counts
        self.slow_div: dict[int, list[int]] = {}
        for i, ins in enumerate(self.program.instrs):
            if has_slow_path(ins) and len(ins.operands) >= 3:
                self.ops[i] = self._count_slow(i, ins, self.ops[i])
        self.ops = [self.sampler.hook(i, op) for i, op in enumerate(self.ops)]

    def _count_slow(self, i: int, ins: Instr, op: Op) -> Op:
        """``op`` (a double division) counting, before it runs, the warps that execute it and
        those with an active lane on the slow path into ``slow_div[i]``."""
        a = getter(self, ins.operands[1], "f64")
        b = getter(self, ins.operands[2], "f64")
        counts = self.slow_div.setdefault(i, [0, 0])
        n = self.n

        def counted(m: Mask) -> None:
            slow = np.broadcast_to(slow_lanes(a(), b()), (n,))
            if m.b is not None:
                slow = slow & m.b
                warps = int(np.count_nonzero(m.b.reshape(-1, 32).any(axis=1)))
            else:
                warps = n // 32
            counts[0] += warps
            counts[1] += int(np.count_nonzero(slow.reshape(-1, 32).any(axis=1)))
            op(m)

        return counted

    # -- interface used by ops.py -----------------------------------------------------------------

    _LAYOUT_SPECIALS = ("%tid.", "%laneid", "%warpid", "%lanemask_")

    def special(self, name: str) -> Any:
        got = self._specials.get(name)
        if got is None:
            layout = name.startswith(self._LAYOUT_SPECIALS)
            if layout:
                got = self._layout_specials.get(name)
            if got is None:
                got = self._make_special(name)
                if layout:
                    self._layout_specials[name] = got
            self._specials[name] = got
        return got

    def _make_special(self, name: str) -> Any:
        bx, by, _ = self.launch.block
        gx, gy, _ = self.launch.grid
        axes = {"x": 0, "y": 1, "z": 2}
        if name.startswith(("%tid.", "%ctaid.", "%clusterid.")):
            axis = name[-1]
            if name.startswith("%tid."):
                t = self.tid_linear
                v = (t % bx, (t // bx) % by, t // (bx * by))[axes[axis]]
            else:
                c = self.ctas[self.cta_of_lane]
                v = (c % gx, (c // gx) % gy, c // (gx * gy))[axes[axis]]
            return v.astype(U32)
        if name.startswith(("%ntid.", "%nctaid.", "%nclusterid.")):
            dims = self.launch.block if name.startswith("%ntid.") else self.launch.grid
            return U32(dims[axes[name[-1]]])
        if name.startswith(("%cluster_ctaid.",)):
            return U32(0)
        if name.startswith("%cluster_nctaid."):
            return U32(1)
        li = self.lane_in_warp.astype(np.uint64)
        one = U64(1)
        m32 = U64(0xFFFFFFFF)
        fixed: dict[str, Callable[[], Any]] = {
            "%laneid": lambda: self.lane_in_warp,
            "%warpid": lambda: (self.tid_linear // 32).astype(U32),
            "%nwarpid": lambda: U32(self.wpc),
            "%smid": lambda: (self.ctas[self.cta_of_lane] % max(self.launch.sm_count, 1)).astype(
                U32
            ),
            "%nsmid": lambda: U32(self.launch.sm_count),
            "%gridid": lambda: U64(0),
            "%dynamic_smem_size": lambda: U32(self.image.dynamic_smem_bytes),
            "%total_smem_size": lambda: U32(self.image.shared_bytes),
            "%aggr_smem_size": lambda: U32(self.image.shared_bytes),
            "%cluster_ctarank": lambda: U32(0),
            "%cluster_nctarank": lambda: U32(1),
            "%is_explicit_cluster": lambda: np.bool_(False),
            "%lanemask_eq": lambda: (one << li).astype(U32),
            "%lanemask_lt": lambda: ((one << li) - one).astype(U32),
            "%lanemask_le": lambda: ((one << (li + one)) - one).astype(U32),
            "%lanemask_gt": lambda: (~((one << (li + one)) - one) & m32).astype(U32),
            "%lanemask_ge": lambda: (~((one << li) - one) & m32).astype(U32),
        }
        if name in fixed:
            return fixed[name]()
        if name in ("%clock", "%clock_hi", "%clock64", "%globaltimer", "%globaltimer_lo"):
            return U64(self.step_counter * 4)
        if name.startswith("%envreg") or name.startswith("%pm"):
            return U32(0)
        raise UnsupportedInstructionError(
            f"special register {name} is not supported", None, opcode=name
        )

    def carry_flag(self) -> np.ndarray:
        if self._carry is None:
            self._carry = np.zeros(self.n, np.uint8)
        return self._carry

    def window(self, space: str) -> int:
        return {
            "global": 0,
            "shared": SHARED_WINDOW,
            "local": LOCAL_WINDOW,
            "const": CONST_WINDOW,
            "param": PARAM_WINDOW,
        }[space]

    def symbol_value(self, name: str) -> int:
        img = self.image
        if name in img.shared_offsets:
            return img.shared_offsets[name]
        if name in img.local_offsets:
            return img.local_offsets[name]
        if name in img.const_offsets:
            return img.const_offsets[name]
        if name in img.kernel_params:
            return img.kernel_params[name][0]
        if name in self.gmem.by_name:
            return self.gmem.address_of(name)
        if name == "WARP_SZ":  # PTX's constant for warpSize (mov.u32 %r, WARP_SZ)
            return 32
        raise UnsupportedInstructionError(
            f"the address of {name!r} is not supported (a function or unknown symbol)",
            None,
            opcode="mov",
        )

    # -- building ---------------------------------------------------------------------------------

    def _loop_where(self, loop: Loop) -> str:
        """Where a loop is, for messages: its latch's exit test (the loop's line), else its
        header."""
        if loop.setp is not None:
            return self.where(loop.setp)
        blk = self.program.blocks[loop.header]
        return self.where(blk.start) if blk.end > blk.start else "the kernel's end"

    def where(self, index: int) -> str:
        """``file:line`` for messages: the user's call site, with the inlined callee's line
        (a CUDA header's, say) after it when the instruction comes from an inlined function."""
        ins = self.program.instrs[index]
        w = self.image.module.where(ins.loc)
        if w is None:
            return f"PTX line {ins.ptx_line}"
        if ins.inner_loc is not None and ins.inner_loc != ins.loc:
            inner = self.image.module.where(ins.inner_loc)
            if inner and inner != w:
                return f"{w} (in {inner})"
        return w

    def _build(self, index: int, ins: Instr) -> Op:
        base = ins.base
        try:
            if base in ("ld", "ldu", "st", "atom", "red"):
                op = self._build_memory(index, ins)
            elif base == "cp":
                op = self._build_cp(index, ins)
            elif base == "call":
                op = self._build_call(index, ins)
            elif base == "trap" or base == "brkpt":
                op = self._raising(self._trap_error(index, base))
            else:
                op = build_op(self, ins)
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            op = self._raising(
                UnsupportedInstructionError(
                    f"unsupported form of PTX instruction {ins.opcode!r} ({exc}) at "
                    f"{self.where(index)}",
                    "the CPU emulator covers what nvcc emits for common kernels",
                    opcode=ins.opcode,
                )
            )
        except UnsupportedInstructionError as exc:
            err = UnsupportedInstructionError(
                f"{exc.message} at {self.where(index)}",
                "the CPU emulator covers what nvcc emits for common kernels; simplify the kernel, "
                "or trace it on a GPU",
                opcode=exc.opcode or ins.opcode,
            )
            op = self._raising(err)
        if ins.guard is not None and base not in ("bra", "ret", "exit"):
            return self._guarded(op, ins.guard, ins.guard_neg)
        return op

    def _guarded(self, op: Op, guard: str, neg: bool) -> Op:
        p = getter(self, Reg(guard), "pred")

        def g(m: Mask) -> None:
            mm = m.with_pred(np.asarray(p()), neg)
            if mm.any():
                op(mm)

        return g

    @staticmethod
    def _raising(err: Exception) -> Op:
        def op(m: Mask) -> None:
            raise err

        return op

    def _build_call(self, index: int, ins: Instr) -> Op:
        ops = ins.operands
        k = 1 if ops and not isinstance(ops[0], Sym | Reg) else 0
        target = ops[k] if k < len(ops) else None
        name = target.name if isinstance(target, Sym) else None
        if name in EXTERN_NOOPS:
            return lambda m: None
        if name == "__assertfail":
            return self._raising(
                EmulationError(f"a device-side assert failed at {self.where(index)}", None)
            )
        if name is None:
            raise UnsupportedInstructionError("indirect call", None, opcode=ins.opcode)
        func = self.image.module.functions.get(name)
        if func is not None and func.body is not None:
            raise UnsupportedInstructionError(f"recursive call of {name}", None, opcode=ins.opcode)
        raise UnsupportedInstructionError(
            f"call of the external function {name}", None, opcode=ins.opcode
        )

    # -- addresses ----------------------------------------------------------------------------------

    def _addr_fn(self, op: Any) -> Callable[[np.ndarray | None], Any]:
        """Addresses of an ``[base+offset]`` operand for the lanes ``idx`` (None: all), as int64
        (every address the emulator hands out is below 2**63), or an int when uniform. The array
        is always a fresh one (the trace keeps it)."""
        if not isinstance(op, Addr):
            raise UnsupportedInstructionError(f"address operand {op!r}", None, opcode="ld")
        off = op.offset
        base = op.base
        if base is None:
            return lambda idx: off
        if isinstance(base, Sym):
            v = self.symbol_value(base.name) + off
            return lambda idx: v
        store = self.regs.get(base.name)
        if store is None:
            sv = self.special(base.name)
            store = np.broadcast_to(np.asarray(sv), (self.n,))
        if store.dtype.itemsize == 8:
            sv64 = store.view(np.int64)
            if off == 0:
                return lambda idx: sv64.copy() if idx is None else sv64[idx]
            o64 = np.int64(off)
            return lambda idx: (sv64 if idx is None else sv64[idx]) + o64
        # 32-bit addresses (shared/local windows)
        o = np.int64(off)
        if off == 0:
            return lambda idx: (store if idx is None else store[idx]).astype(np.int64)
        if store.dtype.kind in "iu":  # widened and offset by one call (the same int64 values)
            add, i64 = np.add, np.int64
            return lambda idx: add(store if idx is None else store[idx], o, dtype=i64)
        return lambda idx: (store if idx is None else store[idx]).astype(np.int64) + o

    def _fail(
        self,
        index: int,
        what: str,
        lanes: np.ndarray | None,
        pos: int,
        address: int,
        buffer: str | None,
        offset: int | None,
        phrase: str,
        hint: str,
    ) -> MemoryAccessError:
        lane = int(lanes[pos]) if lanes is not None else pos
        cta = int(self.ctas[self.cta_of_lane[lane]])
        tid = int(self.tid_linear[lane])
        cxyz = self.launch.cta_xyz(cta)
        txyz = self.launch.thread_xyz(tid)
        where = self.where(index)
        opcode = self.program.instrs[index].opcode
        return MemoryAccessError(
            f"{what} at {where} ({opcode}): address {address:#x} is {phrase}; "
            f"block {cxyz}, thread {txyz}",
            hint,
            where=where,
            buffer=buffer,
            offset=offset,
            address=address,
            cta=cxyz,
            thread=txyz,
        )

    def _locate(
        self,
        index: int,
        space: str,
        a: np.ndarray,
        lanes: np.ndarray | None,
        width: int,
        kind: str,
    ) -> list[tuple[str, np.ndarray, np.ndarray | None, np.ndarray]]:
        """Split accesses into (space, byte offsets in the space's heap, positions or None, the
        addresses to trace), checking alignment and bounds (raising :class:`MemoryAccessError`).

        Traced addresses are those of the space: global virtual addresses, shared-window and
        local-frame offsets, constant-bank offsets (generic addresses are mapped back)."""
        few = _bounds(a)
        if (
            width > 1
            and a.size
            and (few[2] if few is not None else int(np.bitwise_or.reduce(a))) & (width - 1)
        ):
            pos = int(np.flatnonzero(a & (width - 1))[0])
            raise self._fail(
                index,
                f"misaligned {kind}",
                lanes,
                pos,
                int(a[pos]),
                None,
                None,
                f"not a multiple of the access width ({width} bytes)",
                "the GPU faults on misaligned accesses; align the data or the pointer",
            )
        if space == "generic":
            if a.size == 0:
                return []
            lo = (few[0] if few is not None else int(_least(a))) >> WINDOW_SHIFT
            hi = (few[1] if few is not None else int(_most(a))) >> WINDOW_SHIFT
            if lo == hi:
                return self._locate_in(index, lo, a, lanes, width, kind, True, few)
            win = a >> WINDOW_SHIFT
            out: list[tuple[str, np.ndarray, np.ndarray | None, np.ndarray]] = []
            for w in np.unique(win):
                sel = np.flatnonzero(win == w)
                sub_lanes = lanes[sel] if lanes is not None else sel
                for sp, offs, sub, taddr in self._locate_in(
                    index, int(w), a[sel], sub_lanes, width, kind, True
                ):
                    out.append((sp, offs, sel if sub is None else sel[sub], taddr))
            return out
        win_id = {"global": 7, "shared": 1, "local": 2, "const": 3, "param": 4}[space]
        return self._locate_in(index, win_id, a, lanes, width, kind, False, few)

    def _check(
        self,
        index: int,
        o: np.ndarray,
        a: np.ndarray,
        lanes: np.ndarray | None,
        width: int,
        size: int,
        what: str,
        name: str,
        phrase: str,
        hint: str,
        lohi: tuple[int, int] | None = None,
    ) -> None:
        """Raise when an offset of ``o`` (``lohi``: its least and greatest, when known) is outside
        ``[0, size)`` for ``width`` bytes."""
        if o.size == 0:
            return
        lo, hi = lohi if lohi is not None else (int(_least(o)), int(_most(o)))
        if lo >= 0 and hi + width <= size:
            return
        pos = int(np.flatnonzero((o < 0) | (o + width > size))[0])
        raise self._fail(
            index,
            what,
            lanes,
            pos,
            int(a[pos]),
            name,
            int(o[pos]),
            phrase.format(off=int(o[pos]), size=size),
            hint,
        )

    def _locate_in(
        self,
        index: int,
        win: int,
        a: np.ndarray,
        lanes: np.ndarray | None,
        width: int,
        kind: str,
        generic: bool,
        few: tuple[int, int, int] | None = None,
    ) -> list[tuple[str, np.ndarray, np.ndarray | None, np.ndarray]]:
        """:meth:`_locate` for addresses ``a`` in window ``win`` (``few``: their least, greatest
        and bitwise or, as :func:`_bounds` gives them, or None)."""
        what = f"out-of-bounds {kind}"
        if win == 7:
            if a.size:  # every access in one buffer (the usual case): its offsets at once
                # (aligned: _locate checked every address against the width)
                lo, hi = (few[0], few[1]) if few is not None else (int(_least(a)), int(_most(a)))
                one = self.gmem.in_one_buffer(a, lo, hi, width, aligned=True)
                if one is not None:
                    return [("global", one, None, a)]
            offs, bad = self.gmem.translate(a, width)
            if bad is not None:
                pos = int(np.flatnonzero(bad)[0])
                addr = int(a[pos])
                name, off, phrase = self.gmem.describe(addr, width)
                raise self._fail(
                    index,
                    f"{what} in global memory",
                    lanes,
                    pos,
                    addr,
                    name,
                    off,
                    phrase,
                    "check the index computation and the launch's buffer sizes",
                )
            return [("global", offs, None, a)]
        if win in _WINDOWS:
            space, window, where, phrase, hint = _WINDOWS[win]
            o = a - (window if generic else 0)
            shift = window if generic else 0
            if win == 1:
                o -= self.image.shared_base
                shift += self.image.shared_base
            size = {
                1: self.shared_bytes,
                2: self.image.local_bytes,
                3: len(self.image.const_bank),
                4: len(self.param_heap),
            }[win]
            lohi = None if few is None else (few[0] - shift, few[1] - shift)
            self._check(
                index, o, a, lanes, width, size, f"{what} in {where}", space, phrase, hint, lohi
            )
            if win == 1:
                lb = self.shared_lane_base if lanes is None else self.shared_lane_base[lanes]
                return [("shared", lb + o, None, a - SHARED_WINDOW if generic else a)]
            if win == 2:
                ln = self.lane_index if lanes is None else lanes
                return [("local", ln * self.local_stride + o, None, o)]
            return [(space, o, None, o)]
        addr = int(a[0])
        name, off, phrase = self.gmem.describe(addr, width)
        raise self._fail(
            index,
            f"{what} through a generic pointer",
            lanes,
            0,
            addr,
            name,
            off,
            phrase,
            "check the pointer",
        )

    def _record(
        self,
        index: int,
        space: str,
        kind: Kind,
        width: int,
        lanes: np.ndarray | None,
        taddr: np.ndarray,
    ) -> None:
        """Write the warp-level records of one access (lanes None: every lane of the batch;
        else the active lanes, ascending, as ``Mask.idx`` gives them)."""
        sp = SPACE_ENUM.get(space)
        sink = self.sink
        if sp is None or sink is None or (sink.global_only and sp is not Space.GLOBAL):
            return
        key = sink.key(index, sp, kind, width)
        if lanes is None:
            self._record_full(sink, key, sp, kind, width, taddr)
            return
        if lanes.size:
            self._record_lanes(sink, key, sp, kind, width, lanes, taddr)

    def _record_lanes(
        self,
        sink: RecordSink,
        key: int,
        sp: Space,
        kind: Kind,
        width: int,
        lanes: np.ndarray,
        taddr: np.ndarray,
    ) -> None:
        """Write the records of an access by ``lanes`` (ascending, not empty) under trace key
        ``key``, as :meth:`_record` does for a partial mask."""
        # the key's template for the fields that never change; its epochs and weights made
        # again when stale in a batch of a few warps (a copy of a few hundred), else left stale
        # and those of the warps written set below (HeCBench perplexity: 5,400 templates made
        # again for 250,000 records that each set them)
        sampler = self.sampler
        got = self._record_templates.get(key)
        if got is None or (
            got[1] != self._epoch_gen + (sampler.changes << 32)
            and self.nwarps <= _FRESH_TEMPLATE_WARPS
        ):
            got = self._record_template(key, sp, kind, width)
        raw = got[2]
        last = self._layout_of  # (_lanes_layout's own check of the last lanes, without its call)
        lay = last[1] if last is not None and last[0] is lanes else self._lanes_layout(lanes)
        if lay[1] is None:  # one warp's lanes (ascending): one record
            w0, _, bits, col = lay
            start = sink.count
            if start < len(sink.raw):  # room reserved already (reserve_index's own check)
                sink.count = start + 1
            else:
                start = sink.reserve_index(1)
            sink.raw[start] = raw[w0]
            # through the sink's column views: a field set on the record (a numpy void) costs
            # several times as much
            sink.mask[start] = bits
            if got[1] != self._epoch_gen + (sampler.changes << 32):
                # the template's epoch and weight are stale (a template current since the last
                # barrier and weight change holds the warp's own: nothing to set)
                sink.epoch[start] = self.warp_epoch[w0]
                sink.extra[start] = sampler.extra[w0]
            # the row, then its lanes, in the column's dtype: a scatter that casts (int64 into
            # uint64, the same bits) or takes a (row, lanes) pair costs ~10x as much
            sink.addr[start][col] = taddr.view(_U64) if taddr.dtype == _I64 else taddr
            return
        # the fixed fields from the template (its address column zeros), then the masks, the
        # epochs and weights where the template's are stale (as for one warp, above), and the
        # active lanes' addresses
        wsel, (flat, fb), wm, block = lay
        start = sink.reserve_index(len(wsel))
        end = start + len(wsel)
        sink.raw[start:end] = raw[wsel]
        assert sink.buf is not None
        sink.mask[start:end] = wm
        if got[1] != self._epoch_gen + (sampler.changes << 32):
            sink.epoch[start:end] = self.warp_epoch[wsel]
            sink.extra[start:end] = sampler.extra[wsel]
        # the addresses scattered into the layout's block (rows by 32 lanes, a flat index: only
        # these lanes' places are ever written, so the others stay zeros), the block copied whole
        # over the records' address column: a (row, lane) scatter into the records' strided
        # column costs ~3x as much
        fb[flat] = taddr.view(_U64) if taddr.dtype == _I64 else taddr
        sink.addr[start:end] = block

    def _lanes_layout(self, lanes: np.ndarray) -> tuple[Any, Any, Any, np.ndarray]:
        """Where the records of an access by ``lanes`` (ascending, not empty) go: (the warp, None,
        its mask, each lane's column) when they are one warp's, else (the warps, (each lane's
        place in a block of their address rows, the block flat), their masks, the block: zeros,
        rows by 32 lanes). Kept for the last ``lanes`` array: the
        accesses of a block share its mask's (``Mask.idx``), so it is made once a block."""
        got = self._layout_of
        if got is not None and got[0] is lanes:
            return got[1]
        col = lanes & 31
        w0 = int(lanes[0]) >> 5
        lay: tuple[Any, Any, Any, np.ndarray]
        if int(lanes[-1]) >> 5 == w0:
            bits = 0
            for lane in lanes.tolist():
                bits |= 1 << (lane & 31)
            lay = (w0, None, bits, col)
        else:
            # the warps the lanes are in (ascending, as the lanes) and each lane's row among
            # them, from the lanes alone: no pass over the batch
            wl = lanes >> 5
            starts = (wl[1:] != wl[:-1]).nonzero()[0] + 1
            wsel = np.concatenate((wl[:1], wl[starts]))
            rows = np.zeros(lanes.size, np.int64)
            rows[starts] = 1
            np.cumsum(rows, out=rows)
            bits_a = np.left_shift(U32(1), col.astype(U32))
            wm = np.bitwise_or.reduceat(bits_a, np.concatenate((np.zeros(1, np.int64), starts)))
            # each lane's place in a block of the warps' address rows (32 lanes a row), and
            # that block, zeros (the records' addresses are written through it)
            block = np.zeros((wsel.size, 32), _U64)
            lay = (wsel, ((rows << 5) | col, block.reshape(-1)), wm, block)
        self._layout_of = (lanes, lay)
        return lay

    def _record_template(
        self, key: int, sp: Space, kind: Kind, width: int
    ) -> tuple[np.ndarray, int, np.ndarray]:
        """The records of an access by every lane of every warp, under trace key ``key``, but
        their addresses (zeros): made once per key, their epochs and weights made again only
        when the warps' barrier epochs or the sampler's weights changed since."""
        got = self._record_templates.get(key)
        gen = self._epoch_gen + (self.sampler.changes << 32)
        if got is None or got[1] != gen:
            if got is None:
                tmpl = np.zeros(self.nwarps, RECORD)
                tmpl["cta"] = self.warp_cta
                tmpl["warp"] = self.warp_in_cta
                tmpl["mask"] = 0xFFFFFFFF
                tmpl["inst"] = key
                tmpl["width"] = width
                tmpl["space"] = int(sp)
                tmpl["kind"] = int(kind)
            else:
                tmpl = got[0]
            tmpl["epoch"] = self.warp_epoch
            tmpl["extra"] = self.sampler.extra
            got = (tmpl, gen, tmpl.view(_RAW_RECORD))
            self._record_templates[key] = got
        return got

    def _record_full(
        self, sink: RecordSink, key: int, sp: Space, kind: Kind, width: int, taddr: np.ndarray
    ) -> None:
        """Write the records of an access by every lane of the batch (trace key ``key``): one
        copy of the key's template (:meth:`_record_template`), then the address column."""
        raw = self._record_template(key, sp, kind, width)[2]
        nw = self.nwarps
        start = sink.reserve_index(nw)
        sink.raw[start : start + nw] = raw
        # as uint64 (int64 viewed): a casting copy of the rows costs ~3x as much (64 warps)
        sink.addr[start : start + nw] = _as_u64(taddr).reshape(nw, 32)

    # -- memory instructions ----------------------------------------------------------------------

    def _space_of(self, ins: Instr) -> str:
        return space_of(ins)

    def _build_memory(self, index: int, ins: Instr) -> Op:
        base = ins.base
        mods = ins.mods
        space = self._space_of(ins)
        vec = next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)
        if base in ("atom", "red"):
            return self._build_atomic(index, ins, space)
        t = type_of(mods)
        if t == "b128":
            raise UnsupportedInstructionError("128-bit ld/st", None, opcode=ins.opcode)
        es = TYPE_SIZES[t]
        width = es * vec
        ops = ins.operands
        is_load = base in ("ld", "ldu")
        addr_op = ops[1] if is_load else ops[0]
        data_op = ops[0] if is_load else ops[1]
        items = list(data_op.items) if isinstance(data_op, Vec) else [data_op]
        if len(items) != vec:
            raise UnsupportedInstructionError(
                "vector operand size does not match", None, opcode=ins.opcode
            )
        if space == "param" and isinstance(addr_op, Addr) and isinstance(addr_op.base, Sym):
            return self._build_param(ins, addr_op, items, t, is_load)
        addr_fn = self._addr_fn(addr_op)
        shift = es.bit_length() - 1
        # (the part path's int64 offsets shifted by a 0-d array: see operand_constant)
        shift0, rshift = operand_constant(shift), np.right_shift
        kind = Kind.LOAD if is_load else Kind.STORE
        kname = "load" if is_load else "store"
        fast = self._fast_global(index, space, addr_op, kind, width)
        part = self._part_global(index, space, addr_op, kind, width)
        fast_sh = self._fast_shared(index, space, addr_fn, kind, width)
        part_sh = self._part_shared(index, space, addr_fn, kind, width)
        heap = self.gmem.views[es]
        if is_load:
            stores = [
                None
                if x is None or (isinstance(x, Sym) and x.name == "_")
                else self.regs.get(x.name)
                if isinstance(x, Reg)
                else None
                for x in items
            ]
            for x, s in zip(items, stores, strict=True):
                if s is None and isinstance(x, Reg):
                    raise UnsupportedInstructionError(
                        f"load into {x.name}", None, opcode=ins.opcode
                    )
            # (register, whether it holds the loaded bits as they are) per vector item
            dests = [
                (k, st, st.dtype != np.bool_ and st.itemsize == es)
                for k, st in enumerate(stores)
                if st is not None
            ]
            tdt = NP_TYPES[t]
            sh_view = self._view(space if fast_sh is not None else "shared", es)
            part_view = self._view(space if part_sh is not None else "shared", es)

            def ld(m: Mask) -> None:
                if m.b is None and fast is not None:
                    offs = fast()
                    if offs is not None:
                        eidx = offs >> shift if shift else offs
                        for k, st, same in dests:
                            vals = heap[eidx + k] if k else heap[eidx]
                            st[...] = vals if same else to_storage(vals.view(tdt), t, st.dtype)
                        return
                if m.b is None and fast_sh is not None:
                    offs = fast_sh()
                    if offs is not None:
                        eidx = offs >> shift
                        for k, st, same in dests:
                            vals = sh_view[eidx + k] if k else sh_view[eidx]
                            st[...] = vals if same else to_storage(vals.view(tdt), t, st.dtype)
                        return
                idx = m.idx()
                if part is not None and idx is not None:
                    offs = part(idx)
                    if offs is not None:
                        eidx = rshift(offs, shift0)
                        for k, st, same in dests:
                            vals = heap[eidx + k] if k else heap[eidx]
                            st[idx] = vals if same else to_storage(vals.view(tdt), t, st.dtype)
                        return
                if part_sh is not None and idx is not None:
                    offs = part_sh(idx)
                    if offs is not None:
                        eidx = offs >> shift
                        for k, st, same in dests:
                            vals = part_view[eidx + k] if k else part_view[eidx]
                            st[idx] = vals if same else to_storage(vals.view(tdt), t, st.dtype)
                        return
                a = addr_fn(idx)
                cnt = self.n if idx is None else len(idx)
                if np.ndim(a) == 0:
                    a = np.full(cnt, a, np.int64)
                for sp, offs, pos, taddr in self._locate(index, space, a, idx, width, kname):
                    lanes = idx if pos is None else (pos if idx is None else idx[pos])
                    self._record(index, sp, kind, width, lanes, taddr)
                    view = self._view(sp, es)
                    eidx = offs >> shift
                    for k, reg in enumerate(stores):
                        if reg is None:
                            continue
                        vals = view[eidx + k] if k else view[eidx]
                        conv = to_storage(vals.view(NP_TYPES[t]), t, reg.dtype)
                        if lanes is None:
                            reg[...] = conv
                        else:
                            reg[lanes] = conv

            return ld
        getters = [getter(self, x, t) for x in items]
        bits = np.dtype(f"u{es}")
        # per vector item: the register whose bits are stored as they are, else None
        raw_regs = [
            st if st is not None and st.dtype != np.bool_ and st.itemsize == es else None
            for st in (self.regs.get(x.name) if isinstance(x, Reg) else None for x in items)
        ]
        tdt = NP_TYPES[t]

        def st_op(m: Mask) -> None:
            if m.b is None and fast is not None:
                offs = fast()
                if offs is not None:
                    eidx = offs >> shift if shift else offs
                    for k, (g, raw) in enumerate(zip(getters, raw_regs, strict=True)):
                        if raw is None:
                            v = np.asarray(g())
                            vb = np.asarray(v.astype(tdt, copy=False))
                            raw = vb.view(bits) if vb.ndim else vb.astype(tdt).view(bits)
                        heap[eidx + k if k else eidx] = raw
                    return
            if m.b is None and fast_sh is not None:
                offs = fast_sh()
                if offs is not None:
                    view = self._view(space, es)
                    eidx = offs >> shift
                    for k, g in enumerate(getters):
                        v = np.asarray(g())
                        vb = np.asarray(v.astype(tdt, copy=False))
                        vb = vb.view(bits) if vb.ndim else vb.astype(tdt).view(bits)
                        view[eidx + k if k else eidx] = vb
                    return
            idx = m.idx()
            if part is not None and idx is not None:
                offs = part(idx)
                if offs is not None:
                    eidx = rshift(offs, shift0)
                    for k, (g, raw) in enumerate(zip(getters, raw_regs, strict=True)):
                        if raw is None:
                            v = np.asarray(g())
                            vb = np.asarray(v.astype(tdt, copy=False))
                            if not vb.ndim:
                                heap[eidx + k if k else eidx] = vb.astype(tdt).view(bits)
                                continue
                            raw = vb.view(bits)
                        heap[eidx + k if k else eidx] = raw[idx]
                    return
            if part_sh is not None and idx is not None:
                offs = part_sh(idx)
                if offs is not None:
                    view = self._view(space, es)
                    eidx = offs >> shift
                    for k, g in enumerate(getters):
                        v = np.asarray(g())
                        vb = np.asarray(v.astype(tdt, copy=False))
                        vb = vb.view(bits) if vb.ndim else vb.astype(tdt).view(bits)
                        view[eidx + k if k else eidx] = vb[idx] if vb.ndim else vb
                    return
            a = addr_fn(idx)
            cnt = self.n if idx is None else len(idx)
            if np.ndim(a) == 0:
                a = np.full(cnt, a, np.int64)
            for sp, offs, pos, taddr in self._locate(index, space, a, idx, width, kname):
                if sp in ("const", "param"):
                    raise self._fail(
                        index,
                        f"store to read-only {sp} memory",
                        idx,
                        0,
                        int(a[0]),
                        sp,
                        None,
                        "in a read-only space",
                        "the kernel writes through a pointer to constant memory",
                    )
                lanes = idx if pos is None else (pos if idx is None else idx[pos])
                self._record(index, sp, kind, width, lanes, taddr)
                view = self._view(sp, es)
                eidx = offs >> shift
                for k, g in enumerate(getters):
                    v = np.asarray(g())
                    vb = np.asarray(v.astype(NP_TYPES[t], copy=False))
                    vb = vb.view(bits) if vb.ndim else vb.astype(NP_TYPES[t]).view(bits)
                    if vb.ndim:
                        vb = vb if lanes is None else vb[lanes]
                    view[eidx + k if k else eidx] = vb

        return st_op

    def _fast_shared(
        self,
        index: int,
        space: str,
        addr_fn: Callable[[np.ndarray | None], Any],
        kind: Kind,
        width: int,
    ) -> Callable[[], np.ndarray | None] | None:
        """For a ``.shared`` or ``.local`` access: a function that, for an access by every lane
        of the batch, checks the addresses (aligned, inside the CTA's shared memory or the
        thread's local frame), writes the trace records and returns the space's heap byte
        offsets, as :meth:`_locate` and :meth:`_record` do with less work a call; or returns None
        (nothing done: the general path then checks again and raises). None for another space."""
        if space not in ("shared", "local"):
            return None
        shared = space == "shared"
        sp = Space.SHARED if shared else Space.LOCAL
        sink = self.sink if self.sink is None or not self.sink.global_only else None
        mis = width - 1
        key = -1
        # the space's offsets a - base (base: the shared window's start, 0 for a local frame)
        # must lie in [0, size - width]; each lane's heap offset is a plus its lane's base
        base = self.image.shared_base if shared else 0
        size = self.shared_bytes if shared else self.image.local_bytes
        lo_ok, hi_ok = base, base + size - width
        lane_base = self._lane_bases()[0 if shared else 1]
        least, most, either = np.minimum.reduce, np.maximum.reduce, np.bitwise_or.reduce

        def fast() -> np.ndarray | None:
            nonlocal key
            a = addr_fn(None)
            if type(a) is not np.ndarray or not a.size:
                return None
            if mis and int(either(a)) & mis:
                return None
            if int(least(a)) < lo_ok or int(most(a)) > hi_ok:
                return None
            if sink is not None:
                if key < 0:
                    key = sink.key(index, sp, kind, width)
                self._record_full(sink, key, sp, kind, width, a)
            return lane_base + a

        return fast

    def _part_shared(
        self,
        index: int,
        space: str,
        addr_fn: Callable[[np.ndarray | None], Any],
        kind: Kind,
        width: int,
    ) -> Callable[[np.ndarray], np.ndarray | None] | None:
        """:meth:`_fast_shared` for an access by some lanes ``idx`` (``Mask.idx``: ascending, a
        partial mask): checks their addresses, writes the trace records and returns the heap
        byte offsets, as :meth:`_locate` and :meth:`_record` do through their general steps; or
        returns None (nothing done). None for another space."""
        if space not in ("shared", "local"):
            return None
        shared = space == "shared"
        sp = Space.SHARED if shared else Space.LOCAL
        sink = self.sink if self.sink is None or not self.sink.global_only else None
        mis = width - 1
        key = -1
        base = self.image.shared_base if shared else 0
        size = self.shared_bytes if shared else self.image.local_bytes
        lo_ok, hi_ok = base, base + size - width
        lane_base = self._lane_bases()[0 if shared else 1]

        def part(idx: np.ndarray) -> np.ndarray | None:
            nonlocal key
            k = idx.size
            if not k:
                return None
            a = addr_fn(idx)
            if type(a) is not np.ndarray or a.dtype != _I64:
                return None
            span = _lane_span(a, k, mis)
            if span is None:
                return None
            lo, hi = span
            if lo < lo_ok or hi > hi_ok:
                return None
            if sink is not None:
                if key < 0:
                    key = sink.key(index, sp, kind, width)
                self._record_lanes(sink, key, sp, kind, width, idx, a)
            return lane_base[idx] + a

        return part

    def _lane_bases(self) -> tuple[np.ndarray, np.ndarray]:
        """Per lane, the heap offset of shared address 0 of the window (its CTA's shared memory
        less the window's start) and of its local frame (made on first use, kept)."""
        got = self._lane_base_pair
        if got is None:
            got = self._lane_base_pair = (
                self.shared_lane_base - self.image.shared_base,
                self.lane_index * self.local_stride,
            )
        return got

    def _global_base(self, space: str, addr_op: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """The 64-bit base register's lanes (an int64 view of its store) and the offset of a
        global (or generic) access ``[reg + offset]`` (a 0-d array), for :meth:`_fast_global` and
        :meth:`_part_global`; None for an access of another form."""
        if space not in ("global", "generic") or not isinstance(addr_op, Addr):
            return None
        base = addr_op.base
        store = self.regs.get(base.name) if isinstance(base, Reg) else None
        if store is None or store.dtype.itemsize != 8:
            return None
        return store.view(np.int64), operand_constant(addr_op.offset)

    def _fast_global(
        self, index: int, space: str, addr_op: Any, kind: Kind, width: int
    ) -> Callable[[], np.ndarray | None] | None:
        """For a global (or generic) access whose address is a 64-bit register plus an offset: a
        function that, for an access by every lane of the batch, checks the addresses (aligned,
        all inside one buffer), fills the lazy pages they reach, writes the trace records and
        returns the heap byte offsets; or returns None (nothing done: the general path then
        checks again and raises). None when the access is of another form."""
        got = self._global_base(space, addr_op)
        if got is None:
            return None
        sv64, off = got
        gmem = self.gmem
        sink = self.sink
        mis = width - 1
        key = -1

        least, most, either = np.minimum.reduce, np.maximum.reduce, np.bitwise_or.reduce
        sub = np.subtract
        # the addresses known to be in one buffer, their pages filled (GlobalMemory.known_window):
        # an access inside needs none of in_one_buffer's steps
        win_lo, win_hi, win_d = 1, 0, operand_constant(0)  # (empty: lo > hi)

        def fast() -> np.ndarray | None:
            nonlocal key, win_lo, win_hi, win_d
            a = sv64 + off if off else sv64  # read only: the trace copies it, offsets are new
            if mis and int(either(a)) & mis:
                return None
            lo, hi = int(least(a)), int(most(a))
            if win_lo <= lo and hi < win_hi:
                offs = sub(a, win_d)
            else:
                offs = gmem.in_one_buffer(a, lo, hi, width, aligned=True)
                if offs is None:
                    return None
                got = gmem.known_window(lo, width)
                if got is not None:
                    win_lo, win_hi, win_d = got
            if sink is not None:
                if key < 0:
                    key = sink.key(index, Space.GLOBAL, kind, width)
                self._record_full(sink, key, Space.GLOBAL, kind, width, a)
            return offs

        return fast

    def _part_global(
        self, index: int, space: str, addr_op: Any, kind: Kind, width: int
    ) -> Callable[[np.ndarray], np.ndarray | None] | None:
        """:meth:`_fast_global` for an access by some lanes ``idx`` (``Mask.idx``: ascending, a
        partial mask): a function that checks their addresses (aligned, all inside one buffer),
        fills the lazy pages they reach, writes the trace records and returns the heap byte
        offsets, as :meth:`_locate` and :meth:`_record` do through their general steps; or
        returns None (nothing done: the general path then does it). None when the access is of
        another form."""
        got = self._global_base(space, addr_op)
        if got is None:
            return None
        sv64, off = got
        has_off = bool(off)
        gmem = self.gmem
        sink = self.sink
        mis = width - 1
        key = -1
        add, sub = np.add, np.subtract
        win_lo, win_hi, win_d = 1, 0, operand_constant(0)  # (as in _fast_global)

        def part(idx: np.ndarray) -> np.ndarray | None:
            nonlocal key, win_lo, win_hi, win_d
            k = idx.size
            if not k:
                return None
            a = add(sv64[idx], off) if has_off else sv64[idx]  # a copy: the gather's own
            if k <= _FEW_LANES:  # _lane_span's steps, without its call
                vals = a.tolist()
                if mis:
                    both = 0
                    for v in vals:
                        both |= v
                    if both & mis:
                        return None
                lo, hi = min(vals), max(vals)
            else:
                span = _lane_span(a, k, mis)
                if span is None:
                    return None
                lo, hi = span
            if win_lo <= lo and hi < win_hi:  # (in a buffer: in the global window)
                offs = sub(a, win_d)
            else:
                # (a generic address in the global window only, as _locate splits them)
                if hi >> WINDOW_SHIFT != GLOBAL_BASE >> WINDOW_SHIFT:
                    return None
                offs = gmem.in_one_buffer(a, lo, hi, width, aligned=True)
                if offs is None:
                    return None
                got = gmem.known_window(lo, width)
                if got is not None:
                    win_lo, win_hi, win_d = got
            if sink is not None:
                if key < 0:
                    key = sink.key(index, Space.GLOBAL, kind, width)
                self._record_lanes(sink, key, Space.GLOBAL, kind, width, idx, a)
            return offs

        return part

    def _view(self, space: str, es: int) -> np.ndarray:
        if space == "global":
            return self.gmem.views[es]
        if space == "shared":
            return self.shared_views[es]
        if space == "local":
            return self.local_views[es]
        if space == "const":
            return self.const_views[es]
        return self.param_views[es]

    def _build_param(self, ins: Instr, addr: Addr, items: list[Any], t: str, is_load: bool) -> Op:
        assert isinstance(addr.base, Sym)
        name = addr.base.name
        es = TYPE_SIZES[t]
        dt = NP_TYPES[t]
        bits = np.dtype(f"u{es}")
        if name in self.image.kernel_params:
            if not is_load:
                raise UnsupportedInstructionError(
                    "store to a kernel parameter", None, opcode=ins.opcode
                )
            off0 = self.image.kernel_params[name][0] + addr.offset
            writes = []
            for k, x in enumerate(items):
                if x is None or not isinstance(x, Reg):
                    continue
                val = self.param_heap[off0 + k * es : off0 + (k + 1) * es].view(bits)[0]
                st = self.regs[x.name]
                conv = to_storage(np.asarray(val).view(dt), t, st.dtype)
                writes.append((st, conv))

            def ldp(m: Mask) -> None:
                for st, conv in writes:
                    write(st, conv, m)

            return ldp
        store = self.call_param_store.get(name)
        if store is None:
            raise UnsupportedInstructionError(
                f"parameter {name} is unknown", None, opcode=ins.opcode
            )
        cols = []
        for k in range(len(items)):
            o = addr.offset + k * es
            if o < 0 or o + es > store.shape[1]:
                raise UnsupportedInstructionError(
                    f"parameter access outside {name}", None, opcode=ins.opcode
                )
            cols.append(store[:, o : o + es].view(bits)[:, 0])
        if is_load:
            pairs = []
            for col, x in zip(cols, items, strict=True):
                if x is None or not isinstance(x, Reg):
                    continue
                pairs.append((col, self.regs[x.name]))

            def ldc(m: Mask) -> None:
                for col, st in pairs:
                    write(st, to_storage(col.view(dt), t, st.dtype), m)

            return ldc
        gets = [getter(self, x, t) for x in items]

        def stc(m: Mask) -> None:
            for col, g in zip(cols, gets, strict=True):
                v = np.asarray(g()).astype(dt, copy=False)
                write(col, v.view(bits) if v.ndim else v.astype(dt).view(bits), m)

        return stc

    def _build_cp(self, index: int, ins: Instr) -> Op:
        mods = ins.mods
        if "async" not in mods:
            raise UnsupportedInstructionError(ins.opcode, None, opcode=ins.opcode)
        if any(m in mods for m in ("commit_group", "wait_group", "wait_all")):
            return lambda m: None
        if "bulk" in mods or "shared" not in "".join(mods):
            raise UnsupportedInstructionError(ins.opcode, None, opcode=ins.opcode)
        ops = ins.operands
        dst_fn = self._addr_fn(ops[0])
        src_fn = self._addr_fn(ops[1])
        size_op = ops[2]
        if not isinstance(size_op, Imm):
            raise UnsupportedInstructionError(ins.opcode, None, opcode=ins.opcode)
        size = int(size_op.value)
        src_size = getter(self, ops[3], "u32") if len(ops) > 3 else None

        def cp(m: Mask) -> None:
            idx = m.idx()
            cnt = self.n if idx is None else len(idx)
            src = src_fn(idx)
            dst = dst_fn(idx)
            if np.ndim(src) == 0:
                src = np.full(cnt, src, np.int64)
            if np.ndim(dst) == 0:
                dst = np.full(cnt, dst, np.int64)
            ((_, soff, _, sa),) = self._locate(index, "global", src, idx, size, "load")
            ((_, doff, _, da),) = self._locate(index, "shared", dst, idx, size, "store")
            self._record(index, "global", Kind.LOAD, size, idx, sa)
            self._record(index, "shared", Kind.STORE, size, idx, da)
            gsrc = self.gmem.heap
            data = gsrc[soff[:, None] + np.arange(size)]
            if src_size is not None:
                n_read = np.asarray(src_size()).astype(np.int64)
                if n_read.ndim:
                    n_read = n_read if idx is None else n_read[idx]
                data = np.where(np.arange(size)[None, :] < np.reshape(n_read, (-1, 1)), data, 0)
            self.shared_heap[doff[:, None] + np.arange(size)] = data

        return cp

    # -- atomics ------------------------------------------------------------------------------------

    def _build_atomic(self, index: int, ins: Instr, space: str) -> Op:
        mods = ins.mods
        is_red = ins.base == "red"
        t = type_of(mods)
        opname = next(
            (
                m
                for m in mods
                if m in ("add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor")
            ),
            None,
        )
        if (
            opname is None
            or t in ("f16", "bf16", "f16x2", "bf16x2")
            or any(m.startswith("v") and m[1:].isdigit() for m in mods)
        ):
            raise UnsupportedInstructionError(ins.opcode, None, opcode=ins.opcode)
        ops = ins.operands
        if is_red:
            dst = None
            addr_op, vals_ops = ops[0], ops[1:]
        else:
            dst = ops[0]
            addr_op, vals_ops = ops[1], ops[2:]
        es = TYPE_SIZES[t]
        shift = es.bit_length() - 1
        dt = NP_TYPES[t]
        if dt.kind == "u" and t.startswith("b"):
            dt = NP_TYPES["u" + t[1:]]
        addr_fn = self._addr_fn(addr_op)
        gets = [getter(self, x, t) for x in vals_ops]
        dstore = self.regs.get(dst.name) if isinstance(dst, Reg) else None
        kind = Kind.REDUCTION if is_red else Kind.ATOMIC

        def op(m: Mask) -> None:
            idx = m.idx()
            cnt = self.n if idx is None else len(idx)
            a = addr_fn(idx)
            if np.ndim(a) == 0:
                a = np.full(cnt, a, np.int64)
            vals = []
            for g in gets:
                v = np.asarray(g())
                v = np.broadcast_to(v, (self.n,)) if v.ndim == 0 else v
                vals.append((v if idx is None else v[idx]).astype(dt, copy=False))
            for sp, offs, pos, taddr in self._locate(index, space, a, idx, es, "atomic"):
                if sp not in ("global", "shared"):
                    raise UnsupportedInstructionError(
                        f"atomic on {sp} memory at {self.where(index)}", None, opcode=ins.opcode
                    )
                lanes = idx if pos is None else (pos if idx is None else idx[pos])
                self._record(index, sp, kind, es, lanes, taddr)
                view = self._view(sp, es).view(dt)
                sub = [v if pos is None else v[pos] for v in vals]
                old = atomic_rmw(view, offs >> shift, opname, sub, need_old=dstore is not None)
                if dstore is not None and old is not None:
                    conv = to_storage(
                        old, t if not t.startswith("b") else "u" + t[1:], dstore.dtype
                    )
                    if lanes is None:
                        dstore[...] = conv
                    else:
                        dstore[lanes] = conv

        return op

    # -- running ------------------------------------------------------------------------------------

    @property
    def cost_capped(self) -> bool:
        """The cost cap was reached and loops were sampled past it (LoopSampler.forced): the
        sample ends with this batch (another would run its loops in full)."""
        return self.sampler.forced_skips > 0

    def release(self) -> None:
        """Drop everything the batch holds, once its counts are read. Its ops close over the
        batch (a reference cycle), so without this its registers, shared and local heaps and the
        global memory (every page the CTAs reached) live on until a full garbage collection,
        after the emulation that made them is gone: HeCBench nw's launch check kept ~700 MB of
        an emulation it had finished with through the rest of the analysis."""
        vars(self).clear()

    def run(self) -> tuple[int, int]:
        """Run every CTA of the batch to completion. Returns (lane instructions, issued steps)."""
        prog = self.program
        blocks = prog.blocks
        nb = len(blocks)
        vexit = nb
        ipdom = np.array(prog.ipdom + [vexit], dtype=np.int64)
        is_barrier = np.array([b.term[0] == "barrier" for b in blocks] + [False])
        not_barrier = ~is_barrier
        block_ops = [[self.ops[i] for i in b.body] for b in blocks]
        block_len = [len(b.body) + (0 if b.term[0] in ("fall",) else 1) for b in blocks]
        nw = self.nwarps
        wpc = self.wpc
        threads = self.launch.threads

        depth = 8
        st_pc = np.full((depth, nw), vexit, np.int64)
        st_rpc = np.full((depth, nw), vexit, np.int64)
        st_mask = np.zeros((depth, nw), U32)
        sp = np.zeros(nw, np.int64)
        init = np.full(wpc, FULL32)
        if threads % 32:
            init[-1] = U32((1 << (threads % 32)) - 1)
        st_mask[0] = np.tile(init, self.ncta)
        st_pc[0] = 0
        # the stacks flat (views of the arrays above, made again when they grow): entry
        # (level s, warp w) at s * nw + w, one gather or scatter of a flat index where a 2-D
        # index pair costs several times as much on a few thousand warps (a level of -1 wraps
        # to the top row, as the 2-D index does)
        fpc, frpc, fmask = st_pc.reshape(-1), st_rpc.reshape(-1), st_mask.reshape(-1)
        cur_pc = st_pc[0].copy()
        cur_mask = st_mask[0].copy()
        live = np.ones(nw, bool)
        warp_count = np.zeros(nw, np.int64)
        # each warp's block costs (links by latency class, then issued), summed as it runs them
        sums = self.chain_sums = self.image.warp_chains(nw)
        lane_instr = 0
        steps = 0
        step_ops = 0  # the instructions the steps ran, each over the batch's lanes
        allw = np.arange(nw)
        n = self.n
        block_warps = self.block_warps
        block_lanes = self.block_lanes
        block_splits = self.block_splits
        seen = self.block_seen
        all_warps = self.block_all_warps
        sampler = self.sampler
        watching = bool(sampler.watches or sampler.dooms)
        # the blocks where the sampler has something to do (its watches and dooms are made
        # with it): after a block, the latches; before one, a block outside some loop of
        # theirs (entering and after_block do nothing elsewhere; their arguments, per-warp
        # gathers, are not made there)
        loop_states: list[Any] = [*sampler.watches.values(), *sampler.dooms.values()]
        latch_at = [i in sampler.watches or i in sampler.dooms for i in range(nb + 1)]
        enter_at = [any(i not in x.loop.blocks for x in loop_states) for i in range(nb + 1)]
        # the cost cap (self.cost_cap), looked at every 256 steps until it is reached
        capped: Callable[[int, int], None] | None = None
        cap, sink0 = self.cost_cap, self.sink
        if cap is not None and sampler.watches and sink0 is not None:
            mark = sink0.count

            def reach(ops: int, steps: int) -> None:
                nonlocal capped
                if cap(ops, sink0.count - mark, steps):
                    # only the loops whose results steer nothing (gpuadvise.ptx.steering)
                    sampler.force(self.image.steering_latches())
                    capped = None

            capped = reach

        # small per-warp arrays: counting is cheaper than numpy's any/all/min/max reductions
        nz = count_true
        least, most = np.minimum.reduce, np.maximum.reduce
        add = np.add.reduce  # (ndarray.sum's own reduction, without its Python wrapper)

        def refresh(ws: np.ndarray) -> None:
            s = sp[ws]
            alive = s >= 0
            if nz(alive) == alive.size:
                f = s * nw + ws
                cur_pc[ws] = fpc[f]
                cur_mask[ws] = fmask[f]
                live[ws] = True
                return
            f = np.maximum(s, 0) * nw + ws
            cur_pc[ws] = np.where(alive, fpc[f], vexit)
            cur_mask[ws] = np.where(alive, fmask[f], 0)
            live[ws] = alive

        def settle(ws: np.ndarray) -> None:
            fresh = False  # ws refreshed since its last pop
            while ws.size:
                s = sp[ws]
                ok = s >= 0
                f = np.maximum(s, 0) * nw + ws
                pop = ok & ((fpc[f] == frpc[f]) | (fmask[f] == 0))
                if not nz(pop):
                    break
                sp[ws[pop]] -= 1
                ws_next = ws[pop]
                refresh(ws_next)
                ws = ws_next
                fresh = True
            if not fresh:
                refresh(ws)

        # blocks more than one edge leads to: where two sides of a split can meet before their
        # reconvergence point (a short-circuit condition's then-block); not a lone ``ret``, which
        # ptxas copies into each side (an EXIT each, as the lanes that leave there issue it alone)
        npred = np.zeros(nb + 1, np.int64)
        for b in blocks:
            for t in set(b.succs):
                npred[t] += 1
        is_join = [
            bool(npred[i] >= 2)
            and not (i < nb and blocks[i].term[0] == "exit" and not blocks[i].body)
            for i in range(nb + 1)
        ]

        def join(ws: np.ndarray) -> None:
            """Warps ``ws`` whose top entry has come to the block its next entry waits at, bound
            for the same reconvergence point, run the two as one: the sides of ``if (a || b)``
            meet at the then-block, where ptxas puts its convergence barrier (BSSY/BSYNC) or
            which it reaches by one predicate (PLOP3), so the block's instructions issue once
            for both sides (HeCBench bitonic_sort's swap: two stores a warp, not four)."""
            while ws.size:
                s = sp[ws]
                ok = s >= 1
                if not nz(ok):
                    return
                ws = ws[ok]
                s = s[ok]
                f = s * nw + ws
                fb = f - nw  # the entry below
                meet = (fpc[f] == fpc[fb]) & (frpc[f] == frpc[fb])
                if not nz(meet):
                    return
                ws = ws[meet]
                s = s[meet]
                f, fb = f[meet], fb[meet]
                fmask[fb] |= fmask[f]
                sp[ws] = s - 1
                refresh(ws)

        def set_pc(ws: np.ndarray, target: int) -> None:
            if ws.size == 0:
                return
            f = sp[ws] * nw + ws
            fpc[f] = target
            cur_pc[ws] = target
            if target == vexit:
                settle(ws)
                return
            pop = frpc[f] == target
            if nz(pop):
                settle(ws[pop])
                if is_join[target]:
                    join(ws[~pop])
            elif is_join[target]:
                join(ws)

        def ensure_depth(need: int) -> None:
            nonlocal st_pc, st_rpc, st_mask, fpc, frpc, fmask, depth
            if need < depth:
                return
            extra = max(need + 1 - depth, depth)
            st_pc = np.concatenate([st_pc, np.full((extra, nw), vexit, np.int64)])
            st_rpc = np.concatenate([st_rpc, np.full((extra, nw), vexit, np.int64)])
            st_mask = np.concatenate([st_mask, np.zeros((extra, nw), U32)])
            fpc, frpc, fmask = st_pc.reshape(-1), st_rpc.reshape(-1), st_mask.reshape(-1)
            depth += extra

        def diverge(ws: np.ndarray, blk: int, sides: list[tuple[int, np.ndarray]]) -> None:
            """Split warps ``ws`` at block ``blk`` into ``sides`` (target, per-warp masks)."""
            j = int(ipdom[blk])
            s = sp[ws]
            f = s * nw + ws
            same = frpc[f] == j
            base = np.where(same, s, s + 1)
            other = ~same
            if nz(other):
                fpc[f[other]] = j
            entries = [(tgt, mk) for tgt, mk in sides if tgt != j]
            ensure_depth(int(base.max()) + len(entries))  # flat indices stay: rows are added
            fk = base * nw + ws
            for tgt, mk in entries:
                fpc[fk] = tgt
                frpc[fk] = j
                fmask[fk] = mk
                fk = fk + nw
            sp[ws] = base + (len(entries) - 1)
            refresh(ws)
            # a side whose lanes are empty cannot happen here; but a warp may end up with no entry
            # above the reconvergence one when every side went to j: settle those
            settle(ws[sp[ws] < base])
            if any(is_join[tgt] for tgt, _ in entries):
                join(ws[sp[ws] >= base])

        # Lockstep: while every warp is at one block, at the bottom of its stack with all its
        # lanes (one CTA's warps in a loop, say), a step needs none of the per-warp arrays: they
        # are left as they were on entry (st_pc[0] and cur_pc behind by the blocks run since,
        # warp_count by lock_extra) and brought up to date when a step leaves lockstep.
        lock = -1  # the block every warp is at, in lockstep; -1: not in lockstep
        lock_extra = 0  # instructions every warp executed in lockstep, not in warp_count yet
        full_mask = Mask(None, n)
        # the masks of partial steps of a few warps, by their warps and lanes (read only: an op
        # derives new arrays from a mask, never writes its own)
        kept_masks: dict[bytes, tuple[Mask, int]] = {}
        while True:
            if lock >= 0:
                p = lock
                blk = blocks[p]
                steps += 1
                self.step_counter = steps
                if enter_at[p]:
                    sampler.entering(p, allw)
                for op in block_ops[p]:
                    op(full_mask)
                blen = block_len[p]
                lock_extra += blen
                step_ops += blen
                if sampler.weighted:  # a sampled loop's last iteration stands for the skipped
                    wx, lx = sampler.weigh(allw, None)
                    lane_instr += lx * blen
                    block_warps[p] += wx
                    block_lanes[p] += lx
                    # each warp's critical path by as many iterations as it stands for
                    sums.weighted(None, sampler.wmul, p)
                else:
                    lane_instr += n * blen
                    sums.lockstep(p)
                    block_warps[p] += nw
                    block_lanes[p] += n
                all_warps[p] = True
                if latch_at[p]:
                    sampler.after_block(p, allw, None, warp_count + lock_extra)
                if steps & 255 == 0:
                    if int(warp_count.max()) + lock_extra > self.max_instructions:
                        self._budget_error(p)
                    if capped is not None:
                        capped(step_ops, steps)
                term = blk.term
                kind = term[0]
                target = -1
                if kind in ("fall", "bra"):
                    target = int(term[1])
                elif kind == "cbra":
                    _, guard, neg, taken, fall = term
                    taken_i, fall_i = int(taken), int(fall)
                    pv = self.regs.get(str(guard))
                    if taken_i == fall_i:
                        target = taken_i
                    elif pv is not None and pv.dtype == np.bool_:
                        if pv.all():
                            target = fall_i if neg else taken_i
                        elif not pv.any():
                            target = taken_i if neg else fall_i
                if target >= 0 and target != vexit and not is_barrier[target]:
                    lock = target
                    continue
                # leave lockstep; the terminator is handled below, as in any step
                lock = -1
                st_pc[0] = p
                cur_pc[:] = p
                warp_count += lock_extra
                lock_extra = 0
                sums.unlock()
                ws = allw
                masks = cur_mask[ws]
                mask = full_mask
            else:
                runnable = live & not_barrier[cur_pc]
                if not nz(runnable):
                    waiting = np.flatnonzero(live & is_barrier[cur_pc])
                    if waiting.size == 0:
                        break
                    for blk_id in np.unique(cur_pc[waiting]):
                        ws = waiting[cur_pc[waiting] == blk_id]
                        blk = blocks[int(blk_id)]
                        ins_index = blk.start
                        if watching:
                            sampler.entering(int(blk_id), ws, sp[ws])
                        mask = self._lane_mask(ws, cur_mask[ws], n)
                        self.ops[ins_index](mask)
                        self.warp_epoch[ws] += 1
                        self._epoch_gen += 1
                        wx, active_b = (
                            sampler.weigh(ws, cur_mask[ws])
                            if sampler.weighted
                            else (int(ws.size), int(add(np.bitwise_count(cur_mask[ws]))))
                        )
                        lane_instr += active_b
                        block_warps[int(blk_id)] += wx
                        block_lanes[int(blk_id)] += active_b
                        if seen is not None:
                            seen[int(blk_id)][ws] = True
                        sums.some(ws, int(blk_id))
                        set_pc(ws, int(blk.term[1]))
                    continue
                pcs = cur_pc[runnable]
                p = int(least(pcs))
                if p == int(most(pcs)):
                    sel = runnable
                else:
                    sel = runnable & (cur_pc == p)
                ws = allw[sel] if nz(sel) < nw else allw
                masks = cur_mask[ws]
                if ws.size == nw and not nz(masks != FULL32):
                    if self.lockstep and not nz(sp) and not nz(st_rpc[0] != vexit):
                        lock = p  # every warp here with all its lanes: run it in lockstep
                        continue
                    mask = Mask(None, n)
                    active = n
                elif ws.size <= _MASKS_KEPT_WARPS:
                    # a few warps' lanes: the mask (and what its users derive from it, kept on
                    # it: the lanes' index, the records' layout) of the last steps with the same
                    # warps and lanes, made once (a warp or two running a loop a step at a time
                    # has the same lanes for every iteration)
                    mkey = ws.tobytes() + masks.tobytes()
                    got_mask = kept_masks.get(mkey)
                    if got_mask is None:
                        if len(kept_masks) >= _MASKS_KEPT:
                            kept_masks.clear()
                        got_mask = kept_masks[mkey] = (
                            self._lane_mask(ws, masks, n),
                            int(add(np.bitwise_count(masks))),
                        )
                    mask, active = got_mask
                else:
                    mask = self._lane_mask(ws, masks, n)
                    active = int(add(np.bitwise_count(masks)))
                blk = blocks[p]
                steps += 1
                self.step_counter = steps
                if enter_at[p]:
                    sampler.entering(p, ws, sp[ws])
                for op in block_ops[p]:
                    op(mask)
                wx = ws.size
                if sampler.weighted:  # a sampled loop's last iteration stands for the skipped
                    wx, active = sampler.weigh(ws, masks)
                lane_instr += active * block_len[p]
                one = ws.size == 1  # (one warp: its entries by a scalar index, ~10x cheaper)
                if one:
                    warp_count[ws[0]] += block_len[p]
                else:
                    warp_count[ws] += block_len[p]
                step_ops += block_len[p]
                if sampler.weighted:
                    sums.weighted(ws, sampler.wmul[ws], p)
                elif ws.size == nw:
                    sums.all(p)
                else:
                    sums.some(ws, p)
                block_warps[p] += wx
                block_lanes[p] += active
                if ws.size == nw:
                    all_warps[p] = True
                elif seen is not None:
                    if one:
                        seen[p, ws[0]] = True
                    else:  # (the block's row, then its warps: a (block, warps) index pair
                        # costs ~4x as much)
                        seen[p][ws] = True
                if latch_at[p]:
                    sampler.after_block(p, ws, masks, warp_count[ws], sp[ws])
                if steps & 255 == 0:
                    if int(warp_count.max()) > self.max_instructions:
                        self._budget_error(p)
                    if capped is not None:
                        capped(step_ops, steps)
            term = blk.term
            kind = term[0]
            if kind in ("fall", "bra"):
                set_pc(ws, int(term[1]))
            elif kind == "cbra":
                _, guard, neg, taken, fall = term
                pv = self.regs.get(str(guard))
                if pv is None:
                    raise EmulationError(f"branch on unknown predicate {guard}", None)
                if neg:
                    lanes_b = ~pv if mask.b is None else (~pv & mask.b)
                else:
                    lanes_b = pv if mask.b is None else (pv & mask.b)
                tb = np.packbits(lanes_b, bitorder="little").view(U32)[ws]
                nb_ = masks & ~tb
                tb = tb & masks
                taken_i = int(taken)
                fall_i = int(fall)
                if taken_i == fall_i:
                    set_pc(ws, taken_i)
                    continue
                all_t = nb_ == 0
                all_f = tb == 0
                if nz(all_t) == all_t.size:
                    set_pc(ws, taken_i)
                    continue
                if nz(all_f) == all_f.size:
                    set_pc(ws, fall_i)
                    continue
                set_pc(ws[all_t], taken_i)
                set_pc(ws[all_f], fall_i)
                div = ~(all_t | all_f)
                if nz(div):
                    wd = ws[div]
                    # a sampled loop's weighted iteration: each split stands for as many as its
                    # warp's executions (as block_warps counts them), not one
                    wdm = sampler.wmul[wd] if sampler.weighted else None
                    block_splits[p] += int(wd.size) if wdm is None else int(wdm.sum())
                    self.block_front_splits[p] += front_splits(masks[div], tb[div], wdm)
                    self._note_split(p, wd)
                    diverge(wd, p, [(taken_i, tb[div]), (fall_i, nb_[div])])
            elif kind == "exit":
                gone = ~masks
                st_mask[:, ws] &= gone[None, :]
                settle(ws)
            elif kind == "brx":
                _, reg, targets = term
                self._brx(ws, masks, mask, str(reg), list(targets), p, set_pc, diverge)
            else:
                raise EmulationError(f"internal error: block terminator {kind}", None)
        self.step_ops = step_ops
        return lane_instr, steps

    def block_cta_warps(self) -> np.ndarray | None:
        """Per block, the warps that ran it at least once, summed over the batch's CTAs (None:
        not counted, the batch too large)."""
        if self.block_seen is None:
            return None
        got = self.block_seen.sum(axis=1).astype(np.int64)
        got[self.block_all_warps] = self.nwarps
        return got

    def _note_split(self, blk: int, ws: np.ndarray) -> None:
        """Remember the CTAs in which warps ``ws`` split at block ``blk`` (SIMT counts)."""
        seen = self._split_seen.get(blk)
        if seen is None:
            seen = self._split_seen[blk] = np.zeros(self.ncta, bool)
        seen[ws // self.wpc] = True

    @property
    def split_ctas(self) -> dict[int, set[int]]:
        """Block -> the linear ids of the CTAs it split in."""
        return {
            blk: set(self.ctas[np.flatnonzero(seen)].tolist())
            for blk, seen in self._split_seen.items()
        }

    def _lane_mask(self, ws: np.ndarray, masks: np.ndarray, n: int) -> Mask:
        words = np.zeros(self.nwarps, U32)
        words[ws] = masks
        return Mask(np.unpackbits(words.view(np.uint8), bitorder="little").view(bool), n)

    def _brx(
        self,
        ws: np.ndarray,
        masks: np.ndarray,
        mask: Mask,
        reg: str,
        targets: list[int],
        blk: int,
        set_pc: Callable[[np.ndarray, int], None],
        diverge: Callable[[np.ndarray, int, list[tuple[int, np.ndarray]]], None],
    ) -> None:
        sel_val = self.regs[reg].astype(np.int64)
        lanes_on = np.ones(self.n, bool) if mask.b is None else mask.b
        for w in ws:
            vals = sel_val[w * 32 : w * 32 + 32]
            on = lanes_on[w * 32 : w * 32 + 32]
            groups: dict[int, int] = {}
            for lane in range(32):
                if on[lane]:
                    tgt = targets[int(vals[lane]) % len(targets)]
                    groups[tgt] = groups.get(tgt, 0) | (1 << lane)
            one = np.array([w])
            if len(groups) == 1:
                set_pc(one, next(iter(groups)))
            else:
                sampler = self.sampler  # a weighted iteration's split stands for its executions
                self.block_splits[blk] += int(sampler.wmul[w]) if sampler.weighted else 1
                self._note_split(blk, one)
                diverge(one, blk, [(tgt, np.array([m], U32)) for tgt, m in groups.items()])

    def _trap_error(self, index: int, base: str) -> EmulationError:
        """What a ``trap``/``brkpt`` means: cooperative groups trap on a grid-wide sync when the
        launch is not cooperative (the grid's sync workspace is missing), which the emulator
        never is; any other trap is the kernel's own abort."""
        where = self.where(index)
        ins = self.program.instrs[index]
        files = [
            self.image.module.files.get(loc.file, "")
            for loc in (ins.inner_loc, ins.loc)
            if loc is not None
        ]
        if any("cooperative_groups" in f for f in files):
            return EmulationError(
                f"the kernel executed {base} at {where}: its grid-wide sync (grid.sync() of "
                "cooperative groups) needs a cooperative launch (cudaLaunchCooperativeKernel), "
                "which the CPU emulator does not model",
                "analyze it with --no-trace (the static analysis needs no trace), or trace a "
                "version of the kernel without the grid-wide sync",
            )
        return EmulationError(
            f"the kernel executed {base} at {where} (the kernel aborted itself, e.g. a failed "
            "check of its inputs)",
            "check the data and args the kernel validates there, or analyze with --no-trace",
        )

    def _budget_error(self, p: int) -> None:
        blk = self.program.blocks[p]
        where = self.where(blk.start) if blk.end > blk.start else "the kernel's end"
        loops = self.image.program_loops()
        why, data = budget_reason(self.program, loops, p, self._loop_where, self.sampler)
        lp = innermost(loops, p)
        if self.sampler.doomed is not None:  # stopped ahead: its loop's iterations were counted
            head = (
                f"a warp would execute more than {self.max_instructions} instructions (now at "
                f"{where}, after {self.sampler.doomed.count} of them, {why})"
            )
        else:
            head = f"a warp executed more than {self.max_instructions} instructions (now at {where}, {why})"
        if lp is not None and lp.endless:  # no budget, fill or sampling gets a warp out of it
            raise InstructionBudgetError(
                head,
                "analyze with --no-trace (the static analysis needs no trace), or trace a "
                "version of the kernel whose loop ends",
            )
        raise InstructionBudgetError(
            head,
            f"raise the budget with --max-instructions N (instructions per warp; loops that "
            f"would take a warp past N/{SAMPLE_DIVISOR} are sampled where they can be), "
            + (
                "give the buffer the loop reads real data or a fill (--buffer NAME=TYPE[N]:FILL), "
                if data
                else ""
            )
            + "or analyze with --no-trace (the static analysis needs no trace)",
        )


# ---------------------------------------------------------------------------------------------
# Atomics with repeated addresses


def _seg_scan(x: np.ndarray, pos: np.ndarray, fn: Any, maxlen: int) -> np.ndarray:
    """Inclusive scan of ``fn`` within segments of a sorted array (``pos``: index in segment)."""
    x = x.copy()
    shift = 1
    while shift < maxlen:
        can = pos[shift:] >= shift
        y = x.copy()
        y[shift:] = np.where(can, fn(x[shift:], x[:-shift]), x[shift:])
        x = y
        shift *= 2
    return x


def atomic_rmw(
    view: np.ndarray, eidx: np.ndarray, op: str, vals: list[np.ndarray], need_old: bool
) -> np.ndarray | None:
    """Apply atomic ``op`` for every lane, in lane order, and return each lane's old value."""
    dt = view.dtype
    n = eidx.size
    if n == 0:
        return np.zeros(0, dt)
    v = vals[0] if vals else np.zeros(n, dt)
    order = np.argsort(eidx, kind="stable")
    se = eidx[order]
    start = np.ones(n, bool)
    start[1:] = se[1:] != se[:-1]
    if bool(start.all()):
        old = view[eidx].copy()
        view[eidx] = _apply(op, old, v, vals, dt)
        return old
    first = np.maximum.accumulate(np.where(start, np.arange(n), 0))
    pos = np.arange(n) - first
    maxlen = int(pos.max()) + 1
    gstarts = np.flatnonzero(start)
    gaddr = se[gstarts]
    gid = np.cumsum(start) - 1
    sv = v[order]
    mem0 = view[gaddr].copy()
    old_sorted: np.ndarray
    if op in ("add", "min", "max", "and", "or", "xor"):
        fn = {
            "add": np.add,
            "min": np.minimum,
            "max": np.maximum,
            "and": np.bitwise_and,
            "or": np.bitwise_or,
            "xor": np.bitwise_xor,
        }[op]
        if op in ("min", "max") and dt.kind == "f":
            fn = np.fmin if op == "min" else np.fmax
        incl = _seg_scan(sv, pos, fn, maxlen)
        excl = np.empty_like(incl)
        excl[1:] = incl[:-1]
        base = mem0[gid]
        old_sorted = np.where(pos == 0, base, fn(base, excl)).astype(dt)
        last = np.append(gstarts[1:], n) - 1
        view[gaddr] = fn(mem0, incl[last]).astype(dt)
    elif op == "exch":
        prev = np.empty_like(sv)
        prev[1:] = sv[:-1]
        old_sorted = np.where(pos == 0, mem0[gid], prev).astype(dt)
        last = np.append(gstarts[1:], n) - 1
        view[gaddr] = sv[last]
    elif op == "cas":
        cmp = vals[0][order]
        new = vals[1][order]
        cur = mem0.copy()
        old_sorted = np.zeros(n, dt)
        pending = np.ones(n, bool)
        big = np.iinfo(np.int64).max
        while pending.any():
            cand = pending & (cmp == cur[gid])
            ci = np.flatnonzero(cand)
            winner_pos = np.full(len(gstarts), big, np.int64)
            if ci.size:
                g_of = gid[ci]
                ug, first_i = np.unique(g_of, return_index=True)
                fi = ci[first_i]
                winner_pos[ug] = pos[fi]
            else:
                fi = np.zeros(0, np.int64)
            before = pending & (pos < winner_pos[gid])
            old_sorted[before] = cur[gid[before]]
            pending &= ~before
            if fi.size:
                old_sorted[fi] = cur[gid[fi]]
                cur[gid[fi]] = new[fi]
                pending[fi] = False
        view[gaddr] = cur
    else:  # inc / dec: one lane per address per round
        old_sorted = np.zeros(n, dt)
        svals = [x[order] for x in vals]
        for r in range(maxlen):
            sel = np.flatnonzero(pos == r)
            addr = se[sel]
            o = view[addr].copy()
            old_sorted[sel] = o
            view[addr] = _apply(op, o, svals[0][sel], [x[sel] for x in svals], dt)
    if not need_old:
        return None
    old = np.empty(n, dt)
    old[order] = old_sorted
    return old


def _apply(
    op: str, old: np.ndarray, v: np.ndarray, vals: list[np.ndarray], dt: np.dtype[Any]
) -> Any:
    if op == "add":
        return (old + v).astype(dt)
    if op == "min":
        return (np.fmin(old, v) if dt.kind == "f" else np.minimum(old, v)).astype(dt)
    if op == "max":
        return (np.fmax(old, v) if dt.kind == "f" else np.maximum(old, v)).astype(dt)
    if op == "and":
        return old & v
    if op == "or":
        return old | v
    if op == "xor":
        return old ^ v
    if op == "exch":
        return v
    if op == "cas":
        return np.where(old == vals[0], vals[1], old).astype(dt)
    if op == "inc":
        return np.where(old >= v, dt.type(0), old + dt.type(1)).astype(dt)
    if op == "dec":
        return np.where((old == 0) | (old > v), v, old - dt.type(1)).astype(dt)
    raise EmulationError(f"internal error: atomic {op}", None)
