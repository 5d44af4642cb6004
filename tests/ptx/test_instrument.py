"""The GPU tracer without a GPU: the PTX rewriter (gpuadvise/ptx/instrument.py), the record
conversion (gpuadvise/gputrace.py) and the tracer's worker logic (gpuadvise/runner/trace_job.py).

- every kernel of kernels/*/*.cu, tests/cuda/emu/*.cu and the benchmarks' kernels is rewritten,
  probes exactly the memory instructions the emulator lists, and ptxas -arch=sm_90 accepts it;
- the rewritten PTX, run in the CPU emulator (which executes activemask, vote, shfl, atom and
  isspacep as the GPU does, and checks every access against the trace buffer's bounds), writes
  the records the emulator traces for the original kernel: same instructions, same multiset of
  (inst, cta, warp, mask, addresses), for predicated, divergent, shared, local, constant, generic,
  cp.async and atomic accesses, with the CTA filter, and with a full buffer (no write past it);
- device addresses map back to the emulator's convention (synthetic records).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuadvise.devices import preset
from gpuadvise.errors import ToolchainError, UsageError
from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.emulator import KernelImage, space_of, static_accesses
from gpuadvise.ptx.instrument import (
    DEVICE_RECORD,
    HEADER_BYTES,
    RECORD_BYTES,
    TABLE_OFFSET,
    InstrumentError,
    assemble,
    instrument_ptx,
    make_header,
    ptxas_options,
)
from gpuadvise.ptx.memory import GLOBAL_BASE, GLOBAL_STRIDE_BITS
from gpuadvise.ptx.parser import parse_ptx, parse_ptx_cached
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
from gpuadvise.toolchain import CompiledModule, CompileOptions, compile_source, find_toolchain
from gpuadvise.trace.access import Space
from gpuadvise.trace.emulate import emulate, emulate_ptx
from gpuadvise.trace.gpu import (
    GpuTraceError,
    address_map,
    compare_traces,
    emulator_buffers,
    records_to_trace,
    select_tracer,
    trace_on_gpu,
)

pytestmark = pytest.mark.usefixtures("sass_read_whole")  # the emulated cubins read whole

ROOT = Path(__file__).resolve().parents[2]
EMU = ROOT / "tests" / "cuda" / "emu"
BASIC = EMU / "basic.cu"
MORE = EMU / "more.cu"
SOURCES = sorted(ROOT.glob("kernels/*/*.cu")) + sorted(EMU.glob("*.cu"))
SOURCES += [
    ROOT / "benchmarks" / "trace_validation" / "micro.cu",
    ROOT / "benchmarks" / "gputrace_kernels.cu",
]


def _have_nvcc() -> bool:
    try:
        find_toolchain()
        return True
    except ToolchainError:
        return False


needs_toolkit = [
    pytest.mark.toolkit,
    pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found"),
]


@pytest.fixture(scope="module")
def cache(compile_cache: Path) -> Path:
    """The run's compile cache: these kernels compile with the flags the analyses give them
    (``-arch=sm_90``), so the golden test's compiles of kernels/ serve them, and theirs it."""
    return compile_cache


_MODULES: dict[Path, CompiledModule] = {}


def module_of(src: Path, cache: Path) -> CompiledModule:
    if src not in _MODULES:
        _MODULES[src] = compile_source(src, CompileOptions(arch="sm_90", cache_dir=cache))
    return _MODULES[src]


