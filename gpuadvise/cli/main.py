"""The command line: a thin click group; parsing and calling, no logic.

Every user mistake becomes one line on stderr and exit code 2 (``main`` catches
:class:`~gpuadvise.errors.GpuAdviseError` and click's own usage errors).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

import click

from gpuadvise import __version__
from gpuadvise.errors import GpuAdviseError, Interrupted, UsageError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def not_blank(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback: a value given as '' (or only spaces), alone or among repeated ones, is an
    error, never "not given". Every parameter that takes a value gets it (:func:`_refuse_blank`)."""
    values = value if isinstance(value, tuple | list) else (value,)
    if any(isinstance(v, str) and not v.strip() for v in values):
        if ctx.get_parameter_source(param.name or "") == click.core.ParameterSource.ENVIRONMENT:
            var = param.envvar if isinstance(param.envvar, str) else param.human_readable_name
            raise UsageError(f"{var} is set but blank", f"give it a value, or unset {var}")
        if isinstance(param, click.Option):
            name = param.opts[0]
            raise UsageError(f"{name} is empty", f"give a value, or leave {name} out")
        name = param.human_readable_name
        raise UsageError(f"the {name} argument is empty", f"give a value, or leave {name} out")
    return value


def path_names(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Click callback of a path option or argument: a name the file system cannot hold (a file
    name over 255 bytes, a path over the system's limit) is a one-line error before any work."""
    from gpuadvise.fileio import path_name_problem

    for v in value if isinstance(value, tuple | list) else (value,):
        problem = None if v is None else path_name_problem(v)
        if problem is not None:
            name = param.opts[0] if param.param_type_name == "option" else param.human_readable_name
            raise UsageError(f"{name} {v!r}: {problem}", "use a shorter name or path")
    return value


def blank_or_long(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """:func:`not_blank`, then :func:`path_names`."""
    return path_names(ctx, param, not_blank(ctx, param, value))


def _refuse_blank(group: click.Group) -> None:
    """The one place where every parameter of every command that takes a value (options that
    are not flags or counts, and arguments) refuses '' (:func:`not_blank`): the check runs
    before the parameter's own callback."""

    def chained(callback: Any) -> Any:
        def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
            value = not_blank(ctx, param, value)
            return value if callback is None else callback(ctx, param, value)

        return check

    for command in group.commands.values():
        if isinstance(command, click.Group):
            _refuse_blank(command)
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            param.callback = chained(param.callback)


def _device_options(f: Any) -> Any:
    f = click.option(
        "--arch",
        metavar="sm_XY",
        help="Model this architecture (sm_90, sm_86 ...).",
    )(f)
    f = click.option(
        "--gpu",
        metavar="NAME",
        help="Model this GPU (H100, A100-80GB, RTX4090 ...; see `gpuadvise devices`). "
        "Default: the live GPU, else the H100 model.",
    )(f)
    return f


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="gpuadvise")
@click.option("-v", "--verbose", count=True, help="Debug logging on stderr (-vv for more).")
def cli(verbose: int) -> None:
    """gpuadvise: what is slow in your CUDA kernel, where, why, and what to change."""
    from gpuadvise.report.safe_text import LogFormatter
    from gpuadvise.spec.environment import check_environment

    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)  # messages quote paths and compiler output
    handler.setFormatter(LogFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    check_environment()  # GPUADVISE_* variables: one line now, not a surprise later (or in workers)


@cli.command(context_settings=CONTEXT)
@click.option(
    "--threads",
    "-t",
    required=True,
    metavar="N|XxY[xZ]",
    help="Threads per block: 256, or a block shape such as 16x16.",
)
@click.option(
    "--regs",
    "-r",
    default="0",
    show_default=True,
    metavar="N",
    help="Registers per thread (0-255).",
)
@click.option(
    "--smem",
    default="0",
    show_default=True,
    metavar="SIZE",
    help="Static shared memory per block: bytes, 32k, 32KiB, 48KB or 0x8000 (k = 1024).",
)
@click.option(
    "--dynamic-smem",
    default="0",
    show_default=True,
    metavar="SIZE",
    help="Dynamic shared memory per block (launch parameter), same units.",
)
@click.option(
    "--carveout",
    default=-1,
    show_default=True,
    type=int,
    metavar="PCT",
    help="Shared-memory carveout preference in percent, -1 for the driver default.",
)
@_device_options
@click.option("--sweep", is_flag=True, help="Draw occupancy vs block size, registers and smem.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in the README).")
def occupancy(
    threads: str,
    regs: str,
    smem: str,
    dynamic_smem: str,
    carveout: int,
    gpu: str | None,
    arch: str | None,
    sweep: bool,
    as_json: bool,
) -> None:
    """Exact theoretical occupancy, its limiter, and what to change to reach the next step.

    The numbers are those of NVIDIA's cuda_occupancy.h (the CUDA runtime's own calculator), for a
    kernel that opts in to more than 48 KB of shared memory when it uses that much.
    """
    from gpuadvise.cli.occupancy import run_occupancy

    run_occupancy(threads, regs, smem, dynamic_smem, carveout, gpu, arch, sweep, as_json)


def _kernel_options(f: Any, source_dir_okay: bool = False) -> Any:
    """The options that say which kernel, how to launch it and how to compile it."""
    decorators = [
        click.argument(
            "source",
            required=False,
            type=click.Path(dir_okay=source_dir_okay),
            callback=path_names,
        ),
        click.option(
            "--kernel",
            "-k",
            metavar="NAME",
            help="Kernel to use: name, ns::name or "
            "a template instance such as 'reduce<256, true>'.",
        ),
        click.option(
            "--grid",
            "-g",
            metavar="DIMS",
            help="Grid: 240x135, 240,135 or 240; may be "
            "an expression over --arg values (ceil_div(n,256)).",
        ),
        click.option("--block", "-b", metavar="DIMS", help="Block: 256, 16x16 ..."),
        click.option(
            "--dynamic-smem",
            metavar="SIZE",
            help="Dynamic shared memory per block (bytes, 4k, 48KB ...).",
        ),
        click.option(
            "--spec",
            metavar="FILE",
            type=click.Path(dir_okay=False),
            callback=path_names,
            help="Launch spec (TOML). Default: <kernel>.toml or case.toml beside the .cu.",
        ),
        click.option(
            "--arg",
            "args",
            multiple=True,
            metavar="NAME=VALUE",
            help="A scalar kernel argument (repeatable): --arg n=4194304.",
        ),
        click.option(
            "--buffer",
            "buffers",
            multiple=True,
            metavar="NAME=TYPE[COUNT][:FILL]",
            help="A pointer argument's buffer (repeatable): --buffer in=float[n], "
            "--buffer out=int[n]:zeros. Fills: random, zeros, ones, iota.",
        ),
        click.option(
            "--constant",
            "constants",
            multiple=True,
            metavar="NAME=TYPE[COUNT][:FILL]",
            help="Fill a __constant__ variable before the run, as the host code's "
            "cudaMemcpyToSymbol does (repeatable): --constant d_Kernel=float[17]:random(0,1).",
        ),
        click.option("--seed", type=int, help="Seed of random buffer fills (default 0)."),
        click.option(
            "--max-instructions",
            type=click.IntRange(min=1),
            metavar="N",
            help="The CPU emulator's instruction budget per warp (default 2000000): a warp past "
            "it stops the trace; loops that would take a warp past N/8 are sampled (their first "
            "iterations traced and weighted). Also max_instructions in a launch spec.",
        ),
        click.option("-I", "include", multiple=True, metavar="DIR", help="Include directory."),
        click.option("-D", "defines", multiple=True, metavar="NAME[=VAL]", help="Define."),
        click.option("--std", metavar="c++17", help="C++ standard."),
        click.option("--use-fast-math", is_flag=True, help="Compile with --use_fast_math."),
        click.option("-Xptxas", "xptxas", multiple=True, metavar="OPT", help="Option for ptxas."),
        click.option(
            "--nvcc-flag",
            "nvcc_flags",
            multiple=True,
            metavar="FLAG",
            help="Any other nvcc flag (repeatable).",
        ),
        click.option("--maxrregcount", type=int, metavar="N", help="Cap registers per thread."),
        click.option(
            "--nvcc",
            metavar="PATH",
            help="The nvcc to use (else $GPUADVISE_NVCC, CUDA_HOME, PATH, the toolkit wheels).",
        ),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Bypass the compile cache (and analyze's result cache).",
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return _device_options(f)


def _gather_kernel_options(kw: dict[str, Any]) -> Any:
    from gpuadvise.analyze.options import KernelOptions

    names = KernelOptions.__dataclass_fields__
    fields: dict[str, Any] = {
        k: (tuple(v) if isinstance(v, list | tuple) else v) for k, v in kw.items() if k in names
    }
    return KernelOptions(**fields)


def _rule_options(f: Any) -> Any:
    """--select/--ignore/--rules-dir: which rules run (see `gpuadvise rules`)."""
    f = click.option(
        "--rules-dir",
        "rules_dirs",
        multiple=True,
        metavar="DIR",
        type=click.Path(file_okay=False),
        callback=path_names,
        help="More rules: a folder of rule files (one Rule per .py), repeatable.",
    )(f)
    f = click.option(
        "--ignore", multiple=True, metavar="RULES", help="Skip these rules (as --select)."
    )(f)
    f = click.option(
        "--select",
        multiple=True,
        metavar="RULES",
        help="Run only these rules: ids, id prefixes (GA2 = GA200-GA299) or names, "
        "comma-separated or repeated. Default: [tool.gpuadvise] in pyproject.toml or "
        "gpuadvise.toml, else all.",
    )(f)
    return f


def _analyze_paths(f: Any) -> Any:
    """analyze's kernel options: its SOURCE may be a folder of cases."""
    return _kernel_options(f, source_dir_okay=True)


@cli.command(context_settings=CONTEXT)
@_analyze_paths
@click.argument("more_paths", nargs=-1, type=click.Path(), callback=path_names)
@_rule_options
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    metavar="N",
    help="Several kernels (folders, or more than one path): analyze N at a time "
    "(default: the CPU count; GPU measurements still run one at a time).",
)
@click.option(
    "--shard",
    metavar="K/N",
    help="Several kernels: analyze only the K-th of N slices of the cases (sorted), for CI "
    "matrices; the N shards together cover every case once.",
)
@click.option(
    "--sample-ctas",
    metavar="N|all|wave",
    help="CTAs the CPU emulator traces for the memory models (default: every k-th CTA of the "
    "first wave, within a cost; wave: the whole first wave).",
)
@click.option(
    "--l2-probe-ctas",
    metavar="N",
    help="CTAs in the middle of a 2D grid the L2 model traces besides the sampled ones "
    "(default: up to 64, at most --sample-ctas; 0: none).",
)
@click.option(
    "--source",
    "with_source",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    callback=path_names,
    help="With a .ptx/.cubin/.fatbin: the .cu that defines the kernel, for the fixes that "
    "rewrite it (without it they say they need the source).",
)
@click.option("--no-trace", is_flag=True, help="Skip the emulator and the memory models.")
@click.option(
    "--tracer",
    type=click.Choice(["auto", "gpu", "emu"]),
    default="auto",
    show_default=True,
    help="Where the memory trace comes from: the instrumented kernel on the GPU, or the CPU "
    "emulator; auto takes the emulator when its trace is expected to take up to 8 s (one CTA "
    "emulated first and timed), the GPU when longer and one is here.",
)
@click.option(
    "--time-budget",
    "time_budget_s",
    type=float,
    metavar="SECONDS",
    help="Stop early once this many seconds have passed: a partial result that says what was "
    "skipped (trace cut short, rules or measurement skipped).",
)
@click.option(
    "--quiet", "-q", is_flag=True, help="No progress display on stderr (for steps over 1 s)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in the README).")
@click.option(
    "--format",
    "formats",
    multiple=True,
    metavar="FMT[=FILE]",
    help="text/json/html: the whole analysis (html: one self-contained page); "
    "sarif/junit/github/markdown: the findings, for CI. Repeat for several; FMT=FILE writes "
    "that one to FILE (html=report.html). Default: text.",
)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    callback=blank_or_long,
    help="Write the --format output to FILE (never over the analysed source or spec).",
)
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "error"]),
    metavar="warning|error",
    help="Exit 1 when findings of this severity or worse exist, or when the analysis is "
    "incomplete (for CI). Default: exit 0 whatever is found.",
)
@click.option(
    "--allow-incomplete",
    is_flag=True,
    help="With --fail-on: do not fail when the analysis is incomplete (rules skipped because "
    "the trace stopped or the time budget ran out). Default: an incomplete analysis fails.",
)
@click.option(
    "--exit-zero",
    is_flag=True,
    help="Exit 0 even when findings meet --fail-on (report only); bad input and tool errors "
    "still exit 2.",
)
@click.option(
    "--statistics",
    is_flag=True,
    help="Print how many findings each rule has (and how many have an automatic fix) instead "
    "of the report.",
)
@click.option(
    "--measure/--no-measure",
    default=None,
    help="Build, verify and time each finding's variant on the GPU (default: when one is here).",
)
@click.option(
    "--write-variants",
    metavar="DIR",
    type=click.Path(file_okay=False),
    callback=blank_or_long,
    help="Save every finding's variants (patched source and diff, proxy kernels) under DIR "
    "(checked for writability first; never over an input or a file gpuadvise did not write).",
)
@click.option(
    "--fix",
    is_flag=True,
    help="Apply the fixes that are automatic, verified and measured faster to the source, "
    "composed in rank order (without a GPU: only those the CPU emulator verifies).",
)
@click.option("--diff", is_flag=True, help="Print the combined diff of --fix; write nothing.")
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix/--diff: apply display-only source diffs too (still verified and faster on "
    "a GPU; never launch or layout changes that reach into host code).",
)
def analyze(
    as_json: bool,
    write_variants: str | None,
    fix: bool,
    diff: bool,
    unsafe_fixes: bool,
    sample_ctas: str | None,
    l2_probe_ctas: str | None,
    no_trace: bool,
    formats: tuple[str, ...],
    output: str | None,
    fail_on: str | None,
    exit_zero: bool,
    statistics: bool,
    allow_incomplete: bool,
    measure: bool | None,
    tracer: str,
    time_budget_s: float | None,
    quiet: bool,
    **kw: Any,
) -> None:
    """Compile a kernel; report its resources, occupancy at this launch, waves, the memory
    instructions per source line, the bank and coalescing models (CPU emulator), and the rules'
    ranked findings. No GPU needed.

    \b
    gpuadvise analyze kernel.cu --grid 240x135 --block 16x16 [--kernel K] [--gpu H100]
    gpuadvise analyze kernel.ptx|kernel.cubin --kernel K ... [--source kernel.cu]

    Exit codes: 0 analysed, 1 findings at or above --fail-on (or an incomplete analysis, unless
    --allow-incomplete; --exit-zero: 0), 2 usage, input or tool error.
    """
    from gpuadvise.analyze.options import AnalyzeSettings
    from gpuadvise.cli.analyze import OutputSettings, run_analyze, run_analyze_paths
    from gpuadvise.fileio import is_dir

    obj = click.get_current_context().find_root().obj
    argv = obj.get("argv") if isinstance(obj, dict) else None
    more_paths, jobs, shard = kw.pop("more_paths"), kw.pop("jobs"), kw.pop("shard")
    settings = AnalyzeSettings(
        trace=not no_trace,
        sample_ctas=sample_ctas,
        select=kw["select"],
        ignore=kw["ignore"],
        rules_dirs=kw["rules_dirs"],
        measure=measure,
        tracer=tracer,
        time_budget_s=time_budget_s,
        l2_probe_ctas=l2_probe_ctas,
        write_variants=write_variants,
    )
    out = OutputSettings(
        formats=("json",) if as_json else formats,
        output=output,
        fail_on=fail_on,
        allow_incomplete=allow_incomplete,
        statistics=statistics,
        quiet=quiet,
        argv=argv,
    )
    opts = _gather_kernel_options(kw)
    paths = ([opts.source] if opts.source else []) + list(more_paths)
    if len(paths) > 1 or any(is_dir(p) for p in paths) or shard or jobs:
        code = run_analyze_paths(
            paths, opts, settings, out, jobs=jobs, shard=shard, fix=fix or diff or unsafe_fixes
        )
        if code and not (exit_zero and code == 1):
            sys.exit(code)
        return
    code = run_analyze(opts, settings, out, fix=fix, diff=diff, unsafe_fixes=unsafe_fixes)
    if code and not (exit_zero and code == 1):
        sys.exit(code)


