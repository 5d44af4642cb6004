"""Running the enabled rules on one analysis (what ``analyze`` and ``gate`` call)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from gpuadvise.rules import (
    Finding,
    RulesRun,
    evaluate_rules,
    load_registry,
    rank_findings,
)
from gpuadvise.rules.config import Config, config_for

__all__ = ["findings_json", "rules_config", "run_rules", "run_rules_report"]



# ---------------------------------------------------------------------------------------------
# What analyze calls


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


def run_rules(
    analysis: Any, config: Config | None = None, *, lazy_models: bool = True
) -> list[Finding]:
    """The ranked findings of the enabled rules on one ``StaticAnalysis`` (error rows included:
    a rule that raised is one finding with ``error`` set). ``config`` None: the configuration
    discovered from the kernel's source. Trace-based models come from ``analysis.memory``, or
    are computed here when a rule needs them (unless ``lazy_models`` is False)."""
    return list(run_rules_report(analysis, config, lazy_models=lazy_models).findings)


def run_rules_report(
    analysis: Any, config: Config | None = None, *, lazy_models: bool = True
) -> RulesRun:
    """Like :func:`run_rules`, with the rules run and the notes on rules skipped."""
    if config is None:
        config = config_for(getattr(analysis.spec, "source", None))
    registry = load_registry(config.rules_dirs)
    return evaluate_rules(analysis, config, registry=registry, lazy_models=lazy_models)


def findings_json(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    """The ``findings`` list of ``analyze --json``: ranked, one dict per finding."""
    return [f.to_dict() for f in rank_findings(findings)]










# ---------------------------------------------------------------------------------------------
# gpuadvise rules








# ---------------------------------------------------------------------------------------------
# gpuadvise explain RULE




