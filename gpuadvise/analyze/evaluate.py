"""Running the enabled rules on one analysed launch: the context they read (facts, the models the
pipeline computed, the services), the models they need that the analysis lacks computed first."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from gpuadvise.analyze.models import compute_models, model_results, trace_models
from gpuadvise.analyze.pipeline import KernelAnalysis
from gpuadvise.analyze.services import AnalysisServices
from gpuadvise.rules.config import Config, config_for
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.evaluate import RulesRun, evaluate_rules, models_needed
from gpuadvise.rules.findings import Finding, Variant
from gpuadvise.rules.registry import load_registry
from gpuadvise.toolchain.binary import is_binary

__all__ = ["quiet_minor", "rule_context", "run_rules", "run_rules_report", "with_models"]


def with_models(
    analysis: KernelAnalysis, config: Config, *, lazy_models: bool = True
) -> KernelAnalysis:
    """``analysis`` with the trace-based models the enabled rules of ``config`` need: computed
    here (``config.trace_ctas`` CTAs, the CPU emulator) when the analysis lacks them and
    ``lazy_models`` allows it; otherwise ``analysis`` as it is."""
    registry = load_registry(config.rules_dirs)
    wanted = trace_models(models_needed(config, registry))
    if not lazy_models or wanted <= analysis.models:
        return analysis
    from gpuadvise.toolchain import CompileOptions, find_toolchain

    wanted = wanted | analysis.models
    module = analysis.module
    t0 = time.perf_counter()
    memory = compute_models(
        analysis.spec,
        analysis.device,
        module,
        analysis.kernel,
        analysis.options or CompileOptions.from_nvcc_flags(module.arch, module.flags),
        analysis.toolchain or find_toolchain(None),
        analysis.sass_instructions,
        config.trace_ctas,
        "emu",
        analysis.occupancy.active_blocks_per_sm,
        wanted,
    )
    timings = {**analysis.timings_s, "trace_s": time.perf_counter() - t0}
    return dataclasses.replace(analysis, memory=memory, models=wanted, timings_s=timings)


def rule_context(
    analysis: KernelAnalysis, config: Config | None = None, *, lazy_models: bool = True
) -> RuleContext:
    """The context the rules read for ``analysis`` (models computed first, see
    :func:`with_models`; ``config`` None: every rule)."""
    config = config if config is not None else Config()
    analysis = with_models(analysis, config, lazy_models=lazy_models)
    traced = lazy_models or analysis.memory is not None
    return RuleContext(
        analysis.facts(),
        model_results(analysis.memory, traced=traced),
        AnalysisServices(analysis),
    )


def run_rules_report(
    analysis: KernelAnalysis,
    config: Config | None = None,
    *,
    lazy_models: bool = True,
    on_findings: Callable[[Sequence[Finding]], None] | None = None,
    processes: int = 1,
    on_variants_ahead: Callable[[Sequence[Variant]], None] | None = None,
) -> RulesRun:
    """The enabled rules on one analysis: ranked findings (error rows included: a rule that
    raised is one finding with ``error`` set), the rules run and the notes on rules skipped.
    ``config`` None: the configuration discovered from the kernel's source. Trace-based models
    come from the analysis, or are computed here when an enabled rule needs them (unless
    ``lazy_models`` is False: then those rules are skipped with a note). ``on_findings``: told
    of each rule's findings when that rule is done, ``on_variants_ahead`` of the candidates the
    rules waiting for a model still being computed name before it
    (:func:`gpuadvise.rules.evaluate.evaluate_rules`).
    ``processes`` 2: the rules split over this process and a forked child
    (:func:`gpuadvise.rules.split.rule_processes` says where it may); a kernel analyzed from
    its binary runs them in this one (its rules' transforms record what they needed here)."""
    if config is None:
        config = config_for(analysis.spec.source)
    registry = load_registry(config.rules_dirs)
    context = rule_context(analysis, config, lazy_models=lazy_models)
    if is_binary(analysis.spec.source):  # no source: fixes that rewrite it are not built
        from gpuadvise.analyze.binary_input import run_sourceless_rules

        return run_sourceless_rules(analysis, context, config, registry)
    return evaluate_rules(
        context,
        config,
        registry=registry,
        on_findings=on_findings,
        processes=processes,
        on_variants_ahead=on_variants_ahead,
    )


def run_rules(
    analysis: KernelAnalysis, config: Config | None = None, *, lazy_models: bool = True
) -> list[Finding]:
    """The ranked findings of :func:`run_rules_report`."""
    return list(run_rules_report(analysis, config, lazy_models=lazy_models).findings)


def is_minor(finding: Finding, below: float) -> bool:
    """Whether ``finding`` is worth at most ``below`` times: its estimate and its measurement,
    each where there is one, say so (a finding with neither number is not minor).

    An upper bound made on the launch model compares the launch before the change at sustained
    rates with the launch after it at peak rates and full overlap: a promise kept, but one that
    credits any change, even one that moves nothing, with the model's sustained-to-peak margin
    (1.1-1.25x: tail effects and grid-stride loops of streaming kernels, a small grid of 128
    CTAs on 132 SMs of an issue-bound kernel, all predicted at 1.00-1.03x). Whether a change
    is worth a warning is judged like for like: by the larger of the model's prediction with
    both sides at sustained rates (``point_speedup``) and with both at peak rates and full
    overlap (``peak_speedup``, where the estimate has it; the change a bound grants beyond the
    point, such as a small grid's critical path split over more CTAs, is in it). Without a
    peak figure, a launch bound by memory bandwidth (DRAM or L2) before and after is judged by
    its point, as the bound there is the bandwidth margin alone
    (:attr:`~gpuadvise.rules.findings.Estimate.like_for_like`)."""
    e = finding.estimated_speedup
    est = e.like_for_like if e is not None else None
    meas = finding.measured_speedup.speedup if finding.measured_speedup is not None else None
    if est is None and meas is None:
        return False
    return (est is None or est <= below) and (meas is None or meas <= below)


def quiet_minor(run: RulesRun, config: Config) -> RulesRun:
    """Quiet by default: the warnings of ``run`` that :func:`is_minor` under
    ``config.minor_speedup`` become notes (``minor_findings = "note"``) or are left out with a
    note saying how many (``"drop"``); ``"keep"`` leaves them. Errors and rule failures stay."""
    if config.minor_findings == "keep":
        return run
    below = config.minor_speedup
    minor = [
        f
        for f in run.findings
        if f.error is None and f.severity == "warning" and is_minor(f, below)
    ]
    if not minor:
        return run
    ids = {id(f) for f in minor}
    if config.minor_findings == "drop":
        kept = tuple(f for f in run.findings if id(f) not in ids)
        note = (
            f"{len(minor)} finding{'' if len(minor) == 1 else 's'} worth at most {below:g}x "
            "(estimated and measured) left out "
            '(minor-findings = "drop"; "note" reports them as notes)'
        )
        return dataclasses.replace(run, findings=kept, notes=(*run.notes, note))
    findings = tuple(
        dataclasses.replace(f, severity="note") if id(f) in ids else f for f in run.findings
    )
    return dataclasses.replace(run, findings=findings)
