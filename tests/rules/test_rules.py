"""The rules engine without a compiler: registry validation, documentation, configuration and
selection, the finding's JSON shape, error rows, and the launch rules on modelled launches."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import gpuadvise.rules as rule_api
import gpuadvise.rules.context as rule_context
import gpuadvise.rules.context as rule_ctx
import gpuadvise.rules.evaluate as rule_evaluate
import gpuadvise.rules.findings as rule_findings
import gpuadvise.rules.ranking as rule_ranking
import gpuadvise.rules.registry as rule_registry
import gpuadvise.rules.rule as rule_class
import gpuadvise.source.text as srctext
from gpuadvise.cli.rules import run_explain
from gpuadvise.devices import preset
from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError
from gpuadvise.model import occupancy as occ
from gpuadvise.model.launch_change import LaunchCheck
from gpuadvise.model.waves import waves_of
from gpuadvise.report.rules_text import explain_text, finding_text
from gpuadvise.rules.config import Config, config_for, find_config, load_config, split_selectors
from gpuadvise.rules.run import findings_json
from gpuadvise.spec.kernel_spec import KernelSpec, LaunchConfig
from gpuadvise.spec.units import Dim3
from gpuadvise.toolchain.resources import KernelInfo, KernelResources

ROOT = Path(__file__).resolve().parents[2]
DOC_OK = '''"""A test rule.

    What it detects
    ---------------
    Something.

    Why it is slow
    --------------
    Because.

    Example
    -------
    kernels/x/x.cu

    Fix
    ---
    Change it.

    How the estimate is made
    ------------------------
    It is not.

    Fix safety
    ----------
    Display-only.
    """'''


@pytest.fixture(scope="module")
def registry() -> rule_registry.Registry:
    return rule_registry.load_registry()


# ---------------------------------------------------------------------------------------------
# A modelled launch (no nvcc): the facts the launch rules read


def fake_analysis(
    tmp: Path,
    block: tuple[int, int, int] = (256, 1, 1),
    grid: tuple[int, int, int] = (4096, 1, 1),
    regs: int = 32,
    smem: int = 0,
    gpu: str = "H100",
    body: str = "    out[threadIdx.x] = 1.0f;\n",
) -> Any:
    src = tmp / "k.cu"
    src.write_text(
        "// a kernel for the rule tests\n"
        'extern "C" __global__ void k(float* out) {\n' + body + "}\n"
    )
    d = preset(gpu)
    launch = LaunchConfig(Dim3(*grid), Dim3(*block), 0)
    spec = KernelSpec(source=src, kernel="k", launch=launch)
    k = occ.KernelResources(
        threads_per_block=launch.block.count,
        regs_per_thread=regs,
        static_smem_bytes=smem,
        barriers=1,
    )
    result = occ.max_active_blocks(d, k)
    return rule_context.KernelFacts(
        spec=spec,
        device=d,
        # ptxas's report as the launch rules read it: GA101 compares a register cap's spills
        # with the kernel's own (none here)
        kernel=KernelInfo("k", "k", "k(float*)", _resources(regs, smem)),
        occupancy_input=k,
        occupancy=result,
        next_steps=tuple(occ.next_steps(d, k)),
        waves=waves_of(launch.grid.count, result.active_blocks_per_sm, d.sm_count),
        # the kernel reads its thread index (GA103 leaves a kernel that does not: more threads
        # would be copies of the same work)
        ptx=FAKE_PTX,
    )


FAKE_PTX = """.visible .entry k(
	.param .u64 k_param_0
)
{
	mov.u32 	%r1, %tid.x;
	ret;
}
"""


def _resources(regs: int, smem: int = 0, spills: int = 0) -> KernelResources:
    return KernelResources(
        registers=regs,
        static_smem_bytes=smem,
        local_bytes=0,
        spill_store_bytes=spills,
        spill_load_bytes=0,
        const_bytes=0,
        barriers=1,
    )


class FakeServices:
    """The toolchain and emulator services as the launch rules ask them, without nvcc: every
    changed launch computes the same (``same``), and a register cap builds with ``spills``
    bytes of spill stores. The rules propose a launch or a cap only after asking (issue 27);
    tests/rules/test_launch_and_register_advice.py asks the real services on compiled
    kernels."""

    def __init__(self, same: bool = True, spills: int = 0) -> None:
        self.same = same
        self.spills = spills
        self.asked: list[tuple[str, Any]] = []

    def compare_launch(
        self, grid: tuple[int, int, int], block: tuple[int, int, int], then: Any = ()
    ) -> LaunchCheck:
        self.asked.append(("launch", (grid, block)))
        if self.same:
            return LaunchCheck(True, "", "whole launch")
        return LaunchCheck(False, "the outputs differ", "whole launch")

    def compile_candidate(self, source_text: str | None = None, nvcc_flags: Any = ()) -> Any:
        self.asked.append(("compile", tuple(nvcc_flags)))
        cap = next((int(f.split("=")[1]) for f in nvcc_flags if "maxrregcount" in f), 255)
        return KernelInfo("k", "k", "k(float*)", _resources(cap, spills=self.spills))


NOT_TRACED = rule_context.ModelResults(
    unavailable=dict.fromkeys(
        rule_ctx.TRACE_MODELS, "the emulator could not trace this kernel: no PTX"
    )
)


def run(
    facts: rule_context.KernelFacts,
    config: Config | None = None,
    registry: rule_registry.Registry | None = None,
    services: Any = None,
):
    """The rules on a modelled launch: no compiled kernel, so no trace; the services are
    :class:`FakeServices` unless given."""
    return rule_evaluate.evaluate_rules(
        rule_api.RuleContext(facts, NOT_TRACED, services or FakeServices()),
        config or Config(),
        registry=registry,
    )


def ids(run_: rule_evaluate.RulesRun) -> list[str]:
    return [f.rule for f in run_.findings if not f.is_error]


# ---------------------------------------------------------------------------------------------
# The bundled rules


def test_bundled_rules_load_with_unique_ids_names_and_cases(registry):
    assert {"GA101", "GA102", "GA103", "GA201", "GA202", "GA203"} <= set(registry.ids)
    assert list(registry.ids) == sorted(registry.ids)
    assert len({r.name for r in registry}) == len(registry)
    for r in registry:
        assert rule_class.validate_rule(type(r), r.origin) == []
        assert registry.cases[r.id], r.id
        assert r.origin is not None and r.origin.name.startswith(r.id.lower() + "_")


@pytest.mark.parametrize("rule_id", rule_registry.load_registry().ids)
def test_explain_prints_every_section_and_the_options(registry, rule_id, capsys):
    rule = registry.get(rule_id)
    text = explain_text(registry.rule_doc(rule))
    assert text.startswith(f"{rule.id} {rule.name}: {rule.title}")
    for heading in rule_class.DOC_HEADINGS:
        assert heading in text
    for name, default in rule.options.items():
        assert f"{name} = {json.dumps(default)}" in text
    assert run_explain(rule.name) == 0  # by name too
    assert capsys.readouterr().out.startswith(f"{rule.id} {rule.name}")
    assert run_explain(rule_id.lower(), as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["id"] == rule_id and set(doc["sections"]) >= set(rule_class.DOC_HEADINGS)
    assert doc["cases"]


def test_explain_unknown_rule_names_close_matches_and_exits_2():
    with pytest.raises(UsageError) as exc:
        run_explain("GA210")
    assert exc.value.exit_code == 2
    assert "did you mean GA201 or" in exc.value.one_line()  # a swap of two digits ranks first
    with pytest.raises(UsageError) as exc:
        run_explain("bank-conflict")
    assert "bank-conflicts" in exc.value.one_line()


def test_rules_listing(capsys):
    from gpuadvise.cli.rules import run_rules_list

    assert run_rules_list() == 0
    out = capsys.readouterr().out
    for rid in ("GA101", "GA201", "GA203"):
        assert rid in out
    assert run_rules_list(select=["GA2"], ignore=["GA203"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith(" GA201") for ln in lines)
    assert any(ln.startswith("-GA203") for ln in lines)
    assert any(ln.startswith("-GA101") for ln in lines)
    assert run_rules_list(as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in doc["rules"]][:3] == ["GA101", "GA102", "GA103"]
    assert all(r["enabled"] for r in doc["rules"])


def test_report_rule_and_report_item(registry, tmp_path):
    from gpuadvise.report.sarif import sarif_log

    rule = registry.get("GA102")
    rr = rule.report_rule()
    assert rr.id == "GA102" and rr.name == "TailEffect" and rr.help_text.startswith("A grid")
    a = fake_analysis(tmp_path, grid=(1320, 1, 1))
    found = run(a).findings
    item = found[0].to_report_item(root=tmp_path)
    assert item.rule_id == "GA102" and item.file == "k.cu" and item.line == 2
    log = sarif_log([item], rules=[r.report_rule() for r in registry])
    res = log["runs"][0]["results"][0]
    assert res["ruleId"] == "GA102" and res["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 2
    }


# ---------------------------------------------------------------------------------------------
# The finding's JSON shape

_EVIDENCE_KEYS = {"metric": str, "value": (int, float, str, type(None))}


def check_finding_schema(d: dict[str, Any]) -> None:
    """The documented shape of one entry of ``analyze --json``'s ``findings``."""
    want: dict[str, Any] = {
        "rule": str,
        "name": str,
        "title": str,
        "kernel": (str, type(None)),
        "file": (str, type(None)),
        "line": (int, type(None)),
        "severity": str,
        "message": str,
        "evidence": list,
        "estimated_speedup": (dict, type(None)),
        "measured_speedup": (dict, type(None)),
        "verified": (bool, type(None)),
        "variant": (dict, type(None)),
        "rank_basis": str,
        "error": (str, type(None)),
        "trials": list,
        "recommend_only_if_faster": bool,
        "details": (dict, type(None)),
    }
    assert set(d) == set(want), set(d) ^ set(want)
    if d["details"] is not None:  # the rule's details class and its fields
        assert set(d["details"]) == {"type", "fields"} and isinstance(d["details"]["fields"], dict)
    for k, t in want.items():
        assert isinstance(d[k], t), (k, d[k])
    assert d["severity"] in rule_class.SEVERITIES
    assert d["rank_basis"] in ("measured", "estimated", "none")
    for e in d["evidence"]:
        assert set(e) == {"metric", "value", "threshold", "op", "unit"}
        assert isinstance(e["metric"], str)
    est = d["estimated_speedup"]
    if est is not None:
        assert set(est) == {"speedup", "kind", "method", "inputs"}
        assert est["kind"] in ("point", "upper-bound", "none")
        assert (est["speedup"] is None) == (est["kind"] == "none")
        assert isinstance(est["method"], str) and est["method"]
    if d["measured_speedup"] is not None:
        assert set(d["measured_speedup"]) >= {"speedup", "baseline_ms", "variant_ms", "device"}
    var = d["variant"]
    if var is not None:
        assert set(var) == {
            "safety",
            "description",
            "label",
            "diff",
            "nvcc_flags",
            "defines",
            "launch",
            "proxy",
            "alternatives",
            "totals",
            "launch_specific",
            "needs_measurement",
        }
        assert isinstance(var["launch_specific"], bool)
        assert isinstance(var["needs_measurement"], bool)
        assert var["totals"] is None or set(var["totals"].values()) <= {"+", "max", "min"}
        assert var["safety"] in rule_findings.SAFETY_CLASSES
        assert (var["proxy"] is None) == (var["safety"] != "proxy")
        for alt in var["alternatives"]:
            assert alt["alternatives"] == []
    for t in d["trials"]:
        assert set(t) == {"label", "description", "measured_speedup", "verified", "note"}
        assert (t["measured_speedup"] is None) == (t["verified"] is not True)
        assert var["diff"] is None or var["diff"].startswith("--- ")
    json.dumps(d, allow_nan=False)