@cli.command(context_settings=CONTEXT)
@_kernel_options
@click.argument("more_sources", nargs=-1, type=click.Path(dir_okay=False), callback=path_names)
@click.option(
    "--hot",
    is_flag=True,
    help="Time back-to-back launches (default: flush L2 before every sample).",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=60.0,
    show_default=True,
    type=float,
    metavar="S",
    help="Kill a kernel that runs longer than this.",
)
@click.option(
    "--flops",
    "flops_expr",
    metavar="EXPR",
    help="FLOPs per launch, an expression over --arg values (2*n), to report GFLOP/s.",
)
@click.option("--min-samples", default=10, show_default=True, type=int)
@click.option("--min-time", default=0.5, show_default=True, type=float, metavar="S")
@click.option("--max-time", default=15.0, show_default=True, type=float, metavar="S")
@click.option(
    "--target-noise",
    default=0.005,
    show_default=True,
    type=float,
    help="Stop sampling when the median's relative standard error is below this.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def bench(
    more_sources: tuple[str, ...],
    hot: bool,
    timeout_s: float,
    flops_expr: str | None,
    min_samples: int,
    min_time: float,
    max_time: float,
    target_noise: float,
    as_json: bool,
    **kw: Any,
) -> None:
    """Time a kernel on the GPU with verified outputs, or compare two (A B A B ...).

    \b
    gpuadvise bench kernel.cu --grid 1024 --block 256 --arg n=262144
    gpuadvise bench a.cu b.cu ...          (same arguments; outputs must agree)
    gpuadvise bench k.cu:reduce2 k.cu:reduce3
    """
    from gpuadvise.cli.bench import run_bench
    from gpuadvise.runner.job import TimingConfig

    opts = _gather_kernel_options(kw)
    sources = tuple(s for s in (kw.get("source"), *more_sources) if s)
    timing = TimingConfig(
        min_samples=min_samples,
        min_time_s=min_time,
        max_time_s=max_time,
        target_rel_noise=target_noise,
    )
    code = run_bench(sources, opts, hot, timeout_s, flops_expr, timing, as_json)
    if code:
        sys.exit(code)


