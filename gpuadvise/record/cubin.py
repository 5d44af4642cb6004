"""A recorded module's cubin: its kernels and parameter slots (now in
:mod:`gpuadvise.toolchain.cubin`, which ``analyze`` reads a cubin given by name with too)."""

from __future__ import annotations

from gpuadvise.toolchain.cubin import CubinInfo, ParamSlot, elf_images, is_elf, read_cubin

__all__ = ["CubinInfo", "ParamSlot", "elf_images", "is_elf", "read_cubin"]
