"""PTX on the CPU: parser, control-flow graph with reconvergence points, and the emulator.

- :mod:`gpuadvise.ptx.parser`: PTX text to functions, instructions and operands with line info.
- :mod:`gpuadvise.ptx.cfg`: calls inlined, basic blocks, reconvergence points (post-dominators).
- :mod:`gpuadvise.ptx.values`, :mod:`gpuadvise.ptx.ops`: lane arrays and instruction semantics.
- :mod:`gpuadvise.ptx.memory`, :mod:`gpuadvise.ptx.emulator`: address spaces, the SIMT scheduler,
  the memory trace.
- :mod:`gpuadvise.ptx.errors`: what can go wrong, each a GpuAdviseError.

The public entry is :func:`gpuadvise.trace.emulate.emulate` (and :func:`gpuadvise.trace.emulate.emulate_ptx`
for PTX text); nothing here is imported by ``import gpuadvise``.
"""

from __future__ import annotations

from gpuadvise.ptx.errors import (
    EmulationError,
    InstructionBudgetError,
    MemoryAccessError,
    PtxParseError,
    UnsupportedInstructionError,
)

__all__ = [
    "EmulationError",
    "InstructionBudgetError",
    "MemoryAccessError",
    "PtxParseError",
    "UnsupportedInstructionError",
]
