"""``gpuadvise rules``, ``gpuadvise explain RULE`` and :func:`run_rules` (what ``analyze`` calls).

Plain text on stdout (no rich here: listing rules must start fast); JSON with ``--json``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpuadvise.config import Config, config_for
from gpuadvise.rules import (
    MODELS,
    Finding,
    Registry,
    Rule,
    RulesRun,
    evaluate_rules,
    load_registry,
    rank_findings,
)

__all__ = [
    "explain_text",
    "finding_text",
    "findings_json",
    "rules_config",
    "rules_table",
    "run_explain",
    "run_rules",
    "run_rules_list",
    "run_rules_report",
]

SCHEMA_VERSION = 1


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


def finding_text(f: Finding, index: int | None = None) -> list[str]:
    """A finding as a few plain lines (the console adds colour)."""
    head = f"{index}. " if index is not None else ""
    loc = f.location()
    rel = _rel(loc) if loc else ""
    lines = [f"{head}{f.rule} {f.name} [{f.severity}] {rel}".rstrip()]
    lines.append(f"   {f.message}")
    if f.is_error:
        return lines
    if f.evidence:
        ev = ", ".join(_evidence(e) for e in f.evidence)
        lines.append(f"   evidence: {ev}")
    lines.append(f"   speedup: {f.speedup_label()}")
    if len(f.trials) > 1 or any(t.measurement is None for t in f.trials):
        lines.append("   tried: " + "; ".join(_trial(t) for t in f.trials))
    if f.variant is not None:
        label = f" {f.variant.label}" if f.variant.label else ""
        lines.append(f"   fix ({f.variant.safety}{label}): {f.variant.description}")
        if f.variant.diff:
            lines += ["   " + ln for ln in f.variant.diff.rstrip("\n").splitlines()]
        elif f.variant.proxy is not None:
            p = f.variant.proxy
            lines.append(
                f"   proxy kernels: {p.before} (as written) and {p.after} (changed); "
                "--write-variants DIR saves them"
            )
    return lines


def _trial(t: Any) -> str:
    name = t.label or "variant"
    if t.measurement is not None:
        m = t.measurement
        ci = f" [{m.ci_low:.3f}..{m.ci_high:.3f}]" if m.ci_low is not None else ""
        return f"{name} {m.speedup:.3f}x{ci}"
    return f"{name}: {t.note or 'not measured'}"


def _evidence(e: Any) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    text = f"{e.metric} = {fmt(e.value)}{(' ' + e.unit) if e.unit else ''}"
    if e.threshold is not None and e.op:
        text += f" ({e.op} {fmt(e.threshold)})"
    return text


def _rel(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


# ---------------------------------------------------------------------------------------------
# gpuadvise rules


def _registry(rules_dirs: Sequence[str]) -> tuple[Registry, Config]:
    config = config_for(Path.cwd(), rules_dirs=rules_dirs)
    return load_registry(config.rules_dirs), config


def rules_table(registry: Registry, enabled: set[str] | None = None) -> list[str]:
    """One line per rule: id, name, models, title (``-`` before disabled ones)."""
    wid = max((len(r.name) for r in registry), default=4)
    wmod = max((len(",".join(r.models)) for r in registry), default=6)
    out = []
    for r in registry:
        mark = " " if enabled is None or r.id in enabled else "-"
        out.append(
            f"{mark}{r.id}  {r.name:<{wid}}  {','.join(r.models):<{wmod}}  {r.title}".rstrip()
        )
    return out


def run_rules_list(
    as_json: bool = False,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    rules_dirs: Sequence[str] = (),
) -> int:
    """``gpuadvise rules``: every rule; with ``--select/--ignore`` (or a configuration found
    from the current directory), those disabled are marked ``-``."""
    config = config_for(Path.cwd(), select=select, ignore=ignore, rules_dirs=rules_dirs)
    registry = load_registry(config.rules_dirs)
    registry.check_config(config)
    enabled = {r.id for r in registry.selected(config)}
    if as_json:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "rules": [{**r.describe(), "enabled": r.id in enabled} for r in registry],
            "config": None if config.path is None else str(config.path),
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    lines = rules_table(registry, enabled)
    lines.append("")
    extra = f", configuration {config.path}" if config.path else ""
    lines.append(
        f"{len(registry)} rules ({len(enabled)} enabled{extra}). "
        "`gpuadvise explain GA201` prints one rule's documentation."
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


# ---------------------------------------------------------------------------------------------
# gpuadvise explain RULE


def explain_text(rule: Rule, registry: Registry | None = None) -> str:
    """One rule's documentation: header, options with defaults, kernel cases, the docstring."""
    out = [f"{rule.id} {rule.name}: {rule.title}", ""]
    models = ", ".join(rule.models) or "none"
    out.append(f"Severity: {rule.severity}. Models: {models}.")
    for m in rule.models:
        out.append(f"  {m}: {MODELS[m]}")
    if rule.options:
        out.append(f"Options (defaults; set them in [tool.gpuadvise.rules.{rule.id}]):")
        for k, v in rule.options.items():
            out.append(f"  {k} = {json.dumps(v)}")
    else:
        out.append("Options: none.")
    if registry is not None and registry.cases.get(rule.id):
        cases = ", ".join(_rel(str(p)) for p in registry.cases[rule.id])
        out.append(f"Kernel cases: {cases}")
    if rule.origin is not None:
        out.append(f"Defined in: {_rel(str(rule.origin))}")
    out.append("")
    out.append(rule.doc())
    return "\n".join(out).rstrip() + "\n"


def run_explain(rule_id: str, as_json: bool = False, rules_dirs: Sequence[str] = ()) -> int:
    """``gpuadvise explain RULE``: RULE is an id (GA201) or a name (bank-conflicts). An unknown
    one is a UsageError (exit code 2) naming the closest rules."""
    registry, _ = _registry(rules_dirs)
    rule = registry.get(rule_id)
    if as_json:
        doc = {"schema_version": SCHEMA_VERSION, **rule.describe()}
        doc["cases"] = [str(p) for p in registry.cases.get(rule.id, ())]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(explain_text(rule, registry))
    return 0
