"""GA303's second finding, narrow coalesced loads that keep too few bytes in flight (nvcc, no GPU):
kernels/scalar/narrow.cu, one pixel per thread in bytes in three spellings (plain, a macro, a
template through a helper) and a row walk of one float per iteration, reported at their
``// expect: GA303`` lines with the widening the launch model credits; the fixed kernels (sixteen
pixels per thread in one uint4, the row walk unrolled by four, float4 loads) stay silent. 4-byte
loads as a stream walked one per wait (the row walk, one-wave grid-stride sums in three
spellings) reported, and silent where they are not one (a launch short of warps, one float per
thread). And the launch model's change and the stream gate, on numbers made by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from bundlekit import write_bundle
from rulekit import KERNELS, analyze, ev, reduction_launch, run_rule, source_line

import gpuadvise.rules as rule_api
from gpuadvise.rules.registry import expectations

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "scalar" / "narrow.cu"
SPECS = {
    "threshold_bytes": "case.toml",
    "threshold_bytes_macro": "threshold_bytes_macro.toml",
    "threshold_t<2>": "threshold_t.toml",
    "threshold_uint4": "threshold_uint4.toml",
    "rank_rows": "rank_rows.toml",
    "rank_rows_unrolled": "rank_rows_unrolled.toml",
    "rank_rows_float4": "rank_rows_float4.toml",
}


def narrow(kernel: str, **options: object) -> list[rule_api.Finding]:
    a = analyze(SRC, kernel, 8, spec=str(SRC.parent / SPECS[kernel]))
    found = run_rule(a, "GA303", trace_ctas=8, **options)
    return [f for f in found if type(f.details).__name__ == "NarrowRun"]


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("threshold_bytes", "if (mask[i] == 0) {"),
        ("threshold_bytes_macro", "if (i < n && PIXEL(mask, i) == 0)"),
        ("threshold_t<2>", "unsigned char m = load_at(mask, i);"),
    ],
)
def test_one_byte_per_thread_is_reported(kernel, marker):
    (f,) = narrow(kernel)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["element_bytes"] == 1 and e["elements_per_thread_after"] == 16
    assert e["bound_by_before"] == "dependency"
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and est.speedup is not None
    i = est.inputs
    assert i["grid_factor"] == 16 and i["loop_factor"] == 1  # one pixel a thread: the grid shrinks
    assert max(i["point_speedup"], i["peak_speedup"]) >= 1.05
    # the plain spelling is rewritten (test_rule_ga303_vectorize.py); a macro or a helper given
    # the pointer is not
    safety = "automatic-and-verified" if kernel == "threshold_bytes" else "display-only"
    assert f.variant is not None and f.variant.safety == safety


def test_one_byte_per_thread_in_one_warp_ctas_is_reported_as_bound_by_cta_launches():
    # the same kernel in CTAs of one warp (262,144 of them): the block scheduler's launches bound
    # the launch (79.4 ns a CTA an SM after the first two, measured on an H200), neither its
    # waits nor its issue; 16 pixels a thread launch a 16x smaller grid (hecbench ising's shape:
    # 102,400 CTAs of 128 threads, one signed char spin a thread)
    a = analyze(SRC, "threshold_bytes", 8, spec=str(SRC.parent / "case.toml"), block="32",
                grid="ceil_div(n, 32)")  # fmt: skip
    (f,) = [
        f for f in run_rule(a, "GA303", trace_ctas=8) if type(f.details).__name__ == "NarrowRun"
    ]
    assert f.line == source_line(SRC, "if (mask[i] == 0) {")
    e = ev(f)
    assert e["bound_by_before"] == "cta" and e["elements_per_thread_after"] == 16
    assert "16x smaller grid" in f.message
    i = f.estimated_speedup.inputs
    assert i["grid_factor"] == 16 and i["bound_by_before"] == "cta"
    assert max(i["point_speedup"], i["peak_speedup"]) >= 1.05


def test_a_row_walk_of_one_float_per_iteration_is_reported_as_a_stream():
    # 4-byte loads as a stream walked one per wait: a loop of one unbatched LDG per iteration,
    # waited on, bound by the DRAM once widened (hecbench accuracy_kernel's shape: 1.98x)
    (f,) = narrow("rank_rows")
    assert f.line == source_line(SRC, "const float v = x[(long)row * d + c];")
    i = f.estimated_speedup.inputs  # type: ignore[union-attr]
    # a block-stride loop over the lanes' dimension: four floats per thread, a 4x shorter loop
    assert (i["k"], i["loop_factor"], i["grid_factor"]) == (4, 4, 1)
    assert i["bound_by_before"] == "dependency" and i["chain_global_kept"] < 0.35
    assert i["sass_batch_ratio"] == 1.0 and i["bound_by_after"] == "dram"
    assert narrow("rank_rows", max_stream_bytes=2) == []  # the option turns it off
    (g,) = narrow("rank_rows", max_narrow_bytes=4)  # and narrow by the option: no gate
    assert g.line == f.line


INFLIGHT = KERNELS / "inflight" / "inflight.cu"
REDUCE = KERNELS / "styles" / "reductions" / "reductions.cu"


def _narrow_at(src, kernel: str, spec: str) -> list[rule_api.Finding]:
    a = analyze(src, kernel, 8, spec=str(src.parent / spec))
    found = run_rule(a, "GA303", trace_ctas=8)
    return [f for f in found if type(f.details).__name__ == "NarrowRun"]


@pytest.mark.parametrize(
    ("src", "kernel", "spec"),
    [
        # a one-wave grid-stride sum: a plain loop, cuda-samples' spelling, a template size
        (INFLIGHT, "sum_wave", "sum_wave.toml"),
        (REDUCE, "il_helper", "il_helper.toml"),
        (REDUCE, "il_template<256>", "case.toml"),
    ],
)
def test_a_one_wave_sum_of_one_4_byte_load_per_iteration_is_reported(src, kernel, spec):
    (f,) = _narrow_at(src, kernel, spec)
    assert "GA303" in expectations(src).get(f.line or 0, ())
    i = f.estimated_speedup.inputs  # type: ignore[union-attr]
    assert (i["k"], i["loop_factor"], i["grid_factor"]) == (4, 4, 1)
    assert i["sass_batch_ratio"] == 1.0 and i["bound_by_after"] == "dram"


@pytest.mark.parametrize(
    ("src", "kernel", "spec"),
    [
        # the same sum on 8 warps per SM: still waiting once widened, short of warps (GA106)
        (INFLIGHT, "sum_few", "case.toml"),
        # one float per thread: a grid of CTAs that come and go with their loads in flight
        (KERNELS / "compute_bound" / "compute.cu", "sigmoid", "sigmoid.toml"),
    ],
)
def test_4_byte_loads_that_are_no_one_per_wait_stream_are_silent(src, kernel, spec):
    assert _narrow_at(src, kernel, spec) == []


def test_the_stream_gate_on_numbers_made_by_hand():
    ok = {"k": 4, "loop_factor": 4.0, "grid_factor": 1.0, "sass_batch_ratio": 1.0,
          "bound_by_after": "dram"}  # fmt: skip
    assert rule_api.one_per_wait_stream(ok, waiting=True)
    assert not rule_api.one_per_wait_stream(ok, waiting=False)
    for change in (
        {"grid_factor": 4.0, "loop_factor": 1.0},  # one element per thread
        {"loop_factor": 2.0},  # a loop of two iterations: the grid shrinks too
        {"sass_batch_ratio": 4.0},  # ptxas issues four at a time already
        {"bound_by_after": "dependency"},  # still waiting: short of warps
    ):
        assert not rule_api.one_per_wait_stream({**ok, **change}, waiting=True), change


def test_widened_traffic_on_numbers_made_by_hand():
    from gpuadvise.model.execution import KernelWork
    from gpuadvise.model.roofline import Traffic
    from gpuadvise.rules.narrow_loads import Widening, widened_traffic

    work = KernelWork(
        pipes={"int": 100.0, "fp32": 100.0},
        chain={"global": 10.0, "int": 20.0},
        critical_instructions=50.0,
        ctas=1000,
        warps_per_cta=8,
    )
    before = Traffic(
        l1_cycles=1e6,
        instructions=2e5,
        resident_warps=8448.0,
        bytes_in_flight_per_warp=128.0,
        work=work,
        load_requests=1e5,
    )
    view = type("V", (), {"scale": 10.0})()
    # a loop made 4x shorter: half the global links are the widened loads'
    wd = Widening(4, 4.0, 1.0, 0.5 + 0.5 / 4, 3000.0, 5000.0)
    after = widened_traffic(before, view, wd)  # type: ignore[arg-type]
    assert after.l1_cycles == pytest.approx(1e6 - 5e4)
    assert after.instructions == pytest.approx(2e5 - 3e4)
    assert after.bytes_in_flight_per_warp == pytest.approx(128.0 * 1e5 / 7e4)
    assert after.work is not None and after.work.ctas == 1000
    assert after.work.chain["global"] == pytest.approx(10.0 * 0.625)
    kept = 1 - 3e4 / (200 * 1000)
    assert after.work.pipes["int"] == pytest.approx(100 * kept)
    # one element per thread: the grid 16x smaller, each CTA 16x the element-wise work
    wd = Widening(16, 1.0, 16.0, 1.0, 3000.0, 5000.0)
    after = widened_traffic(before, view, wd)  # type: ignore[arg-type]
    assert after.work is not None and after.work.ctas == 63  # ceil(1000 / 16)
    assert after.work.chain == work.chain
    assert after.work.pipes["int"] == pytest.approx(100 * kept * 16)
    assert after.resident_warps == 63 * 8  # fewer CTAs than the device holds


UNIFORM = {
    # four consecutive ints the same for every thread, in a loop (cmpfhd's rmu[m] ... shape)
    "taps_loop": """
        extern "C" __global__ void taps_loop(const int* __restrict__ in, int* __restrict__ out,
                                             unsigned n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x, s = 0;
            for (int m = 0; m < 64; m += 4)
                s += in[m] * i + in[m + 1] - in[m + 2] * i + in[m + 3];
            atomicAdd(&out[blockIdx.x], s);
        }
    """,
    # the same through a pointer to a row picked by the block (uniform across its warps)
    "taps_row": """
        extern "C" __global__ void taps_row(const int* __restrict__ in, int* __restrict__ out,
                                            unsigned n) {
            const int* w = in + 4 * blockIdx.x;
            int i = threadIdx.x;
            int s = w[0] * i + w[1] - w[2] * i + w[3];
            atomicAdd(&out[blockIdx.x], s);
        }
    """,
    # reported: each thread its own four consecutive ints
    "taps_own": """
        extern "C" __global__ void taps_own(const int* __restrict__ in, int* __restrict__ out,
                                            unsigned n) {
            unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
            int s = 0;
            if (4 * i + 3 < n) s = in[4 * i] * 3 + in[4 * i + 1] - in[4 * i + 2] * 5 + in[4 * i + 3];
            atomicAdd(&out[blockIdx.x], s);
        }
    """,
}


@pytest.fixture(scope="module")
def uniform(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """UNIFORM's three kernels in one file (bundlekit), each launched as ``kernel_case`` would
    with n = 4096."""
    launches = dict.fromkeys(UNIFORM, reduction_launch(n=4096))
    return write_bundle(tmp_path_factory.mktemp("ga303-uniform"), UNIFORM, launches)


@pytest.mark.parametrize("kernel", ["taps_loop", "taps_row", "taps_own"])
def test_warp_uniform_runs_are_left_alone(uniform, kernel):
    """A run of consecutive scalar loads at one address on every lane of a warp is a broadcast:
    one request of one sector each, as the vector would be (cmpfhd's shape measured 0.88x with
    float4 loads): a note; a thread's own four consecutive elements are not one."""
    src = uniform
    found = run_rule(analyze(src, kernel, 4), "GA303", trace_ctas=4)
    runs = [f for f in found if type(f.details).__name__ == "ScalarRun"]
    assert runs, "the run is reported"
    uniform = [rule_api.warp_uniform(p) for p in rule_api.scalar_pieces(_trace(src, kernel), 2)]
    assert all(uniform) == (kernel != "taps_own") and any(uniform) == (kernel != "taps_own")
    if kernel != "taps_own":
        assert {f.severity for f in runs} == {"note"}


def _trace(src, kernel: str):
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules.config import Config

    return rule_context(analyze(src, kernel, 4), Config(trace_ctas=4)).trace


def test_narrow_loads_are_found_once_per_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """GA303's detect and each narrow finding's estimate read the view's narrow loads: found once
    per view and trace (a pass over every load instruction's lanes, issue 31), each call a list
    of its own."""
    import sys

    nl = sys.modules["gpuadvise.rules.narrow_loads"]
    calls: list[int] = []
    real = nl._narrow_loads

    def counting(view: object, trace: object) -> list[object]:
        calls.append(1)
        return real(view, trace)  # type: ignore[no-any-return]

    monkeypatch.setattr(nl, "_narrow_loads", counting)
    found = narrow("threshold_bytes")
    assert found and found[0].estimated_speedup is not None  # detect and estimate asked
    assert len(calls) == 1
