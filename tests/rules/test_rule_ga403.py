"""GA403 register-pressure-peak on kernels/regpressure: three spellings of loads held across a
register-heavy loop (a declaration, a helper returning a struct, a macro in a template) get the
automatic variant that moves them next to their first use, built (80 -> 72 registers, 6 -> 7
blocks of 128 threads per H100 SM) and checked on the CPU emulator; the variant computes the
same y on a whole small launch and is itself silent; the fixed kernel and a light one are
silent; a store between the load and its use makes the advice display-only; the source move
refuses what it cannot do safely. Needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import KERNELS, analyze, compiled, ev, run_rule, source_line

import gpuadvise.rules as R
import gpuadvise.source.text as srctext
from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

CASE = KERNELS / "regpressure"
SRC = CASE / "pressure.cu"
SPELLINGS = {
    "tile_early": "const float4 s = scale[col], b = bias[col];",
    "tile_helper": "const Affine f = affine_at(scale, bias, col);",
    "tile_macro<8, 6>": "const float4 s = COLUMN(scale, col);",
}


def ga403(source: Path, kernel: str, **launch: Any) -> tuple[Any, list[R.Finding]]:
    # GA403 always reads the live registers: one nvdisasm -plr run gives them and the SASS
    a = analyze(source, kernel, trace=False, registers=True, **launch)
    return a, run_rule(a, "GA403")


@pytest.fixture(scope="module")
def found() -> dict[str, tuple[Any, list[R.Finding]]]:
    return {k: ga403(SRC, k) for k in SPELLINGS}


@pytest.mark.parametrize("kernel", sorted(SPELLINGS))
def test_the_loads_held_across_the_loop_are_found(found, kernel):
    a, fs = found[kernel]
    (f,) = fs
    assert a.kernel.resources.registers == 80 and a.occupancy.active_warps_per_sm == 24
    assert f.line == source_line(SRC, SPELLINGS[kernel] + "  // expect: GA403")
    e = ev(f)
    assert e["registers_allocated"] == 80 and e["live_registers_peak"] == a.registers.peak
    assert e["registers_freed"] >= 8 and e["warps_after"] == 28
    d = f.details
    # the floats of scale and bias (7 of the 8 are live at the first peak instruction): loaded
    # values idle at the peak, moved mechanically
    moved = [h for h in d.held if h.how == R.MOVE_LOAD and h.mechanical]
    assert 7 <= sum(len(h.registers) for h in moved) <= 8
    # from the marked line (and the next one: tile_macro loads b in a statement of its own)
    assert all(h.kind == "loaded value" and h.def_line in (f.line, f.line + 1) for h in moved)
    assert f"registers limit occupancy to 38% (24 of 64 warps per SM): {d.peak}" in f.message
    assert "of loaded values from line" in f.message
    # built here: 72 registers, 7 blocks (28 warps), the outputs equal on the emulator
    assert (d.variant_registers, d.variant_warps) == (72, 28)
    # counts in words (issue 32): "2 CTAs", no "(s)"
    assert d.verified.startswith("outputs equal over the first 2 CTAs on the CPU emulator")
    assert d.live_gpr is not None and max(d.live_gpr["gpr"]) == d.variant_peak < d.peak
    v = f.variant
    assert v.safety == "automatic-and-verified" and v.diff
    removed = [ln[1:].strip() for ln in v.diff.splitlines() if ln.startswith("-    ")]
    added = [ln[1:].strip() for ln in v.diff.splitlines() if ln.startswith("+    ")]
    assert SPELLINGS[kernel] + "  // expect: GA403" in removed and removed == added
    # an upper bound from the occupancy step: 24 -> 28 warps, under the 50 % saturation
    est = f.estimated_speedup
    assert est.kind == "upper-bound" and est.speedup == round(28 / 24, 3)


def _patched(tmp_path: Path, f: R.Finding) -> Path:
    out = tmp_path / "pressure.cu"
    shutil.copy(CASE / "case.toml", tmp_path / "case.toml")
    out.write_text(apply_unified_diff(SRC.read_text(), f.variant.diff))
    return out


def _outputs(source: Path, kernel: str) -> dict[str, np.ndarray]:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    # a small launch run whole: 3 CTAs of 128 columns, 3 steps of the k loop
    a = compiled(source, kernel, grid="3", args=("n=384", "k=2"))
    launch = resolve(a.spec, parse_signature(source.read_text(), kernel.split("<")[0]))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas="all")
    assert e.complete
    return dict(e.outputs)


@pytest.mark.parametrize("kernel", sorted(SPELLINGS))
def test_the_variant_computes_the_same_and_is_silent(found, kernel, tmp_path):
    (f,) = found[kernel][1]
    fixed = _patched(tmp_path, f)
    a, again = ga403(fixed, kernel)  # analysed first: its nvdisasm run serves the emulation's SASS
    before, after = _outputs(SRC, kernel), _outputs(fixed, kernel)
    np.testing.assert_array_equal(before["y"], after["y"])
    assert np.isfinite(before["y"]).all() and np.any(before["y"] != 0)
    assert a.kernel.resources.registers == 72 and again == []


@pytest.mark.parametrize("kernel", ["tile_late", "tile_small"])
def test_silent_kernels(kernel):
    a, fs = ga403(SRC, kernel)
    assert fs == []
    if kernel == "tile_late":
        # registers still limit occupancy (72: 7 blocks), but only the tile is held across
        # the peak: accumulators never make a finding on their own
        assert "registers" in a.occupancy.limiters and a.occupancy.occupancy < 0.5
        kinds = {v.kind for v in a.registers.values}
        assert "accumulator" in kinds
    else:
        assert a.occupancy.occupancy >= 0.5


STORE_BETWEEN = """
    for (int p = 0; p < k; ++p) {
        if (p == n) y[col] = 0.0f;  // never runs here, but the SASS stores between load and use"""


def test_a_store_between_load_and_use_makes_it_advice(tmp_path):
    src = tmp_path / "pressure.cu"
    text = SRC.read_text()
    head, tail = text.split('extern "C" __global__ void tile_helper', 1)
    head = head.replace("\n    for (int p = 0; p < k; ++p) {", STORE_BETWEEN, 1)
    src.write_text(head + 'extern "C" __global__ void tile_helper' + tail)
    shutil.copy(CASE / "case.toml", tmp_path / "case.toml")
    a, fs = ga403(src, "tile_early")
    (f,) = fs
    assert f.variant.safety == "display-only" and not f.variant.diff
    assert "writes memory between" in f.details.why_not_automatic
    assert f.details.variant_registers is None  # nothing was built


MOVES = """
__global__ void k(const float4* __restrict__ in, float* out, int n) {
    int i = threadIdx.x;
    const float4 v = in[i];
    float acc = 0.0f;
#pragma unroll 4
    for (int p = 0; p < n; ++p) acc += out[p];
    out[i] = acc + v.x;
}
"""


class _Move:
    """What move_declarations reads of a shortening: nothing but its place in the list."""


def test_the_source_move(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(MOVES)
    ks = srctext.find_kernel_source(src, "k")
    moved = R.move_declarations(ks, [_Move()], [(4, 8)])
    assert not isinstance(moved, str)
    text, lines = moved
    assert lines == [4]
    # down to the statement that first uses it
    assert text.splitlines()[3:8] == [
        "    float acc = 0.0f;",
        "#pragma unroll 4",
        "    for (int p = 0; p < n; ++p) acc += out[p];",
        "    const float4 v = in[i];",
        "    out[i] = acc + v.x;",
    ]
    # a first use in a loop: above the loop's #pragma, which stays with its loop
    text, _lines = R.move_declarations(ks, [_Move()], [(4, 7)])
    assert text.splitlines()[3:6] == [
        "    float acc = 0.0f;",
        "    const float4 v = in[i];",
        "#pragma unroll 4",
    ]
    # what it refuses
    src.write_text(MOVES.replace("    float acc = 0.0f;\n", "    float acc = 0.0f;\n    i++;\n"))
    why = R.move_declarations(srctext.find_kernel_source(src, "k"), [_Move()], [(4, 9)])
    assert why == "i, which line 4 reads, changes before line 9"
    src.write_text(MOVES.replace("float acc = 0.0f;", "float acc = v.y;"))
    why = R.move_declarations(srctext.find_kernel_source(src, "k"), [_Move()], [(4, 8)])
    assert why == "v is used before line 8"
    why = R.move_declarations(srctext.find_kernel_source(src, "k"), [_Move()], [(3, 8)])
    assert why == "i is used before line 8"
    src.write_text(MOVES)
    why = R.move_declarations(srctext.find_kernel_source(src, "k"), [_Move()], [(5, 6)])
    assert why == "line 5 is already next to its first use"


def test_the_json_document_carries_the_live_registers(found):
    from gpuadvise.analyze.report import analyze_json
    from gpuadvise.model.registers import RegisterPressure
    from gpuadvise.report.json_report import dumps

    a, fs = found["tile_early"]
    doc = analyze_json(a)
    reg = doc["registers"]
    assert (reg["peak"], reg["allocated"], reg["reserved"], reg["floor"]) == (78, 80, 2, 80)
    # one count per instruction nvdisasm tables: all but the NOPs that pad the function's end
    assert len(reg["gpr"]) == len(reg["offsets"])
    offsets = set(reg["offsets"])
    rest = [i for i in a.sass_instructions if i.offset not in offsets]
    assert offsets <= {i.offset for i in a.sass_instructions}
    assert {i.opcode for i in rest} <= {"NOP"} and min(i.offset for i in rest) > max(offsets)
    # the values at the peak, each where it is defined and last used
    loaded = [v for v in reg["values"] if v["kind"] == "loaded value" and v["idle_at_peak"]]
    assert {v["def_line"] for v in loaded} == {fs[0].line}
    again = RegisterPressure.from_dict(__import__("json").loads(dumps(doc))["registers"])
    assert again == a.registers
