"""Progress of long steps, reported through a callback the command line passes down.

Domain code never prints: it wraps a step in :func:`step` (``with step("tracing 1056 CTAs",
total=1056) as advance: ... advance(done)``) and the callback installed with :func:`reporting`
(the CLI's, in :mod:`gpuadvise.report.progress`) shows it, or nothing when none is installed
(the default: tests, JSON to stdout, ``--quiet``, a stderr that is not a terminal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["ProgressCallback", "reporting", "step"]


class ProgressCallback(Protocol):
    """What the display is told: a step begins (with its size, when known), advances, ends.
    Steps nest; ``end`` closes the innermost."""

    def begin(self, label: str, total: int | None = None) -> None: ...

    def advance(self, done: int) -> None: ...

    def end(self) -> None: ...


_CURRENT: ContextVar[ProgressCallback | None] = ContextVar("gpuadvise_progress", default=None)


@contextmanager
def reporting(callback: ProgressCallback | None) -> Iterator[None]:
    """Report the steps run inside to ``callback`` (None: to no one)."""
    token = _CURRENT.set(callback)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _ignore(done: int) -> None:
    del done


@contextmanager
def step(label: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """One step of ``total`` units (None: unknown); yields a function taking the units done."""
    cb = _CURRENT.get()
    if cb is None:
        yield _ignore
        return
    cb.begin(label, total)
    try:
        yield cb.advance
    finally:
        cb.end()
