"""Writing files so that a reader sees the old file or the new one, never half of one.

The one atomic writer of the package (the gate's baselines, the compile cache, SASS sidecars,
``--output`` files, the GPU worker's results all use it), the writer of ``--fix`` (a file the
user owns, rewritten where it is: :func:`rewrite_file`), and the checks of a path the user names
as a target before any work (:func:`path_name_problem`, :func:`target_problem`). Bottom layer:
no gpuadvise imports.

What a write keeps (README, "No file of yours is written over"): a file replaced keeps its
permission bits, and its owner and group where the system allows it; a new file gets the
permissions ``open()`` would give it (0666 less the umask). A symbolic link at the path is
replaced by :func:`write_atomic` (never followed); :func:`rewrite_file` writes the file a link
leads to, in place when it has several names.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from pathlib import Path

__all__ = [
    "decode_tool_path",
    "folder_write_problem",
    "path_name_problem",
    "rewrite_file",
    "target_problem",
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
    (a missing folder is created). A regular file replaced keeps its permission bits (and owner
    and group where allowed); a new file gets ``0666 & ~umask``; a symbolic link at ``path`` is
    replaced, not followed. ``durable``: fsync the file and its folder too (baselines a CI job
    commits), at some cost in time.
    """
    path = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    old = _regular_stat(path)
    made = _make_folders(path.parent)
    try:
        _replace(path, blob, old, durable=durable)
    except BaseException:
        _remove_folders(made)
        raise


def rewrite_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Replace the contents of the user's file ``path`` with ``data``; returns the file written.

    A symbolic link is followed: the file it leads to is rewritten, the link stays. The file keeps
    its inode-level identity as the user sees it: its permission bits, owner and group; a file
    with several names (hard links) is written in place, so that every name sees the new
    contents, as is a file whose owner or group this process cannot give a new file. Otherwise
    the new contents are written atomically (:func:`write_atomic`'s way). A file with no write
    permission for anyone, an append-only or immutable file, a full disk: :class:`OSError`, and
    the file is left as it was (a failed in-place write puts the old bytes back).
    """
    real = Path(os.path.realpath(path))
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    if not st.st_mode & 0o222:
        raise OSError(errno.EACCES, f"read-only (mode {stat.S_IMODE(st.st_mode):04o})", str(path))
    if st.st_nlink > 1 or not _can_give(st):
        _write_in_place(real, data)
        return real
    _replace(real, data, st, durable=True, strict=True)
    return real


def _replace(
    path: Path, data: bytes, old: os.stat_result | None, *, durable: bool, strict: bool = False
) -> None:
    """``data`` into a temporary file beside ``path``, given ``old``'s attributes
    (:func:`_keep_attributes`), then renamed over ``path``; nothing is left when it fails."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:80]}.", suffix=".tmp")
    try:
        try:
            _write_all(fd, data)
            _keep_attributes(fd, old, strict=strict)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _sync_folder(path.parent)


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a short write is not an error)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _regular_stat(path: Path) -> os.stat_result | None:
    """``path``'s status when it is a regular file (a link is not followed), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _keep_attributes(fd: int, old: os.stat_result | None, *, strict: bool = False) -> None:
    """Give the open new file ``fd`` the permission bits, owner and group of ``old`` (the file it
    replaces), or the default permissions of a new file when there is none. ``strict`` (the
    user's own file, rewritten): every mode bit is kept and a failure raises; otherwise a report
    never gets set-user-ID or set-group-ID bits, and an owner that cannot be given is left."""
    if old is None:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666 & ~_umask())
        return
    mode = stat.S_IMODE(old.st_mode) if strict else stat.S_IMODE(old.st_mode) & 0o1777
    try:
        if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, old.st_uid, old.st_gid)
    except OSError:
        if strict:
            raise
    os.fchmod(fd, mode)  # after the owner: a chown clears set-ID bits


def _can_give(st: os.stat_result) -> bool:
    """Whether a new file of this process can get ``st``'s owner and group."""
    if (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid()):
        return True
    if os.geteuid() == 0:
        return True
    return st.st_uid == os.geteuid() and st.st_gid in os.getgroups()


def _write_in_place(path: Path, data: bytes) -> None:
    """Write ``data`` into the existing file ``path`` (same inode). Room for a longer file is
    reserved first, so that a full disk fails before any byte changes; a write that fails
    after that puts the old bytes back."""
    fd = os.open(path, os.O_RDWR)
    try:
        old_size = os.fstat(fd).st_size
        old = os.pread(fd, old_size, 0) if old_size else b""
        if len(data) > old_size and hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, len(data))
            except OSError as err:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, old_size)
                if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, old_size)
            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
                _write_all(fd, old)
            raise
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX; a no-op where folders cannot be opened)."""
    with contextlib.suppress(OSError, AttributeError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


_UMASK: list[int] = []
_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's umask (read once: from /proc where it can be, else set and restored)."""
    with _UMASK_LOCK:
        if not _UMASK:
            value = None
            with contextlib.suppress(OSError, ValueError):
                for line in Path("/proc/self/status").read_text().splitlines():
                    if line.startswith("Umask:"):
                        value = int(line.split()[1], 8)
            if value is None:
                value = os.umask(0o022)
                os.umask(value)
            _UMASK.append(value)
        return _UMASK[0]


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


