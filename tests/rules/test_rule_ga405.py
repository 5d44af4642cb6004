"""GA405 compute-bound (nvcc, no GPU): kernels/compute_bound/compute.cu, three spellings of a
launch whose time is its arithmetic (a precise ``powf`` over all pairs, a device function of
``sinf``/``cosf`` in a loop, a macro of ``expf`` and divisions by loop-invariant variances),
reported at their ``// expect: GA405`` lines on the execution model; a streaming copy, a
streaming sigmoid (one precise ``expf`` per element) and a five-point stencil are memory-bound
and stay silent. Also: the emulator's per-line issued work puts the instructions of a called
function without line information (the CUDA math library's ``__internal_accurate_pow``) at the
line that calls it."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

from gpuadvise.analyze.evaluate import rule_context
from gpuadvise.rules.config import Config

# the module's analyses of compute.cu are kept per process (compute_cu): its tests on one worker
pytestmark = [
    pytest.mark.toolkit,
    pytest.mark.usefixtures("compile_cache"),
    pytest.mark.xdist_group(__name__),
]

SRC = KERNELS / "compute_bound" / "compute.cu"
CTAS = 8


@functools.cache
def compute_cu(kernel: str) -> Any:
    """The analysis of ``kernel`` in compute.cu (its first ``CTAS`` CTAs traced), made once for
    the module: gauss's serves three tests (its finding, the thresholds, the traffic made once),
    which read it and never change it."""
    return analyze(SRC, kernel, CTAS)


def ga405(kernel: str):
    return run_rule(compute_cu(kernel), "GA405", trace_ctas=CTAS)


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("weights", "float t = 1.f / powf(d, alpha);"),
        ("phases", "float s = wave(t[j], w, &c);"),
        ("gauss", "float k = GAUSS((v - c) * (v - c), var_i)"),
    ],
)
def test_compute_bound_kernels_reported_at_their_math(kernel, marker):
    (f,) = ga405(kernel)
    assert f.line == source_line(SRC, marker)
    assert f.severity == "warning"
    e = ev(f)
    assert e["bound_by"] in ("issue", "pipe")
    # the arithmetic is several times the memory time, and no memory change gains anything
    assert e["compute_over_memory"] >= 4.0, e
    assert 1.0 <= e["memory_fix_bound"] < 1.05, e
    assert e["lines_share"] >= 0.5 and e["arithmetic_share"] >= 0.8, e
    assert "compute-bound" in f.message and "Memory-layout changes give at most" in f.message
    assert "__powf" in f.message  # compiled without -use_fast_math: the intrinsics are named
    # an upper bound on the launch model: the lines' arithmetic down to their MUFU operations
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    assert est.inputs["model"] == "execution"
    assert 1.2 < est.speedup <= e["compute_us"] / e["memory_us"] + 0.01
    assert 0 < est.inputs["removed_instruction_share"] < 1
    assert f.variant is not None and f.variant.safety == "display-only"


@pytest.mark.parametrize("kernel", ["copy", "sigmoid", "stencil"])
def test_memory_bound_kernels_stay_silent(kernel):
    assert ga405(kernel) == []


def test_called_math_function_counts_at_its_call_line():
    """``pow(s, 0.5)`` of a float is the double pow, which the PTX calls as
    ``__internal_accurate_pow`` (no ``.loc`` of its own): its FP64 work is the call line's."""
    src = KERNELS / "fp64" / "promote.cu"
    a = analyze(src, "norm", 4)
    simt = a.memory.simt
    where = {lp.line: lp for lp in simt.line_pipes}
    assert 0 not in where  # nothing left without a line
    call = where[source_line(src, "y[i] = pow(s, 0.5);")]
    assert call.pipes.get("fp64", 0.0) > 0.8 * sum(
        lp.pipes.get("fp64", 0.0) for lp in simt.line_pipes
    )
    # the per-line counts are the PTX's executed instructions, each counted once; the work's are
    # the SASS's where it is read (gpuadvise.trace.sass_counts, counts_from "sass"): here the
    # pow subroutine as ptxas expands it, 6752 a 4-CTA trace for the PTX's 5088
    work = rule_context(a, Config(trace_ctas=4)).trace_view.work
    total = sum(lp.instructions for lp in simt.line_pipes)
    if work.counts_from == "ptx":
        assert total == pytest.approx(work.instructions * work.ctas_traced, rel=1e-6)
    else:
        assert 0.5 < work.instructions * work.ctas_traced / total < 2.0


def test_thresholds_are_options():
    """A kernel at 7x its memory time is not reported when the option asks for more."""
    a = compute_cu("gauss")
    assert run_rule(a, "GA405", trace_ctas=CTAS, min_compute_over_memory=100.0) == []


