"""Source transformations shared by rules: applying a unified diff to a copy of the user's source.

gpuadvise never edits the user's files: a variant is written to a temporary directory beside
nothing the user owns, compiled and measured there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from gpuadvise.errors import GpuAdviseError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(GpuAdviseError):
    """A diff does not apply to the source it was made for."""


def apply_unified_diff(text: str, diff: str) -> str:
    """``text`` with the hunks of ``diff`` applied (one file; context must match exactly, at the
    stated line or, if the source moved, at the nearest place it matches)."""
    lines = text.splitlines(keepends=True)
    hunks: list[tuple[int, list[str], list[str]]] = []
    cur: tuple[int, list[str], list[str]] | None = None
    for raw in diff.splitlines():
        m = _HUNK.match(raw)
        if m:
            cur = (int(m.group(1)), [], [])
            hunks.append(cur)
            continue
        if cur is None or raw.startswith(("---", "+++")):
            continue
        tag, body = raw[:1], raw[1:]
        if tag == " ":
            cur[1].append(body)
            cur[2].append(body)
        elif tag == "-":
            cur[1].append(body)
        elif tag == "+":
            cur[2].append(body)
        elif raw.startswith("\\"):
            continue
        elif raw == "":
            cur[1].append("")
            cur[2].append("")
    if not hunks:
        raise PatchError("the diff has no hunks", "report this bug")
    offset = 0
    for start, old, new in hunks:
        at = _find(lines, old, start - 1 + offset)
        if at is None:
            raise PatchError(
                f"the diff does not apply at line {start}", "the source changed since the analysis"
            )
        eol = "\n"
        lines[at : at + len(old)] = [s + eol for s in new]
        offset += len(new) - len(old)
    return "".join(lines)


def _find(lines: Sequence[str], old: Sequence[str], guess: int) -> int | None:
    stripped = [ln.rstrip("\r\n") for ln in lines]
    n = len(old)
    for delta in range(0, len(stripped) + 1):
        for at in (guess - delta, guess + delta):
            if 0 <= at <= len(stripped) - n and stripped[at : at + n] == list(old):
                return at
    return None
