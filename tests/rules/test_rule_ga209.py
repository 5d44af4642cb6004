"""GA209 shared-scan-to-shuffles (nvcc, no GPU): kernels/scan/scans.cu's scans in four spellings
(cuda-samples' padded Hillis-Steele over a volatile pointer, a double-buffered template through
a lambda, Blelloch's work-efficient scan through index macros, radixsort's racy warp scan) are
found once each at their first step's store, with the barriers each costs and an estimate on the
execution model (none for the race: a correctness fix, rewritten with shuffles:
test_rule_ga209_warp.py; none for Blelloch's, whose bound the model does not keep); a scan in
a helper function is reported in the helper, its call named; the shuffle scan, a shuffle scan
whose warps' totals are scanned in shared memory by one warp, a bitonic sort and a tree
reduction stay silent."""

from __future__ import annotations

import textwrap

import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "scan" / "scans.cu"

# kernel: (the text of its marked line, its kind in the message, barriers a scan)
FIRES = {
    "hillis_volatile": ("s[pos] = t;  // expect: GA209", "Hillis-Steele", 16),
    "hillis_tmpl<256>": ("buf[1 - src][t] = t >= d ?", "Hillis-Steele", 8),
    "blelloch": ("temp[BI(offset, t)] += temp[AI(offset, t)];", "Blelloch", 18),
    "warp_scan_racy": ("s[idx] += s[idx - 1];", "a race since Volta", 0),
}


@pytest.mark.parametrize("kernel", sorted(FIRES))
def test_each_spelling_is_found_once_at_its_first_step(kernel):
    marked, kind, barriers = FIRES[kernel]
    (f,) = run_rule(analyze(SRC, kernel, 2), "GA209")
    assert f.line == source_line(SRC, marked)
    assert kind in f.message and "__shfl_up_sync" in f.message
    e = ev(f)
    assert e["barriers_per_scan"] == barriers and e["steps_below_a_warp"] == 5
    assert f.variant is not None
    # the racy warp scan and Blelloch's are rewritten (test_rule_ga209_warp.py,
    # test_rule_ga209_blelloch.py); a Hillis-Steele block scan is advice
    rewritten = kernel in ("warp_scan_racy", "blelloch")
    assert f.variant.safety == ("automatic-and-verified" if rewritten else "display-only")
    est = f.estimated_speedup
    assert est is not None
    if kernel == "warp_scan_racy":
        assert est.kind == "none" and "correctness" in est.method
    elif kind == "Blelloch":
        # the launch model's bound is not kept for a work-efficient scan (HeCBench's measured
        # 2.22x and 3.57x on an H200 over bounds of 1.52x and 1.24x): none, the model's
        # figures kept in the method and the inputs
        assert est.kind == "none" and est.speedup is None
        assert est.method.startswith("not estimated: the launch model misses")
        assert f"{barriers} barriers made 2" in est.method
        assert est.inputs["model_bound"] >= 1.0 and "point_speedup" in est.inputs
        assert est.inputs["barriers_after"] == 2
    else:
        assert est.kind == "upper-bound" and est.speedup is not None and est.speedup >= 1.0
        assert f"{barriers} barriers made 2" in est.method
        assert est.inputs["barriers_after"] == 2


def test_the_blelloch_scan_counts_its_down_sweep():
    (f,) = run_rule(analyze(SRC, "blelloch", 2), "GA209")
    assert "9 up-sweep steps" in f.message and "9 down-sweep steps" in f.message
    assert "6 up-sweep steps by at most one warp" in f.message


@pytest.mark.parametrize("kernel", ["shuffle_scan", "shuffle_then_totals", "bitonic"])
def test_silent(kernel):
    assert run_rule(analyze(SRC, kernel, 2), "GA209") == []


def test_silent_on_a_tree_reduction():
    reduce = KERNELS / "reduction" / "reduce.cu"
    assert run_rule(analyze(reduce, "reduce3", 1), "GA209") == []


HELPER = """\
    #define THREADS 128
    __device__ unsigned scan1(unsigned v, volatile unsigned* s) {
        unsigned pos = 2 * threadIdx.x - (threadIdx.x & (THREADS - 1));
        s[pos] = 0;
        pos += THREADS;
        s[pos] = v;
        for (unsigned offset = 1; offset < THREADS; offset <<= 1) {
            __syncthreads();
            unsigned t = s[pos] + s[pos - offset];
            __syncthreads();
            s[pos] = t;
        }
        return s[pos] - v;
    }
    __global__ void scan_helper(const unsigned* in, unsigned* out, unsigned n) {
        __shared__ unsigned s_data[2 * THREADS];
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        unsigned r = scan1(i < n ? in[i] : 0u, s_data);
        if (i < n) out[i] = r;
    }
"""


def test_a_scan_in_a_helper_is_reported_there(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(textwrap.dedent(HELPER))
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "scan_helper"\ngrid = 8\nblock = 128\nseed = 1\n\n'
        '[args]\nn = 1024\n\n[buffers]\nin = "unsigned int[n]"\n'
        'out = { type = "unsigned int", count = "n", fill = "zeros" }\n'
    )
    (f,) = run_rule(analyze(src, "scan_helper", 1), "GA209")
    assert f.line == source_line(src, "s[pos] = t;")
    call = source_line(src, "unsigned r = scan1(")
    assert ev(f)["call_site_line"] == call and f"called at line {call}" in f.message
    assert "7 steps (distances 1, 2, 4, 8, 16, 32, 64)" in f.message
    assert "14 barriers a scan" in f.message


def test_the_fix_scans_like_the_kernels_it_replaces():
    """The docstring's fix (``shuffle_scan``) computes the inclusive scan of each CTA's values
    that ``hillis_volatile`` computes (on the emulator, the first two CTAs, the same inputs)."""
    a = analyze(SRC, "hillis_volatile", 2)
    b = analyze(SRC, "shuffle_scan", 2)
    want, got = a.memory.outputs["out"][:512], b.memory.outputs["out"][:512]
    assert want[255] > 0 and (want[1:256] >= want[:255]).all()
    assert got.tobytes() == want.tobytes()
