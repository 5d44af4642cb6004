"""The command line: click commands only (parse, call one function below, hand the result to
report/)."""

from gpuadvise.cli.main import cli, console_main, main

__all__ = ["cli", "console_main", "main"]
