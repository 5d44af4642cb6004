"""GA208 contended-global-atomics (nvcc, no GPU): kernels/global_atomics/atomics.cu, three
spellings of global atomics that pile on one address (every thread adding to one float, one
atomic per CTA over many CTAs through a macro, seven histogram bins in a template's grid-stride
loop), reported at their ``// expect: GA208`` lines with the updates the L2 applies in turn;
one address per thread and the fix (one atomic per CTA of one wave) stay silent. The counts are
derived by hand from small launches traced whole. The fix is automatic where the lanes of a
request share the address (the fix kit's warp aggregation: the outputs over the whole launch on
the CPU emulator equal the kernel's) and where a grid-stride kernel makes one atomic per CTA
(one wave of CTAs); a helper function's atomic is reported at its call in the kernel."""

from __future__ import annotations

import pytest
from rulekit import KERNELS, analyze, compiled, ev, kernel_case, run_rule, source_line

from gpuadvise.rules import HotAddress, update_ns

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "global_atomics" / "atomics.cu"


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("grid_sum", "atomicAdd(sum, x[i]);"),
        ("cta_partials", "ACCUMULATE(result, s);"),
        ("letter_bins", "atomicAdd(bins + c / WIDTH, 1);"),
        ("slot_max", "keep_max(slots, keys[i / 4]);"),
        ("col_sums", "atomicAdd(&colsum[j], m[j * rows + r]);"),
        ("col_sums_pair", "ADD_COL(db, j, v); ADD_COL(dw, j, v * x[j * rows + r]);"),
        ("col_squares", "add_square(sums, j, m[j * rows + r]);"),
    ],
)
def test_contended_global_atomics_reported(kernel, marker):
    (f,) = run_rule(analyze(SRC, kernel, 8), "GA208", trace_ctas=8)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["serial_share"] >= 0.2
    assert e["serial_us"] > e["rest_of_launch_us"] * 0.2
    # cta_partials reduces within the CTA already: the advice is fewer CTAs, not a reduction
    once = kernel == "cta_partials"
    assert ("one atomic already" if once else "one thread per CTA") in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup > 1.0
    assert est.inputs["updates_after"] < est.inputs["updates_before"]
    # the lanes of a request on one address: warp aggregation, automatic (one per CTA: not)
    auto = kernel != "cta_partials"
    assert f.variant is not None
    assert f.variant.safety == ("automatic-and-verified" if auto else "display-only")


@pytest.mark.parametrize("kernel", ["scatter_add", "grid_sum_one_wave", "col_sums_cta"])
def test_silent(kernel):
    assert run_rule(analyze(SRC, kernel, 8), "GA208", trace_ctas=8) == []


def test_a_grid_sum_counts_every_lane_on_one_address():
    """grid_sum over 16 CTAs of 256 threads, all traced: 4,096 float adds of `sum`, 32 lanes a
    request; the fix (warp aggregation, the variant) leaves one per warp (128); 1.76 ns each
    (an H200's float add)."""
    a = analyze(SRC, "grid_sum", 16, args=("n=4096",), grid="16")
    (f,) = run_rule(a, "GA208", trace_ctas=16, min_share=0.0)
    e = ev(f)
    assert e["updates_of_one_address"] == 4096
    assert e["lanes_per_request"] == 32.0
    assert e["distinct_addresses"] == 1
    assert e["serial_us"] == pytest.approx(4096 * 1.76e-3, abs=0.01)
    assert "`sum`" in f.message
    est = f.estimated_speedup
    assert est is not None and est.inputs["updates_after"] == 128


def test_a_thread_per_row_adding_to_column_sums_counts_each_requests_lanes_on_one_word():
    """col_sums: 8 traced CTAs of 8 warps, each warp's 128 requests (one a column) putting its
    32 lanes on one word of the 512-byte region of `colsum`: no address takes the launch's
    updates (8,192 of 1,048,576 per word), but the L2 applies each request's 32 lanes in turn,
    32 steps a request, 1,048,576 steps over the launch's 32 CTAs at 1.76 ns; warp
    aggregation leaves one step a request."""
    (f,) = run_rule(analyze(SRC, "col_sums", 8), "GA208", trace_ctas=8)
    e = ev(f)
    assert e["lanes_per_request"] == 32.0 and e["distinct_addresses"] == 128
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "warp"
    assert est.inputs["steps_before"] == pytest.approx(32 * 32 * 8 * 128, rel=0.05)
    assert est.inputs["steps_after"] == pytest.approx(est.inputs["steps_before"] / 32, rel=0.05)
    assert e["serial_us"] == pytest.approx(est.inputs["steps_before"] * 1.76e-3, rel=0.01)
    assert "each applying its lanes on one word one after another" in f.message
    assert est.speedup > 5.0


