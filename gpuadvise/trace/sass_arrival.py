"""The kernel's SASS still being read when its trace starts (issue 31: the median corpus kernel's
wall on a 2-core machine).

``analyze`` reads the kernel's SASS in a thread (one nvdisasm run, 0.4-0.8 s of its start-up
whatever the kernel: :class:`gpuadvise.analyze.ahead.SassAhead`). The emulator needs the SASS
for its block costs alone (the blocks' loop schedules and instruction counts,
:func:`gpuadvise.ptx.chains.block_costs`), which it adds up per warp as it runs
(:class:`gpuadvise.ptx.chains.ChainLog` records the additions while they are not known) and reads
after the run. The pipeline says here, for the time of its trace, that the SASS of a cubin's
kernel is in flight (:func:`sass_in_flight`); :func:`gpuadvise.trace.emulate.emulate` asks
(:func:`in_flight`), starts without it and reads it (the same ``_sass`` as before, from the
disassembly's cache) once it has come.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Protocol

__all__ = ["InFlight", "in_flight", "sass_in_flight"]


class InFlight(Protocol):
    """A read of the SASS under way: :meth:`done` without waiting, :meth:`wait` until it is."""

    def done(self) -> bool: ...

    def wait(self) -> None: ...


_IN_FLIGHT: contextvars.ContextVar[tuple[tuple[str, str], InFlight] | None] = (
    contextvars.ContextVar("gpuadvise_sass_in_flight", default=None)
)


@contextlib.contextmanager
def sass_in_flight(cubin: str | os.PathLike[str], kernel: str, flight: InFlight) -> Iterator[None]:
    """Within the block, the SASS of ``kernel`` (mangled) of ``cubin`` is being read by
    ``flight``."""
    token = _IN_FLIGHT.set(((os.fspath(cubin), kernel), flight))
    try:
        yield
    finally:
        _IN_FLIGHT.reset(token)


def in_flight(cubin: str | os.PathLike[str], kernel: str) -> InFlight | None:
    """The read of ``kernel``'s SASS under way, if :func:`sass_in_flight` says one is and it
    has not finished (None: read it now)."""
    got = _IN_FLIGHT.get()
    if got is None or got[0] != (os.fspath(cubin), kernel) or got[1].done():
        return None
    return got[1]
