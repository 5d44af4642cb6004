"""JSON documents (schema_version 1). The schemas are documented in the README."""

from __future__ import annotations

import json
from typing import Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.model.occupancy import INT_MAX, KernelResources, OccupancyResult, Suggestion

SCHEMA_VERSION = 1


def _limit(v: int) -> int | None:
    return None if v >= INT_MAX else v


def occupancy_json(
    device: DeviceSpec,
    k: KernelResources,
    carveout: int,
    r: OccupancyResult,
    steps: list[Suggestion],
    notes: list[str],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "device": {"name": device.name, "arch": device.arch, "cc": device.cc},
        "input": {
            "threads_per_block": k.threads_per_block,
            "registers_per_thread": k.regs_per_thread,
            "static_smem_bytes": k.static_smem_bytes,
            "dynamic_smem_bytes": k.dynamic_smem_bytes,
            "carveout_pct": carveout,
        },
        "active_blocks_per_sm": r.active_blocks_per_sm,
        "active_warps_per_sm": r.active_warps_per_sm,
        "active_threads_per_sm": r.active_warps_per_sm * device.warp_size,
        "max_warps_per_sm": r.max_warps_per_sm,
        "occupancy": r.occupancy,
        "limiters": list(r.limiters),
        "limits": {
            name: _limit(r.limits[name])
            for name in ("warps", "registers", "shared_memory", "blocks", "barriers")
        },
        "allocation": {
            "registers_per_block": r.allocated_regs_per_block,
            "smem_per_block_bytes": r.allocated_smem_per_block,
            "smem_per_sm_bytes": r.smem_per_sm_bytes,
        },
        "next_steps": [
            {
                "resource": s.resource,
                "value": s.value,
                "active_warps_per_sm": s.active_warps_per_sm,
                "occupancy": s.occupancy,
                "text": s.text,
            }
            for s in steps
        ],
        "notes": notes,
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False)
