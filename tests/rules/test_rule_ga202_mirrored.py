"""GA202 on trees that fold towards their highest word (nvcc, no GPU): kernels/reduction_mirrored's
three spellings (Rodinia SRAD's `(tx+1) % i == 0` with a macro size, a template up-sweep with a
strided index and no down-sweep, a bit mask on one line through an accessor in dynamic shared
memory) are found from the trace at their combine's line, the result's move to word 0 said,
and GA209 leaves them (an up-sweep with no down-sweep is no scan); the sequential fold towards
the last word stays silent, and Blelloch's scan stays GA209's, GA202 silent on it."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "reduction_mirrored" / "mirrored.cu"

# kernel: (the text of its marked line, the form, warp-iterations before and packed)
FIRES = {
    "rodinia_tree": ("psum[tx] = psum[tx] + psum[tx - i / 2];", "divergent", 47, 12),
    "upsweep_tmpl<256>": ("if (bi < B) s[bi] += s[bi - d];", "strided-index", 12, 12),
    "mask_oneliner": ("if ((t & (2 * d - 1)) == 2 * d - 1)", "divergent", 47, 12),
}


def _analysis(kernel: str):
    spec = KERNELS / "reduction_mirrored" / "mask_oneliner.toml"
    return (
        analyze(SRC, kernel, 2, spec=str(spec))
        if kernel == "mask_oneliner"
        else analyze(SRC, kernel, 2)
    )


@pytest.mark.parametrize("kernel", sorted(FIRES))
def test_each_spelling_is_found_at_its_combine(kernel):
    marked, form, before, after = FIRES[kernel]
    a = _analysis(kernel)
    (f,) = run_rule(a, "GA202")
    assert f.line == source_line(SRC, marked)
    e = ev(f)
    assert e["pattern"] == form and e["source"] == "trace" and e["steps"] == 8
    assert e["warp_iterations"] == before
    assert f.details.min_warp_iterations == after
    assert "highest word" in f.message and "word 0" in f.message
    assert f.variant is not None and f.variant.safety == "display-only"
    assert run_rule(a, "GA209") == []


def test_the_sequential_fold_towards_the_top_is_silent():
    assert run_rule(analyze(SRC, "top_sequential", 2), "GA202") == []


def test_blelloch_stays_a_scan():
    a = analyze(KERNELS / "scan" / "scans.cu", "blelloch", 2)
    assert run_rule(a, "GA202") == []
    (f,) = run_rule(a, "GA209")
    assert "down-sweep" in f.message
