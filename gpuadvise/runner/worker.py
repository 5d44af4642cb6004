"""The isolated worker: ``python -m gpuadvise.runner.worker JOB.pkl RESULT.pkl``.

It owns the CUDA context. It builds the buffers (runner/data.py), verifies each launch once on fresh
data with poisoned outputs, then times the launches, alternating them (A B A B ...) so drifts in clocks
and temperature hit all of them alike. Every failure is written into the result with the CUDA error's
name; the parent (runner/client.py) kills the worker when it outlives the timeout.

A launch marked ``graph`` runs its ``repeat`` launches as one replay of a CUDA graph captured once
from a stream (``Backend.bind_graph``), so that a sequence of stream launches can be timed against
the graph replay of the same sequence (``job.as_graph``; GA501).
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gpuadvise.runner.backend import cuda_error_name
from gpuadvise.runner.data import make_host_buffer
from gpuadvise.runner.job import (
    Job,
    KernelLaunch,
    LaunchOutcome,
    Result,
    TimingConfig,
    param_format,
)
from gpuadvise.runner.verify import bit_identical, poison

# nvmlClocksEventReasons that mean the GPU slowed itself down (not idle, not application clocks)
_THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # SW power cap, HW slowdown, SW/HW thermal, brake


class _Nvml:
    def __init__(self) -> None:
        self.handle = None
        self.sm_mhz: list[int] = []
        self.mem_mhz: list[int] = []
        self.reasons = 0
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            self.handle = None

    def sample(self) -> bool:
        """Record clocks; True when the GPU reports a slowdown reason now."""
        if self.handle is None:
            return False
        n = self.nvml
        try:
            self.sm_mhz.append(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_SM))
            self.mem_mhz.append(n.nvmlDeviceGetClockInfo(self.handle, n.NVML_CLOCK_MEM))
            getter = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
            getter = getter or n.nvmlDeviceGetCurrentClocksThrottleReasons
            reasons = int(getter(self.handle))
        except Exception:
            return False
        self.reasons |= reasons
        return bool(reasons & _THROTTLE_MASK)

    def summary(self) -> dict[str, Any]:
        if not self.sm_mhz:
            return {}
        return {
            "sm_mhz_min": min(self.sm_mhz),
            "sm_mhz_max": max(self.sm_mhz),
            "mem_mhz_min": min(self.mem_mhz),
            "mem_mhz_max": max(self.mem_mhz),
            "throttle_reasons_seen": self.reasons,
        }


def _args(launch: KernelLaunch, dev_buffers: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    for p in launch.params:
        if p.kind == "buffer":
            out.append(dev_buffers[p.buffer])
        else:
            out.append(p.value)
    return out


@dataclass
class _Kept:
    """What a worker keeps from its last job for the next one with the same buffers and seed (a
    waiting worker takes every job of one analysis: each finding's race, the proxies' kernel
    timing): the buffers' start data, the poisoned outputs, the device buffers, the first
    launch's verified outputs (by :func:`_launch_key`) and the L2 flush's scratch. Every
    verification run uploads every buffer afresh, so a kept device buffer holds nothing of the
    last job that a run could read."""

    key: str
    backend: Any
    inputs: dict[str, np.ndarray]
    dev: dict[str, Any]
    poisoned: dict[str, np.ndarray] = field(default_factory=dict)
    first: tuple[str, dict[str, np.ndarray]] | None = None
    flush: tuple[int, Any, Any] | None = None


_KEPT: list[_Kept] = []  # at most one: the last job's


def _kept_for(job: Job, backend: Any) -> tuple[_Kept, bool]:
    """The buffers of ``job`` (kept from the last job when its buffers and seed were the same,
    on the same backend: True) or made now, the last job's freed first (False)."""
    key = repr((job.seed, job.buffers))
    if _KEPT and _KEPT[0].key == key and _KEPT[0].backend is backend:
        return _KEPT[0], True
    _KEPT.clear()
    inputs = {
        b.name: make_host_buffer(np.dtype(b.dtype), b.count, b.fill, job.seed, b.name, b.float_kind)
        for b in job.buffers
    }
    dev = {b.name: backend.alloc(b.nbytes) for b in job.buffers}
    kept = _Kept(key, backend, inputs, dev)
    _KEPT.append(kept)
    return kept, False


def _launch_key(launch: KernelLaunch, cubin: bytes) -> str:
    """What identifies a launch's verified outputs across jobs (its label aside)."""
    return repr(replace(launch, label="")) + hashlib.sha256(cubin).hexdigest()


