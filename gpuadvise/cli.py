"""The command line: a thin click group; parsing and calling, no logic.

Every user mistake becomes one line on stderr and exit code 2 (``main`` catches
:class:`~gpuadvise.errors.GpuAdviseError` and click's own usage errors).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from gpuadvise import __version__
from gpuadvise.errors import GpuAdviseError, UsageError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _device_options(f: Any) -> Any:
    f = click.option("--arch", metavar="sm_XY", help="Model this architecture (sm_90, sm_86 ...).")(
        f
    )
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
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


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
    from gpuadvise.occupancy_cmd import run_occupancy

    run_occupancy(threads, regs, smem, dynamic_smem, carveout, gpu, arch, sweep, as_json)


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


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the group, turn every user error into one line and exit code 2."""
    try:
        cli.main(args=argv, prog_name="gpuadvise", standalone_mode=False)
    except GpuAdviseError as exc:
        _fail(exc.one_line(), exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(2)
    except click.UsageError as exc:
        cmd = exc.ctx.command_path if exc.ctx else "gpuadvise"
        _fail(f"{exc.format_message().rstrip('.')}; see `{cmd} --help`", 2)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(0)


def _fail(message: str, code: int) -> None:
    from gpuadvise.report import console

    console.error(message)
    sys.exit(code)


__all__ = ["main", "cli", "UsageError"]
