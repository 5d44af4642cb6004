"""GA501 many-short-launches: the finding and its model on the launches case (nvcc, no GPU), the
runner's CUDA-graph path (capture once, replay) under a fake backend and a fake PyCUDA, and on a
GPU (marker ``gpu``) the stream launches of the case against a graph replay of the same sequence.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuadvise.rules as rule_api
import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise.analyze.evaluate import rule_context, run_rules
from gpuadvise.devices import preset
from gpuadvise.rules.config import Config
from gpuadvise.runner import job
from gpuadvise.runner.client import pycuda_missing
from gpuadvise.runner.worker import run_job
from gpuadvise.toolchain import find_toolchain

try:
    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (pip install .[toolkit])")

KERNELS = rule_registry.builtin_kernels_dir()
assert KERNELS is not None
CASE = KERNELS / "launches"
SOURCE = CASE / "launches.cu"
N_PARTICLES = 16896
REPEAT = 1000


@pytest.fixture(scope="module", autouse=True)
def _cache(compile_cache: Path) -> Path:
    """The run's compile cache (conftest.py) for every test of the module."""
    return compile_cache


def analyze(source: Path, kernel: str, spec: Path | None = None, trace: bool = False) -> Any:
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build

    opts = KernelOptions(
        source=str(source), kernel=kernel, gpu="H100", spec=None if spec is None else str(spec)
    )
    s, choice, options = build(opts)
    return analyze_lazily(s, choice.device, options, trace=trace)


def ga501(a: Any, **options: Any) -> list[rule_api.Finding]:
    cfg = Config(select=("GA501",), rule_options={"GA501": options} if options else {})
    found = run_rules(a, cfg, lazy_models=False)
    assert not [f for f in found if f.is_error], [f.error for f in found]
    return found


def ev(f: rule_api.Finding) -> dict[str, Any]:
    return {e.metric: e.value for e in f.evidence}


# ---------------------------------------------------------------------------------------------
# The rule on the case


@needs_nvcc
def test_step_repeated_1000_times_is_reported_with_the_model_numbers():
    a = analyze(SOURCE, "step")
    (f,) = ga501(a)
    ks = srctext.find_kernel_source(SOURCE, "step")
    assert f.line == ks.decl_line
    assert rule_registry.expectations(SOURCE)[f.line] == ("GA501",)
    e = ev(f)
    # pos and vel, 16896 floats each, both read and written by every launch
    moved = 2 * 2 * 4 * N_PARTICLES
    assert e["bytes_per_launch"] == moved == 270336
    # 270336 B at 90 % of the H100 model's 3350 GB/s = 3015 B/us
    t = moved / (3350 * 0.9 * 1e3)
    assert e["predicted_kernel_us"] == pytest.approx(round(t, 4))
    assert e["repeat"] == REPEAT and e["total_ctas"] == 132
    # host 4 us per launch against t + 1 us of GPU gap: 1 - (t + 1) / 4 of the time is overhead
    share = 1 - (t + 1.0) / 4.0
    assert e["launch_overhead_share"] == round(share, 4)
    assert e["launch_spec"] == str(CASE / "case.toml")
    assert "132 CTAs for 132 SMs" in f.message and "CUDA graph" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "point"
    stream = REPEAT * 4.0
    graph = 8.0 + REPEAT * (t + 1.0)
    assert est.speedup == round(stream / graph, 3)
    assert est.inputs["stream_us"] == pytest.approx(stream)
    assert est.inputs["graph_us"] == pytest.approx(graph)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.label == "CUDA graph"
    assert v.launch == {"graph": True, "repeat": REPEAT}