def test_finding_json_schema_and_round_trip(tmp_path):
    a = fake_analysis(tmp_path, block=(10, 10, 1), grid=(1320, 1, 1), smem=60000)
    found = run(a).findings
    assert {"GA101", "GA102", "GA103"} <= {f.rule for f in found}
    docs = findings_json(found)
    for f, d in zip(found, docs, strict=True):
        check_finding_schema(d)
        assert d["measured_speedup"] is None and d["verified"] is None  # never claimed here
        back = rule_api.Finding.from_dict(json.loads(json.dumps(d)))
        assert back.to_dict() == d
        assert back == f and isinstance(back.details, rule_api.FindingDetails)


def test_details_of_an_unknown_type_round_trip_as_a_dict():
    d = rule_api.Finding("GA999", "a-b", "t", "warning", "m").to_dict()
    d["details"] = {"type": "Gone", "fields": {"lines": [1, 2]}}
    back = rule_api.Finding.from_dict(json.loads(json.dumps(d)))
    assert back.details == {"type": "Gone", "fields": {"lines": [1, 2]}}
    assert back.to_dict() == d


def test_details_that_are_not_json_are_refused():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Bad(rule_api.FindingDetails):
        value: object

    f = rule_api.Finding("GA101", "a-b", "t", "warning", "m", details=Bad(object()))
    with pytest.raises(TypeError, match="not JSON-safe"):
        f.to_dict()


