"""GA201's automatic padding of 2D ``__shared__`` arrays (compiled with nvcc, no GPU).

The diff applies (``gpuadvise.source.patch.apply_unified_diff``), compiles, computes bit-identical
outputs on the CPU emulator, and the bank model over the *patched kernel's own trace* shows the
line's conflicts gone, with the numbers derived by hand below. Padding is refused, with the
reason, where it is not provably safe or cannot help.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpuadvise.rules as rule_api
import gpuadvise.rules.registry as rule_registry
import gpuadvise.source.text as srctext
from gpuadvise.analyze.evaluate import rule_context, run_rules
from gpuadvise.rules.config import Config
from gpuadvise.source.patch import apply_unified_diff
from gpuadvise.toolchain import find_toolchain

try:
    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (pip install .[toolkit])")

_KERNELS = rule_registry.builtin_kernels_dir()
assert _KERNELS is not None
KERNELS: Path = _KERNELS
MOMENTS = KERNELS / "fp16_neighbourhood" / "moments.cu"
TRACE_CTAS = 8

# the module's analyses are kept per process (_ANALYSES): its tests run on one xdist worker
pytestmark = pytest.mark.xdist_group(__name__)


@pytest.fixture(scope="module", autouse=True)
def _cache(compile_cache: Path) -> Path:
    """The run's compile cache (conftest.py) for every test of the module."""
    return compile_cache


def ga201_module() -> Any:
    return sys.modules[type(rule_registry.load_registry().get("GA201")).__module__]


_ANALYSES: dict[tuple[str, str, str], Any] = {}


def analyze(source: Path, kernel: str) -> Any:
    """The analysis ``gpuadvise analyze`` builds (H100, the first CTAs traced), once per
    source text and kernel."""
    key = (str(source), source.read_text(), kernel)
    if key not in _ANALYSES:
        _ANALYSES[key] = _analyze(source, kernel)
    return _ANALYSES[key]


def _analyze(source: Path, kernel: str) -> Any:
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel

    spec, choice, options = build(KernelOptions(source=str(source), kernel=kernel, gpu="H100"))
    kw: dict[str, Any] = {}
    params = inspect.signature(analyze_kernel).parameters
    if "trace" in params:
        kw["trace"] = True
        if "sample_ctas" in params:
            kw["sample_ctas"] = TRACE_CTAS
    return analyze_lazily(spec, choice.device, options, **kw)


def findings(source: Path, kernel: str) -> list[rule_api.Finding]:
    return run_rules(analyze(source, kernel), Config(trace_ctas=TRACE_CTAS, select=("GA201",)))


def bank_line(source: Path, kernel: str, line: int) -> tuple[int, int]:
    """(wavefronts, ideal) at ``line`` from the bank model over the kernel's own trace."""
    a = analyze(source, kernel)
    ctx = rule_context(a, Config(trace_ctas=TRACE_CTAS))
    rows = [ln for ln in ctx.banks.lines if ln.line == line]
    assert rows, f"no shared access traced at line {line}"
    return sum(r.wavefronts for r in rows), sum(r.ideal for r in rows)


def outputs(source: Path, kernel: str, ctas: int = 4) -> dict[str, np.ndarray]:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = analyze(source, kernel)
    launch = resolve(a.spec, parse_signature(source.read_text(), kernel))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas=ctas, trace=False)
    return e.outputs


def patched_copy(diff: str, tmp: Path) -> Path:
    case = MOMENTS.parent
    (tmp / "case.toml").write_text((case / "case.toml").read_text())
    out = tmp / MOMENTS.name
    out.write_text(apply_unified_diff(MOMENTS.read_text(), diff))
    return out


