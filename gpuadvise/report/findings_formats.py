"""``analyze``'s findings in the formats CI systems read: SARIF 2.1.0, JUnit XML, GitHub workflow
annotations, Markdown. The same writers ``gate`` uses (report/sarif.py, junit.py, github.py,
markdown.py), fed with :meth:`gpuadvise.rules.Finding.to_report_item`."""

from __future__ import annotations

import os
from typing import Any

FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")


def render_findings(fmt: str, checked: Any, kernel: str, root: str | None = None) -> str:
    """``checked``: a rules.RulesRun. ``root``: paths are made relative to it (default: cwd)."""
    root = root or os.getcwd()
    items = [f.to_report_item(root) for f in checked.findings]
    notes = list(checked.notes)
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

        return github_annotations(items, log=notes)
    if fmt == "markdown":
        from gpuadvise.report.markdown import items_markdown

        return items_markdown(items, title=f"gpuadvise analyze: {kernel}", notes=notes)
    raise ValueError(fmt)
