"""Reading input files that a stranger may have written, with limits checked before parsing.

``gpuadvise gate`` runs on pull requests, forks included: the specs, the gate configuration, the
baseline and the caches it reads may be hostile. Every such file is read here:

- only a regular file is read: it is stat-ed before it is opened and opened with ``O_NONBLOCK``
  (a named pipe, a device or a socket would block the read until killed), then checked again on
  the open descriptor;
- its size is checked before its bytes are read (``limit_bytes``), and nothing past the limit is
  read even when the file grows meanwhile;
- TOML and JSON text is checked by a cheap lexical pass before ``tomllib``/``json`` see it: arrays
  and inline tables nested deeper than :data:`MAX_NESTING` (500-deep ``[[[...]]]`` raised
  RecursionError in the parsers) and dotted keys of more than :data:`MAX_KEY_PARTS` parts (a
  100,000-part key took 16 GB of memory in ``tomllib``) are refused before parsing.

Problems with a file the user gave are a :class:`~gpuadvise.errors.ConfigError` of one line
(what is wrong; how to fix it). Caches use :func:`read_cache_bytes`, for which any problem is a
miss (None). Bottom layer: imports only :mod:`gpuadvise.errors`.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

from gpuadvise.errors import ConfigError

__all__ = [
    "MAX_KEY_PARTS",
    "MAX_NESTING",
    "TEXT_LIMIT_BYTES",
    "file_kind",
    "file_sha256",
    "json_shape_problem",
    "load_toml_file",
    "parse_json",
    "parse_toml",
    "read_cache_bytes",
    "read_input_bytes",
    "read_input_text",
    "toml_shape_problem",
]

TEXT_LIMIT_BYTES = 4 << 20
"""The largest spec, gate configuration, ``pyproject.toml`` or ``gpuadvise.toml`` read (4 MiB;
real ones are a few kilobytes)."""
MAX_NESTING = 32
"""The deepest nesting of arrays and inline tables (objects, in JSON) accepted."""
MAX_KEY_PARTS = 64
"""The most parts a dotted TOML key may have (``tool.gpuadvise.gate.cases`` has four)."""


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (``st_mode``) is, in words: ``a regular file``, ``a folder``,
    ``a named pipe (FIFO)`` ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


class _Refused(Exception):
    """Why a file is not read: ``kind`` (missing, special, large, unreadable) and the words."""

    def __init__(self, kind: str, words: str) -> None:
        super().__init__(words)
        self.kind = kind
        self.words = words


def _read_regular(path: Path, limit_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit_bytes``; else _Refused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _Refused("missing", "does not exist") from None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
        raise _Refused("unreadable", f"cannot be read ({_reason(err)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _Refused("special", f"is {file_kind(st.st_mode)}, not a regular file")
    _check_size(st.st_size, limit_bytes)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise _Refused("unreadable", f"cannot be read ({_reason(err)})") from None
    try:
        st = os.fstat(fd)  # the file opened may not be the one stat-ed (a swap in between)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused("special", f"is {file_kind(st.st_mode)}, not a regular file")
        _check_size(st.st_size, limit_bytes)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit_bytes:  # it grew while being read
                _check_size(total, limit_bytes)
        return b"".join(chunks)
    except OSError as err:
        raise _Refused("unreadable", f"cannot be read ({_reason(err)})") from None
    finally:
        os.close(fd)


def _check_size(size: int, limit_bytes: int) -> None:
    if size > limit_bytes:
        raise _Refused(
            "large", f"holds {_size_text(size)}, more than the {_size_text(limit_bytes)} read"
        )


def _size_text(n: int) -> str:
    if n < 1 << 10:
        return f"{n} bytes"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"  # pragma: no cover


def _reason(err: BaseException) -> str:
    return (err.strerror if isinstance(err, OSError) and err.strerror else str(err)) or "error"


def read_input_bytes(
    path: str | os.PathLike[str],
    what: str,
    *,
    limit_bytes: int = TEXT_LIMIT_BYTES,
    missing_hint: str = "check the path",
) -> bytes:
    """The bytes of an input file (``what``: ``spec file``, ``baseline`` ...), or a one-line
    :class:`~gpuadvise.errors.ConfigError`: missing, not a regular file (a FIFO is never opened
    for a blocking read), larger than ``limit_bytes``, or unreadable."""
    p = Path(path)
    try:
        return _read_regular(p, limit_bytes)
    except _Refused as why:
        hint = {
            "missing": missing_hint,
            "special": f"give the {what} as a regular file",
            "large": f"check the path: a {what} is far smaller",
            "unreadable": "check the file's permissions",
        }[why.kind]
        raise ConfigError(f"{what} {p} {why.words}", hint) from None


def read_input_text(
    path: str | os.PathLike[str],
    what: str,
    *,
    limit_bytes: int = TEXT_LIMIT_BYTES,
    missing_hint: str = "check the path",
) -> str:
    """:func:`read_input_bytes` decoded as UTF-8 (else a ConfigError)."""
    data = read_input_bytes(path, what, limit_bytes=limit_bytes, missing_hint=missing_hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text", "save it as UTF-8") from None


def read_cache_bytes(path: str | os.PathLike[str], limit_bytes: int) -> bytes | None:
    """The bytes of a cache file, or None (a miss) when it is missing, not a regular file (a
    folder, a FIFO), larger than ``limit_bytes`` or unreadable."""
    try:
        return _read_regular(Path(path), limit_bytes)
    except _Refused:
        return None


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of a regular file's bytes, read in chunks (a data file may be larger than the
    memory), or None when it is missing, not a regular file or unreadable."""
    import hashlib

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Lexical bounds before parsing

