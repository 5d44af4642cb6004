"""GA206 one-element-per-thread (nvcc, no GPU): the element-wise kernels of
tests/cuda/elementwise/saxpy.cu in several spellings (their ``// expect: GA206`` markers, and the
grid-stride, stencil and small-grid launches that stay silent), the per-buffer trace facts behind
it, the reductions of kernels/reduction, and the variants: every element-wise candidate (k = 1, 2,
4, 8 per thread and iteration) applies, compiles and, run on the CPU emulator over the whole
launch with a grid of a few CTAs, writes the same outputs as the kernel; the reductions'
variants (vector loads, k swept) write partials whose total is the kernel's (Variant.totals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from patchkit import Patched
from rulekit import KERNELS, analyze, compiled, ev, run_rule

import gpuadvise.rules as rule_api
import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise.source.patch import apply_unified_diff
from gpuadvise.source.signature import list_kernels

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

ELEM = Path(__file__).resolve().parents[1] / "cuda" / "elementwise"
SAXPY = ELEM / "saxpy.cu"
REDUCE = KERNELS / "reduction" / "reduce.cu"
TRACE = 8


def ga206(source: Path, kernel: str, **opts: Any) -> list[rule_api.Finding]:
    return run_rule(analyze(source, kernel, TRACE, **opts), "GA206", trace_ctas=TRACE)


def expected(source: Path, kernel: str) -> set[int]:
    ks = srctext.find_kernel_source(source, kernel)
    assert ks is not None
    first, last = ks.decl_line, ks.body_lines[1]
    return {
        line
        for line, ids in rule_registry.expectations(source).items()
        if first <= line <= last and "GA206" in ids
    }


@pytest.mark.parametrize("kernel", list_kernels(SAXPY.read_text()))
def test_markers(kernel: str) -> None:
    found = ga206(SAXPY, kernel)
    assert {f.line for f in found} == expected(SAXPY, kernel), [f.message for f in found]
    for f in found:
        e = ev(f)
        assert e["kind"] == "elementwise" and e["waves"] >= 4.0
        assert e["elements_per_thread"] == (2 if kernel == "two_per_thread" else 1)


def test_silent_on_a_small_grid() -> None:
    # 1024 CTAs: less than one wave of 256-thread CTAs on an H100 (1056)
    assert ga206(SAXPY, "saxpy", args=("n=262144",)) == []
    # and fires once the grid passes min_waves
    assert len(ga206(SAXPY, "saxpy", args=("n=1081344",))) == 1  # 4224 CTAs: 4 waves


def test_buffer_uses_from_the_trace() -> None:
    from gpuadvise.rules.registry import load_registry

    mod = type(load_registry().get("GA206")).__module__
    import sys

    buffer_uses = sys.modules[mod].buffer_uses
    a = analyze(REDUCE, "reduce4", TRACE)
    view = a.memory.view if hasattr(a.memory, "view") else None
    if view is None:
        from gpuadvise.trace.view import buffer_infos, trace_view

        view = trace_view(a.memory.trace, a.spec)
        assert buffer_infos(a.memory.trace, a.spec)
    uses = {u.name: u for u in buffer_uses(view)}
    # reduce4: two loads of `in` per thread, CTAs 512 elements apart; one partial per CTA
    assert uses["in"].per_thread_max == 2 and uses["in"].per_cta == 512
    assert not uses["in"].written
    assert uses["out"].per_block and uses["out"].written


def _apply_to(tmp: Path, name: str, source: Path, diff: str) -> Path:
    d = tmp / name.replace(" ", "_").replace("=", "")
    d.mkdir()
    for t in source.parent.glob("*.toml"):
        (d / t.name).write_text(t.read_text())
    new = d / source.name
    new.write_text(apply_unified_diff(source.read_text(), diff))
    return new


def test_reductions_get_variants_verified_as_totals(tmp_path: Path) -> None:
    from gpuadvise.runner.verify import compare, compare_totals

    (f,) = ga206(REDUCE, "reduce3")
    assert ev(f)["kind"] == "per-block"
    assert "1056 partials instead of 16384" in f.message
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified"
    cands = v.candidates()
    assert [c.label for c in cands] == [
        "int4 k=2", "int4 k=1", "int4 k=4", "int2 k=2", "k=4", "k=1", "k=2", "k=8",
    ]  # fmt: skip
    assert all(c.totals == {"out": "+"} for c in cands)
    assert all(c.launch and 1 <= c.launch["grid"][0] <= 1056 for c in cands)
    assert "16-byte aligned" in cands[0].description and "256-byte" in cands[0].description
    assert "add the gridDim.x partials" in cands[0].description
    assert cands[0].diff and "reinterpret_cast<const int4*>(in)" in cands[0].diff
    assert "ga206_sum += in[ga206_j];" in cands[0].diff  # the scalar tail
    assert cands[4].diff and "+            ga206_sum += i < n ? in[i] : 0;" in cands[4].diff
    # no bound claimed: the tree and CTA costs the loop removes are not in the roofline (the
    # H200 measured 1.6-4.7x over in-flight bounds of 1.23-1.75x); the variant is measured
    est = f.estimated_speedup
    assert est is not None and est.kind == "none" and est.speedup is None
    assert "not bounded" in est.method and est.inputs["in_flight_factor"] > 1
    # every candidate, run over its whole launch with 3 CTAs on n = 16387 elements (not a
    # multiple of the vector width: the tail loop adds 3), writes partials that add up to the
    # original's 65 block sums; element by element they differ
    n = 16387
    want = _emulate_all(REDUCE, "reduce3", -(-n // 256), n).outputs["out"]
    for c in cands:
        assert c.diff is not None
        new = _apply_to(tmp_path, c.label or "v", REDUCE, c.diff)
        got = _emulate_all(new, "reduce3", 3, n).outputs["out"]
        assert compare_totals("out", want, got, 65, 3).ok, c.label
        assert not compare("out", want, got).ok
        bad = got.copy()
        bad[1] += 1
        assert not compare_totals("out", want, bad, 65, 3).ok


SQUARES = """#define B 128
extern "C" __global__ void sumsq(const float* in, float* out, unsigned n) {
    __shared__ float s[B];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] * in[i] : 0.0f;
    __syncthreads();
    for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void maxred(const int* in, int* out, unsigned n) {
    __shared__ int s[B];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
        if (t < d) s[t] = max(s[t], s[t + d]);
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
"""


def test_vector_loads_only_where_the_load_phase_only_adds(tmp_path: Path) -> None:
    src = tmp_path / "sq.cu"
    src.write_text(SQUARES)
    kw = {"grid": "ceil_div(n, 128)", "block": "128", "args": ("n=4194304",)}
    for kernel, buf in (("sumsq", "float"), ("maxred", "int")):
        (tmp_path / "case.toml").write_text(
            f'[buffers]\nin = "{buf}[n]"\nout = {{ type = "{buf}", count = "ceil_div(n, 128)" }}\n'
        )
        (f,) = ga206(src, kernel, spec=str(tmp_path / "case.toml"), **kw)
        v = f.variant
        assert v is not None
        if kernel == "sumsq":  # squares: scalar variants only, and the finding says why
            assert v.safety == "automatic-and-verified" and v.totals == {"out": "+"}
            assert [c.label for c in v.candidates()] == ["k=4", "k=1", "k=2", "k=8"]
            assert "no vector loads" in v.description and "in[i] * in[i]" in v.description
        else:  # a max tree: refused (totals of a sum only)
            assert v.safety == "display-only" and v.totals is None
            assert "only + is rewritten" in v.description


def test_grid_stride_reduction_is_silent() -> None:
    assert ga206(REDUCE, "reduce7") == []
    assert ga206(REDUCE, "reduce_shfl", args=("n4=1048576",)) == []


def _emulate_all(source: Path, kernel: str, grid: int, n: int) -> Any:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(source, kernel, grid=str(grid), args=(f"n={n}",))
    launch = resolve(a.spec, parse_signature(source.read_text(), kernel))
    return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)


class Labelled:
    """The GA206 findings of several kernels of one file and, per candidate label, one copy of
    the file with that label's candidate of every kernel applied (:class:`patchkit.Patched`): a
    label's copy compiles once for all the kernels (the run's compile cache), not once per
    kernel and label (an nvcc run, about 0.4 CPU-s, each)."""

    def __init__(
        self, folder: Path, source: Path, findings: dict[str, list[rule_api.Finding]]
    ) -> None:
        self.findings = findings
        diffs: dict[str, dict[str, str]] = {}  # label -> kernel -> diff
        for kernel, found in findings.items():
            v = found[0].variant if len(found) == 1 else None
            for c in v.candidates() if v is not None else ():
                if c.diff is not None:
                    diffs.setdefault(c.label or "v", {})[kernel] = c.diff
        self.copies = {
            label: Patched(folder / label.replace("=", "").replace(" ", "_"), source, by_kernel)
            for label, by_kernel in diffs.items()
        }

    def file_for(self, kernel: str, c: Any) -> Path:
        """The copy of ``c``'s label, checked to hold ``kernel`` as ``c.diff`` alone makes it."""
        assert c.diff is not None
        return self.copies[c.label or "v"].check(kernel, c.diff)


