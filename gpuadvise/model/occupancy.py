"""Theoretical occupancy: an exact port of NVIDIA's ``cuda_occupancy.h`` (CUDA 13.0).

``max_active_blocks`` follows ``cudaOccMaxActiveBlocksPerMultiprocessor`` line by line (the limits of
warps, registers, shared memory, blocks, barriers and virtual resources, partitioned global caching on
cc 5.2/5.3/6.x, the GP10x register re-check on cc 6.0), and ``available_dynamic_smem`` follows
``cudaOccAvailableDynamicSMemPerBlock``. The test suite compiles the header itself with g++ and compares
both on tens of thousands of random configurations per compute capability.

Like the header and the CUDA runtime, ``available_dynamic_smem`` ignores the 1 KB the driver reserves per
block from cc 8.0 on: launching with exactly the returned size gives one block per SM fewer than asked.
gpuadvise matches the runtime here and says so where it prints the number.

Pure Python on ints: a single evaluation costs a few microseconds, so sweeps need no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from gpuadvise.devices import DeviceSpec

INT_MAX = 2**31 - 1


class OccupancyInputError(ValueError):
    """The header's CUDA_OCC_ERROR_INVALID_INPUT / UNKNOWN_DEVICE."""


class PartitionedGC(IntEnum):
    OFF = 0
    ON = 1
    ON_STRICT = 2


# The limiter names, in the header's bit order (OCC_LIMIT_WARPS = 0x01 ...).
LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers", "virtual_resources")


@dataclass(frozen=True)
class KernelResources:
    """What a kernel asks of an SM (``cudaOccFuncAttributes``).

    ``optin``: the kernel may use more than 48 KB of shared memory per block (set
    ``cudaFuncAttributeMaxDynamicSharedMemorySize``); ``max_dynamic_smem_bytes`` is that attribute,
    ``None`` meaning "as much as the opt-in limit allows". ``barriers``: named block barriers
    (``numBlockBarriers``; the runtime passes 1).
    """

    threads_per_block: int
    regs_per_thread: int = 0
    static_smem_bytes: int = 0
    dynamic_smem_bytes: int = 0
    optin: bool = True
    max_dynamic_smem_bytes: int | None = None
    barriers: int = 1
    virtual_resources: int = 0
    partitioned_gc: PartitionedGC = PartitionedGC.OFF
    max_threads_per_block: int = INT_MAX


@dataclass(frozen=True)
class OccupancyResult:
    active_blocks_per_sm: int
    limits: dict[str, int]  # blocks per SM allowed by each resource (INT_MAX: no limit)
    limiters: tuple[str, ...]
    warps_per_block: int
    allocated_regs_per_block: int
    allocated_smem_per_block: int
    smem_per_sm_bytes: int  # the shared memory the SM is configured with for this launch
    max_warps_per_sm: int
    partitioned_gc: PartitionedGC = PartitionedGC.OFF
    notes: tuple[str, ...] = field(default=())

    @property
    def active_warps_per_sm(self) -> int:
        return self.active_blocks_per_sm * self.warps_per_block

    @property
    def occupancy(self) -> float:
        return self.active_warps_per_sm / self.max_warps_per_sm


# ---------------------------------------------------------------------------------------------
# Architectural properties (the header's switch statements)


def _div_up(x: int, y: int) -> int:
    # C integer division of non-negative ints, as __occDivideRoundUp
    return (x + (y - 1)) // y


def _round_up(x: int, y: int) -> int:
    return y * _div_up(x, y)


def _smem_granularity(d: DeviceSpec) -> int:
    if d.cc_major in (3, 5, 6, 7):
        return 256
    if d.cc_major in (8, 9, 10, 11, 12):
        return 128
    raise OccupancyInputError("unknown device")


def _max_regs_per_thread(d: DeviceSpec) -> int:
    return 255 if d.cc_major in (3, 5, 6) else 256


def _sub_partitions(d: DeviceSpec) -> int:
    if d.cc_major == 6:
        return 4 if d.cc_minor else 2
    return 4


def _max_blocks(d: DeviceSpec) -> int:
    return d.blocks_per_sm