def test_the_control_flag_survives_a_json_round_trip():
    f = rule_api.Finding("GA305", "a-b", "t", "warning", "m", recommend_only_if_faster=True)
    d = json.loads(json.dumps(f.to_dict()))
    assert d["recommend_only_if_faster"] is True
    assert rule_api.Finding.from_dict(d).recommend_only_if_faster is True
    plain = rule_api.Finding("GA101", "a-b", "t", "warning", "m")
    assert rule_api.Finding.from_dict(plain.to_dict()).recommend_only_if_faster is False


def test_error_row_schema(tmp_path):
    d = rule_api.Finding(
        "GA999", "x-y", "t", "error", "rule GA999 failed", error="Traceback"
    ).to_dict()
    check_finding_schema(d)


# ---------------------------------------------------------------------------------------------
# Ranking


def _f(rule: str, est: float | None = None, meas: float | None = None, error: bool = False):
    e = None if est is None else rule_api.Estimate(est, "upper-bound", "m")
    m = None if meas is None else rule_findings.Measurement(meas, 1.0, 1.0 / meas, "H100")
    return rule_api.Finding(
        rule, "a-b", "t", "warning", "m", estimated_speedup=e, measured_speedup=m,
        error="boom" if error else None,
    )  # fmt: skip


def test_ranking_measured_then_estimated_then_none_then_errors():
    fs = [
        _f("GA1", est=3.0),
        _f("GA2"),
        _f("GA3", est=1.2, meas=1.1),
        _f("GA4", error=True),
        _f("GA5", est=1.5),
        _f("GA6", meas=1.4),
    ]
    ranked = rule_ranking.rank_findings(fs)
    assert [f.rule for f in ranked] == ["GA6", "GA3", "GA1", "GA5", "GA2", "GA4"]
    assert [f.rank_basis for f in ranked] == [
        "measured",
        "measured",
        "estimated",
        "estimated",
        "none",
        "none",
    ]
    assert "measured on H100" in ranked[0].speedup_label()
    assert "upper bound" in ranked[2].speedup_label()


