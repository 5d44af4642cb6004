"""The memory-access vocabulary the PTX tracers write: state spaces, access kinds and the
per-warp record layout of an :class:`~gpuadvise.trace.access.AccessTrace`.

It lives with the PTX code (the emulator and the instrumenter fill these records) so that ptx/
needs nothing above it; gpuadvise.trace.access re-exports it beside the AccessTrace.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

WARP = 32


class Space(IntEnum):
    GLOBAL = 0
    SHARED = 1
    LOCAL = 2
    CONST = 3


class Kind(IntEnum):
    LOAD = 0
    STORE = 1
    ATOMIC = 2
    REDUCTION = 3  # red.* : an atomic whose result is not returned


RECORD = np.dtype(
    [
        ("inst", np.int32),  # index into AccessTrace.instructions
        ("cta", np.int64),  # linear CTA id: x + y*gx + z*gx*gy
        ("warp", np.int32),  # warp index in the CTA (lanes 32*w .. 32*w+31 of the linear thread id)
        ("mask", np.uint32),  # active lanes, bit i = lane i
        ("width", np.uint8),  # bytes per lane: 1, 2, 4, 8, 16 (a vector access counts whole)
        ("space", np.uint8),  # Space
        ("kind", np.uint8),  # Kind
        ("addr", np.uint64, (WARP,)),  # per-lane byte address (0 where the lane is inactive)
        # barriers (bar.sync) the warp had passed when it made the access: the emulator's; the
        # GPU tracer does not count them and writes 0 (gpuadvise.model.reduction reads it)
        ("epoch", np.uint32),
    ]
)


def empty_records(n: int = 0) -> np.ndarray:
    return np.zeros(n, dtype=RECORD)
