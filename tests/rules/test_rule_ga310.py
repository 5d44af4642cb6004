"""GA310 low-arithmetic-intensity (nvcc, no GPU): kernels/intensity/intensity.cu, three spellings
of the classic shared-memory tiled matrix multiply with one output per thread (a macro tile, a
template tile with ``fmaf``, the dot step in a device function), reported at their
``// expect: GA310`` lines with their loads per FMA and the register tile that reaches the FMA
pipe; the same product with a 4 x 4 register tile, a streaming ``a * x + y`` and a transpose
through shared memory stay silent. Also the pure model (:mod:`gpuadvise.model.intensity`)."""

from __future__ import annotations

from functools import cache

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

from gpuadvise.model.intensity import LoopIntensity, choose_tile, is_multiply_add
from gpuadvise.ptx.parser import Instr

SRC = KERNELS / "intensity" / "intensity.cu"
CTAS = 8

# the module's analyses are kept per process (_analysis): its tests run on one xdist worker
pytestmark = pytest.mark.xdist_group(__name__)


@cache
def _analysis(kernel: str):
    return analyze(SRC, kernel, CTAS)


def ga310(kernel: str, **options):
    return run_rule(_analysis(kernel), "GA310", trace_ctas=CTAS, **options)


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("tiled_macro", "for (int k = 0; k < TILE; ++k) sum += As[ty][k] * Bs[k][tx];"),
        ("tiled_template<16>", "acc = fmaf(sa[ty * T + k], sb[k * T + tx], acc);"),
        ("tiled_helper", "out += dot_tile(a, b, r, c);"),
    ],
)
def test_tiled_matmul_with_one_output_per_thread_is_reported(kernel, marker):
    (f,) = ga310(kernel)
    assert f.line == source_line(SRC, marker)
    assert f.severity == "warning"
    e = ev(f)
    # two shared loads per FFMA (As[ty][k] and Bs[k][tx]): the shared data path, one wavefront
    # a clock against four warp FFMAs, takes about 8x the FP32 pipe's time
    assert 1.8 <= e["loads_per_fma"] <= 2.05, e
    assert 6.0 <= e["data_path_over_fma"] <= 8.5, e
    # 4096 CTAs on 132 SMs: a 4 x 4 tile (256 CTAs), not 8 x 8 (64 CTAs, half the SMs idle)
    assert e["register_tile"] == 4 and e["loads_per_fma_tiled"] <= 0.52, e
    assert "shared loads per FP32 FMA" in f.message and "4 x 4 register tile" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    assert est.inputs["model"] == "execution" and est.inputs["bound_by_before"] == "l1"
    # the point: the shared loads divided by 8, the global traffic as it is (A and B read
    # from DRAM once: then bound by the L2 and issue on the model); the bound: the FMA roof,
    # the launch before against its FMAs alone
    # (measured on an H200, 2026-11-29, .gpu/s7-lai: the 16 x 16 tiled multiply at 1024 against
    # a 4 x 4 register tile, 276.8 us against 116.5 us, 2.38x)
    point = est.point
    assert point is not None and 2.0 < point < 3.2, est.inputs
    assert 7.0 < est.speedup < 11.0, est.inputs
    assert est.like_for_like is not None and point <= est.like_for_like < 3.5
    assert "FMA roof" in est.method
    assert f.variant is not None and f.variant.safety == "display-only"


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize("kernel", ["regtile4", "axpy", "transpose_tile"])
def test_register_tiled_memory_bound_and_arithmetic_free_kernels_stay_silent(kernel):
    assert ga310(kernel) == []


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_thresholds_are_options():
    """The 16 x 16 tiled multiply at about 8x the FMA pipe's time is not reported when the
    option asks for more; the 4 x 4 register tile (under 3x) is when it asks for less."""
    assert ga310("tiled_macro", min_lsu_over_fma=20.0) == []
    (f,) = ga310("regtile4", min_lsu_over_fma=1.0)
    e = ev(f)
    assert e["loads_per_fma"] <= 0.15 and e["data_path_over_fma"] < 3.0, e


def _ins(opcode: str) -> Instr:
    return Instr(opcode, ())


def test_multiply_adds_are_float_fmas_and_matrix_mmas():
    yes = (
        "fma.rn.f32",
        "mad.rn.f64",
        "fma.rn.f16x2",
        "fma.rn.bf16",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    )
    for op in yes:
        assert is_multiply_add(_ins(op)), op
    for op in ("mad.lo.s32", "mul.f32", "add.f32", "wmma.load.a.sync.aligned.row.m16n16k16.f16"):
        assert not is_multiply_add(_ins(op)), op


def test_a_register_tile_divides_the_loads_per_fma():
    """One output per thread of a matrix product: two loads per FMA; a 4 x 4 tile loads 4 + 4
    values for 16 FMAs (0.5 per FMA), an 8 x 8 one 16 for 64 (0.25)."""
    one = LoopIntensity(fmas=1024.0, shared_loads=2048.0, shared_wavefronts=2048.0)
    assert one.loads_per_fma == 2.0
    assert one.tiled(4).loads_per_fma == 0.5 and one.tiled(4).fmas == 1024.0
    assert one.tiled(8).shared_wavefronts == 256.0
    # the smallest of 2, 4, 8 that puts the shared data path under the FMA pipe's time
    assert choose_tile(1.5) == 2 and choose_tile(3.9) == 4 and choose_tile(8.0) == 8
    assert choose_tile(20.0) == 8
    # among those that leave a CTA per SM: a 1024 x 1024 product in 16 x 16 tiles (4096 CTAs)
    # on 132 SMs takes 4 x 4 (256 CTAs), not 8 x 8 (64); a grid too small for any, 2 x 2
    assert choose_tile(8.0, 4096, 132) == 4 and choose_tile(8.0, 16384, 132) == 8
    assert choose_tile(8.0, 256, 132) == 2
