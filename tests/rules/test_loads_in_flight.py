"""gpuadvise.rules.estimates' loads in flight per warp (the Little's-law latency term's bytes in
flight): LOADS_IN_FLIGHT, or the loads a warp issues per global wait of its critical chain where
that is more (issue 29: HeCBench kmeans' hoist issues its 34 feature loads as one predicated batch,
where 4 in flight made its latency term 63 us for a kernel measured at 37.6 us)."""

from __future__ import annotations

from gpuadvise.model.execution import KernelWork
from gpuadvise.rules.estimates import LOADS_IN_FLIGHT, _loads_per_wait


def _work(global_links: float) -> KernelWork:
    chain = {"global": global_links} if global_links else {}
    return KernelWork(
        pipes={"lsu": 320.0}, chain=chain, critical_instructions=400.0, ctas=1, warps_per_cta=8
    )


def test_a_batch_of_loads_per_wait_keeps_the_batch_in_flight():
    # 40 loads a warp, one global link on its chain: 40 in flight
    assert _loads_per_wait(_work(1.0), 40.0) == 40.0
    # 204 loads, 6 waits (a batch of 34 features, then 5 batches of cluster loads): 34
    assert _loads_per_wait(_work(6.0), 204.0) == 34.0


def test_a_load_waited_each_time_keeps_the_default():
    # one wait a load: no more than the default (the compiler still issues a few ahead)
    assert _loads_per_wait(_work(40.0), 40.0) == LOADS_IN_FLIGHT
    assert _loads_per_wait(None, 40.0) == LOADS_IN_FLIGHT
    assert _loads_per_wait(_work(0.0), 40.0) == LOADS_IN_FLIGHT