@needs_nvcc
def test_the_traced_instruction_floor_enters_the_model():
    a = analyze(SOURCE, "step", trace=True)
    mem = a.memory
    assert mem is not None and not mem.error and mem.lane_instructions > 0
    (f,) = ga501(a)
    rule = rule_registry.load_registry().get("GA501")
    ctx = rule_context(a, lazy_models=False).for_rule(dict(rule.options))
    m, facts = rule.model(ctx)
    d = preset("H100")
    # the traced work on the launch model (issue 29), without the launch floor (the rule's
    # own gap and host constants stand for it): 135 KB loaded by 528 warps with 256 bytes each
    # in flight, one round trip of 395 ns by Little's law (the stores are posted), and each
    # thread's load -> add -> store chain at DRAM latency: longer than the DRAM time
    times = rule_api.kernel_launch_times(d, ctx.trace_view)
    assert times is not None and times.bound_by == "launch" and times.work_s > 0
    assert facts["instruction_floor_us"] == pytest.approx(times.work_s * 1e6)
    latency_us = 135168 * 395e-3 / (528 * 256)
    assert times.latency_s * 1e6 == pytest.approx(latency_us)
    assert times.work_s >= max(times.latency_s, times.dependency_s, times.dram_s)
    assert facts["instruction_floor_us"] < 1.0
    assert "traced work on the launch model" in f.estimated_speedup.method
    assert m.kernel_us == facts["instruction_floor_us"] > facts["memory_time_us"]
    assert f.estimated_speedup.inputs["model"] == "execution"  # not checked again


@needs_nvcc
def test_the_fused_kernel_and_other_cases_are_clean():
    assert ga501(analyze(SOURCE, "step_fused")) == []
    for rel, kernel in (("tail/tail.cu", "scale_tail"), ("spills/spills.cu", "moments")):
        assert ga501(analyze(KERNELS / rel, kernel)) == []


def write_spec(tmp_path: Path, n: int, repeat: int) -> Path:
    text = (CASE / "case.toml").read_text()
    text = text.replace('source = "launches.cu"', f'source = "{SOURCE}"')
    text = text.replace("repeat = 1000", f"repeat = {repeat}")
    text = text.replace(f"n = {N_PARTICLES}", f"n = {n}")
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


@needs_nvcc
def test_a_long_kernel_or_an_untraced_single_launch_is_not_reported(tmp_path):
    # 2^24 particles: 268 MB per launch, ~89 us: the 4 us of host time hide behind it
    assert ga501(analyze(SOURCE, "step", write_spec(tmp_path, 1 << 24, 10))) == []
    # one launch without a trace: the buffers alone do not make a short kernel
    assert ga501(analyze(SOURCE, "step", write_spec(tmp_path, N_PARTICLES, 1))) == []
    a = analyze(SOURCE, "step", write_spec(tmp_path, N_PARTICLES, 1000))
    assert ga501(a, min_overhead_share=0.8) == []  # the case's share is 0.73
    assert len(ga501(a, min_overhead_share=0.7)) == 1
    assert ga501(a, launch_overhead_us=1.0) == []  # a host as fast as the GPU gap: no overhead


@needs_nvcc
def test_a_single_launch_mostly_overhead_is_reported_on_the_launch_model(tmp_path):
    # one launch of step (no repeat), traced: under 1 us of work against the 2.8 us launch
    # floor. Its chain holds two DRAM round trips: the load of pos waits for the store to vel
    # (ptxas keeps them in order, __restrict__ or not: LDG pos follows STG vel in the SASS), so
    # the overhead share is about 0.75, under the default 0.8: asked at 0.7 here
    a = analyze(SOURCE, "step", write_spec(tmp_path, N_PARTICLES, 1), trace=True)
    (f,) = ga501(a, min_single_overhead_share=0.7)
    assert f.line == srctext.find_kernel_source(SOURCE, "step").decl_line
    e = ev(f)
    ctx = rule_context(a, lazy_models=False).for_rule({})
    times = rule_api.kernel_launch_times(preset("H100"), ctx.trace_view)
    assert times is not None and times.bound_by == "launch"
    assert e["predicted_work_us"] == round(times.work_s * 1e6, 4)
    assert e["launch_floor_us"] == round(times.floor_s * 1e6, 4) == 2.8
    assert e["launch_overhead_share"] == round(times.floor_s / times.time_s, 4) >= 0.7
    assert e["repeat"] == 1 and e["total_ctas"] == 132
    assert "this launch is mostly overhead" in f.message and "CUDA graph" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    # point: the launch (floor + work) against its work alone; the bound: the work at peak
    assert est.inputs["point_speedup"] == round(times.time_s / times.work_s, 3)
    assert est.speedup >= est.inputs["point_speedup"] > 3.0
    assert est.inputs["bound_by_before"] == "launch"
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.launch is None
    assert v.label == "fuse or batch"
    # a longer kernel (2^22 particles, ~6 us of DRAM time) is not mostly overhead
    big = analyze(SOURCE, "step", write_spec(tmp_path, 1 << 22, 1), trace=True)
    assert ga501(big, min_single_overhead_share=0.7) == []
    assert ga501(a) == [] and ga501(a, min_single_overhead_share=0.9) == []


