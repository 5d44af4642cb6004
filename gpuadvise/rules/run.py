"""What ``analyze`` and ``gate`` ask of the rules package before and after the run: the checked
configuration, and the findings as JSON. The run itself: :func:`gpuadvise.rules.evaluate.evaluate_rules`
on a context the analyze layer builds (``gpuadvise.analyze.evaluate``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from gpuadvise.rules.config import Config, config_for
from gpuadvise.rules.findings import Finding
from gpuadvise.rules.ranking import rank_findings
from gpuadvise.rules.registry import load_registry

__all__ = ["findings_json", "rules_config"]


def rules_config(
    source: str | os.PathLike[str] | None,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    rules_dirs: Sequence[str] = (),
) -> Config:
    """The configuration ``analyze`` runs the rules with, checked before anything is compiled:
    broken rule files, unknown selectors, rules or options fail here (exit code 2)."""
    config = config_for(source, select=select, ignore=ignore, rules_dirs=rules_dirs)
    registry = load_registry(config.rules_dirs)
    registry.check_config(config)
    registry.selected(config)
    return config


def findings_json(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    """The ``findings`` list of ``analyze --json``: ranked, one dict per finding."""
    return [f.to_dict() for f in rank_findings(findings)]
