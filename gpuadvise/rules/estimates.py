"""Estimates shared by several rules, on the one roofline of :mod:`gpuadvise.model.roofline`."""

from __future__ import annotations

from typing import Any

from gpuadvise.devices import DeviceSpec
from gpuadvise.model.roofline import dram_bytes_per_s, roofline, sm_cycles_per_s, work_ratio
from gpuadvise.rules.engine import Estimate
from gpuadvise.trace.view import TraceView

__all__ = ["l1_roofline_estimate"]


def l1_roofline_estimate(
    device: DeviceSpec, view: TraceView, saved_cycles: float, what: str
) -> Estimate:
    """The layout rules' estimate (an upper bound): the launch's L1 data-path time
    (:func:`~gpuadvise.model.roofline.l1_cycles` per line over SMs x clock) less ``saved_cycles``
    (over the sampled CTAs), against a DRAM floor (the distinct bytes the launch touches at peak
    bandwidth): ``max(T_l1, T_dram) / max(T_l1 - T_saved, T_dram)``. Without the device's clock
    or bandwidth, the cycle ratio."""
    total = view.l1_total()
    saved = min(saved_cycles, total * 0.999)
    inputs: dict[str, Any] = {
        "l1_cycles_sampled": total,
        "saved_cycles_sampled": saved,
        "sampled_ctas": len(view.ctas),
        "scale": view.scale,
    }
    hz, bw = sm_cycles_per_s(device), dram_bytes_per_s(device)
    if hz is None or bw is None or total <= 0:
        ratio = work_ratio(total, saved) if total > 0 else 1.0
        return Estimate(
            round(ratio, 3),
            "upper-bound",
            f"L1 data-path cycles, max(requests, sectors / 4) per line: {total:.0f} before, "
            f"{total - saved:.0f} after {what} (no clock or bandwidth for {device.name}: DRAM "
            "ignored); latency ignored, so the real gain is smaller",
            inputs,
        )
    nbytes = view.useful_bytes()
    r = roofline(total * view.scale, saved * view.scale, hz, nbytes, bw)
    inputs.update(l1_time_us=r.pipe_s * 1e6, saved_time_us=r.saved_s * 1e6,
                  dram_time_us=r.dram_s * 1e6, dram_bytes=nbytes)  # fmt: skip
    return Estimate(
        round(r.speedup, 3),
        "upper-bound",
        f"roofline over the launch: the SMs' L1 data path {r.pipe_s * 1e6:.2f} us (128 bytes per "
        f"SM per cycle and at least one cycle per request: max(requests, sectors / 4) cycles per "
        f"line, {device.sm_count} SMs at {device.sm_clock_mhz} MHz), of which {what} saves "
        f"{r.saved_s * 1e6:.2f} us; DRAM floor {r.dram_s * 1e6:.2f} us ({nbytes / 1e6:.1f} MB, "
        f"each byte the launch touches once, at {device.mem_bandwidth_gbps:.0f} GB/s); max "
        "before / max after. Latency is ignored, so the real gain is smaller",
        inputs,
    )
