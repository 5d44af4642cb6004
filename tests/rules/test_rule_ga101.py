"""GA101 occupancy-limited (nvcc, no GPU, the H100 model): a shared-memory limit (the occupancy
case) and a register limit (the spills case's ``moments``), each with the occupancy worked out by
hand from the rules of NVIDIA's occupancy calculator (cuda_occupancy.h), the launches that must
stay silent, both options, the estimate and the variants (and that they lift the limit).

The H100 (sm_90) numbers used: 132 SMs, 64 warps and 32 blocks per SM, 65536 registers per SM
in 4 sub-partitions allocated per warp in units of 256, 233472 B (228 KB) of shared memory per
SM allocated per block in units of 128 B with 1024 B reserved per block.
"""

from __future__ import annotations

from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule

from gpuadvise.model import occupancy as occ

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

LUT = KERNELS / "occupancy" / "occupancy.cu"
SPILLS = KERNELS / "spills" / "spills.cu"


def ga101(source: Any, kernel: str, launch: dict[str, Any] | None = None, **options: Any) -> Any:
    # GA101 reads the live registers wherever occupancy is low (its register caps' floor): one
    # nvdisasm -plr run gives them and the SASS, not the SASS first and a second run
    a = analyze(source, kernel, trace=False, registers=True, **(launch or {}))
    return a, run_rule(a, "GA101", **options)


# ---------------------------------------------------------------------------------------------
# Shared memory: lut_big stages a 48 KB table per 128-thread block