@needs_nvcc
def test_a_single_launch_with_atomics_is_not_reported():
    # cta_sum: each of 1056 CTAs adds its 256 values into one shared word; the launch model
    # does not count the atomics' serialisation, so its short predicted work is no evidence
    src = KERNELS / "atomics" / "contended.cu"
    assert ga501(analyze(src, "cta_sum", trace=True)) == []


def test_launch_model_arithmetic():
    rule = rule_registry.load_registry().get("GA501")
    mod = sys.modules[type(rule).__module__]
    m = mod.LaunchModel(launches=100, kernel_us=0.5, gap_us=1.0, host_us=4.0, graph_us=8.0)
    assert m.stream_us == 400.0 and m.graph_us_total == 158.0
    assert m.overhead_share == pytest.approx(1 - 1.5 / 4.0)
    assert m.speedup == pytest.approx(400 / 158)
    long = mod.LaunchModel(launches=100, kernel_us=50.0, gap_us=1.0, host_us=4.0, graph_us=8.0)
    assert long.overhead_share == 0.0 and long.speedup == pytest.approx(5100 / 5108)


# ---------------------------------------------------------------------------------------------
# The runner's graph path, under a fake backend


KERNEL_US, GAP_US, HOST_US, GRAPH_US = 0.1, 1.0, 4.0, 8.0


def f32(dev: dict[str, np.ndarray]) -> np.ndarray:
    return dev["bytes"].view(np.float32)


def step(pos: Any, vel: Any, dv: float, dt: float, n: int) -> None:
    v, p = f32(vel)[:n], f32(pos)[:n]
    v += np.float32(dv)
    p += v * np.float32(dt)


class GraphFake:
    """Runs numpy 'kernels'; GPU time follows LaunchModel: a stream launch costs
    max(kernel + gap, host), a graph replay graph + n x (kernel + gap)."""

    name = "fake"

    def __init__(self, fail_capture: bool = False) -> None:
        self.elapsed_us = 0.0
        self.calls: list[tuple[str, Any]] = []
        self.fail_capture = fail_capture

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

    def bind(self, kernel: Any, grid: Any, block: Any, smem: int, args: Any) -> Any:
        def go() -> None:
            self.calls.append(("launch", kernel))
            step(*args)
            self.elapsed_us += max(KERNEL_US + GAP_US, HOST_US)

        return go

    def bind_graph(self, launches: Any) -> Any:
        seq = list(launches)
        if self.fail_capture:
            raise RuntimeError("cuStreamBeginCapture failed: operation not supported")
        self.calls.append(("capture", len(seq)))

        def replay() -> None:
            self.calls.append(("replay", len(seq)))
            for _kernel, _grid, _block, _smem, args in seq:
                step(*args)
            self.elapsed_us += GRAPH_US + len(seq) * (KERNEL_US + GAP_US)

        return replay

    def synchronize(self) -> None:
        pass

    def timed(self, fn: Any) -> float:
        t0 = self.elapsed_us
        fn()
        return (self.elapsed_us - t0) / 1000.0

    def flush_l2(self) -> None:
        pass

    def close(self) -> None:
        pass


N_FAKE, REPEAT_FAKE = 256, 50


def graph_job(timing: job.TimingConfig | None) -> job.Job:
    params = (
        job.Param("buffer", "P", 0, "pos"),
        job.Param("buffer", "P", 0, "vel"),
        job.Param("scalar", "f", -0.00981),
        job.Param("scalar", "f", 0.001),
        job.Param("scalar", "I", N_FAKE),
    )
    a = job.KernelLaunch("A", "/dev/null", "step", (2, 1, 1), (128, 1, 1), 0, params, REPEAT_FAKE)
    bufs = (
        job.BufferInit("pos", np.float32, N_FAKE, "iota", is_output=True),
        job.BufferInit("vel", np.float32, N_FAKE, "ones", is_output=True),
    )
    return job.Job((a, job.as_graph(a, "B")), bufs, seed=1, verify=True, timing=timing)


def test_as_graph_marks_the_same_launch():
    a = graph_job(None).launches[0]
    b = job.as_graph(a)
    assert b.graph and not a.graph and b.label == "A-graph"
    assert (b.symbol, b.grid, b.block, b.params, b.repeat) == (
        a.symbol,
        a.grid,
        a.block,
        a.params,
        a.repeat,
    )


