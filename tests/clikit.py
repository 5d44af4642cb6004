"""Helpers of the tests that run the CLI: ``gpuadvise`` in this process (``main(argv)``: no
interpreter to start, the imports and caches of the test process reused), its one-line error,
digests of files, a fake analysis with a variant. No tests in here.

What stays a subprocess (``python -m gpuadvise``): what only a real process shows (its exit
status, signals, a closed or full stdout, the files left after it exits, ``ulimit``), and a few
smoke tests of the entry point."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuadvise.cli.main import main
from gpuadvise.rules.findings import Variant


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


def cli_run(*args: str) -> subprocess.CompletedProcess[str]:
    """``gpuadvise ARGS`` in this process, as a ``subprocess.CompletedProcess`` (``returncode``,
    ``stdout``, ``stderr``), for tests that read a run that way. The streams are captured here
    (UTF-8 text over bytes, not a terminal, as a pipe would be), so it needs no ``capsys`` and
    works in fixtures of any scope. An exception other than SystemExit fails the test."""
    out, err = _stream(), _stream()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return subprocess.CompletedProcess(["gpuadvise", *args], code, _text(out), _text(err))


@contextlib.contextmanager
def environ(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` exactly ``env`` while the block runs (what it was, after): the environment
    a ``subprocess.run(..., env=env)`` would have given the run, for :func:`cli_run` in a
    fixture of any scope (where ``monkeypatch`` is not at hand)."""
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


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


# ``python -c PEAK_WRAPPER CMD...``: CMD in a fresh wrapper process, whose RUSAGE_CHILDREN is then
# CMD's own peak (printed in KB as stderr's last line); in the test process (an xdist worker) it
# would be the largest child of any earlier test
PEAK_WRAPPER = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(p.stdout)
sys.stderr.write(p.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(p.returncode)
"""
