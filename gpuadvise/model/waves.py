"""Waves: how a launch's grid fills the GPU, from the CTAs per SM the occupancy model allows."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Waves", "waves_of"]


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
