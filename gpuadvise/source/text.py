"""Plain-text helpers over CUDA source: blank comments and strings, match brackets, find a
kernel's definition. (The parsed view of the source is gpuadvise.source.tree.)"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuadvise.errors import GpuAdviseError

if TYPE_CHECKING:
    pass



def blank_comments_and_strings(text: str) -> str:
    """``text`` with comments and string/char literals replaced by spaces (newlines kept), so
    that offsets and line numbers stay the same and patterns never match inside them."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            for k in range(i + 1, j - 1):
                out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


def match_close(code: str, at: int, open_: str = "(", close: str = ")") -> int:
    """The offset of the ``close`` that balances the ``open_`` at ``at`` in comment-free ``code``
    (-1 if unbalanced)."""
    depth = 0
    for k in range(at, len(code)):
        if code[k] == open_:
            depth += 1
        elif code[k] == close:
            depth -= 1
            if depth == 0:
                return k
    return -1


def match_brace(code: str, open_at: int) -> int:
    """The offset of the ``}`` closing the ``{`` at ``open_at`` in comment-free ``code``
    (``len(code)`` if unbalanced)."""
    k = match_close(code, open_at, "{", "}")
    return len(code) if k < 0 else k


def line_of(text: str, offset: int) -> int:
    """1-based line number of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


@dataclass(frozen=True)
class KernelSource:
    """Where the analysed kernel lies in its source: declaration line, body offsets and lines."""

    path: str
    text: str
    code: str  # comments and strings blanked
    decl_line: int
    body_start: int  # offset of the body's "{"
    body_end: int  # offset of the matching "}"

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def body(self) -> str:
        """The body's code (comments blanked), from ``{`` to ``}`` inclusive."""
        return self.code[self.body_start : self.body_end + 1]

    @property
    def body_lines(self) -> tuple[int, int]:
        return line_of(self.text, self.body_start), line_of(self.text, self.body_end)

    def line(self, offset_in_body: int) -> int:
        return line_of(self.text, self.body_start + offset_in_body)


def find_kernel_source(path: str | os.PathLike[str], kernel: str) -> KernelSource | None:
    """The declaration and body of ``kernel`` in the file at ``path`` (None: not defined there)."""
    from gpuadvise.source.signature import select_kernel

    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        decl, _ = select_kernel(text, kernel)
    except GpuAdviseError:
        return None
    if not decl.is_definition:
        return None
    code = blank_comments_and_strings(text)
    starts = [0]
    for m in re.finditer("\n", code):
        starts.append(m.end())
    pos = starts[decl.line - 1] if decl.line - 1 < len(starts) else 0
    parens = 0
    for k in range(pos, len(code)):
        ch = code[k]
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens -= 1
        elif ch == ";" and parens == 0:
            return None
        elif ch == "{" and parens == 0:
            return KernelSource(str(path), text, code, decl.line, k, match_brace(code, k))
    return None
