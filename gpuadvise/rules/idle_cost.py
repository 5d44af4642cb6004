"""What a launch's idle CTAs cost next to its working ones (GA108's estimate, GA405's deferral).

A launch whose grid is sized past the data has CTAs that make no memory access
(``launch_working_ctas`` of the trace: :func:`gpuadvise.model.waves.working_ctas`). The execution
model's work is the traced CTAs' mean (:class:`~gpuadvise.model.execution.KernelWork`), a mix of
working and idle CTAs in the sample's proportion, not the launch's: lombscargle's first wave
traced in runs spread over it has about one working CTA in eight where the launch has 391 in
100,096. The emulator counts, per traced CTA, the most instructions a warp of it issued
(``KernelWork.cta_critical``); with them the mean splits into a working CTA's work and an idle
CTA's (the same mix of pipes, scaled by their issued instructions), and the launch model times
each side alone: the idle CTAs' issue, chain and CTA launches, no memory; the working CTAs' work
with the launch's memory traffic (all of it theirs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.devices import DeviceSpec, memory_rates
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.roofline import Traffic, launch_times
from gpuadvise.trace.access import AccessTrace


@dataclass(frozen=True)
class IdleCost:
    """The launch's working and idle CTAs (``working`` the trace's estimate), the mean of the
    most instructions a warp issued in a traced working CTA and in a traced idle one, and the
    launch model's work time (over the floor) of each side alone; ``launch``: the launch's
    traffic with its work the launch's own mix of working and idle CTAs (the same totals as
    the two sides), ``alone``: the working CTAs alone with their own work."""

    working: float
    idle: float
    working_issue: float
    idle_issue: float
    working_s: float
    idle_s: float
    launch: Traffic
    alone: Traffic

    @property
    def idle_share(self) -> float:
        """The idle CTAs' share of the two sides' time."""
        both = self.working_s + self.idle_s
        return self.idle_s / both if both > 0 else 0.0


def _scaled(work: KernelWork, k: float, ctas: float, **more: object) -> KernelWork:
    """``work`` with each CTA doing ``k`` times the mean's (every count scaled,
    :meth:`KernelWork.per_cta_scaled`), for ``ctas`` CTAs, ``more`` fields replaced."""
    return replace(work.per_cta_scaled(k), ctas=max(int(round(ctas)), 1), **more)  # type: ignore[arg-type]


def idle_cost(trace: AccessTrace, device: DeviceSpec, traffic: Traffic) -> IdleCost | None:
    """The :class:`IdleCost` of the launch of ``trace`` (``traffic``: its view's, scaled to the
    launch); None when the trace tells no working CTAs from idle ones (every CTA works, no
    traced CTA works or none is idle), the emulator did not count each CTA's instructions, or
    the device model lacks its rates."""
    work = traffic.work
    rates = memory_rates(device)
    working = trace.launch_working_ctas
    if work is None or rates is None or working is None:
        return None
    per_cta = np.asarray(work.cta_critical, float)
    if len(per_cta) != len(trace.ctas) or not len(per_cta):
        return None
    busy = np.isin(np.asarray(trace.ctas, np.int64), np.unique(trace.records["cta"]))
    n_busy = int(busy.sum())
    if n_busy == 0 or n_busy == len(busy):
        return None
    mean = float(per_cta.mean())
    if mean <= 0:
        return None
    total = float(trace.total_ctas)
    working = min(max(float(working), 1.0), total)
    idle = total - working
    i_work = float(per_cta[busy].mean())
    i_idle = float(per_cta[~busy].mean())
    k_work, k_idle = i_work / mean, i_idle / mean
    warps = max(work.warps_per_cta, 1)
    # the shared accesses: the work's per-CTA mean over the traced CTAs, all of them the
    # working ones' (an idle CTA makes no access)
    per_busy = len(busy) / n_busy
    shared = per_busy * working / total
    mine = {
        "shared_requests": work.shared_requests * per_busy,
        "shared_wavefronts": work.shared_wavefronts * per_busy,
    }
    alone = replace(
        traffic,
        work=_scaled(work, k_work, working, **mine),
        resident_warps=min(traffic.resident_warps, working * warps),
        shared_wavefronts=traffic.shared_wavefronts * shared,
        shared_requests=traffic.shared_requests * shared,
    )
    nothing = traffic.without_memory(
        shared_requests=0.0,
        resident_warps=min(traffic.resident_warps, idle * warps),
        work=_scaled(work, k_idle, idle, shared_requests=0.0, shared_wavefronts=0.0),
    )
    k_launch = (working * i_work + idle * i_idle) / (total * mean)
    launch = replace(
        traffic,
        work=_scaled(
            work,
            k_launch,
            work.ctas,
            shared_requests=work.shared_requests * shared,
            shared_wavefronts=work.shared_wavefronts * shared,
        ),
        shared_wavefronts=traffic.shared_wavefronts * shared,
        shared_requests=traffic.shared_requests * shared,
    )
    t_work = launch_times(alone, device, rates)
    t_idle = launch_times(nothing, device, rates) if idle >= 1 else None
    if t_work is None:
        return None
    return IdleCost(
        working,
        idle,
        i_work,
        i_idle,
        t_work.work_s,
        0.0 if t_idle is None else t_idle.work_s,
        launch,
        alone,
    )
