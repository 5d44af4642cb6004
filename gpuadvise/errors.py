"""The one exception hierarchy of gpuadvise.

Every error a user can cause is a :class:`GpuAdviseError`. The CLI turns it into one line,
``error: <what is wrong>; <how to fix it>``, and exit code 2. Anything else escaping is a bug.
"""

from __future__ import annotations


class GpuAdviseError(Exception):
    """Base class. ``message`` says what is wrong; ``hint`` says how to fix it."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = self.message.rstrip(".")
        if self.hint:
            text += f"; {self.hint}"
        return " ".join(text.split())


class UsageError(GpuAdviseError):
    """Bad command-line or spec input (sizes, launch configs, names)."""


class UnknownDeviceError(UsageError):
    """A GPU name or architecture that no model knows."""


class ConfigError(UsageError):
    """A configuration or spec file that cannot be read."""


class ToolchainError(GpuAdviseError):
    """nvcc, ptxas or nvdisasm missing, or failing."""


class CompileError(ToolchainError):
    """The user's source does not compile; ``message`` holds nvcc's own diagnostics."""


class KernelNotFoundError(UsageError):
    """No kernel of that name in the compiled file."""


class RunnerError(GpuAdviseError):
    """Running a kernel on the GPU failed (no GPU, no PyCUDA, a CUDA error)."""
