"""The L2 model of a trace under the launch orders worth comparing (the hardware's, and seed
002's tilings for 2D grids), or why there is none."""

from __future__ import annotations

from typing import Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.errors import GpuAdviseError


def l2_for(trace: Any, device: DeviceSpec, blocks_per_sm: int) -> tuple[Any, tuple[str, ...]]:
    """The L2 model under the hardware order and seed 002's tilings (2D grids), or why not."""
    if not device.l2_bytes or not device.sm_count or blocks_per_sm <= 0:
        return None, ("no L2 model: the device model has no L2 size or SM count",)
    from gpuadvise.model.l2 import DEFAULT_ORDERS, l2_model

    orders = DEFAULT_ORDERS if trace.grid[1] > 1 else ("row-major",)
    try:
        return l2_model(trace, device, blocks_per_sm, orders), ()
    except GpuAdviseError as exc:
        return None, (f"no L2 model: {exc.one_line()}",)
    except (ValueError, MemoryError) as exc:
        return None, (f"no L2 model: {exc}",)
