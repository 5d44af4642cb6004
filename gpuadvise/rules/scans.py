"""Shared-memory scans for GA209: the scans of a context's trace (:mod:`gpuadvise.model.scan`,
found once per trace) and the execution model's work of a launch whose scan is done with warp
shuffles."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuadvise.memo import IdentityMemo
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.scan import ScanStep, SharedScan, shared_scans
from gpuadvise.trace.access import WARP, AccessTrace

__all__ = ["ScanChange", "ScanStep", "SharedScan", "scans_of", "with_scan_shuffled"]

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
