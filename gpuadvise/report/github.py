"""GitHub Actions workflow commands: one annotation per report item.

``::error file=F,line=L,title=T::MESSAGE`` for level ``error``, ``::warning`` for ``warning``,
``::notice`` for ``note``; items of level ``none`` give no annotation. Printed to stdout by a step,
these become annotations on the pull request's diff (at the kernel's line when it is known) and
in the run summary. Escaping follows the Actions toolkit (``@actions/core``'s ``command.ts``):
``%``, CR and LF in the message; those and ``:`` and ``,`` in property values. Other control
characters are shown as escapes, and ``##[`` is broken (:func:`gpuadvise.report.safe_text.guard`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuadvise.items import ReportItem
from gpuadvise.report.safe_text import guard

__all__ = ["annotation", "escape_data", "escape_property", "github_annotations"]

_COMMANDS = {"error": "error", "warning": "warning", "note": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    command: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
) -> str:
    """One ``::command props::message`` line (no trailing newline)."""
    props: list[str] = []
    if file:
        props.append(f"file={escape_property(file)}")
        if line is not None:
            props.append(f"line={line}")
    if title:
        props.append(f"title={escape_property(title)}")
    head = f"::{command}" + (" " + ",".join(props) if props else "")
    return f"{head}::{escape_data(message)}"


def github_annotations(
    items: Iterable[ReportItem], *, notes: Sequence[str] = (), log: Sequence[str] = ()
) -> str:
    """The workflow commands for ``items`` and run-level ``notes`` (as warnings without a file);
    ``log``: run-level notes that are no warning (``estimates only``: every run without a GPU
    says it), printed as plain lines of the step's log, not as annotations."""
    lines = [f"gpuadvise: note: {escape_data(note)}" for note in log]
    lines += [annotation("warning", note, title="gpuadvise") for note in notes]
    for item in items:
        command = _COMMANDS.get(item.level)
        if command is None:
            continue
        lines.append(
            annotation(
                command,
                item.message,
                file=item.file,
                line=item.line,
                title=item.title or item.rule_id,
            )
        )
    return guard("".join(line + "\n" for line in lines), "github")
