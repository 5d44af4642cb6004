"""``analyze``'s findings in the formats CI systems read: SARIF 2.1.0, JUnit XML, GitHub workflow
annotations, Markdown. The same writers ``gate`` uses (report/sarif.py, junit.py, github.py,
markdown.py), fed with the report's items (:class:`~gpuadvise.report_types.AnalysisReport`)."""

from __future__ import annotations

from gpuadvise.report_types import AnalysisReport, relative_items


def render_findings(fmt: str, report: AnalysisReport, root: str | None = None) -> str:
    """``root``: paths are made relative to it (default: cwd).

    An incomplete run (rules skipped because the trace stopped, say) says so first among the
    run's notes in every format (a SARIF notification, a JUnit suite property, a GitHub
    warning, a Markdown warning), and each rule it skipped is a skipped item (a JUnit
    ``<skipped>`` test case, a Markdown row); the same note repeated is given once."""
    items = relative_items(report.items, root)
    kernel = report.kernel
    incomplete = report.incomplete
    notes = list(dict.fromkeys([*([incomplete] if incomplete else []), *report.run_notes]))
    if fmt == "sarif":
        from gpuadvise.report.sarif import sarif_dumps, sarif_log

        return sarif_dumps(sarif_log(items, rules=list(report.rules), notifications=notes))
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


def sarif(report: AnalysisReport) -> str:
    return render_findings("sarif", report)


def junit(report: AnalysisReport) -> str:
    return render_findings("junit", report)


def github(report: AnalysisReport) -> str:
    return render_findings("github", report)


def markdown(report: AnalysisReport) -> str:
    return render_findings("markdown", report)
