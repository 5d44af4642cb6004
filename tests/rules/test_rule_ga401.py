"""GA401 register-spills on the spills case (nvcc, no GPU): the spill and local-array findings,
their numbers, the candidates the rule compiles (never one that spills more), and the parsers
behind them (register caps, local arrays, compile options)."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import rulekit
from rulekit import KERNELS, ev

import gpuadvise.rules as rule_api
import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise import toolchain as nvcc
from gpuadvise.analyze.evaluate import run_rules
from gpuadvise.rules.config import Config
from gpuadvise.source.patch import apply_unified_diff
from gpuadvise.toolchain import CompileOptions, compile_source, select_compiled_kernel

needs_nvcc = pytest.mark.toolkit
pytestmark = pytest.mark.usefixtures("compile_cache")

CASE = KERNELS / "spills"
SOURCE = CASE / "spills.cu"


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    """The loaded rule module (the registry imports it under a name of its own)."""
    rule = rule_registry.load_registry().get("GA401")
    return sys.modules[type(rule).__module__]


def analyze(source: Path, kernel: str, spec: Path | None = None) -> Any:
    return rulekit.analyze(source, kernel, trace=False, spec=None if spec is None else str(spec))


def ga401(a: Any, **options: Any) -> list[rule_api.Finding]:
    cfg = Config(select=("GA401",), rule_options={"GA401": options})
    found = run_rules(a, cfg, lazy_models=False)
    assert not [f for f in found if f.is_error], [f.error for f in found]
    return found


def expect_line(kernel_word: str) -> int:
    """The line of ``// expect: GA401`` that mentions ``kernel_word``'s declaration or body."""
    lines = SOURCE.read_text().splitlines()
    hits = [n for n, ln in enumerate(lines, 1) if "expect: GA401" in ln]
    ks = srctext.find_kernel_source(SOURCE, kernel_word)
    assert ks is not None
    first, last = ks.decl_line, ks.body_lines[1]
    inside = [n for n in hits if first <= n <= last]
    assert len(inside) == 1
    return inside[0]


def spills_of(source: Path, kernel: str, options: CompileOptions) -> tuple[int, int]:
    m = compile_source(source, options)
    r = select_compiled_kernel(m, kernel).resources
    return r.registers, r.spill_store_bytes + r.spill_load_bytes


# ---------------------------------------------------------------------------------------------
# The case


@pytest.fixture(scope="module")
def uncapped() -> Any:
    """The analysis of ``moments`` (no register cap), made once for the tests that read it."""
    return analyze(SOURCE, "moments")


@pytest.fixture(scope="module")
def capped() -> tuple[Any, rule_api.Finding]:
    a = analyze(SOURCE, "moments_capped")
    found = ga401(a)
    assert len(found) == 1
    return a, found[0]