_CARVEOUTS_KB = {
    (7, 5): (32, 64),
    (7, None): (0, 8, 16, 32, 64, 96),
    (8, 0): (0, 8, 16, 32, 64, 100, 132, 164),
    (8, 7): (0, 8, 16, 32, 64, 100, 132, 164),
    (8, None): (0, 8, 16, 32, 64, 100),
    (9, None): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    (10, None): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    (11, None): (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    (12, None): (0, 8, 16, 32, 64, 100),
}


def carveout_sizes_kb(d: DeviceSpec) -> tuple[int, ...]:
    """Shared-memory sizes per SM (KB) a carveout preference rounds up to (cc >= 7)."""
    if d.cc_major == 10 and d.cc_minor not in (0, 1, 3):
        raise OccupancyInputError("unknown device")
    if d.cc_major == 11 and d.cc_minor not in (0, 1, 3):
        raise OccupancyInputError("unknown device")
    if d.cc_major == 12 and d.cc_minor not in (0, 1):
        raise OccupancyInputError("unknown device")
    sizes = _CARVEOUTS_KB.get((d.cc_major, d.cc_minor)) or _CARVEOUTS_KB.get((d.cc_major, None))
    if sizes is None:
        raise OccupancyInputError("unknown device")
    return sizes


def _align_up_smem_volta_plus(size: int, d: DeviceSpec) -> int:
    sizes = carveout_sizes_kb(d)
    if size == 0 and sizes[0] == 0:
        return 0
    for kb in sizes:
        if size <= kb * 1024:
            return kb * 1024
    raise OccupancyInputError("shared memory beyond the largest carveout")


def _smem_per_sm_preference(d: DeviceSpec, carveout: int) -> int:
    """cudaOccSMemPerMultiprocessor with cacheConfig = PREFER_NONE."""
    if d.cc_major >= 7:
        if carveout < -1 or carveout > 100:
            raise OccupancyInputError("carveout must be -1..100")
        if carveout == -1:
            pref = d.smem_per_sm
        else:
            pref = (carveout * d.smem_per_sm) // 100
        return _align_up_smem_volta_plus(pref, d)
    if d.cc_major in (5, 6):
        return d.smem_per_sm
    raise OccupancyInputError("unknown device")


def _smem_per_block_limit(d: DeviceSpec, optin: bool, smem_per_cta: int) -> int:
    """cudaOccSMemPerBlock."""
    if d.cc_major <= 6:
        limit = d.smem_per_block
    elif optin and smem_per_cta > d.smem_per_block:
        limit = d.smem_per_block_optin
    else:
        limit = d.smem_per_block
    if d.cc_major >= 8:
        limit += d.reserved_smem_per_block
    return limit


def _gc_supported(d: DeviceSpec) -> bool:
    if d.cc_major == 6 and d.cc_minor == 0:
        return False
    return (d.cc_major == 5 and d.cc_minor in (2, 3)) or d.cc_major == 6


def _virtual_resources_per_sm(d: DeviceSpec) -> int:
    return 128 if d.cc_major in (10, 11, 12) else 0


def _max_dynamic(k: KernelResources, d: DeviceSpec) -> int:
    if k.max_dynamic_smem_bytes is not None:
        return k.max_dynamic_smem_bytes
    # cudaFuncAttributeMaxDynamicSharedMemorySize set as high as the kernel's opt-in allows
    cap = d.smem_per_block_optin if k.optin else d.smem_per_block
    return max(cap - k.static_smem_bytes, 0)


# ---------------------------------------------------------------------------------------------
# The limits


def _warps_limit(d: DeviceSpec, block: int, gc: PartitionedGC) -> int:
    if block > d.max_threads_per_block:
        return 0
    max_warps = d.threads_per_sm // d.warp_size
    warps = _div_up(block, d.warp_size)
    if gc != PartitionedGC.OFF:
        return ((max_warps // 2) // warps) * 2
    return max_warps // warps


def _regs_limit(
    d: DeviceSpec, k: KernelResources, block: int, gc: PartitionedGC
) -> tuple[int, int, PartitionedGC]:
    """Returns (limit, allocated registers per block, the gc config after the check)."""
    gran = 256
    sub = _sub_partitions(d)
    warps = _div_up(block, d.warp_size)
    regs_per_warp = k.regs_per_thread * d.warp_size
    alloc_per_warp = _round_up(regs_per_warp, gran)
    alloc_per_cta = alloc_per_warp * warps
    assumed_per_cta = alloc_per_warp * _round_up(warps, sub)
    if (
        d.regs_per_block < assumed_per_cta
        or d.regs_per_block < alloc_per_cta
        or k.regs_per_thread > _max_regs_per_thread(d)
    ):
        return 0, alloc_per_cta, gc
    if alloc_per_warp <= 0:
        return INT_MAX, alloc_per_cta, gc
    warps_per_sub = (d.regs_per_sm // sub) // alloc_per_warp
    limit = 0
    if gc != PartitionedGC.OFF:
        limit = ((warps_per_sub * (sub // 2)) // warps) * 2
    if limit == 0 and gc != PartitionedGC.ON_STRICT:
        gc = PartitionedGC.OFF
        limit = (warps_per_sub * sub) // warps
    return limit, alloc_per_cta, gc


def _smem_limit(d: DeviceSpec, k: KernelResources, carveout: int) -> tuple[int, int, int]:
    """Returns (limit, allocated shared memory per block, shared memory per SM)."""
    gran = _smem_granularity(d)
    preference = _smem_per_sm_preference(d, carveout)
    static = k.static_smem_bytes + d.reserved_smem_per_block
    total = static + k.dynamic_smem_bytes
    alloc = _round_up(total, gran)
    max_dynamic = _max_dynamic(k, d)
    max_usage = static + max_dynamic
    exceeded = k.optin and k.dynamic_smem_bytes > max_dynamic
    if alloc > _smem_per_block_limit(d, k.optin, max_usage):
        exceeded = True
    if exceeded:
        return 0, alloc, preference
    if preference >= alloc:
        per_sm = preference
    elif d.cc_major >= 7:
        per_sm = _align_up_smem_volta_plus(alloc, d)
    else:
        per_sm = d.smem_per_sm
    limit = per_sm // alloc if alloc > 0 else INT_MAX
    return limit, alloc, per_sm


def _barrier_limit(d: DeviceSpec, blocks_limit: int, barriers: int) -> int:
    single = (
        (d.cc_major == 8 and d.cc_minor != 0)
        or (d.cc_major == 10 and d.cc_minor == 1)
        or (d.cc_major == 11 and d.cc_minor == 0)
        or d.cc_major == 12
    )
    available = blocks_limit if single else blocks_limit * 2
    return available // barriers if barriers else INT_MAX


def max_active_blocks(d: DeviceSpec, k: KernelResources, carveout: int = -1) -> OccupancyResult:
    """Blocks per SM, every limit and the limiters: ``cudaOccMaxActiveBlocksPerMultiprocessor``.

    ``carveout``: the shared-memory carveout preference in percent, -1 for the default.
    Raises :class:`OccupancyInputError` where the header returns an error.
    """
    block = k.threads_per_block
    if block <= 0 or k.regs_per_thread < 0 or k.max_threads_per_block <= 0:
        raise OccupancyInputError("invalid input")
    gc = k.partitioned_gc if _gc_supported(d) else PartitionedGC.OFF

    lim_regs, alloc_regs, gc = _regs_limit(d, k, block, gc)
    if d.cc_major == 6 and d.cc_minor == 0 and lim_regs:
        gp10x = _replace_minor(d, 1)
        lim_gp10x, alloc_regs, _ = _regs_limit(gp10x, k, block, gc)
        if lim_gp10x == 0:
            lim_regs = 0
    lim_warps = _warps_limit(d, block, gc)
    lim_blocks = _max_blocks(d)
    lim_smem, alloc_smem, smem_per_sm = _smem_limit(d, k, carveout)
    vr = _virtual_resources_per_sm(d)
    lim_virtual = INT_MAX if vr <= 0 or k.virtual_resources <= 0 else vr // k.virtual_resources

    limit = min(lim_regs, lim_smem, lim_warps, lim_blocks, lim_virtual)
    limiters = [
        name
        for name, value in (
            ("warps", lim_warps),
            ("registers", lim_regs),
            ("shared_memory", lim_smem),
            ("blocks", lim_blocks),
            ("virtual_resources", lim_virtual),
        )
        if value == limit
    ]
    lim_bars = INT_MAX
    if d.cc_major >= 9 and k.barriers > 0:
        lim_bars = _barrier_limit(d, lim_blocks, k.barriers)
        limit = min(limit, lim_bars)
        if limit == lim_bars:
            limiters.append("barriers")

    return OccupancyResult(
        active_blocks_per_sm=limit,
        limits={
            "warps": lim_warps,
            "registers": lim_regs,
            "shared_memory": lim_smem,
            "blocks": lim_blocks,
            "barriers": lim_bars,
            "virtual_resources": lim_virtual,
        },
        limiters=tuple(sorted(limiters, key=LIMITERS.index)),
        warps_per_block=_div_up(block, d.warp_size),
        allocated_regs_per_block=alloc_regs,
        allocated_smem_per_block=alloc_smem,
        smem_per_sm_bytes=smem_per_sm,
        max_warps_per_sm=d.threads_per_sm // d.warp_size,
        partitioned_gc=gc,
    )


def _replace_minor(d: DeviceSpec, minor: int) -> DeviceSpec:
    from dataclasses import replace

    return replace(d, cc_minor=minor)


def available_dynamic_smem(
    d: DeviceSpec, k: KernelResources, num_blocks: int, carveout: int = -1
) -> int:
    """``cudaOccAvailableDynamicSMemPerBlock``: dynamic shared memory per block that still lets
    ``num_blocks`` blocks run on an SM (ignoring the reserved 1 KB, as the runtime does)."""
    if num_blocks <= 0:
        raise OccupancyInputError("num_blocks must be positive")
    probe = KernelResources(**{**k.__dict__, "dynamic_smem_bytes": 0})
    if max_active_blocks(d, probe, carveout).active_blocks_per_sm < num_blocks:
        raise OccupancyInputError("that many blocks cannot run on one SM")
    gran = _smem_granularity(d)
    limit_per_block = _smem_per_block_limit(d, k.optin, d.smem_per_sm)
    preference = _smem_per_sm_preference(d, carveout)
    if num_blocks == 1:
        per_sm = limit_per_block
    else:
        if not preference:
            preference = _align_up_smem_volta_plus(1, d)
        per_sm = preference
    avail = ((per_sm // num_blocks) // gran) * gran
    avail = min(avail, limit_per_block)
    avail -= k.static_smem_bytes
    # the header computes in size_t: a negative result wraps around, and the cap below then applies
    max_dynamic = _max_dynamic(k, d)
    if avail < 0 or avail > max_dynamic:
        avail = max_dynamic
    return avail


# ---------------------------------------------------------------------------------------------
# What to change: the next occupancy step, and the calculator's three sweeps


@dataclass(frozen=True)
class Suggestion:
    """One change that raises occupancy: ``resource`` set to ``value`` gives ``occupancy``."""

    resource: str  # registers | shared_memory | block_size | carveout
    value: int
    active_warps_per_sm: int
    occupancy: float
    text: str


def _with(k: KernelResources, **changes: int) -> KernelResources:
    return KernelResources(**{**k.__dict__, **changes})


def _warps(d: DeviceSpec, k: KernelResources, carveout: int) -> int:
    try:
        return max_active_blocks(d, k, carveout).active_warps_per_sm
    except OccupancyInputError:
        return 0


def next_steps(d: DeviceSpec, k: KernelResources, carveout: int = -1) -> list[Suggestion]:
    """The smallest change of each resource that reaches a higher occupancy than now.

    Registers: the largest register count per thread that fits more warps. Shared memory: the largest
    per-block total (static + dynamic) that fits another block. Carveout: 100 when the preference is
    what limits. Block size: the warp-multiple sizes that reach the best occupancy any block size
    reaches with these registers and shared memory, nearest to the current one first.
    """
    base = max_active_blocks(d, k, carveout)
    now = base.active_warps_per_sm
    out: list[Suggestion] = []

    def add(resource: str, value: int, kk: KernelResources, cv: int, text: str) -> None:
        w = _warps(d, kk, cv)
        out.append(Suggestion(resource, value, w, w / base.max_warps_per_sm, text))

    if k.regs_per_thread > 0 and "registers" in base.limiters:
        for regs in range(k.regs_per_thread - 1, -1, -1):
            if _warps(d, _with(k, regs_per_thread=regs), carveout) > now:
                add(
                    "registers",
                    regs,
                    _with(k, regs_per_thread=regs),
                    carveout,
                    f"use at most {regs} registers per thread (__launch_bounds__ or -maxrregcount)",
                )
                break

    total = k.static_smem_bytes + k.dynamic_smem_bytes
    if total > 0 and "shared_memory" in base.limiters:
        full_sm = d.cc_major >= 7 and base.smem_per_sm_bytes < _align_up_smem_volta_plus(
            d.smem_per_sm, d
        )
        if full_sm and _warps(d, k, 100) > now:
            add("carveout", 100, k, 100, "prefer the largest shared-memory carveout (100%)")
        gran = _smem_granularity(d)
        target = base.active_blocks_per_sm + 1
        # the largest total whose allocation fits `target` blocks in the SM's shared memory
        for blocks in range(target, target + 64):
            per_sm = base.smem_per_sm_bytes
            alloc = (per_sm // blocks) // gran * gran
            size = alloc - d.reserved_smem_per_block
            if size < 0:
                break
            dyn = max(0, size - k.static_smem_bytes)
            st = min(k.static_smem_bytes, size)
            kk = _with(k, static_smem_bytes=st, dynamic_smem_bytes=dyn)
            if size < total and _warps(d, kk, carveout) > now:
                add(
                    "shared_memory",
                    size,
                    kk,
                    carveout,
                    f"use at most {size} bytes of shared memory per block "
                    f"(static + dynamic; {d.reserved_smem_per_block} B more are reserved per block)"
                    if d.reserved_smem_per_block
                    else f"use at most {size} bytes of shared memory per block",
                )
                break

    best_w, best_sizes = now, []
    for size in range(32, d.max_threads_per_block + 1, 32):
        w = _warps(d, _with(k, threads_per_block=size), carveout)
        if w > best_w:
            best_w, best_sizes = w, [size]
        elif w == best_w and w > now:
            best_sizes.append(size)
    if best_sizes:
        best_sizes.sort(key=lambda s: (abs(s - k.threads_per_block), s))
        shown = sorted(best_sizes[:4])
        add(
            "block_size",
            shown[0] if len(shown) == 1 else best_sizes[0],
            _with(k, threads_per_block=best_sizes[0]),
            carveout,
            "use a block of " + ", ".join(map(str, shown)) + " threads",
        )
    out.sort(key=lambda s: -s.active_warps_per_sm)
    return out


@dataclass(frozen=True)
class Sweep:
    """Occupancy against one resource, the others fixed: one view of NVIDIA's calculator."""

    resource: str  # block_size | registers | shared_memory
    values: tuple[int, ...]
    occupancy: tuple[float, ...]
    current: int


def sweeps(d: DeviceSpec, k: KernelResources, carveout: int = -1) -> tuple[Sweep, Sweep, Sweep]:
    def occ_of(kk: KernelResources) -> float:
        return _warps(d, kk, carveout) / (d.threads_per_sm // d.warp_size)

    blocks = tuple(sorted({*range(32, d.max_threads_per_block + 1, 32), k.threads_per_block}))
    regs = tuple(sorted({*range(0, 256, 8), 255, k.regs_per_thread}))
    top = d.smem_per_block_optin if k.optin else d.smem_per_block
    step = max(_smem_granularity(d), (top // 48) // 1024 * 1024)
    total = k.static_smem_bytes + k.dynamic_smem_bytes
    smem = tuple(sorted({*range(0, top + 1, step), total}))
    return (
        Sweep(
            "block_size",
            blocks,
            tuple(occ_of(_with(k, threads_per_block=b)) for b in blocks),
            k.threads_per_block,
        ),
        Sweep(
            "registers",
            regs,
            tuple(occ_of(_with(k, regs_per_thread=r)) for r in regs),
            k.regs_per_thread,
        ),
        Sweep(
            "shared_memory",
            smem,
            tuple(occ_of(_with(k, static_smem_bytes=0, dynamic_smem_bytes=s)) for s in smem),
            total,
        ),
    )
