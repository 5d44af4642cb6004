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
        # executions of this access the record stands for beyond itself: 0, but where the
        # emulator sampled a long loop's iterations (the last iteration run stands for those it
        # skipped; gpuadvise.ptx.sampling): a record weighs 1 + extra (record_weights)
        ("extra", np.uint32),
    ]
)


def empty_records(n: int = 0) -> np.ndarray:
    return np.zeros(n, dtype=RECORD)


def record_weights(records: np.ndarray) -> np.ndarray | None:
    """The executions each record stands for (1 + ``extra``, float64), or None when every
    record stands for itself alone (no loop was sampled): the common case costs one scan."""
    extra = records["extra"]
    if not len(extra) or not extra.any():
        return None
    return extra.astype(np.float64) + 1.0
