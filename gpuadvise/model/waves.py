"""Waves: how a launch's grid fills the GPU, from the CTAs per SM the occupancy model allows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: the terminal's first lines need waves_of
    import numpy as np  # alone (gpuadvise.analyze.head), not numpy's 0.1-0.15 CPU-s import

__all__ = [
    "WORK_PROBE_CTAS",
    "Waves",
    "WorkingCtas",
    "buffer_bound",
    "probe_ctas",
    "waves_of",
    "working_ctas",
]


@dataclass(frozen=True)
class Waves:
    """How the grid fills the GPU: ``ctas_per_wave`` CTAs run at once (blocks per SM x SMs)."""

    total_ctas: int
    ctas_per_wave: int
    waves: float  # total_ctas / ctas_per_wave
    full_waves: int
    last_wave_ctas: int  # CTAs in the last, partial wave (0 when the grid fills whole waves)

    @property
    def last_wave_fill(self) -> float:
        """How full the last wave is (1.0 when the grid is a whole number of waves)."""
        if self.last_wave_ctas == 0:
            return 1.0
        return self.last_wave_ctas / self.ctas_per_wave

    @property
    def tail_idle(self) -> float:
        """The fraction of the whole run's SM time left idle by the partial last wave."""
        if self.last_wave_ctas == 0 or self.ctas_per_wave == 0:
            return 0.0
        slots = (self.full_waves + 1) * self.ctas_per_wave
        return (slots - self.total_ctas) / slots


def waves_of(total_ctas: int, blocks_per_sm: int, sm_count: int | None) -> Waves | None:
    """The :class:`Waves` of ``total_ctas`` CTAs at ``blocks_per_sm`` per SM; None without an SM
    count or when no block fits."""
    if not sm_count or blocks_per_sm <= 0:
        return None
    per_wave = blocks_per_sm * sm_count
    full, rest = divmod(total_ctas, per_wave)
    return Waves(total_ctas, per_wave, total_ctas / per_wave, full, rest)


WORK_PROBE_CTAS = 16
"""CTAs spread over the untraced part of the grid that are traced to tell how many CTAs of the
launch do memory work, when some traced ones do none (:func:`working_ctas`)."""


@dataclass(frozen=True)
class WorkingCtas:
    """Which CTAs of a launch do memory work, estimated from a sample, and the factor from the
    traced working CTAs to the launch's (``scale``).

    ``traced``/``traced_working``: CTAs traced, and those of them with at least one memory access;
    ``probed``/``probed_working``: CTAs traced besides, spread over the untraced part of the grid;
    ``launch_working``: the estimate for the whole launch (the sampled share of working CTAs, at
    most ``bound``, the CTAs the buffers of the launch can give disjoint work to, when known).
    """

    total: int
    traced: int
    traced_working: int
    probed: int
    probed_working: int
    bound: float | None
    launch_working: float

    @property
    def scale(self) -> float:
        """Factor from the traced working CTAs to the launch's working CTAs."""
        return self.launch_working / max(self.traced_working, 1)

    def note(self) -> str:
        idle = self.traced - self.traced_working
        bound = (
            f", at most {self.bound:.0f} by the buffers' sizes (each working CTA touches its own "
            "bytes)"
            if self.bound is not None
            else ""
        )
        return (
            f"{idle} of {self.traced} traced CTAs do no memory work (they return early); of "
            f"{self.probed} more CTAs traced across the grid, {self.probed_working} do: the "
            f"launch totals are extrapolated over an estimated {self.launch_working:.0f} working "
            f"CTAs{bound}, not all {self.total} (x{self.scale:.4g} the traced working CTAs)"
        )