def test_graph_replay_is_verified_and_timed_against_stream_launches():
    be = GraphFake()
    t = job.TimingConfig(cold=False, warmup=2, min_samples=10, min_time_s=0.0, max_time_s=5.0)
    res = run_job(graph_job(t), be)
    assert res.ok, res.error
    a, b = res.outcomes
    # both ran the 50 steps from the given start values: pos = 0, 1, 2 ..., vel = 1
    pos, vel = np.arange(N_FAKE, dtype=np.float32), np.ones(N_FAKE, np.float32)
    for _ in range(REPEAT_FAKE):
        vel += np.float32(-0.00981)
        pos += vel * np.float32(0.001)
    for o in (a, b):
        np.testing.assert_array_equal(o.outputs["vel"], vel)
        np.testing.assert_array_equal(o.outputs["pos"], pos)
    # captured once, before anything ran; each replay holds the 50 launches
    assert be.calls[0] == ("capture", REPEAT_FAKE)
    assert [c for c in be.calls if c[0] == "capture"] == [("capture", REPEAT_FAKE)]
    replays = [c for c in be.calls if c[0] == "replay"]
    launches = [c for c in be.calls if c[0] == "launch"]
    assert len(launches) == REPEAT_FAKE * (1 + 2 + len(a.samples_ms))  # verify, warm-up, samples
    assert len(replays) == 1 + 2 + len(b.samples_ms)
    assert len(a.samples_ms) == len(b.samples_ms) >= 10
    # every sample is the whole sequence: 50 x 4 us on the stream, 8 + 50 x 1.1 us as a graph
    assert a.samples_ms == [pytest.approx(REPEAT_FAKE * HOST_US / 1000)] * len(a.samples_ms)
    graph_ms = (GRAPH_US + REPEAT_FAKE * (KERNEL_US + GAP_US)) / 1000
    assert b.samples_ms == [pytest.approx(graph_ms)] * len(b.samples_ms)


def test_a_failed_capture_is_reported_for_the_graph_launch():
    res = run_job(graph_job(None), GraphFake(fail_capture=True))
    assert not res.ok and res.failed_label == "B"
    assert "cuStreamBeginCapture failed" in (res.error or "")


def test_stream_only_jobs_never_capture():
    be = GraphFake()
    graph = graph_job(None)
    res = run_job(job.Job(graph.launches[:1], graph.buffers, seed=1), be)
    assert res.ok and not [c for c in be.calls if c[0] != "launch"]
    assert len(be.calls) == REPEAT_FAKE


# ---------------------------------------------------------------------------------------------
# PyCudaBackend.bind_graph against a fake pycuda.driver


class _Log(list):
    pass


def fake_pycuda(monkeypatch: pytest.MonkeyPatch, fail_capture: bool = False) -> _Log:
    """A fake pycuda.driver (streams) and a fake of the ctypes graph driver."""
    from gpuadvise.runner import pycuda_backend

    log = _Log()

    class Stream:
        def __init__(self, flags: int = 0) -> None:
            log.append(("stream", flags))
            self.handle = 0x1234

    class GraphDriver:
        def begin_capture(self, stream: int) -> None:
            if fail_capture:
                raise RuntimeError("cuStreamBeginCapture failed: CUDA_ERROR_NOT_SUPPORTED")
            log.append(("begin_capture", stream))

        def end_capture(self, stream: int) -> str:
            log.append(("end_capture", stream))
            return "graph"

        def instantiate(self, graph: str) -> str:
            log.append(("instantiate", graph))
            return "exec"

        def launch(self, exe: str) -> None:
            log.append(("graph_launch", exe))

        def destroy(self, exe: str, graph: str) -> None:
            log.append(("destroy", exe, graph))

    monkeypatch.setattr(pycuda_backend, "_GraphDriver", GraphDriver)
    drv = types.ModuleType("pycuda.driver")
    drv.Stream = Stream  # type: ignore[attr-defined]
    pvt = types.ModuleType("pycuda._pvt_struct")
    pvt.pack = lambda fmt, *args: ("packed", fmt, args)  # type: ignore[attr-defined]
    pkg = types.ModuleType("pycuda")
    pkg.driver = drv  # type: ignore[attr-defined]
    pkg._pvt_struct = pvt  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", pkg)
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.setitem(sys.modules, "pycuda._pvt_struct", pvt)
    return log


