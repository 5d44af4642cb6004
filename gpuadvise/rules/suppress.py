"""Inline suppression, as ``# noqa`` does for Ruff: a comment on a finding's line,
``// gpuadvise: ignore[GA201]`` (ids or names, comma-separated; ``// gpuadvise: ignore`` alone:
every rule), drops the findings of those rules at that line. Error rows (a rule that failed) are
never dropped.

The module knows a finding only by the fields it reads (:class:`_Located`), not by
:class:`gpuadvise.rules.findings.Finding`: the run (:mod:`gpuadvise.rules.evaluate`) calls it on
findings, and suppression needs nothing else of them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

__all__ = ["IGNORE_RE", "ignored_rules", "suppress"]


class _Located(Protocol):
    """What :func:`suppress` reads of a finding."""

    @property
    def rule(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def file(self) -> str | None: ...
    @property
    def line(self) -> int | None: ...
    @property
    def is_error(self) -> bool: ...


F = TypeVar("F", bound=_Located)

IGNORE_RE = re.compile(r"gpuadvise:\s*ignore(?:\[(?P<rules>[^\]]*)\])?", re.I)


def ignored_rules(line: str) -> frozenset[str] | None:
    """The rules a source line's comment ignores (upper-cased ids or names; ``{"*"}`` for all),
    None when it has no such comment."""
    comment = _comment(line)
    m = IGNORE_RE.search(comment) if comment else None
    if m is None:
        return None
    if m.group("rules") is None:
        return frozenset({"*"})
    return frozenset(r.strip().upper() for r in m.group("rules").split(",") if r.strip())


def _comment(line: str) -> str:
    """The comment part of a line of C++ (``//`` to the end, or inside ``/* */``), outside
    string literals."""
    out, i, quote = [], 0, ""
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif line.startswith("//", i):
            out.append(line[i + 2 :])
            break
        elif line.startswith("/*", i):
            end = line.find("*/", i + 2)
            out.append(line[i + 2 : end if end >= 0 else len(line)])
            i = len(line) if end < 0 else end + 2
            continue
        i += 1
    return " ".join(out)


def suppress(findings: Sequence[F]) -> tuple[list[F], list[F]]:
    """``findings`` split into those kept and those a comment on their line ignores."""
    lines: dict[str, list[str] | None] = {}
    kept: list[F] = []
    dropped: list[F] = []
    for f in findings:
        rules = None
        if not f.is_error and f.file and f.line:
            text = lines.get(f.file, [])
            if text == []:
                text = lines[f.file] = _read(f.file)
            if text is not None and 0 < f.line <= len(text):
                rules = ignored_rules(text[f.line - 1])
        if rules is not None and _matches(rules, (f.rule, f.name)):
            dropped.append(f)
        else:
            kept.append(f)
    return kept, dropped


def _matches(rules: frozenset[str], names: Iterable[str]) -> bool:
    return "*" in rules or any(n.upper() in rules for n in names)


def _read(path: str) -> list[str] | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
