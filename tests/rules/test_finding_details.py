"""Every bundled rule's findings on the kernel cases survive a JSON round trip exactly, details
included (``Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f``), and the rule's
``estimate`` and ``transform`` give the same result on the round-tripped finding as on the
original: the details hold everything they need beside the context (issue 14, item 4)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from test_rules_golden import CASE_PARAMS, TRACE_CTAS, case_run

import gpuadvise.rules as rule_api
import gpuadvise.rules.registry as rule_registry
from gpuadvise.rules.config import Config
from gpuadvise.rules.evaluate import finding_estimate, no_slowdown

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]


def _json(value: Any) -> str | None:
    """An Estimate's or a Variant's JSON (NaN-safe), None for None."""
    return None if value is None else json.dumps(value.to_dict(), sort_keys=True)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_details_round_trip_and_drive_estimate_and_transform(case: tuple[str, str]) -> None:
    registry = rule_registry.load_registry()
    cfg = Config(trace_ctas=TRACE_CTAS)
    context, run = case_run(case, "details")  # the golden test's run of the case
    assert not [f for f in run.findings if f.is_error], [f.error for f in run.findings]
    for f in run.findings:
        assert isinstance(f.details, rule_api.FindingDetails), (f.rule, type(f.details))
        text = json.dumps(f.to_dict(), allow_nan=False)
        back = rule_api.Finding.from_dict(json.loads(text), registry)
        assert back == f, f.rule
        assert type(back.details) is type(f.details)
        assert json.dumps(back.to_dict(), allow_nan=False) == text
        rule = registry.get(f.rule)
        ctx = context.for_rule(registry.options_for(rule, cfg), registry.severity_for(rule, cfg))
        # the estimate as the engine makes it (the launch model's check, then no speedup
        # below 1), from the round-tripped details
        est = no_slowdown(replace(back, estimated_speedup=finding_estimate(rule, ctx, back)))
        assert _json(est.estimated_speedup) == _json(f.estimated_speedup), f.rule
        assert _json(rule.transform(ctx, back)) == _json(f.variant), f.rule