class FakeFunction:
    arg_format = "PPffI"

    def __init__(self, log: _Log, fail_at: int | None = None) -> None:
        self.log, self.fail_at, self.n = log, fail_at, 0

    def _launch_kernel(self, grid: Any, block: Any, buf: Any, smem: int, stream: Any) -> None:
        self.n += 1
        if self.fail_at == self.n:
            raise RuntimeError("cuLaunchKernel failed: invalid argument")
        self.log.append(("launch", grid, block, buf, smem, stream))


def backend_with(drv: Any) -> Any:
    from gpuadvise.runner.pycuda_backend import PyCudaBackend

    be = PyCudaBackend.__new__(PyCudaBackend)  # no CUDA context: only bind_graph is exercised
    be.drv = drv
    return be


def test_pycuda_bind_graph_captures_on_a_stream_and_replays_one_launch(monkeypatch):
    log = fake_pycuda(monkeypatch)
    be = backend_with(sys.modules["pycuda.driver"])
    fn = FakeFunction(log)
    args = ["pos", "vel", -0.00981, 0.001, 7]
    replay = be.bind_graph([(fn, (2, 1, 1), (128, 1, 1), 0, args)] * 3)
    kinds = [e[0] for e in log]
    assert kinds == ["stream", "begin_capture", "launch", "launch", "launch", "end_capture",
                     "instantiate"]  # fmt: skip
    assert log[1] == ("begin_capture", 0x1234)  # the PyCUDA stream's handle
    for e in log[2:5]:
        # every launch goes to the capturing stream, with its arguments packed by its format
        assert e[:5] == ("launch", (2, 1, 1), (128, 1, 1), ("packed", "PPffI", tuple(args)), 0)
        assert e[5].handle == 0x1234
    assert log[5] == ("end_capture", 0x1234) and log[6] == ("instantiate", "graph")
    replay()
    replay()
    assert log[7:] == [("graph_launch", "exec"), ("graph_launch", "exec")]
    del replay
    assert log[-1] == ("destroy", "exec", "graph")


def test_pycuda_bind_graph_ends_a_broken_capture(monkeypatch):
    log = fake_pycuda(monkeypatch)
    be = backend_with(sys.modules["pycuda.driver"])
    with pytest.raises(RuntimeError, match="invalid argument"):
        be.bind_graph([(FakeFunction(log, fail_at=2), (1, 1, 1), (32, 1, 1), 0, [1])] * 3)
    assert [e[0] for e in log] == ["stream", "begin_capture", "launch", "end_capture"]


def test_a_driver_without_capture_says_so(monkeypatch):
    log = fake_pycuda(monkeypatch, fail_capture=True)
    be = backend_with(sys.modules["pycuda.driver"])
    with pytest.raises(RuntimeError, match="cuStreamBeginCapture failed: CUDA_ERROR_NOT_SUPP"):
        be.bind_graph([(FakeFunction(log), (1, 1, 1), (32, 1, 1), 0, [1])])
    assert [e[0] for e in log] == ["stream"]


# ---------------------------------------------------------------------------------------------
# On a GPU


WHY = pycuda_missing() if HAVE_NVCC else "no CUDA toolkit"


@pytest.mark.gpu
@pytest.mark.skipif(WHY is not None, reason=WHY or "")
def test_gpu_graph_replay_matches_stream_launches_and_is_faster():
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import live_options, prepare, time_prepared
    from gpuadvise.runner.verify import compare

    a = prepare(live_options(KernelOptions(source=str(SOURCE), kernel="step")), "A")
    assert a.launch.repeat == REPEAT
    b = dataclasses.replace(a, launch=job.as_graph(a.launch, "B"))
    timing = job.TimingConfig(min_samples=10, min_time_s=0.3, max_time_s=3.0)
    run = time_prepared([a, b], timing, hot=True, timeout_s=120)
    res = run.result
    assert res.ok, (res.error, run.log)
    oa, ob = res.outcomes
    for name in ("pos", "vel"):
        assert compare(name, oa.outputs[name], ob.outputs[name], 0.0, 0.0).ok
    # 1000 launches of a ~0.1 us kernel: the graph replay is well ahead of the host's launches
    assert np.median(ob.samples_ms) < 0.9 * np.median(oa.samples_ms)
