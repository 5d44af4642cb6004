"""The report item types shared by the domain (rule findings, gate results) and the writers.

A :class:`ReportItem` is one thing worth telling a CI system about: a rule id, a level, a message
and, when known, a source location. ``gate`` turns each case x metric comparison into one;
``analyze`` turns each rule finding into one. The writers in :mod:`gpuadvise.report` (SARIF,
JUnit, GitHub annotations, Markdown) only ever see items, so they serve both commands. This module
sits at the bottom of the layers so that domain code never imports the report package.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Level", "Outcome", "ReportItem", "ReportRule"]


Level = Literal["error", "warning", "note", "none"]


Outcome = Literal["fail", "error", "skip", "pass"]


_LEVELS: tuple[str, ...] = ("error", "warning", "note", "none")


_OUTCOMES: tuple[str, ...] = ("fail", "error", "skip", "pass")


@dataclass(frozen=True)
class ReportItem:
    """One reportable result.

    ``level`` is SARIF's (error / warning / note / none). ``outcome`` is the test-report view
    (JUnit): ``fail`` (a failure), ``error`` (the tool could not decide), ``skip`` (not evaluated,
    or undecided) or ``pass``; when None it follows the level (error/warning: fail, else pass).
    ``group`` collects items (the case or kernel: a JUnit test suite, a Markdown section) and
    ``name`` names the item inside it (the metric: a JUnit test case; default ``rule_id``).
    ``file`` is relative to the repository root, with ``/`` separators; ``line`` is 1-based.
    """

    rule_id: str
    level: Level
    message: str
    file: str | None = None
    line: int | None = None
    title: str | None = None
    group: str | None = None
    name: str | None = None
    outcome: Outcome | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.level not in _LEVELS:
            raise ValueError(f"level must be one of {_LEVELS} (got {self.level!r})")
        if self.outcome is not None and self.outcome not in _OUTCOMES:
            raise ValueError(f"outcome must be one of {_OUTCOMES} (got {self.outcome!r})")
        if self.line is not None and self.line < 1:
            raise ValueError(f"line must be 1 or more (got {self.line})")

    @property
    def effective_outcome(self) -> Outcome:
        if self.outcome is not None:
            return self.outcome
        return "fail" if self.level in ("error", "warning") else "pass"

    @property
    def effective_name(self) -> str:
        return self.name or self.rule_id

    def fingerprint(self) -> str:
        """A stable identity: rule, group, name and file (not the line, nor the message)."""
        key = "\x1f".join((self.rule_id, self.group or "", self.effective_name, self.file or ""))
        return hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ReportRule:
    """A rule as SARIF's ``tool.driver.rules[]`` describes it."""

    id: str
    name: str
    short_description: str
    full_description: str = ""
    help_text: str = ""
    default_level: Level = "error"
    help_uri: str | None = None
    tags: tuple[str, ...] = ()

    def to_sarif(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "shortDescription": {"text": self.short_description},
            "fullDescription": {"text": self.full_description or self.short_description},
            "defaultConfiguration": {"level": self.default_level},
        }
        if self.help_text:
            d["help"] = {"text": self.help_text}
        if self.help_uri:
            d["helpUri"] = self.help_uri
        if self.tags:
            d["properties"] = {"tags": list(dict.fromkeys(self.tags))}
        return d