# ---------------------------------------------------------------------------------------------
# The fp16 neighbourhood kernels (seed 001)
#
# An 8x8 block is 2 warps; a warp reads a 4x8 patch of the 16x16 tile (rows ty..ty+3, columns
# tx..tx+7) for each of the 81 neighbours. 4-byte words, rows 16 words apart: rows r and r+2 are
# 32 words apart, in the same banks: 2 wavefronts where 1 would do. Conflict free needs the four
# 8-word windows at 0, P, 2P, 3P (mod 32) disjoint for the row pitch P = 16 + pad: P = 17..23
# all overlap (P = 20: windows at 0, 20, 8, 28, and 28..35 wraps onto 0..3), P = 24 (0, 24, 16,
# 8) does not: a pad of 8, the smallest. 8-byte texels (uint2) are served a half-warp (2 rows x
# 8 texels = 2 x 16 words) at a time: rows 32 words apart collide, rows 48 words apart
# (pitch 24 texels) take banks 0-15 and 16-31: a pad of 8 again.


@needs_nvcc
@pytest.mark.parametrize(
    "kernel, line, decl, before, after",
    [
        # 8 CTAs x 2 warps x 81 neighbours x 2 arrays = 2592 loads, 2 wavefronts each before
        (
            "moments_split",
            80,
            "__shared__ unsigned s_rg[TILE][TILE + 8], s_b[TILE][TILE + 8];",
            (5184, 2592),
            (2592, 2592),
        ),
        # 8 CTAs x 2 warps x 81 = 1296 loads of 8 bytes: 2 half-warps of 2 wavefronts each
        # before, of 1 after
        (
            "moments_uint2",
            119,
            "__shared__ uint2 s_rgb[TILE][TILE + 8];",
            (5184, 2592),
            (2592, 2592),
        ),
    ],
)
def test_padding_applies_compiles_verifies_and_removes_the_conflicts(
    kernel: str,
    line: int,
    decl: str,
    before: tuple[int, int],
    after: tuple[int, int],
    tmp_path: Path,
) -> None:
    f = next(x for x in findings(MOMENTS, kernel) if x.line == line)
    ev = {e.metric: e.value for e in f.evidence}
    assert (ev["wavefronts"], ev["ideal_wavefronts"]) == before
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    assert v.launch is None and not v.nvcc_flags and not v.defines
    assert f"{before[0]} " in v.description and "+1024 B" in v.description
    # the diff changes exactly the declaration
    patched = patched_copy(v.diff, tmp_path)
    old_lines, new_lines = MOMENTS.read_text().split("\n"), patched.read_text().split("\n")
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].strip() == decl
    # the patched kernel's own trace: the line is conflict free
    assert bank_line(patched, kernel, line) == after
    assert bank_line(MOMENTS, kernel, line) == before
    # and GA201 no longer fires there
    assert not any(x.line == line for x in findings(patched, kernel))
    # bit-identical outputs on the emulator (the first 4 CTAs; the rest keep their start value)
    want, got = outputs(MOMENTS, kernel), outputs(patched, kernel)
    assert set(want) == set(got) == {"mean", "variance"}
    for name in want:
        assert want[name].tobytes() == got[name].tobytes(), name
    written = np.isfinite(got["mean"].view(np.float32)).sum()
    assert written >= 4 * 64 * 4  # 4 CTAs x 64 pixels x 4 floats were computed


@needs_nvcc
def test_split_padding_numbers_by_hand() -> None:
    """The search's own numbers: pads 1..7 leave conflicts, 8 is the first without; the fill
    loop's stores (two 16-word rows per warp) become 2-way: 128 stores (8 CTAs x 2 warps x 4
    iterations x 2 arrays) take 256 wavefronts instead of 128, so the kernel goes from 5184 + 128
    = 5312 to 2592 + 256 = 2848."""
    import numpy as np

    mod = ga201_module()
    a = analyze(MOMENTS, "moments_split")
    ctx = rule_context(a, Config(trace_ctas=TRACE_CTAS))
    line = [ln for ln in ctx.banks.lines if ln.line == 80]
    insts = tuple(i for ln in line for i in ln.insts)
    plan = mod.plan_padding(ctx, insts)
    assert not isinstance(plan, str), plan
    assert [(d.name, p.pad, p.elem, p.cols) for d, p in plan.pads] == [
        ("s_rg", 8, 4, 16),
        ("s_b", 8, 4, 16),
    ]
    assert plan.line_before == (5184, 2592) and plan.line_after == (2592, 2592)
    assert plan.kernel_before == (5312, 2720) and plan.kernel_after == (2848, 2720)
    assert plan.extra_bytes == 2 * 16 * 8 * 4
    layout = mod.shared_layout(ctx)
    assert [(v.offset, v.size) for v in layout.vars] == [(0x400, 1024), (0x800, 1024)]
    recs = ctx.trace.records  # reconciled with the SASS by the pipeline
    shared = recs[recs["space"] == 1]
    on_line = shared[np.isin(shared["inst"], insts)]
    for pad in range(1, 8):
        pads = [mod.Padded(v, 16, 4, pad) for v in layout.vars]
        wf, ideal = mod.cost(mod.remap(on_line, layout, pads))
        assert wf > ideal, pad