def probe_ctas(total: int, traced: Sequence[int], count: int = WORK_PROBE_CTAS) -> list[int]:
    """Up to ``count`` linear CTA ids evenly spread over the grid, not among ``traced``."""
    import numpy as np

    seen = set(int(c) for c in traced)
    if total - len(seen) <= 0 or count <= 0:
        return []
    out: list[int] = []
    for c in np.linspace(0, total - 1, count + 2)[1:-1].round().astype(np.int64).tolist():
        c = int(c)
        while c in seen and c < total - 1:  # the next untraced id
            c += 1
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def buffer_bound(
    cta: np.ndarray, addr: np.ndarray, nbytes: np.ndarray, buffers: Sequence[tuple[int, int]]
) -> float | None:
    """How many CTAs the buffers can give work to, from the global accesses of the traced
    working CTAs (one row per active lane: CTA, byte address, bytes): for each buffer whose
    traced CTAs touch disjoint bytes, its size over the bytes a CTA touches on average; the
    smallest over those buffers. None when no buffer is touched so."""
    import numpy as np

    best: float | None = None
    for base, size in buffers:
        inside = (addr >= base) & (addr < base + size)
        if not inside.any():
            continue
        c, a, w = cta[inside], addr[inside], nbytes[inside]
        # the distinct (address, bytes) touches, sorted (one key where the bytes fit in 8 bits:
        # np.unique over columns sorted 5.6 million triples in 15 s on lombscargle)
        if int(w.min()) >= 0 and int(w.max()) < 256:
            order = np.argsort(((a - base) << 8) | w, kind="stable")
        else:
            order = np.lexsort((w, a))
        a, w, c = a[order], w[order], c[order]
        first = np.ones(len(a), dtype=bool)
        first[1:] = (a[1:] != a[:-1]) | (w[1:] != w[:-1])
        at = np.flatnonzero(first)
        # two CTAs touch one address: not disjoint
        if not np.array_equal(np.minimum.reduceat(c, at), np.maximum.reduceat(c, at)):
            continue
        per_cta = float(w[at].sum()) / len(np.unique(c))
        if per_cta > 0:
            bound = size / per_cta
            best = bound if best is None else min(best, bound)
    return best


def _sampled_span(traced: Sequence[int]) -> int:
    """How many of a launch's first CTAs the traced ones stand for: themselves, or, for runs of
    consecutive CTAs one at the start of each equal stretch of the first CTAs (the default
    sample, :func:`gpuadvise.trace.emulate.spread_runs`), the stretches up to the last one's
    end (its start plus the runs' spacing)."""
    ids = sorted(set(int(c) for c in traced))
    seen = set(ids)
    starts = [c for c in ids if c - 1 not in seen]
    if len(starts) < 2:
        return len(ids)
    return max(len(ids), round(starts[-1] + (starts[-1] - starts[0]) / (len(starts) - 1)))


def working_ctas(
    total: int,
    traced: Sequence[int],
    traced_working: Sequence[int],
    probed: Sequence[int],
    probed_working: Sequence[int],
    bound: float | None = None,
) -> WorkingCtas:
    """The :class:`WorkingCtas` of a launch of ``total`` CTAs: the traced ones (and which of
    them do memory work) stand for themselves, or, when they are spread over the first CTAs
    of the launch (the default sample's runs, :func:`gpuadvise.trace.emulate.spread_runs`),
    for those CTAs (up to the last traced) in their share; the CTAs of the rest of the grid
    work in the share the probe found (none found: none), at most ``bound`` in all."""
    n_tr, n_wk = len(set(traced)), len(set(traced_working))
    n_pr, n_pw = len(set(probed)), len(set(probed_working))
    span = _sampled_span(traced)  # the first CTAs the traced ones sample
    rest = max(total - span - n_pr, 0)
    est = n_wk * span / max(n_tr, 1) + n_pw + (rest * n_pw / n_pr if n_pr else 0.0)
    if bound is not None:
        est = min(est, max(bound, float(n_wk + n_pw)))
    return WorkingCtas(total, n_tr, n_wk, n_pr, n_pw, bound, est)
