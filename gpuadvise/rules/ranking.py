"""The report order of findings (:func:`rank_findings`): by measured speedup, else by
estimate, and each finding says which (``rank_basis``); a cause goes right above the symptom it
explains (:func:`explains`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from gpuadvise.rules.findings import Finding

__all__ = ["explains", "rank_findings"]


_SEVERITY_ORDER = {"error": 0, "warning": 1, "note": 2}
_BASIS_ORDER = {"measured": 0, "estimated": 1, "none": 2}
# a fix the tool applies outranks a proxy-measured one, which outranks advice, at equal value
_FIX_ORDER = {"automatic-and-verified": 0, "proxy": 1, "display-only": 2}


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in report order: measured ones by measured speedup, then estimated ones by their
    estimate, then those with no number; error rows last. Ties: a finding with an automatic fix
    before a proxy-measured one, before advice (a display-only diff), before none; then
    severity, rule id, line. Last, a cause goes right above the symptom it explains
    (:func:`explains`: its fix rewrites the symptom's line, GA202's sequential addressing the
    line of GA201's conflicts), wherever the numbers put it.

    A measured speedup outranks any estimate (an estimate is often an upper bound); each finding's
    ``rank_basis`` says which number placed it.
    """

    def key(f: Finding) -> tuple[Any, ...]:
        return (
            f.is_error,
            _BASIS_ORDER[f.rank_basis],
            -(f.rank_speedup or 0.0),
            _FIX_ORDER.get(f.variant.safety, 3) if f.variant is not None else 3,
            _SEVERITY_ORDER.get(f.severity, 3),
            f.rule,
            f.line or 0,
        )

    return _causes_first(sorted(findings, key=key))


def explains(cause: Finding, symptom: Finding) -> bool:
    """Whether ``cause`` explains ``symptom``: they are at the same file, ``cause``'s fix
    rewrites (removes or replaces) the line ``symptom`` is reported at, and ``symptom``'s own fix
    does not rewrite ``cause``'s line (two fixes of one statement explain each other: neither is
    the cause). Read from the fixes' diffs, not from a table of rule pairs: GA202's sequential
    addressing rewrites the line of GA201's bank conflicts, GA306's shared-tile transpose the
    strided access of GA301."""
    from gpuadvise.source.patch import changed_lines

    if cause.is_error or symptom.is_error or cause.rule == symptom.rule:
        return False
    if cause.variant is None or not cause.variant.diff or symptom.line is None:
        return False
    if cause.file is None or symptom.file is None:
        return False
    if os.path.normpath(cause.file) != os.path.normpath(symptom.file):
        return False
    if symptom.line not in changed_lines(cause.variant.diff):
        return False
    back = symptom.variant.diff if symptom.variant is not None else None
    return not (back and cause.line is not None and cause.line in changed_lines(back))


def _causes_first(ordered: list[Finding]) -> list[Finding]:
    """``ordered`` with every cause moved right above the first symptom it explains that is
    ranked above it (:func:`explains`); the rest keep their order."""
    out = list(ordered)
    for _ in range(len(out) ** 2 + 1):  # each move brings a cause up; a cycle cannot loop
        move = next(
            (
                (i, j)
                for i, c in enumerate(out)
                for j in range(i)
                if explains(c, out[j]) and not explains(out[j], c)
            ),
            None,
        )
        if move is None:
            break
        i, j = move
        out.insert(j, out.pop(i))
    return out
