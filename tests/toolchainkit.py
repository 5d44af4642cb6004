"""The CUDA toolchain the toolchain tests compile with, or None where this machine has none (the
tests that need it then skip: each module's ``needs_nvcc`` / ``needs_tools`` mark)."""

from __future__ import annotations

from gpuadvise.errors import ToolchainError
from gpuadvise.toolchain import Toolchain, find_toolchain


def toolchain_or_none(*, with_nvdisasm: bool = False) -> Toolchain | None:
    """:func:`find_toolchain`'s toolchain; None where none is found, or (``with_nvdisasm``)
    where it has no nvdisasm."""
    try:
        tc = find_toolchain()
    except ToolchainError:
        return None
    return None if with_nvdisasm and tc.nvdisasm is None else tc