def test_estimate_and_variant_validate_their_fields():
    with pytest.raises(ValueError):
        rule_api.Estimate(None, "point", "m")
    with pytest.raises(ValueError):
        rule_api.Estimate(1.5, "none", "m")
    with pytest.raises(ValueError):
        rule_api.Variant("automatic", "x")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Launch rules on modelled launches


def test_ga101_limiter_fix_and_upper_bound(tmp_path):
    # 128 registers x 256 threads: 2 blocks, 16 of 64 warps (25 %); the next step is 80
    # registers: 3 blocks, 37.5 %
    a = fake_analysis(tmp_path, regs=128)
    f = next(x for x in run(a).findings if x.rule == "GA101")
    assert f.line == 2 and "registers" in f.message and "25%" in f.message
    ev = {e.metric: e for e in f.evidence}
    assert ev["occupancy"].value == 0.25 and ev["occupancy"].threshold == 0.5
    assert f.estimated_speedup is not None and f.estimated_speedup.kind == "upper-bound"
    assert f.estimated_speedup.speedup == 1.5  # min(0.375, 0.5) / min(0.25, 0.5)
    assert f.variant is not None and f.variant.safety == "automatic-and-verified"
    assert f.variant.nvcc_flags == ("-maxrregcount=80",)
    assert "__launch_bounds__(256, 3)" in f.variant.description


def test_ga101_quiet_at_high_occupancy_or_a_single_wave(tmp_path):
    assert "GA101" not in ids(run(fake_analysis(tmp_path, regs=32)))
    # 25 % occupancy but only 100 CTAs: fewer than one wave, nothing more to run per SM
    assert "GA101" not in ids(run(fake_analysis(tmp_path, regs=128, grid=(200, 1, 1))))


def test_ga101_threshold_is_an_option(tmp_path):
    a = fake_analysis(tmp_path, regs=128)
    cfg = Config(rule_options={"GA101": {"max_occupancy": 0.2}})
    assert "GA101" not in ids(run(a, cfg))
    cfg = Config(rule_options={"occupancy-limited": {"max-occupancy": 0.3}})
    assert "GA101" in ids(run(a, cfg))


def test_ga102_tail_and_small_grid(tmp_path):
    # H100, 8 blocks of 256 per SM: 1056 CTAs per wave
    tail = run(fake_analysis(tmp_path, grid=(1320, 1, 1)))
    f = next(x for x in tail.findings if x.rule == "GA102")
    assert "1.25 waves" in f.message and f.line == 2
    assert f.estimated_speedup.kind == "upper-bound" and f.estimated_speedup.speedup == 1.6
    small = run(fake_analysis(tmp_path, grid=(66, 1, 1)))
    f = next(x for x in small.findings if x.rule == "GA102")
    assert "small grid" in f.message and "66 SMs have no work" in f.message
    # the small grid is estimated on the launch model of the traced kernel (issue 27: SMs / CTAs
    # overstated grids of a few microseconds); this modelled launch has no trace, so no number
    est = f.estimated_speedup
    assert est.kind == "none" and est.speedup is None and "without a trace" in est.method
    assert f.variant.safety == "display-only"
    # many waves dilute the tail; a single partial wave with a CTA per SM is not a tail effect
    for grid in (16384, 1056 * 3, 500):
        assert "GA102" not in ids(run(fake_analysis(tmp_path, grid=(grid, 1, 1)))), grid
    # the seed's "> 2 groups per multiprocessor" is an option away
    cfg = Config(rule_options={"GA102": {"min_ctas_per_sm": 3.0}})
    assert "GA102" in ids(run(fake_analysis(tmp_path, grid=(300, 1, 1)), cfg))


def test_ga103_block_not_warp_multiple(tmp_path):
    f = next(x for x in run(fake_analysis(tmp_path, block=(10, 10, 1))).findings)
    assert f.rule == "GA103" and "28 idle lanes" in f.message and "32x4" in f.message
    assert f.estimated_speedup.speedup == 1.28
    assert "GA103" not in ids(run(fake_analysis(tmp_path, block=(16, 8, 1))))
    f = next(x for x in run(fake_analysis(tmp_path, block=(100, 1, 1))).findings)
    assert f.rule == "GA103" and "128 or 96" in f.message