def test_an_integer_add_ptxas_combines_counts_one_update_a_warp(tmp_path):
    """Every thread adds 1 to out[0] (a warp-uniform address): ptxas combines the warp's lanes
    (a vote, its POPC, one elected lane: UFLO), so 4 CTAs x 8 warps make 32 updates, not
    1,024."""
    src = kernel_case(
        tmp_path,
        """
        __global__ void count_all(const int* in, int* out, unsigned n) {
            unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n && in[i] != 12345) atomicAdd(&out[0], 1);
        }
        """,
        "count_all",
    )
    a = analyze(src, "count_all", 4)
    (f,) = run_rule(a, "GA208", trace_ctas=4, min_share=0.0)
    e = ev(f)
    assert e["lanes_per_request"] == 1.0
    assert e["updates_of_one_address"] == pytest.approx(32, rel=0.1)


def test_update_times_by_type():
    assert update_ns("atom.global.add.f32") == 1.76
    assert update_ns("red.global.add.u32") == 0.73
    assert update_ns("atom.global.add.s64") == 0.73


def _hot(hot_ctas: int, traced: int) -> HotAddress:
    return HotAddress(
        updates=800.0,
        addresses=1,
        hot_updates=800.0,
        hot_ctas=hot_ctas,
        lanes_per_request=32.0,
        traced_ctas=traced,
        buffer="sum",
        opcode="red.global.add.f32",
        insts=(0,),
    )


def test_a_grid_wide_address_scales_with_the_launch_a_ctas_own_does_not():
    # every traced CTA updates it: a grid-wide sum, 100x the CTAs, 100x the updates
    assert _hot(8, 8).launch_updates(100.0) == 80000.0
    assert _hot(8, 8).launch_ctas(100.0) == 800.0
    # one traced CTA of eight: an address of its own (a block's bin), as traced
    assert _hot(1, 8).launch_updates(100.0) == 800.0
    assert _hot(1, 8).launch_ctas(100.0) == 1.0


def _outputs(src, kernel, **opts):
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(src, kernel, **opts)
    launch = resolve(a.spec, parse_signature(src.read_text(), kernel.split("<")[0]))
    return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False).outputs


@pytest.mark.parametrize(
    ("kernel", "args", "out", "helper"),
    [
        ("grid_sum", ("n=4096",), "sum", "gpuadvise_warp_atomicAdd(sum, x[i]);"),
        ("letter_bins", ("n=4096",), "bins", "gpuadvise_warp_atomicAdd(bins + c / WIDTH, 1);"),
        # a helper function's atomic: reported at its call, the helper rewritten
        ("slot_max", ("n=4096",), "slots", "gpuadvise_warp_atomicMax(&slots[key & 7], key);"),
        # column sums by a thread per row: a word per step, all 32 lanes on it
        ("col_squares", ("rows=4096",), "sums", "gpuadvise_warp_atomicAdd(&sums[j], v * v);"),
    ],
)
def test_the_warp_aggregated_fix_writes_the_same_outputs(kernel, args, out, helper, tmp_path):
    """Issue 28 item 6: every lane's atomic on a few addresses (one float, seven bins of a
    template, eight slots through a helper's atomicMax) made one per warp and address by the
    fix kit; over the whole launch (16 CTAs) on the CPU emulator the outputs are the kernel's
    (the float sum within rounding) and the updates of the hot address drop to one per
    request; the estimate is the variant's (one update per warp-level request)."""
    import numpy as np

    from gpuadvise.source.patch import apply_unified_diff

    a = analyze(SRC, kernel, 16, args=args, grid="16")
    (f,) = run_rule(a, "GA208", trace_ctas=16, min_share=0.0)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    assert helper in v.diff, v.diff
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "warp"
    lanes = ev(f)["lanes_per_request"]
    assert est.inputs["updates_after"] == pytest.approx(
        est.inputs["updates_before"] / lanes, rel=0.01
    )
    for toml in SRC.parent.glob("*.toml"):  # the specs beside it (the inputs' seed)
        (tmp_path / toml.name).write_text(toml.read_text())
    new = tmp_path / SRC.name
    new.write_text(apply_unified_diff(SRC.read_text(), v.diff))
    want = _outputs(SRC, kernel, args=args, grid="16")[out]
    got = _outputs(new, kernel, args=args, grid="16")[out]
    assert np.count_nonzero(want)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5)
    else:
        assert want.tobytes() == got.tobytes()
    b = analyze(new, kernel, 16, args=args, grid="16")
    (g,) = run_rule(b, "GA208", trace_ctas=16, min_share=0.0)
    assert ev(g)["lanes_per_request"] == 1.0


