"""GA205 shared-tree-to-shuffles (nvcc, no GPU): fires on the trees that finish in shared memory
(seed 003's reduce3-5, kernels in other spellings), stays silent on reduce6 (shuffles already)
and on interleaved trees (GA202's); its diff must apply, keep the block sums on the emulator and
silence the rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rulekit import KERNELS, analyze, reduction_block_sums, run_rule, source_line

from gpuadvise.source.patch import apply_unified_diff

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

REDUCE = KERNELS / "reduction" / "reduce.cu"
STYLES = Path(__file__).parent.parent / "cuda" / "reductions"


@pytest.mark.parametrize("kernel", ["reduce3", "reduce4", "reduce5"])
def test_fires_and_the_diff_keeps_the_sums(kernel, tmp_path):
    a = analyze(REDUCE, kernel, sample_ctas=2, trace=False)
    (f,) = run_rule(a, "GA205")
    assert "distances 32, 16, 8, 4, 2, 1" in f.message
    v = f.variant
    assert v.safety == "automatic-and-verified" and "__shfl_down_sync" in v.diff
    (tmp_path / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    patched = tmp_path / "reduce.cu"
    patched.write_text(apply_unified_diff(REDUCE.read_text(), v.diff))
    b = analyze(patched, kernel, sample_ctas=4, trace=False)
    assert run_rule(b, "GA205") == [] and run_rule(b, "GA203") == []
    got, want = reduction_block_sums(b, 4, 512 if kernel != "reduce3" else 256)
    np.testing.assert_array_equal(got, want)


def test_reported_at_the_combine_of_distance_32():
    a = analyze(REDUCE, "reduce3", sample_ctas=1, trace=False)
    (f,) = run_rule(a, "GA205")
    reduce3 = source_line(REDUCE, "void reduce3(")
    assert f.line == reduce3 + 7  # `if (tid < s) sdata[tid] += sdata[tid + s];` in its loop


@pytest.mark.parametrize("kernel", ["reduce1", "reduce2", "reduce6<256>", "reduce7<256>"])
def test_silent(kernel):
    assert run_rule(analyze(REDUCE, kernel, sample_ctas=1, trace=False), "GA205") == []


@pytest.mark.parametrize(
    ("kernel", "spec", "rules"),
    [
        ("tpl_interleaved<256>", "tpl_interleaved", {"GA202"}),
        ("helper_sequential", "helper_sequential", {"GA204", "GA205"}),
        ("tpl_loop_tail<256>", "tpl_loop_tail", {"GA203", "GA205"}),
    ],
)
def test_other_spellings(kernel, spec, rules):
    a = analyze(STYLES / "styles.cu", kernel, sample_ctas=2, spec=str(STYLES / f"{spec}.toml"))
    got = {f.rule for r in ("GA202", "GA203", "GA204", "GA205") for f in run_rule(a, r)}
    assert got == rules
    for f in run_rule(a, "GA205"):  # the helper accessor and the loop tail are rewritten
        assert f.variant.safety == "automatic-and-verified"