@needs_nvcc
def test_the_shared_layout_reads_the_emulators_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout lays out the module the emulator parsed (``parse_ptx_cached``), not a second
    parse of its own: cuda-samples' reductions are 1.4 MB of PTX (213 template instances), parsed
    twice per analysis when the layout kept a cache of its own."""
    import gpuadvise.ptx.parser as parser

    a = analyze(MOMENTS, "moments_split")
    parser.parse_ptx_cached(a.module.ptx)  # the emulator's parse, kept (as the analysis left it)

    def second_parse(text: str) -> Any:
        raise AssertionError("the module's PTX parsed a second time")

    monkeypatch.setattr(parser, "parse_ptx", second_parse)
    layout = rule_context(a, Config(trace_ctas=TRACE_CTAS)).services.shared_layout()
    placed = sorted((v.offset, v.size_bytes) for v in layout.variables if not v.extern)
    assert placed == [(0x400, 1024), (0x800, 1024)]


@needs_nvcc
def test_half3_cannot_be_padded_free_of_conflicts() -> None:
    """6-byte texels: a lane's 16-bit field lies in word floor(6c/4), so the 8 texels of a row
    span 11 words with gaps, and no row pitch places 4 such rows in disjoint banks for every
    field and column offset: no pad helps (the fix is a 4-, 8- or 16-byte element: half4)."""
    f = next(x for x in findings(MOMENTS, "moments_half3") if x.line == 161)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "no pad of s_rgb's rows" in v.description and "6-byte elements" in v.description
    # the store of line 149 conflicts on the same array: one finding for both lines, and the
    # padding search replays both (issue 27: one root cause, one finding)
    assert "with line 149, the same array's conflicts" in f.message
    e = {x.metric: x.value for x in f.evidence}
    assert f"{e['wavefronts']} wavefronts where {e['ideal_wavefronts']}" in v.description
    assert e["wavefronts"] == 2 * e["ideal_wavefronts"]  # 2-way throughout


@needs_nvcc
def test_reduction_sdata_is_one_dimensional() -> None:
    f = next(x for x in findings(KERNELS / "reduction" / "reduce.cu", "reduce2") if x.line == 34)
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "sdata is a 1D array" in v.description and "GA202" in v.description


# ---------------------------------------------------------------------------------------------
# A transpose through a 32x32 tile: the column read is a 32-way conflict, a pad of 1 fixes it

TRANSPOSE = """\
#define N 32
{extra_top}
extern "C" __global__ void transpose(const float* __restrict__ in, float* __restrict__ out) {{
    __shared__ float tile[N][N];
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    const unsigned base = blockIdx.x * N * N;
    tile[ty][tx] = in[base + ty * N + tx];
    __syncthreads();
{extra_body}
    out[base + ty * N + tx] = tile[tx][ty];
}}
"""

CASE = """\
source = "transpose.cu"
kernel = "transpose"
grid = 16
block = "32x32"
seed = 3

