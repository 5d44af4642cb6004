"""Helpers of the CLI tests (any folder): run ``gpuadvise`` in this process, check its one-line
error, digest files, a fake analysis with a variant. No tests in here."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuadvise.cli.main import main
from gpuadvise.rules.engine import Variant


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``gpuadvise ARGS`` in this process: (exit code, stdout, stderr). An exception other than
    SystemExit (a traceback for the user) fails the test."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    """The one line ``error: <what is wrong>; <how to fix it>`` that ``err`` must be."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; " in lines[0], err
    assert "Traceback" not in err
    return lines[0]


def digest(*paths: Path) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def run_with_variant(source: Path) -> SimpleNamespace:
    """An analysis of ``source`` whose one finding (GA999, line 3) has a display-only diff of
    its first line."""
    first = source.read_text().splitlines()[0]
    diff = textwrap.dedent(
        f"""\
        --- a/{source.name}
        +++ b/{source.name}
        @@ -1,1 +1,1 @@
        -{first}
        +// patched
        """
    )
    finding = SimpleNamespace(
        variant=Variant(safety="display-only", description="d", diff=diff, label="x"),
        is_error=False,
        trials=(),
        kernel="scale",
        rule="GA999",
        line=3,
        message="m",
    )
    return SimpleNamespace(findings=(finding,))
