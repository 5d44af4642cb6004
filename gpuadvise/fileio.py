"""Writing files so that a reader sees the old file or the new one, never half of one.

The one atomic writer of the package (the gate's baselines, the compile cache, SASS sidecars,
``--output`` files, the GPU worker's results all use it). Bottom layer: no gpuadvise imports.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically.

    The bytes go to a temporary file in the same folder (same file system), then are renamed over
    ``path`` with :func:`os.replace` (atomic on POSIX and Windows). If anything fails before the
    rename, the temporary file is removed and ``path`` is untouched. ``durable``: fsync the file
    and its folder too (baselines a CI job commits), at some cost in time.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
        raise
    if durable:
        with contextlib.suppress(OSError, AttributeError):  # make the rename durable (POSIX)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
