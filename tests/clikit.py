"""Running ``gpuadvise`` in the test's own process, for tests in any folder. No tests in here."""

from __future__ import annotations

import pytest

from gpuadvise.cli.main import main


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
