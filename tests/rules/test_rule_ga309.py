"""GA309 redundant-global-loads (nvcc, no GPU): kernels/redundant/reloads.cu, three spellings of a
thread loading a global value it already has (k-means' features reloaded for every cluster, llm.c's
AdamW reading back what it stored through macros, a loop bound read through a pointer that a store
may alias, in a template), reported at their ``// expect: GA309`` lines with the loads per address
counted by hand; the fixes and look-alikes stay silent (features in registers, each value loaded
once, distinct addresses, a value re-read after another thread stored it across a barrier), and
so do the loads of an accumulation in global memory (GA308's)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rulekit import KERNELS, analyze, ev, run_rule, source_line

from gpuadvise.analyze.evaluate import rule_context
from gpuadvise.rules import same_thread_reloads
from gpuadvise.rules.config import Config

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

SRC = KERNELS / "redundant" / "reloads.cu"
SPECS = {
    "membership": "case.toml",
    "adam_step": "adam_step.toml",
    "scale_columns<1>": "scale_columns.toml",
    "membership_registers<16>": "membership_registers.toml",
    "read_once": "read_once.toml",
    "distinct_reads": "distinct_reads.toml",
    "exchange": "exchange.toml",
}
CTAS = 8


def _analysis(kernel: str):
    return analyze(SRC, kernel, CTAS, spec=str(SRC.parent / SPECS[kernel]))


def ga309(kernel: str, **options):
    return run_rule(_analysis(kernel), "GA309", trace_ctas=CTAS, **options)


@pytest.mark.parametrize(
    ("kernel", "marker", "loads", "why"),
    [
        # nclusters = 16: each feature loaded once per cluster
        ("membership", "dist += sq(feature[", 16, "enclosing loop"),
        # grads[i] read for m, read again after the store to m (the MOMENT macro)
        ("adam_step", "MOMENT(v, beta2,", 2, "stores to `m`"),
        # *rows read before the loop and after each of its 32 iterations
        ("scale_columns<1>", "for (int r = 0; r < *rows; r += STEP)", 33, "stores to `out`"),
    ],
)
def test_reloads_reported(kernel, marker, loads, why):
    (f,) = ga309(kernel)
    assert f.line == source_line(SRC, marker)
    e = ev(f)
    assert e["loads_per_address"] == pytest.approx(loads, rel=0.01)
    assert e["reload_share"] >= 0.1 and e["removable_load_requests"] > 0
    assert why in f.message and "register" in f.message and "__restrict__" in f.message
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup >= 1.0
    assert est.inputs["model"] == "execution"
    # a store in between: __restrict__ on the pointers (test_restrict_fix.py); none
    # (k-means' features, a run-time count): the features loaded once into registers
    # (test_rule_ga309_hoist.py)
    assert f.variant is not None and f.variant.safety == "automatic-and-verified"
    assert ("__restrict__" in f.variant.description) == ("stores to" in why)


def test_aliasing_store_named_with_its_line():
    """The bound reload: the store to `out` in between, not a read-only load (`ld.global`)."""
    (f,) = ga309("scale_columns<1>")
    line = source_line(SRC, "out[(size_t)r * pitch + col] =")
    assert f"`out` (line {line})" in f.message and "ld.global.nc" in f.message
    assert ev(f)["store_in_between"] > 0


@pytest.mark.parametrize(
    "kernel", ["membership_registers<16>", "read_once", "distinct_reads", "exchange"]
)
def test_fixes_and_lookalikes_are_silent(kernel):
    assert ga309(kernel) == []


def test_a_value_stored_by_another_thread_in_between_is_no_reload():
    """exchange: each thread loads a[i] once per step (8 steps), and a partner stores a[i]
    between every two of them: the loads are there, none is a reload."""
    ctx = rule_context(_analysis("exchange"), Config(trace_ctas=CTAS))
    view = ctx.trace_view
    a = view.buffer_names.index("a")
    kind = view.records["kind"][view.lanes.rec]
    loads = (view.lane_buffer == a) & (kind == 0)
    assert np.count_nonzero(loads) == CTAS * 128 * 8
    rl = same_thread_reloads(view)
    assert not np.any(view.lane_buffer[rl.lane] == a)


def test_below_min_share_is_silent():
    assert ga309("membership", min_share=0.9) == []


def test_accumulation_in_global_memory_is_ga308s(tmp_path):
    """A thread adding into d[i] in a loop while reading s[i] (HeCBench's interleave): the store
    to d may alias s[i], so s[i] is reloaded every iteration; GA308's fix (the sum in a register,
    stored once) removes the store that forces it: GA308 reports it, GA309 does not. The same
    for atax (the reloads of tmp[i] are the accumulation's)."""
    src = tmp_path / "k.cu"
    src.write_text(
        "__global__ void acc(const float* s, float* d, int n) {\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    for (int j = 0; j < n; j++) d[i] += s[i] * j;\n"
        "}\n"
    )
    (tmp_path / "case.toml").write_text(
        'source = "k.cu"\nkernel = "acc"\ngrid = 1056\nblock = 128\n[args]\nn = 32\n'
        '[buffers]\ns = "float[135168]"\nd = { type = "float", count = 135168, fill = "zeros" }\n'
    )
    a = analyze(src, "acc", CTAS)
    assert run_rule(a, "GA309", trace_ctas=CTAS) == []
    assert [f.rule for f in run_rule(a, "GA308", trace_ctas=CTAS)] == ["GA308"]
    atax = KERNELS / "accumulate" / "accumulate.cu"
    b = analyze(atax, "atax_rows", CTAS, spec=str(atax.parent / "case.toml"))
    assert run_rule(b, "GA309", trace_ctas=CTAS) == []


TWO_PASS = """
__global__ void normalise(const float* in, float* out, int n) {
    const float* row = in + (size_t)blockIdx.x * n;
    float m = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, row[j]);
    __shared__ float s[256];
    s[threadIdx.x] = m;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + k]);
        __syncthreads();
    }
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        out[(size_t)blockIdx.x * n + j] = row[j] / s[0];
}
"""


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """TWO_PASS and PASSES written once for the module, each compiled once for the tests that
    launch it with specs of their own (``spec=``), not once per test (a kernel's path is part of
    the compile cache's key)."""
    folder = tmp_path_factory.mktemp("ga309-sources")
    (folder / "k.cu").write_text(TWO_PASS)
    (folder / "p.cu").write_text(PASSES)
    return {"normalise": folder / "k.cu", "row_passes": folder / "p.cu"}


@pytest.mark.parametrize(("n", "misses"), [(32768, True), (16384, True), (1024, False)])
def test_a_second_pass_costs_l2_sectors_when_the_rows_outgrow_the_l1(tmp_path, n, misses, sources):
    """A row read twice by a CTA of 256 threads (8 resident per SM): 64 KB rows are 512 KB an SM
    between the two reads, more than the L1, so the second pass is counted at the L2 before the
    change; 4 KB rows (32 KB an SM) stay in the L1. At 128 KB (128 values a thread, more than
    its registers hold, read by coalesced requests: llm.c's softmax_forward_kernel4) the advice
    is to fuse the passes."""
    src = sources["normalise"]
    rows = 1056 if n < 32768 else 264
    (tmp_path / "case.toml").write_text(
        f'kernel = "normalise"\ngrid = {rows}\nblock = 256\n[args]\nn = {n}\n'
        f'[buffers]\nin = "float[{rows * n}]"\n'
        f'out = {{ type = "float", count = {rows * n}, fill = "zeros" }}\n'
    )
    a = analyze(src, "normalise", 4, spec=str(tmp_path / "case.toml"))
    (f,) = run_rule(a, "GA309", trace_ctas=4)
    assert f.line == source_line(src, "row[j] / s[0]")
    # 64 values a thread, far apart: a pass over the row, which no register holds
    assert ("a pass before" in f.message) == misses
    e = ev(f)
    assert e["loads_per_address"] == pytest.approx(2.0)
    assert (e["l2_sectors_of_reloads"] > 0) == misses
    assert ("fuse the passes" in f.message) == (n > 16384)
    est = f.estimated_speedup
    assert est is not None and est.kind == "point" and est.speedup >= 1.0


PASSES = """extern "C" __global__ void row_passes(const float* in, float* out, int rows, int len) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (size_t)r * len;
    float m = row[0];
    for (int j = 1; j < len; ++j) m = fmaxf(m, row[j]);
    float s = 0.0f;
    for (int j = 0; j < len; ++j) s += __expf(row[j] - m);
    for (int j = 0; j < len; ++j) out[(size_t)r * len + j] = __expf(row[j] - m) / s;
}
"""


@pytest.mark.parametrize(("length", "reported"), [(256, False), (24, True)])
def test_a_second_pass_over_more_values_than_registers_hold_is_not_reported(
    length, reported, tmp_path, sources
):
    """A thread per row walking it three times (max, sum, normalise: HeCBench's softMax at 784
    values a thread, the course's at 1024): 256 values a thread cannot be "loaded once" into
    registers, so GA309 is silent (the fix is a warp per row or fused passes); 24 a thread can
    (softMax2's lanes), and it is reported."""
    src = sources["row_passes"]
    (tmp_path / "case.toml").write_text(
        f"block = 64\ngrid = 16\n[args]\nrows = 1024\nlen = {length}\n"
        '[buffers]\nin = "float[rows*len]"\nout = "float[rows*len]"\n'
    )
    a = analyze(src, "row_passes", 4, spec=str(tmp_path / "case.toml"))
    found = run_rule(a, "GA309", trace_ctas=4)
    assert bool(found) is reported, [f.message for f in found]
    if reported:
        assert "a pass before" in found[0].message


SCRATCH = """
__global__ void scratch_pass(const float* in, float* out, float* scratch, int n, int m) {
    const float* row = in + (size_t)blockIdx.x * n;
    float t = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) t += row[j];
    for (int j = threadIdx.x; j < m; j += blockDim.x) STORE(scratch + (size_t)blockIdx.x * m + j, t);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        out[(size_t)blockIdx.x * n + j] = row[j] * t;
}
"""


@pytest.mark.parametrize(("store", "misses"), [("*(p) = (v)", True), ("__stcs(p, v)", False)])
def test_evict_first_stores_in_between_push_no_row_out(tmp_path, store, misses):
    """A 4 KB row read twice by its CTA with 64 KB written in between (512 KB an SM at 8 CTAs,
    more than the L1): plain stores push the row out (its second pass counted at the L2),
    `__stcs` (evict-first, `st.global.cs`) ones do not: the caches give their lines up first
    (HeCBench's layernorm kernel 2, which streams its output past the row it re-reads)."""
    src = tmp_path / "k.cu"
    src.write_text(f"#define STORE(p, v) {store}\n" + SCRATCH)
    n, m = 1024, 16384
    (tmp_path / "case.toml").write_text(
        f'source = "k.cu"\nkernel = "scratch_pass"\ngrid = 1056\nblock = 256\n'
        f"[args]\nn = {n}\nm = {m}\n"
        f'[buffers]\nin = "float[{1056 * n}]"\nout = {{ type = "float", count = {1056 * n} }}\n'
        f'scratch = {{ type = "float", count = {1056 * m} }}\n'
    )
    (f,) = run_rule(analyze(src, "scratch_pass", 4), "GA309", trace_ctas=4)
    assert (ev(f)["l2_sectors_of_reloads"] > 0) == misses


def _varying_by_every_lane(view, rl):
    """varying_repeats as it was (issue 31): every lane's (thread, instruction, address) counted,
    not only those of the instructions that reload their own previous access."""
    from gpuadvise.arrays import distinct_rows

    lanes, lb = view.lanes, view.lane_buffer
    inside = np.flatnonzero(lb >= 0)
    threads, ninst = int(np.prod(view.block)), int(lanes.inst.max()) + 1

    def thread_inst(ix):
        t = lanes.cta[ix].astype(np.int64) * threads + lanes.tid[ix].astype(np.int64)
        return t * ninst + lanes.inst[ix].astype(np.int64)

    addr = (lb[inside].astype(np.int64) << 40) | lanes.off[inside].astype(np.int64)
    pairs, times = distinct_rows([thread_inst(inside), addr], return_counts=True)
    keys, first = np.unique(pairs[0], return_index=True)
    uneven = np.maximum.reduceat(times, first) > np.minimum.reduceat(times, first)
    at = np.minimum(np.searchsorted(keys, thread_inst(rl.lane)), len(keys) - 1)
    return (lanes.inst[rl.lane] == lanes.inst[rl.prev]) & uneven[at]


@pytest.mark.parametrize("kernel", ["membership", "scale_columns<1>", "adam_step"])
def test_varying_repeats_of_the_reloading_instructions_alone_is_every_lanes(kernel):
    """varying_repeats counts only the lanes of the instructions that reload their own previous
    access (none on most kernels: then no sort at all); the same answer as every lane counted."""
    from gpuadvise.rules.repeats import varying_repeats

    view = rule_context(_analysis(kernel), Config(trace_ctas=CTAS)).trace_view
    rl = same_thread_reloads(view)
    assert len(rl)
    # the lane indices and gaps held through the rule in int32 (issue 31's peak memory)
    assert {rl.lane.dtype, rl.prev.dtype, rl.last_store.dtype, rl.gap.dtype} == {np.dtype(np.int32)}
    got = varying_repeats(view, rl)
    assert np.array_equal(got, _varying_by_every_lane(view, rl))
    if kernel != "adam_step":  # a loop's own load again: the restricted path, not the early exit
        assert np.any(view.lanes.inst[rl.lane] == view.lanes.inst[rl.prev])


def test_reloads_on_no_line_of_the_kernels_file_are_no_error(monkeypatch):
    """The reloads counted, all of them on lines of another file (an inlined helper of a
    header, or a source the rules cannot match to the kernel's path): GA309 reports none,
    where it raised IndexError (an error row) on its empty groups."""
    from gpuadvise.rules.context import RuleContext

    monkeypatch.setattr(RuleContext, "same_file", lambda self, file: False)
    assert ga309("scale_columns<1>") == []


@pytest.mark.parametrize("kernel", ["membership", "scale_columns<1>", "adam_step"])
def test_reloads_the_same_with_the_offsets_alignment_dropped(kernel, monkeypatch):
    """same_thread_reloads drops the offsets' common trailing zero bits from its address keys
    (issue 31: with 8 M positions beside them, HeCBench softmax's (address, thread) keys then
    pack into one int64 and sort as such, not by numpy's stable argsort): the same reloads,
    previous accesses, stores, gaps and windows as the keys at full width, and as the fallback
    sort where the keys are made too wide to pack."""
    from gpuadvise import arrays
    from gpuadvise.rules import repeats

    view = rule_context(_analysis(kernel), Config(trace_ctas=CTAS)).trace_view
    inside = view.lane_buffer >= 0
    assert repeats._alignment_bits(view.lanes.off[inside]) >= 2  # (4-byte words and wider)
    got = repeats.same_thread_reloads(view)
    monkeypatch.setattr(repeats, "_alignment_bits", lambda off: 0)
    full = repeats.same_thread_reloads(view)
    monkeypatch.setattr(arrays, "_sorted_packed", lambda a, overwrite=False: None)
    unpacked = repeats.same_thread_reloads(view)
    fields = ("lane", "prev", "after_store", "last_store", "gap", "window_sectors")
    for other in (full, unpacked):
        for f in fields:
            assert np.array_equal(getattr(got, f), getattr(other, f)), f


def test_the_alignment_bits_of_offsets():
    from gpuadvise.rules.repeats import _alignment_bits

    assert _alignment_bits(np.array([0, 4, 8, 12], np.int64)) == 2
    assert _alignment_bits(np.array([16, 48, 32], np.int64)) == 4
    assert _alignment_bits(np.array([0, 4, 6], np.int64)) == 1
    assert _alignment_bits(np.array([0, 0], np.int64)) == 0
    assert _alignment_bits(np.zeros(0, np.int64)) == 0
    off = np.array([8, 24, 40, 1 << 33], np.int64)
    assert np.array_equal(np.argsort(off >> _alignment_bits(off)), np.argsort(off))