def test_ga103_offers_launch_changes_that_cover_the_same_threads(tmp_path):
    a = fake_analysis(tmp_path, block=(10, 10, 1), grid=(205, 205, 1))
    f = next(x for x in run(a).findings if x.rule == "GA103")
    v = f.variant
    assert v is not None and v.label == "32x4" and [a.label for a in v.alternatives] == ["32x3"]
    # 2050 x 2050 threads: ceil(2050 / 32) = 65, ceil(2050 / 4) = 513, ceil(2050 / 3) = 684
    assert v.launch == {"block": [32, 4, 1], "grid": [65, 513, 1]}
    assert v.alternatives[0].launch == {"block": [32, 3, 1], "grid": [65, 684, 1]}
    f = next(x for x in run(fake_analysis(tmp_path, block=(100, 1, 1))).findings)
    assert f.variant.launch == {"block": [128, 1, 1], "grid": [3200, 1, 1]}  # 4096 x 100 / 128


def test_trace_rule_skipped_with_a_note_when_the_trace_cannot_be_made(tmp_path):
    r = run(fake_analysis(tmp_path))  # module=None: the emulator cannot run
    assert "GA201" in r.rules_run
    # one note per reason, naming every rule it skipped (GA201 among the trace's rules)
    assert any("GA201 (bank-conflicts)" in n and "not evaluated" in n for n in r.notes)
    assert "GA201" in {s.rule for s in r.incomplete} and r.incomplete_text
    assert len([n for n in r.notes if "not evaluated" in n]) == len({s.reason for s in r.skipped})
    assert not any(f.is_error for f in r.findings)


# ---------------------------------------------------------------------------------------------
# Selection and configuration


def test_selection_prefixes_specificity_and_cli_layers(registry):
    def sel(**kw: Any) -> list[str]:
        return [r.id for r in registry.selected(Config(**kw))]

    assert sel() == list(registry.ids)
    ga2 = [i for i in registry.ids if i.startswith("GA2")]
    rest = [i for i in registry.ids if not i.startswith("GA1")]
    assert "GA201" in ga2 and len(ga2) >= 3
    assert sel(select=("GA2",)) == ga2
    assert sel(select=("GA2",), ignore=("GA201",)) == ga2[1:]
    assert sel(select=("GA201",), ignore=("GA2",)) == ["GA201"]  # more specific wins
    assert sel(select=("ALL",), ignore=("bank-conflicts", "GA1")) == rest[1:]
    assert sel(ignore=("GA10",)) == rest
    # the command line's select starts afresh (the file's ignore too), its ignore applies after
    ga10 = [i for i in registry.ids if i.startswith("GA10")]
    assert ga10[:3] == ["GA101", "GA102", "GA103"]
    assert sel(select=("GA1",), ignore=("GA101",), cli_select=("GA10",)) == ga10
    ga1 = [i for i in registry.ids if i.startswith("GA1")]
    assert sel(select=("GA1",), cli_ignore=("GA102",)) == [i for i in ga1 if i != "GA102"]
    with pytest.raises(UsageError, match="matches no rule"):
        sel(cli_select=("GA9",))
    with pytest.raises(UsageError, match="matches no rule"):
        sel(ignore=("bank-conflict",))


def test_split_selectors():
    assert split_selectors(["GA1,GA201", "GA3 GA4"]) == ("GA1", "GA201", "GA3", "GA4")
    assert split_selectors(None) == ()


def _git_tree(tmp: Path) -> Path:
    repo = tmp / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / "src" / "deep" / "k.cu").write_text("")
    return repo