def run_job(job: Job, backend: Any) -> Result:
    result = Result(ok=True, device=backend.device_info())
    times = result.timings_s
    t0 = time.perf_counter()
    kept, reused = _kept_for(job, backend)
    inputs, dev = kept.inputs, kept.dev
    times["inputs_s"] = time.perf_counter() - t0
    times["kept_inputs"] = float(reused)
    kernels = {}
    keys: dict[str, str] = {}
    label = None
    try:
        t0 = time.perf_counter()
        for launch in job.launches:
            label = launch.label
            fmt = param_format(list(launch.params))
            cubin = Path(launch.cubin_path).read_bytes()
            keys[launch.label] = _launch_key(launch, cubin)
            kernels[launch.label] = backend.load(
                cubin, launch.symbol, fmt, launch.dynamic_smem_bytes
            )
            for c in launch.constants:  # the host code's cudaMemcpyToSymbol
                backend.set_constant(kernels[launch.label], c.symbol, c.host(job.seed))
        outcomes = {launch.label: LaunchOutcome(launch.label) for launch in job.launches}

        bound: dict[str, Any] = {}
        for launch in job.launches:
            call = (
                kernels[launch.label],
                launch.grid,
                launch.block,
                launch.dynamic_smem_bytes,
                _args(launch, dev),
            )
            if launch.graph:
                # the whole sequence of `repeat` launches, captured once into a CUDA graph
                label = launch.label
                bound[launch.label] = backend.bind_graph([call] * launch.repeat)
            else:
                bound[launch.label] = backend.bind(*call)

        def go(launch: KernelLaunch) -> None:
            run = bound[launch.label]
            if launch.graph:
                run()  # one graph replay holds the `repeat` launches
                return
            for _ in range(launch.repeat):
                run()

        times["load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if job.verify:
            poisoned = kept.poisoned  # 0xFF bytes, made once for every launch (and job)
            first = job.launches[0]
            # the first launch (the kernel) verified by the last job already: its outputs
            # again, when a later launch of this job is verified (and so leaves the buffers
            # as a verification run does, for the timing)
            again = kept.first is not None and kept.first[0] == keys[first.label]
            again = again and len(job.launches) > 1
            if again:
                assert kept.first is not None
                outcomes[first.label].outputs = dict(kept.first[1])
            times["kept_first"] = float(again)
            for launch in job.launches[1:] if again else job.launches:
                label = launch.label
                for b in job.buffers:
                    host = inputs[b.name]
                    if b.poison:  # in an array of its own: the inputs stay as made
                        if b.name not in poisoned:
                            poisoned[b.name] = np.empty_like(host)
                            poison(poisoned[b.name])
                        host = poisoned[b.name]
                    backend.upload(dev[b.name], host)
                go(launch)
                backend.synchronize()
                for b in job.buffers:
                    if b.is_output:
                        host = np.empty_like(inputs[b.name])
                        backend.download(dev[b.name], host)
                        outcomes[launch.label].outputs[b.name] = host
            if not again:
                kept.first = (keys[first.label], dict(outcomes[first.label].outputs))
            _share_identical_outputs(job, outcomes)
        times["verify_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if job.timing is not None:
            t = job.timing
            nvml = _Nvml()
            spin = None
            if t.spin_cubin:
                spin_fn = backend.load(Path(t.spin_cubin).read_bytes(), "gpuadvise_spin", "q", 0)
                spin = backend.bind(spin_fn, (1, 1, 1), (1, 1, 1), 0, [t.spin_cycles])
            flush = backend.flush_l2
            if t.cold and t.flush_cubin:
                l2 = int(result.device.get("l2_bytes") or 64 << 20)
                n4 = max(2 * l2, 1 << 20) // 16
                if kept.flush is None or kept.flush[0] != n4:  # only read: kept for the next job
                    scratch = backend.alloc(n4 * 16)
                    backend.upload(scratch, np.zeros(n4 * 16, np.uint8))
                    kept.flush = (n4, scratch, backend.alloc(4))
                _, scratch, sink = kept.flush
                flush_fn = backend.load(
                    Path(t.flush_cubin).read_bytes(), "gpuadvise_flush", "PQP", 0
                )
                sms = int(result.device.get("sm_count") or 132)
                flush = backend.bind(flush_fn, (sms * 4, 1, 1), (256, 1, 1), 0, [scratch, n4, sink])
            by_label = {launch.label: launch for launch in job.launches}

            def sample(name: str) -> float:
                nonlocal label
                launch = by_label[name]
                label = name
                if spin is not None:
                    spin()
                if t.cold:
                    flush()
                ms = backend.timed(lambda launch=launch: go(launch))
                outcomes[name].samples_ms.append(ms)
                outcomes[name].throttled.append(nvml.sample())
                return ms

            racing = t.race is not None and len(job.launches) > 1
            timed = list(job.launches)
            if racing and job.time_matching is not None:
                base = job.launches[0]
                for launch in job.launches[1:]:
                    if not _outputs_match(
                        job, outcomes[base.label], outcomes[launch.label], base, launch
                    ):
                        outcomes[launch.label].stop_reason = "unverified"
                        timed.remove(launch)
            if racing and len(timed) < 2:
                timed = []  # no verified variant left to time against the baseline
            for launch in timed:
                label = launch.label
                for _ in range(t.warmup):
                    go(launch)
            backend.synchronize()
            if racing and timed:
                from gpuadvise.runner.stats import run_race

                assert t.race is not None
                race = run_race(
                    t.race, timed[0].label, [x.label for x in timed[1:]], sample, seed=t.order_seed
                )
                for name, why in race.reasons.items():
                    outcomes[name].stop_reason = why
            elif not racing:
                _time_until_quiet(t, timed, sample)
            result.clocks = nvml.summary()
        times["timing_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if not job.return_outputs:
            _compare_here(job, outcomes)
        times["compare_s"] = time.perf_counter() - t0
        result.outcomes = [outcomes[launch.label] for launch in job.launches]
        if job.return_inputs:
            result.inputs = {b.name: inputs[b.name] for b in job.buffers if not b.is_output}
    except Exception as exc:  # a CUDA error from the kernel or the driver
        _KEPT.clear()  # nothing of a failed job is kept (its context may be broken)
        msg = f"{type(exc).__name__}: {exc}"
        result.ok = False
        result.error = msg
        result.cuda_error = cuda_error_name(msg)
        result.failed_label = label
    return result


def _time_until_quiet(t: TimingConfig, launches: list[KernelLaunch], sample: Any) -> None:
    """Every launch timed in rounds (a random order each round) until each one's median is known
    to ``t.target_rel_noise`` or the caps are hit (:class:`~gpuadvise.runner.stats.AdaptivePolicy`).
    """
    from gpuadvise.runner.stats import AdaptivePolicy

    policy = AdaptivePolicy(
        min_samples=t.min_samples,
        min_time_s=t.min_time_s,
        max_time_s=t.max_time_s,
        target_rel_noise=t.target_rel_noise,
    )
    rng = np.random.default_rng(t.order_seed)
    samples: dict[str, list[float]] = {launch.label: [] for launch in launches}
    t0 = time.perf_counter()
    order = list(launches)
    while True:
        if len(order) > 1:
            order = [order[i] for i in rng.permutation(len(order))]
        for launch in order:
            samples[launch.label].append(sample(launch.label))
        elapsed = time.perf_counter() - t0
        if all(policy.should_stop(s, elapsed) for s in samples.values()):
            break


def _share_identical_outputs(job: Job, outcomes: dict[str, LaunchOutcome]) -> None:
    """Make each later launch's output that is bit-identical to the first launch's the same
    array object: the result's pickle then holds it once (pickle memoizes objects), and the
    parent's comparison finds it identical at once (a tiling variant of an 8K gather writes the
    same 133 MB as the kernel; four of them were pickled, written, read and compared)."""
    if len(job.launches) < 2:
        return
    base = outcomes[job.launches[0].label].outputs
    for launch in job.launches[1:]:
        mine = outcomes[launch.label].outputs
        for name, y in mine.items():
            x = base.get(name)
            if x is not None and x is not y and bit_identical(x, y):
                mine[name] = x


def _compare_here(job: Job, outcomes: dict[str, LaunchOutcome]) -> None:
    """Every later launch's outputs compared with the first's under ``job.time_matching``
    (as the parent would: ``runner.verify.compare_outputs``, totals by the launch's
    ``totals``), then every launch's outputs dropped but for their names."""
    from gpuadvise.runner.verify import compare_outputs

    first = job.launches[0]
    base = outcomes[first.label]
    for launch in job.launches[1:]:
        mine = outcomes[launch.label]
        names = [b.name for b in job.buffers if b.is_output and b.name in mine.outputs]
        if job.time_matching is None or any(n not in base.outputs for n in names):
            continue
        rtol, atol = job.time_matching
        grids = (int(first.grid[0]), int(launch.grid[0]))
        totals = dict(launch.totals) or None
        mine.comparisons = compare_outputs(
            base.outputs, mine.outputs, names, rtol, atol, totals, grids
        )
    for outcome in outcomes.values():
        outcome.output_names = tuple(outcome.outputs)
        outcome.outputs = {}


def _outputs_match(
    job: Job,
    base: LaunchOutcome,
    other: LaunchOutcome,
    base_launch: KernelLaunch,
    other_launch: KernelLaunch,
) -> bool:
    """Whether ``other``'s verified outputs equal ``base``'s under ``job.time_matching`` (the
    parent compares them again for the report; here only the race's entrants are chosen);
    outputs named in ``other_launch.totals`` are compared as totals of their partials."""
    from gpuadvise.runner.verify import compare, compare_totals

    assert job.time_matching is not None
    rtol, atol = job.time_matching
    totals = dict(other_launch.totals)
    for b in job.buffers:
        if not b.is_output:
            continue
        x, y = base.outputs.get(b.name), other.outputs.get(b.name)
        if x is None or y is None:
            return False
        if b.name in totals:
            grids = (int(base_launch.grid[0]), int(other_launch.grid[0]))
            if not compare_totals(b.name, x, y, *grids, totals[b.name], rtol, atol).ok:
                return False
            continue
        if bit_identical(x, y):
            continue  # bit-identical: the common case, without compare's passes
        if not compare(b.name, x, y, rtol, atol).ok:
            return False
    return True


def main(argv: list[str]) -> int:
    from gpuadvise.runner.client import serve_job

    return serve_job(argv, run_job, lambda _stage, error: Result(ok=False, error=error))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