def test_one_atomic_per_cta_without_a_loop_stays_display_only():
    (f,) = run_rule(analyze(SRC, "cta_partials", 8), "GA208", trace_ctas=8)
    assert f.variant is not None and f.variant.safety == "display-only"
    assert "not automatic" in f.variant.description
    # the kernel reduces within the CTA already: the advice is the work of several CTAs to
    # each, one wave of them, not a CTA reduction
    d = f.variant.description
    assert d.startswith("the kernel makes one atomic per CTA already") and "one wave" in d
    assert "reduce within each CTA first" not in d


def test_a_grid_stride_kernel_of_many_waves_gets_one_wave():
    """grid_sum_one_wave (a grid-stride loop, one atomic per CTA) launched with 65,536 CTAs:
    the launch alone is the fix, one wave of CTAs (1,056 on an H100), each looping further."""
    a = analyze(SRC, "grid_sum_one_wave", 8, spec=str(SRC.parent / "grid_sum_one_wave.toml"),
                grid="65536")  # fmt: skip
    (f,) = run_rule(a, "GA208", trace_ctas=8)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff is None
    assert v.launch == {"grid": [1056, 1, 1]}
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "wave" and est.inputs["updates_after"] == 1056


def test_a_bin_that_ctas_all_over_the_sample_update_is_scaled_to_the_launch():
    """HeCBench's bincount: 768 bins, each CTA's 256 values reaching about a third of them at
    random: the hottest bin's CTAs are fewer than half the traced ones but spread over them,
    so its updates scale to the launch; a group of neighbouring CTAs' own address does not."""
    spread = HotAddress(270336.0, 768, 422.0, 345, 1.0, 1056, "output", "atom.add.u32", (1,),
                        hot_spread=0.996)  # fmt: skip
    assert spread.grid_wide and spread.launch_updates(37.0) == pytest.approx(422.0 * 37)
    group = HotAddress(4096.0, 64, 64.0, 16, 1.0, 1056, "out", "atom.add.u32", (1,),
                       hot_spread=16 / 1056)  # fmt: skip
    assert not group.grid_wide and group.launch_updates(37.0) == 64.0


def test_a_grid_stride_loop_spelled_as_a_macro_gets_one_wave(tmp_path):
    """HeCBench's bincount: FOR_KERNEL_LOOP, a macro that loops and reads gridDim; one atomic
    per CTA over 16,384 CTAs: the launch of one wave is the fix."""
    src = kernel_case(
        tmp_path,
        """
        #define GRID_LOOP(i, lim) \\
            for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < lim; \\
                 i += gridDim.x * blockDim.x)
        __global__ void count_odd(const int* in, int* out, unsigned n) {
            __shared__ int c;
            if (threadIdx.x == 0) c = 0;
            __syncthreads();
            int mine = 0;
            GRID_LOOP(i, n) mine += in[i] & 1;
            atomicAdd(&c, mine);
            __syncthreads();
            if (threadIdx.x == 0) atomicAdd(out, c);
        }
        """,
        "count_odd",
        grid=16384,
        n=16384 * 256,
    )
    (f,) = run_rule(analyze(src, "count_odd", 8), "GA208", trace_ctas=8, min_share=0.0)
    assert f.line == source_line(src, "atomicAdd(out, c);")
    v = f.variant
    assert (
        v is not None
        and v.safety == "automatic-and-verified"
        and v.launch == {"grid": [1056, 1, 1]}
    )


