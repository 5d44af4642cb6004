"""The one roofline of every estimate: a kernel takes at least the larger of the time of its busiest
on-chip pipe and the time of its DRAM traffic.

A fix that saves ``saved`` units of the pipe's work (L1 data-path cycles, shared-memory wavefronts,
issue slots) bounds the speedup by ``max(T_pipe, T_dram) / max(T_pipe - T_saved, T_dram)``; the
rules turn that into an upper-bound estimate. Latency, dependencies and overlap are ignored, so
the real gain is smaller. Without the device's clock or bandwidth the DRAM floor is dropped and
the bound is the ratio of the pipe's work (:func:`work_ratio`).

Pure arithmetic: no I/O, no numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuadvise.devices import DeviceSpec

__all__ = [
    "L1_BYTES_PER_CLOCK",
    "Roofline",
    "dram_bytes_per_s",
    "l1_cycles",
    "roofline",
    "sm_cycles_per_s",
    "work_ratio",
]

L1_BYTES_PER_CLOCK = 128
"""An SM's L1 data path returns 128 bytes (4 sectors of 32) per clock."""

_MIN_TIME_S = 1e-15


def l1_cycles(requests: float, sectors: float) -> float:
    """Cycles of an SM's L1 data path for global requests: a request takes at least one, and the
    path returns 128 bytes (4 sectors) per cycle."""
    return max(float(requests), float(sectors) / 4.0)


def sm_cycles_per_s(device: DeviceSpec, per_sm_per_clock: float = 1.0) -> float | None:
    """Units of a per-SM pipe the whole GPU completes per second (``per_sm_per_clock`` each SM
    per clock, at the SM clock); None without the SM count or clock."""
    if not (device.sm_count and device.sm_clock_mhz):
        return None
    return device.sm_count * device.sm_clock_mhz * 1e6 * per_sm_per_clock


def dram_bytes_per_s(device: DeviceSpec) -> float | None:
    """The device's peak DRAM bandwidth in bytes per second; None when its model has none."""
    if not device.mem_bandwidth_gbps:
        return None
    return device.mem_bandwidth_gbps * 1e9


@dataclass(frozen=True)
class Roofline:
    """A pipe's time and the part a fix saves, against a DRAM floor (seconds, whole launch)."""

    pipe_s: float
    saved_s: float
    dram_s: float

    @property
    def before_s(self) -> float:
        return max(self.pipe_s, self.dram_s)

    @property
    def after_s(self) -> float:
        return max(self.pipe_s - self.saved_s, self.dram_s, _MIN_TIME_S)

    @property
    def speedup(self) -> float:
        """``max(T_pipe, T_dram) / max(T_pipe - T_saved, T_dram)``: an upper bound."""
        return self.before_s / self.after_s

    @property
    def dram_bound(self) -> bool:
        """Whether the DRAM floor decides the time once the fix is made."""
        return self.dram_s >= self.pipe_s - self.saved_s


def roofline(
    pipe_work: float,
    saved_work: float,
    pipe_per_s: float,
    dram_bytes: float = 0.0,
    dram_per_s: float | None = None,
) -> Roofline:
    """The :class:`Roofline` of a launch whose busiest pipe does ``pipe_work`` units at
    ``pipe_per_s`` (:func:`sm_cycles_per_s`), of which a fix saves ``saved_work``, and which
    moves ``dram_bytes`` at ``dram_per_s`` (:func:`dram_bytes_per_s`; None: no DRAM floor)."""
    dram_s = dram_bytes / dram_per_s if dram_per_s else 0.0
    return Roofline(pipe_work / pipe_per_s, saved_work / pipe_per_s, dram_s)


def work_ratio(work: float, saved: float, floor: float = 1e-9) -> float:
    """The bound without clock or bandwidth figures: the pipe's work before over after
    (``after`` at least ``floor``)."""
    return work / max(work - saved, floor)
