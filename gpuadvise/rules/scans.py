"""Shared-memory scans and tree tails made warp shuffles (GA209, GA205): the scans of a
context's trace (:mod:`gpuadvise.model.scan`, found once per trace), the execution model's work
of a launch whose scan or tree tail is done with warp shuffles, and its estimate."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.memo import IdentityMemo
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.scan import ScanStep, SharedScan, shared_scans
from gpuadvise.rules.estimates import launch_change_estimate, view_traffic
from gpuadvise.rules.findings import Estimate
from gpuadvise.trace.access import WARP, AccessTrace
from gpuadvise.trace.view import TraceView

__all__ = [
    "ScanChange",
    "ScanStep",
    "SharedScan",
    "scans_of",
    "shuffled_estimate",
    "tree_tail_change",
    "with_scan_shuffled",
]

_SCANS: IdentityMemo[AccessTrace, tuple[SharedScan, ...]] = IdentityMemo()


def scans_of(trace: AccessTrace) -> tuple[SharedScan, ...]:
    """:func:`gpuadvise.model.scan.shared_scans` of ``trace``'s first CTA, once per trace."""
    return _SCANS(trace, shared_scans)


@dataclass(frozen=True)
class ScanChange:
    """A scan of the traced CTA made shuffles, per run: ``steps`` shared steps (the up-sweep's
    and the down-sweep's) and ``barriers`` barriers before; ``warp_steps`` below distance 32;
    ``warps`` it spans; ``per_warp``: each warp scans its own values (no step across warps);
    ``shared_accesses``: its lane accesses; ``runs`` per CTA."""

    steps: int
    barriers: int
    warp_steps: int
    warps: int
    per_warp: bool
    shared_accesses: int
    runs: int

    def after(self) -> tuple[int, int, int]:
        """On a warp's dependent chain after the change, per run: shuffles, shared loads,
        barriers. One warp's scan (or one per warp side by side): its steps' shuffles; a
        block's: each warp's shuffles, its total stored, a barrier, the first warp's scan of
        the totals (loaded, ``log2(warps)`` shuffles, stored), a barrier, its offset loaded."""
        if self.warps <= 1 or self.per_warp:
            return self.warp_steps, 0, 0
        return self.warp_steps + math.ceil(math.log2(self.warps)), 2, 2


def with_scan_shuffled(work: KernelWork, c: ScanChange) -> tuple[KernelWork, float]:
    """``work`` with the scan made shuffles (``runs`` times a CTA) and the shared warp requests
    saved per CTA: the barriers and a shared load a step off the critical chain (the
    :meth:`ScanChange.after` ones added back), the shared requests and barriers off the pipes,
    the shuffles on them; three instructions a step off the critical warp's count."""
    shuffles, loads, barriers = c.after()
    r = c.runs
    gone = max(c.barriers - barriers, 0)
    chain = dict(work.chain)
    chain["barrier"] = max(chain.get("barrier", 0.0) - r * gone, 0.0)
    chain["shared"] = max(chain.get("shared", 0.0) - r * max(c.steps - loads, 0), 0.0)
    chain["shuffle"] = chain.get("shuffle", 0.0) + r * shuffles
    warps = max(c.warps, 1)
    requests = float(max(math.ceil(c.shared_accesses / WARP) - warps * (loads + 1), 0) * r)
    pipes = dict(work.pipes)
    pipes["lsu"] = max(pipes.get("lsu", 0.0) - requests, 0.0)
    pipes["barrier"] = max(pipes.get("barrier", 0.0) - r * work.warps_per_cta * gone, 0.0)
    pipes["shuffle"] = pipes.get("shuffle", 0.0) + r * warps * shuffles
    after = replace(
        work,
        chain=chain,
        chain_unordered=None,
        pipes=pipes,
        shared_requests=max(work.shared_requests - requests, 0.0),
        critical_instructions=max(work.critical_instructions - r * 3 * c.steps, 1.0),
    )
    return after, requests


def tree_tail_change(distances: tuple[int, ...], barriers: int, runs: int) -> ScanChange:
    """A reduction tree's last steps (``distances``, each at most 32 words apart, ``barriers``
    of them after a barrier) made one warp's shuffles, ``runs`` times a CTA: each step's
    active threads load two words and store one; after the change the warp adds its two
    halves once (one shared load) and shuffles ``log2(32)`` times."""
    accesses = sum(3 * d for d in distances)
    return ScanChange(
        steps=len(distances),
        barriers=barriers,
        warp_steps=int(math.log2(WARP)),
        warps=1,
        per_warp=False,
        shared_accesses=accesses,
        runs=max(runs, 1),
    )


def shuffled_estimate(
    device: Any, view: TraceView, change: ScanChange, what: str, inputs: dict[str, Any]
) -> Estimate:
    """The launch with ``change`` made (:func:`with_scan_shuffled`) on the launch model: its
    shared requests and wavefronts (at the launch's ways per request) saved in every CTA.
    Raises :class:`~gpuadvise.rules.context.ModelUnavailable` without the launch's traffic."""
    base = view_traffic(device, view)
    if base.work is None:
        return Estimate(None, "none", "not estimated: no execution model of the launch", inputs)
    work, requests = with_scan_shuffled(base.work, change)
    ways = base.shared_wavefronts / base.shared_requests if base.shared_requests else 1.0
    saved = requests * base.work.ctas
    after = replace(
        base,
        work=work,
        shared_requests=max(base.shared_requests - saved, 0.0),
        shared_wavefronts=max(base.shared_wavefronts - saved * ways, 0.0),
    )
    inputs["shared_requests_saved_per_cta"] = requests
    est = launch_change_estimate(device, base, after, what, inputs)
    if est is None:
        return Estimate(None, "none", "not estimated: no launch model on this device", inputs)
    return est
