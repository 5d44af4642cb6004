"""The gate's metrics provider: the real numbers behind ``gpuadvise gate``.

Static metrics come from the same pipeline as ``analyze`` (compile, ptxas resources, the occupancy
model); timed metrics from the same worker as ``bench`` (verified outputs, A/B interleaved, cold L2).
Metrics whose model this version does not run yet are reported as unavailable (the gate shows them as
skipped, never as passed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import RunnerError
from gpuadvise.gate.config import GateCase, GateConfig
from gpuadvise.gate.provider import Environment, MetricValue, TimingSamples, Unavailable

_TRACE_METRICS = ("smem_excess_wavefronts", "global_excess_sectors")


def _options(case: GateCase) -> KernelOptions:
    return KernelOptions(
        source=None if case.source is None else str(case.source),
        kernel=case.kernel,
        grid=case.grid,
        block=case.block,
        dynamic_smem=case.dynamic_smem,
        spec=None if case.spec is None else str(case.spec),
        args=tuple(case.args),
        buffers=tuple(case.buffers),
        nvcc_flags=tuple(case.nvcc_flags),
        gpu=case.gpu,
        arch=case.arch,
        confine_to=() if case.root is None else (str(case.root),),
        includes_trusted=case.trusted,
    )


class LiveProvider:
    def __init__(self, config: GateConfig) -> None:
        self.config = config

    def environment(self) -> Environment:
        from gpuadvise.devices import resolve_device
        from gpuadvise.runner.client import pycuda_missing
        from gpuadvise.toolchain import find_toolchain

        try:
            tc_version: str | None = find_toolchain().version
        except Exception:
            tc_version = None
        model = resolve_device(self.config.gpu, self.config.arch).device
        device = driver = None
        if pycuda_missing() is None:
            from gpuadvise.devices import live_device

            live = live_device()
            device = live.full_name if live else None
            driver = _driver_version()
        return Environment(
            toolchain=tc_version,
            static_model=f"{model.name} ({model.arch})",
            device=device,
            driver=driver,
        )

    def static_metrics(self, case: GateCase) -> Mapping[str, MetricValue]:
        from gpuadvise.analyze.options import build
        from gpuadvise.analyze.pipeline import analyze_kernel
        from gpuadvise.ptx.memory import array_huge_pages

        spec, choice, options = build(_options(case))
        needs_trace = any(m in case.metrics for m in (*_TRACE_METRICS, "l2_hit_rate"))
        if needs_trace:
            array_huge_pages()  # as analyze: off on a VM that hands free memory back to its host
        a = analyze_kernel(spec, choice.device, options, trace=needs_trace)
        res = a.kernel.resources
        out: dict[str, MetricValue] = {
            "registers": res.registers,
            "spill_bytes": res.spill_store_bytes + res.spill_load_bytes,
            "occupancy": a.occupancy.occupancy,
        }
        m = a.memory
        if m is None or m.banks is None or m.coalescing is None:
            why = "not requested" if m is None else f"the emulator could not run it: {m.error}"
            for name in _TRACE_METRICS:
                out[name] = Unavailable(why)
        else:
            # whole-launch counts (extrapolated from the first wave unless every CTA was traced)
            out["smem_excess_wavefronts"] = m.banks.launch.all.excess
            out["global_excess_sectors"] = m.coalescing.launch.all.excess
        # the hardware's launch order: what the kernel as written gets
        if m is not None and m.l2 is not None:
            out["l2_hit_rate"] = m.l2.order("row-major").hit_rate
        else:
            out["l2_hit_rate"] = Unavailable("no L2 model for this case (see `gpuadvise analyze`)")
        return out

    def timings(
        self, case: GateCase, baseline: GateCase | None = None, *, min_samples: int = 10
    ) -> TimingSamples:
        from gpuadvise.analyze.prepare import live_options, prepare, time_prepared
        from gpuadvise.runner.client import require_gpu
        from gpuadvise.runner.job import TimingConfig

        require_gpu()
        prepared = []
        if baseline is not None:
            prepared.append(prepare(live_options(_options(baseline)), "A"))
        prepared.append(prepare(live_options(_options(case)), "B"))
        timing = TimingConfig(min_samples=min_samples, min_time_s=1.0, max_time_s=15.0)
        run = time_prepared(prepared, timing, hot=False, timeout_s=60.0)
        res = run.result
        if not res.ok:
            raise RunnerError(
                f"case {case.name}: the kernel failed on the GPU: {res.cuda_error or res.error}",
                "run `gpuadvise bench` on it for the details",
            )
        outcomes = res.outcomes
        cand = outcomes[-1]
        base = outcomes[0] if baseline is not None else None
        throttled = sum(cand.throttled) + (sum(base.throttled) if base else 0)
        return TimingSamples(
            candidate_ms=tuple(cand.samples_ms),
            baseline_ms=None if base is None else tuple(base.samples_ms),
            throttled=throttled,
        )


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v: Any = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def make_provider(config: GateConfig) -> LiveProvider:
    return LiveProvider(config)


__all__ = ["LiveProvider", "make_provider", "replace"]