# TOML's strings (the multi-line ones first; a closing delimiter may follow one or two quotes of
# the string's own), comments, brackets, dots, and what ends a dotted key.
_TOML_TOKENS = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""(?:""(?!")|"(?!"))?'
    r"|'''(?:[^']|'(?!''))*'''(?:''(?!')|'(?!'))?"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'[^'\n]*'"
    r'|"""[\s\S]*|\'\'\'[\s\S]*'  # unterminated multi-line strings: the rest of the text
    r"|[\"'][^\n]*"  # unterminated one-line strings: the rest of the line
    r"|#[^\n]*"
    r"|[\[\]{}.=,\n]",
    re.S,
)
# a string (its loop unrolled), an unterminated one to the end of the text
_JSON_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_JSON_BRACKETS = re.compile(r"[\[\]{}]")


def toml_shape_problem(text: str) -> str | None:
    """Why ``text`` is not handed to ``tomllib``, or None: arrays and inline tables nested deeper
    than :data:`MAX_NESTING`, or a dotted key of more than :data:`MAX_KEY_PARTS` parts."""
    depth = deepest = 0
    dots = most_dots = 0
    for m in _TOML_TOKENS.finditer(text):
        c = m.group()[0]
        if c == ".":
            dots += 1
            most_dots = max(most_dots, dots)
            if most_dots >= MAX_KEY_PARTS:
                return f"a dotted key has more than {MAX_KEY_PARTS} parts"
            continue
        if c in "\"'":
            continue  # a quoted part of a dotted key: the chain goes on
        dots = 0
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_NESTING:
                return f"arrays or inline tables nest more than {MAX_NESTING} deep"
        elif c in "]}":
            depth = max(depth - 1, 0)
    return None


def json_shape_problem(text: str) -> str | None:
    """Why ``text`` is not handed to ``json.loads``, or None: arrays or objects nested deeper
    than :data:`MAX_NESTING` (a JSON document gpuadvise writes nests far less)."""
    # the strings out first (thousands in a manifest or a report), then the brackets alone
    brackets = _JSON_BRACKETS.findall(_JSON_STRINGS.sub("", text))
    depth = 0
    for c in brackets:
        if c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return f"arrays or objects nest more than {MAX_NESTING} deep"
        elif c in "]}":
            depth = max(depth - 1, 0)
    return None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """``text`` parsed as TOML after :func:`toml_shape_problem`; ``where`` names it in the
    one-line :class:`~gpuadvise.errors.ConfigError` (``spec file x.toml``)."""
    problem = toml_shape_problem(text)
    if problem is not None:
        raise ConfigError(f"{where} is refused: {problem}", "write it flatter")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{where} is not valid TOML ({err})", "fix the syntax") from None
    except RecursionError:  # a shape the lexical check did not see: refused all the same
        raise ConfigError(
            f"{where} is refused: it nests too deep to parse", "write it flatter"
        ) from None


def parse_json(text: str | bytes) -> Any:
    """``text`` parsed as JSON after :func:`json_shape_problem`; ValueError (of which
    ``json.JSONDecodeError`` is one) for a document too deep or not JSON."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # UnicodeDecodeError is a ValueError
    problem = json_shape_problem(text)
    if problem is not None:
        raise ValueError(problem)
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("it nests too deep to parse") from None


def load_toml_file(
    path: str | os.PathLike[str],
    what: str,
    *,
    missing_hint: str = "check the path",
) -> dict[str, Any]:
    """Read (:func:`read_input_text`) and parse (:func:`parse_toml`) a TOML input file."""
    text = read_input_text(path, what, missing_hint=missing_hint)
    return parse_toml(text, f"{what} {path}")
