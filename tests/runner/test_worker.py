"""The worker's logic (verify, poison, alternation, adaptive timing, errors) with a numpy backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuadvise.runner import job as J
from gpuadvise.runner.backend import cuda_error_name
from gpuadvise.runner.verify import unwritten
from gpuadvise.runner.worker import run_job


class FakeBackend:
    """Runs 'kernels' written in numpy on host arrays; time is a fixed number per kernel."""

    name = "fake"

    def __init__(self, kernels: dict[str, Any], times_ms: dict[str, float]) -> None:
        self.kernels, self.times_ms, self.calls, self.flushes = kernels, times_ms, [], 0
        self.current = ""

    def device_info(self) -> dict[str, Any]:
        return {"name": "fake", "cc": "9.0"}

    def load(self, cubin: bytes, symbol: str, fmt: str, smem: int) -> Any:
        return symbol

    def alloc(self, nbytes: int) -> Any:
        return {"bytes": np.zeros(nbytes, np.uint8)}

    def upload(self, dev: Any, host: np.ndarray) -> None:
        dev["bytes"][:] = np.ascontiguousarray(host).view(np.uint8).ravel()

    def download(self, dev: Any, host: np.ndarray) -> None:
        host.view(np.uint8).ravel()[:] = dev["bytes"]

    def launch(self, kernel: Any, grid: Any, block: Any, smem: int, args: Any) -> None:
        self.calls.append(kernel)
        self.current = kernel
        self.kernels[kernel](*args)

    def bind(self, kernel: Any, grid: Any, block: Any, smem: int, args: Any) -> Any:
        return lambda: self.launch(kernel, grid, block, smem, args)

    def synchronize(self) -> None:
        pass

    def timed(self, fn: Any) -> float:
        fn()
        return self.times_ms[self.current]

    def flush_l2(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        pass


def f32(dev: dict[str, np.ndarray]) -> np.ndarray:
    return dev["bytes"].view(np.float32)


KERNELS = {
    "copy": lambda i, o, n: f32(o).__setitem__(slice(0, n), f32(i)[:n]),
    "copy_half": lambda i, o, n: f32(o).__setitem__(slice(0, n // 2), f32(i)[: n // 2]),
}


def make_job(symbols: list[str], timing: J.TimingConfig | None = None) -> J.Job:
    params = (
        J.Param("buffer", "P", 0, "in"),
        J.Param("buffer", "P", 0, "out"),
        J.Param("scalar", "i", 64),
    )
    launches = tuple(
        J.KernelLaunch(label, "/dev/null", sym, (1, 1, 1), (64, 1, 1), 0, params)
        for label, sym in zip("AB", symbols, strict=False)
    )
    bufs = (
        J.BufferInit("in", np.float32, 64, "random"),
        J.BufferInit("out", np.float32, 64, "random", is_output=True, poison=True),
    )
    return J.Job(launches, bufs, seed=3, verify=True, timing=timing)


def test_verify_returns_outputs_and_poison_exposes_unwritten_elements():
    be = FakeBackend(dict(KERNELS), {"copy": 1.0, "copy_half": 1.0})
    res = run_job(make_job(["copy", "copy_half"]), be)
    assert res.ok
    a, b = res.outcomes
    np.testing.assert_array_equal(a.outputs["out"], res.inputs["in"])
    assert unwritten(a.outputs["out"]) == 0
    assert unwritten(b.outputs["out"]) == 32  # the upper half kept its NaN poison


def test_inputs_come_back_only_when_asked():
    from dataclasses import replace

    be = FakeBackend(dict(KERNELS), {"copy": 1.0})
    assert set(run_job(make_job(["copy"]), be).inputs) == {"in"}
    res = run_job(replace(make_job(["copy"]), return_inputs=False), be)
    assert res.ok and res.inputs == {} and res.outcomes[0].outputs


def test_identical_outputs_come_back_as_one_array():
    """A later launch whose output has the first launch's bytes shares its array (pickled once,
    compared at once by the parent); one that differs keeps its own."""
    import pickle

    kernels = dict(KERNELS, copy2=KERNELS["copy"])
    be = FakeBackend(kernels, {"copy": 1.0, "copy2": 1.0})
    res = run_job(make_job(["copy", "copy2"]), be)
    a, b = res.outcomes
    assert b.outputs["out"] is a.outputs["out"]
    back = pickle.loads(pickle.dumps(res, protocol=5))
    assert back.outcomes[1].outputs["out"] is back.outcomes[0].outputs["out"]
    res = run_job(
        make_job(["copy", "copy_half"]), FakeBackend(dict(KERNELS), {"copy": 1.0, "copy_half": 1.0})
    )
    a, b = res.outcomes
    assert b.outputs["out"] is not a.outputs["out"] and unwritten(b.outputs["out"]) == 32


def test_timing_alternates_and_flushes_l2_before_every_cold_sample():
    be = FakeBackend(dict(KERNELS), {"copy": 2.0, "copy_half": 1.0})
    t = J.TimingConfig(cold=True, warmup=2, min_samples=10, min_time_s=0.0, max_time_s=5.0)
    res = run_job(make_job(["copy", "copy_half"], t), be)
    a, b = res.outcomes
    assert len(a.samples_ms) == len(b.samples_ms) >= 10
    assert set(a.samples_ms) == {2.0} and set(b.samples_ms) == {1.0}
    timed_calls = be.calls[2 + 2 * 2 :]  # after 2 verify runs and 2x2 warm-ups
    assert timed_calls[:4] == ["copy", "copy_half", "copy", "copy_half"]
    assert be.flushes == len(a.samples_ms) + len(b.samples_ms)


def test_hot_timing_does_not_flush():
    be = FakeBackend(dict(KERNELS), {"copy": 2.0})
    t = J.TimingConfig(cold=False, warmup=1, min_samples=10, min_time_s=0.0)
    run_job(make_job(["copy"], t), be)
    assert be.flushes == 0


def test_a_kernel_error_is_reported_with_the_cuda_error_name():
    def boom(*args: Any) -> None:
        raise RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered")

    be = FakeBackend({"copy": KERNELS["copy"], "bad": boom}, {"copy": 1.0, "bad": 1.0})
    res = run_job(make_job(["copy", "bad"]), be)
    assert not res.ok and res.failed_label == "B"
    assert res.cuda_error == "CUDA_ERROR_ILLEGAL_ADDRESS"


def test_error_names():
    assert cuda_error_name("launch failed: device-side assert triggered") == "CUDA_ERROR_ASSERT"
    assert cuda_error_name("something else") is None


def make_race_job(symbols: list[str], race: Any, matching: Any = (1e-5, 1e-8)) -> J.Job:
    job = make_job(symbols[:2], J.TimingConfig(cold=True, warmup=1, race=race))
    params = job.launches[0].params
    extra = tuple(
        J.KernelLaunch(f"B{i}", "/dev/null", sym, (1, 1, 1), (64, 1, 1), 0, params)
        for i, sym in enumerate(symbols[2:], 2)
    )
    return J.Job(
        job.launches + extra, job.buffers, job.seed, True, job.timing, time_matching=matching
    )


def test_race_stops_each_variant_with_its_reason():
    from gpuadvise.runner.stats import RacePolicy

    kernels = dict(KERNELS, copy_slow=KERNELS["copy"], copy_fast=KERNELS["copy"])
    be = FakeBackend(kernels, {"copy": 2.0, "copy_fast": 1.0, "copy_slow": 3.0})
    race = RacePolicy(min_samples=10, min_time_s=0.0)
    res = run_job(make_race_job(["copy", "copy_fast", "copy_slow"], race), be)
    assert res.ok
    a, fast, slow = res.outcomes
    assert a.stop_reason is None and fast.stop_reason == "faster"
    assert slow.stop_reason in ("eliminated", "slower")
    assert len(a.samples_ms) == len(fast.samples_ms) == 10  # decided at the first look
    assert len(slow.samples_ms) == 10 and set(slow.samples_ms) == {3.0}


def test_race_does_not_time_a_variant_whose_outputs_differ():
    from gpuadvise.runner.stats import RacePolicy

    kernels = dict(KERNELS, copy_fast=KERNELS["copy"])
    be = FakeBackend(kernels, {"copy": 2.0, "copy_half": 0.5, "copy_fast": 1.0})
    race = RacePolicy(min_samples=10, min_time_s=0.0)
    res = run_job(make_race_job(["copy", "copy_half", "copy_fast"], race), be)
    a, half, fast = res.outcomes
    assert half.stop_reason == "unverified" and half.samples_ms == []
    assert half.outputs  # its outputs still come back for the report
    assert fast.stop_reason == "faster" and len(fast.samples_ms) == len(a.samples_ms) == 10
    # nothing verified to race: nothing timed at all
    be = FakeBackend(dict(KERNELS), {"copy": 2.0, "copy_half": 0.5})
    res = run_job(make_race_job(["copy", "copy_half"], race), be)
    assert res.ok and [o.samples_ms for o in res.outcomes] == [[], []]
    assert res.outcomes[1].stop_reason == "unverified" and be.flushes == 0
    # without time_matching every variant races (the caller verifies afterwards)
    be = FakeBackend(dict(KERNELS), {"copy": 2.0, "copy_half": 0.5})
    res = run_job(make_race_job(["copy", "copy_half"], race, matching=None), be)
    assert res.outcomes[1].stop_reason == "faster"


def test_a_race_entrant_with_totals_is_matched_on_the_partials_total():
    """A per-block reduction's variant on a smaller grid writes fewer partials: the race takes
    it when their total equals the baseline's (KernelLaunch.totals), and drops it when not."""
    from gpuadvise.runner.worker import _outputs_match

    job = J.Job(
        (),
        (J.BufferInit("out", np.int32, 8, "zeros", is_output=True),),
        time_matching=(1e-5, 1e-8),
    )
    base_launch = J.KernelLaunch("A", "/dev/null", "k", (8, 1, 1), (64, 1, 1), 0, ())
    other_launch = J.KernelLaunch(
        "B", "/dev/null", "k", (2, 1, 1), (64, 1, 1), 0, (), totals=(("out", "+"),)
    )
    base = J.LaunchOutcome("A", outputs={"out": np.arange(8, dtype=np.int32)})
    ok = J.LaunchOutcome("B", outputs={"out": np.array([6, 22, 99, 99, 0, 0, 0, 0], np.int32)})
    bad = J.LaunchOutcome("B", outputs={"out": np.array([6, 23, 0, 0, 0, 0, 0, 0], np.int32)})
    assert _outputs_match(job, base, ok, base_launch, other_launch)
    assert not _outputs_match(job, base, bad, base_launch, other_launch)
    # the same outputs element by element: not a match
    plain = J.KernelLaunch("B", "/dev/null", "k", (2, 1, 1), (64, 1, 1), 0, ())
    assert not _outputs_match(job, base, ok, base_launch, plain)


