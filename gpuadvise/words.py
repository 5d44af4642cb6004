"""Counts in words for every message people read: ``1 barrier``, ``3 barriers``, never
``barrier(s)`` (issue 32's first-use review). The one place the rule is written: the report's
``plural`` and the rules' messages use it."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["counted", "lines_text"]


def counted(n: int | float, word: str, many: str | None = None) -> str:
    """``1 warning``, ``3 warnings``, ``0 notes``; ``many``: the plural when it is not word + s
    (``counted(2, "process", "processes")``). A float is written as given (``1.5 elements``)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def lines_text(lines: Iterable[object]) -> str:
    """``line 12``, ``lines 12, 15``: the source lines of a message (any sequence of numbers or
    already written parts such as ``"12 (4)"``)."""
    parts = [str(x) for x in lines]
    return ("line " if len(parts) == 1 else "lines ") + ", ".join(parts)
