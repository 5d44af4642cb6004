"""``gpuadvise rules`` and ``gpuadvise explain RULE``.

Plain text on stdout (no rich for the list: it must start fast), a rule's documentation
rendered from Markdown; JSON with ``--json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpuadvise.report.json_report import dumps
from gpuadvise.report.output import write_stdout
from gpuadvise.report.rules_text import explain_markdown, rules_table
from gpuadvise.report.safe_text import guard
from gpuadvise.rules.config import Config, config_for
from gpuadvise.rules.registry import Registry, load_registry

SCHEMA_VERSION = 1


def _registry(rules_dirs: Sequence[str]) -> tuple[Registry, Config]:
    config = config_for(Path.cwd(), rules_dirs=rules_dirs)
    return load_registry(config.rules_dirs), config


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
        write_stdout(dumps(doc) + "\n")
        return 0
    lines = rules_table([registry.rule_doc(r) for r in registry], enabled)
    lines.append("")
    extra = f", configuration {config.path}" if config.path else ""
    lines.append(
        f"{len(registry)} rules ({len(enabled)} enabled{extra}). "
        "`gpuadvise explain GA201` prints one rule's documentation."
    )
    write_stdout(guard("\n".join(lines) + "\n", "text"))  # titles and paths of users' rules
    return 0


def run_explain(rule_id: str, as_json: bool = False, rules_dirs: Sequence[str] = ()) -> int:
    """``gpuadvise explain RULE``: RULE is an id (GA201) or a name (bank-conflicts). An unknown
    one is a UsageError (exit code 2) naming the closest rules."""
    registry, _ = _registry(rules_dirs)
    rule = registry.get(rule_id)
    if as_json:
        doc = {"schema_version": SCHEMA_VERSION, **rule.describe()}
        doc["cases"] = [str(p) for p in registry.cases.get(rule.id, ())]
        write_stdout(dumps(doc) + "\n")
    else:
        from gpuadvise.report import console  # rich: only here, listing rules starts fast

        console.markdown(explain_markdown(registry.rule_doc(rule)))
    return 0
