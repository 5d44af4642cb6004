"""Temporary folders of the toolchain (``/tmp/gpuadvise-*``), removed in every case.

:func:`scratch_dir` is a context manager: its folder is removed when the block ends, whether it
ends normally, by an error or by Ctrl-C. :func:`keep_until_exit` makes a folder whose files the
caller still needs after the call that made it (the cubin of a ``use_cache=False`` compile):
it is removed when the process exits, also after an uncaught exception or a
``KeyboardInterrupt`` (``atexit``). Only the process that made a folder removes it (a forked
child exiting leaves its parent's folders alone).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PREFIX", "keep_until_exit", "release", "release_all", "scratch_dir"]

PREFIX = "gpuadvise-"
"""Every temporary folder of gpuadvise starts with this."""

_owned: dict[Path, int] = {}  # folder -> pid of the process that made it
_lock = threading.Lock()


def keep_until_exit(prefix: str = PREFIX) -> Path:
    """A fresh temporary folder, removed at :func:`release` or when the process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    with _lock:
        _owned[path] = os.getpid()
    return path


def release(path: Path) -> None:
    """Remove a folder made by :func:`keep_until_exit` (or any folder: it is gone after)."""
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        _owned.pop(path, None)


@contextlib.contextmanager
def scratch_dir(prefix: str = PREFIX) -> Iterator[Path]:
    """A fresh temporary folder for the ``with`` block, removed however the block ends."""
    path = keep_until_exit(prefix)
    try:
        yield path
    finally:
        release(path)


def release_all() -> None:
    """Remove every folder this process made with :func:`keep_until_exit` and still holds (at
    exit; and by a worker process that is told to stop, before it ends without ``atexit``)."""
    pid = os.getpid()
    with _lock:
        mine = [p for p, owner in _owned.items() if owner == pid]
    for path in mine:
        release(path)


atexit.register(release_all)
