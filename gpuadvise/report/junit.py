"""JUnit XML: one ``<testcase>`` per report item, one ``<testsuite>`` per group.

The dialect is the common one (Jenkins, GitLab, Azure Pipelines, the GitHub test-report actions,
pytest's ``--junitxml``): ``<testsuites>`` holding ``<testsuite>`` elements with ``tests``,
``failures``, ``errors`` and ``skipped`` counts. An item's outcome (see
:class:`~gpuadvise.report.sarif.ReportItem`) picks the child element:

- ``fail``: ``<failure message=... type=RULE>``
- ``error``: ``<error message=... type=RULE>`` (the tool could not evaluate it)
- ``skip``: ``<skipped message=...>``
- ``pass``: no child.

Every test case also carries its full message in ``<system-out>``, so that reporters which show
only the element's text still show why. Run-level notes (a baseline recorded on another device
...) are ``<property name="warning">`` entries of each suite.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence

from gpuadvise.items import ReportItem
from gpuadvise.report.safe_text import controls, guard, one_line

__all__ = ["junit_xml"]

# XML 1.0 forbids most control characters, even escaped: they are shown as escapes (\x1b).
_XML_BAD = re.compile("[\ufffe\uffff]")


def _clean(text: str) -> str:
    """A message body: its lines kept, other control characters shown as escapes."""
    return _XML_BAD.sub("?", controls(text, keep="\t\n"))


def _one(text: str) -> str:
    """An attribute (a name, a file, a headline): one line, every control shown as an escape."""
    return _XML_BAD.sub("?", one_line(text))


def junit_xml(
    items: Iterable[ReportItem],
    *,
    name: str = "gpuadvise",
    classname_prefix: str = "gpuadvise",
    notes: Sequence[str] = (),
    timestamp: str | None = None,
) -> str:
    """The JUnit XML document for ``items`` (a string with an XML declaration)."""
    groups: dict[str, list[ReportItem]] = {}
    for item in items:
        groups.setdefault(item.group or name, []).append(item)

    root = ET.Element("testsuites", {"name": _one(name)})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for group, members in groups.items():
        counts = {"tests": len(members), "failures": 0, "errors": 0, "skipped": 0}
        suite = ET.SubElement(root, "testsuite", {"name": _one(group)})
        if timestamp:
            suite.set("timestamp", timestamp)
        if notes:
            props = ET.SubElement(suite, "properties")
            for note in notes:
                ET.SubElement(props, "property", {"name": "warning", "value": _one(note)})
        for item in members:
            case = ET.SubElement(
                suite,
                "testcase",
                {
                    "name": _one(item.effective_name),
                    "classname": _one(f"{classname_prefix}.{group}"),
                    "time": "0",
                },
            )
            if item.file:
                case.set("file", _one(item.file))
            if item.line is not None:
                case.set("line", str(item.line))
            outcome = item.effective_outcome
            message = _clean(item.message)
            headline = _one(item.title or item.message)
            if outcome == "fail":
                counts["failures"] += 1
                el = ET.SubElement(case, "failure", {"message": headline, "type": item.rule_id})
                el.text = message
            elif outcome == "error":
                counts["errors"] += 1
                el = ET.SubElement(case, "error", {"message": headline, "type": item.rule_id})
                el.text = message
            elif outcome == "skip":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", {"message": _one(item.message)})
            out = ET.SubElement(case, "system-out")
            out.text = message
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", "0")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", "0")
    ET.indent(root, space="  ")
    doc = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    return guard(doc, "xml")