# ---------------------------------------------------------------------------------------------
# Every kernel of the suite: coverage and ptxas


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_every_kernel_is_rewritten_and_assembles(src: Path, cache: Path, tmp_path: Path) -> None:
    module = module_of(src, cache)
    ptxas = find_toolchain().ptxas
    parsed = parse_ptx_cached(module.ptx)  # the parse instrument_ptx reads
    failures: list[str] = []
    for entry in parsed.entries():
        inst = instrument_ptx(module.ptx, entry)
        program = build_program(parsed, entry)
        declared = {(i, int(sp)) for i, sp, _, _ in static_accesses(program)}
        generic = {
            i
            for i, ins in enumerate(program.instrs)
            if ins.base in ("ld", "ldu", "st", "atom", "red") and space_of(ins) == "generic"
        }
        assert {s.key for s in inst.sites if not s.generic} == declared, entry
        assert {s.index for s in inst.sites if s.generic} == generic, entry
        for i in generic:  # one site per space a generic access may reach
            spaces = {s.space for s in inst.sites if s.index == i}
            assert spaces == {Space.GLOBAL, Space.SHARED, Space.LOCAL, Space.CONST}
        assert [s.site for s in inst.sites] == list(range(len(inst.sites)))
        probes = len({s.index for s in inst.sites})
        assert inst.ptx.count("// gpuadvise GPU tracer: ") == probes + 2  # + prologue, its end
        assert parse_ptx(inst.ptx).entries() == [entry]  # other kernels dropped
        try:
            assemble(inst.ptx, "sm_90", ptxas, out=tmp_path / f"k{len(failures)}.cubin")
        except ToolchainError as exc:
            failures.append(f"{entry}: {exc.message}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------------------------
# The rewritten kernels, run in the CPU emulator, against the emulator's trace


def _launch(src: Path, kernel: str, grid: Any, block: Any, buffers: list[str], **kw: Any) -> Any:
    spec = build_kernel_spec(
        src,
        kernel,
        grid=grid,
        block=block,
        dynamic_smem=kw.get("smem", 0),
        args=list(kw.get("args", ())),
        buffers=buffers,
        discover=False,
    )
    return resolve(spec, parse_signature(src.read_text(), kernel))


def _vec_add_40(cache: Path) -> tuple[CompiledModule, Any, Any]:
    """BASIC's vec_add compiled, and a launch of 40 CTAs of 64 threads over 40 x 64 floats."""
    module = module_of(BASIC, cache)
    n = 64 * 40
    launch = _launch(
        BASIC, "vec_add", 40, 64, [f"a=float[{n}]", f"b=float[{n}]", f"c=float[{n}]"],
        args=[f"n={n}"],
    )  # fmt: skip
    return module, module.kernel("vec_add"), launch


CASES: dict[str, tuple[Any, ...]] = {
    # name: (source, kernel, grid, block, buffers, args, dynamic smem, sample)
    "vec_add guard": (BASIC, "vec_add", 4, 64, ["a=float[250]", "b=float[250]", "c=float[250]"],
                      ["n=250"], 0, 2),
    "half_store divergent": (BASIC, "half_store", 4, 64, ["in=float[256]", "out=float[256]"],
                             [], 0, 3),
    "reduce_smem": (BASIC, "reduce_smem", 4, 256, ["in=int[1024]", "out=int[4]"], [], 0, 2),
    "histogram shared atomics": (BASIC, "histogram", 4, 128,
                                 ["in=int[512]", "hist=int[64]:zeros"], ["n=500"], 0, 4),
    "reconverge": (BASIC, "reconverge", 3, 256, ["in=int[768]", "out=int[768]"], [], 0, 2),
    "early_exit": (BASIC, "early_exit", 1, 128, ["in=int[128]", "out=int[128]"], [], 0, 1),
    "dyn_smem": (BASIC, "dyn_smem", 3, 128, ["in=float[384]", "out=float[384]"], [], 512, 2),
    "block2d": (BASIC, "block2d", "2x2", "16x8", ["in=float[32*16]", "out=float[32*16]"],
                ["w=32"], 0, 3),
    "local_array": (MORE, "local_array", 1, 64, ["in=int[1024]", "out=int[64]"], ["k=5"], 0, 1),
    "vec4 const and device vars": (MORE, "vec4", 2, 64, ["in=float4[128]", "out=float4[128]"],
                                   ["s=2.0"], 0, 2),
    "generic to shared": (MORE, "generic", 1, 64, ["a=float[64]"], ["sel=1"], 0, 1),
    "generic to global": (MORE, "generic", 1, 64, ["a=float[64]"], ["sel=0"], 0, 1),
    "cp.async": (MORE, "async_copy", 2, 64, ["in=float[512]", "out=float[128]"], [], 0, 2),
    "global atomics": (MORE, "atomics", 2, 64,
                       ["c=int[16]:zeros", "inc=unsigned[1]:zeros", "cnt=int[1]:zeros"], [], 0, 1),
    "nested loops": (MORE, "nested", 1, 64, ["in=int[64]", "out=int[64]"], [], 0, 1),
    "switch (brx.idx)": (MORE, "switchy", 1, 64, ["in=int[64]", "out=int[64]"], [], 0, 1),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_instrumented_kernel_traces_what_the_emulator_traces(name: str, cache: Path) -> None:
    src, kernel, grid, block, buffers, args, smem, sample = CASES[name]
    module = module_of(src, cache)
    info = module.kernel(kernel)
    launch = _launch(src, kernel, grid, block, buffers, args=args, smem=smem)
    ref = emulate(module, info, launch, preset("H100"), sample_ctas=sample)
    got = trace_on_gpu(
        module, info, launch, preset("H100"), sample_ctas=sample, emulate_device=True,
        timing_samples=1,
    )  # fmt: skip
    diff = compare_traces(ref.trace, got.trace)
    assert diff.identical, diff.first_difference
    assert len(ref.trace.records) > 0
    assert got.trace.source == "gpu" and got.trace.ctas == ref.trace.ctas
    assert got.trace.buffers == ref.trace.buffers
    assert got.outputs_match and got.records_lost == 0
    full = emulate(module, info, launch, preset("H100"), sample_ctas="all", trace=False)
    for buf, arr in full.outputs.items():  # the instrumented run computed what the kernel does
        assert np.array_equal(arr.view(np.uint8), got.outputs[buf].view(np.uint8)), buf


@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_full_buffer_counts_lost_records_and_retries(cache: Path) -> None:
    module = module_of(BASIC, cache)
    info = module.kernel("vec_add")
    launch = _launch(
        BASIC, "vec_add", 4, 64, ["a=float[250]", "b=float[250]", "c=float[250]"], args=["n=250"]
    )
    ref = emulate(module, info, launch, preset("H100"), sample_ctas="all")
    n = len(ref.trace.records)
    # no room for a second attempt: 5 records kept, the rest counted as lost, nothing written past
    # the buffer (the emulator would stop at an out-of-bounds store)
    small = trace_on_gpu(
        module, info, launch, preset("H100"), sample_ctas="all", emulate_device=True,
        capacity=5, max_trace_bytes=HEADER_BYTES + 5 * RECORD_BYTES, timing_samples=0,
    )  # fmt: skip
    assert len(small.trace.records) == 5
    assert small.records_lost == n - 5
    assert any("lost" in note for note in small.notes)
    # room enough: it runs again with the size the counter reported
    retried = trace_on_gpu(
        module, info, launch, preset("H100"), sample_ctas="all", emulate_device=True,
        capacity=5, timing_samples=0,
    )  # fmt: skip
    assert retried.attempts == 2 and retried.records_lost == 0
    assert compare_traces(ref.trace, retried.trace).identical


@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_the_default_sample_is_cut_to_the_trace_budget(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU traces the whole first wave; the default sample keeps the first CTAs whose records
    fit DEFAULT_SAMPLE_TRACE_BYTES, as the emulator's does (same records, same note)."""
    from gpuadvise.trace import emulate as emulate_mod
    from gpuadvise.trace.access import RECORD

    module, info, launch = _vec_add_40(cache)
    per_cta = 3 * 2  # two loads and a store per warp, two warps
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 7 * per_cta * RECORD.itemsize)
    got = trace_on_gpu(module, info, launch, preset("H100"), emulate_device=True, timing_samples=0)
    ref = emulate(module, info, launch, preset("H100"), sample_ctas=7)
    assert got.trace.ctas == tuple(range(7)) and len(got.trace.records) == 7 * per_cta
    assert compare_traces(ref.trace, got.trace).identical
    assert any("traced 7 of the first wave's 40 CTAs" in note for note in got.notes)
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 1)  # one CTA at least
    one = trace_on_gpu(module, info, launch, preset("H100"), emulate_device=True, timing_samples=0)
    assert one.trace.ctas == (0,) and len(one.trace.records) == per_cta


@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_the_default_sample_is_bounded_by_its_cost(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU's default sample keeps the CTAs that DEFAULT_SAMPLE_COST affords at its first
    CTA's warp records, in the runs of consecutive CTAs the emulator keeps (spread_runs): the
    same records as those CTAs emulated, with the cost's note; the whole wave (``wave``) is
    not cut by the cost."""
    from gpuadvise.trace import emulate as emulate_mod

    module, info, launch = _vec_add_40(cache)
    per_cta = 3 * 2  # two loads and a store per warp, two warps
    # 2 CTAs' cost, stretched 4x below MIN_SAMPLE_CTAS: 8 CTAs
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_COST", 2 * per_cta + 1)
    got = trace_on_gpu(module, info, launch, preset("H100"), emulate_device=True, timing_samples=0)
    kept = (0, 1, 2, 3, 20, 21, 22, 23)  # two runs of 4 CTAs: each half's first
    assert got.trace.ctas == kept and len(got.trace.records) == 8 * per_cta
    ref = emulate(module, info, launch, preset("H100"), sample_ctas=list(kept))
    assert compare_traces(ref.trace, got.trace).identical
    assert any("traced 8 of the first wave's 40 CTAs" in note for note in got.notes)
    whole = trace_on_gpu(
        module, info, launch, preset("H100"), "wave", emulate_device=True, timing_samples=0
    )
    assert whole.trace.ctas == tuple(range(40)) and len(whole.trace.records) == 40 * per_cta


@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_a_crashing_kernel_is_reported(cache: Path) -> None:
    module = module_of(BASIC, cache)
    info = module.kernel("oob")
    launch = _launch(BASIC, "oob", 1, 64, ["in=float[64]", "out=float[64]"], args=["n=32"])
    with pytest.raises(GpuTraceError, match="the kernel itself failed"):
        trace_on_gpu(module, info, launch, preset("H100"), emulate_device=True, timing_samples=0)


# ---------------------------------------------------------------------------------------------
# Hand-written PTX: guards, a shadowing block scope, symbols with offsets, negative offsets

HAND = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry other(.param .u64 other_p)
{
	ret;
}

.visible .entry k(
	.param .u64 k_param_0,
	.param .u32 k_param_1
)
.maxntid 64, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<9>;
	.reg .b64 	%rd<6>;
	.shared .align 4 .b8 sm[512];

	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u32 	%r1, [k_param_1];
	cvta.to.global.u64 	%rd2, %rd1;
	mov.u32 	%r2, %tid.x;
	mul.wide.u32 	%rd3, %r2, 4;
	add.s64 	%rd4, %rd2, %rd3;
	setp.lt.u32 	%p1, %r2, %r1;
	mov.u32 	%r3, 7;
	@%p1 ld.global.u32 	%r3, [%rd4+4];
	shl.b32 	%r4, %r2, 2;
	mov.u32 	%r5, sm;
	add.s32 	%r6, %r5, %r4;
	{ .reg .pred %p1; setp.ne.u32 %p1, %r2, 3; @!%p1 st.shared.u32 [%r6], %r3; }
	@!%p1 st.shared.u32 	[%r6+256], %r2;
	bar.sync 	0;
	ld.shared.u32 	%r7, [sm+12];
	ld.shared.u32 	%r8, [%r6+256];
	add.s32 	%r7, %r7, %r8;
	st.global.u32 	[%rd4+-0], %r7;
	@%p1 bra 	$L__done;
	st.global.u32 	[%rd4], %r1;
$L__done:
	ret;
}
"""


def _emulated(ptx: str, entry: str, grid: int, block: int, args: list[Any], count: int) -> Any:
    """(emulator's trace of the original, trace from the instrumented PTX run in the emulator)."""
    ref = emulate_ptx(ptx, entry, grid, block, args, sample_ctas=count)
    inst = instrument_ptx(ptx, entry)
    cap = 4096
    tb = np.zeros(HEADER_BYTES + cap * RECORD_BYTES, np.uint8)
    tb[:HEADER_BYTES] = make_header(cap, 0, count).view(np.uint8)
    run = emulate_ptx(inst.ptx, entry, grid, block, [*args, tb], sample_ctas="all", trace=False)
    out = run.outputs[f"arg{len(args)}"]
    header = out[:HEADER_BYTES].view(np.uint64)
    raw = out[HEADER_BYTES : HEADER_BYTES + int(header[0]) * RECORD_BYTES].view(DEVICE_RECORD)
    image = KernelImage.build(parse_ptx(ptx), entry, "sm_90", 0)
    bufs = [
        (f"arg{i}", GLOBAL_BASE + (j << GLOBAL_STRIDE_BITS), a.nbytes)
        for j, (i, a) in enumerate((i, a) for i, a in enumerate(args) if isinstance(a, np.ndarray))
    ]
    first = TABLE_OFFSET // 8
    amap, _ = address_map(inst, image, bufs, [int(v) for v in header[first:]])
    trace, _ = records_to_trace(
        raw, inst, image.program, {}, amap, tuple(range(count)), ref.trace.total_ctas,
        ref.trace.grid, ref.trace.block, emulator_buffers([(b[0], b[2]) for b in bufs], image),
    )  # fmt: skip
    return ref, trace, inst


def test_hand_written_ptx_guards_scopes_and_offsets() -> None:
    data = np.arange(65, dtype=np.uint32)
    ref, trace, inst = _emulated(HAND, "k", 2, 64, [data, np.uint32(40)], count=2)
    diff = compare_traces(ref.trace, trace)
    assert diff.identical, diff.first_difference
    recs = ref.trace.records
    # the guarded load: lanes 0..39 only; the block-scoped @!%p1 store: lane 3 only
    masks = sorted({int(m) for m in recs["mask"]})
    assert (1 << 32) - 1 in masks and (1 << 3) in masks and (1 << 40) - 1 & 0xFFFFFFFF in masks
    assert 0xFF in masks  # lanes 32..39 of warp 1
    assert inst.table[0].name == "sm"
    assert "other" not in parse_ptx(inst.ptx).entries()


@pytest.mark.toolkit
@pytest.mark.skipif(not _have_nvcc(), reason="no CUDA toolchain (nvcc) found")
def test_hand_written_ptx_assembles(tmp_path: Path) -> None:
    inst = instrument_ptx(HAND, "k")
    assemble(inst.ptx, "sm_90", find_toolchain().ptxas, out=tmp_path / "k.cubin")
    assert (tmp_path / "k.cubin").stat().st_size > 0


def test_instrument_errors() -> None:
    with pytest.raises(InstrumentError, match="no kernel entry"):
        instrument_ptx(HAND, "missing")
    noinline = HAND.replace(
        "\tret;\n}\n\n.visible .entry k(",
        "\tret;\n}\n\n.func load_it(.param .b64 p)\n{\n\t.reg .b64 %a<2>;\n\t.reg .b32 %v<2>;\n"
        "\tld.param.u64 %a1, [p];\n\tld.global.u32 %v1, [%a1];\n\tret;\n}\n\n.visible .entry k(",
    ).replace(
        "\t@%p1 bra \t$L__done;",
        "\t{ .param .b64 q; st.param.b64 [q], %rd4; call.uni load_it, (q); }\n"
        "\t@%p1 bra \t$L__done;",
    )
    assert "call.uni" in noinline
    with pytest.raises(InstrumentError, match="inlining"):
        instrument_ptx(noinline, "k")
    with pytest.raises(InstrumentError, match="instrumented twice"):
        instrument_ptx(instrument_ptx(HAND, "k").ptx, "k")


# ---------------------------------------------------------------------------------------------
# Address translation with real (non-emulator) device addresses


def test_device_addresses_map_to_the_emulator_convention() -> None:
    ptx = HAND.replace(
        ".shared .align 4 .b8 sm[512];",
        ".shared .align 4 .b8 sm[512];\n"
        "\t.local .align 8 .b8 __local_depot0[32];\n\t.reg .b64 %SP;",
    )
    ptx = ptx.replace("\tbar.sync \t0;", "\tmov.u64 %SP, __local_depot0;\n"
                      "\tst.local.u32 [%SP+8], %r2;\n\tbar.sync \t0;")  # fmt: skip
    inst = instrument_ptx(ptx, "k")
    image = KernelImage.build(parse_ptx(ptx), "k", "sm_90", 0)
    names = [t.name for t in inst.table]
    assert names == ["sm", "__local_depot0"] or set(names) == {"sm", "__local_depot0"}
    dev_buf, dev_local, dev_shared = 0x7F12_3400_0000, 0xFFF_F000, 0x410
    values = {"sm": dev_shared, "__local_depot0": dev_local}
    amap, notes = address_map(
        inst, image, [("out", dev_buf, 65 * 4)], [values[t.name] for t in inst.table]
    )
    assert any("shared variable sm" in n for n in notes)  # the GPU put sm at 0x410, not 0x400
    by_space = {s.space: s for s in inst.sites if not s.generic}
    raw = np.zeros(3, DEVICE_RECORD)
    raw["site"] = [
        by_space[Space.GLOBAL].site,
        by_space[Space.LOCAL].site,
        by_space[Space.SHARED].site,
    ]
    raw["mask"] = [0b101, 0b1, 0b11]
    raw["addr"][0, 0] = dev_buf + 12
    raw["addr"][0, 1] = 0xDEAD  # off the mask: cleared
    raw["addr"][0, 2] = 0x1234  # in no buffer: kept, noted
    raw["addr"][1, 0] = dev_local + 8
    raw["addr"][2, :2] = [0x410, 0x414]
    trace, conv = records_to_trace(
        raw, inst, image.program, {}, amap, (0,), 1, (1, 1, 1), (64, 1, 1),
        emulator_buffers([("out", 65 * 4)], image),
    )  # fmt: skip
    a = trace.records["addr"]
    assert int(a[0, 0]) == GLOBAL_BASE + 12 and int(a[0, 1]) == 0 and int(a[0, 2]) == 0x1234
    assert int(a[1, 0]) == image.local_offsets["__local_depot0"] + 8
    assert [int(x) for x in a[2, :2]] == [0x410, 0x414]  # shared: the GPU's own offsets
    assert any("outside every known buffer" in n for n in conv)
    assert trace.buffers["out"] == (GLOBAL_BASE, 260)
    assert [trace.instructions[i].space for i in trace.records["inst"]] == [
        Space.GLOBAL,
        Space.LOCAL,
        Space.SHARED,
    ]


def test_unknown_site_is_an_error() -> None:
    inst = instrument_ptx(HAND, "k")
    image = KernelImage.build(parse_ptx(HAND), "k", "sm_90", 0)
    raw = np.zeros(1, DEVICE_RECORD)
    raw["site"] = len(inst.sites)
    amap, _ = address_map(inst, image, [], [])
    with pytest.raises(GpuTraceError, match="unknown site"):
        records_to_trace(raw, inst, image.program, {}, amap, (0,), 1, (1, 1, 1), (1, 1, 1), {})


# ---------------------------------------------------------------------------------------------
# Small pieces


def test_select_tracer(monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuadvise.runner.client as client

    monkeypatch.setattr(client, "pycuda_missing", lambda: "no GPU here")
    assert select_tracer("auto") == "emu"
    assert select_tracer(None) == "emu"
    assert select_tracer("emu") == "emu"
    with pytest.raises(UsageError, match="needs a GPU"):
        select_tracer("gpu")
    with pytest.raises(UsageError, match="unknown tracer"):
        select_tracer("cpu")
    monkeypatch.setattr(client, "pycuda_missing", lambda: None)
    assert select_tracer("auto") == "gpu"
    assert select_tracer("GPU") == "gpu"


def test_ptxas_options() -> None:
    flags = ("-arch=sm_90", "-lineinfo", "-Xptxas", "-v", "-Xptxas", "-O2,-v", "-maxrregcount=64")
    assert ptxas_options(flags) == ["-O2", "-maxrregcount=64"]


def test_header_layout() -> None:
    h = make_header(100, 3, 7)
    assert h.nbytes == HEADER_BYTES and list(h[:4]) == [0, 100, 3, 7]
    assert RECORD_BYTES == 272 and DEVICE_RECORD.itemsize == 272


def test_worker_failure_is_reported_not_fatal(tmp_path: Path) -> None:
    from gpuadvise.runner.trace_job import TraceJob, run_trace_in_worker

    job = TraceJob(
        symbol="k",
        original=str(tmp_path / "missing.cubin"),
        instrumented=str(tmp_path / "missing.cubin"),
        grid=(1, 1, 1),
        block=(32, 1, 1),
        dynamic_smem_bytes=0,
        params=(),
        buffers=(),
        records_path=str(tmp_path / "records.bin"),
    )
    run = run_trace_in_worker(job, timeout_s=120)
    assert not run.result.ok and run.result.error


# ---------------------------------------------------------------------------------------------
# On a GPU machine: the real thing (skipped elsewhere)


def _no_gpu() -> str | None:
    from gpuadvise.runner.client import pycuda_missing

    return pycuda_missing()


@pytest.mark.gpu
@pytest.mark.toolkit
@pytest.mark.skipif(_no_gpu() is not None, reason=_no_gpu() or "")
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_trace_matches_the_emulator(name: str, cache: Path) -> None:
    from gpuadvise.devices import live_device

    src, kernel, grid, block, buffers, args, smem, sample = CASES[name]
    live = live_device()
    assert live is not None
    module = compile_source(src, CompileOptions(arch=live.arch, cache_dir=cache))
    info = module.kernel(kernel)
    launch = _launch(src, kernel, grid, block, buffers, args=args, smem=smem)
    ref = emulate(module, info, launch, live, sample_ctas=sample)
    got = trace_on_gpu(module, info, launch, live, sample_ctas=sample)
    diff = compare_traces(ref.trace, got.trace)
    assert got.outputs_match and got.records_lost == 0 and got.slowdown > 0
    if name == "global atomics":  # the atomicCAS loop's trip counts depend on the GPU's timing
        assert diff.same_instructions
        return
    assert diff.identical, diff.first_difference