def test_lut_big_is_limited_by_shared_memory():
    a, (f,) = ga101(LUT, "lut_big")
    assert a.kernel.resources.static_smem_bytes == 12288 * 4 == 49152
    # per block: 49152 + 1024 reserved = 50176 B (a multiple of 128); 233472 // 50176 = 4 blocks
    # of 4 warps = 16 of 64 warps
    assert 233472 // (49152 + 1024) == 4
    assert "void lut_big(" in LUT.read_text().splitlines()[f.line - 1]
    e = ev(f)
    assert e["occupancy"] == 0.25 and e["active_warps_per_sm"] == 16
    assert e["limiter"] == "shared_memory"
    thr = next(x for x in f.evidence if x.metric == "occupancy")
    assert (thr.threshold, thr.op) == (0.5, "<")
    # the best step: blocks of 512 threads (16 warps) x the same 4 blocks = 64 warps, 100 %
    # (1024 threads: 2 blocks by the warp limit, also 64 warps)
    assert e["next_step_block_size"] == 512 and e["next_step_occupancy"] == 1.0
    # case.toml: ceil(1081344 / 512) = 2112 CTAs, 4 x 132 = 528 per wave: 4 waves
    assert e["waves"] == 4.0
    assert "occupancy 25% (16 of 64 warps per SM, 4 blocks), limited by shared memory" in (
        f.message
    )
    # the other way: 5 blocks need (233472 // 5) // 128 * 128 - 1024 = 45568 B per block,
    # 20 warps (31 %)
    assert (233472 // 5) // 128 * 128 - 1024 == 45568
    assert "use a block of 512, 1024 threads (100%)" in f.message
    assert "use at most 45568 bytes of shared memory per block" in f.message and "(31%)" in (
        f.message
    )


def test_lut_big_estimate_saturates_at_half_occupancy():
    _, (f,) = ga101(LUT, "lut_big")
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    assert est.speedup == 2.0  # min(1.0, 0.5) / min(0.25, 0.5)
    # no trace here: the launch roofline and the CTAs' repeated work are not known
    assert est.inputs == {
        "occupancy_before": 0.25,
        "occupancy_after": 1.0,
        "saturation_occupancy": 0.5,
        "occupancy_ratio": 2.0,
        "amortised_ratio": 1.0,
        "repeated_requests_per_cta": 0.0,
        "partitioned_requests_per_cta": 0.0,
    }
    _, (g,) = ga101(LUT, "lut_big", saturation_occupancy=1.0)
    assert g.estimated_speedup.speedup == 4.0  # 1.0 / 0.25


def test_lut_big_bound_counts_the_table_every_cta_stages():
    # traced: each 128-thread CTA loads the 48 KB table in 12288 / 32 = 384 warp requests that
    # every CTA makes, and 4 x 4 warps x (in, out) = 32 of its own; 512-thread blocks make 4x
    # fewer CTAs: 2112 x 416 / (528 x 384 + 2112 x 32) = 3.25 (measured 4.84x on the H200)
    a = analyze(LUT, "lut_big", 8)
    (f,) = run_rule(a, "GA101")
    est = f.estimated_speedup
    assert est.inputs["repeated_requests_per_cta"] == 384.0
    assert est.inputs["partitioned_requests_per_cta"] == 32.0
    assert est.inputs["amortised_ratio"] == pytest.approx(3.25)
    # Little's law: 4x the warps if the launch model finds the launch latency-bound (or bound
    # by its dependent chains), else 0.5 / 0.25
    occ = 4.0 if est.inputs["bound_by_before"] in ("latency", "dependency") else 2.0
    rule = est.inputs["rule_speedup"]
    assert rule == pytest.approx(occ * 3.25, abs=1e-3)
    assert "3.25x" in est.method and "Left out" in est.method
    # on the launch model (issue 29): the rule's speedup of the kernel's work, the launch floor
    # (2.8 us) staying: T / (floor + (T - floor) / S)
    t, floor = est.inputs["launch_us"], est.inputs["floor_us"]
    assert floor == pytest.approx(2.8)
    assert est.speedup == pytest.approx(t / (floor + (t - floor) / rule), abs=1e-3)
    assert 4.84 <= est.speedup < rule  # measured 4.84x on the H200


def test_lut_big_variant_is_a_block_size_launch_covering_the_same_threads():
    a, (f,) = ga101(LUT, "lut_big")
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None and not v.nvcc_flags
    # 2112 CTAs x 128 threads = 528 x 512
    assert v.launch == {"block": [512, 1, 1], "grid": [528, 1, 1]}
    assert 528 * 512 == a.waves.total_ctas * 128
    # the launch it proposes reaches 100 % and silences the rule
    b, found = ga101(LUT, "lut_big", {"block": "512", "grid": "528"})
    assert b.occupancy.occupancy == 1.0 and found == []


def test_lut_small_is_silent():
    a, found = ga101(LUT, "lut_small")
    # 8 KB + 1 KB per block: 25 blocks by shared memory, 16 by the warps: 64 warps
    assert a.occupancy.occupancy == 1.0 and found == []


def test_max_occupancy_is_honoured():
    assert ga101(LUT, "lut_big", max_occupancy=0.25)[1] == []  # 0.25 is not below 0.25
    (f,) = ga101(LUT, "lut_big", max_occupancy=0.26)[1]
    assert next(x for x in f.evidence if x.metric == "occupancy").threshold == 0.26


def test_a_grid_of_one_partial_wave_is_silent():
    # 100 CTAs < 528 per wave: every CTA is resident at once, more room per SM runs nothing
    a, found = ga101(LUT, "lut_big", {"grid": "100"})
    assert a.occupancy.occupancy == 0.25 and found == []
    # one CTA more than a wave: reported
    assert len(ga101(LUT, "lut_big", {"grid": "529"})[1]) == 1


# ---------------------------------------------------------------------------------------------
# Registers: moments keeps 32 running sums in 48 registers per thread


def test_moments_is_limited_by_registers():
    # 48 registers x 32 lanes = 1536 per warp (a multiple of 256): 16384 // 1536 = 10 warps per
    # sub-partition, 40 per SM = 5 blocks of 8 warps: 62.5 %. 40 registers: 1280 per warp,
    # 12 x 4 = 48 warps, 6 blocks: 75 %. 41 to 47 registers round up to 1536 again.
    assert (16384 // 1536) * 4 == 40 and (16384 // 1280) * 4 == 48
    a, found = ga101(SPILLS, "moments", {"grid": "1320"}, max_occupancy=0.7)
    assert a.kernel.resources.registers == 48
    (f,) = found
    e = ev(f)
    assert e["occupancy"] == 0.625 and e["active_warps_per_sm"] == 40
    assert e["limiter"] == "registers"
    assert e["next_step_registers"] == 40 and e["next_step_occupancy"] == 0.75
    assert e["waves"] == 2.0  # 1320 CTAs, 5 x 132 = 660 per wave
    # no block size does better with 48 registers: 40 warps is the register limit
    assert "next_step_block_size" not in e
    # the 40-register cap is under the live-register floor (41 live at the peak + the 2 ptxas
    # reserves, issue 33): it is not even built, nothing is proposed, the finding is a note
    # saying why occupancy stays, with no speedup (issue 27)
    assert f.severity == "note" and f.details.refused and f.details.below_floor
    assert a.registers.peak == 41 and f.details.floor == 43
    assert (
        "nothing at the launch raises it; a cap of 40 registers per thread is under the "
        "live-register floor of 43 (41 live at line" in f.message
    )
    assert f.details.spill_bytes_after is None  # not built
    assert f.estimated_speedup.kind == "none" and f.estimated_speedup.speedup is None
    # asked to build it anyway: ptxas's spills for the capped build are reported
    (h,) = ga101(SPILLS, "moments", {"grid": "1320"}, max_occupancy=0.7,
                 build_caps_below_floor=True)[1]  # fmt: skip
    assert h.severity == "note" and h.details.refused and not h.details.below_floor
    assert "nothing at the launch raises it; a cap of 40 registers per thread spills" in h.message
    (g,) = ga101(SPILLS, "moments", {"grid": "1320"}, max_occupancy=0.7, saturation_occupancy=1)[1]
    assert g.severity == "note" and g.estimated_speedup.speedup is None


def test_moments_register_cap_that_spills_is_not_proposed():
    # built although under the live-register floor (asked): it spills, and it says how much
    a, (f,) = ga101(
        SPILLS, "moments", {"grid": "1320"}, max_occupancy=0.7, build_caps_below_floor=True
    )
    b, found = ga101(SPILLS, "moments", {"grid": "1320", "maxrregcount": 40}, max_occupancy=0.7)
    assert b.kernel.resources.registers <= 40
    assert b.occupancy.active_warps_per_sm == 48 and found == []
    k = occ.KernelResources(threads_per_block=256, regs_per_thread=40)
    assert occ.max_active_blocks(b.device, k).active_blocks_per_sm == 6
    # the 40-register build spills (8 bytes stored, 8 loaded): no flag is proposed
    spilled = b.kernel.resources.spill_store_bytes + b.kernel.resources.spill_load_bytes
    assert spilled > 0 and f.details.spill_bytes_after == spilled
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.nvcc_flags == ()
    assert f"{spilled} bytes of spill stores and loads" in v.description


def test_a_kernel_with_launch_bounds_is_never_told_to_use_maxrregcount(tmp_path):
    src = tmp_path / "bounded.cu"
    src.write_text(
        SPILLS.read_text().replace(
            'extern "C" __global__ void moments(',
            'extern "C" __global__ void __launch_bounds__(256) moments(',
        )
    )
    (tmp_path / "case.toml").write_text(
        (SPILLS.parent / "case.toml").read_text().replace("spills.cu", "bounded.cu")
    )
    a, (f,) = ga101(src, "moments", {"grid": "1320"}, max_occupancy=0.7)
    assert (f.details.max_threads, f.details.min_blocks) == (256, None)
    # under the live-register floor: neither bound nor flag, nothing built
    assert f.details.below_floor and f.variant.nvcc_flags == ()
    assert "__launch_bounds__(256," not in f.variant.description
    a, (f,) = ga101(
        src, "moments", {"grid": "1320"}, max_occupancy=0.7, build_caps_below_floor=True
    )
    # the bound rewritten to (256, 6) was built: it spills as the flag does
    assert f.details.spill_bytes_after and f.details.spill_bytes_after > 0
    assert f.variant.nvcc_flags == () and "-maxrregcount=40 nor" in f.variant.description


def test_launch_bounds_are_read_from_the_ptx_directives():
    import importlib

    mod = importlib.import_module(type(_rule("GA101")).__module__)
    ptx = (
        ".visible .entry k(\n.param .u64 p\n)\n.maxntid 128, 2, 1\n.minnctapersm 3\n{\nret;\n}\n"
        ".visible .entry j(\n.param .u64 p\n)\n{\nret;\n}\n"
    )
    assert mod.launch_bounds(ptx, "k") == (256, 3)
    assert mod.launch_bounds(ptx, "j") == (None, None)
    assert mod.launch_bounds(ptx, "missing") == (None, None)


def _rule(rule_id: str) -> Any:
    from gpuadvise.rules.registry import load_registry

    return load_registry().find(rule_id)


def test_moments_is_silent_by_default_and_in_one_wave():
    # 62.5 % is above the default 50 %
    assert ga101(SPILLS, "moments", {"grid": "1320"})[1] == []
    # spills case.toml: 660 CTAs, exactly one wave at 5 blocks per SM
    a, found = ga101(SPILLS, "moments", max_occupancy=0.7)
    assert a.waves.total_ctas == a.waves.ctas_per_wave == 660 and found == []


def test_block_launch_resizes_x_or_a_2d_blocks_y():
    """The same threads in blocks of another size: x resized (the grid's x covering as many
    threads), or for a 2-D block whose columns a tile fixes, y (FDTD3d's 32x16 blocks on a
    12x24 grid: 32x8 blocks on 12x48)."""
    from types import SimpleNamespace

    from gpuadvise.rules.occupancy_steps import block_launch

    def ctx(grid: tuple[int, int, int], block: tuple[int, int, int]) -> Any:
        dims = SimpleNamespace(grid=SimpleNamespace(as_tuple=lambda: grid),
                               block=SimpleNamespace(as_tuple=lambda: block))  # fmt: skip
        return SimpleNamespace(launch=dims)

    fdtd = ctx((12, 24, 1), (32, 16, 1))
    assert block_launch(fdtd, 256) == ((24, 24, 1), (16, 16, 1))
    assert block_launch(fdtd, 256, "y") == ((12, 48, 1), (32, 8, 1))
    assert block_launch(fdtd, 192, "y") == ((12, 64, 1), (32, 6, 1))
    assert block_launch(fdtd, 48, "y") is None  # not a multiple of the 32 columns
    assert block_launch(ctx((100, 1, 1), (256, 1, 1)), 512, "y") is None  # no y to resize
