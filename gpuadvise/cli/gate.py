"""``gpuadvise gate``: find the configuration, get a baseline, compare, write the reports.

The comparisons themselves are :mod:`gpuadvise.gate.core` (pure, provider injected). This module does
the I/O around them: config discovery, the baseline file, the ``git worktree`` of
``--baseline-ref``, the kernel's source line for annotations, and the output formats. The click
options are :func:`gate_options`; the command body is :func:`gate_command`, which returns the exit
code: 0 no regression, 1 regression (or, with ``--strict``, an ambiguous verdict), 2 a case could
not be evaluated. Usage and configuration errors raise :class:`~gpuadvise.errors.GpuAdviseError`
(the CLI turns them into one line and exit code 2).

Only :mod:`click` is imported at module level, so that the CLI can build its help quickly.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuadvise.errors import ConfigError, GpuAdviseError, UsageError

if TYPE_CHECKING:
    from gpuadvise.gate.core import GateCase, GateConfig, GateResult, MetricsProvider

__all__ = [
    "FORMATS",
    "baseline_worktree",
    "default_provider",
    "gate_command",
    "gate_markdown",
    "gate_options",
    "parse_format_targets",
    "render",
]

FORMATS = ("text", "json", "sarif", "junit", "github", "markdown", "html")
# Formats that must be the only thing on stdout to stay parseable.
_EXCLUSIVE = {"json", "sarif", "junit", "markdown", "html"}


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
            "--format",
            "formats",
            metavar="FMT[=FILE]",
            multiple=True,
            help="Output: text, json, sarif, junit, github (workflow annotations), markdown "
            "(a summary for $GITHUB_STEP_SUMMARY) or html (one self-contained page). Repeat for "
            "several; FMT=FILE writes that one to FILE (appended when FILE is "
            "$GITHUB_STEP_SUMMARY). Default: text.",
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
    targets: list[tuple[str, Path | None]] = []
    for spec in formats or ("text",):
        fmt, sep, dest = spec.partition("=")
        fmt = fmt.strip().lower()
        if fmt not in FORMATS:
            raise UsageError(f"unknown --format {fmt!r}", "use one of " + ", ".join(FORMATS))
        if sep and not dest.strip():
            raise UsageError(f"--format {spec!r} names no file", f"write {fmt}=FILE or {fmt}")
        targets.append((fmt, Path(dest.strip()) if sep else None))
    undirected = [i for i, (_, d) in enumerate(targets) if d is None]
    if len(undirected) > 1:
        raise UsageError(
            "more than one --format would go to stdout",
            "give the others a file: --format sarif=gate.sarif",
        )
    if output is not None:
        if not undirected:
            raise UsageError(
                "--output has no format to write: every --format names its own file",
                "drop --output, or give one --format without =FILE",
            )
        i = undirected[0]
        targets[i] = (targets[i][0], Path(output))
    return targets


def gate_markdown(result: GateResult) -> str:
    """The Markdown summary: status, warnings, the rows that matter, the unchanged ones folded."""
    from gpuadvise import __version__
    from gpuadvise.gate.core import Verdict, gate_table, summary_line
    from gpuadvise.report.markdown import md_summary

    icons = {
        Verdict.REGRESSION: "❌ regression",
        Verdict.ERROR: "💥 error",
        Verdict.AMBIGUOUS: "⚠️ ambiguous",
        Verdict.SKIPPED: "⏭️ skipped",
        Verdict.IMPROVEMENT: "🚀 improvement",
        Verdict.SAME: "✅ same",
    }
    table = gate_table(result)
    line = summary_line(result)
    head, _, rest = line.partition(": ")
    icon = {"PASSED": "✅", "FAILED": "❌"}.get(head, "💥")
    rows: list[list[str]] = []
    folded: list[list[str]] = []
    for row in table.rows:
        cells = list(row.cells())
        cells[6] = icons[row.verdict]
        (folded if row.verdict is Verdict.SAME else rows).append(cells)
    env = result.environment
    facts = [f"gpuadvise {__version__}"]
    if env.static_model:
        facts.append(f"static model {env.static_model}")
    if env.device:
        facts.append(f"GPU {env.device}" + (f" (driver {env.driver})" if env.driver else ""))
    if env.toolchain:
        facts.append(f"CUDA {env.toolchain}")
    return md_summary(
        "gpuadvise gate",
        f"{icon} **{head}**: {rest}",
        notes=result.warnings,
        headers=table.headers,
        rows=rows,
        folded_rows=folded,
        folded_label=f"{len(folded)} unchanged",
        align=table.align,
        footer="<sub>" + ", ".join(facts) + "</sub>",
    )


def render(result: GateResult, fmt: str, *, color: bool = False) -> str:
    """``result`` in one of :data:`FORMATS`."""
    from gpuadvise.gate import core as g

    if fmt == "text":
        from gpuadvise.report.gate_text import render_gate_text

        return render_gate_text(result, color=color)
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return gate_markdown(result)
    if fmt == "html":
        from gpuadvise.report.html import gate_html

        return gate_html(result)
    items = g.report_items(result)
    if fmt == "sarif":
        from gpuadvise.report.sarif import sarif_dumps, sarif_log

        return sarif_dumps(
            sarif_log(
                items,
                rules=g.report_rules(),
                notifications=result.warnings,
                automation_id="gpuadvise/gate/",
                execution_successful=result.exit_code() != 2,
            )
        )
    if fmt == "junit":
        from gpuadvise.report.junit import junit_xml

        return junit_xml(items, name="gpuadvise gate", notes=result.warnings)
    if fmt == "github":
        from gpuadvise.report.github import github_annotations

        return github_annotations(items, notes=result.warnings)
    raise UsageError(f"unknown format {fmt!r}", "use one of " + ", ".join(FORMATS))


def _emit(result: GateResult, targets: Sequence[tuple[str, Path | None]]) -> None:
    from gpuadvise.gate.core import write_text_atomic
    from gpuadvise.report import console

    to_stdout = [fmt for fmt, dest in targets if dest is None]
    if not (set(to_stdout) & _EXCLUSIVE) and "text" not in to_stdout:
        console.raw(render(result, "text", color=sys.stdout.isatty()))
    for fmt, dest in targets:
        if dest is None:
            console.raw(render(result, fmt, color=fmt == "text" and sys.stdout.isatty()))
            continue
        text = render(result, fmt)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        try:
            if summary and dest.resolve() == Path(summary).resolve():
                with dest.open("a", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                write_text_atomic(dest, text)
        except OSError as err:
            raise UsageError(f"cannot write {dest} ({err.strerror})", "check the path") from None


# ---------------------------------------------------------------------------------------------
# git.


def _git(args: Sequence[str], cwd: Path) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UsageError("--baseline-ref needs git, and git was not found", "install git") from None
    if proc.returncode != 0:
        raise _GitFailed(proc.stderr.strip() or proc.stdout.strip())
    return proc.stdout.strip()


class _GitFailed(Exception):
    pass


def _repo_top(folder: Path) -> Path | None:
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], folder)).resolve()
    except (_GitFailed, UsageError):
        return None


@contextlib.contextmanager
def baseline_worktree(rev: str, repo_dir: Path) -> Iterator[tuple[Path, Path]]:
    """Check out ``rev`` of the repository holding ``repo_dir`` into a temporary folder
    (``git worktree add --detach``); yields ``(checkout, repository top)``. The worktree and the
    folder are removed afterwards, whatever happens."""
    top = _repo_top(repo_dir)
    if top is None:
        raise UsageError(
            f"{repo_dir} is not inside a git repository",
            "--baseline-ref checks out REV from the repository that holds the gate config",
        )
    try:
        sha = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top)
    except _GitFailed:
        sha = ""
    if not sha:
        raise UsageError(
            f"git does not know the revision {rev!r} in {top}",
            "fetch it first (actions/checkout with fetch-depth: 0, or git fetch origin BRANCH)",
        )
    tmp = Path(tempfile.mkdtemp(prefix="gpuadvise-baseline-"))
    tree = tmp / "tree"
    try:
        try:
            _git(["worktree", "add", "--detach", str(tree), sha], top)
        except _GitFailed as err:
            raise UsageError(f"cannot check out {rev!r} ({err})", "check the repository") from None
        yield tree, top
    finally:
        with contextlib.suppress(_GitFailed, UsageError):
            _git(["worktree", "remove", "--force", str(tree)], top)
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(_GitFailed, UsageError):
            _git(["worktree", "prune"], top)


def _git_head(folder: Path) -> str | None:
    try:
        return _git(["rev-parse", "HEAD"], folder) or None
    except (_GitFailed, UsageError):
        return None


# ---------------------------------------------------------------------------------------------
# The command.


def default_provider(config: GateConfig) -> MetricsProvider:
    """The real metrics provider: ``gpuadvise.gate.metrics.make_provider(config)``."""
    try:
        module = importlib.import_module("gpuadvise.gate.metrics")
    except ModuleNotFoundError as exc:
        if exc.name != "gpuadvise.gate.metrics":
            raise
        raise GpuAdviseError(
            "this gpuadvise has no gate metrics provider (gpuadvise.gate.metrics)",
            "a packaging bug: reinstall gpuadvise",
        ) from None
    provider: MetricsProvider = module.make_provider(config)
    return provider


def _check_case_files(config: GateConfig) -> None:
    for case in config.cases:
        for p in case.paths():
            if not p.is_file():
                raise ConfigError(
                    f"{config.path}: gate case {case.name!r}: {p} does not exist",
                    "paths are relative to the config file's folder",
                )


def _relative(p: Path, root: Path) -> str:
    try:
        return p.resolve().relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()


def _locator(root: Path) -> Callable[[GateCase], tuple[str | None, int | None]]:
    """The kernel's file (relative to ``root``) and the line of its ``__global__``."""
    from gpuadvise.source.signature import find_kernels, select_kernel
    from gpuadvise.spec.kernel_spec import load_spec

    def locate(case: GateCase) -> tuple[str | None, int | None]:
        source = case.source
        try:
            if source is None and case.spec is not None:
                source = load_spec(case.spec).get("source")
            if source is None:
                return None, None
            text = Path(source).read_text(encoding="utf-8", errors="replace")
            if case.kernel:
                line: int | None = select_kernel(text, case.kernel)[0].line
            else:
                decls = [d for d in find_kernels(text) if d.is_definition]
                line = decls[0].line if len(decls) == 1 else None
        except (GpuAdviseError, OSError):
            line = None
        return (_relative(Path(source), root) if source is not None else None), line

    return locate


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
    *,
    provider: MetricsProvider | None = None,
    cwd: Path | None = None,
) -> int:
    """Run ``gpuadvise gate``; returns the exit code (see the module docstring).

    ``provider`` and ``cwd`` (where config discovery starts) are for tests and embedding.
    """
    from gpuadvise.gate import core as g
    from gpuadvise.report import console

    if gates not in ("all", "static", "timed"):
        raise UsageError(f"unknown --gates {gates!r}", "use all, static or timed")
    if update_baseline and baseline_ref:
        raise UsageError(
            "--update-baseline and --baseline-ref do not go together",
            "--update-baseline records the current tree; --baseline-ref compares with a revision",
        )
    if baseline and baseline_ref:
        raise UsageError(
            "--baseline and --baseline-ref do not go together",
            "--baseline-ref builds the baseline from git; --baseline names a stored one",
        )
    targets = parse_format_targets(formats, output)
    cfg = g.load_gate_config(Path(config) if config else None, start=cwd)
    cfg = cfg.select(cases).with_device(gpu, arch)
    _check_case_files(cfg)
    baseline_path = Path(baseline).resolve() if baseline else cfg.baseline
    root = _repo_top(cfg.root) or cfg.root
    prov = provider or default_provider(cfg)
    mode: Any = gates

    if update_baseline:
        previous = None
        notes: list[str] = []
        if baseline_path.exists():
            try:
                previous = g.load_baseline(baseline_path)
            except g.BaselineError as exc:
                notes.append(f"the previous baseline is replaced: {exc.one_line()}")
        new, more = g.measure_baseline(
            cfg, prov, gates=mode, previous=previous, source_rev=_git_head(root)
        )
        g.write_baseline(baseline_path, new)
        for n in notes + more:
            console.note(n)
        console.raw(
            f"recorded the gate baseline of {len(new.cases)} case"
            f"{'s' if len(new.cases) != 1 else ''} in {_relative(baseline_path, root)}"
        )
        return 0

    locate = _locator(root)
    if baseline_ref:
        with baseline_worktree(baseline_ref, cfg.root) as (tree, top):
            base_cases: dict[str, GateCase | None] = {}
            for case in cfg.cases:
                moved = g.rebase_case(case, top, tree)
                base_cases[case.name] = moved if all(p.is_file() for p in moved.paths()) else None
            result = g.evaluate_gate(
                cfg,
                prov,
                baseline_cases=base_cases,
                baseline_ref=baseline_ref,
                gates=mode,
                strict=strict,
                locate=locate,
            )
    else:
        stored = g.load_baseline(baseline_path)
        result = g.evaluate_gate(
            cfg,
            prov,
            baseline=stored,
            baseline_path=_relative(baseline_path, root),
            gates=mode,
            strict=strict,
            locate=locate,
        )
    _emit(result, targets)
    return 0 if exit_zero else result.exit_code()