BINS = KERNELS / "global_bins" / "bins.cu"


@pytest.mark.parametrize(
    ("kernel", "marker"),
    [
        ("hist_direct", "atomicAdd(&hist[min((int)(x[i] * 512.f), 511)], 1);"),
        ("hist_helpers<768>", "EACH(i, n) bump(hist, bin_of(x[i], BINS));"),
        ("hist_bytes", "t((v >> k) & 255u);"),
    ],
)
def test_bins_packed_in_a_few_regions_are_reported_by_their_region(kernel, marker):
    """kernels/global_bins: histograms of 256 to 768 bins packed in 1 to 3 KB, spelled three
    ways (one element per thread, helpers in a grid-stride macro, a functor): a bin's updates
    are few (about one lane a request), the requests reaching the lines of one 512-byte region
    many, and the L2 takes those in turn (the old model, by the hottest address alone, was
    silent here: HeCBench's bincount GLOBAL)."""
    (f,) = run_rule(analyze(BINS, kernel, 8), "GA208", trace_ctas=8)
    assert f.line == source_line(BINS, marker)
    assert "512-byte region" in f.message
    e = ev(f)
    assert e["lanes_per_request"] < 1.5
    assert e["requests_of_one_region"] * 1e-3 >= 0.2 * e["rest_of_launch_us"]
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup > 2.0
    # a copy per CTA of one wave; without a grid-stride loop the grid is kept (65,536 CTAs)
    kept = 5 if kernel in ("hist_direct", "hist_bytes") else 100
    assert est.inputs["line_requests_after"] < est.inputs["line_requests_before"] / kept
    v = f.variant
    # integer adds into bins that fit shared memory: a copy of the bins per CTA
    # (test_rule_ga208_private.py)
    assert est.inputs["fix"] == "private"
    assert v is not None and v.safety == "automatic-and-verified"


@pytest.mark.parametrize("kernel", ["hist_spread", "hist_private_wave"])
def test_bins_spread_over_many_regions_or_privatised_stay_silent(kernel):
    """65,536 bins over 256 KB: a region's requests are few (the sample's hottest region, 10
    requests where the regions average 4, is not taken at its luck); the fix, a copy of the
    bins per CTA in one wave: four requests a region per CTA."""
    assert run_rule(analyze(BINS, kernel, 8), "GA208", trace_ctas=8) == []


def test_a_request_counts_once_per_line_of_the_region_it_reaches(tmp_path):
    """Bins (7 i) mod 128 of 128 ints (one 512-byte region): each warp's 32 lanes take 32
    distinct bins over all 4 lines, so each of the 16 CTAs' 8 requests counts 4 times: 512 on
    the region (traced whole), one update of each bin per request."""
    src = kernel_case(
        tmp_path,
        """
        __global__ void stride_bins(const int* in, int* out, unsigned n) {
            unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) atomicAdd(&out[(i * 7u) % 128u], in[i] | 1);
        }
        """,
        "stride_bins",
        grid=128,
        n=16 * 256,
    )
    a = analyze(src, "stride_bins", 16, grid="16")
    (f,) = run_rule(a, "GA208", trace_ctas=16, min_share=0.0)
    e = ev(f)
    assert e["requests_of_one_region"] == 512
    assert e["lanes_per_request"] == 1.0
    assert e["distinct_addresses"] == 128
    assert f.details_as(HotAddress).region_addresses == 128


def test_a_private_histogram_over_many_waves_gets_one_wave():
    """hist_private_wave launched with 16 waves (hist_private_waves.toml): each CTA flushes its
    512 shared bins into the global ones, one request per line of a region (HeCBench's
    bincount SHARED, whose one-wave launch measured 12.3x on an H200); the grid-stride loop is
    there, so the launch alone is the fix. The one-element-per-thread histograms above reach a
    region's lines many times a CTA and stay display-only."""
    a = analyze(BINS, "hist_private_wave", 8, spec=str(BINS.parent / "hist_private_waves.toml"))
    (f,) = run_rule(a, "GA208", trace_ctas=8)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff is None
    assert v.launch == {"grid": [1056, 1, 1]}
    est = f.estimated_speedup
    assert est is not None and est.inputs["fix"] == "wave"