def test_config_discovery_walks_up_to_the_git_root(tmp_path):
    repo = _git_tree(tmp_path)
    src = repo / "src" / "deep" / "k.cu"
    # above the git root: not used
    (tmp_path / "gpuadvise.toml").write_text('select = ["GA1"]\n')
    assert find_config(src) is None
    assert config_for(src) == Config().with_cli()
    # a pyproject.toml without [tool.gpuadvise] is passed over
    (repo / "src" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (repo / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.gpuadvise]
            select = ["GA2"]
            ignore = ["GA203"]
            trace-ctas = 4
            [tool.gpuadvise.rules.GA201]
            min_ways = 2
            severity = "error"
            [tool.gpuadvise.gate]
            something = "for another part of gpuadvise"
            """
        )
    )
    assert find_config(src) == repo / "pyproject.toml"
    cfg = config_for(src)
    assert cfg.select == ("GA2",) and cfg.ignore == ("GA203",) and cfg.trace_ctas == 4
    # gpuadvise.toml wins in its own directory, and a nearer one wins
    (repo / "src" / "gpuadvise.toml").write_text('ignore = ["GA1"]\n')
    assert find_config(src) == repo / "src" / "gpuadvise.toml"
    assert load_config(repo / "src" / "gpuadvise.toml").select is None


def test_per_rule_options_severity_and_their_errors(registry, tmp_path):
    p = tmp_path / "gpuadvise.toml"
    p.write_text('[rules.GA201]\nmin_ways = 2\nseverity = "error"\n')
    cfg = load_config(p)
    rule = registry.get("GA201")
    assert registry.options_for(rule, cfg) == {"min_ways": 2.0, "min_excess_share": 0.05}
    assert registry.severity_for(rule, cfg) == "error"
    registry.check_config(cfg)
    bad = {
        "[rules.GA201]\nmin_way = 2\n": "has no option 'min_way'",
        '[rules.GA201]\nmin_ways = "2"\n': "must be float",
        '[rules.GA201]\nseverity = "fatal"\n': "is not one of",
        "[rules.GA210]\nx = 1\n": "names no rule",
    }
    for text, msg in bad.items():
        p.write_text(text)
        with pytest.raises(ConfigError, match=msg):
            registry.check_config(load_config(p))
    for text in ("trace-ctas = -1\n", 'select = "GA1"\nrules = 3\n', "select = [\n"):
        p.write_text(text)
        with pytest.raises(ConfigError):
            load_config(p)


def test_severity_override_reaches_the_finding(tmp_path):
    cfg = Config(rule_options={"GA103": {"severity": "error"}})
    f = next(x for x in run(fake_analysis(tmp_path, block=(100, 1, 1)), cfg).findings)
    assert f.rule == "GA103" and f.severity == "error"


def test_config_rules_dir_is_relative_to_the_file(tmp_path):
    (tmp_path / "mine").mkdir()
    p = tmp_path / "gpuadvise.toml"
    p.write_text('rules-dir = ["mine"]\n')
    assert load_config(p).rules_dirs == ((tmp_path / "mine").resolve(),)


# ---------------------------------------------------------------------------------------------
# User rules: broken ones fail loudly at load; one that raises at run time is an error row

GOOD_RULE = (
    "from gpuadvise.rules import Rule\n\n\n"
    "class Boom(Rule):\n    " + DOC_OK + "\n\n"
    '    id = "GA901"\n    name = "always-raises"\n    title = "Raises"\n'
    '    models = ("occupancy",)\n    options = {"limit": 3}\n\n'
    "    def detect(self, ctx):\n        raise RuntimeError('boom')\n"
)


def user_rules(tmp: Path, files: dict[str, str], case_ids: str = "GA901") -> Path:
    d = tmp / "myrules"
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)
    k = tmp / "kernels" / "mine"
    k.mkdir(parents=True, exist_ok=True)
    (k / "x.cu").write_text(f"__global__ void x() {{}}  // expect: {case_ids}\n")
    return d


def test_a_rule_that_raises_is_an_error_row_and_the_others_go_on(tmp_path):
    d = user_rules(tmp_path, {"ga901_always_raises.py": GOOD_RULE})
    reg = rule_registry.load_registry([d])
    assert reg.ids[-1] == "GA901" and reg.get("always-raises").options == {"limit": 3}
    a = fake_analysis(tmp_path, block=(100, 1, 1))
    r = run(a, registry=reg)
    errors = [f for f in r.findings if f.is_error]
    assert len(errors) == 1 and errors[0].rule == "GA901"
    assert "RuntimeError: boom" in errors[0].message and "detect" in errors[0].message
    assert "ga901_always_raises.py" in errors[0].message
    assert "Traceback" in (errors[0].error or "")
    assert r.findings[-1].is_error  # error rows rank last
    assert "GA103" in ids(r)  # the other rules went on
    item = errors[0].to_report_item()
    assert item.effective_outcome == "error"
    text = "\n".join(finding_text(errors[0].to_dict()))
    assert "failed" in text


def test_details_round_trip_after_the_bundled_rules_are_loaded_again(tmp_path):
    """Another registry (the bundled rules and a user folder) imports the bundled rule files
    again under the same module names; a finding of the default registry's rules still reads
    its details back as its own class (the one its rule was loaded with)."""
    f = next(x for x in run(fake_analysis(tmp_path, regs=128)).findings if x.rule == "GA101")
    rule_registry.load_registry([user_rules(tmp_path, {"ga901_always_raises.py": GOOD_RULE})])
    back = rule_api.Finding.from_dict(json.loads(json.dumps(f.to_dict())))
    assert type(back.details) is type(f.details) and back == f


BROKEN = {
    "syntax": ("ga901_always_raises.py", GOOD_RULE + "\n  def (:\n", "cannot be imported"),
    "heading": (
        "ga901_always_raises.py",
        GOOD_RULE.replace("Fix safety", "Safety of the fix"),
        "lacks the heading(s): Fix safety",
    ),
    "empty section": (
        "ga901_always_raises.py",
        GOOD_RULE.replace("Change it.", ""),
        "empty docstring section(s): Fix",
    ),
    "name": (
        "ga901_always_raises.py",
        GOOD_RULE.replace('"always-raises"', '"AlwaysRaises"'),
        "is not kebab-case",
    ),
    "id": ("ga901_always_raises.py", GOOD_RULE.replace('"GA901"', '"G901"'), "is not GA"),
    "duplicate id": (
        "ga101_dup.py",
        GOOD_RULE.replace('"GA901"', '"GA101"'),
        "id GA101 is also used by",
    ),
    "duplicate name": (
        "ga901_always_raises.py",
        GOOD_RULE.replace('"always-raises"', '"tail-effect"'),
        "name tail-effect is also used by",
    ),
    "file name": ("ga902_x.py", GOOD_RULE, "file name must start with ga901_"),
    "no detect": (
        "ga901_always_raises.py",
        GOOD_RULE.replace("def detect(self, ctx)", "def detekt(self, ctx)"),
        "detect(ctx) is not defined",
    ),
    "option type": (
        "ga901_always_raises.py",
        GOOD_RULE.replace('{"limit": 3}', '{"limit": [3]}'),
        "option 'limit' has a default of type list",
    ),
    "model": (
        "ga901_always_raises.py",
        GOOD_RULE.replace('("occupancy",)', '("roofline",)'),
        "models ('roofline',) must be",
    ),
    "two rules": (
        "ga901_always_raises.py",
        GOOD_RULE + "\n\nclass Other(Boom):\n    pass\n",
        "exactly one Rule subclass (found 2)",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_rule_fails_loudly_at_load(tmp_path, case):
    name, text, msg = BROKEN[case]
    d = user_rules(tmp_path, {name: text})
    with pytest.raises(rule_registry.RuleLoadError) as exc:
        rule_registry.load_registry([d])
    assert msg in exc.value.message, exc.value.message
    assert str(d / name) in exc.value.message
    assert exc.value.exit_code == 2 and isinstance(exc.value, GpuAdviseError)


def test_a_rule_without_a_kernel_case_fails_loudly(tmp_path):
    d = user_rules(tmp_path, {"ga901_always_raises.py": GOOD_RULE}, case_ids="GA902")
    with pytest.raises(rule_registry.RuleLoadError, match="GA901 has no kernel case"):
        rule_registry.load_registry([d])


def test_a_missing_rules_dir_is_an_error(tmp_path):
    with pytest.raises(rule_registry.RuleLoadError, match="does not exist"):
        rule_registry.load_registry([tmp_path / "nope"])


# ---------------------------------------------------------------------------------------------
# Packaging: an installed wheel has its rules and kernels (gpuadvise/_rules, gpuadvise/_kernels)


def test_registry_finds_rules_and_kernels_in_an_installed_layout(tmp_path):
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "gpuadvise", site / "gpuadvise", ignore=ignore)
    # as pyproject's [tool.hatch.build.targets.wheel.force-include] lays them out
    shutil.copytree(ROOT / "rules", site / "gpuadvise" / "_rules", ignore=ignore)
    shutil.copytree(ROOT / "kernels", site / "gpuadvise" / "_kernels", ignore=ignore)
    code = (
        "import gpuadvise.rules.registry as r; reg = r.load_registry(); "
        "print(r.builtin_rules_dir()); print(r.builtin_kernels_dir()); print(','.join(reg.ids))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    rules_dir, kernels_dir, found = out.stdout.split()
    assert Path(rules_dir) == site / "gpuadvise" / "_rules"
    assert Path(kernels_dir) == site / "gpuadvise" / "_kernels"
    assert found == ",".join(
        rule_registry.load_registry().ids
    )  # every bundled rule, as in the checkout


# ---------------------------------------------------------------------------------------------
# The source-pattern rules on variants of the seed's code (no compile: the rules read the text)


def pattern_findings(tmp: Path, body: str, signature: str = "int* out") -> list[rule_api.Finding]:
    a = fake_analysis(tmp)
    src = Path(a.spec.source)
    src.write_text(
        "#define BLOCK 256\n"
        f'extern "C" __global__ void k({signature}) {{\n'
        "    __shared__ int sdata[BLOCK];\n" + textwrap.dedent(body) + "}\n"
    )
    return list(run(a, Config(select=("GA202", "GA203"))).findings)


def where(found: list[rule_api.Finding]) -> list[tuple[str, int | None]]:
    return [(f.rule, f.line) for f in found]


@pytest.mark.parametrize(
    "loop",
    [
        "for (int s = 1; s < blockDim.x; s <<= 1) {\n    if (threadIdx.x % (s * 2) == 0)",
        "for (unsigned s = 1; s < BLOCK; s = s * 2) {\n    if ((tid & (2 * s - 1)) == 0)",
        "for (unsigned s = 1u; s < blockDim.x; s *= 2) {\n    if ((tid % (2*s)) == 0)",
    ],
)
def test_ga202_modulo_variants(tmp_path, loop):
    body = (
        "    unsigned tid = threadIdx.x;\n    "
        + loop.replace("\n", "\n    ")
        + " sdata[tid] += sdata[tid + s];\n        __syncthreads();\n    }\n"
    )
    found = pattern_findings(tmp_path, body)
    assert where(found) == [("GA202", 6)]
    assert found[0].variant is not None and found[0].variant.diff
    assert "s >>= 1" in found[0].variant.diff


def test_ga202_strided_variant_and_what_it_leaves_alone(tmp_path):
    body = """\
        unsigned tid = threadIdx.x;
        for (unsigned s = 1; s < blockDim.x; s *= 2) {
            int idx = (s * 2) * tid;
            if (idx < blockDim.x) sdata[idx] += sdata[idx + s];
            __syncthreads();
        }
    """
    found = pattern_findings(tmp_path, body)
    assert where(found) == [("GA202", 6)]
    diff = found[0].variant.diff
    assert "+    if (tid < s) sdata[tid] += sdata[tid + s];" in diff
    quiet = [
        # sequential addressing
        """\
        unsigned tid = threadIdx.x;
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (tid < s) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }
        """,
        # the pattern in a comment, and a modulo outside a doubling loop
        """\
        unsigned tid = threadIdx.x;
        // for (unsigned s = 1; s < n; s *= 2) { if (tid % (2 * s) == 0) ... }
        for (unsigned s = 1; s < 8; s += 1) { if (tid % (2 * s) == 0) out[s] = 1; }
        """,
    ]
    for body in quiet:
        assert pattern_findings(tmp_path, body) == []


def test_ga203_variants(tmp_path):
    racy = """\
        unsigned tid = threadIdx.x;
        if (tid < 32) {
            volatile int *v = sdata;
            v[tid] = v[tid] + v[tid + 16];
            v[tid] = v[tid] + v[tid + 8];
        }
    """
    found = pattern_findings(tmp_path, racy)
    assert where(found) == [("GA203", 7)]
    assert found[0].severity == "error"
    assert found[0].variant is not None and found[0].variant.diff is None  # not the plain form
    # a volatile __shared__ array at file scope, plain steps: a diff
    plain = """\
        unsigned tid = threadIdx.x;
        if (tid < 32) {
            vs[tid] += vs[tid + 16];
            vs[tid] += vs[tid + 8];
            vs[tid] += vs[tid + 4];
            vs[tid] += vs[tid + 2];
            vs[tid] += vs[tid + 1];
        }
    """
    a = fake_analysis(tmp_path)
    src = Path(a.spec.source)
    src.write_text(
        "volatile __shared__ float vs[64];\n"
        'extern "C" __global__ void k(float* out) {\n' + textwrap.dedent(plain) + "}\n"
    )
    found = list(run(a, Config(select=("GA203",))).findings)
    assert where(found) == [("GA203", 5)]
    diff = found[0].variant.diff
    assert "+    float sum = vs[tid];" in diff and "offset = 16" in diff
    # __syncwarp() between the steps, or shuffles: no race
    synced = racy.replace("v[tid + 16];\n", "v[tid + 16];\n        __syncwarp();\n")
    assert pattern_findings(tmp_path, synced) == []
    shuffles = """\
        int s = sdata[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) out[0] = s;
    """
    assert pattern_findings(tmp_path, shuffles) == []


def test_source_rules_skip_a_kernel_defined_elsewhere(tmp_path):
    a = fake_analysis(tmp_path)
    Path(a.spec.source).write_text("// the kernel lives in another file\n")
    r = run(a, Config(select=("GA202",)))
    assert r.findings == () and "GA202 (interleaved-reduction) not evaluated" in r.notes[0]


def test_blank_comments_and_strings_keeps_offsets():
    text = 'a = "x // y"; // c\n/* b\n c */ d\n'
    out = srctext.blank_comments_and_strings(text)
    assert len(out) == len(text) and out.count("\n") == text.count("\n")
    assert "//" not in out and "c */" not in out and out.split("\n")[2].strip() == "d"


def test_trace_ctas_zero_means_the_first_wave(tmp_path):
    p = tmp_path / "gpuadvise.toml"
    p.write_text("trace-ctas = 0\n")
    assert load_config(p).trace_ctas is None
    p.write_text('trace-ctas = "all"\n')
    assert load_config(p).trace_ctas == "all"
    assert Config().trace_ctas is None


def test_a_predicted_slowdown_is_never_a_speedup():
    """An estimate below 1 (a compute-bound SGEMM's 0.441x "upper bound") becomes no estimate,
    its method saying what the model predicted, and the warning a note (issue 27)."""
    from gpuadvise.rules.evaluate import no_slowdown

    f = rule_api.Finding("GA303", "a-b", "t", "warning", "m")
    slow = rule_api.Estimate(0.441, "upper-bound", "roofline", {"x": 1})
    g = no_slowdown(replace(f, estimated_speedup=slow))
    assert g.severity == "note" and g.estimated_speedup.kind == "none"
    assert g.estimated_speedup.speedup is None
    assert "at best 2.27x slower (0.441x), so it is not recommended. roofline" in (
        g.estimated_speedup.method
    )
    assert g.estimated_speedup.inputs == {"x": 1, "predicted_ratio": 0.441,
                                          "predicted_kind": "upper-bound"}  # fmt: skip
    fine = replace(f, estimated_speedup=rule_api.Estimate(1.0, "point", "same"))
    assert no_slowdown(fine) is fine