VARIANT_KERNELS = [
    ("saxpy", 256),
    ("scale_return", 256),
    ("add_tpl<256>", 256),
    ("two_per_thread", 512),
]


@pytest.fixture(scope="module")
def saxpy_variants(tmp_path_factory: pytest.TempPathFactory) -> Labelled:
    """The candidates of VARIANT_KERNELS written one file per label (:class:`Labelled`)."""
    found = {kernel: ga206(SAXPY, kernel) for kernel, _ in VARIANT_KERNELS}
    return Labelled(tmp_path_factory.mktemp("saxpy_variants"), SAXPY, found)


@pytest.mark.parametrize("kernel, per_cta", VARIANT_KERNELS)
def test_variants_emulate_to_the_same_outputs(
    kernel: str, per_cta: int, saxpy_variants: Labelled
) -> None:
    (f,) = saxpy_variants.findings[kernel]
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified"
    cands = v.candidates()
    # one element per thread at the linear index, pointer parameters: float4 loads first
    vectors = ["float4 k=2", "float4 k=1"] if per_cta == 256 else []
    assert [c.label for c in cands] == [*vectors, "k=4", "k=1", "k=2", "k=8"]
    assert all(c.launch and c.launch["grid"][0] <= 1056 for c in cands)
    # not a multiple of the block (the last CTA index is partial) nor of 4 (the vector loop's
    # scalar tail adds 3 elements)
    n = 5003
    grid = -(-n // per_cta)
    want = _emulate_all(SAXPY, kernel, grid, n).outputs["y"]
    for c in cands:
        vector = (c.label or "").startswith("float4")
        assert (
            c.diff is not None
            and ("reinterpret_cast<float4*>(y)" if vector else "ga206_block") in c.diff
        )
        if vector:
            assert "16-byte aligned" in c.description
        new = saxpy_variants.file_for(kernel, c)
        got = _emulate_all(new, kernel, 3, n).outputs["y"]  # 3 CTAs loop over all indices
        assert got.tobytes() == want.tobytes(), c.label


def test_macro_index_is_found_but_not_rewritten() -> None:
    (f,) = ga206(SAXPY, "axpy_macro")
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "helper or macro" in v.description


def _rule_module() -> Any:
    import sys

    from gpuadvise.rules.registry import load_registry

    return sys.modules[type(load_registry().get("GA206")).__module__]


def test_disjoint_element_sets_laid_out_per_instruction() -> None:
    """Per access instruction, CTA after CTA: the two halves of an array (``k`` and
    ``k + n/2``) are 512 elements per CTA of 256 threads; a 3-point stencil's CTAs share
    elements and a CTA whose ranges do not advance with its index gives nothing."""
    from gpuadvise.rules.grid_stride import _disjoint_step as step

    ctas, tid = np.repeat(np.arange(4), 256), np.tile(np.arange(256), 4)
    k = 256 * ctas + tid
    ids = np.arange(4)

    def run(*elems: np.ndarray) -> int:
        n = len(elems)
        return step(ids, np.tile(ctas, n), np.concatenate(elems), np.repeat(np.arange(n), len(k)))

    assert run(k, k + (1 << 20)) == 512
    assert run(k, k + 4 * 256) == 512  # a whole grid of 4 CTAs apart
    assert run(k - 1, k, k + 1) == 0  # neighbours overlap
    assert run(k, tid + (1 << 20)) == 0  # every CTA the same second range
    assert run(k, (1 << 20) - k) == 0  # the second range walks down


def test_index_reads_in_cooperative_groups_and_macros() -> None:
    from gpuadvise.rules.grid_stride import _position_reads as reads

    code = (
        "auto tb = cg::this_thread_block(); auto g = cg::this_grid();\n"
        "int a = tb.group_index().x * 256 + tb.thread_rank();\n"
        "int b = g.thread_rank(); int c = tb.thread_rank();\n"
    )
    lines = sorted({code.count("\n", 0, at) + 1 for at in reads(code, 0, len(code))})
    assert lines == [2, 3]  # group_index() and the grid's thread_rank(), not the block's
    assert [code[at : at + 3] for at in reads(code, 0, len(code))] == [".gr", "g.t"]


BRANCHY = """extern "C" __global__ void relu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        if (v < 0.0f) v = 0.0f;
        y[i] = v;
    }
}

extern "C" __global__ void copy_tpl_ptr(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


def test_elementwise_vectors_only_for_straight_line_statements(tmp_path: Path) -> None:
    src = tmp_path / "b.cu"
    src.write_text(BRANCHY)
    kw = {"grid": "ceil_div(n, 256)", "block": "256", "args": ("n=4194304",)}
    (tmp_path / "copy.toml").write_text('[buffers]\nx = "float[n]"\ny = "float[n]"\n')
    (f,) = ga206(src, "relu", spec=str(tmp_path / "copy.toml"), **kw)
    assert f.variant is not None, f.message
    assert [c.label for c in f.variant.candidates()] == ["k=4", "k=1", "k=2", "k=8"], (
        f.variant.description
    )
    (g,) = ga206(src, "copy_tpl_ptr", spec=str(tmp_path / "copy.toml"), **kw)
    assert g.variant is not None and g.variant.label == "float4 k=2"
    assert g.variant.diff and "float4 ga206_y;" in g.variant.diff  # written only: not loaded


@pytest.mark.gpu
def test_gpu_reduction_variants_are_measured_and_verified_as_totals() -> None:
    """On a GPU: reduce3's candidates (int4/int2 and scalar, k swept) are built with their own
    grid, their partials verified as totals against the kernel's, and the fastest kept; the
    notes say the host must add the partials."""
    from gpuadvise.analyze.measure import measure_findings
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.analyze.prepare import live_options
    from gpuadvise.rules.evaluate import RulesRun
    from gpuadvise.runner.client import pycuda_missing

    why = pycuda_missing()
    if why is not None:
        pytest.skip(why)
    opts = live_options(KernelOptions(source=str(REDUCE), kernel="reduce3"))
    spec, choice, options = build(opts)
    a = analyze_kernel(spec, choice.device, options, sample_ctas=TRACE)
    found = run_rule(a, "GA206", trace_ctas=TRACE)
    run, notes = measure_findings(opts, RulesRun(tuple(found), ("GA206",)), max_time_s=2.0)
    (f,) = run.findings
    assert f.verified is True, notes
    assert all(t.verified and t.measurement is not None for t in f.trials), notes
    assert all(t.note and "checked as totals" in t.note for t in f.trials)
    assert f.variant is not None and f.variant.totals == {"out": "+"}
    assert any("host must combine the gridDim.x partials" in n for n in notes)
    m = f.measured_speedup
    assert m is not None and m.speedup == max(t.measurement.speedup for t in f.trials)


SIZELESS = """\
extern "C" __global__ void twice(const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  // expect: GA206
    y[i] = 2.0f * x[i];
}
"""


def test_a_grid_no_parameter_gives_is_a_launch_specific_fix(tmp_path: Path) -> None:
    """Issue 27: with no size parameter, the rewrite writes the original grid into the kernel
    (``const unsigned ga206_blocks = 16384u;``): the variant says it is launch-specific (in its
    description and its JSON), and --fix applies it only with --unsafe-fixes. A kernel whose
    size parameter gives the grid derives it and is not launch-specific."""
    from gpuadvise.analyze.fix import fix_candidates

    src = tmp_path / "twice.cu"
    src.write_text(SIZELESS)
    grid, threads = 16384, 256
    (f,) = ga206(src, "twice", grid=str(grid), block=str(threads),
                 buffers=(f"x=float[{grid * threads}]", f"y=float[{grid * threads}]"))  # fmt: skip
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.candidates()
    for c in v.candidates():
        assert c.launch_specific and f"ga206_blocks = {grid}u" in (c.diff or "")
        assert "Launch-specific" in c.description and "this launch only" in c.description
    assert v.to_dict()["launch_specific"] is True
    assert rule_api.Variant.from_dict(v.to_dict()).launch_specific
    take, refused = fix_candidates([f], unsafe=False, measured=False)
    assert not take and "launch-specific" in refused[0]
    # --unsafe-fixes lifts it (without a GPU its launch change still needs a measurement)
    _, refused = fix_candidates([f], unsafe=True, measured=False)
    assert "launch-specific" not in refused[0] and "a launch change" in refused[0]
    (g,) = ga206(SAXPY, "saxpy")  # n gives the grid: (n + blockDim.x - 1) / blockDim.x
    assert not any(c.launch_specific for c in g.variant.candidates())
    scalar = next(c for c in g.variant.candidates() if c.label == "k=1")
    assert "ga206_blocks = (n + blockDim.x - 1) / blockDim.x" in (scalar.diff or "")
    assert g.variant.to_dict()["launch_specific"] is False


ONE_LINE = """#define B 128
extern "C" __global__ void r_oneline(const int* in, int* out, unsigned n) {
    __shared__ int s[B]; unsigned t = threadIdx.x, i = blockIdx.x * B + t;
    s[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned d = 1; d < B; d *= 2) { if (t % (2 * d) == 0) s[t] += s[t + d]; __syncthreads(); }
    if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void r_reversed(const int* in, int* out, unsigned n) {
    __shared__ int s[B];
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, t = threadIdx.x;  // index first
    const int *src = in + blockIdx.x * B, *end = in + n;
    s[t] = src + t < end ? src[t] : 0;
    __syncthreads();
    for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

template <int BS>
__global__ void r_tpl(const int* __restrict__ in, int* __restrict__ out, int n) {
    __shared__ int s[BS]; int base = blockIdx.x * BS, t = threadIdx.x, i = base + t;
    s[t] = (i < n) ? in[i] : 0;
    __syncthreads();
    for (int d = BS / 2; d > 0; d >>= 1) {
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}
template __global__ void r_tpl<128>(const int* __restrict__, int* __restrict__, int);
"""


@pytest.fixture(scope="module")
def one_line(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ONE_LINE and its spec in one folder for the module's three kernels of it: the source
    compiles once (its path is in the compile cache's key), not once per kernel."""
    folder = tmp_path_factory.mktemp("one_line")
    (folder / "one.cu").write_text(ONE_LINE)
    (folder / "case.toml").write_text(
        'block = 128\n[buffers]\nin = "int[n]"\nout = { type = "int", count = "ceil_div(n, 128)" }\n'
    )
    return folder


ONE_LINE_KERNELS = ["r_oneline", "r_reversed", "r_tpl<128>"]
ONE_LINE_LAUNCH: dict[str, Any] = {
    "grid": "ceil_div(n, 128)", "block": "128", "args": ("n=4194304",),
}  # fmt: skip


@pytest.fixture(scope="module")
def one_line_variants(one_line: Path, tmp_path_factory: pytest.TempPathFactory) -> Labelled:
    """The candidates of ONE_LINE's kernels written one file per label (:class:`Labelled`)."""
    spec = str(one_line / "case.toml")
    src = one_line / "one.cu"
    found = {k: ga206(src, k, spec=spec, **ONE_LINE_LAUNCH) for k in ONE_LINE_KERNELS}
    return Labelled(tmp_path_factory.mktemp("one_line_variants"), src, found)


@pytest.mark.parametrize("kernel", ONE_LINE_KERNELS)
def test_declarations_sharing_a_line_are_split_by_the_fix_kit(
    kernel: str, one_line: Path, one_line_variants: Labelled
) -> None:
    """Issue 28: `__shared__ int s[B]; unsigned t = threadIdx.x, i = blockIdx.x * B + t;` on
    one line got "the shared array's index depends on the block index" and no fix; the fix kit
    splits the declaration, `t` stays outside the grid-stride loop, `i` goes inside, and every
    candidate's partials add up to the kernel's block sums on the emulator."""
    from gpuadvise.runner.verify import compare_totals

    src = one_line / "one.cu"
    (f,) = one_line_variants.findings[kernel]
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified", v and v.description
    cands = v.candidates()
    assert cands and all(c.diff for c in cands)
    scalar = next(c for c in cands if c.label == "k=1")
    assert scalar.diff is not None
    new = apply_unified_diff(ONE_LINE, scalar.diff)
    # the declarations' own spelling is kept, one per declarator, on either side of the loop
    if kernel == "r_oneline":
        assert "unsigned t = threadIdx.x;" in new and "unsigned i = ga206_block * B + t;" in new
        assert new.index("unsigned t = threadIdx.x;") < new.index("for (unsigned ga206_block")
    elif kernel == "r_reversed":
        assert "const unsigned t = threadIdx.x;" in new and "const int *end = in + n;" in new
        assert "const int *src = in + ga206_block * B;" in new
        assert new.index("const int *end = in + n;") < new.index("for (unsigned ga206_block")
        assert "// index first" in new
    else:
        assert "int t = threadIdx.x;" in new and "int i = base + t;" in new
        assert "int base = ga206_block * BS;" in new
    n = 5003
    want = _emulate_all(src, kernel, -(-n // 128), n).outputs["out"]
    for c in cands:
        assert c.diff is not None
        out = one_line_variants.file_for(kernel, c)
        got = _emulate_all(out, kernel, 3, n).outputs["out"]
        assert compare_totals("out", want, got, -(-n // 128), 3).ok, c.label


STRIDED = """#define B 256
extern "C" __global__ void axpy_stride(const float* x, float* y, float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i] + y[i];
}

extern "C" __global__ void sum_stride(const int* in, int* out, unsigned n) {
    __shared__ int s[B];
    unsigned t = threadIdx.x;
    int v = 0;
    for (unsigned i = blockIdx.x * B + t; i < n; i += B * gridDim.x) v += in[i];
    s[t] = v;
    __syncthreads();
    for (unsigned d = B / 2; d > 0; d >>= 1) {
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

extern "C" __global__ void sum_while(const int* __restrict__ in, int* __restrict__ out, unsigned n) {
    __shared__ int s[B];
    const unsigned step = gridDim.x * blockDim.x;
    unsigned i = threadIdx.x + blockIdx.x * blockDim.x;
    int v = 0;
    while (i < n) { v += in[i]; i += step; }
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned d = blockDim.x / 2; d > 0; d >>= 1) {
        if (threadIdx.x < d) s[threadIdx.x] += s[threadIdx.x + d];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

template <int BS>
__global__ void sum_pairs(const int* in, int* out, unsigned n) {
    __shared__ int s[BS];
    int acc = 0;
    for (unsigned c = blockIdx.x * 2u; c < (n + BS - 1) / BS; c += 2u * gridDim.x)
#pragma unroll
        for (unsigned k = 0; k < 2u; ++k) {
            unsigned i = (c + k) * BS + threadIdx.x;
            if (i < n) acc += in[i];
        }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int d = BS / 2; d > 0; d >>= 1) {
        if ((int)threadIdx.x < d) s[threadIdx.x] += s[threadIdx.x + d];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
template __global__ void sum_pairs<256>(const int*, int*, unsigned);
"""

_SUM_SPEC = '[buffers]\nin = "int[n]"\nout = { type = "int", count = "ceil_div(n, 256)" }\n'


@pytest.fixture(scope="module")
def strided(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """STRIDED as ``s.cu`` with its kernels' specs in one folder for the module's four tests of
    it: the source compiles once (its path is in the compile cache's key), not once per test."""
    folder = tmp_path_factory.mktemp("strided")
    (folder / "s.cu").write_text(STRIDED)
    (folder / "sum.toml").write_text("block = 256\n" + _SUM_SPEC)
    (folder / "axpy.toml").write_text(
        'block = 256\n[args]\na = 2.0\n[buffers]\nx = "float[n]"\ny = "float[n]"\n'
    )
    return folder


@pytest.mark.parametrize(
    "kernel, grid, small",
    [
        ("sum_stride", "ceil_div(n, 256)", 274),
        ("sum_while", "ceil_div(n, 256)", 274),
        ("sum_pairs<256>", "ceil_div(n, 512)", 137),  # GA204's half grid, spelled by hand
    ],
)
def test_a_grid_stride_reduction_launched_with_many_waves(
    kernel: str, grid: str, small: int, strided: Path
) -> None:
    """A per-block reduction whose load is a grid-stride loop, launched with one or two
    elements per thread (n / 256 CTAs: 15.5 waves; GA204's half grid leaves 7.8): the launch
    alone is the fix (one wave: a tree and a partial per CTA of all but one wave saved), no
    diff, the partials verified as totals. Launched with one wave, it is silent; an element-wise
    grid-stride kernel launched with many waves is silent (its loop's iterations are the
    CTAs': nothing to save)."""
    from gpuadvise.runner.verify import compare_totals
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    src = strided / "s.cu"
    spec = strided / "sum.toml"
    kw = {"grid": grid, "block": "256", "args": ("n=4194304",), "spec": str(spec)}
    (f,) = ga206(src, kernel, **kw)
    assert "a grid-stride loop): launch it with one wave (1056 CTAs" in f.message
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff is None
    assert v.launch == {"grid": [1056, 1, 1]} and v.label == "one wave"
    assert v.totals == {"out": "+"}
    est = f.estimated_speedup
    assert est is not None and est.kind == "none" and "not bounded" in est.method
    assert ga206(src, kernel, **{**kw, "grid": "1056"}) == []

    def run(g: int) -> Any:
        a = compiled(src, kernel, grid=str(g), args=("n=70000",), spec=str(spec))
        launch = resolve(a.spec, parse_signature(STRIDED, kernel))
        return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)

    want, got = run(small).outputs["out"], run(3).outputs["out"]
    assert compare_totals("out", want, got, small, 3).ok


def test_an_elementwise_grid_stride_kernel_stays_silent(strided: Path) -> None:
    src = strided / "s.cu"
    spec = strided / "axpy.toml"
    kw = {"grid": "ceil_div(n, 256)", "block": "256", "args": ("n=4194304",), "spec": str(spec)}
    assert ga206(src, "axpy_stride", **kw) == []


LUT = KERNELS / "constant_lut" / "lut.cu"


@pytest.mark.parametrize("kernel", ["popcount_lut", "popcount_lut_loop", "popcount_lut_macro"])
def test_a_launch_bound_by_constant_lookups_is_not_reported(kernel: str):
    # kernels/constant_lut: eight lookups a word into a __constant__ byte table, ~30 addresses a
    # warp request served one a cycle: far longer than the model's launch, which does not time
    # them; a grid-stride loop would leave them as they are (HeCBench popcount pc5's shape)
    a = analyze(LUT, kernel, TRACE)
    assert run_rule(a, "GA206", trace_ctas=TRACE) == []
    (g,) = run_rule(a, "GA301", trace_ctas=TRACE)
    assert "__constant__" in g.message
    # with the lookups not counted the launch is GA206's element-wise kernel
    (f,) = run_rule(a, "GA206", trace_ctas=TRACE, max_lookups=1e9)
    assert ev(f)["kind"] == "elementwise"


def test_the_same_count_without_the_table_is_reported():
    (f,) = ga206(LUT, "popcount_intrinsic")
    assert f.line in expected(LUT, "popcount_intrinsic")
    assert ev(f)["kind"] == "elementwise"
