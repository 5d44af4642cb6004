"""One process at a time makes a cache entry: an advisory lock on a file of the cache.

Two processes that miss the same entry at the same moment (two ``analyze --jobs`` workers on two
kernels of one file, two test workers, two corpus jobs) each ran nvcc (or nvdisasm) and one
store won. The maker of an entry holds an exclusive ``flock`` of a lock file beside it while it
makes and stores it; the other takes the lock in turn and looks the entry up again before making
it, so it reads the first's (see :func:`gpuadvise.toolchain.compile._compile` and
:func:`gpuadvise.toolchain.sass.life_range_text`).

The lock only saves work; nothing depends on it: an entry is still written atomically and a
lookup still checks what it reads. So it is best effort and bounded: no lock (the work is done
unlocked, as before) where ``fcntl`` is missing, where the lock file cannot be made (a read-only
cache) or is not a regular file (it is never followed through a link), and once the wait passes
its bound (the holder's own tool runs are bounded by their timeouts). A process that dies
holding a lock frees it (the kernel drops a ``flock`` with the last descriptor), and the lock
file is left in place (an empty file: removing it would let a third process lock a new file
while the second holds the old one).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: no locks, each process makes its own entries
    fcntl = None  # type: ignore[assignment]

__all__ = ["acquire", "held", "release"]

_FIRST_POLL_S = 0.005
_LAST_POLL_S = 0.05


def acquire(path: Path, wait_s: float) -> int | None:
    """A descriptor of ``path`` (created, mode 0600, with its folder) holding an exclusive
    ``flock`` of it, taken within ``wait_s`` seconds (0: only if free now); None when it was not
    (see the module docstring). Give it back with :func:`release`."""
    if fcntl is None:
        return None
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
    flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o600)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        deadline = time.monotonic() + wait_s
        poll = _FIRST_POLL_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                os.close(fd)
                return None
            time.sleep(min(poll, left))
            poll = min(2 * poll, _LAST_POLL_S)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fd)
        return None
    except BaseException:  # interrupted while waiting
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def release(fd: int | None) -> None:
    """Give back a lock :func:`acquire` took (None: none was taken)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)  # the flock goes with the descriptor


@contextlib.contextmanager
def held(path: Path, wait_s: float) -> Iterator[bool]:
    """:func:`acquire` for the ``with`` block; whether the lock is held."""
    fd = acquire(path, wait_s)
    try:
        yield fd is not None
    finally:
        release(fd)
