"""What a warp keeps in flight on the launch model (gpuadvise.rules.estimates): 4 load requests,
or more where its loads are that independent (its loads over the global links of its critical
chain), at most 32, never fewer than it issues; and the overlap of memory and compute that an
unrolled run of loads buys (kmeans' hoisted membership: 103 registers, 2 CTAs an SM where 8 were,
measured 1.12x on an H200 where 4 loads in flight had the model predict 0.46x)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuadvise.devices import memory_rates, preset
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.roofline import Traffic, launch_times
from gpuadvise.rules.estimates import LOADS_IN_FLIGHT, MAX_LOADS_IN_FLIGHT, _loads_in_flight


def _work(links: float) -> KernelWork:
    return KernelWork(
        pipes={"fp32": 100.0, "lsu": 40.0}, chain={"global": links, "fp32": 10.0},
        critical_instructions=140.0, ctas=1056, warps_per_cta=8, ctas_per_sm=2,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("links", "loads", "want"),
    [
        (40.0, 40.0, LOADS_IN_FLIGHT),  # one load a link: the usual 4
        (0.0, 40.0, LOADS_IN_FLIGHT),  # no chain known
        (10.0, 200.0, 20.0),  # 20 loads a link
        (1.0, 1000.0, MAX_LOADS_IN_FLIGHT),  # capped
    ],
)
def test_independent_loads_raise_what_a_warp_keeps_in_flight(links, loads, want):
    assert _loads_in_flight(_work(links), loads) == want
    assert _loads_in_flight(None, loads) == LOADS_IN_FLIGHT


def test_independent_loads_hide_memory_behind_compute_as_more_warps_would():
    h100 = preset("H100")
    rates = memory_rates(h100)
    assert rates is not None
    t = Traffic(
        dram_bytes=50e6, instructions=1e6, resident_warps=132 * 16.0,
        bytes_in_flight_per_warp=512.0, work=_work(10.0), load_requests=1e6,
    )  # fmt: skip
    plain = launch_times(t, h100, rates)
    ilp = launch_times(replace(t, independent_loads=8.0), h100, rates)
    assert plain is not None and ilp is not None
    assert ilp.hidden > plain.hidden and ilp.time_s <= plain.time_s
