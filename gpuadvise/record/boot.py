"""Where recording starts inside the program (``gpuadvise record`` sets it up; not for users).

- A Python program runs as ``python -m gpuadvise.record.boot SCRIPT ARGS...`` (or ``-m
  MODULE ARGS...``): the CUPTI subscriber starts first, then the script runs as ``__main__``
  (its ``sys.argv`` as if started alone) and the recording is finished when it ends, however it
  ends (``SystemExit`` and exceptions pass through: the program's exit status is kept).
- Any other program gets the injection library (``inject.c``) through ``CUDA_INJECTION64_PATH``:
  the CUDA driver loads it when the program initialises CUDA, and it calls
  :func:`start_injected` in the Python it embeds (or in the program's own Python), and
  :func:`finish_injected` at exit.

The settings come from the environment ``gpuadvise record`` passes (``GPUADVISE_RECORD_OUT``,
``..._KERNEL``, ``..._MAX_PER_KERNEL``, ``..._MAX_SNAPSHOT_BYTES``). A recorder that cannot
start says why on stderr, once, and leaves the program to run unrecorded.
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["finish_injected", "main", "start_injected"]

_finish: list[Callable[[], None]] = []


def _start() -> None:
    if _finish or not os.environ.get("GPUADVISE_RECORD_OUT"):
        return
    try:
        from gpuadvise.record.cupti_agent import start

        finish = start(
            Path(os.environ["GPUADVISE_RECORD_OUT"]),
            os.environ.get("GPUADVISE_RECORD_KERNEL") or None,
            int(os.environ.get("GPUADVISE_RECORD_MAX_PER_KERNEL", "2")),
            int(os.environ.get("GPUADVISE_RECORD_MAX_SNAPSHOT_BYTES", str(1 << 30))),
        )
    except Exception as exc:
        print(f"gpuadvise record: the recorder did not start: {type(exc).__name__}: {exc}",
              file=sys.stderr)  # fmt: skip
        _finish.append(lambda: None)
        return
    _finish.append(finish)
    atexit.register(finish_injected)


def start_injected() -> None:
    """Called by the injection library when CUDA initialises in this process."""
    _start()


def finish_injected() -> None:
    """Finish the recording (the activity records flushed, the status written); once."""
    while _finish:
        _finish.pop()()


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.exit("usage: python -m gpuadvise.record.boot SCRIPT [ARGS...] | -m MODULE [ARGS...]")
    _start()
    try:
        if args[0] == "-m" and len(args) > 1:
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = args
            sys.path.insert(0, str(Path(args[0]).resolve().parent))
            runpy.run_path(args[0], run_name="__main__")
    finally:
        finish_injected()


if __name__ == "__main__":
    main()