@needs_nvcc
def test_spills_are_found_at_the_kernel_with_ptxas_numbers(capped):
    a, f = capped
    res = a.kernel.resources
    assert (
        f.line
        == expect_line("moments_capped")
        == srctext.find_kernel_source(SOURCE, "moments_capped").decl_line
    )
    e = ev(f)
    # __launch_bounds__(256, 8): 65536 registers / (8 x 256 threads) = 32 per thread
    assert e["registers"] == res.registers == 32
    assert e["register_cap"] == "__launch_bounds__(256, 8)"
    assert e["spill_store_bytes"] == res.spill_store_bytes > 0
    assert e["spill_load_bytes"] == res.spill_load_bytes > 0
    assert e["spill_bytes"] == res.spill_store_bytes + res.spill_load_bytes
    assert e["local_bytes"] == res.local_bytes > 0
    # global bytes per thread: every LDG/STG once; the 32 stores m[k * n + col] are 128 B
    stores = [ln for ln in a.sass_lines if ln.space == "global" and ln.kind == "store"]
    assert sum(ln.count for ln in stores) == 32 and {ln.width_bits for ln in stores} == {32}
    g = sum(ln.width_bits // 8 * ln.count for ln in a.sass_lines if ln.space == "global")
    assert e["global_bytes"] == g and g > 128
    # the lines that hold the spills, most LDL/STL first, all inside the kernel
    lines = [int(x) for x in str(e["local_access_lines"]).split(",")]
    ks = srctext.find_kernel_source(SOURCE, "moments_capped")
    assert all(ks.decl_line <= n <= ks.body_lines[1] for n in lines)
    per = {}
    for ln in a.sass_lines:
        if ln.space == "local":
            per[ln.line] = per.get(ln.line, 0) + ln.count
    assert lines[0] == max(per, key=lambda n: (per[n], -n))
    assert f"{lines[0]} ({per[lines[0]]})" in f.message


@needs_nvcc
def test_spill_estimate_is_local_over_global_bytes(capped):
    a, f = capped
    e = ev(f)
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    g, s = e["global_bytes"], e["spill_bytes"]
    assert est.speedup == round((g + s) / g, 3)
    got = {k: est.inputs[k] for k in ("local_bytes_per_thread", "global_bytes_per_thread")}
    assert got == {"local_bytes_per_thread": s, "global_bytes_per_thread": g}
    # ptxas's spills are not in the PTX the launch model counts: the estimate is not weighed
    # on it (issue 29), and says so
    assert "not in the PTX" in est.inputs["outside_model"]
    assert "L1" in est.method


@needs_nvcc
def test_spills_on_the_launch_model_with_a_trace():
    """Traced, the spills go through the execution model (issue 29): the SASS's LDL/STL
    weighted by the trace's block counts are all spills here (the PTX has no local access),
    their frames (96 B x 5 CTAs x 256 threads = 120 KB an SM) fit the L1, and the after side is
    the variant's minBlocks=5 (no spills), with the term that bounds each side."""
    a = rulekit.analyze(SOURCE, "moments_capped", spec=str(CASE / "case.toml"))
    (f,) = ga401(a)
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    i = est.inputs
    assert i["model"] == "execution" and "outside_model" not in i
    assert i["local_warp_instructions"] == i["spill_warp_instructions"] > 0
    assert i["removed_warp_instructions"] == i["spill_warp_instructions"]
    assert i["frames_per_sm_bytes"] == 96 * 5 * 256 and i["l1_miss"] == 0.0
    assert i["bound_by_before"] == "l1"
    assert i["before_l1_us"] > i["after_l1_us"]
    assert 1.0 < i["point_speedup"] <= est.speedup
    assert "minBlocks=5" in est.method


@needs_nvcc
def test_candidates_relax_the_bound_and_never_spill_more(capped, uncapped, tmp_path):
    a, f = capped
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified"
    base = f.evidence[0].value
    good = uncapped.kernel.resources.registers  # the uncapped allocation: 48
    assert good == 48
    cands = v.candidates()
    labels = [c.label for c in cands]
    # minBlocks 7 allows 36 -> 32 registers, the same cap: skipped. 6 -> 40 (fewer spills),
    # 5 -> 48 (enough for the uncapped allocation: no spills). The first shown spills least.
    assert labels == ["minBlocks=5", "minBlocks=6"]
    options = CompileOptions(arch="sm_90")
    for c in cands:
        assert c.diff and not c.nvcc_flags
        patched = tmp_path / c.label.replace("=", "_") / "spills.cu"
        patched.parent.mkdir()
        patched.write_text(apply_unified_diff(SOURCE.read_text(), c.diff))
        blocks = int(c.label.split("=")[1])
        assert f"__launch_bounds__(256, {blocks}) moments_capped(" in patched.read_text()
        before, after = SOURCE.read_text().splitlines(), patched.read_text().splitlines()
        changed = [(x, y) for x, y in zip(before, after, strict=True) if x != y]
        assert len(changed) == 1  # one line: the attribute
        regs, spill = spills_of(patched, "moments_capped", options)
        assert spill < base
        assert str(regs) in c.description
        if blocks == 5:
            assert spill == 0 and regs == good and "no spills" in c.description
        else:
            assert 0 < spill and regs == 40


@needs_nvcc
def test_the_uncapped_kernel_and_the_register_histogram_are_clean(uncapped):
    assert ga401(uncapped) == []
    assert ga401(analyze(SOURCE, "hist_unrolled")) == []


@needs_nvcc
def test_a_local_array_is_found_at_its_declaration_without_a_variant():
    a = analyze(SOURCE, "hist_local")
    (f,) = ga401(a)
    assert f.line == expect_line("hist_local")
    assert "unsigned bins[BINS];" in SOURCE.read_text().splitlines()[f.line - 1]
    e = ev(f)
    assert e["array"] == "bins"
    assert e["local_bytes"] == 16 * 4 == a.kernel.resources.local_bytes  # BINS unsigned words
    assert e["spill_bytes"] == 0
    local = sum(ln.width_bits // 8 * ln.count for ln in a.sass_lines if ln.space == "local")
    g = sum(ln.width_bits // 8 * ln.count for ln in a.sass_lines if ln.space == "global")
    assert e["local_access_bytes"] == local and e["global_bytes"] == g
    # one 4-byte LDG per loop trip and 16 atomics (REDG) merging the bins
    reds = [ln for ln in a.sass_lines if ln.space == "global" and ln.kind == "reduction"]
    assert sum(ln.count for ln in reds) == 16
    assert f.estimated_speedup.speedup == round((g + local) / g, 3)
    assert "64 B" in f.message and "shared memory" in f.message
    assert f.variant is None


@needs_nvcc
def test_a_local_array_on_the_launch_model_with_a_trace():
    """Traced, the local array goes through the execution model (issue 29): every local access
    is the array's (no spills), all removed after; the critical warp's chain waits for one
    ``ld.local`` a loop trip (4,194,304 values / 67,584 threads = 62.06 trips) and one more in
    the merge (its 16 loads are independent), as long as a global load before (it hits the L1,
    64 B frames x 2 CTAs an SM, 264 / 132, x 256 threads = 32 KB an SM, but returns behind the
    warps' misses) and not at all after. The whole first wave (``wave``): the default sample's
    runs of CTAs average 63.08 links, not the wave's 63.06."""
    a = rulekit.analyze(SOURCE, "hist_local", "wave", spec=str(CASE / "hist_local.toml"))
    (f,) = ga401(a)
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    i = est.inputs
    assert i["model"] == "execution" and "local_bytes_per_thread" not in i
    assert i["spill_warp_instructions"] == 0
    assert i["removed_warp_instructions"] == i["local_warp_instructions"] > 0
    assert i["local_links_per_warp"] == pytest.approx(4194304 / (264 * 256) + 1, abs=0.01)
    assert i["chain_global_links_per_warp"] == pytest.approx(2 * i["local_links_per_warp"])
    assert i["l1_miss"] == 0.0 and i["frames_per_sm_bytes"] == 64 * 2 * 256
    assert i["before_l1_us"] > i["after_l1_us"]
    assert i["before_dependency_us"] > i["after_dependency_us"]
    assert 1.0 < i["point_speedup"] <= est.speedup
    assert "register moves after" in est.method


# ---------------------------------------------------------------------------------------------
# Other register caps: -maxrregcount (a flag variant) and __maxnreg__ (a diff)


MOMENTS = textwrap.dedent(
    """\
    #define ORDERS 32
    extern "C" __global__ void ATTR moments(const float* __restrict__ x, float* __restrict__ m,
                                            int rows, int n) {
        int col = blockIdx.x * blockDim.x + threadIdx.x;
        if (col >= n) return;
        float acc[ORDERS];
    #pragma unroll
        for (int k = 0; k < ORDERS; ++k) acc[k] = 0.0f;
        for (int r = 0; r < rows; ++r) {
            float v = x[r * n + col];
            float p = v;
    #pragma unroll
            for (int k = 0; k < ORDERS; ++k) { acc[k] += p; p *= v; }
        }
    #pragma unroll
        for (int k = 0; k < ORDERS; ++k) m[k * n + col] = acc[k];
    }
    """
)


def write_case(tmp_path: Path, attr: str, flags: str = "") -> Path:
    (tmp_path / "m.cu").write_text(MOMENTS.replace("ATTR", attr))
    spec = (CASE / "case.toml").read_text()
    spec = spec.replace('source = "spills.cu"', 'source = "m.cu"')
    spec = spec.replace('kernel = "moments_capped"', f'kernel = "moments"\n{flags}')
    (tmp_path / "case.toml").write_text(spec)
    return tmp_path / "m.cu"


@needs_nvcc
def test_maxrregcount_gives_flag_variants(tmp_path):
    src = write_case(tmp_path, "", 'nvcc_flags = ["-maxrregcount=32"]')
    a = analyze(src, "moments")
    (f,) = ga401(a)
    assert ev(f)["register_cap"] == "-maxrregcount=32" and ev(f)["registers"] == 32
    v = f.variant
    assert v is not None
    # the caps of 5 and 6 blocks of 256 threads: 48 and 40 registers (7 blocks: 32, no change)
    assert [(c.label, c.nvcc_flags, c.diff) for c in v.candidates()] == [
        ("maxrregcount=48", ("-maxrregcount=48",), None),
        ("maxrregcount=40", ("-maxrregcount=40",), None),
    ]
    # the flag comes after the spec's: nvcc keeps the last value
    base = CompileOptions(arch="sm_90", extra_flags=("-maxrregcount=32",))
    for c, want_zero in zip(v.candidates(), (True, False), strict=True):
        opts = CompileOptions(arch="sm_90", extra_flags=("-maxrregcount=32", *c.nvcc_flags))
        regs, spill = spills_of(src, "moments", opts)
        assert spill < spills_of(src, "moments", base)[1]
        assert (spill == 0) is want_zero


@needs_nvcc
def test_maxnreg_gives_diff_variants(tmp_path):
    src = write_case(tmp_path, "__maxnreg__(32)")
    (f,) = ga401(analyze(src, "moments"))
    assert ev(f)["register_cap"] == "__maxnreg__(32)"
    v = f.variant
    assert v is not None and v.label == "maxnreg=48"
    patched = apply_unified_diff(src.read_text(), v.diff)
    assert "__maxnreg__(48) moments(" in patched


@needs_nvcc
def test_spills_with_no_cap_have_no_variant(tmp_path):
    """Spills with nothing to relax: 300 running sums need more than ptxas's 255 registers."""
    src = write_case(tmp_path, "")
    src.write_text(src.read_text().replace("#define ORDERS 32", "#define ORDERS 300"))
    spec = tmp_path / "case.toml"
    spec.write_text(spec.read_text().replace('"float[32*n]"', '"float[300*n]"'))
    a = analyze(src, "moments")
    res = a.kernel.resources
    assert res.registers == 255 and res.spill_store_bytes > 0  # the input does what it says
    (f,) = ga401(a)
    e = ev(f)
    assert e["registers"] == 255 and "register_cap" not in e
    assert e["spill_bytes"] == res.spill_store_bytes + res.spill_load_bytes
    assert "with no register cap" in f.message and "more than 255 registers" in f.message
    assert f.variant is None


def ignore_relaxations(monkeypatch: pytest.MonkeyPatch, ignored: set[int]) -> list[int]:
    """Make nvcc ignore the rule's relaxed ``__launch_bounds__(256, N)`` for N in ``ignored``:
    a candidate's patched copy (in the cache's ``candidates``) is compiled as the original
    spills.cu, every other compile really. Returns the N of every candidate compiled, in order.
    Everything of the rule runs as it is (candidate, patched file, options, ptxas's report)."""
    real = nvcc.compile_source
    seen: list[int] = []

    def compile_source(source: Any, options: Any = None, *args: Any, **kw: Any) -> Any:
        if "candidates" in Path(source).parts:
            m = re.search(
                r"__launch_bounds__\(256, (\d+)\) moments_capped\(", Path(source).read_text()
            )
            assert m is not None
            blocks = int(m.group(1))
            seen.append(blocks)
            if blocks in ignored:
                source = SOURCE
        return real(source, options, *args, **kw)

    monkeypatch.setattr(nvcc, "compile_source", compile_source)
    return seen


@needs_nvcc
def test_a_candidate_that_spills_as_much_is_dropped(capped, monkeypatch):
    """The rule keeps only candidates whose compiled spills are lower than the kernel's."""
    a, _ = capped
    seen = ignore_relaxations(monkeypatch, {6})
    (f,) = ga401(a)
    # minBlocks=6 compiles to the kernel's own 32 registers and spills: dropped; minBlocks=5
    # removes the spills, so the rule stops there
    assert seen == [6, 5]
    assert [c.label for c in f.variant.candidates()] == ["minBlocks=5"]
    seen = ignore_relaxations(monkeypatch, {6, 5, 4, 3})
    (g,) = ga401(a)
    assert seen == [6, 5, 4]  # max_candidates = 3 compiles
    assert g.variant is None  # nothing spills less: no variant at all


@needs_nvcc
def test_max_candidates_bounds_the_compiles(capped):
    a, _ = capped
    (f,) = ga401(a, max_candidates=1)
    # only minBlocks=6 is compiled: 40 registers, fewer spills than the kernel's, still some
    (v,) = f.variant.candidates()
    assert v.label == "minBlocks=6" and "40 registers" in v.description
    assert "no spills" not in v.description


# ---------------------------------------------------------------------------------------------
# Parsers


def ks_of(tmp_path: Path, text: str, kernel: str) -> rule_api.KernelSource:
    p = tmp_path / "k.cu"
    p.write_text(textwrap.dedent(text))
    ks = srctext.find_kernel_source(p, kernel)
    assert ks is not None
    return ks


def test_register_cap_from_launch_bounds_with_defines(tmp_path, mod):
    ks = ks_of(
        tmp_path,
        """\
        #define BLOCK 128
        #define MINB (4)
        // __launch_bounds__(999, 1) in a comment is not read
        template <int N>
        __global__ void __launch_bounds__(BLOCK, MINB, 2)
        k(float* x) { x[threadIdx.x] = N; }
        """,
        "k",
    )
    cap = mod.find_register_cap(ks, ("-maxrregcount=16",), 65536)
    assert cap.kind == "launch_bounds"  # __launch_bounds__ wins over -maxrregcount
    assert (cap.max_threads, cap.min_blocks) == (128, 4)
    assert cap.registers == 128  # 65536 / (4 x 128)
    assert cap.args == ("BLOCK", "MINB", "2") and cap.line == 5
    # relaxing minBlocks: 3 -> 170 -> 168, 2 -> 255 (256 capped), 1 -> 255 (no change)
    caps = mod.candidate_caps(cap, 128, 65536, cap.registers)
    assert [(lbl, c) for lbl, c, _ in caps] == [("minBlocks=3", 168), ("minBlocks=2", 255)]
    patched = mod._patched(ks.text, cap, mod._new_args(cap, "minBlocks=3", 3))
    assert "__launch_bounds__(BLOCK, 3, 2)" in patched


def test_register_cap_from_flags_and_none(tmp_path, mod):
    ks = ks_of(tmp_path, "__global__ void k(float* x) { x[0] = 1; }\n", "k")
    assert mod.find_register_cap(ks, ("-arch=sm_90",), 65536) is None
    for flags in (
        ("-maxrregcount", "40"),
        ("--maxrregcount=40",),
        ("-maxrregcount=20", "-maxrregcount=40"),
    ):
        cap = mod.find_register_cap(ks, flags, 65536)
        assert (cap.kind, cap.registers) == ("maxrregcount", 40)
    # the caps of the occupancy steps above 40 for 256-thread blocks: 6 blocks 40 (no), 5 -> 48,
    # 4 -> 64, 3 -> 80, 2 -> 128, 1 -> 255
    cap = mod.find_register_cap(ks, ("-maxrregcount=40",), 65536)
    assert [c for _, c, _ in mod.candidate_caps(cap, 256, 65536, 40)] == [48, 64, 80, 128, 255]


def test_launch_bounds_without_min_blocks(tmp_path, mod):
    ks = ks_of(tmp_path, "__global__ void __launch_bounds__(1024) k(float* x) { x[0] = 1; }\n", "k")
    cap = mod.find_register_cap(ks, (), 65536)
    assert cap.registers == 64 and cap.min_blocks is None
    # a 256-thread launch: shrink maxThreads to it (255 registers)
    caps = mod.candidate_caps(cap, 256, 65536, 64)
    assert [(lbl, c) for lbl, c, _ in caps] == [("maxThreads=256", 255)]
    patched = mod._patched(ks.text, cap, mod._new_args(cap, "maxThreads=256", None))
    assert "__launch_bounds__(256) k(" in patched
    assert mod.candidate_caps(cap, 1024, 65536, 64) == []  # the block itself needs the cap


def test_local_arrays_in_a_kernel_body(tmp_path, mod):
    ks = ks_of(
        tmp_path,
        """\
        #define N 3
        __global__ void k(float* out, int i) {
            __shared__ float tile[32];
            extern __shared__ float dyn[];
            float a[4][8];
            unsigned long long wide[2] = {0, 0};
            double d[N];
            const int lut[4] = {1, 2, 3, 4};
            float4 v[2];
            Custom c[5];
            out[0] = a[i][i] + tile[i] + d[i] + wide[i] + lut[i] + v[i].x + dyn[i];
        }
        """,
        "k",
    )
    got = {x.name: (x.line, x.elements, x.size_bytes) for x in mod.local_arrays(ks)}
    assert got == {
        "a": (5, 32, 128),
        "wide": (6, 2, 16),
        "d": (7, 3, 24),
        "lut": (8, 4, 16),
        "v": (9, 2, 32),
        "c": (10, 5, None),
    }


def test_compile_options_round_trip():
    opts = CompileOptions(
        arch="sm_90",
        include_dirs=("/tmp/inc",),
        defines=("N=4", "FAST"),
        std="c++17",
        use_fast_math=True,
        xptxas=("-O3",),
        extra_flags=("--expt-relaxed-constexpr", "-ccbin", "/usr/bin/g++"),
        maxrregcount=64,
    )
    # how the rules' compile service rebuilds the analysed kernel's options from its flags
    again = CompileOptions.from_nvcc_flags("sm_90", opts.nvcc_flags())
    assert again.nvcc_flags() == opts.nvcc_flags()


@needs_nvcc
def test_a_printf_stack_frame_is_not_a_local_array(tmp_path):
    (tmp_path / "p.cu").write_text(
        '#include <cstdio>\nextern "C" __global__ void pr(const float* x, float* y, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        '  if (i < n) { y[i] = 2.f * x[i]; if (i == 0) printf("%f %d\\n", x[0], n); }\n}\n'
    )
    (tmp_path / "case.toml").write_text(
        'source = "p.cu"\nkernel = "pr"\ngrid = 4\nblock = 256\n[args]\nn = 1024\n'
        '[buffers]\nx = "float[n]"\ny = "float[n]"\n'
    )
    a = analyze(tmp_path / "p.cu", "pr")
    assert a.kernel.resources.local_bytes > 0  # printf's arguments are packed on the stack
    assert ga401(a) == []


def test_rule_documentation_names_the_case():
    rule = rule_registry.load_registry().get("GA401")
    assert rule.name == "register-spills"
    assert "kernels/spills/spills.cu" in rule.sections()["Example"]


# ---------------------------------------------------------------------------------------------
# On a GPU: the measurement stage builds, verifies and times each candidate


@pytest.mark.gpu
@pytest.mark.toolkit
def test_gpu_candidates_are_measured_and_verified():
    from gpuadvise.analyze.measure import measure_findings
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import live_options
    from gpuadvise.rules.evaluate import RulesRun
    from gpuadvise.runner.client import pycuda_missing

    why = pycuda_missing()
    if why is not None:
        pytest.skip(why)
    opts = live_options(KernelOptions(source=str(SOURCE), kernel="moments_capped"))
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import build

    spec, choice, options = build(opts)
    a = analyze_lazily(spec, choice.device, options, trace=False)
    found = ga401(a)
    run, notes = measure_findings(opts, RulesRun(tuple(found), ("GA401",)), max_time_s=3.0)
    (f,) = run.findings
    assert f.verified is True, notes
    labels = {c.label for c in found[0].variant.candidates()}
    assert {t.label for t in f.trials} == labels
    assert all(t.verified and t.measurement is not None for t in f.trials), notes
    m = f.measured_speedup
    assert m is not None and m.label in labels and m.outputs_match
    assert m.speedup == max(t.measurement.speedup for t in f.trials)