[buffers]
in = "float[16*32*32]"
out = "float[16*32*32]"
"""


def transpose_case(tmp: Path, extra_top: str = "", extra_body: str = "") -> Path:
    src = tmp / "transpose.cu"
    src.write_text(TRANSPOSE.format(extra_top=extra_top, extra_body=extra_body))
    (tmp / "case.toml").write_text(CASE)
    return src


@needs_nvcc
def test_transpose_tile_gets_one_word_of_padding(tmp_path: Path) -> None:
    """Lane tx of warp ty reads word 32 tx + ty: one bank, 32 words, 32 wavefronts for 1 ideal;
    32 warps per CTA, 8 CTAs traced: 8192 wavefronts, 256 ideal. With rows of 33 words lane tx
    reads bank (tx + ty) % 32: conflict free (the row-major store stays conflict free too)."""
    src = transpose_case(tmp_path)
    fs = findings(src, "transpose")
    assert [(x.line, x.rule) for x in fs] == [(10, "GA201")]
    f = fs[0]
    ev = {e.metric: e.value for e in f.evidence}
    assert (ev["wavefronts"], ev["ideal_wavefronts"], ev["worst_ways"]) == (8192, 256, 32.0)
    # on the launch model (16 CTAs, 8 traced: scale 2), the excess wavefronts leave the
    # L1/shared data-path term (and the conflicts' cycles the shared load's latency on the
    # critical path); the memory and issue terms stay. 16 CTAs of one round are a launch of
    # about 3.4 us, 2.8 of it the launch floor: about 1.0x (issue 29)
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound"
    assert "execution model of the launch" in est.method
    i = est.inputs
    assert i["excess_wavefronts"] == (8192 - 256) * 2 and i["scale"] == 2
    assert i["after_l1_us"] < i["before_l1_us"]
    for t in ("l2", "dram", "issue", "latency"):
        assert i[f"after_{t}_us"] == i[f"before_{t}_us"], t
    assert i["after_dependency_us"] < i["before_dependency_us"]
    assert i["bound_by_before"] == "launch"
    assert est.speedup >= i["point_speedup"] >= 1.0
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified" and v.diff
    assert "+ 1]" in v.diff and "tile[N][N + 1]" in v.diff
    new = tmp_path / "patched"
    new.mkdir()
    (new / "case.toml").write_text(CASE)
    patched = new / "transpose.cu"
    patched.write_text(apply_unified_diff(src.read_text(), v.diff))
    assert bank_line(patched, "transpose", 10) == (256, 256)
    assert bank_line(patched, "transpose", 7) == (256, 256)
    want, got = outputs(src, "transpose"), outputs(patched, "transpose")
    assert want["out"].tobytes() == got["out"].tobytes()
    # and both transpose: out[b][y][x] = in[b][x][y] for the 4 CTAs run
    from gpuadvise.runner.data import make_host_buffer

    data = make_host_buffer(np.dtype(np.float32), 16 * 1024, "random", 3, "in")
    np.testing.assert_array_equal(
        got["out"][: 4 * 1024].reshape(4, 32, 32),
        data[: 4 * 1024].reshape(4, 32, 32).transpose(0, 2, 1),
    )


@needs_nvcc
@pytest.mark.parametrize(
    "top, body, why",
    [
        ("", "    float* p = &tile[ty][0];\n    p[tx] += 0.0f;\n    __syncthreads();",
         "takes the address of an element of tile"),
        ("", "    float* row = tile[ty];\n    (void)row;", "uses tile with 1 subscript"),
        ("", "    if (tx == 0 && ty == 0 && sizeof(tile) != 4096) return;",
         "uses tile without a subscript"),
        ("#define ROW(r) tile[r]", "    (void)ROW(ty);", "uses tile with 1 subscript"),
    ],
    ids=["address-of", "row-pointer", "sizeof", "macro"],
)  # fmt: skip
def test_unsafe_uses_refuse_the_padding(tmp_path: Path, top: str, body: str, why: str) -> None:
    src = transpose_case(tmp_path, top, body)
    f = next(x for x in findings(src, "transpose") if x.rule == "GA201")
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "is not provably safe" in v.description and why in v.description, v.description


# ---------------------------------------------------------------------------------------------
# The source helpers, without a compiler


def kernel_source(tmp: Path, text: str, kernel: str) -> rule_api.KernelSource:
    p = tmp / "k.cu"
    p.write_text(textwrap.dedent(text))
    ks = srctext.find_kernel_source(p, kernel)
    assert ks is not None
    return ks


def test_array_declarations(tmp_path: Path) -> None:
    mod = ga201_module()
    ks = kernel_source(
        tmp_path,
        """\
        #define T 16
        __shared__ float g[T][T + 1];
        __global__ void k(float* o) {
            __shared__ int a[T][2 * T], b[T], c[T][T] ;
            __shared__ float d[4][4] = {};
            o[0] = a[1][2] + b[0] + c[0][0] + g[0][0] + d[0][0];
        }
        """,
        "k",
    )
    a, why = mod.find_array_decl(ks, "a")
    assert a is not None and (a.rows, a.cols, a.file_scope) == (16, 32, False)
    assert ks.text[a.inner[0] : a.inner[1]] == "2 * T"
    c, _ = mod.find_array_decl(ks, "c")
    assert c is not None and (c.rows, c.cols) == (16, 16)
    g, _ = mod.find_array_decl(ks, "g")
    assert g is not None and (g.rows, g.cols, g.file_scope) == (16, 17, True)
    b, why = mod.find_array_decl(ks, "b")  # a 1D array: its index is padded (1D, 16 long)
    assert b is not None and (b.ndim, b.rows, b.cols) == (1, 1, 16)
    assert mod.unsafe_use(ks, b) is None
    d, why = mod.find_array_decl(ks, "d")
    assert d is None and "initializer" in why
    assert mod.find_array_decl(ks, "zz")[0] is None
    assert mod.unsafe_use(ks, a) is None and mod.unsafe_use(ks, c) is None


def test_file_scope_array_checked_in_the_whole_file(tmp_path: Path) -> None:
    mod = ga201_module()
    ks = kernel_source(
        tmp_path,
        """\
        __shared__ float g[8][8];
        __device__ float* leak() { return &g[0][0]; }
        __global__ void k(float* o) { o[0] = g[1][2]; }
        """,
        "k",
    )
    g, _ = mod.find_array_decl(ks, "g")
    assert g is not None and g.file_scope
    assert "line 2 takes the address" in (mod.unsafe_use(ks, g) or "")


def test_remap_moves_rows_and_the_variables_after() -> None:
    """A column read of a 32x32 float array at 0x400 (lane l reads word 32 l): 32 wavefronts.
    Padded by 1, lane l reads word 33 l (banks l): 1 wavefront. The array after it moves from
    0x1400 to 0x1480 (32 rows x 4 bytes later)."""
    from gpuadvise.model.banks import wavefronts
    from gpuadvise.trace.access import Kind, Space, empty_records

    mod = ga201_module()
    layout = mod.Layout(
        (mod.SharedVar("t", 0x400, 4096, 4), mod.SharedVar("u", 0x1400, 64, 4)), 0x1440, 16
    )
    recs = empty_records(2)
    recs["mask"] = 0xFFFFFFFF
    recs["width"] = 4
    recs["space"] = int(Space.SHARED)
    recs["kind"] = int(Kind.LOAD)
    lanes = np.arange(32, dtype=np.uint64)
    recs["addr"][0] = 0x400 + lanes * 128
    recs["addr"][1] = 0x1400 + lanes * 4 % 64
    assert mod.cost(recs[:1]) == (32, 1)
    pad = mod.Padded(layout.vars[0], 32, 4, 1)
    out = mod.remap(recs, layout, [pad])
    np.testing.assert_array_equal(out["addr"][0], 0x400 + lanes * 132)
    np.testing.assert_array_equal(out["addr"][1], 0x1480 + lanes * 4 % 64)
    assert mod.cost(out[:1]) == (1, 1)
    assert wavefronts(out["addr"][0]) == 1
