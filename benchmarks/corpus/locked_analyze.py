"""``gpuadvise analyze`` with its measurements serialised across processes (``run.py --measure``).

The corpus runner analyses several kernels at a time, each in its own process; on one GPU their
timings must not overlap. gpuadvise's own batch mode shares a lock between its workers
(``measure_lock``); this wrapper gives each process the same lock as an ``flock`` on a file, so
the compile, the trace and the rules still run in parallel and only the measurement waits:

    python benchmarks/corpus/locked_analyze.py LOCKFILE [analyze arguments...]
"""

from __future__ import annotations

import fcntl
import functools
import sys
from typing import Any


class FileLock:
    """An exclusive ``flock`` on ``path``, held inside the ``with``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: Any = None

    def __enter__(self) -> FileLock:
        self._fd = open(self.path, "a")  # noqa: SIM115 (held until __exit__)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._fd.close()


def main(argv: list[str]) -> None:
    import gpuadvise.analyze.run as run
    from gpuadvise.cli import main as cli_main

    run.run_analysis = functools.partial(run.run_analysis, measure_lock=FileLock(argv[0]))
    cli_main(["analyze", *argv[1:]])  # exits with gpuadvise's own code


if __name__ == "__main__":
    main(sys.argv[1:])
