"""Errors of the PTX parser and the CPU emulator, all :class:`~gpuadvise.errors.GpuAdviseError` subclasses.

Each names what went wrong and where (``file:line`` of the kernel source when the PTX carries line
info), so the CLI can print it as one line.
"""

from __future__ import annotations

from gpuadvise.errors import GpuAdviseError

__all__ = [
    "EmulationError",
    "InstructionBudgetError",
    "MemoryAccessError",
    "PtxParseError",
    "UnsupportedInstructionError",
]


class EmulationError(GpuAdviseError):
    """The CPU emulator cannot run the kernel (base class)."""


class PtxParseError(EmulationError):
    """The PTX text is not understood."""


class UnsupportedInstructionError(EmulationError):
    """A PTX instruction (or form of one) the emulator does not implement was executed."""

    def __init__(self, message: str, hint: str | None = None, opcode: str = "") -> None:
        super().__init__(message, hint)
        self.opcode = opcode


class MemoryAccessError(EmulationError):
    """An out-of-bounds or misaligned access: the emulator doubles as a memory checker.

    ``where`` is ``file:line`` (or None), ``buffer`` the buffer or state space, ``offset`` the byte
    offset of the first offending access relative to that buffer (may be negative or past its end),
    ``cta``/``thread`` the (x, y, z) indices of the thread that made it.
    """

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        where: str | None = None,
        buffer: str | None = None,
        offset: int | None = None,
        address: int | None = None,
        cta: tuple[int, int, int] | None = None,
        thread: tuple[int, int, int] | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.where = where
        self.buffer = buffer
        self.offset = offset
        self.address = address
        self.cta = cta
        self.thread = thread


class InstructionBudgetError(EmulationError):
    """The kernel ran past the instruction budget (a runaway or very long kernel)."""
