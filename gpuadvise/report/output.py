"""Where a rendered report goes: stdout, a file (written atomically), or appended to
``$GITHUB_STEP_SUMMARY``.

A report never replaces an input of the run or a source file, and a target that cannot be
written is refused before the work starts (:func:`check_output_target`): a folder, a folder that
is a file, a read-only file system, a name longer than the file system allows. Nor is a report
ever written anywhere but the path named: a symbolic link there (a pull request can commit one
pointing at any file) is refused, not followed, as are a folder on the way that is a link inside
the working folder and anything inside ``.git`` (:func:`gpuadvise.fileio.target_problem`);
/dev/stdout, /dev/null and the like are written as they are. A file replaced keeps its mode. A
write that still fails is a one-line error, and leaves no temporary file or folder behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from gpuadvise.errors import UsageError
from gpuadvise.fileio import folder_write_problem, path_name_problem, target_problem, write_atomic

__all__ = [
    "parse_format_targets",
    "STDOUT",
    "ReaderGone",
    "check_output_target",
    "drop_stdout",
    "same_file",
    "write_output",
    "write_stdout",
]

# An existing file with one of these suffixes is somebody's source, never a report to replace.
SOURCE_SUFFIXES = frozenset(
    {
        ".cu",
        ".cuh",
        ".c",
        ".cc",
        ".cpp",
        ".cxx",
        ".h",
        ".hh",
        ".hpp",
        ".hxx",
        ".inl",
        ".py",
        ".toml",
    }
)


class ReaderGone(Exception):  # noqa: N818 (not an error: the CLI ends quietly, exit code 0)
    """stdout's reader went away (``gpuadvise devices | head -1``). Not an OSError, so that click
    does not turn it into exit code 1 on the way up."""


class _Stdout:
    """``sys.stdout`` as it is at each call (tests replace it), except that a write that fails
    (a full disk: ``> /dev/full``; an I/O error) is a one-line UsageError, and a reader that
    went away (``| head``) is :class:`ReaderGone`. Every report printed on stdout goes through
    it (:func:`write_stdout`, the terminal's rich console)."""

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except BrokenPipeError:
            drop_stdout()
            raise ReaderGone from None
        except OSError as err:
            raise _stdout_error(err) from None

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            drop_stdout()
            raise ReaderGone from None
        except OSError as err:
            raise _stdout_error(err) from None

    def __getattr__(self, name: str) -> object:
        return getattr(sys.stdout, name)


def _stdout_error(err: OSError) -> UsageError:
    drop_stdout()
    return UsageError(
        f"cannot write to stdout ({err.strerror or err})",
        "free some space, or write the report to a file (-o FILE)",
    )


def drop_stdout() -> None:
    """What is still buffered for stdout goes to /dev/null: stdout cannot take it, and Python's
    own flush at exit would print a traceback."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


STDOUT = _Stdout()


def write_stdout(text: str) -> None:
    """``text`` on stdout, flushed (see :class:`_Stdout` for what a failure is)."""
    STDOUT.write(text)
    STDOUT.flush()


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file (links and relative paths followed)."""
    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve():
            return True
        return pa.exists() and pb.exists() and os.path.samefile(pa, pb)
    except (OSError, RuntimeError):
        return False


def _is_step_summary(path: Path) -> bool:
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return bool(summary) and same_file(path, summary or "")


def check_output_target(
    output: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]] = (),
    *,
    option: str = "--output",
) -> Path:
    """Refuse (one-line :class:`~gpuadvise.errors.UsageError`) an output file that would replace
    one of ``inputs`` or an existing source file, that is a folder, or whose folder cannot be
    written. Run it before the work: nothing is created. Returns the path. ``option`` names the
    target in messages (``--output``, or ``--format sarif=``)."""
    text = os.fspath(output)
    if not text.strip():
        raise UsageError(f"{option} is empty", f"name a file, or leave {option} out")
    path = Path(text)
    sep = "" if option.endswith("=") else " "
    shown = f"{option}{sep}{text}"
    problem = path_name_problem(path)
    if problem is not None:
        raise UsageError(f"cannot write {option}{sep}{text!r}: {problem}", "choose a shorter name")
    refused = target_problem(path)
    if refused is not None:
        raise UsageError(f"{shown} {refused[0]}", refused[1])
    if path.is_dir():
        raise UsageError(
            f"{shown} is a folder", f"name a file in it: {option}{sep}{path / 'report.json'}"
        )
    for p in inputs:
        if same_file(path, p):
            raise UsageError(
                f"{shown} would replace {p}, an input of this run",
                "write the report to another file",
            )
    if _is_step_summary(path):
        return path  # appended to, never replaced
    if path.is_file() and path.suffix.lower() in SOURCE_SUFFIXES:
        raise UsageError(
            f"{shown} is an existing {path.suffix} file, not a report",
            "write the report to another file (report.json, gpuadvise.sarif ...)",
        )
    if path.exists() and not path.is_file():
        return path  # a device or a pipe (/dev/null, /dev/stdout): written to as it is
    problem = folder_write_problem(path.parent)
    if problem is not None:
        raise UsageError(f"cannot write {shown}: {problem}", "choose a writable location")
    return path


def _is_stream(path: Path) -> bool:
    """A device, a pipe or a path of the system's (/dev/stdout, /dev/fd/3, /proc/self/fd/1):
    written to as it is, never replaced."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    return path.exists() and not path.is_file() and not path.is_dir()


def write_output(text: str, output: str | os.PathLike[str] | None) -> None:
    """stdout, or ``output``: appended when it is ``$GITHUB_STEP_SUMMARY``, written directly when
    it is a device or a pipe, else replaced atomically, keeping its mode (a symbolic link there is
    refused, never followed). A failure is a one-line :class:`~gpuadvise.errors.UsageError`."""
    if not text.endswith("\n"):
        text += "\n"
    if output is None:
        write_stdout(text)
        return
    path = Path(output)
    refused = target_problem(path)  # checked before the work too; a link made since is refused
    if refused is not None:
        raise UsageError(f"{path} {refused[0]}", refused[1])
    try:
        if _is_step_summary(path):
            with path.open("a", encoding="utf-8") as fh:
                fh.write(text)
        elif _is_stream(path):
            with path.open("w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            write_atomic(path, text)
    except BrokenPipeError:
        raise  # a reader that went away (| head): the CLI ends quietly
    except OSError as err:
        raise UsageError(
            f"cannot write {path} ({err.strerror or err})", "choose a writable location"
        ) from None


def parse_format_targets(
    formats: Sequence[str], output: str | None, choices: Sequence[str]
) -> list[tuple[str, Path | None]]:
    """``--format FMT[=FILE]`` values (repeatable) and ``--output`` as ``(format, file or None
    for stdout)`` pairs: at most one format goes to stdout, ``--output`` is its file."""
    targets: list[tuple[str, Path | None]] = []
    for spec in formats or ("text",):
        fmt, sep, dest = spec.partition("=")
        fmt = fmt.strip().lower()
        if fmt not in choices:
            raise UsageError(f"unknown --format {fmt!r}", "use one of " + ", ".join(choices))
        if sep and not dest.strip():
            raise UsageError(f"--format {spec!r} names no file", f"write {fmt}=FILE or {fmt}")
        targets.append((fmt, Path(dest.strip()) if sep else None))
    undirected = [i for i, (_, d) in enumerate(targets) if d is None]
    if len(undirected) > 1:
        raise UsageError(
            "more than one --format would go to stdout",
            "give the others a file: --format sarif=out.sarif",
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