FEW = """\
__global__ void match(const char* __restrict__ target, const char* __restrict__ query,
                      char* __restrict__ result, int qlen, int len) {
    unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    bool found = false;
    for (int i = 0; i + len <= qlen; i++) {
        int distance = 0;
        for (int j = 0; j < len; j++)
            if (target[tid + j] != query[i + j]) distance++;
        if (distance < 1) { found = true; break; }
    }
    result[tid] = found;
}
"""

FEW_SPEC = """\
source = "k.cu"
kernel = "match"
grid = 4
block = 256
seed = 1

[args]
qlen = 1000
len = 11

[buffers]
target = { type = "char", count = 1100, fill = "random(0,3)" }
query = { type = "char", count = 1000, fill = "random(0,3)" }
result = "char[1024]"
"""


def test_a_launch_of_a_few_ctas_is_not_called_compute_bound(tmp_path):
    """hecbench ga's byte matching, 4 CTAs of 256: the ALU work sets the time of the 4 SMs that
    run, but 128 of 132 SMs are idle: the launch's parallelism is the limit (GA102 says so),
    not the GPU's arithmetic (ga's 4 CTAs and secp256k1's one thread were called
    compute-bound). Without the SM share the rule found the arithmetic at the compare until
    the 8 warps' loads of the broadcast ``query[i + j]`` waited for each other's misses in flight
    (s12-inflight, model/l1.py): the chain, 195 us on the H100 model, is 206 us now, just over
    the ALU's 204 us, so the launch is the chain's either way (within 1%: an edge)."""
    src = tmp_path / "k.cu"
    src.write_text(FEW)
    (tmp_path / "case.toml").write_text(FEW_SPEC)
    a = analyze(src, "match", "all", spec=str(tmp_path / "case.toml"))
    assert run_rule(a, "GA405", trace_ctas="all") == []
    assert run_rule(a, "GA405", trace_ctas="all", min_sm_share=0.0) == []


def test_the_idle_ctas_of_a_grid_sized_past_the_data_are_no_arithmetic_to_rewrite():
    # kernels/idle_ctas band_steps: 3200 CTAs for 4 working ones, every CTA running 5 steps with
    # two barriers each (HeCBench pathfinder's shape). The launch model finds it bound by the
    # ALU pipe, but that work is the 3196 idle CTAs' index tests: GA108's, not GA405's
    idle = KERNELS / "idle_ctas" / "idle.cu"
    a = analyze(idle, "band_steps", spec=str(idle.parent / "band_steps.toml"))
    assert run_rule(a, "GA405") == []
    # with the idle CTAs counted GA405 finds nothing to rewrite either: since the barrier steps
    # are a throughput term of the SM (measured on an H200: 3.75 cycles a warp), the 3200 CTAs'
    # 10 barriers each bind the launch, not an arithmetic pipe
    assert run_rule(a, "GA405", min_working_share=0.0) == []
    (g,) = run_rule(a, "GA108")
    assert ev(g)["working_ctas"] == 4
    # the search of idle.cu computes in registers in every CTA and writes only on a match:
    # no CTA of it is idle, and it stays GA405's
    s = analyze(idle, "search", spec=str(idle.parent / "search.toml"))
    assert len(run_rule(s, "GA405")) == 1


def test_the_traffic_is_made_once_for_detect_and_estimate(monkeypatch):
    """detect and estimate read the same traffic (the buffers' footprints, sorts over their
    lanes): made once per trace view, the finding and its estimate those of the rules' run."""
    from gpuadvise.rules import registry as rule_registry
    from gpuadvise.rules.evaluate import finding_estimate

    a = compute_cu("gauss")
    reg = rule_registry.load_registry()
    rule = reg.get("GA405")
    # the rule's own module globals (a registry loads the rule files anew: sys.modules holds
    # the latest load's module, not necessarily this rule's)
    names = type(rule)._traffic_of.__globals__
    calls = []
    real = names["read_once"]

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setitem(names, "read_once", counted)
    names["_TRAFFIC"].clear()  # (the analysis may be another test's, its view's traffic made)
    cfg = Config(trace_ctas=CTAS)
    ctx = rule_context(a, cfg).for_rule(reg.options_for(rule, cfg))
    (f,) = list(rule.detect(ctx))
    est = finding_estimate(rule, ctx, f)  # the rule's estimate through the launch model's check
    assert est is not None
    assert len(calls) == 1
    (want,) = run_rule(a, "GA405", trace_ctas=CTAS)  # the run's rule, on the same trace view
    assert f.message == want.message and f.line == want.line
    assert want.estimated_speedup is not None
    assert (
        est.speedup == want.estimated_speedup.speedup
        and est.method == want.estimated_speedup.method
    )
