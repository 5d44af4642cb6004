"""Rewriting source text by ranges: collect edits (offsets of the original text, usually node
spans of :mod:`gpuadvise.source.tree`), apply them at once, and show the result as a unified diff.

    rw = Rewrite(text)
    rw.replace(a, b, "new")        # text[a:b] -> "new"
    rw.insert(k, "line\\n")         # before offset k
    rw.delete_lines(5, 6)          # whole lines 5..6 (1-based), their newlines included
    rw.text(); rw.diff("kernels/x.cu")

Edits refer to the original text, so their order does not matter; two edits that overlap raise
:class:`EditConflict` (an insertion at the boundary of a replacement is not an overlap: it goes
before it). A rewrite with no edits returns the text unchanged and no diff.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Edit", "EditConflict", "Rewrite", "unified_diff"]


class EditConflict(ValueError):
    """Two edits of one rewrite overlap."""


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    new: str
    order: int  # insertion order: the tie-break of insertions at one offset


def unified_diff(
    before: Sequence[str], after: Sequence[str], path: str, context: int = 3
) -> str | None:
    """A unified diff of two versions of a file's lines (without newlines); None if equal.

    Headers are ``a/<path>`` and ``b/<path>`` (git's style, ``patch -p1`` applies it) for a path
    relative to the current directory, the absolute path otherwise.
    """
    before, after = list(before), list(after)
    if before == after:
        return None
    if before and after and before[-1] == "" and after[-1] == "":
        # lines from text.split("\n") of a file that ends in a newline: the empty string after the
        # last newline is no line of the file (kept, it became a phantom empty context line
        # that patch(1) only takes with fuzz)
        before, after = before[:-1], after[:-1]
    name = path
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:
            rel = path
        name = path if rel.startswith("..") else rel
    name = name.replace(os.sep, "/")
    old, new = (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")
    lines = difflib.unified_diff(
        [ln + "\n" for ln in before],
        [ln + "\n" for ln in after],
        fromfile=old,
        tofile=new,
        n=context,
    )
    return "".join(lines)


class Rewrite:
    """Edits of one text, by offsets of the original."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.edits: list[Edit] = []

    def __len__(self) -> int:
        return len(self.edits)

    def replace(self, start: int, end: int, new: str) -> Rewrite:
        """Replace ``text[start:end]`` by ``new``."""
        if not 0 <= start <= end <= len(self.original):
            raise EditConflict(f"edit {start}:{end} is outside the text (0:{len(self.original)})")
        e = Edit(start, end, new, len(self.edits))
        for o in self.edits:
            if start < o.end and o.start < end:  # both non-empty and overlapping
                raise EditConflict(f"edit {start}:{end} overlaps edit {o.start}:{o.end}")
            if start == end == o.start == o.end:
                continue  # two insertions at one offset: in the order they were made
            if (start == end and o.start < start < o.end) or (
                o.start == o.end and start < o.start < end
            ):
                raise EditConflict(f"an insertion at {max(start, o.start)} falls inside an edit")
        self.edits.append(e)
        return self

    def insert(self, at: int, new: str) -> Rewrite:
        return self.replace(at, at, new)

    def delete(self, start: int, end: int) -> Rewrite:
        return self.replace(start, end, "")

    def line_span(self, first: int, last: int | None = None) -> tuple[int, int]:
        """Offsets of 1-based lines ``first``..``last``, the last one's newline included."""
        last = first if last is None else last
        text = self.original
        start = 0
        for _ in range(first - 1):
            k = text.find("\n", start)
            start = len(text) if k < 0 else k + 1
        end = start
        for _ in range(last - first + 1):
            k = text.find("\n", end)
            end = len(text) if k < 0 else k + 1
        return start, end

    def delete_lines(self, first: int, last: int | None = None) -> Rewrite:
        a, b = self.line_span(first, last)
        return self.delete(a, b)

    def replace_lines(self, first: int, last: int, new: Sequence[str]) -> Rewrite:
        """Lines ``first``..``last`` (1-based) replaced by ``new`` (lines without newlines)."""
        a, b = self.line_span(first, last)
        ends_nl = self.original[b - 1 : b] == "\n"
        body = "\n".join(new)
        if new and ends_nl:
            body += "\n"
        elif (
            not new and not ends_nl and a > 0
        ):  # the last line, without a newline: drop the one before
            a -= 1
        return self.replace(a, b, body)

    def text(self) -> str:
        """The text with every edit applied."""
        out = []
        k = 0
        for e in sorted(self.edits, key=lambda e: (e.start, e.end > e.start, e.order)):
            out.append(self.original[k : e.start])
            out.append(e.new)
            k = e.end
        out.append(self.original[k:])
        return "".join(out)

    def diff(self, path: str, context: int = 3) -> str | None:
        """The unified diff from the original to :meth:`text` (None: no change)."""
        return unified_diff(self.original.split("\n"), self.text().split("\n"), path, context)
