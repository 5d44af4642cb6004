"""The one exception hierarchy of gpuadvise.

Every error a user can cause is a :class:`GpuAdviseError`. The CLI turns it into one line,
``error: <what is wrong>; <how to fix it>``, and exit code 2. Anything else escaping is a bug.
"""

from __future__ import annotations

import re

# Input echoed into a message is shown up to this many characters, then its length.
ECHO_LIMIT = 80
# A quoted value ('...' or "..." as repr() writes it: the quote opens after a space, bracket or =
# and closes before a space, punctuation or the end) longer than ECHO_LIMIT ...
_QUOTED = re.compile(
    r"""(?:(?<=^)|(?<=[\s(\[{=:,]))(['"])((?:(?!\1)[^\n]){"""
    + str(ECHO_LIMIT + 1)
    + r""",})(?<!…)\1(?=$|[\s)\]},;:.!?])"""
)
# ... and any run without whitespace longer than this (a path may well exceed ECHO_LIMIT).
_RUN_LIMIT = 200
_RUN = re.compile(r"\S{" + str(_RUN_LIMIT + 1) + ",}")


def cap_echoes(text: str) -> str:
    """``text`` with long echoed input shortened: a quoted value longer than :data:`ECHO_LIMIT`
    characters, or an unbroken run longer than 200, keeps its first :data:`ECHO_LIMIT`
    characters and says how long it was (``'xxxx…' (5000 characters)``)."""

    def quoted(m: re.Match[str]) -> str:
        q, body = m.group(1), m.group(2)
        return f"{q}{body[:ECHO_LIMIT]}…{q} ({len(body)} characters)"

    def run(m: re.Match[str]) -> str:
        body = m.group(0)
        return f"{body[:ECHO_LIMIT]}… ({len(body)} characters)"

    return _RUN.sub(run, _QUOTED.sub(quoted, text))


class GpuAdviseError(Exception):
    """Base class. ``message`` says what is wrong; ``hint`` says how to fix it; ``details``: a
    tool's own output the user needs as it is (nvcc's diagnostics), printed below the one line."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None, details: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details

    def one_line(self) -> str:
        """``message; hint`` on one line, with long echoed input capped (:func:`cap_echoes`)."""
        text = self.message.rstrip(".")
        if self.hint:
            text += f"; {self.hint}"
        return cap_echoes(" ".join(text.split()))


class UsageError(GpuAdviseError):
    """Bad command-line or spec input (sizes, launch configs, names)."""


class UnknownDeviceError(UsageError):
    """A GPU name or architecture that no model knows."""


class ConfigError(UsageError):
    """A configuration or spec file that cannot be read."""


class DataFileError(UsageError):
    """A buffer's data file (``.npy``, ``.bin``) that cannot give the buffer its data: unreadable,
    truncated, or not a whole number of elements. An input error found before tracing, never a
    note that the trace is unavailable."""


class ToolchainError(GpuAdviseError):
    """nvcc, ptxas or nvdisasm missing, or failing."""


class CompileError(ToolchainError):
    """The user's source does not compile; ``message`` holds nvcc's own diagnostics."""


class KernelNotFoundError(UsageError):
    """No kernel of that name in the compiled file."""


class RunnerError(GpuAdviseError):
    """Running a kernel on the GPU failed (no GPU, no PyCUDA, a CUDA error)."""


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) or SIGTERM: the run stops, its temporary files and worker processes
    cleaned up on the way out. Not a user's mistake, and not an ``Exception``: handlers of
    errors let it through, as they do ``KeyboardInterrupt``. The CLI says ``interrupted`` (with
    ``progress``, how far the run got: ``"3/10 cases done"``) and exits 128 + the signal's
    number: 130 for SIGINT, 143 for SIGTERM."""

    def __init__(self, signum: int = 2, progress: str | None = None) -> None:
        super().__init__(signum, progress)
        self.signum = signum
        self.progress = progress

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def one_line(self) -> str:
        import signal

        try:
            name = signal.Signals(self.signum).name
        except ValueError:
            name = f"signal {self.signum}"
        how = "" if self.signum == signal.SIGINT else f" by {name}"
        return f"interrupted{how}" + (f": {self.progress}" if self.progress else "")
