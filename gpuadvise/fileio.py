"""Writing files so that a reader sees the old file or the new one, never half of one.

The one atomic writer of the package (the gate's baselines, the compile cache, SASS sidecars,
``--output`` files, the GPU worker's results all use it). Bottom layer: no gpuadvise imports.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

__all__ = [
    "decode_tool_path",
    "folder_write_problem",
    "is_dir",
    "is_file",
    "lookup_problem",
    "write_atomic",
]


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically.

    The bytes go to a temporary file in the same folder (same file system), then are renamed over
    ``path`` with :func:`os.replace` (atomic on POSIX and Windows). If anything fails before the
    rename, the temporary file and any folder made for it are removed, and ``path`` is untouched
    (a missing folder is created). ``durable``: fsync the file
    and its folder too (baselines a CI job commits), at some cost in time.
    """
    path = Path(path)
    made = _make_folders(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except BaseException:
        _remove_folders(made)
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _remove_folders(made)
        raise
    if durable:
        with contextlib.suppress(OSError, AttributeError):  # make the rename durable (POSIX)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; returns those created, deepest first."""
    missing: list[Path] = []
    here = folder
    while not here.exists() and here.parent != here:
        missing.append(here)
        here = here.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except BaseException:
        _remove_folders(missing)
        raise
    return missing


def _remove_folders(folders: list[Path]) -> None:
    """Remove folders :func:`_make_folders` created (deepest first), where they are still empty."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def folder_write_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why files cannot be written into ``folder`` now (``"/x is not a folder"``, ``"cannot
    create files in /x (Read-only file system)"``), or None when they can.

    A missing ``folder`` is judged by its nearest existing parent (where it would be created).
    The check creates a temporary file there and removes it: permissions, read-only file systems
    and immutable folders all show, and nothing is left behind.
    """
    here = Path(folder)
    while not here.exists() and not here.is_symlink() and here.parent != here:
        here = here.parent
    if not here.is_dir():
        return f"{here} is not a folder"
    try:
        fd, tmp = tempfile.mkstemp(dir=here, prefix=".gpuadvise-probe-", suffix=".tmp")
    except OSError as err:
        return f"cannot create files in {here} ({err.strerror or err})"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return None


def lookup_problem(path: str | os.PathLike[str]) -> str | None:
    """Why the system cannot look ``path`` up at all, as a phrase to follow its name (``"has a
    name too long (300 characters in one part, the file system allows 255)"``, ``"is a loop of
    symbolic links"``, ``"cannot be read (Permission denied)"``), or None when it can: it exists,
    or it simply does not (a missing file or folder is for the caller to word).

    ``Path.exists()`` and ``Path.is_file()`` raise on a name too long for the system and answer
    "does not exist" for a symbolic-link loop: neither is what the user should read.
    """
    text = str(os.fspath(path))
    if "\0" in text:
        return "holds a NUL character"
    too_long = _too_long(text)
    if too_long is not None:  # a name no file can have, whether the folders above exist or not
        return too_long
    try:
        os.stat(text)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            return _too_long(text) or "has a name too long for the file system"
        if err.errno == errno.ELOOP:
            return "is a loop of symbolic links (Too many levels of symbolic links)"
        return f"cannot be read ({err.strerror or err})"
    except ValueError as err:  # a name the platform cannot represent
        return f"cannot be looked up ({err})"
    return None


def _too_long(text: str) -> str | None:
    """Why ``text`` is too long for any file name here, or None."""
    name_max, path_max = 255, 4096
    with contextlib.suppress(OSError, ValueError, AttributeError):
        name_max = os.pathconf("/", "PC_NAME_MAX")
        path_max = os.pathconf("/", "PC_PATH_MAX")
    try:
        raw = os.fsencode(text)
    except UnicodeError:
        return None
    longest = max((len(part) for part in raw.split(os.fsencode(os.sep))), default=0)
    if longest > name_max:
        return (
            f"has a name too long ({longest} bytes in one part of it; the file system allows "
            f"{name_max})"
        )
    if len(raw) >= path_max:
        return f"has a path too long ({len(raw)} bytes; the system allows {path_max - 1})"
    return None


def is_file(path: str | os.PathLike[str]) -> bool:
    """``Path.is_file()`` that answers False, instead of raising, for a path the system cannot
    look up (a name too long; see :func:`lookup_problem` for why)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: str | os.PathLike[str]) -> bool:
    """``Path.is_dir()`` that answers False, instead of raising, for a path the system cannot
    look up."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def decode_tool_path(text: str) -> str:
    """A path as nvcc's tools print it -> the path: non-ASCII bytes come as octal escapes.

    PTX ``.file`` names write ``ü`` as ``\\303\\274``; nvdisasm's line info as ``\\303/274``
    (it turns the backslashes after the first into slashes). A UTF-8 lead byte's continuation
    bytes are read in either form; everything else is kept as is.
    """
    if "\\" not in text:
        return text

    def octal(i: int) -> int | None:
        digits = text[i : i + 3]
        return int(digits, 8) if len(digits) == 3 and all(c in "01234567" for c in digits) else None

    out = bytearray()
    i, pending = 0, 0
    while i < len(text):
        c = text[i]
        value = octal(i + 1) if c in "\\/" else None
        if pending and value is not None and 0o200 <= value < 0o300:
            out.append(value)
            i, pending = i + 4, pending - 1
            continue
        pending = 0
        if c == "\\" and value is not None:
            out.append(value)
            i += 4
            pending = (
                1
                if 0xC0 <= value < 0xE0
                else 2
                if 0xE0 <= value < 0xF0
                else 3
                if value >= 0xF0
                else 0
            )
            continue
        out += c.encode("utf-8", errors="surrogateescape")
        i += 1
    return out.decode("utf-8", errors="replace")
