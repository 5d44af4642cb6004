"""GA208's view of a launch's global atomics: per source line, the address its updates pile on
and how they arrive (lanes of one warp-level request, CTAs), from the trace; and what the L2
takes to apply them one after another.

The L2 applies the atomics of one address one at a time (an H200 measured 1.76 ns an update for
a float add on one word, 0.73 ns for an integer add: ``benchmarks/global_atomics_probe``), so a
launch whose updates pile on one address takes at least their count times that, however many
SMs issue them. Pure: the trace's records, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuadvise.model.banks import active_lanes
from gpuadvise.ptx.access import record_weights
from gpuadvise.rules.details import FindingDetails
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = ["HotAddress", "hot_addresses", "update_ns"]

_ATOMIC_KINDS = (int(Kind.ATOMIC), int(Kind.REDUCTION))

UPDATE_NS = {"f32": 1.76, "f64": 1.76, "f16": 1.76, "bf16": 1.76, "int": 0.73}
"""Nanoseconds the L2 takes per update of one address, by the atomic's type: an H200, CUDA 13,
2^24 updates of one word (``benchmarks/global_atomics_probe``, 2026-11-29): a float add 1.76 ns
(the other float types, unmeasured, taken alike), an integer add 0.73 ns. Other GPUs' L2s are
taken alike until measured."""


def update_ns(opcode: str) -> float:
    """The L2's time per update of one address for a PTX atomic ``opcode``."""
    mods = opcode.split(".")[1:]
    for m in reversed(mods):
        if m in UPDATE_NS:
            return UPDATE_NS[m]
    return UPDATE_NS["int"]


@dataclass(frozen=True)
class HotAddress(FindingDetails):
    """A line's global atomics over the traced CTAs: the updates (weighted where the emulator
    sampled a loop), the distinct addresses, the updates of the most updated address
    (``hot_updates``) and the traced CTAs making them (``hot_ctas``), the mean active lanes
    on that address per warp-level request that updates it, the buffer, the PTX opcode, the
    traced CTAs, and the instructions."""

    updates: float
    addresses: int
    hot_updates: float
    hot_ctas: int
    lanes_per_request: float
    traced_ctas: int
    buffer: str | None
    opcode: str
    insts: tuple[int, ...]

    hot_spread: float = 0.0

    @property
    def grid_wide(self) -> bool:
        """CTAs all over the traced ones update the hot address: at least half of them (a
        grid-wide sum), or at least two whose positions among the traced CTAs span half of
        them (a histogram's bin, which each CTA's data reach at random); not an address of
        one CTA or of a group of neighbouring CTAs."""
        if not self.traced_ctas:
            return False
        if self.hot_ctas * 2 >= self.traced_ctas:
            return True
        return self.hot_ctas >= 2 and self.hot_spread >= 0.5

    def launch_updates(self, scale: float) -> float:
        """The hot address's updates over the launch: the traced ones times the launch's CTAs
        over the traced where the address is :attr:`grid_wide`, else as traced (addresses of
        their own per CTA or group of CTAs)."""
        return self.hot_updates * scale if self.grid_wide else self.hot_updates

    def launch_ctas(self, scale: float) -> float:
        """The launch's CTAs that update the hot address (as :meth:`launch_updates` counts)."""
        return self.hot_ctas * scale if self.grid_wide else float(self.hot_ctas)


def _buffer_of(trace: AccessTrace, address: int) -> str | None:
    for name, (base, size) in trace.buffers.items():
        if int(base) <= address < int(base) + int(size):
            return str(name)
    return None


def hot_addresses(trace: AccessTrace) -> dict[tuple[str | None, int | None], HotAddress]:
    """Per source line (its user's line), the :class:`HotAddress` of its global atomics."""
    recs = trace.records
    sel = (recs["space"] == int(Space.GLOBAL)) & np.isin(recs["kind"], _ATOMIC_KINDS)
    idx = np.flatnonzero(sel)
    if not len(idx):
        return {}
    atom = recs[idx]
    weights = record_weights(atom)
    w_rec = np.ones(len(atom)) if weights is None else weights
    by_line: dict[tuple[str | None, int | None], list[int]] = {}
    insts = atom["inst"].astype(np.int64)
    for inst in np.unique(insts):
        # the kernel's line (a helper function's atomic at its call in the kernel)
        by_line.setdefault(trace.call_site_of(int(inst)), []).append(int(inst))
    traced = len(trace.ctas)
    position = {int(c): k for k, c in enumerate(sorted(int(x) for x in trace.ctas))}
    out: dict[tuple[str | None, int | None], HotAddress] = {}
    for key, line_insts in by_line.items():
        rows = np.flatnonzero(np.isin(insts, line_insts))
        r = atom[rows]
        act = active_lanes(r["mask"])
        if not act.any():
            continue
        addr = r["addr"][act].astype(np.uint64)
        lane_w = np.repeat(w_rec[rows], act.sum(axis=1))
        uniq, inverse = np.unique(addr, return_inverse=True)
        counts = np.bincount(inverse, weights=lane_w, minlength=len(uniq))
        hot = int(np.argmax(counts))
        on_hot = r["addr"] == uniq[hot]
        on_hot &= act
        per_req = on_hot.sum(axis=1)
        touching = per_req > 0
        ctas = np.unique(r["cta"][touching])
        pos = [position.get(int(c), 0) for c in ctas]
        spread = (max(pos) - min(pos) + 1) / traced if pos and traced else 0.0
        opcode = trace.instructions[line_insts[0]].opcode
        out[key] = HotAddress(
            updates=float(lane_w.sum()),
            addresses=len(uniq),
            hot_updates=float(counts[hot]),
            hot_ctas=len(ctas),
            lanes_per_request=float(per_req[touching].mean()),
            traced_ctas=traced,
            buffer=_buffer_of(trace, int(uniq[hot])),
            opcode=opcode,
            insts=tuple(line_insts),
            hot_spread=round(spread, 4),
        )
    return out