def _gate_options(f: Any) -> Any:
    from gpuadvise.cli.gate import gate_options

    return gate_options(f)


@cli.command(context_settings=CONTEXT)
@_gate_options
def gate(**options: Any) -> None:
    """Fail CI when a change makes a kernel slower: static gates anywhere, timed gates on a GPU.

    Exit codes: 0 no regression, 1 regression, 2 usage or tool error (--exit-zero: always 0).
    """
    from gpuadvise.cli.gate import gate_command

    code = gate_command(**options)
    if code:
        sys.exit(code)


@cli.command(
    context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--kernel", "-k", metavar="REGEX", help="Record only kernels whose name matches.")
@click.option(
    "--max-per-kernel",
    type=int,
    default=2,
    show_default=True,
    metavar="N",
    help="Snapshot the first N launches of each kernel and shape (then a sample).",
)
@click.option(
    "--max-snapshot-bytes",
    default="1G",
    show_default=True,
    metavar="SIZE",
    help="Copy at most this much buffer data in all (4G, 512M, bytes).",
)
@click.option(
    "--out",
    "-o",
    type=click.Path(file_okay=False),
    callback=path_names,
    help="The folder to write (new or empty; default ./gpuadvise-record[-N]).",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    type=click.Path(),
    callback=path_names,
    metavar="PATH",
    help="Kernel sources (files or folders) where line info is missing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def record(**options: Any) -> None:  # fmt: skip
    """Run a CUDA program (C++, CuPy, PyTorch ...) and record its kernel launches as cases.

    gpuadvise record [OPTIONS] -- COMMAND [ARGS...]; then `gpuadvise analyze OUT`."""
    from gpuadvise.cli.record import run_record

    sys.exit(run_record(**options))


@cli.command(context_settings=CONTEXT)
@click.argument("report", metavar="FILE")
@click.option(
    "--format",
    "formats",
    multiple=True,
    metavar="FMT[=FILE]",
    help="A format of `analyze --format` (text, json, html, sarif, ...). Repeat for several; "
    "FMT=FILE writes that one to FILE.",
)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    callback=blank_or_long,
    help="Write the --format output to FILE (never over the report read).",
)
def render(report: str, formats: tuple[str, ...], output: str | None) -> None:
    """Render a saved analysis again: FILE from `analyze --format json` (or --format report),
    of one kernel or of a folder, or from `gate --format json` (or --format report).

    gpuadvise render saved.json --format html -o report.html"""
    from gpuadvise.cli.render import run_render

    sys.exit(run_render(report, formats, output))


@cli.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def devices(as_json: bool) -> None:
    """List the GPU models gpuadvise knows, and the live GPU if there is one."""
    from gpuadvise import devices as dev
    from gpuadvise.report import console

    presets = [dev.preset(n) for n in dev.preset_names()]
    live = dev.live_device()
    if as_json:
        from gpuadvise.report.json_report import SCHEMA_VERSION, dumps

        console.raw(
            dumps(
                {
                    "schema_version": SCHEMA_VERSION,
                    "presets": [d.to_json() for d in presets],
                    "architectures": ["sm_" + cc.replace(".", "") for cc in dev.known_ccs()],
                    "live": live.to_json() if live else None,
                }
            )
        )
        return
    console.devices_table(presets, live)


@cli.command(context_settings=CONTEXT)
@_rule_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rules(select: tuple[str, ...], ignore: tuple[str, ...], rules_dirs: tuple[str, ...],
          as_json: bool) -> None:  # fmt: skip
    """List the rules; those --select/--ignore or the configuration turn off are marked -."""
    from gpuadvise.cli.rules import run_rules_list

    run_rules_list(as_json, select, ignore, rules_dirs)


@cli.command(context_settings=CONTEXT)
@click.argument("rule")
@click.option("--rules-dir", "rules_dirs", multiple=True, metavar="DIR", callback=path_names,
              type=click.Path(file_okay=False), help="More rules (see `rules --help`).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def explain(rule: str, rules_dirs: tuple[str, ...], as_json: bool) -> None:
    """Print one rule's documentation. RULE: an id (GA201) or a name (bank-conflicts)."""
    from gpuadvise.cli.rules import run_explain

    run_explain(rule, as_json, rules_dirs)


_refuse_blank(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the group, turn every user error into one line and exit code 2;
    Ctrl-C and SIGTERM into :class:`Interrupted` (cleanup on the way out, exit 130 or 143).

    stdout closed (``>&-``) or full (``> /dev/full``) is such an error too; a reader that went
    away (``| head -1``) ends the run quietly with exit code 0, as ``cat`` does."""
    from gpuadvise.report.output import ReaderGone

    _open_stdin()
    if sys.stdout is None:
        _fail("stdout is closed; run gpuadvise with its output open (> FILE, or > /dev/null)", 2)
    restore = _interrupt_on_signals()
    try:
        try:
            args = list(sys.argv[1:] if argv is None else argv)
            cli.main(args=args, prog_name="gpuadvise", standalone_mode=False, obj={"argv": args})
        finally:
            _flush_stdout()  # a failure to write what is left is reported here, not at exit
    except Interrupted as exc:
        _stopped(exc)
    except GpuAdviseError as exc:
        _fail(exc.one_line(), exc.exit_code, exc.details)
    except click.exceptions.NoArgsIsHelpError as exc:
        # no command: a usage error, as click itself has it (help on stderr, exit 2); stdout
        # stays empty for whatever reads it (`gpuadvise --help` prints it there, exit 0)
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        sys.exit(2)
    except click.UsageError as exc:
        cmd = exc.ctx.command_path if exc.ctx else "gpuadvise"
        _fail(f"{exc.format_message().rstrip('.')}; see `{cmd} --help`", 2)
    except click.exceptions.Abort as exc:  # click's word for a KeyboardInterrupt it caught
        if isinstance(exc.__cause__, KeyboardInterrupt):
            _stopped(Interrupted())
        _fail("aborted", 130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except KeyboardInterrupt:
        _stopped(Interrupted())
    except (BrokenPipeError, ReaderGone):
        _drop_stdout()
        sys.exit(0)
    except OSError as exc:
        _os_error(exc)
    finally:
        restore()
    sys.exit(0)


def console_main() -> None:
    """The process's entry point (the ``gpuadvise`` script, ``python -m gpuadvise``): :func:`main`,
    then the end of the process without the interpreter's teardown (:func:`exit_now`)."""
    try:
        main()
    except SystemExit as exc:
        exit_now(exc.code)
        raise


def exit_now(code: object) -> None:
    """End the process with exit status ``code`` (an int or None, as ``sys.exit`` takes it) once
    the exit handlers have run (temporary folders removed, logs flushed) and stdout and stderr are
    flushed, without the interpreter's teardown: the modules' and the analysis' objects freed one
    by one, work the system does at once when the process ends (issue 31, on the 2-core machine:
    0.09-0.17 CPU-s after an analysis, 0.07-0.13 after a re-run the result cache answered,
    0.06-0.08 for the teardown of the analysis' modules alone; the nineteenth session's
    0.01 was not reproduced: docs/data/s20-start.md). Returns, leaving the ordinary
    exit to run, when another thread that the ordinary exit would wait for is still running, when
    ``code`` is not a number, when stdout or stderr cannot be flushed (the ordinary exit
    reports that), or when a profiler or tracer watches the process (``python -m cProfile -o
    FILE -m gpuadvise``, the corpus runner's ``--profile``, writes its file after main)."""
    import atexit
    import threading

    if (
        not (code is None or isinstance(code, int))
        or _watched()
        or any(
            t.is_alive() and not t.daemon and t is not threading.main_thread()
            for t in threading.enumerate()
        )
    ):
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code or 0)


def _watched() -> bool:
    """A profiler or tracer is on: ``sys.setprofile``/``sys.settrace``, or (Python 3.12 on,
    where cProfile uses it) a ``sys.monitoring`` tool."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def _flush_stdout() -> None:
    from gpuadvise.report.output import STDOUT

    STDOUT.flush()


def _drop_stdout() -> None:
    from gpuadvise.report.output import drop_stdout

    drop_stdout()


def _os_error(exc: OSError) -> None:
    """An operating-system error no lower layer turned into a message: one line, exit 2."""
    import errno

    hint = {
        errno.ENOSPC: "free some space and run it again",
        errno.ENAMETOOLONG: "use a shorter name or path",
        errno.EACCES: "check the permissions",
        errno.EROFS: "choose a writable location",
    }.get(exc.errno or 0, "check the path and the file system")
    where = "" if exc.filename is None else f": {exc.filename!r}"
    _fail(f"{exc.strerror or exc}{where}; {hint}", 2)


def _interrupt_on_signals() -> Any:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (left alone where they
    are ignored, or when not called from the main thread); returns what puts the old handlers
    back. SIGTERM used to end the process at once, leaving temporary folders and workers."""
    import signal

    def raise_interrupted(signum: int, frame: Any) -> None:
        raise Interrupted(signum)

    old: dict[int, Any] = {}
    for sig, default in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, signal.SIG_DFL),
    ):
        try:
            if signal.getsignal(sig) is default:
                old[sig] = signal.signal(sig, raise_interrupted)
        except (ValueError, OSError):  # not the main thread
            pass

    def restore() -> None:
        for sig, handler in old.items():
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, handler)

    return restore


def _stopped(exc: Interrupted) -> None:
    """The line an interrupted run ends with (not an ``error:``: nothing was wrong)."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(exc.one_line(), err=True)
    sys.exit(exc.exit_code)


def _open_stdin() -> None:
    """A closed stdin (``<&-``) reads as /dev/null from here on, as git does with closed
    standard descriptors: else the next file or pipe opened takes descriptor 0, and the tools
    gpuadvise runs get it as their stdin (nvcc's own output pipe: "does not compile")."""
    try:
        os.fstat(0)
    except OSError:
        fd = os.open(os.devnull, os.O_RDONLY)
        if fd != 0:
            os.dup2(fd, 0)
            os.close(fd)


def _fail(message: str, code: int, details: str | None = None) -> None:
    """One line on stderr, then (a compile error) the tool's own output as it printed it."""
    from gpuadvise.errors import cap_echoes
    from gpuadvise.report import console

    console.error(cap_echoes(" ".join(message.split())))
    if details:
        console.error_details(details)
    sys.exit(code)


__all__ = ["main", "console_main", "cli", "UsageError"]
