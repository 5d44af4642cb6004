"""The small interface a GPU backend implements (PyCUDA today; another could be added later).

A backend lives inside the isolated worker process only: the gpuadvise process never creates a CUDA
context, so a kernel that corrupts its context, hangs or crashes the process cannot take gpuadvise
down with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

# CUDA driver error strings (cuGetErrorString) -> their names, so reports name the CUDA error.
CUDA_ERROR_NAMES = {
    "an illegal memory access was encountered": "CUDA_ERROR_ILLEGAL_ADDRESS",
    "unspecified launch failure": "CUDA_ERROR_LAUNCH_FAILED",
    "device-side assert triggered": "CUDA_ERROR_ASSERT",
    "the launch timed out and was terminated": "CUDA_ERROR_LAUNCH_TIMEOUT",
    "too many resources requested for launch": "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    "misaligned address": "CUDA_ERROR_MISALIGNED_ADDRESS",
    "an illegal instruction was encountered": "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "operation not supported on global/shared address space": "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "invalid program counter": "CUDA_ERROR_INVALID_PC",
    "hardware stack error": "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "out of memory": "CUDA_ERROR_OUT_OF_MEMORY",
    "invalid argument": "CUDA_ERROR_INVALID_VALUE",
    "device kernel image is invalid": "CUDA_ERROR_INVALID_IMAGE",
    "no kernel image is available for execution on the device": "CUDA_ERROR_NO_BINARY_FOR_GPU",
    "named symbol not found": "CUDA_ERROR_NOT_FOUND",
    "uncorrectable ECC error encountered": "CUDA_ERROR_ECC_UNCORRECTABLE",
}


def cuda_error_name(message: str) -> str | None:
    low = message.lower()
    for text, name in CUDA_ERROR_NAMES.items():
        if text.lower() in low:
            return name
    return None


class Kernel(Protocol):
    symbol: str


class Backend(Protocol):
    name: str

    def device_info(self) -> dict[str, Any]: ...

    def load(self, cubin: bytes, symbol: str, param_formats: str, dynamic_smem: int) -> Any: ...

    def alloc(self, nbytes: int) -> Any: ...

    def set_constant(self, kernel: Any, symbol: str, host: np.ndarray) -> None:
        """Write ``host`` into the ``__constant__`` variable ``symbol`` of ``kernel``'s module."""
        ...

    def upload(self, dev: Any, host: np.ndarray) -> None: ...

    def download(self, dev: Any, host: np.ndarray) -> None: ...

    def launch(
        self,
        kernel: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        args: Sequence[Any],
    ) -> None: ...

    def bind(
        self,
        kernel: Any,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem: int,
        args: Sequence[Any],
    ) -> Any:
        """A callable that launches ``kernel`` with these arguments (packed once)."""
        ...

    def bind_graph(
        self,
        launches: Sequence[
            tuple[Any, tuple[int, int, int], tuple[int, int, int], int, Sequence[Any]]
        ],
    ) -> Any:
        """A callable that replays ``launches`` (kernel, grid, block, smem, args), in order, as
        one CUDA graph: captured once from a stream here, each call one graph launch."""
        ...

    def synchronize(self) -> None: ...

    def timed(self, fn: Any) -> float:
        """Run ``fn()`` between two CUDA events; milliseconds."""
        ...

    def flush_l2(self) -> None: ...

    def close(self) -> None: ...
