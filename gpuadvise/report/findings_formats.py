"""``analyze``'s findings in the formats CI systems read: SARIF 2.1.0, JUnit XML, GitHub workflow
annotations, Markdown. The same writers ``gate`` uses (report/sarif.py, junit.py, github.py,
markdown.py), fed with :meth:`gpuadvise.rules.Finding.to_report_item`."""

from __future__ import annotations

import os
from typing import Any

from gpuadvise.items import ReportItem

FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")


def render_findings(fmt: str, checked: Any, kernel: str, root: str | None = None) -> str:
    """``checked``: a rules.RulesRun. ``root``: paths are made relative to it (default: cwd).

    An incomplete run (rules skipped because the trace stopped, say) says so first among the
    run's notes in every format (a SARIF notification, a JUnit suite property, a GitHub
    warning, a Markdown warning), and each rule it skipped is a skipped item (a JUnit
    ``<skipped>`` test case, a Markdown row); the same note repeated is given once."""
    root = root or os.getcwd()
    items = [f.to_report_item(root) for f in checked.findings]
    items += skipped_items(checked, kernel)
    incomplete = getattr(checked, "incomplete_text", None)
    notes = list(dict.fromkeys([*([incomplete] if incomplete else []), *checked.notes]))
    if fmt == "sarif":
        from gpuadvise.report.sarif import sarif_dumps, sarif_log
        from gpuadvise.rules import load_registry

        rules = [r.report_rule() for r in load_registry()]
        return sarif_dumps(sarif_log(items, rules=rules, notifications=notes))
    if fmt == "junit":
        from gpuadvise.report.junit import junit_xml

        return junit_xml(items, name=f"gpuadvise analyze {kernel}", notes=notes)
    if fmt == "github":
        from gpuadvise.report.github import github_annotations

        # an incomplete run is a warning on the pull request; other run notes are log lines
        return github_annotations(
            items,
            notes=[incomplete] if incomplete else [],
            log=[n for n in notes if n != incomplete],
        )
    if fmt == "markdown":
        from gpuadvise.report.markdown import items_markdown

        return items_markdown(items, title=f"gpuadvise analyze: {kernel}", notes=notes)
    raise ValueError(fmt)


def skipped_items(checked: Any, kernel: str) -> list[ReportItem]:
    """A report item (outcome ``skip``, level ``none``: no SARIF result, no GitHub annotation)
    for each rule ``checked`` skipped for a reason the user did not choose."""
    return [
        ReportItem(
            rule_id=s.rule,
            level="none",
            message=f"{s.rule} ({s.name}) not evaluated: {s.why} (the run's notes say more)",
            title=f"{s.rule} not evaluated",
            group=kernel,
            outcome="skip",
            properties={"rule_name": s.name, "skipped": s.why},
        )
        for s in getattr(checked, "incomplete", ())
    ]
