"""``gpuadvise gate``: the click options, and rendering what :mod:`gpuadvise.gate.run` returns.

The work (the configuration and its checks, the baseline file, the ``git worktree`` of
``--baseline-ref``, the comparisons) is :mod:`gpuadvise.gate`. :func:`gate_command` returns the
exit code: 0 no regression, 1 regression (or, with ``--strict``, an ambiguous verdict), 2 a case
could not be evaluated. Usage and configuration errors raise
:class:`~gpuadvise.errors.GpuAdviseError` (the CLI turns them into one line and exit code 2).

Only :mod:`click` and the renderers' registry (the format choices) are imported at module level,
so that the CLI can build its help quickly.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuadvise.errors import UsageError
from gpuadvise.report.renderers import GATE_FORMATS

if TYPE_CHECKING:
    from gpuadvise.gate.provider import MetricsProvider
    from gpuadvise.gate.results import GateResult

__all__ = [
    "FORMATS",
    "gate_command",
    "gate_markdown",
    "gate_options",
    "parse_format_targets",
    "render",
]

FORMATS = GATE_FORMATS  # the renderers' registry's (gpuadvise.report.renderers)
# Formats that must be the only thing on stdout to stay parseable.
_EXCLUSIVE = {"json", "sarif", "junit", "markdown", "html", "report"}


def gate_options(f: Any) -> Any:
    """The click options of ``gpuadvise gate`` (their parameter names match
    :func:`gate_command`'s keywords)."""
    options = [
        click.option(
            "--config",
            "config",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            help="Gate configuration: gpuadvise.toml ([gate]) or pyproject.toml "
            "([tool.gpuadvise.gate]). Default: the first found from the current directory up.",
        ),
        click.option(
            "--baseline",
            "baseline",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            help="Baseline file to compare with or to update. Default: `baseline` in the config "
            "(.gpuadvise/gate-baseline.json beside it).",
        ),
        click.option(
            "--baseline-ref",
            "baseline_ref",
            metavar="REV",
            help="Compare with git revision REV instead of a stored baseline: REV is checked out "
            "in a temporary worktree, static metrics are computed for both trees, and on a GPU "
            "both kernels are timed A/B, interleaved, in this job.",
        ),
        click.option(
            "--update-baseline",
            "update_baseline",
            is_flag=True,
            help="Measure the current tree and write the baseline file atomically; compares "
            "nothing. Parts not measured (timings on a machine without a GPU) are kept from the "
            "previous file.",
        ),
        click.option(
            "--gates",
            "gates",
            type=click.Choice(["all", "static", "timed"]),
            default="all",
            show_default=True,
            help="Which gates to run. all: static gates everywhere, timed gates where a GPU is "
            "present (reported as skipped without one). timed without a GPU is an error.",
        ),
        click.option(
            "--case",
            "cases",
            metavar="NAME",
            multiple=True,
            help="Gate only this case (repeatable). Default: every case in the config.",
        ),
        click.option(
            "--shard",
            "shard",
            metavar="K/N",
            help="Gate only the K-th of N slices of the cases (sorted by name), for CI matrices: "
            "the N shards together gate every case once.",
        ),
        click.option(
            "--format",
            "formats",
            metavar="FMT[=FILE]",
            multiple=True,
            help="Output: text, json, sarif, junit, github (workflow annotations), markdown "
            "(a summary for $GITHUB_STEP_SUMMARY), html (one self-contained page) or report "
            "(the whole report, for gpuadvise render). Repeat for several; FMT=FILE writes that "
            "one to FILE (appended when FILE is $GITHUB_STEP_SUMMARY). Default: text.",
        ),
        click.option(
            "--output",
            "-o",
            "output",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            help="Write the one format given without =FILE to FILE instead of stdout.",
        ),
        click.option(
            "--exit-zero",
            "exit_zero",
            is_flag=True,
            help="Report only: exit 0 even when a gate fails or a case cannot be evaluated.",
        ),
        click.option(
            "--strict",
            "strict",
            is_flag=True,
            help="Ambiguous verdicts (too few samples, within the noise, another device) fail "
            "the gate too (exit 1, JUnit failures).",
        ),
        click.option(
            "--gpu",
            "gpu",
            metavar="NAME",
            help="Device model for the static metrics (H100, A100-80GB ...); overrides the "
            "config's gpu.",
        ),
        click.option(
            "--arch",
            "arch",
            metavar="sm_XY",
            help="Architecture for the static metrics; overrides the config's arch.",
        ),
        click.option(
            "--trust-config",
            "trust_config",
            is_flag=True,
            help="Compile with any nvcc flag the configuration and its specs give, and read "
            "files outside the repository. Without it, flags that can run programs or touch "
            "files (-ccbin, -Xcompiler, -o, include folders outside the repository ...) are "
            "refused, and so are sources, specs, data files and #includes outside the "
            "repository: spec and gate files are code. Never use it on pull requests from forks.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


# ---------------------------------------------------------------------------------------------
# Outputs.


def parse_format_targets(
    formats: Sequence[str], output: str | None
) -> list[tuple[str, Path | None]]:
    """``--format`` values and ``--output`` as ``(format, file or None for stdout)`` pairs."""
    from gpuadvise.report.output import parse_format_targets as parse

    return parse(formats, output, FORMATS)


def gate_markdown(result: GateResult) -> str:
    """The Markdown summary: status, warnings, the rows that matter, the unchanged ones folded."""
    return render(result, "markdown")


def render(result: GateResult, fmt: str, *, color: bool = False) -> str:
    """``result`` in one of :data:`FORMATS` (its report built once: :mod:`gpuadvise.gate.report`;
    the renderers' registry draws it)."""
    from gpuadvise.gate.report import build_gate_report

    return _render(build_gate_report(result), fmt, color=color)


def _render(report: Any, fmt: str, *, color: bool = False) -> str:
    from gpuadvise.report.renderers import render_gate

    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", "use one of " + ", ".join(FORMATS))
    return str(render_gate(fmt, report, color=color))


def _emit(result: GateResult, targets: Sequence[tuple[str, Path | None]]) -> None:
    from gpuadvise.gate.report import build_gate_report
    from gpuadvise.report import console
    from gpuadvise.report.output import write_output

    report = build_gate_report(result)  # once, for every format
    to_stdout = [fmt for fmt, dest in targets if dest is None]
    if not (set(to_stdout) & _EXCLUSIVE) and "text" not in to_stdout:
        console.raw(_render(report, "text", color=sys.stdout.isatty()))
    for fmt, dest in targets:
        if dest is None:
            console.raw(_render(report, fmt, color=fmt == "text" and sys.stdout.isatty()))
        else:
            write_output(_render(report, fmt), dest)


def gate_command(
    config: str | None = None,
    baseline: str | None = None,
    baseline_ref: str | None = None,
    update_baseline: bool = False,
    gates: str = "all",
    cases: Sequence[str] = (),
    formats: Sequence[str] = (),
    output: str | None = None,
    exit_zero: bool = False,
    strict: bool = False,
    gpu: str | None = None,
    arch: str | None = None,
    trust_config: bool = False,
    shard: str | None = None,
    *,
    provider: MetricsProvider | None = None,
    cwd: Path | None = None,
) -> int:
    """Run ``gpuadvise gate``; returns the exit code (see the module docstring).

    ``provider`` and ``cwd`` (where config discovery starts) are for tests and embedding.
    """
    from gpuadvise.gate.run import execute_gate, prepare_gate
    from gpuadvise.report import console
    from gpuadvise.report.output import check_output_target
    from gpuadvise.report.safe_text import one_line

    targets = parse_format_targets(formats, output)
    plan = prepare_gate(
        config=config,
        baseline=baseline,
        baseline_ref=baseline_ref,
        update_baseline=update_baseline,
        gates=gates,
        cases=cases,
        gpu=gpu,
        arch=arch,
        strict=strict,
        trust_config=trust_config,
        cwd=cwd,
        shard=shard,
    )
    if not update_baseline:
        for fmt, dest in targets:
            if dest is not None:
                option = "--output" if output and dest == Path(output) else f"--format {fmt}="
                check_output_target(dest, plan.inputs, option=option)
    run = execute_gate(plan, provider)
    if run.recorded is not None:
        rec = run.recorded
        for n in rec.notes:
            console.note(n)
        count = len(rec.baseline.cases)
        console.plain(
            f"recorded the gate baseline of {count} case{'s' if count != 1 else ''} in "
            f"{one_line(rec.shown_path)}"
        )
        return 0
    assert run.result is not None
    _emit(run.result, targets)
    return 0 if exit_zero else run.result.exit_code()
