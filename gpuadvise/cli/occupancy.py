"""``gpuadvise occupancy``: validate the input, run the model, hand the result to the report."""

from __future__ import annotations

from gpuadvise.devices import MAX_REGS_PER_THREAD, DeviceSpec, check_block_shape, resolve_device
from gpuadvise.errors import UsageError
from gpuadvise.model import occupancy as occ
from gpuadvise.spec.units import parse_dims, parse_size


def build_resources(
    device: DeviceSpec, threads: int, regs: int, static_smem: int, dynamic_smem: int, carveout: int
) -> tuple[occ.KernelResources, list[str]]:
    """Check a configuration against the device; the notes say what was assumed."""
    notes: list[str] = []
    if threads > device.max_threads_per_block:
        raise UsageError(
            f"{threads} threads per block is above the maximum of {device.max_threads_per_block}",
            "use a smaller block",
        )
    if not 0 <= regs <= MAX_REGS_PER_THREAD:
        raise UsageError(
            f"{regs} registers per thread is out of range", "give 0 to 255 (0: not known)"
        )
    if not -1 <= carveout <= 100:
        raise UsageError(f"carveout {carveout} is out of range", "give -1 (default) or 0..100")
    if static_smem > device.smem_per_block:
        raise UsageError(
            f"{static_smem} B of static shared memory is above the {device.smem_per_block} B a "
            "kernel can declare statically",
            "move the excess into dynamic shared memory (--dynamic-smem)",
        )
    total = static_smem + dynamic_smem
    if total > device.smem_per_block_optin:
        raise UsageError(
            f"{total} B of shared memory per block is above the opt-in maximum of "
            f"{device.smem_per_block_optin} B on {device.name} ({device.arch})",
            f"use at most {device.smem_per_block_optin} B per block",
        )
    if total > device.smem_per_block:
        notes.append(
            f"{total} B per block is above {device.smem_per_block} B: the kernel must opt in with "
            "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)"
        )
    if threads % device.warp_size:
        notes.append(
            f"{threads} threads is not a multiple of the warp size ({device.warp_size}): the last "
            "warp of every block runs partly empty"
        )
    k = occ.KernelResources(
        threads_per_block=threads,
        regs_per_thread=regs,
        static_smem_bytes=static_smem,
        dynamic_smem_bytes=dynamic_smem,
        optin=True,
    )
    return k, notes


def run_occupancy(
    threads: str,
    regs: str,
    smem: str,
    dynamic_smem: str,
    carveout: int,
    gpu: str | None,
    arch: str | None,
    sweep: bool,
    as_json: bool,
) -> None:
    choice = resolve_device(gpu, arch)
    device = choice.device
    dims = parse_dims(threads, "--threads")
    check_block_shape(dims.as_tuple(), device.max_threads_per_block, "--threads")
    nthreads = dims.count
    try:
        nregs = int(regs, 0)
    except ValueError:
        raise UsageError(f"--regs {regs!r} is not a number", "give 0 to 255") from None
    k, notes = build_resources(
        device,
        nthreads,
        nregs,
        parse_size(smem, "--smem"),
        parse_size(dynamic_smem, "--dynamic-smem"),
        carveout,
    )
    if choice.note:
        notes.insert(0, choice.note)
    try:
        result = occ.max_active_blocks(device, k, carveout)
        steps = occ.next_steps(device, k, carveout)
    except occ.OccupancyInputError as exc:
        raise UsageError(
            f"the occupancy model rejects this configuration: {exc}",
            "check the block size, registers and shared memory against the device's limits "
            "(gpuadvise devices)",
        ) from None
    if as_json:
        from gpuadvise.analyze.report import occupancy_json
        from gpuadvise.report.json_report import emit

        doc = occupancy_json(device, k, carveout, result, steps, notes)
        if sweep:
            doc["sweeps"] = [
                {"resource": s.resource, "values": list(s.values), "occupancy": list(s.occupancy)}
                for s in occ.sweeps(device, k, carveout)
            ]
        emit(doc)
        return
    from gpuadvise.report import console

    console.occupancy(device, k, carveout, result, steps, notes)
    if sweep:
        console.sweeps(occ.sweeps(device, k, carveout), result.max_warps_per_sm)
