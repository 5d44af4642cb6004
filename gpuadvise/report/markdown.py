"""Markdown summaries (GitHub-flavoured), e.g. for ``$GITHUB_STEP_SUMMARY`` or a PR comment.

Generic pieces: :func:`md_table` (a pipe table with every cell escaped), :func:`md_summary` (a
heading, a status line, warnings, a table of the rows that matter and a folded table of the rest),
and :func:`items_markdown` (a summary of :class:`~gpuadvise.report.sarif.ReportItem` s, for any
command). Cell text is escaped: ``|`` and newlines would break the table, and ``<``/``>`` would
swallow template arguments such as ``reduce<256>`` as HTML tags; other control characters are shown
as escapes. Every summary is guarded (:func:`gpuadvise.report.safe_text.guard`): no line starts
with ``::``, no ``##[``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuadvise.items import ReportItem
from gpuadvise.report.safe_text import controls, guard

__all__ = ["items_markdown", "md_escape", "md_summary", "md_table"]

_LEVEL_ICON = {"error": "❌", "warning": "⚠️", "note": "ℹ️", "none": "✅", "skipped": "⏭️"}
_LEVEL_WORD = {
    "error": "error",
    "warning": "warning",
    "note": "note",
    "none": "passing",
    "skipped": "skipped",
}
_SAME_IN_PLURAL = frozenset({"passing", "skipped"})


def _plural(n: int, word: str) -> str:
    return word if n == 1 or word in _SAME_IN_PLURAL else word + "s"


def md_escape(text: str) -> str:
    text = controls(text, keep="\n")
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\r\n", "<br>")
        .replace("\n", "<br>")
    )


def md_table(
    headers: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None
) -> str:
    """A pipe table; ``align`` holds ``"l"``/``"r"``/``"c"`` per column (default left)."""
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    spec = align or ["l"] * len(headers)
    out = ["| " + " | ".join(md_escape(h) for h in headers) + " |"]
    out.append("| " + " | ".join(marks.get(a, ":--") for a in spec) + " |")
    for row in rows:
        out.append("| " + " | ".join(md_escape(str(c)) for c in row) + " |")
    return guard("\n".join(out) + "\n", "markdown")


def md_summary(
    title: str,
    status: str,
    *,
    notes: Sequence[str] = (),
    headers: Sequence[str] = (),
    rows: Sequence[Sequence[str]] = (),
    folded_rows: Sequence[Sequence[str]] = (),
    folded_label: str = "details",
    align: Sequence[str] | None = None,
    footer: str = "",
) -> str:
    """A summary: ``## title``, the status line, warnings, a table, and a ``<details>`` table."""
    parts = [f"## {md_escape(title)}\n", f"{status}\n"]
    for note in notes:
        parts.append(f"> [!WARNING]\n> {md_escape(note)}\n")
    if rows:
        parts.append(md_table(headers, rows, align))
    if folded_rows:
        parts.append(
            f"<details><summary>{md_escape(folded_label)}</summary>\n\n"
            + md_table(headers, folded_rows, align)
            + "\n</details>\n"
        )
    if footer:
        parts.append(f"{footer}\n")
    return guard("\n".join(parts), "markdown")


def items_markdown(
    items: Iterable[ReportItem], *, title: str = "gpuadvise", notes: Sequence[str] = ()
) -> str:
    """A generic summary of report items: level, rule, location, message (passes folded)."""
    listed = list(items)
    passed = [i for i in listed if i.level == "none" and i.effective_outcome == "pass"]
    shown = [i for i in listed if not (i.level == "none" and i.effective_outcome == "pass")]
    counts: dict[str, int] = {}
    for item in listed:
        key = "skipped" if item.effective_outcome == "skip" else item.level
        counts[key] = counts.get(key, 0) + 1
    status = (
        ", ".join(f"{_LEVEL_ICON[k]} {v} {_plural(v, _LEVEL_WORD[k])}" for k, v in counts.items())
        or "nothing to report"
    )
    # the findings' speedups (measured, else the estimate) when the items carry them
    speedups = any("speedup" in (i.properties or {}) for i in listed)

    def row(i: ReportItem) -> list[str]:
        where = (i.file or "") + (f":{i.line}" if i.file and i.line else "")
        icon = _LEVEL_ICON["skipped" if i.effective_outcome == "skip" else i.level]
        cells = [icon, i.rule_id, i.group or "", where]
        if speedups:
            cells.append(str((i.properties or {}).get("speedup", "")))
        return [*cells, i.message]

    return md_summary(
        title,
        status,
        notes=notes,
        headers=["", "rule", "kernel", "location", *(["speedup"] if speedups else []), "message"],
        rows=[row(i) for i in shown],
        folded_rows=[row(i) for i in passed],
        folded_label=f"{len(passed)} passing",
    )
