"""SARIF 2.1.0, and the small "report item" shape every machine-readable writer takes.

A :class:`ReportItem` is one thing worth telling a CI system about: a rule id, a level, a message
and, when known, a source location. ``gate`` turns each case x metric comparison into one;
``analyze`` can turn each rule finding into one. The writers (:mod:`.sarif`, :mod:`.junit`,
:mod:`.github`, :mod:`.markdown`) only ever see items, so they serve both commands.

SARIF notes:

- Results are emitted for items whose level is ``error``, ``warning`` or ``note``; ``none`` items
  (passes) are left out unless ``include_passing``, because code-scanning services turn every
  result into an alert. Passing items are written with ``kind: "pass"`` and ``level: "none"``
  (SARIF 2.1.0 section 3.27.9: a non-``fail`` kind requires level ``none``).
- File paths are written relative to ``%SRCROOT%`` (the repository root), which is what GitHub
  code scanning expects, percent-encoded as URI references require (a space is ``%20``);
  ``region.startLine`` only when the line is known.
- ``partialFingerprints`` hold a hash of the rule, group, name and file (not the line, which moves
  with unrelated edits), so that an alert keeps its identity from one run to the next.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from gpuadvise import __version__
from gpuadvise.items import Level, Outcome, ReportItem, ReportRule
from gpuadvise.report.safe_text import guard

__all__ = [
    "SARIF_SCHEMA",
    "SARIF_VERSION",
    "Level",
    "Outcome",
    "ReportItem",
    "ReportRule",
    "sarif_dumps",
    "sarif_log",
]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "%SRCROOT%"


_LEVELS: tuple[str, ...] = ("error", "warning", "note", "none")
_OUTCOMES: tuple[str, ...] = ("fail", "error", "skip", "pass")


def _rule_name(rule_id: str) -> str:
    """``GATE-spill-bytes`` -> ``GateSpillBytes`` (SARIF names are Pascal-case by convention)."""
    return "".join(part[:1].upper() + part[1:] for part in rule_id.replace("_", "-").split("-"))


def _json_safe(value: Any) -> Any:
    """Property values as JSON allows them: non-finite floats become None."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def _result(item: ReportItem, rule_index: int) -> dict[str, Any]:
    passing = item.level == "none"
    res: dict[str, Any] = {
        "ruleId": item.rule_id,
        "ruleIndex": rule_index,
        "level": item.level,
        "message": {"text": item.message},
        "locations": [],
        "partialFingerprints": {"gpuadvise/v1": item.fingerprint()},
    }
    if passing:
        res["kind"] = "pass"
    if item.file:
        uri = quote(item.file.replace("\\", "/"), safe="/:@!$&'()*+,;=-._~")
        physical: dict[str, Any] = {"artifactLocation": {"uri": uri, "uriBaseId": SRCROOT}}
        if item.line is not None:
            physical["region"] = {"startLine": item.line}
        location: dict[str, Any] = {"physicalLocation": physical}
        if item.group:
            location["logicalLocations"] = [{"name": item.group, "kind": "function"}]
        res["locations"].append(location)
    props = dict(item.properties)
    if item.group:
        props.setdefault("group", item.group)
    if item.name:
        props.setdefault("name", item.name)
    if props:
        res["properties"] = _json_safe(props)
    return res


def sarif_log(
    items: Iterable[ReportItem],
    *,
    rules: Sequence[ReportRule] = (),
    tool_name: str = "gpuadvise",
    tool_version: str = __version__,
    information_uri: str | None = None,
    notifications: Sequence[str] = (),
    automation_id: str | None = None,
    include_passing: bool = False,
    execution_successful: bool = True,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run.

    ``rules`` describe the rule ids the items use; an id with no description gets a minimal one
    (SARIF requires every ``ruleIndex`` to point into ``tool.driver.rules``). ``notifications``
    are run-level warnings (a baseline recorded on another device ...), written as
    ``invocations[0].toolExecutionNotifications``.
    """
    chosen = [i for i in items if include_passing or i.level != "none"]
    known = {r.id: r for r in rules}
    order: list[str] = [r.id for r in rules]
    for item in chosen:
        if item.rule_id not in known:
            known[item.rule_id] = ReportRule(
                item.rule_id, _rule_name(item.rule_id), item.title or item.rule_id
            )
            order.append(item.rule_id)
    index = {rule_id: i for i, rule_id in enumerate(order)}
    driver: dict[str, Any] = {
        "name": tool_name,
        "version": tool_version,
        "semanticVersion": tool_version,
        "rules": [known[r].to_sarif() for r in order],
    }
    if information_uri:
        driver["informationUri"] = information_uri
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "invocations": [
            {
                "executionSuccessful": execution_successful,
                "toolExecutionNotifications": [
                    {"level": "warning", "message": {"text": text}} for text in notifications
                ],
            }
        ],
        "columnKind": "unicodeCodePoints",
        "results": [_result(item, index[item.rule_id]) for item in chosen],
    }
    if automation_id:
        run["automationDetails"] = {"id": automation_id}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def sarif_dumps(log: Mapping[str, Any]) -> str:
    return guard(json.dumps(log, indent=2, ensure_ascii=False) + "\n", "json")
