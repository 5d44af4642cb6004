"""A source line and a fix as the reports show them (no rule, no model: the renderers of the
report import this, :mod:`gpuadvise.report.rules_text` re-exports it)."""

from __future__ import annotations

from gpuadvise.markers import EXPECT_RE

__all__ = ["fix_kind", "shown_source", "without_marker"]


def without_marker(text: str) -> str:
    """``text`` without a bundled kernel's ``// expect: GA201`` marker at its end (the test
    suite's annotation of the line a rule must flag, not code a user needs to read)."""
    m = EXPECT_RE.search(text)
    if m is not None and not text[m.end() :].strip():
        return text[: m.start()].rstrip()
    return text


def shown_source(text: str | None) -> str:
    """A source line as a report's source column shows it: stripped, without its marker."""
    return without_marker(text).strip() if text else ""


def fix_kind(safety: str | None, verified: bool | None) -> str:
    """What a finding's fix is, in the report's words: ``automatic, verified`` only when its
    outputs were checked against the kernel's in a run (on the GPU); ``automatic, unverified``
    when nothing ran it (no GPU); ``proxy`` and ``advice`` (a display-only diff)."""
    if safety is None:
        return "no fix"
    if safety == "automatic-and-verified":
        if verified is True:
            return "automatic, verified"
        if verified is False:
            return "automatic, outputs differ"
        return "automatic, unverified"
    return "proxy" if safety == "proxy" else "advice"
