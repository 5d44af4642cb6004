"""GA103 block-not-warp-multiple on the blocksize case and on other launches of small kernels
(nvcc, no GPU, the H100 model): idle lanes worked out by hand, the warp-multiple launches that
stay silent, the estimate and the launches the variant proposes (which must cover the same
threads and silence the rule)."""

from __future__ import annotations

from typing import Any

import pytest
from rulekit import KERNELS, analyze, ev, run_rule

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

BLOCKSIZE = KERNELS / "blocksize" / "blocksize.cu"
TAIL = KERNELS / "tail" / "tail.cu"  # 1D: y = a * x, bounds-checked


def ga103(source: Any, kernel: str, **launch: Any) -> tuple[Any, list[Any]]:
    a = analyze(source, kernel, trace=False, **launch)
    return a, run_rule(a, "GA103")


def test_ten_by_ten_blocks():
    a, (f,) = ga103(BLOCKSIZE, "scale2d_10x10")
    assert "void scale2d_10x10(" in BLOCKSIZE.read_text().splitlines()[f.line - 1]
    # 10 x 10 = 100 threads: ceil(100 / 32) = 4 warps = 128 lanes, 28 of them idle (22 %)
    e = ev(f)
    assert e["threads_per_block"] == 100
    assert e["threads_per_block_mod_warp"] == 100 % 32 == 4
    assert e["idle_lanes_per_block"] == 28
    thr = next(x for x in f.evidence if x.metric == "threads_per_block_mod_warp")
    assert (thr.threshold, thr.op) == (0, "!=")
    assert "4 warps with 28 idle lanes (22% of the lanes scheduled)" in f.message
    # the nearby warp multiples, larger first, kept 2D: 128 = 32x4 and 96 = 32x3
    assert "(e.g. 32x4 or 32x3)" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    assert est.speedup == 1.28  # 128 lanes / 100 threads
    # 32x4 blocks on a grid covering the same threads: 1.26x fewer CTAs, whose launches the
    # launch model lets fall with them (the measured 1.22x on an H200 is their effect)
    assert est.inputs == {"threads_per_block": 100, "lanes_per_block": 128, "ctas_divided_by": 1.26}


def test_variant_launches_cover_the_same_threads():
    a, (f,) = ga103(BLOCKSIZE, "scale2d_10x10")
    # case.toml: a 2048 x 2048 image, grid ceil(2048 / 10) = 205 x 205 blocks of 10 x 10
    assert a.spec.launch.grid.as_tuple() == (205, 205, 1)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    got = [(c.label, c.launch) for c in v.candidates()]
    # 205 x 10 = 2050 threads per axis: ceil(2050 / 32) = 65, ceil(2050 / 4) = 513,
    # ceil(2050 / 3) = 684
    assert got == [
        ("32x4", {"block": [32, 4, 1], "grid": [65, 513, 1]}),
        ("32x3", {"block": [32, 3, 1], "grid": [65, 684, 1]}),
    ]
    for _, launch in got:
        block, grid = launch["block"], launch["grid"]
        assert all(g * b >= 2050 for g, b in zip(grid[:2], block[:2], strict=True))


@pytest.mark.parametrize("label", ["32x4", "32x3"])
def test_the_variant_launch_silences_the_rule(label):
    _, (f,) = ga103(BLOCKSIZE, "scale2d_10x10")
    launch = next(c.launch for c in f.variant.candidates() if c.label == label)
    block, grid = launch["block"], launch["grid"]
    a, found = ga103(
        BLOCKSIZE,
        "scale2d_10x10",
        block=f"{block[0]}x{block[1]}",
        grid=f"{grid[0]}x{grid[1]}",
    )
    assert found == []
    assert a.occupancy_input.threads_per_block % 32 == 0


def test_one_dimensional_block():
    # tail.cu's case: grid ceil(337920 / 256) = 1320, here with blocks of 100 threads
    a, (f,) = ga103(TAIL, "scale_tail", block="100")
    assert ev(f)["idle_lanes_per_block"] == 28
    assert "(e.g. 128 or 96)" in f.message  # 1D: plain sizes
    v = f.variant
    # the new grid covers the 1320 x 100 = 132000 threads: ceil(132000 / 128) = 1032,
    # ceil(132000 / 96) = 1375
    assert [(c.label, c.launch) for c in v.candidates()] == [
        ("128", {"block": [128, 1, 1], "grid": [1032, 1, 1]}),
        ("96", {"block": [96, 1, 1], "grid": [1375, 1, 1]}),
    ]


def test_one_warp_and_one_thread():
    # 33 threads: 2 warps, 31 idle lanes; the sizes around it are 64 and 32
    _, (f,) = ga103(TAIL, "scale_tail", block="33")
    assert ev(f)["idle_lanes_per_block"] == 31
    assert f.estimated_speedup.speedup == round(64 / 33, 3)
    assert [c.label for c in f.variant.candidates()] == ["64", "32"]


@pytest.mark.parametrize(
    "source,kernel,launch",
    [
        (BLOCKSIZE, "scale2d_32x4", {}),  # scale2d_32x4.toml: 32 x 4
        (BLOCKSIZE, "scale2d_10x10", {"block": "16x16", "grid": "128x128"}),
        (BLOCKSIZE, "scale2d_10x10", {"block": "8x4x3", "grid": "256x171x1"}),  # 96 threads
        (TAIL, "scale_tail", {"block": "32"}),
        (TAIL, "scale_tail", {}),  # 256
    ],
)
def test_warp_multiples_are_silent(source: Any, kernel: str, launch: dict[str, str]):
    assert ga103(source, kernel, **launch)[1] == []
