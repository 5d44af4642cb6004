"""``gpuadvise analyze``: run the analysis (gpuadvise.analyze.run) and render it.

Exit codes: 0 the analysis ran (findings or not), 1 findings at or above ``--fail-on`` (or an
incomplete analysis under ``--fail-on``, unless ``--allow-incomplete``), 2 bad input, a kernel
that does not compile, or a tool error (one line on stderr), 130 interrupted.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
from gpuadvise.report.renderers import ANALYSIS_FORMATS, BATCH_FORMATS

# --format choices of one analysis (FMT or FMT=FILE, repeatable): the renderers' registry
ANALYZE_FORMATS = ANALYSIS_FORMATS

# --fail-on: a finding fails the run when its severity ranks at or above the level given.
_SEVERITY_RANK = {"error": 0, "warning": 1, "note": 2}
FAIL_ON_LEVELS = ("warning", "error")


def failing_findings(findings: Iterable[Any], fail_on: str | None) -> list[Any]:
    """The findings that fail the run under ``--fail-on`` (none when it is not given). A rule
    that failed is an error row (severity ``error``): it fails the run too, since the analysis is
    incomplete."""
    if fail_on is None:
        return []
    limit = _SEVERITY_RANK[fail_on]
    return [f for f in findings if _SEVERITY_RANK.get(f.severity, 2) <= limit]


def fails_run(checked: Any, fail_on: str | None, allow_incomplete: bool = False) -> bool:
    """Whether ``analyze --fail-on`` fails on the rules' run ``checked``: findings at or above
    ``fail_on``, or an incomplete run (rules skipped because the trace stopped, the time budget
    ran out ...) unless ``allow_incomplete``. Never without ``--fail-on``."""
    if fail_on is None:
        return False
    if failing_findings(checked.findings, fail_on):
        return True
    return bool(getattr(checked, "incomplete", ())) and not allow_incomplete


@dataclass(frozen=True)
class OutputSettings:
    """How an analysis is shown and judged, for one kernel and for a batch alike (the command
    line's output options): ``formats``: ``FMT`` or ``FMT=FILE`` each; ``output``: the file of
    the one without ``=FILE``; ``fail_on``/``allow_incomplete``: the exit code (see
    :func:`fails_run`); ``statistics``: the findings counted per rule instead of the report;
    ``quiet``: no progress display; ``argv``: the command's arguments."""

    formats: tuple[str, ...] = ()
    output: str | None = None
    fail_on: str | None = None
    allow_incomplete: bool = False
    statistics: bool = False
    quiet: bool = False
    argv: list[str] | None = None


def run_analyze(
    opts: KernelOptions,
    settings: AnalyzeSettings,
    out: OutputSettings,
    *,
    fix: bool = False,
    diff: bool = False,
    unsafe_fixes: bool = False,
) -> int:
    """Analyze one kernel with ``settings`` and show it as ``out`` says. ``out.formats``:
    ``FMT`` or ``FMT=FILE`` each (repeatable; FMT: text, json or html, the whole analysis, or
    sarif, junit, github or markdown, the findings for CI systems; one may go to stdout);
    ``out.output``: the file of the one without ``=FILE``. Returns the exit code (1 when
    ``fail_on`` is ``warning`` or ``error`` and findings of that severity or worse exist, or the
    analysis is incomplete, unless ``allow_incomplete``: see :func:`fails_run`).

    ``output`` and ``settings.write_variants`` are checked before the analysis: neither may
    replace an input, and both must be writable, so that a long analysis never ends in a write
    error.

    ``settings.time_budget_s``: a partial result after that many seconds (what was skipped is
    reported); ``out.quiet``: no progress display (there is none either when stderr is not a
    terminal, or when a machine format goes to stdout). An unchanged re-run prints the stored
    output (:mod:`gpuadvise.analyze.result_cache`; ``--no-cache`` bypasses it).

    ``fix``: apply the verified, faster fixes to the source (gpuadvise.analyze.fix); ``diff``:
    print their combined diff instead of writing (text format: the diff alone on stdout, the
    steps on stderr); ``unsafe_fixes``: display-only diffs too. ``out.argv``: the command's
    arguments, for the command the text report's last line suggests (the same with ``--diff``);
    ``out.statistics``: the findings counted per rule instead of the report (text only)."""
    from gpuadvise.analyze import result_cache
    from gpuadvise.errors import UsageError
    from gpuadvise.report.output import check_output_target, parse_format_targets

    targets = parse_format_targets(out.formats, out.output, ANALYZE_FORMATS)
    to_stdout = [f for f, dest in targets if dest is None]
    text_only = targets == [("text", None)]
    opts = _source_from_spec(opts)
    opts = _binary_request(opts, fix, diff, settings.write_variants, settings.measure)
    if any(f == "text" and dest is not None for f, dest in targets):
        raise UsageError("--output needs a machine format", "add --format json|sarif|junit|...")
    if out.statistics and (not text_only or fix or diff):
        raise UsageError(
            "--statistics prints a text summary", "leave out --format/--json/--fix/--diff"
        )
    if out.fail_on is not None and out.fail_on not in FAIL_ON_LEVELS:
        raise UsageError(f"unknown --fail-on {out.fail_on!r}", "use warning or error")
    # (the measurement's module, with statistics, only where asked: not before the key's nvcc)
    for _, dest in targets:
        if dest is not None:
            from gpuadvise.analyze.measure import analysis_inputs

            check_output_target(str(dest), analysis_inputs(opts))
    if settings.write_variants is not None:
        from gpuadvise.analyze.measure import check_variants_folder

        check_variants_folder(settings.write_variants)
    time_budget_s = settings.time_budget_s
    if time_budget_s is not None and not time_budget_s > 0:
        raise UsageError(
            f"--time-budget {time_budget_s:g} is not a positive number of seconds", "e.g. 30"
        )
    if unsafe_fixes and not (fix or diff):
        raise UsageError("--unsafe-fixes needs --fix or --diff", "add --fix (or --diff)")
    if fix and diff:
        raise UsageError("--fix and --diff do not go together", "--diff shows, --fix writes")
    if (fix or diff) and not opts.source:
        raise UsageError("--fix needs a kernel source file", "give the .cu file to fix")
    if fix:
        _check_fix_target(opts)
    # the terminal's report on stdout: its header (launch, resources, occupancy, waves) printed
    # as soon as it is known, before the trace; the rest of the same report at the end
    streamed = ("text", None) in targets and not out.statistics and not (diff and text_only)
    key = None
    key_s = None  # the key's seconds (its compile on a compile-cache miss: nvcc's)
    if not (fix or diff) and _cacheable_run(opts, settings):
        params = {
            "trace": settings.trace,
            "sample_ctas": settings.sample_ctas,
            "select": list(settings.select),
            "ignore": list(settings.ignore),
            "rules_dirs": list(settings.rules_dirs),
            "measure": settings.measure,
            "tracer": settings.tracer,
            "fail_on": out.fail_on,
            "allow_incomplete": out.allow_incomplete,
            "l2_probe_ctas": settings.l2_probe_ctas,
            "statistics": out.statistics,
        }
        from gpuadvise.analyze.warm import imports_during
        from gpuadvise.toolchain.compile import while_nvcc_runs
        from gpuadvise.toolchain.sass import life_ranges_made

        # the key compiles the kernel: the later stages are imported while nvcc runs (not on a
        # compile cache hit, where nothing runs beside them: an unchanged re-run stays short)
        with while_nvcc_runs(
            lambda: imports_during(
                settings.trace, not settings.rules_dirs, header=streamed, nvcc_alone=True
            ),
            made=life_ranges_made,
        ):
            t_key = time.perf_counter()
            key = result_cache.analysis_key(opts, params, {})
            key_s = time.perf_counter() - t_key
        hit = _render_hit(
            result_cache.load(key), targets, out.fail_on, out.statistics, out.argv,
            out.allow_incomplete,
        )  # fmt: skip
        if hit is not None:  # rendered and judged from the stored report, as a fresh run is
            shown, code = hit
            for (fmt, dest), text in zip(targets, shown, strict=True):
                _emit(text, fmt, None if dest is None else str(dest))
            return code
    from gpuadvise.analyze.run import run_analysis
    from gpuadvise.report.progress import progress_for

    # no display when a machine format goes to stdout (it is read by a program, not a person)
    progress = progress_for(not out.quiet and to_stdout in ([], ["text"]))
    header = _HeaderPrinter() if streamed else None
    try:
        done = run_analysis(opts, settings, progress=progress, on_head=header)
        result, checked = done.analysis, done.rules
        del done
        if key_s is not None:
            # the key compiled the kernel before the analysis' own timings began (its compile
            # then a cache hit, compile_cached): its seconds, nvcc's on a miss (secp256k1: 19
            # CPU-s of cicc and ptxas that no stage showed)
            result = dataclasses.replace(result, timings_s={**result.timings_s, "key_s": key_s})
        code = 1 if fails_run(checked, out.fail_on, out.allow_incomplete) else 0
        fixed = None
        if fix or diff:
            from gpuadvise.analyze.fix import compose_fixes
            from gpuadvise.runner.client import pycuda_missing
            from gpuadvise.spec.progress import reporting, step

            measured = settings.measure is not False and pycuda_missing() is None
            # each round of fixes analyses the kernel again: this trace is not held meanwhile
            result = result.without_trace_data()
            with reporting(progress), step("trying the fixes, one on top of the other"):
                fixed = compose_fixes(
                    opts, checked.findings, unsafe=unsafe_fixes, measured=measured,
                    analysis=result, select=settings.select, ignore=settings.ignore,
                    rules_dirs=settings.rules_dirs,
                )  # fmt: skip
    finally:
        if progress is not None:
            progress.close()
    if diff and text_only and fixed is not None:
        from gpuadvise.report import console

        console.fix_steps(fixed.to_dict(), to_stderr=True)
        console.plain(fixed.diff or "")
        return code
    report = _report(result, checked, fixed, out.argv)
    texts: dict[str, str] = {}
    for fmt, dest in targets:
        if out.statistics:
            text = _statistics(report)
        elif fmt in texts:
            text = texts[fmt]
        else:
            text = _render(fmt, report)
        texts[fmt] = text
        if header is not None and fmt == "text" and dest is None:
            text = header.rest(text)
        _emit(text, fmt, None if dest is None else str(dest))
    if fix and fixed is not None:
        from gpuadvise.analyze.fix import write_fix
        from gpuadvise.report import console

        console.fix_written(write_fix(fixed), dry_run=False)
    if (
        key is not None
        and not result.skipped
        and not checked.incomplete
        and _nothing_measured(settings.measure)
    ):
        result_cache.store(key, report)
    return code


class _HeaderPrinter:
    """``run_analysis``'s ``on_head`` for the terminal's report on stdout: prints the report's
    header (:func:`gpuadvise.report.renderers.render_header`) as soon as the analysis knows it;
    :meth:`rest` is then what remains to print of the finished report's rendering, so that
    stdout holds exactly the one-shot rendering."""

    def __init__(self) -> None:
        self.printed = ""

    def __call__(self, head: Any) -> None:
        from gpuadvise.analyze.report import report_header
        from gpuadvise.report.renderers import render_header

        text = render_header("text", report_header(head))
        if text and not self.printed:
            _emit(text, "text", None)
            self.printed = text

    def rest(self, text: str) -> str:
        """``text`` (the finished report, rendered) without the header already printed. The two
        begin alike by construction (one header, made by :func:`header_json` from the same
        values); were they ever to differ, the whole report is printed again below it rather
        than a line lost."""
        if text.startswith(self.printed):
            return text[len(self.printed) :]
        return text


def _render_hit(
    hit: Any,
    targets: list[tuple[str, Path | None]],
    fail_on: str | None,
    statistics: bool,
    argv: list[str] | None,
    allow_incomplete: bool = False,
) -> tuple[list[str], int] | None:
    """A cache hit (the stored report, checked) rendered for every target, with its exit code
    under ``fail_on`` and the current command (``argv``) in it; None when there is no hit, or
    when the stored report, valid in shape, still cannot be rendered (then it is a miss like
    any damaged entry)."""
    if hit is None:
        return None
    from dataclasses import replace

    from gpuadvise.report.rules_text import command_line

    try:
        report = replace(hit, command=None if argv is None else command_line(argv))
        shown = [_statistics(report) if statistics else _render(fmt, report) for fmt, _ in targets]
        code = 1 if fails_report(report, fail_on, allow_incomplete) else 0
    except Exception:  # noqa: BLE001 - a report no renderer draws is a miss: the analysis runs
        # again, and a renderer's own fault then shows on the fresh report
        return None
    return shown, code


def fails_report(report: Any, fail_on: str | None, allow_incomplete: bool = False) -> bool:
    """:func:`fails_run` on a report (its findings' severities, its ``incomplete`` line)."""
    if fail_on is None:
        return False
    limit = _SEVERITY_RANK[fail_on]
    if any(_SEVERITY_RANK.get(f.get("severity"), 2) <= limit for f in report.findings):
        return True
    return report.incomplete is not None and not allow_incomplete


def _statistics(report: Any) -> str:
    from gpuadvise.report.rules_text import statistics_lines

    return guard_text("\n".join(statistics_lines(report.findings)) + "\n")


def guard_text(text: str) -> str:
    from gpuadvise.report.safe_text import guard

    return guard(text, "text")


def _cacheable_run(opts: KernelOptions, settings: AnalyzeSettings) -> bool:
    """Whether this run may use the analysis-result cache: not with --no-cache, variants written,
    the GPU tracer, a time budget, or measurement asked for."""
    return (
        not opts.no_cache
        and settings.write_variants is None
        and settings.tracer != "gpu"
        and settings.time_budget_s is None
        and settings.measure is not True
    )


def _nothing_measured(measure: bool | None) -> bool:
    """No variant was measured: --no-measure, or no GPU here (then the default measures none)."""
    if measure is False:
        return True
    from gpuadvise.runner.client import pycuda_missing

    return pycuda_missing() is not None


def _report(result: Any, checked: Any, fixed: Any = None, argv: list[str] | None = None) -> Any:
    """The analysis's report, built once for every format; ``argv``: the command's arguments
    (the terminal's summary names the command)."""
    from gpuadvise.analyze.report import build_report
    from gpuadvise.report.rules_text import command_line

    command = None if argv is None else command_line(argv)
    return build_report(result, checked, fixed, command)


def _render(fmt: str, report: Any) -> str:
    """The analysis's ``report`` as ``fmt`` (the renderers' registry: text is what the terminal
    report prints, captured: the findings first, then the details, then one summary line)."""
    from gpuadvise.report.renderers import render

    return render(fmt, report)


def _emit(text: str, fmt: str, output: str | None) -> None:
    from gpuadvise.report.output import write_output, write_stdout

    if fmt == "text":
        write_stdout(text)
        return
    write_output(text, output)


def _check_fix_target(opts: KernelOptions) -> None:
    """``--fix`` writes the source: refuse, before the analysis, one that cannot be written."""
    import os
    from pathlib import Path

    from gpuadvise.errors import UsageError

    src = Path(opts.source or "")
    if src.is_file() and (not os.access(src, os.W_OK) or not src.stat().st_mode & 0o222):
        raise UsageError(
            f"--fix cannot write {src}: it is read-only (mode {src.stat().st_mode & 0o7777:04o})",
            "make it writable (chmod u+w), or use --diff",
        )
    src = Path(os.path.realpath(src))  # a link: the file it leads to is written
    if src.is_file() and not os.access(src.parent, os.W_OK):
        raise UsageError(
            f"--fix cannot write beside {src}: its folder is read-only",
            "make the folder writable, or use --diff",
        )


# Options that describe one kernel's launch: with several cases, each case's spec says them.
_SINGLE_KERNEL_OPTIONS = {
    "kernel": "--kernel",
    "grid": "--grid",
    "block": "--block",
    "dynamic_smem": "--dynamic-smem",
    "spec": "--spec",
    "args": "--arg",
    "buffers": "--buffer",
    "constants": "--constant",
    "with_source": "--source",
}


def run_analyze_paths(
    paths: list[str],
    opts: KernelOptions,
    settings: AnalyzeSettings,
    out: OutputSettings,
    *,
    jobs: int | None,
    shard: str | None,
    fix: bool = False,
) -> int:
    """``gpuadvise analyze PATH...`` with folders or several paths: every case analyzed with
    ``settings`` (as one kernel is), ``jobs`` at a time, ranked by the time to win. Exit 1
    under ``--fail-on`` when any case has such findings or is incomplete (unless
    ``allow_incomplete``). A case that could not be
    analyzed (no source, a compile error ...) is a row with its error, and, once every case is
    reported, a :class:`GpuAdviseError` (exit 2, as for one kernel, and as ``gate`` does). No
    case under ``paths`` is a usage error; an empty ``--shard`` (more shards than cases) is not."""
    import dataclasses

    from gpuadvise.analyze.batch import analyze_cases
    from gpuadvise.analyze.cases import discover_cases, jobs_default, parse_shard, take_shard
    from gpuadvise.analyze.report import build_batch_report
    from gpuadvise.errors import GpuAdviseError, UsageError
    from gpuadvise.report import console
    from gpuadvise.report.batch_report import render_batch
    from gpuadvise.report.output import check_output_target, parse_format_targets, write_output

    targets = parse_format_targets(out.formats, out.output, BATCH_FORMATS)
    if any(f == "text" and dest is not None for f, dest in targets):
        raise UsageError("--output needs a machine format", "add --format json|sarif|junit|...")
    if fix or settings.write_variants:
        raise UsageError(
            "--fix, --diff and --write-variants take one kernel",
            "run them on one case (its .cu, or its spec with --spec)",
        )
    if out.fail_on is not None and out.fail_on not in FAIL_ON_LEVELS:
        raise UsageError(f"unknown --fail-on {out.fail_on!r}", "use warning or error")
    for field, option in _SINGLE_KERNEL_OPTIONS.items():
        if getattr(opts, field):
            raise UsageError(
                f"{option} describes one kernel, but several cases are analyzed",
                "put it in the cases' launch specs, or analyze one file",
            )
    part = parse_shard(shard)
    base = dataclasses.replace(opts, source=None)
    found = discover_cases(paths, base, gate_cases=_gate_cases)
    if not found:
        raise UsageError(
            f"no kernel case found under {', '.join(paths)}",
            "add a launch spec (case.toml, or <kernel>.toml beside the .cu), or give the .cu files",
        )
    cases = take_shard(found, part, key=lambda c: c.id)
    inputs = tuple(p for c in cases for p in (c.options.source, c.options.spec) if p)
    for _, dest in targets:
        if dest is not None:
            check_output_target(str(dest), tuple(Path(p).resolve() for p in inputs))
    if not cases:  # a shard past the end of the list: the other shards cover every case
        console.note(f"no kernel case found in this shard under {', '.join(paths)}")
        empty = build_batch_report([])
        for fmt, dest in targets:
            if fmt != "text":
                write_output(render_batch(fmt, empty), None if dest is None else str(dest))
        return 0
    n_jobs = jobs or jobs_default()
    to_stdout = [f for f, dest in targets if dest is None]
    shown = to_stdout in ([], ["text"])
    progress = console.case_progress(len(cases)) if shown else None
    results = analyze_cases(cases, settings, jobs=n_jobs, on_done=progress)
    batch = build_batch_report(results)
    for fmt, dest in targets:
        if fmt == "text" and out.statistics:
            from gpuadvise.report.rules_text import statistics_lines

            every = [f for case in batch.cases if case.report for f in case.report.findings]
            console.plain("\n".join(statistics_lines(every)))
        else:
            write_output(render_batch(fmt, batch), None if dest is None else str(dest))
    failed = [r for r in results if r.error is not None]
    if failed:  # after every case's row: an input, compile or tool error, as for one kernel
        first = failed[0]
        raise GpuAdviseError(
            f"{len(failed)} of {len(results)} cases could not be analyzed "
            f"(first: {first.case.id}: {first.error})",
            "fix those cases or leave them out; each case's row gives its error",
        )
    if out.fail_on is not None and any(
        r.result is not None and fails_run(r.result.rules, out.fail_on, out.allow_incomplete)
        for r in results
    ):
        return 1
    return 0


def _gate_cases(config_file: Path) -> list[Any]:
    """The gate configuration's cases in ``config_file`` as analysis cases (none when the file
    has no gate table)."""
    from gpuadvise.analyze.cases import Case
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.gate.config import has_gate_table, load_gate_config

    if not has_gate_table(config_file):
        return []
    try:
        cfg = load_gate_config(config_file)
    except GpuAdviseError as exc:
        return [Case(f"{config_file.name}:gate", KernelOptions(source=None), exc.one_line())]
    out = []
    for c in cfg.cases:
        o = KernelOptions(
            source=None if c.source is None else str(c.source),
            kernel=c.kernel,
            spec=None if c.spec is None else str(c.spec),
            grid=c.grid,
            block=c.block,
            dynamic_smem=c.dynamic_smem,
            args=tuple(c.args),
            buffers=tuple(c.buffers),
            nvcc_flags=tuple(c.nvcc_flags),
            gpu=c.gpu,
            arch=c.arch,
        )
        out.append(Case(f"{config_file.parent.name or '.'}/gate:{c.name}", o))
    return out


def _binary_request(
    opts: KernelOptions, fix: bool, diff: bool, write_variants: str | None, measure: bool | None
) -> KernelOptions:
    """A .ptx/.cubin given: what needs the source refused, ``--source FILE`` taken
    (:mod:`gpuadvise.analyze.binary_input`)."""
    from gpuadvise.toolchain.binary import is_binary

    if opts.source and not is_binary(opts.source) and not opts.with_source:
        # a source file: nothing to check (binary_input imports the rules' API, which a
        # cache hit never needs and the header need not wait for)
        return opts
    from gpuadvise.analyze.binary_input import check_binary_request

    return check_binary_request(
        opts, fix=fix, diff=diff, write_variants=write_variants, measure=measure
    )


def _source_from_spec(opts: KernelOptions) -> KernelOptions:
    """``opts`` with the source its launch spec names, when only ``--spec`` gave it: the
    variants, ``--fix`` and ``--write-variants`` rewrite a copy of that file (they read
    ``opts.source``: ``analyze --spec case.toml`` crashed measuring a fix)."""
    if opts.source or not opts.spec:
        return opts
    import dataclasses

    from gpuadvise.spec.kernel_spec import load_spec

    named = load_spec(opts.spec).get("source")
    return opts if named is None else dataclasses.replace(opts, source=str(named))
