"""From a raw recording to the folder of cases, and the cases analyzed: the recording is made by
the real recorder on a fake process (fakecuda.py) around the module nvcc builds with -lineinfo,
as a program built that way loads it; the findings on a recorded case equal those on a
hand-written spec of the same launch with the same data."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from clikit import cli
from fakecuda import FakeCuda, f32, i32, ptr

from gpuadvise.record.agent import DOMAIN_DRIVER, DOMAIN_RESOURCE, DOMAIN_RUNTIME, Recorder
from gpuadvise.record.cases import write_cases
from gpuadvise.record.raw import KernelTiming, RawWriter
from gpuadvise.record.sampling import SnapshotPolicy

DATA = Path(__file__).with_name("data")

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

ENTER, EXIT = 0, 1
N = 1024
SAXPY, GATHER, SCALED, ADD_ONE = (
    "_Z5saxpyPKfPfif",
    "_Z6gatherILi32EEvPKfPfi",
    "_Z6scaledPKfPf6Paramsi",
    "add_one",
)


@pytest.fixture(scope="module")
def recording(tmp_path_factory, saxpy_cubin):
    out = tmp_path_factory.mktemp("rec")
    cuda = FakeCuda()
    rec = Recorder(
        cuda, RawWriter(out / "raw" / "4242", ["./app", "--n", "1024"]), SnapshotPolicy(2, 1 << 24)
    )
    rec.on_callback(DOMAIN_RESOURCE, 6, cuda.module_loaded(1, saxpy_cubin.read_bytes()))
    rng = np.random.default_rng(7)
    xs = rng.standard_normal(N).astype(np.float32)
    x = cuda.alloc(xs.tobytes())
    y = cuda.alloc(np.arange(N + 4, dtype=np.float32).tobytes())
    cuda.functions[0xF1] = [(0, 8), (8, 8), (16, 4), (20, 4)]
    cuda.functions[0xF3] = [(0, 8), (8, 8), (16, 8), (24, 4)]
    cuda.functions[0xF4] = [(0, 8), (8, 4)]

    def driver(cbid, func, symbol, grid, values, corr):
        p = cuda.cu_launch_kernel(func, grid, (256, 1, 1), 0, 0x51, values)
        for site in (ENTER, EXIT):
            rec.on_callback(DOMAIN_DRIVER, cbid, cuda.callback(site, p, symbol, corr))

    for corr in (1, 2, 3):  # y points 16 bytes into its allocation (a view y[4:])
        driver(307, 0xF1, SAXPY, (4, 1, 1), [ptr(x), ptr(y + 16), i32(N), f32(2.0)], corr)
    p = cuda.cuda_launch_kernel(0x401000, (4, 1, 1), (256, 1, 1), 0, 0, [ptr(x), ptr(y), i32(N)])
    for site in (ENTER, EXIT):
        rec.on_callback(DOMAIN_RUNTIME, 211, cuda.callback(site, p, GATHER, 4))
    driver(307, 0xF3, SCALED, (4, 1, 1), [ptr(x), ptr(y), f32(1.5) + i32(3), i32(N)], 5)
    p = cuda.cu_launch_kernel_ex(0xF4, (4, 1, 1), (256, 1, 1), 0, 0, [ptr(y), i32(N)])
    for site in (ENTER, EXIT):
        rec.on_callback(DOMAIN_DRIVER, 652, cuda.callback(site, p, ADD_ONE, 6))
    rec.on_activity(
        [
            KernelTiming(SAXPY, c, 1000 * c, 1000 * c + 700, 7, (4, 1, 1), (256, 1, 1))
            for c in (1, 2, 3)
        ]
        + [KernelTiming(GATHER, 4, 5000, 9000, 0, (4, 1, 1), (256, 1, 1))]
    )
    rec.finish()
    kernels, cases, procs = write_cases(out)
    return out, kernels, cases, xs


def test_one_case_per_kernel_and_shape_with_the_program_data(recording):
    out, kernels, cases, xs = recording
    by_name = {c.name: c for c in cases}
    assert sorted(by_name) == ["add_one", "gather<32>", "saxpy", "scaled"]
    saxpy = by_name["saxpy"]
    assert saxpy.launches == 3 and saxpy.gpu_time_ns == 2100 and saxpy.replayable
    assert saxpy.source == str((DATA / "saxpy.cu").resolve())  # from the cubin's line info
    spec = tomllib.loads((out / saxpy.folder / "case.toml").read_text())
    assert spec["kernel"] == "saxpy" and spec["grid"] == [4, 1, 1] and spec["block"] == [256, 1, 1]
    assert spec["args"] == {"n": N, "a": 2.0}
    assert spec["buffers"] == {"x": "x.npy", "y": "y.npy"}
    assert np.array_equal(np.load(out / saxpy.folder / "x.npy"), xs)
    y = np.load(out / saxpy.folder / "y.npy")  # from the pointer on: y[4:] of the allocation
    assert y.dtype == np.float32 and y[0] == 4.0 and len(y) == N
    assert spec["recorded"]["launches"] == 3 and spec["recorded"]["api"] == "cuLaunchKernel"
    assert any("16 bytes into its allocation" in n for n in saxpy.notes)
    # kernels ranked by GPU time: gather (4 us) before saxpy (2.1 us)
    assert [k.name for k in kernels[:2]] == ["gather<32>", "saxpy"]


def test_runtime_template_and_extern_c_cases(recording):
    out, _, cases, _ = recording
    by_name = {c.name: c for c in cases}
    gather = tomllib.loads((out / by_name["gather<32>"].folder / "case.toml").read_text())
    assert gather["kernel"] == "gather<32>" and gather["args"] == {"n": N}
    assert gather["recorded"]["parameter_layout"] == "cubin"
    add_one = tomllib.loads((out / by_name["add_one"].folder / "case.toml").read_text())
    assert add_one["kernel"] == "add_one" and add_one["buffers"] == {"a": "a.npy"}


def test_struct_by_value_is_replayed_from_its_bytes(recording):
    out, _, cases, xs = recording
    scaled = next(c for c in cases if c.name == "scaled")
    assert scaled.replayable
    spec = tomllib.loads((out / scaled.folder / "case.toml").read_text())
    assert spec["args"] == {"p": {"bytes": (f32(1.5) + i32(3)).hex()}, "n": N}
    launch = json.loads((out / scaled.folder / "launch.json").read_text())
    p = next(q for q in launch["params"] if q["name"] == "p")
    assert p["kind"] == "bytes" and p["type"] == "Params"
    # the emulator runs it with those bytes: y = 1.5 x + 3
    from gpuadvise.analyze.models import resolve_launch
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel
    from gpuadvise.trace.emulate import emulate

    kspec, choice, options = build(
        KernelOptions(source=None, spec=str(out / scaled.folder / "case.toml"))
    )
    tc = find_toolchain()
    module = compile_source(kspec.source, options, tc, kernels=[kspec.kernel])
    kernel = select_compiled_kernel(module, kspec.kernel)
    launch_ = resolve_launch(kspec, kernel, options, tc)
    (arg,) = [a for a in launch_.params if a.name == "p"]
    assert arg.value == f32(1.5) + i32(3) and arg.ctype.align_bytes == 4  # sized by the compiler
    emu = emulate(module, kernel, launch_, choice.device, sample_ctas="all", trace=False)
    assert np.allclose(emu.outputs["y"][:N], 1.5 * xs + 3, rtol=1e-6, atol=1e-6)  # fp32 fma


def _findings(capsys, *args):
    code, out, err = cli(capsys, "analyze", *args, "--gpu", "H100", "--no-measure", "--json")
    assert code == 0, err
    doc = json.loads(out)
    return sorted((f["rule"], f["line"]) for f in doc["findings"]), doc


def test_recorded_case_analyzes_as_the_hand_written_spec(recording, tmp_path, capsys):
    out, _, cases, xs = recording
    gather = next(c for c in cases if c.name == "gather<32>")
    recorded, doc = _findings(capsys, "--spec", str(out / gather.folder / "case.toml"))
    np.save(tmp_path / "in.npy", xs)
    np.save(tmp_path / "out.npy", np.arange(N + 4, dtype=np.float32))
    (tmp_path / "hand.toml").write_text(
        f'source = "{DATA / "saxpy.cu"}"\nkernel = "gather<32>"\ngrid = 4\nblock = 256\n'
        f'[args]\nn = {N}\n[buffers]\nin = "in.npy"\nout = "out.npy"\n'
    )
    hand, _ = _findings(capsys, "--spec", str(tmp_path / "hand.toml"))
    assert recorded == hand and ("GA301", 16) in recorded  # the strided gather, uncoalesced
    assert doc["kernel"]["grid"] == [4, 1, 1]


def test_folder_analysis_takes_the_replayable_cases(recording, capsys):
    out, _, cases, _ = recording
    code, stdout, err = cli(capsys, "analyze", str(out), "--gpu", "H100", "--no-measure",
                            "--format", "json")  # fmt: skip
    assert code == 0, err
    doc = json.loads(stdout)
    assert len(doc["cases"]) == sum(c.replayable for c in cases) == 4
    assert all(c["error"] is None for c in doc["cases"])
    # the console says which kernel times the program's run measured (CUPTI's activity)
    code, stdout, err = cli(capsys, "analyze", str(out), "--gpu", "H100", "--no-measure")
    assert code == 0, err
    rows = {line.split()[2]: line for line in stdout.splitlines() if line[:1].isdigit()}
    assert "(rec.)" in rows["saxpy"] and "(rec.)" not in rows["add_one"], stdout
    assert "(rec.): the kernel time is the program's GPU time in it" in stdout


def test_folder_ranking_weighs_recorded_cases_by_the_program_time(recording, monkeypatch):
    from gpuadvise.analyze.batch import rank_case
    from gpuadvise.analyze.cases import discover_cases
    from gpuadvise.analyze.options import KernelOptions

    out, _, cases, _ = recording
    found = {c.options.kernel: c for c in discover_cases([str(out)], KernelOptions(source=None))}
    assert found["saxpy"].recorded_ms == pytest.approx(0.0021)
    assert found["gather<32>"].recorded_ms == pytest.approx(0.004)
    assert found["add_one"].recorded_ms is None  # no activity record: the launch's own estimate

    class Done:  # one finding estimated at 2x
        class rules:
            findings = [
                type("F", (), {"measured_speedup": None, "is_error": False, "rule": "GA301",
                               "line": 16, "estimated_speedup": type("E", (), {"speedup": 2.0})})
            ]  # fmt: skip

        analysis = None

    monkeypatch.setattr("gpuadvise.analyze.batch.estimated_kernel_ms", lambda a: 0.0005)
    r = rank_case(found["gather<32>"], Done, 0.0)
    assert r.kernel_ms == pytest.approx(0.004) and r.time_to_win_ms == pytest.approx(0.002)
    assert r.kernel_basis == "recorded"  # measured by the program's run, not a lower bound
    r = rank_case(found["add_one"], Done, 0.0)  # not timed: the launch's own estimate
    assert r.kernel_ms == pytest.approx(0.0005) and r.kernel_basis == "estimated"


def test_cupy_kernel_source_found_in_its_kernel_cache(tmp_path):
    """A CuPy RawKernel's source lives in the program as a string; CuPy's kernel cache, which the
    recorder moves into the recording with CUPY_CACHE_SAVE_CUDA_SOURCE, keeps it beside the
    cubin (after a 32-byte hash, as CuPy writes it): the case points at that source."""
    import shutil
    import subprocess

    from gpuadvise.record.launcher import CUPY_CACHE
    from gpuadvise.toolchain import find_toolchain

    code = (
        'extern "C" __global__ void twice(float* a, int n) {\n'
        "  int i = threadIdx.x;\n  if (i < n) a[i] *= 2.0f;\n}\n"
    )
    (tmp_path / "kern.cu").write_text(code)
    cubin = tmp_path / "kern.cubin"
    subprocess.run([str(find_toolchain().nvcc), "-cubin", "-arch=sm_90", "-o", str(cubin),
                    str(tmp_path / "kern.cu")], check=True, capture_output=True)  # fmt: skip
    (tmp_path / "kern.cu").unlink()  # NVRTC's file is gone after the compile
    out = tmp_path / "rec"
    cache = out / "raw" / CUPY_CACHE
    cache.mkdir(parents=True)
    (cache / "9f3a.cubin").write_bytes(b"0" * 32 + cubin.read_bytes())
    (cache / "9f3a.cubin.cu").write_text(code)
    cuda = FakeCuda()
    rec = Recorder(cuda, RawWriter(out / "raw" / "7", ["python", "app.py"]), SnapshotPolicy())
    rec.on_callback(DOMAIN_RESOURCE, 6, cuda.module_loaded(1, cubin.read_bytes()))
    a = cuda.alloc(f32(*range(32)))
    cuda.functions[0xF5] = [(0, 8), (8, 4)]
    p = cuda.cu_launch_kernel(0xF5, (1, 1, 1), (32, 1, 1), 0, 0, [ptr(a), i32(32)])
    rec.on_callback(DOMAIN_DRIVER, 307, cuda.callback(ENTER, p, "twice", 1))
    rec.finish()
    _, (case,), _ = write_cases(out)
    assert case.replayable and case.source == str((cache / "9f3a.cubin.cu").resolve())
    spec = tomllib.loads((out / case.folder / "case.toml").read_text())
    assert spec["args"] == {"n": 32} and spec["buffers"] == {"a": "a.npy"}
    # the image the driver got is not the cached file's bytes (CuPy 14 on an H200): the cached
    # source that defines the kernel and whose cubin names it is taken, when it is one text
    cached = bytearray(cubin.read_bytes())
    cached[-64:] = bytes(64)  # the same kernel's cubin, other bytes
    (cache / "9f3a.cubin").write_bytes(b"0" * 32 + bytes(cached))
    (cache / "77b0.cubin").write_bytes(b"1" * 32 + bytes(cached))
    (cache / "77b0.cubin.cu").write_text(code)
    shutil.rmtree(out / "cases")
    _, (case,), _ = write_cases(out)
    assert case.replayable and case.source is not None
    assert Path(case.source).name in ("9f3a.cubin.cu", "77b0.cubin.cu")
    (cache / "77b0.cubin.cu").write_text(code.replace("2.0f", "3.0f"))  # two texts: neither
    shutil.rmtree(out / "cases")
    _, (case,), _ = write_cases(out)
    assert case.replayable and case.source is None  # from its cubin, the notes say so
    assert any("analyzed from its cubin" in n and "--source" in n for n in case.notes)
    (cache / "77b0.cubin.cu").unlink()
    (cache / "77b0.cubin").unlink()
    # a kernel CuPy generates itself (elementwise, reductions) includes CuPy's headers: not a case
    (cache / "9f3a.cubin.cu").write_text("#include <cupy/carray.cuh>\n" + code)
    shutil.rmtree(out / "cases")
    _, (case,), _ = write_cases(out)
    assert not case.replayable and not (out / case.folder / "case.toml").exists()
    assert any("CuPy generated it" in n for n in case.notes)


def test_kernel_filter_on_mangled_or_demangled_names(recording, tmp_path):
    import shutil

    out, _, _, _ = recording
    copy = tmp_path / "rec"
    shutil.copytree(out / "raw", copy / "raw")
    _, cases, _ = write_cases(copy, kernel_filter=r"gather<32>|^add_")
    assert sorted(c.name for c in cases) == ["add_one", "gather<32>"]
    shutil.copytree(out / "raw", tmp_path / "rec2" / "raw")
    _, cases, _ = write_cases(tmp_path / "rec2", kernel_filter=r"PKfPfif$")  # the mangled name
    assert [c.name for c in cases] == ["saxpy"]
