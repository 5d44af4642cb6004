"""GA108 idle-ctas on kernels/idle_ctas (nvcc, CPU emulator, the H100 model): a band of 1024
columns (4 CTAs of 256 threads) launched with 3200 CTAs in three spellings of the guard (written
out, a macro, a template helper) is reported with the 4 working CTAs (and GA102 leaves the
launch's waves of idle CTAs to it); the same kernel launched with the CTAs its band needs, and a
grid-stride loop whose CTAs all work, and a search that computes in registers and stores only
on a match (HeCBench md5hash's shape), stay silent."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, run_rule

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

IDLE = KERNELS / "idle_ctas" / "idle.cu"


def ga108(kernel: str, spec: str | None = None, rule: str = "GA108") -> list:
    a = analyze(IDLE, kernel, spec=str(IDLE.parent / (spec or f"{kernel}.toml")))
    return run_rule(a, rule)


@pytest.mark.parametrize(
    "kernel,spec", [("band_guard", "case.toml"), ("band_macro", None), ("band_template", None)]
)
def test_a_grid_sized_past_the_band_is_reported(kernel: str, spec: str | None):
    (f,) = ga108(kernel, spec)
    e = ev(f)
    assert e["total_ctas"] == 3200 and e["working_ctas"] == 4
    assert e["working_share"] == round(4 / 3200, 6)
    assert "about 4 of the launch's 3200 CTAs" in f.message
    assert f"void {kernel}(" in IDLE.read_text().splitlines()[f.line - 1]  # the declaration
    est = f.estimated_speedup
    assert est.kind == "upper-bound" and est.speedup >= est.inputs["point_speedup"] > 1.0
    # 3196 idle CTAs launched and retired against 4: more than the floor-bound launch keeps
    assert est.inputs["total_ctas"] == 3200 and est.inputs["working_ctas"] == 4
    assert f.variant is not None and f.variant.safety == "display-only"
    assert "launch about 4 CTAs" in f.variant.description


def test_the_waves_of_idle_ctas_are_no_tail_effect():
    # 3200 CTAs are 3.03 waves of 1056: GA102's tail, but 3196 of them are idle (GA108's)
    assert ga108("band_guard", "case.toml", rule="GA102") == []


@pytest.mark.parametrize("kernel", ["band_sized", "band_stride", "search"])
def test_launches_whose_ctas_work_are_silent(kernel: str):
    assert ga108(kernel) == []
