"""Check a launch against the device before launching: clear errors instead of CUDA error codes."""

from __future__ import annotations

from gpuadvise.devices import MAX_BLOCK, MAX_GRID, DeviceSpec
from gpuadvise.errors import UsageError
from gpuadvise.model import occupancy as occ
from gpuadvise.spec.units import Dim3


def check_launch(
    device: DeviceSpec,
    grid: Dim3,
    block: Dim3,
    regs_per_thread: int,
    static_smem_bytes: int,
    dynamic_smem_bytes: int,
) -> list[str]:
    """Raise UsageError for a launch that cannot run; return notes (e.g. the opt-in being set)."""
    notes: list[str] = []
    for axis, extent, top in zip("xyz", block.as_tuple(), MAX_BLOCK, strict=True):
        if extent > top:
            raise UsageError(
                f"block {block}: {axis} = {extent} is above the limit of {top}",
                f"keep block.{axis} at most {top}",
            )
    if block.count > device.max_threads_per_block:
        raise UsageError(
            f"block {block} has {block.count} threads, above the limit of "
            f"{device.max_threads_per_block}",
            "use a smaller block",
        )
    for axis, extent, top in zip("xyz", grid.as_tuple(), MAX_GRID, strict=True):
        if extent > top:
            raise UsageError(
                f"grid {grid}: {axis} = {extent} is above the limit of {top}",
                f"keep grid.{axis} at most {top}",
            )
    total = static_smem_bytes + dynamic_smem_bytes
    if total > device.smem_per_block_optin:
        raise UsageError(
            f"the block needs {total} B of shared memory ({static_smem_bytes} static + "
            f"{dynamic_smem_bytes} dynamic), above the {device.smem_per_block_optin} B an "
            f"{device.arch} block can have",
            "use less dynamic shared memory",
        )
    if total > device.smem_per_block:
        notes.append(
            f"{total} B of shared memory per block: gpuadvise sets "
            "cudaFuncAttributeMaxDynamicSharedMemorySize, as your host code must"
        )
    r = occ.max_active_blocks(
        device,
        occ.KernelResources(
            threads_per_block=block.count,
            regs_per_thread=regs_per_thread,
            static_smem_bytes=static_smem_bytes,
            dynamic_smem_bytes=dynamic_smem_bytes,
        ),
    )
    if r.active_blocks_per_sm == 0:
        raise UsageError(
            f"no block of {block.count} threads fits on an SM (limited by "
            f"{', '.join(r.limiters)}: {regs_per_thread} registers per thread, {total} B shared "
            "memory); the launch would fail with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            "use a smaller block or cap the registers (__launch_bounds__)",
        )
    return notes