def test_a_worker_keeps_the_buffers_and_the_first_launchs_outputs_for_its_next_job():
    """A waiting worker takes every job of one analysis: the next job with the same buffers and
    seed reuses their data, the device buffers and the first launch's verified outputs (its
    verification run is not repeated when a later launch is verified); other buffers are made
    afresh; a failed job leaves nothing kept. The outcomes are the same as from a fresh worker."""
    from gpuadvise.runner import worker

    worker._KEPT.clear()
    be = FakeBackend(dict(KERNELS), {"copy": 1.0, "copy_half": 1.0})
    first = run_job(make_job(["copy"]), be)
    assert first.ok and first.timings_s["kept_inputs"] == 0.0
    calls = len(be.calls)
    kept = run_job(make_job(["copy", "copy_half"]), be)
    assert kept.ok and kept.timings_s["kept_inputs"] == 1.0 and kept.timings_s["kept_first"] == 1.0
    assert be.calls[calls:] == ["copy_half"]  # the kernel's verification run was the last job's
    np.testing.assert_array_equal(kept.inputs["in"], first.inputs["in"])
    # a single launch is verified again (its run leaves the buffers for the timing)
    calls = len(be.calls)
    assert run_job(make_job(["copy"]), be).timings_s["kept_inputs"] == 1.0
    assert be.calls[calls:] == ["copy"]
    # another seed: made afresh
    from dataclasses import replace

    res = run_job(replace(make_job(["copy", "copy_half"]), seed=4), be)
    assert res.timings_s["kept_inputs"] == 0.0 and res.timings_s["kept_first"] == 0.0
    fresh = run_job(make_job(["copy", "copy_half"]), FakeBackend(dict(KERNELS), {}))
    for got, want in zip(kept.outcomes, fresh.outcomes, strict=True):
        assert got.outputs.keys() == want.outputs.keys()
        for name in got.outputs:
            np.testing.assert_array_equal(got.outputs[name], want.outputs[name])

    def boom(*args: Any) -> None:
        raise RuntimeError("cuCtxSynchronize failed: an illegal memory access was encountered")

    be.kernels["bad"] = boom
    assert not run_job(make_job(["copy", "bad"]), be).ok
    assert worker._KEPT == []
    worker._KEPT.clear()