def path_name_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot name a file here (a name in it longer than the file system allows, the
    whole path longer than the system allows, a NUL character), or None. Checked before any
    work, so that an overlong name is a one-line error, not a failure halfway."""
    text = os.fspath(path)
    if "\0" in text:
        return "the path holds a NUL character"
    name_max, path_max = _name_limits(Path(text))
    for part in Path(text).parts:
        size = len(os.fsencode(part))
        if size > name_max:
            shown = part if len(part) <= 40 else part[:20] + "..." + part[-12:]
            return (
                f"name too long: {shown} is {size} bytes long, more than the {name_max} the "
                "file system allows"
            )
    size = len(os.fsencode(os.path.abspath(text)))
    if size >= path_max:
        return (
            f"path too long: it is {size} bytes long, more than the {path_max - 1} the system "
            "allows"
        )
    return None


def _name_limits(path: Path) -> tuple[int, int]:
    """The longest file name and path (bytes, with the final NUL) where ``path`` would be."""
    here = Path(os.path.abspath(path))
    for folder in (here, *here.parents):
        try:
            if not folder.is_dir():
                continue
            return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
        except (OSError, ValueError, AttributeError):
            continue
    return 255, 4096


def target_problem(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """Why gpuadvise must not create or replace a file at ``path``, as ``(what is wrong, how to
    fix it)``, or None. The rules, for a tool that runs on other people's pull requests (a link
    is a file anyone can commit): the file itself is never a symbolic link (dangling or not); it
    is never inside a ``.git`` folder (nor is it one); no folder on its way that lies inside the
    current folder is a symbolic link. Paths under /dev and /proc (/dev/stdout, /dev/null) are
    the system's streams and devices, written as they are."""
    p = Path(path)
    absolute = os.path.abspath(p)
    if absolute.startswith(("/dev/", "/proc/")):
        return None
    try:
        if p.is_symlink():
            return (
                f"is a symbolic link (to {os.readlink(p)})",
                "gpuadvise never writes through a link: name the file itself, or remove the link",
            )
        real = os.path.realpath(p)
        if any(part.casefold() == ".git" for part in (*Path(absolute).parts, *Path(real).parts)):
            return ("is inside a .git folder", "write it outside .git")
        link = _linked_folder(p)
    except (OSError, RuntimeError):
        return None  # an unreadable path: the write itself reports it
    if link is not None:
        return (
            f"goes through {link}, a symbolic link (to {os.readlink(link)})",
            f"name the real folder: {os.path.join(os.path.realpath(p.parent), p.name)}",
        )
    return None


def _linked_folder(path: Path) -> Path | None:
    """The first folder on the way to ``path`` that is a symbolic link lying inside the current
    folder (followed as the system follows it, ``..`` included), or None."""
    cwd = Path(os.path.realpath(os.getcwd()))
    parts = (path if path.is_absolute() else Path(os.getcwd()) / path).parts
    here = Path(parts[0])
    for part in parts[1:-1]:
        if part == "..":
            here = here.parent
            continue
        step = here / part
        if step.is_symlink():
            if here == cwd or cwd in here.parents:
                return step
            here = Path(os.path.realpath(step))
        else:
            here = step
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
