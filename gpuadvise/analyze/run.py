"""``analyze`` end to end, without printing: build the spec, compile, trace, model, run the rules,
measure the findings' variants (on a GPU), write the variants. The CLI renders the result."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuadvise.analyze.options import (
    AnalyzeSettings,
    KernelOptions,
    build,
    parse_l2_probe_ctas,
    parse_sample_ctas,
)
from gpuadvise.spec.progress import ProgressCallback
from gpuadvise.words import counted

if TYPE_CHECKING:  # the rules and the trace are imported once the header is printed (_run)
    from gpuadvise.analyze.head import AnalysisHead
    from gpuadvise.analyze.pipeline import KernelAnalysis
    from gpuadvise.rules.evaluate import RulesRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnalyzeResult:
    """What ``analyze`` found: the analysis (its ``timings_s`` cover every phase, the rules'
    and the measurement's included) and the rules' run (findings, measured)."""

    analysis: KernelAnalysis
    rules: RulesRun


DEFAULT_SETTINGS = AnalyzeSettings()  # the command line's defaults


def run_analysis(
    opts: KernelOptions,
    settings: AnalyzeSettings = DEFAULT_SETTINGS,
    *,
    progress: ProgressCallback | None = None,
    measure_lock: AbstractContextManager[Any] | None = None,
    on_head: Callable[[AnalysisHead], None] | None = None,
    points_wanted: Callable[[RulesRun], bool] | None = None,
) -> AnalyzeResult:
    """Analyze one kernel launch as ``gpuadvise analyze`` does, with ``settings`` (the same
    request object for one kernel and for a batch's cases): the trace-based models are computed
    once, for the enabled rules (their ``models``), before the rules run.

    ``settings.time_budget_s``: stop early where the analysis can (the trace cut to the CTAs
    traced in time, the trace, the rules or the measurement skipped) once that many seconds have
    passed; what was left out is in ``analysis.skipped``. ``settings.l2_probe_ctas``: the L2
    model's probe of the grid (``--l2-probe-ctas``; default: at most the sampled CTAs, at most
    64). ``progress``: told of every step (:mod:`gpuadvise.spec.progress`). ``measure_lock``:
    held while the findings are measured (parallel analyses share one GPU). ``on_head``: told
    of the launch, resources, occupancy and waves as soon as they are known, before the trace
    (:class:`~gpuadvise.analyze.head.AnalysisHead`: the terminal prints its header then).
    ``points_wanted``: told the rules' findings, says whether their variants are traced for
    their points (:func:`_trace_points`; none compiled while the rules run): ``analyze
    --diff``'s analysis of the composed kernel, which reads only which fixes its findings offer,
    traces them only when one may be new (:mod:`gpuadvise.analyze.fix`). None: always."""
    from gpuadvise.ptx.memory import array_huge_pages
    from gpuadvise.spec.budget import time_budget
    from gpuadvise.spec.progress import reporting

    array_huge_pages()  # off on a VM that hands free memory back to its host
    with reporting(progress), time_budget(settings.time_budget_s) as budget:
        done = _run(opts, settings, measure_lock, on_head, points_wanted)
    if budget is not None and budget.skipped:
        done = AnalyzeResult(
            dataclasses.replace(done.analysis, skipped=tuple(budget.skipped)), done.rules
        )
    return done


def _run(
    opts: KernelOptions,
    settings: AnalyzeSettings,
    measure_lock: AbstractContextManager[Any] | None = None,
    on_head: Callable[[AnalysisHead], None] | None = None,
    points_wanted: Callable[[RulesRun], bool] | None = None,
) -> AnalyzeResult:
    from gpuadvise.analyze.head import compile_head
    from gpuadvise.trace.gpu import select_tracer

    trace, tracer, measure = settings.trace, settings.tracer, settings.measure
    chosen = select_tracer(tracer) if trace else "emu"
    log.info(
        "tracer: %s",
        "none (--no-trace)"
        if not trace
        else {"emu": "the CPU emulator", "gpu": "the GPU"}[chosen]
        + (
            "" if tracer != "auto" or chosen != "gpu" else " or the emulator (auto picks per trace)"
        ),
    )
    if chosen == "gpu":
        from gpuadvise.analyze.prepare import live_options

        opts = live_options(opts)  # the instrumented kernel runs on this GPU: compile for it
    probe = parse_l2_probe_ctas(settings.l2_probe_ctas)  # a bad count fails before the compile
    spec, choice, options = build(opts)
    config = None
    if settings.select or settings.ignore or settings.rules_dirs:
        config = _rules_config(spec.source, settings)  # bad selectors fail before the compile
    ahead = measure is not False and measure_lock is None and bool(_prewarm_measurement())
    # the kernel compiled, its occupancy and waves: the terminal's header, printed now, before
    # the kernel is traced and the rules run; the modules of those stages and the bundled rules'
    # registry are imported in a thread while nvcc runs (gpuadvise.analyze.warm)
    from gpuadvise.analyze.ahead import SassAhead
    from gpuadvise.analyze.warm import imports_during

    with imports_during(
        trace, registry=not settings.rules_dirs, header=on_head is not None
    ) as header_ready:
        head = compile_head(spec, choice.device, options, opts.nvcc)
        # the SASS read (nvdisasm) in a thread from now: the pipeline joins it where it reads it
        sass = SassAhead(head.module, head.head.kernel, head.toolchain)
        if on_head is not None:  # as soon as its modules are in, not after every import
            header_ready.wait()
            on_head(head.head)
    if ahead:
        _measure_ahead(opts)
    from gpuadvise.analyze.models import l2_probe_size
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.rules.evaluate import models_needed
    from gpuadvise.rules.split import rule_processes

    if config is None:  # the configuration files' selectors (pyproject.toml ...) fail here
        config = _rules_config(spec.source, settings)
    notes = (choice.note,) if choice.note else ()
    if spec.spec_path is not None:
        notes = (*notes, f"launch spec read from {spec.spec_path}")
    sample = parse_sample_ctas(settings.sample_ctas) if settings.sample_ctas else config.trace_ctas
    result = analyze_kernel(
        spec,
        choice.device,
        options,
        nvcc=opts.nvcc,
        notes=notes,
        trace=trace,
        sample_ctas=sample,
        # auto with a GPU here: the cheaper tracer for this trace (analyze.tracer_choice)
        tracer="auto" if chosen == "gpu" and tracer == "auto" else chosen,
        models=models_needed(config, variant_points=True),
        l2_probe_ctas=l2_probe_size(sample, probe),
        head=head,
        sass_ahead=sass,
        # the traced outputs are read by no rule, the report or the fixes (which emulate their
        # own): not held through the models and the rules (issue 31's peak)
        keep_outputs=False,
        # the L2 model in a forked child meanwhile, where a second process may run (as the
        # rules' split): only its rules (run last) and the report wait for it
        l2_behind=rule_processes() >= 2,
    )
    behind = result.memory.l2_behind if result.memory is not None else None
    try:
        return _rules_on(result, config, opts, settings, measure_lock, points_wanted, ahead, sample)
    finally:
        if behind is not None:
            behind.close()  # (an analysis that stopped early: the child ends)


def _rules_on(
    result: KernelAnalysis,
    config: Any,
    opts: KernelOptions,
    settings: AnalyzeSettings,
    measure_lock: AbstractContextManager[Any] | None,
    points_wanted: Callable[[RulesRun], bool] | None,
    ahead: bool,
    sample: Any,
) -> AnalyzeResult:
    """:func:`_run` from the trace on: the rules, the variants' traces and measurement, the
    L2 model computed behind waited for (:func:`_with_l2`), the variants written."""
    from gpuadvise.analyze.evaluate import quiet_minor, run_rules_report
    from gpuadvise.analyze.variant_trace import demote_unmeasured_slower
    from gpuadvise.rules.split import rule_processes
    from gpuadvise.spec.budget import out_of_time, skip
    from gpuadvise.spec.progress import step

    measure, write_variants = settings.measure, settings.write_variants
    t0 = time.perf_counter()
    # the variants compiled ahead of their traces (early): waited for, their folders removed,
    # when the block ends
    with contextlib.ExitStack() as stack:
        early = None
        if out_of_time():
            from gpuadvise.rules.evaluate import skip_all
            from gpuadvise.rules.registry import load_registry

            skip("the rules (no findings were looked for)")
            checked = skip_all(
                load_registry(config.rules_dirs).selected(config),
                "the time budget ran out before the rules ran",
                "the time budget (--time-budget) ran out",
            )
        else:
            told = told_ahead = None
            if ahead:  # each rule's variants compiled for the GPU as soon as that rule is done
                from gpuadvise.analyze.measure import compile_ahead, compile_variants_ahead

                told = compile_ahead(opts)
                # and those a rule names before the model it waits for (GA304's tile sizes,
                # while the L2 model is computed in its child)
                told_ahead = compile_variants_ahead(opts)
            # the variants traced for their points compiled as soon as their rule is done (with
            # a GPU measuring too: their traces then run beside the measurement)
            early = None if points_wanted is not None else _variants_ahead(result, config, opts)
            if early is not None:
                stack.enter_context(early)
                told = _told_both(told, early.told)
            processes = rule_processes()  # 2: a share of them in a forked child
            with step("running the rules"):
                checked = run_rules_report(
                    result,
                    config,
                    lazy_models=False,
                    on_findings=told,
                    processes=processes,
                    on_variants_ahead=told_ahead,
                )
        timings = {**result.timings_s, "rules_s": time.perf_counter() - t0}
        if checked.child:  # the rules' forked child: its CPU (its own, beside this process's)
            timings["rules_child_cpu_s"] = checked.child.get("cpu_s", 0.0)
            import resource

            log.info(
                "rules: %d of %d in a forked child (%.2f CPU-s, peak RSS %.0f MB; this "
                "process's peak so far %.0f MB)",
                len(checked.child["rules"]),
                len(checked.rules_run),
                checked.child.get("cpu_s", 0.0),
                checked.child.get("peak_rss_mb", 0.0),
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            )
        if checked.findings and measure is not False and out_of_time():
            skip("measuring the findings' variants on the GPU")
            measure = False
        lock = measure_lock if measure_lock is not None else contextlib.nullcontext()
        # the GPU measures the variants (a thread waiting on nvcc and the worker) while this one
        # traces them on the CPU for their estimates: neither reads the other's result
        measuring = _Measuring(opts, checked, measure, lock)
        if points_wanted is None or points_wanted(checked):
            checked, timings["variant_traces_s"] = _trace_points(
                result, checked, config, opts, sample, early
            )
        else:
            timings["variant_traces_s"] = 0.0
    # the rules phase, rule by rule (rule_GA305_s ...): which rule a slow analysis waits for
    timings.update({f"rule_{rid}_s": s for rid, s in checked.timings_s.items()})
    # and the analysing thread's CPU in each (cpu_GA305_s): what a loaded machine leaves alone
    timings.update({f"cpu_{rid}_s": s for rid, s in checked.cpu_s.items()})
    checked = quiet_minor(demote_unmeasured_slower(measuring.finish(checked)), config)
    if ahead:
        from gpuadvise.analyze.measure import forget_early

        forget_early(opts)
    if checked.findings and measure is not False:
        # the measurement's own wall (from the rules' end: it overlaps the variant traces)
        timings["measure_s"] = measuring.seconds
    result = _with_l2(dataclasses.replace(result, timings_s=timings))
    timings = result.timings_s
    log.info(
        "timings: %s",
        ", ".join(
            f"{k.removesuffix('_s')} {v:.2f} s"
            for k, v in timings.items()
            if "rule_" not in k and not k.endswith("_cpu_s") and not k.startswith("cpu_")
        ),
    )
    log.debug(
        "rules: %s",
        ", ".join(f"{k[5:-2]} {v:.3f} s" for k, v in timings.items() if k.startswith("rule_")),
    )
    if write_variants:
        from gpuadvise.analyze.measure import write_variants as write_all

        folders = write_all(checked, opts, write_variants)
        checked = dataclasses.replace(
            checked,
            notes=(
                *checked.notes,
                f"{counted(len(folders), 'variant')} written to {write_variants}",
            ),
        )
    return AnalyzeResult(result, checked)


def _with_l2(result: KernelAnalysis) -> KernelAnalysis:
    """``result`` with the L2 model computed behind it (a forked child's) in place, waited for
    when no rule did (:meth:`~gpuadvise.analyze.models.MemoryAnalysis.with_l2`); its timings
    with ``l2_wait_s`` (how long the analysis waited for the child, in its L2 rules or here)
    and ``l2_child_cpu_s`` (the child's CPU)."""
    mem = result.memory
    behind = mem.l2_behind if mem is not None else None
    if mem is None or behind is None:
        return result
    mem = mem.with_l2()
    timings = {
        **result.timings_s,
        "l2_wait_s": behind.waited_s,
        "l2_child_cpu_s": behind.child_cpu_s,
    }
    log.info(
        "L2 model: %s (%.2f CPU-s), waited %.2f s",
        "computed here (its forked child gave none)"
        if behind.computed_here
        else "computed in a forked child",
        behind.child_cpu_s,
        behind.waited_s,
    )
    return dataclasses.replace(result, memory=mem, timings_s=timings)


def _rules_config(source: Any, settings: AnalyzeSettings) -> Any:
    """The rules' configuration (:func:`gpuadvise.rules.run.rules_config`) of ``settings``."""
    from gpuadvise.rules.run import rules_config

    return rules_config(source, settings.select, settings.ignore, settings.rules_dirs)


def _told_both(
    first: Callable[[Any], None] | None, then: Callable[[Any], None]
) -> Callable[[Any], None]:
    """One ``on_findings`` hook for the rules that tells ``first`` (the measurement's compiles,
    when a GPU measures) and then ``then`` (:meth:`~gpuadvise.analyze.ahead.VariantsAhead.told`)."""
    if first is None:
        return then

    def both(findings: Any) -> None:
        first(findings)
        then(findings)

    return both


def _variants_ahead(result: Any, config: Any, opts: KernelOptions) -> Any:
    """A :class:`gpuadvise.analyze.ahead.VariantsAhead` for the rules whose findings'
    variants or proxies :func:`_trace_points` will trace, or None when it will trace none (no
    trace, a trace over ``MAX_TRACE_COST``, a device without memory rates, no such rule
    enabled)."""
    from gpuadvise.analyze.ahead import VariantsAhead
    from gpuadvise.analyze.variant_trace import over_trace_cost
    from gpuadvise.devices import memory_rates
    from gpuadvise.rules.registry import load_registry

    mem = result.memory
    if mem is None or mem.trace is None or over_trace_cost(result) is not None:
        return None
    if memory_rates(result.device) is None:
        return None
    registry = load_registry(config.rules_dirs)
    selected = registry.selected(config)
    ids = [r.id for r in selected if getattr(r, "point_from_variant_trace", False)]
    proxies = [r.id for r in selected if getattr(r, "proxy_point_from_trace", False)]
    if not (ids or proxies):
        return None
    from gpuadvise.analyze.proxy_trace import proxy_sides
    from gpuadvise.analyze.variant_trace import _variant_options

    spec_path = result.spec.spec_path
    return VariantsAhead(
        lambda v, folder: _variant_options(opts, v, folder, spec_path),
        result.device,
        ids,
        lambda proxy, folder: proxy_sides(opts, proxy, folder),
        proxies,
        # a variant's module: its kernel alone assembled (the kernel's own mangled name)
        entry=result.kernel.mangled,
    )


def _trace_points(
    result: Any,
    checked: RulesRun,
    config: Any,
    opts: KernelOptions,
    sample: Any,
    early: Any = None,
) -> tuple[RulesRun, float]:
    """The findings of rules whose change the launch model follows best on the variant's own
    trace, estimated so (:mod:`gpuadvise.analyze.variant_trace`); the seconds it took.
    ``early``: their variants compiled while the rules ran (:func:`_variants_ahead`)."""
    from gpuadvise.analyze.variant_trace import MAX_TRACE_COST, over_trace_cost, with_trace_points
    from gpuadvise.rules.registry import load_registry
    from gpuadvise.spec.budget import out_of_time

    t0 = time.perf_counter()
    if result.memory is None or result.memory.trace is None or out_of_time():
        return checked, 0.0
    registry = load_registry(config.rules_dirs)
    with_variant = sorted({f.rule for f in checked.findings if f.variant is not None})
    ids = [r for r in with_variant if getattr(registry.find(r), "point_from_variant_trace", False)]
    proxies = [
        r for r in with_variant if getattr(registry.find(r), "proxy_point_from_trace", False)
    ]
    if not (ids or proxies):
        return checked, 0.0
    from gpuadvise.spec.progress import step

    # the trace's cost, not its seconds (wall or CPU): the machine's speed and load would decide
    # whether variants are traced, and so the findings' points (find_membership: 0.09x on one
    # run, 2.3x on another; contraction's GA309:44 a warning or a note)
    cost = over_trace_cost(result)
    if cost is not None:
        note = (
            f"the variants of {', '.join(ids + proxies)} were not traced (the kernel's trace cost "
            f"{cost:,} warp accesses and warp steps, more than {MAX_TRACE_COST:,}): their "
            "estimates are the rules' own"
        )
        return dataclasses.replace(checked, notes=(*checked.notes, note)), 0.0
    out = checked
    if ids:
        with step("tracing the variants the launch model estimates"):
            out = with_trace_points(result, out, opts, sample, ids, early)
    if proxies:
        from gpuadvise.analyze.proxy_trace import with_proxy_points

        with step("tracing the layout proxies"):
            out = with_proxy_points(result, out, opts, sample, proxies, early)
    return out, time.perf_counter() - t0


def _prewarm_measurement() -> bool:
    """With a GPU here, the measurement's worker started now: its imports and CUDA context are
    made while the kernel is traced and modelled (one analysis at a time: analyses sharing the
    GPU under a lock start theirs when they measure). Whether it was started."""
    from gpuadvise.runner.client import prewarm_worker, pycuda_missing

    if pycuda_missing() is None:
        prewarm_worker()
        _prebuild_timing_kernels()
        return True
    return False


def _measure_ahead(opts: KernelOptions) -> None:
    """Once the kernel is compiled, the prewarmed worker makes the kernel's buffers and verifies
    it while the kernel is traced and the rules run (:func:`gpuadvise.analyze.measure.start_early`:
    the races need the variants, not the kernel)."""
    from gpuadvise.toolchain.binary import is_binary

    if is_binary(opts.source):  # nothing is measured (its variants need the source)
        return
    from gpuadvise.analyze.measure import start_early

    start_early(opts)


def _prebuild_timing_kernels() -> None:
    """The timing's own kernels (spin, L2 flush) compiled for the live GPU in a thread now,
    while the kernel is compiled and traced (two nvcc runs on a cold cache; the measurement
    waits for them, or builds them itself when this failed)."""
    import threading

    from gpuadvise.devices import live_device

    live = live_device()
    if live is None:
        return

    def build() -> None:
        from gpuadvise.analyze.prepare import timing_kernels

        with contextlib.suppress(Exception):  # the measurement reports it when it matters
            timing_kernels(live.arch)

    threading.Thread(target=build, daemon=True).start()


class _Measuring:
    """The findings' variants measured on the GPU (:func:`gpuadvise.analyze.measure.measure_trials`)
    in a thread started now, their trials put on the findings by :meth:`finish`. ``measure``:
    True (required), False (never) or None (when a GPU and PyCUDA are present); ``lock``: held
    while the GPU measures (parallel analyses share one GPU)."""

    def __init__(
        self,
        opts: KernelOptions,
        checked: RulesRun,
        measure: bool | None,
        lock: AbstractContextManager[Any],
    ) -> None:
        import contextvars
        import threading

        from gpuadvise.runner.client import pycuda_missing
        from gpuadvise.toolchain.binary import is_binary

        self.opts, self.lock = opts, lock
        self.why: str | None = None  # why nothing is measured (None: measured, or not asked)
        self.done: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.thread: Any = None
        if measure is False or not checked.findings:
            return
        if is_binary(opts.source):  # its variants need the source (analyze.binary_input)
            return
        why = pycuda_missing()
        if why is not None:
            if measure:
                from gpuadvise.errors import RunnerError

                raise RunnerError(f"cannot measure: {why}", "drop --measure: analysis needs no GPU")
            self.why = why
            return
        run = contextvars.copy_context().run  # the thread sees this one's budget and progress
        # a daemon: an interrupted analysis does not wait for the race to end
        self.thread = threading.Thread(target=run, args=(self._work, checked), daemon=True)
        self.thread.start()

    def _work(self, checked: RulesRun) -> None:
        from gpuadvise.analyze.measure import measure_trials
        from gpuadvise.spec.progress import step

        t0 = time.perf_counter()
        try:
            with self.lock, step("measuring the findings' variants"):
                self.done = measure_trials(self.opts, checked)
        except BaseException as exc:  # raised again in the analysis's thread
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - t0

    def finish(self, checked: RulesRun) -> RulesRun:
        """``checked`` (the findings measured, or the same after their estimates changed)
        with the measurements and their notes, re-ranked."""
        if self.why is not None:
            return dataclasses.replace(
                checked, notes=(*checked.notes, f"estimates only, nothing measured: {self.why}")
            )
        if self.thread is None:
            return checked
        self.thread.join()
        if self.error is not None:
            raise self.error
        from gpuadvise.analyze.measure import apply_trials

        measured, notes = apply_trials(checked, self.done or {})
        return dataclasses.replace(measured, notes=(*measured.notes, *notes))
