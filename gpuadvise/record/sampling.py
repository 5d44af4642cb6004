"""Which launches the recorder snapshots, and how many bytes it may copy (pure).

Every launch is counted (and timed from CUPTI's activity records). Its parameters and the
allocations its pointers lead to are copied, before it runs, only for the first
``max_per_shape`` launches of each kernel and launch shape (grid, block, dynamic shared
memory) and then for a geometric sample of the rest: launch number ``max_per_shape * 2**j`` of
that shape (so a loop of a million launches costs about twenty snapshots, and a kernel whose
data drifts over a run is still seen late). All snapshots together stay within
``max_total_bytes``: an allocation that would pass it is not copied (the launch is still
recorded, with its parameters, and the case says which buffer gets random data instead).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["SnapshotPolicy"]


@dataclass
class SnapshotPolicy:
    max_per_shape: int = 2
    max_total_bytes: int = 1 << 30
    counts: dict[Hashable, int] = field(default_factory=dict)
    used_bytes: int = 0

    def __post_init__(self) -> None:
        if self.max_per_shape < 0 or self.max_total_bytes < 0:
            raise ValueError("limits must not be negative")

    def count(self, key: Hashable) -> int:
        """Count one launch of ``key``; returns its number (1 for the first)."""
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        return n

    def wants(self, n: int) -> bool:
        """Whether launch number ``n`` (1-based) of a shape is snapshotted."""
        if n <= self.max_per_shape:
            return True
        if self.max_per_shape == 0:
            return False
        q, r = divmod(n, self.max_per_shape)
        return r == 0 and q & (q - 1) == 0  # n = max_per_shape * 2**j

    def admit(self, size_bytes: int) -> bool:
        """Reserve ``size_bytes`` of the budget; False (nothing reserved) when it would pass."""
        if self.used_bytes + size_bytes > self.max_total_bytes:
            return False
        self.used_bytes += size_bytes
        return True
