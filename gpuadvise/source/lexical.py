"""Plain-text helpers over CUDA source: blank comments and strings (offsets kept), match
brackets, split at top-level separators, line numbers. (The parsed view of the source is
:mod:`gpuadvise.source.tree`; these serve it and the text that is not in the tree, such as a
macro's body.)"""

from __future__ import annotations


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


def split_top(text: str, seps: str = ",", brackets: str = "([{") -> list[tuple[int, int]]:
    """Spans of ``text`` split at any of the characters ``seps`` outside the ``brackets``
    (``"([{"`` by default; add ``"<"`` to treat angle brackets as brackets too)."""
    closers = "".join({"(": ")", "[": "]", "{": "}", "<": ">"}[b] for b in brackets)
    out: list[tuple[int, int]] = []
    depth, start = 0, 0
    for k, c in enumerate(text):
        if c in brackets:
            depth += 1
        elif c in closers:
            depth -= 1
        elif c in seps and depth == 0:
            out.append((start, k))
            start = k + 1
    out.append((start, len(text)))
    return out
