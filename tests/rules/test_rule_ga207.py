"""GA207 contended-atomics (nvcc, no GPU): kernels/atomics/contended.cu, three spellings of a
shared-memory atomic whose lanes update few addresses (a CTA-wide float sum, an 8-bin weighted
histogram, a maximum through a macro in a template), reported at their ``// expect: GA207``
lines and left alone by GA201 (no padding helps updates of one word); an unused-result increment
(ATOMS.POPC.INC) and one address per lane stay silent. The fix is automatic: the fix kit's warp
aggregation (gpuadvise.source.fixkit_atomics), whose outputs over the whole launch on the CPU
emulator equal the kernel's (integers exactly, a float sum within rounding), and whose
returned old values are those of a serial order of the lanes."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, compiled, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "atomics" / "contended.cu"
BUFS = {
    "cta_sum": ("x=float[4096]", "out=float[16]"),
    "bins8": ("data=int[4096]", "out=int[128]"),
    "block_max<256>": ("in=int[16384]", "out=int[16]"),
    "count_positive": ("x=float[4096]", "out=int[16]"),
    "per_lane": ("x=float[4096]", "out=float[4096]"),
}


def case(kernel: str):
    return analyze(SRC, kernel, 8, grid="16", block="256", buffers=BUFS[kernel])


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("cta_sum", "atomicAdd(&sum, v);"),
        ("bins8", "atomicAdd(&h[v & 7], v >> 3);"),
    ],
)
def test_contended_atomics_reported(kernel, marker):
    a = case(kernel)
    (f,) = run_rule(a, "GA207", trace_ctas=8)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["lanes_per_address"] >= 4.0
    assert e["wavefronts"] > e["wavefronts_one_per_address"]
    assert "__shfl_down_sync" in f.message
    est = f.estimated_speedup
    # a float add is a compare-and-swap loop on sm_90 (a point on the CTA's serial chain); the
    # integer atomics are native: the aggregation's match and shuffles cost more than the
    # 8-bin histogram's updates (measured 0.54x on an H200): no speedup, a note, the GPU decides
    cas = kernel == "cta_sum"
    assert est is not None
    if cas:
        assert est.kind == "point" and est.speedup >= 1.0
    else:
        assert est.kind == "none" and est.speedup is None
        assert est.inputs["point_speedup"] < 1.0 and "predicted slower" in est.method
        assert f.severity == "note" and f.recommend_only_if_faster
    assert ("compare-and-swap loop" in f.message) == cas
    # issue 28 item 6: warp aggregation, made by the fix kit
    assert f.variant is not None and f.variant.safety == "automatic-and-verified"
    assert f.variant.diff and "gpuadvise_warp_atomic" in f.variant.diff
    # the same line is no bank conflict: GA201 leaves it
    assert [g for g in run_rule(a, "GA201", trace_ctas=8) if g.line == f.line] == []


def test_a_compare_and_swap_loop_puts_every_update_on_the_ctas_chain():
    """cta_sum: 8 warps x 32 lanes add to one float: ptxas's ATOMS.CAST.SPIN loop makes the
    CTA's 256 updates follow each other (a round trip each: the shared load, the add, the
    CAS, the test); one atomic per warp leaves 8. The chain's extra links are read off the
    inputs: 255 more round trips before, 7 after."""
    (f,) = run_rule(case("cta_sum"), "GA207", trace_ctas=8)
    est = f.estimated_speedup
    assert est is not None and est.kind == "point"
    assert est.inputs["serial_updates_per_cta"] == 256.0
    assert est.inputs["serial_updates_after"] == 8.0
    # the serial chain is what bounds the launch before the change
    assert est.inputs["bound_by_before"] == "dependency"
    assert est.speedup > 2.0


def test_a_cta_sum_has_32_lanes_per_address():
    (f,) = run_rule(case("cta_sum"), "GA207", trace_ctas=8)
    e = ev(f)
    # 8 warps per CTA, each request all 32 lanes on `sum`: 32 updates of 1 address
    assert e["lanes_per_address"] == 32.0
    assert e["requests"] == 8 * 8
    assert e["wavefronts_one_per_address"] == 8 * 8
    assert e["wavefronts"] == 32 * 8 * 8


@pytest.mark.parametrize("kernel", ["count_positive", "per_lane", "block_max<256>"])
def test_silent(kernel):
    assert run_rule(case(kernel), "GA207", trace_ctas=8) == []


def test_an_atomic_ptxas_aggregates_per_warp_is_one_update_per_request():
    """block_max: ``atomicMax(&m, v)`` on a ``__shared__ int``: 32 lanes on one word in the PTX,
    but ptxas reduces the warp first (``REDUX.MAX.S32`` into a uniform register) and one elected
    lane's ``@P1 ATOMS.MAX.S32 RZ, [UR4]`` updates it: the bank model counts one wavefront per
    warp-level request (measured on an H200, 2026-11-30: the fix kit's aggregation of it ran
    0.79x, nothing left to save), and GA207 is silent (test_silent)."""
    a = case("block_max<256>")
    (line,) = [x for x in a.memory.banks.lines if x.kind.name == "ATOMIC"]
    # 8 traced CTAs x 8 warps x 4 iterations, one wavefront each (32 each before)
    assert line.wavefronts == line.instructions == 8 * 8 * 4


def _outputs(src, kernel, **opts):
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(src, kernel, **opts)
    launch = resolve(a.spec, parse_signature(src.read_text(), kernel.split("<")[0]))
    return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False).outputs


def _patched(tmp_path, src, diff):
    from gpuadvise.source.patch import apply_unified_diff

    for toml in src.parent.glob("*.toml"):  # the specs beside it (the inputs' seed)
        (tmp_path / toml.name).write_text(toml.read_text())
    new = tmp_path / src.name
    new.write_text(apply_unified_diff(src.read_text(), diff))
    return new


@pytest.mark.parametrize(
    ("kernel", "helper"),
    [
        ("cta_sum", "gpuadvise_warp_atomicAdd(&sum, v);"),
        ("bins8", "gpuadvise_warp_atomicAdd(&h[v & 7], v >> 3);"),
    ],
)
def test_the_warp_aggregated_fix_writes_the_same_outputs(kernel, helper, tmp_path):
    """Issue 28 item 6: a float add on one address, an integer add on data-dependent bins (the
    lanes of each bin matched by __match_any_sync), a maximum through a macro; the patched
    kernel over its whole launch writes the kernel's outputs (the float sums within rounding)
    and GA207 is silent on it: one lane per address and request is left."""
    import numpy as np

    (f,) = run_rule(case(kernel), "GA207", trace_ctas=8)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    # shared memory's own atomics: measured 0.53-3.90x on an H200, so the GPU decides
    assert v.needs_measurement
    assert f"+{helper}" in v.diff.replace("+    ", "+").replace("+        ", "+"), v.diff
    new = _patched(tmp_path, SRC, v.diff)
    opts = {"grid": "16", "block": "256", "buffers": BUFS[kernel]}
    want, got = _outputs(SRC, kernel, **opts)["out"], _outputs(new, kernel, **opts)["out"]
    assert np.count_nonzero(want)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        assert want.tobytes() == got.tobytes()
    b = analyze(new, kernel, 8, grid="16", block="256", buffers=BUFS[kernel])
    assert run_rule(b, "GA207", trace_ctas=8) == []


def test_a_used_result_gets_the_old_value_of_a_serial_order(tmp_path):
    """A stream compaction (HeCBench's filter): `pos = atomicAdd(&count, 1)` under a
    data-dependent guard; the aggregated helper (`_old`) hands each lane the count of the lanes
    before it, so the compacted output is the kernel's, element for element."""
    import numpy as np
    from rulekit import kernel_case

    src = kernel_case(
        tmp_path,
        """
        __global__ void compact(const int* in, int* out, unsigned n) {
            __shared__ int count;
            __shared__ int slots[256];
            if (threadIdx.x == 0) count = 0;
            __syncthreads();
            int v = in[blockIdx.x * blockDim.x + threadIdx.x];
            int pos = -1;
            if (v & 1) pos = atomicAdd(&count, 1);
            if (pos >= 0) slots[pos] = v;
            __syncthreads();
            if (threadIdx.x < count) out[blockIdx.x * 256 + threadIdx.x] = slots[threadIdx.x];
        }
        """,
        "compact",
        n=1024,
    )
    toml = src.parent / "case.toml"
    toml.write_text(
        toml.read_text().replace('count = 4, fill = "zeros"', 'count = 1024, fill = "zeros"')
    )
    from gpuadvise.source import fixkit_atomics
    from gpuadvise.source import tree as T
    from gpuadvise.source.edit import Rewrite

    text = src.read_text()
    rw = Rewrite(text)
    line = source_line(src, "pos = atomicAdd(&count, 1);")
    assert fixkit_atomics.warp_aggregate(T.parse(text), rw, line) == [
        "gpuadvise_warp_atomicAdd_old"
    ]
    new_dir = tmp_path / "new"
    new_dir.mkdir()
    (new_dir / "case.toml").write_text(toml.read_text())
    new = new_dir / "k.cu"
    new.write_text(rw.text())
    want = _outputs(src, "compact", spec=str(toml))["out"]
    got = _outputs(new, "compact", spec=str(new_dir / "case.toml"))["out"]
    assert np.count_nonzero(want) > 100 and want.tobytes() == got.tobytes()


def test_the_aggregation_adds_its_match_and_shuffles_per_request():
    """By hand (gpuadvise.rules.atomics): 4 CTAs traced, 8 warps a CTA, 64 requests (16 a CTA,
    2 a warp). All 32 lanes on one address: per request the common part (int 4, xu 2, branch
    2), the match (2.6 shuffle-pipe instructions an address) and the butterfly (shuffle 5, int
    5); chain: shuffle 4 + 5, int 4 + 5, xu 2 (276 cycles at 24/4/12, measured 276 on an H200).
    Eight addresses of 4 lanes: the common part, the match (8 x 2.6) and 32 lanes' iterations
    (pipes shuffle 2, int 6, branch 2; chain shuffle 1, int 3)."""
    from gpuadvise.model.execution import KernelWork
    from gpuadvise.rules.atomics import Contention, with_aggregation

    w = KernelWork(
        pipes={"int": 10.0}, chain={"int": 3.0}, critical_instructions=20.0, ctas=4,
        warps_per_cta=8,
    )  # fmt: skip
    one = Contention(64, 64 * 32, 64, 64 * 32, 64, (0,))
    a = with_aggregation(w, one, 4)
    assert a.pipes == pytest.approx(
        {"int": 10.0 + 16 * 9, "xu": 16 * 2, "branch": 16 * 2, "shuffle": 16 * 7.6}
    )
    assert a.chain == {"int": 3.0 + 2 * 9, "xu": 2 * 2, "shuffle": 2 * 9}
    assert 9 * 24 + 9 * 4 + 2 * 12 == 276
    assert a.critical_instructions == pytest.approx(20.0 + 2 * (8 + 1 + 10))
    bins = Contention(64, 64 * 32, 64 * 8, 64 * 8, 64, (0,))
    b = with_aggregation(w, bins, 4)
    assert b.pipes["shuffle"] == pytest.approx(16 * (8 * 2.6 + 2 * 32))
    assert b.pipes["int"] == pytest.approx(10.0 + 16 * (4 + 6 * 32))
    assert b.chain["shuffle"] == 2 * (4 + 32) and b.chain["int"] == 3.0 + 2 * (4 + 3 * 32)
    assert b.pipes["branch"] == 16 * (2 + 2 * 32) and "branch" not in b.chain
    # the H200's latencies: 136 + 32 x 36 = 1288 cycles a request (measured 1286, one warp)
    assert 4 * 24 + 4 * 4 + 2 * 12 + 32 * (24 + 3 * 4) == 1288
