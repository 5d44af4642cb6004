"""Where a rendered report goes: stdout, a file (written atomically), or appended to
``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

import os
import sys

from gpuadvise.fileio import write_atomic


def write_output(text: str, output: str | None) -> None:
    """stdout, or ``output`` written atomically (appended for $GITHUB_STEP_SUMMARY)."""
    if not text.endswith("\n"):
        text += "\n"
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    if output == os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(output, "a") as f:
            f.write(text)
        return
    write_atomic(output, text)
