"""The report seam (issue 30): what the terminal and the rules' text draw comes from the report's
types, never from the domain modules they used to import."""

from __future__ import annotations

from gpuadvise.model.occupancy import INT_MAX
from gpuadvise.report import console
from gpuadvise.report.rules_text import explain_text, rules_table
from gpuadvise.rules.registry import load_registry


def test_the_terminal_reads_no_limit_as_the_model_writes_it() -> None:
    assert console.INT_MAX == INT_MAX


def test_the_rules_text_is_drawn_from_rule_docs() -> None:
    registry = load_registry()
    docs = [registry.rule_doc(r) for r in registry]
    assert [d.id for d in docs] == list(registry.ids)
    lines = rules_table(docs, {docs[0].id})
    assert lines[0].startswith(f" {docs[0].id}") and lines[1].startswith(f"-{docs[1].id}")
    rule = registry.get("GA308")
    text = explain_text(registry.rule_doc(rule))
    assert text.startswith(f"GA308 {rule.name}: {rule.title}") and rule.doc() in text
