"""What GA207 (contended atomics) and GA201 (bank conflicts) share: the source lines whose
shared-memory atomics update few addresses per warp-level request (from the trace), which GA207
reports and GA201 leaves alone (their wavefronts are updates of one word, not words of one bank).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from gpuadvise.model.banks import atomic_contention, record_wavefronts
from gpuadvise.rules.engine import FindingDetails
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = ["ATOMICS", "Contention", "contended_lines"]

ATOMICS = (int(Kind.ATOMIC), int(Kind.REDUCTION))
"""The access kinds of atomics and reductions (``red``), as ints."""


@dataclass(frozen=True)
class Contention(FindingDetails):
    """A line's shared-memory atomics over the traced CTAs: the warp-level requests, their active
    lanes and distinct addresses, the wavefronts they take and the wavefronts one atomic per
    distinct address would take (the warp reduction's), and the instructions."""

    requests: int
    lanes: int
    addresses: int
    wavefronts: int
    after_wavefronts: int
    insts: tuple[int, ...]


_Lines = dict[tuple[str | None, int | None], Contention]
_LINES: dict[int, tuple[weakref.ref[AccessTrace], _Lines]] = {}


def contended_lines(trace: AccessTrace, min_lanes: float) -> _Lines:
    """The source lines whose shared-memory atomics are contended: on average at least
    ``min_lanes`` active lanes of a warp-level request per distinct address. Shared with GA201,
    which leaves these lines to this rule (their wavefronts are updates of one word, not words
    of one bank). The lines' counts are computed once per trace (both rules ask)."""
    got = _LINES.get(id(trace))
    if got is None or got[0]() is not trace:
        got = (weakref.ref(trace), _atomic_lines(trace))
        _LINES[id(trace)] = got
        weakref.finalize(trace, _LINES.pop, id(trace), None)
    return {k: c for k, c in got[1].items() if c.addresses and c.lanes / c.addresses >= min_lanes}


def _atomic_lines(trace: AccessTrace) -> _Lines:
    """Every source line's shared-memory atomics, each line as one :class:`Contention`."""
    recs = trace.records
    sel = (recs["space"] == int(Space.SHARED)) & np.isin(recs["kind"], ATOMICS)
    idx = np.flatnonzero(sel)
    if not len(idx):
        return {}
    atom = recs[idx]
    lanes, addrs = atomic_contention(atom)
    wf, _ = record_wavefronts(atom)
    after = np.where(addrs > 0, -(-addrs // 32), 0)
    out: dict[tuple[str | None, int | None], Contention] = {}
    insts = atom["inst"].astype(np.int64)
    for inst in np.unique(insts):
        key = trace.line_of(int(inst))
        m = insts == inst
        c = out.get(key)
        add = Contention(
            int(m.sum()),
            int(lanes[m].sum()),
            int(addrs[m].sum()),
            int(wf[m].sum()),
            int(after[m].sum()),
            (int(inst),),
        )
        out[key] = (
            add
            if c is None
            else Contention(
                c.requests + add.requests,
                c.lanes + add.lanes,
                c.addresses + add.addresses,
                c.wavefronts + add.wavefronts,
                c.after_wavefronts + add.after_wavefronts,
                c.insts + add.insts,
            )
        )
    return out
