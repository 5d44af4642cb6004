"""GA501 many-short-launches: a launch sequence whose time is mostly launch overhead."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.errors import GpuAdviseError
from gpuadvise.rules import (
    ATOMICS,
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    kernel_launch_times,
    launch_times,
    memory_rates,
    view_traffic,
)

FP32_LANES_PER_SM = 128  # lanes that retire one instruction per cycle per SM (sm_90; a floor)


@dataclass(frozen=True)
class LaunchModel(FindingDetails):
    """The time model of a sequence of ``launches`` launches of one kernel (microseconds).

    A launch keeps the GPU busy ``kernel_us + gap_us`` (the kernel's predicted time and the
    GPU's own per-kernel cost); the host needs ``host_us`` to submit it. Stream launches overlap
    submission with execution, so the sequence takes ``launches x max(kernel + gap, host)``; a
    CUDA graph is submitted by one call (``graph_us``) and runs ``launches x (kernel + gap)``.
    """

    launches: int
    kernel_us: float
    gap_us: float
    host_us: float
    graph_us: float

    @property
    def per_launch_gpu_us(self) -> float:
        return self.kernel_us + self.gap_us

    @property
    def stream_us(self) -> float:
        return self.launches * max(self.per_launch_gpu_us, self.host_us)

    @property
    def graph_us_total(self) -> float:
        return self.graph_us + self.launches * self.per_launch_gpu_us

    @property
    def overhead_share(self) -> float:
        """The share of the stream sequence's time the GPU spends waiting for launches."""
        per = max(self.per_launch_gpu_us, self.host_us)
        return 0.0 if per <= 0 else 1.0 - self.per_launch_gpu_us / per

    @property
    def speedup(self) -> float:
        return self.stream_us / self.graph_us_total


@dataclass(frozen=True)
class LaunchOverhead(FindingDetails):
    """The time model of the sequence and the numbers its kernel time came from (bytes per
    launch, bandwidth, memory time, the traced instruction floor: None without a trace)."""

    model: LaunchModel
    facts: dict[str, int | float | None]


@dataclass(frozen=True)
class SingleLaunch(FindingDetails):
    """One launch whose work is below its own cost (microseconds): ``floor_us`` (an empty
    kernel's launch), ``work_us`` (``peak_work_us`` at peak rates) and its bounding term."""

    floor_us: float
    work_us: float
    peak_work_us: float
    work_bound_by: str
    share: float  # of the launch's time that is its own cost: floor / (floor + work)


def buffer_traffic_bytes(ctx: RuleContext) -> tuple[int, int, int]:
    """(bytes moved per launch, input bytes, output bytes): inputs read once, outputs read and
    written once (an in-place update does both; a pure output is over-counted, which only makes
    the kernel look longer). Raises ModelUnavailable when the buffers cannot be sized."""
    try:
        launch = ctx.services.resolved_launch()
    except GpuAdviseError as exc:
        raise ModelUnavailable(f"cannot size the kernel's buffers: {exc.one_line()}") from None
    inputs = sum(int(b.size_bytes) for b in launch.inputs)
    outputs = sum(int(b.size_bytes) for b in launch.outputs)
    return inputs + 2 * outputs, inputs, outputs


def compute_floor_us(ctx: RuleContext) -> tuple[float | None, int | None]:
    """The traced time of one launch's work, when the pipeline traced the kernel: the launch
    model's work (memory, issue and pipes, the critical path; without its launch floor, which
    is this rule's gap and host time), else the emulator's lane-instructions (PTX, not SASS)
    scaled to the whole grid at one instruction per lane per cycle on ``FP32_LANES_PER_SM``
    lanes of every SM (a lower bound). (None, None) without a trace (the rule never asks for
    one: a launch-level rule should not cost an emulation)."""
    emulation = ctx.emulation
    d = ctx.device
    if emulation is None or not d.sm_count or not d.sm_clock_mhz:
        return None, None
    ran, lane = emulation.ctas_run, emulation.lane_instructions
    if ran <= 0 or lane <= 0:
        return None, None
    total = lane * ctx.launch.grid.count / ran
    if ctx.has_model("trace"):
        times = kernel_launch_times(d, ctx.trace_view)
        if times is not None:
            return times.work_s * 1e6, int(total)
    per_us = d.sm_count * FP32_LANES_PER_SM * d.sm_clock_mhz  # lane-instructions per microsecond
    return total / per_us, int(total)


class ManyShortLaunches(Rule):
    """A sequence of launches (``repeat`` in the launch spec) of a kernel too short to hide the
    host's cost of launching it.

    What it detects
    ---------------
    A launch spec with ``repeat = N`` (N launches per sequence, at least ``min_repeat``) whose
    kernel is predicted to run so briefly that the host's per-launch cost dominates: the
    sequence's launch-overhead share (see the estimate) is at least ``min_overhead_share``. The
    kernel's time is predicted from the bytes of its buffers over the device's bandwidth (a tiny
    grid moves few bytes), and from the emulator's instruction count when the pipeline traced it.
    A single launch (no ``repeat``) is reported when its traced work on the launch model is at
    most a quarter of the launch's own cost (an empty kernel's launch to completion, 2.8 us):
    at least ``min_single_overhead_share`` of its time. Not without a trace (small buffers do
    not make a short kernel), nor with atomics (their serialisation on one address is not in
    the model). Reported at the kernel's declaration.

    Why it is slow
    --------------
    Each launch costs the host a few microseconds (the runtime and driver build and submit the
    launch: ``launch_overhead_us``, about 2-5 us in C++, more from Python), and the GPU about a
    microsecond of its own between kernels. A kernel that runs for less than that leaves the GPU
    waiting for the next launch: the sequence runs at the host's pace. A CUDA graph holds the whole
    sequence; one call launches it, and the GPU runs the kernels back to back. A cellular
    simulation's port ("precompiled launch graph": thousands of launches per second) went from 192
    ms to 139 ms on an RTX 2060 with graphs.

    Example
    -------
    ``kernels/launches/launches.cu``: ``step`` advances 16896 particles by one time step (270 KB,
    about 0.1 us of DRAM time on an H100), launched 1000 times per sequence; ``step_fused`` does
    the 1000 steps in one launch.

    Fix
    ---
    Capture the sequence once and replay it::

        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        for (int k = 0; k < N; ++k) step<<<grid, block, 0, s>>>(pos, vel, dv, dt, n);
        cudaStreamEndCapture(s, &graph);
        cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphLaunch(exec, s);  // every time the sequence runs

    (arguments that change between sequences: ``cudaGraphExecKernelNodeSetParams``, or device
    memory the kernels read). When each launch only reads what the same thread wrote before, fuse
    the launches into one kernel that loops over the steps; otherwise larger work per launch
    (several steps per launch, a bigger batch) also amortizes the overhead.

    How the estimate is made
    ------------------------
    A point estimate from a model of the sequence: the kernel takes ``t`` = the larger of its
    buffer traffic (inputs read once, outputs read and written once) over ``bandwidth_efficiency``
    x the device's DRAM bandwidth, and of the traced work on the launch model (memory, issue and
    pipes, the critical path of dependent instructions; its launch floor left to the gap and
    host constants below; without the instruction counts, the traced instructions at one per
    lane and cycle); the GPU adds
    ``kernel_gap_us`` per kernel; the host needs ``launch_overhead_us`` per stream launch and
    ``graph_launch_us`` per graph launch. Stream: ``N x max(t + gap, host)``; graph:
    ``graph + N x (t + gap)``; the estimate is their ratio, the overhead share
    ``1 - (t + gap) / max(t + gap, host)``. The constants are typical, not measured on this host:
    the measurement (stream launches against a graph replay of the same sequence, on the GPU)
    decides. A kernel longer than predicted (heavy compute with no trace) gains less. A single
    launch: an upper bound, its floor plus its work against the work alone at peak rates (its
    launch cost gone: fused into a neighbour, or batched with many like it); saved only if
    the host launches it again and again or a neighbouring kernel can take it in.

    Fix safety
    ----------
    Display-only: the launches are in the user's host code, which gpuadvise does not see. The
    variant (``launch = {graph: true, repeat: N}``) describes the change; gpuadvise's runner
    measures it by timing the N stream launches against one replay of a graph captured from the
    same N launches, both verified to give the same outputs.
    """

    id = "GA501"
    name = "many-short-launches"
    title = "Many short launches: launch overhead dominates the sequence"
    severity = "warning"
    # the launch spec and the device model only; the trace's instruction count when the pipeline
    # made one, never asking for it (a launch-level rule should not cost an emulation)
    models = ()
    options = {
        "min_repeat": 2,
        "min_overhead_share": 0.25,
        "launch_overhead_us": 4.0,
        "kernel_gap_us": 1.0,
        "graph_launch_us": 8.0,
        "bandwidth_efficiency": 0.9,
        "min_single_overhead_share": 0.8,
    }

    def model(self, ctx: RuleContext) -> tuple[LaunchModel, dict[str, Any]]:
        d = ctx.device
        if not d.mem_bandwidth_gbps:
            raise ModelUnavailable(f"{d.name} has no memory bandwidth in its model")
        moved, inputs, outputs = buffer_traffic_bytes(ctx)
        bw = float(d.mem_bandwidth_gbps) * float(ctx.option("bandwidth_efficiency"))
        mem_us = moved / (bw * 1e3)  # GB/s = 1e3 bytes per microsecond
        floor_us, lane_instructions = compute_floor_us(ctx)
        kernel_us = max(mem_us, floor_us or 0.0)
        m = LaunchModel(
            launches=int(ctx.spec.repeat),
            kernel_us=kernel_us,
            gap_us=float(ctx.option("kernel_gap_us")),
            host_us=float(ctx.option("launch_overhead_us")),
            graph_us=float(ctx.option("graph_launch_us")),
        )
        facts = {
            "bytes_per_launch": moved,
            "input_bytes": inputs,
            "output_bytes": outputs,
            "bandwidth_gbps": bw,
            "memory_time_us": mem_us,
            "instruction_floor_us": floor_us,
            "lane_instructions": lane_instructions,
        }
        return m, facts

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        n = int(ctx.spec.repeat)
        min_repeat = int(ctx.option("min_repeat"))
        if n < min_repeat:
            yield from self._single(ctx)
            return
        m, facts = self.model(ctx)
        threshold = float(ctx.option("min_overhead_share"))
        if m.overhead_share < threshold:
            return
        ctas = int(ctx.launch.grid.count)
        sms = ctx.device.sm_count
        tiny = f", {ctas} CTAs for {sms} SMs" if sms and ctas <= sms else ""
        mb = facts["bytes_per_launch"] / 1e6
        why = f"{mb:.3g} MB per launch at {facts['bandwidth_gbps']:.0f} GB/s"
        floor = facts["instruction_floor_us"]
        if floor is not None and floor > facts["memory_time_us"]:
            why = f"{facts['lane_instructions']} lane-instructions (traced)"
        message = (
            f"{n} launches per sequence of a kernel predicted to run {m.kernel_us:.2f} us "
            f"({why}{tiny}), while the host needs ~{m.host_us:g} us to submit each: about "
            f"{m.overhead_share:.0%} of the sequence is launch overhead; capture the {n} "
            "launches once in a CUDA graph and replay it, or fuse them into one kernel"
        )
        evidence = [
            Evidence("launch_overhead_share", round(m.overhead_share, 4), threshold, ">="),
            Evidence("repeat", n, min_repeat, ">=", "launches"),
            Evidence("predicted_kernel_us", round(m.kernel_us, 4), unit="us"),
            Evidence("bytes_per_launch", facts["bytes_per_launch"], unit="B"),
            Evidence("host_launch_us", m.host_us, unit="us"),
            Evidence("total_ctas", ctas, unit="CTAs"),
        ]
        if ctx.spec.spec_path is not None:
            evidence.append(Evidence("launch_spec", str(ctx.spec.spec_path)))
        yield self.finding(
            ctx,
            message,
            line=ctx.kernel_line,
            evidence=evidence,
            details=LaunchOverhead(m, facts),
        )

    def _single(self, ctx: RuleContext) -> Iterator[Finding]:
        """One launch whose traced work is below its own cost (not without a trace: small
        buffers do not make a short kernel)."""
        d = ctx.device
        rates = memory_rates(d)
        if not ctx.has_model("trace") or rates is None:
            return
        if np.isin(ctx.trace.records["kind"], ATOMICS).any():
            return  # atomics on one address serialise beyond what the launch model counts
        t = view_traffic(d, ctx.trace_view)
        times = launch_times(t, d, rates)
        peak = launch_times(t, d, rates, peak_dram=True)
        if times is None or peak is None or times.floor_s <= 0 or times.work_s <= 0:
            return
        us = (times.floor_s * 1e6, times.work_s * 1e6, peak.work_s * 1e6)
        one = SingleLaunch(*us, replace(times, floor_s=0.0).bound_by, times.floor_s / times.time_s)
        threshold = float(ctx.option("min_single_overhead_share"))
        if one.share < threshold:
            return
        ctas = int(ctx.launch.grid.count)
        yield self.finding(
            ctx,
            f"this launch is mostly overhead: its work is predicted at {one.work_us:.2f} us "
            f"(traced, bound by {one.work_bound_by}; {ctas} CTAs) against the launch's own "
            f"{one.floor_us:.1f} us (an empty kernel's launch to completion): {one.share:.0%} "
            "of its time; fuse it into the kernel before or after it, batch the work of "
            "several launches into one, or capture the sequence it belongs to in a CUDA graph "
            "(repeat = N in the launch spec models the sequence)",
            line=ctx.kernel_line,
            evidence=[
                Evidence("launch_overhead_share", round(one.share, 4), threshold, ">="),
                Evidence("predicted_work_us", round(one.work_us, 4), unit="us"),
                Evidence("launch_floor_us", round(one.floor_us, 4), unit="us"),
                Evidence("repeat", int(ctx.spec.repeat), unit="launches"),
                Evidence("total_ctas", ctas, unit="CTAs"),
            ],
            details=one,
        )

    def _single_estimate(self, one: SingleLaunch) -> Estimate:
        before = one.floor_us + one.work_us
        point = before / max(one.work_us, 1e-9)
        peak = (one.floor_us + one.peak_work_us) / max(one.peak_work_us, 1e-9)
        bound = max(before / max(one.peak_work_us, 1e-9), point)
        return Estimate(
            round(bound, 3),
            "upper-bound",
            f"the launch model: the launch takes its floor {one.floor_us:.2f} us plus its work "
            f"{one.work_us:.3f} us (bound by {one.work_bound_by}); with its launch cost gone "
            f"(fused into a neighbouring kernel, or batched with many like it) only the work "
            f"remains: point {point:.2f}x, upper bound {bound:.2f}x (the work at peak rates "
            f"and full overlap, {one.peak_work_us:.3f} us). A CUDA graph of a sequence keeps "
            "about a microsecond of GPU time per kernel, and a kernel the host runs once "
            "saves at most its one launch",
            {"model": MODEL, "point_speedup": round(point, 3), "peak_speedup": round(peak, 3),
             "bound_by_before": "launch", "bound_by_after": one.work_bound_by,
             "before_s": before * 1e-6, "after_s": one.work_us * 1e-6,
             "launch_floor_us": one.floor_us, "work_us": one.work_us},
        )  # fmt: skip

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        if isinstance(finding.details, SingleLaunch):
            return self._single_estimate(finding.details)
        d = finding.details_as(LaunchOverhead)
        m, facts = d.model, d.facts
        return Estimate(
            round(m.speedup, 3),
            "point",
            f"stream N x max(t + gap, host) = {m.launches} x max({m.kernel_us:.3f} + "
            f"{m.gap_us:g}, {m.host_us:g}) = {m.stream_us:.0f} us against graph "
            f"graph + N x (t + gap) = {m.graph_us:g} + {m.launches} x {m.per_launch_gpu_us:.3f} "
            f"= {m.graph_us_total:.0f} us; t from {facts['bytes_per_launch']} B at "
            f"{facts['bandwidth_gbps']:.0f} GB/s"
            + (
                f" and the traced work on the launch model, {facts['instruction_floor_us']:.3f} us"
                if facts["instruction_floor_us"] is not None
                else ""
            )
            + ". Host and gap constants are typical values, not measured here",
            {
                "model": MODEL,
                "launches": m.launches,
                "kernel_us": m.kernel_us,
                "kernel_gap_us": m.gap_us,
                "host_launch_us": m.host_us,
                "graph_launch_us": m.graph_us,
                "stream_us": m.stream_us,
                "graph_us": m.graph_us_total,
                "bytes_per_launch": facts["bytes_per_launch"],
            },
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        if isinstance(finding.details, SingleLaunch):
            text = (
                "fuse the kernel into the one before or after it, or batch the work of "
                "several launches into one; launched repeatedly, capture the launches in a "
                "CUDA graph (repeat = N in the launch spec has it modelled and measured)"
            )
            return Variant("display-only", text, label="fuse or batch")  # fmt: skip
        m = finding.details_as(LaunchOverhead).model
        return Variant(
            "display-only",
            f"capture the {m.launches} launches once (cudaStreamBeginCapture ... "
            "cudaStreamEndCapture, cudaGraphInstantiate) and replay them with one "
            "cudaGraphLaunch per sequence; or fuse them into one kernel looping over the steps "
            "when each step reads only what the same thread wrote",
            launch={"graph": True, "repeat": m.launches},
            label="CUDA graph",
        )
